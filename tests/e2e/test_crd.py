"""The CronSchedule CRD as the API server itself enforces and presents it.

Validation that the server can do (schema, enums, bounds, CEL rules) is checked here
against the real kube-apiserver, with the messages a user would see from kubectl.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from .conftest import REPO, Cluster

pytestmark = pytest.mark.e2e

SAMPLES = sorted((REPO / "crds" / "samples").glob("*.yaml"))

VALID: dict[str, Any] = {
    "apiVersion": "punctual.dev/v1",
    "kind": "CronSchedule",
    "metadata": {"name": "valid"},
    "spec": {
        "schedule": "*/5 * * * *",
        "jobTemplate": {
            "spec": {
                "template": {
                    "spec": {
                        "restartPolicy": "Never",
                        "containers": [{"name": "c", "image": "busybox"}],
                    }
                }
            }
        },
    },
}


def variant(
    spec: dict[str, Any] | None = None, drop: tuple[str, ...] = (), name: str = "bad"
) -> dict[str, Any]:
    obj = copy.deepcopy(VALID)
    obj["metadata"]["name"] = name
    obj["spec"].update(spec or {})
    for key in drop:
        del obj["spec"][key]
    return obj


def test_crd_applies_and_is_established(crd: Cluster) -> None:
    out = json.loads(crd.kubectl("get", "crd", "cronschedules.punctual.dev", "-o", "json").stdout)
    established = [c for c in out["status"]["conditions"] if c["type"] == "Established"]
    assert established[0]["status"] == "True"
    assert out["status"]["acceptedNames"]["shortNames"] == ["cronsched", "csched"]


@pytest.mark.parametrize("sample", SAMPLES, ids=[s.stem for s in SAMPLES])
def test_sample_is_accepted(crd: Cluster, namespace: str, sample: Path) -> None:
    crd.kubectl("create", "-n", namespace, "-f", str(sample))
    name = yaml.safe_load(sample.read_text())["metadata"]["name"]
    stored = json.loads(
        crd.kubectl("get", "-n", namespace, "cronschedule", name, "-o", "json").stdout
    )
    spec = stored["spec"]
    if "workloadTemplate" in spec:  # another kind: stored as written, spec and all
        written = yaml.safe_load(sample.read_text())["spec"]["workloadTemplate"]
        assert spec["workloadTemplate"] == written
        assert "jobTemplate" not in spec
    else:
        assert spec["jobTemplate"]["spec"]["template"]["spec"]["containers"]


def test_defaults_are_filled_in_by_the_server(crd: Cluster, namespace: str) -> None:
    crd.kubectl("create", "-n", namespace, "-f", "-", input=json.dumps(VALID))
    spec = json.loads(
        crd.kubectl("get", "-n", namespace, "cronschedule", "valid", "-o", "json").stdout
    )["spec"]
    assert spec["timeZone"] == "UTC"
    assert spec["missedRunPolicy"] == "RunLatest"
    assert spec["concurrencyPolicy"] == "Allow"
    assert spec["maxMissedRuns"] == 10
    assert spec["jitterSeconds"] == 0
    assert spec["suspend"] is False
    assert (spec["successfulJobsHistoryLimit"], spec["failedJobsHistoryLimit"]) == (3, 1)
    assert "startingDeadlineSeconds" not in spec  # unset means no deadline


INVALID = [
    (
        "both schedule and runAt",
        variant({"runAt": "2027-01-01T00:00:00Z"}),
        "exactly one of spec.schedule, spec.schedules and spec.runAt must be set",
    ),
    (
        "neither schedule nor runAt",
        variant(drop=("schedule",)),
        "exactly one of spec.schedule, spec.schedules and spec.runAt must be set",
    ),
    ("schedule with three fields", variant({"schedule": "* * *"}), "spec.schedule"),
    ("unknown macro", variant({"schedule": "@fortnightly"}), "spec.schedule"),
    ("time zone with spaces", variant({"timeZone": "Europe/New York"}), "spec.timeZone"),
    ("runAt that is not a date", variant({"runAt": "tomorrow"}, drop=("schedule",)), "spec.runAt"),
    ("unknown missedRunPolicy", variant({"missedRunPolicy": "Sometimes"}), "spec.missedRunPolicy"),
    (
        "unknown concurrencyPolicy",
        variant({"concurrencyPolicy": "Never"}),
        "spec.concurrencyPolicy",
    ),
    ("maxMissedRuns zero", variant({"maxMissedRuns": 0}), "spec.maxMissedRuns"),
    ("maxMissedRuns over 1000", variant({"maxMissedRuns": 1001}), "spec.maxMissedRuns"),
    (
        "negative startingDeadlineSeconds",
        variant({"startingDeadlineSeconds": -1}),
        "spec.startingDeadlineSeconds",
    ),
    ("jitter over an hour", variant({"jitterSeconds": 3601}), "spec.jitterSeconds"),
    (
        "history over 100",
        variant({"successfulJobsHistoryLimit": 101}),
        "spec.successfulJobsHistoryLimit",
    ),
    (
        "negative failed history",
        variant({"failedJobsHistoryLimit": -1}),
        "spec.failedJobsHistoryLimit",
    ),
    ("no jobTemplate", variant(drop=("jobTemplate",)), "spec.jobTemplate"),
    (
        "both jobTemplate and workloadTemplate",
        variant(
            {
                "workloadTemplate": {
                    "apiVersion": "argoproj.io/v1alpha1",
                    "kind": "Workflow",
                    "spec": {},
                }
            }
        ),
        "exactly one of spec.jobTemplate and spec.workloadTemplate",
    ),
    (
        "workloadTemplate without a kind",
        variant(
            {"workloadTemplate": {"apiVersion": "argoproj.io/v1alpha1", "spec": {}}},
            drop=("jobTemplate",),
        ),
        "spec.workloadTemplate.kind",
    ),
    (
        "completion with a jobTemplate",
        variant({"completion": {"succeeded": "true"}}),
        "spec.completion needs spec.workloadTemplate",
    ),
    (
        "jobTemplate without a pod template",
        variant({"jobTemplate": {"spec": {"backoffLimit": 1}}}),
        "spec.jobTemplate.spec.template",
    ),
    (
        "RunAll on a one-shot",
        variant({"runAt": "2027-01-01T00:00:00Z", "missedRunPolicy": "RunAll"}, drop=("schedule",)),
        "spec.missedRunPolicy RunAll needs spec.schedule",
    ),
    ("name too long for the Job suffix", variant(name="n" * 53), "at most 52 characters"),
    ("suspend not a boolean", variant({"suspend": "yes"}), "spec.suspend"),
]


@pytest.mark.parametrize(("case", "obj", "message"), INVALID, ids=[c[0] for c in INVALID])
def test_invalid_spec_is_rejected_by_the_api_server(
    crd: Cluster, namespace: str, case: str, obj: dict[str, Any], message: str
) -> None:
    result = crd.kubectl("create", "-n", namespace, "-f", "-", input=json.dumps(obj), check=False)
    assert result.returncode != 0, f"{case}: accepted"
    assert "is invalid" in result.stderr or "Invalid value" in result.stderr, result.stderr
    assert message in result.stderr, result.stderr


def test_get_shows_the_printer_columns(crd: Cluster, namespace: str) -> None:
    crd.kubectl(
        "create", "-n", namespace, "-f", str(REPO / "crds" / "samples" / "nightly-report.yaml")
    )
    header, row = crd.kubectl("get", "-n", namespace, "cronschedules").stdout.splitlines()[:2]
    assert header.split() == [
        "NAME",
        "SCHEDULE",
        "TIMEZONE",
        "SUSPEND",
        "ACTIVE",
        "LAST",
        "SCHEDULE",
        "NEXT",
        "REMAINING",
        "FINISHED",
        "AGE",
    ]
    assert row.split()[:4] == ["nightly-report", "0", "2", "*"]
    assert "Europe/Berlin" in row
    wide = crd.kubectl("get", "-n", namespace, "csched", "-o", "wide").stdout.splitlines()[0]
    assert "RUNAT" in wide and "READY" in wide


def test_explain_describes_the_fields(crd: Cluster) -> None:
    out = crd.kubectl("explain", "cronschedule.spec").stdout
    for field in (
        "schedule",
        "timeZone",
        "missedRunPolicy",
        "concurrencyPolicy",
        "jitterSeconds",
        "startingDeadlineSeconds",
        "jobTemplate",
        "runAt",
    ):
        assert field in out, field
    assert "IANA time zone" in out
    deep = crd.kubectl("explain", "cronschedule.spec.missedRunPolicy").stdout
    assert "RunLatest" in deep
