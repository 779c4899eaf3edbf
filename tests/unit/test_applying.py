"""The applier's order and error handling, against the recording fake API server.

This tests Punctual's own behaviour: which requests it sends, in which order, and
what it does with each answer. The fake (tests/unit/fakeapi.py) keeps the schedule and
its Jobs and answers as the API server does; what the real one answers (409s,
resourceVersion, admission) is tested against the real control plane in tests/e2e.
"""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from punctual.clocks import FixedClock
from punctual.core.decisions import Decision, JobToCreate, WriteDelay
from punctual.core.keys import FINALIZER
from punctual.core.models import CronScheduleStatus
from punctual.core.records import JobToDelete
from punctual.kube.applying import CLEAN_UP_AT_ONCE, FENCED, Applier, NotLeader
from punctual.kube.client import ApiError, Invalid, Unavailable, retry_after_of
from punctual.kube.events import EventRecorder
from punctual.kube.ratelimiting import RateLimiter
from tests.unit.fakeapi import FakeApi

T0 = datetime(2026, 11, 26, 12, 0, tzinfo=UTC)
NS, NAME, UID = "team", "nightly", "uid-1"
JOBS = f"/apis/batch/v1/namespaces/{NS}/jobs"
SCHEDULE = f"/apis/punctual.dev/v1/namespaces/{NS}/cronschedules/{NAME}"
STATUS = f"{SCHEDULE}/status"

Body = dict[str, Any]


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


def server(*jobs: Body, version: str = "1") -> FakeApi:
    """The API server holding the schedule (at `version`) and these Jobs."""
    api = FakeApi()
    api.put(
        SCHEDULE, {**schedule(), "metadata": {**schedule()["metadata"], "resourceVersion": version}}
    )
    for body in jobs:
        api.put(f"{JOBS}/{body['metadata']['name']}", body)
    return api


def held_job(name: str, uid: str, *, finalizers: list[str] | None = None) -> Body:
    body = job_body(name)
    body["metadata"] |= {"uid": uid, "finalizers": finalizers or []}
    return body


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


def applier(api: FakeApi, *, leader: bool = True) -> Applier:
    clock = FixedClock(T0)
    return Applier(
        api,
        may_write=lambda: leader,
        events=EventRecorder(api, clock=clock),
        limiter=RateLimiter(1e9, 1_000_000),
        clock=clock,
    )


async def test_claim_then_replace_then_create_then_prune() -> None:
    api = server(held_job("nightly-0", "u0"), held_job("nightly-old", "u9"))
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
    claim = api.requests[0].body
    assert claim is not None and claim["metadata"]["resourceVersion"] == "1"  # the fence
    assert [j.name for j in applied.created] == ["nightly-1"]
    assert applied.deleted == ["nightly-0", "nightly-old"]
    assert not applied.stale and not applied.failed
    assert all(r.error is None for r in api.requests)
    assert [j["metadata"]["name"] for j in api.items(JOBS)] == ["nightly-1"]
    assert api.objects[SCHEDULE]["status"] == CLAIM


async def test_the_claim_and_each_job_are_told_as_soon_as_answered() -> None:
    """The watch's echo of the claim often comes while the pass still creates: the view
    is told of each write before the next request goes, so it knows the echo as ours."""
    api = server(held_job("nightly-old", "u9"))
    told: list[tuple[str, str, int]] = []  # (what, name, requests sent by then)
    decision = Decision(
        status=CLAIM,
        creates=(create("nightly-1"), create("nightly-2")),
        prune=(JobToDelete("nightly-old", "u9", "beyond history"),),
    )
    await applier(api).apply(
        schedule(),
        decision,
        claimed=lambda body: told.append(("claim", body["metadata"]["name"], len(api.calls))),
        created=lambda job: told.append(("job", job.name, len(api.calls))),
    )
    assert told == [("claim", NAME, 1), ("job", "nightly-1", 2), ("job", "nightly-2", 3)]


async def test_a_conflict_on_the_claim_drops_everything_else() -> None:
    api = server(version="2")  # someone wrote after the applier read it
    decision = Decision(
        status=CLAIM,
        replace=(JobToDelete("nightly-0", "u0", "replaced"),),
        creates=(create("nightly-1"),),
        prune=(JobToDelete("nightly-old", "u9", "history"),),
    )
    applied = await applier(api).apply(schedule(), decision)
    assert api.calls == [("replace", STATUS)]
    assert applied.stale
    assert api.items(JOBS) == []


async def test_already_exists_of_our_job_is_success() -> None:
    name = "nightly-1"
    api = server(job_body(name))  # created before a crash, its claim still in flight
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
    api = server(job_body(name, owner="someone-else"))
    applied = await applier(api).apply(schedule(), Decision(status=CLAIM, creates=(create(name),)))
    assert applied.failed == {name: f"a Job named {name} exists and is not this schedule's"}
    assert api.calls == [
        ("replace", STATUS),
        ("create", f"{JOBS}/{name}"),
        ("get", f"{JOBS}/{name}"),
        ("replace", STATUS),  # the settling write, after the create
    ]
    settled = api.requests[-1].body
    assert settled is not None
    status = settled["status"]
    assert status["inFlight"] == [] and status["active"] == [] and status["activeCount"] == 0
    assert status["recentFirings"][0]["outcome"] == "Failed"
    claimed = api.requests[0].answer
    assert claimed is not None
    # Fenced on the claim's write, and accepted.
    assert settled["metadata"]["resourceVersion"] == claimed["metadata"]["resourceVersion"] != "1"
    assert api.requests[-1].error is None


async def test_the_fences_403_keeps_the_claim_in_flight() -> None:
    name = "nightly-1"
    refused = ApiError(403, "Forbidden", f"{FENCED}: epoch 1 is not the fence's 2")
    api = server()
    api.fail("create", f"{JOBS}/{name}", refused)
    applied = await applier(api).apply(schedule(), Decision(status=CLAIM, creates=(create(name),)))
    assert applied.pending == [name]
    assert not applied.failed
    assert api.calls == [("replace", STATUS), ("create", f"{JOBS}/{name}")]  # nothing settled


async def test_a_fence_the_api_server_cannot_evaluate_yet_keeps_the_claim_in_flight() -> None:
    """A restarted kube-apiserver refuses every fenced create for about 20 s, until it has
    discovered the Fence CRD again (found by `make chaos`: each API server restart lost
    every tick of those seconds as a failed firing)."""
    name = "nightly-1"
    message = (
        f'jobs.batch "{name}" is forbidden: ValidatingAdmissionPolicy '
        "'punctual-fencing.punctual.dev' denied request: failed to configure policy: failed "
        "to find resource referenced by paramKind: 'punctual.dev/v1, Kind=Fence'"
    )
    api = server()
    api.fail("create", f"{JOBS}/{name}", Invalid(422, "Invalid", message))  # as the server says
    applied = await applier(api).apply(schedule(), Decision(status=CLAIM, creates=(create(name),)))
    assert applied.pending == [name]
    assert not applied.failed
    assert api.calls == [("replace", STATUS), ("create", f"{JOBS}/{name}")]  # nothing settled


async def test_another_403_is_a_failed_firing() -> None:
    name = "nightly-1"
    refused = ApiError(403, "Forbidden", f'jobs.batch "{name}" is forbidden: exceeded quota')
    api = server()
    api.fail("create", f"{JOBS}/{name}", refused)
    applied = await applier(api).apply(schedule(), Decision(status=CLAIM, creates=(create(name),)))
    assert not applied.pending
    assert applied.failed == {name: f"the API server rejected Job {name}: {refused.message}"}


async def test_a_transient_failure_stays_pending() -> None:
    name = "nightly-1"
    api = server()
    api.fail("create", f"{JOBS}/{name}", Unavailable(503, "Unavailable", "busy"))
    applied = await applier(api).apply(schedule(), Decision(status=CLAIM, creates=(create(name),)))
    assert applied.pending == [name] and not applied.failed
    assert api.calls == [("replace", STATUS), ("create", f"{JOBS}/{name}")]


async def test_a_rejected_create_on_a_delayed_status_settles_what_that_write_would_say() -> None:
    name = "nightly-1"
    api = server()
    api.fail("create", f"{JOBS}/{name}", Invalid(422, "Invalid", "spec.template: required"))
    decision = Decision(
        status=None,
        write_delay=WriteDelay.BOOKKEEPING,
        delayed_status=CronScheduleStatus.model_validate(CLAIM),
        creates=(create(name),),
    )
    applied = await applier(api).apply(schedule(), decision)
    assert api.calls == [("create", f"{JOBS}/{name}"), ("replace", STATUS)]
    settled = api.requests[-1].body
    assert settled is not None
    assert settled["metadata"]["resourceVersion"] == "1"
    assert api.requests[-1].error is None
    assert settled["status"]["recentFirings"][0]["reason"].endswith("spec.template: required")
    assert applied.failed


async def test_a_replica_that_does_not_lead_writes_nothing() -> None:
    api = server()
    with pytest.raises(NotLeader):
        await applier(api, leader=False).apply(
            schedule(), Decision(status=CLAIM, creates=(create("nightly-1"),))
        )
    assert api.calls == []


async def test_a_write_that_waited_for_the_window_is_not_sent_once_the_lease_lapsed() -> None:
    """Leadership is asked again once the write has its slot: a create that waited behind
    a full window (or in a process paused by SIGSTOP) while the Lease lapsed never goes out."""
    api = server()
    leading = [True]
    clock = FixedClock(T0)
    limiter = RateLimiter(1e9, 1_000_000)
    limiter.window = 1.0
    limiter.in_flight = 1  # another write holds the only slot
    writer = Applier(
        api,
        may_write=lambda: leading[0],
        events=EventRecorder(api, clock=clock),
        limiter=limiter,
        clock=clock,
    )
    waiting = asyncio.create_task(writer.apply(schedule(), Decision(status=CLAIM)))
    for _ in range(10):
        await asyncio.sleep(0)
    assert not waiting.done() and api.calls == []  # past the guard, waiting for the slot
    leading[0] = False  # the Lease lapses meanwhile
    limiter.in_flight = 0
    async with limiter._slot_freed:
        limiter._slot_freed.notify_all()
    with pytest.raises(NotLeader):
        await waiting
    assert api.calls == []


async def test_a_429_is_not_retried_and_pauses_the_writes_that_follow() -> None:
    """A create refused with 429 stays in flight (no retry here), and the limiter pauses
    every later write for the server's Retry-After: no storm."""
    first, second = "nightly-1", "nightly-2"
    too_many = Unavailable(429, "TooManyRequests", "slow down", retry_after=5.0)
    api = server()
    api.fail("create", f"{JOBS}/{first}", too_many)
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
    assert [j["metadata"]["name"] for j in api.items(JOBS)] == [second]


def test_retry_after_comes_from_the_header_or_the_status_details() -> None:
    assert retry_after_of("3", {}) == 3.0
    assert retry_after_of(None, {"details": {"retryAfterSeconds": 2}}) == 2.0
    assert retry_after_of("Wed, 21 Oct 2015 07:28:00 GMT", {}) is None  # a date: default
    assert retry_after_of(None, {}) is None


async def test_the_small_kinds_status_is_written_only_while_leading_and_within_the_limit() -> None:
    """FreezeWindows', ClusterFreezeWindows', Calendars' and ConcurrencyGroups' status goes
    through the same guard and limiter as every other write (`Applier.report_status`)."""
    api = FakeApi()
    path = "/apis/punctual.dev/v1/namespaces/ns/freezewindows/release"
    api.put(path, {"metadata": {"name": "release", "namespace": "ns"}, "spec": {}})
    refused = await applier(api, leader=False).report_status(path + "/status", {"active": True})
    assert refused is False
    assert [r for r in api.requests if r.verb == "patch"] == []
    assert await applier(api).report_status(path + "/status", {"active": True}) is True
    assert api.objects[path]["status"] == {"active": True}
    gone = "/apis/punctual.dev/v1/namespaces/ns/freezewindows/gone/status"
    assert await applier(api).report_status(gone, {"active": True}) is False


async def test_a_replace_whose_delete_failed_creates_nothing_yet() -> None:
    """The running Job still runs: creating the next beside it would make two under
    Replace (the simulator's finding 2). The claim stays written; the next pass deletes
    again first, then creates (core.overlapping replaces for a recovered claim too)."""
    api = server(held_job("nightly-0", "u0"))
    api.fail("delete", f"{JOBS}/nightly-0", ApiError(500, "InternalError", "etcd is slow"))
    decision = Decision(
        status=CLAIM,
        replace=(JobToDelete("nightly-0", "u0", "replaced by nightly-1"),),
        creates=(create("nightly-1"),),
    )
    applied = await applier(api).apply(schedule(), decision)
    assert api.calls == [("replace", STATUS), ("delete", f"{JOBS}/nightly-0")]
    assert applied.created == [] and api.objects[SCHEDULE]["status"] == CLAIM


@pytest.mark.parametrize("next_wake", [None, T0 + timedelta(hours=1), T0])
async def test_clean_up_goes_a_few_at_once_and_begins_none_after_the_next_wake(
    next_wake: datetime | None,
) -> None:
    """A pass holds its schedule, so its next tick waits for the pass's clean-up: past
    the next wake, clean-up begins no more (the first batch always runs, so it keeps up);
    what is left, the next pass decides again."""
    held = [held_job(f"nightly-old-{i}", f"u{i}", finalizers=[FINALIZER]) for i in range(10)]
    api = server(*held)
    decision = Decision(
        status=None,
        prune=tuple(
            JobToDelete(f"nightly-old-{i}", f"u{i}", "history", has_finalizer=True)
            for i in range(10)
        ),
        next_wake=next_wake,
    )
    applied = await applier(api).apply(schedule(), decision)
    done = CLEAN_UP_AT_ONCE if next_wake == T0 else 10
    assert sorted(applied.deleted) == sorted(f"nightly-old-{i}" for i in range(done))
    assert sorted(applied.freed) == sorted(applied.deleted)  # each deleted one let go
    assert len(api.items(JOBS)) == 10 - done
    assert applied.left_for_later == 10 - done  # punctual_cleanup_backlog counts them
