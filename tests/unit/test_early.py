"""Deciding while the lists stream in: which schedules, and their Jobs listed after them.

`core.early.due_soon` is table-tested; `runtime.early.EarlyDecisions` runs on simulated
time against the shared fake API server: it lists the Jobs of the schedules due soon,
only while leading, with one set-based selector per batch, marks them decidable only
then (and only for the uid it listed for), forgets that on a lapse of leadership, and
stops once the lists are in.
"""

from __future__ import annotations

import asyncio
from datetime import datetime, timedelta
from typing import Any

import pytest

from punctual.core.early import due_soon
from punctual.kube.client import Unavailable
from punctual.kube.jobwatching import JobIndex
from punctual.runtime.early import EarlyDecisions
from punctual.runtime.scheduling import Key
from tests.unit.fakeapi import FakeApi
from tests.unit.faketime import T0, FakeTime

NS = "team"


def schedule(name: str, uid: str, *, due: datetime | None, **spec: Any) -> dict[str, Any]:
    status = {} if due is None else {"nextScheduleTime": due.strftime("%Y-%m-%dT%H:%M:%SZ")}
    return {
        "metadata": {"name": name, "namespace": NS, "uid": uid},
        "spec": {"schedule": "* * * * *", **spec},
        "status": status,
    }


def job(name: str, schedule_uid: str) -> dict[str, Any]:
    return {
        "metadata": {
            "name": name,
            "namespace": NS,
            "labels": {"punctual.dev/schedule": name, "punctual.dev/schedule-uid": schedule_uid},
        },
        "spec": {},
        "status": {"active": 1},
    }


@pytest.mark.parametrize(
    ("what", "body", "picked"),
    [
        ("due in a minute", schedule("a", "u", due=T0 + timedelta(minutes=1)), True),
        ("overdue", schedule("a", "u", due=T0 - timedelta(hours=1)), True),
        ("due in 5 minutes", schedule("a", "u", due=T0 + timedelta(minutes=5)), True),
        ("due in 6 minutes", schedule("a", "u", due=T0 + timedelta(minutes=6)), False),
        ("never decided (no status)", schedule("a", "u", due=None), False),
        ("in a concurrency group", schedule("a", "u", due=T0, concurrencyGroup="db"), False),
        ("a workloadTemplate", schedule("a", "u", due=T0, workloadTemplate={"k": 1}), False),
    ],
)
def test_due_soon_picks_only_what_its_own_body_and_jobs_decide(
    what: str, body: dict[str, Any], picked: bool
) -> None:
    assert (due_soon(body, now=T0) is not None) == picked, what


class Setup:
    def __init__(self) -> None:
        self.time = FakeTime()
        self.api = FakeApi()
        self.jobs = JobIndex(self.api, [NS], lambda key, uid, job: None)
        self.leading = False
        self.notified: list[Key] = []
        self.early = EarlyDecisions(
            self.api,
            self.jobs,
            clock=self.time,
            may_decide=lambda: self.leading,
            notify=self.notified.append,
            sleeper=self.time,
        )
        self.stop = asyncio.Event()
        self.synced = asyncio.Event()

    def job_lists(self) -> list[str]:
        return [
            r.params.get("labelSelector", "")
            for r in self.api.of("get")
            if r.target.endswith("/jobs")
        ]


async def test_the_jobs_of_schedules_due_soon_are_listed_while_leading_then_decidable() -> None:
    s = Setup()
    s.api.put(f"{JobIndex.path(NS)}/b-1", job("b-1", "u-b"))
    s.api.put(f"{JobIndex.path(NS)}/other", job("other", "u-x"))
    task = asyncio.create_task(s.early.run(s.stop, s.synced))
    s.early.consider((NS, "a"), schedule("a", "u-a", due=T0 + timedelta(seconds=30)))
    s.early.consider((NS, "b"), schedule("b", "u-b", due=T0 + timedelta(seconds=10)))
    s.early.consider((NS, "c"), schedule("c", "u-c", due=T0 + timedelta(hours=1)))
    await s.time.advance(5)
    assert s.job_lists() == []  # not leading: nothing listed, nothing decidable
    assert not s.early.decidable((NS, "a"), "u-a")

    s.leading = True
    s.early.led(True)
    await s.time.advance(0.1)
    # One list for the batch, soonest first, naming exactly the due ones.
    assert s.job_lists() == ["punctual.dev/schedule-uid in (u-b,u-a)"]
    assert s.notified == [(NS, "b"), (NS, "a")]
    assert s.early.decidable((NS, "b"), "u-b") and s.early.decidable((NS, "a"), "u-a")
    assert not s.early.decidable((NS, "c"), "u-c")  # due in an hour: waits for the lists
    assert not s.early.decidable((NS, "a"), "u-new")  # another object of the same name
    assert [j.name for j in s.jobs.index["u-b"]] == ["b-1"]  # its Job, in the index
    assert "u-x" not in s.jobs.index  # no other schedule's

    s.synced.set()
    await s.time.advance(0.1)
    assert task.done() and s.early.done
    s.early.consider((NS, "d"), schedule("d", "u-d", due=T0))
    assert not s.early.decidable((NS, "d"), "u-d") and s.early.candidates == {}


async def test_a_lapse_of_leadership_makes_them_wait_for_a_new_list() -> None:
    s = Setup()
    s.leading = True
    task = asyncio.create_task(s.early.run(s.stop, s.synced))
    s.early.consider((NS, "a"), schedule("a", "u-a", due=T0))
    await s.time.advance(0.1)
    assert s.early.decidable((NS, "a"), "u-a") and len(s.job_lists()) == 1
    s.leading = False
    s.early.led(False)
    assert not s.early.decidable((NS, "a"), "u-a")
    await s.time.advance(5)
    assert len(s.job_lists()) == 1  # not while not leading
    s.leading = True
    s.early.led(True)
    await s.time.advance(0.1)
    assert s.early.decidable((NS, "a"), "u-a") and len(s.job_lists()) == 2
    s.stop.set()
    await s.time.advance(0.1)
    assert task.done()


async def test_a_failed_list_leaves_them_undecidable_and_is_tried_again() -> None:
    s = Setup()
    s.leading = True
    s.api.fail("get", JobIndex.path(NS), Unavailable(503, "ServiceUnavailable", "etcd is busy"))
    task = asyncio.create_task(s.early.run(s.stop, s.synced))
    s.early.consider((NS, "a"), schedule("a", "u-a", due=T0))
    await s.time.advance(0.1)
    assert not s.early.decidable((NS, "a"), "u-a") and s.notified == []
    await s.time.advance(1.0)  # the next round
    assert s.early.decidable((NS, "a"), "u-a") and s.notified == [(NS, "a")]
    s.stop.set()
    await s.time.advance(0.1)
    assert task.done()


async def test_a_schedule_no_longer_due_soon_or_deleted_is_not_decidable() -> None:
    s = Setup()
    s.leading = True
    task = asyncio.create_task(s.early.run(s.stop, s.synced))
    s.early.consider((NS, "a"), schedule("a", "u-a", due=T0))
    s.early.consider((NS, "b"), schedule("b", "u-b", due=T0))
    await s.time.advance(0.1)
    s.early.consider((NS, "a"), schedule("a", "u-a", due=T0 + timedelta(days=1)))
    s.early.consider((NS, "b"), None)
    assert not s.early.decidable((NS, "a"), "u-a")
    assert not s.early.decidable((NS, "b"), "u-b")
    s.stop.set()
    await s.time.advance(0.1)
    assert task.done()
