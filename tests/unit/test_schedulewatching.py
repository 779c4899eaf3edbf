"""The schedule index without kopf: how it keeps a schedule (everything decisions read,
nothing else), and what it tells of a list, a watch and a relist after 410 Gone."""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import Mapping
from typing import Any

from punctual.kube.schedulewatching import Key, ScheduleIndex, pack, unpack

from .fakeapi import FakeApi
from .test_jobwatching import scripted, watched_from

BODY: dict[str, Any] = {
    "apiVersion": "punctual.dev/v1",
    "kind": "CronSchedule",
    "metadata": {
        "name": "nightly",
        "namespace": "team-a",
        "uid": "4b1d",
        "resourceVersion": "4711",
        "generation": 3,
        "annotations": {"punctual.dev/trigger": "req-1"},
        "managedFields": [
            {
                "manager": "kubectl",
                "operation": "Apply",
                "fieldsType": "FieldsV1",
                "fieldsV1": {"f:spec": {"f:schedule": {}, "f:jobTemplate": {"f:spec": {}}}},
            }
        ],
    },
    "spec": {"schedule": "0 2 * * *", "jobTemplate": {"spec": {"backoffLimit": 2}}},
    "status": {"lastScheduledTime": "2026-11-25T02:00:00Z", "inFlight": []},
}
NS = "team-a"
SCHEDULES = ScheduleIndex.path(NS)


def deep_size(value: Any) -> int:
    size = sys.getsizeof(value)
    if isinstance(value, dict):
        size += sum(deep_size(k) + deep_size(v) for k, v in value.items())
    elif isinstance(value, list):
        size += sum(deep_size(v) for v in value)
    return size


def test_packing_keeps_everything_but_managed_fields() -> None:
    body = unpack(pack(BODY))
    expected = {
        **BODY,
        "metadata": {k: v for k, v in BODY["metadata"].items() if k != "managedFields"},
    }
    assert body == expected
    assert "managedFields" in BODY["metadata"]  # the event's body is left alone


def test_unpacking_gives_a_fresh_body_each_time() -> None:
    packed = pack(BODY)
    first = unpack(packed)
    first["status"]["inFlight"].append({"tick": "x"})
    assert unpack(packed)["status"]["inFlight"] == []


def test_a_packed_schedule_is_several_times_smaller_than_its_dicts() -> None:
    packed = pack(BODY)
    assert deep_size(unpack(packed)) > 3 * sys.getsizeof(packed)


def test_a_busy_schedule_packs_to_under_a_third_of_its_compact_json() -> None:
    busy = json.loads(json.dumps(BODY))
    busy["status"]["recentFirings"] = [
        {"tick": f"2026-11-25T02:{m:02d}:00Z", "job": f"nightly-{1764036000 + 60 * m}",
         "outcome": "Succeeded", "epoch": 7}
        for m in range(20)
    ]  # fmt: skip
    text = json.dumps(unpack(pack(busy)), separators=(",", ":")).encode()
    assert len(pack(busy)) * 3 < len(text)


def test_a_body_beyond_the_deflate_window_and_any_text_come_back_whole() -> None:
    large = json.loads(json.dumps(BODY))
    large["metadata"]["annotations"]["note"] = "Zeitplan für Größe ✓ " * 2000  # 40 KB
    large["spec"]["jobTemplate"]["spec"]["template"] = {"x": list(range(3000))}
    assert unpack(pack(large)) == {
        **large,
        "metadata": {k: v for k, v in large["metadata"].items() if k != "managedFields"},
    }


# -- the index, followed without kopf ---------------------------------------------------


def schedule(name: str, rv: str, *, ns: str = NS) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "namespace": ns, "uid": f"uid-{name}", "resourceVersion": rv},
        "spec": {"schedule": "* * * * *"},
    }


async def follow(api: FakeApi) -> tuple[ScheduleIndex, list[tuple[Key, str | None]]]:
    told: list[tuple[Key, str | None]] = []

    def tell(key: Key, body: Mapping[str, Any] | None) -> None:
        told.append((key, None if body is None else body["metadata"]["resourceVersion"]))

    index = ScheduleIndex(api, [NS], tell)
    stop = asyncio.Event()
    task = asyncio.create_task(index.run(stop))
    await asyncio.wait_for(index.ready.wait(), 1)
    for _ in range(50):
        await asyncio.sleep(0)
    stop.set()
    await task
    return index, told


async def test_every_change_and_deletion_is_told_with_its_resource_version() -> None:
    api = scripted(
        SCHEDULES,
        lists=[[schedule("a", "5")]],
        streams=[
            [
                {"type": "ADDED", "object": schedule("b", "11")},
                {"type": "BOOKMARK", "object": {"metadata": {"resourceVersion": "12"}}},
                {"type": "MODIFIED", "object": schedule("a", "13")},
                {"type": "DELETED", "object": schedule("b", "14")},
            ],
        ],
    )
    index, told = await follow(api)
    assert watched_from(api) == ["10", "14"]
    assert told == [((NS, "a"), "5"), ((NS, "b"), "11"), ((NS, "a"), "13"), ((NS, "b"), None)]
    assert list(index) == [(NS, "a")]
    assert unpack(index[(NS, "a")])["metadata"]["resourceVersion"] == "13"
    assert index.uids == {(NS, "a"): "uid-a"}


async def test_a_relist_after_gone_tells_only_what_differs() -> None:
    api = scripted(
        SCHEDULES,
        lists=[
            [schedule("a", "5"), schedule("b", "6"), schedule("c", "7")],
            [schedule("a", "5"), schedule("c", "9")],  # b deleted, c changed meanwhile
        ],
        streams=[[{"type": "ERROR", "object": {"code": 410, "message": "too old"}}]],
    )
    index, told = await follow(api)
    assert told[3:] == [((NS, "c"), "9"), ((NS, "b"), None)]
    assert sorted(index) == [(NS, "a"), (NS, "c")]


async def test_a_held_schedule_keeps_no_managed_fields() -> None:
    index, _ = await follow(
        scripted(SCHEDULES, lists=[[BODY | {"metadata": {**BODY["metadata"]}}]], streams=[])
    )
    [packed] = index.values()
    assert "managedFields" not in unpack(packed)["metadata"]


def with_next(name: str, upcoming: str | None, rv: str = "5") -> dict[str, Any]:
    body = schedule(name, rv)
    if upcoming is not None:
        body["status"] = {"nextScheduleTime": upcoming}
    return body


async def test_a_new_leader_looks_first_at_the_new_schedules_then_the_soonest_due() -> None:
    api = scripted(
        SCHEDULES,
        lists=[
            [
                with_next("yearly", "2027-01-01T00:00:00Z"),
                with_next("new", None),
                with_next("every-second", "2026-11-26T16:30:01Z"),
                with_next("hourly", "2026-11-26T17:00:00Z"),
            ]
        ],
        streams=[
            # The every-second one's next write moves it past the new one; the hourly one
            # is deleted.
            [
                {
                    "type": "MODIFIED",
                    "object": with_next("every-second", "2027-02-01T00:00:00Z", "11"),
                },
                {"type": "DELETED", "object": with_next("hourly", "2026-11-26T17:00:00Z")},
            ],
        ],
    )
    index, _ = await follow(api)
    names = [name for _, name in index.soonest_first("2026-11-26T16:30:00Z")]
    assert names == ["new", "yearly", "every-second"]


async def test_a_new_leader_looks_at_what_is_due_before_the_never_decided() -> None:
    api = scripted(
        SCHEDULES,
        lists=[
            [
                with_next("yearly", "2027-01-01T00:00:00Z"),
                with_next("new", None),
                with_next("due", "2026-11-26T16:30:01Z"),
                with_next("overdue", "2026-11-26T16:00:00Z"),
                with_next("hourly", "2026-11-26T17:00:00Z"),
            ]
        ],
        streams=[],
    )
    index, _ = await follow(api)
    names = [name for _, name in index.soonest_first("2026-11-26T16:30:10Z")]
    assert names == ["overdue", "due", "new", "hourly", "yearly"]


# -- the schedules due soon, before the first list -------------------------------------


def due_at(name: str, minute: str | None, rv: str) -> dict[str, Any]:
    body = schedule(name, rv)
    if minute is not None:
        body["status"] = {"nextScheduleTime": minute, "nextScheduleMinute": minute}
    return body


def due_api() -> FakeApi:
    api = FakeApi()
    api.selectable.add("status.nextScheduleMinute")
    api.put(f"{SCHEDULES}/soon", due_at("soon", "2026-12-02T10:35:00Z", "20"))
    api.put(f"{SCHEDULES}/later", due_at("later", "2026-12-02T11:35:00Z", "21"))
    api.put(f"{SCHEDULES}/new", due_at("new", None, "22"))
    return api


async def test_the_schedules_due_in_the_minutes_asked_are_taken_before_the_list() -> None:
    told: list[tuple[Key, str | None]] = []

    def tell(key: Key, body: Mapping[str, Any] | None) -> None:
        told.append((key, None if body is None else "seen"))

    index = ScheduleIndex(due_api(), [NS], tell)
    taken = await index.list_due(["2026-12-02T10:35:00Z", "2026-12-02T10:36:00Z"])
    assert taken == 1
    assert list(index) == [(NS, "soon")] and told == [((NS, "soon"), "seen")]
    assert index.soonest_first("2026-12-02T10:40:00Z") == [(NS, "soon")]


async def test_the_first_lists_older_copy_does_not_replace_the_one_taken_early() -> None:
    told: list[tuple[Key, str | None]] = []

    def tell(key: Key, body: Mapping[str, Any] | None) -> None:
        told.append((key, None if body is None else body["metadata"]["resourceVersion"]))

    index = ScheduleIndex(due_api(), [NS], tell)
    await index.list_due(["2026-12-02T10:35:00Z"])
    index.changed(due_at("soon", "2026-12-02T10:34:00Z", "7"))  # the list, as of before
    assert unpack(index[(NS, "soon")])["metadata"]["resourceVersion"] == "20"
    index.changed(due_at("soon", "2026-12-02T10:37:00Z", "25"))  # the watch, since
    assert unpack(index[(NS, "soon")])["metadata"]["resourceVersion"] == "25"
    index.changed(due_at("soon", "2026-12-02T10:36:00Z", "24"))  # no early copy now
    assert unpack(index[(NS, "soon")])["metadata"]["resourceVersion"] == "24"
    assert told == [((NS, "soon"), "20"), ((NS, "soon"), "25"), ((NS, "soon"), "24")]


async def test_nothing_is_taken_once_the_index_is_whole_or_holds_it_as_new() -> None:
    index = ScheduleIndex(due_api(), [NS], lambda k, b: None)
    index.changed(due_at("soon", "2026-12-02T10:35:00Z", "20"))
    assert await index.list_due(["2026-12-02T10:35:00Z"]) == 0
    index.ready.set()
    index.changed(due_at("soon", "2026-12-02T10:35:00Z", "3"))  # (a relist after a restore)
    assert await index.list_due(["2026-12-02T10:35:00Z"]) == 0
    assert unpack(index[(NS, "soon")])["metadata"]["resourceVersion"] == "3"


async def test_an_api_server_that_cannot_select_on_the_minute_leaves_the_list_to_find_them(
    caplog: Any,
) -> None:
    api = due_api()
    api.selectable.discard("status.nextScheduleMinute")
    index = ScheduleIndex(api, [NS], lambda k, b: None)
    with caplog.at_level("INFO", logger="punctual"):
        taken = await index.list_due(["2026-12-02T10:35:00Z", "2026-12-02T10:36:00Z"])
    assert taken == 0 and len(index) == 0
    said = [r.getMessage() for r in caplog.records if "not selectable" in r.getMessage()]
    assert len(said) == 1 and "field label not supported" in said[0], said
    assert [r.params["limit"] for r in api.requests] == ["100", "100"]  # paged


async def test_a_minute_that_holds_many_schedules_is_listed_in_pages() -> None:
    api = due_api()
    for i in range(150):  # a New Year's minute of yearly schedules
        api.put(f"{SCHEDULES}/y{i:03d}", due_at(f"y{i:03d}", "2027-01-01T00:00:00Z", str(100 + i)))
    index = ScheduleIndex(api, [NS], lambda k, b: None)
    assert await index.list_due(["2027-01-01T00:00:00Z"]) == 150
    assert [r.params.get("continue") for r in api.requests] == [None, "100"]


def never_decided(name: str, expression: str, created: str) -> dict[str, Any]:
    body = schedule(name, "5")
    body["metadata"]["creationTimestamp"] = created
    body["spec"]["schedule"] = expression
    return body


async def test_a_never_decided_schedule_due_by_its_spec_is_looked_at_with_the_due_ones() -> None:
    # Listed last among 3 never-decided ones, an every-second schedule created an hour
    # ago is due now: it goes with the due ones, by its first tick (at 200 000 it waited
    # behind 196 000 first claims). A yearly one and one whose ticks are its own (`H`)
    # stay with the never-decided.
    api = scripted(
        SCHEDULES,
        lists=[
            [
                with_next("hourly", "2026-11-26T17:00:00Z"),
                never_decided("yearly-new", "0 0 1 1 *", "2026-11-26T16:29:00Z"),
                never_decided("hashed", "H * * * * *", "2026-11-26T15:30:00Z"),
                with_next("due", "2026-11-26T16:30:01Z"),
                never_decided("every-second", "* * * * * *", "2026-11-26T15:30:00Z"),
            ]
        ],
        streams=[],
    )
    index, _ = await follow(api)
    names = [name for _, name in index.soonest_first("2026-11-26T16:30:10Z")]
    assert names == ["every-second", "due", "yearly-new", "hashed", "hourly"]
