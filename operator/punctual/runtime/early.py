"""Deciding while the lists stream in: a new leader's first firings before its index is whole.

Why it exists: at 100 000 schedules the list takes a minute; a leader that decided
nothing until it was in left every tick of that minute unfired (issue 24 item 2). As
the list hands each schedule over, core.early picks those due within its horizon; this
lists their Jobs and marks them decidable, so the scheduler loop decides them while the
rest of the list streams in. Everything else waits for the complete lists, as before.

The order that keeps a claim in flight from being fired twice: a schedule's Jobs are
listed *after* the schedule was read (only schedules of pages already in are listed
for). A claim in the status we read was written before the Job it claims was created,
so that Job, if it was created at all, is in the Jobs list made after; from then on
only this leader creates (an old leader is fenced out by the Lease's epoch), and its
own creates are kept by the leader's view until the watch shows them. The Jobs listed
here go into the index the complete Jobs list fills (kube.jobwatching), which keeps
them when that list, begun earlier, lacks them. A create of a Job that exists answers
409, which the applier takes as ours (kube.applying).

What it must never do: mark a schedule decidable before its Jobs are listed, list for a
replica that does not lead or has not listed the FreezeWindows and Calendars, or outlive
the complete lists (once they are in, every schedule is decidable and this stops).
"""

from __future__ import annotations

import asyncio
import logging
from collections import defaultdict
from collections.abc import Callable, Mapping
from datetime import datetime
from typing import Any

from punctual.clocks import Clock, EventLoopSleeper, Sleeper
from punctual.core.early import due_soon
from punctual.core.keys import LABEL_SCHEDULE_UID
from punctual.kube.client import Api, ApiError
from punctual.kube.jobwatching import JobIndex
from punctual.runtime.scheduling import Key

logger = logging.getLogger("punctual")

BATCH = 100  # schedule uids per Jobs list (a set-based label selector)
POLL = 1.0  # seconds between looks while not leading


class EarlyDecisions:
    """The schedules a leader may decide before its lists are complete."""

    def __init__(
        self,
        api: Api,
        jobs: JobIndex,
        *,
        clock: Clock,
        may_decide: Callable[[], bool],
        notify: Callable[[Key], None],
        sleeper: Sleeper | None = None,
    ) -> None:
        self.api = api
        self.jobs = jobs
        self.clock = clock
        # Whether this replica leads now, with what decisions read besides the schedule
        # and its Jobs (FreezeWindows, Calendars) listed.
        self.may_decide = may_decide
        self.notify = notify
        self.candidates: dict[Key, tuple[str, datetime]] = {}  # key -> (uid, next tick)
        self.known: dict[Key, str] = {}  # key -> the uid whose Jobs are listed
        self.lists = 0  # Jobs lists made (tests, logs)
        self.done = False
        self._kick = asyncio.Event()
        self._sleeper = sleeper or EventLoopSleeper()

    def consider(self, key: Key, body: Mapping[str, Any] | None) -> None:
        """A schedule as the list or the watch handed it over, before the lists are in."""
        if self.done:
            return
        if body is None:
            self.candidates.pop(key, None)
            self.known.pop(key, None)
            return
        uid = str((body.get("metadata") or {}).get("uid", ""))
        tick = due_soon(body, now=self.clock.now())
        if tick is None:  # not due soon (or no longer on its own): it waits for the lists
            self.candidates.pop(key, None)
            self.known.pop(key, None)
            return
        self.candidates[key] = (uid, tick)
        if self.known.get(key) != uid:
            self.known.pop(key, None)
            self._kick.set()

    def decidable(self, key: Key, uid: str | None) -> bool:
        """Whether `key` (with this uid) may be decided before the lists are in."""
        return uid is not None and self.known.get(key) == uid

    def led(self, leading: bool) -> None:
        """Leadership started or lapsed. Lapsed: the Jobs listed may be stale by the time
        it is back, so they are listed again then."""
        if not leading:
            self.known.clear()
        self._kick.set()

    async def run(self, stop: asyncio.Event, synced: asyncio.Event) -> None:
        """List the Jobs of the candidates as they come, while leading, until `synced`."""
        while not stop.is_set() and not synced.is_set():
            self._kick.clear()
            if self.may_decide():
                await self._list_waiting()
            await self._sleeper.wait(stop, synced, self._kick, timeout=POLL)
        self.done = True
        self.candidates.clear()
        self.known.clear()

    async def _list_waiting(self) -> None:
        waiting = sorted(
            (tick, key, uid)
            for key, (uid, tick) in self.candidates.items()
            if self.known.get(key) != uid
        )
        by_namespace: dict[str, list[tuple[Key, str]]] = defaultdict(list)
        for _, key, uid in waiting:
            by_namespace[key[0]].append((key, uid))
        for namespace, members in by_namespace.items():
            for start in range(0, len(members), BATCH):
                if not self.may_decide():
                    return
                await self._list(namespace, members[start : start + BATCH])

    async def _list(self, namespace: str, members: list[tuple[Key, str]]) -> None:
        uids = ",".join(uid for _, uid in members)
        params = {"labelSelector": f"{LABEL_SCHEDULE_UID} in ({uids})", "limit": "500"}
        try:
            while True:
                body = await self.api.get(JobIndex.path(namespace), **params)
                for item in body.get("items") or []:
                    self.jobs.put_early(item)
                token = (body.get("metadata") or {}).get("continue")
                if not token:
                    break
                params["continue"] = str(token)
        except ApiError as error:
            logger.warning("listing the Jobs of %d due schedules: %s", len(members), error)
            return  # they wait for the next round, or for the complete lists
        self.lists += 1
        for key, uid in members:
            if self.candidates.get(key, ("", None))[0] == uid:
                self.known[key] = uid
                self.notify(key)
