"""Whether a status write may wait, and until when: the policy that saves writes.

(A *write delay*, here. The FreezeWindow action `Defer`, which holds ticks back, is a
different thing and lives in `freezing` and `pausing`.)

Why it exists: a status change that only follows the Jobs (one finished, a claim
was seen created, the cursor moved over ticks claimed ahead) fences nothing. Left
for the next write that must happen anyway (the next claim), it costs no request of
its own. This module says which kind of change a Decision makes (`classify`, called by
`deciding`, giving a `WriteDelay`) and decides, from when the schedule's status was
first left unwritten, whether to write now (`delay_write`), and returns the Decision the
shell applies.

It also says which Job changes may wait for the next write's pass (`quiet_endings`: a
run ending well, a finished run being deleted, where nothing waits on it), and which
writes are routine (`routine`): those whose Decision waits on no
tick within `ROUTINE_HORIZON` (`Decision.due_by`), such as a first claim for a tick a
year away. The shell lets routine writes queue behind due ones when the write path is
busy, and looks at a postponed claim again a horizon before its tick at the latest
(`routine_wake`), when it is due and goes first.

A finished Job being deleted (a TTL, history) whose firing only this write records is
held, its finalizer kept, until the write comes (`holding`): within the status delay,
often with the next claim, instead of a write of its own per deleted Job. A running Job
being deleted (a person's delete) is let go at once: its pods run until it goes.

What it must never do: delay a write marked `NEVER` (a new claim, a Replace, a prune
the written status still protects, anything reported), delay a bookkeeping write for
longer than the status delay, except behind due writes, or free a Job whose firing
only the write left for later records.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from punctual.core.decisions import Decision, WriteDelay
from punctual.core.models import (
    BackfillState,
    CronScheduleSpec,
    CronScheduleStatus,
    InFlightClaim,
)
from punctual.core.records import JobToDelete

# A write needed no sooner than this is routine: it may queue behind due ones.
ROUTINE_HORIZON = timedelta(seconds=10)


@dataclass(frozen=True, slots=True)
class DelayedWrite:
    """The Decision to apply now, and since when the schedule has had status changes
    left unwritten (None: none). The shell forgets that instant once a write lands."""

    decision: Decision
    unwritten_since: datetime | None


def delay_write(
    decision: Decision, *, unwritten_since: datetime | None, now: datetime, delay: timedelta
) -> DelayedWrite:
    """Leave `decision.status` for a later write when its WriteDelay allows it.

    RESOLVES_CLAIMS_ONLY waits for whatever write comes next, however late. BOOKKEEPING
    waits at most `delay` after the first change that was left unwritten; the Decision
    then wakes the schedule at that instant, so the write happens on time.
    """
    if decision.status is None or decision.write_delay is WriteDelay.NEVER:
        return DelayedWrite(decision, unwritten_since)
    later = decision.typed_status  # what a later write says
    if later is None:
        later = CronScheduleStatus.model_validate(decision.status)
    free = tuple(job for job in decision.free if not job.needs_status)  # held until written
    if decision.write_delay is WriteDelay.RESOLVES_CLAIMS_ONLY:
        left = dataclasses.replace(decision, status=None, delayed_status=later, free=free)
        return DelayedWrite(left, unwritten_since)
    since = now if unwritten_since is None else unwritten_since
    due = since + delay
    if now >= due:
        return DelayedWrite(decision, since)
    wake = due if decision.next_wake is None else min(decision.next_wake, due)
    left = dataclasses.replace(
        decision, status=None, delayed_status=later, next_wake=wake, free=free
    )
    return DelayedWrite(left, since)


def holding(write_delay: WriteDelay, *, needs_status: bool, urgent: bool) -> WriteDelay:
    """The write delay once Jobs being deleted are counted (`claiming.free`): none when a
    running one waits for this status (`urgent`); at most the status delay when a finished
    one does (its finalizer is held until then, so not a wait for whatever write comes
    next, however late); else as classified."""
    if urgent:
        return WriteDelay.NEVER
    if needs_status and write_delay is WriteDelay.RESOLVES_CLAIMS_ONLY:
        return WriteDelay.BOOKKEEPING
    return write_delay


def routine(decision: Decision, *, now: datetime) -> bool:
    """Whether nothing in `decision` is needed within ROUTINE_HORIZON of `now`."""
    return decision.due_by is None or decision.due_by > now + ROUTINE_HORIZON


def routine_wake(decision: Decision) -> datetime | None:
    """When to look again, at the latest, at a schedule whose routine write was
    postponed: its next wake, or a horizon before the tick its new claim is for."""
    if decision.due_by is None:
        return decision.next_wake
    due = decision.due_by - ROUTINE_HORIZON
    return due if decision.next_wake is None else min(decision.next_wake, due)


def quiet_endings(spec: CronScheduleSpec, status: CronScheduleStatus) -> bool:
    """Whether a run of this schedule succeeding, or a finished run of it being deleted
    (a TTL, history), may wait for the pass of the next write instead of waking one at
    once: whether it changes only bookkeeping (recentFirings, active, lastSuccessfulTime)
    and the finalizer's release. Not when anything waits for room (buffered, retrying or
    gated ticks, a backfill going on), a rule reads successes (pauseOnFailure counts
    failures in a row, successDeadlineSeconds the newest success, a completion rule
    decides what success is), or the room is shared (a concurrency group; its other
    members are told at once all the same). (maxRuns, endTime and runAt finish a
    schedule by its ticks, not by its runs' ends.)"""
    backfilling = status.backfill is not None and status.backfill.state is BackfillState.RUNNING
    waiting = bool(status.buffered or status.retrying or status.gated) or backfilling
    read = (
        spec.pause_on_failure is not None
        or spec.success_deadline_seconds is not None
        or spec.completion is not None
    )
    return not waiting and not read and spec.concurrency_group is None


def classify(
    old: CronScheduleStatus,
    old_status: Mapping[str, Any],
    new_status: Mapping[str, Any],
    *,
    in_flight: Sequence[InFlightClaim],
    fences: bool,
    prune: Sequence[JobToDelete],
    over_ahead: bool,
) -> WriteDelay:
    """Whether the status write may wait for a later write to carry it.

    It may when nothing in it fences a create (`fences`: no new claim, no Replace,
    nothing reported, no missed or skipped tick), nothing to prune that the written
    status still protects (pruning the Job of a claim in flight as *written* needs this
    status first, or a new leader reading the old one would create the Job again).
    Moving the cursor over ticks claimed ahead (`over_ahead`) is bookkeeping too: their
    claims are already written. `old_status` is `old` as dumped (`models.dump_status`).
    """
    old_claims = {c.job for c in old.in_flight}
    if fences or any(job.name in old_claims for job in prune):
        return WriteDelay.NEVER
    bookkeeping = _BOOKKEEPING + (_CURSOR if over_ahead else ())
    if _beyond(new_status, bookkeeping) != _beyond(old_status, bookkeeping):
        return WriteDelay.NEVER
    resolves_only = {c.job for c in in_flight} <= old_claims
    if resolves_only and _without(new_status, "inFlight") == _without(old_status, "inFlight"):
        return WriteDelay.RESOLVES_CLAIMS_ONLY
    return WriteDelay.BOOKKEEPING


# Status fields that only follow the Jobs: safe to write late, never needed to fence. A
# claim window (claimedThrough) only lets a later create go without a write first: a tick
# whose window is not written yet is claimed by its own write at its create.
_BOOKKEEPING = (
    "claimedThrough",
    "claimEpoch",
    "attempted",
    "active",
    "activeCount",
    "inFlight",
    "recentFirings",
    "lastSuccessfulTime",
    "lastSuccessfulTick",
)


# The cursor's fields, bookkeeping only when it moves over ticks claimed ahead.
_CURSOR = (
    "lastScheduledTime",
    "nextScheduleTime",
    "nextScheduleMinute",
    "upcomingTicks",
    "runs",
    "runsRemaining",
)


def _beyond(status: Mapping[str, Any], bookkeeping: tuple[str, ...]) -> dict[str, Any]:
    """What a status says beyond bookkeeping: conditions by state, not by message (the
    Ready message names the next tick, which moves with the cursor)."""
    kept = _without(status, *bookkeeping)
    kept["conditions"] = [
        (c.get("type"), c.get("status"), c.get("reason")) for c in status.get("conditions") or []
    ]
    return kept


def _without(status: Mapping[str, Any], *keys: str) -> dict[str, Any]:
    return {k: v for k, v in status.items() if k not in keys}
