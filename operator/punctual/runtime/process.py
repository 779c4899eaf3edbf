"""`punctual run`: the operator process, wiring watching, leading, scheduling and firing.

Why it exists: to compose the parts and own their lifecycle: kopf's watchers and
indices, the Lease elector, the scheduler loop, the Event recorder, and signals
(SIGTERM releases the Lease and exits). It also keeps two small caches that make the
leader's view fresher than the watch: the schedule as its own last claim wrote it
(so the next tick does not claim on a stale resourceVersion and lose a round to a
409), and the Jobs it created or deleted that the watch has not delivered yet.

What it must never do: decide (that is `deciding`) or write outside `firing`.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import os
import signal
from collections.abc import Mapping
from datetime import datetime, timedelta
from typing import Any

import kopf
from kopf._core.engines.indexing import OperatorIndexers
from kopf._core.engines.peering import Identity

from punctual.clocks import ServerClock
from punctual.core.deciding import Leadership, decide
from punctual.core.deferring import defer
from punctual.core.jobs import JobSnapshot
from punctual.kube.applying import Applier, NotLeader, schedule_path
from punctual.kube.client import ApiError, KubeClient, NotFound, Unavailable, load_credentials
from punctual.kube.events import EventRecorder
from punctual.kube.leases import LeaderElector
from punctual.kube.ratelimiting import RateLimiter
from punctual.kube.watching import (
    JOBS_INDEX,
    SCHEDULES_INDEX,
    make_registry,
    quiet_kopf,
    unpack,
    without_managed_fields,
)
from punctual.metrics import Metrics, serve
from punctual.runtime.logs import configure_logging
from punctual.runtime.options import Options, default_identity
from punctual.runtime.scheduling import Key, SchedulerLoop

logger = logging.getLogger("punctual")

RESYNC_EVERY = timedelta(minutes=5)
UNAVAILABLE_RETRY = timedelta(seconds=2)
CLOCK_PRECISION = timedelta(milliseconds=10)
CLOCK_RECHECK = 30.0


def _resource_version(body: Mapping[str, Any] | None) -> int:
    """resourceVersions are opaque, but from etcd they are increasing integers."""
    try:
        return int((body or {}).get("metadata", {}).get("resourceVersion", "-1"))
    except (TypeError, ValueError):
        return -1


class Operator:
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
        self.elector = LeaderElector(api, options.lease_config(lease_namespace), clock=clock)
        self.events = EventRecorder(api, clock=clock)
        self.applier = Applier(
            api,
            may_write=self.elector.is_leader,
            events=self.events,
            limiter=RateLimiter(options.qps, options.burst),
            metrics=self.metrics,
            clock=clock,
        )
        self.loop = SchedulerLoop(self.process, clock=clock, workers=options.workers)
        # kopf.operator() accepts the indexers but does not export their type; holding them
        # is how the scheduler reads the indices outside kopf's handlers.
        self.indexers = OperatorIndexers()
        self.synced = asyncio.Event()  # the first schedule event: indices are complete
        self.watching = asyncio.Event()  # kopf has started its watches (readiness)
        self.written: dict[Key, dict[str, Any]] = {}
        self.created: dict[str, dict[str, JobSnapshot]] = {}  # schedule uid -> name -> Job
        self.deleted: dict[str, set[str]] = {}  # schedule uid -> names being deleted
        self._jobs_seen: dict[str, JobSnapshot] = {}  # Job uid -> what decisions read of it
        self.unwritten_since: dict[Key, datetime] = {}  # status changes left for later
        self.registry = make_registry(
            credentials=api.credentials, on_schedule=self._on_schedule, on_job=self._on_job
        )

    # -- what kopf tells us ------------------------------------------------------------

    def _on_schedule(self, key: Key, resource_version: str | None = None) -> None:
        self.synced.set()
        ours = self.written.get(key)
        if ours is not None and ours["metadata"].get("resourceVersion") == resource_version:
            del self.written[key]  # the index holds the same now: no second copy to keep
            return  # the echo of our own claim: nothing new to decide
        self.loop.notify(key)

    def _on_job(self, key: Key, uid: str, job: JobSnapshot | None) -> None:
        """Wake the schedule only when what decisions read of the Job changed.

        A Job's status changes several times while it runs (pods created, ready,
        counted); only its creation, its finishing and its deletion matter here.
        """
        if job is not None and self._jobs_seen.get(uid) == job:
            return
        if job is None:
            self._jobs_seen.pop(uid, None)
        else:
            self._jobs_seen[uid] = job
        self.loop.notify(key)

    def _index(self, name: str) -> Any:
        return self.indexers.indices.get(name, {})

    # -- one schedule ------------------------------------------------------------------

    def schedule(self, key: Key) -> dict[str, Any] | None:
        """The freshest body we know: the watch's, or our own last write if newer."""
        index = self._index(SCHEDULES_INDEX)
        packed = next(iter(index[key]), None) if key in index else None
        watched = unpack(packed) if packed is not None else None
        ours = self.written.get(key)
        if watched is None:
            self.written.pop(key, None)
            return None
        same = ours is not None and ours["metadata"].get("uid") == watched["metadata"].get("uid")
        if same and _resource_version(ours) > _resource_version(watched):
            return ours
        self.written.pop(key, None)
        return watched

    def jobs(self, uid: str) -> list[JobSnapshot]:
        """The schedule's Jobs: the watch's, plus ours it has not delivered yet."""
        index = self._index(JOBS_INDEX)
        seen = {j.name: j for j in index.get(uid, [])}
        mine = self.created.get(uid, {})
        for name in [n for n in mine if n in seen]:
            del mine[name]  # the watch caught up
        gone = self.deleted.get(uid, set())
        gone &= set(seen)  # forget deletes the watch has delivered
        jobs = {**mine, **seen}
        return [
            dataclasses.replace(j, deleting=True) if j.name in gone else j for j in jobs.values()
        ]

    async def process(self, key: Key) -> datetime | None:
        if not self.elector.is_leader():
            return None
        for _ in range(3):  # a 409 means: re-read and decide again, at most twice more
            body = self.schedule(key)
            if body is None:
                self.loop.forget(key)
                return None
            uid = body["metadata"]["uid"]
            epoch = self.elector.epoch
            if epoch is None:
                return None
            decision = decide(
                body,
                self.jobs(uid),
                now=self.clock.now(),
                leadership=Leadership(epoch=epoch, identity=self.elector.config.identity),
            )
            if decision.status is None:
                self.unwritten_since.pop(key, None)
            if not decision.writes and not decision.events:
                return decision.next_wake
            deferred = defer(
                decision,
                unwritten_since=self.unwritten_since.get(key),
                now=self.clock.now(),
                delay=timedelta(seconds=self.options.status_delay),
            )
            decision = deferred.decision
            if deferred.unwritten_since is not None:
                self.unwritten_since[key] = deferred.unwritten_since
            if not decision.writes:
                return decision.next_wake
            try:
                applied = await self.applier.apply(body, decision)
            except NotLeader:
                return None
            except Unavailable as error:
                logger.warning("%s/%s: API server unavailable: %s", *key, error)
                return self.clock.now() + UNAVAILABLE_RETRY
            for job in applied.created:
                self.created.setdefault(uid, {})[job.name] = job
                # The watch's ADDED event for it says nothing new: no second decision.
                self._jobs_seen.setdefault(job.uid, job)
            if applied.deleted:
                self.deleted.setdefault(uid, set()).update(applied.deleted)
            if not applied.stale:
                if applied.schedule is not None and (decision.status is not None or applied.failed):
                    self.written[key] = without_managed_fields(applied.schedule)
                    self.unwritten_since.pop(key, None)
                return decision.next_wake
            try:  # stale: read the schedule as it is now
                self.written[key] = without_managed_fields(await self.api.get(schedule_path(*key)))
            except NotFound:
                self.written.pop(key, None)
                return None
            except ApiError as error:
                logger.warning("%s/%s: re-reading after a conflict: %s", *key, error)
                return self.clock.now() + UNAVAILABLE_RETRY
        return self.clock.now() + UNAVAILABLE_RETRY

    # -- lifecycle ---------------------------------------------------------------------

    def notify_all(self) -> None:
        if self.synced.is_set():
            for key in list(self._index(SCHEDULES_INDEX)):
                self.loop.notify(key)

    async def _follow_leadership(self, stop: asyncio.Event) -> None:
        """Enable the loop while leading; on becoming leader, look at every schedule."""
        while not stop.is_set():
            self.elector.changed.clear()
            leading = self.elector.is_leader()
            self.loop.enabled = leading
            if leading:
                self.written.clear()
                self.unwritten_since.clear()
                self.created.clear()
                self.deleted.clear()
                self.notify_all()
            changed = asyncio.ensure_future(self.elector.changed.wait())
            stopper = asyncio.ensure_future(stop.wait())
            await asyncio.wait(
                {changed, stopper},
                timeout=RESYNC_EVERY.total_seconds(),
                return_when=asyncio.FIRST_COMPLETED,
            )
            changed.cancel()
            stopper.cancel()

    def refresh_gauges(self) -> None:
        """Gauges read at scrape time from the live state."""
        leading = self.elector.is_leader()
        self.metrics.leader.set(1 if leading else 0)
        self.metrics.epoch.set(
            self.elector.epoch if leading and self.elector.epoch is not None else -1
        )
        self.metrics.schedules.set(len(self._index(SCHEDULES_INDEX)))
        self.metrics.clock_offset.set(self.clock.offset.total_seconds())
        self.metrics.clock_uncertainty.set(self.clock.uncertainty.total_seconds())

    async def _calibrate_clock(self, stop: asyncio.Event) -> None:
        """Probe the API server's clock where a probe narrows the estimate most.

        Until the offset is known to CLOCK_PRECISION, probe at estimated second boundaries
        a few times a second; then once every CLOCK_RECHECK to follow drift.
        """
        while not stop.is_set():
            precise = self.clock.samples >= 3 and self.clock.uncertainty <= CLOCK_PRECISION
            wait = self.clock.seconds_to_next_boundary() + (CLOCK_RECHECK if precise else 0.0)
            try:
                await asyncio.wait_for(stop.wait(), timeout=wait)
                return
            except TimeoutError:
                pass
            try:
                await self.api.get("/version")
            except ApiError as error:
                logger.debug("clock probe failed: %s", error)
                await asyncio.sleep(1)

    async def _notify_when_synced(self) -> None:
        await self.synced.wait()
        self.notify_all()

    async def run(self, stop: asyncio.Event) -> None:
        """Run until `stop` is set; raise `Fatal` if any part stopped on its own first."""
        web = None
        if self.options.metrics_port is not None:
            try:
                web = await serve(
                    self.metrics,
                    port=self.options.metrics_port,
                    ready=self.watching.is_set,
                    refresh=self.refresh_gauges,
                )
            except OSError as error:  # before anything starts: nothing to undo
                port = self.options.metrics_port
                raise Fatal(f"cannot serve metrics on port {port}: {error.strerror}") from None
        kopf_stop: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        clusterwide = not self.options.namespaces

        async def watch() -> None:
            await kopf.operator(
                registry=self.registry,
                indexers=self.indexers,
                standalone=True,
                clusterwide=clusterwide,
                namespaces=self.options.namespaces,
                stop_flag=kopf_stop,
                ready_flag=self.watching,
                # Without it kopf asks getpass.getuser(), which raises in an image whose
                # numeric user has no passwd entry: the process died before watching.
                identity=Identity(self.elector.config.identity),
            )
            # kopf returns only when told to stop: by us, or by a signal that reached its
            # handlers before `_take_back_signals` made them ours again.
            stop.set()

        watching = asyncio.create_task(watch(), name="watching")
        # The parts run until the stop; one that ends before it is fatal.
        parts = [
            asyncio.create_task(self.elector.run(stop), name="leader election"),
            asyncio.create_task(self.loop.run(stop), name="scheduler"),
            asyncio.create_task(self.events.run(stop), name="events"),
            asyncio.create_task(self._follow_leadership(stop), name="leadership"),
            asyncio.create_task(self._calibrate_clock(stop), name="clock"),
        ]
        helpers = [
            asyncio.create_task(self._notify_when_synced(), name="synced"),
            asyncio.create_task(self._take_back_signals(stop), name="signals"),
        ]
        logger.info(
            "punctual running as %s (%s), Lease %s/%s",
            self.elector.config.identity,
            "all namespaces" if clusterwide else ", ".join(self.options.namespaces),
            self.elector.config.namespace,
            self.elector.config.name,
        )
        failure = await first_failure(stop, [watching, *parts])
        stop.set()
        self.loop.enabled = False
        await asyncio.gather(*parts[:3], return_exceptions=True)  # the elector releases the Lease
        for task in [*parts[3:], *helpers]:
            task.cancel()
        await asyncio.gather(*parts[3:], *helpers, return_exceptions=True)
        if web is not None:
            await web.cleanup()
        if not kopf_stop.done():
            kopf_stop.set_result(None)
        await asyncio.gather(watching, return_exceptions=True)
        if failure is not None:
            raise failure

    async def _take_back_signals(self, stop: asyncio.Event) -> None:
        """Make SIGTERM and SIGINT ours again once kopf has installed its own handlers.

        kopf replaces the process's handlers when it starts; on a signal it stops its
        watches and then waits up to 5 s for every task it did not start, the Lease loop
        included, before anyone releases the Lease. With the handlers ours, SIGTERM
        releases the Lease first and stops kopf after.
        """
        await self.watching.wait()  # kopf sets it after installing its handlers
        install_stop_signals(stop)


class Fatal(Exception):
    """A part of the operator stopped while nobody asked it to: the process must exit
    non-zero so that Kubernetes shows the failure and restarts the pod."""


async def first_failure(stop: asyncio.Event, parts: list[asyncio.Task[Any]]) -> Fatal | None:
    """Wait until `stop` is set or a part ends on its own; return that part's failure.

    Every part runs until the stop: one that returns or raises before it is fatal,
    and the cause is logged here, once, with its traceback.
    """
    stopper = asyncio.ensure_future(stop.wait())
    done, _ = await asyncio.wait({stopper, *parts}, return_when=asyncio.FIRST_COMPLETED)
    stopper.cancel()
    if stop.is_set():
        return None
    part = next(p for p in parts if p in done)
    error = None if part.cancelled() else part.exception()
    if error is None:
        logger.error("%s stopped on its own; shutting down", part.get_name())
        return Fatal(f"{part.get_name()} stopped on its own")
    logger.error(
        "%s failed: %s: %s; shutting down",
        part.get_name(),
        type(error).__name__,
        error,
        exc_info=error,
    )
    return Fatal(f"{part.get_name()} failed: {type(error).__name__}: {error}")


def install_stop_signals(stop: asyncio.Event) -> None:
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)


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
