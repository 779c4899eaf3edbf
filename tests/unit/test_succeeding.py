"""Whether a schedule still succeeds in time: `succeeding.freshness` and its record.

With successDeadlineSeconds D and T the first tick after the newest successful Job's
tick (or after creation), the schedule is Stale from T + D until a Job of T or of a
later tick succeeds. Same fixed instant as `builders` (created at T0 - 30 min, hourly).
"""

from __future__ import annotations

from punctual.core.models import CronScheduleSpec
from punctual.core.succeeding import Freshness, freshness

from .builders import BROKEN, DONE, T0, H, M, S, iso, job, read, spec_body, status_body

SPEC = spec_body(successDeadlineSeconds=600)
DEADLINE = 10 * M


def parsed(spec: dict[str, object]) -> CronScheduleSpec:
    return CronScheduleSpec.model_validate(spec)


def test_without_the_objective_it_says_nothing() -> None:
    spec = spec_body()
    assert freshness(parsed(spec), read(spec), now=T0 + 5 * H) == Freshness(objective=False)


def test_a_new_schedule_is_fresh_until_its_first_tick_plus_the_deadline_and_wakes_then() -> None:
    record = freshness(parsed(SPEC), read(SPEC), now=T0 + DEADLINE - S)
    assert record == Freshness(objective=True, last_tick=None, stale=None, wake=T0 + DEADLINE)


def test_no_success_by_the_deadline_is_stale_naming_the_tick_and_the_deadline() -> None:
    record = freshness(parsed(SPEC), read(SPEC, jobs=[job(T0, BROKEN)]), now=T0 + DEADLINE)
    assert record.stale == (
        f"no Job of tick {iso(T0)} or later has succeeded within "
        f"successDeadlineSeconds 600 (by {iso(T0 + DEADLINE)})"
    )
    assert record.wake is None  # nothing to wake for: it is stale already


def test_a_success_moves_the_next_deadline_to_the_tick_after_it() -> None:
    record = freshness(parsed(SPEC), read(SPEC, jobs=[job(T0, DONE)]), now=T0 + H + M)
    assert record.stale is None and record.last_tick == T0
    assert record.wake == T0 + H + DEADLINE


def test_the_newest_success_outlives_the_jobs_history_in_status() -> None:
    status = {**status_body(SPEC), "lastSuccessfulTick": iso(T0 + H)}
    record = freshness(parsed(SPEC), read(SPEC, status), now=T0 + 2 * H + M)
    assert record.last_tick == T0 + H and record.stale is None
