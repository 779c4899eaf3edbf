"""Kubernetes Events about schedules: every decision leaves a trace `kubectl describe` shows.

Why it exists: a skipped, missed, replaced or failed tick must never pass in silence,
but posting an Event must never delay a firing or take the operator down. Events go
into a bounded queue that one background task drains; when the queue is full (an
API server in trouble), the oldest notes are dropped and counted. The drain yields to
the Job creates in flight (the applier says when it creates, `creating()`): in a herd
the API server is the limit, and an Event posted then delays a firing. A note waits
for them at most YIELD_AT_MOST, so a sustained load never starves the Events. At the
stop, the notes still queued are sent for at most FLUSH_AT_MOST (the Lease is released
by then, and the process has its termination grace period): a graceful stop right after
a decision does not lose the Event that says why.

What it must never do: raise into the caller, or block it.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import uuid
from collections.abc import Iterator, Mapping
from typing import Any

from punctual.clocks import Clock
from punctual.core.records import EventNote
from punctual.core.times import format_time
from punctual.kube.client import Api, ApiError

logger = logging.getLogger(__name__)

COMPONENT = "punctual"
YIELD_AT_MOST = 5.0  # seconds an Event waits for the Job creates in flight
FLUSH_AT_MOST = 3.0  # seconds spent at the stop sending the Events still queued


class EventRecorder:
    def __init__(self, api: Api, *, clock: Clock, capacity: int = 10_000) -> None:
        self.api = api
        self.clock = clock
        self._queue: asyncio.Queue[tuple[dict[str, Any], EventNote]] = asyncio.Queue(capacity)
        self.dropped = 0
        self.posted = 0
        self._creates = 0  # Job creates in flight
        self._idle = asyncio.Event()  # set while no create is in flight
        self._idle.set()

    @contextlib.contextmanager
    def creating(self) -> Iterator[None]:
        """Around a Job create: Events wait while any is in flight (at most YIELD_AT_MOST)."""
        self._creates += 1
        self._idle.clear()
        try:
            yield
        finally:
            self._creates -= 1
            if self._creates == 0:
                self._idle.set()

    def post(self, obj: Mapping[str, Any], note: EventNote) -> None:
        meta = obj["metadata"]
        ref = {
            "apiVersion": obj.get("apiVersion", "punctual.dev/v1"),
            "kind": obj.get("kind", "CronSchedule"),
            "name": meta["name"],
            "namespace": meta["namespace"],
            "uid": meta["uid"],
        }
        if self._queue.full():
            self._queue.get_nowait()
            self.dropped += 1
        self._queue.put_nowait((ref, note))
        log = logger.warning if note.type == "Warning" else logger.info
        log("%s/%s %s: %s", meta["namespace"], meta["name"], note.reason, note.message)

    async def run(self, stop: asyncio.Event) -> None:
        """Send the queued notes until `stop`, then flush what is left (FLUSH_AT_MOST)."""
        try:
            await self._drain(stop)
        finally:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._flush(), FLUSH_AT_MOST)
            if not self._queue.empty():
                logger.warning("stopping with %d Events not posted", self._queue.qsize())

    async def _flush(self) -> None:
        while not self._queue.empty():
            ref, note = self._queue.get_nowait()
            await self._send(ref, note)

    async def _drain(self, stop: asyncio.Event) -> None:
        while not stop.is_set():
            getter = asyncio.ensure_future(self._queue.get())
            stopper = asyncio.ensure_future(stop.wait())
            done, _ = await asyncio.wait({getter, stopper}, return_when=asyncio.FIRST_COMPLETED)
            stopper.cancel()
            if getter not in done:
                getter.cancel()
                return
            ref, note = getter.result()
            if not self._idle.is_set():
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._idle.wait(), YIELD_AT_MOST)
            await self._send(ref, note)

    async def _send(self, ref: dict[str, Any], note: EventNote) -> None:
        now = format_time(self.clock.now().replace(microsecond=0))
        body = {
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": {
                "name": f"{ref['name']}.{uuid.uuid4().hex[:12]}",
                "namespace": ref["namespace"],
            },
            "involvedObject": ref,
            "type": note.type,
            "reason": note.reason,
            "message": note.message[:1024],
            "source": {"component": COMPONENT},
            "reportingComponent": COMPONENT,
            "reportingInstance": COMPONENT,
            "firstTimestamp": now,
            "lastTimestamp": now,
            "count": 1,
        }
        try:
            await self.api.create(f"/api/v1/namespaces/{ref['namespace']}/events", body)
            self.posted += 1
        except ApiError as error:
            logger.debug("posting Event %s failed: %s", note.reason, error)
