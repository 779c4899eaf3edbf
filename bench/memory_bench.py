"""What one schedule costs a replica's memory, on this tree and on a baseline commit, in one run.

Run: .venv/bin/python bench/memory_bench.py [--baseline REV] [--schedules N]
(`make bench-memory`)

Why it exists: issue 35 asks for at most 1 KB of operator memory per idle schedule, and
every replica, leader or standby, keeps every schedule in its index. This builds the
real `Operator` (its index, metrics, rules, groups, chains, scheduler loop; no API
server: nothing here sends a request), tells its index N schedules the way a list or a
watch does (each body parsed from JSON text, `ScheduleIndex.changed`), and counts the
Python heap the process holds afterwards beyond what it held before (tracemalloc), per
schedule. Three cases: never decided (no status, the 100 000 of `bench/scale.py
startup`), idle (the status a first claim writes) and busy (every 2 s: 20 recentFirings,
a Job active). It also times, per schedule, the index taking a change and a decision
reading the schedule back (`LeaderView.schedule`), the costs a packed form trades for its
bytes. The same runs on the work tree and on `--baseline`, each in a process of its own
with that tree's `punctual` first on sys.path, side by side with their ratio.

What it measures and what it does not: the heap the index and the watch side keep,
which every replica pays. The resident memory a process shows is more (the allocator's
arenas, the list's pages in flight, a leader's timers and Jobs); `bench/scale.py
startup` measures that at 100 000.

What it must never do: write to the work tree (a baseline is extracted into
.cluster-bench-src/, git-ignored) or talk to a cluster.
"""

from __future__ import annotations

import argparse
import gc
import json
import subprocess
import sys
import time
import tracemalloc
import types
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
DEFAULT_BASELINE = "aece580"  # the index before packed bodies were deflated
CASES = ("never decided", "idle", "busy")

TEMPLATE = {"spec": {"backoffLimit": 0, "template": {"spec": {"restartPolicy": "Never",
    "containers": [{"name": "work", "image": "busybox:1.36", "command": ["true"]}]}}}}  # fmt: skip


def _body(case: str, i: int) -> dict[str, Any]:
    name = f"b-{i:06d}"
    uid = f"5f0c1e2d-7a4b-4c3d-9e8f-{i:012d}"
    body: dict[str, Any] = {
        "apiVersion": "punctual.dev/v1",
        "kind": "CronSchedule",
        "metadata": {
            "name": name, "namespace": "bench", "uid": uid,
            "resourceVersion": str(1_000_000 + i), "generation": 1,
            "creationTimestamp": "2026-11-27T10:21:00Z",
            "managedFields": [{
                "manager": "python", "operation": "Update", "apiVersion": "punctual.dev/v1",
                "time": "2026-11-27T10:21:00Z", "fieldsType": "FieldsV1",
                "fieldsV1": {"f:spec": {".": {}, "f:jobTemplate": {".": {}, "f:spec": {}},
                                        "f:schedule": {}, "f:timeZone": {}}},
            }],
        },
        "spec": {"schedule": "0 0 1 1 *", "timeZone": "UTC", "jobTemplate": TEMPLATE},
    }  # fmt: skip
    if case == "never decided":
        return body
    ready = {
        "type": "Ready", "status": "True", "reason": "Scheduled",
        "message": "next tick 2027-01-01T00:00:00Z",
        "lastTransitionTime": "2026-11-27T10:21:03Z", "observedGeneration": 1,
    }  # fmt: skip
    body["status"] = {
        "nextScheduleTime": "2027-01-01T00:00:00Z",
        "scheduleFingerprint": f"{i * 2654435761 % 2**32:08x}",
        "claimedThrough": "2027-01-01T00:00:00Z",
        "claimEpoch": 3,
        "conditions": [ready],
        "observedGeneration": 1,
        "installation": "punctual-system/punctual-leader",
    }
    if case == "busy":
        body["spec"]["schedule"] = "*/2 * * * * *"
        start = 1_796_205_600
        ticks = [start - 2 * k for k in range(20)]
        body["status"].update({
            "lastScheduledTime": _iso(ticks[0]),
            "nextScheduleTime": _iso(ticks[0] + 2),
            "lastSuccessfulTime": _iso(ticks[1] + 1),
            "lastSuccessfulTick": _iso(ticks[1]),
            "claimedThrough": _iso(ticks[0] + 60),
            "active": [{"name": f"{name}-{ticks[0]}", "uid": f"9a8b7c6d-{i:08d}-0000-0000-0000"}],
            "recentFirings": [
                {"tick": _iso(t), "job": f"{name}-{t}",
                 "outcome": "Created" if k == 0 else "Succeeded", "epoch": 3}
                for k, t in enumerate(ticks)
            ],
        })  # fmt: skip
    return body


def _iso(seconds: int) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(seconds))


class _NoApi:
    """What the Operator's constructor reads of its client; nothing here sends a request."""

    credentials = types.SimpleNamespace(namespace="punctual-system")


def _operator() -> Any:
    from punctual.clocks import ServerClock
    from punctual.runtime.options import Options
    from punctual.runtime.process import Operator

    operator = Operator(_NoApi(), Options(metrics_port=None), clock=ServerClock())  # type: ignore[arg-type]
    operator.synced.set()  # every change goes the whole way, as once the lists are in
    return operator


def child(case: str, n: int) -> None:
    import punctual

    operator = _operator()
    texts = [json.dumps(_body(case, i)) for i in range(n)]
    gc.collect()
    tracemalloc.start()
    before = tracemalloc.get_traced_memory()[0]
    for text in texts:
        operator.schedules.changed(json.loads(text))
    gc.collect()
    held = tracemalloc.get_traced_memory()[0] - before
    tracemalloc.stop()
    # A change of each (a new resourceVersion), then each read back as a decision does.
    changes = []
    for text in texts:
        body = json.loads(text)
        body["metadata"]["resourceVersion"] += "1"
        changes.append(body)
    started = time.process_time()
    for body in changes:
        operator.schedules.changed(body)
    took_change = time.process_time() - started
    keys = list(operator.schedules)
    started = time.process_time()
    for key in keys:
        operator.view.schedule(key)
    took_read = time.process_time() - started
    print(json.dumps({
        "bytes": held / n,
        "change_us": took_change / n * 1e6,
        "read_us": took_read / n * 1e6,
        "punctual": punctual.__file__,
    }))  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--baseline", default=DEFAULT_BASELINE)
    parser.add_argument("--schedules", type=int, default=20_000)
    parser.add_argument("--child", choices=CASES, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args.child, args.schedules)
        return
    sys.path.insert(0, str(HERE))
    from source import extract

    results: dict[str, dict[str, Any]] = {}
    for label, rev in (("baseline", args.baseline), ("this tree", "")):
        tree = extract(rev)  # the work tree itself for ""
        env = {"PYTHONPATH": str(tree / "operator"), "PATH": "/usr/bin:/bin"}
        for case in CASES:
            command = [sys.executable, __file__, "--child", case]
            command += ["--schedules", str(args.schedules)]
            out = subprocess.run(command, env=env, check=True, capture_output=True, text=True)
            results[f"{label}/{case}"] = json.loads(out.stdout.strip().splitlines()[-1])
    print(f"baseline: {args.baseline}; {args.schedules} schedules a case; Python heap held per "
          f"schedule (tracemalloc), CPU per schedule (process time)")  # fmt: skip
    print(f"{'case':<14} {'baseline B':>10} {'this B':>7} {'ratio':>6} "
          f"{'change us (base, this)':>23} {'read us (base, this)':>21}")  # fmt: skip
    for case in CASES:
        old, new = results[f"baseline/{case}"], results[f"this tree/{case}"]
        print(
            f"{case:<14} {old['bytes']:>10.0f} {new['bytes']:>7.0f} "
            f"{new['bytes'] / old['bytes']:>6.2f} "
            f"{old['change_us']:>14.1f}, {new['change_us']:>6.1f} "
            f"{old['read_us']:>12.1f}, {new['read_us']:>6.1f}"
        )


if __name__ == "__main__":
    main()
