"""The shared fake API server answers as the real one does, where the shell's tests rely on it.

tests/unit/fakeapi.py stands in for the API server in every shell test; these pin the
answers those tests take for granted, so that a change to the fake that would make them
pass for the wrong reason fails here first.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from punctual.kube.client import (
    STRATEGIC_MERGE_PATCH,
    AlreadyExists,
    Conflict,
    Invalid,
    NotFound,
    Unavailable,
)
from tests.unit.fakeapi import FakeApi
from tests.unit.faketime import FakeTime

JOBS = "/apis/batch/v1/namespaces/team/jobs"
ALL_JOBS = "/apis/batch/v1/jobs"
SCHEDULE = "/apis/punctual.dev/v1/namespaces/team/cronschedules/nightly"


def job(name: str, **labels: str) -> dict[str, Any]:
    return {"metadata": {"name": name, "labels": labels}, "spec": {"parallelism": 1}}


async def test_a_write_needs_the_current_resource_version_and_gets_a_new_one() -> None:
    api = FakeApi()
    created = await api.create(JOBS, job("a"))
    assert created["metadata"]["namespace"] == "team" and created["metadata"]["uid"]
    with pytest.raises(AlreadyExists):
        await api.create(JOBS, job("a"))
    stale = {**created, "metadata": {**created["metadata"], "resourceVersion": "0"}}
    with pytest.raises(Conflict):
        await api.replace(f"{JOBS}/a", stale)
    replaced = await api.replace(f"{JOBS}/a", created)
    assert int(replaced["metadata"]["resourceVersion"]) > int(
        created["metadata"]["resourceVersion"]
    )
    assert replaced["metadata"]["uid"] == created["metadata"]["uid"]
    with pytest.raises(NotFound):
        await api.get(f"{JOBS}/b")
    assert [(r.verb, r.error is None) for r in api.requests] == [
        ("create", True),
        ("create", False),
        ("replace", False),
        ("replace", True),
        ("get", False),
    ]


async def test_the_status_subresource_writes_the_status_alone() -> None:
    api = FakeApi()
    stored = api.put(SCHEDULE, {"spec": {"schedule": "@hourly"}, "status": {}})
    written = {**stored, "spec": {"schedule": "changed"}, "status": {"cursor": "x"}}
    answer = await api.replace(f"{SCHEDULE}/status", written)
    assert answer["spec"] == {"schedule": "@hourly"} and answer["status"] == {"cursor": "x"}


async def test_patches_merge_and_a_held_object_goes_when_its_finalizers_do() -> None:
    api = FakeApi()
    api.put(f"{JOBS}/a", {"metadata": {"uid": "u1", "finalizers": ["x", "y"]}, "spec": {}})
    await api.patch(f"{JOBS}/a", {"spec": {"suspend": True}})
    with pytest.raises(Conflict):
        await api.delete(f"{JOBS}/a", {"preconditions": {"uid": "other"}})
    deleted = await api.delete(f"{JOBS}/a", {"preconditions": {"uid": "u1"}})
    assert deleted["metadata"]["deletionTimestamp"]  # held
    with pytest.raises(Invalid):
        await api.patch(f"{JOBS}/a", {"metadata": {"uid": "other"}})
    remove = {"metadata": {"uid": "u1", "$deleteFromPrimitiveList/finalizers": ["x"]}}
    await api.patch(f"{JOBS}/a", remove, content_type=STRATEGIC_MERGE_PATCH)
    assert api.objects[f"{JOBS}/a"]["metadata"]["finalizers"] == ["y"]
    assert api.objects[f"{JOBS}/a"]["spec"] == {"suspend": True}
    await api.patch(f"{JOBS}/a", {"metadata": {"finalizers": None}})
    assert api.items(JOBS) == []


async def test_a_list_selects_by_label_and_pages() -> None:
    api = FakeApi()
    for name in "abcde":
        api.put(f"{JOBS}/{name}", job(name, kind="odd" if name in "ace" else "even"))
    api.put("/apis/batch/v1/namespaces/other/jobs/f", job("f", kind="odd"))
    odd = await api.get(JOBS, labelSelector="kind=odd")
    assert [i["metadata"]["name"] for i in odd["items"]] == ["a", "c", "e"]
    everywhere = await api.get(ALL_JOBS, labelSelector="kind==odd")
    assert [i["metadata"]["name"] for i in everywhere["items"]] == [
        "f",
        "a",
        "c",
        "e",
    ]  # by namespace
    first = await api.get(JOBS, limit="2")
    second = await api.get(JOBS, limit="2", **{"continue": first["metadata"]["continue"]})
    assert [i["metadata"]["name"] for i in second["items"]] == ["c", "d"]
    assert first["metadata"]["resourceVersion"] == second["metadata"]["resourceVersion"]


async def test_scripted_answers_go_to_the_next_matching_request_once() -> None:
    api = FakeApi()
    api.fail("create", f"{JOBS}/b", Unavailable(503, "Unavailable", "busy"))
    await api.create(JOBS, job("a"))
    with pytest.raises(Unavailable):
        await api.create(JOBS, job("b"))
    await api.create(JOBS, job("b"))
    assert [j["metadata"]["name"] for j in api.items(JOBS)] == ["a", "b"]


async def test_a_client_cut_off_fails_and_latency_passes_on_simulated_time() -> None:
    time = FakeTime()
    api = FakeApi(time)
    replica = api.client("r")
    api.cut.add("r")
    with pytest.raises(Unavailable):
        await replica.get(JOBS)
    api.cut.clear()
    api.latency = 1.5
    task = asyncio.create_task(replica.create(JOBS, job("a")))
    await time.advance(1.4)
    assert not task.done()
    await time.advance(0.1)
    assert task.done() and task.result()["metadata"]["name"] == "a"
    assert [(r.by, r.at) for r in api.requests] == [("r", 0.0), ("r", 1.5)]


async def test_a_watch_tells_what_is_written_from_its_version_until_closed_or_timed_out() -> None:
    time = FakeTime()
    api = FakeApi(time)
    api.put(f"{JOBS}/a", job("a"))
    since = api.resource_version
    api.put(f"{JOBS}/b", job("b"))
    seen: list[tuple[str, str]] = []

    async def follow(**params: str) -> None:
        async for event in api.watch(JOBS, **params):
            seen.append((event["type"], event["object"]["metadata"]["name"]))

    task = asyncio.create_task(follow(resourceVersion=since, timeoutSeconds="60"))
    await time.run_until_idle()
    await api.create(JOBS, job("c"))
    await api.delete(f"{JOBS}/a")
    api.inject({"type": "BOOKMARK", "object": {"metadata": {"name": "-"}}})
    await time.advance(59)
    assert seen == [("ADDED", "b"), ("ADDED", "c"), ("DELETED", "a"), ("BOOKMARK", "-")]
    assert not task.done()
    await time.advance(1)
    assert task.done()  # its timeoutSeconds passed

    seen.clear()
    task = asyncio.create_task(follow(fieldSelector="metadata.name=b"))
    await time.run_until_idle()
    assert seen == [("ADDED", "b")]  # no version: the current state first
    api.close_watches(JOBS)
    await time.run_until_idle()
    assert task.done()


async def test_a_scripted_watch_replays_its_events_then_ends() -> None:
    api = FakeApi()
    api.script_watch(JOBS, [{"type": "ERROR", "object": {"code": 410}}])
    events = [event async for event in api.watch(JOBS, resourceVersion="7")]
    assert events == [{"type": "ERROR", "object": {"code": 410}}]
