"""The operator's lifecycle: a part that stops before the process is told to stop is
fatal, and is reported once with its cause (so `punctual run` exits non-zero)."""

from __future__ import annotations

import asyncio
import logging

import pytest

from punctual.runtime.supervision import Fatal, first_failure


async def runs_until(stop: asyncio.Event) -> None:
    await stop.wait()


async def fails_after(seconds: float) -> None:
    await asyncio.sleep(seconds)
    raise KeyError("getpwuid(): uid not found: 65532")


async def returns_after(seconds: float) -> None:
    await asyncio.sleep(seconds)


async def test_a_stop_that_was_asked_for_is_no_failure() -> None:
    stop = asyncio.Event()
    parts = [asyncio.create_task(runs_until(stop), name="scheduler")]
    asyncio.get_running_loop().call_later(0.01, stop.set)
    assert await first_failure(stop, parts) is None
    await asyncio.gather(*parts)


async def test_a_part_that_raises_is_fatal_and_logged_with_its_cause(
    caplog: pytest.LogCaptureFixture,
) -> None:
    stop = asyncio.Event()
    parts = [
        asyncio.create_task(runs_until(stop), name="scheduler"),
        asyncio.create_task(fails_after(0.01), name="watching"),
    ]
    with caplog.at_level(logging.ERROR, logger="punctual"):
        failure = await first_failure(stop, parts)
    assert isinstance(failure, Fatal)
    assert str(failure) == "watching failed: KeyError: 'getpwuid(): uid not found: 65532'"
    [record] = caplog.records
    assert record.exc_info is not None and isinstance(record.exc_info[1], KeyError)
    stop.set()
    await asyncio.gather(*parts, return_exceptions=True)


async def test_a_part_that_returns_before_the_stop_is_fatal() -> None:
    stop = asyncio.Event()
    parts = [
        asyncio.create_task(runs_until(stop), name="events"),
        asyncio.create_task(returns_after(0.01), name="leader election"),
    ]
    failure = await first_failure(stop, parts)
    assert str(failure) == "leader election stopped on its own"
    stop.set()
    await asyncio.gather(*parts)
