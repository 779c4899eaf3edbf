"""The chart as users run it: the image, as pods, through real probes, on a real node.

kwok's nodes never run the image, so everything that happens inside a pod is checked
here, on the local cluster's real node (realnode.py: containerd, runc, kubelet,
kube-proxy): `helm install` of the unchanged chart (values only) with the image that
`make image` built; two replicas Ready through their HTTP probes and one leader; a schedule
whose Jobs run real containers; deleting the leader pod hands over within a second of its
SIGTERM with no tick lost; `helm upgrade` to a new image tag, with 20 000 schedules
beside the one that fires, rolls with no tick lost or fired twice and no pod Ready before
its index holds every schedule; `helm uninstall` leaves what the README says it leaves.

The whole module is one story on one release (installing takes a while), so its tests run
in order and share the release. Figures (image import, install to Ready, hand-over) are
printed with `-s` and in the closing note of the change that added this.

Skipped, with the reason, where no real node runs (not root, PUNCTUAL_REAL_NODE=0, or an
external KUBECONFIG) or no image was built (run it through `make e2e`).
"""

from __future__ import annotations

import asyncio
import itertools
import json
import os
import shutil
import subprocess
import threading
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import pytest

from punctual.core.keys import ANNOTATION_TICK, LABEL_SCHEDULE
from punctual.kube.client import ApiError, KubeClient

from .bulk import create_rare, delete_rare
from .conftest import REPO, Cluster
from .operators import job_creates, parse, wait_until
from .test_chart import helm

pytestmark = pytest.mark.e2e

CHART = REPO / "charts" / "punctual"
EVERY = 2  # seconds between ticks: real containers start in about half a second here


@dataclass
class Release:
    cluster: Cluster
    namespace: str
    name: str
    repository: str
    tag: str
    figures: dict[str, float] = field(default_factory=dict)

    def kubectl(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        return self.cluster.kubectl("-n", self.namespace, *args, check=check)

    def get(self, *args: str) -> Any:
        return json.loads(self.kubectl("get", "-o", "json", *args).stdout)

    def pods(self) -> list[dict[str, Any]]:
        selector = f"app.kubernetes.io/instance={self.name}"
        items: list[dict[str, Any]] = self.get("pods", "-l", selector)["items"]
        return [p for p in items if not p["metadata"].get("deletionTimestamp")]

    def ready_pods(self) -> list[str]:
        return [
            p["metadata"]["name"]
            for p in self.pods()
            if any(
                c["type"] == "Ready" and c["status"] == "True"
                for c in p.get("status", {}).get("conditions", [])
            )
        ]

    def lease(self) -> dict[str, Any]:
        return dict(self.get("lease", f"{self.name}-leader")["spec"])

    def ticks(self) -> list[datetime]:
        jobs = self.get("jobs", "-l", f"{LABEL_SCHEDULE}=beat")["items"]
        return sorted(parse(j["metadata"]["annotations"][ANNOTATION_TICK]) for j in jobs)


def _image_ref(image: str) -> tuple[str, str]:
    """The repository and tag the node's containerd knows a local image by."""
    name, _, tag = image.rpartition(":")
    domain = name.split("/")[0]
    if "/" not in name or ("." not in domain and domain != "localhost"):
        name = f"localhost/{name}"
    return name, tag


@pytest.fixture(scope="module")
def release(crd: Cluster) -> Iterator[Release]:
    local = crd.local
    if local is None or not local.real_node:
        pytest.skip("no real node in this cluster (needs root on Linux; see e2e/realnode.py)")
    image = os.environ.get("PUNCTUAL_IMAGE")
    if not image:
        pytest.skip("no image built: run through `make e2e`, which builds it (PUNCTUAL_IMAGE)")
    repository, tag = _image_ref(image)
    started = time.monotonic()
    local.node.import_image(f"{repository}:{tag}")
    imported = time.monotonic() - started
    namespace = f"t-{uuid.uuid4().hex[:10]}"
    crd.kubectl("create", "namespace", namespace)
    name = f"punctual-{uuid.uuid4().hex[:6]}"
    rel = Release(crd, namespace, name, repository, tag, {"image import (s)": imported})
    try:
        yield rel
    finally:
        helm(crd, "uninstall", name, "--namespace", namespace, "--wait=false", check=False)
        release_jobs(rel)
        crd.kubectl("delete", "namespace", namespace, "--wait=false", check=False)
        print("\nreal node figures: " + ", ".join(f"{k} {v:.2f}" for k, v in rel.figures.items()))


def release_jobs(rel: Release) -> None:
    """Remove Punctual's finalizer from the Jobs left after the operator is gone."""
    for job in rel.get("jobs")["items"]:
        rel.kubectl(
            "patch", "job", job["metadata"]["name"], "--type=json", "-p",
            '[{"op": "remove", "path": "/metadata/finalizers"}]', check=False,
        )  # fmt: skip


def values(rel: Release, tag: str) -> list[str]:
    """Values only: the image, the node, and the one namespace this release watches."""
    return [
        "--set", f"image.repository={rel.repository}",
        "--set", f"image.tag={tag}",
        "--set", "image.pullPolicy=Never",
        "--set", f"watchNamespaces={{{rel.namespace}}}",
        "--set-string", "nodeSelector.punctual\\.dev/node=real",
        "--set", "tolerations[0].key=punctual.dev/node",
        "--set", "tolerations[0].operator=Exists",
    ]  # fmt: skip


SCHEDULE = f"""
apiVersion: punctual.dev/v1
kind: CronSchedule
metadata: {{name: beat}}
spec:
  schedule: "*/{EVERY} * * * * *"
  missedRunPolicy: RunAll
  maxMissedRuns: 30
  startingDeadlineSeconds: 60
  successfulJobsHistoryLimit: 100
  jobTemplate:
    spec:
      template:
        spec:
          restartPolicy: Never
          nodeSelector: {{punctual.dev/node: real}}
          tolerations: [{{key: punctual.dev/node, operator: Exists}}]
          containers:
            - name: beat
              image: localhost/punctual-busybox:1
              imagePullPolicy: Never
              command: ["sh", "-c", "echo fired on $(hostname)"]
"""


def no_tick_lost_or_doubled(rel: Release, since: datetime, until: datetime) -> None:
    ticks = [t for t in rel.ticks() if since <= t <= until]
    assert len(ticks) == len(set(ticks)), f"a tick fired twice: {ticks}"
    gaps = [(a, b) for a, b in itertools.pairwise(ticks) if (b - a).total_seconds() != EVERY]
    assert not gaps, f"ticks lost between {gaps}"
    assert ticks and (until - ticks[-1]).total_seconds() <= 2 * EVERY, (ticks[-1:], until)
    creates = [c for c in job_creates(rel.cluster, rel.namespace) if c.code == 201]
    names = [c.name for c in creates]
    assert len(names) == len(set(names)), "one Job name created twice (audit log)"


def test_install_brings_two_ready_replicas_and_one_leader(release: Release) -> None:
    rel = release
    started = time.monotonic()
    helm(rel.cluster, "install", rel.name, str(CHART), "--namespace", rel.namespace,
         *values(rel, rel.tag))  # fmt: skip
    wait_until(lambda: len(rel.ready_pods()) == 2, timeout=120, what="two Ready replicas")
    rel.figures["install to 2 Ready (s)"] = time.monotonic() - started
    pods = rel.pods()
    assert {p["spec"]["nodeName"] for p in pods} == {"punctual-node"}
    for pod in pods:  # real containers, started by containerd, never restarted
        (status,) = pod["status"]["containerStatuses"]
        assert status["containerID"].startswith("containerd://"), status
        assert status["restartCount"] == 0, status
    holder = wait_until(lambda: rel.lease().get("holderIdentity"), timeout=30, what="a leader")
    assert holder in {p["metadata"]["name"] for p in pods}
    logs = {p["metadata"]["name"]: rel.kubectl("logs", p["metadata"]["name"]).stdout for p in pods}
    leading = [name for name, text in logs.items() if "became leader" in text]
    assert leading == [holder], logs


def test_a_schedule_runs_real_containers_on_the_node(release: Release) -> None:
    rel = release
    rel.cluster.kubectl("-n", rel.namespace, "apply", "-f", "-", input=SCHEDULE)

    def succeeded() -> list[dict[str, Any]]:
        jobs = rel.get("jobs", "-l", f"{LABEL_SCHEDULE}=beat")["items"]
        return [j for j in jobs if (j.get("status") or {}).get("succeeded")]

    wait_until(lambda: len(succeeded()) >= 3, timeout=60, what="three succeeded Jobs")
    job = succeeded()[0]["metadata"]["name"]
    (pod,) = rel.get("pods", "-l", f"job-name={job}")["items"]
    assert pod["spec"]["nodeName"] == "punctual-node"
    (status,) = pod["status"]["containerStatuses"]
    assert status["containerID"].startswith("containerd://")
    assert status["state"]["terminated"]["exitCode"] == 0
    assert rel.kubectl("logs", pod["metadata"]["name"]).stdout.strip() == (
        f"fired on {pod['metadata']['name']}"
    )


def test_deleting_the_leader_pod_hands_over_within_a_second(release: Release) -> None:
    rel = release
    leader = rel.lease()["holderIdentity"]
    (standby,) = [p for p in rel.ready_pods() if p != leader]
    follower = subprocess.Popen(
        [str(rel.cluster.bin_dir / "kubectl"), f"--kubeconfig={rel.cluster.kubeconfig}",
         "-n", rel.namespace, "logs", "-f", leader],
        stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    time.sleep(1)
    since = datetime.now(UTC)
    rel.kubectl("delete", "pod", leader, "--wait=false")
    new = wait_until(
        lambda: rel.lease().get("holderIdentity") not in ("", leader, None), timeout=30,
        what="a new leader",
    )  # fmt: skip
    assert new
    spec = rel.lease()
    assert spec["holderIdentity"] == standby
    out, _ = follower.communicate(timeout=60)
    sigterm = [json.loads(line) for line in out.splitlines() if "received SIGTERM" in line]
    assert sigterm, out[-2000:]
    signalled = datetime.fromisoformat(sigterm[0]["time"]).replace(tzinfo=UTC)
    took = (parse(spec["acquireTime"]) - signalled).total_seconds()
    rel.figures["hand-over after SIGTERM (s)"] = took
    assert 0 < took <= 1.0, f"the standby led {took:.3f}s after the leader's SIGTERM"
    time.sleep(3 * EVERY)
    no_tick_lost_or_doubled(rel, since, datetime.now(UTC))


class ReadinessSampler(threading.Thread):
    """While a rollout runs: each pod's /readyz, then its `punctual_schedules_indexed`,
    read through the API server's pod proxy as fast as they answer. Read in that order, a
    200 followed by a count short of the schedules is a replica that said Ready too soon
    (the index only grows while the count holds still)."""

    def __init__(self, rel: Release, count: int) -> None:
        super().__init__(daemon=True)
        self.rel, self.count = rel, count
        self.done = threading.Event()
        self.samples: list[tuple[str, int, float | None]] = []  # (pod, /readyz, indexed)

    def run(self) -> None:
        asyncio.run(self._sample())

    async def _sample(self) -> None:
        ns = self.rel.namespace
        selector = f"app.kubernetes.io/instance={self.rel.name}"
        async with KubeClient(self.rel.cluster.credentials(), user_agent="e2e-sampler") as api:
            sampled: dict[str, asyncio.Task[None]] = {}
            while not self.done.is_set():
                pods = await api.get(f"/api/v1/namespaces/{ns}/pods", labelSelector=selector)
                for pod in pods.get("items") or []:
                    name = pod["metadata"]["name"]
                    if name not in sampled and (pod.get("status") or {}).get("podIP"):
                        sampled[name] = asyncio.create_task(self._sample_pod(api, name))
                await asyncio.sleep(0.5)
            for task in sampled.values():
                task.cancel()
            await asyncio.gather(*sampled.values(), return_exceptions=True)

    async def _sample_pod(self, api: KubeClient, pod: str) -> None:
        """As fast as the proxy answers: /readyz, and after a 200 the index's count."""
        proxy = f"/api/v1/namespaces/{self.rel.namespace}/pods/{pod}:{METRICS_PORT}/proxy"
        while not self.done.is_set():
            code = await _readyz(api, f"{proxy}/readyz")
            indexed = None
            if code == 200:
                indexed = _metric(
                    await _text(api, f"{proxy}/metrics"), "punctual_schedules_indexed"
                )
            self.samples.append((pod, code, indexed))
            await asyncio.sleep(0.1)

    def too_soon(self) -> list[tuple[str, int, float | None]]:
        """200s with fewer schedules indexed than exist. A 200 whose /metrics could not be
        read right after (None: the old pod going away during the roll, as CI once saw)
        says nothing either way; every new pod must still end Ready (the caller checks)."""
        return [s for s in self.samples if s[1] == 200 and s[2] is not None and s[2] < self.count]


async def _readyz(api: KubeClient, path: str) -> int:
    """200, 503 for the replica's own "not ready: ..." answer, or -1 when the proxy could
    not reach it (not serving yet, or gone)."""
    try:
        await api.request("GET", path, content_type="text/plain")
        return 200
    except ApiError as error:
        return 503 if error.status == 503 and "not ready:" in error.message else -1


async def _text(api: KubeClient, path: str) -> str:
    try:
        return str((await api.request("GET", path, content_type="text/plain")).get("message", ""))
    except ApiError:
        return ""


def _metric(text: str, name: str) -> float | None:
    for line in text.splitlines():
        if line.startswith(name + " "):
            return float(line.split()[-1])
    return None


def test_helm_upgrade_to_a_new_tag_rolls_with_no_tick_fired_twice(release: Release) -> None:
    """With 20 000 schedules beside the beat: no tick lost or doubled, and neither new
    pod says Ready before its index holds every schedule."""
    rel = release
    assert rel.cluster.local is not None
    started = time.monotonic()
    asyncio.run(_bulk(rel, create=True))
    rel.figures["20 000 schedules created (s)"] = time.monotonic() - started
    total = BULK + 1  # and the beat
    tool = "podman" if shutil.which("podman") else "buildah"
    subprocess.run([tool, "tag", f"{rel.repository}:{rel.tag}", f"{rel.repository}:e2e-upgrade"],
                   check=True, capture_output=True)  # fmt: skip
    try:
        rel.cluster.local.node.import_image(f"{rel.repository}:e2e-upgrade")
    finally:
        subprocess.run([tool, "rmi", f"{rel.repository}:e2e-upgrade"], capture_output=True)
    old = {p["metadata"]["name"] for p in rel.pods()}
    since = datetime.now(UTC)
    helm(rel.cluster, "upgrade", rel.name, str(CHART), "--namespace", rel.namespace,
         *values(rel, "e2e-upgrade"))  # fmt: skip

    def rolled() -> bool:
        pods = rel.pods()
        return (
            len(rel.ready_pods()) == 2
            and not old & {p["metadata"]["name"] for p in pods}
            and all(p["spec"]["containers"][0]["image"].endswith(":e2e-upgrade") for p in pods)
        )

    sampler = ReadinessSampler(rel, total)
    sampler.start()
    try:
        wait_until(rolled, timeout=300, what="the rollout to the new tag")
        holder = wait_until(lambda: rel.lease().get("holderIdentity"), timeout=30, what="a leader")
        assert holder in rel.ready_pods()
    finally:
        sampler.done.set()
        sampler.join(timeout=30)
    rel.figures["rollout (s)"] = time.monotonic() - started
    # The new leader looks at all 20 000 schedules once (the beat first, soonest next
    # tick first): firing may lag behind for a few seconds, never skip a tick.
    rolled_at = datetime.now(UTC)

    def caught_up() -> bool:
        ticks = rel.ticks()
        return bool(ticks) and (datetime.now(UTC) - ticks[-1]).total_seconds() <= EVERY

    wait_until(caught_up, timeout=60, what="the beat to catch up after the rollout")
    rel.figures["beat caught up after the rollout (s)"] = (
        datetime.now(UTC) - rolled_at
    ).total_seconds()
    no_tick_lost_or_doubled(rel, since, datetime.now(UTC))
    new = {p["metadata"]["name"] for p in rel.pods()}
    seen = [s for s in sampler.samples if s[0] in new]
    assert not sampler.too_soon(), sampler.too_soon()[:5]
    # Each new pod was sampled until it was Ready with every schedule indexed.
    for pod in new:
        codes = [s[1] for s in seen if s[0] == pod]
        assert codes and codes[-1] == 200, (pod, codes[:5], codes[-5:])
    rel.figures["/readyz 503s seen while new pods listed"] = sum(s[1] == 503 for s in seen)
    asyncio.run(_bulk(rel, create=False))


BULK = 20_000
METRICS_PORT = 8080  # the chart's metrics.port


async def _bulk(rel: Release, *, create: bool) -> None:
    async with KubeClient(rel.cluster.credentials(), user_agent="e2e-bulk") as api:
        if create:
            # Of another class: listed, watched and counted for readiness like any, but the
            # running release writes no first status to each while the test creates them
            # (that took 95-118 s of the suite; created alone, about 27 s). The rollout
            # lists and indexes them all the same, which is what this test is about.
            await create_rare(api, rel.namespace, BULK, class_name="e2e-bulk")
        else:
            await delete_rare(api, rel.namespace)


def test_helm_uninstall_leaves_what_the_readme_says(release: Release) -> None:
    rel = release
    helm(rel.cluster, "uninstall", rel.name, "--namespace", rel.namespace, "--wait")
    selector = f"app.kubernetes.io/instance={rel.name}"
    wait_until(lambda: not rel.get("pods", "-l", selector)["items"], timeout=60,
               what="the operator pods gone, terminating ones too")  # fmt: skip
    jobs_before = len(rel.ticks())  # a leader may fire until its pod is gone
    time.sleep(3 * EVERY)
    # Gone: the operator, its RBAC, its fencing binding.
    for kind in ("deployment", "serviceaccount", "role", "rolebinding", "service"):
        items = rel.get(kind, "-l", f"app.kubernetes.io/instance={rel.name}")["items"]
        assert not items, f"{kind} left: {[i['metadata']['name'] for i in items]}"
    bindings = json.loads(rel.cluster.kubectl(
        "get", "validatingadmissionpolicybindings", "-o", "json").stdout)["items"]  # fmt: skip
    assert not [b for b in bindings if b["metadata"]["name"].startswith(rel.name)]
    # Stay: the CronSchedule, its Jobs (still holding Punctual's finalizer), the CRDs,
    # and the Lease and Fence in the release namespace; nothing fires any more.
    assert rel.get("cronschedule", "beat")["metadata"]["name"] == "beat"
    jobs = rel.get("jobs", "-l", f"{LABEL_SCHEDULE}=beat")["items"]
    assert len(jobs) == jobs_before
    assert all("punctual.dev/record-firing" in j["metadata"]["finalizers"] for j in jobs)
    rel.cluster.kubectl("get", "crd", "cronschedules.punctual.dev", "fences.punctual.dev")
    rel.kubectl("get", "lease", f"{rel.name}-leader")
    rel.kubectl("get", "fence", "punctual-fence")
