"""The Calendars and ClusterFreezeWindows as the operator lists them: which schedules a
change wakes, and when their status is written, against the recording fake API server.

What the real API server answers (the CRDs, RBAC, a 404 where they are not installed) is
tested in tests/e2e/test_calendars.py.
"""

from __future__ import annotations

from datetime import UTC, datetime
from types import SimpleNamespace
from typing import Any, cast

from punctual.clocks import FixedClock
from punctual.kube.client import KubeClient
from punctual.kube.schedulewatching import pack
from punctual.kube.sharding import ShardedElection
from punctual.runtime.clusterwide import STATUS_EVERY, ClusterWide
from punctual.runtime.scheduling import Key
from punctual.runtime.view import LeaderView
from tests.unit.fakeapi import FakeApi

CALENDARS = "/apis/punctual.dev/v1/calendars"
T0 = datetime(2026, 11, 26, 12, 0, tzinfo=UTC)


def calendar(name: str, *dates: str) -> dict[str, Any]:
    return {"metadata": {"name": name}, "spec": {"exclude": [{"dates": list(dates)}]}}


def schedule_naming(name: str, *calendars: str) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "namespace": "team", "uid": f"uid-{name}"},
        "spec": {"schedule": "0 9 * * *", "excludeCalendars": list(calendars)},
    }


def setup(api: FakeApi, *, leading: bool = True) -> tuple[ClusterWide, FixedClock, list[Key]]:
    schedules = {
        ("team", "a"): pack(schedule_naming("a", "holidays")),
        ("team", "b"): pack(schedule_naming("b")),
    }
    woken: list[Key] = []
    clock = FixedClock(T0)
    leader = SimpleNamespace(is_leader=lambda: leading)

    async def report(path: str, status: dict[str, Any]) -> bool:  # the applier's, unguarded
        await api.patch(path, {"status": status})
        return True

    wide = ClusterWide(
        cast(KubeClient, api),
        [],  # every namespace: this installation writes their status
        view=LeaderView(schedules, {}),
        election=cast(ShardedElection, SimpleNamespace(electors=[leader])),
        clock=clock,
        notify=woken.append,
        report=report,
    )
    return wide, clock, woken


def status_patches(api: FakeApi) -> list[str]:
    return [path for verb, path in api.calls if verb == "patch"]


async def test_a_calendar_change_wakes_only_the_schedules_that_name_it() -> None:
    api = FakeApi()
    wide, _, woken = setup(api)
    await wide.refresh()  # the first list, at the start
    assert woken == []  # nothing of theirs yet: nothing to wake
    wide.changed("calendars", "holidays", calendar("holidays", "2026-12-25"))  # kopf's event
    assert woken == [("team", "a")]
    assert wide.calendars()["holidays"] is not None
    echo = {**calendar("holidays", "2026-12-25"), "status": {"schedules": 1}}
    wide.changed("calendars", "holidays", echo)  # our status write's echo: nothing new
    assert woken == [("team", "a")]
    wide.changed("calendars", "holidays", None)  # deleted
    assert woken == [("team", "a")] * 2 and "holidays" not in wide.calendars()


async def test_a_namespace_relabelled_wakes_every_schedule_only_while_a_cluster_freeze_exists() -> (
    None
):
    api = FakeApi()
    wide, _, woken = setup(api)
    await wide.refresh()
    wide.changed("namespaces", "team", {"metadata": {"name": "team", "labels": {"tier": "1"}}})
    assert woken == []  # no ClusterFreezeWindow selects by labels: nothing to wake
    assert wide.namespace_labels["team"] == {"tier": "1"}


async def test_status_is_written_on_a_change_and_otherwise_once_a_minute() -> None:
    api = FakeApi()
    api.put(f"{CALENDARS}/holidays", calendar("holidays", "2026-12-25"))
    wide, clock, _ = setup(api)
    passes = []
    write = wide._write_status

    async def counted() -> None:  # each is a pass over every schedule
        passes.append(clock.now())
        await write()

    wide._write_status = counted  # type: ignore[method-assign]
    await wide.refresh()
    assert status_patches(api) == [f"{CALENDARS}/holidays/status"]
    assert api.objects[f"{CALENDARS}/holidays"]["status"]["schedules"] == 1

    clock.advance(5)  # the loop's next turn, nothing changed: no pass over the schedules
    await wide._report(changed=False)
    assert len(passes) == 1

    changed = calendar("holidays", "2026-12-25", "2026-12-26")
    changed["status"] = api.objects[f"{CALENDARS}/holidays"]["status"]
    wide.changed("calendars", "holidays", changed)  # kopf's event: a change
    assert wide.dirty.is_set()
    await wide._report(changed=True)  # at once
    assert len(passes) == 2
    clock.advance(STATUS_EVERY.total_seconds() - 1)
    await wide._report(changed=False)
    assert len(passes) == 2
    clock.advance(1)
    await wide._report(changed=False)  # a minute since the last pass: the window may have moved
    assert len(passes) == 3


async def test_a_standby_writes_no_status() -> None:
    api = FakeApi()
    api.put(f"{CALENDARS}/holidays", calendar("holidays", "2026-12-25"))
    wide, _, _ = setup(api, leading=False)
    await wide.refresh()
    assert status_patches(api) == []
    assert "holidays" in wide.calendars()
