"""What each scenario does inside its Trial: the raw limit, CronJobs, Punctual, failover.

Why it exists: the scenarios differ in what they create and whom they wait for; this
module sets each one up (N Jobs at once, N CronJobs, N CronSchedules on one or two
`punctual run` replicas), picks the tick with enough margin for the set-up, and hands the
tick to observing.py. `execute` runs one scenario in a fresh Trial.

What it must never do: start the measured window before every schedule is set up (it
raises SetupOverrun so that campaign.py starts again with more margin), touch the
controller under test while the tick is measured (but for the failover's kill), or do
anything at import time.
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from typing import Any

import measure
from clock import hms, log, sleep_until, wall
from cluster import CRONJOB_KCM, install_exports, install_punctual
from kubeapi import create_all, create_as_client_go, lease_holder, list_all, wait_for
from observing import Expectation, observe
from operatorprocess import OperatorProcess
from procfs import cpu_between, snapshot
from punctualjob import punctual_job
from replicas import start_operator
from settings import EXPORTS_KIND, FENCE, LEASE, NAMESPACE, RAW_AGENT, Scenario, Settings
from trial import Trial

from punctual.core.keys import ANNOTATION_TICK, LABEL_SCHEDULE
from punctual.core.schedules import parse_schedule
from punctual.kube.client import KubeClient
from punctual.kube.credentials import load_kubeconfig
from punctual.kube.fencing import raise_fence
from punctual.kube.sharding import shard_of

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


class SetupOverrun(Exception):
    """The schedules were not all set up before their tick: run again with more margin."""


# -- the raw limit ----------------------------------------------------------------------


def _raw_jobs(n: int) -> list[dict[str, Any]]:
    return [
        {
            "apiVersion": "batch/v1",
            "kind": "Job",
            "metadata": {
                "name": f"raw-{i:05d}-1",
                "namespace": NAMESPACE,
                "labels": {LABEL_SCHEDULE: f"raw-{i:05d}"},
                "annotations": {ANNOTATION_TICK: "1970-01-01T00:00:01Z"},
            },
            **JOB_TEMPLATE,
        }
        for i in range(n)
    ]


# The holder and epoch the raw client's Punctual-shaped Jobs carry (and the Fence holds).
RAW_LEADER, RAW_EPOCH = "bench-raw", 1


async def _punctual_jobs(trial: Trial, n: int) -> tuple[list[dict[str, Any]], list[str]]:
    """The Jobs Punctual creates for N schedules at one tick, built by Punctual's own code
    (`core.jobs.build_job`, its pod template stamped), owned by N CronSchedules that exist
    and admitted by the fencing policy against a Fence raised for RAW_LEADER; and the
    schedules' names. Nothing runs them: the schedules' one tick is years away."""
    fenced = install_punctual(trial.cluster, trial.settings.source, fencing=trial.settings.fencing)
    trial.result["fencing"] = fenced
    if fenced and not await raise_fence(trial.api, NAMESPACE, FENCE, RAW_LEADER, RAW_EPOCH):
        raise RuntimeError("the Fence could not be raised for the raw client")
    owners = await create_all(
        trial.api,
        f"/apis/punctual.dev/v1/namespaces/{NAMESPACE}/cronschedules",
        _cronschedules(n, "0 0 1 1 *"),
        64,
    )
    tick = datetime(2030, 1, 1, tzinfo=UTC)
    bodies = [punctual_job(o, tick, leader=RAW_LEADER, epoch=RAW_EPOCH) for o in owners]
    return bodies, [o["metadata"]["name"] for o in owners]


async def raw(trial: Trial) -> None:
    """The physical limit: one client creating N Jobs as fast as the API server takes them
    (on the overloaded server, each refused create again after its Retry-After); with
    `punctual_jobs`, the very Jobs Punctual creates, through the fencing policy."""
    n = trial.n
    if trial.scenario.punctual_jobs:
        bodies, names = await _punctual_jobs(trial, n)
    else:
        bodies, names = _raw_jobs(n), [f"raw-{i:05d}" for i in range(n)]
    credentials = load_kubeconfig(trial.cluster.subject_kubeconfig)
    before = snapshot(trial.component_pids())
    async with KubeClient(credentials, user_agent=RAW_AGENT, timeout=120) as client:
        await client.get("/version")  # open a connection before the clock starts
        client_start = wall()
        path = f"/apis/batch/v1/namespaces/{NAMESPACE}/jobs"
        waits = await create_as_client_go(client, path, bodies, trial.settings.raw_concurrency)
        client_end = wall()
    after = snapshot(trial.component_pids())
    await asyncio.sleep(1.0)
    trial.tail.poll()
    creates = [
        r
        for r in trial.tail.requests
        if r.agent == RAW_AGENT and r.verb == "create" and r.resource == "jobs"
    ]
    t0 = min((r.received for r in creates if r.code == 201), default=client_start)
    firings = measure.firings(
        trial.tail.requests,
        namespace=NAMESPACE,
        expected_ticks={name: t0 for name in names},
        tick_of=lambda _suffix: t0,
        agent=lambda a: a == RAW_AGENT,
    )
    jobs = await list_all(trial.api, f"/apis/batch/v1/namespaces/{NAMESPACE}/jobs")
    trial.result.update(
        {
            "tick": t0,
            "firings": firings.as_dict(),
            "skews": sorted(round(s, 4) for s in firings.skews),
            "makespan": firings.last_create - t0,
            "client": {
                "wall": round(client_end - client_start, 3),
                "concurrency": trial.settings.raw_concurrency,
                "cpu": round(after.harness - before.harness, 3),
                "retry_after": {f"{k:g}": v for k, v in sorted(waits.items())},
            },
            "cpu": cpu_between(before, after),
            "crosscheck": measure.creation_check(jobs, firings.created, lambda _name: t0),
            "refusals": measure.refusals(
                trial.tail.requests, agent=lambda a: a == RAW_AGENT, start=t0 - 1.0, end=wall()
            ),
        }
    )
    log(
        f"raw: {firings.as_dict()['created']}/{n} Jobs in "
        f"{trial.result['makespan']:.2f}s ({n / max(1e-9, trial.result['makespan']):.0f}/s)"
    )


# -- CronJobs ---------------------------------------------------------------------------


def _cronjobs(tick: int, n: int, minutes: int) -> tuple[list[dict[str, Any]], dict[str, float]]:
    """N CronJobs firing at `tick`, or spread over `minutes` minutes from it; their ticks."""
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
    return bodies, expected


def _is_cronjob_controller(agent: str) -> bool:
    return agent.endswith("/cronjob-controller") or "cronjob-controller" in agent


async def cronjob(trial: Trial) -> None:
    """N CronJobs on one minute (or spread over several), fired by the CronJob controller."""
    n = trial.n
    spread = trial.scenario.shape == "spread"
    minutes = trial.settings.cronjob_spread_minutes if spread else 1
    setup_estimate = 4 + n / 150
    tick = math.ceil((wall() + setup_estimate * trial.margin_factor + 8) / 60) * 60
    bodies, expected = _cronjobs(tick, n, minutes)
    log(f"{trial.scenario.id} n={n}: creating CronJobs, tick at {hms(tick)}")
    await create_all(trial.api, f"/apis/batch/v1/namespaces/{NAMESPACE}/cronjobs", bodies, 64)
    ready = wall()
    if ready > tick - 3:
        raise SetupOverrun(f"CronJobs created {ready - tick:+.1f}s from the tick")
    trial.result["setup"] = {"ready": ready, "margin": round(tick - ready, 2)}
    await observe(
        trial,
        Expectation(
            tick=tick,
            last_tick=tick + 60 * (minutes - 1),
            expected=expected,
            tick_of=lambda minute: float(minute * 60),
            agent=_is_cronjob_controller,
        ),
        subject_pid=trial.cluster.pids[CRONJOB_KCM],
    )


# -- Punctual ---------------------------------------------------------------------------


async def punctual(trial: Trial) -> None:
    """N CronSchedules fired by `punctual run`, at one instant or spread over a minute; for
    failover, the leader is killed a second before the tick and the standby fires."""
    n = trial.n
    spread = trial.scenario.shape == "spread"
    settings = trial.settings
    trial.result["fencing"] = install_punctual(
        trial.cluster, settings.source, fencing=settings.fencing
    )
    extra: tuple[str, ...] = ()
    if trial.kind == "workloads":
        install_exports(trial.cluster)
        extra = ("--workload-kinds", EXPORTS_KIND)
    sharded = trial.scenario.shards > 1
    if sharded:
        first, standby = await _start_sharded(trial), None
    else:
        first, standby = await _start_replicas(
            trial, failover=trial.kind == "failover", extra=extra
        )
    start, tick, expression = _punctual_tick(trial)
    bodies = _cronschedules(n, expression)
    if trial.kind == "workloads":  # every other schedule fires an Export: neither goes first
        trial.result["exports"] = n // 2
        bodies = [_as_export(b) if i % 2 else b for i, b in enumerate(bodies)]
    log(f"{trial.scenario.id} n={n}: creating CronSchedules '{expression}', tick {hms(tick)}")
    setup_before = snapshot(trial.component_pids())
    created = await create_all(
        trial.api, f"/apis/punctual.dev/v1/namespaces/{NAMESPACE}/cronschedules", bodies, 64
    )
    expected = _expected_ticks(created, expression, tick, spread=spread)
    created_at = wall()
    last_initial = await _await_first_statuses(trial, None if sharded else first, tick)
    if standby is not None:
        await _await_standby_index(trial, standby, tick)
    ready = wall()
    setup_after = snapshot(trial.component_pids())
    if ready > min(expected.values()) - 2:
        raise SetupOverrun(f"setup ended {ready - tick:+.1f}s from the tick")
    trial.result["setup"] = {
        "created": round(created_at - start, 2),
        "initial_status_writes_done": round(last_initial - start, 2),
        "ready": ready,
        "margin": round(min(expected.values()) - ready, 2),
        "cpu": cpu_between(setup_before, setup_after),
    }
    trial.result["expression"] = expression
    leader = first
    if standby is not None:
        await _kill_leader(trial, first, tick)
        leader = standby
    killing = None
    if trial.scenario.kill:
        killing = asyncio.create_task(_kill_one_sharded(trial, tick + 20.0, created))
    await observe(
        trial,
        Expectation(
            tick=min(expected.values()),
            last_tick=max(expected.values()),
            expected=expected,
            tick_of=float,
            agent=lambda a: a.startswith("punctual/"),
        ),
        subject_pid=leader.pid,
        operator=leader,
    )
    if standby is not None:
        _record_failover(trial, first, standby, tick)
    if killing is not None:
        await killing
    if sharded:
        _record_replicas(trial, created)
    if trial.kind == "workloads":
        _record_by_kind(trial, tick)


def _as_export(body: dict[str, Any]) -> dict[str, Any]:
    """A schedule that fires an Export (a CRD kind with no controller) instead of a Job."""
    spec = {k: v for k, v in body["spec"].items() if k != "jobTemplate"}
    spec["workloadTemplate"] = {
        "apiVersion": "batch.example.com/v1",
        "kind": "Export",
        "spec": {"source": "bench.table", "destination": "s3://bench/", "format": "parquet"},
    }
    return {
        **body,
        "metadata": {**body["metadata"], "name": "e" + body["metadata"]["name"]},
        "spec": spec,
    }


def _record_by_kind(trial: Trial, tick: int) -> None:
    """Per kind: creates, and their lag after the tick (p50, p99, the last): the ratio of
    the Exports' last create to the Jobs' is the price of a CRD kind in the same herd."""
    by_kind: dict[str, Any] = {}
    for resource in sorted(measure.FIRED):
        lags = sorted(
            r.received - tick
            for r in trial.tail.requests
            if r.verb == "create" and r.resource == resource and r.code == 201
        )
        if lags:
            by_kind[resource] = {
                "created": len(lags),
                "p50": round(_q(lags, 0.5), 3),
                "p99": round(_q(lags, 0.99), 3),
                "last": round(lags[-1], 3),
            }
    if "jobs" in by_kind and "exports" in by_kind:
        by_kind["ratio_last"] = round(by_kind["exports"]["last"] / by_kind["jobs"]["last"], 2)
    trial.result["by_kind"] = by_kind
    log(f"{trial.scenario.id} n={trial.n}: by kind {by_kind}")


# -- shards ------------------------------------------------------------------------------


async def _shard_holders(trial: Trial) -> dict[int, str]:
    """The holder of each of the scenario's shard Leases (held ones only)."""
    count = trial.scenario.shards
    listed = await trial.api.get(f"/apis/coordination.k8s.io/v1/namespaces/{NAMESPACE}/leases")
    held = {}
    for lease in listed.get("items") or []:
        for index in range(count):
            if lease["metadata"]["name"] == f"{LEASE}-{index}-of-{count}":
                holder = (lease.get("spec") or {}).get("holderIdentity") or ""
                if holder:
                    held[index] = holder
    return held


async def _start_sharded(trial: Trial) -> OperatorProcess:
    """R replicas with --shards S, once every shard is held and the split is even (+-1)."""
    cprofile = trial.settings.profiler == "cprofile"
    replicas = [
        start_operator(
            trial.cluster,
            trial.workdir,
            f"bench-{chr(ord('a') + i)}",
            trial.profile,
            trial.settings.source,
            cprofile=cprofile,
            extra=("--shards", str(trial.scenario.shards)),
        )
        for i in range(trial.scenario.replicas)
    ]
    trial.operators.extend(replicas)

    async def even() -> bool:
        held = await _shard_holders(trial)
        counts = [sum(1 for h in held.values() if h == r.identity) for r in replicas]
        return len(held) == trial.scenario.shards and max(counts) - min(counts) <= 1

    await wait_for("an even split of the shards", even, 120, 0.5)
    trial.result["split"] = {r.identity: 0 for r in replicas}
    for holder in (await _shard_holders(trial)).values():
        trial.result["split"][holder] += 1
    log(f"shards split {trial.result['split']}")
    return replicas[0]


async def _kill_one_sharded(trial: Trial, at: float, created: list[dict[str, Any]]) -> None:
    """kill -9 the replica holding the most shards at `at`; which schedules it fired."""
    await sleep_until(at)
    held = await _shard_holders(trial)
    # Not the first replica: the observation scrapes it and reads its peak RSS.
    victim = max(trial.operators[1:], key=lambda op: trial.result["split"][op.identity])
    victim_id = victim.identity
    victim.kill()
    killed = wall()
    dead = sorted(i for i, h in held.items() if h == victim_id)
    trial.result["kill"] = {"replica": victim_id, "killed": killed, "shards": dead}
    log(f"killed {victim_id} (shards {dead}) {killed - at + 20:+.1f}s after the first tick")


def _record_replicas(trial: Trial, created: list[dict[str, Any]]) -> None:
    """Per replica: Jobs created and CPU while firing; with a kill, the skew of the
    killed replica's shards after the kill and of the others'."""
    requests = trial.tail.requests
    creates = [r for r in requests if r.verb == "create" and r.resource == "jobs" and r.code == 201]
    cpu = (trial.result.get("cpu_firing") or {}).get("seconds") or {}
    trial.result["replicas"] = {
        op.identity: {
            "creates": sum(1 for r in creates if r.agent == op.user_agent),
            "cpu_firing": cpu.get(f"operator {op.identity}"),
        }
        for op in trial.operators
    }
    kill = trial.result.get("kill")
    if kill is None:
        return
    count = trial.scenario.shards
    shard = {o["metadata"]["name"]: shard_of(o["metadata"]["uid"], count) for o in created}
    dead = set(kill["shards"])
    skews: dict[str, list[float]] = {"dead": [], "others": [], "others_before": []}
    for name, skew, received in _create_skews(trial, creates):
        if received < kill["killed"]:
            if shard.get(name) not in dead:
                skews["others_before"].append(skew)
            continue
        skews["dead" if shard.get(name) in dead else "others"].append(skew)
    trial.result["kill"]["skew"] = {
        group: {"n": len(v), "p50": _q(v, 0.5), "p99": _q(v, 0.99), "max": max(v, default=0.0)}
        for group, v in skews.items()
    }


def _create_skews(trial: Trial, creates: list[Any]) -> list[tuple[str, float, float]]:
    """(schedule, skew, received) of each Job create."""
    out = []
    for r in creates:
        parsed = measure.split_job_name(r.name)
        if parsed:
            out.append((parsed[0], r.received - float(parsed[1]), r.received))
    return out


def _q(values: list[float], q: float) -> float:
    if not values:
        return math.nan
    ordered = sorted(values)
    return round(ordered[min(len(ordered) - 1, int(q * len(ordered)))], 3)


async def _start_replicas(
    trial: Trial, *, failover: bool, extra: tuple[str, ...] = ()
) -> tuple[OperatorProcess, OperatorProcess | None]:
    """The leader, once it holds the Lease, and for failover a standby watching beside it."""
    cprofile = trial.settings.profiler == "cprofile"

    def start(identity: str) -> OperatorProcess:
        operator = start_operator(
            trial.cluster,
            trial.workdir,
            identity,
            trial.profile,
            trial.settings.source,
            cprofile=cprofile,
            extra=extra,
        )
        trial.operators.append(operator)
        return operator

    first = start("bench-a")

    async def leads() -> bool:
        return await lease_holder(trial.api) == first.identity

    await wait_for("the operator to take the Lease", leads, 60)
    if not failover:
        return first, None
    standby = start("bench-b")
    await wait_for("the standby to watch", lambda: standby.get("/readyz")[0] == 200, 60)
    return first, standby


def _punctual_tick(trial: Trial) -> tuple[float, int, str]:
    """(now, the tick, the expression firing at it): late enough for the set-up."""
    n = trial.n
    spread = trial.scenario.shape == "spread"
    # The tick must come after the operator has written every schedule's first status
    # (one rate-limited write per schedule): estimate, then check.
    qps = trial.profile.punctual()["qps"] or 1000.0  # None: no client cap
    setup_estimate = 4 + n / 150 + n / min(100.0, qps) * 1.15
    start = wall()
    if spread:
        tick = math.ceil((start + setup_estimate * trial.margin_factor + 8) / 60) * 60
    else:
        tick = math.ceil(start + setup_estimate * trial.margin_factor + 6)
    t = datetime.fromtimestamp(tick, UTC)
    expression = (
        f"H {t.minute} {t.hour} * * *" if spread else f"{t.second} {t.minute} {t.hour} * * *"
    )
    return start, tick, expression


def _cronschedules(n: int, expression: str) -> list[dict[str, Any]]:
    return [
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


def _expected_ticks(
    created: list[dict[str, Any]], expression: str, tick: int, *, spread: bool
) -> dict[str, float]:
    """The tick each created schedule must fire for (a spread's hashed from its uid)."""
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
    return expected


async def _await_first_statuses(trial: Trial, leader: OperatorProcess | None, tick: int) -> float:
    """Until the leader (None: any replica) has written every schedule's first status;
    when it wrote the last."""
    initial: set[str] = set()
    last_initial = 0.0

    def all_written() -> bool:
        nonlocal last_initial
        for r in trial.tail.poll():
            if (
                (
                    r.agent.startswith("punctual/")
                    if leader is None
                    else r.agent == leader.user_agent
                )
                and r.resource == "cronschedules/status"
                and r.code == 200
                and r.name not in initial
            ):
                initial.add(r.name)
                last_initial = max(last_initial, r.received)
        return len(initial) >= trial.n

    await wait_for(
        "the first status of every schedule", all_written, max(5.0, tick - wall() - 1), 0.5
    )
    return last_initial


async def _await_standby_index(trial: Trial, standby: OperatorProcess, tick: int) -> None:
    def standby_knows_all() -> bool:
        return (standby.metric("punctual_schedules") or 0) >= trial.n

    await wait_for("the standby's index", standby_knows_all, max(5.0, tick - wall() - 1.5), 0.5)


async def _kill_leader(trial: Trial, leader: OperatorProcess, tick: int) -> None:
    """SIGKILL the leader one second before the tick."""
    await sleep_until(tick - 1.0)
    leader.kill()
    killed = wall()
    log(f"killed the leader {leader.identity} {killed - tick:+.2f}s from the tick")
    trial.result["failover"] = {"killed": killed, "kill_before_tick": round(tick - killed, 3)}


def _record_failover(
    trial: Trial, killed: OperatorProcess, standby: OperatorProcess, tick: int
) -> None:
    """When the standby took the Lease and first created a Job, from the audit log."""
    requests = trial.tail.requests
    takeovers = measure.lease_takeovers(requests, lease=LEASE)
    by_standby = [t for t, a in takeovers if a == standby.user_agent]
    creates = [
        r.received
        for r in requests
        if r.agent == standby.user_agent
        and r.verb == "create"
        and r.resource == "jobs"
        and r.code == 201
    ]
    info = trial.result["failover"]
    info["takeover"] = by_standby[0] if by_standby else None
    info["takeover_after_tick"] = by_standby[0] - tick if by_standby else None
    info["first_create_after_tick"] = min(creates) - tick if creates else None
    info["first_create_after_kill"] = min(creates) - info["killed"] if creates else None
    info["creates_by_killed_leader"] = sum(
        1
        for r in requests
        if r.agent == killed.user_agent and r.verb == "create" and r.resource == "jobs"
    )


# -- one scenario -----------------------------------------------------------------------

BODIES: dict[str, Callable[[Trial], Awaitable[None]]] = {
    "raw": raw,
    "cronjob": cronjob,
    "punctual": punctual,
    "failover": punctual,
    "workloads": punctual,
}


async def execute(
    scenario: Scenario, n: int, settings: Settings, margin_factor: float = 1.0
) -> dict[str, Any]:
    """Run `scenario` with `n` schedules on a fresh cluster; its result."""
    return await Trial(scenario, n, settings, margin_factor).execute(BODIES[scenario.kind])
