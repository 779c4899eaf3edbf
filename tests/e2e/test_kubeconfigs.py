"""`punctual run`, `trigger`, `history` and `describe` with an exec-plugin kubeconfig.

The kubeconfig has no token: its user is an exec plugin (a shell script) that prints
an ExecCredential carrying the local cluster's admin token and logs every run, so a
test sees that the plugin authenticated and not something else (without it, every
request would be system:anonymous and refused). A kubeconfig that cannot be used
(a plugin that fails, a tls-server-name the server's certificate does not carry)
must end in one line and exit status 1. The commands under test never get a token
from anywhere but the plugin.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import yaml

from .conftest import REPO, Cluster
from .operators import operators, wait_until

pytestmark = pytest.mark.e2e

FAILURE = "the token service is down"


def write_plugin(directory: Path, token: str, exit_code: int) -> tuple[Path, Path]:
    """An exec plugin that logs its run and prints an ExecCredential with `token`."""
    log = directory / "plugin.log"
    expires = (datetime.now(UTC) + timedelta(hours=1)).strftime("%Y-%m-%dT%H:%M:%SZ")
    credential = {
        "apiVersion": "client.authentication.k8s.io/v1",
        "kind": "ExecCredential",
        "status": {"token": token, "expirationTimestamp": expires},
    }
    plugin = directory / "credential-plugin"
    plugin.write_text(
        "#!/bin/sh\n"
        f"echo \"$$ $KUBERNETES_EXEC_INFO\" >> '{log}'\n"
        + (f"echo '{FAILURE}' >&2\nexit {exit_code}\n" if exit_code else "")
        + f"echo '{json.dumps(credential)}'\n"
    )
    plugin.chmod(0o755)
    return plugin, log


def exec_kubeconfig(
    cluster: Cluster,
    directory: Path,
    namespace: str,
    *,
    exit_code: int = 0,
    cluster_fields: dict[str, str] | None = None,
) -> tuple[Path, Path]:
    """A kubeconfig for `cluster` whose user is an exec plugin; and the plugin's run log.

    The plugin hands out the cluster's admin token, read from the cluster's own kubeconfig.
    """
    directory.mkdir(parents=True, exist_ok=True)
    source = yaml.safe_load(cluster.kubeconfig.read_text())
    plugin, log = write_plugin(directory, source["users"][0]["user"]["token"], exit_code)
    user = {
        "exec": {
            "apiVersion": "client.authentication.k8s.io/v1",
            "command": str(plugin),
            "interactiveMode": "Never",
        }
    }
    context = {"cluster": "local", "user": "plugged", "namespace": namespace}
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {
                "name": "local",
                "cluster": {**source["clusters"][0]["cluster"], **(cluster_fields or {})},
            }
        ],
        "users": [{"name": "plugged", "user": user}],
        "contexts": [{"name": "plugged", "context": context}],
        "current-context": "plugged",
    }
    path = directory / "kubeconfig"
    path.write_text(yaml.safe_dump(config))
    return path, log


def runs(log: Path) -> int:
    return len(log.read_text().splitlines()) if log.exists() else 0


def punctual(*args: str, kubeconfig: Path, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    """`punctual ARGS` with KUBECONFIG naming `kubeconfig` (no --kubeconfig, no -n)."""
    return subprocess.run(
        [sys.executable, "-m", "punctual.cli", *args],
        capture_output=True,
        text=True,
        cwd=REPO,
        env={**os.environ, "KUBECONFIG": str(kubeconfig)},
        timeout=timeout,
    )


def manual_schedule(name: str) -> dict[str, Any]:
    return {
        "apiVersion": "punctual.dev/v1",
        "kind": "CronSchedule",
        "metadata": {"name": name},
        "spec": {
            "schedule": "0 0 1 1 *",
            "jobTemplate": {
                "spec": {
                    "backoffLimit": 0,
                    "template": {
                        "metadata": {
                            "annotations": {"pod-complete.stage.kwok.x-k8s.io/delay": "300ms"}
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


def manual_firings(cluster: Cluster, namespace: str, name: str) -> list[dict[str, Any]]:
    out = cluster.kubectl("get", "-n", namespace, "cronschedule", name, "-o", "json")
    status = json.loads(out.stdout).get("status") or {}
    return [f for f in status.get("recentFirings") or [] if f.get("manual")]


def leader_of(cluster: Cluster, namespace: str) -> str:
    out = cluster.kubectl(
        "get", "-n", namespace, "lease", "punctual-leader", "-o", "json", check=False
    )
    if out.returncode != 0:
        return ""
    return str(json.loads(out.stdout)["spec"].get("holderIdentity") or "")


@pytest.mark.parametrize(
    "cluster_fields",
    [{}, {"tls-server-name": "kubernetes.default.svc"}],
    ids=["plain", "tls-server-name"],  # the second gives kopf a session of Punctual's
)
def test_run_trigger_history_and_describe_authenticate_with_an_exec_plugin(
    crd: Cluster, namespace: str, tmp_path: Path, cluster_fields: dict[str, str]
) -> None:
    kubeconfig, log = exec_kubeconfig(crd, tmp_path, namespace, cluster_fields=cluster_fields)
    crd.kubectl("apply", "-n", namespace, "-f", "-", input=json.dumps(manual_schedule("manual")))
    with operators(crd, namespace, tmp_path) as ops:
        ops.start("plugged", env={"KUBECONFIG": str(kubeconfig)})
        wait_until(lambda: leader_of(crd, namespace) == "plugged", 30, what="leadership")
        assert runs(log) >= 1  # the operator's: its Lease writes carried the plugin's token
        before = runs(log)
        triggered = punctual("trigger", "manual", kubeconfig=kubeconfig)  # the context's namespace
        assert triggered.returncode == 0, triggered.stderr
        assert f"cronschedule {namespace}/manual triggered" in triggered.stdout
        assert runs(log) > before
        # The operator saw the trigger through its schedule watch, authenticated by the plugin.
        wait_until(lambda: manual_firings(crd, namespace, "manual"), 30, what="the firing")
    before = runs(log)
    history = punctual("history", "manual", kubeconfig=kubeconfig)
    assert history.returncode == 0, history.stderr
    header = history.stdout.splitlines()[0].split()
    assert header == ["TICK", "JOB", "KIND", "OUTCOME", "EPOCH", "BY", "REASON"]
    assert "(manual)" in history.stdout
    assert runs(log) == before + 1
    described = punctual("describe", "manual", kubeconfig=kubeconfig)
    assert described.returncode == 0, described.stderr
    assert described.stdout.splitlines()[0].split() == ["Name:", "manual"]
    assert runs(log) == before + 2
    info = json.loads(log.read_text().splitlines()[-1].split(" ", 1)[1])
    assert info["apiVersion"] == "client.authentication.k8s.io/v1"


def test_a_failing_exec_plugin_is_one_line_and_status_1(
    crd: Cluster, namespace: str, tmp_path: Path
) -> None:
    kubeconfig, log = exec_kubeconfig(crd, tmp_path, namespace, exit_code=1)
    line = (
        f"punctual: cannot load credentials: exec plugin '{tmp_path / 'credential-plugin'}': "
        f"process returned 1. {FAILURE}"
    )
    for command in (("history", "manual"), ("trigger", "manual")):
        result = punctual(*command, kubeconfig=kubeconfig)
        assert (result.returncode, result.stdout, result.stderr.splitlines()) == (1, "", [line])
    run = punctual("run", "--namespace", namespace, "--metrics-port", "0", kubeconfig=kubeconfig)
    assert run.returncode == 1
    assert run.stderr.splitlines() == [line], run.stderr
    assert runs(log) == 3


def test_a_tls_server_name_the_certificate_does_not_carry_is_one_line(
    crd: Cluster, namespace: str, tmp_path: Path
) -> None:
    wrong, _ = exec_kubeconfig(
        crd, tmp_path / "wrong", namespace, cluster_fields={"tls-server-name": "x.test"}
    )
    result = punctual("history", "missing", kubeconfig=wrong)
    assert result.returncode == 1
    [line] = result.stderr.splitlines()
    assert line.startswith("punctual: HTTP 0 Unreachable: GET ") and "certificate" in line
    right, _ = exec_kubeconfig(
        crd,
        tmp_path / "right",
        namespace,
        cluster_fields={"tls-server-name": "kubernetes.default.svc"},
    )
    result = punctual("history", "missing", kubeconfig=right)  # authenticated: a plain 404
    assert result.stderr.splitlines() == [f"punctual: cronschedule {namespace}/missing not found"]
