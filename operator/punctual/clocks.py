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
