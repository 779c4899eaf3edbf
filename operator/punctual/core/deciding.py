"""One decision for one schedule: what to claim, create, delete and report, and when to look again.

Why it exists: everything Punctual does to a schedule follows from (the schedule as
last read, its Jobs, the API server's time, the leader's epoch). `decide` is that
function, pure, so that every policy (missed ticks, concurrency, manual triggers,
history, in-flight recovery, status and conditions) is tested without a cluster. The
shell (`kube.applying`) applies a Decision in the order that keeps the invariants:

1. write `status` with the schedule's resourceVersion as precondition (the claim:
   cursor moved, new ticks recorded in `inFlight`); a 409 means someone else wrote
   first, and the whole Decision is dropped and made again from fresh state;
2. delete the Jobs that `replace` names (concurrencyPolicy Replace);
3. create `creates` (a 409 AlreadyExists from a Job we own means done);
4. delete `prune` (history), never the Job of a tick still in flight.

This module is the outline of a decision, its numbered steps and the Decision types.
The rules of a run's life are modules of their own, called from those steps:
`overlapping` (concurrencyPolicy: Forbid, Replace, the buffers, a trigger's own
policy), `pausing` (suspension, pauseOnFailure, FreezeWindows), `backfilling`,
`finishing` (endTime, maxRuns) and `succeeding` (successDeadlineSeconds). They share
`drafting`: the schedule as read, the status being drafted, the candidates, the Events.

What it must never do: talk to the API server, read the clock, or decide anything
for a tick at or before the cursor (the planner guarantees that; in-flight claims are
the only ticks carried over, and only to finish them).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from enum import Enum
from typing import Any, Final

from pydantic import ValidationError

from punctual.core import backfilling, finishing, overlapping, pausing, succeeding
from punctual.core.drafting import (
    Candidate,
    Draft,
    EventNote,
    JobToDelete,
    Schedule,
    set_condition,
    trigger_fields,
)
from punctual.core.freezing import Freeze, FreezeAction, ended_between, holding
from punctual.core.jobs import JobSnapshot, JobState, build_job, manual_job_name
from punctual.core.models import (
    MAX_RECENT_FIRINGS,
    ActiveJob,
    CronScheduleSpec,
    CronScheduleStatus,
    FiringOutcome,
    InFlightClaim,
    MissedRunPolicy,
    RecordedFiring,
    describe_error,
    dump_status,
    parse_status,
)
from punctual.core.naming import job_name
from punctual.core.pausing import RESUME_ANNOTATION
from punctual.core.planning import (
    TickPlan,
    plan_ticks,
    schedule_fingerprint,
    tick_source,
)
from punctual.core.schedules import ScheduleError, jitter_offset, load_zone
from punctual.core.stamping import Firing, FiringKind, clashes, describe_clashes
from punctual.core.times import EPOCH, format_time, parse_time
from punctual.core.triggers import TriggerError, TriggerRequest, parse_trigger, request_id

# The annotation a user (or `punctual trigger`) sets on a CronSchedule to fire it now.
# Its value is the request id: each distinct value fires once.
TRIGGER_ANNOTATION: Final = "punctual.dev/trigger"
# How soon to look again at a schedule whose claims are not yet seen as Jobs.
IN_FLIGHT_RECHECK: Final = timedelta(seconds=2)

# The public surface: a Decision, what it holds, and the annotations a user sets. Some are
# defined where they are used most, and exported from here: EventNote and JobToDelete in
# `drafting` (with the other pieces a decision is assembled from), RESUME_ANNOTATION in
# `pausing` (which reads it).
__all__ = [
    "IN_FLIGHT_RECHECK",
    "RESUME_ANNOTATION",
    "TRIGGER_ANNOTATION",
    "Decision",
    "Deferral",
    "EventNote",
    "JobToCreate",
    "JobToDelete",
    "JobToRelease",
    "Leadership",
    "decide",
]


class Deferral(Enum):
    """Whether a Decision's status write may wait for a later write to carry it."""

    NEVER = "never"  # it fences a create, reports something, or moves the cursor
    # It changes only bookkeeping (a Job finished, a claim was seen created): it may
    # wait up to the status delay, so a Job finishing meanwhile costs no write.
    BOOKKEEPING = "bookkeeping"
    # Its only change: claims whose Jobs are now seen leave inFlight. Never worth a
    # write of its own; the next write carries it (and recovery finds the Jobs).
    RESOLVES_CLAIMS_ONLY = "resolves-claims-only"


@dataclass(frozen=True, slots=True)
class JobToCreate:
    name: str
    tick: datetime
    body: dict[str, Any]
    manual: bool = False
    fire_at: datetime | None = None  # tick plus jitter: where firing lag is measured from


@dataclass(frozen=True, slots=True)
class JobToRelease:
    """A Job held by our finalizer, being deleted, whose firing the written status records
    (or will, once this Decision's status is written): its finalizer may go."""

    name: str
    uid: str


@dataclass(frozen=True, slots=True)
class Decision:
    """What the shell applies, in order: status (fenced), replace, creates, prune."""

    status: dict[str, Any] | None
    replace: tuple[JobToDelete, ...] = ()
    creates: tuple[JobToCreate, ...] = ()
    prune: tuple[JobToDelete, ...] = ()
    release: tuple[JobToRelease, ...] = ()
    events: tuple[EventNote, ...] = ()
    next_wake: datetime | None = None
    # When and how the status write may wait for a later one (see `deferring`).
    deferral: Deferral = Deferral.NEVER
    # Set by `deferring` when the status is left for a later write: what that write will
    # say. A create that fails for good is recorded on top of it, at once.
    deferred_status: dict[str, Any] | None = None
    # When its writes are needed: now for a create or a Replace, a new claim's tick for
    # a claim made ahead; None when nothing in it waits on a tick (a first status far
    # from its first tick, conditions, history). The shell lets due writes go first.
    due_by: datetime | None = None
    # For metrics, counted once the status that records them is written.
    missed: int = 0
    skipped: tuple[tuple[str, int], ...] = ()  # (reason, count)
    newly_failed: int = 0

    @property
    def writes(self) -> bool:
        return bool(
            self.status is not None or self.replace or self.creates or self.prune or self.release
        )


@dataclass(frozen=True, slots=True)
class Leadership:
    """Who decides: stamped on every Job (the epoch is the Lease's leaseTransitions)."""

    epoch: int
    identity: str
    # The installation (its Lease, "namespace/name"), written in status with every claim
    # and labelled on every Job; None: not recorded (tests, single installations).
    installation: str | None = None
    # With shards: the shard ("<i>-of-<n>") whose Lease gave the epoch, labelled on every
    # Job so that the admission policy judges it by that shard's Fence entry.
    shard: str | None = None


def decide(
    body: Mapping[str, Any],
    jobs: Sequence[JobSnapshot],
    *,
    now: datetime,
    leadership: Leadership,
    freezes: Sequence[Freeze] = (),
) -> Decision:
    """Decide everything about one schedule at `now` (the API server's time).

    The steps, each a function below or in its rule's module: read the spec; plan the
    ticks; recover the claims in flight; gather the new candidates (due ticks, a manual
    trigger); let the concurrency policy choose; claim them; record missed and skipped
    ticks; claim the next tick ahead; prune history; build the status; say when to look
    again.
    """
    schedule = _read(body, jobs)
    old = schedule.old
    # 1. Read the spec; an invalid one is reported in status and Events, never raised.
    try:
        spec = CronScheduleSpec.model_validate(body.get("spec") or {})
    except ValidationError as error:
        # A fingerprint no valid spec has is written, so that any fix is an edit: the
        # cursor moves to now then, and no tick of the invalid period fires.
        keep = {"schedule_fingerprint": "invalid-" + _raw_fingerprint(body.get("spec") or {})}
        return _invalid(schedule, describe_error(error), now=now, updates=keep)
    # 2. Plan the ticks on the API server's clock, from the cursor as it really is: a tick
    #    claimed ahead whose Job exists has fired, though the write saying so may wait.
    #    Under maxRuns, such a tick counts as a run too.
    ahead = _claimed_ahead(schedule)
    hold = pausing.hold(schedule, spec)
    labels = (body.get("metadata") or {}).get("labels") or {}
    frozen = tuple(f for f in freezes if f.selects(labels))
    deferred = holding(frozen, now, FreezeAction.DEFER)
    plan = plan_ticks(
        _effective(spec, schedule, frozen, paused=hold.paused or deferred is not None, now=now),
        uid=schedule.uid,
        created=schedule.created,
        cursor=_fired_cursor(schedule, ahead),
        fingerprint=old.schedule_fingerprint,
        now=now,
        runs_left=None
        if spec.max_runs is None
        else spec.max_runs - (old.runs or 0) - len(_fired_ahead(schedule, ahead)),
    )
    if plan.invalid is not None:
        written = {"schedule_fingerprint": plan.fingerprint, "last_scheduled_time": plan.cursor}
        return _invalid(schedule, plan.invalid, now=now, updates=written)
    if deferred is not None:  # wake when the window ends, to run what it deferred
        plan = replace(plan, next_wake=min(filter(None, [plan.next_wake, deferred[1]])))
    return _decide_firings(body, schedule, spec, plan, hold, frozen, now=now, leadership=leadership)


def _effective(
    spec: CronScheduleSpec,
    schedule: Schedule,
    frozen: Sequence[Freeze],
    *,
    paused: bool,
    now: datetime,
) -> CronScheduleSpec:
    """The spec as planned now: suspended while paused or deferred by a freeze; right
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


def _decide_firings(
    body: Mapping[str, Any],
    schedule: Schedule,
    spec: CronScheduleSpec,
    plan: TickPlan,
    hold: pausing.Hold,
    frozen: Sequence[Freeze],
    *,
    now: datetime,
    leadership: Leadership,
) -> Decision:
    """Steps 3 to 10, for a valid spec and its plan."""
    old = schedule.old
    draft = Draft(status=old, epoch=leadership.epoch)
    ahead = _claimed_ahead(schedule)
    _record_fired_ahead(schedule, ahead, draft)
    in_flight, recovering = _recover_claims(schedule, ahead)  # 3.
    trigger = _manual_trigger(schedule, now, draft)
    _report_clashes(schedule, spec, draft)
    due = pausing.skip_frozen(_due(schedule, plan, ahead, draft), frozen, draft)
    wanted = recovering + due + ([trigger] if trigger else [])
    recovered = {c.job for c in in_flight}
    overriding = overlapping.overriding(wanted, recovered)  # a trigger with its own policy
    rest = [c for c in wanted if c not in overriding]
    replace: list[JobToDelete] = []
    if spec.concurrency_policy.buffers:  # 5.
        creates = overlapping.apply_buffer(
            spec, schedule, rest, draft, recovering=recovered, now=now
        )
    else:
        overlapping.drop_buffer(schedule, spec, draft)
        creates, replace = overlapping.apply_concurrency(
            spec.concurrency_policy, rest, schedule.live, draft, recovering=recovered
        )
    creates, replace = overlapping.apply_overrides(
        overriding, creates, replace, schedule.live, draft
    )
    fills, backfill_wake = backfilling.backfill(schedule, spec, creates, draft, now=now)
    creates = [*creates, *fills]
    fresh = _claim(creates, in_flight, ahead, draft)
    runs, plan = finishing.count_runs(spec, old, plan, draft)
    _record_missed_and_skipped(plan, draft)  # 6.
    if plan.next_tick is None or holding(frozen, plan.next_tick) is None:
        _claim_next_tick(schedule, plan, in_flight, ahead, leadership.epoch)  # 7.
    replaced = {j.name for j in replace}  # 8. history, never a Job whose tick is in flight
    prune = _prune(spec, schedule.ours, keep={c.job for c in in_flight} | replaced)
    # 9. Status: what happened, newest first, and what is running now.
    new, history = _new_status(
        schedule,
        plan,
        draft,
        creates=creates,
        in_flight=in_flight,
        replaced=replaced,
        last_trigger=_handled_trigger(schedule),
        installation=leadership.installation,
        now=now,
        runs=runs,
        max_runs=spec.max_runs,
        suspension=pausing.suspension(spec, now),
    )
    new = pausing.with_hold(
        new, hold, spec, schedule.name, now=now, generation=schedule.generation, draft=draft
    )
    new, fresh_until = succeeding.with_freshness(new, spec, schedule, now=now, draft=draft)
    new = pausing.with_frozen(new, frozen, now=now, generation=schedule.generation, draft=draft)
    new_status = dump_status(new)
    deferral = _deferral(schedule, plan, draft, new_status, in_flight, ahead, fresh, replace, prune)
    release, release_needs_status = _release(schedule)  # a held Job's claim: written first
    deferral = Deferral.NEVER if release_needs_status else deferral
    return Decision(
        status=None if new_status == dump_status(old) else new_status,
        deferral=deferral,
        replace=tuple(replace),
        creates=tuple(
            _job_to_create(body, c, spec, leadership, uid=schedule.uid, now=now) for c in creates
        ),
        prune=tuple(prune),
        release=tuple(release),
        events=tuple(draft.events),
        missed=sum(f.count for f in plan.missed),
        skipped=_skip_counts(plan, draft),
        newly_failed=_newly_failed(old.recent_firings, history),
        due_by=_due_by(schedule, creates, replace, in_flight, now),
        next_wake=_next_wake(
            plan,
            in_flight,
            now,
            overlapping.buffer_deadline(spec, draft),
            fresh_until,
            backfill_wake,
        ),
    )


def _due_by(
    schedule: Schedule,
    creates: Sequence[Candidate],
    replace: Sequence[JobToDelete],
    in_flight: Sequence[InFlightClaim],
    now: datetime,
) -> datetime | None:
    """When this decision's writes are needed by: at once for a create or a Replace; by
    its tick for a claim not yet written (the claim made ahead of the next tick); never
    for the rest, which only records."""
    if creates or replace:
        return now
    written = {c.job for c in schedule.old.in_flight}
    ticks = [c.tick for c in in_flight if c.job not in written]
    return min(ticks, default=None)


def _release(schedule: Schedule) -> tuple[list[JobToRelease], bool]:
    """Held Jobs that are being deleted (by a person, a TTL, garbage collection): their
    finalizer goes once their firing is recorded in the written status. True when one of
    them is still in flight as written: this decision's status, which resolves that
    claim (the Job is seen), must be written first."""
    going = [j for j in schedule.ours if j.held and j.deleting]
    written_claims = {c.job for c in schedule.old.in_flight}
    release = [JobToRelease(j.name, j.uid) for j in going]
    return release, any(j.name in written_claims for j in going)


def _skip_counts(plan: TickPlan, draft: Draft) -> tuple[tuple[str, int], ...]:
    """Skipped ticks by reason, for the metric: concurrency skips and missedRunPolicy=Skip."""
    by_policy = tuple(("missedRunPolicy=Skip", group.count) for group in plan.skipped)
    return tuple(Counter(draft.skips).items()) + by_policy


def _newly_failed(before: Sequence[RecordedFiring], after: Sequence[RecordedFiring]) -> int:
    """How many recorded firings turned Failed in this decision (for the metric)."""
    return sum(
        1
        for old, new in zip(before, after, strict=True)
        if old.outcome is not new.outcome and new.outcome is FiringOutcome.FAILED
    )


def _read(body: Mapping[str, Any], jobs: Sequence[JobSnapshot]) -> Schedule:
    meta = body["metadata"]
    uid = str(meta["uid"])
    try:
        old = parse_status(body)
    except ValidationError:
        old = CronScheduleStatus()  # an unreadable status is rebuilt, never a crash
    ours = tuple(j for j in jobs if j.schedule_uid == uid)
    return Schedule(
        name=str(meta["name"]),
        uid=uid,
        generation=int(meta.get("generation") or 0),
        annotations=meta.get("annotations") or {},
        created=parse_time(meta["creationTimestamp"]),
        old=old,
        ours=ours,
        by_name={j.name: j for j in ours},
    )


def _claimed_ahead(schedule: Schedule) -> dict[str, InFlightClaim]:
    """Claims made ahead of their tick: scheduled (not manual) ticks beyond the cursor.

    They are not recovered as in-flight claims: their tick is decided with the due
    ticks, under the policy as it is then, and a claim the plan no longer fires goes.
    """
    cursor = schedule.old.last_scheduled_time
    return {
        c.job: c
        for c in schedule.old.in_flight
        if c.job == job_name(schedule.name, c.tick)
        and not c.backfill
        and (cursor is None or c.tick > cursor)
    }


def _fired_ahead(schedule: Schedule, ahead: Mapping[str, InFlightClaim]) -> list[InFlightClaim]:
    """Claims made ahead whose Job exists: created at their tick by a pass whose status
    write was left for later."""
    return sorted((c for c in ahead.values() if c.job in schedule.by_name), key=lambda c: c.tick)


def _fired_cursor(schedule: Schedule, ahead: Mapping[str, InFlightClaim]) -> datetime | None:
    """The cursor as it really is: the written one, or the newest tick fired on a claim
    made ahead. Planning from the written one alone would count those ticks again, and
    call them missed (superseded) under RunLatest."""
    fired = [c.tick for c in _fired_ahead(schedule, ahead)]
    cursor = schedule.old.last_scheduled_time
    return max([*fired, *([cursor] if cursor is not None else [])], default=None)


def _record_fired_ahead(
    schedule: Schedule, ahead: Mapping[str, InFlightClaim], draft: Draft
) -> None:
    """Record the ticks fired on claims made ahead, with the epoch that claimed them."""
    cursor = schedule.old.last_scheduled_time
    for claim in _fired_ahead(schedule, ahead):
        if cursor is None or claim.tick > cursor:
            draft.firings.append(
                RecordedFiring(
                    tick=claim.tick, job=claim.job, outcome=FiringOutcome.CREATED, epoch=claim.epoch
                )
            )


def _recover_claims(
    schedule: Schedule, ahead: Mapping[str, InFlightClaim]
) -> tuple[list[InFlightClaim], list[Candidate]]:
    """3. Claims in flight whose Job is not seen: created again (the claim was written,
    the create may not have happened: a crash, a 5xx). Seen ones are resolved."""
    in_flight: list[InFlightClaim] = []
    recovering: list[Candidate] = []
    for claim in schedule.old.in_flight:
        if claim.job in schedule.by_name or claim.job in ahead:
            continue
        in_flight.append(claim)
        manual = claim.job != job_name(schedule.name, claim.tick)
        request = schedule.old.last_trigger if manual else None
        if request is not None and claim.job != manual_job_name(schedule.name, request):
            request = None  # an older manual claim: its request id is no longer known
        kind = FiringKind.MANUAL if manual else FiringKind.SCHEDULED
        kind = FiringKind.BACKFILL if claim.backfill else kind
        asked = _asked(schedule, request)
        recovering.append(Candidate(claim.job, claim.tick, manual, request, kind, asked))
    return in_flight, recovering


def _due(
    schedule: Schedule, plan: TickPlan, ahead: Mapping[str, InFlightClaim], draft: Draft
) -> list[Candidate]:
    """4. The due ticks. One whose Job exists was created on its claim made ahead, by
    a pass whose status write was left for later: it is recorded, not created."""
    due: list[Candidate] = []
    for tick in (d.tick for d in plan.due):
        name = job_name(schedule.name, tick)
        if name not in schedule.by_name:
            due.append(Candidate(name, tick))
            continue
        epoch = ahead[name].epoch if name in ahead else draft.epoch
        draft.firings.append(
            RecordedFiring(tick=tick, job=name, outcome=FiringOutcome.CREATED, epoch=epoch)
        )
    return due


def _manual_trigger(schedule: Schedule, now: datetime, draft: Draft) -> Candidate | None:
    """A trigger annotation with a request id not seen before fires once, now (see
    `triggers` for its two spellings). One that cannot be honoured is reported once."""
    value = schedule.annotations.get(TRIGGER_ANNOTATION)
    last = schedule.old.last_trigger
    if not value or last in (value, request_id(value)):  # the raw value: an older operator's
        return None
    try:
        asked = parse_trigger(value)
    except TriggerError as error:
        draft.events.append(EventNote("Warning", "InvalidTrigger", str(error)))
        return None
    draft.events.append(EventNote("Normal", "Triggered", f"Manual trigger {asked.describe()}"))
    name = manual_job_name(schedule.name, asked.request)
    return Candidate(name, now, True, asked.request, FiringKind.MANUAL, asked)


def _handled_trigger(schedule: Schedule) -> str | None:
    """status.lastTrigger: the request id of the trigger annotation, handled in this
    decision or before (fired, skipped, or refused as unreadable)."""
    value = schedule.annotations.get(TRIGGER_ANNOTATION)
    return request_id(value) if value else schedule.old.last_trigger


def _asked(schedule: Schedule, request: str | None) -> TriggerRequest | None:
    """The request `request` as the annotation still spells it, if it still does."""
    value = schedule.annotations.get(TRIGGER_ANNOTATION)
    if request is None or not value:
        return None
    try:
        asked = parse_trigger(value)
    except TriggerError:
        return None
    return asked if asked.request == request else None


def _report_clashes(schedule: Schedule, spec: CronScheduleSpec, draft: Draft) -> None:
    """A jobTemplate that sets one of Punctual's variables itself keeps its value, and
    says so in one Warning Event per generation of the schedule: in the decision that
    first writes that generation as status.observedGeneration. That write is fenced,
    so the Event is posted once across leaders and restarts, at no write of its own;
    an edit reports it again, while Events expire (an hour, by default)."""
    if schedule.old.observed_generation == schedule.generation:
        return
    found = clashes(spec.job_template)
    if found:
        draft.events.append(EventNote("Warning", "EnvironmentClash", describe_clashes(found)))


def _claim(
    creates: Sequence[Candidate],
    in_flight: list[InFlightClaim],
    ahead: Mapping[str, InFlightClaim],
    draft: Draft,
) -> list[str]:
    """5. Put the chosen candidates in flight and record them; return the Jobs whose
    claim is new in this write (not recovered, not claimed ahead before)."""
    recovered = {c.job for c in in_flight}
    for candidate in creates:
        if candidate.job in recovered:
            continue
        claim = ahead.get(candidate.job)
        backfill = True if candidate.kind is FiringKind.BACKFILL else None
        in_flight.append(
            claim
            or InFlightClaim(
                tick=candidate.tick, job=candidate.job, epoch=draft.epoch, backfill=backfill
            )
        )
        draft.firings.append(
            RecordedFiring(
                tick=candidate.tick,
                job=candidate.job,
                outcome=FiringOutcome.CREATED,
                epoch=draft.epoch,
                manual=candidate.manual,
                backfill=backfill,
                **trigger_fields(candidate),
            )
        )
    return [c.job for c in creates if c.job not in recovered and c.job not in ahead]


def _record_missed_and_skipped(plan: TickPlan, draft: Draft) -> None:
    """6. Missed and skipped ticks are recorded with their reasons and counts."""
    for group in (*plan.missed, *plan.skipped):
        noun = "tick" if group.count == 1 else "ticks"
        draft.firings.append(
            RecordedFiring(
                tick=group.newest,
                outcome=group.outcome,
                epoch=draft.epoch,
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


def _claim_next_tick(
    schedule: Schedule,
    plan: TickPlan,
    in_flight: list[InFlightClaim],
    ahead: Mapping[str, InFlightClaim],
    epoch: int,
) -> None:
    """7. Claim the next tick ahead, in whichever status write comes before it, so that
    firing it needs only the create. A claim ahead is a claim: nothing else may fire
    that tick, and its Job is never pruned while the claim is written."""
    if plan.next_tick is None or plan.suspended:
        return
    upcoming = job_name(schedule.name, plan.next_tick)
    if upcoming in schedule.by_name or any(c.job == upcoming for c in in_flight):
        return
    in_flight.append(
        ahead.get(upcoming) or InFlightClaim(tick=plan.next_tick, job=upcoming, epoch=epoch)
    )


def _new_status(
    schedule: Schedule,
    plan: TickPlan,
    draft: Draft,
    *,
    creates: Sequence[Candidate],
    in_flight: Sequence[InFlightClaim],
    replaced: set[str],
    last_trigger: str | None,
    installation: str | None,
    now: datetime,
    runs: int | None,
    max_runs: int | None,
    suspension: tuple[str, str] | None,
) -> tuple[CronScheduleStatus, list[RecordedFiring]]:
    """9. The new status, and the old firings with their outcomes brought up to date."""
    old, ours = schedule.old, schedule.ours
    active = [
        # No uid: the claim cannot know it, and seeing the Job must not change the entry.
        ActiveJob(name=j.name, tick=j.tick or j.created or EPOCH)
        for j in schedule.live
        if j.name not in replaced
    ]
    active += [ActiveJob(name=c.job, tick=c.tick) for c in creates if c.job not in schedule.by_name]
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
            "upcoming_ticks": list(plan.upcoming) or None,
            "runs": runs,
            "runs_remaining": None if runs is None or max_runs is None else max(max_runs - runs, 0),
            "last_successful_time": last_success,
            "schedule_fingerprint": plan.fingerprint,
            "active": active,
            "active_count": len(active),
            "in_flight": sorted(in_flight, key=lambda c: c.tick),
            "recent_firings": recent[:MAX_RECENT_FIRINGS],
            "last_trigger": last_trigger,
            "buffered": draft.buffered or None,
            "backfill": draft.backfill or old.backfill,
            "installation": installation or old.installation,
            "observed_generation": schedule.generation,
        }
    )
    new = _with_conditions(
        new, now=now, generation=schedule.generation, suspension=suspension, draft=draft
    )
    new = finishing.with_finished(new, plan, now=now, generation=schedule.generation, draft=draft)
    return new, history


def _deferral(
    schedule: Schedule,
    plan: TickPlan,
    draft: Draft,
    new_status: Mapping[str, Any],
    in_flight: Sequence[InFlightClaim],
    ahead: Mapping[str, InFlightClaim],
    fresh: Sequence[str],
    replace: Sequence[JobToDelete],
    prune: Sequence[JobToDelete],
) -> Deferral:
    """Whether the status write may wait for a later write to carry it.

    It may when nothing in it fences a create: no new claim, no Replace, nothing to
    prune that the written status still protects (pruning the Job of a claim in flight
    as *written* needs this status first, or a new leader reading the old one would
    create the Job again), nothing to report. Moving the cursor over ticks claimed
    ahead is bookkeeping too: their claims are already written.
    """
    old = schedule.old
    old_status = dump_status(old)
    old_claims = {c.job for c in old.in_flight}
    prune_needs_status = any(job.name in old_claims for job in prune)
    if fresh or replace or draft.events or prune_needs_status or plan.missed or plan.skipped:
        return Deferral.NEVER
    over_ahead = all(job_name(schedule.name, d.tick) in ahead for d in plan.due)
    bookkeeping = _BOOKKEEPING + (_CURSOR if over_ahead else ())
    if _beyond(new_status, bookkeeping) != _beyond(old_status, bookkeeping):
        return Deferral.NEVER
    resolves_only = {c.job for c in in_flight} <= old_claims
    if resolves_only and _without(new_status, "inFlight") == _without(old_status, "inFlight"):
        return Deferral.RESOLVES_CLAIMS_ONLY
    return Deferral.BOOKKEEPING


def _job_to_create(
    body: Mapping[str, Any],
    candidate: Candidate,
    spec: CronScheduleSpec,
    leadership: Leadership,
    *,
    uid: str,
    now: datetime,
) -> JobToCreate:
    tick = candidate.tick
    asked = candidate.trigger
    return JobToCreate(
        name=candidate.job,
        tick=tick,
        manual=candidate.manual,
        fire_at=now if candidate.manual else tick + jitter_offset(uid, spec.jitter_seconds),
        body=build_job(
            schedule=body,
            job_name=candidate.job,
            tick=tick,
            epoch=leadership.epoch,
            leader=leadership.identity,
            trigger=candidate.request,
            installation=leadership.installation,
            firing=_firing(body, candidate, spec, leadership, uid=uid),
            triggered_by=None if asked is None else asked.triggered_by,
            trigger_reason=None if asked is None else asked.trigger_reason,
            shard=leadership.shard,
        ),
    )


def _firing(
    body: Mapping[str, Any],
    candidate: Candidate,
    spec: CronScheduleSpec,
    leadership: Leadership,
    *,
    uid: str,
) -> Firing:
    """What the Job's containers are told (see `stamping`): the previous tick is the
    newest of the schedule's combined ticks before this firing's."""
    try:
        zone = load_zone(spec.time_zone)
        previous = tick_source(spec, uid=uid).prev_tick(candidate.tick - _BEFORE)
    except ScheduleError:  # the plan would have refused it; never fire on a guess
        zone, previous = load_zone("UTC"), None
    return Firing(
        tick=candidate.tick,
        previous_tick=previous,
        zone=zone,
        schedule=str(body["metadata"]["name"]),
        namespace=str(body["metadata"]["namespace"]),
        kind=candidate.kind,
        epoch=leadership.epoch,
    )


_BEFORE: Final = timedelta(microseconds=1)


def _next_wake(
    plan: TickPlan, in_flight: Sequence[InFlightClaim], now: datetime, *deadlines: datetime | None
) -> datetime | None:
    """10. The next fire instant, or soon if claims are unresolved, or the next deadline
    (a buffered tick's, the freshness objective's)."""
    wakes = [w for w in (plan.next_wake, *deadlines) if w is not None]
    if any(c.tick <= now for c in in_flight):
        wakes.append(now + IN_FLIGHT_RECHECK)
    return min(wakes, default=None)


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
_BOOKKEEPING = (
    "active",
    "activeCount",
    "inFlight",
    "recentFirings",
    "lastSuccessfulTime",
    "lastSuccessfulTick",
)


# The cursor's fields, bookkeeping only when it moves over ticks claimed ahead.
_CURSOR = ("lastScheduledTime", "nextScheduleTime", "upcomingTicks", "runs", "runsRemaining")


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
            JobToDelete(
                j.name, j.uid, f"beyond {state.value.lower()} history limit {limit}", j.held
            )
            for j in done[limit:]
            if j.name not in keep
        ]
    return prune


def _with_conditions(
    status: CronScheduleStatus,
    *,
    now: datetime,
    generation: int,
    suspension: tuple[str, str] | None,
    draft: Draft,
) -> CronScheduleStatus:
    conditions = list(status.conditions)
    set_condition(
        conditions,
        kind="InvalidSpec",
        status="False",
        reason="Valid",
        message="",
        now=now,
        generation=generation,
    )
    suspended = suspension is not None
    if suspension is not None:
        ready_reason, ready_message = suspension
    else:
        nxt = status.next_schedule_time
        ready_reason = "Scheduled"
        ready_message = f"next tick {format_time(nxt)}" if nxt else "no further tick"
    was_suspended = any(c.type == "Suspended" and c.status == "True" for c in conditions)
    if set_condition(
        conditions,
        kind="Suspended",
        status="True" if suspended else "False",
        reason=suspension[0] if suspension is not None else "Active",
        message=suspension[1] if suspension is not None else "",
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
    set_condition(
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
    schedule: Schedule,
    reason: str,
    *,
    now: datetime,
    updates: Mapping[str, Any] | None = None,
) -> Decision:
    """An unusable spec: say so in conditions and one Event; fire nothing."""
    old, generation = schedule.old, schedule.generation
    conditions = list(old.conditions)
    became_invalid = set_condition(
        conditions,
        kind="InvalidSpec",
        status="True",
        reason="InvalidSpec",
        message=reason,
        now=now,
        generation=generation,
    )
    set_condition(
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
            "upcoming_ticks": None,
        }
    )
    events = (EventNote("Warning", "InvalidSpec", reason),) if became_invalid else ()
    changed = dump_status(new) != dump_status(old)
    return Decision(status=dump_status(new) if changed else None, events=events)
