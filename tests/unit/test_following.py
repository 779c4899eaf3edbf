"""Following a kind of object: the list in pages, its continue tokens, then the watch.

The shared fake API server (tests/unit/fakeapi.py) stands in for the real one: it pages
a list with limit and continue (its token is the offset, as a string), answers every
page with one resourceVersion, and a test scripts the 410 of an expired token; the
collection records what it is told.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import pytest

from punctual.kube import following
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


class BreaksOnce:
    """The fake API server, whose first watch fails with an error no one expected."""

    def __init__(self, api: FakeApi) -> None:
        self.api = api
        self.broken = False

    async def get(self, path: str, **params: str) -> dict[str, Any]:
        return await self.api.get(path, **params)

    async def watch(self, path: str, **params: str) -> AsyncIterator[dict[str, Any]]:
        if not self.broken:
            self.broken = True
            raise RuntimeError("an error the client did not turn into an ApiError")
        async for event in self.api.watch(path, **params):
            yield event


async def test_a_watch_that_fails_unexpectedly_is_listed_again_and_followed_on(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The soak's leaders saw their own Jobs run for ever after an API server restart: a
    watch cut mid-stream raised an error the follower did not catch, which ended it, and
    the index went stale without a word. A follower now lists again and goes on."""
    monkeypatch.setattr(following, "RETRY", 0.01)
    api = server(1)
    held = Held()
    broken = BreaksOnce(api)
    follower = Follower(
        broken,  # type: ignore[arg-type]
        lambda ns: f"/api/v1/namespaces/{ns}/things",
        held,
        namespaces=["team"],
        what="things",
    )
    stop = asyncio.Event()
    task = asyncio.create_task(follower.run(stop))
    await asyncio.wait_for(follower.ready.wait(), 2)
    await asyncio.sleep(0.05)  # following.RETRY
    await api.time.run_until_idle()
    api.put(f"{THINGS}/o0001", obj(1))  # written after the failure
    await api.time.run_until_idle()
    for _ in range(50):
        if "o0001" in held.changed_names:
            break
        await asyncio.sleep(0.01)
    stop.set()
    await task
    assert broken.broken
    assert len(held.lists) == 2  # listed again after the failure
    assert "o0001" in held.changed_names
