"""The claims of one decision: what is in flight, what is due, what this write claims.

Why it exists: the claim protocol (see `deciding`, and docs/architecture.md "How
exactly-once works") writes a tick into status before its Job is created, and finishes
any claim it finds on takeover. Scheduled ticks are claimed ahead by a window
(status.claimedThrough: every tick after the cursor up to it, one write for all of
them, claimed again when half is used: `window_due`, `claim_window`); the rest (manual
triggers, retries, backfills, runs after upstreams, a tick no window covered) each by
an entry of status.inFlight. These rules read the claims as written and the Jobs as
seen, and return frozen records: the candidates a decision starts from (`Gathered`:
claims to recover, due ticks, a manual trigger, ticks fired on claims made ahead) and
the claims it writes (`Claims`, `Window`). They also say which Jobs being deleted may
lose our finalizer (`free`), which finished Jobs history clean-up deletes (`prune`),
and when the writes are needed by (`due_by`).

What it must never do: claim a tick at or before the cursor (only claims already in
flight are carried over, and only to finish them), forget a claim whose Job is not seen,
or change its arguments. Like all of `punctual.core`, it never talks to the API server
or reads the clock.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

from punctual.core.decisions import JobToFree
from punctual.core.jobs import JobSnapshot, JobState, manual_job_name
from punctual.core.keys import ANNOTATION_TRIGGER, ANNOTATION_TRIGGERED_BY
from punctual.core.models import (
    CronScheduleSpec,
    FiringOutcome,
    InFlightClaim,
    MissedRunPolicy,
    RecordedFiring,
)
from punctual.core.naming import job_name, parse_tick_from_job_name
from punctual.core.planning import TickPlan, schedule_fingerprint, tick_source
from punctual.core.records import Candidate, EventNote, JobToDelete, ScheduleRead, trigger_fields
from punctual.core.schedules import ScheduleError
from punctual.core.stamping import FiringKind
from punctual.core.times import EPOCH
from punctual.core.triggers import TriggerError, TriggerRequest, parse_trigger, request_id

# The claim window's bounds, in seconds (--claim-window): at least one tick is claimed
# whatever the window; a longer window saves writes, a shorter one bounds how far ahead
# status names ticks.
MIN_WINDOW = 10.0
MAX_WINDOW = 600.0
# The most ticks one window reaches over (a schedule every second, a ten-minute window).
MAX_WINDOW_TICKS = 600


@dataclass(frozen=True, slots=True)
class Ahead:
    """Scheduled ticks claimed ahead of their tick, as the written status says: every
    tick of the claim window (cursor < tick <= status.claimedThrough) and the per-tick
    claims an operator before the window wrote in inFlight.

    They are not recovered as in-flight claims: their tick is decided with the due
    ticks, under the policy as it is then, and a claim the plan no longer fires goes.
    """

    schedule: str
    cursor: datetime | None
    through: datetime | None  # status.claimedThrough
    epoch: int  # status.claimEpoch
    listed: Mapping[str, InFlightClaim]  # inFlight's claims ahead

    def get(self, job: str) -> InFlightClaim | None:
        """The claim ahead of the Job named `job`, if it is claimed ahead."""
        listed = self.listed.get(job)
        if listed is not None or self.through is None:
            return listed
        # The parse takes only a tick's own spelling (ASCII digits, no leading zero), so a
        # name it reads is `job_name` of its tick: no second spelling to compare.
        tick = parse_tick_from_job_name(self.schedule, job)
        if tick is None or tick > self.through:
            return None
        if self.cursor is not None and tick <= self.cursor:
            return None
        return InFlightClaim(tick=tick, job=job, epoch=self.epoch)

    def __contains__(self, job: object) -> bool:
        return isinstance(job, str) and self.get(job) is not None

    def __getitem__(self, job: str) -> InFlightClaim:
        claim = self.get(job)
        if claim is None:
            raise KeyError(job)
        return claim


@dataclass(frozen=True, slots=True)
class Window:
    """The claim window a status write says: status.claimedThrough and claimEpoch."""

    through: datetime | None
    epoch: int | None


def claimed_ahead(schedule: ScheduleRead) -> Ahead:
    """The ticks claimed ahead, as written (see `Ahead`)."""
    old = schedule.old
    cursor = old.last_scheduled_time
    listed = {
        c.job: c
        for c in old.in_flight
        if c.job == job_name(schedule.name, c.tick)
        and not c.backfill
        and not c.upstream
        and (cursor is None or c.tick > cursor)
    }
    epoch = old.claim_epoch if old.claim_epoch is not None else 0
    return Ahead(schedule.name, cursor, old.claimed_through, epoch, listed)


def fired_ahead(schedule: ScheduleRead, ahead: Ahead) -> list[InFlightClaim]:
    """Claims made ahead whose Job exists: created at their tick by a pass whose status
    write was left for later."""
    found = (ahead.get(name) for name in schedule.by_name)
    return sorted((c for c in found if c is not None), key=lambda c: c.tick)


def fired_in_order(
    schedule: ScheduleRead, spec: CronScheduleSpec, fired: Sequence[InFlightClaim]
) -> tuple[InFlightClaim, ...]:
    """Of the claims ahead whose Job exists (`fired`, oldest first), those fired in
    order under RunAll: from the written cursor on, each the tick of `spec` (as planned)
    after the one before. Under the other policies, all of `fired`.

    A tick of the window whose create failed while later ones landed (a restarted API
    server's fencing policy refused it for a moment, then took the next; at a shard
    hand-over, the Fence refused the outgoing leader's) ends it there: the cursor as it
    really is (`fired_cursor`) goes no further, so that tick is planned and created
    again, never passed over; the later ones are planned due with their Jobs seen, and
    recorded as fired, not created again. (Passing over it lost one tick at each of four
    API server restarts in `make chaos`.) Under RunLatest and Skip a missing tick before
    a fired one is superseded by it all the same, and planning from before it would call
    the fired ones missed.

    Only on the ticks the claims were made on: after an edit of what decides the ticks
    (the written fingerprint is not the spec's), the new spec's ticks say nothing of the
    old claims' order, and all of `fired` is kept (judged by the new ticks, none of them
    was recorded as fired: test_k8s_63371)."""
    if not fired or spec.missed_run_policy is not MissedRunPolicy.RUN_ALL:
        return tuple(fired)
    if schedule.old.schedule_fingerprint != schedule_fingerprint(spec):
        return tuple(fired)
    try:
        next_tick = tick_source(spec, uid=schedule.uid).next_tick
    except ScheduleError:  # no ticks of its own, or unusable: the plan says so
        return tuple(fired)
    expected = next_tick(schedule.old.last_scheduled_time or schedule.created)
    kept: list[InFlightClaim] = []
    for claim in fired:
        if expected is None or claim.tick > expected:
            break
        if claim.tick == expected:
            kept.append(claim)
            expected = next_tick(claim.tick)
    return tuple(kept)


def fired_cursor(schedule: ScheduleRead, fired: Sequence[InFlightClaim]) -> datetime | None:
    """The cursor as it really is: the written one, or the newest tick fired on a claim
    made ahead (`fired`, from `fired_ahead`). Planning from the written one alone would
    count those ticks again, and call them missed (superseded) under RunLatest."""
    cursor = schedule.old.last_scheduled_time
    return max([*(c.tick for c in fired), *([cursor] if cursor is not None else [])], default=None)


@dataclass(frozen=True, slots=True)
class Gathered:
    """The candidates of one decision before any policy chooses among them."""

    in_flight: tuple[InFlightClaim, ...]  # written claims whose Job is not seen yet
    recovering: tuple[Candidate, ...]  # their Jobs, created again
    due: tuple[Candidate, ...]
    trigger: Candidate | None
    fired: tuple[RecordedFiring, ...]  # fired on claims made ahead: recorded, not created
    notes: tuple[EventNote, ...]  # about the manual trigger


def gather(
    schedule: ScheduleRead,
    plan: TickPlan,
    ahead: Ahead,
    *,
    epoch: int,
    now: datetime,
    verified_triggers: bool = False,
    fired_ahead_: Sequence[InFlightClaim] | None = None,
) -> Gathered:
    """Recover the claims in flight, take the due ticks and a manual trigger;
    `fired_ahead_`: `fired_ahead(schedule, ahead)`, when the caller has it already."""
    recovered = _recover(schedule, ahead)
    cursor = schedule.old.last_scheduled_time
    if fired_ahead_ is None:
        fired_ahead_ = fired_ahead(schedule, ahead)
    fired = [
        RecordedFiring(tick=c.tick, job=c.job, outcome=FiringOutcome.CREATED, epoch=c.epoch)
        for c in fired_ahead_
        if cursor is None or c.tick > cursor
    ]
    due: list[Candidate] = []
    for tick in (d.tick for d in plan.due):
        name = job_name(schedule.name, tick)
        if name not in schedule.by_name:
            due.append(Candidate(name, tick))
            continue  # created on its claim made ahead, its write left for later: recorded
        claimed = ahead[name].epoch if name in ahead else epoch
        fired.append(
            RecordedFiring(tick=tick, job=name, outcome=FiringOutcome.CREATED, epoch=claimed)
        )
    asked = _manual_trigger(schedule, now, verified_triggers)
    return Gathered(
        recovered.in_flight,
        recovered.recovering,
        tuple(due),
        asked.candidate,
        tuple(fired),
        asked.notes,
    )


@dataclass(frozen=True, slots=True)
class _Recovered:
    in_flight: tuple[InFlightClaim, ...]  # written claims whose Job is not seen yet
    recovering: tuple[Candidate, ...]  # their Jobs, created again


def _recover(schedule: ScheduleRead, ahead: Ahead) -> _Recovered:
    """Claims in flight whose Job is not seen: created again (the claim was written, the
    create may not have happened: a crash, a 5xx). Seen ones are resolved."""
    in_flight: list[InFlightClaim] = []
    recovering: list[Candidate] = []
    for claim in schedule.old.in_flight:
        if claim.job in schedule.by_name or claim.job in ahead:
            continue
        in_flight.append(claim)
        if claim.attempt:  # a retry of a failed tick (retrying): scheduled, its own name
            recovering.append(Candidate(claim.job, claim.tick, attempt=claim.attempt))
            continue
        if claim.upstream:  # a run after upstream runs (chaining)
            started = tuple(claim.upstream)
            recovering.append(
                Candidate(claim.job, claim.tick, kind=FiringKind.AFTER, upstream=started)
            )
            continue
        manual = claim.job != job_name(schedule.name, claim.tick)
        request = schedule.old.last_trigger if manual else None
        if request is not None and claim.job != manual_job_name(schedule.name, request):
            request = None  # an older manual claim: its request id is no longer known
        kind = FiringKind.MANUAL if manual else FiringKind.SCHEDULED
        kind = FiringKind.BACKFILL if claim.backfill else kind
        asked = _asked(schedule, request)
        recovering.append(Candidate(claim.job, claim.tick, manual, request, kind, asked))
    return _Recovered(tuple(in_flight), tuple(recovering))


@dataclass(frozen=True, slots=True)
class _Trigger:
    candidate: Candidate | None = None  # the manual trigger to fire, if any
    notes: tuple[EventNote, ...] = ()


def _manual_trigger(
    schedule: ScheduleRead, now: datetime, verified_triggers: bool = False
) -> _Trigger:
    """A trigger annotation with a request id not seen before fires once, now (see
    `triggers` for its two spellings). One that cannot be honoured is reported once.
    With `verified_triggers` (the triggers admission policy is in force), the name the
    request gives is verified when it is the one the API server checked (the plain
    punctual.dev/triggered-by annotation)."""
    value = schedule.annotations.get(ANNOTATION_TRIGGER)
    last = schedule.old.last_trigger
    if not value or last in (value, request_id(value)):  # the raw value: an older operator's
        return _Trigger()
    try:
        asked = parse_trigger(value)
    except TriggerError as error:
        return _Trigger(notes=(EventNote("Warning", "InvalidTrigger", str(error)),))
    checked = schedule.annotations.get(ANNOTATION_TRIGGERED_BY)
    if verified_triggers and asked.triggered_by is not None and checked == asked.triggered_by:
        asked = dataclasses.replace(asked, verified=True)
    note = EventNote("Normal", "Triggered", f"Manual trigger {asked.describe()}")
    name = manual_job_name(schedule.name, asked.request)
    return _Trigger(Candidate(name, now, True, asked.request, FiringKind.MANUAL, asked), (note,))


def handled_trigger(schedule: ScheduleRead) -> str | None:
    """status.lastTrigger: the request id of the trigger annotation, handled in this
    decision or before (fired, skipped, or refused as unreadable)."""
    value = schedule.annotations.get(ANNOTATION_TRIGGER)
    return request_id(value) if value else schedule.old.last_trigger


def _asked(schedule: ScheduleRead, request: str | None) -> TriggerRequest | None:
    """The request `request` as the annotation still spells it, if it still does."""
    value = schedule.annotations.get(ANNOTATION_TRIGGER)
    if request is None or not value:
        return None
    try:
        asked = parse_trigger(value)
    except TriggerError:
        return None
    return asked if asked.request == request else None


@dataclass(frozen=True, slots=True)
class Claims:
    """The claims this decision writes, and the firings it records for its creates."""

    in_flight: tuple[InFlightClaim, ...]
    new: tuple[str, ...]  # Jobs whose claim is new in this write
    created: tuple[RecordedFiring, ...]
    window: Window | None = None  # None: the written window, kept


def claim(
    creates: Sequence[Candidate],
    gathered: Gathered,
    ahead: Ahead,
    *,
    epoch: int,
) -> Claims:
    """Put the chosen candidates in flight and record them as created."""
    recovered = {c.job for c in gathered.in_flight}
    in_flight = list(gathered.in_flight)
    created: list[RecordedFiring] = []
    for candidate in creates:
        if candidate.job in recovered:
            continue
        backfill = True if candidate.kind is FiringKind.BACKFILL else None
        attempt = candidate.attempt if candidate.attempt > 1 else None
        in_flight.append(
            ahead.get(candidate.job)
            or InFlightClaim(
                tick=candidate.tick,
                job=candidate.job,
                epoch=epoch,
                backfill=backfill,
                attempt=attempt,
                upstream=list(candidate.upstream) or None,
            )
        )
        created.append(
            RecordedFiring(
                tick=candidate.tick,
                job=candidate.job,
                outcome=FiringOutcome.CREATED,
                epoch=epoch,
                manual=candidate.manual,
                backfill=backfill,
                attempt=attempt,
                upstream=list(candidate.upstream) or None,
                **trigger_fields(candidate),
            )
        )
    fresh = tuple(c.job for c in creates if c.job not in recovered and c.job not in ahead)
    return Claims(tuple(in_flight), fresh, tuple(created))


def window_due(ahead: Ahead, plan: TickPlan, *, now: datetime, window: timedelta) -> bool:
    """Whether this decision claims a new window: the next tick is not claimed yet, or
    less than half of the written window is left."""
    if plan.next_tick is None or plan.suspended:
        return False
    through = ahead.through
    return through is None or plan.next_tick > through or through - now < window / 2


def claim_window(ahead: Ahead, reach: datetime | None, *, epoch: int) -> Window:
    """The window this decision writes: `reach` (the last tick within the window from
    now, at least the next tick; None: no new window) claimed under `epoch`, or the
    written one kept. A window is a claim of each of its ticks: nothing else may fire
    them, and their Jobs are never pruned or freed before their firing is written."""
    if reach is None or (ahead.through is not None and reach <= ahead.through):
        return Window(ahead.through, ahead.epoch if ahead.through is not None else None)
    return Window(reach, epoch)


@dataclass(frozen=True, slots=True)
class Freeing:
    """Jobs being deleted whose finalizer (ours) may go, and whether this decision's
    status must be written before some of them do: at once (`urgent`: one of them was
    still running, and its pods run until it goes), or by the next write, which may wait
    as bookkeeping does (it finished: a TTL or history deleted it)."""

    jobs: tuple[JobToFree, ...]
    needs_status: bool  # one of them is still in flight (or claimed ahead) as written
    urgent: bool = False  # and one of those was still running


def free(schedule: ScheduleRead, ahead: Ahead) -> Freeing:
    """Jobs with our finalizer that are being deleted (by a person, a TTL, garbage
    collection): their finalizer goes once their firing is recorded in the written
    status. `needs_status` when one of them is still in flight or claimed ahead as
    written: this decision's status, which records it (the Job is seen) and moves the
    cursor past it, must be written first, or its tick would be due again once it is gone."""
    going = [j for j in schedule.ours if j.has_finalizer and j.deleting]
    written_claims = {c.job for c in schedule.old.in_flight}
    needing = {j.name for j in going if j.name in written_claims or j.name in ahead}
    freed = tuple(JobToFree(j.name, j.uid, j.kind, j.name in needing) for j in going)
    urgent = any(j.name in needing and j.state is JobState.ACTIVE for j in going)
    return Freeing(freed, bool(needing), urgent)


def due_by(
    schedule: ScheduleRead,
    creates: Sequence[Candidate],
    replaced: Sequence[JobToDelete],
    in_flight: Sequence[InFlightClaim],
    window: Window,
    next_tick: datetime | None,
    now: datetime,
) -> datetime | None:
    """When this decision's writes are needed by: at once for a create or a Replace; by
    its tick for a claim not yet written; for a new window, by the end of the written
    one (the first tick it does not claim comes after it), or by the new window's first
    tick when none is written; never for the rest, which only records."""
    if creates or replaced:
        return now
    written = {c.job for c in schedule.old.in_flight}
    needs = [c.tick for c in in_flight if c.job not in written]
    old = schedule.old.claimed_through
    if window.through is not None and window.through != old:
        needs.append(old if old is not None and old > now else next_tick or window.through)
    return min(needs, default=None)


def prune(
    spec: CronScheduleSpec, jobs: Sequence[JobSnapshot], *, keep: set[str]
) -> tuple[JobToDelete, ...]:
    """Finished Jobs beyond the history limits, oldest first; never those in `keep` (a
    tick in flight, a Job Replace deletes anyway)."""
    found: list[JobToDelete] = []
    for state, limit in (
        (JobState.SUCCEEDED, spec.successful_jobs_history_limit),
        (JobState.FAILED, spec.failed_jobs_history_limit),
    ):
        done = sorted(
            (j for j in jobs if j.state is state and not j.deleting),
            key=lambda j: (j.finished_at or j.created or j.tick or EPOCH, j.name),
            reverse=True,
        )
        found += [
            JobToDelete(
                j.name,
                j.uid,
                f"beyond {state.value.lower()} history limit {limit}",
                j.has_finalizer,
                j.kind,
            )
            for j in done[limit:]
            if j.name not in keep
        ]
    # A tick's newest attempt (spec.retry) stays while an earlier attempt's Job of the tick
    # stays: that failed Job is what a next attempt is derived from, and once the later
    # attempt's Job and its recentFirings entry were gone, nothing said it had run: it ran
    # again (the simulator's finding 3).
    going = {j.name for j in found}
    attempts: dict[datetime, list[JobSnapshot]] = {}
    for j in jobs:
        if j.tick is not None and not j.deleting:
            attempts.setdefault(j.tick, []).append(j)
    spared = set()
    for runs in attempts.values():
        newest = max(runs, key=lambda j: j.attempt)
        if newest.name in going and any(
            r.name not in going and r.attempt < newest.attempt for r in runs
        ):
            spared.add(newest.name)
    return tuple(j for j in found if j.name not in spared)
