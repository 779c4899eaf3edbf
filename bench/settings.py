"""What the benchmark runs: the scenarios, the client-limit profiles, the BENCH_* settings.

Why it exists: the catalogue of scenarios and the settings they run with are what a
reader of the results needs to know ("which limits did each controller have?"), so they
live apart from the code that starts clusters and processes. The fixed names and places
(ports, namespace, Lease, user agents, folders) are here too, so every module agrees on
them.

What it must never do: start a process, touch the file system or read the environment
at import time (Settings.from_environment reads it when main() asks), or import a
module that does.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
VENV = REPO / ".venv"
STATE_DIR = REPO / ".cluster-bench"  # the bench's control plane
ARTIFACTS = REPO / ".cluster-bench-artifacts"  # audit and component logs per scenario
BIN_DIR = REPO / ".cluster" / "bin"  # the pinned binaries of `make binaries`
# The dev cluster is on 16443, the test cluster on 17443 (BENCH_PORT_BASE: when another
# cluster is on this one).
PORT_BASE = int(os.environ.get("BENCH_PORT_BASE", "18443"))
NAMESPACE = "bench"
LEASE = "punctual-leader"
FENCE = "punctual-fence"  # beside the Lease: the fencing policy's parameter
HARNESS_AGENT = "punctual-bench"  # the harness's own requests (set-up, lists)
RAW_AGENT = "punctual-bench-raw"  # the raw-limit client's creates
# The user of the controller under test and the raw client on the overloaded API server:
# bound to cluster-admin but not in system:masters, which the API server never refuses.
SUBJECT_USER = "punctual-bench-subject"


def rel(path: Path) -> str:
    """`path` relative to the repository when it is inside it, for messages and results."""
    try:
        return str(path.relative_to(REPO))
    except ValueError:
        return str(path)


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
    kind: str  # punctual | cronjob | raw | failover | workloads
    shape: str  # herd | spread | burst
    profile: Profile
    replicas: int = 1  # Punctual replicas, all firing when shards > 1
    shards: int = 1  # punctual run --shards
    kill: bool = False  # kill -9 one replica 20 s into the spread
    overload: bool = False  # on an API server that refuses part of a herd (cluster.OVERLOAD)
    # The raw client creates the very Jobs Punctual would (its labels, annotations,
    # finalizer, owner and stamped pod template), through the fencing policy: what the API
    # server spends on Punctual's Jobs, apart from the operator.
    punctual_jobs: bool = False

    @property
    def id(self) -> str:
        profile = "overload" if self.overload else self.profile.name
        if self.kind in ("raw", "failover"):
            return f"{self.kind}-{profile}" + ("-punctual-jobs" if self.punctual_jobs else "")
        base = f"{self.kind}-{self.shape}-{profile}"
        if self.shards > 1:
            base += f"-r{self.replicas}s{self.shards}"
        return base + ("-kill" if self.kill else "")


# The workloads scenario's CRD kind (e2e/manifests/workloads/batch.example.com_exports.yaml).
EXPORTS_GROUP = "/apis/batch.example.com/v1"
EXPORTS_KIND = "exports.v1.batch.example.com"

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
    # Any workload kind: N/2 schedules of a CRD kind (Export, no controller) beside N/2 of
    # Jobs, on one tick (`--sizes 2000` is 1 000 of each); by_kind in the result.
    Scenario("workloads", "herd", PROFILES["defaults"]),
    # Scale-out: 1, 2 and 4 replicas sharing 16 shards on one herd (per-replica CPU and
    # firings), and kill -9 of one of two replicas during a spread.
    Scenario("punctual", "herd", PROFILES["defaults"], replicas=1, shards=16),
    Scenario("punctual", "herd", PROFILES["defaults"], replicas=2, shards=16),
    Scenario("punctual", "herd", PROFILES["defaults"], replicas=4, shards=16),
    Scenario("punctual", "spread", PROFILES["defaults"], replicas=2, shards=16, kill=True),
    Scenario("cronjob", "spread", PROFILES["defaults"]),
    Scenario("raw", "burst", PROFILES["defaults"]),
    Scenario("raw", "burst", PROFILES["same"], punctual_jobs=True),
    # Scale-out: the herd on an API server that refuses part of it (429), Punctual at its
    # defaults and the raw client, as SUBJECT_USER: 429s, retries, rate while refused.
    Scenario("punctual", "herd", PROFILES["defaults"], overload=True),
    Scenario("raw", "burst", PROFILES["defaults"], overload=True),
]

# bench/scale.py's rows, each on its own cluster: a sustained load, and one replica
# starting on many schedules.
SUSTAINED = Scenario("punctual", "sustained", PROFILES["defaults"])
STARTUP = Scenario("punctual", "startup", PROFILES["defaults"])
# bench/ramp.py: the plain client and Punctual at the same steady rates on one cluster.
RAMP = Scenario("punctual", "ramp", PROFILES["defaults"])
ON_TIME = 1.0  # seconds: a firing this close to its tick is on time (scale rows)


def select(ids: str | None) -> list[Scenario]:
    """The scenarios named in `ids` (comma-separated), or the default list."""
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


def _int(environ: Mapping[str, str], name: str, default: int) -> int:
    return int(environ.get(name) or default)


@dataclass
class Settings:
    pod_run_ms: int = 1000
    cronjob_spread_minutes: int = 2
    raw_concurrency: int = 200
    profiler: str = ""  # "", "py-spy", "cprofile"
    keep: bool = True
    fencing: bool = True
    settle_cap: float = 0.0  # seconds after the firings; 0: 30 s + 0.15 s per schedule, <= 600
    rev: str = ""  # BENCH_PUNCTUAL_REV: the commit benchmarked; "": the work tree
    source: Path = REPO  # the tree whose operator/ and crds/ are benchmarked
    results: Path = HERE / "results"

    @classmethod
    def from_environment(cls, environ: Mapping[str, str], source: Path) -> Settings:
        """The BENCH_* variables (see run.py); `source` is the tree BENCH_PUNCTUAL_REV named."""
        return cls(
            pod_run_ms=_int(environ, "BENCH_POD_RUN_MS", 1000),
            cronjob_spread_minutes=_int(environ, "BENCH_CRONJOB_SPREAD_MINUTES", 2),
            raw_concurrency=_int(environ, "BENCH_RAW_CONCURRENCY", 200),
            profiler=environ.get("BENCH_PROFILE", ""),
            keep=environ.get("BENCH_KEEP", "1") != "0",
            fencing=environ.get("BENCH_FENCING", "1") != "0",
            settle_cap=float(environ.get("BENCH_SETTLE_CAP") or 0),
            rev=environ.get("BENCH_PUNCTUAL_REV", ""),
            source=source,
            results=Path(environ.get("BENCH_RESULTS") or HERE / "results").resolve(),
        )

    def result_path(self, scenario: Scenario, n: int) -> Path:
        """Where one scenario's raw figures go."""
        suffix = f"-{self.profiler}" if self.profiler else ""
        return self.results / "raw" / f"{scenario.id}-{n}{suffix}.json"
