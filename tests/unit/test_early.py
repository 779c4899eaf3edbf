"""Deciding while the lists stream in: which schedules, and their Jobs listed after them.

`core.early.due_soon` is table-tested; `runtime.early.EarlyDecisions` runs on simulated
time against the shared fake API server: it wakes the schedules due soon, soonest first,
only while the replica may decide; before each pass over one it reads the schedule
again and then lists its Jobs (in that order), which replace what the index held of
them; a pass waits for the lists when the schedule is gone or no longer due soon, or
when leadership lapsed during the reads; and it stops once the lists are in.
"""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from punctual.core.early import due_minutes, due_soon, first_tick
from punctual.kube.applying import schedule_path
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
            "uid": f"uid-{name}",
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
        self.reread: list[tuple[Key, dict[str, Any] | None]] = []
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

    def store(self, body: dict[str, Any]) -> None:
        self.api.put(f"{schedule_path(NS, body['metadata']['name'])}", body)

    async def refresh(self, name: str) -> bool | None:
        return await self.early.refresh(
            (NS, name), lambda key, body: self.reread.append((key, body))
        )


async def test_the_candidates_are_woken_soonest_first_once_the_replica_may_decide() -> None:
    s = Setup()
    task = asyncio.create_task(s.early.run(s.stop, s.synced))
    s.early.consider((NS, "a"), schedule("a", "u-a", due=T0 + timedelta(seconds=30)))
    s.early.consider((NS, "b"), schedule("b", "u-b", due=T0 + timedelta(seconds=10)))
    s.early.consider((NS, "c"), schedule("c", "u-c", due=T0 + timedelta(hours=1)))
    await s.time.advance(5)
    assert s.notified == [] and not s.early.decidable((NS, "a"))  # not leading
    s.leading = True
    s.early.led(True)
    await s.time.advance(0.1)
    assert s.notified == [(NS, "b"), (NS, "a")]  # c is due in an hour: it waits
    assert s.early.decidable((NS, "a")) and not s.early.decidable((NS, "c"))
    await s.time.advance(5)
    assert s.notified == [(NS, "b"), (NS, "a")]  # once per leadership
    s.early.led(False)
    s.early.led(True)
    await s.time.advance(0.1)
    assert s.notified[2:] == [(NS, "b"), (NS, "a")]  # again in a new one
    s.synced.set()
    await s.time.advance(0.1)
    assert task.done() and s.early.done
    s.early.consider((NS, "d"), schedule("d", "u-d", due=T0))
    assert not s.early.decidable((NS, "d")) and s.early.candidates == {}


async def test_a_pass_reads_the_schedule_again_then_lists_its_jobs_which_replace_the_old() -> None:
    """The page said the tick is due; since, the old leader fired it and its Job is gone
    (the fresh status says so), and another Job finished: the pass sees both as they are."""
    s = Setup()
    s.leading = True
    page = schedule("a", "u-a", due=T0)
    fresh = schedule("a", "u-a", due=T0 + timedelta(seconds=1))
    fresh["status"]["lastScheduledTime"] = "2026-11-25T12:00:00Z"
    s.store(fresh)
    s.jobs.put(job("a-gone", "u-a"))  # known from an earlier look: deleted since
    finished = job("a-done", "u-a")
    s.jobs.put(finished)  # running when last seen ...
    finished["status"] = {"succeeded": 1, "conditions": [{"type": "Complete", "status": "True"}]}
    s.api.put(f"{JobIndex.path(NS)}/a-done", finished)  # ... finished since
    s.early.consider((NS, "a"), page)
    assert await s.refresh("a") is True
    gets = [r.target for r in s.api.of("get")]
    assert gets == [schedule_path(NS, "a"), JobIndex.path(NS)]  # the schedule, then its Jobs
    assert s.api.of("get")[1].params["labelSelector"] == "punctual.dev/schedule-uid=u-a"
    assert [body["status"] for _, body in s.reread if body] == [fresh["status"]]
    [only] = s.jobs.index["u-a"]
    assert only.name == "a-done" and not only.active


@pytest.mark.parametrize("change", ["deleted", "no longer due soon"])
async def test_a_pass_waits_for_the_lists_when_the_schedule_changed_under_it(change: str) -> None:
    s = Setup()
    s.leading = True
    s.early.consider((NS, "a"), schedule("a", "u-a", due=T0))
    if change == "no longer due soon":
        s.store(schedule("a", "u-a", due=T0 + timedelta(days=1)))
    assert await s.refresh("a") is None
    assert not s.early.decidable((NS, "a"))
    assert [r.target for r in s.api.of("get")] == [schedule_path(NS, "a")]  # no Jobs listed
    assert s.reread[0][1] is None if change == "deleted" else s.reread[0][1] is not None


async def test_a_pass_whose_leadership_lapsed_during_the_reads_decides_nothing() -> None:
    s = Setup()
    s.leading = True
    s.store(schedule("a", "u-a", due=T0))
    s.early.consider((NS, "a"), schedule("a", "u-a", due=T0))
    listed = s.api.get

    async def lapse_while_listing(path: str, **params: str) -> dict[str, Any]:
        if path.endswith("/jobs"):
            s.early.led(False)
            s.early.led(True)  # lost and won back: another leader may have written
        return await listed(path, **params)

    s.api.get = lapse_while_listing  # type: ignore[method-assign]
    assert await s.refresh("a") is None
    assert s.reread == [] and "u-a" not in s.jobs.index


async def test_a_failed_read_is_tried_again_soon() -> None:
    s = Setup()
    s.leading = True
    s.store(schedule("a", "u-a", due=T0))
    s.early.consider((NS, "a"), schedule("a", "u-a", due=T0))
    s.api.fail("get", JobIndex.path(NS), Unavailable(503, "ServiceUnavailable", "busy"))
    assert await s.refresh("a") is False
    assert await s.refresh("a") is True


async def test_jobs_listed_early_are_ignored_once_the_namespaces_list_is_in() -> None:
    s = Setup()
    s.jobs.put(job("a-1", "u-a"))
    s.jobs.follower.list_version = "10"
    s.jobs.listed(NS, {s.jobs.index["u-a"][0].uid})
    s.jobs.put_early(NS, "u-a", [])  # would drop a-1: the watch keeps it instead
    assert [j.name for j in s.jobs.index["u-a"]] == ["a-1"]


def test_the_minutes_listed_first_are_now_then_behind_then_ahead() -> None:
    now = datetime(2026, 12, 2, 10, 35, 42, tzinfo=UTC)
    minutes = due_minutes(now, behind=timedelta(minutes=3), ahead=timedelta(minutes=2))
    assert minutes == [
        "2026-12-02T10:35:00Z",
        "2026-12-02T10:34:00Z", "2026-12-02T10:33:00Z", "2026-12-02T10:32:00Z",
        "2026-12-02T10:36:00Z", "2026-12-02T10:37:00Z",
    ]  # fmt: skip


@pytest.mark.parametrize(
    ("spec", "created", "first"),
    [
        ({"schedule": "*/5 * * * *"}, "2026-12-05T18:01:30Z", "2026-12-05T18:05:00Z"),
        ({"schedule": "* * * * * *"}, "2026-12-05T18:01:30Z", "2026-12-05T18:01:31Z"),
        # A startTime after the creation: its first tick after that.
        (
            {"schedule": "0 * * * *", "startTime": "2026-12-06T09:30:00Z"},
            "2026-12-05T18:01:30Z",
            "2026-12-06T10:00:00Z",
        ),
        # In the schedule's zone: 09:00 in Tokyo is 00:00 UTC.
        (
            {"schedule": "0 9 * * *", "timeZone": "Asia/Tokyo"},
            "2026-12-05T18:01:30Z",
            "2026-12-06T00:00:00Z",
        ),
        # Not cheap to know, or not knowable: the never-decided ones' order, as before.
        ({"schedule": "H * * * *"}, "2026-12-05T18:01:30Z", None),
        ({"schedules": [{"cron": "* * * * *"}]}, "2026-12-05T18:01:30Z", None),
        ({"runAt": "2026-12-06T09:30:00Z"}, "2026-12-05T18:01:30Z", None),
        ({"schedule": "61 * * * *"}, "2026-12-05T18:01:30Z", None),
        ({"schedule": "* * * * *", "timeZone": "Mars/Olympus"}, "2026-12-05T18:01:30Z", None),
        ({"schedule": "* * * * *"}, None, None),
        ({"schedule": "* * * * *"}, "yesterday", None),
    ],
)
def test_first_tick_of_a_never_decided_schedule_is_read_from_its_spec(
    spec: dict[str, Any], created: str | None, first: str | None
) -> None:
    body: dict[str, Any] = {"metadata": {"name": "s", "uid": "u"}, "spec": spec}
    if created is not None:
        body["metadata"]["creationTimestamp"] = created
    assert first_tick(body) == first
