"""The LeaderElector's loop on simulated time, against a fake API server of Leases.

tests/unit/test_leases.py tables the decisions; this runs the loop that makes them:
its rounds every retry period, its writes and their resourceVersions, its watch, its
renew deadline and its release. Each replica is a `LeaderElector` whose wall clock,
monotonic clock and waits are one `FakeTime` (tests/unit/faketime.py), so "the standby
took the Lease 16 s after it first saw it, and not a microsecond before" is asserted in
no real time. The fake server keeps Leases with resourceVersions (a stale write is a
Conflict), sends watch events, and can be cut off from one replica
(tests/unit/fakeleases.py). The same rules against the real API server:
tests/e2e/test_leading.py.

Timing (Options' defaults): lease duration 15 s, renew deadline 10 s, retry period 2 s.
No Fence and no ServerClock here: expiry is judged on the monotonic clock alone.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from datetime import datetime, timedelta

from punctual.kube.leases import LeaderElector, micro_time
from tests.unit.fakeleases import (
    DEADLINE,
    RETRY,
    LeaseServer,
    Write,
    lease_config,
)
from tests.unit.faketime import T0, FakeTime


def elector(server: LeaseServer, identity: str) -> LeaderElector:
    config = lease_config(identity)
    time = server.time
    return LeaderElector(
        server.client(identity), config, clock=time, monotonic=time.monotonic, sleeper=time
    )


class Running:
    """A replica's `run` task, and the instants (simulated seconds) at which it said its
    leadership changed, with what it then was."""

    def __init__(self, replica: LeaderElector, time: FakeTime) -> None:
        self.replica = replica
        self.time = time
        self.stop = asyncio.Event()
        self.changes: list[tuple[float, bool]] = []
        self.task = asyncio.create_task(replica.run(self.stop))
        self._listener = asyncio.create_task(self._listen())

    async def _listen(self) -> None:
        while True:
            await self.replica.changed.wait()
            self.replica.changed.clear()
            self.changes.append((self.time.seconds, self.replica.is_leader()))

    async def halt(self) -> None:
        """Stop it, and let (simulated) time pass until it has (its release may take time)."""
        self.stop.set()
        await self.time.until(self.task.done, within=60)
        self._listener.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self._listener
        self.task.result()


@contextlib.asynccontextmanager
async def running(time: FakeTime, *replicas: LeaderElector) -> AsyncIterator[list[Running]]:
    runs = [Running(replica, time) for replica in replicas]
    await time.run_until_idle()
    try:
        yield runs
    finally:
        for run in runs:
            if not run.task.done():
                await run.halt()


def at(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


TICK = timedelta(microseconds=1)


# -- one replica ---------------------------------------------------------------------------


async def test_an_absent_lease_is_created_and_led_at_once_with_epoch_0() -> None:
    time = FakeTime()
    server = LeaseServer(time)
    a = elector(server, "a")
    async with running(time, a) as [run]:
        assert a.is_leader() and a.holding and a.epoch == 0
        assert a.observed.is_set()
        assert run.changes == [(0.0, True)]
    assert server.writes_by("a")[0] == Write(0.0, "a", "create", "a")
    assert server.spec()["leaseTransitions"] == 0


async def test_the_leader_renews_every_retry_period_and_keeps_its_epoch() -> None:
    time = FakeTime()
    server = LeaseServer(time)
    a = elector(server, "a")
    async with running(time, a) as [run]:
        await time.advance(60)
        assert a.is_leader() and a.epoch == 0
        assert server.spec()["renewTime"] == micro_time(at(60))
        assert server.spec()["leaseTransitions"] == 0  # renewals are no transitions
        assert run.changes == [(0.0, True)]  # it never stopped leading
    writes = server.writes_by("a")
    assert [w.seconds for w in writes[:31]] == [2.0 * i for i in range(31)]
    assert [w.verb for w in writes[:31]] == ["create"] + ["replace"] * 30


async def test_a_lease_another_replica_renews_is_followed_and_never_written() -> None:
    time = FakeTime()
    server = LeaseServer(time)
    server.hold("other", renewed=T0)
    a = elector(server, "a")
    async with running(time, a) as [run]:
        for _ in range(30):  # the holder renews every 2 s, for a minute
            await time.advance(2)
            server.hold("other", renewed=time.now())
        assert not a.is_leader() and a.epoch is None and not a.holding
        assert a.observed.is_set()
        assert a.expires_in is None  # the server's clock is not known: no prediction
    assert server.writes_by("a") == []  # not even on stopping: it holds nothing to release
    assert run.changes == []


async def test_a_patient_replica_creates_an_absent_lease_only_after_its_patience() -> None:
    """A replica whose lists are not in yet (runtime.process) waits 4 s on an absent
    Lease: its rounds at 0, 2 and 4 s; it creates the Lease at the third."""
    time = FakeTime()
    server = LeaseServer(time)
    a = elector(server, "a")
    a.patience = 4.0
    async with running(time, a) as [run]:
        assert not a.is_leader() and a.observed.is_set()
        await time.advance_to(at(4) - TICK)
        assert server.writes_by("a") == []
        await time.advance_to(at(4))
        assert a.is_leader() and run.changes == [(4.0, True)]


async def test_a_patient_replica_whose_lists_come_in_attempts_at_once() -> None:
    time = FakeTime()
    server = LeaseServer(time)
    a = elector(server, "a")
    a.patience = 60.0
    async with running(time, a) as [run]:
        await time.advance(2.5)  # rounds at 0 and 2 s: patient
        assert not a.is_leader()
        a.without_patience()
        await time.run_until_idle()
        assert a.is_leader() and run.changes == [(2.5, True)]  # not at the round at 4 s


async def test_a_synced_standby_takes_a_released_lease_before_a_patient_replica() -> None:
    """The leader releases; the standby whose lists are in takes the Lease through its
    watch at once; the patient one (lists not in) never writes it."""
    time = FakeTime()
    server = LeaseServer(time)
    a, b, c = elector(server, "a"), elector(server, "b"), elector(server, "c")
    c.patience = 4.0
    async with running(time, a, b, c) as [run_a, _, run_c]:
        assert a.is_leader()
        await time.advance(5.3)
        await run_a.halt()
        await time.advance(30)
        assert b.is_leader() and not c.is_leader()
        assert run_c.changes == []
    assert server.writes_by("c") == []


# -- taking over -------------------------------------------------------------------------


async def test_a_lease_left_unrenewed_is_taken_once_seen_unchanged_for_its_duration() -> None:
    """Expiry is judged on the observer's monotonic clock: the Lease's renewTime says an
    hour ago (by the holder's wall clock), yet the standby waits until it has itself
    seen the record unchanged for 15 s; its rounds are 2 s apart, so it takes it at 16 s."""
    time = FakeTime()
    server = LeaseServer(time)
    server.hold("other", renewed=T0 - timedelta(hours=1), transitions=4)
    a = elector(server, "a")
    async with running(time, a) as [run]:
        await time.advance_to(at(16) - TICK)
        assert not a.is_leader()
        assert server.spec()["holderIdentity"] == "other"
        await time.advance_to(at(16))
        assert a.is_leader() and a.epoch == 5  # leaseTransitions + 1
        assert run.changes == [(16.0, True)]
        spec = server.spec()
        assert (spec["holderIdentity"], spec["leaseTransitions"]) == ("a", 5)
        assert spec["acquireTime"] == spec["renewTime"] == micro_time(at(16))


async def test_the_holders_lease_duration_counts_and_the_lease_is_taken_as_it_lapses() -> None:
    """The Lease says 20 s (its holder's setting, not this replica's 15 s): a round falls
    on the 20th second unchanged, and takes it then."""
    time = FakeTime()
    server = LeaseServer(time)
    server.hold("other", renewed=T0, duration=20)
    a = elector(server, "a")
    async with running(time, a):
        await time.advance_to(at(20) - TICK)
        assert not a.is_leader()
        await time.advance_to(at(20))
        assert a.is_leader()


async def test_the_standbys_clock_restarts_when_the_holder_renews() -> None:
    time = FakeTime()
    server = LeaseServer(time)
    server.hold("other", renewed=T0)
    a = elector(server, "a")
    async with running(time, a) as [run]:
        await time.advance(9)
        server.hold("other", renewed=time.now())  # a last renewal at 9 s, seen at 10 s
        await time.until(a.is_leader)
        assert time.seconds == 26  # the first round at least 15 s after 10 s
        assert run.changes == [(26.0, True)]


async def test_a_released_lease_is_taken_at_once_through_the_watch() -> None:
    """Not at the standby's next round: its watch sees the release."""
    time = FakeTime()
    server = LeaseServer(time)
    a, b = elector(server, "a"), elector(server, "b")
    async with running(time, a, b) as [run_a, run_b]:
        assert a.is_leader() and not b.is_leader()
        await time.advance(5.3)  # between b's rounds at 4 s and 6 s
        await run_a.halt()  # a stops and releases
        assert b.is_leader() and b.epoch == 1
        assert time.seconds == 5.3  # no simulated time passed
        assert run_b.changes == [(5.3, True)]
        assert [w for w in server.writes if w.seconds == 5.3] == [
            Write(5.3, "a", "replace", ""),  # the release
            Write(5.3, "b", "replace", "b"),  # the take, on the watch event
        ]


async def test_of_two_standbys_racing_for_a_released_lease_one_wins() -> None:
    """Both wake on the release and write; the resourceVersion lets only the first in."""
    time = FakeTime()
    server = LeaseServer(time)
    a, b, c = elector(server, "a"), elector(server, "b"), elector(server, "c")
    async with running(time, a, b, c) as [run_a, _, _]:
        await time.advance(3)
        await run_a.halt()
        assert [b.is_leader(), c.is_leader()].count(True) == 1
        await time.advance(60)
        assert [b.is_leader(), c.is_leader()].count(True) == 1
        assert server.spec()["leaseTransitions"] == 1


# -- the renew deadline ----------------------------------------------------------------------


async def test_a_leader_whose_renewals_fail_stops_leading_before_anyone_can_take_over() -> None:
    """Cut off from the API server after its write at 0 s, the leader counts itself leader
    until the renew deadline (10 s after it sent that write) and no longer; the standby,
    which saw that write at 0 s, takes the Lease at its first round 15 s later (16 s).
    Between 10 s and 16 s nobody leads: never two at once."""
    time = FakeTime()
    server = LeaseServer(time)
    a, b = elector(server, "a"), elector(server, "b")
    async with running(time, a, b) as [run_a, run_b]:
        assert a.is_leader() and not b.is_leader()
        await time.advance(1)
        server.cut.add("a")
        await time.advance_to(at(DEADLINE) - TICK)
        assert a.is_leader() and not b.is_leader()
        await time.advance_to(at(DEADLINE))
        assert not a.is_leader() and not b.is_leader()
        assert run_a.changes == [(0.0, True), (10.0, False)]  # it said so at once
        await time.advance_to(at(16) - TICK)
        assert not a.is_leader() and not b.is_leader()
        await time.advance_to(at(16))
        assert b.is_leader() and b.epoch == 1
        assert run_b.changes == [(16.0, True)]
        # Back in touch, the old leader finds the Lease moved on, and follows.
        server.cut.discard("a")
        await time.advance(10)
        assert not a.is_leader() and a.epoch is None
        assert b.is_leader()
        # Its one write was the create: cut off, it wrote nothing, and back it follows.
        assert server.writes_by("a") == [Write(0.0, "a", "create", "a")]


async def test_the_renew_deadline_counts_from_before_the_write_not_from_its_answer() -> None:
    """Requests take 1 s here: the round begins at 0 s, its read is answered at 1 s and
    its create at 2 s; the leader counts its 10 s from 0 s, when its round began (no
    later than the write was sent, which a standby may have seen at once)."""
    time = FakeTime()
    server = LeaseServer(time)
    server.latency = 1.0
    a = elector(server, "a")
    async with running(time, a):
        await time.advance_to(at(2) - TICK)
        assert not a.is_leader()  # asked, not answered
        await time.advance_to(at(2))
        assert a.is_leader() and a.epoch == 0
        server.cut.add("a")  # every renewal from now on fails
        await time.advance_to(at(DEADLINE) - TICK)
        assert a.is_leader()
        await time.advance_to(at(DEADLINE))
        assert not a.is_leader()  # what every write checks, exactly at the deadline


async def test_a_lapse_inside_one_slow_renewal_comes_back_unannounced_within_its_term() -> None:
    """Rounds every 2 s, the last at 10 s (counted leader until 20 s); the next, at 12 s,
    takes 9 s (two requests of 4.5 s): from 20 s to 21 s it is not leader, then its write
    restores it, and it never said it stopped. So a pass in that second must not wait for
    an announcement (runtime.reconciling looks again after a second), and the term it
    holds does not change (runtime.process keeps its loop going). A loss that is
    announced ends the term; taking the Lease up again begins a new one."""
    time = FakeTime()
    server = LeaseServer(time)
    a = elector(server, "a")
    async with running(time, a) as [run]:
        assert a.term == 1 and run.changes == [(0.0, True)]
        await time.advance_to(at(12) - TICK)
        server.latency = 4.5
        await time.advance_to(at(20) + TICK)
        assert not a.is_leader() and a.epoch == 0 and a.term == 1  # lapsed, epoch kept
        await time.advance_to(at(21))
        assert a.is_leader() and a.term == 1
        assert run.changes == [(0.0, True)]  # the lapse was never announced
        server.latency = 0.0
        server.cut.add("a")  # now a loss: announced, and the term ends
        await time.advance(DEADLINE + 2 * RETRY)
        assert not a.is_leader() and a.epoch is None and a.term == 1
        assert run.changes[-1][1] is False
        server.cut.discard("a")
        await time.advance(2 * RETRY)
        assert a.is_leader() and a.term == 2  # taken up again: a new term


# -- stopping ----------------------------------------------------------------------------------


async def test_stopping_releases_the_lease_at_once() -> None:
    time = FakeTime()
    server = LeaseServer(time)
    a = elector(server, "a")
    async with running(time, a) as [run]:
        await time.advance(5)
        await run.halt()
        assert not a.is_leader() and not a.holding and a.epoch is None
        assert run.changes == [(0.0, True), (5.0, False)]
    spec = server.spec()
    assert spec["holderIdentity"] == ""
    assert spec["leaseDurationSeconds"] == 1
    assert spec["renewTime"] == micro_time(at(5))
    assert spec["leaseTransitions"] == 0
    assert server.writes_by("a")[-1] == Write(5.0, "a", "replace", "")


async def test_a_follower_that_stops_leaves_the_lease_alone() -> None:
    time = FakeTime()
    server = LeaseServer(time)
    server.hold("other", renewed=T0)
    a = elector(server, "a")
    async with running(time, a) as [run]:
        await time.advance(3)
        await run.halt()
    assert server.writes_by("a") == []
    assert server.spec()["holderIdentity"] == "other"
