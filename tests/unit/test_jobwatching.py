"""The Job index without kopf: a list, a watch from its resourceVersion, a relist on 410.

A scripted lister stands in for the client; what the index holds and what it reports
(every change, and on a relist exactly the differences) is checked against it.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

from punctual.core.jobs import JobSnapshot
from punctual.core.keys import FINALIZER
from punctual.kube.jobwatching import JobIndex

NS = "team"


def job(
    name: str, uid: str, *, schedule_uid: str = "s-1", rv: str = "1", done: bool = False
) -> dict[str, Any]:
    return {
        "metadata": {
            "name": name,
            "namespace": NS,
            "uid": uid,
            "resourceVersion": rv,
            "labels": {
                "punctual.dev/schedule": "nightly",
                "punctual.dev/schedule-uid": schedule_uid,
            },
            "finalizers": [FINALIZER],
        },
        "status": {"conditions": [{"type": "Complete", "status": "True"}]} if done else {},
    }


@dataclass
class Script:
    """Lists answer in turn; each watch replays one scripted stream, then ends."""

    lists: list[list[dict[str, Any]]]
    streams: list[list[dict[str, Any]]]
    watched_from: list[str] = field(default_factory=list)
    listed: int = 0

    async def get(self, path: str, **params: str) -> dict[str, Any]:
        self.listed += 1
        items = self.lists.pop(0)
        return {"metadata": {"resourceVersion": str(10 * self.listed)}, "items": items}

    async def watch(self, path: str, **params: str) -> AsyncIterator[dict[str, Any]]:
        self.watched_from.append(params["resourceVersion"])
        events = self.streams.pop(0) if self.streams else []
        for event in events:
            yield event
        if not self.streams and not events:
            await asyncio.sleep(3600)

    async def create(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        raise AssertionError("a Follower only lists and watches")

    async def replace(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        raise AssertionError("a Follower only lists and watches")

    async def delete(self, path: str, body: dict[str, Any] | None = None) -> dict[str, Any]:
        raise AssertionError("a Follower only lists and watches")

    async def patch(self, path: str, body: Any, *, content_type: str = "") -> dict[str, Any]:
        raise AssertionError("a Follower only lists and watches")


async def run(script: Script) -> tuple[JobIndex, list[tuple[str, JobSnapshot | None]]]:
    told: list[tuple[str, JobSnapshot | None]] = []
    index = JobIndex(script, [NS], lambda key, uid, now: told.append((uid, now)))
    stop = asyncio.Event()
    task = asyncio.create_task(index.run(stop))
    await asyncio.wait_for(index.ready.wait(), 1)
    for _ in range(50):
        await asyncio.sleep(0)
    stop.set()
    await task
    return index, told


async def test_list_then_watch_reports_every_change_and_keeps_the_index() -> None:
    script = Script(
        lists=[[job("a", "j1")]],
        streams=[
            [
                {"type": "ADDED", "object": job("b", "j2", rv="11")},
                {"type": "BOOKMARK", "object": {"metadata": {"resourceVersion": "12"}}},
                {"type": "MODIFIED", "object": job("a", "j1", rv="13", done=True)},
                {"type": "DELETED", "object": job("b", "j2", rv="14")},
            ],
            [],
        ],
    )
    index, told = await run(script)
    assert script.watched_from[:2] == ["10", "14"]  # resumed from the last version seen
    assert [uid for uid, _ in told] == ["j1", "j2", "j1", "j2"]
    assert told[-1][1] is None  # the deletion
    [only] = index.index["s-1"]
    assert only.name == "a" and not only.active
    assert dict(index.index).keys() == {"s-1"}


async def test_a_gone_watch_lists_again_and_reports_only_the_differences() -> None:
    script = Script(
        lists=[[job("a", "j1"), job("b", "j2")], [job("a", "j1")]],
        streams=[[{"type": "ERROR", "object": {"code": 410, "message": "too old"}}], []],
    )
    index, told = await run(script)
    # j1, j2 listed; after 410 the relist misses j2: it is reported gone, j1 again.
    assert [(uid, now is None) for uid, now in told] == [
        ("j1", False),
        ("j2", False),
        ("j1", False),
        ("j2", True),
    ]
    assert [j.name for j in index.index["s-1"]] == ["a"]


async def test_jobs_without_a_schedule_uid_are_not_indexed() -> None:
    stray = job("x", "j9", schedule_uid="")
    index, told = await run(Script(lists=[[stray]], streams=[[]]))
    assert len(index.index) == 0 and told == []
