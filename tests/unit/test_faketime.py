"""The simulated time the loop tests run on (tests/unit/faketime.py), and the real Sleeper.

The scheduler and Lease tests are only as exact as `FakeTime`: a wait must end at its
own instant and not before, time must move only when the test moves it, and a test
waiting for something that can never happen must fail rather than hang. The real
`EventLoopSleeper` is checked on what needs no waiting: it returns on an event.
"""

from __future__ import annotations

import asyncio
from datetime import timedelta

import pytest

from punctual.clocks import EventLoopSleeper
from tests.unit.faketime import MONOTONIC_START, T0, FakeTime


async def test_waits_end_at_their_own_instants_in_order_and_not_before() -> None:
    time = FakeTime()
    ended: list[tuple[str, float]] = []

    async def sleeper(name: str, seconds: float) -> None:
        await time.sleep(seconds)
        ended.append((name, time.seconds))

    tasks = [asyncio.create_task(sleeper(n, s)) for n, s in [("c", 3.0), ("a", 1.0), ("b", 2.5)]]
    await time.advance(2.5 - 1e-6)
    assert ended == [("a", 1.0)]
    await time.advance(10)
    assert ended == [("a", 1.0), ("b", 2.5), ("c", 3.0)]
    assert time.seconds == 12.5 - 1e-6
    await asyncio.gather(*tasks)


async def test_time_moves_only_when_the_test_moves_it() -> None:
    time = FakeTime()
    sleeping = asyncio.create_task(time.sleep(1))
    for _ in range(100):
        await asyncio.sleep(0)
    await time.run_until_idle()
    assert not sleeping.done()
    assert (time.now(), time.monotonic(), time.seconds) == (T0, MONOTONIC_START, 0.0)
    await time.advance(1)
    assert sleeping.done()
    assert (time.now(), time.monotonic()) == (T0 + timedelta(seconds=1), MONOTONIC_START + 1)


async def test_a_wait_ends_on_an_event_before_its_timeout_and_forgets_its_timer() -> None:
    time = FakeTime()
    event = asyncio.Event()
    waiting = asyncio.create_task(time.wait(event, timeout=60))
    await time.run_until_idle()
    event.set()
    await time.run_until_idle()
    assert waiting.done() and time.seconds == 0
    with pytest.raises(AssertionError, match="none on time"):
        await time.until(lambda: False)  # its timer is gone: nothing waits on time


async def test_a_jump_moves_the_wall_clock_alone() -> None:
    time = FakeTime()
    sleeping = asyncio.create_task(time.sleep(1))
    time.jump(3600)
    await time.run_until_idle()
    assert not sleeping.done()  # the monotonic clock did not move
    assert time.now() == T0 + timedelta(hours=1) and time.monotonic() == MONOTONIC_START
    await time.advance(1)
    assert sleeping.done()


async def test_until_goes_from_one_wait_to_the_next_and_fails_past_its_limit() -> None:
    time = FakeTime()
    ticks: list[float] = []

    async def ticking() -> None:
        while True:
            await time.sleep(7)
            ticks.append(time.seconds)

    task = asyncio.create_task(ticking())
    await time.until(lambda: len(ticks) == 3)
    assert ticks == [7.0, 14.0, 21.0] and time.seconds == 21.0
    with pytest.raises(AssertionError, match="not within 10"):
        await time.until(lambda: len(ticks) == 5, within=10)
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)


async def test_step_moves_to_the_next_instant_a_wait_ends() -> None:
    time = FakeTime()
    tasks = [asyncio.create_task(time.sleep(s)) for s in (2.0, 0.5)]
    await time.step()
    assert time.seconds == 0.5 and [t.done() for t in tasks] == [False, True]
    await time.step()
    assert time.seconds == 2.0 and all(t.done() for t in tasks)
    with pytest.raises(AssertionError, match="no next instant"):
        await time.step()


async def test_time_runs_forward_only() -> None:
    time = FakeTime()
    await time.advance(5)
    with pytest.raises(ValueError, match="forward only"):
        await time.advance_to(T0)


async def test_run_until_idle_fails_on_a_busy_loop_instead_of_hanging() -> None:
    time = FakeTime()

    async def spinning() -> None:
        while True:
            await time.wait(timeout=0)  # due at once, every time: time never needs to move

    task = asyncio.create_task(spinning())
    with pytest.raises(AssertionError, match="busy loop"):
        await time.run_until_idle()
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)


async def test_the_event_loop_sleeper_returns_on_an_event() -> None:
    sleeper = EventLoopSleeper()
    stop, kick = asyncio.Event(), asyncio.Event()
    kick.set()
    await asyncio.wait_for(sleeper.wait(stop, kick, timeout=None), timeout=5)
    await sleeper.wait(stop, timeout=0)  # a timeout of 0 returns at once
    assert not stop.is_set()
