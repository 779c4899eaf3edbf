"""The Helm chart against the real control plane: it renders, installs, and its RBAC is enough.

`helm lint` and `helm template` must pass in both RBAC modes, with and without the
monitoring extras; bad values must be refused; the chart's crds/ must be crds/, byte for
byte. Installed charts are judged by what a platform team relies on: the operator, run as
a local process with nothing but a token of the chart's ServiceAccount (TokenRequest API),
fires a schedule through the chart's fencing binding with no 403 in its log; `kubectl auth
can-i` shows what the account may not do; the built-in admin, edit and view roles pick up
CronSchedules through aggregation.

kwok's fake nodes "run" the Deployment's pods without an image, so nothing competes with
the local operator for the Lease; on a real cluster (the kind path) the image tag below is
never pulled, for the same reason.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import tarfile
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from punctual.core.jobs import installation_label
from punctual.core.keys import LABEL_INSTALLATION

from .conftest import REPO, Cluster
from .operators import wait_until

pytestmark = pytest.mark.e2e

CHART = REPO / "charts" / "punctual"
API_FILES = sorted((REPO / "crds").glob("*.yaml"))  # the CRDs and the fencing policy
NOT_RUN = ("--set", "image.tag=e2e-never-pulled", "--set", "image.pullPolicy=Never")
MONITORING = (
    "--set",
    "serviceMonitor.enabled=true",
    "--set",
    "prometheusRule.enabled=true",
    "--set",
    "dashboard.enabled=true",
)
NAMESPACED = ("--set", "watchNamespaces={team-a,team-b}")
FAST_LEASE = ("--lease-duration", "6", "--renew-deadline", "4", "--retry-period", "1")
LEADER = "punctual.dev/leader"  # the annotation naming the replica that created a Job

# What the leader writes, as (verb, resource, subresource) in the audit log: the Lease, the
# fenced status claim, the Job per tick, and history clean-up (a delete, then the patch
# that removes Punctual's finalizer).
WRITES = {
    ("create", "leases", None),
    ("update", "leases", None),
    ("update", "cronschedules", "status"),
    ("create", "jobs", None),
    ("delete", "jobs", None),
    ("patch", "jobs", None),
}


# -- helpers ------------------------------------------------------------------------


def helm(
    cluster: Cluster | None, *args: str, check: bool = True
) -> subprocess.CompletedProcess[str]:
    """The pinned helm; against the cluster under test when one is given."""
    command = [str(REPO / ".cluster" / "bin" / "helm"), *args]
    if cluster is not None:
        command.append(f"--kubeconfig={cluster.kubeconfig}")
    result = subprocess.run(command, capture_output=True, text=True, timeout=60)
    if check and result.returncode != 0:
        raise AssertionError(f"helm {' '.join(args)} failed:\n{result.stdout}\n{result.stderr}")
    return result


def render(*args: str) -> list[dict[str, Any]]:
    out = helm(None, "template", "punctual", str(CHART), "--namespace", "ops", *args).stdout
    return [doc for doc in yaml.safe_load_all(out) if doc]


def find(docs: list[dict[str, Any]], kind: str, name: str = "") -> list[dict[str, Any]]:
    return [d for d in docs if d["kind"] == kind and (not name or d["metadata"]["name"] == name)]


def fencing_binding(docs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The fencing policy's binding (the triggers policy has one of its own)."""
    return [
        b
        for b in find(docs, "ValidatingAdmissionPolicyBinding")
        if b["spec"]["policyName"] == "punctual-fencing.punctual.dev"
    ]


def test_the_triggers_policy_is_bound_and_the_operator_told_unless_turned_off() -> None:
    docs = render()
    [binding] = [
        b
        for b in find(docs, "ValidatingAdmissionPolicyBinding")
        if b["spec"]["policyName"] == "punctual-triggers.punctual.dev"
    ]
    assert binding["spec"]["validationActions"] == ["Deny"]
    [container] = find(docs, "Deployment")[0]["spec"]["template"]["spec"]["containers"]
    assert {"name": "PUNCTUAL_VERIFIED_TRIGGERS", "value": "true"} in container["env"]
    off = render("--set", "triggerVerification.enabled=false")
    assert not [
        b
        for b in find(off, "ValidatingAdmissionPolicyBinding")
        if b["spec"]["policyName"] == "punctual-triggers.punctual.dev"
    ]
    [container] = find(off, "Deployment")[0]["spec"]["template"]["spec"]["containers"]
    assert "PUNCTUAL_VERIFIED_TRIGGERS" not in {e["name"] for e in container["env"]}


def rules_text(role: dict[str, Any]) -> set[tuple[str, str, str]]:
    """(group, resource, verb) for every rule of a Role or ClusterRole."""
    return {
        (group, resource, verb)
        for rule in role["rules"]
        for group in rule["apiGroups"]
        for resource in rule["resources"]
        for verb in rule["verbs"]
    }


@contextlib.contextmanager
def installed(cluster: Cluster, namespace: str, *values: str) -> Iterator[str]:
    """`helm install` a release named punctual-<random> (so its cluster-scoped names are its
    own), and uninstall it afterwards whatever happens."""
    release = f"punctual-{uuid.uuid4().hex[:6]}"
    helm(
        cluster,
        "install",
        release,
        str(CHART),
        "--namespace",
        namespace,
        "--wait=false",
        *NOT_RUN,
        *values,
    )
    try:
        yield release
    finally:
        helm(cluster, "uninstall", release, "--namespace", namespace, "--wait=false", check=False)


@contextlib.contextmanager
def extra_namespace(cluster: Cluster) -> Iterator[str]:
    name = f"t-{uuid.uuid4().hex[:10]}"
    cluster.kubectl("create", "namespace", name)
    try:
        yield name
    finally:
        cluster.kubectl("delete", "namespace", name, "--wait=false", check=False)


def service_account_kubeconfig(cluster: Cluster, namespace: str, account: str, path: Path) -> Path:
    """A kubeconfig with only a token of `account`, from the TokenRequest API."""
    request = {
        "apiVersion": "authentication.k8s.io/v1",
        "kind": "TokenRequest",
        "spec": {"expirationSeconds": 3600},
    }
    answer = cluster.kubectl(
        "create",
        "--raw",
        f"/api/v1/namespaces/{namespace}/serviceaccounts/{account}/token",
        "-f",
        "-",
        input=json.dumps(request),
    )
    token = json.loads(answer.stdout)["status"]["token"]
    admin = yaml.safe_load(cluster.kubeconfig.read_text())
    context = {c["name"]: c["context"] for c in admin["contexts"]}[admin["current-context"]]
    server = {c["name"]: c["cluster"] for c in admin["clusters"]}[context["cluster"]]
    server = dict(server)
    if server.get("certificate-authority"):  # a path relative to the admin kubeconfig
        server["certificate-authority"] = str(
            (cluster.kubeconfig.parent / server["certificate-authority"]).resolve()
        )
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "under-test", "cluster": server}],
        "users": [{"name": account, "user": {"token": token}}],
        "contexts": [
            {
                "name": account,
                "context": {"cluster": "under-test", "user": account, "namespace": namespace},
            }
        ],
        "current-context": account,
    }
    path.write_text(yaml.safe_dump(config))
    return path


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextlib.contextmanager
def operator_as(kubeconfig: Path, log: Path, *args: str) -> Iterator[subprocess.Popen[bytes]]:
    """`punctual run` as a local process with only this kubeconfig's credentials."""
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("PUNCTUAL_", "POD_", "KUBERNETES_"))
    }
    env.update(KUBECONFIG=str(kubeconfig), PYTHONUNBUFFERED="1")
    proc = subprocess.Popen(
        [sys.executable, "-m", "punctual.cli", "run", "--log-level", "DEBUG", *FAST_LEASE, *args],
        stdout=log.open("ab"),
        stderr=subprocess.STDOUT,
        stdin=subprocess.DEVNULL,
        env=env,
        cwd=REPO,
    )
    try:
        yield proc
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(15)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(5)


def http_get(port: int, path: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=2) as resp:
            return resp.status, resp.read().decode()
    except urllib.error.HTTPError as error:
        return error.code, ""
    except OSError:
        return 0, ""


def gauge(port: int, name: str) -> float | None:
    status, text = http_get(port, "/metrics")
    if status != 200:
        return None
    for line in text.splitlines():
        if line.startswith(name + " ") or line.startswith(name + "{"):
            return float(line.rsplit(" ", 1)[1])
    return None


def forbidden_lines(log: Path, allowed: str = "") -> list[str]:
    """Lines where the API server refused the operator something (kopf or Punctual)."""
    lines = log.read_text(errors="replace").splitlines()
    return [
        line
        for line in lines
        if ("Forbidden" in line or "Not enough permissions" in line)
        and not (allowed and allowed in line)
    ]


def can_i(cluster: Cluster, user: str, *args: str) -> bool:
    out = cluster.kubectl("auth", "can-i", *args, f"--as={user}", check=False)
    answer = out.stdout.strip()
    assert answer in ("yes", "no"), f"kubectl auth can-i {args}: {out.stdout} {out.stderr}"
    return answer == "yes"


def every_second(name: str, **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "punctual.dev/v1",
        "kind": "CronSchedule",
        "metadata": {"name": name},
        "spec": {
            "schedule": "* * * * * *",
            **spec,
            "jobTemplate": {
                "spec": {
                    "backoffLimit": 0,
                    "template": {
                        "metadata": {
                            "annotations": {"pod-complete.stage.kwok.x-k8s.io/delay": "200ms"}
                        },
                        "spec": {
                            "restartPolicy": "Never",
                            "containers": [{"name": "main", "image": "busybox"}],
                        },
                    },
                }
            },
        },
    }


def authorized_writes(
    cluster: Cluster, user: str, namespaces: set[str]
) -> set[tuple[str, str | None, str | None]]:
    """(verb, resource, subresource) of the writes `user` made that RBAC let through: any
    answer but 403 (a 404 or 409 comes after the authorization check)."""
    return {
        (e["verb"], ref.get("resource"), ref.get("subresource"))
        for e in cluster.audit_events()
        if e["user"]["username"] == user
        and (ref := e.get("objectRef") or {}).get("namespace") in namespaces
        and (e.get("responseStatus") or {}).get("code") != 403
    }


# -- rendering ----------------------------------------------------------------------


@pytest.mark.parametrize(
    "values",
    [(), NAMESPACED, MONITORING, NAMESPACED + MONITORING],
    ids=["all-namespaces", "namespaced", "all-namespaces-monitoring", "namespaced-monitoring"],
)
def test_lint_and_template_pass_in_every_mode(values: tuple[str, ...]) -> None:
    helm(None, "lint", "--strict", str(CHART), *values)
    docs = render("--include-crds", *values)

    [deployment] = find(docs, "Deployment")
    pod = deployment["spec"]["template"]["spec"]
    [container] = pod["containers"]
    assert deployment["spec"]["replicas"] == 2
    env = {
        e["name"]: e.get("value") or e["valueFrom"]["fieldRef"]["fieldPath"]
        for e in container["env"]
    }
    assert env["POD_NAME"] == "metadata.name" and env["POD_NAMESPACE"] == "metadata.namespace"
    assert env["PUNCTUAL_LEASE_NAME"] == "punctual-leader"
    assert env["PUNCTUAL_LEASE_NAMESPACE"] == "ops"
    assert container["livenessProbe"]["httpGet"]["path"] == "/healthz"
    assert container["readinessProbe"]["httpGet"]["path"] == "/readyz"
    # A rollout replaces the leader only once a new pod is Ready (its index complete).
    rolling = deployment["spec"]["strategy"]["rollingUpdate"]
    assert (rolling["maxSurge"], rolling["maxUnavailable"]) == (1, 0)
    assert container["resources"]["requests"] and container["resources"]["limits"]
    security = container["securityContext"]
    assert security["readOnlyRootFilesystem"] and security["runAsNonRoot"]
    assert security["allowPrivilegeEscalation"] is False
    assert security["capabilities"]["drop"] == ["ALL"]
    assert security["seccompProfile"]["type"] == "RuntimeDefault"
    assert pod["securityContext"]["runAsUser"] == 65532
    assert {"name": "tmp", "mountPath": "/tmp"} in container["volumeMounts"]
    assert all(c["labelSelector"]["matchLabels"] for c in pod["topologySpreadConstraints"])
    assert find(docs, "PodDisruptionBudget")[0]["spec"]["minAvailable"] == 1
    assert find(docs, "ServiceAccount") and find(docs, "Service")
    crds = {d["metadata"]["name"] for d in find(docs, "CustomResourceDefinition")}
    assert crds == {
        "cronschedules.punctual.dev",
        "fences.punctual.dev",
        "freezewindows.punctual.dev",
        "concurrencygroups.punctual.dev",
        "calendars.punctual.dev",
        "clusterfreezewindows.punctual.dev",
    }
    [binding] = fencing_binding(docs)
    assert (
        binding["spec"]["policyName"]
        == find(docs, "ValidatingAdmissionPolicy", "punctual-fencing.punctual.dev")[0]["metadata"][
            "name"
        ]
    )
    assert binding["spec"]["paramRef"] == {
        "name": "punctual-fence",
        "namespace": "ops",
        "parameterNotFoundAction": "Deny",
    }
    # The binding checks only this release's Jobs: the label the operator computes.
    [installation] = binding["spec"]["matchResources"]["objectSelector"]["matchExpressions"]
    assert installation["key"] == LABEL_INSTALLATION
    assert installation["values"] == [installation_label("ops/punctual-leader")]

    [lease_role] = find(docs, "Role", "punctual-leader-election")
    assert lease_role["metadata"]["namespace"] == "ops"
    names = {"leases": ["punctual-leader"], "fences": ["punctual-fence"]}
    for rule in lease_role["rules"]:
        [resource] = rule["resources"]
        # Named, or create (a name cannot be known before), or read-only get (during a
        # change of the shard count, the shard Leases name the Fence's holders).
        assert rule.get("resourceNames") == names[resource] or rule["verbs"] in (
            ["create"],
            ["get"],
        )

    [edit] = find(docs, "ClusterRole", "punctual-edit")
    [view] = find(docs, "ClusterRole", "punctual-view")
    assert edit["metadata"]["labels"]["rbac.authorization.k8s.io/aggregate-to-edit"] == "true"
    assert edit["metadata"]["labels"]["rbac.authorization.k8s.io/aggregate-to-admin"] == "true"
    assert view["metadata"]["labels"]["rbac.authorization.k8s.io/aggregate-to-view"] == "true"
    assert not {verb for _, _, verb in rules_text(view)} - {"get", "list", "watch"}

    writes = ("punctual.dev", "cronschedules/status", "update")
    if values[:2] == NAMESPACED:
        roles = find(docs, "Role", "punctual")
        assert sorted(r["metadata"]["namespace"] for r in roles) == ["team-a", "team-b"]
        assert all(writes in rules_text(r) for r in roles)
        assert env["PUNCTUAL_NAMESPACES"] == "team-a,team-b"
        [discovery] = find(docs, "ClusterRole", "punctual-discovery")
        # Cluster-wide it only reads: CRDs and namespaces (for kopf), Calendars and
        # ClusterFreezeWindows (list), and other installations' Leases (get, to tell
        # whether one is alive).
        assert {verb for _, _, verb in rules_text(discovery)} == {"list", "watch", "get"}
        assert {r for _, r, v in rules_text(discovery) if v == "get"} == {"leases"}
        assert not find(docs, "ClusterRole", "punctual")
        [selector] = binding["spec"]["matchResources"]["namespaceSelector"]["matchExpressions"]
        assert selector["values"] == ["team-a", "team-b"]
    else:
        [cluster_role] = find(docs, "ClusterRole", "punctual")
        assert writes in rules_text(cluster_role)
        assert "PUNCTUAL_NAMESPACES" not in env
        assert not find(docs, "Role", "punctual")
        assert binding["spec"]["matchResources"]["namespaceSelector"] == {}
    assert not any(
        resource == "secrets"
        for role in find(docs, "Role") + find(docs, "ClusterRole")
        for _, resource, _ in rules_text(role)
    )

    if values[-6:] == MONITORING:
        [monitor] = find(docs, "ServiceMonitor")
        assert monitor["spec"]["endpoints"][0]["port"] == "metrics"
        [rule] = find(docs, "PrometheusRule")
        alerts = {r["alert"]: r for g in rule["spec"]["groups"] for r in g["rules"]}
        assert set(alerts) == {
            "PunctualFiringLagHigh",
            "PunctualTicksMissed",
            "PunctualJobsFailing",
            "PunctualScheduleStale",
            "PunctualSchedulePaused",
            "PunctualRunStuckPending",
            "PunctualTickDead",
            "PunctualNoLeader",
        }
        assert "punctual_firing_lag_seconds_bucket" in alerts["PunctualFiringLagHigh"]["expr"]
        assert "punctual_ticks_missed_total" in alerts["PunctualTicksMissed"]["expr"]
        assert "punctual_jobs_failed_total" in alerts["PunctualJobsFailing"]["expr"]
        no_leader = alerts["PunctualNoLeader"]
        assert "max(punctual_leader" in no_leader["expr"] and "absent(" in no_leader["expr"]
        assert no_leader["for"] == "1m"
        [dashboard] = find(docs, "ConfigMap", "punctual-dashboard")
        assert dashboard["metadata"]["labels"]["grafana_dashboard"] == "1"
        panels = json.loads(dashboard["data"]["punctual.json"])["panels"]
        exprs = " ".join(t["expr"] for p in panels for t in p.get("targets", []))
        assert "punctual_firing_lag_seconds_bucket" in exprs and "punctual_leader" in exprs
    else:
        assert not find(docs, "ServiceMonitor") and not find(docs, "PrometheusRule")
        assert not find(docs, "ConfigMap")


@pytest.mark.parametrize(
    ("values", "error"),
    [
        (("--set", "replicas=3"), "additional properties 'replicas' not allowed"),
        (("--set", "operator.logFormat=xml"), "logFormat"),
        (("--set", "leaderElection.renewDeadline=20"), "renewDeadline must be less than"),
        (("--set", "watchNamespaces={Bad_Name}"), "watchNamespaces"),
        # A kind, not RESOURCE.VERSION.GROUP; and a resource without its group.
        (("--set", "workloadKinds={Workflow}"), "workloadKinds/0"),
        (("--set", "workloadKinds={workflows.v1alpha1}"), "workloadKinds/0"),
        (
            ("--set", "workloadKinds={rayjobs.v1.ray.io,rayjobs.v1.ray.io}"),
            "workloadKinds",
        ),
    ],
    ids=[
        "unknown-key",
        "bad-enum",
        "renew-after-expiry",
        "bad-namespace",
        "workload-kind-not-resource-version-group",
        "workload-kind-without-group",
        "workload-kind-twice",
    ],
)
def test_bad_values_are_refused(values: tuple[str, ...], error: str) -> None:
    out = helm(None, "template", "punctual", str(CHART), *values, check=False)
    assert out.returncode != 0
    assert error in out.stderr


WORKLOAD_KINDS = ("workflows.v1alpha1.argoproj.io", "pipelineruns.v1.tekton.dev")
WORKLOADS = ("--set", "workloadKinds={" + ",".join(WORKLOAD_KINDS) + "}")
WORKLOAD_VERBS = {"get", "list", "watch", "create", "delete", "patch"}


@pytest.mark.parametrize("values", [(), NAMESPACED], ids=["all-namespaces", "namespaced"])
def test_workload_kinds_are_told_granted_and_fenced(values: tuple[str, ...]) -> None:
    """workloadKinds: the operator is told (PUNCTUAL_WORKLOAD_KINDS), may manage exactly
    those resources wherever it may manage Jobs, and the fencing binding judges their
    creates beside the Jobs'."""
    helm(None, "lint", "--strict", str(CHART), *WORKLOADS, *values)
    docs = render(*WORKLOADS, *values)

    [deployment] = find(docs, "Deployment")
    [container] = deployment["spec"]["template"]["spec"]["containers"]
    env = {e["name"]: e.get("value") for e in container["env"]}
    assert env["PUNCTUAL_WORKLOAD_KINDS"] == ",".join(WORKLOAD_KINDS)

    roles = find(docs, "Role", "punctual") if values else find(docs, "ClusterRole", "punctual")
    assert len(roles) == (2 if values else 1)
    for role in roles:
        for kind in WORKLOAD_KINDS:
            resource, _, group = kind.split(".", 2)
            [rule] = [r for r in role["rules"] if r["apiGroups"] == [group]]
            assert rule["resources"] == [resource]
            assert set(rule["verbs"]) == WORKLOAD_VERBS and "resourceNames" not in rule
        # Nothing else of those groups, and Jobs as before.
        groups = {group for group, _, _ in rules_text(role)}
        assert {"argoproj.io", "tekton.dev", "batch"} <= groups
        assert {(g, r) for g, r, _ in rules_text(role) if g in ("argoproj.io", "tekton.dev")} == {
            ("argoproj.io", "workflows"),
            ("tekton.dev", "pipelineruns"),
        }
    # Cluster-wide, a namespaced install still only reads (no workload kind there).
    for role in find(docs, "ClusterRole", "punctual-discovery"):
        assert not {g for g, _, _ in rules_text(role)} & {"argoproj.io", "tekton.dev"}

    [binding] = fencing_binding(docs)
    assert binding["spec"]["matchResources"]["resourceRules"] == [
        {
            "apiGroups": ["batch"],
            "apiVersions": ["v1"],
            "resources": ["jobs"],
            "operations": ["CREATE"],
        },
        {
            "apiGroups": ["argoproj.io"],
            "apiVersions": ["v1alpha1"],
            "resources": ["workflows"],
            "operations": ["CREATE"],
        },
        {
            "apiGroups": ["tekton.dev"],
            "apiVersions": ["v1"],
            "resources": ["pipelineruns"],
            "operations": ["CREATE"],
        },
    ]


def test_without_workload_kinds_the_operator_gets_jobs_only() -> None:
    """The default: no PUNCTUAL_WORKLOAD_KINDS, no rule beyond the Jobs', and a binding that
    narrows the policy (which matches every kind) to Jobs."""
    docs = render()
    [container] = find(docs, "Deployment")[0]["spec"]["template"]["spec"]["containers"]
    assert "PUNCTUAL_WORKLOAD_KINDS" not in {e["name"] for e in container["env"]}
    groups = {g for g, _, _ in rules_text(find(docs, "ClusterRole", "punctual")[0])}
    assert groups == {"punctual.dev", "batch", "", "apiextensions.k8s.io", "coordination.k8s.io"}
    [binding] = fencing_binding(docs)
    assert binding["spec"]["matchResources"]["resourceRules"] == [
        {
            "apiGroups": ["batch"],
            "apiVersions": ["v1"],
            "resources": ["jobs"],
            "operations": ["CREATE"],
        }
    ]


def test_the_chart_ships_the_api_of_crds(tmp_path: Path) -> None:
    """crds/ is the single source of truth: the chart's crds/ has the same files, byte for
    byte (symbolic links that helm follows), and helm renders and packages them as they are."""
    chart_files = sorted((CHART / "crds").glob("*.yaml"))
    assert [p.name for p in chart_files] == [p.name for p in API_FILES]
    for ours, theirs in zip(chart_files, API_FILES, strict=True):
        assert ours.read_bytes() == theirs.read_bytes(), ours.name
    rendered = {(d["kind"], d["metadata"]["name"]): d for d in render("--include-crds")}
    for path in API_FILES:
        for doc in yaml.safe_load_all(path.read_text()):
            assert rendered[doc["kind"], doc["metadata"]["name"]] == doc, path.name
    helm(None, "package", str(CHART), "--destination", str(tmp_path))
    [package] = tmp_path.glob("punctual-*.tgz")
    with tarfile.open(package) as archive:
        for path in API_FILES:
            member = archive.extractfile(f"punctual/crds/{path.name}")
            assert member is not None
            assert member.read() == path.read_bytes(), path.name


# -- installed ----------------------------------------------------------------------


def test_namespaced_install_fires_with_only_the_charts_permissions(
    crd: Cluster, namespace: str, tmp_path: Path
) -> None:
    with (
        extra_namespace(crd) as tenant,
        installed(crd, namespace, "--set", f"watchNamespaces={{{tenant}}}") as release,
    ):
        account = release  # the fullname: the release name contains "punctual"
        deployment = json.loads(
            crd.kubectl("get", "deployment", release, "-n", namespace, "-o", "json").stdout
        )
        assert deployment["spec"]["replicas"] == 2
        crd.kubectl("get", "serviceaccount", account, "-n", namespace)
        crd.kubectl("get", "role", f"{release}-leader-election", "-n", namespace)
        crd.kubectl("get", "role,rolebinding", release, "-n", tenant)
        crd.kubectl("get", "clusterrole,clusterrolebinding", f"{release}-discovery")
        crd.kubectl("get", "service", f"{release}-metrics", "-n", namespace)
        crd.kubectl("get", "poddisruptionbudget", release, "-n", namespace)

        user = f"system:serviceaccount:{namespace}:{account}"
        assert can_i(crd, user, "create", "jobs.batch", "-n", tenant)
        assert can_i(
            crd, user, "update", "cronschedules.punctual.dev", "--subresource=status", "-n", tenant
        )
        assert not can_i(crd, user, "get", "secrets", "-n", tenant)
        assert not can_i(crd, user, "get", "secrets", "-n", namespace)
        assert not can_i(crd, user, "list", "secrets", "--all-namespaces")
        assert not can_i(crd, user, "create", "jobs.batch", "-n", namespace)
        assert not can_i(crd, user, "create", "jobs.batch", "-n", "default")
        assert not can_i(crd, user, "list", "cronschedules.punctual.dev", "-n", "default")
        assert not can_i(crd, user, "list", "cronschedules.punctual.dev", "--all-namespaces")
        # Calendars and ClusterFreezeWindows: read, their status left to an installation
        # watching every namespace; Namespaces listed for a namespaceSelector's labels.
        assert can_i(crd, user, "list", "calendars.punctual.dev")
        assert can_i(crd, user, "list", "clusterfreezewindows.punctual.dev")
        assert can_i(crd, user, "list", "namespaces")
        assert not can_i(crd, user, "patch", "calendars.punctual.dev", "--subresource=status")
        assert not can_i(crd, user, "update", "cronschedules.punctual.dev", "-n", tenant)
        assert not can_i(crd, user, "update", "leases.coordination.k8s.io/other", "-n", namespace)

        kubeconfig = service_account_kubeconfig(crd, namespace, account, tmp_path / "sa.yaml")
        crd.kubectl(
            "apply",
            "-n",
            tenant,
            "-f",
            "-",
            input=json.dumps(every_second("tick", successfulJobsHistoryLimit=1)),
        )
        port = free_port()
        log = tmp_path / "operator.log"

        def fired() -> bool:
            """A Job of the schedule exists, and this operator (named in it) created it."""
            jobs = json.loads(crd.kubectl("get", "jobs", "-n", tenant, "-o", "json").stdout)
            leaders = {(j["metadata"].get("annotations") or {}).get(LEADER) for j in jobs["items"]}
            foreign = leaders - {"chart-test"}
            assert not foreign, (
                f"another Punctual operator ({', '.join(map(str, foreign))}) fires schedules "
                "in this test's namespace: one watching every namespace of this cluster? "
                "Stop it; it breaks every e2e test."
            )
            return bool(leaders)

        try:
            with operator_as(
                kubeconfig,
                log,
                "--namespace",
                tenant,
                "--lease-namespace",
                namespace,
                "--lease-name",
                f"{release}-leader",
                "--identity",
                "chart-test",
                "--metrics-port",
                str(port),
            ) as proc:
                wait_until(fired, 30, what="a Job created by the operator as the account")
                fence = json.loads(
                    crd.kubectl(
                        "get", "fence", "punctual-fence", "-n", namespace, "-o", "json"
                    ).stdout
                )
                assert fence["spec"]["holder"] == "chart-test"
                crd.kubectl("get", "validatingadmissionpolicybinding", f"{release}-fencing")
                if crd.audit_log is not None:
                    # Every kind of write it makes was let through (a Job deleted by
                    # history clean-up, too), as the API server saw it.
                    wait_until(
                        lambda: authorized_writes(crd, user, {tenant, namespace}) >= WRITES,
                        20,
                        interval=1,
                        what=f"writes {sorted(WRITES, key=str)} by {user}",
                    )
                assert http_get(port, "/healthz")[0] == 200
                # Ready once kopf's FreezeWindow list got through (the API server may
                # answer 429 "storage is (re)initializing" just after CRDs change).
                wait_until(lambda: http_get(port, "/readyz")[0] == 200, 20, what="Ready")
                assert gauge(port, "punctual_leader") == 1
                assert proc.poll() is None
            assert not forbidden_lines(log), "\n".join(forbidden_lines(log)[:10])
        finally:
            sys.stderr.write("--- operator log (last lines) ---\n")
            if log.exists():
                sys.stderr.write("\n".join(log.read_text().splitlines()[-30:]) + "\n")


def test_all_namespaces_install_watches_everything_and_nothing_more(
    crd: Cluster, namespace: str, tmp_path: Path
) -> None:
    # Fencing off: its binding would match every namespace and deny the Jobs of every other
    # test's operator on a shared cluster (their Fence is not this release's).
    with installed(crd, namespace, "--set", "fencing.enabled=false") as release:
        account = release
        crd.kubectl("get", "clusterrole,clusterrolebinding", release)
        crd.kubectl("get", "deployment,serviceaccount", release, "-n", namespace)
        user = f"system:serviceaccount:{namespace}:{account}"
        assert can_i(crd, user, "watch", "cronschedules.punctual.dev", "--all-namespaces")
        assert can_i(crd, user, "list", "calendars.punctual.dev")
        assert can_i(
            crd, user, "patch", "clusterfreezewindows.punctual.dev", "--subresource=status"
        )
        assert not can_i(crd, user, "create", "calendars.punctual.dev")
        assert can_i(crd, user, "create", "jobs.batch", "-n", "default")
        assert can_i(crd, user, "create", "leases.coordination.k8s.io", "-n", namespace)
        assert can_i(
            crd, user, "update", f"leases.coordination.k8s.io/{release}-leader", "-n", namespace
        )
        assert not can_i(crd, user, "update", "leases.coordination.k8s.io/other", "-n", namespace)
        assert not can_i(crd, user, "create", "leases.coordination.k8s.io", "-n", "default")
        assert not can_i(crd, user, "get", "secrets", "-n", namespace)
        assert not can_i(crd, user, "list", "secrets", "--all-namespaces")
        assert not can_i(crd, user, "delete", "cronschedules.punctual.dev", "-n", namespace)
        # patch on Jobs is granted: it removes Punctual's finalizer, nothing else.
        assert can_i(crd, user, "patch", "jobs.batch", "-n", namespace)
        assert not can_i(crd, user, "update", "jobs.batch", "-n", namespace)
        assert not can_i(crd, user, "patch", "cronschedules.punctual.dev", "-n", namespace)

        # A watcher of every namespace on a shared cluster must not lead, or it would fire
        # other tests' schedules: its Lease is in a namespace where it may not create one.
        # It shows that the ClusterRole lets it list and watch everything without a 403.
        suspended = every_second("idle", suspend=True)
        crd.kubectl("apply", "-n", namespace, "-f", "-", input=json.dumps(suspended))
        kubeconfig = service_account_kubeconfig(crd, namespace, account, tmp_path / "sa.yaml")
        port = free_port()
        log = tmp_path / "operator.log"
        lease = f"chart-test-{uuid.uuid4().hex[:6]}"
        with operator_as(
            kubeconfig,
            log,
            "--lease-namespace",
            "default",
            "--lease-name",
            lease,
            "--metrics-port",
            str(port),
        ):
            wait_until(lambda: (gauge(port, "punctual_schedules") or 0) >= 1, 30, what="the index")
            # The schedules are indexed first; Ready also waits for the Jobs, the FreezeWindows
            # and the Leases read, which may come a moment later on a loaded machine.
            wait_until(lambda: http_get(port, "/readyz")[0] == 200, 30, what="Ready")
            assert gauge(port, "punctual_leader") == 0
            time.sleep(2)  # kopf's first retries of a refused watch come within a second
        lease_refusal = (
            'resource "leases" in API group "coordination.k8s.io" in the namespace "default"'
        )
        refused = forbidden_lines(log, allowed=lease_refusal)
        assert not refused, "\n".join(refused[:10])
        assert forbidden_lines(log), "the Lease create should have been refused"


def test_admin_edit_and_view_roles_pick_up_cronschedules(crd: Cluster, namespace: str) -> None:
    users = {role: f"{role}-user-{namespace}" for role in ("admin", "edit", "view")}
    for role, user in users.items():
        crd.kubectl(
            "create",
            "rolebinding",
            role,
            f"--clusterrole={role}",
            f"--user={user}",
            "-n",
            namespace,
        )
    resource = "cronschedules.punctual.dev"
    with installed(crd, namespace, "--set", f"watchNamespaces={{{namespace}}}"):
        wait_until(
            lambda: (
                can_i(crd, users["admin"], "create", resource, "-n", namespace)
                and can_i(crd, users["edit"], "create", resource, "-n", namespace)
                and can_i(crd, users["view"], "list", resource, "-n", namespace)
            ),
            20,
            what="the aggregation controller",
        )
        schedule = json.dumps(every_second("by-editor", suspend=True))
        for manager in (users["admin"], users["edit"]):
            crd.kubectl("apply", "-n", namespace, f"--as={manager}", "-f", "-", input=schedule)
            crd.kubectl("delete", "cronschedule", "by-editor", "-n", namespace, f"--as={manager}")
            assert not can_i(
                crd, manager, "update", resource, "--subresource=status", "-n", namespace
            )

        viewer = users["view"]
        assert (
            crd.kubectl("get", "cronschedules", "-n", namespace, f"--as={viewer}").returncode == 0
        )
        refused = crd.kubectl(
            "apply", "-n", namespace, f"--as={viewer}", "-f", "-", input=schedule, check=False
        )
        assert refused.returncode != 0 and "forbidden" in refused.stderr.lower()
        assert not can_i(crd, viewer, "delete", resource, "-n", namespace)
        assert not can_i(crd, viewer, "list", resource, "-n", "default")

        # Calendars and ClusterFreezeWindows: cluster-scoped, so written by cluster roles
        # only (no admin or edit of a namespace stops every team), read by view where it
        # is bound cluster-wide.
        shared = ("calendars.punctual.dev", "clusterfreezewindows.punctual.dev")
        for user in users.values():
            assert not any(can_i(crd, user, "create", kind) for kind in shared), user
        reader = f"cluster-viewer-{namespace}"
        crd.kubectl(
            "create", "clusterrolebinding", reader, "--clusterrole=view", f"--user={reader}"
        )
        try:
            wait_until(lambda: all(can_i(crd, reader, "list", kind) for kind in shared), 20,
                       what="view reading Calendars and ClusterFreezeWindows")  # fmt: skip
            assert not any(can_i(crd, reader, "create", kind) for kind in shared)
            assert can_i(crd, reader, "get", "calendars.punctual.dev", "--subresource=status")
        finally:
            crd.kubectl("delete", "clusterrolebinding", reader, "--wait=false", check=False)
