"""Keeping the estimate of the API server's clock sharp: probes where they narrow it most.

Why it exists: "is it due?" is decided on the API server's clock, estimated from the
Date headers of its responses (clocks.ServerClock). A Date header has whole seconds,
so a probe sent just before an estimated second boundary narrows the estimate most.

What it must never do: write anything; its only request is GET /version.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from datetime import timedelta

from punctual.clocks import ServerClock
from punctual.kube.client import Api, ApiError

logger = logging.getLogger("punctual")

PRECISION = timedelta(milliseconds=10)
RECHECK = 30.0  # seconds between probes once precise, to follow drift


async def calibrate(clock: ServerClock, api: Api, stop: asyncio.Event) -> None:
    """Until the offset is known to PRECISION, probe at estimated second boundaries a few
    times a second; then once every RECHECK seconds. Returns when `stop` is set."""
    while not stop.is_set():
        precise = clock.samples >= 3 and clock.uncertainty <= PRECISION
        wait = clock.seconds_to_next_boundary() + (RECHECK if precise else 0.0)
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), timeout=wait)
            return
        try:
            await api.get("/version")
        except ApiError as error:
            logger.debug("clock probe failed: %s", error)
            await asyncio.sleep(1)
