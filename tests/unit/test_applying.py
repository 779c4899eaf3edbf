"""The applier's order and error handling, against a recording fake of the client.

This tests Punctual's own behaviour: which requests it sends, in which order, and
what it does with each answer. What the API server answers (409s, resourceVersion,
admission) is tested against the real control plane in tests/e2e.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import pytest

from punctual.clocks import FixedClock
from punctual.core.decisions import Decision, JobToCreate, WriteDelay
from punctual.core.models import CronScheduleStatus
from punctual.core.records import JobToDelete
from punctual.kube.applying import FENCED, Applier, NotLeader
from punctual.kube.client import AlreadyExists, ApiError, Conflict, Unavailable, retry_after_of
from punctual.kube.events import EventRecorder
from punctual.kube.ratelimiting import RateLimiter

T0 = datetime(2026, 11, 26, 12, 0, tzinfo=UTC)
NS, NAME, UID = "team", "nightly", "uid-1"
JOBS = f"/apis/batch/v1/namespaces/{NS}/jobs"
STATUS = f"/apis/punctual.dev/v1/namespaces/{NS}/cronschedules/{NAME}/status"

Body = dict[str, Any]


@dataclass
class RecordingApi:
    """Records every request; answers with what a test scripted, by (verb, path)."""

    scripted: dict[tuple[str, str], Exception | Body] = field(default_factory=dict)
    calls: list[tuple[str, str]] = field(default_factory=list)
    bodies: list[Body | None] = field(default_factory=list)

    async def _answer(self, verb: str, path: str, body: Body | None) -> Body:
        self.calls.append((verb, path))
        self.bodies.append(body)
        answer = self.scripted.get((verb, path))
        if isinstance(answer, Exception):
            raise answer
        if answer is not None:
            return answer
        result = dict(body or {})
        meta = dict(result.get("metadata") or {})
        meta.setdefault("uid", f"uid-of-{path.rsplit('/', 1)[-1]}")
        meta["resourceVersion"] = "2"
        result["metadata"] = meta
        return result

    async def get(self, path: str, **params: str) -> Body:
        return await self._answer("get", path, None)

    async def create(self, path: str, body: Body) -> Body:
        return await self._answer("create", f"{path}/{body['metadata']['name']}", body)

    async def replace(self, path: str, body: Body) -> Body:
        return await self._answer("replace", path, body)

    async def delete(self, path: str, body: Body | None = None) -> Body:
        return await self._answer("delete", path, body)

    async def patch(self, path: str, body: Any, *, content_type: str = "") -> Body:
        return await self._answer("patch", path, body)

    async def watch(self, path: str, **params: str) -> AsyncIterator[Body]:
        """The applier never watches: a watch that ends at once, with no events."""
        return
        yield {}


def schedule() -> Body:
    return {
        "metadata": {"namespace": NS, "name": NAME, "uid": UID, "resourceVersion": "1"},
        "status": {},
    }


def job_body(name: str, owner: str = UID) -> Body:
    return {
        "metadata": {
            "name": name,
            "namespace": NS,
            "ownerReferences": [{"uid": owner, "controller": True}],
        }
    }


def create(name: str) -> JobToCreate:
    return JobToCreate(name=name, tick=T0, body=job_body(name))


CLAIM = {
    "inFlight": [{"tick": "2026-11-26T12:00:00Z", "job": "nightly-1", "epoch": 1}],
    "active": [{"name": "nightly-1", "tick": "2026-11-26T12:00:00Z"}],
    "activeCount": 1,
    "recentFirings": [
        {"tick": "2026-11-26T12:00:00Z", "job": "nightly-1", "outcome": "Created", "epoch": 1}
    ],
}


def applier(api: RecordingApi, *, leader: bool = True) -> Applier:
    clock = FixedClock(T0)
    return Applier(
        api,
        may_write=lambda: leader,
        events=EventRecorder(api, clock=clock),
        limiter=RateLimiter(1e9, 1_000_000),
        clock=clock,
    )


async def test_claim_then_replace_then_create_then_prune() -> None:
    api = RecordingApi()
    decision = Decision(
        status=CLAIM,
        replace=(JobToDelete("nightly-0", "u0", "replaced by nightly-1"),),
        creates=(create("nightly-1"),),
        prune=(JobToDelete("nightly-old", "u9", "beyond history"),),
    )
    applied = await applier(api).apply(schedule(), decision)
    assert api.calls == [
        ("replace", STATUS),
        ("delete", f"{JOBS}/nightly-0"),
        ("create", f"{JOBS}/nightly-1"),
        ("delete", f"{JOBS}/nightly-old"),
    ]
    claim = api.bodies[0]
    assert claim is not None and claim["metadata"]["resourceVersion"] == "1"  # the fence
    assert [j.name for j in applied.created] == ["nightly-1"]
    assert applied.deleted == ["nightly-0", "nightly-old"]
    assert not applied.stale and not applied.failed


async def test_a_conflict_on_the_claim_drops_everything_else() -> None:
    api = RecordingApi({("replace", STATUS): Conflict(409, "Conflict", "stale")})
    decision = Decision(
        status=CLAIM,
        replace=(JobToDelete("nightly-0", "u0", "replaced"),),
        creates=(create("nightly-1"),),
        prune=(JobToDelete("nightly-old", "u9", "history"),),
    )
    applied = await applier(api).apply(schedule(), decision)
    assert api.calls == [("replace", STATUS)]
    assert applied.stale


async def test_already_exists_of_our_job_is_success() -> None:
    name = "nightly-1"
    api = RecordingApi(
        {
            ("create", f"{JOBS}/{name}"): AlreadyExists(409, "AlreadyExists", "exists"),
            ("get", f"{JOBS}/{name}"): job_body(name),
        }
    )
    applied = await applier(api).apply(schedule(), Decision(status=CLAIM, creates=(create(name),)))
    assert [j.name for j in applied.created] == [name]
    assert not applied.failed
    assert api.calls == [
        ("replace", STATUS),
        ("create", f"{JOBS}/{name}"),
        ("get", f"{JOBS}/{name}"),
    ]


async def test_already_exists_of_a_foreign_job_is_a_failure_settled_in_status() -> None:
    name = "nightly-1"
    api = RecordingApi(
        {
            ("create", f"{JOBS}/{name}"): AlreadyExists(409, "AlreadyExists", "exists"),
            ("get", f"{JOBS}/{name}"): job_body(name, owner="someone-else"),
        }
    )
    applied = await applier(api).apply(schedule(), Decision(status=CLAIM, creates=(create(name),)))
    assert applied.failed == {name: f"a Job named {name} exists and is not this schedule's"}
    assert api.calls[-1] == ("replace", STATUS)  # the settling write, after the create
    settled = api.bodies[-1]
    assert settled is not None
    status = settled["status"]
    assert status["inFlight"] == [] and status["active"] == [] and status["activeCount"] == 0
    assert status["recentFirings"][0]["outcome"] == "Failed"
    assert settled["metadata"]["resourceVersion"] == "2"  # fenced on the claim's write


async def test_the_fences_403_keeps_the_claim_in_flight() -> None:
    name = "nightly-1"
    refused = ApiError(403, "Forbidden", f"{FENCED}: epoch 1 is not the fence's 2")
    api = RecordingApi({("create", f"{JOBS}/{name}"): refused})
    applied = await applier(api).apply(schedule(), Decision(status=CLAIM, creates=(create(name),)))
    assert applied.pending == [name]
    assert not applied.failed
    assert api.calls == [("replace", STATUS), ("create", f"{JOBS}/{name}")]  # nothing settled


async def test_a_transient_failure_stays_pending() -> None:
    name = "nightly-1"
    api = RecordingApi({("create", f"{JOBS}/{name}"): Unavailable(503, "Unavailable", "busy")})
    applied = await applier(api).apply(schedule(), Decision(status=CLAIM, creates=(create(name),)))
    assert applied.pending == [name] and not applied.failed
    assert api.calls == [("replace", STATUS), ("create", f"{JOBS}/{name}")]


async def test_a_rejected_create_on_a_delayed_status_settles_what_that_write_would_say() -> None:
    name = "nightly-1"
    refused = ApiError(422, "Invalid", "spec.template: required")
    api = RecordingApi({("create", f"{JOBS}/{name}"): refused})
    decision = Decision(
        status=None,
        write_delay=WriteDelay.BOOKKEEPING,
        delayed_status=CronScheduleStatus.model_validate(CLAIM),
        creates=(create(name),),
    )
    applied = await applier(api).apply(schedule(), decision)
    assert api.calls == [("create", f"{JOBS}/{name}"), ("replace", STATUS)]
    settled = api.bodies[-1]
    assert settled is not None
    assert settled["metadata"]["resourceVersion"] == "1"
    assert settled["status"]["recentFirings"][0]["reason"].endswith("spec.template: required")
    assert applied.failed


async def test_a_replica_that_does_not_lead_writes_nothing() -> None:
    api = RecordingApi()
    with pytest.raises(NotLeader):
        await applier(api, leader=False).apply(
            schedule(), Decision(status=CLAIM, creates=(create("nightly-1"),))
        )
    assert api.calls == []


async def test_a_429_is_not_retried_and_pauses_the_writes_that_follow() -> None:
    """A create refused with 429 stays in flight (no retry here), and the limiter pauses
    every later write for the server's Retry-After: no storm."""
    first, second = "nightly-1", "nightly-2"
    too_many = Unavailable(429, "TooManyRequests", "slow down", retry_after=5.0)
    api = RecordingApi({("create", f"{JOBS}/{first}"): too_many})
    sleeps: list[float] = []
    now = [100.0]

    async def sleep(seconds: float) -> None:
        sleeps.append(seconds)
        now[0] += seconds

    target = applier(api)
    target.limiter = RateLimiter(monotonic=lambda: now[0], sleep=sleep)
    decision = Decision(status=CLAIM, creates=(create(first), create(second)))
    applied = await target.apply(schedule(), decision)
    assert applied.pending == [first]
    assert [c for c in api.calls if c[0] == "create"] == [
        ("create", f"{JOBS}/{first}"),
        ("create", f"{JOBS}/{second}"),
    ]
    assert sleeps == [5.0]  # the second create waited out the Retry-After


def test_retry_after_comes_from_the_header_or_the_status_details() -> None:
    assert retry_after_of("3", {}) == 3.0
    assert retry_after_of(None, {"details": {"retryAfterSeconds": 2}}) == 2.0
    assert retry_after_of("Wed, 21 Oct 2015 07:28:00 GMT", {}) is None  # a date: default
    assert retry_after_of(None, {}) is None
