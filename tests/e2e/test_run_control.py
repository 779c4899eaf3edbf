"""Run control on the real control plane: maxConcurrent, concurrency groups, retries,
runs stuck pending, and a trigger's --env, with the API server's audit log as the oracle.

Pods run on kwok's fake nodes: `pod-complete.stage.kwok.x-k8s.io/delay` says how long a
run takes, `punctual.dev/test-outcome: fail` makes it fail (e2e/manifests/kwok-pod-stages.yaml),
and a nodeSelector no node matches keeps a pod Pending, as an image that never pulls would.
How many runs were running at once is read from the Jobs themselves: each Job's
creationTimestamp against the others' finish (completionTime or their Failed condition),
whole seconds both, so a Job created in the second another finished is not counted as
overlapping it.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from collections import Counter
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from punctual.core.naming import retry_job_name

from .conftest import REPO, Cluster
from .operators import job_creates, operators, parse, tick_of, wait_until
from .test_operator import apply, leader_of, schedule

pytestmark = pytest.mark.e2e


def jobs_of(cluster: Cluster, namespace: str, *names: str) -> list[dict[str, Any]]:
    out = cluster.kubectl("get", "jobs", "-n", namespace, "-o", "json")
    items = json.loads(out.stdout)["items"]
    return [
        j for j in items if j["metadata"].get("labels", {}).get("punctual.dev/schedule") in names
    ]


def finished(job: dict[str, Any]) -> datetime | None:
    status = job.get("status") or {}
    if status.get("completionTime"):
        return parse(status["completionTime"])
    for cond in status.get("conditions") or []:
        if cond.get("type") in ("Complete", "Failed") and cond.get("status") == "True":
            return parse(cond["lastTransitionTime"])
    return None


def most_at_once(jobs: list[dict[str, Any]]) -> int:
    """The most Jobs running at once, counted at each Job's creation."""
    most = 0
    for job in jobs:
        created = parse(job["metadata"]["creationTimestamp"])
        running = 0
        for other in jobs:
            began = parse(other["metadata"]["creationTimestamp"])
            ended = finished(other)
            if began <= created and (ended is None or created < ended):
                running += 1
        most = max(most, running)
    return most


def status_of(cluster: Cluster, namespace: str, name: str) -> dict[str, Any]:
    out = cluster.kubectl("get", "cronschedule", name, "-n", namespace, "-o", "json")
    return dict(json.loads(out.stdout).get("status") or {})


def test_max_concurrent_2_never_runs_more_than_2_and_records_the_skips(
    crd: Cluster, namespace: str, tmp_path: Path
) -> None:
    with operators(crd, namespace, tmp_path) as ops:
        ops.start("solo")
        wait_until(lambda: leader_of(crd, namespace) == "solo", 20, what="leadership")
        body = schedule("mc", "* * * * * *", run_ms=5000, concurrencyPolicy="Allow")
        body["spec"] |= {"maxConcurrent": 2, "successfulJobsHistoryLimit": 100}
        apply(crd, namespace, body)
        time.sleep(14)
    jobs = jobs_of(crd, namespace, "mc")
    assert len(jobs) >= 4, "runs of 5 s, two at a time, over 14 s"
    assert most_at_once(jobs) == 2
    skipped = [
        f for f in status_of(crd, namespace, "mc")["recentFirings"] if f["outcome"] == "Skipped"
    ]
    assert skipped and all(f["reason"].startswith("maxConcurrent 2:") for f in skipped)


def test_a_group_of_two_never_runs_both_across_a_leader_kill(
    crd: Cluster, namespace: str, tmp_path: Path
) -> None:
    if crd.audit_log is None:
        pytest.skip("needs the local control plane's audit log")
    with operators(crd, namespace, tmp_path) as ops:
        replicas = {"g0": ops.start("g0"), "g1": ops.start("g1")}
        wait_until(lambda: leader_of(crd, namespace) in replicas, 20, what="a leader")
        bodies = []
        for name in ("ga", "gb"):
            body = schedule(name, "* * * * * *", run_ms=3000, concurrencyPolicy="Forbid")
            body["spec"] |= {"concurrencyGroup": "etl", "successfulJobsHistoryLimit": 100}
            bodies.append(body)
        apply(crd, namespace, *bodies)
        time.sleep(8)
        leader = leader_of(crd, namespace)
        replicas[leader].signal(signal.SIGKILL)
        replicas[leader].proc.wait(5)
        wait_until(
            lambda: leader_of(crd, namespace) not in ("", leader), 20, what="the standby leads"
        )
        time.sleep(8)
    jobs = jobs_of(crd, namespace, "ga", "gb")
    names = {j["metadata"]["labels"]["punctual.dev/schedule"] for j in jobs}
    assert names == {"ga", "gb"}, "both members ran"
    assert most_at_once(jobs) == 1
    creates = Counter(c.name for c in job_creates(crd, namespace) if c.code == 201)
    assert max(creates.values()) == 1
    skipped = [
        f
        for name in ("ga", "gb")
        for f in status_of(crd, namespace, name)["recentFirings"]
        if f["outcome"] == "Skipped"
    ]
    assert any(f["reason"].startswith("concurrencyGroup etl:") for f in skipped)


def test_a_failing_tick_is_retried_twice_then_dead_once_each_across_a_leader_kill(
    crd: Cluster, namespace: str, tmp_path: Path
) -> None:
    if crd.audit_log is None:
        pytest.skip("needs the local control plane's audit log")
    with operators(crd, namespace, tmp_path) as ops:
        replicas = {"r0": ops.start("r0"), "r1": ops.start("r1")}
        wait_until(lambda: leader_of(crd, namespace) in replicas, 20, what="a leader")
        body = schedule("rt", "*/10 * * * * *", run_ms=500, concurrencyPolicy="Forbid")
        body["spec"]["jobTemplate"]["spec"]["template"]["metadata"]["annotations"][
            "punctual.dev/test-outcome"
        ] = "fail"
        body["spec"] |= {"retry": {"maxAttempts": 3, "delaySeconds": 2}}
        apply(crd, namespace, body)
        first = wait_until(
            lambda: sorted(j["metadata"]["name"] for j in jobs_of(crd, namespace, "rt")),
            20,
            what="the tick's first run",
        )[0]
        tick = tick_of(first)
        second = retry_job_name("rt", tick, 2)
        third = retry_job_name("rt", tick, 3)
        wait_until(
            lambda: second in {j["metadata"]["name"] for j in jobs_of(crd, namespace, "rt")},
            20,
            what="attempt 2",
        )
        # Kill the leader between attempts 2 and 3.
        leader = leader_of(crd, namespace)
        replicas[leader].signal(signal.SIGKILL)
        replicas[leader].proc.wait(5)
        replicas["r2"] = ops.start("r2")

        def dead() -> bool:
            firings = status_of(crd, namespace, "rt").get("recentFirings", [])
            return any(f.get("job") == third and f.get("dead") for f in firings)

        wait_until(dead, 40, what="the tick dead after attempt 3")
    creates = Counter(c.name for c in job_creates(crd, namespace) if c.code == 201)
    assert creates[first] == creates[second] == creates[third] == 1
    assert not any(n.startswith("rt-r") and n not in (second, third) for n in creates)
    events = json.loads(crd.kubectl("get", "events", "-n", namespace, "-o", "json").stdout)
    dead_events = [e for e in events["items"] if e["reason"] == "TickFailed"]
    assert len(dead_events) == 1 and third in dead_events[0]["message"]


def test_a_run_stuck_pending_is_failed_after_the_timeout_and_forbid_fires_the_next_tick(
    crd: Cluster, namespace: str, tmp_path: Path
) -> None:
    with operators(crd, namespace, tmp_path) as ops:
        ops.start("solo")
        wait_until(lambda: leader_of(crd, namespace) == "solo", 20, what="leadership")
        body = schedule("stuck", "*/5 * * * * *", run_ms=300, concurrencyPolicy="Forbid")
        pod = body["spec"]["jobTemplate"]["spec"]["template"]["spec"]
        pod["nodeSelector"] = {"punctual.dev/test-node": "none-matches"}  # never starts
        body["spec"] |= {"pendingTimeoutSeconds": 4, "failedJobsHistoryLimit": 10}
        apply(crd, namespace, body)
        first = wait_until(lambda: jobs_of(crd, namespace, "stuck"), 20, what="a run")[0]
        name = first["metadata"]["name"]

        def failed_by_timeout() -> dict[str, Any] | None:
            for f in status_of(crd, namespace, "stuck").get("recentFirings", []):
                if f.get("job") == name and f["outcome"] == "Failed":
                    return dict(f)
            return None

        firing = wait_until(failed_by_timeout, 30, what="the stuck run failed by the timeout")
        assert firing["reason"].startswith("PendingTimeout: no pod started within")
        assert "Unschedulable" in firing["reason"] or "Pending" in firing["reason"]
        # Forbid no longer held: the next tick fires, though the stuck Job is still there.
        wait_until(
            lambda: len(jobs_of(crd, namespace, "stuck")) >= 2, 20, what="the next tick fires"
        )
        job = next(j for j in jobs_of(crd, namespace, "stuck") if j["metadata"]["name"] == name)
        assert job["spec"]["activeDeadlineSeconds"] == 1
        assert "punctual.dev/pending-timeout" in job["metadata"]["annotations"]


def test_a_trigger_with_env_overrides_reaches_the_container(
    crd: Cluster, namespace: str, tmp_path: Path
) -> None:
    with operators(crd, namespace, tmp_path) as ops:
        ops.start("solo")
        wait_until(lambda: leader_of(crd, namespace) == "solo", 20, what="leadership")
        body = schedule("env", "0 0 1 1 *", run_ms=300)
        body["spec"]["jobTemplate"]["spec"]["template"]["spec"]["containers"][0]["env"] = [
            {"name": "MODE", "value": "incremental"}
        ]
        apply(crd, namespace, body)
        wait_until(lambda: status_of(crd, namespace, "env").get("nextScheduleTime"), 20)
        env = {"KUBECONFIG": str(crd.kubeconfig), "PATH": "/usr/bin:/bin"}
        cli = [sys.executable, "-m", "punctual.cli", "trigger", "env", "-n", namespace]
        refused = subprocess.run([*cli, "--env", "1X=y"], cwd=REPO, env=env, capture_output=True)
        assert refused.returncode == 2 and b"--env '1X'" in refused.stderr
        done = subprocess.run(
            [*cli, "--env", "MODE=full", "--env", "REGION=eu"],
            cwd=REPO,
            env=env,
            capture_output=True,
            text=True,
        )
        assert done.returncode == 0, done.stderr

        def pod_env() -> dict[str, str] | None:
            out = crd.kubectl("get", "pods", "-n", namespace, "-o", "json")
            for pod in json.loads(out.stdout)["items"]:
                container = pod["spec"]["containers"][0]
                values = {e["name"]: e.get("value", "") for e in container.get("env", [])}
                if "REGION" in values:
                    return values
            return None

        values = wait_until(pod_env, 30, what="the run's pod")
        assert values["MODE"] == "full" and values["REGION"] == "eu"
        assert values["PUNCTUAL_FIRING"] == "manual"
        [firing] = [f for f in status_of(crd, namespace, "env")["recentFirings"] if f.get("manual")]
        assert firing["envOverrides"] == ["MODE=full", "REGION=eu"]


def _punctual(crd: Cluster, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "punctual.cli", *args, "--kubeconfig", str(crd.kubeconfig)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
    )


def _minutes_ago(minutes: int) -> str:
    from punctual.core.times import format_time

    from .operators import now

    return format_time(now().replace(second=0, microsecond=0) - timedelta(minutes=minutes))


def test_a_backfill_under_max_concurrent_2_never_has_more_than_2_unfinished_runs(
    crd: Cluster, namespace: str, tmp_path: Path
) -> None:
    """The bug: the backfill's batch was 5 whatever ran, so 11 Jobs ran at once under
    maxConcurrent 2. Now every fill waits for room (core.admitting)."""
    with operators(crd, namespace, tmp_path) as ops:
        ops.start("solo")
        wait_until(lambda: leader_of(crd, namespace) == "solo", 20, what="leadership")
        body = schedule("bf", "* * * * *", run_ms=4000, concurrencyPolicy="Allow", suspend=True)
        body["spec"] |= {"maxConcurrent": 2, "successfulJobsHistoryLimit": 100}
        apply(crd, namespace, body)
        wait_until(lambda: status_of(crd, namespace, "bf").get("conditions"), 20)
        asked = _punctual(
            crd, "backfill", "bf", "-n", namespace,
            "--from", _minutes_ago(9), "--to", _minutes_ago(1),
        )  # fmt: skip
        assert asked.returncode == 0, asked.stderr
        wait_until(
            lambda: (
                (status_of(crd, namespace, "bf").get("backfill") or {}).get("state") == "Done"
                and all(finished(j) for j in jobs_of(crd, namespace, "bf"))
            ),
            90,
            what="the backfill done and its runs finished",
        )
    jobs = jobs_of(crd, namespace, "bf")
    assert len(jobs) == 8
    assert most_at_once(jobs) == 2


def test_a_backfill_and_a_retry_of_group_members_never_exceed_the_groups_limit(
    crd: Cluster, namespace: str, tmp_path: Path
) -> None:
    """Two members of a mutex, both backfilled at once, one of them failing and retried:
    never two runs among them at a time."""
    with operators(crd, namespace, tmp_path) as ops:
        ops.start("solo")
        wait_until(lambda: leader_of(crd, namespace) == "solo", 20, what="leadership")
        bodies = []
        for name in ("ma", "mb"):
            body = schedule(name, "0 0 1 1 *", run_ms=2000, concurrencyPolicy="Allow")
            body["spec"] |= {"concurrencyGroup": "etl", "successfulJobsHistoryLimit": 100}
            bodies.append(body)
        bodies[0]["spec"]["jobTemplate"]["spec"]["template"]["metadata"]["annotations"][
            "punctual.dev/test-outcome"
        ] = "fail"
        bodies[0]["spec"] |= {
            "retry": {"maxAttempts": 2, "delaySeconds": 1},
            "failedJobsHistoryLimit": 100,
            "schedule": "* * * * *",
            "suspend": False,
        }
        apply(crd, namespace, *bodies)
        wait_until(lambda: status_of(crd, namespace, "mb").get("conditions"), 20)
        # mb backfills a yearly schedule's ticks: none in the last minutes, so the range is
        # its last three yearly ticks; ma's own minute ticks fail and are retried meanwhile.
        for name, start in (("ma", _minutes_ago(4)), ("mb", "2023-01-01T00:00:00Z")):
            asked = _punctual(
                crd, "backfill", name, "-n", namespace, "--from", start, "--to", _minutes_ago(0)
            )
            assert asked.returncode == 0, asked.stderr

        def settled() -> bool:
            jobs = jobs_of(crd, namespace, "ma", "mb")
            retried = [j for j in jobs_of(crd, namespace, "ma") if "-r" in j["metadata"]["name"]]
            done = all(
                (status_of(crd, namespace, n).get("backfill") or {}).get("state") == "Done"
                for n in ("ma", "mb")
            )
            return done and len(retried) >= 4 and all(finished(j) for j in jobs)

        wait_until(settled, 150, what="both backfills done and ma's failures retried")
    jobs = jobs_of(crd, namespace, "ma", "mb")
    assert {j["metadata"]["labels"]["punctual.dev/schedule"] for j in jobs} == {"ma", "mb"}
    assert most_at_once(jobs) == 1


def test_ten_concurrent_triggers_make_ten_runs(
    crd: Cluster, namespace: str, tmp_path: Path
) -> None:
    """Two triggers at once used to lose one while both said "triggered"."""
    with operators(crd, namespace, tmp_path) as ops:
        ops.start("solo")
        wait_until(lambda: leader_of(crd, namespace) == "solo", 20, what="leadership")
        body = schedule("ten", "0 0 1 1 *", run_ms=300, concurrencyPolicy="Allow")
        body["spec"] |= {"successfulJobsHistoryLimit": 100}
        apply(crd, namespace, body)
        wait_until(lambda: status_of(crd, namespace, "ten").get("nextScheduleTime"), 20)
        command = [
            sys.executable, "-m", "punctual.cli", "trigger", "ten", "-n", namespace,
            "--kubeconfig", str(crd.kubeconfig), "--timeout", "90",
        ]  # fmt: skip
        started = [
            subprocess.Popen(command, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
            for _ in range(10)
        ]
        answers = [(p.communicate(timeout=120), p.returncode) for p in started]
        outputs = [(code, out.decode(), err.decode()) for (out, err), code in answers]
        assert all(code == 0 for code, _, _ in outputs), outputs
        assert all("taken by the operator" in out for _, out, _ in outputs), outputs
        wait_until(
            lambda: len([j for j in jobs_of(crd, namespace, "ten")
                         if j["metadata"]["name"].startswith("ten-m")]) >= 10,
            30,
            what="ten manual runs",
        )  # fmt: skip
        time.sleep(2)
    manual = [
        j for j in jobs_of(crd, namespace, "ten") if j["metadata"]["name"].startswith("ten-m")
    ]
    assert len(manual) == 10


def test_a_concurrency_group_object_sets_the_limit_and_an_edit_of_it_applies_at_once(
    crd: Cluster, namespace: str, tmp_path: Path
) -> None:
    """The ConcurrencyGroup object (followed by kopf, like every small kind) makes the group
    a semaphore of 2; lowering it to 1 applies without a restart."""
    group = {
        "apiVersion": "punctual.dev/v1",
        "kind": "ConcurrencyGroup",
        "metadata": {"name": "etl"},
        "spec": {"maxConcurrent": 2},
    }
    with operators(crd, namespace, tmp_path) as ops:
        ops.start("solo")
        wait_until(lambda: leader_of(crd, namespace) == "solo", 20, what="leadership")
        crd.kubectl("apply", "-n", namespace, "-f", "-", input=json.dumps(group))
        bodies = []
        for name in ("sa", "sb", "sc"):
            body = schedule(name, "* * * * * *", run_ms=3000, concurrencyPolicy="Allow")
            body["spec"] |= {"concurrencyGroup": "etl", "successfulJobsHistoryLimit": 100}
            bodies.append(body)
        apply(crd, namespace, *bodies)
        time.sleep(10)
        semaphore = jobs_of(crd, namespace, "sa", "sb", "sc")
        group["spec"] = {"maxConcurrent": 1}
        crd.kubectl("apply", "-n", namespace, "-f", "-", input=json.dumps(group))
        time.sleep(4)  # the runs started under 2 end
        edited_at = datetime.now(UTC)
        time.sleep(10)
    assert most_at_once(semaphore) == 2
    after = [
        j
        for j in jobs_of(crd, namespace, "sa", "sb", "sc")
        if parse(j["metadata"]["creationTimestamp"]) >= edited_at
    ]
    assert len(after) >= 2 and most_at_once(after) == 1
