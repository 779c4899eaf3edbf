"""One decision for one schedule: what to claim, create, delete and report, and when to look again.

Why it exists: everything Punctual does to a schedule follows from (the schedule as
last read, its Jobs, the API server's time, the leader's epoch). `decide` is that
function, pure, so that every policy (missed ticks, concurrency, manual triggers,
history, in-flight recovery, status and conditions) is tested without a cluster. The
shell (`kube.applying`, which numbers its own steps) applies a Decision (`decisions`)
in the order that keeps the invariants:

- write `status` with the schedule's resourceVersion as precondition (the claim:
  cursor moved, new ticks recorded in `inFlight`); a 409 means someone else wrote
  first, and the whole Decision is dropped and made again from fresh state;
- then delete the Jobs that `replace` names (concurrencyPolicy Replace);
- then create `creates` (a 409 AlreadyExists from a Job we own means done);
- then delete `prune` (history), never the Job of a tick still in flight.

This module is the outline of a decision, read top to bottom: its steps are numbered 1
to 12 once, across `decide`, `_rules` and `_decision`. Each step is a rule in a module
of its own that returns a frozen record: `claiming` (claims in flight, due ticks, a
manual trigger, the claims written), `pausing` (suspension, pauseOnFailure,
FreezeWindows), `overlapping` (concurrencyPolicy), `backfilling`, `finishing` (endTime,
maxRuns), `succeeding` (successDeadlineSeconds). `status` turns the records into the
status write, the Events and the metric labels; `delaying` says whether that write may
wait.

What it must never do: talk to the API server, read the clock, or decide anything
for a tick at or before the cursor (the planner guarantees that; in-flight claims are
the only ticks carried over, and only to finish them).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from datetime import datetime, timedelta
from types import MappingProxyType
from typing import Any, Final

from pydantic import ValidationError

from punctual.core import (
    backfilling,
    claiming,
    creating,
    delaying,
    finishing,
    overlapping,
    pausing,
    pending,
    retrying,
    status,
    succeeding,
)
from punctual.core.calendars import Known, with_calendars
from punctual.core.completion import CompletionError, compile_rules
from punctual.core.decisions import Decision, Leadership, WriteDelay
from punctual.core.freezing import Freeze, FreezeAction, freeze_over
from punctual.core.groups import Group
from punctual.core.jobs import JobSnapshot
from punctual.core.models import (
    CronScheduleSpec,
    InFlightClaim,
    describe_error,
    dump_status,
)
from punctual.core.naming import job_name
from punctual.core.planning import TickPlan, plan_ticks, schedule_fingerprint
from punctual.core.records import EventNote, ScheduleRead
from punctual.core.stamping import clashes, describe_clashes
from punctual.core.times import parse_time
from punctual.core.workloads import JOBS_ONLY, Served, WorkloadKind

# How soon to look again at a schedule whose claims are not yet seen as Jobs.
IN_FLIGHT_RECHECK: Final = timedelta(seconds=2)

__all__ = ["IN_FLIGHT_RECHECK", "decide"]

_NO_CALENDARS: Final[Known] = MappingProxyType({})


def decide(
    body: Mapping[str, Any],
    jobs: Sequence[JobSnapshot],
    *,
    now: datetime,
    leadership: Leadership,
    freezes: Sequence[Freeze] = (),
    calendars: Known = _NO_CALENDARS,
    served: Served = JOBS_ONLY,
    group: Group | None = None,
    verified_triggers: bool = False,
) -> Decision:
    """Decide everything about one schedule at `now` (the API server's time); `served`:
    the kinds this installation creates (see `workloads`); `calendars`: the Calendars as
    known (`calendars`); `group`: its concurrency group as it stands (`groups`);
    `verified_triggers`: the triggers admission policy is in force (`claiming`)."""
    schedule = ScheduleRead.from_body(body, jobs)
    old = schedule.old

    # 1. Read the spec, and the kind it creates; an invalid one is reported in status
    #    and Events, never raised. A fingerprint no valid spec has is written, so that
    #    any fix is an edit: the cursor moves to now then, and no tick of the invalid
    #    period fires (nor a kind's, when its CustomResourceDefinition comes later).
    # (Computed only then: building it took a sixth of a herd's CPU when it was done for
    # every valid spec too, in pydantic's model_construct.)
    def keep() -> dict[str, str]:
        return {"schedule_fingerprint": "invalid-" + _raw_fingerprint(body.get("spec") or {})}

    try:
        spec = CronScheduleSpec.model_validate(body.get("spec") or {})
    except ValidationError as error:
        return _invalid(schedule, describe_error(error), now=now, updates=keep())
    kind = served.resolve(
        None if spec.workload_template is None else body["spec"]["workloadTemplate"]
    )
    if isinstance(kind, str):
        return _invalid(schedule, kind, now=now, updates=keep())
    if served.waits(kind):  # its objects are not all known yet: not before
        return Decision(status=None, next_wake=now + IN_FLIGHT_RECHECK)
    try:
        if spec.completion is not None:
            compile_rules(spec.completion.succeeded, spec.completion.failed)
    except CompletionError as error:
        return _invalid(schedule, error.message, now=now, updates=keep())
    # Its Calendars' entries join spec.exclude; one missing or unusable holds it (the
    # invalid fingerprint again: once it is there, the cursor moves to now).
    folded = with_calendars(spec, calendars)
    if isinstance(folded, str):
        return _invalid(schedule, folded, now=now, updates=keep())
    spec = folded
    # 2. What stops firing for a while: a pause after failures, FreezeWindows (a Defer
    #    window plans like a pause, and wakes the schedule when it ends).
    pause = pausing.pause(schedule, spec)
    labels = (body.get("metadata") or {}).get("labels") or {}
    frozen = tuple(f for f in freezes if f.selects(labels))
    defer_window = freeze_over(frozen, now, FreezeAction.DEFER)
    # 3. Plan the ticks on the API server's clock, from the cursor as it really is: a tick
    #    claimed ahead whose Job exists has fired, though the write saying so may wait.
    #    Under maxRuns, such a tick counts as a run too.
    ahead = claiming.claimed_ahead(schedule)
    fired_ahead = claiming.fired_ahead(schedule, ahead)
    plan = plan_ticks(
        pausing.planned(spec, schedule, frozen, paused=pause.paused or bool(defer_window), now=now),
        uid=schedule.uid,
        created=schedule.created,
        cursor=claiming.fired_cursor(schedule, fired_ahead),
        fingerprint=old.schedule_fingerprint,
        now=now,
        runs_left=None
        if spec.max_runs is None
        else spec.max_runs - (old.runs or 0) - len(fired_ahead),
    )
    if plan.invalid is not None:
        kept = {"schedule_fingerprint": plan.fingerprint, "last_scheduled_time": plan.cursor}
        return _invalid(schedule, plan.invalid, now=now, updates=kept)
    if defer_window is not None:  # wake when the window ends, to run what it deferred
        wake = min(filter(None, [plan.next_wake, defer_window[1]]))
        plan = dataclasses.replace(plan, next_wake=wake)
    outcome = _rules(
        schedule,
        spec,
        plan,
        pause,
        frozen,
        ahead,
        now=now,
        leadership=leadership,
        group=group,
        verified_triggers=verified_triggers,
    )
    return _decision(body, spec, outcome, ahead, now=now, leadership=leadership, kind=kind)


def _rules(
    schedule: ScheduleRead,
    spec: CronScheduleSpec,
    plan: TickPlan,
    pause: pausing.Pause,
    frozen: Sequence[Freeze],
    ahead: claiming.Ahead,
    *,
    now: datetime,
    leadership: Leadership,
    group: Group | None = None,
    verified_triggers: bool = False,
) -> status.Outcome:
    """Steps 4 to 8, for a valid spec and its plan: each rule's record."""
    epoch = leadership.epoch
    # 4. The candidates: claims in flight to recover, due ticks, a manual trigger, and
    #    failed ticks' next attempts whose time came (spec.retry).
    gathered = claiming.gather(
        schedule, plan, ahead, epoch=epoch, now=now, verified_triggers=verified_triggers
    )
    retries = retrying.retries(spec, schedule, now=now, group=group)
    # 5. A Skip freeze window skips the due ticks inside it.
    freezing = pausing.freeze(gathered.due, frozen, now)
    # 6. The concurrency policy chooses among the rest (recovered claims always go).
    wanted = (
        *gathered.recovering,
        *freezing.kept,
        *filter(None, [gathered.trigger]),
        *retries.due,
    )
    # An attempt fires only with room under the policy (retrying), so none turns it away.
    recovering = frozenset([*(c.job for c in gathered.in_flight), *(c.job for c in retries.due)])
    overlap = overlapping.choose(
        spec, schedule, wanted, recovering=recovering, now=now, group=group
    )
    # 7. A backfill adds its next batch.
    batch = backfilling.backfill(schedule, spec, overlap.creates, now=now, group=group)
    # 8. Claim what is created; count the runs under maxRuns; claim the next tick ahead.
    claims = claiming.claim((*overlap.creates, *batch.fills), gathered, ahead, epoch=epoch)
    runs = finishing.count_runs(spec, schedule.old, plan, (*gathered.fired, *claims.created))
    plan = runs.plan
    if plan.next_tick is None or freeze_over(frozen, plan.next_tick) is None:
        claims = claiming.claim_next(schedule, plan, claims, ahead, epoch=epoch)
    standing = status.Standing(
        suspension=pausing.suspension(spec, now),
        finished=plan.finished,
        limited=plan.limited,
        pause=pause,
        pause_on_failure=spec.pause_on_failure is not None,
        freshness=succeeding.freshness(spec, schedule, now=now),
        frozen=freezing.now,
        next_tick=plan.next_tick,
    )
    return status.Outcome(
        schedule=schedule,
        plan=plan,
        runs=runs.count,
        max_runs=spec.max_runs,
        gathered=gathered,
        freezing=freezing,
        overlap=overlap,
        batch=batch,
        claims=claims,
        standing=standing,
        clash=_clash(schedule, spec),
        retries=retries,
        last_trigger=claiming.handled_trigger(schedule),
        installation=leadership.installation,
        epoch=epoch,
    )


def _decision(
    body: Mapping[str, Any],
    spec: CronScheduleSpec,
    outcome: status.Outcome,
    ahead: claiming.Ahead,
    *,
    now: datetime,
    leadership: Leadership,
    kind: WorkloadKind,
) -> Decision:
    """Steps 9 to 12: from the records to the Decision the shell applies."""
    schedule, plan, overlap, claims = (
        outcome.schedule,
        outcome.plan,
        outcome.overlap,
        outcome.claims,
    )
    creates = (*overlap.creates, *outcome.batch.fills)
    creating_jobs = {c.job for c in creates}
    # 9. History: finished Jobs beyond the limits, never one whose tick is in flight.
    keep = {c.job for c in claims.in_flight} | {j.name for j in overlap.replaced}
    prune = claiming.prune(spec, schedule.ours, keep=keep)
    # 10. The status write, its Events and the metric labels, from the records.
    written = status.build(outcome, now=now)
    # 11. Whether the write may wait, and which Jobs being deleted may let go.
    new_status = dump_status(written.status)
    release, release_needs_status = claiming.release(schedule)
    write_delay = delaying.classify(
        schedule.old,
        new_status,
        in_flight=claims.in_flight,
        fences=bool(
            claims.fresh or overlap.replaced or written.events or plan.missed or plan.skipped
        ),
        prune=prune,
        over_ahead=all(job_name(schedule.name, d.tick) in ahead for d in plan.due),
    )
    # 12. When to look again: the next tick, unresolved claims, the rules' deadlines.
    fail, pending_wake = pending.stuck(spec, schedule, now=now)
    wakes = (
        pending_wake,
        outcome.retries.wake,
        overlap.deadline,
        outcome.standing.freshness.wake if outcome.standing.freshness else None,
        outcome.batch.wake,
    )
    return Decision(
        status=None if new_status == dump_status(schedule.old) else new_status,
        write_delay=WriteDelay.NEVER if release_needs_status else write_delay,
        replace=overlap.replaced,
        creates=tuple(
            creating.job_to_create(
                body,
                c,
                spec,
                leadership,
                uid=schedule.uid,
                now=now,
                kind=kind,
                last_success=succeeding.last_success(schedule),
            )
            for c in creates
        ),
        prune=prune,
        release=release,
        fail=fail,
        events=written.events,
        missed=sum(f.count for f in plan.missed),
        skipped=written.skipped,
        newly_failed=written.newly_failed,
        newly_dead=written.newly_dead,
        due_by=claiming.due_by(schedule, creates, overlap.replaced, claims.in_flight, now),
        next_wake=_next_wake(plan, claims.in_flight, now, *wakes),
        landed_wake=_next_wake(
            plan, [c for c in claims.in_flight if c.job not in creating_jobs], now, *wakes
        ),
    )


def _invalid(
    schedule: ScheduleRead, reason: str, *, now: datetime, updates: Mapping[str, Any]
) -> Decision:
    """An unusable spec: say so in conditions and one Event; fire nothing."""
    new, events = status.invalid(schedule, reason, now=now, updates=updates)
    changed = dump_status(new) != dump_status(schedule.old)
    return Decision(status=dump_status(new) if changed else None, events=events)


def _clash(schedule: ScheduleRead, spec: CronScheduleSpec) -> EventNote | None:
    """A jobTemplate that sets one of Punctual's variables itself keeps its value, and
    says so in one Warning Event per generation of the schedule: in the decision that
    first writes that generation as status.observedGeneration. That write is fenced,
    so the Event is posted once across leaders and restarts, at no write of its own;
    an edit reports it again, while Events expire (an hour, by default)."""
    if schedule.old.observed_generation == schedule.generation:
        return None
    found = clashes(spec.job_template)
    return EventNote("Warning", "EnvironmentClash", describe_clashes(found)) if found else None


def _next_wake(
    plan: TickPlan, in_flight: Sequence[InFlightClaim], now: datetime, *deadlines: datetime | None
) -> datetime | None:
    """The next fire instant, or soon if claims are unresolved, or the next deadline
    (a buffered tick's, the freshness objective's, a backfill's next batch)."""
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
