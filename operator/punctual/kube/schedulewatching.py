"""Every CronSchedule, listed and watched by Punctual's own client: an index without kopf.

Why it exists: every replica, leader or not, keeps a warm view of all schedules (a hot
standby fails over in one Lease expiry, not a re-list) and wakes the scheduler when
one changes. Each firing changes its schedule at least twice (the claim, then the
outcome), and every replica sees each change. Through kopf each event cost a worker
task, cause detection, an index handler and an event handler, the largest part of
the operator's CPU per firing once its Jobs had left kopf (kube.jobwatching); here an
event is one parsed JSON line, one compact copy and one dict update.

What it keeps: `{(namespace, name): packed body}` (compact JSON without managedFields,
deflated from a primer of what every schedule's text shares: a schedule as Python dicts
takes about 9 KB, 19 KB with managedFields, as compact JSON 0.8-1.5 KB, packed 0.2-0.4
KB; `make bench-memory`), with each schedule's uid and resourceVersion beside it. It tells
`on_schedule(key, body)` of every change it sees (the body as listed or watched, for
the caller to read, never to keep or change), deletions included (body None), and after
a relist exactly of what differs.

What it must never do: write, decide, or tell of a change it has not seen.
"""

from __future__ import annotations

import asyncio
import logging
import sys
import zlib
from collections.abc import Callable, Iterator, Mapping
from typing import Any

import orjson

from punctual.core.early import MINUTE_FIELD, first_tick
from punctual.kube.client import Api, ApiError
from punctual.kube.following import LIST_PAGE, Follower, without_managed_fields

logger = logging.getLogger("punctual")

Key = tuple[str, str]  # (namespace, name)
OnSchedule = Callable[[Key, Mapping[str, Any] | None], None]


# What the text of most schedules shares, in the order the API server keeps it: the
# deflate stream starts with it in its window, so a schedule's keys and common values
# cost a back-reference each. Only this process ever reads what it packs, so the primer
# may change between releases.
_PRIMER = orjson.dumps(
    {
        "apiVersion": "punctual.dev/v1",
        "kind": "CronSchedule",
        "metadata": {
            "name": "", "namespace": "", "uid": "", "resourceVersion": "", "generation": 1,
            "creationTimestamp": "", "labels": {}, "annotations": {},
        },
        "spec": {
            "schedule": "", "timeZone": "UTC", "concurrencyPolicy": "Forbid",
            "startingDeadlineSeconds": 0, "successfulJobsHistoryLimit": 0,
            "failedJobsHistoryLimit": 0, "suspend": False,
            "jobTemplate": {"metadata": {}, "spec": {"backoffLimit": 0, "template": {"spec": {
                "restartPolicy": "Never", "containers": [
                    {"name": "", "image": "", "command": [], "args": [], "resources": {}}
                ]}}}},
        },
        "status": {
            "lastScheduledTime": "", "nextScheduleTime": "", "lastSuccessfulTime": "",
            "lastSuccessfulTick": "", "scheduleFingerprint": "", "active": [],
            "claimedThrough": "", "claimEpoch": 0, "inFlight": [],
            "recentFirings": [{"tick": "", "job": "", "outcome": "Succeeded", "epoch": 0}],
            "conditions": [{
                "type": "Ready", "status": "True", "reason": "Scheduled",
                "message": "next tick ", "lastTransitionTime": "", "observedGeneration": 1,
            }],
            "observedGeneration": 0, "installation": "",
        },
    },
)  # fmt: skip
# Raw deflate (no header) with a 4 KB window and little state: the primer fits the
# window, and setting a compressor up costs microseconds, not the 150 us of the defaults.
_WINDOW_BITS = -12
_MEMORY_LEVEL = 4


def _number(version: object) -> int:
    """A resourceVersion as a number (from etcd they are increasing integers); -1 if not."""
    try:
        return int(str(version))
    except ValueError:
        return -1


def pack(body: Mapping[str, Any]) -> bytes:
    """A schedule as the index keeps it: compact JSON without managedFields, deflated
    from `_PRIMER`. Packing costs about 25 us, unpacking about 15 (deflate's share a
    third of each), once per change and once per decision."""
    text = orjson.dumps(without_managed_fields(body))
    packer = zlib.compressobj(1, zlib.DEFLATED, _WINDOW_BITS, _MEMORY_LEVEL, zdict=_PRIMER)
    return packer.compress(text) + packer.flush()


def unpack(packed: bytes) -> dict[str, Any]:
    """The schedule body that `pack` kept: a fresh dict, the caller's to change."""
    unpacker = zlib.decompressobj(_WINDOW_BITS, zdict=_PRIMER)
    body: dict[str, Any] = orjson.loads(unpacker.decompress(packed))
    return body


class ScheduleIndex(Mapping[Key, bytes]):
    """The packed schedules by (namespace, name), as the leader's view reads them."""

    def __init__(self, api: Api, namespaces: list[str], on_schedule: OnSchedule) -> None:
        self.on_schedule = on_schedule
        self._packed: dict[Key, bytes] = {}
        self.versions: dict[Key, str] = {}  # each schedule's resourceVersion as indexed
        self.uids: dict[Key, str] = {}
        # status.nextScheduleTime as written (RFC 3339 UTC text sorts as time does).
        self._next: dict[Key, str] = {}
        # A never-decided schedule's first tick, from its spec (core.early.first_tick).
        self._first: dict[Key, str] = {}
        # Offered by `list_due` at a newer resourceVersion than the first list may bring:
        # the list's older copy must not replace it (the watch brings anything newer).
        self._early: set[Key] = set()
        self.follower = Follower(api, self.path, self, namespaces=namespaces, what="CronSchedules")
        self._unselectable = False  # told once: the API server does not select on the minute
        self.ready = self.follower.ready
        self.run = self.follower.run

    @staticmethod
    def path(namespace: str | None) -> str:
        prefix = f"namespaces/{namespace}/" if namespace else ""
        return f"/apis/punctual.dev/v1/{prefix}cronschedules"

    # -- Mapping -----------------------------------------------------------------------

    def __getitem__(self, key: Key) -> bytes:
        return self._packed[key]

    def __iter__(self) -> Iterator[Key]:
        return iter(list(self._packed))

    def __len__(self) -> int:
        return len(self._packed)

    def soonest_first(self, due_by: str) -> list[Key]:
        """Every schedule in the order a new leader looks at them: those whose status
        names a next tick at or before `due_by` (RFC 3339 UTC text), and those never
        decided whose spec's first tick is (`core.early.first_tick`), first, by that
        tick; then the other never-decided ones (no nextScheduleTime: their first
        claim); then the rest by their next tick. With 100 000 schedules, 76 000 of them
        never decided, the ones due now waited 50 s behind those first claims when these
        came first; at 200 000, a never-decided one due now had not fired 60 s after the
        list, behind 196 000 others, before it was ordered by its first tick."""

        def order(key: Key) -> tuple[int, str]:
            upcoming = self._next.get(key)
            if upcoming is None:
                first = self._first.get(key)  # never decided: due by its spec's first tick?
                return (0, first) if first is not None and first <= due_by else (1, "")
            return (0 if upcoming <= due_by else 2, upcoming)

        return sorted(self._packed, key=order)

    # -- before the first list is in ---------------------------------------------------

    async def list_due(self, minutes: list[str]) -> int:
        """The schedules whose status.nextScheduleMinute is one of `minutes`, listed by
        field selector (in pages, served from the API server's cache) and taken into the
        index before the first list brings them: a list of 100 000 takes a minute, these
        a request a minute each, all at once. Each is taken only if the index is not
        whole yet and holds no copy as new, and it is kept against the first list's
        older one. Returns how many were taken. An API server that does not select on
        the field (before Kubernetes 1.31, or a CRD without the selectableFields entry)
        answers 400: nothing is taken, and the due schedules wait for the whole list, as
        before this existed."""
        scopes: list[str | None] = list(self.follower.namespaces) or [None]
        found = await asyncio.gather(
            *(self._list_minute(scope, minute) for scope in scopes for minute in minutes)
        )
        return sum(found)

    async def _list_minute(self, namespace: str | None, minute: str) -> int:
        """One minute's schedules, in pages (a minute can hold them all: a yearly
        schedule's New Year), each taken as it comes."""
        params = {"fieldSelector": f"{MINUTE_FIELD}={minute}", "limit": str(LIST_PAGE)}
        taken = 0
        while not self.ready.is_set():
            try:
                body = await self.follower.api.get(self.path(namespace), **params)
            except ApiError as error:
                if error.status != 400:
                    logger.warning("listing CronSchedules due at %s first: %s", minute, error)
                elif not self._unselectable:
                    self._unselectable = True
                    why = "the due ones wait for the whole list"
                    logger.info(
                        "CronSchedules not selectable by %s (%s): %s", MINUTE_FIELD, error, why
                    )
                return taken
            for item in body.get("items") or []:
                taken += self._offer(item)
            token = (body.get("metadata") or {}).get("continue")
            if not token:
                break
            params["continue"] = str(token)
        return taken

    def _offer(self, item: dict[str, Any]) -> int:
        """Take `item` if the index is not whole yet and holds no copy as new (1), else 0."""
        meta = item.get("metadata") or {}
        key = (str(meta.get("namespace", "")), str(meta.get("name", "")))
        held = self.versions.get(key)
        newer = held is None or _number(held) < _number(meta.get("resourceVersion"))
        if self.ready.is_set() or not newer:
            return 0
        self._put(item)
        self._early.add(key)
        return 1

    # -- kube.following.Collection ----------------------------------------------------

    def listed(self, namespace: str | None, uids: set[str]) -> None:
        """Forget the namespace's schedules the list lacks."""
        for key in [k for k, uid in self.uids.items() if uid not in uids]:
            if namespace is None or key[0] == namespace:
                self._drop(key)

    def changed(self, obj: dict[str, Any]) -> None:
        self._put(obj)

    def deleted(self, obj: dict[str, Any]) -> None:
        meta = obj.get("metadata") or {}
        self._drop((str(meta.get("namespace", "")), str(meta.get("name", ""))))

    def _put(self, body: Mapping[str, Any]) -> Key:
        meta = body.get("metadata") or {}
        # One string per namespace, not one per schedule (each parse makes its own).
        key = (sys.intern(str(meta.get("namespace", ""))), str(meta.get("name", "")))
        version = str(meta.get("resourceVersion", ""))
        if self.versions.get(key) == version and key in self._packed:
            return key  # a relist of what is held: nothing new
        if key in self._early:
            if _number(version) < _number(self.versions.get(key)):
                return key  # the first list's copy, older than the one `list_due` found
            self._early.discard(key)
        self._packed[key] = pack(body)
        self.versions[key] = version
        self.uids[key] = str(meta.get("uid", ""))
        upcoming = (body.get("status") or {}).get("nextScheduleTime")
        if isinstance(upcoming, str):  # schedules that tick together share one string
            self._next[key] = sys.intern(upcoming)
            self._first.pop(key, None)
        else:
            self._next.pop(key, None)
            first = first_tick(body)
            if first is None:
                self._first.pop(key, None)
            else:
                self._first[key] = sys.intern(first)
        self.on_schedule(key, body)
        return key

    def _drop(self, key: Key) -> None:
        self._early.discard(key)
        if self._packed.pop(key, None) is None:
            return
        self.versions.pop(key, None)
        self.uids.pop(key, None)
        self._next.pop(key, None)
        self._first.pop(key, None)
        self.on_schedule(key, None)
