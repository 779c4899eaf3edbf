"""Concurrency groups as the leader sees them: who is a member, and each group's limit.

Why it exists: a member's decision needs its group as it stands (core.groups.Group): the
other members (from the schedule index: whoever names the group in
spec.concurrencyGroup) and the limit (the namespace's ConcurrencyGroup object of that
name; none: 1, a mutex). The ConcurrencyGroups are listed once at the start, then kopf
tells of each change (`watching`, as for every small kind). The ConcurrencyGroup CRD may
not be installed (an upgrade that has not applied crds/ yet): then every group is a
mutex until kopf sees the CRD and its objects.

What it must never do: decide, or write (the group's status is written through the
applier, by the leader deciding its members).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping
from typing import Any

from punctual.clocks import first_of
from punctual.core.groups import group_of
from punctual.kube.client import Api, ApiError, NotFound

logger = logging.getLogger(__name__)

Key = tuple[str, str]
GroupKey = tuple[str, str]  # (namespace, group)
PATH = "/apis/punctual.dev/v1"
RETRY = 5.0  # seconds before listing again after an error


class Groups:
    """Membership (from schedules as they change) and limits (ConcurrencyGroup objects)."""

    def __init__(self, api: Api, namespaces: list[str]) -> None:
        self.api = api
        self._members: dict[GroupKey, set[Key]] = {}
        self._of: dict[Key, str] = {}
        self._limits: dict[GroupKey, int] = {}
        self._uids: dict[str, GroupKey] = {}  # a ConcurrencyGroup's uid -> its key
        self.namespaces = namespaces  # empty: every namespace

    @staticmethod
    def path(namespace: str | None) -> str:
        where = f"/namespaces/{namespace}" if namespace else ""
        return f"{PATH}{where}/concurrencygroups"

    # -- membership ------------------------------------------------------------------------

    def observe(self, key: Key, body: Mapping[str, Any] | None) -> str | None:
        """Follow a schedule's change; the group it was or is in (whose members to wake)."""
        before = self._of.pop(key, None)
        if before is not None:
            self._members.get((key[0], before), set()).discard(key)
        now = None if body is None else group_of(body)
        if now is not None:
            self._of[key] = now
            self._members.setdefault((key[0], now), set()).add(key)
        return now or before

    def members(self, namespace: str, group: str) -> list[Key]:
        return sorted(self._members.get((namespace, group), ()))

    def group(self, key: Key) -> str | None:
        return self._of.get(key)

    def limit(self, namespace: str, group: str) -> int:
        """The group's maxConcurrent: its ConcurrencyGroup object's, or 1 (a mutex)."""
        return self._limits.get((namespace, group), 1)

    # -- the ConcurrencyGroups, as listed and as kopf tells of them -------------------------

    def changed(self, obj: dict[str, Any]) -> None:
        meta = obj.get("metadata") or {}
        limit = (obj.get("spec") or {}).get("maxConcurrent")
        key = (str(meta.get("namespace", "")), str(meta.get("name", "")))
        self._uids[str(meta.get("uid", ""))] = key
        if isinstance(limit, int) and limit >= 1:
            self._limits[key] = limit

    def deleted(self, obj: dict[str, Any]) -> None:
        meta = obj.get("metadata") or {}
        key = self._uids.pop(str(meta.get("uid", "")), None)
        if key is not None:
            self._limits.pop(key, None)

    async def run(self, stop: asyncio.Event) -> None:
        """List the ConcurrencyGroups once, until `stop` (kopf tells of the changes)."""
        while not stop.is_set():
            try:
                where: list[str | None] = list(self.namespaces) or [None]
                for namespace in where:
                    answer = await self.api.get(self.path(namespace))
                    for item in answer.get("items") or []:
                        self.changed(item)
                break
            except NotFound:
                logger.info("ConcurrencyGroups are not served: every group is a mutex")
                break
            except ApiError as error:
                logger.warning("listing ConcurrencyGroups: %s", error)
                await first_of(stop, timeout=RETRY)
        await stop.wait()
