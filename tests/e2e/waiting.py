"""Polling helpers for e2e tests: wait on the API server's state, never on sleeps alone."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

T = TypeVar("T")


async def wait_for(
    fetch: Callable[[], Awaitable[T]],
    ready: Callable[[T], bool],
    *,
    timeout: float = 30,
    interval: float = 0.2,
    retry_on: tuple[type[BaseException], ...] = (),
) -> T:
    """Poll `fetch()` until `ready(result)`; fail with the last result after `timeout`."""
    end = time.monotonic() + timeout
    last: Any = None
    while True:
        try:
            result = await fetch()
            if ready(result):
                return result
            last = result
        except retry_on as exc:
            last = exc
        if time.monotonic() > end:
            raise AssertionError(f"not ready after {timeout}s; last: {str(last)[:500]}")
        await asyncio.sleep(interval)


def condition(obj: dict[str, Any], kind: str) -> str | None:
    """The status ("True", "False", "Unknown") of condition `kind`, or None if absent."""
    for cond in (obj.get("status") or {}).get("conditions") or []:
        if cond.get("type") == kind:
            return str(cond.get("status"))
    return None
