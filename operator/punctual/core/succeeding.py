"""Whether a schedule still succeeds in time: `successDeadlineSeconds` and the Stale condition.

Why it exists: a schedule can fire on time and still do no good: its Jobs fail, hang,
or are never created (skipped, missed, suspended, paused). With successDeadlineSeconds D
and T the first tick after the newest successful Job's tick (or after creation), the
schedule is Stale from T + D until a Job of T or of a later tick succeeds: condition
Stale with one Warning Event, and `deciding` wakes at T + D to say so on time. The
newest successful tick is kept in status.lastSuccessfulTick, so that it outlives the
Job's history.

What it must never do: write anything about freshness for a schedule without the
objective. Like all of `punctual.core`, it never talks to the API server or reads the
clock.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from punctual.core.drafting import Draft, EventNote, Schedule, set_condition
from punctual.core.jobs import JobState
from punctual.core.models import CronScheduleSpec, CronScheduleStatus
from punctual.core.planning import tick_source
from punctual.core.schedules import ScheduleError
from punctual.core.times import format_time


def with_freshness(
    status: CronScheduleStatus,
    spec: CronScheduleSpec,
    schedule: Schedule,
    *,
    now: datetime,
    draft: Draft,
) -> tuple[CronScheduleStatus, datetime | None]:
    """successDeadlineSeconds: Stale when the first tick after the newest successful Job's
    tick (or after creation) is older than the deadline with no Job of it, or of a later
    tick, succeeded. Returns the status and when it would turn Stale (to wake then)."""
    conditions = [c for c in status.conditions if c.type != "Stale"]
    deadline = spec.success_deadline_seconds
    if deadline is None:
        return status.model_copy(
            update={"conditions": conditions, "last_successful_tick": None}
        ), None
    succeeded = [j.tick for j in schedule.ours if j.state is JobState.SUCCEEDED and j.tick]
    last = max([*succeeded, *filter(None, [schedule.old.last_successful_tick])], default=None)
    try:
        first = tick_source(spec, uid=schedule.uid).next_tick(last or schedule.created)
    except ScheduleError:
        first = None
    due = first + timedelta(seconds=deadline) if first is not None else None
    conditions = list(status.conditions)
    if due is not None and now >= due:
        assert first is not None
        message = (
            f"no Job of tick {format_time(first)} or later has succeeded within "
            f"successDeadlineSeconds {deadline} (by {format_time(due)})"
        )
        if set_condition(
            conditions, kind="Stale", status="True", reason="NoSuccess", message=message,
            now=now, generation=schedule.generation,
        ):  # fmt: skip
            draft.events.append(EventNote("Warning", "Stale", message))
        wake = None
    else:
        set_condition(
            conditions, kind="Stale", status="False", reason="Fresh", message="",
            now=now, generation=schedule.generation,
        )  # fmt: skip
        wake = due
    return status.model_copy(update={"conditions": conditions, "last_successful_tick": last}), wake
