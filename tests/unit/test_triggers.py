"""Manual trigger requests: both spellings of the annotation, who asked and why, and a
concurrencyPolicy for one firing, as decisions around one fixed instant."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from punctual.core.deciding import decide
from punctual.core.decisions import Decision, Leadership
from punctual.core.jobs import JobSnapshot, JobState, manual_job_name
from punctual.core.keys import ANNOTATION_TRIGGER
from punctual.core.models import ConcurrencyPolicy
from punctual.core.naming import job_name
from punctual.core.triggers import TriggerError, TriggerRequest, parse_env, parse_trigger

T0 = datetime(2026, 11, 25, 12, 0, tzinfo=UTC)
M = timedelta(minutes=1)
NAME = "nightly-report"
UID = "5f0c1e2d-7a4b-4c3d-9e8f-0a1b2c3d4e5f"
LEADER = Leadership(epoch=7, identity="punctual-0")
ASKED = TriggerRequest("req-1", "alice", "rerun after the fix", None)
FIELD = "metadata.annotations[punctual.dev/trigger]"

# -- the annotation's value ------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("req-1", TriggerRequest("req-1")),
        ("2026-11-25T10:07:30Z-a1b2c3", TriggerRequest("2026-11-25T10:07:30Z-a1b2c3")),
        ('{"request": "req-1"}', TriggerRequest("req-1")),
        (
            '{"request": "req-1", "triggeredBy": "alice", "triggerReason": "rerun after the fix"}',
            ASKED,
        ),
        (
            ' {"request": "r", "concurrencyPolicy": "Replace"}',
            TriggerRequest("r", concurrency_policy=ConcurrencyPolicy.REPLACE),
        ),
    ],
    ids=["bare id", "bare id as the CLI wrote it", "JSON, id only", "who and why", "policy"],
)
def test_both_spellings_are_read(value: str, expected: TriggerRequest) -> None:
    assert parse_trigger(value) == expected


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("{", f"{FIELD}: not JSON: "),
        ('{"triggeredBy": "alice"}', f"{FIELD}.request: Field required"),
        ('{"request": ""}', f"{FIELD}.request: String should have at least 1 character"),
        ('{"request": "r", "who": "alice"}', f"{FIELD}.who: Extra inputs are not permitted"),
        (
            '{"request": "r", "triggeredBy": 5}',
            f"{FIELD}.triggeredBy: Input should be a valid string",
        ),
        (
            '{"request": "r", "concurrencyPolicy": "Sometimes"}',
            f"{FIELD}.concurrencyPolicy: must be one of Allow, Forbid, Replace, not 'Sometimes'",
        ),
        ('{"request": "r", "triggerReason": "' + "x" * 600 + '"}', f"{FIELD}.triggerReason: "),
    ],
    ids=["not JSON", "no request", "empty request", "unknown key", "not text", "policy", "long"],
)
def test_a_bad_value_is_one_line_naming_the_field(value: str, message: str) -> None:
    with pytest.raises(TriggerError) as caught:
        parse_trigger(value)
    assert str(caught.value).startswith(message)
    assert "\n" not in str(caught.value)


def test_the_cli_spelling_reads_back_as_written() -> None:
    asked = TriggerRequest(
        "r", "system:serviceaccount:ci:deployer", 'say "why"', ConcurrencyPolicy.ALLOW
    )
    assert parse_trigger(asked.annotation()) == asked


# -- decisions -------------------------------------------------------------------------


def body(trigger: str | None, *, policy: str = "Allow", last: str | None = None) -> dict[str, Any]:
    annotations = {} if trigger is None else {ANNOTATION_TRIGGER: trigger}
    status: dict[str, Any] = {"lastScheduledTime": "2026-11-25T12:00:00Z", "observedGeneration": 1}
    if last is not None:
        status["lastTrigger"] = last
    return {
        "metadata": {
            "name": NAME,
            "namespace": "reports",
            "uid": UID,
            "generation": 1,
            "creationTimestamp": "2026-11-20T00:00:00Z",
            "annotations": annotations,
        },
        "spec": {
            "schedule": "0 * * * *",
            "concurrencyPolicy": policy,
            "jobTemplate": {"spec": {"template": {"spec": {"containers": [{"name": "c"}]}}}},
        },
        "status": status,
    }


def running() -> JobSnapshot:
    name = job_name(NAME, T0)
    return JobSnapshot(name, "uid-1", UID, T0, JobState.ACTIVE, created=T0)


def run(schedule: dict[str, Any], jobs: list[JobSnapshot] | None = None) -> Decision:
    return decide(schedule, jobs or [], now=T0 + 10 * M, leadership=LEADER)


def manual_firing(decision: Decision) -> dict[str, Any]:
    assert decision.status is not None
    [firing] = [f for f in decision.status["recentFirings"] if f.get("manual")]
    return dict(firing)


def test_who_and_why_are_recorded_on_the_firing_the_job_and_the_event() -> None:
    decision = run(body(ASKED.annotation()))
    [create] = decision.creates
    assert create.name == manual_job_name(NAME, "req-1")
    annotations = create.body["metadata"]["annotations"]
    assert annotations["punctual.dev/trigger"] == "req-1"
    assert annotations["punctual.dev/triggered-by"] == "alice"
    assert annotations["punctual.dev/trigger-reason"] == "rerun after the fix"
    assert annotations["punctual.dev/firing"] == "manual"
    firing = manual_firing(decision)
    assert firing["triggeredBy"] == "alice"
    assert firing["triggerReason"] == "rerun after the fix"
    assert "concurrencyPolicy" not in firing
    assert decision.status is not None and decision.status["lastTrigger"] == "req-1"
    [event] = [e for e in decision.events if e.reason == "Triggered"]
    assert event.message == "Manual trigger 'req-1' by alice (unverified): \"rerun after the fix\""
    assert firing["triggeredByVerified"] is False  # no admission policy vouched for it


def test_a_bare_request_fires_as_before_with_nobody_named() -> None:
    decision = run(body("req-1"))
    assert [c.name for c in decision.creates] == [manual_job_name(NAME, "req-1")]
    firing = manual_firing(decision)
    assert "triggeredBy" not in firing and "triggerReason" not in firing


@pytest.mark.parametrize(
    "last",
    ["req-1", '{"request": "req-1", "triggeredBy": "alice"}'],
    ids=["the id", "the whole value, as an older operator wrote it"],
)
def test_a_handled_request_does_not_fire_again(last: str) -> None:
    value = '{"request": "req-1", "triggeredBy": "alice"}'
    assert run(body(value, last=last)).creates == ()


@pytest.mark.parametrize(
    ("policy", "override", "creates", "replaced", "outcome"),
    [
        ("Forbid", "Allow", True, False, "Created"),
        ("Forbid", "Replace", True, True, "Created"),
        ("Allow", "Forbid", False, False, "Skipped"),
        ("Replace", "Allow", True, False, "Created"),
        ("Allow", None, True, False, "Created"),
        ("Forbid", None, False, False, "Skipped"),
    ],
    ids=[
        "Forbid overridden by Allow: runs beside the running Job",
        "Forbid overridden by Replace: replaces it",
        "Allow overridden by Forbid: skipped while a Job runs",
        "Replace overridden by Allow: nothing is deleted",
        "no override, Allow",
        "no override, Forbid",
    ],
)
def test_a_trigger_overrides_the_concurrency_policy_for_its_firing_only(
    policy: str, override: str | None, creates: bool, replaced: bool, outcome: str
) -> None:
    asked = TriggerRequest(
        "req-1", "alice", None, None if override is None else ConcurrencyPolicy(override)
    )
    decision = run(body(asked.annotation(), policy=policy), [running()])
    assert [c.name for c in decision.creates] == (
        [manual_job_name(NAME, "req-1")] if creates else []
    )
    assert [j.name for j in decision.replace] == ([job_name(NAME, T0)] if replaced else [])
    firing = manual_firing(decision)
    assert firing["outcome"] == outcome
    assert firing.get("concurrencyPolicy") == override


def test_an_override_is_for_the_trigger_only_a_due_tick_keeps_the_schedules_policy() -> None:
    # Forbid, a Job runs, a tick is due and a trigger asks for Allow: the tick is
    # skipped under Forbid, the trigger runs.
    asked = TriggerRequest("req-1", concurrency_policy=ConcurrencyPolicy.ALLOW)
    schedule = body(asked.annotation(), policy="Forbid")
    schedule["status"]["lastScheduledTime"] = "2026-11-25T11:00:00Z"
    older = JobSnapshot(job_name(NAME, T0 - 60 * M), "u0", UID, T0 - 60 * M, JobState.ACTIVE)
    decision = decide(schedule, [older], now=T0 + M, leadership=LEADER)
    assert [c.name for c in decision.creates] == [manual_job_name(NAME, "req-1")]
    assert decision.status is not None
    outcomes = {(f.get("manual", False), f["outcome"]) for f in decision.status["recentFirings"]}
    assert outcomes == {(True, "Created"), (False, "Skipped")}


def test_an_unreadable_request_is_reported_once_and_fires_nothing() -> None:
    value = '{"request": "r", "concurrencyPolicy": "Sometimes"}'
    first = run(body(value))
    assert first.creates == ()
    [event] = [e for e in first.events if e.reason == "InvalidTrigger"]
    assert event.type == "Warning"
    assert event.message.startswith(f"{FIELD}.concurrencyPolicy: must be one of")
    assert first.status is not None and first.status["lastTrigger"] == value
    again = run(body(value, last=first.status["lastTrigger"]))
    assert again.creates == () and not [e for e in again.events if e.reason == "InvalidTrigger"]
    # A corrected request fires.
    fixed = run(body('{"request": "r2"}', last=value))
    assert [c.name for c in fixed.creates] == [manual_job_name(NAME, "r2")]


def test_a_recovered_manual_claim_keeps_who_asked() -> None:
    schedule = body(ASKED.annotation(), last="req-1")
    job = manual_job_name(NAME, "req-1")
    schedule["status"]["inFlight"] = [{"tick": "2026-11-25T12:05:00Z", "job": job, "epoch": 6}]
    [create] = run(schedule).creates
    assert create.name == job
    assert create.body["metadata"]["annotations"]["punctual.dev/triggered-by"] == "alice"


def test_the_crd_records_what_a_request_may_say() -> None:
    import yaml

    from punctual.core.triggers import MAX_TRIGGER_REASON, MAX_TRIGGERED_BY, OVERRIDABLE

    crd = Path(__file__).resolve().parents[2] / "crds" / "cronschedules.punctual.dev.yaml"
    [version] = yaml.safe_load(crd.read_text())["spec"]["versions"]
    status = version["schema"]["openAPIV3Schema"]["properties"]["status"]["properties"]
    firing = status["recentFirings"]["items"]["properties"]
    assert firing["concurrencyPolicy"]["enum"] == [p.value for p in OVERRIDABLE]
    assert firing["triggeredBy"]["maxLength"] == MAX_TRIGGERED_BY
    assert firing["triggerReason"]["maxLength"] == MAX_TRIGGER_REASON


# -- --env overrides ---------------------------------------------------------------------

ENV_ASKED = TriggerRequest("req-2", "alice", None, None, (("MODE", "full"), ("REGION", "eu")))


def test_env_overrides_reach_every_container_the_job_the_firing_and_the_event() -> None:
    schedule = body(ENV_ASKED.annotation())
    containers: list[dict[str, Any]] = [
        {
            "name": "a",
            "env": [{"name": "MODE", "valueFrom": {"secretKeyRef": {"name": "s", "key": "k"}}}],
        },
        {"name": "b"},
    ]
    schedule["spec"]["jobTemplate"]["spec"]["template"]["spec"]["containers"] = containers
    schedule["spec"]["jobTemplate"]["spec"]["template"]["spec"]["initContainers"] = [{"name": "i"}]
    decision = run(schedule)
    [create] = decision.creates
    pod = create.body["spec"]["template"]["spec"]
    for container in [*pod["containers"], *pod["initContainers"]]:
        env = {e["name"]: e for e in container["env"]}
        assert env["MODE"] == {"name": "MODE", "value": "full"}, container["name"]
        assert env["REGION"]["value"] == "eu"
        assert "PUNCTUAL_TICK" in env
        assert [e["name"] for e in container["env"]].count("MODE") == 1
    assert containers[0]["env"][0]["valueFrom"]  # the schedule's template is not changed
    notes = create.body["metadata"]["annotations"]
    assert json.loads(notes["punctual.dev/env-overrides"]) == {"MODE": "full", "REGION": "eu"}
    assert manual_firing(decision)["envOverrides"] == ["MODE=full", "REGION=eu"]
    [event] = [e for e in decision.events if e.reason == "Triggered"]
    assert event.message.endswith("with MODE=full, REGION=eu")


def test_the_env_reads_back_from_the_annotation_sorted() -> None:
    assert parse_trigger(ENV_ASKED.annotation()) == ENV_ASKED
    assert parse_env(["B=2", "A=1", "B=3"]) == (("A", "1"), ("B", "3"))
    assert parse_env(["EMPTY=", "EQ=a=b"]) == (("EMPTY", ""), ("EQ", "a=b"))


@pytest.mark.parametrize(
    ("pairs", "message"),
    [
        (["1X=y"], "--env '1X': not a variable name Kubernetes takes"),
        (["A B=y"], "--env 'A B': not a variable name"),
        (["NOEQUALS"], "--env 'NOEQUALS': must be KEY=VALUE"),
        (["PUNCTUAL_TICK=x"], "--env PUNCTUAL_TICK: PUNCTUAL_* are Punctual's own variables"),
        ([f"BIG={'x' * 4097}"], "--env BIG: the value is over 4096 bytes"),
        ([f"V{i}=x" for i in range(33)], "--env: 33 variables, at most 32"),
    ],
    ids=["digit first", "space", "no equals", "punctual's own", "over 4 KiB", "33 of them"],
)
def test_bad_env_is_one_line_naming_it(pairs: list[str], message: str) -> None:
    with pytest.raises(TriggerError) as raised:
        parse_env(pairs)
    assert str(raised.value).startswith(message)
    assert "\n" not in str(raised.value)


def test_a_written_annotation_with_bad_env_is_refused_naming_the_field() -> None:
    with pytest.raises(TriggerError, match=r"punctual.dev/trigger\]\.env '1X'"):
        parse_trigger('{"request": "r", "env": {"1X": "y"}}')


def test_a_trigger_with_bad_env_writes_nothing(capsys: pytest.CaptureFixture[str]) -> None:
    from punctual.cli.main import main

    status = main(["trigger", "nightly", "--env", "1X=y", "--kubeconfig", "/nonexistent"])
    err = capsys.readouterr().err
    assert status == 2
    assert err.strip().splitlines() == [
        "punctual: --env '1X': not a variable name Kubernetes takes (letters, digits, '_', "
        "'-' and '.', not a digit first)"
    ]


def test_a_name_the_api_server_checked_is_recorded_verified() -> None:
    """With the triggers policy in force (--verified-triggers), the request's name is
    verified when it is the plain annotation the policy compared with the caller."""
    schedule = body(ASKED.annotation())
    schedule["metadata"]["annotations"]["punctual.dev/triggered-by"] = "alice"
    decision = decide(schedule, [], now=T0 + 10 * M, leadership=LEADER, verified_triggers=True)
    firing = manual_firing(decision)
    assert firing["triggeredBy"] == "alice" and firing["triggeredByVerified"] is True
    [event] = [e for e in decision.events if e.reason == "Triggered"]
    assert "by alice:" in event.message
    # Another name in the plain annotation than in the request: not verified.
    schedule["metadata"]["annotations"]["punctual.dev/triggered-by"] = "mallory"
    decision = decide(schedule, [], now=T0 + 10 * M, leadership=LEADER, verified_triggers=True)
    assert manual_firing(decision)["triggeredByVerified"] is False
