"""The resource models: API spelling in, API spelling out, defaults and bounds."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest
import yaml
from pydantic import ValidationError

from punctual.core.models import (
    ConcurrencyPolicy,
    CronScheduleSpec,
    CronScheduleStatus,
    FiringOutcome,
    MissedRunPolicy,
    RecordedFiring,
    describe_error,
    dump_spec,
    dump_status,
    parse_body,
)
from punctual.core.times import format_time

BODY = {
    "apiVersion": "punctual.dev/v1",
    "kind": "CronSchedule",
    "metadata": {"name": "nightly-report", "namespace": "reports", "uid": "u-1"},
    "spec": {
        "schedule": "0 2 * * *",
        "timeZone": "Europe/Berlin",
        "startingDeadlineSeconds": 600,
        "missedRunPolicy": "RunAll",
        "maxMissedRuns": 5,
        "concurrencyPolicy": "Forbid",
        "jitterSeconds": 30,
        "jobTemplate": {"metadata": {}, "spec": {"template": {"spec": {"containers": []}}}},
        "someFutureField": {"ignored": True},
    },
    "status": {
        "lastScheduledTime": "2026-11-25T02:00:00Z",
        "nextScheduleTime": "2026-11-26T01:00:00Z",
        "scheduleFingerprint": "0123456789abcdef",
        "active": [{"name": "nightly-report-1795572000", "tick": "2026-11-25T02:00:00Z"}],
        "inFlight": [
            {"tick": "2026-11-25T02:00:00Z", "job": "nightly-report-1795572000", "epoch": 3}
        ],
        "recentFirings": [
            {
                "tick": "2026-11-25T02:00:00Z",
                "job": "nightly-report-1795572000",
                "outcome": "Created",
                "epoch": 3,
            },
            {
                "tick": "2026-11-24T02:00:00Z",
                "job": "nightly-report-1795485600",
                "outcome": "Missed",
                "epoch": 2,
                "reason": "past startingDeadlineSeconds",
            },
        ],
        "conditions": [
            {
                "type": "Ready",
                "status": "True",
                "reason": "Scheduled",
                "message": "",
                "lastTransitionTime": "2026-11-25T02:00:01Z",
                "observedGeneration": 4,
            }
        ],
        "observedGeneration": 4,
        "aFutureStatusField": 1,
    },
}


def test_a_body_parses_into_spec_and_status() -> None:
    spec, status = parse_body(BODY)
    assert spec.schedule == "0 2 * * *"
    assert spec.time_zone == "Europe/Berlin"
    assert spec.starting_deadline_seconds == 600
    assert spec.missed_run_policy is MissedRunPolicy.RUN_ALL
    assert spec.concurrency_policy is ConcurrencyPolicy.FORBID
    assert spec.max_missed_runs == 5
    assert spec.jitter_seconds == 30
    assert spec.job_template["spec"]["template"]["spec"]["containers"] == []
    assert status.cursor == datetime(2026, 11, 25, 2, tzinfo=UTC)
    assert status.in_flight[0].epoch == 3
    assert status.recent_firings[1].outcome is FiringOutcome.MISSED
    assert status.conditions[0].observed_generation == 4


def test_status_round_trips_in_api_spelling() -> None:
    _spec, status = parse_body(BODY)
    dumped = dump_status(status)
    assert CronScheduleStatus.model_validate(dumped) == status
    original = BODY["status"]
    assert isinstance(original, dict)
    for key in (
        "lastScheduledTime",
        "nextScheduleTime",
        "scheduleFingerprint",
        "observedGeneration",
    ):
        assert dumped[key] == original[key]
    assert dumped["inFlight"] == original["inFlight"]
    assert dumped["active"] == original["active"]
    assert dumped["conditions"] == original["conditions"]
    assert dumped["recentFirings"][1]["reason"] == "past startingDeadlineSeconds"
    assert "aFutureStatusField" not in dumped


def test_defaults_match_the_crd() -> None:
    spec = CronScheduleSpec.model_validate({"schedule": "* * * * *"})
    assert spec.time_zone == "UTC"
    assert spec.starting_deadline_seconds is None
    assert spec.missed_run_policy is MissedRunPolicy.RUN_LATEST
    assert spec.max_missed_runs == 10
    assert spec.concurrency_policy is ConcurrencyPolicy.ALLOW
    assert spec.suspend is False
    assert spec.jitter_seconds == 0
    assert spec.successful_jobs_history_limit == 3
    assert spec.failed_jobs_history_limit == 1
    assert spec.job_template == {}


def test_empty_status_is_all_defaults() -> None:
    _spec, status = parse_body({"spec": {"schedule": "* * * * *"}})
    assert status == CronScheduleStatus()
    assert dump_status(status) == {
        "active": [],
        "inFlight": [],
        "recentFirings": [],
        "conditions": [],
    }


def test_snake_case_names_work_too() -> None:
    spec = CronScheduleSpec(schedule="* * * * *", max_missed_runs=3)
    assert dump_spec(spec)["maxMissedRuns"] == 3


def test_enums_spell_as_the_crd() -> None:
    assert [p.value for p in MissedRunPolicy] == ["Skip", "RunLatest", "RunAll"]
    assert [p.value for p in ConcurrencyPolicy] == [
        "Allow",
        "Forbid",
        "Replace",
        "BufferOne",
        "BufferAll",
    ]
    assert [o.value for o in FiringOutcome] == [
        "Created",
        "Skipped",
        "Missed",
        "Replaced",
        "Succeeded",
        "Failed",
    ]


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ({}, "spec: Value error, set exactly one of schedule, schedules and runAt"),
        (
            {"schedule": "* * * * *", "runAt": "2026-11-25T02:00:00Z"},
            "spec: Value error, set exactly one of schedule, schedules and runAt",
        ),
        ({"schedule": "* * * * *", "maxMissedRuns": 0}, "spec.maxMissedRuns: Input should be"),
        ({"schedule": "* * * * *", "maxMissedRuns": 1001}, "spec.maxMissedRuns: Input should be"),
        ({"schedule": "* * * * *", "jitterSeconds": 3601}, "spec.jitterSeconds: Input should be"),
        ({"schedule": "* * * * *", "jitterSeconds": -1}, "spec.jitterSeconds: Input should be"),
        ({"schedule": "* * * * *", "startingDeadlineSeconds": -1}, "spec.startingDeadlineSeconds"),
        ({"schedule": "* * * * *", "failedJobsHistoryLimit": 101}, "spec.failedJobsHistoryLimit"),
        ({"schedule": "* * * * *", "missedRunPolicy": "Sometimes"}, "spec.missedRunPolicy"),
        ({"schedule": "* * * * *", "concurrencyPolicy": "Never"}, "spec.concurrencyPolicy"),
        ({"runAt": "2026-11-25T02:00:00"}, "spec.runAt: Value error, must be an RFC 3339 time"),
        ({"runAt": "tomorrow"}, "spec.runAt: Input should be a valid datetime"),
    ],
)
def test_bad_specs_are_described_in_one_line(spec: dict[str, object], message: str) -> None:
    with pytest.raises(ValidationError) as caught:
        CronScheduleSpec.model_validate(spec)
    line = describe_error(caught.value)
    assert line.startswith(message)
    assert "\n" not in line


def test_times_are_utc_in_and_out() -> None:
    spec = CronScheduleSpec.model_validate({"runAt": "2026-11-25T03:00:00+01:00"})
    assert spec.run_at == datetime(2026, 11, 25, 2, tzinfo=UTC)
    assert spec.run_at is not None and spec.run_at.tzinfo is UTC
    assert dump_spec(spec)["runAt"] == "2026-11-25T02:00:00Z"


def test_fractions_survive_and_zone_offsets_become_z() -> None:
    instant = datetime(2026, 11, 25, 2, 0, 0, 250_000, tzinfo=timezone(timedelta(hours=-5)))
    assert format_time(instant) == "2026-11-25T07:00:00.250000Z"
    firing = RecordedFiring(tick=instant, job="j", outcome=FiringOutcome.CREATED, epoch=1)
    assert firing.model_dump(mode="json", by_alias=True)["tick"] == "2026-11-25T07:00:00.250000Z"


def test_models_are_immutable() -> None:
    spec = CronScheduleSpec(schedule="* * * * *")
    with pytest.raises(ValidationError):
        spec.suspend = True
    assert spec.model_copy(update={"suspend": True}).suspend is True


CRD = Path(__file__).parents[2] / "crds" / "cronschedules.punctual.dev.yaml"


def _crd_spec_properties() -> dict[str, Any]:
    crd = yaml.safe_load(CRD.read_text())
    [version] = [v for v in crd["spec"]["versions"] if v.get("storage")]
    properties: dict[str, Any] = version["schema"]["openAPIV3Schema"]["properties"]["spec"][
        "properties"
    ]
    return properties


def _model_constraints(schema: dict[str, Any]) -> dict[str, Any]:
    """enum, default and bounds of one property of pydantic's JSON schema."""
    found: dict[str, Any] = {}
    for branch in [schema, *schema.get("anyOf", [])]:
        ref = branch.get("$ref")
        if ref:
            branch = CronScheduleSpec.model_json_schema(by_alias=True)["$defs"][ref.split("/")[-1]]
        for key in ("enum", "minimum", "maximum", "minLength", "maxLength"):
            if key in branch:
                found[key] = branch[key]
    if "default" in schema and schema["default"] is not None:
        found["default"] = schema["default"]
    return found


def test_spec_enums_defaults_and_bounds_match_the_crd() -> None:
    model = CronScheduleSpec.model_json_schema(by_alias=True)["properties"]
    crd = _crd_spec_properties()
    assert set(model) == set(crd)
    for name, schema in crd.items():
        wanted = {
            key: schema[key]
            for key in ("enum", "default", "minimum", "maximum", "minLength", "maxLength")
            if key in schema
        }
        assert _model_constraints(model[name]) == wanted, name


def test_a_dumped_status_names_the_minute_of_its_next_tick_beside_it() -> None:
    from punctual.core.models import CronScheduleStatus, dump_status

    upcoming = datetime(2026, 12, 2, 10, 35, 42, 500000, tzinfo=UTC)
    dumped = dump_status(CronScheduleStatus(next_schedule_time=upcoming))
    assert dumped["nextScheduleTime"] == "2026-12-02T10:35:42.500000Z"
    assert dumped["nextScheduleMinute"] == "2026-12-02T10:35:00Z"
    assert "nextScheduleMinute" not in dump_status(CronScheduleStatus())
