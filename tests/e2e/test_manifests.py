"""Every rendering of the chart passes the real API server's dry-run and a manifest linter.

Why it exists: `helm lint` and `helm template` (test_chart.py) check that the chart renders;
they do not check that the API server would take what it renders (schemas, CEL in the
admission policy, RBAC and PodDisruptionBudget validation, unknown fields), nor what a
manifest linter says about the workload. Here each configuration a user may choose (all
namespaces or a list, monitoring on or off, a className, fencing off) is rendered with
the pinned helm, CRDs included, and:

- applied with `kubectl apply --server-side --dry-run=server --validate=strict` to the
  test cluster: nothing is stored, everything is validated and admitted. The cluster has
  no Prometheus Operator CRDs (none can be installed from a reachable registry), so
  ServiceMonitor and PrometheusRule are left out of the dry-run and checked here instead:
  the ServiceMonitor must select the metrics Service and its named port, and the
  PrometheusRule's groups must pass `promtool check rules` and select that Service's job;
- scored by kube-score (e2e/tools/kube-score, built by `make test-tools`): default checks
  plus those its checks.yaml enables, warnings fail, and only the checks that file
  switches off, each with its reason, are skipped;
- checked for what kube-linter's RBAC checks would catch: no wildcard, no Secrets, no
  escalate, bind or impersonate, no pods/exec.

What it must never do: create anything in the cluster beyond its namespaces (the dry-run
stores nothing), or lint a rendering other than the chart's own.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import Any

import pytest
import yaml

from .conftest import REPO, Cluster
from .test_chart import extra_namespace

pytestmark = pytest.mark.e2e

CHART = REPO / "charts" / "punctual"
BIN = REPO / ".cluster" / "bin"
KUBE_SCORE_CHECKS = REPO / "e2e" / "tools" / "kube-score" / "checks.yaml"
RELEASE = "punctual"
MONITORING = (
    *("--set", "serviceMonitor.enabled=true"),
    *("--set", "prometheusRule.enabled=true"),
    *("--set", "dashboard.enabled=true"),
)
CLASS = ("--set", "className=canary")
WATCH = "watch"  # replaced by --set watchNamespaces={<the test's two namespaces>}
NOT_SERVED = {
    ("monitoring.coreos.com/v1", "ServiceMonitor"),
    ("monitoring.coreos.com/v1", "PrometheusRule"),
}
RENDERINGS = {
    "all-namespaces": (),
    "watch-namespaces": (WATCH,),
    "all-namespaces-monitoring": MONITORING,
    "watch-namespaces-monitoring": (WATCH, *MONITORING),
    "class": CLASS,
    "class-watch-namespaces-monitoring": (*CLASS, WATCH, *MONITORING),
    "no-fencing": ("--set", "fencing.enabled=false"),
}
FORBIDDEN_VERBS = {"escalate", "bind", "impersonate"}


def tool(path: Path | str | None, what: str) -> str:
    """A tool `make test-tools` provides; skip without it (fail in CI, where it must be)."""
    found = shutil.which(str(path)) if path else None
    if found is None:
        message = f"needs {what}: run `make test-tools`"
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)
    return found


def render(namespace: str, *values: str) -> tuple[str, list[dict[str, Any]]]:
    """`helm template` of the chart as release RELEASE in `namespace`: text and documents."""
    command = [str(BIN / "helm"), "template", RELEASE, str(CHART), "--namespace", namespace]
    result = subprocess.run(
        [*command, "--include-crds", *values],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    return result.stdout, [d for d in yaml.safe_load_all(result.stdout) if d]


def server_version(cluster: Cluster) -> str:
    version = json.loads(cluster.kubectl("version", "-o", "json").stdout)["serverVersion"]
    return f"v{version['major']}.{version['minor'].rstrip('+')}"


def kube_score(binary: str, text: str, kubernetes_version: str) -> tuple[int, list[str]]:
    """kube-score's exit code and every line that is not OK or skipped."""
    checks = yaml.safe_load(KUBE_SCORE_CHECKS.read_text())
    args = [binary, "score", "-", "--output-format", "ci", "--color", "never"]
    args += ["--kubernetes-version", kubernetes_version, "--exit-one-on-warning"]
    for check in checks.get("enable") or []:
        args += ["--enable-optional-test", check]
    for check, reason in (checks.get("ignore") or {}).items():
        assert str(reason).strip(), f"{KUBE_SCORE_CHECKS}: {check} is ignored without a reason"
        args += ["--ignore-test", check]
    result = subprocess.run(args, input=text, capture_output=True, text=True, timeout=60)
    findings = [
        line
        for line in (result.stdout + result.stderr).splitlines()
        if line.strip() and not line.startswith(("[OK]", "[SKIPPED]"))
    ]
    return result.returncode, findings


def rbac_findings(docs: list[dict[str, Any]]) -> list[str]:
    """What kube-linter's RBAC checks would report: wildcards, Secrets, privilege verbs."""
    findings = []
    for doc in docs:
        if doc["kind"] not in ("Role", "ClusterRole"):
            continue
        name = f"{doc['kind']}/{doc['metadata']['name']}"
        for rule in doc.get("rules") or []:
            fields = {f: set(rule.get(f) or []) for f in ("apiGroups", "resources", "verbs")}
            if any("*" in values for values in fields.values()):
                findings.append(f"{name}: wildcard in {rule}")
            if fields["resources"] & {"secrets", "pods/exec", "pods/attach"}:
                findings.append(f"{name}: access to {fields['resources']}")
            if fields["verbs"] & FORBIDDEN_VERBS:
                findings.append(f"{name}: privilege verbs {fields['verbs'] & FORBIDDEN_VERBS}")
    return findings


def check_monitoring(docs: list[dict[str, Any]], promtool: str) -> None:
    """The two kinds the server does not know: they must find the metrics Service."""
    [service] = [
        d for d in docs if d["kind"] == "Service" and d["metadata"]["name"].endswith("-metrics")
    ]
    [monitor] = [d for d in docs if d["kind"] == "ServiceMonitor"]
    [rule] = [d for d in docs if d["kind"] == "PrometheusRule"]
    namespace = service["metadata"]["namespace"]
    labels = service["metadata"]["labels"]
    spec = monitor["spec"]
    assert spec["selector"]["matchLabels"].items() <= labels.items(), (spec, labels)
    assert spec["namespaceSelector"]["matchNames"] == [namespace]
    ports = {p["name"] for p in service["spec"]["ports"]}
    assert spec["endpoints"] and all(e["port"] in ports for e in spec["endpoints"])
    assert all(e.get("honorLabels") is True for e in spec["endpoints"])
    assert rule["metadata"]["namespace"] == namespace
    # The Prometheus Operator names a ServiceMonitor's job after the Service.
    job = f'job="{service["metadata"]["name"]}"'
    exprs = [r["expr"] for g in rule["spec"]["groups"] for r in g["rules"]]
    assert exprs and all(job in e for e in exprs), exprs
    with tempfile.TemporaryDirectory(prefix="punctual-rules-") as tmp:
        path = Path(tmp) / "rules.yaml"
        path.write_text(yaml.safe_dump({"groups": rule["spec"]["groups"]}))
        result = subprocess.run(
            [promtool, "check", "rules", str(path)], capture_output=True, text=True, timeout=60
        )
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.parametrize("values", list(RENDERINGS.values()), ids=list(RENDERINGS))
def test_rendering_passes_server_dry_run_and_linters(
    crd: Cluster, namespace: str, values: tuple[str, ...]
) -> None:
    kube_score_bin = tool(BIN / "kube-score", "kube-score")
    promtool = tool("promtool", "promtool (Debian's prometheus package)")
    with extra_namespace(crd) as other:
        watch = ("--set", f"watchNamespaces={{{namespace},{other}}}")
        args = [v for value in values for v in (watch if value == WATCH else (value,))]
        text, docs = render(namespace, *args)
        kinds = {(d["apiVersion"], d["kind"]) for d in docs}
        assert ("apps/v1", "Deployment") in kinds
        monitored = "prometheusRule.enabled=true" in args
        assert (("monitoring.coreos.com/v1", "PrometheusRule") in kinds) == monitored
        if WATCH in values:
            bound = {d["metadata"].get("namespace") for d in docs if d["kind"] == "RoleBinding"}
            assert {namespace, other} <= bound

        served = [d for d in docs if (d["apiVersion"], d["kind"]) not in NOT_SERVED]
        result = crd.kubectl(
            *("apply", "--server-side", "--force-conflicts", "--dry-run=server"),
            *("--validate=strict", "--field-manager=punctual-manifest-test", "-f", "-"),
            input="\n---\n".join(yaml.safe_dump(d) for d in served),
            check=False,
        )
        assert result.returncode == 0, f"server dry-run refused:\n{result.stderr}"
        accepted = [line for line in result.stdout.splitlines() if "(server dry run)" in line]
        assert len(accepted) == len(served), result.stdout
        if kinds & NOT_SERVED:
            check_monitoring(docs, promtool)

    code, findings = kube_score(kube_score_bin, text, server_version(crd))
    assert code == 0 and not findings, "kube-score:\n" + "\n".join(findings)
    assert not rbac_findings(docs), rbac_findings(docs)
