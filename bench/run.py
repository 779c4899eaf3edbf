"""Punctual side by side with the built-in CronJob controller, on the same control plane.

    python bench/run.py                      # sizes from BENCH_SIZES (default 100,1000)
    BENCH_SIZES=100,1000,10000 python bench/run.py
    python bench/run.py --sizes 100 --scenarios punctual-herd-defaults,raw-same
    python bench/run.py --report-only        # rebuild results.md and skew.png from raw/

Every scenario runs on a fresh local control plane (e2e/localcluster.py) under
.cluster-bench/ on ports 18443..18448, so it never touches the dev (16443) or test
(17443) clusters, and every scenario starts from an empty etcd and an empty audit log.
The cluster is torn down after each scenario, also on errors and Ctrl-C.

Scenarios, for each N:

* punctual-herd-<profile>: N CronSchedules whose 6-field schedule `S M H * * *` fires
  all of them at one instant T (jitter 0), handled by one `punctual run`.
* cronjob-herd-<profile>: N batch/v1 CronJobs `M H * * *` firing at the minute T,
  handled by kube-controller-manager's CronJob controller.
* punctual-spread / cronjob-spread: the same N spread out: Punctual with `H M H * * *`
  (the second hashed from each schedule's uid: spread over one minute); CronJob, whose
  schedules have minute resolution, over BENCH_CRONJOB_SPREAD_MINUTES distinct minutes.
* raw-<profile>: the physical limit: one asyncio client (punctual.kube.client.KubeClient)
  creating N Jobs at high concurrency, as fast as the API server takes them.
* failover-defaults: two Punctual replicas; the leader is killed with SIGKILL one
  second before T; the standby takes the Lease when it expires and fires.

Profiles (see PROFILES): "defaults" runs each controller at its own defaults
(Punctual --qps 50 --burst 100; kube-controller-manager --kube-api-qps 20
--kube-api-burst 30); "same" runs both at --qps 200 --burst 400, the client limits
e2e/localcluster.py gives the controller-manager. The CronJob controller runs in a
kube-controller-manager of its own (see BenchCluster), so that the Job controller and
the others run with the same limits in every scenario.

Everything measured comes from the API server: the audit log's
requestReceivedTimestamp of every Job create (and Job creationTimestamp as a
cross-check), its record of every write, and Job status. Process CPU and peak RSS come
from /proc. Results go to bench/results/raw/<scenario>-<n>.json, then results.md and
skew.png are rebuilt from all raw files (report.py).

Environment: BENCH_SIZES, BENCH_SCENARIOS, BENCH_PROFILE (py-spy | cprofile: profile
every Punctual leader; its figures are then kept apart from the main table),
BENCH_POD_RUN_MS (default 1000), BENCH_CRONJOB_SPREAD_MINUTES (default 2),
BENCH_RAW_CONCURRENCY (default 200), BENCH_KEEP (keep audit logs and operator logs in
.cluster-bench-artifacts/, default 1), BENCH_FENCING (install the fencing admission
policy, as the Helm chart does by default; default 1), BENCH_SETTLE_CAP (seconds to wait
for the Jobs to finish and the controller to go quiet after the last create; default
30 + 0.15 per schedule, at most 600), BENCH_PUNCTUAL_REV (benchmark a
commit instead of the work tree), BENCH_RESULTS (results folder, default bench/results).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
VENV = REPO / ".venv"

if Path(sys.prefix).resolve() != VENV.resolve() and (VENV / "bin" / "python").exists():
    # `python bench/run.py` from outside the virtualenv: run again inside it.
    os.execv(str(VENV / "bin" / "python"), [str(VENV / "bin" / "python"), *sys.argv])

import argparse  # noqa: E402
import asyncio  # noqa: E402
import contextlib  # noqa: E402
import gzip  # noqa: E402
import json  # noqa: E402
import math  # noqa: E402
import platform  # noqa: E402
import re  # noqa: E402
import resource  # noqa: E402
import shutil  # noqa: E402
import signal  # noqa: E402
import subprocess  # noqa: E402
import time  # noqa: E402
import urllib.request  # noqa: E402
from collections import Counter  # noqa: E402
from collections.abc import Callable  # noqa: E402
from dataclasses import dataclass, field  # noqa: E402
from datetime import UTC, datetime  # noqa: E402
from typing import Any  # noqa: E402


def _source(rev: str) -> Path:
    """The tree whose `operator/` and `crds/` are benchmarked: the work tree, or a commit.

    Other work may be in progress in the work tree; BENCH_PUNCTUAL_REV=HEAD (or any
    revision) benchmarks exactly that commit, extracted with `git archive` into
    .cluster-bench-src/<sha>/ (git-ignored), without touching the work tree.
    """
    if not rev:
        return REPO
    sha = subprocess.run(
        ["git", "rev-parse", "--verify", rev + "^{commit}"],
        cwd=REPO,
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()
    target = REPO / ".cluster-bench-src" / sha[:12]
    if not (target / "operator" / "punctual").exists():
        partial = target.with_name(target.name + ".partial")
        shutil.rmtree(partial, ignore_errors=True)
        partial.mkdir(parents=True)
        archive = subprocess.run(
            ["git", "archive", sha, "operator", "crds"], cwd=REPO, check=True, capture_output=True
        ).stdout
        subprocess.run(["tar", "-x", "-C", str(partial)], input=archive, check=True)
        shutil.rmtree(target, ignore_errors=True)
        partial.rename(target)
    return target


for _name in [k for k in os.environ if k.startswith("PUNCTUAL_")]:
    del os.environ[_name]  # `punctual run`'s flags come from the profiles alone
REV = os.environ.get("BENCH_PUNCTUAL_REV", "")
SOURCE = _source(REV)
sys.path.insert(0, str(REPO / "e2e"))
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(SOURCE / "operator"))

import measure  # noqa: E402
import report  # noqa: E402
from localcluster import AUDIT_POLICY, LocalCluster, free_port  # noqa: E402

from punctual import __version__ as punctual_version  # noqa: E402
from punctual.core.schedules import parse_schedule  # noqa: E402
from punctual.kube.client import (  # noqa: E402
    AlreadyExists,
    KubeClient,
    NotFound,
    Unavailable,
    load_kubeconfig,
)

STATE_DIR = REPO / ".cluster-bench"
ARTIFACTS = REPO / ".cluster-bench-artifacts"
RESULTS = Path(os.environ.get("BENCH_RESULTS") or HERE / "results").resolve()
PORT_BASE = 18443
NAMESPACE = "bench"
LEASE = "punctual-leader"
HARNESS_AGENT = "punctual-bench"
RAW_AGENT = "punctual-bench-raw"
CLK_TCK = os.sysconf("SC_CLK_TCK")


def wall() -> float:
    """This host's clock, which is the API server's: the bench compares against it."""
    return time.time()  # noqa: TID251 - the bench reads the same clock as the API server


def log(message: str) -> None:
    stamp = datetime.fromtimestamp(wall(), UTC).strftime("%H:%M:%S")
    print(f"[bench {stamp}] {message}", flush=True)


def env_int(name: str, default: int) -> int:
    return int(os.environ.get(name) or default)


# -- settings ---------------------------------------------------------------------------


def punctual_defaults() -> dict[str, Any]:
    """`punctual run`'s own defaults for the flags the profiles set, from the benchmarked
    source's command line (its environment variables are cleared for the benchmark)."""
    from punctual.cli.main import build_parser

    arguments = build_parser().parse_args(["run"])
    return {"qps": arguments.qps, "burst": arguments.burst, "workers": arguments.workers}


@dataclass(frozen=True)
class Profile:
    name: str
    punctual_qps: float | None  # None: `punctual run`'s default
    punctual_burst: int | None
    kcm_qps: float | None  # None: kube-controller-manager's own default (20)
    kcm_burst: int | None  # None: its default (30)
    punctual_workers: int | None = None
    cronjob_syncs: int | None = None  # --concurrent-cron-job-syncs; None: default (5)

    def punctual_flags(self) -> list[str]:
        flags = []
        if self.punctual_qps is not None:
            flags += ["--qps", f"{self.punctual_qps:g}"]
        if self.punctual_burst is not None:
            flags += ["--burst", str(self.punctual_burst)]
        if self.punctual_workers is not None:
            flags += ["--workers", str(self.punctual_workers)]
        return flags

    def punctual(self) -> dict[str, Any]:
        """The values in force: the flags given, else `punctual run`'s defaults."""
        values = punctual_defaults()
        for key, value in (
            ("qps", self.punctual_qps),
            ("burst", self.punctual_burst),
            ("workers", self.punctual_workers),
        ):
            if value is not None:
                values[key] = value
        return values

    def describe(self) -> dict[str, Any]:
        return {
            "punctual": {**self.punctual(), "flags": " ".join(self.punctual_flags())},
            "cronjob-controller": {
                "kube-api-qps": self.kcm_qps if self.kcm_qps is not None else "20 (default)",
                "kube-api-burst": self.kcm_burst if self.kcm_burst is not None else "30 (default)",
                "concurrent-cron-job-syncs": self.cronjob_syncs or "5 (default)",
            },
            "other-controllers": {"kube-api-qps": 200, "kube-api-burst": 400},
        }


PROFILES = {
    # Each at its own defaults: `punctual run` and kube-controller-manager as shipped.
    "defaults": Profile("defaults", None, None, None, None),
    # Both at the client limits e2e/localcluster.py gives the controller-manager.
    "same": Profile("same", 200.0, 400, 200.0, 400),
    # Tuning, not a comparison: Punctual's client limit raised so that the API server,
    # not the client's token bucket, bounds a herd of 10 000 (200/s needs 48 s for it).
    "fast": Profile("fast", 1000.0, 2000, 200.0, 400),
}


@dataclass(frozen=True)
class Scenario:
    kind: str  # punctual | cronjob | raw | failover
    shape: str  # herd | spread | burst
    profile: Profile

    @property
    def id(self) -> str:
        if self.kind in ("raw", "failover"):
            return f"{self.kind}-{self.profile.name}"
        return f"{self.kind}-{self.shape}-{self.profile.name}"


SCENARIOS = [
    Scenario("punctual", "herd", PROFILES["defaults"]),
    Scenario("cronjob", "herd", PROFILES["defaults"]),
    Scenario("punctual", "herd", PROFILES["same"]),
    Scenario("cronjob", "herd", PROFILES["same"]),
    Scenario("raw", "burst", PROFILES["same"]),
    Scenario("punctual", "spread", PROFILES["defaults"]),
    Scenario("failover", "herd", PROFILES["defaults"]),
]
# Not in the default list, to keep `make bench` within ~25 minutes: CronJob's spread
# (its schedules have minute resolution, so "spread" means distinct minutes, each a
# smaller herd, which the herd rows at smaller N already show) and the raw limit on the
# "defaults" cluster (the same control plane as "same": only controllers differ).
OPTIONAL = [
    Scenario("punctual", "herd", PROFILES["fast"]),
    Scenario("cronjob", "spread", PROFILES["defaults"]),
    Scenario("raw", "burst", PROFILES["defaults"]),
]

JOB_TEMPLATE: dict[str, Any] = {
    "spec": {
        "backoffLimit": 0,
        "template": {
            "spec": {
                "restartPolicy": "Never",
                "containers": [{"name": "work", "image": "busybox:1.36", "command": ["true"]}],
            }
        },
    }
}


# -- the cluster ------------------------------------------------------------------------


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
        argv = super()._argv(name)
        if name == "kube-controller-manager":
            argv = [a for a in argv if not a.startswith("--controllers=")]
            argv.append("--controllers=*,-cronjob-controller")
        return argv


def make_cluster(profile: Profile, pod_run_ms: int) -> BenchCluster:
    cluster = BenchCluster(
        state_dir=STATE_DIR,
        port_base=PORT_BASE,
        bin_dir=REPO / ".cluster" / "bin",
        pod_run_milliseconds=pod_run_ms,
    )
    cluster.profile = profile
    return cluster


# -- /proc ------------------------------------------------------------------------------


def cpu_seconds(pid: int) -> float:
    """utime + stime of a process, in seconds (NaN once it is gone)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except OSError:
        return math.nan
    return (int(fields[11]) + int(fields[12])) / CLK_TCK


def peak_rss_mb(pid: int) -> float:
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return math.nan


def system_busy_seconds() -> float:
    with open("/proc/stat") as f:
        values = [int(v) for v in f.readline().split()[1:]]
    idle = values[3] + (values[4] if len(values) > 4 else 0)
    return (sum(values[:8]) - idle) / CLK_TCK


def harness_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


@dataclass
class CpuSnapshot:
    at: float
    processes: dict[str, float]
    system: float
    harness: float


def snapshot(pids: dict[str, int]) -> CpuSnapshot:
    return CpuSnapshot(
        at=wall(),
        processes={name: cpu_seconds(pid) for name, pid in pids.items()},
        system=system_busy_seconds(),
        harness=harness_cpu(),
    )


def cpu_between(a: CpuSnapshot, b: CpuSnapshot) -> dict[str, Any]:
    seconds = {
        name: round(b.processes[name] - a.processes[name], 3)
        for name in a.processes
        if name in b.processes and not math.isnan(b.processes[name] - a.processes[name])
    }
    ours = sum(seconds.values()) + (b.harness - a.harness)
    elapsed = b.at - a.at
    return {
        "wall": round(elapsed, 3),
        "seconds": seconds,
        "harness": round(b.harness - a.harness, 3),
        "system_busy": round(b.system - a.system, 3),
        "other_processes": round(max(0.0, (b.system - a.system) - ours), 3),
        "other_cores": round(max(0.0, (b.system - a.system) - ours) / elapsed, 3)
        if elapsed > 0
        else math.nan,
    }


# -- one operator process -----------------------------------------------------------------


@dataclass
class OperatorProcess:
    identity: str
    proc: subprocess.Popen[bytes]
    metrics_port: int
    log_path: Path
    profile_path: Path | None = None

    @property
    def pid(self) -> int:
        return self.proc.pid

    @property
    def agent(self) -> str:
        return f"punctual/{self.identity}"

    def get(self, path: str) -> tuple[int, str]:
        try:
            url = f"http://127.0.0.1:{self.metrics_port}{path}"
            with urllib.request.urlopen(url, timeout=5) as resp:
                return int(resp.status), resp.read().decode()
        except OSError as error:
            return 0, str(error)

    def metric(self, name: str) -> float | None:
        status, text = self.get("/metrics")
        if status != 200:
            return None
        for line in text.splitlines():
            if line.startswith(name + " ") or line.startswith(name + "{}"):
                return float(line.split()[-1])
        return None

    def api_requests(self) -> dict[str, float]:
        """The operator's own count of its requests, by verb and code."""
        status, text = self.get("/metrics")
        out: dict[str, float] = {}
        if status != 200:
            return out
        for line in text.splitlines():
            match = re.match(
                r'punctual_api_requests_total\{code="(\d+)",verb="(\w+)"\} (\S+)', line
            )
            if match:
                out[f"{match.group(2)} {match.group(1)}"] = float(match.group(3))
        return out

    def stop(self, timeout: float = 30.0) -> None:
        if self.proc.poll() is not None:
            return
        with contextlib.suppress(ProcessLookupError):
            self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(10)

    def kill(self) -> None:
        if self.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                self.proc.kill()
        self.proc.wait(10)


STARTED: list[OperatorProcess] = []  # every operator process this run started


def start_operator(
    cluster: LocalCluster, workdir: Path, identity: str, profile: Profile, *, cprofile: bool
) -> OperatorProcess:
    port = free_port()
    log_path = workdir / f"operator-{identity}.log"
    profile_path = workdir / f"cprofile-{identity}.pstats" if cprofile else None
    python = (
        [sys.executable, "-m", "cProfile", "-o", str(profile_path)]
        if cprofile
        else [sys.executable]
    )
    argv = [
        *python,
        "-m",
        "punctual.cli",
        "run",
        "--kubeconfig",
        str(cluster.kubeconfig),
        "--namespace",
        NAMESPACE,
        "--lease-namespace",
        NAMESPACE,
        "--identity",
        identity,
        "--metrics-port",
        str(port),
        *profile.punctual_flags(),
    ]
    env = {k: v for k, v in os.environ.items() if not k.startswith("PUNCTUAL_")}
    env.update({"PYTHONUNBUFFERED": "1", "PYTHONPATH": str(SOURCE / "operator")})
    env.pop("KUBECONFIG", None)
    with log_path.open("ab") as out:
        proc = subprocess.Popen(
            argv, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env, cwd=REPO
        )
    started = OperatorProcess(identity, proc, port, log_path, profile_path)
    STARTED.append(started)
    return started


class PySpy:
    """py-spy record attached to a running process, raw (collapsed) stacks at 100 Hz."""

    def __init__(self, pid: int, out: Path) -> None:
        self.out = out
        self.started = wall()
        binary = shutil.which("py-spy") or str(VENV / "bin" / "py-spy")
        self.proc = subprocess.Popen(
            [
                *(binary, "record", "--pid", str(pid), "--format", "raw", "--rate", "100"),
                *("--nonblocking", "--output", str(out)),
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )

    def stop(self) -> float:
        elapsed = wall() - self.started
        with contextlib.suppress(ProcessLookupError):
            self.proc.send_signal(signal.SIGINT)
        try:
            self.proc.wait(30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
        return elapsed


# -- API helpers ----------------------------------------------------------------------------


async def create_all(
    api: KubeClient, path: str, bodies: list[dict[str, Any]], concurrency: int
) -> list[dict[str, Any]]:
    """Create every body (retrying only 429/5xx); returns the created objects in order."""
    gate = asyncio.Semaphore(concurrency)

    async def one(body: dict[str, Any]) -> dict[str, Any]:
        async with gate:
            for attempt in range(8):
                try:
                    return await api.create(path, body)
                except Unavailable:
                    await asyncio.sleep(0.2 * (attempt + 1))
                except AlreadyExists:
                    return await api.get(f"{path}/{body['metadata']['name']}")
            return await api.create(path, body)

    return list(await asyncio.gather(*(one(b) for b in bodies)))


async def list_all(api: KubeClient, path: str, page: int = 500) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = []
    token = ""
    while True:
        params = {"limit": str(page)}
        if token:
            params["continue"] = token
        body = await api.get(path, **params)
        items.extend(body.get("items") or [])
        token = (body.get("metadata") or {}).get("continue") or ""
        if not token:
            return items


async def prepare_namespace(api: KubeClient) -> None:
    with contextlib.suppress(AlreadyExists):
        await api.create(
            "/api/v1/namespaces",
            {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}},
        )
    # The Job controller's pods need the namespace's default ServiceAccount, which the
    # controller-manager creates: its presence also says the controller-manager runs.
    deadline = wall() + 60
    while wall() < deadline:
        try:
            await api.get(f"/api/v1/namespaces/{NAMESPACE}/serviceaccounts/default")
            return
        except NotFound:
            await asyncio.sleep(0.2)
    raise TimeoutError("no default ServiceAccount: is kube-controller-manager running?")


def install_punctual(cluster: LocalCluster, *, fencing: bool) -> bool:
    """Punctual's CRDs from the benchmarked source, and (as the Helm chart does by default)
    the fencing admission policy bound to the Fence beside the Lease. True if fencing is on."""
    kubectl = [str(REPO / ".cluster" / "bin" / "kubectl"), f"--kubeconfig={cluster.kubeconfig}"]
    crds = SOURCE / "crds"
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
    binding = {
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
    subprocess.run([*kubectl, "apply", "-f", str(policy)], check=True, capture_output=True)
    subprocess.run(
        [*kubectl, "apply", "-f", "-"],
        input=json.dumps(binding).encode(),
        check=True,
        capture_output=True,
    )
    return True


async def lease_holder(api: KubeClient) -> str:
    try:
        lease = await api.get(f"/apis/coordination.k8s.io/v1/namespaces/{NAMESPACE}/leases/{LEASE}")
    except NotFound:
        return ""
    return str((lease.get("spec") or {}).get("holderIdentity") or "")


async def wait_for(
    what: str, check: Callable[[], Any], timeout: float, interval: float = 0.25
) -> None:
    deadline = wall() + timeout
    while wall() < deadline:
        result = check()
        if asyncio.iscoroutine(result):
            result = await result
        if result:
            return
        await asyncio.sleep(interval)
    raise TimeoutError(f"timed out after {timeout:.0f}s waiting for {what}")


async def sleep_until(instant: float) -> None:
    while (left := instant - wall()) > 0:
        await asyncio.sleep(min(left, 1.0))


def is_complete(job: dict[str, Any]) -> bool:
    status = job.get("status") or {}
    if status.get("succeeded") or status.get("failed"):
        return True
    return any(
        c.get("type") in ("Complete", "Failed") and c.get("status") == "True"
        for c in status.get("conditions") or []
    )


def summarize_events(events: list[dict[str, Any]]) -> dict[str, int]:
    """Events about the schedules themselves (not their Jobs or pods), by source and reason."""
    out: Counter[str] = Counter()
    for event in events:
        kind = (event.get("involvedObject") or {}).get("kind")
        if kind not in ("CronSchedule", "CronJob"):
            continue
        source = (
            event.get("reportingComponent") or (event.get("source") or {}).get("component") or "?"
        )
        count = int(event.get("count") or 1)
        series = (event.get("series") or {}).get("count")
        out[f"{source} {event.get('reason')}"] += int(series) if series else count
    return dict(sorted(out.items()))


# -- one scenario ---------------------------------------------------------------------------


@dataclass
class Settings:
    pod_run_ms: int = 1000
    cronjob_spread_minutes: int = 2
    raw_concurrency: int = 200
    profiler: str = ""  # "", "py-spy", "cprofile"
    keep: bool = True
    fencing: bool = True
    settle_cap: float = 0.0  # seconds after the firings; 0: 30 s + 0.15 s per schedule, <= 600


class SetupOverrun(Exception):
    """The schedules were not all set up before their tick: run again with more margin."""


@dataclass
class Run:
    """One scenario on one fresh cluster."""

    scenario: Scenario
    n: int
    settings: Settings
    margin_factor: float = 1.0
    cluster: BenchCluster = field(init=False)
    api: KubeClient = field(init=False)
    tail: measure.AuditTail = field(init=False)
    workdir: Path = field(init=False)
    operators: list[OperatorProcess] = field(default_factory=list)
    result: dict[str, Any] = field(default_factory=dict)

    @property
    def kind(self) -> str:
        return self.scenario.kind

    @property
    def profile(self) -> Profile:
        return self.scenario.profile

    def component_pids(self) -> dict[str, int]:
        pids = {k: v for k, v in self.cluster.pids.items()}
        for op in self.operators:
            pids[f"operator {op.identity}"] = op.pid
        return pids

    async def execute(self) -> dict[str, Any]:
        suffix = f"-{self.settings.profiler}" if self.settings.profiler else ""
        self.workdir = ARTIFACTS / f"{self.scenario.id}-{self.n}{suffix}"
        shutil.rmtree(self.workdir, ignore_errors=True)
        self.workdir.mkdir(parents=True)
        self.cluster = make_cluster(self.profile, self.settings.pod_run_ms)
        self.cluster.down()  # leftovers of an interrupted run
        started = wall()
        self.result = {
            "scenario": self.scenario.id,
            "kind": self.kind,
            "shape": self.scenario.shape,
            "profile": self.profile.name,
            "settings": self.profile.describe(),
            "n": self.n,
            "profiler": self.settings.profiler,
            "pod_run_ms": self.settings.pod_run_ms,
            "started": started,
            "loadavg_before": os.getloadavg(),
        }
        try:
            try:
                self.cluster.up()
            except RuntimeError as error:  # a component that died starting: once more
                log(f"control plane start failed, starting it again: {error}")
                self.cluster.down()
                self.cluster.up()
            self.result["versions"] = await self._versions()
            credentials = load_kubeconfig(self.cluster.kubeconfig)
            async with KubeClient(credentials, user_agent=HARNESS_AGENT, timeout=120) as api:
                self.api = api
                self.tail = measure.AuditTail(self.cluster.audit_log)
                await prepare_namespace(api)
                if self.kind == "raw":
                    await self._raw()
                elif self.kind == "cronjob":
                    await self._cronjob()
                else:
                    await self._punctual()
            if credentials.ca_file and credentials.ca_file.startswith("/tmp/"):
                Path(credentials.ca_file).unlink(missing_ok=True)
        finally:
            for op in self.operators:
                op.stop()
            self._keep_artifacts()
            self.cluster.down()
        self.result["duration"] = round(wall() - started, 1)
        return self.result

    async def _versions(self) -> dict[str, str]:
        status, body = self.cluster.request("GET", "/version")
        kube = json.loads(body).get("gitVersion", "?") if status == 200 else "?"
        return {"kubernetes": kube}

    def _keep_artifacts(self) -> None:
        if not self.settings.keep:
            return
        with contextlib.suppress(OSError):
            with (
                self.cluster.audit_log.open("rb") as src,
                gzip.open(self.workdir / "audit.log.gz", "wb", compresslevel=3) as dst,
            ):
                shutil.copyfileobj(src, dst)
            for name in ("kube-controller-manager", CRONJOB_KCM, "kube-apiserver", "kwok"):
                shutil.copy(self.cluster.state_dir / "logs" / f"{name}.log", self.workdir)

    # -- the raw limit ------------------------------------------------------------------

    async def _raw(self) -> None:
        n = self.n
        bodies = [
            {
                "apiVersion": "batch/v1",
                "kind": "Job",
                "metadata": {
                    "name": f"raw-{i:05d}-1",
                    "namespace": NAMESPACE,
                    "labels": {"punctual.dev/schedule": f"raw-{i:05d}"},
                    "annotations": {"punctual.dev/tick": "1970-01-01T00:00:01Z"},
                },
                **JOB_TEMPLATE,
            }
            for i in range(n)
        ]
        credentials = load_kubeconfig(self.cluster.kubeconfig)
        before = snapshot(self.component_pids())
        async with KubeClient(credentials, user_agent=RAW_AGENT, timeout=120) as raw:
            await raw.get("/version")  # open a connection before the clock starts
            client_start = wall()
            await create_all(
                raw,
                f"/apis/batch/v1/namespaces/{NAMESPACE}/jobs",
                bodies,
                self.settings.raw_concurrency,
            )
            client_end = wall()
        after = snapshot(self.component_pids())
        await asyncio.sleep(1.0)
        self.tail.poll()
        creates = [
            r
            for r in self.tail.requests
            if r.agent == RAW_AGENT and r.verb == "create" and r.resource == "jobs"
        ]
        t0 = min((r.received for r in creates if r.code == 201), default=client_start)
        expected = {f"raw-{i:05d}": t0 for i in range(n)}
        firings = measure.firings(
            self.tail.requests,
            namespace=NAMESPACE,
            expected_ticks=expected,
            tick_of=lambda _suffix: t0,
            agent=lambda a: a == RAW_AGENT,
        )
        jobs = await list_all(self.api, f"/apis/batch/v1/namespaces/{NAMESPACE}/jobs")
        self.result.update(
            {
                "tick": t0,
                "firings": firings.as_dict(),
                "skews": sorted(round(s, 4) for s in firings.skews),
                "makespan": firings.last_create - t0,
                "client": {
                    "wall": round(client_end - client_start, 3),
                    "concurrency": self.settings.raw_concurrency,
                    "cpu": round(after.harness - before.harness, 3),
                },
                "cpu": cpu_between(before, after),
                "crosscheck": measure.creation_check(jobs, firings.created, lambda _name: t0),
            }
        )
        log(
            f"raw: {firings.as_dict()['created']}/{n} Jobs in "
            f"{self.result['makespan']:.2f}s ({n / max(1e-9, self.result['makespan']):.0f}/s)"
        )

    # -- CronJobs -----------------------------------------------------------------------------

    async def _cronjob(self) -> None:
        n = self.n
        spread = self.scenario.shape == "spread"
        minutes = self.settings.cronjob_spread_minutes if spread else 1
        setup_estimate = 4 + n / 150
        tick = math.ceil((wall() + setup_estimate * self.margin_factor + 8) / 60) * 60
        expected: dict[str, float] = {}
        bodies = []
        for i in range(n):
            name = f"b-{i:05d}"
            t = datetime.fromtimestamp(tick + 60 * (i % minutes), UTC)
            expected[name] = t.timestamp()
            bodies.append(
                {
                    "apiVersion": "batch/v1",
                    "kind": "CronJob",
                    "metadata": {"name": name, "namespace": NAMESPACE},
                    "spec": {
                        "schedule": f"{t.minute} {t.hour} * * *",
                        "timeZone": "Etc/UTC",
                        "jobTemplate": JOB_TEMPLATE,
                    },
                }
            )
        log(f"{self.scenario.id} n={n}: creating CronJobs, tick at {_hms(tick)}")
        await create_all(self.api, f"/apis/batch/v1/namespaces/{NAMESPACE}/cronjobs", bodies, 64)
        ready = wall()
        if ready > tick - 3:
            raise SetupOverrun(f"CronJobs created {ready - tick:+.1f}s from the tick")
        self.result["setup"] = {"ready": ready, "margin": round(tick - ready, 2)}

        def is_controller(agent: str) -> bool:
            return agent.endswith("/cronjob-controller") or "cronjob-controller" in agent

        await self._observe(
            tick=tick,
            last_tick=tick + 60 * (minutes - 1),
            expected=expected,
            tick_of=lambda minute: float(minute * 60),
            agent=is_controller,
            subject_pid=self.cluster.pids[CRONJOB_KCM],
        )

    # -- Punctual ---------------------------------------------------------------------------

    async def _punctual(self) -> None:
        n = self.n
        spread = self.scenario.shape == "spread"
        failover = self.kind == "failover"
        self.result["fencing"] = install_punctual(self.cluster, fencing=self.settings.fencing)
        cprofile = self.settings.profiler == "cprofile"
        first = start_operator(
            self.cluster, self.workdir, "bench-a", self.profile, cprofile=cprofile
        )
        self.operators.append(first)

        async def leads() -> bool:
            return await lease_holder(self.api) == first.identity

        await wait_for("the operator to take the Lease", leads, 60)
        standby = None
        if failover:
            standby = start_operator(
                self.cluster, self.workdir, "bench-b", self.profile, cprofile=cprofile
            )
            self.operators.append(standby)
            await wait_for("the standby to watch", lambda: standby.get("/readyz")[0] == 200, 60)

        # The tick must come after the operator has written every schedule's first status
        # (one rate-limited write per schedule): estimate, then check.
        setup_estimate = 4 + n / 150 + n / min(100.0, self.profile.punctual()["qps"]) * 1.15
        start = wall()
        if spread:
            tick = math.ceil((start + setup_estimate * self.margin_factor + 8) / 60) * 60
        else:
            tick = math.ceil(start + setup_estimate * self.margin_factor + 6)
        t = datetime.fromtimestamp(tick, UTC)
        expression = (
            f"H {t.minute} {t.hour} * * *" if spread else f"{t.second} {t.minute} {t.hour} * * *"
        )
        bodies = [
            {
                "apiVersion": "punctual.dev/v1",
                "kind": "CronSchedule",
                "metadata": {"name": f"b-{i:05d}", "namespace": NAMESPACE},
                "spec": {
                    "schedule": expression,
                    "timeZone": "UTC",
                    "jitterSeconds": 0,
                    "jobTemplate": JOB_TEMPLATE,
                },
            }
            for i in range(n)
        ]
        log(f"{self.scenario.id} n={n}: creating CronSchedules '{expression}', tick {_hms(tick)}")
        setup_before = snapshot(self.component_pids())
        created = await create_all(
            self.api, f"/apis/punctual.dev/v1/namespaces/{NAMESPACE}/cronschedules", bodies, 64
        )
        expected: dict[str, float] = {}
        for obj in created:
            meta = obj["metadata"]
            if spread:
                ticks = parse_schedule(expression, time_zone="UTC", uid=meta["uid"])
                nxt = ticks.next_tick(datetime.fromtimestamp(tick - 1, UTC))
                assert nxt is not None
                expected[meta["name"]] = nxt.timestamp()
            else:
                expected[meta["name"]] = float(tick)
        created_at = wall()

        # Every schedule's first status write, by the leader.
        initial: set[str] = set()
        last_initial = 0.0

        def all_written() -> bool:
            nonlocal last_initial
            for r in self.tail.poll():
                if (
                    r.agent == first.agent
                    and r.resource == "cronschedules/status"
                    and r.code == 200
                    and r.name not in initial
                ):
                    initial.add(r.name)
                    last_initial = max(last_initial, r.received)
            return len(initial) >= n

        await wait_for(
            "the first status of every schedule", all_written, max(5.0, tick - wall() - 1), 0.5
        )
        if standby is not None:

            def standby_knows_all() -> bool:
                return (standby.metric("punctual_schedules") or 0) >= n

            await wait_for(
                "the standby's index", standby_knows_all, max(5.0, tick - wall() - 1.5), 0.5
            )
        ready = wall()
        setup_after = snapshot(self.component_pids())
        if ready > min(expected.values()) - 2:
            raise SetupOverrun(f"setup ended {ready - tick:+.1f}s from the tick")
        self.result["setup"] = {
            "created": round(created_at - start, 2),
            "initial_status_writes_done": round(last_initial - start, 2),
            "ready": ready,
            "margin": round(min(expected.values()) - ready, 2),
            "cpu": cpu_between(setup_before, setup_after),
        }
        self.result["expression"] = expression

        leader = first
        if failover:
            assert standby is not None
            kill_at = tick - 1.0
            await sleep_until(kill_at)
            first.kill()
            killed = wall()
            log(f"killed the leader {first.identity} {killed - tick:+.2f}s from the tick")
            self.result["failover"] = {
                "killed": killed,
                "kill_before_tick": round(tick - killed, 3),
            }
            leader = standby

        await self._observe(
            tick=min(expected.values()),
            last_tick=max(expected.values()),
            expected=expected,
            tick_of=float,
            agent=lambda a: a.startswith("punctual/"),
            subject_pid=leader.pid,
            operator=leader,
        )
        if failover:
            takeovers = measure.lease_takeovers(self.tail.requests, lease=LEASE)
            by_standby = [t for t, a in takeovers if a == leader.agent]
            creates = [
                r.received
                for r in self.tail.requests
                if r.agent == leader.agent
                and r.verb == "create"
                and r.resource == "jobs"
                and r.code == 201
            ]
            info = self.result["failover"]
            info["takeover"] = by_standby[0] if by_standby else None
            info["takeover_after_tick"] = by_standby[0] - tick if by_standby else None
            info["first_create_after_tick"] = min(creates) - tick if creates else None
            info["first_create_after_kill"] = min(creates) - info["killed"] if creates else None
            info["creates_by_killed_leader"] = sum(
                1
                for r in self.tail.requests
                if r.agent == first.agent and r.verb == "create" and r.resource == "jobs"
            )

    # -- measuring a tick -----------------------------------------------------------------------

    async def _observe(
        self,
        *,
        tick: float,
        last_tick: float,
        expected: dict[str, float],
        tick_of: Callable[[int], float],
        agent: Callable[[str], bool],
        subject_pid: int,
        operator: OperatorProcess | None = None,
    ) -> None:
        n = self.n
        spy = None
        if operator is not None and self.settings.profiler == "py-spy":
            spy = PySpy(operator.pid, self.workdir / f"py-spy-{operator.identity}.txt")
        requests_before = operator.api_requests() if operator else {}
        if operator is not None:
            await sleep_until(tick - 1.5)
            self.result["operator_clock"] = {
                "offset": operator.metric("punctual_clock_offset_seconds"),
                "uncertainty": operator.metric("punctual_clock_uncertainty_seconds"),
            }
        await sleep_until(tick - 1.0)
        self.tail.poll()
        before = snapshot(self.component_pids())
        log(f"waiting for {n} creates (tick {_hms(tick)}, last tick {_hms(last_tick)})")

        # 1. The firings: until every expected Job is created, or a time cap.
        fire_cap = last_tick + 60 + 0.3 * n
        created = 0
        while wall() < fire_cap:
            await asyncio.sleep(1.0)
            created += sum(
                1
                for r in self.tail.poll()
                if r.verb == "create" and r.resource == "jobs" and r.code == 201 and agent(r.agent)
            )
            if created >= n:
                break
        fired = wall()
        after_firing = snapshot(self.component_pids())
        if spy is not None:  # the profile covers the firing, not the bookkeeping after it
            spied = spy.stop()
            self.result["py_spy"] = {"file": _rel(spy.out), "seconds": round(spied, 1), "rate": 100}
            if spy.out.exists():
                self.result["py_spy"]["summary"] = report.summarize_collapsed(
                    spy.out.read_text(), seconds=spied, rate=100
                )
        log(f"{created}/{n} created, {fired - tick:.1f}s after the tick; settling")

        # 2. Settling: the Jobs finish and the controller writes what it records about them.
        settle_cap = fired + (self.settings.settle_cap or min(600.0, 30 + 0.15 * n))
        # Longer than Punctual's status deferral (10 s: bookkeeping waits for a write to
        # carry it), so that a deferred write is counted, not cut off.
        quiet_for = 12.0
        last_write = fired
        complete = 0
        next_list = 0.0
        while wall() < settle_cap:
            await asyncio.sleep(2.0)
            for r in self.tail.poll():
                if agent(r.agent) and r.resource != "leases":
                    last_write = max(last_write, r.received)
            if wall() >= next_list:
                jobs = await list_all(self.api, f"/apis/batch/v1/namespaces/{NAMESPACE}/jobs")
                complete = sum(1 for j in jobs if is_complete(j))
                next_list = wall() + (5.0 if n <= 2000 else 15.0)
            if complete >= created and wall() - last_write >= quiet_for:
                break
        settled = wall()
        after = snapshot(self.component_pids())
        settle_reason = (
            "all Jobs complete and the controller quiet"
            if complete >= created and settled - last_write >= quiet_for
            else "time cap"
        )
        log(f"settled ({settle_reason}) {settled - fired:.1f}s later, {complete} Jobs complete")
        requests_after = operator.api_requests() if operator else {}

        jobs = await list_all(self.api, f"/apis/batch/v1/namespaces/{NAMESPACE}/jobs")
        events = await list_all(self.api, f"/api/v1/namespaces/{NAMESPACE}/events")
        self.tail.poll()
        firings = measure.firings(
            self.tail.requests,
            namespace=NAMESPACE,
            expected_ticks=expected,
            tick_of=tick_of,
            agent=agent,
        )
        window = measure.writes(
            self.tail.requests,
            agent=agent,
            start=tick - 1.0,
            end=settled,
            split=firings.last_create,
        )
        before_tick = measure.writes(self.tail.requests, agent=agent, start=0, end=tick - 1.0)

        def tick_of_job(name: str) -> float:
            parsed = measure.split_job_name(name)
            return tick_of(parsed[1]) if parsed else math.nan

        self.result.update(
            {
                "tick": tick,
                "last_tick": last_tick,
                "firings": firings.as_dict(),
                "skews": sorted(round(s, 4) for s in firings.skews),
                "makespan": firings.last_create - tick,
                "writes": window,
                "writes_before_tick": before_tick,
                "events": summarize_events(events),
                "jobs_complete": complete,
                "settle": {
                    "reason": settle_reason,
                    "after_firing": round(settled - fired, 1),
                    "last_write_after_tick": round(last_write - tick, 2),
                },
                "cpu": cpu_between(before, after),
                "cpu_firing": cpu_between(before, after_firing),
                "subject_peak_rss_mb": round(peak_rss_mb(subject_pid), 1),
                "peak_rss_mb": {
                    name: round(peak_rss_mb(pid), 1) for name, pid in self.component_pids().items()
                },
                "crosscheck": measure.creation_check(jobs, firings.created, tick_of_job),
            }
        )
        if operator is not None:
            self.result["operator_requests"] = {
                k: v - requests_before.get(k, 0.0)
                for k, v in requests_after.items()
                if v - requests_before.get(k, 0.0)
            }
        f = self.result["firings"]
        log(
            f"{self.scenario.id} n={n}: created {f['created']}/{n}, missing {f['missing']}, "
            f"duplicates {f['duplicates']}, skew p50 {f['skew']['p50']:.3f}s "
            f"p99 {f['skew']['p99']:.3f}s max {f['skew']['max']:.3f}s, "
            f"writes/firing {window['without_leases'] / max(1, f['created']):.2f}"
        )


def _rel(path: Path) -> str:
    try:
        return str(path.relative_to(REPO))
    except ValueError:
        return str(path)


def _hms(instant: float) -> str:
    return datetime.fromtimestamp(instant, UTC).strftime("%H:%M:%S")


# -- the whole run -------------------------------------------------------------------------


def machine() -> dict[str, Any]:
    model = "?"
    with contextlib.suppress(OSError), open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    memory = "?"
    with contextlib.suppress(OSError), open("/proc/meminfo") as f:
        for line in f:
            if line.startswith("MemTotal:"):
                memory = f"{int(line.split()[1]) / 1024 / 1024:.1f} GiB"
                break
    return {
        "nproc": os.cpu_count(),
        "memory": memory,
        "cpu_model": model,
        "kernel": platform.release(),
        "python": platform.python_version(),
        "punctual": punctual_version,
        "commit": _git("rev-parse", "--short", REV or "HEAD"),
        "source": "commit " + REV if REV else "work tree",
        "dirty": not REV and bool(_git("status", "--porcelain", "--untracked-files=no")),
        "etcd": _binary_version("etcd", "--version"),
        "kwok": _binary_version("kwok", "--version"),
    }


def _git(*args: str) -> str:
    try:
        return subprocess.run(
            ["git", *args], cwd=REPO, capture_output=True, text=True, timeout=10
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return "?"


def _binary_version(name: str, flag: str) -> str:
    try:
        out = subprocess.run(
            [str(REPO / ".cluster" / "bin" / name), flag],
            capture_output=True,
            text=True,
            timeout=10,
        )
        return (out.stdout or out.stderr).strip().splitlines()[0]
    except (OSError, subprocess.SubprocessError, IndexError):
        return "?"


def select(ids: str | None) -> list[Scenario]:
    if not ids:
        return list(SCENARIOS)
    catalog = {s.id: s for s in SCENARIOS + OPTIONAL}
    chosen = []
    for wanted in ids.split(","):
        wanted = wanted.strip()
        if wanted not in catalog:
            raise SystemExit(f"unknown scenario {wanted!r}; known: {', '.join(catalog)}")
        chosen.append(catalog[wanted])
    return chosen


def result_path(scenario: Scenario, n: int, profiler: str) -> Path:
    suffix = f"-{profiler}" if profiler else ""
    return RESULTS / "raw" / f"{scenario.id}-{n}{suffix}.json"


def _interrupt(signum: int, _frame: object) -> None:
    raise KeyboardInterrupt(f"signal {signum}")


def main(argv: list[str] | None = None) -> int:
    # SIGTERM, and SIGINT even when started in the background (where the shell ignores
    # it), interrupt the run so that the finally blocks stop the operators and the
    # cluster; asyncio.run cancels the scenario's task on KeyboardInterrupt.
    signal.signal(signal.SIGTERM, _interrupt)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    parser = argparse.ArgumentParser(description="Punctual vs CronJob benchmark")
    parser.add_argument("--sizes", default=os.environ.get("BENCH_SIZES") or "100,1000")
    parser.add_argument("--scenarios", default=os.environ.get("BENCH_SCENARIOS"))
    parser.add_argument("--report-only", action="store_true")
    args = parser.parse_args(argv)
    settings = Settings(
        pod_run_ms=env_int("BENCH_POD_RUN_MS", 1000),
        cronjob_spread_minutes=env_int("BENCH_CRONJOB_SPREAD_MINUTES", 2),
        raw_concurrency=env_int("BENCH_RAW_CONCURRENCY", 200),
        profiler=os.environ.get("BENCH_PROFILE", ""),
        keep=os.environ.get("BENCH_KEEP", "1") != "0",
        fencing=os.environ.get("BENCH_FENCING", "1") != "0",
        settle_cap=float(os.environ.get("BENCH_SETTLE_CAP") or 0),
    )
    if settings.profiler not in ("", "py-spy", "cprofile"):
        raise SystemExit("BENCH_PROFILE must be py-spy or cprofile")
    (RESULTS / "raw").mkdir(parents=True, exist_ok=True)
    if not args.report_only:
        sizes = [int(s) for s in args.sizes.split(",") if s.strip()]
        scenarios = select(args.scenarios)
        info = machine()
        (RESULTS / "raw" / "machine.json").write_text(json.dumps(info, indent=2) + "\n")
        began = wall()
        for n in sizes:
            for scenario in scenarios:
                if settings.profiler and scenario.kind not in ("punctual", "failover"):
                    continue
                result: dict[str, Any] | None = None
                for attempt, factor in enumerate((1.0, 2.5)):
                    try:
                        result = asyncio.run(Run(scenario, n, settings, factor).execute())
                        break
                    except SetupOverrun as error:
                        log(f"{scenario.id} n={n}: {error}; again with more margin")
                        if attempt:
                            raise
                    except KeyboardInterrupt:
                        log("interrupted: stopping the operators and the bench cluster")
                        for op in list(STARTED):
                            op.kill()
                        make_cluster(scenario.profile, settings.pod_run_ms).down()
                        return 130
                assert result is not None
                result["machine"] = info
                path = result_path(scenario, n, settings.profiler)
                path.write_text(json.dumps(clean(result), indent=1) + "\n")
                log(f"wrote {_rel(path)} ({result['duration']:.0f}s)")
        log(f"all scenarios done in {(wall() - began) / 60:.1f} min")
    report.write(RESULTS)
    log(f"report: {_rel(RESULTS / 'results.md')}")
    return 0


def clean(value: Any) -> Any:
    """JSON without NaN or infinities (null instead), tuples as lists."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {str(k): clean(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [clean(v) for v in value]
    return value


if __name__ == "__main__":
    sys.exit(main())
