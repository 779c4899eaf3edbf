"""The ShardedElection loop on simulated time, against the fake Lease server.

tests/unit/test_sharding.py tables the decisions (shares, what a round takes and
releases); this runs the rounds that act on them: membership Leases renewed and
listed, shard Leases taken, released and watched. Replicas share one `FakeTime`
(tests/unit/faketime.py) as wall clock, monotonic clock and Sleeper, so "the joining
replica got its half at 22 s, and no shard was ever led twice" is asserted at every
instant something happened, in no real time. The same against the real API server:
tests/e2e/test_shards.py.

Timing (Options' defaults): Lease duration 15 s (also how long the membership must be
stable before a replica releases its excess), renew deadline 10 s, retry period 2 s.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from punctual.kube.sharding import ShardedElection
from tests.unit.fakeleases import (
    COLLECTION,
    DEADLINE,
    LeaseServer,
    lease_config,
)
from tests.unit.faketime import FakeTime

SHARDS = 4


def election(server: LeaseServer, identity: str) -> ShardedElection:
    config = lease_config(identity)
    time = server.time
    return ShardedElection(
        server.client(identity), config, SHARDS, clock=time, monotonic=time.monotonic, sleeper=time
    )


def shard_lease(index: int) -> str:
    return f"{COLLECTION}/punctual-leader-{index}-of-{SHARDS}"


def never_twice(*replicas: ShardedElection) -> None:
    led = [shard for replica in replicas for shard in replica.led()]
    assert len(led) == len(set(led)), f"a shard led twice: {sorted(led)}"


async def step_until(
    time: FakeTime, done: Callable[[], bool], check: Callable[[], None], *, within: float
) -> None:
    """Move time from one instant where something happens to the next until `done`,
    calling `check` at each of them."""
    limit = time.seconds + within
    check()
    while not done():
        await time.step()
        assert time.seconds <= limit, f"not within {within} simulated seconds"
        check()


async def test_a_joining_replica_gets_its_half_once_the_view_is_stable() -> None:
    """'a' alone takes all 4 shards at once. 'b' joins at 5 s: 'a' first counts it at
    its round at 6 s, and releases its excess (shards 2 and 3) at its first round 15 s
    later, at 22 s; 'b', watching them, takes both at that instant. No shard is ever led
    by both."""
    time = FakeTime()
    server = LeaseServer(time)
    a, b = election(server, "a"), election(server, "b")
    stop = asyncio.Event()
    run_a = asyncio.create_task(a.run(stop))
    await time.run_until_idle()
    assert a.led() == [0, 1, 2, 3] and a.observed()
    await time.advance(5)
    run_b = asyncio.create_task(b.run(stop))
    await time.run_until_idle()
    assert b.led() == [] and b.observed()  # every shard held and renewed: b follows

    def before_the_split() -> None:
        never_twice(a, b)
        if time.seconds < 22:
            assert a.led() == [0, 1, 2, 3] and b.led() == []

    await step_until(time, lambda: b.led() == [2, 3], before_the_split, within=30)
    assert time.seconds == 22
    assert a.led() == [0, 1]
    await step_until(time, lambda: time.seconds >= 82, lambda: never_twice(a, b), within=60)
    assert a.led() == [0, 1] and b.led() == [2, 3]  # and it stays so
    # Shards 0 and 1 kept their epoch; 2 and 3 moved once.
    assert [server.spec(shard_lease(i))["leaseTransitions"] for i in range(4)] == [0, 0, 1, 1]

    stop.set()
    await time.until(lambda: run_a.done() and run_b.done(), within=60)
    run_a.result()
    run_b.result()
    # Both left: every shard released, and the membership Leases deleted.
    assert [server.spec(shard_lease(i))["holderIdentity"] for i in range(4)] == [""] * 4
    assert [path for path in server.leases if "-member-" in path] == []


async def test_a_replica_cut_off_loses_only_its_shards_and_the_other_takes_them() -> None:
    """Split 2/2 from 22 s, 'b' is cut off from the API server at 30 s. It stops leading
    its shards at its renew deadline; 'a' keeps leading its own throughout, counts 'b'
    gone once its membership Lease has been unchanged for 15 s, and takes shards 2 and 3
    as their Leases lapse. No shard is ever led by both."""
    time = FakeTime()
    server = LeaseServer(time)
    a, b = election(server, "a"), election(server, "b")
    stop = asyncio.Event()
    runs = [asyncio.create_task(a.run(stop))]
    await time.advance(5)
    runs.append(asyncio.create_task(b.run(stop)))
    await time.until(lambda: b.led() == [2, 3], within=30)
    await time.advance(30 - time.seconds)
    server.cut.add("b")
    b_stopped: list[float] = []

    def a_keeps_its_own() -> None:
        never_twice(a, b)
        assert {0, 1} <= set(a.led())
        if not b.led() and not b_stopped:
            b_stopped.append(time.seconds)

    await step_until(time, lambda: a.led() == [0, 1, 2, 3], a_keeps_its_own, within=60)
    assert b_stopped == [30 + DEADLINE]  # b's last renewal round began at 30 s
    # a's rounds fall on even seconds; the first at least 15 s after it saw b's last
    # renewals (at 30 s) counts b gone and finds its shards lapsed: 46 s.
    assert time.seconds == 46
    stop.set()
    await time.until(lambda: all(run.done() for run in runs), within=60)
