"""Following a kind of object: the list in pages, its continue tokens, then the watch.

A scripted lister stands in for the client (the API server's paging is its own: limit,
continue, one resourceVersion for every page, 410 for an expired token); the collection
records what it is told.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

from punctual.kube.client import ApiError
from punctual.kube.following import LIST_PAGE, Follower


def obj(i: int) -> dict[str, Any]:
    return {"metadata": {"name": f"o{i}", "namespace": "team", "uid": f"u{i}"}}


@dataclass
class Pages:
    """A list of `count` objects served `limit` at a time; the first token expires once
    when `expire` is set."""

    count: int
    expire: bool = False
    requests: list[dict[str, str]] = field(default_factory=list)

    async def get(self, path: str, **params: str) -> dict[str, Any]:
        self.requests.append(params)
        start = int(params.get("continue", "0"))
        if self.expire and start:
            self.expire = False
            raise ApiError(410, "Expired", "The provided continue parameter is too old")
        end = min(self.count, start + int(params["limit"]))
        meta: dict[str, Any] = {"resourceVersion": "77"}
        if end < self.count:
            meta["continue"] = str(end)
        return {"metadata": meta, "items": [obj(i) for i in range(start, end)]}

    async def watch(self, path: str, **params: str) -> AsyncIterator[dict[str, Any]]:
        assert params["resourceVersion"] == "77"
        await asyncio.sleep(3600)
        yield {}

    async def create(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        raise AssertionError("a Follower only lists and watches")

    async def replace(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        raise AssertionError("a Follower only lists and watches")

    async def delete(self, path: str, body: dict[str, Any] | None = None) -> dict[str, Any]:
        raise AssertionError("a Follower only lists and watches")

    async def patch(self, path: str, body: Any, *, content_type: str = "") -> dict[str, Any]:
        raise AssertionError("a Follower only lists and watches")


@dataclass
class Held:
    """A collection that records what it is told."""

    changed_names: list[str] = field(default_factory=list)
    lists: list[set[str]] = field(default_factory=list)

    def listed(self, namespace: str | None, uids: set[str]) -> None:
        self.lists.append(uids)

    def changed(self, body: dict[str, Any]) -> None:
        self.changed_names.append(body["metadata"]["name"])

    def deleted(self, body: dict[str, Any]) -> None:
        raise AssertionError("nothing is deleted here")


async def follow(pages: Pages) -> Held:
    held = Held()
    follower = Follower(pages, lambda ns: f"/things/{ns}", held, namespaces=["team"], what="things")
    stop = asyncio.Event()
    task = asyncio.create_task(follower.run(stop))
    await asyncio.wait_for(follower.ready.wait(), 2)
    stop.set()
    await task
    return held


async def test_a_long_list_is_read_in_pages_and_each_item_handed_over_as_it_comes() -> None:
    count = 2 * LIST_PAGE + 7
    pages = Pages(count)
    held = await follow(pages)
    assert [r["limit"] for r in pages.requests] == [str(LIST_PAGE)] * 3
    assert [r.get("continue") for r in pages.requests] == [None, str(LIST_PAGE), str(2 * LIST_PAGE)]
    assert held.changed_names == [f"o{i}" for i in range(count)]
    assert held.lists == [{f"u{i}" for i in range(count)}]  # once, with every uid


async def test_a_continue_token_that_expires_starts_the_list_again() -> None:
    pages = Pages(LIST_PAGE + 1, expire=True)
    held = await follow(pages)
    assert [r.get("continue") for r in pages.requests] == [
        None,
        str(LIST_PAGE),
        None,
        str(LIST_PAGE),
    ]
    assert held.lists == [{f"u{i}" for i in range(LIST_PAGE + 1)}]  # only the complete list
