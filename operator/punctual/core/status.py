"""The status builder: the one place a decision's records become a status write.

Why it exists: the rules of a decision (`claiming`, `overlapping`, `pausing`,
`backfilling`, `finishing`, `succeeding`) each return a frozen record of what they
decided. `build` turns those records into the new status, the Events to post and the
metric labels to count; `invalid` does the same for a spec that cannot be used. Which
condition makes the schedule not Ready is decided once, in `conditions`, by the table
`NOT_READY` (first match wins):

    InvalidSpec > Paused > Finished > Suspended (or SuspendedUntil) > Ready (Scheduled)

A Frozen schedule stays Ready: a FreezeWindow skips or defers ticks; the schedule itself
is sound.

What it must never do: decide policy (every choice is in a record it is given), change
its arguments, or set a condition anywhere but `conditions`. Like all of `punctual.core`,
it never talks to the API server or reads the clock.
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal

from punctual.core.backfilling import Batch
from punctual.core.chaining import Chain
from punctual.core.claiming import Claims, Gathered
from punctual.core.finishing import finished_message
from punctual.core.freezing import Freeze, FreezeAction
from punctual.core.jobs import JobSnapshot, JobState
from punctual.core.models import (
    MAX_RECENT_FIRINGS,
    ActiveJob,
    Condition,
    CronScheduleStatus,
    FiringOutcome,
    RecordedFiring,
)
from punctual.core.overlapping import Overlap
from punctual.core.pausing import Freezing, Pause, Suspension
from punctual.core.planning import TickPlan
from punctual.core.records import (
    Candidate,
    EventNote,
    ScheduleRead,
    Skip,
    SkipReason,
    trigger_fields,
)
from punctual.core.retrying import Retries
from punctual.core.succeeding import Freshness
from punctual.core.times import EPOCH, format_time

ConditionStatus = Literal["True", "False", "Unknown"]


@dataclass(frozen=True, slots=True)
class Standing:
    """What the rules say about the schedule's conditions. `pause` and `freshness` are
    None when they were not decided (an invalid spec): their conditions stay as written."""

    invalid: str | None = None
    suspension: Suspension | None = None
    finished: str | None = None  # the plan's reason no tick is left
    limited: bool = False  # endTime or maxRuns is set
    pause: Pause | None = None
    pause_on_failure: bool = False  # pauseOnFailure is set
    freshness: Freshness | None = None
    frozen: tuple[Freeze, datetime] | None = None  # the window that freezes it now
    next_tick: datetime | None = None


def _pause_message(s: Standing, had: Callable[[str], bool]) -> str | None:
    watched = s.pause is not None and (s.pause_on_failure or had("Paused"))
    return s.pause.message if watched and s.pause is not None and s.pause.paused else None


def _finished_message(s: Standing, had: Callable[[str], bool]) -> str | None:
    watched = s.limited or had("Finished")
    return finished_message(s.finished) if watched and s.finished is not None else None


# Why Ready is False, in precedence order: the first row whose message is not None wins,
# and gives Ready its reason and message. None of them: Ready is True (Scheduled).
NOT_READY: tuple[tuple[str, Callable[[Standing, Callable[[str], bool]], str | None]], ...] = (
    ("InvalidSpec", lambda s, had: s.invalid),
    ("Paused", _pause_message),
    ("Finished", _finished_message),
    ("Suspended", lambda s, had: s.suspension.message if s.suspension else None),
)


def ready(s: Standing, had: Callable[[str], bool]) -> tuple[ConditionStatus, str, str]:
    """Ready's status, reason and message, by the table NOT_READY."""
    for reason, message_of in NOT_READY:
        message = message_of(s, had)
        if message is not None:
            if reason == "Suspended" and s.suspension is not None:
                reason = s.suspension.reason  # Suspended or SuspendedUntil
            return "False", reason, message
    nxt = s.next_tick
    return "True", "Scheduled", f"next tick {format_time(nxt)}" if nxt else "no further tick"


Conditions = tuple[Condition, ...]


def _set(
    conditions: Conditions,
    kind: str,
    status: ConditionStatus,
    reason: str,
    message: str,
    *,
    now: datetime,
    generation: int,
) -> tuple[Conditions, bool]:
    """`conditions` with one set; True if its status changed (a transition)."""
    for i, cond in enumerate(conditions):
        if cond.type == kind:
            changed = cond.status != status
            new = Condition(
                type=kind,
                status=status,
                reason=reason,
                message=message,
                last_transition_time=now if changed else cond.last_transition_time,
                observed_generation=generation,
            )
            return (*conditions[:i], new, *conditions[i + 1 :]), changed
    new = Condition(
        type=kind,
        status=status,
        reason=reason,
        message=message,
        last_transition_time=now,
        observed_generation=generation,
    )
    return (*conditions, new), True


Notes = tuple[EventNote, ...]
Setter = Callable[[Conditions, str, ConditionStatus, str, str], tuple[Conditions, bool]]


def conditions(
    old: Conditions, s: Standing, *, now: datetime, generation: int
) -> tuple[Conditions, Notes]:
    """Every condition of the schedule, and one Event per transition worth saying. The
    only function that sets Ready (by `ready`, from the table NOT_READY)."""
    had = {c.type for c in old}.__contains__

    def put(
        conds: Conditions, kind: str, status: ConditionStatus, reason: str, message: str
    ) -> tuple[Conditions, bool]:
        return _set(conds, kind, status, reason, message, now=now, generation=generation)

    if s.invalid is not None:  # the other conditions stay as written
        out, changed = put(old, "InvalidSpec", "True", "InvalidSpec", s.invalid)
        first: Notes = (EventNote("Warning", "InvalidSpec", s.invalid),) if changed else ()
    else:
        out, _ = put(old, "InvalidSpec", "False", "Valid", "")
        out, first = _suspended(out, s, put)
    out, _ = put(out, "Ready", *ready(s, had))  # the one place Ready is set
    if s.invalid is not None:
        return out, first
    out, finished = _finished(out, s, had, put)
    out, paused = _paused(out, s, had, put)
    out, stale = _stale(out, s, put)
    out, frozen = _frozen(out, s, had, put)
    return out, first + finished + paused + stale + frozen


def _suspended(out: Conditions, s: Standing, put: Setter) -> tuple[Conditions, Notes]:
    was = any(c.type == "Suspended" and c.status == "True" for c in out)
    if s.suspension is not None:
        out, changed = put(out, "Suspended", "True", s.suspension.reason, s.suspension.message)
        return out, (EventNote("Normal", "Suspended", "Firing paused"),) if changed else ()
    out, changed = put(out, "Suspended", "False", "Active", "")
    # A new schedule was never suspended: no "Resumed".
    return out, (EventNote("Normal", "Resumed", "Firing resumed"),) if changed and was else ()


def _finished(
    out: Conditions, s: Standing, had: Callable[[str], bool], put: Setter
) -> tuple[Conditions, Notes]:
    if not (s.limited or had("Finished")):
        return out, ()
    if s.finished is None:
        return put(out, "Finished", "False", "TicksLeft", "")[0], ()
    message = finished_message(s.finished)
    out, changed = put(out, "Finished", "True", s.finished, message)
    return out, (EventNote("Normal", "Finished", f"Finished: {message}"),) if changed else ()


def _paused(
    out: Conditions, s: Standing, had: Callable[[str], bool], put: Setter
) -> tuple[Conditions, Notes]:
    pause = s.pause
    if pause is None or not (s.pause_on_failure or had("Paused")):
        return out, ()
    if pause.paused:
        out, changed = put(out, "Paused", "True", "ConsecutiveFailures", pause.message)
        note = EventNote("Warning", "Paused", f"Firing paused: {pause.message}")
        return out, (note,) if changed else ()
    before = next((c.reason for c in out if c.type == "Paused"), None)
    reason = "Resumed" if pause.resumed is not None or before == "Resumed" else "Firing"
    out, changed = put(out, "Paused", "False", reason, "")
    note = EventNote("Normal", "Resumed", "Firing resumed after a pause")
    return out, (note,) if changed and had("Paused") else ()


def _stale(out: Conditions, s: Standing, put: Setter) -> tuple[Conditions, Notes]:
    """The Stale condition; gone when there is no successDeadlineSeconds."""
    fresh = s.freshness
    if fresh is None:
        return out, ()
    if not fresh.objective:
        return tuple(c for c in out if c.type != "Stale"), ()
    if fresh.stale is None:
        return put(out, "Stale", "False", "Fresh", "")[0], ()
    out, changed = put(out, "Stale", "True", "NoSuccess", fresh.stale)
    return out, (EventNote("Warning", "Stale", fresh.stale),) if changed else ()


def _frozen(
    out: Conditions, s: Standing, had: Callable[[str], bool], put: Setter
) -> tuple[Conditions, Notes]:
    """The Frozen condition: True while a FreezeWindow holds the schedule, naming it."""
    if s.frozen is None:
        if not had("Frozen"):
            return out, ()
        out, changed = put(out, "Frozen", "False", "NoFreeze", "")
        note = EventNote("Normal", "Thawed", "No FreezeWindow holds it any more")
        return out, (note,) if changed else ()
    found, until = s.frozen
    verb = "skips" if found.action is FreezeAction.SKIP else "defers"
    message = f"{found.title} {verb} ticks until {format_time(until)}"
    out, changed = put(out, "Frozen", "True", found.action.value, message)
    return out, (EventNote("Normal", "Frozen", message),) if changed else ()


@dataclass(frozen=True, slots=True)
class Outcome:
    """Everything the rules decided for one valid spec: what `build` writes."""

    schedule: ScheduleRead
    plan: TickPlan  # as finished by `finishing`
    runs: int | None
    max_runs: int | None
    gathered: Gathered
    freezing: Freezing
    overlap: Overlap
    batch: Batch
    claims: Claims
    standing: Standing
    clash: EventNote | None
    retries: Retries
    chain: Chain
    last_trigger: str | None
    installation: str | None
    epoch: int


@dataclass(frozen=True, slots=True)
class Written:
    """The status write of one decision, its Events, and what the metrics count."""

    status: CronScheduleStatus
    events: tuple[EventNote, ...]
    skipped: tuple[tuple[SkipReason, int], ...]
    newly_failed: int
    newly_dead: int = 0


def build(o: Outcome, *, now: datetime) -> Written:
    """The new status, the Events (in the order things happened), the skip labels."""
    schedule, plan = o.schedule, o.plan
    standing = o.standing  # an upstream of spec.after not found: InvalidSpec says so
    if o.chain.problem is not None:
        standing = dataclasses.replace(standing, invalid=o.chain.problem)
    conds, notes = conditions(
        tuple(schedule.old.conditions), standing, now=now, generation=schedule.generation
    )
    new, history = _fields(o, _firings(o), conds)
    skips = (*o.freezing.skips, *o.overlap.skips, *o.chain.skips)
    counted = tuple(Counter(s.reason for s in skips).items()) if skips else ()
    dead = _newly_dead(schedule.old.recent_firings, history)
    return Written(
        status=new,
        events=(*_events(o), *(_dead_note(f) for f in dead), *notes),
        skipped=counted + tuple((SkipReason.MISSED_RUN_POLICY, g.count) for g in plan.skipped),
        newly_failed=_newly_failed(schedule.old, history, schedule.ours, new.recent_firings),
        newly_dead=len(dead),
    )


def _firings(o: Outcome) -> tuple[RecordedFiring, ...]:
    """What this decision records in status.recentFirings, in the order it happened."""
    overlap, epoch = o.overlap, o.epoch
    chain = o.chain
    if not (
        o.freezing.skips
        or overlap.late
        or overlap.skips
        or o.plan.missed
        or o.plan.skipped
        or chain.skips
        or chain.missed
    ):
        return (*o.gathered.fired, *o.claims.created)  # the usual pass: nothing skipped
    return (
        *o.gathered.fired,
        *(_skipped(skip, epoch) for skip in o.freezing.skips),
        *(_skipped(skip, epoch) for skip in chain.skips),
        *(
            RecordedFiring(tick=c.tick, outcome=FiringOutcome.MISSED, epoch=epoch, reason=why)
            for c, why in chain.missed
        ),
        *(_late(c, overlap.late_after, epoch) for c in overlap.late),
        *(_skipped(skip, epoch) for skip in overlap.skips),
        *o.claims.created,
        *_grouped(o.plan, epoch),
    )


def _events(o: Outcome) -> tuple[EventNote, ...]:
    """The Events of the rules' records, in the order things happened (the conditions'
    transitions come after them)."""
    overlap = o.overlap
    return (
        *o.gathered.notes,
        *([o.clash] if o.clash else []),
        *(_skip_note(skip) for skip in o.freezing.skips),
        *(_skip_note(skip) for skip in o.chain.skips),
        *o.chain.notes,
        *(_late_note(c) for c in overlap.late),
        *(_skip_note(skip) for skip in overlap.skips),
        *(_buffered_note(c) for c in overlap.newly_buffered),
        *(
            EventNote("Normal", "Replaced", f"Deleting {j.kind.kind} {j.name}: {j.reason}")
            for j in overlap.replaced
        ),
        *o.batch.notes,
        *o.retries.notes,
        *_grouped_notes(o.plan),
    )


def _fields(
    o: Outcome, fired: Sequence[RecordedFiring], conds: Conditions
) -> tuple[CronScheduleStatus, list[RecordedFiring]]:
    """Every field of the new status, and the old firings with their outcomes brought up
    to date."""
    schedule, plan, claims = o.schedule, o.plan, o.claims
    old, ours = schedule.old, schedule.ours
    replaced = {j.name for j in o.overlap.replaced}
    creates = (*o.overlap.creates, *o.batch.fills)
    active = [
        # No uid: the claim cannot know it, and seeing the Job must not change the entry.
        ActiveJob(name=j.name, tick=j.tick or j.created or EPOCH)
        for j in schedule.live
        if j.name not in replaced
    ]
    active += [ActiveJob(name=c.job, tick=c.tick) for c in creates if c.job not in schedule.by_name]
    active.sort(key=lambda a: a.tick)
    finished = {j.name: j for j in ours if j.state is not JobState.ACTIVE}
    dead = frozenset(o.retries.dead)
    history = [_with_outcome(f, finished, replaced, dead) for f in old.recent_firings]
    recent = (
        sorted(
            (_with_outcome(f, finished, replaced, dead) for f in fired),
            key=lambda f: f.tick,
            reverse=True,
        )
        + history
    )
    succeeded = [j.finished_at for j in ours if j.state is JobState.SUCCEEDED and j.finished_at]
    last_success = max([*succeeded, *filter(None, [old.last_successful_time])], default=None)
    runs, max_runs = o.runs, o.max_runs
    pause, fresh = o.standing.pause, o.standing.freshness
    assert pause is not None and fresh is not None
    updates: dict[str, Any] = {
        "last_scheduled_time": plan.cursor,
        "next_schedule_time": plan.next_tick,
        "upcoming_ticks": list(plan.upcoming) or None,
        "runs": runs,
        "runs_remaining": None if runs is None or max_runs is None else max(max_runs - runs, 0),
        "last_successful_time": last_success,
        "schedule_fingerprint": plan.fingerprint,
        "active": active,
        "active_count": len(active),
        "in_flight": sorted(claims.in_flight, key=lambda c: c.tick),
        **(
            {}
            if claims.window is None
            else {"claimed_through": claims.window.through, "claim_epoch": claims.window.epoch}
        ),
        "recent_firings": recent[:MAX_RECENT_FIRINGS],
        "last_trigger": o.last_trigger,
        "buffered": list(o.overlap.buffered or ()) or None,
        "retrying": list(o.retries.waiting) or None,
        **({} if o.retries.attempted is None else {"attempted": list(o.retries.attempted) or None}),
        "last_rerun": o.retries.rerun,
        "backfill": o.batch.backfill or old.backfill,
        "installation": o.installation or old.installation,
        "observed_generation": schedule.generation,
        "conditions": list(conds),
        "consecutive_failures": pause.failures,
        "last_successful_tick": fresh.last_tick,
        "after": list(o.chain.cursors) if o.chain.cursors is not None else None,
        "gated": list(o.chain.gated or ()) or None,
    }
    if pause.resumed is not None:
        updates["last_resume"] = pause.resumed
    return old.model_copy(update=updates), history


def invalid(
    schedule: ScheduleRead, reason: str, *, now: datetime, updates: Mapping[str, Any]
) -> tuple[CronScheduleStatus, tuple[EventNote, ...]]:
    """The status of an unusable spec: InvalidSpec and Ready say why; no next tick."""
    old, generation = schedule.old, schedule.generation
    conds, notes = conditions(
        tuple(old.conditions), Standing(invalid=reason), now=now, generation=generation
    )
    new = old.model_copy(
        update={
            **updates,
            "conditions": list(conds),
            "observed_generation": generation,
            "next_schedule_time": None,
            "upcoming_ticks": None,
        }
    )
    return new, notes


def _skipped(skip: Skip, epoch: int) -> RecordedFiring:
    candidate = skip.candidate
    return RecordedFiring(
        tick=candidate.tick,
        outcome=FiringOutcome.SKIPPED,
        epoch=epoch,
        reason=skip.message,
        manual=candidate.manual,
        upstream=list(candidate.upstream) or None,
        **trigger_fields(candidate),
    )


def _skip_note(skip: Skip) -> EventNote:
    return EventNote(
        "Normal", "Skipped", f"Tick {format_time(skip.candidate.tick)}: {skip.message}"
    )


def _late(candidate: Candidate, deadline: int | None, epoch: int) -> RecordedFiring:
    return RecordedFiring(
        tick=candidate.tick,
        outcome=FiringOutcome.MISSED,
        epoch=epoch,
        reason=f"buffered past startingDeadlineSeconds {deadline}",
    )


def _late_note(candidate: Candidate) -> EventNote:
    message = f"Buffered tick {format_time(candidate.tick)} passed its deadline"
    return EventNote("Warning", "Missed", message)


def _buffered_note(candidate: Candidate) -> EventNote:
    message = f"Tick {format_time(candidate.tick)} waits for the running Job to finish"
    return EventNote("Normal", "Buffered", message)


def _grouped(plan: TickPlan, epoch: int) -> list[RecordedFiring]:
    """Missed and skipped ticks, one firing per reason with the count."""
    return [
        RecordedFiring(
            tick=group.newest,
            outcome=group.outcome,
            epoch=epoch,
            reason=f"{group.count} {_ticks(group.count)}: {group.reason.message}",
        )
        for group in (*plan.missed, *plan.skipped)
    ]


def _grouped_notes(plan: TickPlan) -> list[EventNote]:
    notes = []
    for group in (*plan.missed, *plan.skipped):
        noun = "tick" if group.count == 1 else "ticks"
        verb = group.outcome.value
        message = (
            f"{group.count} {noun} {verb.lower()}, newest "
            f"{format_time(group.newest)}: {group.reason.message}"
        )
        notes.append(EventNote("Warning", verb, message))
    if plan.reset:
        notes.append(
            EventNote("Normal", "ScheduleChanged", "Schedule edited: the cursor moved to now")
        )
    return notes


def _with_outcome(
    firing: RecordedFiring,
    finished: Mapping[str, JobSnapshot],
    replaced: set[str],
    dead: frozenset[str] = frozenset(),
) -> RecordedFiring:
    """A Created firing becomes Succeeded, Failed or Replaced once its Job is; one that
    Punctual failed for pending too long says so (reason PendingTimeout); a Failed one
    whose tick has no attempt left is dead (spec.retry)."""
    if firing.job is not None and firing.job in dead and not firing.dead:
        failed = _with_outcome(firing, finished, replaced)
        if failed.outcome is FiringOutcome.FAILED:
            attempts = firing.attempt or 1
            why = f"dead after {attempts} attempts"
            reason = f"{failed.reason}; {why}" if failed.reason else why
            return failed.model_copy(update={"dead": True, "reason": reason})
    if firing.outcome is not FiringOutcome.CREATED or firing.job is None:
        return firing
    if firing.job in replaced:
        return firing.model_copy(update={"outcome": FiringOutcome.REPLACED})
    job = finished.get(firing.job)
    if job is None:
        return firing
    if job.state is JobState.SUCCEEDED:
        return firing.model_copy(update={"outcome": FiringOutcome.SUCCEEDED})
    if job.pending_timeout is not None:
        reason = f"PendingTimeout: {job.pending_timeout}"
        return firing.model_copy(update={"outcome": FiringOutcome.FAILED, "reason": reason})
    return firing.model_copy(update={"outcome": FiringOutcome.FAILED})


def _newly_dead(
    before: Sequence[RecordedFiring], after: Sequence[RecordedFiring]
) -> list[RecordedFiring]:
    """The recorded firings whose tick died in this decision (TickFailed, the metric)."""
    return [new for old, new in zip(before, after, strict=True) if new.dead and not old.dead]


def _dead_note(firing: RecordedFiring) -> EventNote:
    return EventNote(
        "Warning",
        "TickFailed",
        f"Tick {format_time(firing.tick)} failed its last attempt ({firing.job}): "
        f"{firing.reason}; `punctual backfill --failed` runs it again",
    )


def _newly_failed(
    old: CronScheduleStatus,
    after: Sequence[RecordedFiring],
    ours: Sequence[JobSnapshot],
    recent: Sequence[RecordedFiring] = (),
) -> int:
    """How many Jobs turned Failed in this decision (for the metric): recorded firings that
    did, Jobs status listed as running whose firing left recentFirings meanwhile, and
    firings recorded for the first time already Failed (`recent`: a tick of the claim
    window created with no write of its own, whose Job failed before the next write)."""
    turned = sum(
        1
        for before, now in zip(old.recent_firings, after, strict=True)
        if before.outcome is not now.outcome and now.outcome is FiringOutcome.FAILED
    )
    listed = {f.job for f in old.recent_firings if f.job is not None}
    running = {a.name for a in old.active}
    unlisted = sum(
        1 for j in ours if j.state is JobState.FAILED and j.name in running and j.name not in listed
    )
    first = sum(
        1
        for f in recent
        if f.outcome is FiringOutcome.FAILED
        and f.job is not None
        and f.job not in listed
        and f.job not in running
    )
    return turned + unlisted + first


def _ticks(count: int) -> str:
    return "tick" if count == 1 else "ticks"
