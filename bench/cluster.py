"""The bench's control plane: e2e/localcluster.py's, with the CronJob controller apart.

Why it exists: every scenario needs a fresh control plane whose audit log records every
write of the controller under test, and where the CronJob controller's client limits can
be set without changing the Job controller's. This module makes that cluster (BenchCluster)
and installs Punctual's CRDs and fencing policy from the benchmarked source into it.

What it must never do: use the ports or state folders of the dev (16443, .cluster/) or
test (17443, .cluster-test/) clusters, stop a process it did not start (LocalCluster
stops by pid), or start anything at import time.
"""

from __future__ import annotations

import json
import secrets
import subprocess
import time
from pathlib import Path

from localcluster import LocalCluster, audit_policy
from settings import (
    BIN_DIR,
    FENCE,
    NAMESPACE,
    PORT_BASE,
    PROFILES,
    REPO,
    STATE_DIR,
    SUBJECT_USER,
    Profile,
)


def bench_audit_policy() -> str:
    """e2e/manifests/audit-policy.yaml, widened for the bench.

    localcluster's audit policy logs writes to cronschedules/status but not to
    cronjobs/status: without it the CronJob controller's status writes would go
    uncounted. The Fence each new leader raises is added too, to see a takeover's writes.
    """
    policy = audit_policy()
    widened = policy.replace(
        "resources: [jobs, cronjobs]", "resources: [jobs, cronjobs, cronjobs/status]"
    ).replace(
        "resources: [cronschedules, cronschedules/status]",
        "resources: [cronschedules, cronschedules/status, fences]",
    )
    if "cronjobs/status" not in widened or "fences" not in widened:
        raise RuntimeError(
            "e2e/manifests/audit-policy.yaml changed: bench/cluster.py cannot widen it"
        )
    return widened


CRONJOB_KCM = "cronjob-controller"  # the controller-manager that runs only the CronJob controller

# The overloaded API server (overload scenarios): API Priority and Fairness, as every
# API server runs by default, with one priority level of its smallest share that refuses
# (429) instead of queueing, for SUBJECT_USER's Job creates alone. Not the plain
# --max-mutating-requests-inflight limit with APF off: its 429s always say Retry-After 1 s,
# which is also the pause Punctual takes for a 429 without one, so honouring the header
# could not be told from ignoring it; APF's Retry-After grows while it keeps refusing
# (1 s to 30 s seen). Neither ever refuses system:masters, so the harness and the rest of
# the control plane are unaffected either way.
OVERLOAD = "punctual-bench-overload"
FLOWCONTROL = "/apis/flowcontrol.apiserver.k8s.io/v1"
OVERLOAD_OBJECTS = [
    (
        "prioritylevelconfigurations",
        {
            "apiVersion": "flowcontrol.apiserver.k8s.io/v1",
            "kind": "PriorityLevelConfiguration",
            "metadata": {"name": OVERLOAD},
            "spec": {
                "type": "Limited",
                "limited": {
                    "nominalConcurrencyShares": 5,  # of 250: 60 seats of the default 3000
                    "lendablePercent": 0,
                    "borrowingLimitPercent": 0,  # no seats borrowed from idle levels
                    "limitResponse": {"type": "Reject"},
                },
            },
        },
    ),
    (
        "flowschemas",
        {
            "apiVersion": "flowcontrol.apiserver.k8s.io/v1",
            "kind": "FlowSchema",
            "metadata": {"name": OVERLOAD},
            "spec": {
                "priorityLevelConfiguration": {"name": OVERLOAD},
                "matchingPrecedence": 500,  # before global-default (9900), else its level
                "distinguisherMethod": {"type": "ByUser"},
                "rules": [
                    {
                        "subjects": [{"kind": "User", "user": {"name": SUBJECT_USER}}],
                        "resourceRules": [
                            {
                                "verbs": ["create"],
                                "apiGroups": ["batch"],
                                "resources": ["jobs"],
                                "namespaces": [NAMESPACE],
                            }
                        ],
                    }
                ],
            },
        },
    ),
]


class BenchCluster(LocalCluster):
    """The local control plane, with the CronJob controller in a controller-manager of its own.

    kube-controller-manager's client limits (--kube-api-qps/--kube-api-burst) apply to
    every controller in the process, the Job controller included, so running the CronJob
    controller "at its defaults" inside the one controller-manager would also slow the
    Job controller (pods, Job status) for that scenario alone. Here the usual
    controller-manager runs every controller but the CronJob controller, always with
    e2e/localcluster.py's limits, and a second one runs only the CronJob controller with
    the profile's limits: the rest of the control plane is the same in every scenario,
    and the CronJob controller's CPU and memory are its process's own.
    """

    profile: Profile = PROFILES["same"]
    overloaded: bool = False  # the API server refuses part of a herd (overload scenarios)

    @property
    def subject_kubeconfig(self) -> Path:
        """The kubeconfig of the controller under test and the raw client: the admin's
        (system:masters), or on the overloaded server SUBJECT_USER's, whom it may refuse."""
        return self.state_dir / "subject.kubeconfig" if self.overloaded else self.kubeconfig

    def _write_credentials(self) -> None:
        super()._write_credentials()
        tokens = self.state_dir / "pki" / "tokens.csv"
        if self.overloaded and SUBJECT_USER not in tokens.read_text():
            token = secrets.token_hex(24)
            with tokens.open("a") as f:
                f.write(f"{token},{SUBJECT_USER},{SUBJECT_USER}\n")
            (self.state_dir / "pki" / "subject.token").write_text(token + "\n")

    def _write_configs(self) -> None:
        super()._write_configs()
        (self.state_dir / "audit-policy.yaml").write_text(bench_audit_policy())
        if self.overloaded:
            config = json.loads(self.kubeconfig.read_text())
            token = (self.state_dir / "pki" / "subject.token").read_text().strip()
            config["users"] = [{"name": "admin", "user": {"token": token}}]
            self.subject_kubeconfig.write_text(json.dumps(config, indent=2))
            self.subject_kubeconfig.chmod(0o600)

    def up(self, timeout: float = 90.0) -> None:
        super().up(timeout)
        self.start(CRONJOB_KCM)
        time.sleep(1.0)
        self._check_alive(CRONJOB_KCM)
        if self.overloaded:
            self._bind_subject()
            self._overload()

    def _bind_subject(self) -> None:
        """SUBJECT_USER may do what the admin does, short of system:masters' exemption."""
        rbac = "rbac.authorization.k8s.io"
        binding = {
            "apiVersion": f"{rbac}/v1",
            "kind": "ClusterRoleBinding",
            "metadata": {"name": "punctual-bench-subject"},
            "roleRef": {"apiGroup": rbac, "kind": "ClusterRole", "name": "cluster-admin"},
            "subjects": [{"apiGroup": rbac, "kind": "User", "name": SUBJECT_USER}],
        }
        path = f"/apis/{rbac}/v1/clusterrolebindings"
        status, body = self.request("POST", path, binding)
        if status not in (201, 409):
            raise RuntimeError(f"binding {SUBJECT_USER} to cluster-admin: HTTP {status}: {body}")

    def down(self) -> None:
        self._load_pids()
        if CRONJOB_KCM in self.pids:
            self.stop(CRONJOB_KCM)
        super().down()

    def _argv(self, name: str) -> list[str]:
        if name == CRONJOB_KCM:
            return self._cronjob_argv()
        argv = super()._argv(name)
        if name == "kube-controller-manager":
            argv = [a for a in argv if not a.startswith("--controllers=")]
            argv.append("--controllers=*,-cronjob-controller")
        return argv

    def _overload(self, timeout: float = 30.0) -> None:
        """The priority level that refuses SUBJECT_USER's Job creates, once in force."""
        for resource, body in OVERLOAD_OBJECTS:
            status, text = self.request("POST", f"{FLOWCONTROL}/{resource}", body)
            if status not in (201, 409):
                raise RuntimeError(f"creating {resource}/{OVERLOAD}: HTTP {status}: {text}")
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:  # APF's configuration controller marks it used
            status, text = self.request("GET", f"{FLOWCONTROL}/flowschemas/{OVERLOAD}")
            conditions = (json.loads(text).get("status") or {}).get("conditions") or []
            if any(c["type"] == "Dangling" and c["status"] == "False" for c in conditions):
                return
            time.sleep(0.2)
        raise TimeoutError(f"FlowSchema {OVERLOAD} not in force after {timeout:.0f}s")

    def describe_overload(self) -> dict[str, object]:
        """Who is refused what, and the seats of the priority level (the API server's
        /metrics), for the result."""
        status, text = self.request("GET", "/metrics")
        wanted = f'apiserver_flowcontrol_nominal_limit_seats{{priority_level="{OVERLOAD}"}}'
        seats = next(
            (line.split()[-1] for line in text.splitlines() if line.startswith(wanted)), None
        )
        return {
            "user": SUBJECT_USER,
            "refused": f"Job creates in {NAMESPACE} beyond the priority level's seats",
            "priority_level": OVERLOAD,
            "seats": int(float(seats)) if status == 200 and seats else None,
        }

    def _cronjob_argv(self) -> list[str]:
        """kube-controller-manager's command line, running the CronJob controller alone."""
        argv = [
            a
            for a in super()._argv("kube-controller-manager")
            if not a.startswith(
                ("--kube-api-qps=", "--kube-api-burst=", "--controllers=", "--secure-port=")
            )
        ]
        argv += ["--controllers=cronjob-controller", f"--secure-port={self.port_base + 6}"]
        if self.profile.kcm_qps is not None:
            argv.append(f"--kube-api-qps={self.profile.kcm_qps:g}")
        if self.profile.kcm_burst is not None:
            argv.append(f"--kube-api-burst={self.profile.kcm_burst}")
        if self.profile.cronjob_syncs is not None:
            argv.append(f"--concurrent-cron-job-syncs={self.profile.cronjob_syncs}")
        return argv


def make_cluster(profile: Profile, pod_run_ms: int, *, overloaded: bool = False) -> BenchCluster:
    """The bench's cluster (not started), with the CronJob controller at `profile`'s limits,
    and if `overloaded` the priority level that refuses part of a herd."""
    cluster = BenchCluster(
        state_dir=STATE_DIR,
        port_base=PORT_BASE,
        bin_dir=BIN_DIR,
        pod_run_milliseconds=pod_run_ms,
    )
    cluster.profile = profile
    cluster.overloaded = overloaded
    return cluster


def _fencing_binding() -> dict[str, object]:
    """The binding of the fencing policy to the Fence beside the bench's Lease."""
    return {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingAdmissionPolicyBinding",
        "metadata": {"name": "punctual-bench-fencing"},
        "spec": {
            "policyName": "punctual-fencing.punctual.dev",
            "validationActions": ["Deny"],
            "paramRef": {
                "name": FENCE,
                "namespace": NAMESPACE,
                "parameterNotFoundAction": "Deny",
            },
            "matchResources": {
                "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": NAMESPACE}}
            },
        },
    }


def install_exports(cluster: LocalCluster) -> None:
    """The workloads scenario's CRD kind: Export (e2e/manifests/workloads/), Established."""
    kubectl = [str(BIN_DIR / "kubectl"), f"--kubeconfig={cluster.kubeconfig}"]
    crd = REPO / "e2e" / "manifests" / "workloads" / "batch.example.com_exports.yaml"
    subprocess.run([*kubectl, "apply", "-f", str(crd)], check=True, capture_output=True)
    subprocess.run(
        [
            *kubectl,
            "wait",
            "--for=condition=Established",
            "--timeout=60s",
            "crd/exports.batch.example.com",
        ],
        check=True,
        capture_output=True,
        timeout=90,
    )


def install_punctual(cluster: LocalCluster, source: Path, *, fencing: bool) -> bool:
    """Punctual's CRDs from the benchmarked source, and (as the Helm chart does by default)
    the fencing admission policy bound to the Fence beside the Lease. True if fencing is on."""
    kubectl = [str(BIN_DIR / "kubectl"), f"--kubeconfig={cluster.kubeconfig}"]
    crds = source / "crds"
    policy = crds / "fencing.punctual.dev.yaml"
    # The CRDs only: crds/ also holds admission policies (fencing, triggers).
    files = [
        p
        for p in sorted(crds.glob("*.punctual.dev.yaml"))
        if "\nkind: CustomResourceDefinition" in p.read_text()
    ]
    for path in files:
        subprocess.run([*kubectl, "apply", "-f", str(path)], check=True, capture_output=True)
    names = [f"crd/{p.name.removesuffix('.yaml')}" for p in files]
    subprocess.run(
        [*kubectl, "wait", "--for=condition=Established", "--timeout=60s", *names],
        check=True,
        capture_output=True,
        timeout=90,
    )
    if not (fencing and policy.exists()):
        return False
    subprocess.run([*kubectl, "apply", "-f", str(policy)], check=True, capture_output=True)
    subprocess.run(
        [*kubectl, "apply", "-f", "-"],
        input=json.dumps(_fencing_binding()).encode(),
        check=True,
        capture_output=True,
    )
    return True
