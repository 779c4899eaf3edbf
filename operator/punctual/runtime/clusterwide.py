"""The cluster-scoped objects schedules depend on: Calendars, ClusterFreezeWindows, and
the labels of the Namespaces those select.

Why it exists: a decision needs the Calendars its schedule names (`calendars`) and the
ClusterFreezeWindows whose namespaceSelector selects its namespace (`freezes_of`). They
are few, small and rarely change: every replica lists them once at the start (readiness
waits for it), and then kopf tells it of each change (`kube.watching`, as for every small
kind), so a standby that takes over knows them already; the same for the labels of the
Namespaces. A change wakes the schedules it concerns: those naming a changed Calendar,
and every schedule when a ClusterFreezeWindow or (while one exists) a Namespace's labels
change. A cluster without their CRDs keeps firing (said once in the log); a schedule
naming a Calendar then is held, as for any missing Calendar.

The status of these objects (InvalidSpec; the schedules they concern, the current
window) is written at once after one of them changed and otherwise every STATUS_EVERY
(counting references is a pass over every schedule), through the applier of the first
shard's leader of an
installation that watches every namespace: one confined to some namespaces sees only part
of the schedules, and two of them would fight over one cluster-scoped status.

What it must never do: decide a firing, or write anything but these objects' status.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any

from punctual.clocks import Clock, first_of
from punctual.core.calendars import Calendar, Known, calendar_status, read_calendar, referencing
from punctual.core.freezing import Freeze, Selector, freeze_status, read_cluster_freeze, selects
from punctual.kube.client import ApiError, KubeClient, NotFound
from punctual.kube.sharding import ShardedElection
from punctual.runtime.freezewindows import FREEZES_EVERY, Report
from punctual.runtime.scheduling import Key
from punctual.runtime.view import LeaderView

logger = logging.getLogger("punctual")

GROUP = "/apis/punctual.dev/v1"
# How often their status is rewritten when nothing of theirs changed (a schedule that
# names a Calendar, a window that began or ended).
STATUS_EVERY = timedelta(seconds=60)
Bodies = dict[str, dict[str, Any]]  # name -> body


class ClusterWide:
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
        self.namespaces = namespaces  # empty: every namespace (then it writes status)
        self.view = view
        self.election = election
        self.clock = clock
        self.notify = notify
        self.calendar_bodies: Bodies = {}
        self.freeze_bodies: Bodies = {}
        self.namespace_labels: dict[str, dict[str, str]] = {}
        self.known: dict[str, Calendar | str] = {}  # read_calendar of each
        self.cluster_freezes: list[tuple[Freeze, Selector]] = []  # the usable ones
        self.listed = asyncio.Event()  # listed once (readiness)
        self.dirty = asyncio.Event()  # one changed since their status was written
        self.missing: set[str] = set()  # kinds found not served (said once)
        self.written: datetime | None = None  # when their status was last written

    def calendars(self) -> Known:
        """The Calendars as listed last: each usable, or why not."""
        return self.known

    def freezes_of(self, namespace: str) -> list[Freeze]:
        """The usable ClusterFreezeWindows whose namespaceSelector selects `namespace`."""
        labels = self.namespace_labels.get(namespace, {})
        return [freeze for freeze, chosen in self.cluster_freezes if selects(chosen, labels)]

    async def run(self, stop: asyncio.Event) -> None:
        """List them once (readiness waits for it); then, kopf telling of each change,
        write their status after a change and otherwise every STATUS_EVERY."""
        while not stop.is_set() and not self.listed.is_set():
            try:
                await self.refresh()
                self.listed.set()
            except ApiError as error:
                logger.warning("listing Calendars and ClusterFreezeWindows failed: %s", error)
                await first_of(stop, timeout=1.0)
        while not stop.is_set():
            await first_of(stop, self.dirty, timeout=FREEZES_EVERY.total_seconds())
            changed = self.dirty.is_set()
            self.dirty.clear()
            await self._report(changed=changed)

    def changed(self, plural: str, name: str, body: dict[str, Any] | None) -> None:
        """kopf's event: a Calendar, a ClusterFreezeWindow or a Namespace changed (None:
        deleted). Its status alone changing (our own write's echo) wakes nothing."""
        if plural == "namespaces":
            if self.namespaces and name not in self.namespaces:
                return
            labels = dict(self.namespace_labels)
            labels.pop(name, None)
            if body is not None:
                labels[name] = dict((body.get("metadata") or {}).get("labels") or {})
            self._absorb(self.calendar_bodies, self.freeze_bodies, labels)
            return
        mine = self.calendar_bodies if plural == "calendars" else self.freeze_bodies
        bodies = {n: b for n, b in mine.items() if n != name}
        if body is not None:
            bodies[name] = body
        if plural == "calendars":
            self._absorb(bodies, self.freeze_bodies, self.namespace_labels)
        else:
            self._absorb(self.calendar_bodies, bodies, self.namespace_labels)

    async def refresh(self) -> None:
        """List them (at the start), take in what the list says and write their status."""
        calendars = await self._list("calendars", "Calendar")
        freezes = await self._list("clusterfreezewindows", "ClusterFreezeWindow")
        labels = await self._namespace_labels()
        if self._absorb(calendars, freezes, labels):
            await self._report(changed=True)

    def _absorb(
        self, calendars: Bodies, freezes: Bodies, labels: dict[str, dict[str, str]]
    ) -> bool:
        """Take in the objects as they now are; wake the schedules a change concerns.
        Whether anything a decision reads changed."""
        changed = {
            n
            for n in {*calendars, *self.calendar_bodies}
            if _differ(n, calendars, self.calendar_bodies)
        }
        relabelled = bool(freezes) and labels != self.namespace_labels
        wake_all = _specs(freezes) != _specs(self.freeze_bodies) or relabelled
        self.calendar_bodies, self.freeze_bodies, self.namespace_labels = calendars, freezes, labels
        self.known = {name: read_calendar(body) for name, body in calendars.items()}
        self.cluster_freezes = [
            read for read in map(read_cluster_freeze, freezes.values()) if not isinstance(read, str)
        ]
        if wake_all or changed:
            for key in self.view.schedule_keys():
                if wake_all or self._names(key, changed):
                    self.notify(key)
            self.dirty.set()
        return bool(wake_all or changed)

    async def _report(self, *, changed: bool) -> None:
        """Their status, by the first shard's leader of an installation that watches every
        namespace. It counts every schedule's references, a pass over the whole index: so
        after a change, and otherwise every STATUS_EVERY."""
        if self.namespaces or not self.election.electors[0].is_leader():
            return
        now = self.clock.now()
        due = self.written is None or now - self.written >= STATUS_EVERY
        if (self.calendar_bodies or self.freeze_bodies) and (due or changed):
            self.written = now
            try:
                await self._write_status()
            except ApiError as error:
                logger.warning("writing Calendar or ClusterFreezeWindow status failed: %s", error)

    async def _list(self, plural: str, kind: str) -> Bodies:
        try:
            answer = await self.api.get(f"{GROUP}/{plural}")
        except NotFound:  # its CRD is not installed
            if kind not in self.missing:
                logger.info("no %s CRD installed: %ss are off", kind, kind)
                self.missing.add(kind)
            return {}
        self.missing.discard(kind)
        return {item["metadata"]["name"]: item for item in answer.get("items") or []}

    async def _namespace_labels(self) -> dict[str, dict[str, str]]:
        answer = await self.api.get("/api/v1/namespaces")
        watched = set(self.namespaces)
        return {
            meta["name"]: dict(meta.get("labels") or {})
            for meta in (item["metadata"] for item in answer.get("items") or [])
            if not watched or meta["name"] in watched
        }

    def _names(self, key: Key, calendars: set[str]) -> bool:
        spec = (self.view.schedule(key) or {}).get("spec") or {}
        return any(referencing(spec, name) for name in calendars)

    async def _write_status(self) -> None:
        now = self.clock.now()
        specs = {key: (self.view.schedule(key) or {}) for key in self.view.schedule_keys()}
        for name, body in self.calendar_bodies.items():
            count = sum(1 for s in specs.values() if referencing(s.get("spec") or {}, name))
            await self._patch("calendars", name, body, calendar_status(body, count, now))
        for name, body in self.freeze_bodies.items():
            read = read_cluster_freeze(body)
            labels = []
            if not isinstance(read, str):
                labels = [
                    (s.get("metadata") or {}).get("labels") or {}
                    for key, s in specs.items()
                    if selects(read[1], self.namespace_labels.get(key[0], {}))
                ]
            freeze = read if isinstance(read, str) else read[0]
            await self._patch(
                "clusterfreezewindows", name, body, freeze_status(body, labels, now, freeze)
            )

    async def _patch(
        self, plural: str, name: str, body: dict[str, Any], status: dict[str, Any]
    ) -> None:
        if status != body.get("status"):
            await self.report(f"{GROUP}/{plural}/{name}/status", status)


def _specs(bodies: Bodies) -> dict[str, Any]:
    return {name: body.get("spec") for name, body in bodies.items()}


def _differ(name: str, new: Bodies, old: Bodies) -> bool:
    """Whether a Calendar came, went, or its spec changed (its status does not count)."""
    if (name in new) != (name in old):
        return True
    return new[name].get("spec") != old[name].get("spec")
