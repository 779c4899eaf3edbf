"""At most once across any deletion: a Job that vanishes before its firing is recorded
is never created again, whoever deleted it and whenever.

The hole (before the finalizer): the leader claims tick T (status: T in flight),
creates its Job, and the status that records the Job seen is left for a later write.
If the Job is deleted in that window (by a person, by `ttlSecondsAfterFinished`) and the
leader dies, the next leader finds T in flight and no Job: it created T again. Now every
Job carries the `punctual.dev/record-firing` finalizer, so it stays (being deleted)
until a leader has recorded its firing in the written status and released it.

The oracle is the API server's audit log: one successful create per Job name.
"""

from __future__ import annotations

import json
import signal
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from punctual.core.keys import FINALIZER

from .conftest import Cluster
from .operators import job_creates, now, operators, wait_until
from .test_operator import apply, assert_exactly_once, created, leader_of, schedule

pytestmark = pytest.mark.e2e


@pytest.fixture
def workdir(tmp_path: Path) -> Path:
    return tmp_path


def job_names(cluster: Cluster, namespace: str, name: str) -> dict[str, dict[str, Any]]:
    out = cluster.kubectl(
        "get", "jobs", "-n", namespace, "-l", f"punctual.dev/schedule={name}", "-o", "json"
    )
    items: list[dict[str, Any]] = json.loads(out.stdout)["items"]
    return {j["metadata"]["name"]: j["metadata"] for j in items}


def test_a_job_deleted_at_creation_while_the_leader_dies_is_never_created_again(
    crd: Cluster, namespace: str, workdir: Path
) -> None:
    if crd.audit_log is None:
        pytest.skip("needs the local control plane's audit log")
    rounds = 5
    with operators(crd, namespace, workdir) as ops:
        replicas = {"r0": ops.start("r0"), "r1": ops.start("r1")}
        wait_until(lambda: leader_of(crd, namespace) in replicas, 20, what="a leader")
        apply(
            crd,
            namespace,
            schedule(
                "gone",
                "*/5 * * * * *",
                startingDeadlineSeconds=60,
                concurrencyPolicy="Allow",
                missedRunPolicy="RunAll",
            ),
        )
        deleted: list[str] = []
        for i in range(rounds):
            leader = leader_of(crd, namespace)
            before = set(job_names(crd, namespace, "gone"))
            fresh = wait_until(
                lambda b=before: sorted(set(job_names(crd, namespace, "gone")) - b),
                15,
                interval=0.05,
                what=f"round {i}: a new Job",
            )
            # The moment it appears: kill -9 the leader and delete the Job.
            replicas[leader].signal(signal.SIGKILL)
            replicas[leader].proc.wait(5)
            for name in fresh:
                crd.kubectl(
                    "delete", "job", name, "-n", namespace, "--cascade=background", "--wait=false"
                )
            deleted += fresh
            successor = f"r{len(replicas)}"
            replicas[successor] = ops.start(successor)
            wait_until(
                lambda gone=leader: leader_of(crd, namespace) not in ("", gone),
                20,
                what=f"round {i}: a standby takes over from {leader}",
            )
        # Let the last leader settle what it took over, then look at the whole history.
        time.sleep(6)
        remaining = job_names(crd, namespace, "gone")

    creates = Counter(c.name for c in job_creates(crd, namespace) if c.code == 201)
    again = {name: count for name, count in creates.items() if count > 1}
    print(f"\n{rounds} rounds, Jobs deleted at creation: {deleted}; created twice: {again}")
    assert len(deleted) >= rounds
    assert not again, f"Jobs created again after their deletion: {again}"
    stuck = [n for n in deleted if n in remaining]
    assert not stuck, f"deleted Jobs still held by the finalizer: {stuck}"
    assert all(FINALIZER in (m.get("finalizers") or []) for m in remaining.values())


def test_a_herd_of_ttl_zero_jobs_with_leader_kills_fires_each_tick_once(
    crd: Cluster, namespace: str, workdir: Path
) -> None:
    if crd.audit_log is None:
        pytest.skip("needs the local control plane's audit log")
    herd = 20
    with operators(crd, namespace, workdir) as ops:
        replicas = {"h0": ops.start("h0"), "h1": ops.start("h1")}
        wait_until(lambda: leader_of(crd, namespace) in replicas, 20, what="a leader")
        schedules = []
        for i in range(herd):
            body = schedule(
                f"ttl{i:02d}",
                "*/2 * * * * *",
                run_ms=200,
                concurrencyPolicy="Allow",
                missedRunPolicy="RunAll",
                startingDeadlineSeconds=60,
            )
            body["spec"]["jobTemplate"]["spec"]["ttlSecondsAfterFinished"] = 0
            schedules.append(body)
        apply(crd, namespace, *schedules)
        started = now()
        for kill in range(2):
            time.sleep(8)
            leader = leader_of(crd, namespace)
            replicas[leader].signal(signal.SIGKILL)
            replicas[leader].proc.wait(5)
            successor = f"h{len(replicas)}"
            replicas[successor] = ops.start(successor)
            wait_until(
                lambda gone=leader: leader_of(crd, namespace) not in ("", gone),
                20,
                what=f"kill {kill}: a new leader",
            )
        time.sleep(8)
        for i in range(herd):
            crd.kubectl("delete", "cronschedule", f"ttl{i:02d}", "-n", namespace, "--wait=false")
        time.sleep(3)

    fired = [c for c in job_creates(crd, namespace) if c.code == 201 and c.at > started]
    for i in range(herd):
        assert_exactly_once(created(crd, namespace, f"ttl{i:02d}"))
    print(
        f"\n{herd} schedules every 2 s, ttlSecondsAfterFinished 0, 2 leader kills: "
        f"{len(fired)} Jobs, none twice"
    )
    assert len(fired) >= herd * 8
