"""One decision for one schedule: what to claim, create, delete and report, and when to look again.

Why it exists: everything Punctual does to a schedule follows from (the schedule as
last read, its Jobs, the API server's time, the leader's epoch). `decide` is that
function, pure, so that every policy (missed ticks, concurrency, manual triggers,
history, in-flight recovery, status and conditions) is tested without a cluster. The
shell (`kube.applying`) applies the Decision in the order that keeps the invariants,
written once in `decisions.Decision`.

This module is the outline of a decision, read top to bottom: its steps are numbered 1
to 12 once, across `decide`, `_rules` and `_decision`. Each step is a rule in a module
of its own that returns a frozen record: `reading` (the spec), `claiming` (claims in
flight, due ticks, a manual trigger, the claims written), `pausing` (suspension,
pauseOnFailure, FreezeWindows), `overlapping` (concurrencyPolicy), `backfilling`,
`retrying`, `finishing` (endTime, maxRuns), `succeeding` (successDeadlineSeconds),
`pending` (runs stuck pending), `chaining` (spec.after: runs after upstream runs, and the
gate); every run they start is admitted against one room
(`admitting`). `status` turns the records into the status write, the Events and the
metric labels; `delaying` says whether that write may wait.

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

from punctual.core import (
    backfilling,
    chaining,
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
from punctual.core.calendars import Known
from punctual.core.decisions import Decision, Leadership
from punctual.core.freezing import Freeze, FreezeAction, freeze_over
from punctual.core.groups import Group
from punctual.core.jobs import JobSnapshot
from punctual.core.models import CronScheduleSpec, InFlightClaim, dump_status
from punctual.core.naming import job_name
from punctual.core.planning import TickPlan, plan_ticks, reach_of
from punctual.core.reading import clash, read_spec
from punctual.core.records import NO_UPSTREAMS, ScheduleRead, Upstreams
from punctual.core.workloads import JOBS_ONLY, Served, WorkloadKind

# How soon to look again at a schedule whose claims are not yet seen as Jobs.
IN_FLIGHT_RECHECK: Final = timedelta(seconds=2)

__all__ = ["DEFAULT_WINDOW", "IN_FLIGHT_RECHECK", "decide"]

_NO_CALENDARS: Final[Known] = MappingProxyType({})

# How far ahead one status write claims scheduled ticks, unless `--claim-window` says.
DEFAULT_WINDOW: Final = timedelta(seconds=60)


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
    upstreams: Upstreams | None = NO_UPSTREAMS,
    window: timedelta = DEFAULT_WINDOW,
) -> Decision:
    """Decide everything about one schedule at `now` (the API server's time); `served`:
    the kinds this installation creates (see `workloads`); `calendars`: the Calendars as
    known (`calendars`); `group`: its concurrency group as it stands (`groups`);
    `verified_triggers`: the triggers admission policy is in force (`claiming`);
    `upstreams`: spec.after's, as read (`chaining`; None: not all known yet);
    `window`: how far ahead one write claims scheduled ticks (`claiming.claim_window`)."""
    schedule = ScheduleRead.from_body(body, jobs)
    old = schedule.old

    # 1. Read the spec and the kind it creates (`reading`): an invalid one is reported in
    #    status and Events, never raised, and no tick of the invalid period fires.
    read = read_spec(body, served, calendars, upstreams)
    if read.wait:  # its objects are not all known yet: not before
        return Decision(status=None, next_wake=now + IN_FLIGHT_RECHECK)
    if read.spec is None or read.kind is None:
        updates = {"schedule_fingerprint": read.fingerprint or old.schedule_fingerprint}
        return _invalid(schedule, str(read.invalid), now=now, updates=updates)
    spec, kind = read.spec, read.kind
    # 2. What stops firing for a while: a pause after failures, FreezeWindows (a Defer
    #    window plans like a pause, and wakes the schedule when it ends).
    pause = pausing.pause(schedule, spec)
    labels = (body.get("metadata") or {}).get("labels") or {}
    frozen = tuple(f for f in freezes if f.selects(labels))
    defer_window = freeze_over(frozen, now, FreezeAction.DEFER)
    planned = pausing.planned(
        spec, schedule, frozen, paused=pause.paused or bool(defer_window), now=now
    )
    # 3. Plan the ticks on the API server's clock, from the cursor as it really is: a tick
    #    claimed ahead whose Job exists has fired, though the write saying so may wait.
    #    Under maxRuns, such a tick counts as a run too.
    ahead = claiming.claimed_ahead(schedule)
    seen_ahead = tuple(claiming.fired_ahead(schedule, ahead))  # kept from clean-up, all
    fired_ahead = claiming.fired_in_order(schedule, planned, seen_ahead)
    plan = plan_ticks(
        planned,
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
    reach = _reach(planned, schedule, plan, ahead, now, window)
    outcome = _rules(
        schedule, spec, plan, pause, frozen, ahead, fired_ahead,
        now=now, leadership=leadership, group=group, verified_triggers=verified_triggers,
        upstreams=upstreams or NO_UPSTREAMS, reach=reach,
    )  # fmt: skip
    return _decision(
        body, spec, outcome, ahead, seen_ahead, now=now, leadership=leadership, kind=kind
    )


def _rules(
    schedule: ScheduleRead,
    spec: CronScheduleSpec,
    plan: TickPlan,
    pause: pausing.Pause,
    frozen: Sequence[Freeze],
    ahead: claiming.Ahead,
    fired_ahead: Sequence[InFlightClaim],
    *,
    now: datetime,
    leadership: Leadership,
    group: Group | None = None,
    verified_triggers: bool = False,
    upstreams: Upstreams,
    reach: datetime | None,
) -> status.Outcome:
    """Steps 4 to 8, for a valid spec and its plan: each rule's record."""
    epoch = leadership.epoch
    # 4. The candidates: claims in flight to recover, due ticks, a manual trigger, and
    #    failed ticks' next attempts whose time came (spec.retry).
    gathered = claiming.gather(
        schedule, plan, ahead, epoch=epoch, now=now, verified_triggers=verified_triggers,
        fired_ahead_=fired_ahead,
    )  # fmt: skip
    retries = retrying.retries(spec, schedule, now=now, group=group)
    # 5. A Skip freeze window skips the due ticks inside it; spec.after adds runs after
    #    upstream runs, or (a gate) holds the due ticks until the upstreams' runs ended.
    freezing = pausing.freeze(gathered.due, frozen, now)
    chain = chaining.follow(spec, schedule, freezing, upstreams, plan.suspended, now=now)
    # 6. The concurrency policy chooses among the rest (recovered claims always go).
    wanted = (*gathered.recovering, *chain.open, *filter(None, [gathered.trigger]))
    wanted += (*retries.due, *chain.candidates)
    # An attempt fires only with room under the policy (retrying), so none turns it away.
    recovering = frozenset([*(c.job for c in gathered.in_flight), *(c.job for c in retries.due)])
    overlap = overlapping.choose(
        spec, schedule, wanted, recovering=recovering, now=now, group=group
    )
    # 7. A backfill adds its next batch.
    batch = backfilling.backfill(schedule, spec, overlap.creates, now=now, group=group)
    # 8. Claim what is created; count the runs under maxRuns; claim the ticks ahead (a
    #    window of them, when half of the written one is used), unless the next is frozen.
    claims = claiming.claim((*overlap.creates, *batch.fills), gathered, ahead, epoch=epoch)
    runs = finishing.count_runs(spec, schedule.old, plan, (*gathered.fired, *claims.created))
    plan = runs.plan
    if plan.next_tick is not None and freeze_over(frozen, plan.next_tick) is None:
        window = claiming.claim_window(ahead, reach if not plan.suspended else None, epoch=epoch)
        claims = dataclasses.replace(claims, window=window)
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
        clash=clash(schedule, spec),
        retries=retries,
        chain=chain,
        last_trigger=claiming.handled_trigger(schedule),
        installation=leadership.installation,
        epoch=epoch,
    )


def _decision(
    body: Mapping[str, Any],
    spec: CronScheduleSpec,
    outcome: status.Outcome,
    ahead: claiming.Ahead,
    fired_ahead: Sequence[InFlightClaim],
    *,
    now: datetime,
    leadership: Leadership,
    kind: WorkloadKind,
) -> Decision:
    """Steps 9 to 12: from the records to the Decision the shell applies."""
    schedule, plan = outcome.schedule, outcome.plan
    overlap, claims = outcome.overlap, outcome.claims
    creates = (*overlap.creates, *outcome.batch.fills)
    creating_jobs = {c.job for c in creates}
    # 9. History: finished Jobs beyond the limits, never one whose tick is in flight.
    keep = {c.job for c in claims.in_flight} | {j.name for j in overlap.replaced}
    keep |= {c.job for c in fired_ahead}
    prune = claiming.prune(spec, schedule.ours, keep=keep)
    # 10. The status write, its Events and the metric labels, from the records.
    written = status.build(outcome, now=now)
    # 11. Whether the write may wait, and which Jobs being deleted may let go.
    new_status = dump_status(written.status)
    old_status = dump_status(schedule.old)
    freeing = claiming.free(schedule, ahead)
    write_delay = delaying.classify(
        schedule.old,
        old_status,
        new_status,
        in_flight=claims.in_flight,
        fences=bool(
            claims.new or overlap.replaced or written.events or plan.missed or plan.skipped
        ),
        prune=prune,
        over_ahead=all(job_name(schedule.name, d.tick) in ahead for d in plan.due),
    )
    # 12. When to look again: the next tick, unresolved claims, the rules' deadlines.
    stuck = pending.stuck(spec, schedule, now=now)
    wakes = (
        stuck.wake,
        outcome.retries.wake,
        overlap.deadline,
        outcome.standing.freshness.wake if outcome.standing.freshness else None,
        outcome.batch.wake,
        outcome.chain.wake,
    )
    return Decision(
        status=None if new_status == old_status else new_status,
        typed_status=None if new_status == old_status else written.status,
        write_delay=delaying.holding(
            write_delay, needs_status=freeing.needs_status, urgent=freeing.urgent
        ),
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
        free=freeing.jobs,
        fail=stuck.fail,
        events=written.events,
        missed=sum(f.count for f in plan.missed),
        skipped=written.skipped,
        newly_failed=written.newly_failed,
        newly_dead=written.newly_dead,
        lags=outcome.chain.lags,
        quiet_endings=delaying.quiet_endings(spec, written.status),
        due_by=claiming.due_by(
            schedule,
            creates,
            overlap.replaced,
            claims.in_flight,
            claims.window or claiming.Window(None, None),
            plan.next_tick,
            now,
        ),
        next_wake=_next_wake(plan, claims.in_flight, now, *wakes),
        landed_wake=_next_wake(
            plan, [c for c in claims.in_flight if c.job not in creating_jobs], now, *wakes
        ),
    )


def _reach(
    planned: CronScheduleSpec,
    schedule: ScheduleRead,
    plan: TickPlan,
    ahead: claiming.Ahead,
    now: datetime,
    window: timedelta,
) -> datetime | None:
    """The last tick a new claim window reaches (None: no new window is due): computed
    only when one is due, since it walks the ticks of the window."""
    if not claiming.window_due(ahead, plan, now=now, window=window):
        return None
    assert plan.next_tick is not None
    return reach_of(planned, uid=schedule.uid, first=plan.next_tick, until=now + window)


def _invalid(
    schedule: ScheduleRead, reason: str, *, now: datetime, updates: Mapping[str, Any]
) -> Decision:
    """An unusable spec: say so in conditions and one Event; fire nothing."""
    new, events = status.invalid(schedule, reason, now=now, updates=updates)
    changed = dump_status(new) != dump_status(schedule.old)
    return Decision(status=dump_status(new) if changed else None, events=events)


def _next_wake(
    plan: TickPlan, in_flight: Sequence[InFlightClaim], now: datetime, *deadlines: datetime | None
) -> datetime | None:
    """The next fire instant, or soon if claims are unresolved, or the next deadline
    (a buffered tick's, the freshness objective's, a backfill's next batch)."""
    wakes = [w for w in (plan.next_wake, *deadlines) if w is not None]
    if any(c.tick <= now for c in in_flight):
        wakes.append(now + IN_FLIGHT_RECHECK)
    return min(wakes, default=None)
