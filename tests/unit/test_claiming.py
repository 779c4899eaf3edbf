"""The claims of one decision: `claiming`'s records, checked directly.

What is in flight and recovered, which due ticks were already fired on a claim made
ahead, the manual trigger, the claims this write makes (and their epochs), the claim
ahead of the next tick, the Jobs whose finalizer may go, history clean-up and when the
writes are needed by. Same fixed instant and builders as test_deciding.
"""

from __future__ import annotations

import dataclasses
from datetime import timedelta
from typing import Any

from punctual.core import claiming
from punctual.core.decisions import JobToFree
from punctual.core.jobs import manual_job_name
from punctual.core.keys import ANNOTATION_TRIGGER
from punctual.core.models import CronScheduleSpec, InFlightClaim
from punctual.core.planning import DueTick, TickPlan
from punctual.core.records import Candidate
from punctual.core.stamping import FiringKind

from .builders import (
    ACTIVE,
    BROKEN,
    CREATED_,
    DONE,
    NAME,
    PREVIOUS_EPOCH,
    T0,
    H,
    M,
    S,
    iso,
    job,
    n,
    read,
    spec_body,
    status_body,
)

EPOCH = 7
SPEC = spec_body()
NOTHING_AHEAD = claiming.Ahead(NAME, None, None, 0, {})


def plan(*due: Any, next_tick: Any = None, suspended: bool = False) -> TickPlan:
    return TickPlan(
        due=tuple(DueTick(t, t) for t in due),
        missed=(),
        skipped=(),
        cursor=due[-1] if due else T0 - H,
        fingerprint="f",
        next_tick=next_tick,
        next_wake=next_tick,
        suspended=suspended,
    )


def claimed(*ticks: Any, cursor: Any = T0 - H, **status: Any) -> dict[str, Any]:
    return {**status_body(SPEC, cursor=cursor, in_flight=ticks), **status}


def test_claims_ahead_are_scheduled_ticks_beyond_the_cursor_only() -> None:
    status = claimed(T0 - 2 * H, T0)
    status["inFlight"].append(
        {"tick": "2026-11-25T12:00:00Z", "job": manual_job_name(NAME, "r1"), "epoch": 6}
    )
    status["inFlight"].append(
        {"tick": "2026-11-25T13:00:00Z", "job": n(T0 + H), "epoch": 6, "backfill": True}
    )
    ahead = claiming.claimed_ahead(read(SPEC, status))
    assert list(ahead.listed) == [n(T0)] and ahead.through is None
    assert n(T0) in ahead and n(T0 + H) not in ahead and manual_job_name(NAME, "r1") not in ahead


def test_a_window_claims_each_scheduled_tick_after_the_cursor_up_to_its_end() -> None:
    status = {**claimed(cursor=T0 - H), "claimedThrough": iso(T0 + H), "claimEpoch": 6}
    ahead = claiming.claimed_ahead(read(SPEC, status))
    assert [n(t) in ahead for t in (T0 - H, T0, T0 + 30 * M, T0 + H, T0 + 2 * H)] == [
        False,  # at the cursor: decided
        True,
        True,  # any instant a spec's tick may be: the plan says which are ticks
        True,
        False,  # beyond the window
    ]
    assert ahead[n(T0)] == InFlightClaim(tick=T0, job=n(T0), epoch=6)
    assert manual_job_name(NAME, "r1") not in ahead  # only scheduled names
    assert f"{n(T0)}-x" not in ahead and "other-1795600800" not in ahead


def test_a_window_is_claimed_when_the_next_tick_is_not_in_it_or_half_of_it_is_used() -> None:
    window = timedelta(seconds=60)
    status = {**claimed(cursor=T0 - H), "claimedThrough": iso(T0 + 60 * S), "claimEpoch": 6}
    ahead = claiming.claimed_ahead(read(SPEC, status))
    nxt = plan(next_tick=T0 + 10 * S)
    assert not claiming.window_due(ahead, nxt, now=T0, window=window)
    assert claiming.window_due(ahead, nxt, now=T0 + 31 * S, window=window)  # half used
    assert claiming.window_due(ahead, plan(next_tick=T0 + 61 * S), now=T0, window=window)
    held = plan(next_tick=T0 + 61 * S, suspended=True)
    assert not claiming.window_due(ahead, held, now=T0, window=window)
    none = claiming.claimed_ahead(read(SPEC, claimed()))
    assert claiming.window_due(none, nxt, now=T0, window=window)
    # The new window, or the written one kept when it reaches no farther.
    assert claiming.claim_window(ahead, T0 + 90 * S, epoch=EPOCH) == claiming.Window(
        T0 + 90 * S, EPOCH
    )
    assert claiming.claim_window(ahead, T0 + 30 * S, epoch=EPOCH) == claiming.Window(T0 + 60 * S, 6)
    assert claiming.claim_window(none, None, epoch=EPOCH) == claiming.Window(None, None)


def test_a_written_claim_whose_job_is_not_seen_is_recovered_and_a_seen_one_resolved() -> None:
    schedule = read(SPEC, claimed(T0 - 2 * H, T0 - H, cursor=T0 - H), [job(T0 - 2 * H)])
    gathered = claiming.gather(schedule, plan(), NOTHING_AHEAD, epoch=EPOCH, now=T0)
    assert [c.job for c in gathered.in_flight] == [n(T0 - H)]
    assert gathered.recovering == (Candidate(n(T0 - H), T0 - H),)
    assert gathered.due == () and gathered.trigger is None and gathered.notes == ()


def test_a_tick_fired_on_its_claim_ahead_is_recorded_with_that_claims_epoch() -> None:
    schedule = read(SPEC, claimed(T0), [job(T0)])
    ahead = claiming.claimed_ahead(schedule)
    fired = claiming.fired_ahead(schedule, ahead)
    assert claiming.fired_cursor(schedule, fired) == T0  # planned from there: not due again
    gathered = claiming.gather(schedule, plan(), ahead, epoch=EPOCH, now=T0 + S)
    assert [(f.job, f.outcome, f.epoch) for f in gathered.fired] == [
        (n(T0), CREATED_, PREVIOUS_EPOCH)
    ]
    assert gathered.in_flight == () and gathered.recovering == ()  # resolved, not recovered


def test_a_due_tick_whose_job_exists_is_recorded_not_created_again() -> None:
    schedule = read(SPEC, claimed(), [job(T0)])
    gathered = claiming.gather(
        schedule, plan(T0, T0 + H), NOTHING_AHEAD, epoch=EPOCH, now=T0 + H + S
    )
    assert gathered.due == (Candidate(n(T0 + H), T0 + H),)
    assert [(f.job, f.epoch) for f in gathered.fired] == [(n(T0), EPOCH)]


def test_a_new_trigger_request_is_a_candidate_now_and_one_event() -> None:
    schedule = read(SPEC, claimed(), annotations={ANNOTATION_TRIGGER: "r1"})
    gathered = claiming.gather(schedule, plan(), NOTHING_AHEAD, epoch=EPOCH, now=T0 + M)
    assert gathered.trigger is not None
    assert (gathered.trigger.job, gathered.trigger.tick) == (manual_job_name(NAME, "r1"), T0 + M)
    assert gathered.trigger.kind is FiringKind.MANUAL
    assert [(e.type, e.reason) for e in gathered.notes] == [("Normal", "Triggered")]
    handled = read(SPEC, claimed(lastTrigger="r1"), annotations={ANNOTATION_TRIGGER: "r1"})
    assert claiming.gather(handled, plan(), NOTHING_AHEAD, epoch=EPOCH, now=T0 + M).trigger is None


def test_an_unreadable_trigger_is_reported_and_fires_nothing() -> None:
    schedule = read(SPEC, claimed(), annotations={ANNOTATION_TRIGGER: "{not json"})
    gathered = claiming.gather(schedule, plan(), NOTHING_AHEAD, epoch=EPOCH, now=T0)
    assert gathered.trigger is None
    assert [e.reason for e in gathered.notes] == ["InvalidTrigger"]
    assert claiming.handled_trigger(schedule) == "{not json"  # reported once, not again


def test_a_claim_is_new_with_this_epoch_unless_it_was_claimed_ahead_or_is_recovered() -> None:
    schedule = read(SPEC, claimed(T0 - H, T0, cursor=T0 - 2 * H))
    listed = {n(T0): InFlightClaim(tick=T0, job=n(T0), epoch=PREVIOUS_EPOCH)}
    ahead = dataclasses.replace(NOTHING_AHEAD, listed=listed)
    gathered = claiming.gather(schedule, plan(), ahead, epoch=EPOCH, now=T0 + S)
    creates = [*gathered.recovering, Candidate(n(T0), T0), Candidate(n(T0 + H), T0 + H)]
    claims = claiming.claim(creates, gathered, ahead, epoch=EPOCH)
    assert {c.job: c.epoch for c in claims.in_flight} == {
        n(T0 - H): PREVIOUS_EPOCH,  # recovered: as written
        n(T0): PREVIOUS_EPOCH,  # claimed ahead: as written
        n(T0 + H): EPOCH,
    }
    assert claims.new == (n(T0 + H),)
    assert [f.job for f in claims.created] == [n(T0), n(T0 + H)]


def test_a_finalized_job_being_deleted_is_released_after_its_claim_is_written() -> None:
    going = dataclasses.replace(job(T0 - H, DONE), has_finalizer=True, deleting=True)
    settled = read(SPEC, claimed(), [going])
    freed = claiming.free(settled, claiming.claimed_ahead(settled))
    assert freed == claiming.Freeing((JobToFree(going.name, going.uid),), False)
    in_flight = read(SPEC, claimed(T0 - H, cursor=T0 - H), [going])
    # This write resolves that claim first.
    assert claiming.free(in_flight, claiming.claimed_ahead(in_flight)).needs_status is True
    # A Job of the written window, not yet recorded: this write records it (moving the
    # cursor past it) first, or its tick would be due again once the Job is gone.
    status = {**claimed(cursor=T0 - 2 * H), "claimedThrough": iso(T0), "claimEpoch": 6}
    windowed = read(SPEC, status, [going])
    assert claiming.free(windowed, claiming.claimed_ahead(windowed)).needs_status is True


def test_history_keeps_the_newest_finished_jobs_and_never_one_it_is_told_to_keep() -> None:
    spec = CronScheduleSpec.model_validate(
        spec_body(successfulJobsHistoryLimit=1, failedJobsHistoryLimit=0)
    )
    jobs = [job(T0 - 3 * H, DONE), job(T0 - 2 * H, DONE), job(T0 - H, DONE), job(T0, BROKEN)]
    pruned = claiming.prune(spec, jobs, keep={n(T0 - 3 * H)})
    assert [(j.name, j.reason) for j in pruned] == [
        (n(T0 - 2 * H), "beyond succeeded history limit 1"),
        (n(T0), "beyond failed history limit 0"),
    ]
    assert claiming.prune(spec, [job(T0, ACTIVE)], keep=set()) == ()


def test_writes_are_due_now_for_a_create_by_its_tick_for_a_new_claim_else_never() -> None:
    schedule = read(SPEC, claimed(T0))
    new = InFlightClaim(tick=T0 + H, job=n(T0 + H), epoch=EPOCH)
    written = InFlightClaim(tick=T0, job=n(T0), epoch=PREVIOUS_EPOCH)
    kept = claiming.Window(None, None)
    due = claiming.due_by(schedule, [Candidate(n(T0), T0)], [], [], kept, T0 + H, T0 + S)
    assert due == T0 + S
    assert claiming.due_by(schedule, [], [], [written, new], kept, T0 + H, T0 + S) == T0 + H
    assert claiming.due_by(schedule, [], [], [written], kept, T0 + H, T0 + S) is None
    # A first window: by its first tick. A window claimed again: by the written one's end.
    first = claiming.Window(T0 + 2 * H, EPOCH)
    assert claiming.due_by(schedule, [], [], [written], first, T0 + H, T0 + S) == T0 + H
    status = {**claimed(T0), "claimedThrough": iso(T0 + H), "claimEpoch": 6}
    windowed = read(SPEC, status)
    assert claiming.due_by(windowed, [], [], [written], first, T0 + H, T0 + S) == T0 + H
    same = claiming.Window(T0 + H, 6)
    assert claiming.due_by(windowed, [], [], [written], same, T0 + H, T0 + S) is None
