"""The API server's fence: a Job from a stale leader is refused by admission, not by hope.

crds/fencing.punctual.dev.yaml is a ValidatingAdmissionPolicy whose parameter is the
Fence each new leader raises to its name and epoch. These tests bind it to
the test namespace's fence and check that the real API server refuses a Job stamped
with another holder or an older epoch, admits the current leader's, and that
operators keep firing through a hand-over with the fence on.
"""

from __future__ import annotations

import json
import signal
import time
from collections.abc import Iterator
from itertools import pairwise
from pathlib import Path
from typing import Any

import pytest
import yaml

from punctual.kube.applying import FENCED

from .conftest import REPO, Cluster
from .operators import operators, tick_of, wait_until
from .test_operator import apply, assert_exactly_once, created, leader_of, schedule

pytestmark = pytest.mark.e2e

POLICY = REPO / "crds" / "fencing.punctual.dev.yaml"


@pytest.fixture
def fenced(crd: Cluster, namespace: str) -> Iterator[str]:
    """The fencing policy, bound to the Fence in `namespace`."""
    crd.kubectl("apply", "-f", str(POLICY))
    binding: dict[str, Any] = {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingAdmissionPolicyBinding",
        "metadata": {"name": f"punctual-fencing-{namespace}"},
        "spec": {
            "policyName": "punctual-fencing.punctual.dev",
            "validationActions": ["Deny"],
            # No namespace: the fence is looked up in the namespace of the Job.
            "paramRef": {"name": "punctual-fence", "parameterNotFoundAction": "Deny"},
            "matchResources": {
                "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": namespace}}
            },
        },
    }
    crd.kubectl("apply", "-f", "-", input=json.dumps(binding))
    yield namespace
    crd.kubectl("delete", "validatingadmissionpolicybinding", binding["metadata"]["name"])


def stamped_job(name: str, leader: str, epoch: int) -> dict[str, Any]:
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": name,
            "labels": {"punctual.dev/schedule-uid": "0000", "punctual.dev/schedule": "x"},
            "annotations": {"punctual.dev/leader": leader, "punctual.dev/epoch": str(epoch)},
        },
        "spec": {
            "template": {
                "spec": {
                    "restartPolicy": "Never",
                    "containers": [{"name": "c", "image": "busybox"}],
                }
            }
        },
    }


def create(cluster: Cluster, namespace: str, obj: dict[str, Any]) -> tuple[int, str]:
    result = cluster.kubectl(
        "create", "-n", namespace, "-f", "-", input=json.dumps(obj), check=False
    )
    return result.returncode, result.stderr


def test_api_server_refuses_jobs_from_a_stale_leader(crd: Cluster, fenced: str) -> None:
    namespace = fenced
    fence = {
        "apiVersion": "punctual.dev/v1",
        "kind": "Fence",
        "metadata": {"name": "punctual-fence"},
        "spec": {"holder": "current", "epoch": 3},
    }
    crd.kubectl("create", "-n", namespace, "-f", "-", input=json.dumps(fence))

    # The policy takes a moment to reach the API server's admission chain.
    def refused() -> bool:
        code, err = create(crd, namespace, stamped_job("probe", "old-leader", 3))
        if code == 0:
            crd.kubectl("delete", "-n", namespace, "job", "probe")
        return code != 0 and "punctual fencing" in err

    wait_until(refused, 30, what="the fencing policy to be enforced")

    code, err = create(crd, namespace, stamped_job("older-epoch", "current", 2))
    assert code != 0 and "stale leader (current epoch 2)" in err, err
    assert "the fence is at current epoch 3" in err, err
    code, err = create(crd, namespace, stamped_job("other-holder", "old-leader", 3))
    assert code != 0 and "forbidden" in err, err
    code, err = create(crd, namespace, stamped_job("current", "current", 3))
    assert code == 0, err
    unlabelled = stamped_job("not-punctuals", "anyone", 0)
    del unlabelled["metadata"]["labels"]
    code, err = create(crd, namespace, unlabelled)
    assert code == 0, err


def test_the_policy_matches_every_kind_and_names_it_when_it_refuses() -> None:
    """Workload kinds (spec.workloadTemplate) are fenced like Jobs: the policy matches the
    create of every resource labelled punctual.dev/schedule-uid, and a binding narrows it
    (the chart's to Jobs and its workloadKinds; this file's fixture not at all). The
    message keeps the prefix the operator matches (kube/applying.py FENCED)."""
    [policy] = yaml.safe_load_all(POLICY.read_text())
    constraints = policy["spec"]["matchConstraints"]
    assert constraints["resourceRules"] == [
        {"apiGroups": ["*"], "apiVersions": ["*"], "resources": ["*"], "operations": ["CREATE"]}
    ]
    assert constraints["objectSelector"] == {
        "matchExpressions": [{"key": "punctual.dev/schedule-uid", "operator": "Exists"}]
    }
    [validation] = policy["spec"]["validations"]
    assert validation["messageExpression"].startswith(
        "'punctual fencing: ' + request.kind.kind + ' from a stale leader ('"
    )
    assert FENCED == "punctual fencing"


def test_api_server_refuses_any_labelled_kind_from_a_stale_leader(
    crd: Cluster, fenced: str
) -> None:
    """A binding without resourceRules fences every kind so labelled: here a ConfigMap
    stands in for a workload kind (no CRD needed), and the refusal names its kind."""
    namespace = fenced
    fence = {
        "apiVersion": "punctual.dev/v1",
        "kind": "Fence",
        "metadata": {"name": "punctual-fence"},
        "spec": {"holder": "current", "epoch": 3},
    }
    crd.kubectl("create", "-n", namespace, "-f", "-", input=json.dumps(fence))

    def stamped(name: str, leader: str, epoch: int, owner: str = "CronSchedule") -> dict[str, Any]:
        job = stamped_job(name, leader, epoch)
        owned = {"apiVersion": "punctual.dev/v1", "kind": owner, "name": "x", "uid": "0000"}
        if owner != "CronSchedule":
            owned["apiVersion"] = "tekton.dev/v1"
        return {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {**job["metadata"], "ownerReferences": [{**owned, "controller": True}]},
            "data": {"tick": "x"},
        }

    def refused() -> bool:
        code, err = create(crd, namespace, stamped("probe", "old-leader", 3))
        if code == 0:
            crd.kubectl("delete", "-n", namespace, "configmap", "probe", "--ignore-not-found")
        return code != 0 and "punctual fencing" in err

    wait_until(refused, 30, what="the fencing policy to be enforced")
    code, err = create(crd, namespace, stamped("older-epoch", "current", 2))
    assert code != 0 and "punctual fencing: ConfigMap from a stale leader (current epoch 2)" in err
    code, err = create(crd, namespace, stamped("current", "current", 3))
    assert code == 0, err
    # A workload's controller may copy its parent's labels and annotations onto what it
    # makes (Tekton's TaskRuns): owned by that parent, not by a CronSchedule, it is not
    # Punctual's create and is admitted whoever leads.
    code, err = create(crd, namespace, stamped("child", "old-leader", 1, owner="PipelineRun"))
    assert code == 0, err


def test_operators_fire_through_a_hand_over_with_the_fence_on(
    crd: Cluster, fenced: str, tmp_path: Path
) -> None:
    if crd.audit_log is None:
        pytest.skip("needs the local control plane's audit log")
    namespace = fenced
    with operators(crd, namespace, tmp_path) as ops:
        first = ops.start("first")
        wait_until(lambda: leader_of(crd, namespace) == "first", 20, what="first leads")
        second = ops.start("second")
        apply(
            crd,
            namespace,
            schedule("fenced", "* * * * * *", missedRunPolicy="RunAll", startingDeadlineSeconds=60),
        )
        wait_until(lambda: len(created(crd, namespace, "fenced")) >= 3, 30, what="firings")
        time.sleep(2)
        first.signal(signal.SIGTERM)  # releases the Lease: the standby takes over at once
        wait_until(
            lambda: [
                c for c in created(crd, namespace, "fenced") if c.user_agent == second.user_agent
            ],
            20,
            what="the standby's firings",
        )
        time.sleep(4)
    creates = created(crd, namespace, "fenced")
    assert_exactly_once(creates)
    ticks = sorted(tick_of(c.name) for c in creates)
    gaps = [(a, b) for a, b in pairwise(ticks) if (b - a).total_seconds() != 1]
    assert not gaps, f"ticks lost across the hand-over: {gaps}"
    refused = [line for line in second.output().splitlines() if "punctual fencing" in line]
    print(f"\ncreates refused by the fence during the hand-over (retried): {len(refused)}")
