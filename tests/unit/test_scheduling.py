"""The scheduler loop: timers, one worker per key at a time, a bound, fairness.

The loop runs on simulated time (tests/unit/faketime.py): its clock and its waits are
one `FakeTime`, which moves only when a test moves it. So a test asserts that a key
woken at T was processed at T exactly and not a microsecond before, that a retry came
5 s after a failure, or that ten 10 ms passes on three workers took 40 ms, all in no
real time. `process` is a fake that records each call with the instant it was made
and, where a test needs it, waits on an Event or on simulated seconds.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Callable
from datetime import datetime, timedelta

import pytest

from punctual.runtime.scheduling import Key, SchedulerLoop
from tests.unit.faketime import T0, FakeTime

KEY: Key = ("reports", "nightly-report")
OTHER: Key = ("reports", "weekly-report")
RETRY = timedelta(seconds=5)  # the loop's documented retry after a failed process
TICK = timedelta(microseconds=1)  # the finest step of the clock


class Work:
    """A fake `process`: records calls, tracks overlap, optionally holds or fails."""

    def __init__(self, time: FakeTime) -> None:
        self.time = time
        self.calls: list[tuple[Key, datetime]] = []
        self.running: set[Key] = set()
        self.most_at_once = 0
        self.overlapped: list[Key] = []  # a key that entered while already in progress
        self.gate: asyncio.Event | None = None  # set: calls wait on it
        self.hold_only: set[Key] | None = None  # the keys the gate holds (None: all)
        self.seconds = 0.0  # simulated seconds each call takes
        self.fail: set[Key] = set()  # these keys raise, once each
        self.next_wake: dict[Key, datetime] = {}  # returned once each
        self.on_call: Callable[[int], None] | None = None
        self.cancelled: list[Key] = []

    def keys(self) -> list[Key]:
        return [key for key, _ in self.calls]

    def count(self, key: Key) -> int:
        return self.keys().count(key)

    def instants(self, key: Key) -> list[datetime]:
        return [at for k, at in self.calls if k == key]

    async def __call__(self, key: Key) -> datetime | None:
        if key in self.running:
            self.overlapped.append(key)
        self.running.add(key)
        self.most_at_once = max(self.most_at_once, len(self.running))
        self.calls.append((key, self.time.now()))
        if self.on_call is not None:
            self.on_call(len(self.calls))
        try:
            if self.gate is not None and (self.hold_only is None or key in self.hold_only):
                await self.gate.wait()
            if self.seconds:
                await self.time.sleep(self.seconds)
            if key in self.fail:
                self.fail.discard(key)
                raise RuntimeError(f"boom on {key}")
            return self.next_wake.pop(key, None)
        except asyncio.CancelledError:
            self.cancelled.append(key)
            raise
        finally:
            self.running.discard(key)


@contextlib.asynccontextmanager
async def running(loop: SchedulerLoop, time: FakeTime) -> AsyncIterator[asyncio.Task[None]]:
    stop = asyncio.Event()
    task = asyncio.create_task(loop.run(stop))
    try:
        yield task
    finally:
        stop.set()
        await time.run_until_idle()
        if not task.done():
            task.cancel()
            raise AssertionError("the loop did not stop at once")
        task.result()  # it did not crash


def make(workers: int = 4) -> tuple[FakeTime, Work, SchedulerLoop]:
    time = FakeTime()
    work = Work(time)
    return time, work, SchedulerLoop(work, clock=time, sleeper=time, workers=workers)


def ms(milliseconds: float) -> timedelta:
    return timedelta(milliseconds=milliseconds)


# -- timers ----------------------------------------------------------------------------


async def test_a_key_woken_at_an_instant_is_processed_at_that_instant_and_not_before() -> None:
    time, work, loop = make()
    due = T0 + ms(80)
    async with running(loop, time):
        loop.wake_at(KEY, due)
        await time.advance_to(due - TICK)
        assert work.calls == []
        await time.advance_to(due)
        assert work.calls == [(KEY, due)]
        await time.advance(3600)
    assert work.calls == [(KEY, due)]  # once


async def test_a_key_woken_ahead_is_served_that_much_before_and_told_its_instant() -> None:
    time = FakeTime()
    work = Work(time)
    loop = SchedulerLoop(work, clock=time, sleeper=time, ahead=ms(500))
    told: list[datetime | None] = []
    work.on_call = lambda _: told.append(loop.woken_for(work.calls[-1][0]))
    due = T0 + timedelta(seconds=10)
    async with running(loop, time):
        loop.wake_at(KEY, due)
        await time.advance_to(due - ms(500) - TICK)
        assert work.calls == []
        await time.advance_to(due - ms(500))
        assert work.calls == [(KEY, due - ms(500))]
        assert told == [due]  # the pass decides as of its instant
        await time.advance_to(due)  # the loop holds it until then
        assert loop.woken_for(KEY) is None  # and only that pass
        loop.notify(KEY)  # a change: looked at now, as of now
        await time.run_until_idle()
        assert told == [due, None]
        loop.wake_at(KEY, due + ms(200))  # within `ahead`: served at once
        await time.run_until_idle()
        assert told == [due, None, due + ms(200)]
        assert work.instants(KEY) == [due - ms(500), due, due]


async def test_a_pass_woken_ahead_ends_no_sooner_than_its_instant() -> None:
    """Its retry (a lapsed leadership's, a second on, reckoned when it ran) is then past
    and served once, as of its own time: reckoned from before the instant, a retry within
    `ahead` was served again at once, and again (the simulator at AHEAD=2, seed 3)."""
    time = FakeTime()
    work = Work(time)
    loop = SchedulerLoop(work, clock=time, sleeper=time, ahead=ms(2000))
    due = T0 + timedelta(seconds=10)
    work.next_wake[KEY] = due - ms(1000)  # a retry a second after it ran, 2 s early
    async with running(loop, time):
        loop.wake_at(KEY, due)
        await time.advance_to(due - ms(2000))
        assert work.calls == [(KEY, due - ms(2000))]
        await time.advance_to(due - TICK)
        assert len(work.calls) == 1  # held until its instant, not served again
        await time.advance_to(due)
        assert work.calls == [(KEY, due - ms(2000)), (KEY, due)]


async def test_a_key_told_not_to_be_decided_ahead_is_served_at_its_instant() -> None:
    """And it holds back no timer behind it that may be served ahead."""
    time = FakeTime()
    work = Work(time)
    loop = SchedulerLoop(work, clock=time, sleeper=time, ahead=ms(500))
    due = T0 + timedelta(seconds=10)
    async with running(loop, time):
        loop.decide_ahead(KEY, False)
        loop.wake_at(KEY, due)
        loop.wake_at(OTHER, due + ms(100))
        await time.advance_to(due + ms(100) - ms(500))
        assert work.calls == [(OTHER, due - ms(400))]
        assert loop.timers == 1  # KEY's, held for its instant
        await time.advance_to(due - TICK)
        assert work.count(KEY) == 0
        await time.advance_to(due)
        assert work.instants(KEY) == [due]
        loop.decide_ahead(KEY, True)  # its spec changed: ahead again
        loop.wake_at(KEY, due + timedelta(seconds=5))
        await time.advance_to(due + timedelta(seconds=5) - ms(500))
        assert work.instants(KEY) == [due, due + timedelta(seconds=5) - ms(500)]


async def test_the_loop_goes_by_the_injected_clock_when_its_estimate_moves_ahead() -> None:
    # The clock is the estimate of the API server's; it moves when a response narrows it,
    # and the loop reads it again at its next input.
    time, work, loop = make()
    due = T0 + timedelta(hours=1)
    async with running(loop, time):
        loop.wake_at(KEY, due)
        await time.advance(60)
        assert work.calls == []
        time.jump_to(due - timedelta(seconds=0.5))  # the clock says: half a second to go
        loop.notify(OTHER)  # any input wakes the loop, which then reads the clock
        await time.run_until_idle()
        assert work.keys() == [OTHER]
        await time.advance(0.5 - 1e-6)
        assert work.count(KEY) == 0
        await time.advance(1e-6)
        assert work.instants(KEY) == [due]


async def test_a_wake_up_is_never_early_when_the_clocks_estimate_moves_back() -> None:
    time, work, loop = make()
    due = T0 + timedelta(seconds=10)
    async with running(loop, time):
        loop.wake_at(KEY, due)
        await time.advance(9)
        time.jump(-1)  # the estimate moved back: 2 s to go now, by the clock
        await time.advance(1)  # the loop wakes when it meant to, and finds 1 s to go
        assert work.calls == []
        await time.advance(1 - 1e-6)
        assert work.calls == []
        await time.advance(1e-6)
        assert work.calls == [(KEY, due)]


async def test_a_wake_up_in_the_past_is_processed_at_once() -> None:
    time, work, loop = make()
    async with running(loop, time):
        loop.wake_at(KEY, T0 - timedelta(days=1))
        await time.run_until_idle()
        assert work.calls == [(KEY, T0)]  # no simulated time passed


async def test_a_newer_wake_at_replaces_the_older_timer() -> None:
    time, work, loop = make()
    later = T0 + ms(100)
    async with running(loop, time):
        loop.wake_at(KEY, T0 + ms(20))
        loop.wake_at(KEY, later)
        await time.advance_to(later - TICK)
        assert work.calls == []  # not at the first instant
        await time.advance(3600)
    assert work.calls == [(KEY, later)]  # once


async def test_a_pass_that_keeps_its_timer_adds_no_entry_to_the_heap() -> None:
    """A schedule whose next tick is a year away and whose Jobs change often is passed
    over again and again with the same wake-up; each used to push an entry that stayed
    until that instant came."""
    time, work, loop = make()
    due = T0 + timedelta(days=365)
    async with running(loop, time):
        for _ in range(1000):
            loop.wake_at(KEY, due)
        assert loop.timers == 1
        loop.wake_at(KEY, due + ms(1))  # moved: a new entry, the old one superseded
        loop.wake_at(KEY, due)  # moved back: live again, so a new entry too
        assert loop.timers == 3
        await time.advance_to(due + ms(1))
    assert work.calls == [(KEY, due)]  # once, at the instant it was last asked for


@pytest.mark.parametrize("cancel", ["forget", "wake_at None"])
async def test_a_cancelled_timer_never_fires(cancel: str) -> None:
    time, work, loop = make()
    async with running(loop, time):
        loop.wake_at(KEY, T0 + ms(30))
        loop.wake_at(OTHER, T0 + ms(30))
        if cancel == "forget":
            loop.forget(KEY)
        else:
            loop.wake_at(KEY, None)
        await time.advance(3600)
    assert work.calls == [(OTHER, T0 + ms(30))]  # the other timer did fire


async def test_the_instant_process_returns_is_the_keys_next_wake_up() -> None:
    time, work, loop = make()
    again = T0 + ms(50)
    work.next_wake[KEY] = again
    async with running(loop, time):
        loop.notify(KEY)
        await time.advance(3600)
    # The second pass returned None: no more timers.
    assert work.instants(KEY) == [T0, again]


async def test_the_instant_process_returns_replaces_an_earlier_timer() -> None:
    # process decides from the whole state, so its answer is the key's only timer.
    time, work, loop = make()
    async with running(loop, time):
        loop.wake_at(KEY, T0 + ms(40))
        loop.notify(KEY)  # processed now; returns None: nothing more to wait for
        await time.advance(3600)
    assert work.calls == [(KEY, T0)]


async def test_wake_by_moves_a_timer_earlier_never_later() -> None:
    """A run's quiet ending asks for a pass by an instant: an earlier timer (the next
    tick) stays, a later one is brought forward."""
    time, work, loop = make()
    async with running(loop, time):
        loop.wake_at(KEY, T0 + ms(40))
        loop.wake_by(KEY, T0 + ms(90))  # later: the timer at 40 ms stays
        other = ("ns", "other")
        loop.wake_at(other, T0 + ms(90))
        loop.wake_by(other, T0 + ms(60))  # earlier: brought forward
        await time.advance(3600)
    assert work.instants(KEY) == [T0 + ms(40)]
    assert work.instants(other) == [T0 + ms(60)]


async def test_wake_by_during_a_pass_holds_after_the_pass_sets_its_own_timer() -> None:
    """The pass running when a Job ends read the Job before; its own timer (here later)
    must not drop the wake the ending asked for."""
    time, work, loop = make()
    work.gate = asyncio.Event()
    work.next_wake[KEY] = T0 + ms(500)
    async with running(loop, time):
        loop.notify(KEY)
        await time.run_until_idle()
        loop.wake_by(KEY, T0 + ms(100))  # while the pass runs
        work.gate.set()
        await time.advance(3600)
    assert work.instants(KEY) == [T0, T0 + ms(100)]


# -- one key, one worker ---------------------------------------------------------------


@pytest.mark.parametrize("how", ["notified", "its timer fired"])
async def test_a_key_changed_while_being_processed_is_processed_again_afterwards(
    how: str,
) -> None:
    time, work, loop = make(workers=4)
    work.gate = asyncio.Event()
    async with running(loop, time):
        loop.notify(KEY)
        await time.run_until_idle()
        assert work.count(KEY) == 1
        for _ in range(3):  # several changes arrive meanwhile
            if how == "notified":
                loop.notify(KEY)
            else:
                loop.wake_at(KEY, time.now())
            await time.advance(0.01)
        assert work.count(KEY) == 1  # never alongside itself
        work.gate.set()
        await time.run_until_idle()
        assert work.instants(KEY) == [T0, T0 + ms(30)]  # at once when the first pass ended
        await time.advance(3600)
    assert work.count(KEY) == 2  # the changes are coalesced into one more pass
    assert work.overlapped == []


async def test_a_key_is_never_processed_concurrently_with_itself_under_load() -> None:
    time, work, loop = make(workers=8)
    work.seconds = 0.002
    keys = [("ns", f"s{i}") for i in range(4)]
    async with running(loop, time):
        for _ in range(20):
            for key in keys:
                loop.notify(key)
                loop.wake_at(key, time.now())
            await time.advance(0.003)
        await time.until(lambda: loop.pending == 0)
    assert work.overlapped == []
    assert all(work.count(key) >= 2 for key in keys)


# -- the bound and fairness ------------------------------------------------------------


async def test_at_most_workers_process_calls_run_at_once() -> None:
    time, work, loop = make(workers=3)
    work.seconds = 0.01
    keys = [("ns", f"s{i}") for i in range(10)]
    for key in keys:
        loop.notify(key)
    assert loop.pending == 10
    async with running(loop, time):
        await time.until(lambda: len(work.calls) == 10 and loop.pending == 0)
    assert work.most_at_once == 3  # the bound, and the bound is used
    assert sorted(work.keys()) == sorted(keys)  # each once
    # Three at a time, each as soon as a worker is free: 10 ms passes end at 40 ms.
    started_ms = [(at - T0) / ms(1) for _, at in work.calls]
    assert started_ms == [0, 0, 0, 10, 10, 10, 20, 20, 20, 30]
    assert time.seconds == 0.04


async def test_a_hung_schedule_does_not_block_the_others() -> None:
    time, work, loop = make(workers=2)
    work.gate = asyncio.Event()  # never set: KEY hangs
    work.hold_only = {KEY}
    async with running(loop, time):
        loop.notify(KEY)
        for i in range(5):
            loop.notify(("other", f"s{i}"))
        await time.run_until_idle()
        assert len(work.calls) == 6  # the five others on the one free worker
    assert work.cancelled == [KEY]  # stopping the loop cancels the hung call


async def test_round_robin_a_small_namespace_is_not_starved_by_a_large_one() -> None:
    time, work, loop = make(workers=1)
    big = [("a", f"s{i:02}") for i in range(50)]
    small = [("b", "s0"), ("b", "s1")]
    for key in [*big, *small]:
        loop.notify(key)
    async with running(loop, time):
        await time.run_until_idle()
    order = work.keys()
    assert len(order) == 52
    assert {order.index(key) for key in small} <= {0, 1, 2, 3}
    assert [key for key in order if key[0] == "a"] == big  # first come, first served within


async def test_round_robin_a_late_namespace_goes_next() -> None:
    time, work, loop = make(workers=1)
    big = [("a", f"s{i:02}") for i in range(50)]
    late = ("b", "late")

    def arrive(calls: int) -> None:
        if calls == 10:
            loop.notify(late)

    work.on_call = arrive
    for key in big:
        loop.notify(key)
    async with running(loop, time):
        await time.run_until_idle()
    assert len(work.calls) == 51
    assert work.keys().index(late) in (10, 11)


# -- failures and switches -------------------------------------------------------------


async def test_an_exception_in_process_is_logged_and_retried_5_s_later(
    caplog: pytest.LogCaptureFixture,
) -> None:
    time, work, loop = make()
    work.fail = {KEY}
    caplog.set_level(logging.ERROR, logger="punctual.runtime.scheduling")
    async with running(loop, time) as task:
        loop.notify(KEY)
        await time.run_until_idle()
        assert work.instants(KEY) == [T0]
        [record] = caplog.records
        # The loop lives on: other schedules are processed.
        loop.notify(OTHER)
        await time.run_until_idle()
        assert work.count(OTHER) == 1
        assert not task.done()
        # Not retried at once, nor before the retry delay has passed on the clock ...
        await time.advance_to(T0 + RETRY - TICK)
        assert work.count(KEY) == 1
        # ... and then at once.
        await time.advance(1e-6)
        assert work.instants(KEY) == [T0, T0 + RETRY]
    assert record.levelno == logging.ERROR
    assert "reports/nightly-report" in record.getMessage()
    assert record.exc_info is not None and "boom" in str(record.exc_info[1])


async def test_a_disabled_loop_dispatches_nothing_until_enabled() -> None:
    time, work, loop = make()
    loop.enabled = False
    async with running(loop, time):
        loop.notify(KEY)
        loop.wake_at(OTHER, time.now())
        await time.advance(3600)
        assert work.calls == []
        loop.enabled = True
        loop.notify(("x", "kick"))
        await time.run_until_idle()
        assert work.count(KEY) == 1 and work.count(OTHER) == 1


async def test_stopping_returns_at_once_even_with_work_in_progress() -> None:
    time, work, loop = make()
    work.gate = asyncio.Event()  # never set
    stop = asyncio.Event()
    task = asyncio.create_task(loop.run(stop))
    loop.notify(KEY)
    loop.wake_at(OTHER, T0 + timedelta(days=1))
    await time.run_until_idle()
    assert work.keys() == [KEY]
    stop.set()
    await time.run_until_idle()
    assert task.done() and task.exception() is None
    assert time.seconds == 0  # in no simulated time either
    assert work.cancelled == [KEY]


# -- routine writes --------------------------------------------------------------------


class RoutineWork:
    """A fake `process` whose every pass has a routine write: it asks the loop for a
    slot, and either holds it until released or postpones itself."""

    def __init__(self) -> None:
        self.loop: SchedulerLoop | None = None
        self.release = asyncio.Event()
        self.writing: set[Key] = set()
        self.most_writing = 0
        self.written: list[Key] = []
        self.postponements = 0
        self.due: set[Key] = set()  # keys whose write is due: they never ask for a slot
        self.due_written: list[Key] = []

    async def __call__(self, key: Key) -> datetime | None:
        assert self.loop is not None
        if key in self.due:
            self.due_written.append(key)
            return None
        if not self.loop.admit(key):
            self.postponements += 1
            self.loop.postpone(key)
            return None
        self.writing.add(key)
        self.most_writing = max(self.most_writing, len(self.writing))
        try:
            await self.release.wait()
            self.written.append(key)
        finally:
            self.writing.discard(key)
        return None


def routine_loop(*, workers: int, slots: int) -> tuple[FakeTime, RoutineWork, SchedulerLoop]:
    time = FakeTime()
    work = RoutineWork()
    loop = SchedulerLoop(work, clock=time, sleeper=time, workers=workers, routine_slots=slots)
    work.loop = loop
    return time, work, loop


async def test_routine_writes_take_at_most_their_slots_and_the_rest_wait_in_order() -> None:
    time, work, loop = routine_loop(workers=8, slots=2)
    keys = [("ns", f"s{i}") for i in range(6)]
    async with running(loop, time):
        for key in keys:
            loop.notify(key)
        await time.run_until_idle()
        assert len(work.writing) == 2 and loop.postponed == 4
        assert loop.pending == 2  # the postponed ones hold no worker
        work.release.set()
        await time.run_until_idle()
    assert work.most_writing == 2
    assert work.written[:2] == keys[:2]  # the first two took the slots at once ...
    assert work.written[2:] == keys[2:]  # ... and the postponed ones followed, oldest first
    assert loop.postponed == 0


async def test_a_due_write_never_waits_behind_routine_ones() -> None:
    time, work, loop = routine_loop(workers=4, slots=1)
    due: Key = ("other", "every-second")
    work.due.add(due)
    async with running(loop, time):
        for i in range(100):
            loop.notify(("bulk", f"first-claim-{i}"))
        await time.run_until_idle()
        assert loop.postponed == 99
        loop.notify(due)
        await time.run_until_idle()
        assert work.due_written == [due]
        assert work.written == []  # the routine write still holds its slot
        work.release.set()
        await time.run_until_idle()
        assert len(work.written) == 100
    assert work.most_writing == 1


async def test_postponed_routine_writes_go_on_while_ready_keys_wait() -> None:
    # A new leader's look at every schedule queues them all as ready keys; a routine
    # write postponed meanwhile takes the next free routine slot, not the queue's end.
    time, work = FakeTime(), RoutineWork()
    slow = [("ns", f"look-{i}") for i in range(20)]
    work.due |= set(slow)  # passes that write nothing routine ...
    hold = asyncio.Event()

    async def process(key: Key) -> datetime | None:
        if key in slow:
            await hold.wait()  # ... and take long
        return await work(key)

    loop = SchedulerLoop(process, clock=time, sleeper=time, workers=3, routine_slots=1)
    work.loop = loop
    first, second = ("ns", "first-claim-0"), ("ns", "first-claim-1")
    async with running(loop, time):
        loop.notify(first)
        loop.notify(second)
        await time.run_until_idle()
        assert work.writing == {first} and loop.postponed == 1
        for key in slow:
            loop.notify(key)
        await time.run_until_idle()
        work.release.set()  # the first claim lands: its slot is free
        await time.run_until_idle()
        assert work.written == [first, second]  # before any of the 20 looks ended
        assert work.due_written == []
        hold.set()
        await time.run_until_idle()
    assert len(work.due_written) == 20


async def test_a_forgotten_schedule_leaves_the_routine_lane() -> None:
    time, work, loop = routine_loop(workers=4, slots=1)
    async with running(loop, time):
        loop.notify(KEY)
        loop.notify(OTHER)
        await time.run_until_idle()
        assert loop.postponed == 1
        loop.forget(OTHER)
        assert loop.postponed == 0
        work.release.set()
        await time.advance(3600)
    assert work.written == [KEY]


async def test_notify_in_order_puts_its_keys_ahead_of_what_waited() -> None:
    time, work, loop = make(workers=1)
    waited = [("ns", f"w{i}") for i in range(5)]
    urgent = [("ns", "due-now"), ("ns", "due-later")]
    for key in waited:  # queued while the loop was disabled (not leading)
        loop.notify(key)
    loop.notify_in_order([*urgent, *waited])
    async with running(loop, time):
        await time.advance(3600)
    assert work.keys() == [*urgent, *waited]  # each once, in the given order


async def test_a_due_tick_is_served_before_changes_notified_earlier() -> None:
    """A new leader's look at 100 000 schedules in one namespace fills one ready queue;
    a tick that comes due meanwhile is served next, not after all of them."""
    time, work, loop = make(workers=1)
    work.seconds = 0.01
    flood = [("ns", f"s{i:03}") for i in range(200)]
    due: Key = ("ns", "every-second")
    loop.notify_in_order(flood)
    async with running(loop, time):
        loop.wake_at(due, T0 + ms(50))
        await time.advance(0.06)
        # Five 10 ms passes ran before 50 ms; the sixth is the due one, at 50 ms sharp.
        assert work.instants(due) == [T0 + ms(50)]
        assert work.keys()[5] == due and len(work.calls) == 7
        await time.advance(10)
    assert work.count(due) == 1 and sorted(work.keys()[:5] + work.keys()[6:]) == flood


async def test_a_key_both_due_and_notified_is_processed_once() -> None:
    time, work, loop = make(workers=1)
    work.seconds = 0.01
    loop.notify(OTHER)
    loop.notify(KEY)  # waits in the ready queue behind OTHER ...
    loop.wake_at(KEY, T0)  # ... and is due now
    async with running(loop, time):
        await time.advance(1)
    assert work.keys() == [KEY, OTHER]  # the due lane first; its ready copy then stale


async def test_a_tick_due_while_its_key_runs_is_served_first_after_the_pass() -> None:
    time, work, loop = make(workers=1)
    work.seconds = 0.1
    loop.notify(KEY)
    async with running(loop, time):
        await time.advance(0.01)  # KEY's pass runs until 0.1 s
        loop.wake_at(KEY, T0 + ms(50))  # its tick comes due meanwhile ...
        for i in range(20):
            loop.notify(("ns", f"change-{i}"))  # ... behind 20 changes notified before it
        await time.advance(0.15)
        assert work.keys()[:2] == [KEY, KEY]  # the due pass right after the running one
        await time.advance(10)
    assert work.count(KEY) == 2 and len(work.calls) == 22
