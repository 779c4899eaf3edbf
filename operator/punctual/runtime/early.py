"""Deciding while the lists stream in: a new leader's first firings before its index is whole.

Why it exists: at 100 000 schedules the list takes a minute; a leader that decided
nothing until it was in left every tick of that minute unfired (issue 24 item 2). As
the list hands each schedule over, core.early picks those due within its horizon
(`candidates`); once this replica leads they are woken, soonest first, and each pass
over one of them is preceded by `refresh`: the schedule read again, then its Jobs
listed. Everything else waits for the complete lists, as before.

Why read both again, and in that order: the page a schedule came in may be a minute
old and no watch follows it yet. Since it was read, the old leader may have fired a
tick, recorded it and let its Job go (deleted by its TTL): deciding on the page and
on the Jobs as they are now would fire that tick again. And a Job that finished since
the last look would still count as running (Forbid would skip a tick wrongly). So each
pass reads the schedule as it is now, which holds every write of the old leader (it
stopped writing before this replica could take the Lease), and then lists the
schedule's Jobs: a claim in the status read was written before its Job was created,
and its Job released only after the firing was recorded in status, so the Jobs list
made after the read holds every Job that read's claims need. From then on only this
leader writes, and its own writes are kept by the leader's view (runtime.view) until
the watch shows them. The Jobs listed replace what the index held of that schedule's
Jobs, while its namespace's own list is not in (kube.jobwatching.put_early).

What it must never do: let a schedule be decided before it is read again and its Jobs
listed after, decide for a replica that does not lead or has not followed the
FreezeWindows and Calendars, or outlive the complete lists (once they are in, every
schedule is decidable and this stops).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Mapping
from datetime import datetime
from typing import Any

from punctual.clocks import Clock, EventLoopSleeper, Sleeper
from punctual.core.early import due_soon
from punctual.core.keys import LABEL_SCHEDULE_UID
from punctual.kube.applying import schedule_path
from punctual.kube.client import Api, ApiError, Body, NotFound
from punctual.kube.jobwatching import JobIndex
from punctual.runtime.scheduling import Key

logger = logging.getLogger("punctual")

POLL = 1.0  # seconds between looks while this replica may not decide


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
        # and its Jobs (FreezeWindows, Calendars) followed.
        self.may_decide = may_decide
        self.notify = notify
        self.candidates: dict[Key, datetime] = {}  # key -> the next tick its page names
        self.woken: set[Key] = set()  # candidates woken during this leadership
        self.refreshes = 0  # passes preceded by a fresh read (tests, logs)
        self.done = False
        self._term = 0  # counts leaderships: a read begun in an earlier one is void
        self._kick = asyncio.Event()
        self._sleeper = sleeper or EventLoopSleeper()

    def consider(self, key: Key, body: Mapping[str, Any] | None) -> None:
        """A schedule as the list or the watch handed it over, before the lists are in."""
        if self.done:
            return
        tick = None if body is None else due_soon(body, now=self.clock.now())
        if tick is None:  # gone, or not due soon (or not on its own): waits for the lists
            self.candidates.pop(key, None)
            return
        if key not in self.candidates:
            self._kick.set()
        self.candidates[key] = tick

    def decidable(self, key: Key) -> bool:
        """Whether a pass over `key` may run before the lists are in (after `refresh`)."""
        return not self.done and key in self.candidates and self.may_decide()

    def led(self, leading: bool) -> None:
        """Leadership started or lapsed: the candidates are woken again when it starts."""
        self._term += 1
        self.woken.clear()
        self._kick.set()

    async def refresh(
        self, key: Key, view_reread: Callable[[Key, Body | None], None]
    ) -> bool | None:
        """Read the schedule again, then list its Jobs into the index. True: a pass may
        decide it now (it exists, is still due soon, and leadership held throughout);
        False: a read failed, try again soon; None: it waits for the lists."""
        term = self._term
        try:
            body: Body | None = await self.api.get(schedule_path(*key))
        except NotFound:
            body = None
        except ApiError as error:
            logger.warning("%s/%s: reading it before the lists are in: %s", *key, error)
            return False
        if body is None or due_soon(body, now=self.clock.now()) is None:
            view_reread(key, body)
            self.consider(key, body)
            return None
        uid = str((body.get("metadata") or {}).get("uid", ""))
        params = {"labelSelector": f"{LABEL_SCHEDULE_UID}={uid}", "limit": "500"}
        items: list[Body] = []
        try:
            while True:
                page = await self.api.get(JobIndex.path(key[0]), **params)
                items += page.get("items") or []
                token = (page.get("metadata") or {}).get("continue")
                if not token:
                    break
                params["continue"] = str(token)
        except ApiError as error:
            logger.warning("%s/%s: listing its Jobs before the lists are in: %s", *key, error)
            return False
        if term != self._term or not self.may_decide():
            return None  # leadership lapsed meanwhile: another leader may have written
        self.jobs.put_early(key[0], uid, items)
        view_reread(key, body)
        self.refreshes += 1
        return True

    async def run(self, stop: asyncio.Event, synced: asyncio.Event) -> None:
        """Wake the candidates, soonest first, while this replica may decide, until
        `synced`."""
        while not stop.is_set() and not synced.is_set():
            self._kick.clear()
            if self.may_decide():
                waiting = sorted(
                    (tick, key) for key, tick in self.candidates.items() if key not in self.woken
                )
                for _, key in waiting:
                    self.woken.add(key)
                    self.notify(key)
            await self._sleeper.wait(stop, synced, self._kick, timeout=POLL)
        self.done = True
        self.candidates.clear()
        self.woken.clear()
