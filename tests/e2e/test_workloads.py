"""Any workload kind, exactly once: Argo Workflows, Tekton PipelineRuns, RayJobs, JobSets
and a CRD of our own, against their real CustomResourceDefinitions.

The CRDs come from released Go modules where the module proxy serves them (KubeRay's
RayJob, Argo's Workflow) and, where it does not, from the upstream schemas written out
by hand (Tekton, JobSet; e2e/manifests/workloads/, each with its source named); see
e2e/workloadcrds.py. Their controllers are not needed to prove Punctual's side: the
tests play them, patching each object's status the way its controller would. Every
schedule comes from the samples in crds/samples/, so the samples are checked against
the real schemas too.

The oracle for "exactly once" is the API server's audit log: one successful create per
object name, whatever was deleted and whichever leader was killed.
"""

from __future__ import annotations

import json
import signal
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from itertools import pairwise
from pathlib import Path
from typing import Any

import pytest
import yaml

from punctual.core.keys import FINALIZER

from .conftest import REPO, Cluster
from .operators import job_creates, now, operators, tick_of, wait_until
from .test_fencing import create as create_object
from .test_fencing import fenced as fenced  # a fixture
from .test_operator import apply, leader_of

pytestmark = pytest.mark.e2e

SAMPLES = REPO / "crds" / "samples"
STAMP = "2026-11-27T00:00:00Z"


@dataclass(frozen=True)
class Kind:
    """One workload kind under test: its sample, its resource, and how its controller
    would say it succeeded or failed."""

    short: str
    sample: str
    resource: str  # RESOURCE.VERSION.GROUP
    succeeded: dict[str, Any]
    failed: dict[str, Any]
    status_subresource: bool = True

    @property
    def plural(self) -> str:
        return self.resource.split(".", 1)[0]

    @property
    def qualified(self) -> str:
        """kubectl's name for the resource: plural.group."""
        plural, _, rest = self.resource.partition(".")
        return f"{plural}.{rest.partition('.')[2]}"


def condition(kind: str, status: str) -> dict[str, Any]:
    return {
        "type": kind,
        "status": status,
        "reason": "Test",
        "message": "set by the test, as the controller would",
        "lastTransitionTime": STAMP,
    }


KINDS = [
    Kind(
        "argo",
        "workload-argo-workflow.yaml",
        "workflows.v1alpha1.argoproj.io",
        {"phase": "Succeeded", "finishedAt": STAMP},
        {"phase": "Failed", "finishedAt": STAMP},
        status_subresource=False,  # Argo's Workflow CRD has no status subresource
    ),
    Kind(
        "tekton",
        "workload-tekton-pipelinerun.yaml",
        "pipelineruns.v1.tekton.dev",
        {"conditions": [condition("Succeeded", "True")], "completionTime": STAMP},
        {"conditions": [condition("Succeeded", "False")], "completionTime": STAMP},
    ),
    Kind(
        "ray",
        "workload-rayjob.yaml",
        "rayjobs.v1.ray.io",
        {"jobDeploymentStatus": "Complete", "jobStatus": "SUCCEEDED", "endTime": STAMP},
        {"jobDeploymentStatus": "Failed", "jobStatus": "FAILED", "endTime": STAMP},
    ),
    Kind(
        "jobset",
        "workload-jobset.yaml",
        "jobsets.v1alpha2.jobset.x-k8s.io",
        {"conditions": [condition("Completed", "True")]},
        {"conditions": [condition("Failed", "True")]},
    ),
    Kind(
        "own",
        "workload-own-crd.yaml",
        "exports.v1.batch.example.com",
        {"phase": "Done", "observedGeneration": 1},
        {"phase": "Failed"},
    ),
]
OWN = KINDS[-1]
ALL_KINDS = ",".join(k.resource for k in KINDS)


@pytest.fixture(scope="module")
def workload_crds(crd: Cluster) -> Iterator[dict[str, Path]]:
    """Every kind's CRD installed and Established, except our own (the test that needs
    it installs it while the operator runs); by file name."""
    import sys

    sys.path.insert(0, str(REPO / "e2e"))
    import workloadcrds

    paths = {p.name: p for p in workloadcrds.paths()}
    own = paths.pop("batch.example.com_exports.yaml")
    for path in paths.values():
        crd.kubectl("apply", "--server-side", "--force-conflicts", "-f", str(path))
    names = [yaml.safe_load(p.read_text())["metadata"]["name"] for p in paths.values()]
    crd.kubectl(
        "wait", "--for=condition=Established", "--timeout=60s", *(f"crd/{n}" for n in names)
    )
    yield {**paths, own.name: own}


def sample(kind: Kind, name: str, **spec: Any) -> dict[str, Any]:
    body: dict[str, Any] = yaml.safe_load((SAMPLES / kind.sample).read_text())
    body["metadata"] = {"name": name}
    body["spec"].update(spec)
    body["spec"].pop("timeZone", None)
    return body


def objects(cluster: Cluster, namespace: str, kind: Kind, schedule: str) -> dict[str, Any]:
    out = cluster.kubectl(
        "get",
        kind.qualified,
        "-n",
        namespace,
        "-l",
        f"punctual.dev/schedule={schedule}",
        "-o",
        "json",
    )
    return {o["metadata"]["name"]: o for o in json.loads(out.stdout)["items"]}


def set_status(
    cluster: Cluster, namespace: str, kind: Kind, name: str, status: dict[str, Any]
) -> None:
    where = ["--subresource=status"] if kind.status_subresource else []
    cluster.kubectl(
        "patch", kind.qualified, name, "-n", namespace, "--type=merge", *where,
        "-p", json.dumps({"status": status}),
    )  # fmt: skip


def schedule_status(cluster: Cluster, namespace: str, name: str) -> dict[str, Any]:
    out = cluster.kubectl("get", "cronschedule", name, "-n", namespace, "-o", "json")
    return dict(json.loads(out.stdout).get("status") or {})


def outcome_of(cluster: Cluster, namespace: str, schedule: str, job: str) -> str:
    for firing in schedule_status(cluster, namespace, schedule).get("recentFirings") or []:
        if firing.get("job") == job:
            return str(firing["outcome"])
    return ""


def ready_message(cluster: Cluster, namespace: str, name: str) -> tuple[str, str]:
    for cond in schedule_status(cluster, namespace, name).get("conditions") or []:
        if cond["type"] == "Ready":
            return cond.get("reason", ""), cond.get("message", "")
    return "", ""


def release(cluster: Cluster, namespace: str) -> None:
    """Let the test's objects go (their operators are gone): the namespace can then go."""
    for kind in KINDS:
        out = cluster.kubectl("get", kind.qualified, "-n", namespace, "-o", "json", check=False)
        if out.returncode != 0:
            continue
        for obj in json.loads(out.stdout)["items"]:
            held = obj["metadata"].get("finalizers") or []
            if FINALIZER in held:
                rest = [f for f in held if f != FINALIZER]
                cluster.kubectl(
                    "patch", kind.qualified, obj["metadata"]["name"], "-n", namespace,
                    "--type=merge", "-p", json.dumps({"metadata": {"finalizers": rest}}),
                    check=False,
                )  # fmt: skip


def install_own_crd(cluster: Cluster, crds: dict[str, Path]) -> None:
    cluster.kubectl("apply", "--server-side", "-f", str(crds["batch.example.com_exports.yaml"]))
    cluster.kubectl(
        "wait", "--for=condition=Established", "--timeout=60s", "crd/exports.batch.example.com"
    )


def remove_own_crd(cluster: Cluster) -> None:
    cluster.kubectl(
        "delete", "crd", "exports.batch.example.com", "--ignore-not-found", "--wait=true"
    )


def test_every_kind_fires_records_its_outcome_and_forbid_holds(
    crd: Cluster, workload_crds: dict[str, Path], namespace: str, tmp_path: Path
) -> None:
    if crd.audit_log is None:
        pytest.skip("needs the local control plane's audit log")
    remove_own_crd(crd)  # installed below, while the operator runs
    try:
        with operators(crd, namespace, tmp_path) as ops:
            solo = ops.start("solo", "--workload-kinds", ALL_KINDS)
            wait_until(lambda: leader_of(crd, namespace) == "solo", 30, what="leadership")
            names = {k.short: f"w-{k.short}" for k in KINDS}
            every = dict(
                schedule="*/3 * * * * *", concurrencyPolicy="Forbid", startingDeadlineSeconds=30
            )
            apply(crd, namespace, *(sample(k, names[k.short], **every) for k in KINDS))
            unserved = sample(KINDS[0], "w-unserved", **every)
            unserved["spec"]["workloadTemplate"] |= {
                "apiVersion": "kubeflow.org/v1",
                "kind": "PyTorchJob",
            }
            apply(crd, namespace, unserved)

            # A kind not asked for, and a kind asked for whose CRD is not there: InvalidSpec.
            def invalid(name: str) -> str:
                reason, message = ready_message(crd, namespace, name)
                return message if reason == "InvalidSpec" else ""

            message = wait_until(lambda: invalid("w-unserved"), 30, what="w-unserved InvalidSpec")
            assert message.startswith("spec.workloadTemplate.kind: PyTorchJob (kubeflow.org/v1)")
            message = wait_until(lambda: invalid("w-own"), 30, what="w-own InvalidSpec")
            assert "does not serve exports.v1.batch.example.com" in message
            events = crd.kubectl("get", "events", "-n", namespace, "-o", "json")
            warned = [
                e for e in json.loads(events.stdout)["items"]
                if e["type"] == "Warning" and e["involvedObject"]["name"] == "w-unserved"
            ]  # fmt: skip
            assert warned and "spec.workloadTemplate.kind" in warned[0]["message"]
            # The CRD appears: its schedules fire without a restart.
            install_own_crd(crd, workload_crds)
            first: dict[str, str] = {}
            for kind in KINDS:
                found = wait_until(
                    lambda k=kind: sorted(objects(crd, namespace, k, names[k.short])),
                    45,
                    what=f"{kind.short}: a first object",
                )
                first[kind.short] = found[0]

            for kind in KINDS:  # every kind served and listed, the late one included
                assert (
                    f'punctual_workload_kind_served{{kind="{kind.resource}"}} 1.0' in solo.scrape()
                )
            # Forbid: while the first runs, no second is created, and the ticks are skipped.
            time.sleep(4)
            for kind in KINDS:
                made = objects(crd, namespace, kind, names[kind.short])
                assert list(made) == [first[kind.short]], (kind.short, list(made))
                body = made[first[kind.short]]
                meta = body["metadata"]
                assert FINALIZER in meta["finalizers"]
                assert meta["ownerReferences"][0]["name"] == names[kind.short]
                assert (
                    meta["annotations"]["punctual.dev/tick"]
                    and meta["annotations"]["punctual.dev/epoch"]
                )
                assert meta["labels"]["punctual.dev/schedule-uid"]
                firings = schedule_status(crd, namespace, names[kind.short])["recentFirings"]
                assert any(f["outcome"] == "Skipped" for f in firings), (kind.short, firings)
            jobset = objects(crd, namespace, KINDS[3], names["jobset"])[first["jobset"]]
            driver = jobset["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]
            assert "PUNCTUAL_TICK" in {e["name"] for e in driver["containers"][0]["env"]}

            # Succeeded, as each controller says it: recorded; the next tick fires.
            for kind in KINDS:
                set_status(crd, namespace, kind, first[kind.short], kind.succeeded)
            second: dict[str, str] = {}
            for kind in KINDS:
                schedule = names[kind.short]
                wait_until(
                    lambda k=kind, s=schedule: (
                        outcome_of(crd, namespace, s, first[k.short]) == "Succeeded"
                    ),
                    30,
                    what=f"{kind.short}: Succeeded recorded",
                )
                second[kind.short] = wait_until(
                    lambda k=kind, s=schedule: [
                        n for n in objects(crd, namespace, k, s) if n != first[k.short]
                    ],
                    30,
                    what=f"{kind.short}: the next object after success",
                )[0]
            # Failed, as each controller says it: recorded.
            for kind in KINDS:
                set_status(crd, namespace, kind, second[kind.short], kind.failed)
            for kind in KINDS:
                wait_until(
                    lambda k=kind: (
                        outcome_of(crd, namespace, names[k.short], second[k.short]) == "Failed"
                    ),
                    30,
                    what=f"{kind.short}: Failed recorded",
                )
        for kind in KINDS:
            creates = Counter(
                c.name for c in job_creates(crd, namespace, kind.plural) if c.code == 201
            )
            assert creates, kind.short
            assert max(creates.values()) == 1, (kind.short, creates)
    finally:
        release(crd, namespace)


def test_every_kind_deleted_at_creation_while_the_leader_dies_is_never_created_again(
    crd: Cluster, workload_crds: dict[str, Path], namespace: str, tmp_path: Path
) -> None:
    if crd.audit_log is None:
        pytest.skip("needs the local control plane's audit log")
    install_own_crd(crd, workload_crds)
    rounds = 3
    names = {k.short: f"x-{k.short}" for k in KINDS}
    deleted: dict[str, list[str]] = {k.short: [] for k in KINDS}
    started = now()
    try:
        with operators(crd, namespace, tmp_path) as ops:
            kinds = ("--workload-kinds", ALL_KINDS)
            replicas = {"r0": ops.start("r0", *kinds), "r1": ops.start("r1", *kinds)}
            wait_until(lambda: leader_of(crd, namespace) in replicas, 30, what="a leader")
            spec = dict(
                schedule="*/2 * * * * *",
                concurrencyPolicy="Allow",
                missedRunPolicy="RunAll",
                startingDeadlineSeconds=60,
                successfulJobsHistoryLimit=100,
            )
            apply(crd, namespace, *(sample(k, names[k.short], **spec) for k in KINDS))
            for i in range(rounds):
                leader = leader_of(crd, namespace)
                before = {k.short: set(objects(crd, namespace, k, names[k.short])) for k in KINDS}
                fresh: dict[str, list[str]] = {}
                for kind in KINDS:
                    fresh[kind.short] = wait_until(
                        lambda k=kind, seen=before: sorted(
                            set(objects(crd, namespace, k, names[k.short])) - seen[k.short]
                        ),
                        20,
                        interval=0.05,
                        what=f"round {i}: a new {kind.short} object",
                    )
                # The moment they appear: kill -9 the leader and delete them.
                replicas[leader].signal(signal.SIGKILL)
                replicas[leader].proc.wait(5)
                for kind in KINDS:
                    for name in fresh[kind.short]:
                        crd.kubectl(
                            "delete", kind.qualified, name, "-n", namespace,
                            "--cascade=background", "--wait=false",
                        )  # fmt: skip
                    deleted[kind.short] += fresh[kind.short]
                successor = f"r{len(replicas)}"
                replicas[successor] = ops.start(successor, *kinds)
                wait_until(
                    lambda gone=leader: leader_of(crd, namespace) not in ("", gone),
                    30,
                    what=f"round {i}: a standby takes over from {leader}",
                )
            time.sleep(8)  # the last leader settles what it took over
            remaining = {k.short: objects(crd, namespace, k, names[k.short]) for k in KINDS}
        for kind in KINDS:
            creates = [c for c in job_creates(crd, namespace, kind.plural) if c.code == 201]
            counts = Counter(c.name for c in creates)
            again = {n: c for n, c in counts.items() if c > 1}
            assert not again, f"{kind.short}: created again after their deletion: {again}"
            stuck = [n for n in deleted[kind.short] if n in remaining[kind.short]]
            assert not stuck, f"{kind.short}: deleted objects still held: {stuck}"
            # At least once: every tick from the first to the last has its object.
            ticks = sorted(tick_of(n) for n in counts)
            assert ticks and ticks[0] >= started.replace(microsecond=0), kind.short
            gaps = [(a, b) for a, b in pairwise(ticks) if (b - a).total_seconds() > 2]
            assert not gaps, f"{kind.short}: ticks without an object: {gaps}"
            lost = len(deleted[kind.short])
            print(f"{kind.short}: {len(counts)} created once each, {lost} deleted at creation")
    finally:
        release(crd, namespace)


def stale_workflow(name: str, leader: str, epoch: int) -> dict[str, Any]:
    return {
        "apiVersion": "argoproj.io/v1alpha1",
        "kind": "Workflow",
        "metadata": {
            "name": name,
            "labels": {"punctual.dev/schedule-uid": "0000", "punctual.dev/schedule": "x"},
            "annotations": {"punctual.dev/leader": leader, "punctual.dev/epoch": str(epoch)},
            # As Punctual creates it: owned by its CronSchedule (the policy's `judged` variable).
            "ownerReferences": [
                {
                    "apiVersion": "punctual.dev/v1",
                    "kind": "CronSchedule",
                    "name": "x",
                    "uid": "0000",
                    "controller": True,
                }
            ],
        },
        "spec": {
            "entrypoint": "main",
            "templates": [{"name": "main", "container": {"image": "busybox"}}],
        },
    }


def test_the_fence_refuses_a_stale_leaders_workflow(
    crd: Cluster, workload_crds: dict[str, Path], fenced: str
) -> None:
    namespace = fenced
    fence = {
        "apiVersion": "punctual.dev/v1",
        "kind": "Fence",
        "metadata": {"name": "punctual-fence"},
        "spec": {"holder": "current", "epoch": 3},
    }
    crd.kubectl("create", "-n", namespace, "-f", "-", input=json.dumps(fence))

    def refused() -> bool:
        code, err = create_object(crd, namespace, stale_workflow("probe", "old-leader", 3))
        if code == 0:
            # (the garbage collector may have taken it already: its owner does not exist)
            crd.kubectl(
                "delete", "-n", namespace, "workflows.argoproj.io", "probe", "--ignore-not-found"
            )
        return code != 0 and "punctual fencing" in err

    wait_until(refused, 30, what="the fencing policy to refuse a stale Workflow")
    code, err = create_object(crd, namespace, stale_workflow("older", "current", 2))
    assert code != 0 and "stale leader (current epoch 2)" in err, err
    code, err = create_object(crd, namespace, stale_workflow("current", "current", 3))
    assert code == 0, err
