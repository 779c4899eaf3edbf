"""What keeps a schedule from firing for a while: suspension, pauses, freeze windows.

Why it exists: three things stop firing for a while without deleting the schedule. The user's
suspension (`spec.suspend`, `spec.suspendUntil`); a pause after failures
(`pauseOnFailure`: so many failed Jobs in a row pause firing until a resume request,
`punctual resume`, or until pauseOnFailure leaves the spec); and FreezeWindows
(`freezing` says which freeze the schedule and until when: a Skip window skips each tick
inside it, naming the window; a Defer window stops firing like a pause, and `deciding`
plans what runs when it ends). `deciding` asks these rules before it plans; each returns
a frozen record (`Suspension`, `Pause`, `Freezing`), and `status` writes the Suspended,
Paused and Frozen conditions from them (and the reason Ready gives), one Event a
transition.

What it must never do: edit the spec (a pause and a resume live in status and an
annotation), end a pause after failures by itself, or change its arguments. Like all of
`punctual.core`, it never talks to the API server or reads the clock.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from punctual.core.freezing import Freeze, FreezeAction, ended_between, freeze_over
from punctual.core.jobs import JobState
from punctual.core.keys import ANNOTATION_RESUME
from punctual.core.models import (
    MAX_RECENT_FIRINGS,
    CronScheduleSpec,
    FiringOutcome,
    MissedRunPolicy,
)
from punctual.core.records import Candidate, ScheduleRead, Skip, SkipReason
from punctual.core.times import EPOCH, format_time


@dataclass(frozen=True, slots=True)
class Suspension:
    """Why the user suspended firing: the Suspended condition's reason and message."""

    reason: str
    message: str


def suspension(spec: CronScheduleSpec, now: datetime) -> Suspension | None:
    """Why the user suspended firing, or None."""
    if spec.suspend:
        return Suspension("Suspended", "spec.suspend is true: no tick fires")
    if spec.suspend_until is not None and now < spec.suspend_until:
        return Suspension(
            "SuspendedUntil", f"no tick fires before {format_time(spec.suspend_until)}"
        )
    return None


@dataclass(frozen=True, slots=True)
class Pause:
    """pauseOnFailure in this decision: the failure count, and whether firing is paused."""

    failures: int | None  # failed Jobs in a row; None: pauseOnFailure is not set
    failed: tuple[str, ...]  # the newest failed Jobs, for the message
    paused: bool
    resumed: str | None  # the resume request handled in this decision
    message: str = ""  # why firing is paused, when it is


def pause(schedule: ScheduleRead, spec: CronScheduleSpec) -> Pause:
    """pauseOnFailure: count the failed Jobs in a row (scheduled, manual and backfill
    alike, in tick order; a success resets the count) and decide whether firing is
    paused. A pause ends only by a resume request (`punctual resume`) or by removing
    pauseOnFailure from the spec: never by itself."""
    old = schedule.old
    request = schedule.annotations.get(ANNOTATION_RESUME)
    resumed = request if request and request != old.last_resume else None
    if spec.pause_on_failure is None:
        return Pause(failures=None, failed=(), paused=False, resumed=resumed)
    # Each finished Job is counted once: when status does not yet record its outcome.
    # One that status last listed as running (status.active) is not counted yet, even if
    # its firing left a full recentFirings while it ran (Forbid's skips, or more runs
    # than it keeps, while the Job controller was down). Any other Job older than
    # everything a full recentFirings still records was counted before it left.
    final = (FiringOutcome.FAILED, FiringOutcome.SUCCEEDED, FiringOutcome.REPLACED)
    recorded = {f.job: f.outcome for f in old.recent_firings if f.job is not None}
    running = {a.name for a in old.active}
    full = len(old.recent_firings) >= MAX_RECENT_FIRINGS
    oldest = min((f.tick for f in old.recent_firings), default=None)
    count = old.consecutive_failures or 0
    failed: list[str] = []
    # Under spec.retry a failed attempt that has another coming is not a failure yet:
    # only a dead tick (its last attempt failed) counts.
    last = spec.retry.max_attempts if spec.retry is not None else 1
    for firing in sorted(old.recent_firings, key=lambda f: f.tick):
        if firing.outcome is FiringOutcome.SUCCEEDED:
            failed = []
        elif (
            firing.outcome is FiringOutcome.FAILED
            and firing.job is not None
            and (firing.attempt or 1) >= last
        ):
            failed.append(firing.job)
    for job in sorted((j for j in schedule.ours if j.state is not JobState.ACTIVE),
                      key=lambda j: (j.tick or EPOCH, j.name)):  # fmt: skip
        if recorded.get(job.name) in final:
            continue
        if job.state is JobState.FAILED and job.attempt < last and job.trigger is None:
            continue  # another attempt comes (retrying)
        left = full and oldest is not None and (job.tick is None or job.tick < oldest)
        if left and job.name not in running:
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
    named = ", ".join(newest) if len(newest) >= count else f"the newest: {', '.join(newest)}"
    message = (
        f"{count} Jobs failed in a row ({named}); `punctual resume {schedule.name}` resumes firing"
    )
    return Pause(count, newest, paused, resumed, message if paused else "")


@dataclass(frozen=True, slots=True)
class Freezing:
    """FreezeWindows in this decision: the due candidates a Skip window lets through, the
    ones it skips, and the window (with its end) that freezes the schedule now."""

    kept: tuple[Candidate, ...]
    skips: tuple[Skip, ...] = ()
    now: tuple[Freeze, datetime] | None = None


def freeze(due: Sequence[Candidate], frozen: Sequence[Freeze], now: datetime) -> Freezing:
    """Due ticks inside a Skip freeze window are skipped, the window named in the message."""
    kept: list[Candidate] = []
    skips: list[Skip] = []
    for candidate in due:
        window = freeze_over(frozen, candidate.tick, FreezeAction.SKIP)
        if window is None:
            kept.append(candidate)
        else:
            found, until = window
            message = f"{found.title}: Skip until {format_time(until)}"
            skips.append(Skip(candidate, SkipReason.FREEZE_WINDOW, message))
    return Freezing(tuple(kept), tuple(skips), freeze_over(frozen, now))


def planned(
    spec: CronScheduleSpec,
    schedule: ScheduleRead,
    frozen: Sequence[Freeze],
    *,
    paused: bool,
    now: datetime,
) -> CronScheduleSpec:
    """The spec as planned now: suspended while paused or frozen by a Defer window; right
    after a Defer window, its ticks run as one RunLatest tick whatever their deadline."""
    if paused:
        return spec.model_copy(update={"suspend": True})
    cursor = schedule.old.last_scheduled_time
    if cursor is not None and ended_between(frozen, cursor, now, FreezeAction.DEFER):
        return spec.model_copy(
            update={
                "missed_run_policy": MissedRunPolicy.RUN_LATEST,
                "starting_deadline_seconds": None,
            }
        )
    return spec
