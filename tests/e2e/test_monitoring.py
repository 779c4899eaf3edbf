"""A real Prometheus scrapes a real operator: every dashboard query, and the alerts, see data.

Why it exists: promtool's unit tests (tests/alerts/, `make alerts`) prove the alert
expressions on series written by hand; they cannot prove that the operator's metrics have
the names and labels those expressions and the Grafana dashboard assume. Here Debian's
Prometheus (the same package as promtool) scrapes `punctual run` on loopback every second,
as the chart's ServiceMonitor would (job = the metrics Service's name, `honor_labels`, the
target's namespace and pod), with the chart's PrometheusRule loaded. Schedules with known
outcomes run meanwhile: one fires every second, one is skipped by concurrencyPolicy Forbid,
one's Jobs fail, one's Jobs are refused by the API server, and one misses ticks while
suspended. Then every query of every dashboard panel, with Grafana's variables filled in
as Grafana would, returns data through Prometheus's HTTP API, the queries of those
outcomes return them, and the two alerts they should raise fire while the other two do not.

What it must never do: listen on anything but 127.0.0.1, leave its Prometheus running (it
is stopped by pid, in a finally), or touch a Prometheus it did not start.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import shutil
import subprocess
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml
from alert_rules import chart_rules
from localcluster import free_port

from .conftest import REPO, Cluster
from .operators import operators, wait_until
from .test_operator import apply, schedule

pytestmark = pytest.mark.e2e

HELM = REPO / ".cluster" / "bin" / "helm"
DASHBOARD = REPO / "charts" / "punctual" / "dashboards" / "punctual.json"
RELEASE = "punctual"
JOB = f"{RELEASE}-metrics"  # the chart's metrics Service: the ServiceMonitor's job label
SCRAPE_SECONDS = 1
STEP_SECONDS = 2  # the range queries' step, as Grafana's $__interval
# Grafana: $__rate_interval = max($__interval + scrape interval, 4 * scrape interval).
RATE_INTERVAL = f"{max(STEP_SECONDS + SCRAPE_SECONDS, 4 * SCRAPE_SECONDS)}s"


def need(tool: str) -> str:
    """The path of a tool that `make test-tools` installs; skip without it (fail in CI)."""
    path = shutil.which(tool)
    if path is None:
        message = f"needs {tool}: run `make test-tools` (Debian's prometheus package)"
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)
    return path


# -- Prometheus -----------------------------------------------------------------------


@dataclass
class Prometheus:
    """A Prometheus started by this test on 127.0.0.1, and its HTTP API."""

    proc: subprocess.Popen[bytes]
    port: int
    log: Path

    def api(self, path: str, **params: str) -> Any:
        query = urllib.parse.urlencode(params)
        url = f"http://127.0.0.1:{self.port}/api/v1/{path}?{query}"
        with urllib.request.urlopen(url, timeout=10) as resp:
            body = json.loads(resp.read())
        assert body["status"] == "success", body
        return body["data"]

    def ready(self) -> bool:
        try:
            url = f"http://127.0.0.1:{self.port}/-/ready"
            with urllib.request.urlopen(url, timeout=2) as resp:
                return bool(resp.status == 200)
        except OSError:
            return False

    def query_range(self, expr: str, start: float, end: float) -> list[dict[str, Any]]:
        data = self.api(
            "query_range", query=expr, start=str(start), end=str(end), step=f"{STEP_SECONDS}s"
        )
        return list(data["result"])

    def alerts(self) -> list[dict[str, Any]]:
        return list(self.api("alerts")["alerts"])


@contextlib.contextmanager
def prometheus(
    binary: str, workdir: Path, target: str, labels: dict[str, str], rules: dict[str, Any]
) -> Iterator[Prometheus]:
    """Prometheus scraping `target` every second as job JOB, with `rules` loaded."""
    workdir.mkdir(parents=True, exist_ok=True)
    rules_file = workdir / "rules.yaml"
    rules_file.write_text(yaml.safe_dump(rules, sort_keys=False))
    config = {
        "global": {
            "scrape_interval": f"{SCRAPE_SECONDS}s",
            "scrape_timeout": f"{SCRAPE_SECONDS}s",
            "evaluation_interval": f"{SCRAPE_SECONDS}s",
        },
        "rule_files": [str(rules_file)],
        "scrape_configs": [
            {
                "job_name": JOB,
                # As the chart's ServiceMonitor: the schedule's namespace label wins.
                "honor_labels": True,
                "static_configs": [{"targets": [target], "labels": labels}],
            }
        ],
    }
    config_file = workdir / "prometheus.yml"
    config_file.write_text(yaml.safe_dump(config))
    port = free_port()
    log = workdir / "prometheus.log"
    with log.open("ab") as out:
        proc = subprocess.Popen(
            [
                binary,
                f"--config.file={config_file}",
                f"--storage.tsdb.path={workdir / 'data'}",
                f"--web.listen-address=127.0.0.1:{port}",
                "--log.level=warn",
            ],
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
        )
    prom = Prometheus(proc, port, log)
    try:
        wait_until(
            lambda: prom.ready() or proc.poll() is not None, 60, what="Prometheus to be ready"
        )
        assert proc.poll() is None, f"Prometheus exited:\n{log.read_text()[-3000:]}"
        yield prom
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)


# -- the dashboard ----------------------------------------------------------------------


@dataclass(frozen=True)
class Query:
    panel: str
    legend: str
    expr: str


def dashboard_queries(variables: dict[str, str]) -> list[Query]:
    """Every panel target's PromQL, with Grafana's variables replaced by `variables`."""
    dashboard = json.loads(DASHBOARD.read_text())
    queries = []
    panels = list(dashboard["panels"])
    for panel in panels:
        panels.extend(panel.get("panels") or [])  # panels inside collapsed rows
        for target in panel.get("targets") or []:
            expr = target["expr"]
            # Longest names first, so that $namespace never eats a $name.
            for name in sorted(variables, key=len, reverse=True):
                expr = expr.replace("${" + name + "}", variables[name])
                expr = expr.replace("$" + name, variables[name])
            assert "$" not in expr, f"unsubstituted variable in {panel['title']!r}: {expr}"
            queries.append(Query(panel["title"], target.get("legendFormat", ""), expr))
    return queries


def template_queries() -> list[tuple[str, str]]:
    """(variable, `label_values(metric, label)` of its query) for each query variable."""
    out = []
    for var in json.loads(DASHBOARD.read_text())["templating"]["list"]:
        if var["type"] == "query":
            definition = var["definition"]
            assert definition.startswith("label_values(") and definition.endswith(")")
            metric, label = (s.strip() for s in definition[len("label_values(") : -1].split(","))
            out.append((metric, label))
    return out


def peak(series: dict[str, Any]) -> float:
    """The highest finite value of a range query's series (NaN when it has none)."""
    values = [float(v) for _, v in series["values"] if math.isfinite(float(v))]
    return max(values) if values else math.nan


# -- the test -------------------------------------------------------------------------


def failing(name: str) -> dict[str, Any]:
    """Every second, and every Job's pod fails (the local cluster's kwok stage)."""
    obj = schedule(name, "* * * * * *", run_ms=200)
    pod = obj["spec"]["jobTemplate"]["spec"]["template"]
    pod["metadata"]["annotations"]["punctual.dev/test-outcome"] = "fail"
    return obj


def refused(name: str) -> dict[str, Any]:
    """Every second, and the API server refuses every Job (a Job's pods cannot restart Always)."""
    obj = schedule(name, "* * * * * *")
    obj["spec"]["jobTemplate"]["spec"]["template"]["spec"]["restartPolicy"] = "Always"
    return obj


def suspend(cluster: Cluster, namespace: str, name: str, value: bool) -> None:
    patch = json.dumps({"spec": {"suspend": value}})
    cluster.kubectl("patch", "-n", namespace, "cronschedule", name, "--type=merge", "-p", patch)


def test_dashboard_queries_and_alerts_see_known_firings(
    crd: Cluster, namespace: str, tmp_path: Path
) -> None:
    if crd.local is None:
        pytest.skip("needs the local control plane (its kwok stage fails annotated pods)")
    binary = need("prometheus")
    # The chart's rules for a release in the test's namespace: its pods' own series
    # (punctual_leader) carry the target's namespace, as a ServiceMonitor's would.
    rules = chart_rules(HELM, release=RELEASE, namespace=namespace)
    with operators(crd, namespace, tmp_path) as ops:
        op = ops.start("mon")
        wait_until(lambda: op.get("/readyz")[0] == 200, 30, what="readiness")
        target = f"127.0.0.1:{op.metrics_port}"
        labels = {"namespace": namespace, "pod": "mon"}
        with prometheus(binary, tmp_path / "prometheus", target, labels, rules) as prom:
            started = time.time()
            resumed = schedule("resumed", "* * * * * *", suspend=True)
            apply(
                crd,
                namespace,
                schedule("sec", "* * * * * *"),
                schedule("busy", "* * * * * *", run_ms=4000, concurrencyPolicy="Forbid"),
                failing("fails"),
                refused("refused"),
                resumed,
            )
            # Two suspensions of 4 s each: on resume the backlog runs its newest tick
            # (RunLatest) and records the others as missed. The first resume creates the
            # schedule's counter at its count (a series the dashboard must show in full),
            # the second moves a counter Prometheus has seen (increase()).
            for _ in range(2):
                time.sleep(4)
                suspend(crd, namespace, "resumed", False)
                time.sleep(3)
                suspend(crd, namespace, "resumed", True)

            variables = {
                "job": JOB,
                "namespace": namespace,
                "__rate_interval": RATE_INTERVAL,
                "__interval": f"{STEP_SECONDS}s",
                "datasource": "prometheus",
            }
            queries = dashboard_queries(variables)
            assert len(queries) >= 10
            known = known_firings(namespace)

            def all_have_data() -> dict[Query, list[dict[str, Any]]] | None:
                results = {q: prom.query_range(q.expr, started, time.time()) for q in queries}
                if any(not r for r in results.values()):
                    return None
                for query, check in known.items():
                    if not check(results[dashboard_query(queries, *query)]):
                        return None
                return results

            try:
                results = wait_until(all_have_data, 60, interval=2, what="dashboard data")
            except AssertionError:
                now = time.time()
                empty = [q for q in queries if not prom.query_range(q.expr, started, now)]
                unseen = []
                for panel, legend in known:
                    expr = dashboard_query(queries, panel, legend).expr
                    if not known[panel, legend](prom.query_range(expr, started, now)):
                        unseen.append((panel, legend, expr))
                raise AssertionError(f"no data: {empty}\nfirings not seen: {unseen}") from None
            assert all(r for r in results.values())

            for metric, label in template_queries():
                values = prom.api(f"label/{label}/values", **{"match[]": metric})
                assert values, f"label_values({metric}, {label}) is empty"
            assert JOB in prom.api("label/job/values", **{"match[]": "punctual_leader"})

            def alerts_settled() -> dict[str, list[dict[str, str]]] | None:
                firing: dict[str, list[dict[str, str]]] = {}
                for alert in prom.alerts():
                    firing.setdefault(alert["labels"]["alertname"], []).append(
                        {**alert["labels"], "state": alert["state"]}
                    )
                wanted = {
                    ("PunctualJobsFailing", "fails"),
                    ("PunctualTicksMissed", "resumed"),
                }
                have = {
                    (name, a.get("schedule", ""))
                    for name, alerts in firing.items()
                    for a in alerts
                    if a["state"] == "firing" and a.get("namespace") == namespace
                }
                return firing if wanted <= have else None

            firing = wait_until(alerts_settled, 30, interval=1, what="the two alerts")
            assert "PunctualNoLeader" not in firing, firing
            assert "PunctualFiringLagHigh" not in firing, firing
            failing_schedules = {a["schedule"] for a in firing["PunctualJobsFailing"]}
            assert failing_schedules == {"fails"}, firing
            # Not only "resumed" may alert: on a loaded machine a pass can come more than a
            # second late, and RunLatest then rightly misses an every-second tick (one whose
            # Job was never created; ticks fired on their claim made ahead are not counted).
            assert "resumed" in {a["schedule"] for a in firing["PunctualTicksMissed"]}
        assert prom.proc.poll() is not None  # stopped by pid, not left running


def dashboard_query(queries: list[Query], panel: str, legend: str) -> Query:
    [query] = [q for q in queries if q.panel == panel and q.legend.startswith(legend)]
    return query


def known_firings(
    namespace: str,
) -> dict[tuple[str, str], Callable[[list[dict[str, Any]]], bool]]:
    """What the schedules above must show, by (panel title, start of the legend)."""

    def has(peak_above: float, **labels: str) -> Callable[[list[dict[str, Any]]], bool]:
        def check(result: list[dict[str, Any]]) -> bool:
            return any(
                all(s["metric"].get(k) == v for k, v in labels.items()) and peak(s) > peak_above
                for s in result
            )

        return check

    return {
        ("Leader", "leading"): has(0.5),
        ("Schedules known", "schedules"): has(4.5),
        ("Firing lag", "p99"): has(-1.0),  # a finite value: Jobs were created
        ("Jobs created", "{{namespace}}"): has(0, namespace=namespace, schedule="sec"),
        ("Ticks skipped by reason", "{{reason}}"): has(0, reason="concurrencyPolicy=Forbid"),
        ("Ticks missed", "{{namespace}}"): has(0, namespace=namespace, schedule="resumed"),
        ("Failed Jobs", "{{namespace}}"): has(0, namespace=namespace, schedule="fails"),
        ("Failed Jobs", "create rejected"): has(0, namespace=namespace, schedule="refused"),
        ("API requests", "{{verb}}"): has(0, verb="post", code="201"),
    }
