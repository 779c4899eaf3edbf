"""Fault campaigns over every-second schedules, with the API server's audit log as the oracle.

Why it exists: `make test` runs a short campaign of five kinds of fault (tests/e2e/
test_chaos.py) and `make chaos` a long one of nine, with the fencing policy bound and each
replica in a network namespace of its own (tests/e2e/test_chaos_campaign.py); both inflict
the same faults on the same schedules and are judged by the same oracle, kept here once:

- `Campaign`: the replicas, and `inflict(kind)` for each kind of fault in `KINDS`: kill -9
  and SIGSTOP of the leader, an API server restart, a Job deleted as it appears, the Lease
  deleted, etcd killed, the leader's network cut past its Lease and every API answer
  slowed 1-3 s (those two through a `Network`: e2e/chaosnet.py), kube-controller-manager
  restarted;
- `run`: three every-second schedules and one whose Jobs go on their own
  (`ttlSecondsAfterFinished: 0`), under RunAll with a 30 s deadline, the faults in a
  shuffled order;
- `judge`: exactly one create per (schedule, tick) and a Job for every tick, and a table
  with a row per kind of fault (the ticks due after a fault, until the next one, count
  against it): Jobs, duplicates, lost ticks, stale creates the fence refused, lag p50/p99.
"""

from __future__ import annotations

import bisect
import contextlib
import json
import os
import random
import signal
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path

import yaml
from chaosnet import DelayProxy, Namespaces

from .conftest import Cluster
from .operators import (
    Create,
    Operators,
    explain_gaps,
    job_creates,
    later_writes,
    now,
    present,
    tick_of,
    wait_until,
)
from .test_operator import apply, leader_of, schedule

KINDS = (
    "kill -9",
    "SIGSTOP past the Lease",
    "API server restart",
    "Job deleted",
    "Lease deleted",
    "etcd kill -9 and restart",
    "leader's network cut past the Lease",
    "API server slowed 1-3 s",
    "controller-manager restart",
)
FIRST_FIVE = KINDS[:5]  # the kinds that need no network of the campaign's own
NEEDS_LEADER = {"kill -9", "SIGSTOP past the Lease", "leader's network cut past the Lease"}
SCHEDULES = ("c0", "c1", "c2", "cttl")
BEFORE = "(before the first fault)"


@dataclass(frozen=True)
class Network:
    """The replicas' own path to the API server: their network namespaces, the delaying
    proxy, and the kubeconfig that names it."""

    namespaces: Namespaces
    proxy: DelayProxy
    kubeconfig: Path


@dataclass
class Campaign:
    cluster: Cluster
    namespace: str
    ops: Operators
    rng: random.Random
    network: Network | None = None  # None: the replicas reach the API server directly
    deletable: tuple[str, ...] = SCHEDULES[:3]  # "Job deleted" picks one of their Jobs
    replicas: int = 0
    netns: list[str] = field(default_factory=list)  # each started replica's namespace
    faults: Counter[str] = field(default_factory=Counter)
    log: list[tuple[datetime, str]] = field(default_factory=list)  # when each fault began

    def start_replica(self) -> None:
        flags = tuple(os.environ.get("CHAOS_FLAGS", "").split())  # e.g. --log-level DEBUG
        if self.network is None:
            self.ops.start(f"x{self.replicas}", *flags)
        else:
            netns = self.network.namespaces.add(self.replicas)
            self.netns.append(netns)
            self.ops.start(
                f"x{self.replicas}",
                *flags,
                env={"KUBECONFIG": str(self.network.kubeconfig)},
                wrapper=tuple(self.network.namespaces.wrapper(netns)),
            )
        self.replicas += 1

    def alive(self) -> dict[str, int]:
        return {op.identity: i for i, op in enumerate(self.ops.started) if op.proc.poll() is None}

    def leader(self) -> int | None:
        name = leader_of(self.cluster, self.namespace)
        return self.alive().get(name)

    def wait_leader(self, timeout: float = 30) -> int | None:
        """The leader, waiting for one while a hand-over (after the last fault) goes on."""
        end = time.monotonic() + timeout
        while (leader := self.leader()) is None and time.monotonic() < end:
            time.sleep(0.25)
        return leader

    def kubectl(self, *args: str) -> None:
        self.cluster.kubectl(*args, "-n", self.namespace, check=False)

    def inflict(self, kind: str) -> None:
        local = self.cluster.local
        assert local is not None
        leader = self.wait_leader() if kind in NEEDS_LEADER else None
        if kind in NEEDS_LEADER and leader is None:
            return  # no leader for 30 s: nothing to hit (the lost ticks will say why)
        began = now()
        if kind == "kill -9" and leader is not None:
            op = self.ops.started[leader]
            op.signal(signal.SIGKILL)
            op.proc.wait(5)
            self.start_replica()
        elif kind == "SIGSTOP past the Lease" and leader is not None:
            op = self.ops.started[leader]
            op.signal(signal.SIGSTOP)
            time.sleep(8)  # the Lease is 6 s: a standby takes over meanwhile
            op.signal(signal.SIGCONT)
        elif kind == "API server restart":
            local.stop("kube-apiserver")
            time.sleep(self.rng.uniform(1, 4))
            local.start("kube-apiserver")
            local.wait_ready(60)
        elif kind == "Job deleted":
            name = self.rng.choice(self.deletable)
            before = self.jobs(name)
            try:
                fresh = wait_until(lambda: sorted(self.jobs(name) - before), 30, interval=0.05)
            except AssertionError:
                return  # nothing fired meanwhile
            began = now()
            self.kubectl("delete", "job", fresh[0], "--cascade=background", "--wait=false")
        elif kind == "Lease deleted":
            self.kubectl("delete", "lease", "punctual-leader", "--wait=false")
        elif kind == "etcd kill -9 and restart":
            local.stop("etcd", sig=signal.SIGKILL)
            time.sleep(self.rng.uniform(1, 4))
            local.start("etcd")
            local.wait_ready(60)
        elif kind == "leader's network cut past the Lease" and leader is not None:
            assert self.network is not None, "a network fault needs the campaign's network"
            netns = self.netns[leader]
            self.network.namespaces.drop(netns)
            try:
                time.sleep(self.rng.uniform(8, 11))  # the Lease is 6 s
            finally:
                self.network.namespaces.restore(netns)
        elif kind == "API server slowed 1-3 s":
            assert self.network is not None, "a network fault needs the campaign's network"
            self.network.proxy.slow = True
            try:
                time.sleep(self.rng.uniform(8, 12))
            finally:
                self.network.proxy.slow = False
        elif kind == "controller-manager restart":
            local.stop("kube-controller-manager")
            time.sleep(self.rng.uniform(1, 4))
            local.start("kube-controller-manager")
            local.wait_serving("kube-controller-manager", 60)
        else:
            raise ValueError(f"unknown fault {kind!r}")
        self.faults[kind] += 1
        self.log.append((began, kind))
        print(f"{began:%H:%M:%S.%f} fault {sum(self.faults.values())}: {kind}", flush=True)

    def jobs(self, name: str) -> set[str]:
        out = self.cluster.kubectl(
            "get", "jobs", "-n", self.namespace, "-l", f"punctual.dev/schedule={name}",
            "-o", "jsonpath={.items[*].metadata.name}", check=False,
        )  # fmt: skip
        return set(out.stdout.split())


@contextlib.contextmanager
def chaos_network(cluster: Cluster, workdir: Path) -> Iterator[Network]:
    """The operators' path to the API server: a bridge for their namespaces, the delay
    proxy on the bridge's address, and a kubeconfig naming the proxy. Everything made is
    removed on the way out, whatever happened."""
    local = cluster.local
    assert local is not None
    with Namespaces(local.port_base) as net:
        upstream = (local.host, local.ports.apiserver)
        with DelayProxy(
            (net.gateway, 0), upstream, seed=int(os.environ.get("CHAOS_SEED", "7"))
        ) as proxy:
            config = yaml.safe_load(cluster.kubeconfig.read_text())
            for entry in config["clusters"]:
                entry["cluster"]["server"] = f"https://{net.gateway}:{proxy.port}"
                entry["cluster"]["tls-server-name"] = "localhost"  # in the serving certificate
            kubeconfig = workdir / "kubeconfig-through-proxy"
            kubeconfig.write_text(json.dumps(config))
            kubeconfig.chmod(0o600)
            yield Network(net, proxy, kubeconfig)


def run(
    campaign: Campaign, kinds: tuple[str, ...], count: int, interval: float
) -> tuple[datetime, datetime]:
    """Two replicas, the schedules, then `count` faults of `kinds` in a shuffled order,
    `interval / 2` to `interval` seconds apart; returns when the faults began and when
    the last outage was over. The schedules are suspended at the end."""
    cluster, namespace = campaign.cluster, campaign.namespace
    campaign.start_replica()
    campaign.start_replica()
    wait_until(lambda: campaign.leader() is not None, 30, what="a leader")
    every_second = {
        "missedRunPolicy": "RunAll",
        "maxMissedRuns": 100,
        "startingDeadlineSeconds": 30,
        "successfulJobsHistoryLimit": 2,
    }
    bodies = [schedule(f"c{i}", "* * * * * *", run_ms=200, **every_second) for i in range(3)]
    ttl = schedule("cttl", "* * * * * *", run_ms=200, **every_second)
    ttl["spec"]["jobTemplate"]["spec"]["ttlSecondsAfterFinished"] = 0
    apply(cluster, namespace, *bodies, ttl)
    time.sleep(4)
    started = now()
    order = [kinds[i % len(kinds)] for i in range(count)]
    campaign.rng.shuffle(order)
    for kind in order:
        campaign.inflict(kind)
        time.sleep(campaign.rng.uniform(interval / 2, interval))
        if len(campaign.alive()) < 2:
            campaign.start_replica()
    time.sleep(12)  # the last outage is over and RunAll has caught up
    finished = now()
    for name in SCHEDULES:
        cluster.kubectl("patch", "cronschedule", name, "-n", namespace, "--type=merge",
                        "-p", json.dumps({"spec": {"suspend": True}}))  # fmt: skip
    return started, finished


def explain(cluster: Cluster, namespace: str, duplicates: dict[str, int]) -> str:
    """Every create of each duplicated Job: when the API server received it, from whom, and
    its answer."""
    lines = [
        f"{c.name} {c.at.isoformat()} {c.user_agent} -> {c.code}"
        for c in job_creates(cluster, namespace)
        if c.name in duplicates
    ]
    return "\n".join(lines)


def explain_lost(cluster: Cluster, namespace: str, lost: dict[str, list[str]]) -> str:
    """Each lost tick, and what the audit log holds about it: every write naming its Job,
    and every write to its schedule from a second before to a second after."""
    parts = []
    for name, ticks in lost.items():
        for tick in map(datetime.fromisoformat, ticks):
            gap = [(tick - timedelta(seconds=1), tick + timedelta(seconds=1))]
            writes = explain_gaps(cluster, namespace, name, gap)
            parts.append(f"{name} {tick.isoformat()}:\n{writes}")
    return "\n".join(parts)


@dataclass
class Report:
    table: str
    duplicates: dict[str, int]
    lost: dict[str, list[str]]


def judge(
    cluster: Cluster,
    namespace: str,
    log: list[tuple[datetime, str]],
    started: datetime,
    finished: datetime,
) -> Report:
    """The oracle's verdict, and a table with one row per kind of fault: the ticks due
    after a fault (until the next one began) are counted against its kind."""
    ours = tuple(f"{name}-" for name in SCHEDULES)  # not the fencing probe
    every_create = [c for c in job_creates(cluster, namespace) if c.name.startswith(ours)]
    proofs = later_writes(cluster, namespace, ours)
    for name in present(cluster, namespace, ours):  # there still: it exists now
        proofs.setdefault(name, []).append(now())
    creates = committed(every_create, proofs)
    counts = Counter(c.name for c in creates)
    duplicates = {name: n for name, n in counts.items() if n > 1}
    lost: dict[str, list[str]] = {}
    missing_ticks: list[datetime] = []
    for name in SCHEDULES:
        fired = {tick_of(c.name) for c in creates if c.name.startswith(f"{name}-")}
        first = started.replace(microsecond=0) + timedelta(seconds=2)
        expected = [
            first + timedelta(seconds=s) for s in range(int((finished - first).total_seconds()) - 3)
        ]
        missing = [t for t in expected if t not in fired]
        missing_ticks += missing
        if missing:
            lost[name] = [t.isoformat() for t in missing]

    began = [at for at, _ in log]

    def kind_of(tick: datetime) -> str:
        i = bisect.bisect_right(began, tick)
        return log[i - 1][1] if i else BEFORE

    lags: dict[str, list[float]] = {}
    for c in creates:
        if c.at >= started:
            tick = tick_of(c.name)
            lags.setdefault(kind_of(tick), []).append((c.at - tick).total_seconds())
    dups = Counter(kind_of(tick_of(name)) for name in duplicates)
    losses = Counter(kind_of(t) for t in missing_ticks)
    refused = Counter(kind_of(tick_of(c.name)) for c in every_create if c.code == 403)
    faults = Counter(kind for _, kind in log)

    def row(label: str, count: str, values: list[float], dup: int, lost_: int, fen: int) -> str:
        p50, p99 = percentile(values, 0.50), percentile(values, 0.99)
        return (
            f"| {label} | {count} | {len(values)} | {dup} | {lost_} | {fen} "
            f"| {p50:.2f} s | {p99:.2f} s |"
        )

    def kind_row(k: str, count: str) -> str:
        return row(k, count, lags.get(k, []), dups[k], losses[k], refused[k])

    rows = [kind_row(BEFORE, "-")] if lags.get(BEFORE) or losses[BEFORE] else []
    rows += [kind_row(k, str(faults[k])) for k in KINDS if faults[k] or k in lags]
    every = [lag for values in lags.values() for lag in values]
    total = sum(faults.values())
    rows.append(row("all", str(total), every, len(duplicates), len(missing_ticks), refused.total()))
    table = "\n".join(
        [
            f"fault campaign: {(finished - started).total_seconds():.0f} s, "
            f"{total} faults of {len(faults)} kinds; "
            f"{sum(c.code != 201 for c in creates)} Jobs made by a create answered 5xx",
            "| fault | count | Jobs created | duplicates | lost ticks | stale creates fenced "
            "| lag p50 | lag p99 |",
            "|---|---|---|---|---|---|---|---|",
            *rows,
        ]
    )
    return Report(table, duplicates, lost)


def committed(creates: list[Create], proofs: dict[str, list[datetime]]) -> list[Create]:
    """The creates that made a Job: answered 201, or answered 5xx and proven by a later
    write to the Job before the next create of its name answered 201. A replica killed
    mid-create leaves its request to end with the connection: the API server commits
    the Job and records 504 (the kill -9 campaign counted 17 ticks of 40 faults as lost
    so, every one of them a Job later freed and deleted, most run to completion). A Job
    still there at the end is its own proof (`judge` adds it at the time it looked)."""
    made: list[Create] = []
    for i, c in enumerate(creates):
        if c.code == 201:
            made.append(c)
            continue
        if c.code < 500:
            continue
        until = next((d.at for d in creates[i + 1 :] if d.name == c.name and d.code == 201), None)
        if any(c.at < at and (until is None or at < until) for at in proofs.get(c.name, ())):
            made.append(c)
    return made


def percentile(values: list[float], q: float) -> float:
    if not values:
        return 0.0
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(len(ordered) * q))]
