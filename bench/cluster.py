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
import subprocess
import time
from pathlib import Path

from localcluster import AUDIT_POLICY, LocalCluster
from settings import BIN_DIR, NAMESPACE, PORT_BASE, PROFILES, STATE_DIR, Profile

# localcluster's audit policy logs writes to cronschedules/status but not to
# cronjobs/status: without it the CronJob controller's status writes would go uncounted.
# The Fence each new leader raises is added too, to see a takeover's writes.
BENCH_AUDIT_POLICY = AUDIT_POLICY.replace(
    "resources: [jobs, cronjobs]", "resources: [jobs, cronjobs, cronjobs/status]"
).replace(
    "resources: [cronschedules, cronschedules/status]",
    "resources: [cronschedules, cronschedules/status, fences]",
)
assert "cronjobs/status" in BENCH_AUDIT_POLICY, "e2e/localcluster.py's audit policy changed"


CRONJOB_KCM = "cronjob-controller"  # the controller-manager that runs only the CronJob controller


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

    def _write_configs(self) -> None:
        super()._write_configs()
        (self.state_dir / "audit-policy.yaml").write_text(BENCH_AUDIT_POLICY)

    def up(self, timeout: float = 90.0) -> None:
        super().up(timeout)
        self.start(CRONJOB_KCM)
        time.sleep(1.0)
        self._check_alive(CRONJOB_KCM)

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


def make_cluster(profile: Profile, pod_run_ms: int) -> BenchCluster:
    """The bench's cluster (not started), with the CronJob controller at `profile`'s limits."""
    cluster = BenchCluster(
        state_dir=STATE_DIR,
        port_base=PORT_BASE,
        bin_dir=BIN_DIR,
        pod_run_milliseconds=pod_run_ms,
    )
    cluster.profile = profile
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
                "name": "punctual-fence",
                "namespace": NAMESPACE,
                "parameterNotFoundAction": "Deny",
            },
            "matchResources": {
                "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": NAMESPACE}}
            },
        },
    }


def install_punctual(cluster: LocalCluster, source: Path, *, fencing: bool) -> bool:
    """Punctual's CRDs from the benchmarked source, and (as the Helm chart does by default)
    the fencing admission policy bound to the Fence beside the Lease. True if fencing is on."""
    kubectl = [str(BIN_DIR / "kubectl"), f"--kubeconfig={cluster.kubeconfig}"]
    crds = source / "crds"
    policy = crds / "fencing.punctual.dev.yaml"
    files = [p for p in sorted(crds.glob("*.punctual.dev.yaml")) if p != policy]
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
