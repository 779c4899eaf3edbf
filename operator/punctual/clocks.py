"""The one place that reads the wall clock.

Everything else takes a `Clock` so that tests pass a fixed instant and the operator
can pass the API server's clock (see DESIGN.md: "is it due?" is decided on the API
server's clock, not the node's). Nothing outside this module calls `datetime.now()`
or `time.time()`; a ruff rule enforces it.
"""

from __future__ import annotations

import time
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


@dataclass
class OffsetClock:
    """The node's clock corrected by a measured offset (e.g. to the API server's clock)."""

    offset: timedelta = timedelta(0)

    def now(self) -> datetime:
        return datetime.now(UTC) + self.offset


def monotonic() -> float:
    """Seconds on a monotonic clock, for durations and deadlines that must not jump."""
    return time.monotonic()


@dataclass(frozen=True)
class _Bounds:
    low: timedelta
    high: timedelta


class ServerClock:
    """The API server's clock, estimated from the Date headers of its responses.

    "Is it due?" is decided on the API server's clock (DESIGN.md), because Job
    creationTimestamps and every other replica agree on it, while this node's clock
    may be off by a minute. A Date header has whole-second resolution, but each
    response bounds the offset: the server read its clock at some instant between
    `sent` and `received`, and it said D, so offset = server - local lies in
    [D - received, D + 1s - sent]. Intersecting the bounds of recent responses
    narrows the estimate to well under a second within a few requests. If the
    intersection becomes empty (a clock jumped), the estimate restarts from the
    newest response.
    """

    def __init__(self, local: Clock | None = None, *, window: int = 64) -> None:
        self._local = local or SystemClock()
        self._window = window
        self._bounds: list[_Bounds] = []
        self._low = timedelta(0)
        self._high = timedelta(0)

    def observe(self, sent: datetime, received: datetime, server_date: datetime) -> None:
        sample = _Bounds(server_date - received, server_date + timedelta(seconds=1) - sent)
        low = max([b.low for b in self._bounds] + [sample.low])
        high = min([b.high for b in self._bounds] + [sample.high])
        if low > high:  # inconsistent with the past: a clock jumped
            self._bounds = []
            low, high = sample.low, sample.high
        self._bounds = [*self._bounds, sample][-self._window :]
        self._low, self._high = low, high

    @property
    def samples(self) -> int:
        return len(self._bounds)

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
