"""The Job index without kopf: a list, a watch from its resourceVersion, a relist on 410.

The shared fake API server (tests/unit/fakeapi.py) answers scripted lists and watch
streams; what the index holds and what it reports (every change, and on a relist
exactly the differences) is checked against them.
"""

from __future__ import annotations

import asyncio
from typing import Any

from punctual.core.jobs import JobSnapshot
from punctual.core.keys import FINALIZER
from punctual.kube.jobwatching import JobIndex
from tests.unit.fakeapi import FakeApi

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


def scripted(
    path: str, lists: list[list[dict[str, Any]]], streams: list[list[dict[str, Any]]]
) -> FakeApi:
    """An API server whose lists of `path` answer `lists` in turn (the n-th at
    resourceVersion 10n) and whose watches replay `streams` in turn, each then ending;
    a watch after them stays open, with nothing to tell."""
    api = FakeApi()
    for n, items in enumerate(lists, 1):
        api.script_list(path, items, str(10 * n))
    for events in streams:
        api.script_watch(path, events)
    return api


def watched_from(api: FakeApi) -> list[str]:
    return [r.params["resourceVersion"] for r in api.of("watch")]


JOBS = JobIndex.path(NS)


async def run(api: FakeApi) -> tuple[JobIndex, list[tuple[str, JobSnapshot | None]]]:
    told: list[tuple[str, JobSnapshot | None]] = []
    index = JobIndex(api, [NS], lambda key, uid, now: told.append((uid, now)))
    stop = asyncio.Event()
    task = asyncio.create_task(index.run(stop))
    await asyncio.wait_for(index.ready.wait(), 1)
    for _ in range(50):
        await asyncio.sleep(0)
    stop.set()
    await task
    return index, told


async def test_list_then_watch_reports_every_change_and_keeps_the_index() -> None:
    api = scripted(
        JOBS,
        lists=[[job("a", "j1")]],
        streams=[
            [
                {"type": "ADDED", "object": job("b", "j2", rv="11")},
                {"type": "BOOKMARK", "object": {"metadata": {"resourceVersion": "12"}}},
                {"type": "MODIFIED", "object": job("a", "j1", rv="13", done=True)},
                {"type": "DELETED", "object": job("b", "j2", rv="14")},
            ],
        ],
    )
    index, told = await run(api)
    assert watched_from(api) == ["10", "14"]  # resumed from the last version seen
    assert [uid for uid, _ in told] == ["j1", "j2", "j1", "j2"]
    assert told[-1][1] is None  # the deletion
    [only] = index.index["s-1"]
    assert only.name == "a" and not only.active
    assert dict(index.index).keys() == {"s-1"}


async def test_a_gone_watch_lists_again_and_reports_only_the_differences() -> None:
    api = scripted(
        JOBS,
        lists=[[job("a", "j1"), job("b", "j2")], [job("a", "j1")]],
        streams=[[{"type": "ERROR", "object": {"code": 410, "message": "too old"}}]],
    )
    index, told = await run(api)
    # j1, j2 listed; after 410 the relist misses j2: it is reported gone, j1 again.
    assert [(uid, now is None) for uid, now in told] == [
        ("j1", False),
        ("j2", False),
        ("j1", False),
        ("j2", True),
    ]
    assert [j.name for j in index.index["s-1"]] == ["a"]
    assert watched_from(api) == ["10", "20"]  # the second from the relist


async def test_jobs_without_a_schedule_uid_are_not_indexed() -> None:
    stray = job("x", "j9", schedule_uid="")
    index, told = await run(scripted(JOBS, lists=[[stray]], streams=[]))
    assert len(index.index) == 0 and told == []


async def test_a_job_listed_early_after_the_complete_list_was_read_is_kept_by_it() -> None:
    """runtime.early lists a few schedules' Jobs while the complete list streams in: a
    Job it found that is newer than the complete list (resourceVersion 10) is kept when
    that list lacks it; one as old as the list, which the list lacks, is gone."""
    api = scripted(JOBS, lists=[[job("a", "j1")]], streams=[])
    told: list[tuple[str, JobSnapshot | None]] = []
    index = JobIndex(api, [NS], lambda key, uid, now: told.append((uid, now)))
    # Created after the list was read; deleted before it was read.
    index.put_early(NS, "s-1", [job("new", "j2", rv="12"), job("old", "j3", rv="9")])
    stop = asyncio.Event()
    task = asyncio.create_task(index.run(stop))
    await asyncio.wait_for(index.ready.wait(), 1)
    stop.set()
    await task
    assert sorted(j.name for j in index.index["s-1"]) == ["a", "new"]
    assert ("j3", None) in told and ("j2", None) not in told
