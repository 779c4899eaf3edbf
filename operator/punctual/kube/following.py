"""Following one kind of object: a list, then a watch from the list's resourceVersion.

Why it exists: the operator keeps every schedule and every one of its Jobs in memory,
fresh, on every replica. kopf did this for both; each watch event then cost a worker
task, cause detection and handler invocations, more than deciding the firing itself
(see kube.jobwatching and kube.schedulewatching for the figures). Here a watch event
is one parsed JSON line handed to the collection that keeps it.

What it does: list (per namespace, or once for all) in pages of `LIST_PAGE` objects,
as client-go's reflector does, handing each item to the collection as it comes and,
once the list is complete, the uids it held (so the collection drops what the list
lacks and reports exactly the differences: a relist after 410 Gone must lose no
deletion); then watch from the list's resourceVersion. Paging holds one page in memory
at a time, not the whole list. A continue token that expires mid-list starts the list
again. A watch that ends is resumed from the last resourceVersion seen (bookmarks keep
it fresh), one that is too old (410 Gone) is replaced by a new list, and any other error
is retried after a second. `ready` is set once every namespace's first list is in.

What it must never do: write, decide, or drop an event it was given.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Mapping
from typing import Any, Protocol

from punctual.kube.client import Api, ApiError, Body

logger = logging.getLogger(__name__)

RETRY = 1.0  # seconds before watching again after an error
WATCH_SECONDS = 300
# Objects per list request. client-go's reflector asks for 500; a page of 500 Jobs is 1.5
# MB of JSON and 8 MB of parsed objects, and a relist after an API server restart parses
# the schedules' and the Jobs' pages at once, beside a takeover's passes: in the soak the
# interpreter's arenas grew by 16-28 MiB at each restart (the live blocks did not), and
# an arena still holding one live block is never returned. 100 keeps that peak a fifth.
LIST_PAGE = 100


def without_managed_fields(body: Mapping[str, Any]) -> dict[str, Any]:
    """The body without metadata.managedFields: half of a schedule's memory, never read.

    (10 000 schedules held 190 MB of bodies, 97 MB of it the field managers' trees.)
    """
    meta = {k: v for k, v in (body.get("metadata") or {}).items() if k != "managedFields"}
    return {**body, "metadata": meta}


class Collection(Protocol):
    """Where the objects go (kube.jobwatching.JobIndex, kube.schedulewatching.ScheduleIndex)."""

    def listed(self, namespace: str | None, uids: set[str]) -> None:
        """A list of `namespace` (None: everywhere) is complete and held exactly the
        objects with these uids (each already handed over by `changed`): forget the
        ones held there that it lacked, reporting them deleted."""

    def changed(self, obj: Body) -> None:
        """An object was added or modified."""

    def deleted(self, obj: Body) -> None:
        """An object was deleted."""


class Gone(Exception):
    """The watch's resourceVersion is too old: list again."""


class Follower:
    def __init__(
        self,
        api: Api,
        path: Callable[[str | None], str],
        collection: Collection,
        *,
        namespaces: list[str],
        what: str,
        selector: str | None = None,
    ) -> None:
        self.api = api
        self.path = path  # the collection's path in one namespace, or in all (None)
        self.collection = collection
        self.namespaces = namespaces  # empty: every namespace
        self.what = what  # for log lines: "Jobs", "CronSchedules"
        self.selector = selector
        self.ready = asyncio.Event()
        self.events = 0  # watch events handled, for tests and the benchmark
        self.list_version = ""  # the resourceVersion of the list just completed

    async def run(self, stop: asyncio.Event) -> None:
        """List and watch every namespace until `stop`."""
        scopes: list[str | None] = list(self.namespaces) or [None]
        listed = [asyncio.Event() for _ in scopes]
        tasks = [
            asyncio.create_task(self._follow(namespace, done))
            for namespace, done in zip(scopes, listed, strict=True)
        ]
        waiting = asyncio.create_task(self._all_listed(listed))
        try:
            await stop.wait()
        finally:
            for task in [*tasks, waiting]:
                task.cancel()
            await asyncio.gather(*tasks, waiting, return_exceptions=True)

    async def _all_listed(self, listed: list[asyncio.Event]) -> None:
        for done in listed:
            await done.wait()
        self.ready.set()

    def _params(self) -> dict[str, str]:
        return {"labelSelector": self.selector} if self.selector else {}

    async def _follow(self, namespace: str | None, listed: asyncio.Event) -> None:
        version: str | None = None
        while True:
            try:
                if version is None:
                    version = await self._list(namespace)
                    listed.set()
                version = await self._watch(namespace, version)
            except Gone:
                version = None
            except (ApiError, ValueError) as error:
                where = namespace or "all namespaces"
                logger.warning("watching %s in %s: %s", self.what, where, error)
                await asyncio.sleep(RETRY)
            except Exception:  # a follower that ends leaves its index stale, silently
                where = namespace or "all namespaces"
                logger.exception("watching %s in %s failed; listing again", self.what, where)
                version = None
                await asyncio.sleep(RETRY)

    async def _list(self, namespace: str | None) -> str:
        """List page by page; the list's resourceVersion (every page has the same)."""
        uids: set[str] = set()
        params = {**self._params(), "limit": str(LIST_PAGE)}
        while True:
            try:
                body = await self.api.get(self.path(namespace), **params)
            except ApiError as error:
                if error.status == 410 and "continue" in params:  # the token expired
                    raise Gone() from error
                raise
            for item in body.get("items") or []:
                uids.add(str((item.get("metadata") or {}).get("uid", "")))
                self.collection.changed(item)
            meta = body.get("metadata") or {}
            token = meta.get("continue")
            if not token:
                break
            params["continue"] = str(token)
        version = str(meta.get("resourceVersion") or "")
        self.list_version = version  # for the collection's `listed`, which it precedes
        self.collection.listed(namespace, uids)
        return version

    async def _watch(self, namespace: str | None, version: str) -> str:
        """Follow the watch from `version`; the last resourceVersion seen when it ends."""
        async for event in self.api.watch(
            self.path(namespace),
            **self._params(),
            resourceVersion=version,
            allowWatchBookmarks="true",
            timeoutSeconds=str(WATCH_SECONDS),
        ):
            kind = event.get("type")
            obj = event.get("object") or {}
            if kind == "ERROR":
                if obj.get("code") == 410:
                    raise Gone()
                raise ValueError(f"watch error: {obj.get('message')}")
            version = str((obj.get("metadata") or {}).get("resourceVersion") or version)
            if kind == "BOOKMARK":
                continue
            self.events += 1
            if kind == "DELETED":
                self.collection.deleted(obj)
            else:
                self.collection.changed(obj)
        return version
