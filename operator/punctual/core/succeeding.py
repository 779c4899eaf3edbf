"""Whether a schedule still succeeds in time: `successDeadlineSeconds` and staleness.

Why it exists: a schedule can fire on time and still do no good: its Jobs fail, hang,
or are never created (skipped, missed, suspended, paused). With successDeadlineSeconds D
and T the first tick after the newest successful Job's tick (or after creation), the
schedule is Stale from T + D until a Job of T or of a later tick succeeds. `freshness`
returns a `Freshness` record: whether the objective is set, the newest successful tick
(kept in status.lastSuccessfulTick, so that it outlives the Job's history), why the
schedule is Stale if it is, and when it would turn Stale (`deciding` wakes then). `status`
writes the Stale condition from it, with one Warning Event a transition.

What it must never do: say anything about freshness for a schedule without the
objective, or change its arguments. Like all of `punctual.core`, it never talks to the
API server or reads the clock.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from punctual.core.jobs import JobState
from punctual.core.models import CronScheduleSpec, FiringOutcome
from punctual.core.planning import tick_source
from punctual.core.records import ScheduleRead
from punctual.core.schedules import ScheduleError
from punctual.core.times import format_time


@dataclass(frozen=True, slots=True)
class Freshness:
    """successDeadlineSeconds in this decision."""

    objective: bool  # successDeadlineSeconds is set
    last_tick: datetime | None = None  # status.lastSuccessfulTick
    stale: str | None = None  # why the schedule is Stale; None: it is fresh
    wake: datetime | None = None  # when it would turn Stale


def last_success(schedule: ScheduleRead) -> datetime | None:
    """The tick of the schedule's newest run known to have succeeded: among its Jobs, its
    recorded firings, and status.lastSuccessfulTick (PUNCTUAL_LAST_SUCCESSFUL_TICK)."""
    old = schedule.old
    ticks = [j.tick for j in schedule.ours if j.state is JobState.SUCCEEDED and j.tick]
    ticks += [f.tick for f in old.recent_firings if f.outcome is FiringOutcome.SUCCEEDED]
    return max([*ticks, *filter(None, [old.last_successful_tick])], default=None)


def freshness(spec: CronScheduleSpec, schedule: ScheduleRead, *, now: datetime) -> Freshness:
    """Stale when the first tick after the newest successful Job's tick (or after
    creation) is older than the deadline with no Job of it, or of a later tick,
    succeeded."""
    deadline = spec.success_deadline_seconds
    if deadline is None:
        return Freshness(objective=False)
    succeeded = [j.tick for j in schedule.ours if j.state is JobState.SUCCEEDED and j.tick]
    last = max([*succeeded, *filter(None, [schedule.old.last_successful_tick])], default=None)
    try:
        first = tick_source(spec, uid=schedule.uid).next_tick(last or schedule.created)
    except ScheduleError:
        first = None
    due = first + timedelta(seconds=deadline) if first is not None else None
    if first is None or due is None or now < due:
        return Freshness(objective=True, last_tick=last, wake=due)
    message = (
        f"no Job of tick {format_time(first)} or later has succeeded within "
        f"successDeadlineSeconds {deadline} (by {format_time(due)})"
    )
    return Freshness(objective=True, last_tick=last, stale=message)
