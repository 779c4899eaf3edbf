"""`punctual run`: the operator process, wiring watching, leading, scheduling and applying.

Why it exists: to compose the parts and own their lifecycle: the schedule and Job
indices (kube.schedulewatching, kube.jobwatching), kopf's FreezeWindow watch
(kube.watching), the Lease loop (kube.leases), the scheduler loop whose unit
of work is a Reconciler pass, the Event recorder, clock calibration, metrics and
probes, and signals (SIGTERM releases the Lease and exits; a part that fails is
fatal, see supervision).

What it must never do: decide (that is `core`), or write other than through `kube`.
"""

from __future__ import annotations

import asyncio
import logging
import math
import os
from collections.abc import Mapping
from datetime import datetime, timedelta
from typing import Any

from aiohttp import web

from punctual.clocks import ServerClock, first_of
from punctual.core.early import HORIZON, due_minutes
from punctual.core.groups import placement_of
from punctual.core.jobs import JobSnapshot
from punctual.core.pending import pending_seconds
from punctual.core.records import SkipReason
from punctual.core.times import format_time
from punctual.core.workloads import parse_kinds
from punctual.kube.applying import Applier
from punctual.kube.client import ApiError, KubeClient
from punctual.kube.credentials import load_credentials
from punctual.kube.events import EventRecorder
from punctual.kube.groups import Groups
from punctual.kube.jobwatching import CompletionRules, JobIndex
from punctual.kube.leases import Installations
from punctual.kube.ratelimiting import RateLimiter
from punctual.kube.schedulewatching import ScheduleIndex
from punctual.kube.sharding import ShardedElection, shard_key
from punctual.kube.watching import make_registry, new_indexers, quiet_kopf, watch
from punctual.kube.workloads import Workloads
from punctual.metrics import Metrics, serve
from punctual.runtime.calibrating import calibrate
from punctual.runtime.chains import Downstreams
from punctual.runtime.clusterwide import ClusterWide
from punctual.runtime.early import EarlyDecisions
from punctual.runtime.freezewindows import FreezeWindows
from punctual.runtime.logs import configure_logging
from punctual.runtime.options import Options, default_identity
from punctual.runtime.reconciling import Installation, Reconciler, Role, Roles
from punctual.runtime.sampling import LagSampler
from punctual.runtime.scheduling import Key, SchedulerLoop
from punctual.runtime.supervision import Fatal, first_failure, install_stop_signals
from punctual.runtime.trimming import Trimmer, glibc_in_use, glibc_trim
from punctual.runtime.view import LeaderView

logger = logging.getLogger("punctual")

RESYNC_EVERY = timedelta(minutes=5)
# Retry periods a replica whose lists are not in waits on a free Lease (kube.leases.choose).
PATIENCE_PERIODS = 2
# A replica whose lists are not in by then lets the Leases go until they are (it decides
# too little to keep a standby whose lists are in from leading).
EARLY_LIMIT = timedelta(minutes=5)
EARLY_RETRY = timedelta(seconds=1)  # a pass whose fresh read failed, before the lists are in
# A new leader looks first at the schedules whose next tick is this close (then at the
# never-decided ones, then at the rest).
DUE_FIRST = timedelta(seconds=10)

__all__ = ["Fatal", "Operator", "Options", "run"]


class Operator:
    """The running process: wires the parts (the indices, the workload kinds, the
    concurrency groups, the FreezeWindows, the Lease loop, the scheduler loop, the Events)
    and supervises them. Over 300 lines because it is the one place that wires everything."""

    def __init__(
        self,
        api: KubeClient,
        options: Options,
        *,
        clock: ServerClock,
        metrics: Metrics | None = None,
    ) -> None:
        self.api = api
        self.metrics = metrics or Metrics()
        self.options = options
        self.clock = clock
        lease_namespace = options.lease_namespace or api.credentials.namespace
        self.election = ShardedElection(
            api,
            options.lease_config(lease_namespace),
            options.shards,
            clock=clock,
        )
        self.events = EventRecorder(api, clock=clock)
        self.indexers = new_indexers()  # kopf's (it keeps none: FreezeWindows have no index)
        self.schedules = ScheduleIndex(api, options.namespaces, self._on_schedule)
        # The compiled spec.completion of each schedule that has one, by uid.
        self.rules = CompletionRules()
        self.groups = Groups(api, options.namespaces)  # concurrency groups: members, limits
        self.downstreams = Downstreams()  # spec.after: who runs after whom
        self.jobs = JobIndex(api, options.namespaces, self._on_job, rules_of=self.rules.get)
        self.workloads = Workloads(
            api,
            parse_kinds(options.workload_kinds),
            self.jobs,
            on_served=lambda kind: self.notify_all(),
        )
        self.view = LeaderView(
            self.schedules, self.jobs.index, self.schedules.uids, self.schedules.versions
        )
        self.loop = SchedulerLoop(
            self._reconcile,
            clock=clock,
            workers=options.workers,
            routine_slots=max(1, options.workers // 8),
            ahead=timedelta(seconds=options.decide_ahead),
        )
        limiter = RateLimiter(options.qps, options.burst)  # one for all shards
        # One role per shard: its elector, and an applier that writes only while it leads.
        roles = [
            Role(
                elector,
                Applier(
                    api,
                    may_write=elector.is_leader,
                    events=self.events,
                    limiter=limiter,
                    metrics=self.metrics,
                    clock=clock,
                ),
                shard_key(index, options.shards),
            )
            for index, elector in enumerate(self.election.electors)
        ]
        self.reconciler = Reconciler(
            api=api,
            view=self.view,
            roles=Roles(roles),
            clock=clock,
            status_delay=timedelta(seconds=options.status_delay),
            claim_window=timedelta(seconds=options.claim_window),
            forget=self.loop.forget,
            installation=Installation(
                f"{lease_namespace}/{options.lease_name}", options.class_name
            ),
            others=Installations(api, clock=clock),
            events=self.events,
            freezes=lambda namespace: [
                *self.freezes.freezes_of(namespace),
                *self.clusterwide.freezes_of(namespace),
            ],
            calendars=lambda: self.clusterwide.calendars(),
            queue=self.loop,
            served=self.workloads.served,
            groups=self.groups,
            verified_triggers=options.verified_triggers,
            synced=lambda: self.synced.is_set(),
        )
        # Their status is written by the first shard's leader, through its applier.
        report = roles[0].applier.report_status
        self.freezes = FreezeWindows(
            api,
            options.namespaces,
            view=self.view,
            election=self.election,
            clock=clock,
            notify=self.loop.notify,
            report=report,
        )
        self.clusterwide = ClusterWide(
            api,
            options.namespaces,
            view=self.view,
            election=self.election,
            clock=clock,
            notify=self.loop.notify,
            report=report,
        )
        # Before the lists are in, only the schedules due soon whose Jobs were listed are
        # decided (runtime.early), and only with one shard: with more, no shard is sought
        # before the lists are in (a replica taking part in the share would take shards
        # from replicas that could decide them whole).
        self.early = EarlyDecisions(
            api,
            self.jobs,
            clock=clock,
            may_decide=self._may_decide_early,
            notify=self.loop.notify,
        )
        self.lag = LagSampler()
        self.trimmer = Trimmer(trim=glibc_trim())
        in_use = glibc_in_use()
        if in_use is not None:
            self.metrics.heap_bytes.set_function(in_use)
        # The schedules and the Jobs listed: everything may be decided.
        self.synced = asyncio.Event()
        for elector in self.election.electors:  # yield to a standby whose lists are in
            elector.patience = PATIENCE_PERIODS * options.retry_period
        self.watching = asyncio.Event()  # kopf has started its watches (readiness)
        self.stopping = asyncio.Event()  # set with the stop: a stopping replica is not ready
        self.registry = make_registry(credentials=api.credentials, on_change=self._small_kind)

    def _may_decide_early(self) -> bool:
        """Leading, and what a decision reads besides the schedule and its Jobs is
        followed: the FreezeWindows (listed, and kopf's watch of them started), the
        Calendars and ClusterFreezeWindows (and Namespace labels)."""
        listed = self.freezes.listed.is_set() and self.clusterwide.listed.is_set()
        return listed and self.watching.is_set() and self.election.is_leader()

    def _decidable_early(self, key: Key) -> bool:
        return self.early.decidable(key)

    async def _reconcile(self, key: Key) -> datetime | None:
        self.metrics.passes.inc()
        if not self.synced.is_set():
            if not self.early.decidable(key):
                return None  # decided once the lists are in (notify_all)
            fresh = await self.early.refresh(key, self.view.reread)
            if fresh is None:
                return None  # it waits for the lists
            if not fresh:
                return self.clock.now() + EARLY_RETRY
        return await self.reconciler(key)

    # -- what the watches tell us -----------------------------------------------------

    def _on_schedule(self, key: Key, body: Mapping[str, Any] | None) -> None:
        self.metrics.per_schedule.observe(key, body, "" if body is None else placement_of(body))
        if body is None:  # its series go with it (kube-state-metrics does the same)
            self.metrics.forget_schedule(*key, skip_reasons=[reason.value for reason in SkipReason])
        changed = self.rules.observe(key, body)
        if changed is not None:  # its objects are judged by other rules now
            self.jobs.rejudge(changed)
        group = self.groups.observe(key, body)
        if group is not None:  # a member changed: the others may have room now
            self._notify_group(key, group)
        self.downstreams.observe(key, body)
        for downstream in self.downstreams.of(key):  # it recorded an outcome, or went away
            self.loop.notify(downstream)
        version = None if body is None else (body.get("metadata") or {}).get("resourceVersion")
        echo = self.view.is_echo(key, version)  # our own write: nothing new
        if not self.synced.is_set():
            self.early.consider(key, body)
            if not self._decidable_early(key):
                return  # looked at once the lists are in (notify_all)
        if not echo:
            self.loop.notify(key)

    def _on_job(self, key: Key, uid: str, job: JobSnapshot | None) -> None:
        now = self.clock.now()
        when = self.view.job_news(key, uid, job, now=now, delay=self.reconciler.status_delay)
        if when is not None:
            if not self.synced.is_set() and not self._decidable_early(key):
                return  # looked at once the lists are in (notify_all)
            if when > now:  # an ending the next write's pass records
                self.loop.wake_by(key, when)
            else:
                self.loop.notify(key)
            group = self.groups.group(key)
            if group is not None:  # a member's run started or ended: the others look again
                self._notify_group(key, group)
            for downstream in self.downstreams.of(key):  # an upstream's run ended
                self.loop.notify(downstream)

    def _small_kind(
        self, plural: str, namespace: str | None, body: dict[str, Any], gone: bool
    ) -> None:
        """kopf's event about one of the small kinds (`kube.watching.SMALL_KINDS`)."""
        name = str((body.get("metadata") or {}).get("name", ""))
        if plural == "freezewindows":
            self.freezes.changed(namespace or "", name, None if gone else body)
        elif plural == "concurrencygroups":
            if gone:
                self.groups.deleted(body)
            else:
                self.groups.changed(body)
            group = (namespace or "", name)
            for member in self.groups.members(*group):  # their room may have changed
                self.loop.notify(member)
        else:  # calendars, clusterfreezewindows, namespaces
            self.clusterwide.changed(plural, name, None if gone else body)

    def _notify_group(self, key: Key, group: str) -> None:
        for member in self.groups.members(key[0], group):
            if member != key:
                self.loop.notify(member)

    # -- lifecycle ---------------------------------------------------------------------

    def notify_all(self) -> None:
        if self.synced.is_set():
            due_by = format_time((self.clock.now() + DUE_FIRST).replace(microsecond=0))
            self.loop.notify_in_order(self.schedules.soonest_first(due_by))

    async def _act_on_leadership(self, stop: asyncio.Event) -> None:
        """Enable the loop while leading; once leading with the lists in, look at every
        schedule (before they are in, runtime.early says which may be decided)."""
        # The shards held, each with its term (kube.sharding.terms): held, not led, so
        # that a lapse between two renewals, which comes back unannounced, neither stops
        # the loop nor looks like a new leadership (each pass checks leadership itself).
        led: dict[int, int] = {}
        whole = False  # leading with the lists in, and every schedule looked at
        while not stop.is_set():
            self.election.changed.clear()
            synced = self.synced.is_set()
            now_led = self.election.terms()
            self.loop.enabled = bool(now_led)
            if bool(now_led) != bool(led):
                # A leadership starts or ends: what the last one wrote is no use to the
                # next, and a standby never reads it (the soak's standby held a parsed
                # body per schedule here).
                self.view.clear()
                self.early.led(bool(now_led))
            gained = any(led.get(shard) != term for shard, term in now_led.items())
            if now_led and synced and (gained or not whole):
                # A shard gained, or the lists came in: look at every schedule (the
                # others' passes return at once).
                self.notify_all()
                await self.reconciler.sweep()
            whole = bool(now_led) and synced
            if now_led:  # leadership that had only lapsed is back: what it dropped
                for key in self.reconciler.take_dropped():
                    self.loop.notify(key)
            led = now_led
            await first_of(
                self.election.changed,
                stop,
                *([] if synced else [self.synced]),
                timeout=RESYNC_EVERY.total_seconds(),
            )

    def unready(self) -> str | None:
        """Why this replica could not lead at once, or None when it could: /readyz is 200
        only then. A Deployment's rollout moves on when a new pod is Ready and the old
        leader hands its Lease over on SIGTERM, so Ready must mean every schedule and Job
        is in the index and the Leases have been read."""
        if self.stopping.is_set():
            return "stopping"
        if not self.schedules.ready.is_set():
            return f"listing CronSchedules ({len(self.schedules)} indexed so far)"
        if not self.jobs.ready.is_set():
            return "listing Jobs"
        kinds = self.workloads.unready()
        if kinds is not None:
            return kinds
        if not self.freezes.listed.is_set():
            return "listing FreezeWindows"
        if not self.clusterwide.listed.is_set():
            return "listing Calendars and ClusterFreezeWindows"
        if not self.watching.is_set():
            return "kopf's FreezeWindow watch has not started"
        if not self.synced.is_set() or not self.election.observed():
            return "reading the Leases"
        return None

    def refresh_gauges(self) -> None:
        """Gauges read at scrape time from the live state."""
        self.metrics.schedules_indexed.set(len(self.schedules))
        self.metrics.synced.set(1 if self.unready() is None else 0)
        leading = self.election.is_leader()
        self.metrics.leader.set(1 if leading else 0)
        first = self.election.electors[0]
        single = self.election.count == 1 and leading and first.epoch is not None
        self.metrics.epoch.set(first.epoch if single and first.epoch is not None else -1)
        self.metrics.shards_led.set(len(self.election.led()))
        self.metrics.schedules.set(len(self.schedules))
        self.metrics.postponed.set(self.loop.postponed)
        self.metrics.event_loop_lag.set(self.lag.worst())
        for kind in self.workloads.asked:
            listed = kind.name in self.workloads.listed
            self.metrics.workload_kinds.labels(kind.name).set(1 if listed else 0)
        self.metrics.conflicts.set(len(self.reconciler.conflicts) if leading else 0)
        backlog = self.view.cleanup_backlog.values()
        self.metrics.cleanup_backlog.set(sum(backlog) if leading else 0)
        self.metrics.clock_offset.set(self.clock.offset.total_seconds())
        self.metrics.clock_uncertainty.set(self.clock.uncertainty.total_seconds())
        # Per schedule, only on the replica that leads its shard (the others export none).
        self.metrics.per_schedule.export(
            lambda uid: self.election.elector_for(uid).is_leader(), self._pending_for
        )

    def _pending_for(self, uid: str) -> float:
        """Seconds the schedule's oldest running Job has had no pod started (0: none)."""
        return pending_seconds(self.view.jobs(uid), self.clock.now())

    async def _notify_when_synced(self) -> None:
        await self.schedules.ready.wait()
        await self.jobs.ready.wait()
        for elector in self.election.electors:
            elector.without_patience()
        self.synced.set()
        logger.info("listed %d CronSchedules and their Jobs", len(self.schedules))

    async def _list_due_first(self) -> None:
        """Before the whole list: the schedules due soon, found by the minute of their
        next tick (`ScheduleIndex.list_due`), so that those the list brings last are
        decided early too (runtime.early). Only with one shard, as early decisions."""
        if self.options.shards > 1 or self.schedules.ready.is_set():
            return
        behind = HORIZON + timedelta(seconds=self.options.claim_window)
        try:
            found = await self.schedules.list_due(due_minutes(self.clock.now(), behind=behind))
        except Exception:  # best effort: the whole list finds them all the same
            logger.exception("listing the CronSchedules due soon failed")
            return
        logger.info("listed %d CronSchedules due soon before the whole list", found)

    async def _limit_early(self, stop: asyncio.Event) -> None:
        """Lists not in within EARLY_LIMIT (RBAC refusing one namespace, a list that
        never completes): release the Leases and take none until they are in. Such a
        replica decides only the schedules due soon; before it could decide early, it
        never led at all."""
        await first_of(stop, self.synced, timeout=EARLY_LIMIT.total_seconds())
        if stop.is_set() or self.synced.is_set():
            return
        logger.warning(
            "the lists are not in after %d s: letting the Lease go until they are",
            EARLY_LIMIT.total_seconds(),
        )
        for elector in self.election.electors:
            elector.patience = math.inf
            await elector.release()

    async def _elect(self, stop: asyncio.Event) -> None:
        """Seek the Leases until `stop`. With one shard at once, but patiently until the
        lists are in (a free Lease is taken only after PATIENCE_PERIODS retry periods, so
        that a standby with its lists in takes it first); with more, once the lists are
        in: a replica that could not decide yet must not take part in the share."""
        if self.election.count > 1:
            await first_of(stop, self.synced, timeout=None)
        if not stop.is_set():
            await self.election.run(stop)

    async def run(self, stop: asyncio.Event) -> None:
        """Run until `stop` is set; raise `Fatal` if any part stopped on its own first."""
        probes = await self._serve()
        kopf_stop: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        watching = asyncio.create_task(self._watch(stop, kopf_stop), name="watching")
        # The parts run until the stop; one that ends before it is fatal. The first three
        # stop on their own at the stop, the Lease released first; the rest are cancelled.
        releasing = {
            "leader election": self._elect(stop),
            "scheduler": self.loop.run(stop),
            "events": self.events.run(stop),
        }
        cancelled = {
            "leadership": self._act_on_leadership(stop),
            "clock": calibrate(self.clock, self.api, stop),
            "event loop lag": self.lag.run(stop),
            "memory trimming": self.trimmer.run(stop),
            "schedules": self.schedules.run(stop),
            "jobs": self.jobs.run(stop),
            "workload kinds": self.workloads.run(stop),
            "concurrency groups": self.groups.run(stop),
            "freeze windows": self.freezes.run(stop),
            "calendars and cluster freeze windows": self.clusterwide.run(stop),
        }
        helpers = {
            "synced": self._notify_when_synced(),
            "signals": self._take_back_signals(stop),
            "early decisions": self.early.run(stop, self.synced),
            "schedules due first": self._list_due_first(),
            "early limit": self._limit_early(stop),
        }
        stopping = {name: asyncio.create_task(c, name=name) for name, c in releasing.items()}
        parts = {name: asyncio.create_task(c, name=name) for name, c in cancelled.items()}
        aids = [asyncio.create_task(c, name=name) for name, c in helpers.items()]
        config = self.election.config
        namespaces = ", ".join(self.options.namespaces) or "all namespaces"
        logger.info(
            "punctual running as %s (%s), Lease %s/%s%s",
            config.identity,
            namespaces,
            config.namespace,
            config.name,
            f", {self.election.count} shards" if self.election.count > 1 else "",
        )
        failure = await first_failure(stop, [watching, *stopping.values(), *parts.values()])
        self.stopping.set()
        # Shutdown, in order: the Lease is released first (the standby takes over at
        # once), then the rest stops, and kopf's watches last.
        stop.set()
        self.loop.enabled = False
        await asyncio.gather(*stopping.values(), return_exceptions=True)
        for task in [*parts.values(), *aids]:
            task.cancel()
        await asyncio.gather(*parts.values(), *aids, return_exceptions=True)
        if probes is not None:
            await probes.cleanup()
        if not kopf_stop.done():
            kopf_stop.set_result(None)
        await asyncio.gather(watching, return_exceptions=True)
        if failure is not None:
            raise failure

    async def _serve(self) -> web.AppRunner | None:
        """/metrics, /healthz and /readyz, before anything else starts (a taken port is
        fatal with nothing to undo)."""
        port = self.options.metrics_port
        if port is None:
            return None
        try:
            return await serve(
                self.metrics, port=port, unready=self.unready, refresh=self.refresh_gauges
            )
        except OSError as error:
            raise Fatal(f"cannot serve metrics on port {port}: {error.strerror}") from None

    async def _watch(self, stop: asyncio.Event, kopf_stop: asyncio.Future[None]) -> None:
        """kopf's watches and indices, until `kopf_stop`."""
        await watch(
            registry=self.registry,
            indexers=self.indexers,
            namespaces=self.options.namespaces,
            identity=self.election.identity,
            stop_flag=kopf_stop,
            ready_flag=self.watching,
        )
        # kopf returns only when told to stop: by us, or by a signal that reached its
        # handlers before `_take_back_signals` made them ours again.
        stop.set()

    async def _take_back_signals(self, stop: asyncio.Event) -> None:
        """Make SIGTERM and SIGINT ours again once kopf has installed its own handlers.

        kopf replaces the process's handlers when it starts; on a signal it stops its
        watches and then waits up to 5 s for every task it did not start, the Lease loop
        included, before anyone releases the Lease. With the handlers ours, SIGTERM
        releases the Lease first and stops kopf after.
        """
        await self.watching.wait()  # kopf sets it after installing its handlers
        install_stop_signals(stop)


async def run(options: Options) -> None:
    """Run until SIGTERM or SIGINT; release the Lease on the way out."""
    configure_logging(options.log_level, options.log_format)
    quiet_kopf()
    stop = asyncio.Event()
    install_stop_signals(stop)
    clock = ServerClock()
    options.identity = options.identity or default_identity()
    try:
        credentials = load_credentials(options.kubeconfig)
    except (OSError, KeyError, ValueError) as error:
        raise Fatal(f"cannot load credentials: {error}") from None
    # The user agent names the replica, so the API server's audit log tells who wrote.
    agent = f"punctual/{options.identity}"
    metrics = Metrics()

    def observe(verb: str, code: int) -> None:
        metrics.api_requests.labels(verb.lower(), str(code)).inc()

    async with KubeClient(
        credentials, server_clock=clock, user_agent=agent, observer=observe
    ) as api:
        try:
            await api.get("/version")  # a first clock sample, and a clear error if unreachable
        except ApiError as error:
            logger.warning("API server not reachable yet: %s", error)
        await Operator(api, options, clock=clock, metrics=metrics).run(stop)
    logger.info("punctual stopped (pid %d)", os.getpid())
