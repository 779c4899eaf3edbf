"""A fault campaign with the API server's audit log as the oracle.

Every-second schedules fire while the campaign kills the leader (kill -9), pauses it
past its Lease (SIGSTOP), restarts the API server, deletes Jobs the moment they appear,
and deletes the Lease by hand; one schedule's Jobs go on their own
(`ttlSecondsAfterFinished: 0`). Then the audit log must show exactly one create per
(schedule, tick) and a Job for every tick (each outage is shorter than the starting
deadline, and RunAll runs what was missed).

`make test` runs a short campaign (CHAOS_FAULTS, default 10); `make chaos` a long one
(100 faults, about 20 minutes) and prints the same table.
"""

from __future__ import annotations

import json
import os
import random
import signal
import statistics
import time
from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path

import pytest

from .conftest import Cluster
from .operators import Operators, job_creates, now, operators, tick_of, wait_until
from .test_operator import apply, leader_of, schedule

pytestmark = pytest.mark.e2e

KINDS = ("kill -9", "SIGSTOP past the Lease", "API server restart", "Job deleted", "Lease deleted")
SCHEDULES = ("c0", "c1", "c2", "cttl")


@pytest.fixture
def workdir(tmp_path: Path) -> Path:
    return tmp_path


@dataclass
class Campaign:
    cluster: Cluster
    namespace: str
    ops: Operators
    rng: random.Random
    replicas: int = 0
    faults: Counter[str] = field(default_factory=Counter)

    def start_replica(self) -> None:
        self.ops.start(f"x{self.replicas}")
        self.replicas += 1

    def alive(self) -> dict[str, int]:
        return {op.identity: i for i, op in enumerate(self.ops.started) if op.proc.poll() is None}

    def leader(self) -> int | None:
        name = leader_of(self.cluster, self.namespace)
        return self.alive().get(name)

    def kubectl(self, *args: str) -> None:
        self.cluster.kubectl(*args, "-n", self.namespace, check=False)

    def inflict(self, kind: str) -> None:
        leader = self.leader()
        if kind == "kill -9" and leader is not None:
            op = self.ops.started[leader]
            op.signal(signal.SIGKILL)
            op.proc.wait(5)
            self.start_replica()
        elif kind == "SIGSTOP past the Lease" and leader is not None:
            op = self.ops.started[leader]
            op.signal(signal.SIGSTOP)
            time.sleep(8)  # the Lease is 6 s: a standby takes over meanwhile
            op.signal(signal.SIGCONT)
        elif kind == "API server restart":
            assert self.cluster.local is not None
            self.cluster.local.stop("kube-apiserver")
            time.sleep(self.rng.uniform(1, 4))
            self.cluster.local.start("kube-apiserver")
            self.cluster.local.wait_ready(60)
        elif kind == "Job deleted":
            name = f"c{self.rng.randrange(3)}"
            before = self.jobs(name)
            try:
                fresh = wait_until(lambda: sorted(self.jobs(name) - before), 10, interval=0.05)
            except AssertionError:
                return  # nothing fired meanwhile (a hand-over after the last fault)
            self.kubectl("delete", "job", fresh[0], "--cascade=background", "--wait=false")
        elif kind == "Lease deleted":
            self.kubectl("delete", "lease", "punctual-leader", "--wait=false")
        else:
            return  # no leader at this moment: nothing to hit
        self.faults[kind] += 1

    def jobs(self, name: str) -> set[str]:
        out = self.cluster.kubectl(
            "get", "jobs", "-n", self.namespace, "-l", f"punctual.dev/schedule={name}",
            "-o", "jsonpath={.items[*].metadata.name}", check=False,
        )  # fmt: skip
        return set(out.stdout.split())


def test_a_fault_campaign_creates_one_job_per_tick_and_loses_none(
    crd: Cluster, namespace: str, workdir: Path
) -> None:
    if crd.local is None or crd.audit_log is None:
        pytest.skip("needs the local control plane (restarts, audit log)")
    count = int(os.environ.get("CHAOS_FAULTS", "10"))
    interval = float(os.environ.get("CHAOS_INTERVAL", "6"))
    rng = random.Random(int(os.environ.get("CHAOS_SEED", "7")))
    with operators(crd, namespace, workdir) as ops:
        campaign = Campaign(crd, namespace, ops, rng)
        campaign.start_replica()
        campaign.start_replica()
        wait_until(lambda: campaign.leader() is not None, 20, what="a leader")
        every_second = {
            "missedRunPolicy": "RunAll",
            "maxMissedRuns": 100,
            "startingDeadlineSeconds": 30,
            "successfulJobsHistoryLimit": 2,
        }
        bodies = [schedule(f"c{i}", "* * * * * *", run_ms=200, **every_second) for i in range(3)]
        ttl = schedule("cttl", "* * * * * *", run_ms=200, **every_second)
        ttl["spec"]["jobTemplate"]["spec"]["ttlSecondsAfterFinished"] = 0
        apply(crd, namespace, *bodies, ttl)
        time.sleep(4)
        started = now()
        kinds = [KINDS[i % len(KINDS)] for i in range(count)]
        rng.shuffle(kinds)
        for kind in kinds:
            campaign.inflict(kind)
            time.sleep(rng.uniform(interval / 2, interval))
            if len(campaign.alive()) < 2:
                campaign.start_replica()
        time.sleep(12)  # the last outage is over and RunAll has caught up
        finished = now()
        for name in SCHEDULES:
            crd.kubectl("patch", "cronschedule", name, "-n", namespace, "--type=merge",
                        "-p", json.dumps({"spec": {"suspend": True}}))  # fmt: skip

    report = _report(crd, namespace, campaign.faults, started, finished)
    print("\n" + report.table)
    assert not report.duplicates, report.duplicates
    assert not report.lost, report.lost
    assert sum(campaign.faults.values()) >= count * 0.8


@dataclass
class Report:
    table: str
    duplicates: dict[str, int]
    lost: dict[str, list[str]]


def _report(
    cluster: Cluster, namespace: str, faults: Counter[str], started: datetime, finished: datetime
) -> Report:
    creates = [c for c in job_creates(cluster, namespace) if c.code == 201]
    counts = Counter(c.name for c in creates)
    duplicates = {name: n for name, n in counts.items() if n > 1}
    lost: dict[str, list[str]] = {}
    for name in SCHEDULES:
        fired = {tick_of(c.name) for c in creates if c.name.startswith(f"{name}-")}
        first = started.replace(microsecond=0) + timedelta(seconds=2)
        expected = [
            first + timedelta(seconds=s) for s in range(int((finished - first).total_seconds()) - 3)
        ]
        missing = [t.isoformat() for t in expected if t not in fired]
        if missing:
            lost[name] = missing
    lags = sorted((c.at - tick_of(c.name)).total_seconds() for c in creates if c.at >= started)
    p50 = statistics.median(lags) if lags else 0.0
    p99 = lags[min(len(lags) - 1, int(len(lags) * 0.99))] if lags else 0.0
    rows = [f"| {kind} | {faults[kind]} |" for kind in KINDS]
    table = "\n".join(
        [
            f"fault campaign: {(finished - started).total_seconds():.0f} s, "
            f"{sum(faults.values())} faults",
            "| fault | count |",
            "|---|---|",
            *rows,
            "",
            "| Jobs created | duplicates | lost ticks | lag p50 | lag p99 |",
            "|---|---|---|---|---|",
            f"| {len(creates)} | {len(duplicates)} | {sum(len(v) for v in lost.values())} | "
            f"{p50:.2f} s | {p99:.2f} s |",
        ]
    )
    return Report(table, duplicates, lost)
