"""Shards: schedules split by a stable hash of their uid, each shard led through its own Lease.

Why it exists: one leader did all the work, and one process's CPU bounded a herd. With
`--shards N` (N > 1) the schedules are split into N shards by a stable hash of their
uid; each shard has its own Lease (`<lease>-<i>-of-<N>`), hence its own epoch, and its
own entry in the one Fence (`spec.shards["<i>-of-<N>"]`, see kube.fencing). The live
replicas share the shards evenly: each renews a small membership Lease
(`<lease>-member-<hash of its identity>`), they all rank the live members the same way
(by identity), and a replica takes a free shard only while it holds fewer than its fair
share (N // R, one more for the first N % R ranks): two replicas split 16 shards 8/8,
three split 8 shards 3/3/2, one alone takes all. A replica that holds more than its
share (another one joined) releases the excess once the membership it sees has been
stable for a Lease duration (a flapping member moves nothing); released shards are
taken at once by the replica short of them (it watches their Leases). A replica that
dies loses only its shards: the others take each one when its Lease expires, while
every other shard keeps firing.

With N = 1 (the default) nothing of this runs: one LeaderElector on the Lease
`<lease>` and the Fence's `spec.holder/epoch`, exactly as before shards existed.

The decisions (which shard a uid is in, who is live, what a replica's share is, what it
takes and releases) are pure functions at the top of this module, table-tested on a
fake clock in tests/unit/test_sharding.py; `ShardedElection` below only reads and
writes Leases and keeps their state, and waits through its `Sleeper`, so that its rounds
run on simulated time in tests/unit/test_sharded_election.py.

What it must never do: let a replica take a shard above its fair share, let two shard
counts lead at once (the Fence records one count, see kube.fencing), or judge a member
dead on anything but the Lease rules of kube.leases.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime

from punctual.clocks import Clock, EventLoopSleeper, Monotonic, Sleeper, monotonic
from punctual.core.jobs import installation_label
from punctual.core.keys import LABEL_MEMBER_OF
from punctual.kube.client import Api, ApiError, NotFound
from punctual.kube.leases import (
    LeaderElector,
    LeaseConfig,
    LeaseRecord,
    Observation,
    Shard,
    expired,
    known_server_time,
    micro_time,
    observe,
    shard_lease_name,
)

logger = logging.getLogger(__name__)

# -- the decisions, pure -----------------------------------------------------------------


def shard_of(uid: str, count: int) -> int:
    """The shard of a schedule: its uid's sha256, as an integer, modulo the count.

    Stable across processes, versions and machines (Python's hash() is salted per
    process); the uid never changes for the life of a schedule.
    """
    if count == 1:
        return 0
    digest = hashlib.sha256(uid.encode()).digest()
    return int.from_bytes(digest[:8], "big") % count


def shard_key(index: int, count: int) -> str | None:
    """The shard's name on its Jobs (label punctual.dev/shard) and in the Fence's map:
    "<index>-of-<count>"; None with one shard (Jobs and the Fence as before shards)."""
    return None if count == 1 else f"{index}-of-{count}"


def member_lease_name(base: str, identity: str) -> str:
    """A replica's membership Lease: a valid name whatever characters its identity has."""
    return f"{base}-member-{hashlib.sha256(identity.encode()).hexdigest()[:12]}"


def live_members(
    seen: Mapping[str, Observation], *, me: str, now: float, server_now: datetime | None
) -> list[str]:
    """The live replicas, sorted (the rank order every replica agrees on): this one,
    and every member whose membership Lease is held and not expired by the Lease rules
    (seen unchanged for its duration, or past renewTime + duration on the server's clock)."""
    live = {me}
    for observation in seen.values():
        holder = observation.record.holder
        if holder and not expired(observation, now, server_now):
            live.add(holder)
    return sorted(live)


def fair_share(me: str, members: Sequence[str], count: int) -> int:
    """How many of `count` shards `me` may hold among the live `members` (sorted):
    count // R each, and one more for the first count % R of them."""
    ranked = sorted(set(members) | {me})
    base, extra = divmod(count, len(ranked))
    return base + (1 if ranked.index(me) < extra else 0)


@dataclass(frozen=True, slots=True)
class Membership:
    """The live members a replica sees, and since when (its monotonic seconds) unchanged."""

    members: tuple[str, ...]
    since: float


def track(previous: Membership | None, members: Sequence[str], now: float) -> Membership:
    """The membership after seeing `members` at `now`: its clock restarts on any change."""
    current = tuple(members)
    if previous is not None and previous.members == current:
        return previous
    return Membership(current, now)


@dataclass(frozen=True, slots=True)
class ShardMoves:
    """What a replica does with the shards this round."""

    share: int
    may_take: int  # how many free shards it may take (0 when at or above its share)
    release: tuple[int, ...]  # shards it gives up (it holds more than its share)


def shard_moves(
    *,
    me: str,
    membership: Membership,
    held: Sequence[int],
    count: int,
    now: float,
    stable_for: float,
) -> ShardMoves:
    """The round's plan. Taking is limited by the share at once; releasing waits until the
    membership has been unchanged for `stable_for` seconds (a Lease duration), so that a member
    that flaps, or a view that differs for a moment between replicas, moves no shard. The
    excess released is the highest-numbered shards held (any choice is correct; this one
    is stable)."""
    share = fair_share(me, membership.members, count)
    may_take = max(0, share - len(held))
    release: tuple[int, ...] = ()
    if len(held) > share and now - membership.since >= stable_for:
        release = tuple(sorted(held)[share:])
    return ShardMoves(share=share, may_take=may_take, release=release)


def preference(me: str, members: Sequence[str], count: int) -> list[int]:
    """The order in which `me` tries free shards: starting at its rank's slice of the
    ring, so that replicas starting together do not all race for shard 0."""
    ranked = sorted(set(members) | {me})
    start = ranked.index(me) * count // len(ranked)
    return [(start + i) % count for i in range(count)]


# -- the loop: reads and writes ------------------------------------------------------------


class Members:
    """This replica's membership Lease (renewed every round) and the others' (listed)."""

    def __init__(
        self, api: Api, config: LeaseConfig, *, clock: Clock, monotonic: Monotonic
    ) -> None:
        self.api = api
        self.config = config
        self._clock = clock
        self._monotonic = monotonic
        self._seen: dict[str, Observation] = {}
        self.label = installation_label(f"{config.namespace}/{config.name}")

    @property
    def collection(self) -> str:
        return f"/apis/coordination.k8s.io/v1/namespaces/{self.config.namespace}/leases"

    @property
    def path(self) -> str:
        return f"{self.collection}/{member_lease_name(self.config.name, self.config.identity)}"

    async def renew(self) -> None:
        """Write this replica's membership Lease (create it the first time)."""
        spec = {
            "holderIdentity": self.config.identity,
            "leaseDurationSeconds": int(self.config.lease_duration),
            "renewTime": micro_time(self._clock.now()),
        }
        try:
            try:
                current = await self.api.get(self.path)
            except NotFound:
                name = self.path.rsplit("/", 1)[1]
                metadata = {
                    "name": name,
                    "namespace": self.config.namespace,
                    "labels": {LABEL_MEMBER_OF: self.label},
                }
                body = {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease"}
                await self.api.create(self.collection, {**body, "metadata": metadata, "spec": spec})
                return
            await self.api.replace(self.path, {**current, "spec": {**current["spec"], **spec}})
        except ApiError as error:
            logger.warning("renewing membership Lease: %s", error)

    async def live(self) -> list[str]:
        """The live members, this one included, sorted; on a failed list, the last view."""
        now = self._monotonic()
        try:
            listed = await self.api.get(
                self.collection, labelSelector=f"{LABEL_MEMBER_OF}={self.label}"
            )
        except ApiError as error:
            logger.warning("listing membership Leases: %s", error)
        else:
            seen: dict[str, Observation] = {}
            for lease in listed.get("items") or []:
                name = lease["metadata"]["name"]
                record = LeaseRecord.from_body(lease, self.config.lease_duration)
                seen[name] = observe(self._seen.get(name), record, now)
            self._seen = seen
        return live_members(
            self._seen,
            me=self.config.identity,
            now=now,
            server_now=known_server_time(self._clock),
        )

    async def leave(self) -> None:
        """Delete this replica's membership Lease: the others count it gone at once."""
        with contextlib.suppress(ApiError):
            await self.api.delete(self.path)


class ShardedElection:
    """Leads a fair share of the shards; says which shard's Lease a schedule's writes need.

    With one shard it is the one LeaderElector, run as before shards existed.
    """

    def __init__(
        self,
        api: Api,
        config: LeaseConfig,
        count: int,
        *,
        clock: Clock,
        monotonic: Monotonic = monotonic,
        sleeper: Sleeper | None = None,
    ) -> None:
        if count < 1:
            raise ValueError(f"need 1 shard or more, got {count}")
        self.count = count
        self.config = config
        self._monotonic = monotonic
        self._sleeper = sleeper or EventLoopSleeper()
        self.electors = [
            LeaderElector(
                api,
                replace(config, name=shard_lease_name(config.name, i, count)),
                clock=clock,
                shard=Shard(i, count, config.name),
                monotonic=monotonic,
                sleeper=self._sleeper,
            )
            for i in range(count)
        ]
        self.members = Members(api, config, clock=clock, monotonic=monotonic)
        self.membership: Membership | None = None
        self.changed = asyncio.Event()  # set whenever any shard's leadership starts or stops

    @property
    def identity(self) -> str:
        return self.config.identity

    def elector_for(self, uid: str) -> LeaderElector:
        return self.electors[shard_of(uid, self.count)]

    def led(self) -> list[int]:
        """The shards this replica may write for now."""
        return [i for i, elector in enumerate(self.electors) if elector.is_leader()]

    def terms(self) -> dict[int, int]:
        """The shards whose epoch this replica holds, each with its term: led, or lapsed
        between two renewals (the next renewal restores it or announces the loss). A
        term that changed is a leadership that was lost and taken up again."""
        return {i: e.term for i, e in enumerate(self.electors) if e.epoch is not None}

    def is_leader(self) -> bool:
        """Whether it leads any shard."""
        return any(elector.is_leader() for elector in self.electors)

    def observed(self) -> bool:
        """Whether every shard's Lease has been read once: the replica knows what it may take."""
        return all(elector.observed.is_set() for elector in self.electors)

    async def run(self, stop: asyncio.Event) -> None:
        """Every retry period (or at once when a shard's Lease is released), renew the
        membership and every shard held, release the excess, take free shards up to the
        share; on `stop`, release every shard and leave."""
        relay = asyncio.create_task(self._relay_changes(stop))
        if self.count == 1:
            try:
                await self.electors[0].run(stop)
            finally:
                relay.cancel()
            return
        watchers = [asyncio.create_task(e.watch_release()) for e in self.electors]
        try:
            while not stop.is_set():
                for elector in self.electors:
                    elector.released.clear()
                await self.round()
                released = (e.released for e in self.electors)
                await self._sleeper.wait(stop, *released, timeout=self._pause())
                for elector in self.electors:
                    await elector.lapse()  # a renew deadline passed unrenewed: say so
        finally:
            for task in [*watchers, relay]:
                task.cancel()
            await asyncio.gather(*watchers, relay, return_exceptions=True)
            await asyncio.gather(*(e.release() for e in self.electors))
            await self.members.leave()

    def _pause(self) -> float:
        """Until the next round: the retry period, or sooner when a Lease we wait for
        expires by the server's clock."""
        pause = self.config.retry_period
        for elector in self.electors:
            expires_in = elector.expires_in
            if not elector.is_leader() and expires_in is not None:
                pause = min(pause, max(0.05, expires_in + 0.05))
        return pause

    async def round(self) -> ShardMoves:
        """One round over every shard; returns its plan (for tests and logs)."""
        await self.members.renew()
        members = await self.members.live()
        now = self._monotonic()
        self.membership = track(self.membership, members, now)
        # Held: written by us, led or not yet (waiting for the Fence during a count change).
        held = [i for i, e in enumerate(self.electors) if e.holding]
        plan = shard_moves(
            me=self.identity,
            membership=self.membership,
            held=held,
            count=self.count,
            now=now,
            stable_for=self.config.lease_duration,
        )
        for index in plan.release:
            logger.info("releasing shard %s: %d live replicas", index, len(members))
            await self.electors[index].release()
        # Renew every shard held at once: one slow request must not let the others pass
        # their renew deadline. Then the others, one by one, taking up to the share.
        order = [i for i in preference(self.identity, members, self.count) if i not in plan.release]
        renewing = [i for i in order if self.electors[i].holding]
        await asyncio.gather(*(self.electors[i].attempt() for i in renewing))
        taken = 0
        for index in order:
            elector = self.electors[index]
            if index in renewing:
                continue
            await elector.attempt(may_take=taken < plan.may_take)
            if elector.holding:
                taken += 1
        return plan

    async def _relay_changes(self, stop: asyncio.Event) -> None:
        """Set `changed` whenever any shard's elector says its leadership changed."""
        while not stop.is_set():
            waiters = [e.changed.wait() for e in self.electors]
            tasks = [asyncio.ensure_future(w) for w in waiters]
            try:
                await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
            finally:
                for task in tasks:
                    task.cancel()
            for elector in self.electors:
                elector.changed.clear()
            self.changed.set()
