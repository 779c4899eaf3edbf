"""What the client's JSON costs a firing: the standard library against `kube.client`'s codec.

Run: .venv/bin/python bench/json_bench.py [--rounds N]   (`make bench-json`)

Why it exists: at 50 firings/s a tenth of the operator's CPU was the standard library's
json (bench/results-ramp-v2's py-spy table: `JSONDecoder.raw_decode` 7.0 % self,
`JSONEncoder.iterencode` 2.6 %), decoding every answer and watch event and encoding
every request body. The client now decodes and encodes with orjson
(`punctual.kube.client.decode` and `encode`). This times both ways on the bodies a firing
brings, in one process and one run, alternating them round after round so that other work
on the machine moves both alike, and prints CPU time a call and the ratio:

- a Job watch event (the Job Punctual creates, as the API server sends it back succeeded,
  with its managedFields), decoded: several arrive per firing;
- a busy CronSchedule watch event (20 recentFirings, a Job active), decoded;
- a Job create's body, encoded, and a status write's, encoded.

The old way is what the client did before: `resp.text()` (bytes to str) then
`json.loads`, and `json.dumps(body)` sent as text.

What it must never do: talk to a cluster, or time anything but the calls themselves.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

CALLS = 2_000  # calls a round, each way


def _job() -> dict[str, Any]:
    """Punctual's Job for a tick, as the API server returns it once it succeeded."""
    from memory_bench import _body
    from punctualjob import punctual_job

    tick = datetime(2026, 12, 4, 12, 0, tzinfo=UTC)
    job = punctual_job(_body("busy", 42), tick, leader="punctual-0", epoch=3)
    meta = job["metadata"]
    meta.update(
        uid="0b7c2d9e-4f1a-4e5b-8c3d-2a1b0c9d8e7f",
        resourceVersion="1234567",
        generation=1,
        creationTimestamp="2026-12-04T12:00:00Z",
        managedFields=[
            {"manager": "punctual", "operation": "Update", "apiVersion": "batch/v1",
             "time": "2026-12-04T12:00:00Z", "fieldsType": "FieldsV1",
             "fieldsV1": {"f:metadata": {
                 "f:annotations": {f"f:{k}": {} for k in meta.get("annotations") or {}},
                 "f:labels": {f"f:{k}": {} for k in meta.get("labels") or {}}},
                 "f:spec": {"f:backoffLimit": {}, "f:template": {"f:spec": {}}}}},
            {"manager": "kube-controller-manager", "operation": "Update",
             "apiVersion": "batch/v1", "time": "2026-12-04T12:00:02Z",
             "fieldsType": "FieldsV1", "subresource": "status",
             "fieldsV1": {"f:status": {"f:completionTime": {}, "f:conditions": {},
                                       "f:startTime": {}, "f:succeeded": {}}}},
        ],
    )  # fmt: skip
    done = {"status": "True", "lastProbeTime": "2026-12-04T12:00:02Z",
            "lastTransitionTime": "2026-12-04T12:00:02Z", "reason": "CompletionsReached",
            "message": "Reached expected number of succeeded pods"}  # fmt: skip
    job["status"] = {
        "conditions": [{"type": "SuccessCriteriaMet", **done}, {"type": "Complete", **done}],
        "startTime": "2026-12-04T12:00:00Z",
        "completionTime": "2026-12-04T12:00:02Z",
        "succeeded": 1,
        "ready": 0,
        "terminating": 0,
        "uncountedTerminatedPods": {},
    }
    return job


def _cases() -> dict[str, tuple[Callable[[], object], Callable[[], object], int]]:
    """Each case: (the standard library's way, the client's, the body's bytes)."""
    from memory_bench import _body

    from punctual.kube.client import decode, encode

    job = _job()
    schedule = _body("busy", 42)
    job_event = json.dumps({"type": "MODIFIED", "object": job}).encode()
    schedule_event = json.dumps({"type": "MODIFIED", "object": schedule}).encode()
    create = {k: v for k, v in job.items() if k != "status"}
    create["metadata"] = {
        k: v
        for k, v in job["metadata"].items()
        if k not in ("uid", "resourceVersion", "managedFields", "creationTimestamp")
    }
    status = {"metadata": {"resourceVersion": "1234567"}, "status": schedule["status"]}
    return {
        "decode a Job event": (
            lambda: json.loads(job_event.decode()),
            lambda: decode(job_event),
            len(job_event),
        ),
        "decode a schedule event": (
            lambda: json.loads(schedule_event.decode()),
            lambda: decode(schedule_event),
            len(schedule_event),
        ),
        "encode a Job create": (lambda: json.dumps(create), lambda: encode(create), 0),
        "encode a status write": (lambda: json.dumps(status), lambda: encode(status), 0),
    }


def _round(call: Callable[[], object]) -> float:
    """CPU seconds a call, over CALLS calls."""
    started = time.process_time()
    for _ in range(CALLS):
        call()
    return (time.process_time() - started) / CALLS


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=9)
    args = parser.parse_args()
    cases = _cases()
    for case, (old, new, _) in cases.items():  # the same answer both ways
        before, after = old(), new()
        if isinstance(after, bytes):  # an encoding: the same JSON once decoded
            before, after = json.loads(str(before)), json.loads(after)
        assert before == after, case
    print(f"{CALLS} calls a round, median of {args.rounds} rounds, both ways alternating")
    print(f"{'case':<24} {'bytes':>6} {'stdlib us':>10} {'client us':>10} {'ratio':>6}")
    for case, (old, new, size) in cases.items():
        olds, news = [], []
        for _ in range(args.rounds):
            olds.append(_round(old))
            news.append(_round(new))
        before, after = statistics.median(olds) * 1e6, statistics.median(news) * 1e6
        shown = str(size) if size else "-"
        print(f"{case:<24} {shown:>6} {before:>10.1f} {after:>10.1f} {after / before:>6.2f}")


if __name__ == "__main__":
    main()
