"""The sustained ramp: the plain client and Punctual at the same steady rates, side by side.

    python bench/ramp.py [--rates 50,100,150] [--step-minutes 5] [--clients plain,punctual]
                         [--kind job|export]
    python bench/render.py bench/results-ramp   # rebuild results.md from raw/ramp.json

Why it exists: bench/scale.py's sustained row set Punctual under a steady load against
the plain client's burst rate, which cannot say what part of a shortfall is Punctual's.
Here both create the same Jobs (one template) at the same steady rate on the same
cluster (Job controller, scheduler, kwok and TTL controller included), one rate after
the other, a few minutes a step, the control plane drained in between (every Job and pod
of the step gone): the highest rate each sustains, and what each firing costs each, side
by side.

* A step at rate R: R x 60 names, each with its own uid, each firing once a minute at
  the second `H * * * * *` hashes from its uid, for the step's minutes: R firings a
  second on average (the hash spreads them unevenly over the seconds, alike for both).
  - plain: a process of its own (`bench/ramp.py plain`) that creates each tick's Jobs at
    the tick with punctual.kube.client.KubeClient, up to 200 at once, a refused create
    sent again after its Retry-After. Nothing else: no status, no history, no finalizer.
  - punctual: R x 60 CronSchedules whose startTime and endTime bound the window, fired by
    one `punctual run` at its defaults, started once for the whole ramp.
  Both Job templates are bench/scenarios.JOB_TEMPLATE with ttlSecondsAfterFinished 30:
  the TTL controller removes the finished Jobs of both (Punctual's history limits are
  above a step's firings, so it deletes none itself).
* `--kind export`: both clients create Exports (the e2e suite's CRD kind,
  e2e/manifests/workloads/) instead of Jobs, Punctual through `spec.workloadTemplate`
  and `--workload-kinds`. No controller acts on an Export: no pods, no status changes,
  no TTL, so the step measures the clients and the API server alone, the headroom the
  Job controller, the scheduler and the pods' writes hide. An Export never finishes:
  Punctual counts each as running until the drain deletes it.
* Sustained: no tick missing when the window closes (at most a minute after the last
  tick), none created twice, and the skew's p99 (the audit log's requestReceivedTimestamp
  of the create minus the tick) at most 1 s. A client's ramp stops at its first step not
  sustained.
* Per step and client: created, missing, duplicates, skew p50/p99/max, the client's
  audited writes per firing by verb and resource, its CPU per firing and the control
  plane's CPU (/proc), and how far the Job controller and scheduler kept up (each pod's
  binding after its Job's create).

Cluster: `.cluster-bench/` on BENCH_PORT_BASE, as bench/scale.py's rows (its frame,
scale_trial). Results: BENCH_RESULTS (default bench/results-ramp)/raw/ramp.json, written
after every step, then results.md by the renderer (rendering/ramp.py).

What it must never do: parse the audit log as JSON while a window is open (each window's
log is read once it has closed; while it is open only a substring count of creates
runs, so the harness takes next to no CPU from the clients while they fire), act at
import time, or leave a process or a cluster behind.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import math
import os
import re
import shlex
import sys
import uuid
from collections import Counter, defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from clock import hms, log, sleep_until, wall
from settings import NAMESPACE, PORT_BASE, RAMP, Settings, rel

if TYPE_CHECKING:
    from measure import Request
    from operatorprocess import OperatorProcess
    from trial import Trial

EXPRESSION = "H * * * * *"


class Kind:
    """What a step's clients create: Jobs, or a CRD kind no controller acts on."""

    def __init__(self, name: str, group_version: str, plural: str, kind: str) -> None:
        self.name = name
        self.group_version = group_version  # "batch/v1"
        self.plural = plural  # the audit log's resource
        self.kind = kind

    def collection(self, namespace: str) -> str:
        root = "/api" if "/" not in self.group_version else "/apis"
        return f"{root}/{self.group_version}/namespaces/{namespace}/{self.plural}"

    def plain_body(self, name: str, spec: dict[str, Any]) -> dict[str, Any]:
        """What the plain client creates for `name`, `spec` from `template_of`."""
        return {
            "apiVersion": self.group_version,
            "kind": self.kind,
            "metadata": {"name": name},
            "spec": spec,
        }


JOB = Kind("job", "batch/v1", "jobs", "Job")
EXPORT = Kind("export", "batch.example.com/v1", "exports", "Export")
KINDS = {kind.name: kind for kind in (JOB, EXPORT)}
EXPORT_SPEC = {"source": "bench.table", "destination": "s3://bench/", "format": "parquet"}
SKEW_P99 = 1.0  # seconds: a step is sustained only with the skew's p99 at most this
CLOSE_AFTER = 60.0  # seconds after the last tick a window stays open for late creates
TTL = 30  # ttlSecondsAfterFinished of both clients' Jobs
HISTORY = 10  # Punctual's history limits: above a step's firings per schedule
PLAIN_AGENT = "bench-plain"
PLAIN_CONCURRENCY = 200
DRAIN_CAP = 300.0
READS = frozenset({"get", "list", "watch"})


# -- entry -------------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["plain"]:
        return plain_main(argv[1:])
    import rendering
    import source

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else "")
    parser.add_argument("--rates", default="50,100,150", help="firings a second, comma-separated")
    parser.add_argument("--step-minutes", type=int, default=5)
    parser.add_argument("--clients", default="plain,punctual")
    parser.add_argument(
        "--kind", default="job", choices=sorted(KINDS), help="what both clients create"
    )
    parser.add_argument(
        "--punctual-flags",
        default="",
        help="flags added to `punctual run` (e.g. '--claim-window 600 --status-delay 300')",
    )
    args = parser.parse_args(argv)
    rates = [int(r) for r in args.rates.split(",") if r.strip()]
    clients = [c.strip() for c in args.clients.split(",") if c.strip()]
    if not rates or any(c not in ("plain", "punctual") for c in clients):
        parser.error("--rates needs numbers, --clients only plain and punctual")
    settings = source.prepare("results-ramp")
    (settings.results / "raw").mkdir(parents=True, exist_ok=True)
    port_base = int(os.environ.get("BENCH_PORT_BASE") or PORT_BASE)
    flags = tuple(shlex.split(args.punctual_flags))
    if not run(settings, port_base, rates, args.step_minutes, clients, flags, KINDS[args.kind]):
        return 130
    for path in rendering.render(settings.results):
        log(f"report: {rel(path)}")
    return 0


def run(
    settings: Settings,
    port_base: int,
    rates: list[int],
    minutes: int,
    clients: list[str],
    flags: tuple[str, ...] = (),
    kind: Kind = JOB,
) -> bool:
    from campaign import clean
    from machine import machine
    from replicas import STARTED
    from scale import scale_trial

    trial = scale_trial(RAMP, max(rates) * 60, settings, port_base)
    path = settings.results / "raw" / "ramp.json"

    def save() -> None:
        result = dict(trial.result)
        result["machine"] = machine(settings.rev)
        path.write_text(json.dumps(clean(result), indent=1) + "\n")

    async def body(t: Trial) -> None:
        await ramp(t, rates, minutes, clients, save, flags, kind)

    try:
        asyncio.run(trial.execute(body))
    except KeyboardInterrupt:
        log("interrupted: stopping the operator and the bench cluster")
        for op in list(STARTED):
            op.kill()
        trial.cluster.down()
        return False
    save()
    log(f"wrote {rel(path)} ({trial.result['duration']:.0f}s)")
    return True


# -- the ramp ----------------------------------------------------------------------------


async def ramp(
    trial: Trial,
    rates: list[int],
    minutes: int,
    clients: list[str],
    save: Callable[[], None],
    flags: tuple[str, ...] = (),
    kind: Kind = JOB,
) -> None:
    """Each rate in turn for each client still sustaining, the cluster drained between."""
    from cluster import install_exports, install_punctual
    from kubeapi import lease_holder, wait_for
    from replicas import start_operator
    from settings import EXPORTS_KIND

    trial.result["fencing"] = install_punctual(
        trial.cluster, trial.settings.source, fencing=trial.settings.fencing
    )
    trial.result["kind"] = kind.name
    if kind is EXPORT:
        install_exports(trial.cluster)
        flags = (*flags, "--workload-kinds", EXPORTS_KIND)
    operator = start_operator(
        trial.cluster, trial.workdir, "bench-a", trial.profile, trial.settings.source,
        cprofile=False, extra=flags,
    )  # fmt: skip
    trial.operators.append(operator)
    trial.result["punctual_flags"] = list(flags)

    async def leads() -> bool:
        return await lease_holder(trial.api) == operator.identity

    await wait_for("the operator to take the Lease", leads, 60)
    trial.result.update(
        rates=rates, step_minutes=minutes, clients=clients, skew_p99_bound=SKEW_P99, steps=[]
    )
    going = list(clients)
    for rate in rates:
        for client in list(going):
            await drain(trial, kind)
            if client == "plain":
                step = await plain_step(trial, rate, minutes, kind)
            else:
                step = await punctual_step(trial, rate, minutes, operator, kind)
            trial.result["steps"].append(step)
            save()
            s = step
            log(
                f"{client} at {rate}/s: {s['created']}/{s['expected']}, missing {s['missing']}, "
                f"dup {s['duplicates']}, skew p50 {s['skew']['p50']:.3f}s p99 "
                f"{s['skew']['p99']:.3f}s, {s['writes_per_firing']} writes and "
                f"{s['client_cpu_ms_per_firing']} ms CPU a firing: "
                + ("sustained" if s["sustained"] else "NOT sustained")
            )
            if not step["sustained"]:
                going.remove(client)
        if not going:
            break
    await drain(trial, kind)


def ticks_for(names: dict[str, str], start: float, end: float) -> dict[str, int]:
    """{Job name: tick} of every firing of `names` ({name: uid}) in [start, end)."""
    from scale import expected_ticks

    return {
        job: int(job.rpartition("-")[2]) for job in expected_ticks(names, EXPRESSION, start, end)
    }


def job_template() -> dict[str, Any]:
    from scale import _job_template

    template = _job_template()
    template["spec"]["ttlSecondsAfterFinished"] = TTL
    return template


def template_of(kind: Kind) -> dict[str, Any]:
    """Both clients' template for `kind`: the Job's, or an Export's spec."""
    return job_template() if kind is JOB else {"spec": dict(EXPORT_SPEC)}


async def plain_step(trial: Trial, rate: int, minutes: int, kind: Kind = JOB) -> dict[str, Any]:
    """The plain client at `rate`: its own process creating each tick's Jobs at the tick."""
    n = rate * 60
    start = float(math.ceil((wall() + 20) / 60) * 60)
    end = start + 60 * minutes
    uids = {f"p{rate}-{i:05d}": str(uuid.uuid4()) for i in range(n)}
    expected = ticks_for(uids, start, end)
    plan = trial.workdir / f"plain-{rate}.json"
    plan.write_text(
        json.dumps(
            {
                "path": kind.collection(NAMESPACE),
                "kind": kind.name,
                "template": template_of(kind),
                "ticks": sorted(expected.items(), key=lambda kv: kv[1]),
            }
        )
    )
    process = await asyncio.create_subprocess_exec(
        sys.executable, str(Path(__file__).resolve()), "plain",
        "--plan", str(plan),
        "--kubeconfig", str(trial.cluster.subject_kubeconfig),
        "--operator-path", str(trial.settings.source / "operator"),
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
    )  # fmt: skip
    try:
        log(f"plain at {rate}/s: {len(expected)} {kind.plural} {hms(start)}..{hms(end)}")
        step = await window(
            trial, "plain", rate, minutes, expected, start, end,
            client_pid=process.pid, is_client=lambda r: r.agent.startswith(PLAIN_AGENT),
            kind=kind,
        )  # fmt: skip
    finally:
        if process.stdin is not None:
            process.stdin.close()
        try:
            await asyncio.wait_for(process.wait(), 30)
        except TimeoutError:
            process.kill()
            await process.wait()
    step["setup"] = {"schedules": 0}
    return step


async def punctual_step(
    trial: Trial, rate: int, minutes: int, operator: OperatorProcess, kind: Kind = JOB
) -> dict[str, Any]:
    """Punctual at `rate`: rate x 60 CronSchedules, their first statuses written first."""
    from kubeapi import wait_for
    from scale import _rfc3339, create_many

    n = rate * 60
    setup_estimate = 30 + n / 100  # 10 000 took 53 s to create and write first statuses
    start = float(math.ceil((wall() + setup_estimate) / 60) * 60)
    end = start + 60 * minutes
    template = template_of(kind)
    what: dict[str, Any] = (
        {"jobTemplate": template}
        if kind is JOB
        else {
            "workloadTemplate": {
                "apiVersion": kind.group_version,
                "kind": kind.kind,
                **template,
            }
        }
    )
    bodies = (
        {
            "apiVersion": "punctual.dev/v1",
            "kind": "CronSchedule",
            "metadata": {"name": f"r{rate}-{i:05d}"},
            "spec": {
                "schedule": EXPRESSION,
                "timeZone": "UTC",
                "startTime": _rfc3339(start),
                "endTime": _rfc3339(end),
                "successfulJobsHistoryLimit": HISTORY,
                "failedJobsHistoryLimit": HISTORY,
                "jitterSeconds": 0,
                **what,
            },
        }
        for i in range(n)
    )
    log(f"punctual at {rate}/s: creating {n} CronSchedules, firing {hms(start)}..{hms(end)}")
    began = wall()
    path = f"/apis/punctual.dev/v1/namespaces/{NAMESPACE}/cronschedules"
    uids = await create_many(trial.api, path, bodies, 64)
    created_at = wall()
    expected = ticks_for(uids, start, end)
    first: set[str] = set()

    def statuses_written() -> bool:
        for r in trial.tail.poll():
            if r.agent == operator.user_agent and r.resource == "cronschedules/status":
                first.add(r.name)
        trial.tail.requests.clear()
        return len(first) >= n

    try:
        await wait_for("the first statuses", statuses_written, max(5.0, start - wall() - 2), 1.0)
    except TimeoutError:
        log(f"only {len(first)}/{n} first statuses written before the first tick")
    setup = {
        "schedules": n,
        "created_s": round(created_at - began, 1),
        "first_statuses": len(first),
        "margin_s": round(start - wall(), 1),
    }
    passes = operator.metric("punctual_passes_total")
    spy = None
    if trial.settings.profiler == "py-spy":  # BENCH_PROFILE=py-spy: where the CPU goes
        from replicas import PySpy

        spy = PySpy(operator.pid, trial.workdir / f"py-spy-{rate}.txt")
    samples: list[dict[str, float]] = []
    sampling = asyncio.create_task(sample_operator(operator, samples))
    lag_before = firing_lag(operator)
    step = await window(
        trial, "punctual", rate, minutes, expected, start, end,
        client_pid=operator.pid, is_client=lambda r: r.agent == operator.user_agent,
        kind=kind,
    )  # fmt: skip
    sampling.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await sampling
    step["operator_samples"] = summarize_samples(samples)
    lag_after = firing_lag(operator)
    if lag_before is not None and lag_after is not None:
        step["firing_lag"] = _lag_between(lag_before, lag_after)
    if spy is not None:
        from stacks import summarize_collapsed

        seconds = spy.stop()
        if spy.out.exists():
            step["py_spy"] = summarize_collapsed(spy.out.read_text(), seconds=seconds, rate=100)
    after = operator.metric("punctual_passes_total")
    if passes is not None and after is not None:  # from the set-up's end to the window's
        step["passes_per_firing"] = round((after - passes) / max(1, step["firings"]), 2)
    step["setup"] = setup
    return step


# -- what the operator says of itself during a window ---------------------------------------

# Sampled every SAMPLE_EVERY seconds while Punctual's window runs: how late a firing may
# be before it is sent (the clock's uncertainty: "is it due?" reads the low end of the
# API server's clock, DESIGN.md) and how late the event loop runs.
SAMPLE_EVERY = 5.0
SAMPLED = ("punctual_clock_uncertainty_seconds", "punctual_event_loop_lag_seconds")


async def sample_operator(operator: OperatorProcess, samples: list[dict[str, float]]) -> None:
    """Scrape SAMPLED into `samples` until cancelled."""
    while True:
        status, text = await asyncio.to_thread(operator.get, "/metrics")
        if status == 200:
            values = _values(text, SAMPLED)
            samples.append({"t": round(wall(), 1), **values})
        await asyncio.sleep(SAMPLE_EVERY)


def summarize_samples(samples: list[dict[str, float]]) -> dict[str, Any]:
    """Each sampled metric's median and max over the window, and how many samples."""
    out: dict[str, Any] = {"count": len(samples)}
    for name in SAMPLED:
        values = sorted(s[name] for s in samples if name in s)
        if values:
            out[name] = {"median": values[len(values) // 2], "max": values[-1]}
    return out


def _values(text: str, names: tuple[str, ...]) -> dict[str, float]:
    found: dict[str, float] = {}
    for line in text.splitlines():
        name, _, value = line.partition(" ")
        if name in names:
            found[name] = float(value)
    return found


def firing_lag(operator: OperatorProcess) -> dict[str, float] | None:
    """punctual_firing_lag_seconds as scraped: its buckets by bound, sum and count."""
    status, text = operator.get("/metrics")
    if status != 200:
        return None
    out: dict[str, float] = {}
    prefix = "punctual_firing_lag_seconds"
    for line in text.splitlines():
        if not line.startswith(prefix):
            continue
        name, _, value = line.rpartition(" ")
        match = re.search(r'le="([^"]+)"', name)
        key = f"le={match.group(1)}" if match else name.removeprefix(prefix + "_")
        out[key] = float(value)
    return out


def _lag_between(before: dict[str, float], after: dict[str, float]) -> dict[str, Any]:
    """The window's firing lag from two scrapes: mean, and the share under each bound."""
    count = after.get("count", 0.0) - before.get("count", 0.0)
    total = after.get("sum", 0.0) - before.get("sum", 0.0)
    shares = {
        key.removeprefix("le="): round((after[key] - before.get(key, 0.0)) / count, 3)
        for key in after
        if key.startswith("le=") and count > 0
    }
    return {"count": count, "mean_s": round(total / count, 3) if count else None, "under": shares}


# -- one window --------------------------------------------------------------------------


class CreatesSeen:
    """The objects (Jobs, or `resource`) the audit log shows created (201) since it was
    made: a substring scan of the new lines, no JSON parse (cheap enough to run while the
    clients fire)."""

    def __init__(self, audit_log: Path, resource: str = "jobs") -> None:
        self.name = re.compile(
            rb'"objectRef":\{"resource":"'
            + re.escape(resource.encode())
            + rb'","namespace":"[^"]*","name":"([^"]+)"'
        )
        self.path = audit_log
        self.offset = audit_log.stat().st_size
        self.partial = b""
        self.names: set[str] = set()

    def poll(self) -> set[str]:
        with self.path.open("rb") as f:
            f.seek(self.offset)
            data = f.read()
        self.offset += len(data)
        lines = (self.partial + data).split(b"\n")
        self.partial = lines.pop()
        for line in lines:
            if (
                b'"verb":"create"' in line
                and b'"code":201' in line
                and b"ResponseComplete" in line
                and (match := self.name.search(line)) is not None
            ):
                self.names.add(match.group(1).decode())
        return self.names


async def window(
    trial: Trial,
    client: str,
    rate: int,
    minutes: int,
    expected: dict[str, int],
    start: float,
    end: float,
    *,
    client_pid: int,
    is_client: Callable[[Request], bool],
    kind: Kind = JOB,
) -> dict[str, Any]:
    """From a second before the first tick until every expected Job is created (or
    CLOSE_AFTER past the end); then the audit log of the window, read once."""
    from procfs import cpu_between, peak_rss_mb, snapshot

    await sleep_until(start - 1.0)
    trial.tail.poll()
    trial.tail.requests.clear()  # the set-up's requests
    seen = CreatesSeen(trial.cluster.audit_log, kind.plural)
    pids = {**trial.component_pids(), "client": client_pid}
    before = snapshot(pids)
    wanted = set(expected)
    while wall() < end + CLOSE_AFTER:
        await asyncio.sleep(2.0)
        if wall() > end and wanted <= seen.poll():
            break
    after = snapshot(pids)
    closed = wall()
    peak_rss = peak_rss_mb(client_pid)
    await asyncio.sleep(2.0)  # the last answers logged
    requests = trial.tail.poll()
    trial.tail.requests.clear()
    step = figures(
        client, rate, minutes, expected, start, end, closed, requests, is_client, kind.plural
    )
    cpu = cpu_between(before, after)
    firings = max(1, step["firings"])
    client_cpu = cpu["seconds"].get("client", math.nan)
    step.update(
        client_cpu_s=round(client_cpu, 2),
        client_cpu_ms_per_firing=round(1000 * client_cpu / firings, 3),
        client_peak_rss_mb=round(peak_rss, 1),
        cpu=cpu,
    )
    return step


def figures(
    client: str,
    rate: int,
    minutes: int,
    expected: dict[str, int],
    start: float,
    end: float,
    closed: float,
    requests: list[Request],
    is_client: Callable[[Request], bool],
    resource: str = "jobs",
) -> dict[str, Any]:
    """One window's figures from its audit log (`resource`: what the clients create)."""
    from measure import percentile
    from scale import _summary, pipeline

    mine = [r for r in requests if is_client(r)]
    creates = [r for r in mine if r.verb == "create" and r.resource == resource]
    made = Counter(r.name for r in creates if r.code == 201)
    received = {r.name: r.received for r in creates if r.code == 201 and r.name in expected}
    missing = sorted(set(expected) - set(received))
    duplicates = sorted(name for name, count in made.items() if count > 1)
    skews = sorted(received[name] - expected[name] for name in received)
    p99 = percentile(skews, 99) if skews else math.nan
    writes = Counter(
        f"{r.verb} {r.resource}"
        for r in mine
        if r.verb not in READS and r.resource != "leases" and start - 1 <= r.received <= closed
    )
    per_second = Counter(int(t - start) for t in received.values())
    stages = pipeline(requests, received)
    stages.pop("bound_at")
    stages.pop("finished_at")
    firings = len(received)
    return {
        "client": client,
        "rate": rate,
        "minutes": minutes,
        "start": start,
        "end": end,
        "closed_after_end_s": round(closed - end, 1),
        "expected": len(expected),
        "created": firings,
        "firings": firings,
        "attempts": {str(k): v for k, v in sorted(Counter(r.code for r in creates).items())},
        "missing": len(missing),
        "missing_examples": missing[:5],
        "duplicates": len(duplicates),
        "duplicate_examples": duplicates[:5],
        "skew": _summary(skews),
        "created_per_s_peak": max(per_second.values(), default=0),
        "last_create_after_end_s": round(max(received.values()) - end, 2) if received else None,
        "sustained": not missing and not duplicates and p99 <= SKEW_P99,
        "writes": dict(sorted(writes.items())),
        "writes_per_firing": round(sum(writes.values()) / max(1, firings), 2),
        "pipeline": stages,
    }


# -- draining ----------------------------------------------------------------------------


async def drain(trial: Trial, kind: Kind = JOB) -> None:
    """The last step's CronSchedules, Jobs (or `kind`'s objects) and pods gone (Punctual
    releases its finalizer on the objects of deleted schedules), so that no step inherits
    another's backlog."""
    from punctual.kube.client import NotFound, Unavailable

    options = {"apiVersion": "v1", "kind": "DeleteOptions", "propagationPolicy": "Background"}
    base = f"/namespaces/{NAMESPACE}"
    collections = (
        f"/apis/punctual.dev/v1{base}/cronschedules",
        kind.collection(NAMESPACE),
        f"/api/v1{base}/pods",
    )
    began = wall()
    left: dict[str, int] = {}
    undeleted = list(collections[:2])
    while wall() < began + DRAIN_CAP:
        # A delete of thousands of objects can outlast the API server's request timeout,
        # which then cuts the connection (ServerDisconnected, after 6 000 CronSchedules)
        # with part of them left: a delete that did not answer is sent again.
        for path in list(undeleted):
            with contextlib.suppress(Unavailable):
                with contextlib.suppress(NotFound):
                    await trial.api.delete(path, options)
                undeleted.remove(path)
        left = {}
        for path in collections:
            body = await trial.api.get(path, limit="1")
            if body.get("items"):
                left[path.rpartition("/")[2]] = 1 + int(
                    (body.get("metadata") or {}).get("remainingItemCount") or 0
                )
        if not left:
            break
        await asyncio.sleep(2.0)
    if left:
        log(f"drain: still there after {DRAIN_CAP:.0f}s: {left}")
    elif wall() - began > 3:
        log(f"drained in {wall() - began:.0f}s")
    trial.result.setdefault("drains", []).append(
        {"seconds": round(wall() - began, 1), "left": left}
    )


# -- the plain client (its own process) --------------------------------------------------


def plain_main(argv: list[str]) -> int:
    """`bench/ramp.py plain --plan F --kubeconfig K --operator-path P`: create each Job of
    the plan at its tick, then wait for stdin to close (the harness reads this process's
    CPU while it lives)."""
    parser = argparse.ArgumentParser(prog="bench/ramp.py plain")
    parser.add_argument("--plan", required=True)
    parser.add_argument("--kubeconfig", required=True)
    parser.add_argument("--operator-path", required=True)
    parser.add_argument("--concurrency", type=int, default=PLAIN_CONCURRENCY)
    args = parser.parse_args(argv)
    sys.path.insert(0, args.operator_path)
    plan = json.loads(Path(args.plan).read_text())
    asyncio.run(_plain(plan, args.kubeconfig, args.concurrency))
    print("done", flush=True)
    sys.stdin.read()
    return 0


async def _plain(plan: dict[str, Any], kubeconfig: str, concurrency: int) -> None:
    from punctual.kube.client import AlreadyExists, KubeClient, Unavailable
    from punctual.kube.credentials import load_kubeconfig

    by_tick: dict[int, list[str]] = defaultdict(list)
    for name, tick in plan["ticks"]:
        by_tick[tick].append(name)
    kind, spec = KINDS[plan["kind"]], plan["template"]["spec"]
    gate = asyncio.Semaphore(concurrency)

    async def one(api: KubeClient, name: str) -> None:
        body = kind.plain_body(name, spec)
        async with gate:
            while True:
                try:
                    await api.create(plan["path"], body)
                    return
                except AlreadyExists:
                    return
                except Unavailable as error:
                    await asyncio.sleep(1.0 if error.retry_after is None else error.retry_after)

    credentials = load_kubeconfig(Path(kubeconfig))
    async with KubeClient(credentials, user_agent=PLAIN_AGENT, timeout=120) as api:
        await api.get("/version")
        tasks: list[asyncio.Task[None]] = []
        for tick in sorted(by_tick):
            if (delay := tick - wall()) > 0:
                await asyncio.sleep(delay)
            tasks.extend(asyncio.create_task(one(api, name)) for name in by_tick[tick])
        await asyncio.gather(*tasks)


if __name__ == "__main__":
    from scale import reexec_in_venv

    reexec_in_venv()
    sys.exit(main())
