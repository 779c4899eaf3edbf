"""One pass over one schedule: decide, let the status wait if it may, apply, remember.

Why it exists: this is the scheduler loop's unit of work, and the place where the
claim protocol's "a 409 means re-read and decide again, never retry blindly" lives:
a pass whose claim lost re-reads the schedule and decides afresh, at most three
times, then tries again a little later.

Each schedule is written for by the Lease of its shard (kube.sharding; one shard is
the case N = 1 of the same path): a pass finds the schedule's `Role` (that shard's
elector, an applier guarded by it, and the shard's name for its Jobs) among the
`Roles` by its uid, and does nothing unless that shard is led here.

What it must never do: decide (that is `core`), write other than through the
applier, or act for a schedule whose shard this replica does not lead.
"""

from __future__ import annotations

import asyncio
import functools
import logging
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Protocol

from punctual.clocks import Clock, EventLoopSleeper, Sleeper
from punctual.core.calendars import Known
from punctual.core.chaining import after_names, find_cycle, upstream_of
from punctual.core.deciding import DEFAULT_WINDOW, decide
from punctual.core.decisions import Decision, Leadership
from punctual.core.delaying import delay_write, routine, routine_wake
from punctual.core.freezing import Freeze
from punctual.core.groups import Group, Member, group_of, placement_of
from punctual.core.groups import state as group_state
from punctual.core.jobs import JobSnapshot
from punctual.core.ownership import Ownership, owner_of, ownership
from punctual.core.records import EventNote, Upstream, Upstreams
from punctual.core.workloads import JOBS_ONLY, Served, WorkloadKind
from punctual.kube.applying import Applied, NotLeader, schedule_path
from punctual.kube.client import Api, ApiError, NotFound, Unavailable
from punctual.kube.sharding import shard_of
from punctual.runtime.scheduling import Key
from punctual.runtime.view import LeaderView

logger = logging.getLogger("punctual")

UNAVAILABLE_RETRY = timedelta(seconds=2)
# How soon a pass dropped while leadership had only lapsed looks again. A lapse can
# begin and end inside one slow renewal (the renew deadline passes while the request is
# out, its answer restores leadership): nothing is announced then, so the pass must wake
# itself (without a timer, a schedule waited for the leadership loop's next resync, five
# minutes; the soak lost thousands of ticks so).
LAPSED_RETRY = timedelta(seconds=1)
# How soon a pass whose write the API server refused (not a 409) tries again: the same
# write would be refused again until someone changes what refuses it.
REFUSED_RETRY = timedelta(seconds=5)
ATTEMPTS = 3  # one pass, and at most two more after 409 Conflicts
# How often a schedule another live installation owns is looked at again.
CONFLICT_RECHECK = timedelta(seconds=10)


@dataclass(frozen=True, slots=True)
class Installation:
    """This installation: its name (its Lease, "namespace/name") and its class."""

    name: str
    class_name: str | None = None


class Leading(Protocol):
    """What a pass needs of the Lease loop (kube.leases.LeaderElector)."""

    @property
    def epoch(self) -> int | None: ...

    @property
    def identity(self) -> str: ...

    def is_leader(self) -> bool: ...


class Judging(Protocol):
    """Whether another installation is alive (kube.leases.Installations)."""

    async def alive(self, installation: str) -> bool: ...


class Reporting(Protocol):
    """Where Events about a schedule go (kube.events.EventRecorder)."""

    def post(self, obj: Mapping[str, Any], note: EventNote) -> None: ...


class Grouping(Protocol):
    """Concurrency groups' members and limits (kube.groups.Groups)."""

    def members(self, namespace: str, group: str) -> list[Key]: ...

    def limit(self, namespace: str, group: str) -> int: ...


class Queueing(Protocol):
    """Where routine writes wait their turn, and which instant a pass was woken ahead of
    (runtime.scheduling.SchedulerLoop)."""

    def admit(self, key: Key) -> bool: ...

    def postpone(self, key: Key) -> None: ...

    def woken_for(self, key: Key) -> datetime | None: ...

    def decide_ahead(self, key: Key, allowed: bool) -> None: ...


class Applying(Protocol):
    """What a pass needs of the applier (kube.applying.Applier)."""

    async def apply(
        self,
        schedule: Mapping[str, Any],
        decision: Decision,
        *,
        claimed: Callable[[dict[str, Any]], None] = ...,
        created: Callable[[JobSnapshot], None] = ...,
    ) -> Applied: ...

    async def group_status(self, namespace: str, group: str, status: dict[str, Any]) -> bool: ...

    async def report_status(self, path: str, status: dict[str, Any]) -> bool: ...

    async def free(
        self, namespace: str, name: str, uid: str, applied: Applied, kind: WorkloadKind = ...
    ) -> None: ...


def decidable_ahead(body: Mapping[str, Any]) -> bool:
    """Whether a schedule's passes may be decided ahead of their instant: only where no
    run's state decides what its ticks do (concurrencyPolicy Allow, no maxConcurrent, no
    concurrencyGroup, no spec.after). Elsewhere a run ending in the last moments before a
    tick changes the tick (Forbid skips it, a buffer holds it, a group's room), and a
    decision made ahead would judge it on the run as it was then."""
    spec = body.get("spec") or {}
    return (
        spec.get("concurrencyPolicy", "Allow") == "Allow"
        and spec.get("maxConcurrent") is None
        and group_of(body) is None
        and not after_names(body)
    )


def postponed(queue: Queueing | None, key: Key, decision: Decision, *, now: datetime) -> bool:
    """Whether a routine write waits for a free slot in `queue` (due writes never wait)."""
    if queue is None or not routine(decision, now=now):
        return False
    if queue.admit(key):
        return False
    queue.postpone(key)
    return True


@dataclass(frozen=True)
class Role:
    """Who writes for a schedule: the Lease of its shard, an applier that writes only
    while that Lease is held, and the shard's name for its Jobs (None: one shard)."""

    elector: Leading
    applier: Applying
    shard: str | None = None


@dataclass(frozen=True)
class Roles:
    """One Role per shard, in shard order: a schedule's is chosen by its uid's hash."""

    by_shard: Sequence[Role]

    def of(self, uid: str) -> Role:
        return self.by_shard[shard_of(uid, len(self.by_shard))]

    def leads_any(self) -> bool:
        return any(role.elector.is_leader() for role in self.by_shard)

    def lapsed_any(self) -> bool:
        """Whether some shard's leadership has only lapsed (its renew deadline passed
        between two renewals, its epoch kept): the next renewal restores it."""
        return any(role.elector.epoch is not None for role in self.by_shard)


class Reconciler:
    """One pass over one schedule. Over 400 lines: the pass itself (with its wait when woken
    ahead of its instant), the concurrency
    group's members and report (read under the group's lock, so kept beside the pass; the
    group's state is `core.groups.state`), the
    upstreams of spec.after, and the release of a deleted schedule's Jobs, which all read
    the same view and roles."""

    def __init__(
        self,
        *,
        api: Api,
        view: LeaderView,
        roles: Roles,
        clock: Clock,
        status_delay: timedelta,
        forget: Callable[[Key], None],
        installation: Installation | None = None,
        others: Judging | None = None,
        events: Reporting | None = None,
        freezes: Callable[[str], Sequence[Freeze]] = lambda namespace: (),
        calendars: Callable[[], Known] = lambda: {},
        queue: Queueing | None = None,
        served: Callable[[], Served] = lambda: JOBS_ONLY,
        groups: Grouping | None = None,
        verified_triggers: bool = False,
        synced: Callable[[], bool] = lambda: True,
        claim_window: timedelta = DEFAULT_WINDOW,
        sleeper: Sleeper | None = None,
    ) -> None:
        self.sleeper = sleeper or EventLoopSleeper()  # waits for a pass woken ahead
        self.claim_window = claim_window  # how far ahead one write claims ticks
        self.synced = synced  # both lists are in: a schedule not in the view does not exist
        self.groups = groups
        self.verified_triggers = verified_triggers  # the triggers policy is in force
        # One pass at a time per concurrency group: a member decides on the runs the
        # others hold, which includes what the previous pass just created.
        self.group_locks: dict[tuple[str, str], asyncio.Lock] = {}
        self.group_reports: dict[tuple[str, str], dict[str, Any]] = {}  # as last written
        self.served = served  # the kinds this installation creates now (kube.workloads)
        # Per schedule, its objects whose completion rule failed, and how: one Warning
        # Event each. Only the objects it still has are kept.
        self.rule_errors: dict[Key, dict[str, str]] = {}
        self.api = api
        self.freezes = freezes  # the FreezeWindows of a namespace, as the leader knows them
        self.calendars = calendars  # the Calendars, as listed last
        self.view = view
        self.roles = roles
        self.clock = clock
        self.status_delay = status_delay
        self.forget = forget  # the scheduler loop drops a deleted schedule
        self.installation = installation
        self.others = others
        self.events = events
        # Routine writes (core.delaying.routine) wait behind due ones here (None: never).
        self.queue = queue
        self.conflicts: dict[Key, str] = {}  # schedules another live installation fires
        # Schedules a pass dropped while leadership had lapsed: no shard is gained when the
        # next renewal restores it, so nothing else would wake them (a schedule firing
        # once a year would wait a year). The leadership loop takes them back.
        self.dropped: set[Key] = set()

    def _dropped(self, key: Key) -> datetime:
        """Leadership has only lapsed: hand `key` back when the leadership loop sees it
        restored, and look again soon in any case."""
        self.dropped.add(key)
        return self.clock.now() + LAPSED_RETRY

    def take_dropped(self) -> set[Key]:
        dropped, self.dropped = self.dropped, set()
        return dropped

    async def __call__(self, key: Key) -> datetime | None:
        """One pass; returns when to look at the schedule again (None: when notified). A
        member of a concurrency group passes only while no other member does."""
        body = self.view.schedule(key)
        group = None if body is None else group_of(body)
        if group is None:
            return await self._pass(key)
        lock = self.group_locks.setdefault((key[0], group), asyncio.Lock())
        async with lock:
            wake = await self._pass(key)
            await self._report_group(key, group)
            return wake

    async def _report_group(self, key: Key, group: str) -> None:
        """The group's holders and waiters into its ConcurrencyGroup's status, when they
        changed (best effort; a mutex group has no object to write)."""
        if self.groups is None:
            return
        holders: list[str] = []
        waiters: list[tuple[str, str]] = []
        for member in self.groups.members(key[0], group):
            body = self.view.schedule(member)
            if body is None or group_of(body) != group:
                continue
            jobs = self.view.jobs(str(body["metadata"]["uid"]))
            holders += [f"{member[1]}/{j.name}" for j in jobs if j.active]
            seen = {j.name for j in jobs}
            for entry in (body.get("status") or {}).get("buffered") or []:
                if entry.get("job") not in seen:
                    waiters.append((str(entry.get("tick")), f"{member[1]}@{entry.get('tick')}"))
        status = {
            "held": len(holders),
            "holders": sorted(holders),
            "waiters": [w for _, w in sorted(waiters)],
        }
        where = (key[0], group)
        if self.group_reports.get(where) == status:
            return
        body = self.view.schedule(key)
        if body is None:
            return
        role = self.roles.of(placement_of(body))
        if not role.elector.is_leader():
            return
        try:
            await role.applier.group_status(key[0], group, status)
        except NotLeader:
            return
        self.group_reports[where] = status  # written, or nothing to write to (a mutex)

    async def _pass(self, key: Key) -> datetime | None:
        # Woken ahead of a timer's instant (`SchedulerLoop.woken_for`): decided as of that
        # instant, on what the view holds now, and written only once it has come. The
        # decision is the one a pass at the instant would make on a view that far behind
        # the API server, which every pass allows for (watches lag): the claim's
        # resourceVersion precondition, the tick's name and the fence keep both promises
        # as they do for any pass, and no create is sent before its tick. (A pass that
        # writes nothing the loop holds until the instant: `SchedulerLoop._work`.)
        at = None if self.queue is None else self.queue.woken_for(key)
        if not self.roles.leads_any():
            if self.roles.lapsed_any():
                return self._dropped(key)
            if not self.view.knows(key):  # deleted while this replica does not lead: its
                self._forget(key)  # Jobs are the leader's to release (or the sweep's)
            return None
        for _ in range(ATTEMPTS):
            body = self.view.schedule(key)
            if body is None:
                uid = self._forget(key)
                if uid is not None:
                    await self._release_all(uid)
                return None
            role = self.roles.of(placement_of(body))
            epoch = role.elector.epoch
            if epoch is None or not role.elector.is_leader():
                if epoch is not None:  # lapsed, not lost
                    return self._dropped(key)
                return None
            mine = await self._ownership(key, body)
            if mine is Ownership.OTHER_CLASS:
                return None
            if mine is Ownership.CONFLICT:
                return self.clock.now() + CONFLICT_RECHECK
            uid = body["metadata"]["uid"]
            if self.queue is not None:  # for its next timer (a spec edit may change it)
                ahead = decidable_ahead(body)
                self.queue.decide_ahead(key, ahead)
                if not ahead:
                    at = None  # this once: decided as of now, and again at its instant
            decision = self._decide(key, body, uid, epoch, role, self._now(at))
            if not decision.writes:
                self.view.cleanup_backlog.pop(key, None)  # nothing left to clean up
                return decision.next_wake
            if postponed(self.queue, key, decision, now=self._now(at)):
                return routine_wake(decision)
            if logger.isEnabledFor(logging.DEBUG):
                logger.debug("%s/%s: %s", *key, trace(body, decision))
            await self._until(at)
            try:
                applied = await role.applier.apply(
                    body,
                    decision,
                    claimed=functools.partial(self.view.claimed, key),
                    created=functools.partial(self.view.created_now, uid),
                )
            except NotLeader:
                if role.elector.epoch is not None:
                    return self._dropped(key)
                return None
            except Unavailable as error:
                logger.warning("%s/%s: API server unavailable: %s", *key, error)
                return self.clock.now() + UNAVAILABLE_RETRY
            except ApiError as error:  # refused for good (422 by an admission policy, 403)
                logger.warning("%s/%s: the API server refused a write: %s", *key, error)
                return self.clock.now() + REFUSED_RETRY
            if logger.isEnabledFor(logging.DEBUG):
                logger.debug("%s/%s: applied %s", *key, applied_trace(applied))
            wrote = decision.status is not None or bool(applied.failed)
            self.view.remember(key, uid, applied, wrote_status=wrote)
            if not applied.stale:
                return self._after(key, decision, applied, self._now(at))
            try:  # the claim lost: read the schedule as it is now, and decide again
                self.view.reread(key, await self.api.get(schedule_path(*key)))
            except NotFound:
                self.view.reread(key, None)
                return None
            except ApiError as error:
                logger.warning("%s/%s: re-reading after a conflict: %s", *key, error)
                return self._later()
        return self._later()

    def _now(self, at: datetime | None) -> datetime:
        """The instant a pass decides as of: the clock's, or the later one it was woken
        ahead of."""
        now = self.clock.now()
        return now if at is None or at <= now else at

    async def _until(self, at: datetime | None) -> None:
        """Return once the clock (the API server's, never early) has reached `at`."""
        while at is not None and (left := (at - self.clock.now()).total_seconds()) > 0:
            await self.sleeper.sleep(left)

    def _after(
        self, key: Key, decision: Decision, applied: Applied, now: datetime
    ) -> datetime | None:
        """When to look again after applying `decision`. Once every create landed, its
        claims need no recheck in seconds (which, in a herd, competed with the herd's
        own passes): only the write that records them, at most the status delay from
        now, as any bookkeeping."""
        landed = len(applied.created) == len(decision.creates) and not (
            applied.pending or applied.failed or applied.fired_elsewhere
        )
        if not decision.creates or not landed:
            return decision.next_wake
        since = self.view.unwritten_since.setdefault(key, now)
        due = since + self.status_delay
        return due if decision.landed_wake is None else min(decision.landed_wake, due)

    def _decide(
        self, key: Key, body: dict[str, Any], uid: str, epoch: int, role: Role, now: datetime
    ) -> Decision:
        """Decide, and leave the status for a later write when it may wait."""
        installation = None if self.installation is None else self.installation.name
        jobs = self.view.jobs(uid)
        self._report_rule_errors(key, body, jobs)
        upstreams = self._upstreams(key, body)
        decision = decide(
            body,
            jobs,
            now=now,
            leadership=Leadership(epoch, role.elector.identity, installation, role.shard),
            freezes=self.freezes(key[0]),
            calendars=self.calendars(),
            served=self.served(),
            group=self._group(key, body, now),
            verified_triggers=self.verified_triggers,
            upstreams=upstreams,
            window=self.claim_window,
        )
        if decision.quiet_endings:
            self.view.quiet.add(key)
        else:
            self.view.quiet.discard(key)
        if decision.status is None:
            self.view.unwritten_since.pop(key, None)
        if not decision.writes and not decision.events:
            return decision
        unsettled = self.view.unsettled.get(key, frozenset())
        if any(create.name in unsettled for create in decision.creates):
            # A create that failed for a transient reason (the API server down, or its
            # fencing policy not configured yet after a restart) is tried again only
            # after the status that claims it in inFlight is written: a tick of the claim
            # window is otherwise planned again on each pass, and once the failures outlast
            # startingDeadlineSeconds it would be recorded as Missed, though it was due
            # and decided on time (an owed claim is created however late, as in v1).
            return decision
        delayed = delay_write(
            decision,
            unwritten_since=self.view.unwritten_since.get(key),
            now=now,
            delay=self.status_delay,
        )
        if delayed.unwritten_since is not None:
            self.view.unwritten_since[key] = delayed.unwritten_since
        return delayed.decision

    def _upstreams(self, key: Key, body: Mapping[str, Any]) -> Upstreams | None:
        """spec.after's upstreams as this leader's view holds them (None: the lists are
        not in yet, so a missing one may only be unlisted), and a chain of spec.after from
        the schedule back to itself, if any (`core.chaining`). Every replica follows every
        schedule and Job, so an upstream decided by another shard is read the same way;
        the downstream's own claim is the fence, whoever decides the upstream."""
        names = after_names(body)
        if not names:
            return Upstreams({})
        if not self.synced():
            return None
        found: dict[str, Upstream | None] = {}
        for name in names:
            other = self.view.schedule((key[0], name))
            if other is None:
                found[name] = None
                continue
            jobs = self.view.jobs(str(other["metadata"]["uid"]))
            found[name] = upstream_of(name, other, jobs)

        def upstreams_of(name: str) -> tuple[str, ...]:
            return names if name == key[1] else after_names(self.view.schedule((key[0], name)))

        return Upstreams(found, find_cycle(key[1], upstreams_of))

    def _group(self, key: Key, body: Mapping[str, Any], now: datetime) -> Group | None:
        """The schedule's concurrency group as it stands (`core.groups.state`), from the
        other members as this leader's view holds them."""
        name = group_of(body)
        if name is None or self.groups is None:
            return None
        others = []
        for other in self.groups.members(key[0], name):
            other_body = self.view.schedule(other) if other != key else None
            if other_body is not None:
                jobs = self.view.jobs(str(other_body["metadata"]["uid"]))
                others.append(Member(other[1], other_body, jobs))
        return group_state(
            name,
            self.groups.limit(key[0], name),
            me=key[1],
            my_jobs=self.view.jobs(str(body["metadata"]["uid"])),
            others=others,
            now=now,
        )

    def _forget(self, key: Key) -> str | None:
        """The schedule is gone: nothing of it stays (its timer, what the view kept of our
        writes, a conflict); returns the uid it had, if known."""
        self.forget(key)
        self.conflicts.pop(key, None)
        self.rule_errors.pop(key, None)
        return self.view.forget_schedule(key)

    def _report_rule_errors(
        self, key: Key, body: Mapping[str, Any], jobs: Sequence[JobSnapshot]
    ) -> None:
        """A spec.completion rule that fails on an object leaves it running; say so in one
        Warning Event per object and error (not at every pass)."""
        told = self.rule_errors.pop(key, {})
        errors = {job.uid: job.completion_error for job in jobs if job.completion_error}
        if errors:
            self.rule_errors[key] = errors
        for job in jobs:
            error = job.completion_error
            if error is None or told.get(job.uid) == error:
                continue
            message = f"{job.kind.kind} {job.name} counts as running: {error}"
            logger.warning("%s/%s: %s", body["metadata"]["namespace"], job.schedule, message)
            if self.events is not None:
                self.events.post(body, EventNote("Warning", "CompletionRuleError", message))

    async def _ownership(self, key: Key, body: Mapping[str, Any]) -> Ownership:
        """Whether this installation fires the schedule; a conflict is reported once, when
        it begins, and its end (the other installation gone) once too."""
        if self.installation is None:
            return Ownership.MINE
        owner = owner_of(body)
        alive = None
        if owner is not None and owner != self.installation.name and self.others is not None:
            alive = await self.others.alive(owner)
        mine = ownership(
            body,
            installation=self.installation.name,
            class_name=self.installation.class_name,
            owner_alive=alive,
        )
        if mine is Ownership.CONFLICT and owner is not None:
            if self.conflicts.get(key) != owner:
                self.conflicts[key] = owner
                message = (
                    f"installation {owner} fires this schedule and is alive; "
                    f"{self.installation.name} writes nothing to it"
                )
                logger.warning("%s/%s: %s", *key, message)
                if self.events is not None:
                    self.events.post(body, EventNote("Warning", "Conflict", message))
        elif self.conflicts.pop(key, None) is not None:
            logger.info("%s/%s: the conflict is over (%s)", *key, mine.value)
        return mine

    async def _release_all(self, uid: str) -> None:
        """A deleted schedule's Jobs: no claim of it is left to protect, so none is held
        (garbage collection can then delete them)."""
        applied = Applied()
        role = self.roles.of(uid)
        if not role.elector.is_leader():
            # A member of a concurrency group was decided by its group's shard, which the
            # deleted body no longer names: any shard this replica leads may let go.
            led = [r for r in self.roles.by_shard if r.elector.is_leader()]
            if not led:
                return
            role = led[0]
        try:
            for job in self.view.jobs(uid):
                if job.has_finalizer:
                    await role.applier.free(job.namespace, job.name, job.uid, applied, job.kind)
        except NotLeader:
            return
        if applied.freed:
            logger.info("freed %d Jobs of a deleted schedule", len(applied.freed))

    async def sweep(self) -> None:
        """Release the held Jobs of schedules that are gone (deleted while no leader ran,
        or before this leader saw them): checked against the API server first, since
        the index may not have every schedule yet."""
        known = self.view.schedule_uids()
        for uid, jobs in self.view.finalized_jobs().items():
            if uid in known:
                continue
            job = jobs[0]
            try:
                body = await self.api.get(schedule_path(job.namespace, job.schedule))
                if body.get("metadata", {}).get("uid") == uid:
                    continue  # it exists: the index has not caught up
            except NotFound:
                pass
            except ApiError as error:
                logger.warning("sweeping Jobs of %s/%s: %s", job.namespace, job.schedule, error)
                continue
            await self._release_all(uid)

    def _later(self) -> datetime:
        return self.clock.now() + UNAVAILABLE_RETRY


def trace(body: Mapping[str, Any], decision: Decision) -> str:
    """One line saying what a pass read and what it is about to write (--log-level
    DEBUG): the cursor, the claim window and the claims in flight, read and decided,
    and the creates. What the campaign of faults reads to tell how a tick was lost."""

    def claims(status: Mapping[str, Any] | None) -> str:
        if status is None:
            return "unwritten"
        ticks = ",".join(_second(c.get("tick")) for c in status.get("inFlight") or ())
        return (
            f"cursor={_second(status.get('lastScheduledTime'))} "
            f"through={_second(status.get('claimedThrough'))} inFlight=[{ticks}]"
        )

    creates = _seconds(c.name for c in decision.creates)
    return (
        f"rv={body['metadata'].get('resourceVersion')} read {claims(body.get('status') or {})}"
        f" -> {claims(decision.status)} creates=[{creates}]"
    )


def applied_trace(applied: Applied) -> str:
    """What applying did, in the trace's terms: a 409, and the creates by outcome."""
    return (
        f"stale={applied.stale} created=[{_seconds(j.name for j in applied.created)}] "
        f"pending=[{_seconds(applied.pending)}] failed=[{_seconds(applied.failed)}]"
    )


def _seconds(names: Iterable[str]) -> str:
    """Run names (`<schedule>-<unix seconds>`) as the last two digits of their tick."""
    return ",".join(name.rsplit("-", 1)[-1][-2:] for name in names)


def _second(value: object) -> str:
    """An RFC 3339 instant as its minutes and seconds (the trace's ticks are seconds apart)."""
    return "-" if not isinstance(value, str) else value[14:19]
