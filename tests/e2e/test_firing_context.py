"""The firing told to the workload, and manual triggers that name who asked, for real.

Against the real API server: a Job's pod template carries the tick's environment
variables and annotations (a container that sets one itself keeps it, and the clash
is one Event); `punctual trigger --reason --overlap` names the caller as the API
server's SelfSubjectReview does (the local cluster's admin is `admin`), in the Job,
status.recentFirings, the Event, `punctual history` and `punctual describe`.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from punctual.kube.client import KubeClient
from punctual.kube.reviewing import caller_name

from .conftest import REPO, Cluster
from .operators import operators, parse, wait_until

pytestmark = pytest.mark.e2e


def firing_schedule(name: str) -> dict[str, Any]:
    """Every 5 s, Forbid; its init container sets PUNCTUAL_TICK itself."""
    return {
        "apiVersion": "punctual.dev/v1",
        "kind": "CronSchedule",
        "metadata": {"name": name},
        "spec": {
            "schedule": "*/5 * * * * *",
            "timeZone": "Asia/Kolkata",
            "concurrencyPolicy": "Forbid",
            "jobTemplate": {
                "spec": {
                    "backoffLimit": 0,
                    "template": {
                        "metadata": {
                            "annotations": {"pod-complete.stage.kwok.x-k8s.io/delay": "20000ms"}
                        },
                        "spec": {
                            "restartPolicy": "Never",
                            "initContainers": [
                                {
                                    "name": "setup",
                                    "image": "busybox",
                                    "env": [{"name": "PUNCTUAL_TICK", "value": "mine"}],
                                }
                            ],
                            "containers": [{"name": "main", "image": "busybox"}],
                        },
                    },
                }
            },
        },
    }


def get(cluster: Cluster, namespace: str, *what: str) -> dict[str, Any]:
    return dict(json.loads(cluster.kubectl("get", "-n", namespace, *what, "-o", "json").stdout))


def punctual(cluster: Cluster, namespace: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "punctual.cli", *args, "-n", namespace],
        capture_output=True,
        text=True,
        cwd=REPO,
        env={"KUBECONFIG": str(cluster.kubeconfig), "PATH": "/usr/bin:/bin"},
        timeout=60,
    )


def events(cluster: Cluster, namespace: str, reason: str) -> list[dict[str, Any]]:
    items = get(cluster, namespace, "events")["items"]
    return [e for e in items if e.get("reason") == reason]


async def test_the_api_server_names_the_local_admin(crd: Cluster, api: KubeClient) -> None:
    assert await caller_name(api) == "admin"


def test_jobs_are_told_their_firing_and_a_trigger_names_who_asked(
    crd: Cluster, namespace: str, tmp_path: Path
) -> None:
    crd.kubectl("apply", "-n", namespace, "-f", "-", input=json.dumps(firing_schedule("ctx")))
    with operators(crd, namespace, tmp_path) as ops:
        ops.start("solo")
        # 1. A scheduled Job: every container told, the init container's own value kept.
        [job] = wait_until(
            lambda: [
                j
                for j in get(crd, namespace, "jobs")["items"]
                if not j["metadata"]["name"].startswith("ctx-m")
            ][:1],
            40,
            what="a scheduled Job",
        )
        pod = job["spec"]["template"]
        tick = job["metadata"]["annotations"]["punctual.dev/tick"]
        annotations = pod["metadata"]["annotations"]
        assert annotations["punctual.dev/tick"] == tick
        assert annotations["punctual.dev/firing"] == "scheduled"
        assert annotations["punctual.dev/schedule"] == "ctx"
        assert annotations["punctual.dev/namespace"] == namespace
        [main] = pod["spec"]["containers"]
        env = {e["name"]: e.get("value", "") for e in main["env"]}  # "" is not stored
        assert env["PUNCTUAL_TICK"] == tick
        assert parse(env["PUNCTUAL_TICK_LOCAL"]) == parse(tick)
        assert env["PUNCTUAL_TICK_LOCAL"].endswith("+05:30")
        assert (parse(tick) - parse(env["PUNCTUAL_PREVIOUS_TICK"])).total_seconds() == 5
        assert env["PUNCTUAL_FIRING"] == "scheduled"
        assert env["PUNCTUAL_EPOCH"] == job["metadata"]["annotations"]["punctual.dev/epoch"]
        [setup] = pod["spec"]["initContainers"]
        setup_env = {e["name"]: e.get("value", "") for e in setup["env"]}
        assert setup_env["PUNCTUAL_TICK"] == "mine"
        assert setup_env["PUNCTUAL_SCHEDULE"] == "ctx"

        # 2. A trigger overriding Forbid while that Job runs, naming the caller and why.
        triggered = punctual(
            crd, namespace, "trigger", "ctx", "--reason", "e2e rerun", "--overlap", "Allow"
        )
        assert triggered.returncode == 0, triggered.stderr
        assert f"cronschedule {namespace}/ctx triggered by admin (request " in triggered.stdout
        [manual] = wait_until(
            lambda: [
                j
                for j in get(crd, namespace, "jobs")["items"]
                if j["metadata"]["name"].startswith("ctx-m")
            ],
            30,
            what="the manual Job beside the running one",
        )
        assert manual["metadata"]["annotations"]["punctual.dev/triggered-by"] == "admin"
        assert manual["metadata"]["annotations"]["punctual.dev/trigger-reason"] == "e2e rerun"
        manual_env = {
            e["name"]: e.get("value", "")
            for e in manual["spec"]["template"]["spec"]["containers"][0]["env"]
        }
        assert manual_env["PUNCTUAL_FIRING"] == "manual"
        [firing] = wait_until(
            lambda: [
                f
                for f in get(crd, namespace, "cronschedule", "ctx")["status"].get(
                    "recentFirings", []
                )
                if f.get("manual")
            ],
            30,
            what="the manual firing in status",
        )
        assert firing["triggeredBy"] == "admin"
        assert firing["triggerReason"] == "e2e rerun"
        assert firing["concurrencyPolicy"] == "Allow"
        assert firing["outcome"] in ("Created", "Succeeded")

        # 3. Events: the trigger with who and why; the clash once, however many passes.
        wait_until(lambda: events(crd, namespace, "Triggered"), 20, what="the Triggered Event")
        [triggered_event] = events(crd, namespace, "Triggered")
        # No triggers admission policy in this namespace: nobody vouched for the name.
        assert 'by admin (unverified): "e2e rerun"' in triggered_event["message"]
        [clash] = wait_until(
            lambda: events(crd, namespace, "EnvironmentClash"), 20, what="the clash Event"
        )
        assert clash["type"] == "Warning"
        assert clash["message"].startswith("container setup sets PUNCTUAL_TICK")
        assert clash.get("count", 1) == 1

    # 4. What a person reads.
    history = punctual(crd, namespace, "history", "ctx")
    assert history.returncode == 0, history.stderr
    [row] = [line for line in history.stdout.splitlines() if "(manual)" in line]
    assert " admin? " in row and '"e2e rerun"; concurrencyPolicy Allow for this firing' in row
    described = punctual(crd, namespace, "describe", "ctx")
    assert described.returncode == 0, described.stderr
    lines = described.stdout.splitlines()
    assert lines[0].split() == ["Name:", "ctx"]
    assert "Time zone:    Asia/Kolkata" in lines
    assert "Next 10 ticks:" in lines
    assert any(" admin? " in line and "(manual)" in line for line in lines)
    assert any(line.split()[:2] == ["Ready", "True"] for line in lines)
    # The clash was reported once for this generation, across every pass since.
    assert len(events(crd, namespace, "EnvironmentClash")) == 1
