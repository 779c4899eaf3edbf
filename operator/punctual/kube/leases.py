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
  checks `is_leader()` first, so a leader stopped by SIGSTOP wakes up as a follower.
* Taking the Lease increments `leaseTransitions`; that number is the leader's epoch,
  stamped on every Job it creates.
* Every write to the Lease carries its resourceVersion, so two candidates racing
  for it cannot both win.
* On shutdown the leader releases the Lease (empty holder), so a standby takes over
  at its next retry instead of waiting for expiry.

What it must never do: decide anything about schedules, or keep writing on a lease
it could not renew in time.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from punctual.clocks import Clock, ServerClock, monotonic
from punctual.core.times import parse_time
from punctual.kube.client import AlreadyExists, ApiError, Conflict, KubeClient, NotFound

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class LeaseConfig:
    namespace: str
    name: str = "punctual-leader"
    identity: str = "punctual"
    lease_duration: float = 15.0
    renew_deadline: float = 10.0
    retry_period: float = 2.0
    # A Fence (crds/fences.punctual.dev.yaml) beside the Lease holding {holder, epoch}:
    # the parameter of the API server's fencing policy. None: no fence.
    fence: str | None = "punctual-fence"

    def __post_init__(self) -> None:
        if not 0 < self.retry_period < self.renew_deadline < self.lease_duration:
            raise ValueError(
                "need 0 < retry period < renew deadline < lease duration, got "
                f"{self.retry_period} / {self.renew_deadline} / {self.lease_duration}"
            )


def _parse_micro_time(value: object) -> datetime | None:
    if not isinstance(value, str):
        return None
    try:
        return parse_time(value)
    except ValueError:
        return None


def micro_time(instant: datetime) -> str:
    """A Lease MicroTime: RFC 3339 with microseconds, in UTC."""
    return instant.strftime("%Y-%m-%dT%H:%M:%S.%fZ")


class LeaderElector:
    """Acquires, renews and releases one Lease; tells whether this replica may write now."""

    def __init__(
        self,
        api: KubeClient,
        config: LeaseConfig,
        *,
        wall: Clock,
        clock: Callable[[], float] = monotonic,
    ) -> None:
        self.api = api
        self.config = config
        self._wall = wall
        self._clock = clock
        self.epoch: int | None = None
        self._valid_until = float("-inf")
        self._observed: tuple[Any, ...] | None = None
        self._observed_at = float("-inf")
        self._expires_in: float | None = None  # seconds until the holder's Lease expires
        self._fenced: int | None = None  # the epoch the Fence was raised to
        self._poked = asyncio.Event()
        self.changed = asyncio.Event()  # set whenever leadership starts or stops

    @property
    def path(self) -> str:
        c = self.config
        return f"/apis/coordination.k8s.io/v1/namespaces/{c.namespace}/leases/{c.name}"

    def is_leader(self) -> bool:
        """True only while the last renewal is fresh enough that nobody else can hold the Lease."""
        if self.epoch is None or self._clock() >= self._valid_until:
            return False
        return self.config.fence is None or self._fenced == self.epoch

    def poke(self) -> None:
        """Try again now (e.g. the Lease was seen released)."""
        self._poked.set()

    async def attempt(self) -> bool:
        """One round: create, renew or take over the Lease if allowed. Returns is_leader()."""
        started = self._clock()
        was_leader = self.is_leader()
        try:
            lease = await self.api.get(self.path)
        except NotFound:
            return self._settle(await self._fence(await self._create(started)), was_leader)
        except ApiError as error:
            logger.warning("reading Lease %s failed: %s", self.config.name, error)
            return self._settle(None, was_leader)

        spec = lease.get("spec") or {}
        holder = spec.get("holderIdentity") or ""
        record = (holder, spec.get("renewTime"), spec.get("leaseTransitions"))
        if record != self._observed:
            self._observed, self._observed_at = record, started
        transitions = int(spec.get("leaseTransitions") or 0)
        duration = float(spec.get("leaseDurationSeconds") or self.config.lease_duration)

        if holder == self.config.identity:
            epoch = transitions if self.epoch is None else self.epoch
            renewed = await self._write(lease, started, epoch, take=False)
            return self._settle(await self._fence(renewed), was_leader)
        expired = self._expired(spec, started, duration)
        if holder == "" or expired:
            taken = await self._write(lease, started, transitions + 1, take=True)
            return self._settle(await self._fence(taken), was_leader)
        self.epoch = None
        return self._settle(None, was_leader)

    def _expired(self, spec: dict[str, Any], started: float, duration: float) -> bool:
        """Unrenewed for `duration`: seen unchanged that long, or by the API server's clock.

        The second test lets a standby take over as soon as the Lease expires instead
        of up to one poll later: the holder writes renewTime on its estimate of the API
        server's clock, and this replica reads it on its own estimate of the same clock.
        It is used only when that estimate is good to a second.
        """
        self._expires_in = None
        if started - self._observed_at >= duration:
            return True
        renewed = _parse_micro_time(spec.get("renewTime"))
        if renewed is None or not isinstance(self._wall, ServerClock):
            return False
        if self._wall.samples < 3 or self._wall.uncertainty > timedelta(seconds=1):
            return False
        left = (renewed + timedelta(seconds=duration) - self._wall.now()).total_seconds()
        self._expires_in = left
        return left <= 0

    async def _create(self, started: float) -> int | None:
        now = micro_time(self._wall.now())
        body = {
            "apiVersion": "coordination.k8s.io/v1",
            "kind": "Lease",
            "metadata": {"name": self.config.name, "namespace": self.config.namespace},
            "spec": {
                "holderIdentity": self.config.identity,
                "leaseDurationSeconds": int(self.config.lease_duration),
                "acquireTime": now,
                "renewTime": now,
                "leaseTransitions": 0,
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
        return 0

    async def _write(
        self, lease: dict[str, Any], started: float, epoch: int, *, take: bool
    ) -> int | None:
        now = micro_time(self._wall.now())
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

    async def _fence(self, epoch: int | None) -> int | None:
        """Raise the Fence to `epoch` before this replica writes anything.

        The fence only moves up, and every write of it carries the resourceVersion it
        read: a leader that lost its Lease can neither lower it nor pass it. Until it is
        raised, `is_leader()` stays False, so a replica without the permission to write
        it never fires (and says why).
        """
        name = self.config.fence
        if epoch is None or name is None or self._fenced == epoch:
            return epoch
        path = f"/apis/punctual.dev/v1/namespaces/{self.config.namespace}/fences"
        spec = {"holder": self.config.identity, "epoch": epoch}
        try:
            try:
                current = await self.api.get(f"{path}/{name}")
            except NotFound:
                await self.api.create(
                    path,
                    {
                        "apiVersion": "punctual.dev/v1",
                        "kind": "Fence",
                        "metadata": {"name": name, "namespace": self.config.namespace},
                        "spec": spec,
                    },
                )
            else:
                raised = int((current.get("spec") or {}).get("epoch", -1))
                if raised > epoch:
                    logger.warning("fence %s is at epoch %d, above ours (%d)", name, raised, epoch)
                    return None
                await self.api.replace(f"{path}/{name}", {**current, "spec": spec})
        except (AlreadyExists, Conflict):
            return epoch  # someone else moved it: try again next round, not leading yet
        except ApiError as error:
            logger.error("cannot raise Fence %s/%s: %s", self.config.namespace, name, error)
            return epoch
        self._fenced = epoch
        logger.info("raised fence %s to epoch %d", name, epoch)
        return epoch

    def _settle(self, epoch: int | None, was_leader: bool) -> bool:
        if epoch is not None:
            if self.epoch != epoch:
                logger.info("became leader of Lease %s with epoch %d", self.config.name, epoch)
            self.epoch = epoch
        elif not self.is_leader():
            self.epoch = None
        leader = self.is_leader()
        if leader != was_leader:
            if not leader:
                logger.warning("stopped leading Lease %s", self.config.name)
            self.changed.set()
        return leader

    async def run(self, stop: asyncio.Event) -> None:
        """Attempt every retry period (or when poked) until `stop`; then release."""
        try:
            while not stop.is_set():
                await self.attempt()
                self._poked.clear()
                pause = self.config.retry_period
                if not self.is_leader() and self._expires_in is not None:
                    pause = min(pause, max(0.05, self._expires_in + 0.05))  # wake at expiry
                waiters = [
                    asyncio.ensure_future(stop.wait()),
                    asyncio.ensure_future(self._poked.wait()),
                ]
                await asyncio.wait(waiters, timeout=pause, return_when=asyncio.FIRST_COMPLETED)
                for waiter in waiters:
                    waiter.cancel()
                if not self.is_leader() and self.epoch is not None:
                    self._settle(None, True)  # the renew deadline passed without a renewal
        finally:
            await self.release()

    async def release(self) -> None:
        """Give the Lease up (empty holder) if this replica still holds it."""
        if not self.is_leader():
            return
        self.epoch = None
        self._valid_until = float("-inf")
        self.changed.set()
        try:
            lease = await self.api.get(self.path)
            spec = dict(lease.get("spec") or {})
            if spec.get("holderIdentity") != self.config.identity:
                return
            spec.update(
                {
                    "holderIdentity": "",
                    "leaseDurationSeconds": 1,
                    "renewTime": micro_time(self._wall.now()),
                }
            )
            await self.api.replace(self.path, {**lease, "spec": spec})
            logger.info("released Lease %s", self.config.name)
        except ApiError as error:
            logger.warning("releasing Lease %s failed: %s", self.config.name, error)
