"""The FreezeWindows as the operator follows them: a first list at start (readiness waits
for it), then kopf's events (`kube.watching`, as for every small kind), and their status.

Why it exists: a decision needs the usable FreezeWindows of its schedule's namespace
(`freezes_of`). kopf tells every replica of each change, so a standby that takes over
knows them; a cluster without their CRD keeps firing (said once in the log). The first
shard's leader writes their status (schedules held, the current window, InvalidSpec)
after a change and every FREEZES_EVERY, through its applier. Any change wakes the
schedules of its namespace.

What it must never do: decide a firing, or write anything but a FreezeWindow's status.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from datetime import timedelta
from typing import Any

from punctual.clocks import Clock, first_of
from punctual.core.freezing import Freeze, freeze_status, read_freeze
from punctual.kube.client import ApiError, KubeClient, NotFound
from punctual.kube.sharding import ShardedElection
from punctual.runtime.scheduling import Key
from punctual.runtime.view import LeaderView

logger = logging.getLogger("punctual")

# How often the leader lists FreezeWindows (the watch tells it sooner) and writes their status.
FREEZES_EVERY = timedelta(seconds=5)

Bodies = dict[str, dict[str, dict[str, Any]]]  # namespace -> name -> body
# How their status is written: kube.applying.Applier.report_status of the first shard.
Report = Callable[[str, dict[str, Any]], Awaitable[bool]]


class FreezeWindows:
    def __init__(
        self,
        api: KubeClient,
        namespaces: list[str],
        *,
        view: LeaderView,
        election: ShardedElection,
        clock: Clock,
        notify: Callable[[Key], None],
        report: Report,
    ) -> None:
        self.api = api
        self.report = report  # the first shard's applier: guarded and rate-limited
        self.namespaces = namespaces  # empty: every namespace
        self.view = view
        self.election = election
        self.clock = clock
        self.notify = notify
        self.known: Bodies = {}
        self.listed = asyncio.Event()  # listed once, or found not served (readiness)
        self.dirty = asyncio.Event()  # one changed since their status was written

    def changed(self, namespace: str, name: str, body: dict[str, Any] | None) -> None:
        """kopf's event: a FreezeWindow changed (None: deleted)."""
        # Copy on write: a status write awaiting the API server walks the dicts it was
        # handed, and an event arriving meanwhile must not change them under it.
        known = {n: b for n, b in self.known.get(namespace, {}).items() if n != name}
        before = (self.known.get(namespace) or {}).get(name)
        if body is not None:
            known[name] = body
        self.known = {**self.known, namespace: known}
        self.dirty.set()
        # Only what a decision reads wakes the namespace's schedules: not the echo of a
        # status write of ours.
        if (before is None) != (body is None) or (before or {}).get("spec") != (body or {}).get(
            "spec"
        ):
            self._wake({namespace})

    def freezes_of(self, namespace: str) -> list[Freeze]:
        """The usable FreezeWindows of a namespace (an invalid one holds nothing)."""
        read = (read_freeze(body) for body in self.known.get(namespace, {}).values())
        return [freeze for freeze in read if isinstance(freeze, Freeze)]

    async def run(self, stop: asyncio.Event) -> None:
        """List the FreezeWindows once (readiness waits for it); then, kopf telling of
        each change, write their status after a change and every FREEZES_EVERY."""
        while not stop.is_set() and not self.listed.is_set():
            try:
                await self.refresh()
                self.listed.set()
            except NotFound:
                self.listed.set()  # not served: nothing to wait for
                logger.info("no FreezeWindow CRD installed: freeze windows are off")
            except ApiError as error:
                logger.warning("listing FreezeWindows failed: %s", error)
                await first_of(stop, timeout=1.0)
        while not stop.is_set():
            await first_of(stop, self.dirty, timeout=FREEZES_EVERY.total_seconds())
            self.dirty.clear()
            if self.election.electors[0].is_leader():  # one writer of their status
                await self._write_status(self.known)

    async def refresh(self) -> None:
        prefixes = [f"namespaces/{ns}/" for ns in self.namespaces] or [""]
        listed: Bodies = {}
        for prefix in prefixes:
            answer = await self.api.get(f"/apis/punctual.dev/v1/{prefix}freezewindows")
            for item in answer.get("items") or []:
                meta = item["metadata"]
                listed.setdefault(meta["namespace"], {})[meta["name"]] = item
        changed = {ns for ns in {*listed, *self.known} if listed.get(ns) != self.known.get(ns)}
        self.known = listed
        # One writer of FreezeWindow status: the leader of the first shard.
        if self.election.electors[0].is_leader():
            await self._write_status(listed)
        self._wake(changed)

    async def _write_status(self, listed: Bodies) -> None:
        labels: dict[str, list[dict[str, str]]] = {}
        for key in self.view.schedule_keys():
            if key[0] in listed:
                body = self.view.schedule(key) or {}
                labels.setdefault(key[0], []).append(
                    (body.get("metadata") or {}).get("labels") or {}
                )
        now = self.clock.now()
        for namespace, bodies in listed.items():
            for name, body in bodies.items():
                status = freeze_status(body, labels.get(namespace, []), now)
                if status != body.get("status"):
                    path = (
                        f"/apis/punctual.dev/v1/namespaces/{namespace}/freezewindows/{name}/status"
                    )
                    await self.report(path, status)

    def _wake(self, namespaces: set[str]) -> None:
        for key in self.view.schedule_keys():
            if key[0] in namespaces:
                self.notify(key)
