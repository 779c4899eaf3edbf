"""Who triggered, proven by the API server: a forged `triggeredBy` is refused at admission.

crds/triggers.punctual.dev.yaml is bound to the test namespace; two users, alice and
mallory (impersonated by the admin kubeconfig, each allowed to patch CronSchedules there),
ask for manual runs. Mallory naming alice is refused, a bare trigger naming nobody is
refused, mallory naming mallory fires, and the operator (--verified-triggers) records it
verified. The audit log shows the refused patch under mallory's name.

The API server puts a new binding in force within a second or so (its policy source
recompiles once a second), so the test probes until it is refused. Each probe asks a
new request: the policy judges only a trigger that is new or changed, so a probe that
repeated one admitted before the binding took effect would be admitted forever.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from .conftest import REPO, Cluster
from .operators import operators, wait_until
from .test_operator import apply, leader_of, schedule

pytestmark = pytest.mark.e2e

POLICY = REPO / "crds" / "triggers.punctual.dev.yaml"


def bind(cluster: Cluster, namespace: str) -> str:
    """The policy, under a name of this test's own (the same rules), bound to its
    namespace. (The shared name, once bound by an earlier test's Helm release and
    unbound, was not enforced again for a new binding in one run on kube-apiserver
    1.36; a name of the test's own keeps the tests independent of each other.)"""
    policy = yaml.safe_load(POLICY.read_text())
    name = f"punctual-triggers-{namespace}"
    policy["metadata"]["name"] = name
    cluster.kubectl("apply", "-f", "-", input=json.dumps(policy))
    binding = {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingAdmissionPolicyBinding",
        "metadata": {"name": name},
        "spec": {
            "policyName": name,
            "validationActions": ["Deny"],
            "matchResources": {
                "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": namespace}}
            },
        },
    }
    cluster.kubectl("apply", "-f", "-", input=json.dumps(binding))
    return name


def allow_users(cluster: Cluster, namespace: str, *users: str) -> None:
    role = {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "Role",
        "metadata": {"name": "triggerers", "namespace": namespace},
        "rules": [
            {
                "apiGroups": ["punctual.dev"],
                "resources": ["cronschedules"],
                "verbs": ["get", "patch"],
            }
        ],
    }
    binding = {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "RoleBinding",
        "metadata": {"name": "triggerers", "namespace": namespace},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "triggerers"},
        "subjects": [
            {"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": u} for u in users
        ],
    }
    cluster.kubectl("apply", "-f", "-", input=json.dumps(role))
    cluster.kubectl("apply", "-f", "-", input=json.dumps(binding))


def trigger_as(
    cluster: Cluster, namespace: str, user: str, request: str, named: str | None
) -> tuple[int, str]:
    value: dict[str, Any] = {"request": request}
    annotations = []
    if named is not None:
        value["triggeredBy"] = named
        annotations.append(f"punctual.dev/triggered-by={named}")
    result = cluster.kubectl(
        "annotate", "cronschedule", "tv", "-n", namespace, "--overwrite", f"--as={user}",
        f"punctual.dev/trigger={json.dumps(value)}", *annotations,
        check=False,
    )  # fmt: skip
    return result.returncode, result.stderr


def test_a_forged_triggered_by_is_refused_and_a_true_one_recorded_verified(
    crd: Cluster, namespace: str, tmp_path: Path
) -> None:
    binding = bind(crd, namespace)
    try:
        allow_users(crd, namespace, "alice", "mallory")
        apply(crd, namespace, schedule("tv", "0 0 1 1 *", run_ms=300))

        answers: list[str] = []

        def enforced() -> bool:
            probe = f"probe-{len(answers)}"
            code, err = trigger_as(crd, namespace, "mallory", probe, "alice")
            answers.append(f"{code}: {err.strip()}")
            return code != 0 and "punctual triggers" in err

        try:
            wait_until(enforced, 60, what="the triggers policy to be enforced")
        except AssertionError:
            raise AssertionError(f"never refused; the last answers: {answers[-3:]}") from None
        # A probe admitted before the binding took effect left its trigger behind; the
        # operator, started below, must see only the honest one. (Removing it is no
        # trigger, so the policy admits it.)
        crd.kubectl(
            "annotate", "cronschedule", "tv", "-n", namespace,
            "punctual.dev/trigger-", "punctual.dev/triggered-by-",
        )  # fmt: skip
        code, err = trigger_as(crd, namespace, "mallory", "forged", "alice")
        assert code != 0
        assert "it names alice, the caller is mallory" in err, err
        code, err = trigger_as(crd, namespace, "mallory", "nameless", None)
        assert code != 0 and "it names nobody" in err, err
        with operators(crd, namespace, tmp_path) as ops:
            ops.start("solo", "--verified-triggers")
            wait_until(lambda: leader_of(crd, namespace) == "solo", 20, what="leadership")
            code, err = trigger_as(crd, namespace, "mallory", "honest", "mallory")
            assert code == 0, err

            def recorded() -> dict[str, Any] | None:
                out = crd.kubectl("get", "cronschedule", "tv", "-n", namespace, "-o", "json")
                status = json.loads(out.stdout).get("status") or {}
                for firing in status.get("recentFirings") or []:
                    if firing.get("manual"):
                        return dict(firing)
                return None

            firing = wait_until(recorded, 30, what="the manual firing recorded")
        assert firing["triggeredBy"] == "mallory"
        assert firing["triggeredByVerified"] is True
        if crd.audit_log is not None:
            patches = [
                e
                for e in crd.audit_events()
                if e.get("verb") == "patch"
                and (e.get("objectRef") or {}).get("resource") == "cronschedules"
                and (e.get("objectRef") or {}).get("namespace") == namespace
                and (e.get("impersonatedUser") or {}).get("username") == "mallory"
            ]
            codes = [int((e.get("responseStatus") or {}).get("code", 0)) for e in patches]
            assert any(c >= 400 for c in codes), codes  # the forged one, refused
            assert 200 in codes  # the honest one
    finally:
        crd.kubectl("delete", "validatingadmissionpolicybinding", binding, check=False)
        crd.kubectl("delete", "validatingadmissionpolicy", binding, check=False)
