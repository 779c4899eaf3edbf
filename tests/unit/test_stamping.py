"""The firing told to the workload: every container's env and the pod's annotations.

A table of pod templates (no env, user env, name clashes, init containers, malformed
parts) around one firing, then the values themselves (zones, no previous tick, kinds),
then the decisions: the Job bodies `decide` builds and the clash Event, once per
generation of the schedule.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo

import pytest

from punctual.core.deciding import decide
from punctual.core.decisions import Leadership
from punctual.core.jobs import build_job
from punctual.core.stamping import (
    ANNOTATIONS,
    VARIABLES,
    Clash,
    Firing,
    FiringKind,
    clashes,
    stamp,
)

TICK = datetime(2026, 3, 29, 1, 30, tzinfo=UTC)  # 03:30 CEST, the morning clocks sprang
FIRING = Firing(
    tick=TICK,
    previous_tick=TICK - timedelta(days=1),
    zone=ZoneInfo("Europe/Berlin"),
    schedule="nightly-report",
    namespace="reports",
    kind=FiringKind.SCHEDULED,
    epoch=7,
)
VALUES = {
    "PUNCTUAL_TICK": "2026-03-29T01:30:00Z",
    "PUNCTUAL_TICK_LOCAL": "2026-03-29T03:30:00+02:00",
    "PUNCTUAL_PREVIOUS_TICK": "2026-03-28T01:30:00Z",
    "PUNCTUAL_SCHEDULE": "nightly-report",
    "PUNCTUAL_NAMESPACE": "reports",
    "PUNCTUAL_FIRING": "scheduled",
    "PUNCTUAL_EPOCH": "7",
    "PUNCTUAL_LAST_SUCCESSFUL_TICK": "",
    "PUNCTUAL_ATTEMPT": "1",
}
OURS = [{"name": k, "value": v} for k, v in VALUES.items()]


def container(name: str, *env: tuple[str, str]) -> dict[str, Any]:
    made: dict[str, Any] = {"name": name, "image": "busybox"}
    if env:
        made["env"] = [{"name": k, "value": v} for k, v in env]
    return made


def pod(*containers: dict[str, Any], init: tuple[dict[str, Any], ...] = ()) -> dict[str, Any]:
    spec: dict[str, Any] = {"restartPolicy": "Never", "containers": list(containers)}
    if init:
        spec["initContainers"] = list(init)
    return {"spec": spec}


@dataclass(frozen=True)
class Case:
    name: str
    template: dict[str, Any]
    # container name -> its env after stamping
    env: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    clashes: tuple[Clash, ...] = ()


CASES = [
    Case(
        "one container without env: all seven variables",
        pod(container("main")),
        env={"main": OURS},
    ),
    Case(
        "the user's variables stay first and untouched",
        pod(container("main", ("LOG_LEVEL", "debug"))),
        env={"main": [{"name": "LOG_LEVEL", "value": "debug"}, *OURS]},
    ),
    Case(
        "a clash: the user's PUNCTUAL_TICK is left alone, the others are added",
        pod(container("main", ("PUNCTUAL_TICK", "mine"))),
        env={
            "main": [
                {"name": "PUNCTUAL_TICK", "value": "mine"},
                *[e for e in OURS if e["name"] != "PUNCTUAL_TICK"],
            ]
        },
        clashes=(Clash("main", "PUNCTUAL_TICK"),),
    ),
    Case(
        "a clash set by valueFrom counts too",
        pod(
            {
                "name": "main",
                "env": [
                    {
                        "name": "PUNCTUAL_EPOCH",
                        "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}},
                    }
                ],
            }
        ),
        env={
            "main": [
                {
                    "name": "PUNCTUAL_EPOCH",
                    "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}},
                },
                *[e for e in OURS if e["name"] != "PUNCTUAL_EPOCH"],
            ]
        },
        clashes=(Clash("main", "PUNCTUAL_EPOCH"),),
    ),
    Case(
        "init containers are told too, each clash named with its container",
        pod(
            container("main"),
            container("sidecar", ("PUNCTUAL_FIRING", "x"), ("PUNCTUAL_SCHEDULE", "y")),
            init=(container("setup", ("PUNCTUAL_PREVIOUS_TICK", "z")),),
        ),
        env={
            "main": OURS,
            "sidecar": [
                {"name": "PUNCTUAL_FIRING", "value": "x"},
                {"name": "PUNCTUAL_SCHEDULE", "value": "y"},
                *[e for e in OURS if e["name"] not in ("PUNCTUAL_FIRING", "PUNCTUAL_SCHEDULE")],
            ],
            "setup": [
                {"name": "PUNCTUAL_PREVIOUS_TICK", "value": "z"},
                *[e for e in OURS if e["name"] != "PUNCTUAL_PREVIOUS_TICK"],
            ],
        },
        # In the order containers are read (init first), then the variables' order.
        clashes=(
            Clash("setup", "PUNCTUAL_PREVIOUS_TICK"),
            Clash("sidecar", "PUNCTUAL_SCHEDULE"),
            Clash("sidecar", "PUNCTUAL_FIRING"),
        ),
    ),
    Case(
        "an env that is not a list is left for the API server to refuse",
        pod({"name": "main", "env": "oops"}),
        env={"main": "oops"},  # type: ignore[dict-item]
    ),
    Case("no containers at all: only the annotations", {"spec": {}}),
    Case("no spec at all: only the annotations", {}),
]


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_stamping(case: Case) -> None:
    pristine = copy.deepcopy(case.template)
    stamped = stamp(case.template, FIRING)
    assert case.template == pristine  # never changes what it was given
    spec = stamped.get("spec") or {}
    found = {
        c["name"]: c.get("env")
        for key in ("initContainers", "containers")
        for c in spec.get(key) or []
    }
    assert found == case.env
    annotations = stamped["metadata"]["annotations"]
    assert annotations == {ANNOTATIONS[k]: v for k, v in VALUES.items()}
    job_template = {"spec": {"template": case.template}}
    assert tuple(clashes(job_template)) == case.clashes


def test_the_pods_own_annotations_stay_and_ours_are_always_ours() -> None:
    template = {
        "metadata": {"annotations": {"team": "a", "punctual.dev/tick": "forged"}},
        "spec": {"containers": [container("main")]},
    }
    annotations = stamp(template, FIRING)["metadata"]["annotations"]
    assert annotations["team"] == "a"
    assert annotations["punctual.dev/tick"] == "2026-03-29T01:30:00Z"


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        ({}, VALUES),
        (
            {"previous_tick": None},
            {**VALUES, "PUNCTUAL_PREVIOUS_TICK": ""},
        ),
        (
            {"zone": ZoneInfo("UTC")},
            {**VALUES, "PUNCTUAL_TICK_LOCAL": "2026-03-29T01:30:00+00:00"},
        ),
        (
            {"zone": ZoneInfo("America/New_York")},
            {**VALUES, "PUNCTUAL_TICK_LOCAL": "2026-03-28T21:30:00-04:00"},
        ),
        (
            {"kind": FiringKind.MANUAL, "tick": TICK + timedelta(microseconds=250_000)},
            {
                **VALUES,
                "PUNCTUAL_FIRING": "manual",
                "PUNCTUAL_TICK": "2026-03-29T01:30:00.250000Z",
                "PUNCTUAL_TICK_LOCAL": "2026-03-29T03:30:00.250000+02:00",
            },
        ),
        (
            {"kind": FiringKind.AFTER, "upstream": ("extract/extract-1774747800",)},
            {
                **VALUES,
                "PUNCTUAL_FIRING": "after",
                "PUNCTUAL_UPSTREAM": "extract/extract-1774747800",
            },
        ),
    ],
    ids=[
        "scheduled",
        "no previous tick: empty",
        "UTC",
        "another zone",
        "manual, with a fraction",
        "after an upstream run: which one",
    ],
)
def test_the_values(change: dict[str, Any], expected: dict[str, str]) -> None:
    values = replace(FIRING, **change).values()
    assert values == expected
    # Always all nine, in one order; the tenth only on a run after upstream runs.
    assert tuple(values) == tuple(v for v in VARIABLES if v in expected)


def test_build_job_stamps_only_when_told_the_firing() -> None:
    schedule = {
        "metadata": {"name": "nightly-report", "namespace": "reports", "uid": "u"},
        "spec": {"jobTemplate": {"spec": {"template": pod(container("main"))}}},
    }
    plain = build_job(schedule=schedule, job_name="j", tick=TICK, epoch=7, leader="l")
    assert "env" not in plain["spec"]["template"]["spec"]["containers"][0]
    told = build_job(schedule=schedule, job_name="j", tick=TICK, epoch=7, leader="l", firing=FIRING)
    assert told["spec"]["template"]["spec"]["containers"][0]["env"] == OURS
    assert told["metadata"]["annotations"]["punctual.dev/firing"] == "scheduled"


# -- in decisions ----------------------------------------------------------------------

T0 = datetime(2026, 11, 25, 12, 0, tzinfo=UTC)
LEADER = Leadership(epoch=7, identity="punctual-0")


def schedule_body(
    template: dict[str, Any], *, generation: int = 3, observed: int | None = None, **spec: Any
) -> dict[str, Any]:
    status: dict[str, Any] = {"lastScheduledTime": "2026-11-25T11:00:00Z"}
    if observed is not None:
        status["observedGeneration"] = observed
    return {
        "metadata": {
            "name": "hourly",
            "namespace": "reports",
            "uid": "5f0c1e2d-7a4b-4c3d-9e8f-0a1b2c3d4e5f",
            "generation": generation,
            "creationTimestamp": "2026-11-20T00:00:00Z",
        },
        "spec": {"schedule": "0 * * * *", "jobTemplate": {"spec": {"template": template}}, **spec},
        "status": status,
    }


def test_a_scheduled_job_is_told_its_tick_the_previous_one_and_its_zone() -> None:
    body = schedule_body(pod(container("main")), timeZone="Asia/Kolkata")
    [create] = decide(body, [], now=T0 + timedelta(seconds=1), leadership=LEADER).creates
    env = {
        e["name"]: e["value"]
        for e in create.body["spec"]["template"]["spec"]["containers"][0]["env"]
    }
    assert env == {
        # Hourly in Kolkata: at :30 UTC. The previous tick is the schedule's, not the cursor.
        "PUNCTUAL_TICK": "2026-11-25T11:30:00Z",
        "PUNCTUAL_TICK_LOCAL": "2026-11-25T17:00:00+05:30",
        "PUNCTUAL_PREVIOUS_TICK": "2026-11-25T10:30:00Z",
        "PUNCTUAL_SCHEDULE": "hourly",
        "PUNCTUAL_NAMESPACE": "reports",
        "PUNCTUAL_FIRING": "scheduled",
        "PUNCTUAL_EPOCH": "7",
        "PUNCTUAL_LAST_SUCCESSFUL_TICK": "",  # none has succeeded yet
        "PUNCTUAL_ATTEMPT": "1",
    }


def test_the_last_successful_tick_is_the_newest_run_known_to_have_succeeded() -> None:
    body = schedule_body(pod(container("main")))
    body["status"]["recentFirings"] = [
        {"tick": "2026-11-25T09:30:00Z", "job": "a", "outcome": "Succeeded", "epoch": 7},
        {"tick": "2026-11-25T10:00:00Z", "job": "b", "outcome": "Failed", "epoch": 7},
    ]
    body["status"]["lastSuccessfulTick"] = "2026-11-25T08:00:00Z"
    [create] = decide(body, [], now=T0 + timedelta(seconds=1), leadership=LEADER).creates
    [main] = create.body["spec"]["template"]["spec"]["containers"]
    env = {e["name"]: e["value"] for e in main["env"]}
    assert env["PUNCTUAL_LAST_SUCCESSFUL_TICK"] == "2026-11-25T09:30:00Z"
    notes = create.body["spec"]["template"]["metadata"]["annotations"]
    assert notes["punctual.dev/last-successful-tick"] == "2026-11-25T09:30:00Z"


def test_the_previous_tick_is_of_the_combined_ticks_and_empty_for_a_one_shot() -> None:
    # Two entries: the tick before 12:00 is 11:45 (the interval), not 11:00 (the cron).
    body = schedule_body(pod(container("main")))
    body["spec"].pop("schedule")
    body["spec"]["schedules"] = [{"cron": "0 * * * *"}, {"every": "1h", "offset": "45m"}]
    body["status"]["lastScheduledTime"] = "2026-11-25T11:45:00Z"
    [create] = decide(body, [], now=T0 + timedelta(seconds=1), leadership=LEADER).creates
    annotations = create.body["spec"]["template"]["metadata"]["annotations"]
    assert annotations["punctual.dev/previous-tick"] == "2026-11-25T11:45:00Z"

    once = schedule_body(pod(container("main")))
    once["spec"].pop("schedule")
    once["spec"]["runAt"] = "2026-11-25T12:00:00Z"
    once["status"] = {}
    [create] = decide(once, [], now=T0 + timedelta(seconds=1), leadership=LEADER).creates
    annotations = create.body["spec"]["template"]["metadata"]["annotations"]
    assert annotations["punctual.dev/previous-tick"] == ""


def clash_events(body: dict[str, Any]) -> list[str]:
    decision = decide(body, [], now=T0 - timedelta(minutes=10), leadership=LEADER)
    return [e.message for e in decision.events if e.reason == "EnvironmentClash"]


def test_a_clash_is_reported_once_per_generation() -> None:
    template = pod(container("main", ("PUNCTUAL_TICK", "mine")))
    # A generation not yet observed (new, or edited): one Warning Event.
    [message] = clash_events(schedule_body(template, generation=3, observed=2))
    assert message.startswith("container main sets PUNCTUAL_TICK: left as the jobTemplate")
    [_] = clash_events(schedule_body(template, generation=1, observed=None))
    # The status that decision writes observes the generation: never again for it, on
    # any leader, after any restart.
    assert clash_events(schedule_body(template, generation=3, observed=3)) == []
    # No clash, no Event.
    assert clash_events(schedule_body(pod(container("main")), generation=4, observed=3)) == []


def test_the_decision_that_reports_a_clash_writes_the_generation_it_saw() -> None:
    body = schedule_body(pod(container("main", ("PUNCTUAL_EPOCH", "1"))), generation=5, observed=4)
    decision = decide(body, [], now=T0 - timedelta(minutes=10), leadership=LEADER)
    assert decision.status is not None
    assert decision.status["observedGeneration"] == 5
