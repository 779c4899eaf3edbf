"""`punctual migrate`: what a CronJob becomes, the switch's writes in order, and the
applier's look for the CronJob's own Job of a tick.

The mapping is pure (core.migrating); the switch (kube.migrating) and the applier are
tested for their order and error handling against the recording fake API server; what
the real CronJob controller does across a switch is tested in tests/e2e/test_migrate.py.
"""

from __future__ import annotations

import copy
from datetime import UTC, datetime
from typing import Any

import pytest

from punctual.core.decisions import Decision, JobToCreate
from punctual.core.jobs import JobSnapshot
from punctual.core.keys import ANNOTATION_MIGRATED_CURSOR, ANNOTATION_MIGRATED_FROM_CRONJOB
from punctual.core.migrating import (
    MigrationError,
    cronjob_job_name,
    cronschedule_from_cronjob,
)
from punctual.core.records import ScheduleRead
from punctual.kube.client import Unavailable
from punctual.kube.migrating import Failed, Refused, hand_back, read_migrations, switch_in
from tests.unit.fakeapi import FakeApi
from tests.unit.test_applying import CLAIM, JOBS, NAME, NS, STATUS, T0, UID, applier, server

Body = dict[str, Any]
CRONJOBS = f"/apis/batch/v1/namespaces/{NS}/cronjobs"
SCHEDULES = f"/apis/punctual.dev/v1/namespaces/{NS}/cronschedules"
LAST = "2026-11-26T11:59:00Z"


def cronjob(name: str = NAME, **spec: Any) -> Body:
    return {
        "apiVersion": "batch/v1",
        "kind": "CronJob",
        "metadata": {
            "name": name,
            "namespace": NS,
            "labels": {"team": "a"},
            "annotations": {
                "owner": "ops",
                "kubectl.kubernetes.io/last-applied-configuration": "{}",
            },
            "creationTimestamp": "2026-01-01T00:00:00Z",
        },
        "spec": {
            "schedule": "*/1 * * * *",
            "jobTemplate": {
                "metadata": {"labels": {"app": "x"}},
                "spec": {"template": {"spec": {"containers": [{"name": "c", "image": "i"}]}}},
            },
            **spec,
        },
        "status": {"lastScheduleTime": LAST},
    }


# -- the mapping -------------------------------------------------------------------


def test_every_shared_field_carries_over_with_its_meaning() -> None:
    migration = cronschedule_from_cronjob(
        cronjob(
            timeZone="Europe/Berlin",
            startingDeadlineSeconds=120,
            concurrencyPolicy="Forbid",
            suspend=True,
            successfulJobsHistoryLimit=5,
            failedJobsHistoryLimit=2,
        )
    )
    manifest = migration.manifest
    assert manifest["apiVersion"] == "punctual.dev/v1" and manifest["kind"] == "CronSchedule"
    assert manifest["spec"] == {
        "schedule": "*/1 * * * *",
        "timeZone": "Europe/Berlin",
        "startingDeadlineSeconds": 120,
        "concurrencyPolicy": "Forbid",
        "suspend": True,
        "successfulJobsHistoryLimit": 5,
        "failedJobsHistoryLimit": 2,
        "jobTemplate": cronjob()["spec"]["jobTemplate"],
    }
    meta = manifest["metadata"]
    assert meta["name"] == NAME and meta["namespace"] == NS and meta["labels"] == {"team": "a"}
    assert meta["annotations"] == {"owner": "ops", ANNOTATION_MIGRATED_FROM_CRONJOB: NAME}
    assert migration.unmapped == () and migration.notes == ()


def test_a_tz_prefix_becomes_the_time_zone_and_is_said() -> None:
    migration = cronschedule_from_cronjob(cronjob(schedule="CRON_TZ=Asia/Tokyo 30 2 * * *"))
    assert migration.manifest["spec"]["schedule"] == "30 2 * * *"
    assert migration.manifest["spec"]["timeZone"] == "Asia/Tokyo"
    assert migration.notes == (
        "spec.schedule: the CRON_TZ=Asia/Tokyo prefix became timeZone: Asia/Tokyo",
    )


def test_what_does_not_carry_over_is_named() -> None:
    body = cronjob()
    body["metadata"]["ownerReferences"] = [{"kind": "Application", "name": "app"}]
    body["spec"]["jobTemplate"]["metadata"]["generateName"] = "x-"
    unmapped = cronschedule_from_cronjob(body).unmapped
    assert [line.split(":")[0] for line in unmapped] == [
        "spec.jobTemplate.metadata.generateName",
        "metadata.ownerReferences",
    ]


@pytest.mark.parametrize(
    ("change", "named"),
    [
        (
            {"name": "n" * 53},
            "metadata.name: 'nnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnn' is 53",
        ),
        ({"schedule": "@every 1h"}, "spec.schedule: '@every 1h' is an interval"),
        ({"schedule": "61 * * * *"}, "spec.schedule:"),
        (
            {"schedule": "TZ=Asia/Tokyo 0 * * * *", "timeZone": "UTC"},
            "disagrees with spec.timeZone",
        ),
        ({"timeZone": "Mars/Olympus"}, "spec.timeZone"),
    ],
)
def test_what_punctual_refuses_is_refused_with_the_field(change: Body, named: str) -> None:
    name = change.pop("name", NAME)
    with pytest.raises(MigrationError) as refused:
        cronschedule_from_cronjob(cronjob(name, **change))
    assert named in str(refused.value)


def test_the_cronjob_job_name_is_the_controllers() -> None:
    # The CronJob controller: <name>-<scheduled time's Unix seconds / 60>.
    tick = datetime(2026, 11, 26, 12, 0, tzinfo=UTC)
    assert cronjob_job_name("backup", tick) == f"backup-{int(tick.timestamp()) // 60}"


def test_a_migrated_schedule_starts_at_the_cronjobs_cursor_not_its_creation() -> None:
    body = {
        "metadata": {
            "name": NAME,
            "uid": UID,
            "creationTimestamp": "2026-11-26T12:00:03Z",
            "annotations": {ANNOTATION_MIGRATED_CURSOR: LAST},
        }
    }
    assert ScheduleRead.from_body(body, []).created == datetime(2026, 11, 26, 11, 59, tzinfo=UTC)
    body["metadata"]["annotations"] = {}
    assert ScheduleRead.from_body(body, []).created == datetime(2026, 11, 26, 12, 0, 3, tzinfo=UTC)


# -- the switch, in order -------------------------------------------------------------


async def nap(_: float) -> None:
    return None


async def test_switch_in_suspends_then_reads_the_cursor_then_creates() -> None:
    api = FakeApi()
    api.put(f"{CRONJOBS}/{NAME}", cronjob())
    migrations = await read_migrations(api, NS, [NAME])
    switched = await switch_in(api, NS, migrations, sleep=nap)
    assert api.calls == [
        ("get", f"{CRONJOBS}/{NAME}"),
        ("get", f"{SCHEDULES}/{NAME}"),  # not taken
        ("patch", f"{CRONJOBS}/{NAME}"),
        ("get", f"{CRONJOBS}/{NAME}"),  # the cursor, read after the suspension
        ("create", f"{SCHEDULES}/{NAME}"),
    ]
    assert api.objects[f"{CRONJOBS}/{NAME}"]["spec"]["suspend"] is True
    created = api.objects[f"{SCHEDULES}/{NAME}"]
    assert created["metadata"]["annotations"][ANNOTATION_MIGRATED_CURSOR] == LAST
    assert created["spec"].get("suspend") is None  # the CronJob was not suspended before
    assert switched[0].cursor == datetime(2026, 11, 26, 11, 59, tzinfo=UTC)


async def test_a_refusal_changes_nothing() -> None:
    api = FakeApi()
    api.put(f"{CRONJOBS}/good", cronjob("good"))
    api.put(f"{CRONJOBS}/bad", cronjob("bad", schedule="@every 5m"))
    with pytest.raises(Refused) as refused:
        await read_migrations(api, NS, None)
    assert refused.value.lines == [
        f"cronjob {NS}/bad: spec.schedule: '@every 5m' is an interval from whenever the "
        "controller last looked; Punctual fires at fixed instants: write it as a cron "
        "expression, or as spec.schedules: [{every: ..., offset: ...}], by hand"
    ]
    assert {verb for verb, _ in api.calls} == {"get"}


async def test_an_existing_cronschedule_is_refused_before_any_write() -> None:
    api = FakeApi()
    api.put(f"{CRONJOBS}/{NAME}", cronjob())
    api.put(f"{SCHEDULES}/{NAME}", {"metadata": {"name": NAME, "namespace": NS}})
    migrations = await read_migrations(api, NS, [NAME])
    with pytest.raises(Refused, match="exists"):
        await switch_in(api, NS, migrations, sleep=nap)
    assert {verb for verb, _ in api.calls} == {"get"}


async def test_a_failed_create_puts_the_suspend_back() -> None:
    api = FakeApi()
    api.put(f"{CRONJOBS}/{NAME}", cronjob())
    migrations = await read_migrations(api, NS, [NAME])
    api.fail("create", SCHEDULES, Unavailable(503, "ServiceUnavailable", "try again"))
    with pytest.raises(Failed, match="suspend put back"):
        await switch_in(api, NS, migrations, sleep=nap)
    assert api.objects[f"{CRONJOBS}/{NAME}"]["spec"]["suspend"] is False


def migrated_schedule(suspend: bool = False) -> Body:
    """A migrated CronSchedule whose status has not yet caught up with generation 2 (the
    fake API server keeps `generation` as written: here, as the suspension makes it)."""
    return {
        "metadata": {
            "name": NAME,
            "namespace": NS,
            "generation": 2,
            "annotations": {ANNOTATION_MIGRATED_FROM_CRONJOB: NAME},
        },
        "spec": {"schedule": "*/1 * * * *", "suspend": suspend},
        "status": {"observedGeneration": 1, "lastScheduledTime": "2026-11-26T12:05:00Z"},
    }


async def test_hand_back_waits_for_the_operator_then_moves_the_cronjobs_cursor() -> None:
    api = FakeApi()
    suspended = cronjob(suspend=True)
    api.put(f"{CRONJOBS}/{NAME}", suspended)
    api.put(f"{SCHEDULES}/{NAME}", migrated_schedule())
    seen = []

    async def operator_acknowledges(_: float) -> None:  # the operator's status write
        body = copy.deepcopy(api.objects[f"{SCHEDULES}/{NAME}"])
        body["status"]["observedGeneration"] = body["metadata"]["generation"]
        api.put(f"{SCHEDULES}/{NAME}", body)
        seen.append(True)

    handed = await hand_back(api, NS, [NAME], sleep=operator_acknowledges)
    patches = [path for verb, path in api.calls if verb == "patch"]
    assert patches == [f"{SCHEDULES}/{NAME}", f"{CRONJOBS}/{NAME}/status", f"{CRONJOBS}/{NAME}"]
    cronjob_now = api.objects[f"{CRONJOBS}/{NAME}"]
    assert cronjob_now["status"]["lastScheduleTime"] == "2026-11-26T12:05:00Z"
    assert cronjob_now["spec"]["suspend"] is False
    assert api.objects[f"{SCHEDULES}/{NAME}"]["spec"]["suspend"] is True
    assert handed[0].cursor == datetime(2026, 11, 26, 12, 5, tzinfo=UTC) and seen


async def test_hand_back_without_an_operator_changes_nothing() -> None:
    api = FakeApi()
    api.put(f"{CRONJOBS}/{NAME}", cronjob(suspend=True))
    api.put(f"{SCHEDULES}/{NAME}", migrated_schedule())
    clock = iter(range(1000))
    with pytest.raises(Failed, match="did not acknowledge"):
        await hand_back(api, NS, [NAME], sleep=nap, wait=3, monotonic=lambda: next(clock))
    assert api.objects[f"{SCHEDULES}/{NAME}"]["spec"]["suspend"] is False
    assert api.objects[f"{CRONJOBS}/{NAME}"]["spec"]["suspend"] is True
    assert not [path for verb, path in api.calls if verb == "patch" and "cronjobs" in path]


async def test_hand_back_refuses_a_schedule_not_migrated() -> None:
    api = FakeApi()
    body = migrated_schedule()
    body["metadata"]["annotations"] = {}
    api.put(f"{SCHEDULES}/{NAME}", body)
    with pytest.raises(Refused, match="was not migrated from a CronJob"):
        await hand_back(api, NS, [NAME], sleep=nap)


# -- the applier looks for the CronJob's Job of the tick ----------------------------------


def migrated() -> Body:
    return {
        "metadata": {
            "namespace": NS,
            "name": NAME,
            "uid": UID,
            "resourceVersion": "1",
            "annotations": {ANNOTATION_MIGRATED_FROM_CRONJOB: "legacy"},
        },
        "status": {},
    }


def to_create() -> JobToCreate:
    return JobToCreate(name="nightly-1", tick=T0, body={"metadata": {"name": "nightly-1"}})


async def test_a_tick_the_cronjob_fired_is_settled_as_skipped_not_created() -> None:
    theirs = cronjob_job_name("legacy", T0)
    api = server(
        {
            "metadata": {
                "name": theirs,
                "namespace": NS,
                "ownerReferences": [{"kind": "CronJob", "name": "legacy", "uid": "cj"}],
            }
        }
    )
    applied = await applier(api).apply(migrated(), Decision(status=CLAIM, creates=(to_create(),)))
    assert api.calls == [("replace", STATUS), ("get", f"{JOBS}/{theirs}"), ("replace", STATUS)]
    assert applied.created == [] and applied.failed == {}
    status = api.objects[f"/apis/punctual.dev/v1/namespaces/{NS}/cronschedules/{NAME}"]["status"]
    assert status["inFlight"] == [] and status["active"] == []
    (firing,) = status["recentFirings"]
    assert firing["outcome"] == "Skipped" and "job" not in firing
    assert firing["reason"] == f"CronJob legacy fired it as Job {theirs}"


async def test_no_cronjob_job_means_punctual_fires_it() -> None:
    api = server()
    applied = await applier(api).apply(migrated(), Decision(status=CLAIM, creates=(to_create(),)))
    theirs = cronjob_job_name("legacy", T0)
    assert api.calls == [
        ("replace", STATUS),
        ("get", f"{JOBS}/{theirs}"),
        ("create", f"{JOBS}/nightly-1"),
    ]
    assert [j.name for j in applied.created] == ["nightly-1"]
    assert all(isinstance(j, JobSnapshot) for j in applied.created)


async def test_a_job_of_that_name_not_the_cronjobs_does_not_hold_the_tick() -> None:
    theirs = cronjob_job_name("legacy", T0)
    api = server({"metadata": {"name": theirs, "namespace": NS}})
    applied = await applier(api).apply(migrated(), Decision(status=CLAIM, creates=(to_create(),)))
    assert [j.name for j in applied.created] == ["nightly-1"]


async def test_when_the_look_fails_the_claim_stays_in_flight() -> None:
    api = server()
    api.fail("get", JOBS, Unavailable(503, "ServiceUnavailable", "etcd"))
    applied = await applier(api).apply(migrated(), Decision(status=CLAIM, creates=(to_create(),)))
    assert applied.pending == ["nightly-1"] and applied.created == []
    assert ("create", f"{JOBS}/nightly-1") not in api.calls


def test_a_template_name_and_null_creation_timestamp_are_not_copied() -> None:
    """`kubectl create cronjob` writes jobTemplate.metadata {name, creationTimestamp: null};
    neither is a field of the CronSchedule's Job template, so strict apply refused them."""
    body = cronjob()
    body["spec"]["jobTemplate"]["metadata"] = {"name": "made-by-kubectl", "creationTimestamp": None}
    migration = cronschedule_from_cronjob(body)
    assert "metadata" not in migration.manifest["spec"]["jobTemplate"]
    assert [line.split(":")[0] for line in migration.unmapped] == ["spec.jobTemplate.metadata.name"]
