"""The one place that reads the wall clock, and that says how a loop waits for time.

Everything else takes a `Clock` so that tests pass a fixed instant and the operator
can pass the API server's clock (see DESIGN.md: "is it due?" is decided on the API
server's clock, not the node's). Nothing outside this module calls `datetime.now()`
or `time.time()`; a ruff rule enforces it.

Loops that wait (the scheduler loop, the Lease loop) take a `Sleeper` the same way:
`EventLoopSleeper` waits on asyncio's own clock, and a test passes simulated time
(tests/unit/faketime.py) so that "processed at T, not before" or "leader within 10 s"
is asserted in no real time.

What it must never do: decide anything. It tells the time and waits; what is due,
and when a Lease expires, is decided by the callers.
"""

from __future__ import annotations

import asyncio
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Protocol


class Clock(Protocol):
    """Tells the current instant as an aware UTC datetime."""

    def now(self) -> datetime: ...


class SystemClock:
    """The node's own wall clock."""

    def now(self) -> datetime:
        return datetime.now(UTC)


@dataclass
class FixedClock:
    """A clock that says what it is told; for tests and for `punctual next --from`."""

    instant: datetime

    def now(self) -> datetime:
        return self.instant

    def advance(self, seconds: float) -> None:
        self.instant += timedelta(seconds=seconds)


# A monotonic clock: seconds that never jump, for durations and deadlines. Parameters
# of this type are named `monotonic`; a `clock` is always a wall `Clock`.
Monotonic = Callable[[], float]


def monotonic() -> float:
    """Seconds on a monotonic clock, for durations and deadlines that must not jump."""
    return time.monotonic()


class Sleeper(Protocol):
    """How a loop waits: for an event, or for seconds to pass on the loop's clock.

    The seconds are durations (a timeout, a retry period, the seconds until a wake-up
    instant read on a `Clock`), never instants: a `Sleeper` knows no wall clock."""

    async def wait(self, *events: asyncio.Event, timeout: float | None) -> None:
        """Return when any of `events` is set, or after `timeout` seconds (None: no limit)."""
        ...

    async def sleep(self, seconds: float) -> None:
        """Return after `seconds`."""
        ...


class EventLoopSleeper:
    """Waits on asyncio's event loop, whose clock is the monotonic one."""

    async def wait(self, *events: asyncio.Event, timeout: float | None) -> None:
        await first_of(*events, timeout=timeout)

    async def sleep(self, seconds: float) -> None:
        await asyncio.sleep(seconds)


async def first_of(*events: asyncio.Event, timeout: float | None) -> None:
    """Return when any of `events` is set, or after `timeout` seconds (None: no limit)."""
    waiters = [asyncio.ensure_future(e.wait()) for e in events]
    try:
        await asyncio.wait(waiters, timeout=timeout, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for waiter in waiters:
            waiter.cancel()


class ServerClock:
    """The API server's clock, estimated from the Date headers of its responses.

    "Is it due?" is decided on the API server's clock (DESIGN.md), because Job
    creationTimestamps and every other replica agree on it, while this node's clock
    may be off by a minute. A Date header has whole-second resolution, but each
    response bounds the offset: the server read its clock at some instant between
    `sent` and `received`, and it said D, so offset = server - local lies in
    [D - received, D + 1s - sent]. Intersecting the bounds of the responses of the
    last `window` seconds narrows the estimate to well under a second within a few
    requests. If the intersection becomes empty (a clock jumped), the estimate
    restarts from the newest response.

    The window is one of time, not of a count of responses: under a herd, thousands of
    slow responses a minute bound the offset only loosely, and a window of the last N
    of them would forget the few precise ones and let `now()` fall behind by the
    responses' latency. The running maximum of the lower bounds and minimum of the
    upper bounds over the window are kept in monotonic queues, O(1) per response.
    """

    def __init__(self, local: Clock | None = None, *, window: float = 60.0) -> None:
        self._local = local or SystemClock()
        self._window = timedelta(seconds=window)
        self._lows: deque[tuple[datetime, timedelta]] = deque()  # lows decreasing
        self._highs: deque[tuple[datetime, timedelta]] = deque()  # highs increasing
        self._samples = 0
        self._low = timedelta(0)
        self._high = timedelta(0)

    def observe(self, sent: datetime, received: datetime, server_date: datetime) -> None:
        low, high = server_date - received, server_date + timedelta(seconds=1) - sent
        horizon = received - self._window
        for queue in (self._lows, self._highs):
            while queue and queue[0][0] < horizon:
                queue.popleft()
        if (self._lows and self._lows[0][1] > high) or (self._highs and self._highs[0][1] < low):
            self._lows.clear()  # inconsistent with the past: a clock jumped
            self._highs.clear()
            self._samples = 0
        while self._lows and self._lows[-1][1] <= low:
            self._lows.pop()
        self._lows.append((received, low))
        while self._highs and self._highs[-1][1] >= high:
            self._highs.pop()
        self._highs.append((received, high))
        self._samples += 1
        self._low, self._high = self._lows[0][1], self._highs[0][1]

    @property
    def samples(self) -> int:
        """Responses observed since the estimate last restarted."""
        return self._samples

    @property
    def offset(self) -> timedelta:
        """Best estimate of server minus local time (zero before any response)."""
        return (self._low + self._high) / 2

    @property
    def uncertainty(self) -> timedelta:
        """Half the width of the interval the offset is known to lie in."""
        return (self._high - self._low) / 2

    def seconds_to_next_boundary(self) -> float:
        """Local seconds until the estimated server clock next reads a whole second.

        A request sent then straddles the server's second boundary, so its Date header
        tells on which side the true offset lies: probing there halves the interval.
        Requests at a fixed phase (a timer's) would never narrow it.
        """
        server = self._local.now() + self.offset
        return 1.0 - (server.timestamp() % 1.0)

    def local_now(self) -> datetime:
        return self._local.now()

    def now(self) -> datetime:
        """The earliest the API server's clock can read now: a tick is never fired early.

        The true offset lies in [low, high]; reading the clock at the low end makes
        Punctual late by at most the interval's width (tens of milliseconds once a few
        responses have straddled a second boundary), and never early.
        """
        return self._local.now() + self._low
