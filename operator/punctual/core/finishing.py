"""A schedule that ends: `endTime` and `maxRuns`, and the Finished condition.

Why it exists: a schedule with an end runs out of ticks: past its endTime (the planner
says so), or once maxRuns scheduled runs have fired (manual and backfill firings do not
count). These rules count the runs a decision fires, finish its plan when none is left
(no next tick, none claimed ahead), and say so: Finished True (EndTimeReached,
MaxRunsReached) with one Event, and Ready False. An edit that leaves ticks again (a later
endTime, a higher maxRuns) turns Finished False.

What it must never do: let any leader, new or old, fire more than maxRuns. A run is
counted in the status write that claims its tick, and `deciding` claims a tick ahead
only while a run is left. Like all of `punctual.core`, it never talks to the API server
or reads the clock.
"""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime

from punctual.core.drafting import Draft, EventNote, set_condition
from punctual.core.models import CronScheduleSpec, CronScheduleStatus, FiringOutcome
from punctual.core.planning import MAX_RUNS_REACHED, TickPlan


def count_runs(
    spec: CronScheduleSpec, old: CronScheduleStatus, plan: TickPlan, draft: Draft
) -> tuple[int | None, TickPlan]:
    """Count the scheduled ticks fired in this decision under maxRuns (manual triggers do
    not count), and finish the plan when none is left: no next tick, none claimed ahead.

    `status.runs` counts a tick in the write that moves the cursor over it fired, which
    is the write that claims it (or, for a tick claimed ahead, the claim ahead is
    written first and counted from its Job once seen), so no leader, new or old, can
    fire more than maxRuns: a claim ahead is made only while a run is left.
    """
    if spec.max_runs is None:
        return None, plan
    fired = sum(
        1
        for f in draft.firings
        if f.outcome is FiringOutcome.CREATED and not f.manual and not f.backfill
    )
    runs = (old.runs or 0) + fired
    left = spec.max_runs - runs
    if left <= 0:
        return runs, replace(
            plan, next_tick=None, next_wake=None, upcoming=(), finished=MAX_RUNS_REACHED
        )
    return runs, replace(plan, upcoming=plan.upcoming[:left])


def with_finished(
    status: CronScheduleStatus, plan: TickPlan, *, now: datetime, generation: int, draft: Draft
) -> CronScheduleStatus:
    """The Finished condition, for a schedule with endTime or maxRuns (or that had one):
    True once no tick is left (EndTimeReached, MaxRunsReached), with one Event; Ready
    turns False then. An edit that leaves ticks again (a later endTime, a higher maxRuns)
    turns it False."""
    conditions = list(status.conditions)
    had = any(c.type == "Finished" for c in conditions)
    if not (plan.limited or had):
        return status
    reason = plan.finished
    if reason is None:
        set_condition(
            conditions,
            kind="Finished",
            status="False",
            reason="TicksLeft",
            message="",
            now=now,
            generation=generation,
        )
        return status.model_copy(update={"conditions": conditions})
    message = (
        "spec.maxRuns scheduled runs have fired"
        if reason == MAX_RUNS_REACHED
        else "no tick is left before spec.endTime"
    )
    if set_condition(
        conditions,
        kind="Finished",
        status="True",
        reason=reason,
        message=message,
        now=now,
        generation=generation,
    ):
        draft.events.append(EventNote("Normal", "Finished", f"Finished: {message}"))
    set_condition(
        conditions,
        kind="Ready",
        status="False",
        reason="Finished",
        message=message,
        now=now,
        generation=generation,
    )
    return status.model_copy(update={"conditions": conditions})
