"""The scheduler loop: timers, one worker per key at a time, a bound, fairness.

The loop sleeps real seconds against `clock.now()`, so the test clock is anchored at
T0 and runs with real time (timers of a few hundredths of a second), and can be
moved ahead to stand for an hour in no time. `process` is a fake that records each
call and, where a test needs it, waits on an Event, so every test takes well under a
second.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import AsyncIterator, Callable
from datetime import UTC, datetime, timedelta

import pytest

from punctual.runtime.scheduling import Key, SchedulerLoop

T0 = datetime(2026, 11, 25, 12, 0, tzinfo=UTC)
KEY: Key = ("reports", "nightly-report")
OTHER: Key = ("reports", "weekly-report")
RETRY = timedelta(seconds=5)  # the loop's documented retry after a failed process


class LoopClock:
    """T0 plus the real time since the test began, plus any moves ahead."""

    def __init__(self) -> None:
        self._start = time.monotonic()
        self._jumped = timedelta(0)

    def now(self) -> datetime:
        return T0 + timedelta(seconds=time.monotonic() - self._start) + self._jumped

    def move_to(self, instant: datetime) -> None:
        self._jumped += instant - self.now()

    def after(self, seconds: float) -> datetime:
        return self.now() + timedelta(seconds=seconds)


class Work:
    """A fake `process`: records calls, tracks overlap, optionally holds or fails."""

    def __init__(self, clock: LoopClock) -> None:
        self.clock = clock
        self.calls: list[tuple[Key, datetime]] = []
        self.running: set[Key] = set()
        self.most_at_once = 0
        self.overlapped: list[Key] = []  # a key that entered while already in progress
        self.gate: asyncio.Event | None = None  # set: calls wait on it
        self.hold_only: set[Key] | None = None  # the keys the gate holds (None: all)
        self.seconds = 0.0
        self.fail: set[Key] = set()  # these keys raise, once each
        self.next_wake: dict[Key, datetime] = {}  # returned once each
        self.on_call: Callable[[int], None] | None = None
        self.cancelled: list[Key] = []

    def keys(self) -> list[Key]:
        return [key for key, _ in self.calls]

    def count(self, key: Key) -> int:
        return self.keys().count(key)

    async def __call__(self, key: Key) -> datetime | None:
        if key in self.running:
            self.overlapped.append(key)
        self.running.add(key)
        self.most_at_once = max(self.most_at_once, len(self.running))
        self.calls.append((key, self.clock.now()))
        if self.on_call is not None:
            self.on_call(len(self.calls))
        try:
            if self.gate is not None and (self.hold_only is None or key in self.hold_only):
                await self.gate.wait()
            if self.seconds:
                await asyncio.sleep(self.seconds)
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
async def running(loop: SchedulerLoop) -> AsyncIterator[asyncio.Task[None]]:
    stop = asyncio.Event()
    task = asyncio.create_task(loop.run(stop))
    try:
        yield task
    finally:
        stop.set()
        await asyncio.wait_for(task, timeout=1.0)  # stops promptly, and did not crash


async def eventually(predicate: Callable[[], object], timeout: float = 1.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError("condition not met in time")
        await asyncio.sleep(0.001)


def make(workers: int = 4) -> tuple[LoopClock, Work, SchedulerLoop]:
    clock = LoopClock()
    work = Work(clock)
    return clock, work, SchedulerLoop(work, clock=clock, workers=workers)


# -- timers ----------------------------------------------------------------------------


async def test_a_key_woken_at_an_instant_is_processed_when_due_and_not_before() -> None:
    clock, work, loop = make()
    due = clock.after(0.08)
    async with running(loop):
        loop.wake_at(KEY, due)
        await asyncio.sleep(0.04)
        if clock.now() < due:  # (unless this machine is very slow)
            assert work.calls == []
        await eventually(lambda: work.calls)
        await asyncio.sleep(0.03)
    [(key, at)] = work.calls  # once
    assert key == KEY
    assert at >= due
    assert at - due < timedelta(seconds=0.5)  # and promptly, not at some later input


async def test_the_loop_goes_by_the_injected_clock_not_the_event_loops() -> None:
    clock, work, loop = make()
    due = T0 + timedelta(hours=1)
    async with running(loop):
        loop.wake_at(KEY, due)
        await asyncio.sleep(0.03)
        assert work.calls == []
        clock.move_to(due - timedelta(seconds=0.5))  # the clock says: half a second to go
        loop.notify(OTHER)  # any input wakes the loop, which then reads the clock
        await eventually(lambda: work.count(OTHER) == 1)
        await asyncio.sleep(0.02)
        assert work.count(KEY) == 0
        clock.move_to(due - timedelta(seconds=0.004))  # a few milliseconds to go
        loop.notify(OTHER)
        await eventually(lambda: work.count(KEY) == 1)
    [at] = [at for key, at in work.calls if key == KEY]
    assert at >= due  # woken a moment early, it waited for the rest


async def test_a_wake_up_in_the_past_is_processed_at_once() -> None:
    _, work, loop = make()
    async with running(loop):
        loop.wake_at(KEY, T0 - timedelta(days=1))
        await eventually(lambda: work.calls, timeout=0.2)


async def test_a_newer_wake_at_replaces_the_older_timer() -> None:
    clock, work, loop = make()
    later = clock.after(0.1)
    async with running(loop):
        loop.wake_at(KEY, clock.after(0.02))
        loop.wake_at(KEY, later)
        await eventually(lambda: work.calls)
        await asyncio.sleep(0.03)
    [(_, at)] = work.calls  # once, and not at the first instant
    assert at >= later


@pytest.mark.parametrize("cancel", ["forget", "wake_at None"])
async def test_a_cancelled_timer_never_fires(cancel: str) -> None:
    clock, work, loop = make()
    async with running(loop):
        loop.wake_at(KEY, clock.after(0.03))
        loop.wake_at(OTHER, clock.after(0.03))
        if cancel == "forget":
            loop.forget(KEY)
        else:
            loop.wake_at(KEY, None)
        await eventually(lambda: work.count(OTHER) == 1)  # the other timer did fire
        await asyncio.sleep(0.05)
    assert work.keys() == [OTHER]


async def test_the_instant_process_returns_is_the_keys_next_wake_up() -> None:
    clock, work, loop = make()
    again = clock.after(0.05)
    work.next_wake[KEY] = again
    async with running(loop):
        loop.notify(KEY)
        await eventually(lambda: work.count(KEY) == 2)
        await asyncio.sleep(0.03)
    assert work.count(KEY) == 2  # the second pass returned None: no more timers
    assert work.calls[1][1] >= again


async def test_the_instant_process_returns_replaces_an_earlier_timer() -> None:
    # process decides from the whole state, so its answer is the key's only timer.
    clock, work, loop = make()
    async with running(loop):
        loop.wake_at(KEY, clock.after(0.04))
        loop.notify(KEY)  # processed now; returns None: nothing more to wait for
        await eventually(lambda: work.count(KEY) == 1)
        await asyncio.sleep(0.08)
    assert work.count(KEY) == 1


# -- one key, one worker ---------------------------------------------------------------


@pytest.mark.parametrize("how", ["notified", "its timer fired"])
async def test_a_key_changed_while_being_processed_is_processed_again_afterwards(
    how: str,
) -> None:
    clock, work, loop = make(workers=4)
    work.gate = asyncio.Event()
    async with running(loop):
        loop.notify(KEY)
        await eventually(lambda: work.count(KEY) == 1)
        for _ in range(3):  # several changes arrive meanwhile
            if how == "notified":
                loop.notify(KEY)
            else:
                loop.wake_at(KEY, clock.now())
            await asyncio.sleep(0.01)
        assert work.count(KEY) == 1  # never alongside itself
        work.gate.set()
        await eventually(lambda: work.count(KEY) == 2)
        await asyncio.sleep(0.03)
    assert work.count(KEY) == 2  # the changes are coalesced into one more pass
    assert work.overlapped == []


async def test_a_key_is_never_processed_concurrently_with_itself_under_load() -> None:
    clock, work, loop = make(workers=8)
    work.seconds = 0.002
    keys = [("ns", f"s{i}") for i in range(4)]
    async with running(loop):
        for _ in range(20):
            for key in keys:
                loop.notify(key)
                loop.wake_at(key, clock.now())
            await asyncio.sleep(0.003)
        await eventually(lambda: loop.pending == 0)
    assert work.overlapped == []
    assert all(work.count(key) >= 2 for key in keys)


# -- the bound and fairness ------------------------------------------------------------


async def test_at_most_workers_process_calls_run_at_once() -> None:
    _, work, loop = make(workers=3)
    work.seconds = 0.01
    keys = [("ns", f"s{i}") for i in range(10)]
    for key in keys:
        loop.notify(key)
    assert loop.pending == 10
    async with running(loop):
        await eventually(lambda: len(work.calls) == 10 and loop.pending == 0)
    assert work.most_at_once == 3  # the bound, and the bound is used
    assert sorted(work.keys()) == sorted(keys)  # each once


async def test_a_hung_schedule_does_not_block_the_others() -> None:
    _, work, loop = make(workers=2)
    work.gate = asyncio.Event()  # never set: KEY hangs
    work.hold_only = {KEY}
    async with running(loop):
        loop.notify(KEY)
        for i in range(5):
            loop.notify(("other", f"s{i}"))
        await eventually(lambda: len(work.calls) == 6)
    assert work.cancelled == [KEY]  # stopping the loop cancels the hung call


async def test_round_robin_a_small_namespace_is_not_starved_by_a_large_one() -> None:
    _, work, loop = make(workers=1)
    big = [("a", f"s{i:02}") for i in range(50)]
    small = [("b", "s0"), ("b", "s1")]
    for key in [*big, *small]:
        loop.notify(key)
    async with running(loop):
        await eventually(lambda: len(work.calls) == 52)
    order = work.keys()
    assert {order.index(key) for key in small} <= {0, 1, 2, 3}
    assert [key for key in order if key[0] == "a"] == big  # first come, first served within


async def test_round_robin_a_late_namespace_goes_next() -> None:
    _, work, loop = make(workers=1)
    big = [("a", f"s{i:02}") for i in range(50)]
    late = ("b", "late")

    def arrive(calls: int) -> None:
        if calls == 10:
            loop.notify(late)

    work.on_call = arrive
    for key in big:
        loop.notify(key)
    async with running(loop):
        await eventually(lambda: len(work.calls) == 51)
    assert work.keys().index(late) in (10, 11)


# -- failures and switches -------------------------------------------------------------


async def test_an_exception_in_process_is_logged_and_retried_later(
    caplog: pytest.LogCaptureFixture,
) -> None:
    clock, work, loop = make()
    work.fail = {KEY}
    caplog.set_level(logging.ERROR, logger="punctual.runtime.scheduling")
    async with running(loop) as task:
        loop.notify(KEY)
        await eventually(lambda: work.count(KEY) == 1)
        await eventually(lambda: caplog.records)
        failed_at = work.calls[0][1]
        # The loop lives on: other schedules are processed.
        loop.notify(OTHER)
        await eventually(lambda: work.count(OTHER) == 1)
        assert not task.done()
        # Not retried at once, nor before the retry delay has passed on the clock.
        await asyncio.sleep(0.03)
        assert work.count(KEY) == 1
        clock.move_to(failed_at + RETRY - timedelta(seconds=0.5))
        loop.notify(OTHER)
        await eventually(lambda: work.count(OTHER) == 2)
        assert work.count(KEY) == 1
        clock.move_to(failed_at + RETRY)
        loop.notify(OTHER)
        await eventually(lambda: work.count(KEY) == 2)
    [record] = caplog.records
    assert record.levelno == logging.ERROR
    assert "reports/nightly-report" in record.getMessage()
    assert record.exc_info is not None and "boom" in str(record.exc_info[1])
    retried_at = [at for key, at in work.calls if key == KEY][1]
    assert retried_at >= failed_at + RETRY


async def test_a_disabled_loop_dispatches_nothing_until_enabled() -> None:
    clock, work, loop = make()
    loop.enabled = False
    async with running(loop):
        loop.notify(KEY)
        loop.wake_at(OTHER, clock.now())
        await asyncio.sleep(0.03)
        assert work.calls == []
        loop.enabled = True
        loop.notify(("x", "kick"))
        await eventually(lambda: work.count(KEY) == 1 and work.count(OTHER) == 1)


async def test_stopping_returns_promptly_even_with_work_in_progress() -> None:
    _, work, loop = make()
    work.gate = asyncio.Event()  # never set
    stop = asyncio.Event()
    task = asyncio.create_task(loop.run(stop))
    loop.notify(KEY)
    loop.wake_at(OTHER, T0 + timedelta(days=1))
    await eventually(lambda: work.calls)
    stop.set()
    await asyncio.wait_for(task, timeout=0.5)
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


def routine_loop(*, workers: int, slots: int) -> tuple[RoutineWork, SchedulerLoop]:
    work = RoutineWork()
    loop = SchedulerLoop(work, clock=LoopClock(), workers=workers, routine_slots=slots)
    work.loop = loop
    return work, loop


async def test_routine_writes_take_at_most_their_slots_and_the_rest_wait_in_order() -> None:
    work, loop = routine_loop(workers=8, slots=2)
    keys = [("ns", f"s{i}") for i in range(6)]
    async with running(loop):
        for key in keys:
            loop.notify(key)
        await eventually(lambda: len(work.writing) == 2 and loop.postponed == 4)
        assert loop.pending == 2  # the postponed ones hold no worker
        work.release.set()
        await eventually(lambda: len(work.written) == 6)
    assert work.most_writing == 2
    assert work.written[:2] == keys[:2]  # the first two took the slots at once ...
    assert work.written[2:] == keys[2:]  # ... and the postponed ones followed, oldest first
    assert loop.postponed == 0


async def test_a_due_write_never_waits_behind_routine_ones() -> None:
    work, loop = routine_loop(workers=4, slots=1)
    due: Key = ("other", "every-second")
    work.due.add(due)
    async with running(loop):
        for i in range(100):
            loop.notify(("bulk", f"first-claim-{i}"))
        await eventually(lambda: loop.postponed == 99)
        loop.notify(due)
        await eventually(lambda: work.due_written == [due])
        assert work.written == []  # the routine write still holds its slot
        work.release.set()
        await eventually(lambda: len(work.written) == 100)
    assert work.most_writing == 1


async def test_a_forgotten_schedule_leaves_the_routine_lane() -> None:
    work, loop = routine_loop(workers=4, slots=1)
    async with running(loop):
        loop.notify(KEY)
        loop.notify(OTHER)
        await eventually(lambda: loop.postponed == 1)
        loop.forget(OTHER)
        assert loop.postponed == 0
        work.release.set()
        await eventually(lambda: work.written == [KEY])
        await asyncio.sleep(0.02)
    assert work.written == [KEY]


async def test_notify_in_order_puts_its_keys_ahead_of_what_waited() -> None:
    _, work, loop = make(workers=1)
    waited = [("ns", f"w{i}") for i in range(5)]
    urgent = [("ns", "due-now"), ("ns", "due-later")]
    for key in waited:  # queued while the loop was disabled (not leading)
        loop.notify(key)
    loop.notify_in_order([*urgent, *waited])
    async with running(loop):
        await eventually(lambda: len(work.calls) == 7)
        await asyncio.sleep(0.02)
    assert work.keys() == [*urgent, *waited]  # each once, in the given order
