"""A client-side token bucket for the API server, as client-go's QPS and burst.

Why it exists: a thousand schedules on the same tick must not become a thousand
simultaneous writes that trip the API server's priority-and-fairness limits; the
bucket smooths them to `qps` with bursts of `burst`. It sleeps on the monotonic
clock, which is injectable for tests.
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import Awaitable, Callable

from punctual.clocks import Monotonic, monotonic


class RateLimiter:
    def __init__(
        self,
        qps: float,
        burst: int,
        *,
        monotonic: Monotonic = monotonic,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    ) -> None:
        if not (math.isfinite(qps) and qps > 0) or burst < 1:
            raise ValueError(f"need qps > 0 and burst >= 1, got {qps} and {burst}")
        self.qps = qps
        self.burst = burst
        self._monotonic = monotonic
        self._sleep = sleep
        self._tokens = float(burst)
        self._updated = monotonic()

    def _refill(self) -> None:
        now = self._monotonic()
        self._tokens = min(self.burst, self._tokens + (now - self._updated) * self.qps)
        self._updated = now

    async def acquire(self) -> None:
        """Take one token, waiting for it if the bucket is empty (FIFO enough for us)."""
        self._refill()
        self._tokens -= 1
        if self._tokens < 0:
            await self._sleep(-self._tokens / self.qps)
