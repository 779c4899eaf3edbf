"""/metrics against what the API server saw: the counters move by the right amounts."""

from __future__ import annotations

import json
import re
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from .conftest import Cluster
from .operators import job_creates, operators, wait_until
from .test_operator import apply, get, schedule

pytestmark = pytest.mark.e2e


def sample(text: str, name: str, **labels: str) -> float:
    """The value of one sample in Prometheus text format (0 if absent)."""
    for line in text.splitlines():
        if line.startswith("#") or not line.startswith(name):
            continue
        match = re.fullmatch(r"([a-z_]+)(\{(.*)\})? (\S+)", line)
        if not match or match.group(1) != name:
            continue
        found = dict(re.findall(r'(\w+)="([^"]*)"', match.group(3) or ""))
        if all(found.get(k) == v for k, v in labels.items()):
            return float(match.group(4))
    return 0.0


def test_metrics_count_firings_skips_and_lag(crd: Cluster, namespace: str, tmp_path: Path) -> None:
    if crd.audit_log is None:
        pytest.skip("needs the local control plane's audit log")
    with operators(crd, namespace, tmp_path) as ops:
        op = ops.start("metrics")
        wait_until(lambda: _ok(op.metrics_port, "/readyz"), 30, what="readiness")
        assert _ok(op.metrics_port, "/healthz")
        apply(
            crd,
            namespace,
            schedule("sec", "* * * * * *"),
            schedule("busy", "* * * * * *", run_ms=4000, concurrencyPolicy="Forbid"),
        )
        time.sleep(8)
        text = op.scrape()
        after = [c for c in job_creates(crd, namespace) if c.code == 201]

    sec = len([c for c in after if c.name.startswith("sec-")])
    busy = len([c for c in after if c.name.startswith("busy-")])
    assert sample(text, "punctual_jobs_created_total", namespace=namespace, schedule="sec") == sec
    assert sample(text, "punctual_jobs_created_total", namespace=namespace, schedule="busy") == busy
    assert sample(text, "punctual_firing_lag_seconds_count") == sec + busy
    assert sample(text, "punctual_firing_lag_seconds_bucket", le="1.0") >= 0.9 * (sec + busy)
    skipped = sample(
        text,
        "punctual_ticks_skipped_total",
        namespace=namespace,
        schedule="busy",
        reason="concurrencyPolicy=Forbid",
    )
    events = json.loads(crd.kubectl("get", "events", "-n", namespace, "-o", "json").stdout)["items"]
    skip_events = [
        e
        for e in events
        if e["involvedObject"]["name"] == "busy"
        and e["reason"] == "Skipped"
        and e["source"].get("component") == "punctual"
    ]
    assert skipped >= 3
    assert skipped <= len(skip_events)
    assert sample(text, "punctual_leader") == 1
    assert sample(text, "punctual_leader_epoch") == 0  # the first holder of a new Lease
    assert sample(text, "punctual_schedules") == 2
    assert sample(text, "punctual_schedules_indexed") == 2
    assert sample(text, "punctual_synced") == 1
    # Two schedules firing every second hold the loop for milliseconds, not a second.
    assert 0 <= sample(text, "punctual_event_loop_lag_seconds") < 1.0
    assert sample(text, "punctual_api_requests_total", verb="post", code="201") >= sec + busy
    assert sample(text, "punctual_passes_total") >= sec + busy + skipped  # one decided each
    assert abs(sample(text, "punctual_clock_offset_seconds")) < 1.0  # same machine, same clock
    status = get(crd, namespace, "cronschedule", "busy")["status"]
    assert any(f["outcome"] == "Skipped" for f in status["recentFirings"])


def _ok(port: int, path: str) -> bool:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=2) as resp:
            return bool(resp.status == 200)
    except (urllib.error.URLError, ConnectionError, OSError):
        return False
