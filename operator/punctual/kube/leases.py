"""Leader election on a coordination.k8s.io/v1 Lease: one replica writes, the others wait warm.

Why it exists: at most one replica may fire at a time, and a replica that is paused,
partitioned or slow must stop writing *before* anyone else may start. The rules, as
client-go's leaderelection does them, with the clock that matters for each:

* Expiry is judged on the observer's monotonic clock, never by comparing its wall
  clock with the holder's `renewTime`: a standby takes the Lease only after it has
  seen the same record, unchanged, for `leaseDurationSeconds`.
* A leader counts itself leader only until `renew_deadline` (10 s) after it *sent*
  its last successful renewal, which is earlier than any standby can take over
  (`lease_duration`, 15 s, after it *saw* that renewal). Every write Punctual makes
  checks `is_leader()` first, so a leader stopped by SIGSTOP wakes up as a standby.
* Taking the Lease increments `leaseTransitions`; that number is the leader's epoch,
  stamped on every Job it creates.
* Every write to the Lease carries its resourceVersion, so two candidates racing
  for it cannot both win.
* On shutdown the leader releases the Lease (empty holder). A standby watches the
  Lease, wakes on the release and takes over within one request of it (measured
  with the chart on a real node: tests/e2e/test_real_node.py), instead of at its next
  retry or after expiry.

The decisions (who may take the Lease, when it expired, whether this replica leads)
are pure functions at the top of this module, table-tested on a fake clock; the
`LeaderElector` below only reads and writes the Lease and keeps their state. It reads
time only through its `clock`, `monotonic` and `sleeper`, so tests/unit/test_electing.py
runs it on simulated time against a fake API server.

What it must never do: decide anything about schedules, or keep writing on a lease
it could not renew in time.

Over 500 lines because a Lease is read one way everywhere: the pure rules, the elector
that writes its own Lease, and `Installations`, which judges another installation's
Lease by the same rules (and which the elector asks before raising the Fence); apart,
each would import the others.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from dataclasses import dataclass
from datetime import datetime, timedelta
from enum import Enum
from typing import Any

from punctual.clocks import (
    Clock,
    EventLoopSleeper,
    Monotonic,
    ServerClock,
    Sleeper,
    monotonic,
)
from punctual.core.jobs import installation_label
from punctual.core.keys import LABEL_MEMBER_OF
from punctual.core.times import maybe_time
from punctual.kube.client import AlreadyExists, Api, ApiError, Conflict, NotFound
from punctual.kube.fencing import fence_epoch, raise_fence

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class LeaseConfig:
    """The Lease and its timing (`punctual run`'s defaults: runtime.options.Options)."""

    namespace: str
    name: str
    identity: str
    lease_duration: float
    renew_deadline: float
    retry_period: float
    # A Fence (crds/fences.punctual.dev.yaml) beside the Lease holding {holder, epoch}:
    # the parameter of the API server's fencing policy. None: no fence.
    fence: str | None

    def __post_init__(self) -> None:
        if not 0 < self.retry_period < self.renew_deadline < self.lease_duration:
            raise ValueError(
                "need 0 < retry period < renew deadline < lease duration, got "
                f"{self.retry_period} / {self.renew_deadline} / {self.lease_duration}"
            )


@dataclass(frozen=True)
class Shard:
    """Which shard a Lease leads (kube.sharding): its index, the shard count, and the
    installation's base Lease name, from which the Leases of another count are named.
    One shard is `Shard(0, 1, name)`: the Lease `name` and the Fence's holder/epoch."""

    index: int
    count: int
    base_name: str

    @property
    def key(self) -> str | None:
        """Its entry in the Fence's per-shard map ("<i>-of-<n>"); None with one shard."""
        return None if self.count == 1 else f"{self.index}-of-{self.count}"


# -- the decisions, pure ---------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class LeaseRecord:
    """What one read of the Lease says."""

    holder: str  # "" when released
    renew_time: datetime | None
    transitions: int
    duration: float  # seconds

    @classmethod
    def from_body(cls, lease: dict[str, Any], default_duration: float) -> LeaseRecord:
        spec = lease.get("spec") or {}
        return cls(
            holder=spec.get("holderIdentity") or "",
            renew_time=maybe_time(spec.get("renewTime")),
            transitions=int(spec.get("leaseTransitions") or 0),
            duration=float(spec.get("leaseDurationSeconds") or default_duration),
        )


@dataclass(frozen=True, slots=True)
class Observation:
    """A Lease record as this replica saw it, and since when (its monotonic seconds)."""

    record: LeaseRecord
    since: float


def observe(previous: Observation | None, record: LeaseRecord, now: float) -> Observation:
    """The observation after reading `record` at `now`: its clock restarts on any change."""
    if previous is not None and previous.record == record:
        return previous
    return Observation(record, now)


def seconds_left(record: LeaseRecord, server_now: datetime | None) -> float | None:
    """Seconds until the Lease expires by the API server's clock, when that is known.

    `server_now` is this replica's estimate of the API server's clock, given only when
    it is good to a second (the holder writes renewTime on its own such estimate).
    """
    if server_now is None or record.renew_time is None:
        return None
    return (record.renew_time + timedelta(seconds=record.duration) - server_now).total_seconds()


def expired(
    observation: Observation, now: float, server_now: datetime | None, *, patience: float = 0.0
) -> bool:
    """Unrenewed for its duration: seen unchanged that long on this replica's monotonic
    clock (client-go's rule), or past its renewTime plus duration by the server's clock,
    which lets a standby take over at expiry rather than up to one poll later. With
    `patience`, that many seconds more."""
    record = observation.record
    if now - observation.since >= record.duration + patience:
        return True
    left = seconds_left(record, server_now)
    return left is not None and left <= -patience


class Step(Enum):
    """What to do with the Lease after reading it."""

    RENEW = "renew"  # ours: write a new renewTime, keep the epoch
    TAKE = "take"  # released or expired: take it, leaseTransitions + 1 is the new epoch
    STAND_BY = "stand by"  # another replica holds it and it is alive


def choose(
    observation: Observation,
    identity: str,
    *,
    epoch: int | None,
    now: float,
    server_now: datetime | None,
    patience: float = 0.0,
) -> tuple[Step, int | None]:
    """The step and the epoch it leads to (None when standing by).

    `patience`: seconds a released or expired Lease must have been so before this
    replica takes it; a replica whose lists are not in yet waits that long, so that a
    standby with its lists in (which takes it at once) leads instead (runtime.process)."""
    record = observation.record
    if record.holder == identity:
        return Step.RENEW, record.transitions if epoch is None else epoch
    free = record.holder == "" and now - observation.since >= patience
    if free or expired(observation, now, server_now, patience=patience):
        return Step.TAKE, record.transitions + 1
    return Step.STAND_BY, None


def above_fence(epoch: int, fenced: int | None) -> int:
    """The epoch to take the Lease with: the next one, and above the Fence's. A Lease
    deleted by hand (or edited) may start over below a fence that only moves up; taking
    it there would leave every replica unable to lead."""
    return epoch if fenced is None else max(epoch, fenced + 1)


def shard_lease_name(base: str, index: int, count: int) -> str:
    """A shard's Lease: the base name itself with one shard (the leader Lease every
    existing installation has), `<base>-<index>-of-<count>` with more."""
    return base if count == 1 else f"{base}-{index}-of-{count}"


def leading(
    epoch: int | None, valid_until: float, now: float, *, fenced: int | None, fence: bool
) -> bool:
    """Whether this replica may write now: it holds an epoch, its last renewal was sent
    less than the renew deadline ago, and (with a fence) the fence is at that epoch."""
    if epoch is None or now >= valid_until:
        return False
    return not fence or fenced == epoch


# -- the loop: reads and writes ----------------------------------------------------------


class LeaderElector:
    """Acquires, renews and releases one Lease; tells whether this replica may write now.

    Over 200 lines: each write it makes to the Lease (create, renew, take, release) and
    the watch that wakes a standby are one method each; its decisions are already the
    pure functions above it."""

    def __init__(
        self,
        api: Api,
        config: LeaseConfig,
        *,
        clock: Clock,
        shard: Shard | None = None,
        monotonic: Monotonic = monotonic,
        sleeper: Sleeper | None = None,
    ) -> None:
        self.api = api  # its watch wakes a standby when the Lease is released
        self.released = asyncio.Event()  # the Lease was released while we stood by
        self.config = config
        self.shard = shard or Shard(0, 1, config.name)
        self._clock = clock  # the wall clock written into renewTime (the server's estimate)
        self._monotonic = monotonic  # judges expiry and the renew deadline
        self._sleeper = sleeper or EventLoopSleeper()  # waits between rounds
        self.epoch: int | None = None
        self._valid_until = float("-inf")
        self._observation: Observation | None = None
        self._expires_in: float | None = None  # seconds until the holder's Lease expires
        self._fenced: int | None = None  # the epoch the Fence was raised to
        # Seconds a free Lease must have been free before we take it (kube.leases.choose).
        self.patience = 0.0
        self._absent_since: float | None = None  # since when the Lease has been seen absent
        self._wake = asyncio.Event()  # an attempt now rather than at the next round
        # Whether our last write of the Lease (create, renew, take) succeeded: we hold it,
        # even while we may not lead yet (the Fence not raised, kube.sharding counts it).
        self.holding = False
        self._others = Installations(api, clock=clock, monotonic=monotonic)
        self.changed = asyncio.Event()  # set whenever leadership starts or stops
        # A term begins each time an epoch is taken up (the Fence raised to it) and ends
        # when the epoch is let go: between two renewals leadership may lapse and come
        # back unannounced within one slow request, but a term's end is always announced
        # (`changed`), so whoever watches the terms misses no loss of leadership.
        self.term = 0
        self._in_term = False
        # The Lease has been read (or found absent) at least once: this replica knows
        # whether it may take it, so it could lead at once (readiness, runtime.process).
        self.observed = asyncio.Event()

    @property
    def identity(self) -> str:
        return self.config.identity

    @property
    def path(self) -> str:
        c = self.config
        return f"/apis/coordination.k8s.io/v1/namespaces/{c.namespace}/leases/{c.name}"

    def is_leader(self) -> bool:
        """True only while the last renewal is fresh enough that nobody else can hold the Lease."""
        return leading(
            self.epoch,
            self._valid_until,
            self._monotonic(),
            fenced=self._fenced,
            fence=self.config.fence is not None,
        )

    @property
    def expires_in(self) -> float | None:
        """Seconds until the holder's Lease expires by the server's clock, while standing by."""
        return self._expires_in

    def _server_now(self) -> datetime | None:
        return known_server_time(self._clock)

    async def attempt(self, *, may_take: bool = True) -> bool:
        """One round: create, renew or take over the Lease if allowed. Returns is_leader().

        `may_take` False: renew it if ours, never create or take it (a replica at its
        share of the shards, kube.sharding)."""
        started = self._monotonic()
        was_leader = self.is_leader()
        try:
            lease = await self.api.get(self.path)
        except NotFound:
            self.observed.set()
            if self._absent_since is None:
                self._absent_since = started
            if not may_take or started - self._absent_since < self.patience:
                return await self._update_leadership(None, was_leader)
            return await self._update_leadership(await self._create(started), was_leader)
        except ApiError as error:
            logger.warning("reading Lease %s failed: %s", self.config.name, error)
            return await self._update_leadership(None, was_leader)

        self.observed.set()
        self._absent_since = None
        record = LeaseRecord.from_body(lease, self.config.lease_duration)
        self._observation = observation = observe(self._observation, record, started)
        server_now = self._server_now()
        step, epoch = choose(
            observation,
            self.config.identity,
            epoch=self.epoch,
            now=started,
            server_now=server_now,
            patience=self.patience,
        )
        # A standby wakes at the expiry the server's clock predicts, not a poll later.
        seen_long_enough = started - observation.since >= record.duration
        standing_by = step is not Step.RENEW and not seen_long_enough
        left = seconds_left(record, server_now) if standing_by else None
        self._expires_in = None if left is None else left + self.patience
        if step is Step.TAKE and not may_take:
            step = Step.STAND_BY
        if step is Step.STAND_BY or epoch is None:
            self.epoch = None
            return await self._update_leadership(None, was_leader)
        if step is Step.TAKE:
            epoch = above_fence(epoch, await self._fence_epoch())
        written = await self._write(lease, started, epoch, take=step is Step.TAKE)
        return await self._update_leadership(written, was_leader)

    async def _fence_epoch(self) -> int | None:
        c = self.config
        if c.fence is None:
            return None
        return await fence_epoch(self.api, c.namespace, c.fence, key=self.shard.key)

    async def _count_alive(self, count: int) -> bool:
        """Whether any Lease of another shard count (the Fence's) is alive."""
        for index in range(count):
            name = shard_lease_name(self.shard.base_name, index, count)
            if await self._others.alive(f"{self.config.namespace}/{name}", members=False):
                return True
        return False

    async def _create(self, started: float) -> int | None:
        """Create the Lease and hold it. Its first epoch is above the Fence's: a Lease
        deleted by hand and created again must not start over at 0, below a fence that
        only moves up (no replica could ever lead again)."""
        epoch = above_fence(0, await self._fence_epoch())
        now = micro_time(self._clock.now())
        body = {
            "apiVersion": "coordination.k8s.io/v1",
            "kind": "Lease",
            "metadata": {"name": self.config.name, "namespace": self.config.namespace},
            "spec": {
                "holderIdentity": self.config.identity,
                "leaseDurationSeconds": int(self.config.lease_duration),
                "acquireTime": now,
                "renewTime": now,
                "leaseTransitions": epoch,
            },
        }
        try:
            await self.api.create(self.path.rsplit("/", 1)[0], body)
        except (AlreadyExists, Conflict):
            return None
        except ApiError as error:
            logger.warning("creating Lease %s failed: %s", self.config.name, error)
            return None
        self._valid_until = started + self.config.renew_deadline
        return epoch

    async def _write(
        self, lease: dict[str, Any], started: float, epoch: int, *, take: bool
    ) -> int | None:
        now = micro_time(self._clock.now())
        spec = dict(lease.get("spec") or {})
        spec.update(
            {
                "holderIdentity": self.config.identity,
                "leaseDurationSeconds": int(self.config.lease_duration),
                "renewTime": now,
            }
        )
        if take:
            spec.update({"acquireTime": now, "leaseTransitions": epoch})
        try:
            await self.api.replace(self.path, {**lease, "spec": spec})  # resourceVersion-fenced
        except Conflict:
            self.epoch = None  # someone else wrote the Lease first
            return None
        except ApiError as error:
            logger.warning("renewing Lease %s failed: %s", self.config.name, error)
            return self.epoch if self.is_leader() else None
        self._valid_until = started + self.config.renew_deadline
        return epoch

    async def _update_leadership(self, epoch: int | None, was_leader: bool) -> bool:
        """Take the epoch the Lease gave us (None: none), raise the Fence to it before
        anything is written under it, and say when leadership starts or stops."""
        self.holding = epoch is not None
        if epoch is not None:
            name = self.config.fence
            if name is not None and self._fenced != epoch:
                c = self.config
                if await raise_fence(
                    self.api,
                    c.namespace,
                    name,
                    c.identity,
                    epoch,
                    key=self.shard.key,
                    count=self.shard.count,
                    count_alive=self._count_alive,
                ):
                    self._fenced = epoch
                else:
                    epoch = None  # not leading until the fence is at our epoch
        if epoch is not None:
            self.epoch = epoch
        elif not self.is_leader():
            self.epoch = None
        leader = self.is_leader()
        if leader != was_leader:
            if leader:
                logger.info("became leader of Lease %s with epoch %s", self.config.name, self.epoch)
            else:
                logger.warning("stopped leading Lease %s", self.config.name)
            self.changed.set()
        self._follow_term()
        return leader

    def _follow_term(self) -> None:
        """Begin a term when an epoch is taken up, end it when it is let go; say so."""
        held = self.epoch is not None
        if held != self._in_term:
            self._in_term = held
            self.term += held
            self.changed.set()

    async def run(self, stop: asyncio.Event) -> None:
        """Attempt every retry period (or at once when the Lease is released) until
        `stop`; then release."""
        watcher = asyncio.create_task(self.watch_release())
        try:
            while not stop.is_set():
                self.released.clear()
                self._wake.clear()
                await self.attempt()
                pause = self.config.retry_period
                if not self.is_leader() and self._expires_in is not None:
                    pause = min(pause, max(0.05, self._expires_in + 0.05))  # wake at expiry
                await self._sleeper.wait(stop, self.released, self._wake, timeout=pause)
                await self.lapse()
        finally:
            watcher.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await watcher
            await self.release()

    def without_patience(self) -> None:
        """No more patience (the replica's lists are in): attempt at once, not at the
        next round."""
        self.patience = 0.0
        self._wake.set()

    async def lapse(self) -> None:
        """If the renew deadline passed unrenewed: stop leading, and say so."""
        if not self.is_leader() and self.epoch is not None:
            await self._update_leadership(None, True)

    async def watch_release(self) -> None:
        """Watch the Lease; set `released` when it is released or deleted while we stand by."""
        collection, name = self.path.rsplit("/", 1)
        while True:
            try:
                async for event in self.api.watch(
                    collection, fieldSelector=f"metadata.name={name}", timeoutSeconds="300"
                ):
                    spec = (event.get("object") or {}).get("spec") or {}
                    released = event.get("type") == "DELETED" or not spec.get("holderIdentity")
                    if released and not self.is_leader():
                        self.released.set()
            except ApiError as error:
                logger.debug("watching Lease %s: %s", self.config.name, error)
            await self._sleeper.sleep(self.config.retry_period)

    async def release(self) -> None:
        """Give the Lease up (empty holder) if this replica still holds it."""
        if not (self.is_leader() or self.holding):
            return
        self.holding = False
        self.epoch = None
        self._valid_until = float("-inf")
        self.changed.set()
        self._follow_term()
        try:
            lease = await self.api.get(self.path)
            spec = dict(lease.get("spec") or {})
            if spec.get("holderIdentity") != self.config.identity:
                return
            spec.update(
                {
                    "holderIdentity": "",
                    "leaseDurationSeconds": 1,
                    "renewTime": micro_time(self._clock.now()),
                }
            )
            await self.api.replace(self.path, {**lease, "spec": spec})
            logger.info("released Lease %s", self.config.name)
        except ApiError as error:
            logger.warning("releasing Lease %s failed: %s", self.config.name, error)


class Installations:
    """Whether another installation is alive, judged by its Lease as a standby judges it.

    An installation is named by its Lease ("namespace/name"). It is gone when its Lease is
    missing or released, or has been seen unchanged for its duration on this replica's
    monotonic clock (or is past its renewTime plus duration by the API server's clock).
    When the Lease cannot be read (RBAC, an error), the answer is "alive": never fight.
    """

    # One read of a Lease answers for every schedule that asks within this many seconds.
    REREAD = 2.0

    def __init__(self, api: Api, *, clock: Clock, monotonic: Monotonic = monotonic) -> None:
        self.api = api
        self._clock = clock
        self._monotonic = monotonic
        self._seen: dict[str, Observation] = {}
        self._answers: dict[str, tuple[float, bool]] = {}  # installation -> (read at, alive)

    async def alive(self, installation: str, *, members: bool = True) -> bool:
        """Whether the Lease "namespace/name" is alive; when it does not exist and
        `members`, whether the installation's replicas' membership Leases are."""
        now = self._monotonic()
        answer = self._answers.get(installation)
        if answer is not None and now - answer[0] < self.REREAD:
            return answer[1]
        alive = await self._read(installation, members)
        self._answers[installation] = (now, alive)
        return alive

    async def _read(self, installation: str, members: bool) -> bool:
        namespace, _, name = installation.partition("/")
        path = f"/apis/coordination.k8s.io/v1/namespaces/{namespace}/leases/{name}"
        try:
            lease = await self.api.get(path)
        except NotFound:
            self._seen.pop(installation, None)
            return members and await self._members_alive(installation)
        except ApiError as error:
            logger.warning("reading the Lease of installation %s: %s", installation, error)
            return True
        return self._judge(installation, LeaseRecord.from_body(lease, 15.0))

    def _judge(self, name: str, record: LeaseRecord) -> bool:
        if record.holder == "":
            return False
        now = self._monotonic()
        self._seen[name] = seen = observe(self._seen.get(name), record, now)
        return not expired(seen, now, known_server_time(self._clock))

    async def _members_alive(self, installation: str) -> bool:
        """A sharded installation has no Lease under its base name: it is alive while any
        of its replicas' membership Leases is (kube.sharding)."""
        namespace = installation.partition("/")[0]
        selector = f"{LABEL_MEMBER_OF}={installation_label(installation)}"
        try:
            listed = await self.api.get(
                f"/apis/coordination.k8s.io/v1/namespaces/{namespace}/leases",
                labelSelector=selector,
            )
        except NotFound:
            return False
        except ApiError as error:
            logger.warning("listing the members of installation %s: %s", installation, error)
            return True
        alive = False
        for lease in listed.get("items") or []:
            name = f"{namespace}/{lease['metadata']['name']}"
            alive = self._judge(name, LeaseRecord.from_body(lease, 15.0)) or alive
        return alive


def known_server_time(clock: Clock) -> datetime | None:
    """The API server's time, when this replica knows it to a second."""
    if not isinstance(clock, ServerClock):
        return None
    if clock.samples < 3 or clock.uncertainty > timedelta(seconds=1):
        return None
    return clock.now()


def micro_time(instant: datetime) -> str:
    """A Lease MicroTime: RFC 3339 with microseconds, in UTC."""
    return instant.strftime("%Y-%m-%dT%H:%M:%S.%fZ")
