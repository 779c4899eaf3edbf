"""The real control plane for end-to-end tests, started once per test session.

Which cluster the suite runs against, in order:
1. `KUBECONFIG`, if set: reused as it is and never stopped. Its server must be on
   loopback (a kind or local cluster) unless PUNCTUAL_E2E_ALLOW_REMOTE=1, so that a
   developer's production context is never a test target by accident.
2. The cluster of `make cluster-up` (.cluster/), if it runs: reused, never stopped.
3. Otherwise a fresh one under .cluster-test/ (ports from PUNCTUAL_TEST_PORT_BASE,
   default 17443), with a real node when the machine can run one (root on Linux, unless
   PUNCTUAL_REAL_NODE=0), stopped and removed when the session ends; a host left
   changed by its real node fails the session (localcluster.HostNotRestored).

Tests that read the API server's audit log skip when the cluster is not a local one.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import uuid
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

import pytest
import yaml

from punctual.core.keys import FINALIZER
from punctual.kube.client import STRATEGIC_MERGE_PATCH, ApiError, KubeClient
from punctual.kube.credentials import Credentials, load_kubeconfig

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "e2e"))

from localcluster import LocalCluster, real_node_wanted  # noqa: E402
from realnode import GATEWAY  # noqa: E402


@dataclass
class Cluster:
    """What a test needs to reach the control plane under test."""

    kubeconfig: Path
    bin_dir: Path
    local: LocalCluster | None

    @property
    def audit_log(self) -> Path | None:
        return self.local.audit_log if self.local else None

    def credentials(self) -> Credentials:
        return load_kubeconfig(self.kubeconfig)

    def kubectl(
        self, *args: str, input: str | None = None, check: bool = True
    ) -> subprocess.CompletedProcess[str]:
        """Run the pinned kubectl against this cluster; output is captured as text."""
        result = subprocess.run(
            [str(self.bin_dir / "kubectl"), f"--kubeconfig={self.kubeconfig}", *args],
            input=input,
            capture_output=True,
            text=True,
            timeout=120,
        )
        if check and result.returncode != 0:
            raise AssertionError(f"kubectl {' '.join(args)} failed:\n{result.stderr}")
        return result

    def audit_events(self) -> list[dict[str, Any]]:
        """Every audit event written so far (the policy keeps writes of jobs, leases, CRs)."""
        if self.audit_log is None or not self.audit_log.exists():
            return []
        return [json.loads(line) for line in self.audit_log.read_text().splitlines() if line]


def _loopback(kubeconfig: Path) -> bool:
    config = yaml.safe_load(kubeconfig.read_text())
    current = {c["name"]: c["context"] for c in config["contexts"]}[config["current-context"]]
    server = {c["name"]: c["cluster"] for c in config["clusters"]}[current["cluster"]]["server"]
    # The real node's bridge gateway is an address of this machine that cluster-up made.
    return urlparse(server).hostname in ("127.0.0.1", "localhost", "::1", GATEWAY)


@pytest.fixture(scope="session")
def cluster() -> Iterator[Cluster]:
    bin_dir = REPO / ".cluster" / "bin"
    given = os.environ.get("KUBECONFIG")
    if given:
        path = Path(given.split(os.pathsep)[0])
        if not _loopback(path) and os.environ.get("PUNCTUAL_E2E_ALLOW_REMOTE") != "1":
            pytest.exit(f"refusing to run e2e tests against non-loopback cluster in {path}", 2)
        yield Cluster(kubeconfig=path, bin_dir=bin_dir, local=None)
        return
    running = LocalCluster(state_dir=REPO / ".cluster")
    running._load_pids()
    if running.kubeconfig.exists() and running.pids:
        try:
            running.wait_ready(timeout=5)
            yield Cluster(kubeconfig=running.kubeconfig, bin_dir=bin_dir, local=running)
            return
        except (TimeoutError, RuntimeError, OSError):
            pass
    fresh = LocalCluster(
        state_dir=REPO / ".cluster-test",
        port_base=int(os.environ.get("PUNCTUAL_TEST_PORT_BASE", "17443")),
        bin_dir=bin_dir,
        real_node=real_node_wanted(),
    )
    fresh.down()  # leftovers of an interrupted run
    fresh.up()
    try:
        yield Cluster(kubeconfig=fresh.kubeconfig, bin_dir=bin_dir, local=fresh)
    finally:
        fresh.down()


@pytest.fixture(autouse=True)
def kwok_alive(request: pytest.FixtureRequest) -> Iterator[None]:
    """kwok 0.8 can die of a race in its CEL registry (see LocalCluster.revive_kwok): a
    test on the cluster starts with it running, so one crash never fails every later test."""
    if "cluster" in request.fixturenames:
        cluster: Cluster = request.getfixturevalue("cluster")
        if cluster.local is not None:
            cluster.local.revive_kwok()
    yield


@pytest.fixture(scope="session")
async def api(cluster: Cluster) -> AsyncIterator[KubeClient]:
    async with KubeClient(cluster.credentials(), user_agent="punctual-tests") as client:
        yield client


@pytest.fixture
async def namespace(api: KubeClient) -> AsyncIterator[str]:
    """A fresh namespace per test, deleted (without waiting) afterwards."""
    name = f"t-{uuid.uuid4().hex[:10]}"
    await api.create(
        "/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}
    )
    yield name
    await release_jobs(api, name)
    await api.delete(f"/api/v1/namespaces/{name}")


async def release_jobs(api: KubeClient, namespace: str) -> None:
    """Remove Punctual's finalizer from the namespace's Jobs (their operators are gone), so
    that deleting the namespace does not wait on them forever."""
    jobs = await api.get(f"/apis/batch/v1/namespaces/{namespace}/jobs")
    for job in jobs.get("items") or []:
        meta = job["metadata"]
        if FINALIZER in (meta.get("finalizers") or []):
            patch = {"metadata": {"$deleteFromPrimitiveList/finalizers": [FINALIZER]}}
            with contextlib.suppress(ApiError):
                await api.patch(
                    f"/apis/batch/v1/namespaces/{namespace}/jobs/{meta['name']}",
                    patch,
                    content_type=STRATEGIC_MERGE_PATCH,
                )


CRD_FILE = REPO / "crds" / "cronschedules.punctual.dev.yaml"
FENCE_CRD_FILE = REPO / "crds" / "fences.punctual.dev.yaml"
FREEZE_CRD_FILE = REPO / "crds" / "freezewindows.punctual.dev.yaml"
GROUP_CRD_FILE = REPO / "crds" / "concurrencygroups.punctual.dev.yaml"
CALENDAR_CRD_FILE = REPO / "crds" / "calendars.punctual.dev.yaml"
CLUSTER_FREEZE_CRD_FILE = REPO / "crds" / "clusterfreezewindows.punctual.dev.yaml"


@pytest.fixture(scope="session")
def crd(cluster: Cluster) -> Cluster:
    """Punctual's CRDs (CronSchedule, Fence), applied from crds/ and Established."""
    paths = (CRD_FILE, FENCE_CRD_FILE, FREEZE_CRD_FILE, GROUP_CRD_FILE)
    for path in (*paths, CALENDAR_CRD_FILE, CLUSTER_FREEZE_CRD_FILE):
        cluster.kubectl("apply", "--server-side", "--force-conflicts", "-f", str(path))
    cluster.kubectl(
        "wait",
        "--for=condition=Established",
        "--timeout=60s",
        "crd/cronschedules.punctual.dev",
        "crd/fences.punctual.dev",
        "crd/freezewindows.punctual.dev",
        "crd/concurrencygroups.punctual.dev",
        "crd/calendars.punctual.dev",
        "crd/clusterfreezewindows.punctual.dev",
    )
    return cluster
