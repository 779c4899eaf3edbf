"""One decision for one schedule: what to claim, create, delete and report, and when to look again.

Why it exists: everything Punctual does to a schedule follows from (the schedule as
last read, its Jobs, the API server's time, the leader's epoch). `decide` is that
function, pure, so that every policy (missed ticks, concurrency, manual triggers,
history, in-flight recovery, status and conditions) is tested without a cluster. The
shell (`firing`) applies a Decision in the order that keeps the invariants:

1. write `status` with the schedule's resourceVersion as precondition (the claim:
   cursor moved, new ticks recorded in `inFlight`); a 409 means someone else wrote
   first, and the whole Decision is dropped and made again from fresh state;
2. delete the Jobs that `replace` names (concurrencyPolicy Replace);
3. create `creates` (a 409 AlreadyExists from a Job we own means done);
4. delete `prune` (history), never the Job of a tick still in flight.

What it must never do: talk to the API server, read the clock, or decide anything
for a tick at or before the cursor (the planner guarantees that; in-flight claims are
the only ticks carried over, and only to finish them).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any, Final, Literal

from pydantic import ValidationError

from punctual.core.jobs import JobSnapshot, JobState, build_job, manual_job_name
from punctual.core.models import (
    MAX_RECENT_FIRINGS,
    ActiveJob,
    ConcurrencyPolicy,
    Condition,
    CronScheduleSpec,
    CronScheduleStatus,
    FiringOutcome,
    InFlightClaim,
    RecordedFiring,
    describe_error,
    dump_status,
    parse_status,
)
from punctual.core.naming import job_name
from punctual.core.planning import TickPlan, plan_ticks, schedule_fingerprint
from punctual.core.schedules import jitter_offset
from punctual.core.times import EPOCH, format_time, parse_time

# The annotation a user (or `punctual trigger`) sets on a CronSchedule to fire it now.
# Its value is the request id: each distinct value fires once.
TRIGGER_ANNOTATION: Final = "punctual.dev/trigger"
# How soon to look again at a schedule whose claims are not yet seen as Jobs.
IN_FLIGHT_RECHECK: Final = timedelta(seconds=2)


EventType = Literal["Normal", "Warning"]


@dataclass(frozen=True, slots=True)
class EventNote:
    """A Kubernetes Event to post about the schedule once the Decision is applied."""

    type: EventType
    reason: str
    message: str


@dataclass(frozen=True, slots=True)
class JobToCreate:
    name: str
    tick: datetime
    body: dict[str, Any]
    manual: bool = False
    fire_at: datetime | None = None  # tick plus jitter: where firing lag is measured from


@dataclass(frozen=True, slots=True)
class JobToDelete:
    name: str
    uid: str
    reason: str


@dataclass(frozen=True, slots=True)
class Decision:
    """What the shell applies, in order: status (fenced), replace, creates, prune."""

    status: dict[str, Any] | None
    replace: tuple[JobToDelete, ...] = ()
    creates: tuple[JobToCreate, ...] = ()
    prune: tuple[JobToDelete, ...] = ()
    events: tuple[EventNote, ...] = ()
    next_wake: datetime | None = None
    plan: TickPlan | None = None
    # The status changed only in bookkeeping (a Job finished, a claim was seen created):
    # the shell may leave it to the next claim if that comes soon, saving one write per
    # firing. History clean-up (prune) needs no status write and still happens now.
    deferrable: bool = False
    # The only change: claims whose Jobs are now seen leave inFlight. Never worth a write
    # of its own; the next write carries it (and recovery finds the Jobs meanwhile).
    only_resolves_claims: bool = False
    # Set by the shell when it leaves `status` for a later write: what that write will
    # say. A create that fails for good is recorded on top of it, at once.
    deferred_status: dict[str, Any] | None = None
    # For metrics, counted once the status that records them is written.
    missed: int = 0
    skipped: tuple[tuple[str, int], ...] = ()  # (reason, count)
    newly_failed: int = 0

    @property
    def writes(self) -> bool:
        return bool(self.status is not None or self.replace or self.creates or self.prune)


@dataclass(frozen=True, slots=True)
class Leadership:
    """Who decides: stamped on every Job (the epoch is the Lease's leaseTransitions)."""

    epoch: int
    identity: str


@dataclass(slots=True)
class _Draft:
    """The status being assembled for one decision."""

    status: CronScheduleStatus
    epoch: int
    firings: list[RecordedFiring] = field(default_factory=list)
    skips: list[str] = field(default_factory=list)  # metric label per concurrency skip
    events: list[EventNote] = field(default_factory=list)


def decide(
    body: Mapping[str, Any],
    jobs: Sequence[JobSnapshot],
    *,
    now: datetime,
    leadership: Leadership,
) -> Decision:
    """Decide everything about one schedule at `now` (the API server's time)."""
    meta = body["metadata"]
    uid = str(meta["uid"])
    generation = int(meta.get("generation") or 0)
    try:
        old = parse_status(body)
    except ValidationError:
        old = CronScheduleStatus()  # an unreadable status is rebuilt, never a crash
    ours = [j for j in jobs if j.schedule_uid == uid]

    # 1. Read the spec; an invalid one is reported in status and Events, never raised.
    try:
        spec = CronScheduleSpec.model_validate(body.get("spec") or {})
    except ValidationError as error:
        # A fingerprint no valid spec has is written, so that any fix is an edit: the
        # cursor moves to now then, and no tick of the invalid period fires.
        keep = {"schedule_fingerprint": "invalid-" + _raw_fingerprint(body.get("spec") or {})}
        return _invalid(old, describe_error(error), now=now, generation=generation, updates=keep)

    # 2. Plan the ticks on the API server's clock.
    plan = plan_ticks(
        spec,
        uid=uid,
        created=parse_time(meta["creationTimestamp"]),
        cursor=old.last_scheduled_time,
        fingerprint=old.schedule_fingerprint,
        now=now,
    )
    if plan.invalid is not None:
        # The fingerprint is still written: fixing the spec later is an edit, so the
        # cursor moves to now then and no tick from the invalid period fires.
        written = {"schedule_fingerprint": plan.fingerprint, "last_scheduled_time": plan.cursor}
        return _invalid(old, plan.invalid, now=now, generation=generation, updates=written)

    draft = _Draft(status=old, epoch=leadership.epoch)
    by_name = {j.name: j for j in ours}
    live = [j for j in ours if j.active]

    # 3. In-flight claims: resolved once their Job is seen, otherwise created again
    #    (the claim was written, the create may not have happened: a crash, a 5xx).
    #    Claims written ahead of their tick ("armed", beyond the cursor) are not
    #    recovered here: their tick is decided with the due ticks below, under the
    #    policy as it is then, and a claim the plan no longer fires is dropped.
    armed = {c.job: c for c in old.in_flight if _is_armed(c, meta["name"], old.last_scheduled_time)}
    in_flight: list[InFlightClaim] = []
    wanted: list[tuple[str, datetime, bool, str | None]] = []  # (name, tick, manual, request)
    for claim in old.in_flight:
        if claim.job not in by_name and claim.job not in armed:
            in_flight.append(claim)
            manual = claim.job != job_name(meta["name"], claim.tick)
            request = old.last_trigger if manual else None
            if request is not None and claim.job != manual_job_name(meta["name"], request):
                request = None  # an older manual claim: its request id is no longer known
            wanted.append((claim.job, claim.tick, manual, request))

    # 4. New firings: due ticks, then a manual trigger. A due tick whose Job exists was
    #    created on its armed claim by a pass whose status write was left for later.
    for due in plan.due:
        name = job_name(meta["name"], due.tick)
        if name in by_name:
            epoch = armed[name].epoch if name in armed else leadership.epoch
            draft.firings.append(
                RecordedFiring(tick=due.tick, job=name, outcome=FiringOutcome.CREATED, epoch=epoch)
            )
            continue
        wanted.append((name, due.tick, False, None))
    request = (meta.get("annotations") or {}).get(TRIGGER_ANNOTATION)
    last_trigger = old.last_trigger
    if request and request != old.last_trigger:
        wanted.append((manual_job_name(meta["name"], request), now, True, request))
        last_trigger = request
        draft.events.append(EventNote("Normal", "Triggered", f"Manual trigger {request!r}"))

    # 5. The concurrency policy decides which of them are created.
    creates, replace = _apply_concurrency(
        spec.concurrency_policy, wanted, live, draft, in_flight_jobs={c.job for c in in_flight}
    )
    recovered = {c.job for c in in_flight}
    fresh_claims = [name for name, _, _, _ in creates if name not in recovered | set(armed)]
    for name, tick, manual, _ in creates:
        if name not in recovered:
            in_flight.append(
                armed.get(name) or InFlightClaim(tick=tick, job=name, epoch=leadership.epoch)
            )
            draft.firings.append(
                RecordedFiring(
                    tick=tick,
                    job=name,
                    outcome=FiringOutcome.CREATED,
                    epoch=leadership.epoch,
                    manual=manual,
                )
            )

    # 6. Missed and skipped ticks are recorded with their reasons and counts.
    for group in (*plan.missed, *plan.skipped):
        noun = "tick" if group.count == 1 else "ticks"
        draft.firings.append(
            RecordedFiring(
                tick=group.newest,
                outcome=group.outcome,
                epoch=leadership.epoch,
                reason=f"{group.count} {noun}: {group.reason}",
            )
        )
        draft.events.append(
            EventNote(
                "Warning",
                group.outcome.value,
                f"{group.count} {noun} {group.outcome.value.lower()}, newest "
                f"{format_time(group.newest)}: {group.reason}",
            )
        )
    if plan.reset:
        draft.events.append(
            EventNote("Normal", "ScheduleChanged", "Schedule edited: the cursor moved to now")
        )

    # 7. Arm the next tick: claim it now, in whichever status write comes before it, so
    #    that firing it needs only the create. (An armed claim is a claim: nothing else
    #    may fire that tick, and its Job is never pruned while the claim is written.)
    if plan.next_tick is not None and not plan.suspended:
        upcoming = job_name(meta["name"], plan.next_tick)
        if upcoming not in by_name and all(c.job != upcoming for c in in_flight):
            in_flight.append(
                armed.get(upcoming)
                or InFlightClaim(tick=plan.next_tick, job=upcoming, epoch=leadership.epoch)
            )

    # 8. History: keep the newest finished Jobs, never one whose tick is in flight.
    replaced = {j.name for j in replace}
    prune = _prune(spec, ours, keep={c.job for c in in_flight} | replaced)
    # Pruning the Job of a claim that is in flight as *written* needs this status written
    # first (the shell writes it before pruning), or a new leader reading the old status
    # would create the Job again: such a decision is never deferred.
    prune_needs_status = any(job.name in {c.job for c in old.in_flight} for job in prune)

    # 9. Status: what happened, newest first, and what is running now.
    creating = {name: tick for name, tick, _, _ in creates}
    active = [
        # No uid: the claim cannot know it, and seeing the Job must not change the entry.
        ActiveJob(name=j.name, tick=j.tick or j.created or EPOCH)
        for j in live
        if j.name not in replaced
    ]
    active += [
        ActiveJob(name=name, tick=tick) for name, tick in creating.items() if name not in by_name
    ]
    active.sort(key=lambda a: a.tick)
    finished = {j.name: j.state for j in ours if j.state is not JobState.ACTIVE}
    history = [_with_outcome(f, finished, replaced) for f in old.recent_firings]
    fired = [_with_outcome(f, finished, replaced) for f in draft.firings]
    recent = sorted(fired, key=lambda f: f.tick, reverse=True) + history
    succeeded = [j.finished_at for j in ours if j.state is JobState.SUCCEEDED and j.finished_at]
    last_success = max([*succeeded, *filter(None, [old.last_successful_time])], default=None)

    new = old.model_copy(
        update={
            "last_scheduled_time": plan.cursor,
            "next_schedule_time": plan.next_tick,
            "last_successful_time": last_success,
            "schedule_fingerprint": plan.fingerprint,
            "active": active,
            "active_count": len(active),
            "in_flight": sorted(in_flight, key=lambda c: c.tick),
            "recent_firings": recent[:MAX_RECENT_FIRINGS],
            "last_trigger": last_trigger,
            "observed_generation": generation,
        }
    )
    new = _with_conditions(
        new, now=now, generation=generation, suspended=plan.suspended, draft=draft
    )

    # 10. When to look again: the next fire instant, or soon if claims are unresolved.
    next_wake = plan.next_wake
    if any(c.tick <= now for c in in_flight):
        recheck = now + IN_FLIGHT_RECHECK
        next_wake = recheck if next_wake is None else min(next_wake, recheck)

    # The write may wait (for a later write to carry it) when nothing in it fences a
    # create: no new claim, no Replace, nothing to prune that the written status still
    # protects, nothing to report. Moving the cursor over ticks that were armed is
    # bookkeeping too: their claims are already written.
    new_status, old_status = dump_status(new), dump_status(old)
    over_armed = all(job_name(meta["name"], d.tick) in armed for d in plan.due)
    bookkeeping = _BOOKKEEPING + (_CURSOR if over_armed else ())
    old_claims = {c.job for c in old.in_flight}
    return Decision(
        status=None if new_status == old_status else new_status,
        deferrable=not (fresh_claims or replace or draft.events or prune_needs_status)
        and not (plan.missed or plan.skipped)
        and _beyond(new_status, bookkeeping) == _beyond(old_status, bookkeeping),
        only_resolves_claims=_without(new_status, "inFlight") == _without(old_status, "inFlight")
        and {c.job for c in in_flight} <= old_claims,
        replace=tuple(replace),
        creates=tuple(
            JobToCreate(
                name=name,
                tick=tick,
                manual=manual,
                fire_at=now if manual else tick + jitter_offset(uid, spec.jitter_seconds),
                body=build_job(
                    schedule=body,
                    job_name=name,
                    tick=tick,
                    epoch=leadership.epoch,
                    leader=leadership.identity,
                    trigger=trigger,
                ),
            )
            for name, tick, manual, trigger in creates
        ),
        prune=tuple(prune),
        events=tuple(draft.events),
        missed=sum(f.count for f in plan.missed),
        skipped=tuple(Counter(draft.skips).items())
        + tuple(("missedRunPolicy=Skip", group.count) for group in plan.skipped),
        newly_failed=sum(
            1
            for before, after in zip(old.recent_firings, history, strict=True)
            if before.outcome is not after.outcome and after.outcome is FiringOutcome.FAILED
        ),
        next_wake=next_wake,
        plan=plan,
    )


def _raw_fingerprint(raw: Mapping[str, Any]) -> str:
    """The fingerprint of a spec that fails validation, from the fields that decide ticks."""
    run_at = raw.get("runAt")
    try:
        when = parse_time(run_at) if isinstance(run_at, str) else None
    except ValueError:
        when = None
    jitter = raw.get("jitterSeconds")
    return schedule_fingerprint(
        CronScheduleSpec.model_construct(
            schedule=raw.get("schedule") if isinstance(raw.get("schedule"), str) else None,
            run_at=when,
            time_zone=str(raw.get("timeZone", "UTC")),
            jitter_seconds=jitter if isinstance(jitter, int) else 0,
        )
    )


# Status fields that only follow the Jobs: safe to write late, never needed to fence.
_BOOKKEEPING = ("active", "activeCount", "inFlight", "recentFirings", "lastSuccessfulTime")


# The cursor's fields, bookkeeping only when it moves over ticks claimed ahead.
_CURSOR = ("lastScheduledTime", "nextScheduleTime")


def _beyond(status: Mapping[str, Any], bookkeeping: tuple[str, ...]) -> dict[str, Any]:
    """What a status says beyond bookkeeping: conditions by state, not by message (the
    Ready message names the next tick, which moves with the cursor)."""
    kept = _without(status, *bookkeeping)
    kept["conditions"] = [
        (c.get("type"), c.get("status"), c.get("reason")) for c in status.get("conditions") or []
    ]
    return kept


def _is_armed(claim: InFlightClaim, schedule: str, cursor: datetime | None) -> bool:
    """A claim written ahead of its tick: a scheduled (not manual) tick beyond the cursor."""
    scheduled = claim.job == job_name(schedule, claim.tick)
    return scheduled and (cursor is None or claim.tick > cursor)


def _without(status: Mapping[str, Any], *keys: str) -> dict[str, Any]:
    return {k: v for k, v in status.items() if k not in keys}


def _apply_concurrency(
    policy: ConcurrencyPolicy,
    wanted: list[tuple[str, datetime, bool, str | None]],
    live: list[JobSnapshot],
    draft: _Draft,
    *,
    in_flight_jobs: set[str],
) -> tuple[list[tuple[str, datetime, bool, str | None]], list[JobToDelete]]:
    """Which wanted Jobs to create, and which running Jobs Replace deletes first."""
    if policy is ConcurrencyPolicy.ALLOW or not wanted:
        return wanted, []
    # Claims being finished were decided before; they are created whatever the policy.
    recovering = [w for w in wanted if w[0] in in_flight_jobs]
    fresh = [w for w in wanted if w[0] not in in_flight_jobs]
    if not fresh:
        return recovering, []
    if policy is ConcurrencyPolicy.FORBID:
        running = [j.name for j in live] + [w[0] for w in recovering]
        chosen = [] if running else fresh[:1]
        blocker = running[0] if running else fresh[0][0]
        for name, tick, manual, _ in fresh[len(chosen) :]:
            _record_skip(
                draft, name, tick, manual, f"concurrencyPolicy Forbid: Job {blocker} still runs"
            )
        return recovering + chosen, []
    # Replace: the newest wanted Job replaces everything running.
    newest = max(fresh, key=lambda w: w[1])
    for name, tick, manual, _ in fresh:
        if name != newest[0]:
            _record_skip(
                draft, name, tick, manual, f"concurrencyPolicy Replace: superseded by {newest[0]}"
            )
    replace = [JobToDelete(j.name, j.uid, f"replaced by {newest[0]}") for j in live]
    for job in replace:
        draft.events.append(
            EventNote("Normal", "Replaced", f"Deleting Job {job.name}: {job.reason}")
        )
    return [*recovering, newest], replace


def _record_skip(draft: _Draft, name: str, tick: datetime, manual: bool, reason: str) -> None:
    draft.skips.append(reason.split(":", 1)[0].replace(" ", "="))  # concurrencyPolicy=Forbid
    draft.firings.append(
        RecordedFiring(
            tick=tick,
            outcome=FiringOutcome.SKIPPED,
            epoch=draft.epoch,
            reason=reason,
            manual=manual,
        )
    )
    draft.events.append(EventNote("Normal", "Skipped", f"Tick {format_time(tick)}: {reason}"))


def _with_outcome(
    firing: RecordedFiring, finished: Mapping[str, JobState], replaced: set[str]
) -> RecordedFiring:
    """A Created firing becomes Succeeded, Failed or Replaced once its Job is."""
    if firing.outcome is not FiringOutcome.CREATED or firing.job is None:
        return firing
    if firing.job in replaced:
        return firing.model_copy(update={"outcome": FiringOutcome.REPLACED})
    state = finished.get(firing.job)
    if state is JobState.SUCCEEDED:
        return firing.model_copy(update={"outcome": FiringOutcome.SUCCEEDED})
    if state is JobState.FAILED:
        return firing.model_copy(update={"outcome": FiringOutcome.FAILED})
    return firing


def _prune(
    spec: CronScheduleSpec, jobs: Sequence[JobSnapshot], *, keep: set[str]
) -> list[JobToDelete]:
    """Finished Jobs beyond the history limits, oldest first; never those in `keep`."""
    prune: list[JobToDelete] = []
    for state, limit in (
        (JobState.SUCCEEDED, spec.successful_jobs_history_limit),
        (JobState.FAILED, spec.failed_jobs_history_limit),
    ):
        done = sorted(
            (j for j in jobs if j.state is state and not j.deleting),
            key=lambda j: (j.finished_at or j.created or j.tick or EPOCH, j.name),
            reverse=True,
        )
        prune += [
            JobToDelete(j.name, j.uid, f"beyond {state.value.lower()} history limit {limit}")
            for j in done[limit:]
            if j.name not in keep
        ]
    return prune


def _set_condition(
    conditions: list[Condition],
    *,
    kind: str,
    status: Literal["True", "False", "Unknown"],
    reason: str,
    message: str,
    now: datetime,
    generation: int,
) -> bool:
    """Set one condition in place; True if its status changed (a transition)."""
    for i, cond in enumerate(conditions):
        if cond.type == kind:
            changed = cond.status != status
            conditions[i] = Condition(
                type=kind,
                status=status,
                reason=reason,
                message=message,
                last_transition_time=now if changed else cond.last_transition_time,
                observed_generation=generation,
            )
            return changed
    conditions.append(
        Condition(
            type=kind,
            status=status,
            reason=reason,
            message=message,
            last_transition_time=now,
            observed_generation=generation,
        )
    )
    return True


def _with_conditions(
    status: CronScheduleStatus, *, now: datetime, generation: int, suspended: bool, draft: _Draft
) -> CronScheduleStatus:
    conditions = list(status.conditions)
    _set_condition(
        conditions,
        kind="InvalidSpec",
        status="False",
        reason="Valid",
        message="",
        now=now,
        generation=generation,
    )
    if suspended:
        ready_reason, ready_message = "Suspended", "spec.suspend is true: no tick fires"
    else:
        nxt = status.next_schedule_time
        ready_reason = "Scheduled"
        ready_message = f"next tick {format_time(nxt)}" if nxt else "no further tick"
    was_suspended = any(c.type == "Suspended" and c.status == "True" for c in conditions)
    if _set_condition(
        conditions,
        kind="Suspended",
        status="True" if suspended else "False",
        reason="Suspended" if suspended else "Active",
        message="",
        now=now,
        generation=generation,
    ) and (suspended or was_suspended):  # a new schedule was never suspended: no "Resumed"
        draft.events.append(
            EventNote(
                "Normal",
                "Suspended" if suspended else "Resumed",
                "Firing paused" if suspended else "Firing resumed",
            )
        )
    _set_condition(
        conditions,
        kind="Ready",
        status="False" if suspended else "True",
        reason=ready_reason,
        message=ready_message,
        now=now,
        generation=generation,
    )
    return status.model_copy(update={"conditions": conditions})


def _invalid(
    old: CronScheduleStatus,
    reason: str,
    *,
    now: datetime,
    generation: int,
    updates: Mapping[str, Any] | None = None,
) -> Decision:
    """An unusable spec: say so in conditions and one Event; fire nothing."""
    conditions = list(old.conditions)
    became_invalid = _set_condition(
        conditions,
        kind="InvalidSpec",
        status="True",
        reason="InvalidSpec",
        message=reason,
        now=now,
        generation=generation,
    )
    _set_condition(
        conditions,
        kind="Ready",
        status="False",
        reason="InvalidSpec",
        message=reason,
        now=now,
        generation=generation,
    )
    new = old.model_copy(
        update={
            **(updates or {}),
            "conditions": conditions,
            "observed_generation": generation,
            "next_schedule_time": None,
        }
    )
    events = (EventNote("Warning", "InvalidSpec", reason),) if became_invalid else ()
    changed = dump_status(new) != dump_status(old)
    return Decision(status=dump_status(new) if changed else None, events=events)
