"""What fires when runs would overlap: `overlapping.choose` and its `Overlap` record.

Each test gives the rule its inputs (the schedule as read, the candidates) and checks
the record it returns: what is created, what Replace deletes, each skip with its fixed
reason (the metric label) and its message, the buffer. Same fixed instant as
`builders`: T0 is a tick of the hourly schedule.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from punctual.core.models import ConcurrencyPolicy, CronScheduleSpec
from punctual.core.overlapping import Overlap, choose, concurrency
from punctual.core.records import Candidate, ScheduleRead, SkipReason
from punctual.core.triggers import parse_trigger

from .builders import ACTIVE, T0, H, M, S, iso, job, n, read, spec_body, status_body

NOTHING: frozenset[str] = frozenset()


def due(tick: datetime) -> Candidate:
    return Candidate(n(tick), tick)


def decide_overlap(
    spec: dict[str, Any],
    schedule: ScheduleRead,
    wanted: list[Candidate],
    *,
    recovering: frozenset[str] = NOTHING,
    now: datetime = T0 + S,
) -> Overlap:
    parsed = CronScheduleSpec.model_validate(spec)
    return choose(parsed, schedule, wanted, recovering=recovering, now=now)


def test_allow_creates_every_candidate_and_skips_none() -> None:
    spec = spec_body(concurrencyPolicy="Allow")
    overlap = decide_overlap(spec, read(spec, jobs=[job(T0 - H)]), [due(T0)])
    assert overlap.creates == (due(T0),)
    assert overlap.skips == () and overlap.replaced == ()


def test_forbid_skips_a_tick_while_a_job_runs_and_names_that_job() -> None:
    spec = spec_body(concurrencyPolicy="Forbid")
    overlap = decide_overlap(spec, read(spec, jobs=[job(T0 - H, ACTIVE)]), [due(T0)])
    assert overlap.creates == ()
    [skip] = overlap.skips
    assert skip.candidate == due(T0)
    assert skip.reason is SkipReason.FORBID
    assert skip.reason.value == "concurrencyPolicy=Forbid"
    assert skip.message == f"concurrencyPolicy Forbid: Job {n(T0 - H)} still runs"


def test_forbid_never_turns_away_a_claim_being_recovered() -> None:
    spec = spec_body(concurrencyPolicy="Forbid")
    recovered = due(T0 - H)
    overlap = decide_overlap(
        spec, read(spec), [recovered, due(T0)], recovering=frozenset({recovered.job})
    )
    assert overlap.creates == (recovered,)
    assert [s.candidate for s in overlap.skips] == [due(T0)]
    assert n(T0 - H) in overlap.skips[0].message  # the recovered claim runs: it blocks


def test_replace_deletes_what_runs_and_skips_all_but_the_newest_candidate() -> None:
    spec = spec_body(concurrencyPolicy="Replace")
    running = job(T0 - 2 * H, ACTIVE)
    overlap = decide_overlap(spec, read(spec, jobs=[running]), [due(T0 - H), due(T0)])
    assert overlap.creates == (due(T0),)
    assert [(j.name, j.uid) for j in overlap.replaced] == [(running.name, running.uid)]
    assert overlap.replaced[0].reason == f"replaced by {n(T0)}"
    [skip] = overlap.skips
    assert (skip.candidate, skip.reason) == (due(T0 - H), SkipReason.REPLACE)


def test_buffer_one_keeps_one_tick_waiting_and_skips_the_next() -> None:
    spec = spec_body(concurrencyPolicy="BufferOne")
    schedule = read(spec, jobs=[job(T0 - H, ACTIVE)])
    overlap = decide_overlap(spec, schedule, [due(T0), due(T0 + H)], now=T0 + H + S)
    assert overlap.creates == ()
    assert [b.job for b in overlap.buffered or ()] == [n(T0)]
    assert overlap.newly_buffered == (due(T0),)
    [skip] = overlap.skips
    assert (skip.candidate, skip.reason) == (due(T0 + H), SkipReason.BUFFER_ONE)
    assert skip.message == f"concurrencyPolicy BufferOne: tick {iso(T0)} is already buffered"


def test_a_buffered_tick_fires_under_its_own_name_once_nothing_runs() -> None:
    spec = spec_body(concurrencyPolicy="BufferAll")
    status = {**status_body(spec), "buffered": [{"tick": iso(T0), "job": n(T0)}]}
    overlap = decide_overlap(spec, read(spec, status), [due(T0 + H)], now=T0 + H + S)
    assert [c.job for c in overlap.creates] == [n(T0)]
    assert [b.job for b in overlap.buffered or ()] == [n(T0 + H)]
    assert overlap.newly_buffered == (due(T0 + H),)  # T0 was written before: no new Event


def test_a_buffered_tick_past_its_starting_deadline_is_late_not_fired() -> None:
    spec = spec_body(concurrencyPolicy="BufferAll", startingDeadlineSeconds=60)
    status = {**status_body(spec), "buffered": [{"tick": iso(T0), "job": n(T0)}]}
    overlap = decide_overlap(spec, read(spec, status), [], now=T0 + 2 * M)
    assert [c.job for c in overlap.late] == [n(T0)] and overlap.late_after == 60
    assert overlap.creates == () and overlap.buffered == ()


def test_the_buffer_deadline_is_when_the_oldest_scheduled_tick_goes_late() -> None:
    spec = spec_body(concurrencyPolicy="BufferAll", startingDeadlineSeconds=60)
    overlap = decide_overlap(spec, read(spec, jobs=[job(T0 - H, ACTIVE)]), [due(T0)])
    assert overlap.deadline is not None
    assert T0 + 60 * S < overlap.deadline <= T0 + 61 * S


def test_ticks_buffered_under_an_old_policy_are_skipped_under_one_fixed_label() -> None:
    old = spec_body(concurrencyPolicy="BufferAll")
    status = {**status_body(old), "buffered": [{"tick": iso(T0), "job": n(T0)}]}
    for policy in ("Forbid", "Allow", "Replace"):
        spec = spec_body(concurrencyPolicy=policy)
        overlap = decide_overlap(spec, read(spec, status), [], now=T0 + H)
        [skip] = overlap.skips
        assert skip.reason is SkipReason.UNBUFFERED  # not the new policy's name
        assert skip.message == f"concurrencyPolicy {policy}: no longer buffered"
        assert overlap.buffered is None  # not buffering: status.buffered goes


def test_a_trigger_with_its_own_policy_is_decided_after_the_schedules() -> None:
    spec = spec_body(concurrencyPolicy="Allow")
    asked = parse_trigger('{"request": "r1", "concurrencyPolicy": "Forbid"}')
    trigger = Candidate("manual-r1", T0 + S, True, "r1", trigger=asked)
    overlap = decide_overlap(spec, read(spec), [due(T0), trigger])
    assert overlap.creates == (due(T0),)  # the schedule's own tick, under Allow
    [skip] = overlap.skips
    assert (skip.candidate, skip.reason) == (trigger, SkipReason.FORBID)
    assert n(T0) in skip.message  # blocked by the Job this decision creates


def test_concurrency_alone_leaves_its_inputs_as_they_were() -> None:
    wanted = [due(T0 - H), due(T0)]
    live = [job(T0 - 2 * H, ACTIVE)]
    before = (list(wanted), list(live))
    concurrency(ConcurrencyPolicy.REPLACE, wanted, live, recovering=NOTHING)
    assert (wanted, live) == before
