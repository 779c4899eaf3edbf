"""What a firing writes once every Job's life has run its course: the simulator, counted.

Run: .venv/bin/python bench/writes_bench.py [--hours H]   (`make bench-writes`)

Why it exists: the ramp (`make bench-ramp`) audits writes inside a window of minutes, in
which most of the window's Jobs have not finished, let alone been deleted: a Job's
finalizer release (one patch when a TTL or history clean-up deletes it) mostly falls
after the window closes, so the ramp's 0.18 releases a firing is a share of a
window, not a steady state. This runs the real runtime on simulated time against the
simulator's model cluster (`tests/sim`: the fake API server, a Job controller whose
Jobs all succeed in about 5 s, the TTL controller), one replica, no faults, no user
actions, for hours of simulated time, and counts the replica's writes by verb and
resource per Job created, after a warm-up of WARM_UP: every Job created in the count
has been finished, deleted and let go within it, but for the last few.

Cases: a schedule every 2 s and ten every minute, Allow; their Jobs deleted by history
clean-up (limits 3 and 1, Punctual deletes) or by a TTL of 30 s (history limits above
what the TTL leaves); claim windows of 60 s and 600 s at the runtime's status delay
(10 s), and the ramp's flags (a window of 600 s, a status delay of 300 s). Leases, the
Fence and Events are left out, as the ramp's audit leaves them out.

What it must never do: read the wall clock for anything but its own duration, or talk
to a cluster.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from collections import Counter
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "operator"))

WARM_UP = timedelta(minutes=10)
TEMPLATE = {"spec": {"template": {"spec": {"restartPolicy": "Never",
    "containers": [{"name": "c", "image": "busybox"}]}}}}  # fmt: skip
WRITES = ("create", "replace", "patch", "delete")


@dataclass(frozen=True)
class Case:
    name: str
    schedule: str
    schedules: int
    ttl: int | None  # ttlSecondsAfterFinished; None: history clean-up deletes
    window: int  # --claim-window, seconds
    delay: int = 10  # --status-delay, seconds (the runtime's default)


CASES = (
    Case("every 2 s, history", "*/2 * * * * *", 1, None, 60),
    Case("every 2 s, TTL 30 s", "*/2 * * * * *", 1, 30, 60),
    Case("every minute, history", "* * * * *", 10, None, 60),
    Case("every minute, TTL 30 s", "* * * * *", 10, 30, 60),
    Case("every minute, TTL, W 600", "* * * * *", 10, 30, 600),
    # The ramp's flags (--claim-window 600 --status-delay 300)
    Case("every minute, TTL, ramp's", "* * * * *", 10, 30, 600, 300),
    Case("every 2 s, TTL, ramp's", "*/2 * * * * *", 1, 30, 600, 300),
)


def _spec(case: Case) -> dict[str, Any]:
    template: dict[str, Any] = {"spec": dict(TEMPLATE["spec"])}
    history = (3, 1) if case.ttl is None else (100, 100)
    if case.ttl is not None:
        template["spec"]["ttlSecondsAfterFinished"] = case.ttl
    return {
        "schedule": case.schedule,
        "concurrencyPolicy": "Allow",
        "successfulJobsHistoryLimit": history[0],
        "failedJobsHistoryLimit": history[1],
        "jobTemplate": template,
    }


def _resource(path: str) -> str:
    """`jobs`, `cronschedules/status`, ... of a request's object path."""
    parts = path.strip("/").split("/")
    names = [p for p in parts if p in ("jobs", "cronschedules", "status")]
    return "/".join(names) or parts[-2]


def measure(case: Case, hours: float) -> tuple[int, Counter[str]]:
    """(Jobs created after the warm-up, the replica's writes after it by "verb resource")."""
    from tests.sim.simulating import Options, Simulation

    options = Options(
        hours=hours,
        schedules=case.schedules,
        replicas=1,
        faults=False,
        actions=(),
        specs=[_spec(case)],
        claim_window=timedelta(seconds=case.window),
        status_delay=timedelta(seconds=case.delay),
        job_weights=(1.0, 0.0, 0.0, 0.0),
        mean_run=5.0,
    )
    simulation = Simulation(1, options)
    result = asyncio.run(simulation.run())
    if not result.ok:
        raise SystemExit(f"{case.name}: a promise broke:\n{result.report()}")
    since = WARM_UP.total_seconds()
    writes: Counter[str] = Counter()
    firings = 0
    for request in simulation.api.requests:
        if request.at < since or request.verb not in WRITES or request.error is not None:
            continue
        resource = _resource(request.target)
        if request.by in ("", "user") or resource not in ("jobs", "cronschedules/status"):
            continue
        writes[f"{request.verb} {resource}"] += 1
        firings += request.verb == "create" and resource == "jobs"
    return firings, writes


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--hours", type=float, default=1.0, help="simulated hours a case")
    args = parser.parse_args()
    columns = ("create jobs", "patch jobs", "delete jobs", "replace cronschedules/status")
    heads = ("create", "release", "delete", "status")
    print(f"{args.hours:g} simulated hours a case, the first {WARM_UP} not counted")
    print("writes a firing, by the replica (Jobs, CronSchedules and their status)")
    print(f"{'case':<26} {'firings':>7} " + " ".join(f"{h:>8}" for h in heads) + f" {'total':>7}")
    for case in CASES:
        started = time.perf_counter()
        firings, writes = measure(case, args.hours)
        shares = [writes[c] / firings for c in columns]
        others = sum(v for k, v in writes.items() if k not in columns) / firings
        total = sum(shares) + others
        line = f"{case.name:<26} {firings:>7} " + " ".join(f"{s:>8.2f}" for s in shares)
        extra = f" (+{others:.2f} other)" if others else ""
        print(f"{line} {total:>7.2f}{extra}  [{time.perf_counter() - started:.0f} s]")


if __name__ == "__main__":
    main()
