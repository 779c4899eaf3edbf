"""The run lifecycle against the real control plane: buffering, pause on failure, suspend
until, and the freshness objective, with real `punctual run` processes.

kwok's pods run for as long as their annotation says and fail when asked, so Jobs last
seconds and fail on demand; the audit log is the oracle for "each tick at most once".
"""

from __future__ import annotations

import itertools
import json
import os
import signal
import subprocess
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from .conftest import Cluster
from .operators import now, operators, parse, tick_of, wait_until
from .test_operator import apply, assert_exactly_once, created, get, leader_of, schedule

pytestmark = pytest.mark.e2e


@pytest.fixture
def workdir(tmp_path: Path) -> Path:
    return tmp_path


def failing(body: dict[str, Any]) -> dict[str, Any]:
    """The schedule with pods that fail (kwok's pod-fail stage)."""
    pod = body["spec"]["jobTemplate"]["spec"]["template"]["metadata"]
    pod["annotations"]["punctual.dev/test-outcome"] = "fail"
    return body


def condition(status: dict[str, Any], kind: str) -> dict[str, Any]:
    return next((c for c in status.get("conditions") or [] if c["type"] == kind), {})


def status_of(cluster: Cluster, namespace: str, name: str) -> dict[str, Any]:
    return dict(get(cluster, namespace, "cronschedule", name).get("status") or {})


def jobs_of(cluster: Cluster, namespace: str, name: str) -> list[dict[str, Any]]:
    items = get(cluster, namespace, "jobs")["items"]
    return [j for j in items if j["metadata"]["name"].startswith(name + "-")]


def test_buffer_all_fires_each_buffered_tick_once_one_job_at_a_time_across_a_leader_kill(
    crd: Cluster, namespace: str, workdir: Path
) -> None:
    if crd.audit_log is None:
        pytest.skip("needs the local control plane's audit log")
    with operators(crd, namespace, workdir) as ops:
        replicas = {"b0": ops.start("b0"), "b1": ops.start("b1")}
        wait_until(lambda: leader_of(crd, namespace) in replicas, 20, what="a leader")
        body = schedule("buf", "* * * * * *", run_ms=2500, concurrencyPolicy="BufferAll",
                        maxBuffered=2, successfulJobsHistoryLimit=30)  # fmt: skip
        apply(crd, namespace, body)
        seen_buffered: set[str] = set()

        def buffered_now() -> list[str]:
            names = [b["job"] for b in status_of(crd, namespace, "buf").get("buffered") or []]
            seen_buffered.update(names)
            return names

        wait_until(buffered_now, 20, what="a buffered tick")
        leader = leader_of(crd, namespace)
        replicas[leader].signal(signal.SIGKILL)
        replicas[leader].proc.wait(5)
        replicas["b2"] = ops.start("b2")
        end = time.monotonic() + 20
        while time.monotonic() < end:
            buffered_now()
            time.sleep(0.3)
        status = status_of(crd, namespace, "buf")
        jobs = jobs_of(crd, namespace, "buf")

    creates = created(crd, namespace, "buf")
    assert_exactly_once(creates)
    fired = {c.name for c in creates}
    # Every tick that was buffered and is no longer in the buffer fired (or was recorded).
    still = {b["job"] for b in status.get("buffered") or []}
    recorded = {f.get("job") for f in status.get("recentFirings") or []}
    assert seen_buffered - still, "no buffered tick ever left the buffer"
    for name in seen_buffered - still:
        assert name in fired or name not in recorded, name
    fired_from_buffer = [c for c in creates if (c.at - tick_of(c.name)).total_seconds() > 1.5]
    assert fired_from_buffer, "no Job was created late, from the buffer"
    # One Job at a time: each Job was created after the one before it completed.
    done = sorted(
        (parse(j["metadata"]["creationTimestamp"]), parse(j["status"]["completionTime"]))
        for j in jobs
        if (j.get("status") or {}).get("completionTime")
    )
    for (_, finished), (started, _) in itertools.pairwise(done):
        assert started >= finished - timedelta(seconds=1), (started, finished)
    skipped = [f for f in status.get("recentFirings") or [] if f["outcome"] == "Skipped"]
    assert any("maxBuffered 2" in f["reason"] for f in skipped)


def test_buffer_one_keeps_the_first_tick_a_job_overruns_and_skips_the_rest(
    crd: Cluster, namespace: str, workdir: Path
) -> None:
    """Every second, Jobs of 2.5 s: while one runs, the first tick due waits in the buffer
    and fires as soon as it finishes; later ticks are skipped, naming the buffered one."""
    if crd.audit_log is None:
        pytest.skip("needs the local control plane's audit log")
    with operators(crd, namespace, workdir) as ops:
        ops.start("solo")
        wait_until(lambda: leader_of(crd, namespace) == "solo", 20, what="leadership")
        body = schedule("one", "* * * * * *", run_ms=2500, concurrencyPolicy="BufferOne",
                        successfulJobsHistoryLimit=30)  # fmt: skip
        apply(crd, namespace, body)
        seen: list[list[str]] = []

        def buffered_now() -> list[str]:
            names = [b["job"] for b in status_of(crd, namespace, "one").get("buffered") or []]
            seen.append(names)
            return names

        wait_until(buffered_now, 20, what="a buffered tick")
        end = time.monotonic() + 12
        while time.monotonic() < end:
            buffered_now()
            time.sleep(0.3)
        status = status_of(crd, namespace, "one")
        jobs = jobs_of(crd, namespace, "one")

    creates = created(crd, namespace, "one")
    assert_exactly_once(creates)
    assert max(len(names) for names in seen) == 1, "BufferOne kept more than one tick"
    fired = {c.name for c in creates}
    still = {b["job"] for b in status.get("buffered") or []}
    left = {name for names in seen for name in names} - still
    assert left and left <= fired, (left, fired)  # every tick that left the buffer fired
    assert any((c.at - tick_of(c.name)).total_seconds() > 1.5 for c in creates)
    done = sorted(
        (parse(j["metadata"]["creationTimestamp"]), parse(j["status"]["completionTime"]))
        for j in jobs
        if (j.get("status") or {}).get("completionTime")
    )
    assert len(done) >= 3
    for (_, finished), (started, _) in itertools.pairwise(done):
        assert started >= finished - timedelta(seconds=1), (started, finished)
    skipped = [f for f in status.get("recentFirings") or [] if f["outcome"] == "Skipped"]
    assert any("BufferOne" in f["reason"] and "already buffered" in f["reason"] for f in skipped)


def test_three_failed_jobs_pause_the_schedule_and_punctual_resume_resumes_it(
    crd: Cluster, namespace: str, workdir: Path
) -> None:
    body = failing(schedule("flaky", "*/2 * * * * *", run_ms=200,
                            pauseOnFailure={"consecutiveFailures": 3}))  # fmt: skip
    with operators(crd, namespace, workdir) as ops:
        ops.start("solo")
        wait_until(lambda: leader_of(crd, namespace) == "solo", 20, what="leadership")
        apply(crd, namespace, body)
        paused = wait_until(
            lambda: condition(status_of(crd, namespace, "flaky"), "Paused").get("status") == "True",
            60,
            what="the Paused condition",
        )
        assert paused
        status = status_of(crd, namespace, "flaky")
        count = len(created(crd, namespace, "flaky"))
        assert count == 3, f"{count} Jobs fired before the pause, 3 failures wanted"
        time.sleep(6)  # three more ticks pass: nothing fires
        assert len(created(crd, namespace, "flaky")) == count
        assert status["consecutiveFailures"] == 3
        assert "punctual resume flaky" in condition(status, "Paused")["message"]
        events = crd.kubectl("get", "events", "-n", namespace, "-o", "json").stdout
        assert '"reason": "Paused"' in events
        spec_before = get(crd, namespace, "cronschedule", "flaky")["spec"]

        resume = subprocess.run(
            [sys.executable, "-m", "punctual.cli", "resume", "flaky", "-n", namespace,
             "--kubeconfig", str(crd.kubeconfig)],
            capture_output=True, text=True, env={**os.environ}, timeout=60,
        )  # fmt: skip
        assert resume.returncode == 0, resume.stderr
        assert "was paused; resuming" in resume.stdout
        wait_until(lambda: len(created(crd, namespace, "flaky")) > count, 20, what="a new Job")
        after = status_of(crd, namespace, "flaky")
        assert condition(after, "Paused")["reason"] in ("Resumed", "ConsecutiveFailures")
        assert after["lastResume"]
        assert get(crd, namespace, "cronschedule", "flaky")["spec"] == spec_before


def test_suspend_until_fires_nothing_before_and_fires_again_after(
    crd: Cluster, namespace: str, workdir: Path
) -> None:
    until = (now() + timedelta(seconds=8)).replace(microsecond=0)
    with operators(crd, namespace, workdir) as ops:
        ops.start("solo")
        wait_until(lambda: leader_of(crd, namespace) == "solo", 20, what="leadership")
        apply(crd, namespace, schedule("later", "* * * * * *", suspendUntil=_rfc3339(until)))
        time.sleep(3)
        status = status_of(crd, namespace, "later")
        assert condition(status, "Suspended")["reason"] == "SuspendedUntil"
        wait_until(
            lambda: [c for c in created(crd, namespace, "later") if tick_of(c.name) >= until],
            20,
            what="a Job after suspendUntil",
        )
    assert not [c for c in created(crd, namespace, "later") if tick_of(c.name) < until]


def test_stale_appears_when_no_job_succeeds_in_time_and_clears_on_success(
    crd: Cluster, namespace: str, workdir: Path
) -> None:
    body = schedule("fresh", "*/10 * * * * *", run_ms=6000, successDeadlineSeconds=2)
    with operators(crd, namespace, workdir) as ops:
        ops.start("solo")
        wait_until(lambda: leader_of(crd, namespace) == "solo", 20, what="leadership")
        apply(crd, namespace, body)
        stale = wait_until(
            lambda: (
                condition(s := status_of(crd, namespace, "fresh"), "Stale").get("status") == "True"
                and s
            ),
            30,
            what="Stale",
        )
        message = condition(stale, "Stale")["message"]
        wait_until(
            lambda: condition(status_of(crd, namespace, "fresh"), "Stale").get("status") == "False",
            20,
            what="Stale to clear after the Job succeeded",
        )
        status = status_of(crd, namespace, "fresh")
    tick = datetime.fromisoformat(status["lastSuccessfulTick"].replace("Z", "+00:00"))
    assert tick.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ") in message
    events = crd.kubectl("get", "events", "-n", namespace, "-o", "json").stdout
    assert any(
        e["reason"] == "Stale" and e["type"] == "Warning" for e in json.loads(events)["items"]
    )


def _rfc3339(instant: datetime) -> str:
    return instant.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def test_a_freeze_window_holds_a_labelled_schedule_and_not_another_then_ends_by_itself(
    crd: Cluster, namespace: str, workdir: Path
) -> None:
    if crd.audit_log is None:
        pytest.skip("needs the local control plane's audit log")
    start = (now() + timedelta(seconds=6)).replace(microsecond=0)
    end = start + timedelta(seconds=6)
    held = schedule("held", "* * * * * *", successfulJobsHistoryLimit=30)
    held["metadata"]["labels"] = {"tier": "batch"}
    free = schedule("free", "* * * * * *", successfulJobsHistoryLimit=30)
    freeze = {
        "apiVersion": "punctual.dev/v1",
        "kind": "FreezeWindow",
        "metadata": {"name": "release"},
        "spec": {
            "selector": {"matchLabels": {"tier": "batch"}},
            "from": _rfc3339(start),
            "to": _rfc3339(end),
            "action": "Skip",
        },
    }
    with operators(crd, namespace, workdir) as ops:
        ops.start("solo")
        wait_until(lambda: leader_of(crd, namespace) == "solo", 20, what="leadership")
        apply(crd, namespace, held, free, freeze)

        def window_status() -> dict[str, Any]:
            return dict(get(crd, namespace, "freezewindow", "release").get("status") or {})

        active = wait_until(lambda: window_status().get("active") and window_status(), 20,
                            what="the window active in its status")  # fmt: skip
        assert active["schedules"] == 1
        frozen = condition(status_of(crd, namespace, "held"), "Frozen")
        assert frozen["status"] == "True" and "FreezeWindow" in frozen["message"]
        after = end + timedelta(seconds=1)
        wait_until(
            lambda: [c for c in created(crd, namespace, "held") if tick_of(c.name) >= after],
            20,
            what="the held schedule firing again after the window",
        )
        wait_until(lambda: window_status().get("active") is False, 15, what="inactive status")
        status = status_of(crd, namespace, "held")

    held_ticks = {tick_of(c.name) for c in created(crd, namespace, "held")}
    free_ticks = {tick_of(c.name) for c in created(crd, namespace, "free")}
    inside = {start + timedelta(seconds=i) for i in range(6)}
    assert not held_ticks & inside, sorted(held_ticks & inside)
    assert inside <= free_ticks, sorted(inside - free_ticks)
    assert_exactly_once(created(crd, namespace, "held") + created(crd, namespace, "free"))
    events = json.loads(crd.kubectl("get", "events", "-n", namespace, "-o", "json").stdout)
    assert any(e["reason"] == "Skipped" and "FreezeWindow" in e["message"] for e in events["items"])
    assert condition(status, "Frozen")["status"] == "False"


def _cli(crd: Cluster, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "punctual.cli", *args, "--kubeconfig", str(crd.kubeconfig)],
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_a_backfill_of_50_ticks_creates_50_jobs_once_each_run_twice_and_across_a_failover(
    crd: Cluster, namespace: str, workdir: Path
) -> None:
    if crd.audit_log is None:
        pytest.skip("needs the local control plane's audit log")
    end = now().replace(microsecond=0) - timedelta(seconds=5)
    start = end - timedelta(seconds=50)
    body = schedule("past", "* * * * * *", suspend=True)  # only the backfill fires
    window = ("--from", _rfc3339(start), "--to", _rfc3339(end))
    with operators(crd, namespace, workdir) as ops:
        replicas = {"f0": ops.start("f0"), "f1": ops.start("f1")}
        wait_until(lambda: leader_of(crd, namespace) in replicas, 20, what="a leader")
        apply(crd, namespace, body)
        time.sleep(2)
        dry = _cli(crd, "backfill", "past", "-n", namespace, *window, "--dry-run")
        assert dry.returncode == 0, dry.stderr
        assert "50 ticks would run, 0 already done" in dry.stdout
        asked = _cli(crd, "backfill", "past", "-n", namespace, *window)
        assert asked.returncode == 0, asked.stderr
        wait_until(lambda: len(created(crd, namespace, "past")) >= 15, 30, what="15 Jobs")
        leader = leader_of(crd, namespace)
        replicas[leader].signal(signal.SIGKILL)
        replicas[leader].proc.wait(5)
        replicas["f2"] = ops.start("f2")

        def progress() -> dict[str, Any]:
            return dict(status_of(crd, namespace, "past").get("backfill") or {})

        wait_until(lambda: progress().get("state") == "Done", 60, what="the backfill done")
        first = progress()
        again = _cli(crd, "backfill", "past", "-n", namespace, *window)
        assert again.returncode == 0, again.stderr
        wait_until(
            lambda: progress().get("state") == "Done" and progress()["request"] != first["request"],
            30,
            what="the second backfill done",
        )
        second = progress()
        history = _cli(crd, "history", "past", "-n", namespace)

    creates = created(crd, namespace, "past")
    assert_exactly_once(creates)
    stored = {c.name for c in creates} | _stored_though_unanswered(crd, namespace, "past")
    assert sorted(tick_of(name) for name in stored) == [
        start + timedelta(seconds=i) for i in range(50)
    ]
    assert first["total"] == 50 and first["done"] + first["skipped"] == 50
    assert second["done"] == 0 and second["skipped"] == 50
    assert "backfill" in history.stdout and "Done" in history.stdout
    paced = sorted(c.at for c in creates)
    assert (paced[-1] - paced[0]).total_seconds() >= 5, "50 Jobs in a herd, not paced"


def _stored_though_unanswered(crd: Cluster, namespace: str, prefix: str) -> set[str]:
    """Jobs whose create got no answer (a 504: the leader was killed while it was in
    flight) yet were stored: a later request found them (a delete or patch that worked)."""
    unanswered, found = set(), set()
    for event in crd.audit_events():
        ref = event.get("objectRef") or {}
        name = str(ref.get("name", ""))
        if ref.get("namespace") != namespace or not name.startswith(prefix + "-"):
            continue
        code = int((event.get("responseStatus") or {}).get("code", 0))
        if event.get("verb") == "create" and code == 504:
            unanswered.add(name)
        elif event.get("verb") in ("delete", "patch", "get") and code == 200:
            found.add(name)
    return unanswered & found
