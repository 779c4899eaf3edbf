"""A schedule that ends: `endTime` and `maxRuns`, and why it is Finished.

Why it exists: a schedule with an end runs out of ticks: past its endTime (the planner
says so), or once maxRuns scheduled runs have fired (manual and backfill firings do not
count). `count_runs` counts the runs a decision fires and finishes its plan when none is
left (no next tick, none claimed ahead); it returns a `Runs` record. `status` writes the
Finished condition from the plan (True: EndTimeReached, MaxRunsReached, with one Event,
and Ready False; False again once an edit leaves ticks), with `finished_message`.

What it must never do: let any leader, new or old, fire more than maxRuns. A run is
counted in the status write that claims its tick, and `deciding` claims a tick ahead
only while a run is left. Like all of `punctual.core`, it never talks to the API server,
reads the clock, or changes its arguments.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass

from punctual.core.models import CronScheduleSpec, CronScheduleStatus, FiringOutcome, RecordedFiring
from punctual.core.planning import MAX_RUNS_REACHED, TickPlan


@dataclass(frozen=True, slots=True)
class Runs:
    """status.runs after this decision (None: no maxRuns), and the plan, finished when no
    run is left."""

    count: int | None
    plan: TickPlan


def count_runs(
    spec: CronScheduleSpec,
    old: CronScheduleStatus,
    plan: TickPlan,
    fired: Sequence[RecordedFiring],
) -> Runs:
    """Count the scheduled ticks fired in this decision under maxRuns (manual triggers and
    backfills do not count), and finish the plan when none is left: no next tick, none
    claimed ahead.

    `status.runs` counts a tick in the write that moves the cursor over it fired, which
    is the write that claims it (or, for a tick claimed ahead, the claim ahead is
    written first and counted from its Job once seen), so no leader, new or old, can
    fire more than maxRuns: a claim ahead is made only while a run is left.
    """
    if spec.max_runs is None:
        return Runs(None, plan)
    runs = (old.runs or 0) + sum(
        1 for f in fired if f.outcome is FiringOutcome.CREATED and not f.manual and not f.backfill
    )
    left = spec.max_runs - runs
    if left <= 0:
        done = dataclasses.replace(
            plan, next_tick=None, next_wake=None, upcoming=(), finished=MAX_RUNS_REACHED
        )
        return Runs(runs, done)
    return Runs(runs, dataclasses.replace(plan, upcoming=plan.upcoming[:left]))


def finished_message(reason: str) -> str:
    """The Finished condition's message (and Ready's, while finished) for `reason`."""
    if reason == MAX_RUNS_REACHED:
        return "spec.maxRuns scheduled runs have fired"
    return "no tick is left before spec.endTime"
