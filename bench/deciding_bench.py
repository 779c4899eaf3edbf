"""How much one decision costs, on this tree and on a baseline commit, in one run.

Run: .venv/bin/python bench/deciding_bench.py [--baseline REV] [--minutes N]

Why it exists: `decide` (and `delaying.delay_write`, which the shell calls on every
Decision) was a third of the operator's CPU a firing in the ramp's profile. This replays
the passes one busy schedule sees in the ramp, minute after minute, on the API server's
clock as given (no cluster, no clock read): its tick's create, the Job seen active, the
Job seen succeeded, history pruned by the limits, the status written only when its
WriteDelay says it must or the status delay has passed. The same passes run on the
work tree and on `--baseline` (default: the commit v2's ramp measured), each in a
process of its own with that tree's `punctual` first on sys.path, and the figures print
side by side with their ratio. Cases: a schedule every minute (one tick a window) and
one every 2 s (the window claims 30 ticks a write).

What it must never do: write to the work tree (a baseline is extracted into
.cluster-bench-src/, git-ignored) or time anything but the passes themselves (the
process's CPU time, so that other work on the machine moves the figures less).
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
# v2 as `make bench-ramp` measured it (bench/results-ramp-v2): 4.62 ms of CPU a firing.
DEFAULT_BASELINE = "b740bcd"

T0 = datetime(2026, 11, 25, 12, 0, tzinfo=UTC)
STATUS_DELAY = timedelta(seconds=300)  # the ramp's --status-delay
UID = "5f0c1e2d-7a4b-4c3d-9e8f-0a1b2c3d4e5f"
CASES = {"minutely": ("* * * * *", 60), "every-2s": ("*/2 * * * * *", 2)}


def _iso(instant: datetime) -> str:
    return instant.strftime("%Y-%m-%dT%H:%M:%SZ")


def _passes(expression: str, period: int, ticks: int) -> tuple[int, float, int]:
    """Replay `ticks` ticks of one schedule; (passes, seconds spent in them, writes)."""
    from punctual.core.deciding import decide
    from punctual.core.decisions import Leadership
    from punctual.core.delaying import delay_write
    from punctual.core.jobs import JobSnapshot, JobState
    from punctual.core.naming import job_name

    name = "ramp-0042"
    template = {"spec": {"template": {"spec": {"restartPolicy": "Never", "containers": [
        {"name": "c", "image": "busybox", "args": ["true"]}]}}}}  # fmt: skip
    spec = {
        "schedule": expression,
        "jobTemplate": template,
        "successfulJobsHistoryLimit": 3,
        "failedJobsHistoryLimit": 3,
        "endTime": _iso(T0 + timedelta(days=30)),
    }
    body: dict[str, Any] = {
        "apiVersion": "punctual.dev/v1",
        "kind": "CronSchedule",
        "metadata": {"name": name, "namespace": "ramp", "uid": UID, "generation": 1,
                     "resourceVersion": "1", "creationTimestamp": _iso(T0)},
        "spec": spec,
    }  # fmt: skip
    leader = Leadership(epoch=3, identity="punctual-0")
    jobs: dict[str, JobSnapshot] = {}
    unwritten: datetime | None = None
    passes = writes = 0
    spent = 0.0

    def one_pass(now: datetime) -> None:
        nonlocal body, unwritten, passes, writes, spent
        started = time.process_time()
        decision = decide(body, list(jobs.values()), now=now, leadership=leader)
        delayed = delay_write(decision, unwritten_since=unwritten, now=now, delay=STATUS_DELAY)
        spent += time.process_time() - started
        passes += 1
        decision = delayed.decision
        if decision.status is not None:  # written: the body the watch brings back
            writes += 1
            body = {**body, "status": decision.status}
            body["metadata"] = {**body["metadata"], "resourceVersion": str(passes)}
            unwritten = None
        else:
            unwritten = delayed.unwritten_since
        for create in decision.creates:
            jobs[create.name] = JobSnapshot(
                name=create.name, uid=f"u-{create.name}", schedule_uid=UID,
                tick=create.tick, state=JobState.ACTIVE, created=now, has_finalizer=True,
            )  # fmt: skip
        for pruned in decision.prune:
            jobs.pop(pruned.name, None)

    step = timedelta(seconds=period)
    for i in range(1, ticks + 1):
        tick = T0 + i * step
        one_pass(tick + timedelta(milliseconds=20))  # its tick: the create
        job = jobs.get(job_name(name, tick))
        if job is None:
            continue
        jobs[job.name] = JobSnapshot(
            name=job.name, uid=job.uid, schedule_uid=UID, tick=tick, state=JobState.SUCCEEDED,
            created=job.created, finished_at=tick + step / 2, has_finalizer=True,
        )  # fmt: skip
        one_pass(tick + step / 2 + timedelta(milliseconds=20))  # seen succeeded
    return passes, spent, writes


def child(ticks: int) -> None:
    """Run in the tree on sys.path; print one JSON line of figures per case."""
    figures = {}
    for case, (expression, period) in CASES.items():
        _passes(expression, period, 30)  # warm caches and imports
        rounds = [_passes(expression, period, ticks) for _ in range(5)]
        per_pass = [spent / passes * 1e3 for passes, spent, _ in rounds]
        passes, _, writes = rounds[0]
        figures[case] = {
            "ms_a_pass": statistics.median(per_pass),
            "passes": passes,
            "writes_a_tick": writes / ticks,
        }
    print(json.dumps(figures))


def _tree(rev: str) -> Path:
    if not rev:
        return REPO
    sys.path.insert(0, str(HERE))
    from source import extract

    return extract(rev)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--baseline", default=DEFAULT_BASELINE)
    parser.add_argument("--ticks", type=int, default=300)
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args.ticks)
        return
    results = {}
    for label, rev in (("baseline", args.baseline), ("this tree", "")):
        tree = _tree(rev)
        command = [sys.executable, __file__, "--child", "--ticks", str(args.ticks)]
        env = {"PYTHONPATH": str(tree / "operator"), "PATH": "/usr/bin:/bin"}
        out = subprocess.run(command, env=env, check=True, capture_output=True, text=True)
        results[label] = json.loads(out.stdout.strip().splitlines()[-1])
    print(f"baseline: {args.baseline}; {args.ticks} ticks a round, median of 5 rounds")
    print(f"{'case':<10} {'baseline ms/pass':>17} {'this ms/pass':>13} {'ratio':>6} "
          f"{'passes':>7} {'writes/tick (base, this)':>25}")  # fmt: skip
    for case in CASES:
        old, new = results["baseline"][case], results["this tree"][case]
        print(
            f"{case:<10} {old['ms_a_pass']:>17.3f} {new['ms_a_pass']:>13.3f} "
            f"{new['ms_a_pass'] / old['ms_a_pass']:>6.2f} {new['passes']:>7} "
            f"{old['writes_a_tick']:>12.2f}, {new['writes_a_tick']:.2f}"
        )


if __name__ == "__main__":
    main()
