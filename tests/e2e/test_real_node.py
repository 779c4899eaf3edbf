"""The chart as users run it: the image, as pods, through real probes, on a real node.

kwok's nodes never run the image, so everything that happens inside a pod is checked
here, on the local cluster's real node (realnode.py: containerd, runc, kubelet,
kube-proxy): `helm install` of the unchanged chart (values only) with the image that
`make image` built; two replicas Ready through their HTTP probes and one leader; a schedule
whose Jobs run real containers; deleting the leader pod hands over within a second of its
SIGTERM with no tick lost; `helm upgrade` to a new image tag rolls with no tick fired
twice; `helm uninstall` leaves what the README says it leaves.

The whole module is one story on one release (installing takes a while), so its tests run
in order and share the release. Figures (image import, install to Ready, hand-over) are
printed with `-s` and in the closing note of the change that added this.

Skipped, with the reason, where no real node runs (not root, PUNCTUAL_REAL_NODE=0, or an
external KUBECONFIG) or no image was built (run it through `make e2e`).
"""

from __future__ import annotations

import itertools
import json
import os
import shutil
import subprocess
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import pytest

from punctual.core.keys import ANNOTATION_TICK, LABEL_SCHEDULE

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


def test_helm_upgrade_to_a_new_tag_rolls_with_no_tick_fired_twice(release: Release) -> None:
    rel = release
    assert rel.cluster.local is not None
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

    wait_until(rolled, timeout=180, what="the rollout to the new tag")
    holder = wait_until(lambda: rel.lease().get("holderIdentity"), timeout=30, what="a leader")
    assert holder in rel.ready_pods()
    time.sleep(3 * EVERY)
    no_tick_lost_or_doubled(rel, since, datetime.now(UTC))


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
