"""A fake API server of Leases, for the tests of the Lease loops on simulated time.

Why it exists: the LeaderElector and ShardedElection loops read, write, list and watch
Leases; their unit tests need an API server that keeps Leases as the real one does (a
resourceVersion on each, a stale write refused with Conflict, a create of an existing
name refused with AlreadyExists, label-selected lists, watch events for every change)
and that a test can cut off from one replica or slow down. Each replica gets its own
client (`LeaseServer.client`), which is the `Api` Protocol; every write is recorded
with the simulated instant it was made at (tests/unit/faketime.py).

What it must never do: decide anything the real API server does not (no expiry, no
Lease semantics: it stores what it is sent), or wait real time.
"""

from __future__ import annotations

import asyncio
import copy
import itertools
from collections.abc import AsyncIterator
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from punctual.kube.client import AlreadyExists, Body, Conflict, NotFound, Unavailable
from punctual.kube.leases import micro_time
from tests.unit.faketime import T0, FakeTime

NAMESPACE = "punctual"
COLLECTION = f"/apis/coordination.k8s.io/v1/namespaces/{NAMESPACE}/leases"
LEASE = f"{COLLECTION}/punctual-leader"
DURATION, DEADLINE, RETRY = 15.0, 10.0, 2.0  # runtime.options' defaults


@dataclass(frozen=True)
class Write:
    seconds: float  # simulated seconds since T0
    by: str
    verb: str
    holder: str


class LeaseServer:
    """The API server, as far as Leases go: stored bodies with resourceVersions, watch
    events for every change, and replicas that can be cut off from it."""

    def __init__(self, time: FakeTime) -> None:
        self.time = time
        self.leases: dict[str, Body] = {}
        self.writes: list[Write] = []
        self.cut: set[str] = set()  # replicas whose every request fails at once
        self.latency = 0.0  # simulated seconds each request takes to arrive
        self._versions = itertools.count(1)
        self._watches: list[tuple[str, asyncio.Queue[Body]]] = []

    def client(self, replica: str) -> LeaseApi:
        return LeaseApi(self, replica)

    def store(self, path: str, body: Body, *, by: str, verb: str) -> Body:
        body = copy.deepcopy(body)
        body["metadata"]["resourceVersion"] = str(next(self._versions))
        event = "ADDED" if path not in self.leases else "MODIFIED"
        self.leases[path] = body
        holder = body["spec"].get("holderIdentity") or ""
        self.writes.append(Write(self.time.seconds, by, verb, holder))
        self._send(path, event, body)
        return copy.deepcopy(body)

    def remove(self, path: str, *, by: str) -> Body:
        body = self.leases.pop(path)
        self.writes.append(Write(self.time.seconds, by, "delete", ""))
        self._send(path, "DELETED", body)
        return copy.deepcopy(body)

    def _send(self, path: str, event: str, body: Body) -> None:
        for watched, queue in self._watches:
            if watched == path:
                queue.put_nowait({"type": event, "object": copy.deepcopy(body)})

    def listed(self, collection: str, selector: str) -> Body:
        """The Leases of `collection` whose labels match `key=value` (or all of them)."""
        key, _, value = selector.partition("=")
        items = [
            copy.deepcopy(body)
            for path, body in sorted(self.leases.items())
            if path.rsplit("/", 1)[0] == collection
            and (not key or (body["metadata"].get("labels") or {}).get(key) == value)
        ]
        return {"items": items}

    def spec(self, path: str = LEASE) -> dict[str, Any]:
        return dict(self.leases[path]["spec"])

    def writes_by(self, replica: str) -> list[Write]:
        return [write for write in self.writes if write.by == replica]

    def hold(
        self, holder: str, *, renewed: datetime, transitions: int = 4, duration: float = DURATION
    ) -> None:
        """Write the Lease as another replica would (create or renew)."""
        spec = {
            "holderIdentity": holder,
            "leaseDurationSeconds": int(duration),
            "acquireTime": micro_time(T0),
            "renewTime": micro_time(renewed),
            "leaseTransitions": transitions,
        }
        current = self.leases.get(LEASE)
        metadata = current["metadata"] if current else {"name": "punctual-leader"}
        self.store(LEASE, {"metadata": metadata, "spec": spec}, by=holder, verb="hold")


class LeaseApi:
    """One replica's client of the `LeaseServer` (the `Api` Protocol)."""

    def __init__(self, server: LeaseServer, replica: str) -> None:
        self.server = server
        self.replica = replica

    async def _reach(self) -> None:
        if self.replica in self.server.cut:
            raise Unavailable(503, "ServiceUnavailable", f"{self.replica} is cut off")
        if self.server.latency:
            await self.server.time.sleep(self.server.latency)

    async def get(self, path: str, **params: str) -> Body:
        await self._reach()
        if path.endswith("/leases"):
            return self.server.listed(path, params.get("labelSelector", ""))
        if path not in self.server.leases:
            raise NotFound(404, "NotFound", path)
        return copy.deepcopy(self.server.leases[path])

    async def create(self, path: str, body: Body) -> Body:
        await self._reach()
        target = f"{path}/{body['metadata']['name']}"
        if target in self.server.leases:
            raise AlreadyExists(409, "AlreadyExists", target)
        return self.server.store(target, body, by=self.replica, verb="create")

    async def replace(self, path: str, body: Body) -> Body:
        await self._reach()
        current = self.server.leases.get(path)
        if current is None:
            raise NotFound(404, "NotFound", path)
        version = body["metadata"].get("resourceVersion")
        if version != current["metadata"]["resourceVersion"]:
            raise Conflict(409, "Conflict", f"{path}: stale resourceVersion {version}")
        return self.server.store(path, body, by=self.replica, verb="replace")

    async def delete(self, path: str, body: Body | None = None) -> Body:
        await self._reach()
        if path not in self.server.leases:
            raise NotFound(404, "NotFound", path)
        return self.server.remove(path, by=self.replica)

    async def patch(self, path: str, body: Any, *, content_type: str = "") -> Body:
        raise AssertionError("no Fence here: nothing is patched")

    async def watch(self, path: str, **params: str) -> AsyncIterator[Body]:
        await self._reach()
        name = params.get("fieldSelector", "").removeprefix("metadata.name=")
        queue: asyncio.Queue[Body] = asyncio.Queue()
        entry = (f"{path}/{name}", queue)
        self.server._watches.append(entry)
        try:
            while True:  # until cancelled: a watch the server never ends
                yield await queue.get()
        finally:
            self.server._watches.remove(entry)
