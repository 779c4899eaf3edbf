"""Supervision of the process's parts: a part that stops on its own is fatal, and said so.

Why it exists: kopf's watches, the Lease loop, the scheduler loop and the rest run
until the process is told to stop. One that raises or returns before that leaves a
process that looks alive but does nothing, or one that exits 0 and looks Completed
to the kubelet (the image's silent crash loop). Here such a part ends the process
with its cause logged once, and `punctual run` exits 1.

What it must never do: swallow an exception, or call a stop that was asked for a
failure.
"""

from __future__ import annotations

import asyncio
import logging
import signal
from typing import Any

logger = logging.getLogger("punctual")


class Fatal(Exception):
    """A part of the operator stopped while nobody asked it to: the process must exit
    non-zero so that Kubernetes shows the failure and restarts the pod."""


async def first_failure(stop: asyncio.Event, parts: list[asyncio.Task[Any]]) -> Fatal | None:
    """Wait until `stop` is set or a part ends on its own; return that part's failure.

    Every part runs until the stop: one that returns or raises before it is fatal,
    and the cause is logged here, once, with its traceback.
    """
    stopper = asyncio.ensure_future(stop.wait())
    done, _ = await asyncio.wait({stopper, *parts}, return_when=asyncio.FIRST_COMPLETED)
    stopper.cancel()
    if stop.is_set():
        return None
    part = next(p for p in parts if p in done)
    error = None if part.cancelled() else part.exception()
    if error is None:
        logger.error("%s stopped on its own; shutting down", part.get_name())
        return Fatal(f"{part.get_name()} stopped on its own")
    logger.error(
        "%s failed: %s: %s; shutting down",
        part.get_name(),
        type(error).__name__,
        error,
        exc_info=error,
    )
    return Fatal(f"{part.get_name()} failed: {type(error).__name__}: {error}")


def install_stop_signals(stop: asyncio.Event) -> None:
    """SIGTERM and SIGINT set `stop` (the Lease is released on the way out)."""
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, _stop_on, sig, stop)


def _stop_on(sig: signal.Signals, stop: asyncio.Event) -> None:
    if not stop.is_set():
        logger.info("received %s; releasing the Lease and stopping", sig.name)
    stop.set()
