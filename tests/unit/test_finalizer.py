"""The finalizer that closes the at-most-once hole: a Job cannot disappear before its
firing is recorded in the written status, whoever deletes it.

Decisions (which held Jobs to release, and whether their status must be written first)
are pure and tested here with `decide`; the applier's order (status, then release;
delete, then release) with a recording fake of the client. That the API server keeps
a held Job, and lets it go on release, is tested against the real control plane.
"""

from __future__ import annotations

import copy
import dataclasses
import json
from datetime import UTC, datetime, timedelta
from typing import Any

from punctual.core.decisions import Decision, JobToFree, WriteDelay
from punctual.core.delaying import delay_write
from punctual.core.jobs import JobSnapshot, build_job
from punctual.core.keys import FINALIZER
from punctual.core.records import JobToDelete

from .builders import (
    ACTIVE,
    DONE,
    T0,
    H,
    M,
    job,
    n,
    run,
    schedule_body,
    spec_body,
    status_body,
)
from .test_applying import JOBS, STATUS, applier, create, held_job, schedule, server


def held(snapshot: JobSnapshot, *, deleting: bool = False) -> JobSnapshot:
    return dataclasses.replace(snapshot, has_finalizer=True, deleting=deleting)


def test_every_job_is_created_with_the_finalizer_beside_the_templates_own() -> None:
    spec = spec_body()
    spec["jobTemplate"]["metadata"] = {"finalizers": ["example.com/keep"]}
    body = build_job(
        schedule=schedule_body(spec), job_name="x-1", tick=T0, epoch=1, leader="punctual-0"
    )
    assert body["metadata"]["finalizers"] == ["example.com/keep", FINALIZER]
    assert JobSnapshot.from_body(body).has_finalizer


def test_a_job_deleted_while_its_claim_is_in_flight_is_released_after_the_status() -> None:
    spec = spec_body()
    # T0's claim is written, its Job was created and then deleted (by a person, a TTL):
    # held by the finalizer it is still there, being deleted.
    status = status_body(spec, cursor=T0, in_flight=[T0])
    decision = run(schedule_body(spec, status), [held(job(T0, ACTIVE), deleting=True)], now=T0)
    assert decision.creates == ()  # seen: never created again
    assert decision.free == (JobToFree(n(T0), job(T0).uid, needs_status=True),)
    assert decision.status is not None
    assert n(T0) not in [c["job"] for c in decision.status.get("inFlight", [])]
    # The claim must be resolved in writing first, and at once: the Job was running, and
    # its pods run until its finalizer goes.
    assert decision.write_delay is WriteDelay.NEVER


def test_a_finished_job_deleted_while_its_claim_is_in_flight_waits_for_the_next_write() -> None:
    # A TTL deleted a finished run whose claim is still in flight as written: its finalizer
    # goes with the next write, at most the status delay later, not with a write of its own.
    spec = spec_body()
    claim = run(schedule_body(spec, status_body(spec, cursor=T0 - H)), [], now=T0)
    assert claim.status is not None and [c.name for c in claim.creates] == [n(T0)]
    finished = held(job(T0, DONE), deleting=True)
    decision = run(schedule_body(spec, claim.status), [finished], now=T0 + M)
    assert decision.free == (JobToFree(n(T0), finished.uid, needs_status=True),)
    assert decision.write_delay is WriteDelay.BOOKKEEPING
    delay = timedelta(seconds=10)
    left = delay_write(decision, unwritten_since=None, now=T0 + M, delay=delay)
    assert left.decision.status is None and left.decision.free == ()  # held, not freed
    assert left.decision.next_wake is not None and left.decision.next_wake <= T0 + M + delay
    due = delay_write(decision, unwritten_since=T0 + M, now=T0 + M + delay, delay=delay)
    assert due.decision.status == decision.status  # written now, and then freed
    assert due.decision.free == decision.free


def test_a_job_deleted_after_its_firing_was_recorded_is_released_at_once() -> None:
    spec = spec_body()
    status = status_body(spec, cursor=T0)  # nothing in flight
    finished = held(job(T0, DONE), deleting=True)
    decision = run(schedule_body(spec, status), [finished], now=T0 + 20 * M)
    assert decision.free == (JobToFree(n(T0), finished.uid),)


def test_a_held_job_that_nobody_deletes_stays_held() -> None:
    spec = spec_body()
    status = status_body(spec, cursor=T0, in_flight=[T0])
    decision = run(schedule_body(spec, status), [held(job(T0, ACTIVE))], now=T0 + M)
    assert decision.free == ()


def test_history_clean_up_deletes_and_releases_its_held_jobs() -> None:
    spec = spec_body(successfulJobsHistoryLimit=1)
    status = status_body(spec, cursor=T0 + H)
    jobs = [held(job(T0, DONE)), held(job(T0 + H, DONE)), job(T0 - H, DONE)]
    decision = run(schedule_body(spec, status), jobs, now=T0 + H + 30 * M)
    assert {(d.name, d.has_finalizer) for d in decision.prune} == {
        (n(T0), True),
        (n(T0 - H), False),
    }


async def test_the_applier_writes_the_status_before_it_releases() -> None:
    api = server(held_job("nightly-1", "u1", finalizers=["example.com/keep", FINALIZER]))
    decision = Decision(
        status={"inFlight": []},
        free=(JobToFree("nightly-1", "u1"),),
    )
    applied = await applier(api).apply(schedule(), decision)
    assert api.calls == [("replace", STATUS), ("patch", f"{JOBS}/nightly-1")]
    patch: Any = api.requests[-1].body
    assert patch == {"metadata": {"uid": "u1", "$deleteFromPrimitiveList/finalizers": [FINALIZER]}}
    assert applied.freed == ["nightly-1"]
    # Only our finalizer goes.
    assert api.objects[f"{JOBS}/nightly-1"]["metadata"]["finalizers"] == ["example.com/keep"]


async def test_a_lost_claim_releases_nothing() -> None:
    api = server(
        held_job("nightly-1", "u1", finalizers=[FINALIZER]), version="2"
    )  # the schedule was written after it was read
    decision = Decision(status={}, free=(JobToFree("nightly-1", "u1"),))
    await applier(api).apply(schedule(), decision)
    assert api.calls == [("replace", STATUS)]
    assert api.objects[f"{JOBS}/nightly-1"]["metadata"]["finalizers"] == [FINALIZER]


async def test_a_held_job_of_history_is_deleted_and_released_together() -> None:
    """Its outcome is recorded (clean-up deletes no other), so its release need not wait
    for the delete: the two go at once, after the creates (`Applier._prune`)."""
    api = server(held_job("nightly-0", "u0", finalizers=[FINALIZER]), held_job("nightly-old", "u9"))
    decision = Decision(
        status=None,
        creates=(create("nightly-2"),),
        prune=(
            JobToDelete("nightly-0", "u0", "history", has_finalizer=True),
            JobToDelete("nightly-old", "u9", "history"),
        ),
    )
    await applier(api).apply(schedule(), decision)
    assert api.calls[0] == ("create", f"{JOBS}/nightly-2")
    assert sorted(api.calls[1:]) == [
        ("delete", f"{JOBS}/nightly-0"),
        ("delete", f"{JOBS}/nightly-old"),
        ("patch", f"{JOBS}/nightly-0"),
    ]
    assert all(r.error is None for r in api.requests)
    # Deleted and released, the held Job went.
    assert [j["metadata"]["name"] for j in api.items(JOBS)] == ["nightly-2"]


def test_building_a_job_leaves_the_schedule_as_it_was() -> None:
    """The template is shared, not copied: nothing of the schedule may change."""
    schedule = {
        "metadata": {"name": "nightly", "namespace": "ns", "uid": "u-1"},
        "spec": {
            "jobTemplate": {
                "metadata": {"labels": {"team": "a"}, "annotations": {"x": "1"}},
                "spec": {"template": {"spec": {"containers": [{"name": "c"}]}}},
            }
        },
    }
    before = copy.deepcopy(schedule)
    body = build_job(
        schedule=schedule,
        job_name="nightly-1",
        tick=datetime(2026, 11, 26, tzinfo=UTC),
        epoch=3,
        leader="me",
        installation="ns/punctual-leader",
        shard="1-of-4",
    )
    assert schedule == before
    assert body["metadata"]["labels"]["punctual.dev/shard"] == "1-of-4"
    assert body["metadata"]["labels"]["team"] == "a"
    json.dumps(body)  # what is sent
