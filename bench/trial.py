"""One scenario at one N on one fresh cluster: the frame every scenario runs in.

Why it exists: each scenario (the raw limit, CronJobs, Punctual, Punctual's failover)
needs the same frame: a fresh control plane, the bench namespace, the harness's client,
an audit tail, the header of its result, and afterwards the operators stopped, the logs
kept and the cluster torn down, also on errors and Ctrl-C. `Trial` is that frame and the
state a scenario shares with observing.py; scenarios.py says what happens inside it.

What it must never do: leave a process or a cluster running after `Trial.execute`
returns or raises, or do anything at import time.
"""

from __future__ import annotations

import contextlib
import gzip
import json
import os
import shutil
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import measure
from clock import log, wall
from cluster import CRONJOB_KCM, BenchCluster, make_cluster
from kubeapi import prepare_namespace
from operatorprocess import OperatorProcess
from settings import ARTIFACTS, HARNESS_AGENT, Profile, Scenario, Settings

from punctual.kube.client import KubeClient
from punctual.kube.credentials import load_kubeconfig


@dataclass
class Trial:
    """One scenario at one N on one fresh cluster."""

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
        """Every process measured: the control plane's components and the operators."""
        pids = {k: v for k, v in self.cluster.pids.items()}
        for op in self.operators:
            pids[f"operator {op.identity}"] = op.pid
        return pids

    async def execute(self, body: Callable[[Trial], Awaitable[None]]) -> dict[str, Any]:
        """Run `body` on a fresh cluster, torn down afterwards; the scenario's result."""
        started = self._prepare()
        try:
            self._start_cluster()
            self.result["versions"] = await self._versions()
            if self.cluster.overloaded:
                self.result["overload"] = self.cluster.describe_overload()
            credentials = load_kubeconfig(self.cluster.kubeconfig)
            async with KubeClient(credentials, user_agent=HARNESS_AGENT, timeout=120) as api:
                self.api = api
                self.tail = measure.AuditTail(self.cluster.audit_log)
                await prepare_namespace(api)
                await body(self)
            if credentials.ca_file and credentials.ca_file.startswith("/tmp/"):
                Path(credentials.ca_file).unlink(missing_ok=True)
        finally:
            for op in self.operators:
                op.stop(timeout=30.0)
            self._keep_artifacts()
            self.cluster.down()
        self.result["duration"] = round(wall() - started, 1)
        return self.result

    def _prepare(self) -> float:
        """An empty artifacts folder, the cluster's leftovers gone, the result's header."""
        suffix = f"-{self.settings.profiler}" if self.settings.profiler else ""
        self.workdir = ARTIFACTS / f"{self.scenario.id}-{self.n}{suffix}"
        shutil.rmtree(self.workdir, ignore_errors=True)
        self.workdir.mkdir(parents=True)
        self.cluster = make_cluster(
            self.profile, self.settings.pod_run_ms, overloaded=self.scenario.overload
        )
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
        return started

    def _start_cluster(self) -> None:
        try:
            self.cluster.up()
        except RuntimeError as error:  # a component that died starting: once more
            log(f"control plane start failed, starting it again: {error}")
            self.cluster.down()
            self.cluster.up()

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
