"""One operator replica in the simulator, wired from the runtime's own parts.

Why it exists: `punctual run` (runtime/process.py `Operator`) composes the parts, but it
also starts kopf's watch of FreezeWindows, the metrics server, clock calibration and
signal handling, which need a real API server, a port or the real clock. A `Replica`
wires the same parts the same way (the schedule and Job indices on their followers, the
leader's view, the scheduler loop whose unit of work is a Reconciler pass, one Role per
shard with an Applier guarded by its elector, the sharded election with one shard and
the Fence, the concurrency groups) on simulated time, and a leadership loop that does
what the Operator's `_act_on_leadership` does: enable the loop while leading, clear the
view when a leadership starts or ends, look at every schedule and sweep when a shard is
gained, and take back the passes dropped in a lapse.

What it must never do: decide or write anything itself (every write goes through the
real Applier), or wait on anything but the simulated time it is given.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from punctual.clocks import Clock
from punctual.core.deciding import DEFAULT_WINDOW
from punctual.core.jobs import JobSnapshot
from punctual.kube.applying import Applier
from punctual.kube.events import EventRecorder
from punctual.kube.groups import Groups
from punctual.kube.jobwatching import JobIndex
from punctual.kube.leases import LeaseConfig
from punctual.kube.ratelimiting import RateLimiter
from punctual.kube.schedulewatching import ScheduleIndex
from punctual.kube.sharding import ShardedElection, shard_key
from punctual.runtime.reconciling import Reconciler, Role, Roles
from punctual.runtime.scheduling import Key, SchedulerLoop
from punctual.runtime.view import LeaderView
from tests.sim.cluster import FENCE_NAME, LEASE_NAME, LEASE_NAMESPACE, SimApi
from tests.unit.faketime import FakeTime

NAMESPACE = "sim"
STATUS_DELAY = timedelta(seconds=10)  # runtime.options' default
DECIDE_AHEAD = timedelta(seconds=0.5)  # runtime.options' default
RESYNC = 300.0  # seconds: the Operator's RESYNC_EVERY


def lease_config(identity: str) -> LeaseConfig:
    """`punctual run`'s defaults (runtime.options), with the Fence."""
    return LeaseConfig(
        namespace=LEASE_NAMESPACE,
        name=LEASE_NAME,
        identity=identity,
        lease_duration=15.0,
        renew_deadline=10.0,
        retry_period=2.0,
        fence=FENCE_NAME,
    )


@dataclass(frozen=True)
class Skewed:
    """A clock `seconds` off the server's: what a node clock would be without the
    calibration `punctual run` does (a test plants it to show an early create caught)."""

    time: FakeTime
    seconds: float

    def now(self) -> datetime:
        return self.time.now() + timedelta(seconds=self.seconds)


class Replica:
    """One replica: its own client of the server, its indices, election, loop and passes."""

    def __init__(
        self,
        api: SimApi,
        time: FakeTime,
        identity: str,
        *,
        skew: float = 0.0,
        claim_window: timedelta = DEFAULT_WINDOW,
        status_delay: timedelta = STATUS_DELAY,
        decide_ahead: timedelta = DECIDE_AHEAD,
    ) -> None:
        self.identity = identity
        self.status_delay = status_delay
        self.time = time
        clock: Clock = Skewed(time, skew) if skew else time
        self.clock = clock
        self.api = api.client(identity)
        self.groups = Groups(self.api, [NAMESPACE])  # concurrency groups: members, limits
        self.schedules = ScheduleIndex(self.api, [NAMESPACE], self._on_schedule)
        self.jobs = JobIndex(self.api, [NAMESPACE], self._on_job)
        self.view = LeaderView(
            self.schedules, self.jobs.index, self.schedules.uids, self.schedules.versions
        )
        self.loop = SchedulerLoop(
            self._reconcile,
            clock=clock,
            sleeper=time,
            workers=8,
            routine_slots=1,
            ahead=decide_ahead,
        )
        self.election = ShardedElection(
            self.api, lease_config(identity), 1, clock=time, monotonic=time.monotonic, sleeper=time
        )
        self.events = EventRecorder(self.api, clock=time, capacity=100)
        limiter = RateLimiter(200.0, 400, monotonic=time.monotonic, sleep=time.sleep)
        roles = [
            Role(
                elector,
                Applier(
                    self.api,
                    may_write=elector.is_leader,
                    events=self.events,
                    limiter=limiter,
                    clock=clock,
                ),
                shard_key(index, 1),
            )
            for index, elector in enumerate(self.election.electors)
        ]
        self.reconciler = Reconciler(
            api=self.api,
            view=self.view,
            roles=Roles(roles),
            clock=clock,
            status_delay=status_delay,
            claim_window=claim_window,
            sleeper=time,
            forget=self.loop.forget,
            queue=self.loop,
            groups=self.groups,
        )
        self.stop = asyncio.Event()
        self.tasks: list[asyncio.Task[None]] = []
        self.synced = False

    # -- what the watches tell (the Operator's _on_schedule and _on_job) ----------------

    def _on_schedule(self, key: Key, body: Mapping[str, Any] | None) -> None:
        group = self.groups.observe(key, body)
        if group is not None:  # a member changed: the others may have room now
            self._notify_group(key, group)
        version = None if body is None else (body.get("metadata") or {}).get("resourceVersion")
        if not self.view.is_echo(key, version):
            self.loop.notify(key)

    def _on_job(self, key: Key, uid: str, job: JobSnapshot | None) -> None:
        now = self.clock.now()
        when = self.view.job_news(key, uid, job, now=now, delay=self.status_delay)
        if when is not None:
            if when > now:  # an ending the next write's pass records
                self.loop.wake_by(key, when)
            else:
                self.loop.notify(key)
            group = self.groups.group(key)
            if group is not None:  # a member's run started or ended: the others look again
                self._notify_group(key, group)

    def _notify_group(self, key: Key, group: str) -> None:
        for member in self.groups.members(key[0], group):
            if member != key:
                self.loop.notify(member)

    async def _reconcile(self, key: Key) -> datetime | None:
        if not self.synced:
            return None  # looked at once the lists are in
        return await self.reconciler(key)

    # -- lifecycle --------------------------------------------------------------------

    def start(self) -> None:
        parts = [
            self.schedules.run(self.stop),
            self.jobs.run(self.stop),
            self.groups.run(self.stop),
            self.loop.run(self.stop),
            self._elect(),
            self._lead(),
        ]
        self.tasks = [asyncio.ensure_future(part) for part in parts]

    async def _elect(self) -> None:
        """Seek the Lease once the lists are in (the Operator waits with patience)."""
        await self.schedules.ready.wait()
        await self.jobs.ready.wait()
        self.synced = True
        await self.election.run(self.stop)

    async def _lead(self) -> None:
        led: dict[int, int] = {}
        while not self.stop.is_set():
            self.election.changed.clear()
            now_led = self.election.terms() if self.synced else {}
            self.loop.enabled = bool(now_led)
            if bool(now_led) != bool(led):
                self.view.clear()
            gained = any(led.get(shard) != term for shard, term in now_led.items())
            if now_led and gained:
                for key in self.schedules:
                    self.loop.notify(key)
                await self.reconciler.sweep()
            if now_led:
                for key in sorted(self.reconciler.take_dropped()):
                    self.loop.notify(key)
            led = now_led
            await self.time.wait(self.election.changed, self.stop, timeout=RESYNC)

    def leads(self) -> bool:
        return self.election.is_leader()

    async def kill(self) -> None:
        """A crash (kill -9): nothing more reaches the server, the Lease is not released."""
        self.api.server.cut.add(self.identity)
        server = self.api.server
        if isinstance(server, SimApi):  # what it sent while paused fails now, never lands
            server.resume(self.identity)
        for task in self.tasks:
            task.cancel()
        for task in self.tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
