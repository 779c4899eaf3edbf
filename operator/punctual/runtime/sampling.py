"""The event loop's lag, sampled: how much later than asked a timer wakes.

Why it exists: every part of the operator shares one event loop. Whatever holds it (a
long decision, a large JSON parse, a synchronous call) delays every firing behind it,
and a herd of due ticks whose creates trickle out while the machine sits idle is the
mark of such a hold. A timer asks to wake every `INTERVAL`; how much later it wakes is
the lag, and the largest lag of the last `WINDOW` is what `/metrics` exports
(`punctual_event_loop_lag_seconds`).

What it must never do: hold the loop itself (a sample is two clock reads), or read any
clock but the injected monotonic one.
"""

from __future__ import annotations

import asyncio
from collections import deque

from punctual.clocks import EventLoopSleeper, Monotonic, Sleeper, monotonic

INTERVAL = 0.1  # seconds between samples
WINDOW = 10.0  # seconds of samples the exported worst lag covers


class LagSampler:
    def __init__(
        self,
        *,
        monotonic: Monotonic = monotonic,
        sleeper: Sleeper | None = None,
        interval: float = INTERVAL,
        window: float = WINDOW,
    ) -> None:
        self._monotonic = monotonic
        self._sleeper = sleeper or EventLoopSleeper()
        self.interval = interval
        self.window = window
        self._samples: deque[tuple[float, float]] = deque()  # (when woken, lag), oldest first

    async def run(self, stop: asyncio.Event) -> None:
        """Sample until `stop`."""
        while not stop.is_set():
            asked = self._monotonic()
            await self._sleeper.wait(stop, timeout=self.interval)
            if stop.is_set():
                return
            woken = self._monotonic()
            self._samples.append((woken, max(0.0, woken - asked - self.interval)))
            self._forget_before(woken - self.window)

    def worst(self) -> float:
        """The largest lag sampled in the last `window` seconds (0 when none)."""
        self._forget_before(self._monotonic() - self.window)
        return max((lag for _, lag in self._samples), default=0.0)

    def _forget_before(self, instant: float) -> None:
        while self._samples and self._samples[0][0] < instant:
            self._samples.popleft()
