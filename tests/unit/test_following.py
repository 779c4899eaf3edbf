"""Following a kind of object: the list in pages, its continue tokens, then the watch.

The shared fake API server (tests/unit/fakeapi.py) stands in for the real one: it pages
a list with limit and continue (its token is the offset, as a string), answers every
page with one resourceVersion, and a test scripts the 410 of an expired token; the
collection records what it is told.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any

from punctual.kube.client import ApiError
from punctual.kube.following import LIST_PAGE, Follower
from tests.unit.fakeapi import FakeApi


def obj(i: int) -> dict[str, Any]:
    return {"metadata": {"name": f"o{i:04d}", "namespace": "team", "uid": f"u{i}"}}


THINGS = "/api/v1/namespaces/team/things"


def server(count: int) -> FakeApi:
    """The API server holding `count` objects (named so that they list in order)."""
    api = FakeApi()
    for i in range(count):
        api.put(f"{THINGS}/o{i:04d}", obj(i))
    return api


def lists(api: FakeApi) -> list[dict[str, str]]:
    """The params of every list request, in order."""
    return [r.params for r in api.of("get")]


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


async def follow(api: FakeApi) -> Held:
    held = Held()
    follower = Follower(
        api, lambda ns: f"/api/v1/namespaces/{ns}/things", held, namespaces=["team"], what="things"
    )
    stop = asyncio.Event()
    task = asyncio.create_task(follower.run(stop))
    await asyncio.wait_for(follower.ready.wait(), 2)
    await api.time.run_until_idle()  # the watch begins
    stop.set()
    await task
    # Then it watches, from the resourceVersion every page of the list had.
    [watch] = api.of("watch")
    assert watch.path == THINGS
    assert watch.params["resourceVersion"] == api.resource_version
    return held


async def test_a_long_list_is_read_in_pages_and_each_item_handed_over_as_it_comes() -> None:
    count = 2 * LIST_PAGE + 7
    api = server(count)
    held = await follow(api)
    assert [r["limit"] for r in lists(api)] == [str(LIST_PAGE)] * 3
    assert [r.get("continue") for r in lists(api)] == [None, str(LIST_PAGE), str(2 * LIST_PAGE)]
    assert held.changed_names == [f"o{i:04d}" for i in range(count)]
    assert held.lists == [{f"u{i}" for i in range(count)}]  # once, with every uid


async def test_a_continue_token_that_expires_starts_the_list_again() -> None:
    api = server(LIST_PAGE + 1)
    expired = ApiError(410, "Expired", "The provided continue parameter is too old")
    api.fail("get", THINGS, expired, **{"continue": str(LIST_PAGE)})  # once
    held = await follow(api)
    assert [r.get("continue") for r in lists(api)] == [
        None,
        str(LIST_PAGE),
        None,
        str(LIST_PAGE),
    ]
    assert held.lists == [{f"u{i}" for i in range(LIST_PAGE + 1)}]  # only the complete list
