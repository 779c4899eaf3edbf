"""The scale rows: a sustained load, and one replica starting on 100 000 schedules.

    python bench/scale.py sustained --n 2000,10000 [--minutes 5] [--pod-run-ms 200]
    python bench/scale.py startup --n 100000 [--every-second 20] [--cap-minutes 15]
        [--first-start-minutes M]   # stop the first start early: the restart then
                                    # finds never-decided schedules (their first claims)
    python bench/render.py bench/results-scale   # rebuild results.md from raw/*.json

Why it exists: bench/run.py measures one tick (a herd, or one minute spread); the
scale-out targets also ask what one `punctual run` (defaults, no --qps) does under a
load that lasts, and how it starts when 100 000 schedules exist. Each row runs on a
fresh control plane (bench/trial.py's frame, bench/cluster.py's cluster) and takes
every figure from the API server's audit log and from /proc, as the rest of the bench
does.

* sustained: N CronSchedules `H * * * * *` (the second hashed from the uid) between a
  startTime and an endTime five minutes apart, so each fires once a minute for five
  minutes: 5 N Jobs, N/60 a second on average. Measured: Jobs created against the
  ticks expected (missing, duplicates, Jobs for ticks not expected), the creates per
  second in each minute against the raw client's rate on the same cluster just before
  (suspended Jobs from punctual.kube.client.KubeClient as fast as the server takes
  them: suspended, so that their pods do not load the window), the skew (audit
  `requestReceivedTimestamp` of the create minus the tick in the Job's name), the
  operator's CPU per firing and peak RSS, and how far the rest of the control plane
  kept up: the audit policy here also records the Job controller's pod creates, the
  scheduler's bindings and kwok's pod status writes, so each stage's lag behind the
  Job create is known.
* startup: N CronSchedules that fire once a year (`0 0 1 1 *`), created by a
  concurrent client before the operator starts, and a few that fire every second from
  a known instant (startTime) after it starts. Measured: the operator's peak RSS, the
  time from its start to /readyz 200, to a complete schedule index (the
  punctual_schedules gauge), to the end of the first status writes (every schedule's
  first `cronschedules/status` write in the audit log), to the first on-time firing of
  the every-second schedules, and their coverage and skew while the first writes go
  on; the API server's and etcd's peak RSS beside them. Half the every-second ones sort
  before the rare ones, half after: a new leader decides while the list streams in, so
  each half's first on-time firing is reported. Then a restart (the first replica
  stopped, a second started: every schedule has its status now), and a failover: a hot
  standby beside that leader, the leader killed (-9), both RSS before the kill and the
  standby's first on-time firing after it.

Cluster: `.cluster-bench/` of this work tree on ports from BENCH_PORT_BASE (default
settings.PORT_BASE), pods of kwok that run BENCH_POD_RUN_MS (here 200 ms by default),
torn down after each row, also on errors, SIGINT and SIGTERM. Results:
BENCH_RESULTS (default bench/results-scale): raw/<row>-<n>.json, then results.md from
them by the renderer (rendering/, as `python bench/render.py` does): this module
measures, it does not format.

What it must never do: act at import time (main() sets sys.path up first, as run.py
does, and the modules that import `punctual` or e2e/ are imported inside functions),
touch the controller under test during a window, or leave a process or a cluster
behind.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import math
import os
import signal
import subprocess
import sys
from collections import Counter, defaultdict
from collections.abc import Iterable
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

import rendering
import source
from clock import hms, log, sleep_until, wall
from measure import Request, percentile, split_job_name, summary
from procfs import cpu_between, cpu_seconds, peak_rss_mb, rss_mb, snapshot
from settings import (
    BIN_DIR,
    NAMESPACE,
    ON_TIME,
    PORT_BASE,
    RAW_AGENT,
    STARTUP,
    STATE_DIR,
    SUSTAINED,
    VENV,
    Scenario,
    Settings,
    rel,
)

if TYPE_CHECKING:
    from operatorprocess import OperatorProcess
    from trial import Trial

RAW_MAX = 5000  # raw creates measured before the sustained window
# The plain client's status writes after the start-up rows, and its user agent.
RAW_STATUS_WRITES = 5000
RAW_STATUS_AGENT = "punctual-bench-raw-status"
BUCKET = 30.0  # seconds per row of the start-up timeline

# The control plane's downstream stages, audited here beside the bench's policy: the
# Job controller's pod creates, the scheduler's bindings and kwok's status writes.
PODS_RULE = """\
  - level: Metadata
    verbs: [create, update, patch]
    resources:
      - group: ""
        resources: [pods, pods/binding, pods/status]
"""


# -- entry -------------------------------------------------------------------------------


def _interrupt(signum: int, _frame: object) -> None:
    raise KeyboardInterrupt(f"signal {signum}")


def main(argv: list[str] | None = None) -> int:
    signal.signal(signal.SIGTERM, _interrupt)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else "")
    parser.add_argument("row", choices=("sustained", "startup"))
    parser.add_argument("--n", default="", help="comma-separated sizes")
    parser.add_argument("--minutes", type=int, default=5, help="sustained: minutes of firing")
    parser.add_argument("--every-second", type=int, default=20, help="startup: such schedules")
    parser.add_argument("--lead", type=float, default=60.0, help="startup: start to first tick")
    parser.add_argument("--cap-minutes", type=float, default=15.0, help="startup: at most")
    parser.add_argument(
        "--first-start-minutes",
        type=float,
        default=0.0,
        help="startup: the first start's cap alone (0: --cap-minutes); shorter leaves "
        "schedules never decided for the restart",
    )
    parser.add_argument("--pod-run-ms", type=int, default=0, help="default BENCH_POD_RUN_MS/200")
    args = parser.parse_args(argv)
    settings = source.prepare("results-scale")
    if args.pod_run_ms:
        settings = replace(settings, pod_run_ms=args.pod_run_ms)
    (settings.results / "raw").mkdir(parents=True, exist_ok=True)
    default = "2000,10000" if args.row == "sustained" else "100000"
    sizes = [int(s) for s in (args.n or default).split(",") if s.strip()]
    port_base = int(os.environ.get("BENCH_PORT_BASE") or PORT_BASE)
    for n in sizes:
        if not run_row(args, n, settings, port_base):
            return 130
    for path in rendering.render(settings.results):
        log(f"report: {rel(path)}")
    return 0


def run_row(args: argparse.Namespace, n: int, settings: Settings, port_base: int) -> bool:
    """One row on a fresh cluster, its raw file written; False if interrupted."""
    from campaign import clean
    from machine import machine
    from replicas import STARTED

    scenario = SUSTAINED if args.row == "sustained" else STARTUP
    trial = scale_trial(scenario, n, settings, port_base)

    async def body(t: Trial) -> None:
        if args.row == "sustained":
            await sustained(t, minutes=args.minutes)
        else:
            first = (args.first_start_minutes or args.cap_minutes) * 60
            await startup(t, args.every_second, args.lead, args.cap_minutes * 60, first)

    try:
        result = asyncio.run(trial.execute(body))
    except KeyboardInterrupt:
        log("interrupted: stopping the operator and the bench cluster")
        for op in list(STARTED):
            op.kill()
        trial.cluster.down()
        return False
    result["machine"] = machine(settings.rev)
    syncs = os.environ.get("BENCH_JOB_SYNCS") or ""
    suffix = f"-jobsyncs{syncs}" if syncs else ""
    path = settings.results / "raw" / f"{scenario.id}-{n}{suffix}.json"
    path.write_text(json.dumps(clean(result), indent=1) + "\n")
    log(f"wrote {rel(path)} ({result['duration']:.0f}s)")
    return True


def scale_trial(scenario: Scenario, n: int, settings: Settings, port_base: int) -> Trial:
    """trial.Trial on the bench's cluster at `port_base`, with the pods' stages audited."""
    from cluster import BenchCluster, bench_audit_policy
    from trial import Trial

    # The Job controller's workers (kube-controller-manager's default is 5), to show
    # how far the load is the controller's and not the operator's.
    job_syncs = int(os.environ.get("BENCH_JOB_SYNCS") or 0)

    class ScaleCluster(BenchCluster):
        def _write_configs(self) -> None:
            super()._write_configs()
            policy = bench_audit_policy().replace("  - level: None", PODS_RULE + "  - level: None")
            assert PODS_RULE in policy, "bench/cluster.py's audit policy changed"
            (self.state_dir / "audit-policy.yaml").write_text(policy)

        def _argv(self, name: str) -> list[str]:
            argv = super()._argv(name)
            if name == "kube-controller-manager" and job_syncs:
                argv.append(f"--concurrent-job-syncs={job_syncs}")
            return argv

    class ScaleTrial(Trial):
        def _prepare(self) -> float:
            started = super()._prepare()  # cleans the state folder's leftovers
            cluster = ScaleCluster(
                state_dir=STATE_DIR,
                port_base=port_base,
                bin_dir=BIN_DIR,
                pod_run_milliseconds=self.settings.pod_run_ms,
            )
            cluster.profile = self.profile
            self.cluster = cluster
            self.result["port_base"] = port_base
            self.result["concurrent_job_syncs"] = job_syncs or "5 (default)"
            return started

    return ScaleTrial(scenario, n, settings)


# -- helpers -----------------------------------------------------------------------------


def _job_template() -> dict[str, Any]:
    """scenarios.py's Job (kwok runs its pod BENCH_POD_RUN_MS), a copy of our own."""
    from scenarios import JOB_TEMPLATE

    copy: dict[str, Any] = json.loads(json.dumps(JOB_TEMPLATE))
    return copy


async def create_many(
    api: Any, path: str, bodies: Iterable[dict[str, Any]], concurrency: int
) -> dict[str, str]:
    """Create every body (retrying 429/5xx), `concurrency` at a time; {name: uid}."""
    from punctual.kube.client import AlreadyExists, Unavailable

    uids: dict[str, str] = {}
    queue: asyncio.Queue[dict[str, Any] | None] = asyncio.Queue(maxsize=concurrency * 4)

    async def worker() -> None:
        while (body := await queue.get()) is not None:
            name = body["metadata"]["name"]
            for attempt in range(20):
                try:
                    created = await api.create(path, body)
                except Unavailable:
                    await asyncio.sleep(min(2.0, 0.2 * (attempt + 1)))
                    continue
                except AlreadyExists:
                    created = await api.get(f"{path}/{name}")
                uids[name] = created["metadata"]["uid"]
                break

    workers = [asyncio.create_task(worker()) for _ in range(concurrency)]
    for body in bodies:
        await queue.put(body)
    for _ in workers:
        await queue.put(None)
    await asyncio.gather(*workers)
    return uids


def _summary(values: Iterable[float]) -> dict[str, float]:
    return {k: round(v, 4) if isinstance(v, float) else v for k, v in summary(values).items()}


def _rfc3339(instant: float) -> str:
    return datetime.fromtimestamp(instant, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _q(values: list[float], q: float) -> float:
    return round(percentile(sorted(values), q), 4) if values else math.nan


def _punctual_creates(requests: Iterable[Request]) -> list[Request]:
    return [
        r
        for r in requests
        if r.verb == "create" and r.resource == "jobs" and r.agent.startswith("punctual/")
    ]


def _pod_job(pod: str) -> str:
    return pod.rpartition("-")[0]


def pipeline(requests: list[Request], job_created: dict[str, float]) -> dict[str, Any]:
    """How far the control plane behind the creates kept up: per Job, when its pod was
    bound (scheduler) and finished (kwok's second status write), and Punctual's deletes
    of finished Jobs (successfulJobsHistoryLimit)."""
    pod_creates = [r for r in requests if r.verb == "create" and r.resource == "pods"]
    bound: dict[str, float] = {}
    status_writes: dict[str, list[float]] = defaultdict(list)
    for r in requests:
        if r.resource == "pods/binding" and r.code in (200, 201):
            job = _pod_job(r.name)
            if job in job_created:
                bound.setdefault(job, r.received)
        elif r.resource == "pods/status" and r.code == 200 and "kwok" in r.agent:
            status_writes[r.name].append(r.received)
    finished: dict[str, float] = {}
    for pod, times in status_writes.items():
        job = _pod_job(pod)
        if job in job_created and len(times) >= 2:
            finished.setdefault(job, sorted(times)[1])
    deletes = [
        r
        for r in requests
        if r.verb == "delete" and r.resource == "jobs" and r.agent.startswith("punctual/")
    ]
    return {
        "jobs_created": len(job_created),
        "pods_created": sum(1 for r in pod_creates if r.code == 201),
        "pods_bound": len(bound),
        "pods_finished": len(finished),
        "jobs_deleted_by_punctual": sum(1 for r in deletes if r.code == 200),
        "bind_lag": _summary(bound[j] - job_created[j] for j in bound),
        "finish_lag": _summary(finished[j] - job_created[j] for j in finished),
        "bound_at": sorted(bound.values()),
        "finished_at": sorted(finished.values()),
    }


def foreign_runs(ours: Iterable[int]) -> list[str]:
    """Other benchmarks, e2e runs and API servers on this (shared) machine now."""
    mine = {str(pid) for pid in ours}
    found = subprocess.run(
        ["pgrep", "-af", "bench/run.py|pytest tests/e2e|kube-apiserver"],
        capture_output=True,
        text=True,
        check=False,
    ).stdout.splitlines()
    return sorted(
        line.split(maxsplit=1)[1][:80]
        for line in found
        if line.split(maxsplit=1)[0] not in mine and str(os.getpid()) != line.split()[0]
    )


def per_interval(instants: Iterable[float], start: float, step: float, count: int) -> list[int]:
    counts = [0] * count
    for t in instants:
        i = int((t - start) // step)
        if 0 <= i < count:
            counts[i] += 1
    return counts


# -- the raw client's rate ---------------------------------------------------------------


async def raw_rate(trial: Trial, count: int) -> dict[str, Any]:
    """KubeClient creating `count` suspended Jobs in their own namespace as fast as the
    API server takes them (scenarios.raw's client; suspended: no pods to load the
    window that follows). The rate from the audit log's first to last create."""
    from kubeapi import create_all

    from punctual.kube.client import AlreadyExists, KubeClient
    from punctual.kube.credentials import load_kubeconfig

    namespace = "bench-raw"
    with contextlib.suppress(AlreadyExists):
        await trial.api.create(
            "/api/v1/namespaces",
            {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}},
        )
    template = _job_template()
    bodies = [
        {
            "apiVersion": "batch/v1",
            "kind": "Job",
            "metadata": {"name": f"raw-{i:05d}-1", "namespace": namespace},
            "spec": {**template["spec"], "suspend": True},
        }
        for i in range(count)
    ]
    concurrency = trial.settings.raw_concurrency
    credentials = load_kubeconfig(trial.cluster.kubeconfig)
    before = snapshot(trial.component_pids())
    async with KubeClient(credentials, user_agent=RAW_AGENT, timeout=120) as client:
        await client.get("/version")
        started = wall()
        await create_all(client, f"/apis/batch/v1/namespaces/{namespace}/jobs", bodies, concurrency)
        ended = wall()
    after = snapshot(trial.component_pids())
    await asyncio.sleep(1.0)
    trial.tail.poll()
    received = sorted(
        r.received
        for r in trial.tail.requests
        if r.agent == RAW_AGENT and r.verb == "create" and r.resource == "jobs" and r.code == 201
    )
    span = received[-1] - received[0] if len(received) > 1 else math.nan
    rate = (len(received) - 1) / span if span == span and span > 0 else math.nan
    log(f"raw: {len(received)}/{count} suspended Jobs in {span:.2f}s ({rate:.0f}/s)")
    return {
        "count": count,
        "created": len(received),
        "concurrency": concurrency,
        "suspended": True,
        "client_wall": round(ended - started, 3),
        "span": round(span, 3),
        "rate": round(rate, 1),
        "cpu": cpu_between(before, after),
    }


async def raw_status_rate(trial: Trial, count: int) -> dict[str, Any]:
    """A plain KubeClient writing the status of `count` of the bench's CronSchedules, each
    one PUT to /status with the resourceVersion listed (what a first claim is), `raw
    concurrency` in flight, no replica running. The status written is the smallest a
    replica wrote on the listed page: a rare schedule's first claim (the every-second
    ones, listed first, had 24 KB statuses in the run that first measured this, most
    likely their running Jobs in status.active). The rate from the audit log's first to last 200."""
    from punctual.kube.client import KubeClient, Unavailable
    from punctual.kube.credentials import load_kubeconfig

    path = f"/apis/punctual.dev/v1/namespaces/{NAMESPACE}/cronschedules"
    credentials = load_kubeconfig(trial.cluster.kubeconfig)
    concurrency = trial.settings.raw_concurrency
    async with KubeClient(credentials, user_agent=RAW_STATUS_AGENT, timeout=120) as client:
        items = (await client.get(path, limit=str(count))).get("items") or []
        statuses: list[dict[str, Any]] = [i["status"] for i in items if i.get("status")]
        status: dict[str, Any] = min(statuses, key=lambda s: len(json.dumps(s)), default={})
        gate = asyncio.Semaphore(concurrency)

        async def one(item: dict[str, Any]) -> None:
            body = {**item, "status": status}
            async with gate:
                for attempt in range(8):
                    try:
                        await client.replace(f"{path}/{item['metadata']['name']}/status", body)
                        return
                    except Unavailable:
                        await asyncio.sleep(0.2 * (attempt + 1))

        before = snapshot(trial.component_pids())
        started = wall()
        await asyncio.gather(*(one(item) for item in items))
        ended = wall()
        after = snapshot(trial.component_pids())
    await asyncio.sleep(1.0)
    trial.tail.poll()
    received = sorted(
        r.received
        for r in trial.tail.requests
        if r.agent == RAW_STATUS_AGENT and r.resource == "cronschedules/status" and r.code == 200
    )
    span = received[-1] - received[0] if len(received) > 1 else math.nan
    rate = (len(received) - 1) / span if span == span and span > 0 else math.nan
    log(f"raw status: {len(received)}/{len(items)} status writes in {span:.2f}s ({rate:.0f}/s)")
    return {
        "count": len(items),
        "written": len(received),
        "concurrency": concurrency,
        "status_bytes": len(json.dumps(status)),
        "client_wall": round(ended - started, 3),
        "span": round(span, 3),
        "rate": round(rate, 1),
        "cpu": cpu_between(before, after),
    }


# -- sustained load ----------------------------------------------------------------------


def _sustained_schedules(n: int, start: float, end: float, template: dict[str, Any]) -> Any:
    for i in range(n):
        yield {
            "apiVersion": "punctual.dev/v1",
            "kind": "CronSchedule",
            "metadata": {"name": f"s-{i:05d}"},
            "spec": {
                "schedule": "H * * * * *",
                "timeZone": "UTC",
                "startTime": _rfc3339(start),
                "endTime": _rfc3339(end),
                "successfulJobsHistoryLimit": 1,
                "failedJobsHistoryLimit": 1,
                "jitterSeconds": 0,
                "jobTemplate": template,
            },
        }


def expected_ticks(uids: dict[str, str], expression: str, start: float, end: float) -> set[str]:
    """The Job names (`<schedule>-<unix s>`) the schedules must create in [start, end)."""
    from punctual.core.schedules import parse_schedule

    names: set[str] = set()
    for name, uid in uids.items():
        ticks = parse_schedule(expression, time_zone="UTC", uid=uid)
        at = datetime.fromtimestamp(start - 1, UTC)
        while (nxt := ticks.next_tick(at)) is not None and nxt.timestamp() < end:
            names.add(f"{name}-{int(nxt.timestamp())}")
            at = nxt
    return names


async def sustained(trial: Trial, *, minutes: int) -> None:
    """N schedules each firing once a minute for `minutes` minutes on one replica."""
    from cluster import install_punctual
    from kubeapi import lease_holder, wait_for
    from replicas import start_operator

    n = trial.n
    trial.result["fencing"] = install_punctual(
        trial.cluster, trial.settings.source, fencing=trial.settings.fencing
    )
    trial.result["raw"] = await raw_rate(trial, min(n, RAW_MAX))
    operator = start_operator(
        trial.cluster,
        trial.workdir,
        "bench-a",
        trial.profile,
        trial.settings.source,
        cprofile=False,
    )
    trial.operators.append(operator)

    async def leads() -> bool:
        return await lease_holder(trial.api) == operator.identity

    await wait_for("the operator to take the Lease", leads, 60)
    # The first minute of firing must come after the first status of every schedule
    # (one write each, as fast as the server takes them): estimated, then checked.
    setup_estimate = 20 + n / 120 + n / 100
    start = float(math.ceil((wall() + setup_estimate) / 60) * 60)
    end = start + 60 * minutes
    template = _job_template()
    log(f"sustained n={n}: creating CronSchedules, firing {hms(start)}..{hms(end)}")
    began = wall()
    uids = await create_many(
        trial.api,
        f"/apis/punctual.dev/v1/namespaces/{NAMESPACE}/cronschedules",
        _sustained_schedules(n, start, end, template),
        64,
    )
    created_at = wall()
    expected = expected_ticks(uids, "H * * * * *", start, end)
    initial: dict[str, float] = {}

    def statuses_written() -> bool:
        for r in trial.tail.poll():
            if (
                r.agent == operator.user_agent
                and r.resource == "cronschedules/status"
                and r.code == 200
                and r.name not in initial
            ):
                initial[r.name] = r.received
        return len(initial) >= n

    try:
        await wait_for("the first statuses", statuses_written, max(5.0, start - wall() - 1.5), 0.5)
    except TimeoutError:
        log(f"only {len(initial)}/{n} first statuses written before the first minute")
    trial.result["setup"] = {
        "schedules_created_s": round(created_at - began, 2),
        "create_rate": round(n / max(1e-9, created_at - began), 1),
        "first_statuses": len(initial),
        "first_statuses_done_s": round(max(initial.values()) - began, 2) if initial else None,
        "margin_s": round(start - max(initial.values()), 2) if initial else None,
    }
    # The window: from a second before the first tick until every expected Job exists
    # (or a minute after the last tick), then up to a minute for the pipeline to drain.
    await sleep_until(start - 1.0)
    trial.tail.poll()
    before = snapshot(trial.component_pids())
    rss: list[tuple[float, float]] = []
    created: set[str] = set()
    cap = end + 60.0
    log(f"window: {len(expected)} Jobs expected by {hms(end)}")
    minutes_cpu: list[dict[str, Any]] = []
    last_minute = before
    foreign: list[tuple[float, list[str]]] = []
    next_look = 0.0
    while wall() < cap:
        await asyncio.sleep(2.0)
        rss.append((round(wall() - start, 1), round(rss_mb(operator.pid), 1)))
        if wall() >= next_look:  # who else loads the machine (shared with other runs)
            next_look = wall() + 10.0
            seen = foreign_runs(trial.cluster.pids.values())
            if seen:
                foreign.append((round(wall() - start, 1), seen))
        if wall() >= last_minute.at + 60.0 and len(minutes_cpu) < minutes:
            now = snapshot(trial.component_pids())
            minutes_cpu.append(cpu_between(last_minute, now))
            last_minute = now
        for r in _punctual_creates(trial.tail.poll()):
            if r.code == 201:
                created.add(r.name)
        if wall() > end and expected <= created:
            break
    fired = wall()
    after_firing = snapshot(trial.component_pids())
    log(f"{len(created & expected)}/{len(expected)} expected Jobs created; draining")
    drain_cap = fired + 60.0
    while wall() < drain_cap:
        await asyncio.sleep(5.0)
        rss.append((round(wall() - start, 1), round(rss_mb(operator.pid), 1)))
        trial.tail.poll()
    after = snapshot(trial.component_pids())
    trial.result["sustained"] = record_sustained(
        trial, expected, start, end, minutes, (before, after_firing, after), fired
    )
    trial.result["rss_timeline"] = rss
    trial.result["cpu_per_minute"] = minutes_cpu
    trial.result["foreign_runs"] = foreign
    trial.result["operator_requests"] = operator.api_requests()
    trial.result["operator_schedules"] = operator.metric("punctual_schedules")
    pids = trial.component_pids()
    trial.result["peak_rss_mb"] = {name: round(peak_rss_mb(pid), 1) for name, pid in pids.items()}
    trial.result["cpu_window"] = cpu_between(before, after_firing)
    trial.result["cpu_with_drain"] = cpu_between(before, after)
    s = trial.result["sustained"]
    log(
        f"sustained n={n}: {s['created']}/{s['expected']} created, missing {s['missing']}, "
        f"duplicates {s['duplicates']}, skew p50 {s['skew']['p50']:.3f}s "
        f"p99 {s['skew']['p99']:.3f}s max {s['skew']['max']:.3f}s, "
        f"CPU {s['operator_cpu_ms_per_firing']:.2f} ms/firing, "
        f"peak RSS {trial.result['peak_rss_mb'].get('operator bench-a')} MB"
    )


def record_sustained(
    trial: Trial,
    expected: set[str],
    start: float,
    end: float,
    minutes: int,
    snapshots: tuple[Any, Any, Any],
    fired: float,
) -> dict[str, Any]:
    """The sustained row's figures from the audit log."""
    requests = trial.tail.requests
    creates = _punctual_creates(requests)
    codes = Counter(r.code for r in creates)
    per_name = Counter(r.name for r in creates if r.code == 201)
    received = {r.name: r.received for r in creates if r.code == 201}
    missing = sorted(expected - set(received))
    unexpected = sorted(set(received) - expected)
    duplicates = sorted(name for name, c in per_name.items() if c > 1)
    schedules_fired: Counter[tuple[str, int]] = Counter()
    skews: list[float] = []
    by_minute: dict[int, list[float]] = defaultdict(list)
    for name, at in received.items():
        parsed = split_job_name(name)
        if parsed is None:
            continue
        schedule, tick = parsed
        minute = int((tick - start) // 60)
        schedules_fired[(schedule, minute)] += 1
        if name in expected:
            skews.append(at - tick)
            by_minute[minute].append(at - tick)
    # Two Jobs of one schedule for one minute would be two firings of one tick.
    duplicates += [f"{s} minute {m}" for (s, m), c in schedules_fired.items() if c > 1]
    ticks_per_minute = Counter(
        int((split_job_name(j) or ("", 0))[1] - start) // 60 for j in expected
    )
    created_at = sorted(received.values())
    minute_rows = []
    for m in range(minutes):
        lo = start + 60 * m
        in_minute = [t for t in created_at if lo <= t < lo + 60]
        per_second = Counter(int(t - lo) for t in in_minute)
        values = by_minute.get(m, [])
        minute_rows.append(
            {
                "minute": m + 1,
                "expected": ticks_per_minute.get(m, 0),
                "expected_per_s": round(ticks_per_minute.get(m, 0) / 60, 1),
                "created_in_minute": len(in_minute),
                "achieved_per_s": round(len(in_minute) / 60, 1),
                "peak_1s": max(per_second.values(), default=0),
                "skew_p50": _q(values, 50),
                "skew_p99": _q(values, 99),
                "skew_max": round(max(values), 4) if values else math.nan,
            }
        )
    before, after_firing, _after = snapshots
    op = "operator bench-a"
    cpu = after_firing.processes.get(op, math.nan) - before.processes.get(op, math.nan)
    firings = len(set(received) & expected)
    job_created = {name: at for name, at in received.items()}
    stages = pipeline(requests, job_created)
    bound_at, finished_at = stages.pop("bound_at"), stages.pop("finished_at")
    steps = math.ceil((fired + 60 - start) / 30)
    stages["timeline_30s"] = {
        "created": per_interval(created_at, start, 30, steps),
        "bound": per_interval(bound_at, start, 30, steps),
        "finished": per_interval(finished_at, start, 30, steps),
    }
    in_window = [r for r in requests if start - 1 <= r.received <= fired]
    writes = Counter(
        f"{r.verb} {r.resource}"
        for r in in_window
        if r.agent.startswith("punctual/") and r.resource != "leases"
    )
    return {
        "start": start,
        "end": end,
        "minutes": minutes,
        "expression": "H * * * * *",
        "expected": len(expected),
        "created": len(received),
        "firings": firings,
        "attempts": {str(k): v for k, v in sorted(codes.items())},
        "missing": len(missing),
        "missing_examples": missing[:5],
        "duplicates": len(duplicates),
        "duplicate_examples": duplicates[:5],
        "unexpected": len(unexpected),
        "unexpected_examples": unexpected[:5],
        "skew": _summary(skews),
        "worst_second_p99": max(
            (
                _q(v, 99)
                for v in _by_tick(received, expected).values()
                if v  # one tick second: all schedules hashed to it in one minute
            ),
            default=math.nan,
        ),
        "per_minute": minute_rows,
        "last_create_after_end": round(created_at[-1] - end, 2) if created_at else None,
        "operator_cpu_s": round(cpu, 2),
        "operator_cpu_ms_per_firing": round(1000 * cpu / max(1, firings), 3),
        "window_s": round(after_firing.at - before.at, 1),
        "writes_in_window": dict(sorted(writes.items())),
        "writes_per_firing": round(sum(writes.values()) / max(1, firings), 2),
        "pipeline": stages,
    }


def _by_tick(received: dict[str, float], expected: set[str]) -> dict[int, list[float]]:
    out: dict[int, list[float]] = defaultdict(list)
    for name, at in received.items():
        parsed = split_job_name(name)
        if parsed and name in expected:
            out[parsed[1]].append(at - parsed[1])
    return out


# -- start-up with 100 000 schedules -----------------------------------------------------


def _rare_schedules(n: int, template: dict[str, Any]) -> Any:
    for i in range(n):
        yield {
            "apiVersion": "punctual.dev/v1",
            "kind": "CronSchedule",
            "metadata": {"name": f"b-{i:06d}"},
            "spec": {"schedule": "0 0 1 1 *", "timeZone": "UTC", "jobTemplate": template},
        }


FIRST = "a-"  # the prefix of the every-second schedules listed before the rare ones ("b-")


def _every_second(count: int, first: float, last: float, template: dict[str, Any]) -> Any:
    for i in range(count):
        yield {
            "apiVersion": "punctual.dev/v1",
            "kind": "CronSchedule",
            # Half named to sort before the rare ones (listed first), half after (listed
            # last): a new leader that decides while the list streams in fires the first
            # half as soon as their page arrives, the second only at the list's end.
            "metadata": {"name": f"{FIRST if i % 2 == 0 else ''}tick-{i:02d}"},
            "spec": {
                "schedule": "* * * * * *",
                "timeZone": "UTC",
                "startTime": _rfc3339(first),
                "endTime": _rfc3339(last),
                "successfulJobsHistoryLimit": 1,
                "failedJobsHistoryLimit": 1,
                "jobTemplate": template,
            },
        }


async def startup(
    trial: Trial, every: int, lead: float, cap: float, first_cap: float | None = None
) -> None:
    """N rare schedules created first, `every` every-second ones from `lead` s after the
    operator starts; then one `punctual run`, measured from its start (for at most
    `first_cap` seconds, default `cap`), a restart and a failover."""
    from cluster import install_punctual

    n = trial.n
    trial.result["fencing"] = install_punctual(
        trial.cluster, trial.settings.source, fencing=trial.settings.fencing
    )
    template = _job_template()
    path = f"/apis/punctual.dev/v1/namespaces/{NAMESPACE}/cronschedules"
    log(f"startup n={n}: creating {n} rare CronSchedules")
    began = wall()
    await create_many(trial.api, path, _rare_schedules(n, template), 100)
    created = wall()
    log(f"created {n} in {created - began:.0f}s ({n / (created - began):.0f}/s)")
    trial.tail.poll()
    first_tick = float(math.ceil(wall() + lead))
    await create_many(
        trial.api, path, _every_second(every, first_tick, first_tick + cap + 600, template), every
    )
    trial.result["setup"] = {
        "schedules_created_s": round(created - began, 1),
        "create_rate": round(n / max(1e-9, created - began), 1),
        "every_second": every,
        "first_tick": first_tick,
    }
    first_cap = cap if first_cap is None else first_cap
    trial.result["startup"] = await _one_start(trial, "bench-a", first_tick, n + every, first_cap)
    # Then a restart: the schedules have their status now, as after any upgrade.
    trial.operators[-1].stop(timeout=30.0)
    # A first start stopped early (--first-start-minutes) may leave the every-second
    # ticks still ahead: the restart's are due from then, not from its start.
    ahead = first_tick if first_tick > wall() else None
    trial.result["restart"] = await _one_start(
        trial, "bench-b", 0.0, n + every, cap, due_from=ahead
    )
    # Then a failover: a hot standby beside the new leader, and the leader killed (-9).
    trial.result["failover"] = await _failover(trial, trial.operators[-1], every)
    pids = trial.component_pids()
    trial.result["peak_rss_mb"] = {name: round(peak_rss_mb(pid), 1) for name, pid in pids.items()}
    # Last, with every replica stopped: the rate the API server takes status writes from
    # a plain client, the yardstick of the restart's first claims (issue 35's target).
    for operator in trial.operators:
        operator.stop(timeout=30.0)
    trial.result["raw_status"] = await raw_status_rate(trial, min(n, RAW_STATUS_WRITES))


async def _failover(
    trial: Trial, leader: OperatorProcess, every: int, *, warm: float = 30.0, after: float = 90.0
) -> dict[str, Any]:
    """A hot standby started beside the leader; `warm` seconds after it is Ready, the
    leader killed (SIGKILL, so its Lease is not released: the standby waits for it to
    expire). Measured: both replicas' RSS just before the kill, and after it the
    standby's Lease takeover, first Job and first on-time Job of the every-second
    schedules, and their ticks fired on time for `after` seconds."""
    from replicas import start_operator

    settings = trial.settings
    standby = start_operator(
        trial.cluster, trial.workdir, "bench-c", trial.profile, settings.source, cprofile=False
    )
    trial.operators.append(standby)
    t0 = wall()
    ready: float | None = None
    while wall() < t0 + 900 and standby.proc.poll() is None:
        await asyncio.sleep(0.5)
        trial.tail.poll()
        if standby.get("/readyz")[0] == 200:
            ready = wall()
            break
    log(f"bench-c (standby) ready +{(ready or wall()) - t0:.1f}s; warming {warm:.0f}s")
    await asyncio.sleep(warm)
    rss = {"leader": rss_mb(leader.pid), "standby": rss_mb(standby.pid)}
    killed = wall()
    leader.kill()
    log(f"killed the leader (-9); RSS leader {rss['leader']:.0f} MB, standby {rss['standby']:.0f}")
    while wall() < killed + after:
        await asyncio.sleep(1.0)
        trial.tail.poll()
    agent = standby.user_agent
    mine = [r for r in trial.tail.requests if r.agent == agent and r.received >= killed]
    taken = [r.received for r in mine if r.resource == "leases" and r.verb == "update"]
    firings = []
    for r in _punctual_creates(mine):
        parsed = split_job_name(r.name)
        if r.code == 201 and "tick-" in r.name and parsed:
            firings.append((float(parsed[1]), r.received))
    firings.sort(key=lambda f: f[1])
    on_time = [f for f in firings if f[1] - f[0] <= ON_TIME]
    due = [f for f in firings if killed + after - 10 > f[0] >= killed]

    def since(instant: float | None) -> float | None:
        return round(instant - killed, 2) if instant is not None else None

    return {
        "standby_ready_s": round(ready - t0, 1) if ready is not None else None,
        "warm_s": warm,
        "rss_mb": {k: round(v, 1) for k, v in rss.items()},
        "lease_duration_s": 15.0,  # punctual run's default, the bench's
        "lease_taken_s": since(taken[0]) if taken else None,
        "first_create_s": since(firings[0][1]) if firings else None,
        "first_on_time_s": since(on_time[0][1]) if on_time else None,
        "observed_s": after,
        "fired": len(firings),
        "on_time": len(on_time),
        "ticks_due": every * _whole_seconds(killed, killed + after),
        "skew_after_takeover": _summary(a - t for t, a in due if taken and t >= taken[0] + 5),
    }


async def _one_start(
    trial: Trial,
    identity: str,
    first_tick: float,
    total: int,
    cap: float,
    *,
    due_from: float | None = None,
) -> dict[str, Any]:
    """One `punctual run` started and followed; first_tick 0: the schedules have status
    already, and the every-second ones are due from the start (or from `due_from`)."""
    from replicas import start_operator

    before = snapshot(trial.component_pids())
    t0 = wall()
    operator = start_operator(
        trial.cluster, trial.workdir, identity, trial.profile, trial.settings.source, cprofile=False
    )
    trial.operators.append(operator)
    first = first_tick or due_from or t0
    log(f"{identity} started; every-second ticks due from +{first - t0:.1f}s")
    # A restart writes no first statuses (every schedule has one): it is followed until its
    # index is complete, then for a minute of every-second firings.
    statuses = total if first_tick else 0
    progress = await _follow_startup(trial, operator, t0, first, total, statuses, cap)
    after = snapshot(trial.component_pids())
    progress["operator_requests"] = operator.api_requests()
    result = record_startup(trial, operator, t0, first, progress)
    result["operator_cpu_s"] = round(cpu_seconds(operator.pid), 2)
    result["operator_peak_rss_mb"] = round(peak_rss_mb(operator.pid), 1)
    result["cpu"] = cpu_between(before, after)
    log(
        f"{identity}: ready +{result['ready_s']}s, index +{result['index_complete_s']}s, "
        f"first statuses {result['first_statuses']}/{total} "
        f"(+{result['first_statuses_done_s']}s), first on-time firing "
        f"+{result['first_on_time_s']}s, peak RSS {result['operator_peak_rss_mb']} MB"
    )
    return result


async def _follow_startup(
    trial: Trial,
    operator: OperatorProcess,
    t0: float,
    first_tick: float,
    total: int,
    expected_statuses: int,
    cap: float,
) -> dict[str, Any]:
    """Poll /readyz and the schedule gauge (until each is reached: a scrape of a full
    index reads every schedule), the audit log and /proc until the first statuses are
    written and the every-second schedules have fired a minute on time, or the cap."""
    apiserver = trial.cluster.pids["kube-apiserver"]
    etcd = trial.cluster.pids["etcd"]
    ready: float | None = None
    index: float | None = None
    index_seen = 0.0
    statuses: dict[str, float] = {}
    rss: list[tuple[float, float, float, float]] = []
    next_rss = 0.0
    next_scrape = 0.0
    next_look = 0.0
    foreign: list[tuple[float, list[str]]] = []
    on_time_since: float | None = None
    exited: int | None = None
    while wall() < t0 + cap:
        await asyncio.sleep(0.25)
        now = wall()
        if operator.proc.poll() is not None:
            exited = operator.proc.returncode
            log(f"the operator exited ({exited})")
            break
        if ready is None and operator.get("/readyz")[0] == 200:
            ready = wall()
            log(f"ready +{ready - t0:.1f}s")
        if index is None and now >= next_scrape:
            next_scrape = now + 1.0
            value = operator.metric("punctual_schedules")
            index_seen = max(index_seen, value or 0.0)
            if value is not None and value >= total:
                index = wall()
                log(f"index complete +{index - t0:.1f}s")
        if now >= next_look:
            next_look = now + 10.0
            seen = foreign_runs(trial.cluster.pids.values())
            if seen:
                foreign.append((round(now - t0, 1), seen))
        if now >= next_rss:
            next_rss = now + 2.0
            rss.append((round(now - t0, 1), rss_mb(operator.pid), rss_mb(apiserver), rss_mb(etcd)))
        for r in trial.tail.poll():
            if (
                r.agent == operator.user_agent
                and r.resource == "cronschedules/status"
                and r.code == 200
                and r.name not in statuses
            ):
                statuses[r.name] = r.received
                if len(statuses) % 10000 == 0:
                    log(f"{len(statuses)} first statuses, +{r.received - t0:.0f}s")
        done = len(statuses) >= expected_statuses and index is not None
        if done and on_time_since is None:
            on_time_since = max(wall(), first_tick)
        if on_time_since is not None and wall() > on_time_since + 60:
            break
    return {
        "ready": ready,
        "index": index,
        "index_seen": index_seen,
        "statuses": statuses,
        "rss": rss,
        "ended": wall(),
        "exited": exited,
        "capped": on_time_since is None,
        "foreign": foreign,
    }


def _whole_seconds(start: float, end: float) -> int:
    """How many whole-second ticks t have start <= t < end."""
    return max(0, math.ceil(end) - math.ceil(start))


def record_startup(
    trial: Trial, operator: OperatorProcess, t0: float, first_tick: float, p: dict[str, Any]
) -> dict[str, Any]:
    n = trial.n
    statuses: dict[str, float] = p.pop("statuses")
    ended: float = p["ended"]
    every_creates = [
        r
        for r in _punctual_creates(trial.tail.requests)
        if r.code == 201 and "tick-" in r.name and r.agent == operator.user_agent
    ]
    firings: list[tuple[float, float, str]] = []  # (tick, received, schedule)
    for r in every_creates:
        parsed = split_job_name(r.name)
        if parsed:
            firings.append((float(parsed[1]), r.received, parsed[0]))
    firings.sort(key=lambda f: f[1])
    on_time = [f for f in firings if f[1] - f[0] <= ON_TIME]
    listed_first = [f for f in on_time if f[2].startswith(FIRST)]
    listed_last = [f for f in on_time if not f[2].startswith(FIRST)]
    first_of: dict[str, tuple[float, float]] = {}
    for tick, at, schedule in firings:
        first_of.setdefault(schedule, (tick, at))
    ready = p["ready"]
    after_ready: dict[str, tuple[float, float]] = {}
    for tick, at, schedule in firings:
        if ready is not None and at >= ready:
            after_ready.setdefault(schedule, (tick, at))
    every = trial.result["setup"]["every_second"]
    buckets = math.ceil((ended - t0) / BUCKET)
    timeline = []
    status_times = sorted(statuses.values())
    for b in range(buckets):
        lo, hi = t0 + b * BUCKET, t0 + (b + 1) * BUCKET
        ticks = [f for f in firings if lo <= f[0] < hi]
        expected = every * _whole_seconds(max(lo, first_tick), min(hi, ended))
        skews = [at - tick for tick, at, _ in ticks]
        timeline.append(
            {
                "from_s": round(lo - t0),
                "first_statuses": sum(1 for t in status_times if t < hi),
                "every_second_expected": expected,
                "every_second_fired": len(ticks),
                "on_time": sum(1 for s in skews if s <= ON_TIME),
                "skew_p99": _q(skews, 99),
                "operator_rss_mb": max(
                    (r[1] for r in p["rss"] if lo - t0 <= r[0] < hi - t0), default=None
                ),
            }
        )
    bulk = sorted(t for name, t in statuses.items() if name.startswith("b-"))
    done = len(statuses) >= n + every

    def since(instant: float | None) -> float | None:
        return round(instant - t0, 2) if instant is not None else None

    rate_window = [t for t in status_times if t >= (status_times[0] if status_times else 0)]
    rate = (
        (len(rate_window) - 1) / (rate_window[-1] - rate_window[0])
        if len(rate_window) > 1 and rate_window[-1] > rate_window[0]
        else math.nan
    )
    expected_ticks = every * _whole_seconds(first_tick, ended)
    return {
        "schedules": n + every,
        "every_second": every,
        "first_tick_s": round(first_tick - t0, 2),
        "ready_s": since(ready),
        "index_complete_s": since(p["index"]),
        "index_seen": p["index_seen"],
        "first_statuses": len(statuses),
        "first_statuses_bulk": len(bulk),
        "first_statuses_done": done,
        "first_status_s": since(status_times[0]) if status_times else None,
        "first_statuses_done_s": since(status_times[-1]) if done and status_times else None,
        "first_status_rate": round(rate, 1),
        "first_create_s": since(firings[0][1]) if firings else None,
        "first_on_time_s": since(on_time[0][1]) if on_time else None,
        # The every-second schedules listed before the rare ones, and those listed after.
        "first_on_time_listed_first_s": since(listed_first[0][1]) if listed_first else None,
        "first_on_time_listed_last_s": since(listed_last[0][1]) if listed_last else None,
        "first_on_time_tick_after_first_tick_s": round(on_time[0][0] - first_tick, 1)
        if on_time
        else None,
        "first_firings": {
            s: {"tick_after_first_tick": round(t - first_tick, 1), "skew": round(a - t, 3)}
            for s, (t, a) in sorted(first_of.items())
        },
        "first_firings_after_ready_skew": _summary(a - t for t, a in after_ready.values()),
        "every_second_expected_until_end": expected_ticks,
        "every_second_fired": len(firings),
        "every_second_on_time": len(on_time),
        "every_second_skew": _summary(a - t for t, a, _ in firings),
        "observed_s": round(ended - t0, 1),
        "capped": p["capped"],
        "exited": p["exited"],
        "rss_timeline": p["rss"],
        "foreign_runs": p["foreign"],
        "timeline": timeline,
        "operator_requests": p["operator_requests"],
    }


def reexec_in_venv() -> None:
    if Path(sys.prefix).resolve() != VENV.resolve() and (VENV / "bin" / "python").exists():
        os.execv(str(VENV / "bin" / "python"), [str(VENV / "bin" / "python"), *sys.argv])


if __name__ == "__main__":
    reexec_in_venv()
    sys.exit(main())
