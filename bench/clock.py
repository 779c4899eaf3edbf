"""The benchmark's clock: this host's wall clock, which is the API server's.

Why it exists: every figure compares an instant from the API server's audit log with a
tick, so the harness must read the very clock the API server stamps with, not a
monotonic one and not Punctual's injected clock. This is the one place that reads it,
plus the timestamped progress lines printed against it.

What it must never do: adjust, fake or offset the clock, or do anything at import time.
"""

from __future__ import annotations

import asyncio
import time
from datetime import UTC, datetime


def wall() -> float:
    """This host's clock, which is the API server's: the bench compares against it."""
    return time.time()  # noqa: TID251 - the bench reads the same clock as the API server


def hms(instant: float) -> str:
    """An instant as HH:MM:SS UTC, for progress lines."""
    return datetime.fromtimestamp(instant, UTC).strftime("%H:%M:%S")


def log(message: str) -> None:
    """A progress line on stdout, stamped with the wall clock."""
    print(f"[bench {hms(wall())}] {message}", flush=True)


async def sleep_until(instant: float) -> None:
    """Sleep until the wall clock reaches `instant` (in steps of at most a second)."""
    while (left := instant - wall()) > 0:
        await asyncio.sleep(min(left, 1.0))
