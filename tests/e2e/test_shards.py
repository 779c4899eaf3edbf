"""Shards across replicas, against the real API server, with the audit log as the oracle.

Three `punctual run --shards 8` replicas fire every-second schedules in three
namespaces, with the fencing policy judging each Job by its shard's Fence entry. The
shards split 3/3/2; kill -9 of one replica moves only its shards (to the two others,
4/4) after their Leases expire; every tick of every schedule is created exactly once
(none lost, none twice), each shard's Jobs come from one replica at a time, and the
lag of the shards that did not move is unchanged by the kill.
"""

from __future__ import annotations

import json
import signal
import statistics
import time
import uuid
from collections import Counter, defaultdict
from collections.abc import AsyncIterator
from datetime import datetime, timedelta
from itertools import pairwise
from pathlib import Path
from typing import Any

import pytest

from punctual.kube.client import KubeClient
from punctual.kube.sharding import shard_of

from .conftest import REPO, Cluster, release_jobs
from .operators import Create, job_creates, now, operators, tick_of, wait_until
from .test_operator import apply, schedule

pytestmark = pytest.mark.e2e

SHARDS = 8
POLICY = REPO / "crds" / "fencing.punctual.dev.yaml"
LEASE = ("--lease-duration", "6", "--renew-deadline", "4", "--retry-period", "1")


@pytest.fixture
def workdir(tmp_path: Path) -> Path:
    return tmp_path


@pytest.fixture
async def namespaces(crd: Cluster, api: KubeClient, namespace: str) -> AsyncIterator[list[str]]:
    """The test namespace (Leases and Fence live there) and two more, all fenced by the one
    Fence in the first, as the chart binds it."""
    extra = [f"{namespace}-{i}" for i in (1, 2)]
    for name in extra:
        crd.kubectl("create", "namespace", name)
    every = [namespace, *extra]
    crd.kubectl("apply", "-f", str(POLICY))
    binding: dict[str, Any] = {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingAdmissionPolicyBinding",
        "metadata": {"name": f"punctual-fencing-{namespace}"},
        "spec": {
            "policyName": "punctual-fencing.punctual.dev",
            "validationActions": ["Deny"],
            "paramRef": {
                "name": "punctual-fence",
                "namespace": namespace,
                "parameterNotFoundAction": "Deny",
            },
            "matchResources": {
                "namespaceSelector": {
                    "matchExpressions": [
                        {"key": "kubernetes.io/metadata.name", "operator": "In", "values": every}
                    ]
                }
            },
        },
    }
    crd.kubectl("apply", "-f", "-", input=json.dumps(binding))
    yield every
    crd.kubectl("delete", "validatingadmissionpolicybinding", binding["metadata"]["name"])
    for name in extra:
        await release_jobs(api, name)
        crd.kubectl("delete", "namespace", name, "--wait=false", check=False)


def holders(cluster: Cluster, namespace: str) -> dict[int, str]:
    """The holder of each shard Lease (absent or released: not listed)."""
    out = cluster.kubectl("get", "leases", "-n", namespace, "-o", "json")
    held = {}
    for lease in json.loads(out.stdout)["items"]:
        name = lease["metadata"]["name"]
        for index in range(SHARDS):
            if name == f"punctual-leader-{index}-of-{SHARDS}":
                holder = lease["spec"].get("holderIdentity") or ""
                if holder:
                    held[index] = holder
    return held


def split(cluster: Cluster, namespace: str) -> list[int]:
    held = holders(cluster, namespace)
    if len(held) < SHARDS:
        return []
    return sorted(Counter(held.values()).values())


def uid_of(cluster: Cluster, namespace: str, name: str) -> str:
    out = cluster.kubectl("get", "cronschedule", name, "-n", namespace, "-o", "json")
    return str(json.loads(out.stdout)["metadata"]["uid"])


def p99(values: list[float]) -> float:
    return statistics.quantiles(values, n=100)[98] if len(values) > 1 else max(values)


def lags(creates: list[Create], since: datetime, until: datetime) -> list[float]:
    return [(c.at - tick_of(c.name)).total_seconds() for c in creates if since <= c.at < until]


def test_three_replicas_share_eight_shards_and_a_kill_moves_only_its_shards(
    crd: Cluster, namespace: str, namespaces: list[str], workdir: Path
) -> None:
    if crd.audit_log is None:
        pytest.skip("needs the local control plane's audit log")
    watch = [arg for ns in namespaces[1:] for arg in ("--namespace", ns)]
    with operators(crd, namespace, workdir) as ops:
        replicas = {
            name: ops.start(name, "--shards", str(SHARDS), *watch, lease=LEASE)
            for name in ("ra", "rb", "rc")
        }
        wait_until(lambda: split(crd, namespace) == [2, 3, 3], 60, what="a 3/3/2 split")

        # Every-second schedules until each shard has two, spread over the namespaces.
        per_shard: dict[int, list[tuple[str, str]]] = defaultdict(list)
        made = 0
        while min((len(per_shard[i]) for i in range(SHARDS)), default=0) < 2 and made < 60:
            ns, name = namespaces[made % 3], f"s{made:02d}-{uuid.uuid4().hex[:4]}"
            apply(
                crd,
                ns,
                schedule(
                    name,
                    "* * * * * *",
                    run_ms=200,
                    concurrencyPolicy="Allow",
                    missedRunPolicy="RunAll",
                    maxMissedRuns=60,
                    startingDeadlineSeconds=120,
                ),
            )
            per_shard[shard_of(uid_of(crd, ns, name), SHARDS)].append((ns, name))
            made += 1
        schedules = {key: shard for shard, keys in per_shard.items() for key in keys}
        assert all(len(per_shard[i]) >= 2 for i in range(SHARDS)), dict(per_shard)

        time.sleep(12)
        before = holders(crd, namespace)
        victim = Counter(before.values()).most_common(1)[0][0]
        moved = {shard for shard, holder in before.items() if holder == victim}
        killed = now()
        replicas[victim].signal(signal.SIGKILL)
        replicas[victim].proc.wait(5)
        wait_until(lambda: split(crd, namespace) == [4, 4], 40, what="a 4/4 split")
        after = holders(crd, namespace)
        time.sleep(10)
        end = now()
        for name, op in replicas.items():
            if name != victim:
                op.stop()

    creates: dict[tuple[str, str], list[Create]] = {}
    for ns, name in schedules:
        creates[(ns, name)] = [
            c for c in job_creates(crd, ns) if c.code == 201 and c.name.startswith(name + "-")
        ]
    # The fence refused nothing from a live leader (a refused create would be a 403).
    refused = [c for ns in namespaces for c in job_creates(crd, ns) if c.code == 403]

    report = []
    for (ns, name), made_for in creates.items():
        counts = Counter(c.name for c in made_for)
        twice = {n: k for n, k in counts.items() if k > 1}
        assert not twice, f"{ns}/{name}: ticks created more than once: {twice}"
        ticks = sorted(tick_of(n) for n in counts)
        gaps = [(a, b) for a, b in pairwise(ticks) if b - a != timedelta(seconds=1)]
        assert not gaps, f"{ns}/{name}: ticks lost: {gaps}"
        assert ticks[-1] >= end - timedelta(seconds=4), f"{ns}/{name} stopped firing"

    # Each shard's Jobs come from one replica at a time: its writers, in order, change at
    # most once (at the kill, for the moved shards) and never for the others.
    by_shard: dict[int, list[Create]] = defaultdict(list)
    for key, made_for in creates.items():
        by_shard[schedules[key]].extend(made_for)
    for shard, made_for in by_shard.items():
        writers = [c.user_agent for c in sorted(made_for, key=lambda c: c.at)]
        runs = [a for a, b in pairwise(writers) if a != b]
        if shard in moved:
            assert len(runs) <= 1, f"shard {shard} changed hands {len(runs)} times"
            assert after[shard] != victim
        else:
            assert not runs, f"shard {shard} (not the victim's) changed hands"

    # The lag of shards that did not move is unchanged by the kill.
    kept_before = [
        lag
        for shard, made_for in by_shard.items()
        if shard not in moved
        for lag in lags(made_for, killed - timedelta(seconds=10), killed)
    ]
    kept_after = [
        lag
        for shard, made_for in by_shard.items()
        if shard not in moved
        for lag in lags(made_for, killed, end)
    ]
    moved_after = [
        lag
        for shard, made_for in by_shard.items()
        if shard in moved
        for lag in lags(made_for, killed, end)
    ]
    report.append(
        f"\n{len(schedules)} every-second schedules in 3 namespaces, 8 shards: split "
        f"{sorted(Counter(before.values()).values())} -> killed {victim} ({len(moved)} shards) -> "
        f"{sorted(Counter(after.values()).values())}; "
        f"{sum(len(v) for v in creates.values())} Jobs, none twice, none lost; "
        f"lag p99 of the other shards {p99(kept_before):.3f} s before the kill, "
        f"{p99(kept_after):.3f} s after; the moved shards' worst {max(moved_after):.1f} s; "
        f"{len(refused)} creates refused by the fence"
    )
    print("".join(report))
    assert p99(kept_after) <= p99(kept_before) + 0.5
    assert max(moved_after) <= 6 + 4  # about one Lease duration, plus a round
