"""What fires when runs would overlap: `overlapping.choose` and its `Overlap` record.

Each test gives the rule its inputs (the schedule as read, the candidates) and checks
the record it returns: what is created, what Replace deletes, each skip with its fixed
reason (the metric label) and its message, the buffer. Same fixed instant as
`builders`: T0 is a tick of the hourly schedule.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

import pytest

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


# -- spec.maxConcurrent ----------------------------------------------------------------------


def running(count: int) -> list[Any]:
    """`count` Jobs still running, of the ticks before T0, oldest first."""
    return [job(T0 - (count - i) * H, ACTIVE) for i in range(count)]


# (policy, runs running, candidates due) -> (ticks created, ticks skipped, Jobs replaced)
MAX_CONCURRENT_2 = [
    ("Allow", 0, 3, 2, 1, 0),
    ("Allow", 1, 2, 1, 1, 0),
    ("Allow", 2, 1, 0, 1, 0),
    ("Forbid", 1, 1, 1, 0, 0),
    ("Forbid", 2, 2, 0, 2, 0),
    ("Replace", 1, 1, 1, 0, 0),
    ("Replace", 2, 1, 1, 0, 1),
    ("Replace", 3, 2, 1, 1, 2),
    ("BufferOne", 1, 1, 1, 0, 0),
    ("BufferOne", 2, 1, 0, 0, 0),
    ("BufferAll", 0, 3, 2, 0, 0),
]


@pytest.mark.parametrize(
    ("policy", "live", "due_count", "created", "skipped", "replaced"), MAX_CONCURRENT_2
)
def test_max_concurrent_2_under_each_policy(
    policy: str, live: int, due_count: int, created: int, skipped: int, replaced: int
) -> None:
    spec = spec_body(concurrencyPolicy=policy, maxConcurrent=2)
    wanted = [due(T0 + i * H) for i in range(due_count)]
    overlap = decide_overlap(
        spec, read(spec, jobs=running(live)), wanted, now=T0 + (due_count - 1) * H + S
    )
    assert len(overlap.creates) == created
    assert len(overlap.skips) == skipped
    assert len(overlap.replaced) == replaced
    if policy in ("Allow", "Forbid") and created:  # the oldest that fit go first
        assert overlap.creates == tuple(wanted[:created])
    if policy == "Replace" and replaced:  # the oldest runs go, the newest candidate comes
        assert [j.name for j in overlap.replaced] == [j.name for j in running(live)[:replaced]]
        assert overlap.creates == (wanted[-1],)
    if policy.startswith("Buffer") and live + created == 2 and due_count > created:
        assert overlap.buffered, "the ticks that do not fit wait"


def test_a_tick_skipped_by_max_concurrent_names_the_limit_under_its_own_label() -> None:
    spec = spec_body(concurrencyPolicy="Allow", maxConcurrent=2)
    overlap = decide_overlap(spec, read(spec, jobs=running(2)), [due(T0)])
    [skip] = overlap.skips
    assert skip.reason is SkipReason.MAX_CONCURRENT and skip.reason.value == "maxConcurrent"
    assert skip.message == "maxConcurrent 2: 2 runs of this schedule still run"


def test_a_claim_being_recovered_counts_against_the_limit_and_is_never_turned_away() -> None:
    spec = spec_body(concurrencyPolicy="Allow", maxConcurrent=1)
    recovered = due(T0 - H)
    overlap = decide_overlap(
        spec, read(spec), [recovered, due(T0)], recovering=frozenset({recovered.job})
    )
    assert overlap.creates == (recovered,)
    assert [s.candidate for s in overlap.skips] == [due(T0)]


def test_unset_keeps_todays_meanings() -> None:
    allow = spec_body(concurrencyPolicy="Allow")
    overlap = decide_overlap(allow, read(allow, jobs=running(5)), [due(T0)])
    assert overlap.creates == (due(T0),)
    forbid = spec_body(concurrencyPolicy="Forbid")
    overlap = decide_overlap(forbid, read(forbid, jobs=running(1)), [due(T0)])
    assert overlap.creates == () and overlap.skips[0].reason is SkipReason.FORBID


def test_max_concurrent_is_bounded_as_the_crd_says() -> None:
    for bad in (0, 1001):
        with pytest.raises(ValueError, match=r"maxConcurrent|max_concurrent"):
            CronScheduleSpec.model_validate(spec_body(maxConcurrent=bad))


def test_a_claim_recovered_under_replace_still_replaces_what_runs_before_it() -> None:
    """Its leader died between the claim and the delete, or the delete failed: the next
    pass deletes the older run first, then creates the claimed one (never both running)."""
    running = job(T0 - H, ACTIVE)
    claimed = Candidate(n(T0), T0)
    overlap = concurrency(
        ConcurrencyPolicy.REPLACE, [claimed], [running], recovering=frozenset({claimed.job})
    )
    assert overlap.creates == (claimed,)
    assert [j.name for j in overlap.replaced] == [running.name]
    allowed = concurrency(
        ConcurrencyPolicy.ALLOW, [claimed], [running], recovering=frozenset({claimed.job})
    )
    assert allowed.replaced == ()
