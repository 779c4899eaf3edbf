"""Random CronSchedule specs and users' requests, drawn from a seed.

Why it exists: the bugs worth finding are where features meet, and nobody guesses the
pair in advance. A spec here is drawn from many of the spec's features at once (cron with
and without seconds, `schedules` with intervals, `runAt`, every concurrency policy,
`maxConcurrent`, `retry`, `startingDeadlineSeconds`, `missedRunPolicy`, `suspend`,
`maxRuns`, `endTime`, `pendingTimeoutSeconds`, history limits), checked by the spec's
own model so that only specs the API server's schema would take are applied; the
requests are what the CLI writes (`punctual trigger`, `punctual backfill`).

What it must never do: draw from anything but the `random.Random` it is given.
"""

from __future__ import annotations

import json
import random
from datetime import datetime, timedelta
from typing import Any

from punctual.core.keys import ANNOTATION_BACKFILL, ANNOTATION_TRIGGER
from punctual.core.models import CronScheduleSpec
from punctual.core.planning import tick_source
from punctual.core.schedules import ScheduleError
from tests.sim.cluster import iso

POLICIES = ["Allow", "Forbid", "Replace", "BufferOne", "BufferAll"]
TEMPLATE: dict[str, Any] = {
    "spec": {
        "backoffLimit": 0,
        "template": {
            "spec": {
                "restartPolicy": "Never",
                "containers": [{"name": "run", "image": "busybox", "args": ["true"]}],
            }
        },
    }
}


def _cron(rng: random.Random) -> str:
    kind = rng.random()
    if kind < 0.35:
        return f"*/{rng.choice([1, 2, 3, 5, 10])} * * * *"
    if kind < 0.55:
        return f"{rng.randrange(60)} * * * *"
    if kind < 0.75:
        return f"*/{rng.choice([15, 20, 30])} * * * * *"  # with seconds
    if kind < 0.9:
        return f"{rng.randrange(60)} */{rng.choice([2, 3, 5])} * * * *"
    return f"{rng.randrange(0, 60, 5)} {rng.randrange(24)} * * *"


def _trigger(rng: random.Random, now: datetime) -> dict[str, Any]:
    kind = rng.random()
    if kind < 0.6:
        return {"schedule": _cron(rng)}
    if kind < 0.85:
        entries: list[dict[str, str]] = [{"cron": _cron(rng)}]
        if rng.random() < 0.7:
            every = rng.choice([90, 240, 420, 900])
            entry = {"every": f"{every}s"}
            if rng.random() < 0.5:
                entry["offset"] = f"{rng.randrange(every)}s"
            entries.append(entry)
        return {"schedules": entries}
    return {"runAt": iso(now + timedelta(minutes=rng.uniform(1, 240)))}


def random_spec(rng: random.Random, now: datetime) -> dict[str, Any]:
    """A spec the schema takes, from many features at once."""
    while True:
        spec = _trigger(rng, now)
        spec["concurrencyPolicy"] = rng.choice(POLICIES)
        if rng.random() < 0.5:
            spec["maxConcurrent"] = rng.choice([1, 2, 2, 3])
        if rng.random() < 0.3:
            spec["retry"] = {
                "maxAttempts": rng.choice([2, 3, 4]),
                "delaySeconds": rng.choice([0, 5, 30, 120]),
                "backoff": rng.choice(["Fixed", "Exponential"]),
            }
        if rng.random() < 0.5:
            spec["startingDeadlineSeconds"] = rng.choice([5, 30, 120, 600])
        spec["missedRunPolicy"] = rng.choice(["Skip", "RunLatest", "RunAll"])
        if spec["missedRunPolicy"] == "RunAll":
            spec["maxMissedRuns"] = rng.choice([1, 3, 10])
        if rng.random() < 0.1:
            spec["suspend"] = True
        if "runAt" not in spec:
            if rng.random() < 0.1:
                spec["maxRuns"] = rng.randrange(3, 40)
            elif rng.random() < 0.1:
                spec["endTime"] = iso(now + timedelta(hours=rng.uniform(1, 20)))
        if rng.random() < 0.2:
            spec["pendingTimeoutSeconds"] = rng.choice([60, 300, 900])
        _more(rng, spec, now)
        spec["successfulJobsHistoryLimit"] = rng.randrange(0, 4)
        spec["failedJobsHistoryLimit"] = rng.randrange(0, 3)
        spec["jobTemplate"] = json.loads(json.dumps(TEMPLATE))
        if valid(spec):
            _expire(spec)
            return spec


def _expire(spec: dict[str, Any]) -> None:
    """One spec in five has its Jobs deleted by the TTL controller soon after they finish
    (ttlSecondsAfterFinished 0, 5 or 60): a Job may then go before its firing is written,
    which only the finalizer keeps from being fired again. Drawn from the spec itself,
    not the seed's generator, so that every other draw of a seed is what it was before."""
    pick = random.Random(json.dumps(spec, sort_keys=True))
    if pick.random() < 0.2:
        spec["jobTemplate"]["spec"]["ttlSecondsAfterFinished"] = pick.choice([0, 5, 60])


GROUPS = ["g1", "g2"]  # g1 has a ConcurrencyGroup object (a semaphore), g2 none (a mutex)


def _more(rng: random.Random, spec: dict[str, Any], now: datetime) -> None:
    """The features of a spec that change when ticks run rather than which: exclusions, a
    start, a suspension that ends by itself, pause on failure, jitter, a group."""
    if "runAt" not in spec:
        if rng.random() < 0.15:
            spec["exclude"] = [
                rng.choice(
                    [
                        {"cron": f"*/{rng.choice([7, 11])} * * * *"},
                        {"cron": f"* {rng.randrange(24)} * * *"},
                        {
                            "from": iso(now + timedelta(minutes=rng.uniform(10, 120))),
                            "to": iso(now + timedelta(minutes=rng.uniform(130, 300))),
                        },
                    ]
                )
            ]
        if rng.random() < 0.1:
            spec["startTime"] = iso(now + timedelta(minutes=rng.uniform(5, 90)))
    if rng.random() < 0.1:
        spec["suspendUntil"] = iso(now + timedelta(minutes=rng.uniform(5, 120)))
    if rng.random() < 0.1:
        spec["pauseOnFailure"] = {"consecutiveFailures": rng.choice([1, 2, 3])}
    if rng.random() < 0.15:
        spec["jitterSeconds"] = rng.choice([3, 20, 60])
    if rng.random() < 0.25:
        spec["concurrencyGroup"] = rng.choice(GROUPS)


def valid(spec: dict[str, Any]) -> bool:
    try:
        tick_source(CronScheduleSpec.model_validate(spec), uid="uid")
    except (ValueError, ScheduleError):
        return False
    return True


def edited(rng: random.Random, spec: dict[str, Any], now: datetime) -> dict[str, Any]:
    """The spec with one thing changed, as a person edits one."""
    new = json.loads(json.dumps(spec))
    what = rng.choice(["trigger", "policy", "limit", "retry", "suspend", "deadline", "group"])
    if what == "trigger":
        for key in ("schedule", "schedules", "runAt", "maxRuns", "endTime"):
            new.pop(key, None)
        new.update(_trigger(rng, now))
    elif what == "policy":
        new["concurrencyPolicy"] = rng.choice(POLICIES)
    elif what == "limit":
        if new.get("maxConcurrent") is None or rng.random() < 0.7:
            new["maxConcurrent"] = rng.choice([1, 2, 3])
        else:
            new.pop("maxConcurrent")
    elif what == "retry":
        if "retry" in new:
            new.pop("retry")
        else:
            new["retry"] = {"maxAttempts": rng.choice([2, 3]), "delaySeconds": 10}
    elif what == "group":
        if new.get("concurrencyGroup") is None:
            new["concurrencyGroup"] = rng.choice(GROUPS)
        else:
            new.pop("concurrencyGroup")
    elif what == "suspend":
        new["suspend"] = not new.get("suspend", False)
    else:
        new["startingDeadlineSeconds"] = rng.choice([5, 30, 120, 600])
    return new if valid(new) else spec


def trigger_patch(rng: random.Random, request: str) -> dict[str, Any]:
    """What `punctual trigger NAME [--overlap POLICY]` patches onto the schedule."""
    asked: dict[str, Any] = {"request": request, "triggeredBy": "sim"}
    if rng.random() < 0.5:
        asked["concurrencyPolicy"] = rng.choice(["Allow", "Forbid", "Replace"])
    value = json.dumps(asked, sort_keys=True)
    return {"metadata": {"annotations": {ANNOTATION_TRIGGER: value}}}


def backfill_patch(rng: random.Random, request: str, now: datetime) -> dict[str, Any]:
    """What `punctual backfill NAME --from T1 --to T2 --overlap P` patches on."""
    start = now - timedelta(hours=rng.uniform(0.2, 6))
    end = min(now, start + timedelta(hours=rng.uniform(0.1, 3)))
    asked = {
        "request": request,
        "from": iso(start.replace(microsecond=0)),
        "to": iso(end.replace(microsecond=0)),
        "overlap": rng.choice(["Allow", "Allow", "Forbid"]),
    }
    return {"metadata": {"annotations": {ANNOTATION_BACKFILL: json.dumps(asked)}}}
