"""What keeps a schedule from firing for a while, and the conditions that say so.

Why it exists: three things hold firing back without deleting the schedule. The user's
suspension (`spec.suspend`, `spec.suspendUntil`); a pause after failures
(`pauseOnFailure`: so many failed Jobs in a row pause firing until a resume request,
`punctual resume`, or until pauseOnFailure leaves the spec); and FreezeWindows
(`freezing` says which hold the schedule and until when: a Skip window skips each tick
inside it, naming the window; a Defer window holds firing like a pause, and `deciding`
plans what runs when it ends). `deciding` asks these rules what holds the schedule
before it plans, and lets them write the Paused and Frozen conditions (and the reason
Ready gives while suspended), with one Event a transition.

What it must never do: edit the spec (a pause and a resume live in status and an
annotation), or end a pause after failures by itself. Like all of `punctual.core`, it
never talks to the API server or reads the clock.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Final

from punctual.core.drafting import Candidate, Draft, EventNote, Schedule, record_skip, set_condition
from punctual.core.freezing import Freeze, FreezeAction, holding
from punctual.core.jobs import JobState
from punctual.core.models import (
    MAX_RECENT_FIRINGS,
    CronScheduleSpec,
    CronScheduleStatus,
    FiringOutcome,
)
from punctual.core.times import EPOCH, format_time

# The annotation `punctual resume` sets to resume a schedule paused by pauseOnFailure;
# each distinct value resumes once. Pausing and resuming never edit the spec.
RESUME_ANNOTATION: Final = "punctual.dev/resume"


def suspension(spec: CronScheduleSpec, now: datetime) -> tuple[str, str] | None:
    """Why the user suspended firing (reason, message), or None."""
    if spec.suspend:
        return "Suspended", "spec.suspend is true: no tick fires"
    if spec.suspend_until is not None and now < spec.suspend_until:
        return "SuspendedUntil", f"no tick fires before {format_time(spec.suspend_until)}"
    return None


@dataclass(frozen=True, slots=True)
class Hold:
    """pauseOnFailure in this decision: the failure count, and whether firing is paused."""

    failures: int | None  # failed Jobs in a row; None: pauseOnFailure is not set
    failed: tuple[str, ...]  # the newest failed Jobs, for the message
    paused: bool
    resumed: str | None  # the resume request handled in this decision


def hold(schedule: Schedule, spec: CronScheduleSpec) -> Hold:
    """pauseOnFailure: count the failed Jobs in a row (scheduled, manual and backfill
    alike, in tick order; a success resets the count) and decide whether firing is
    paused. A pause ends only by a resume request (`punctual resume`) or by removing
    pauseOnFailure from the spec: never by itself."""
    old = schedule.old
    request = schedule.annotations.get(RESUME_ANNOTATION)
    resumed = request if request and request != old.last_resume else None
    if spec.pause_on_failure is None:
        return Hold(failures=None, failed=(), paused=False, resumed=resumed)
    # Each finished Job is counted once: when status does not yet record its outcome.
    # Older than everything status still records (a full recentFirings), it was counted.
    final = (FiringOutcome.FAILED, FiringOutcome.SUCCEEDED, FiringOutcome.REPLACED)
    recorded = {f.job: f.outcome for f in old.recent_firings if f.job is not None}
    full = len(old.recent_firings) >= MAX_RECENT_FIRINGS
    oldest = min((f.tick for f in old.recent_firings), default=None)
    count = old.consecutive_failures or 0
    failed: list[str] = []
    for firing in sorted(old.recent_firings, key=lambda f: f.tick):
        if firing.outcome is FiringOutcome.SUCCEEDED:
            failed = []
        elif firing.outcome is FiringOutcome.FAILED and firing.job is not None:
            failed.append(firing.job)
    for job in sorted((j for j in schedule.ours if j.state is not JobState.ACTIVE),
                      key=lambda j: (j.tick or EPOCH, j.name)):  # fmt: skip
        if recorded.get(job.name) in final:
            continue
        if full and oldest is not None and (job.tick is None or job.tick < oldest):
            continue
        if job.state is JobState.FAILED:
            count += 1
            failed.append(job.name)
        else:
            count = 0
            failed = []
    if resumed is not None:
        count = 0
    was_paused = any(c.type == "Paused" and c.status == "True" for c in old.conditions)
    paused = resumed is None and (was_paused or count >= spec.pause_on_failure.consecutive_failures)
    newest = tuple(reversed(failed))[: spec.pause_on_failure.consecutive_failures]
    return Hold(failures=count, failed=newest, paused=paused, resumed=resumed)


def with_hold(
    status: CronScheduleStatus,
    hold: Hold,
    spec: CronScheduleSpec,
    name: str,
    *,
    now: datetime,
    generation: int,
    draft: Draft,
) -> CronScheduleStatus:
    """The Paused condition, the failure count and the last resume request handled."""
    conditions = list(status.conditions)
    updates: dict[str, Any] = {"consecutive_failures": hold.failures}
    if hold.resumed is not None:
        updates["last_resume"] = hold.resumed
    had = any(c.type == "Paused" for c in conditions)
    if spec.pause_on_failure is None and not had:
        return status.model_copy(update=updates)
    if hold.paused:
        jobs = ", ".join(hold.failed)
        message = (
            f"{hold.failures} Jobs failed in a row ({jobs}); "
            f"`punctual resume {name}` resumes firing"
        )
        if set_condition(
            conditions,
            kind="Paused",
            status="True",
            reason="ConsecutiveFailures",
            message=message,
            now=now,
            generation=generation,
        ):
            draft.events.append(EventNote("Warning", "Paused", f"Firing paused: {message}"))
        set_condition(
            conditions,
            kind="Ready",
            status="False",
            reason="Paused",
            message=message,
            now=now,
            generation=generation,
        )
    else:
        before = next((c.reason for c in conditions if c.type == "Paused"), None)
        reason = "Resumed" if hold.resumed is not None or before == "Resumed" else "Firing"
        if (
            set_condition(
                conditions,
                kind="Paused",
                status="False",
                reason=reason,
                message="",
                now=now,
                generation=generation,
            )
            and had
        ):
            draft.events.append(EventNote("Normal", "Resumed", "Firing resumed after a pause"))
    return status.model_copy(update={**updates, "conditions": conditions})


def skip_frozen(due: list[Candidate], frozen: Sequence[Freeze], draft: Draft) -> list[Candidate]:
    """Due ticks inside a Skip freeze window are skipped, the window named as the reason."""
    kept = []
    for candidate in due:
        held = holding(frozen, candidate.tick, FreezeAction.SKIP)
        if held is None:
            kept.append(candidate)
        else:
            freeze, until = held
            reason = f"FreezeWindow {freeze.name}: Skip until {format_time(until)}"
            record_skip(draft, candidate, reason)
    return kept


def with_frozen(
    status: CronScheduleStatus,
    frozen: Sequence[Freeze],
    *,
    now: datetime,
    generation: int,
    draft: Draft,
) -> CronScheduleStatus:
    """The Frozen condition: True while a FreezeWindow holds the schedule, naming it."""
    conditions = list(status.conditions)
    had = any(c.type == "Frozen" for c in conditions)
    held = holding(frozen, now)
    if held is None and not had:
        return status
    if held is not None:
        freeze, until = held
        verb = "skips" if freeze.action is FreezeAction.SKIP else "defers"
        message = f"FreezeWindow {freeze.name} {verb} ticks until {format_time(until)}"
        if set_condition(
            conditions, kind="Frozen", status="True", reason=freeze.action.value,
            message=message, now=now, generation=generation,
        ):  # fmt: skip
            draft.events.append(EventNote("Normal", "Frozen", message))
    elif set_condition(
        conditions, kind="Frozen", status="False", reason="NoFreeze", message="",
        now=now, generation=generation,
    ):  # fmt: skip
        draft.events.append(EventNote("Normal", "Thawed", "No FreezeWindow holds it any more"))
    return status.model_copy(update={"conditions": conditions})
