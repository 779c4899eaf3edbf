"""The event loop's lag: how late a timer wakes, the worst of the last window exported."""

from __future__ import annotations

import asyncio

from punctual.runtime.sampling import LagSampler


class HeldLoop:
    """A Sleeper whose waits end late by scripted lags (a loop something held), on its
    own monotonic clock; once the script is done it sets `stop`."""

    def __init__(self, lags: list[float], stop: asyncio.Event) -> None:
        self.now = 100.0
        self.lags = list(lags)
        self.stop = stop

    def monotonic(self) -> float:
        return self.now

    async def wait(self, *events: asyncio.Event, timeout: float | None) -> None:
        assert timeout is not None
        self.now += timeout + self.lags.pop(0)
        if not self.lags:
            self.stop.set()

    async def sleep(self, seconds: float) -> None:
        await self.wait(timeout=seconds)


async def test_the_worst_lag_of_the_window_is_reported() -> None:
    stop = asyncio.Event()
    loop = HeldLoop([0.0, 0.25, 0.0, 0.05, 0.0], stop)
    sampler = LagSampler(monotonic=loop.monotonic, sleeper=loop, interval=0.1, window=10.0)
    await sampler.run(stop)
    assert abs(sampler.worst() - 0.25) < 1e-9


async def test_a_lag_older_than_the_window_is_forgotten() -> None:
    stop = asyncio.Event()
    loop = HeldLoop([0.5, 0.0, 0.0], stop)
    sampler = LagSampler(monotonic=loop.monotonic, sleeper=loop, interval=0.1, window=10.0)
    await sampler.run(stop)
    assert abs(sampler.worst() - 0.5) < 1e-9
    loop.now += 10.0  # the 0.5 s lag is now more than a window old
    assert sampler.worst() == 0.0


async def test_no_sample_yet_is_no_lag_and_stopping_records_nothing() -> None:
    stop = asyncio.Event()
    stop.set()
    loop = HeldLoop([3.0], asyncio.Event())
    sampler = LagSampler(monotonic=loop.monotonic, sleeper=loop)
    await sampler.run(stop)
    assert sampler.worst() == 0.0
