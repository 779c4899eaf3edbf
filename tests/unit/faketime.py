"""Simulated time for the tests of loops that wait: the one fake clock of tests/unit.

Why it exists: the scheduler loop and the Lease loop wait for time to pass, and a test
that sleeps real milliseconds is slow, flaky on a loaded machine, and can only say
"nothing happened in 30 ms". `FakeTime` is at once a wall `Clock` (`now`), a
`Monotonic` (`monotonic`) and a `Sleeper` (`wait`, `sleep`), and its time moves only
when the test moves it, so a test says "processed at 12:00:00.080, not a microsecond
before" or "the standby took over 16 s after it first saw the Lease" in no real time,
in the manner of kopf's looptime.

Time is kept in whole microseconds (a `timedelta`), so that an instant computed by the
code under test from `now()` plus a float number of seconds is reached exactly.

`run_until_idle()` lets every task run until all of them wait (on an event, or on simulated
time): it yields to the event loop until the loop has nothing ready to run. It reads
asyncio's ready queue for that, which is private; if that ever goes away, the fallback
is a fixed number of yields, and only `run_until_idle`'s body changes.

What it must never do: read the real clock or wait real time.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

T0 = datetime(2026, 11, 25, 12, 0, tzinfo=UTC)
MONOTONIC_START = 1000.0  # an arbitrary monotonic reading at T0

# A chain of hand-offs longer than this without ever going quiet is a busy loop.
MOST_YIELDS = 20_000


@dataclass(eq=False)
class _Sleeper:
    deadline: timedelta
    woken: asyncio.Future[None]


@dataclass(eq=False)
class FakeTime:
    """A wall clock, a monotonic clock and the waits on them, moved by the test alone."""

    start: datetime = T0
    elapsed: timedelta = timedelta(0)  # simulated time since `start`: moves everything
    jumped: timedelta = timedelta(0)  # moves the wall clock alone (an estimate that moved)
    _sleepers: list[_Sleeper] = field(default_factory=list)

    # -- the clocks the code under test reads --------------------------------------------

    def now(self) -> datetime:
        return self.start + self.elapsed + self.jumped

    def monotonic(self) -> float:
        return MONOTONIC_START + self.elapsed.total_seconds()

    @property
    def seconds(self) -> float:
        """Simulated seconds since the start (what a test asserts on)."""
        return self.elapsed.total_seconds()

    # -- the Sleeper the code under test waits on ----------------------------------------

    async def wait(self, *events: asyncio.Event, timeout: float | None) -> None:
        """Return when any of `events` is set, or when the test has moved time past
        `timeout` seconds from now (None: only on an event)."""
        woken = asyncio.get_running_loop().create_future()
        sleeper = None
        if timeout is not None:
            sleeper = _Sleeper(self.elapsed + _duration(timeout), woken)
            if sleeper.deadline <= self.elapsed:
                woken.set_result(None)  # due already: returns after one turn of the loop
            else:
                self._sleepers.append(sleeper)
        waiters = [asyncio.ensure_future(event.wait()) for event in events]
        try:
            await asyncio.wait([woken, *waiters], return_when=asyncio.FIRST_COMPLETED)
        finally:
            for waiter in waiters:
                waiter.cancel()
            woken.cancel()
            if sleeper in self._sleepers:
                self._sleepers.remove(sleeper)

    async def sleep(self, seconds: float) -> None:
        await self.wait(timeout=seconds)

    # -- what a test does -----------------------------------------------------------------

    def jump(self, seconds: float) -> None:
        """Move the wall clock alone, as when the estimate of the server's clock moves:
        nobody waiting wakes for it (the monotonic clock did not move)."""
        self.jumped += _duration(seconds)

    def jump_to(self, instant: datetime) -> None:
        self.jumped += instant - self.now()

    async def advance(self, seconds: float) -> None:
        """Let `seconds` pass: every wait due meanwhile ends at its own instant, in order,
        and what it sets off runs before time moves on."""
        await self.advance_to(self.now() + _duration(seconds))

    async def advance_to(self, instant: datetime) -> None:
        target = self.elapsed + (instant - self.now())
        if target < self.elapsed:
            raise ValueError(f"time runs forward only: {instant} is in the past")
        await self.run_until_idle()
        while (deadline := self._next_deadline()) is not None and deadline <= target:
            self._move_to(deadline)
            await self.run_until_idle()
        self._move_to(target)
        await self.run_until_idle()

    async def until(self, predicate: Callable[[], object], *, within: float = 86_400.0) -> None:
        """Let time pass, from one wait's end to the next, until `predicate` holds; fail if
        it never can (nothing waits on time any more) or not within `within` seconds."""
        limit = self.elapsed + _duration(within)
        await self.run_until_idle()
        while not predicate():
            deadline = self._next_deadline()
            if deadline is None:
                raise AssertionError("never: every task waits, and none on time")
            if deadline > limit:
                raise AssertionError(f"not within {within} simulated seconds")
            self._move_to(deadline)
            await self.run_until_idle()

    async def step(self) -> None:
        """Move time to the next instant a wait ends, and let what it sets off run; fail
        if nothing waits on time."""
        await self.run_until_idle()
        deadline = self._next_deadline()
        if deadline is None:
            raise AssertionError("no next instant: every task waits, and none on time")
        self._move_to(deadline)
        await self.run_until_idle()

    async def run_until_idle(self) -> None:
        """Let every task run until each waits (on an event or on simulated time)."""
        loop = asyncio.get_running_loop()
        quiet = 0
        for _ in range(MOST_YIELDS):
            await asyncio.sleep(0)
            # asyncio's queue of callbacks ready to run (private; see the module docstring).
            ready = getattr(loop, "_ready", None)
            quiet = quiet + 1 if ready is None or not ready else 0
            if quiet >= (3 if ready is not None else 200):
                return
        raise AssertionError("the event loop never goes quiet: a busy loop?")

    # -- inside ---------------------------------------------------------------------------

    def _next_deadline(self) -> timedelta | None:
        return min((s.deadline for s in self._sleepers), default=None)

    def _move_to(self, elapsed: timedelta) -> None:
        self.elapsed = max(self.elapsed, elapsed)
        for sleeper in [s for s in self._sleepers if s.deadline <= self.elapsed]:
            self._sleepers.remove(sleeper)
            if not sleeper.woken.done():
                sleeper.woken.set_result(None)


def _duration(seconds: float) -> timedelta:
    return timedelta(seconds=seconds)
