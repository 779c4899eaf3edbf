"""A schedule that ends: `finishing.count_runs` and its `Runs` record, checked directly.

maxRuns counts scheduled runs only (manual and backfill firings do not count); once
none is left the plan has no next tick, nothing to claim ahead, and says why it is
finished. Same fixed instant as `builders`.
"""

from __future__ import annotations

from typing import Any

from punctual.core.finishing import count_runs, finished_message
from punctual.core.models import CronScheduleSpec, CronScheduleStatus, RecordedFiring
from punctual.core.planning import END_TIME_REACHED, MAX_RUNS_REACHED, TickPlan

from .builders import CREATED_, SKIPPED, T0, H, n

PLAN = TickPlan(
    due=(),
    missed=(),
    skipped=(),
    cursor=T0,
    fingerprint="f",
    next_tick=T0 + H,
    next_wake=T0 + H,
    upcoming=(T0 + H, T0 + 2 * H, T0 + 3 * H),
    limited=True,
)


def spec(**fields: Any) -> CronScheduleSpec:
    return CronScheduleSpec.model_validate({"schedule": "0 * * * *", "jobTemplate": {}, **fields})


def fired(tick_hours: int, **more: Any) -> RecordedFiring:
    tick = T0 + tick_hours * H
    return RecordedFiring(tick=tick, job=n(tick), outcome=CREATED_, epoch=1, **more)


def test_without_max_runs_nothing_is_counted_and_the_plan_stands() -> None:
    runs = count_runs(spec(), CronScheduleStatus(runs=4), PLAN, [fired(0)])
    assert runs.count is None and runs.plan is PLAN


def test_scheduled_creates_count_manual_backfill_and_skipped_ones_do_not() -> None:
    firings = [
        fired(0),
        fired(-1, manual=True),
        fired(-2, backfill=True),
        RecordedFiring(tick=T0 - 3 * H, outcome=SKIPPED, epoch=1, reason="x"),
    ]
    runs = count_runs(spec(maxRuns=10), CronScheduleStatus(runs=2), PLAN, firings)
    assert runs.count == 3


def test_the_upcoming_ticks_are_cut_to_the_runs_left() -> None:
    runs = count_runs(spec(maxRuns=4), CronScheduleStatus(runs=2), PLAN, [fired(0)])
    assert runs.count == 3
    assert runs.plan.upcoming == (T0 + H,) and runs.plan.next_tick == T0 + H
    assert runs.plan.finished is None


def test_the_last_run_finishes_the_plan_no_next_tick_nothing_to_claim_ahead() -> None:
    runs = count_runs(spec(maxRuns=3), CronScheduleStatus(runs=2), PLAN, [fired(0)])
    assert runs.count == 3
    assert runs.plan.next_tick is None and runs.plan.next_wake is None
    assert runs.plan.upcoming == () and runs.plan.finished == MAX_RUNS_REACHED
    assert PLAN.next_tick == T0 + H  # the plan it was given is unchanged


def test_the_finished_message_says_which_end_was_reached() -> None:
    assert finished_message(MAX_RUNS_REACHED) == "spec.maxRuns scheduled runs have fired"
    assert finished_message(END_TIME_REACHED) == "no tick is left before spec.endTime"
