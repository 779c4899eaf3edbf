"""The expressive spec against the real control plane: validation where the user is, and
schedules with several entries, exclusions, a window and maxRuns firing as specified.

The API server's CEL rules reject what the server can check, with a message naming the
field; the operator reports what only it can check as InvalidSpec naming the entry. The
firing tests judge real `punctual run` processes by the audit log (one create per tick,
exactly the ticks of the combined spec) and by the status they write.
"""

from __future__ import annotations

import copy
import json
import signal
import time
from datetime import UTC, datetime, timedelta
from itertools import pairwise
from pathlib import Path
from typing import Any

import pytest

from .conftest import Cluster
from .operators import job_creates, now, operators, tick_of, wait_until
from .test_crd import variant
from .test_operator import apply, assert_exactly_once, created, get, leader_of, schedule

pytestmark = pytest.mark.e2e


def multi(name: str, entries: list[dict[str, Any]], **spec: Any) -> dict[str, Any]:
    """A schedule with spec.schedules instead of spec.schedule."""
    body = schedule(name, "* * * * *", **spec)
    del body["spec"]["schedule"]
    body["spec"]["schedules"] = entries
    return body


def rfc3339(instant: datetime) -> str:
    return instant.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def with_spec(spec: dict[str, Any], drop: tuple[str, ...] = ("schedule",)) -> dict[str, Any]:
    return variant(spec, drop=drop)


INVALID = [
    (
        "schedule and schedules",
        variant({"schedules": [{"cron": "* * * * *"}]}),
        "exactly one of spec.schedule, spec.schedules and spec.runAt",
    ),
    (
        "schedules and runAt",
        with_spec({"schedules": [{"cron": "* * * * *"}], "runAt": "2027-01-01T00:00:00Z"}),
        "exactly one of spec.schedule, spec.schedules and spec.runAt",
    ),
    ("empty schedules", with_spec({"schedules": []}), "spec.schedules"),
    (
        "21 schedules",
        with_spec({"schedules": [{"cron": f"{i} * * * *"} for i in range(21)]}),
        "spec.schedules",
    ),
    (
        "an entry with cron and every",
        with_spec({"schedules": [{"cron": "* * * * *", "every": "1m"}]}),
        "spec.schedules[0]: Invalid value: set exactly one of cron and every",
    ),
    ("an empty entry", with_spec({"schedules": [{}]}), "spec.schedules[0]"),
    (
        "every under a second",
        with_spec({"schedules": [{"every": "500ms"}]}),
        "spec.schedules[0]: Invalid value: every must be at least 1s",
    ),
    (
        "every that is no duration",
        with_spec({"schedules": [{"every": "1 day"}]}),
        "spec.schedules[0].every",
    ),
    (
        "offset not less than every",
        with_spec({"schedules": [{"every": "1h", "offset": "90m"}]}),
        "spec.schedules[0]: Invalid value: offset must be less than every",
    ),
    (
        "offset without every",
        with_spec({"schedules": [{"cron": "* * * * *", "offset": "5m"}]}),
        "offset needs every",
    ),
    (
        "an entry's cron with three fields",
        with_spec({"schedules": [{"cron": "* * *"}]}),
        "spec.schedules[0].cron",
    ),
    ("empty exclude", variant({"exclude": []}), "spec.exclude"),
    (
        "an exclusion of two kinds",
        variant({"exclude": [{"cron": "* * 25 12 *", "dates": ["2026-12-31"]}]}),
        "spec.exclude[0]: Invalid value: set exactly one of cron, dates, and from with to",
    ),
    (
        "from without to",
        variant({"exclude": [{"from": "2026-08-01T00:00:00Z"}]}),
        "spec.exclude[0]",
    ),
    (
        "from after to",
        variant({"exclude": [{"from": "2026-08-15T00:00:00Z", "to": "2026-08-01T00:00:00Z"}]}),
        "spec.exclude[0]: Invalid value: from must be before to",
    ),
    (
        "a date that is not YYYY-MM-DD",
        variant({"exclude": [{"dates": ["31/12/2026"]}]}),
        "spec.exclude[0].dates[0]",
    ),
    (
        "a date that does not exist",
        variant({"exclude": [{"dates": ["2026-02-30"]}]}),
        "spec.exclude[0].dates[0]",
    ),
    ("empty dates", variant({"exclude": [{"dates": []}]}), "spec.exclude[0].dates"),
    (
        "startTime after endTime",
        variant({"startTime": "2027-01-01T00:00:00Z", "endTime": "2026-01-01T00:00:00Z"}),
        "spec.startTime must be before spec.endTime",
    ),
    ("endTime not a time", variant({"endTime": "next year"}), "spec.endTime"),
    ("maxRuns zero", variant({"maxRuns": 0}), "spec.maxRuns"),
    (
        "maxRuns on a runAt",
        with_spec({"runAt": "2027-01-01T00:00:00Z", "maxRuns": 2}),
        "need spec.schedule or spec.schedules",
    ),
]


@pytest.mark.parametrize(("case", "obj", "message"), INVALID, ids=[c[0] for c in INVALID])
def test_invalid_spec_is_rejected_naming_the_field(
    crd: Cluster, namespace: str, case: str, obj: dict[str, Any], message: str
) -> None:
    result = crd.kubectl("create", "-n", namespace, "-f", "-", input=json.dumps(obj), check=False)
    assert result.returncode != 0, f"{case}: accepted"
    assert message in result.stderr, result.stderr


@pytest.fixture
def workdir(tmp_path: Path) -> Path:
    return tmp_path


def test_what_only_punctual_can_check_is_invalid_spec_naming_the_entry(
    crd: Cluster, namespace: str, workdir: Path
) -> None:
    apply(
        crd,
        namespace,
        multi("february", [{"cron": "0 0 * * *"}, {"cron": "0 0 30 2 *"}]),
        multi("halfsecond", [{"every": "1500ms"}]),
        schedule("nothingleft", "0 9 * * *", exclude=[{"cron": "* 9 * * *"}]),
    )
    with operators(crd, namespace, workdir) as ops:
        ops.start("solo")
        for name, words in (
            ("february", "spec.schedules[1].cron: "),
            ("halfsecond", "spec.schedules[0].every: 1500ms is not a whole number of seconds"),
            ("nothingleft", "spec.exclude: removes every tick"),
        ):

            def reported(name: str = name) -> dict[str, Any] | None:
                status = get(crd, namespace, "cronschedule", name).get("status") or {}
                conditions = {c["type"]: c for c in status.get("conditions") or []}
                return conditions.get("InvalidSpec")

            invalid = wait_until(reported, 30, what=f"{name}: InvalidSpec")
            assert invalid["status"] == "True" and words in invalid["message"], invalid


def test_two_cron_entries_and_an_interval_fire_exactly_the_union(
    crd: Cluster, namespace: str, workdir: Path
) -> None:
    if crd.audit_log is None:
        pytest.skip("needs the local control plane's audit log")
    entries = [
        {"cron": "*/6 * * * * *"},
        {"cron": "*/10 * * * * *"},
        {"every": "4s", "offset": "1s"},
    ]
    with operators(crd, namespace, workdir) as ops:
        ops.start("solo")
        wait_until(lambda: leader_of(crd, namespace) == "solo", 20, what="leadership")
        apply(crd, namespace, multi("union", entries, successfulJobsHistoryLimit=50))
        time.sleep(3)
        started = now()
        time.sleep(36)  # a window of 33 s always holds a multiple of 30 s
        finished = now()
        status = get(crd, namespace, "cronschedule", "union")["status"]

    creates = created(crd, namespace, "union")
    assert_exactly_once(creates)
    window = (started + timedelta(seconds=1), finished - timedelta(seconds=2))
    fired = sorted(t for t in (tick_of(c.name) for c in creates) if window[0] <= t <= window[1])
    expected = []
    second = window[0].replace(microsecond=0) + timedelta(seconds=1)
    while second <= window[1]:
        unix = int(second.timestamp())
        if unix % 6 == 0 or unix % 10 == 0 or unix % 4 == 1:
            expected.append(second)
        second += timedelta(seconds=1)
    assert fired == expected, (fired, expected)
    shared = [t for t in expected if int(t.timestamp()) % 30 == 0]
    assert shared, "the window holds an instant both cron entries reach"
    upcoming = status.get("upcomingTicks") or []
    assert 1 <= len(upcoming) <= 5 and upcoming == sorted(upcoming)


def test_an_excluded_day_fires_nothing_and_records_nothing_as_missed(
    crd: Cluster, namespace: str, workdir: Path
) -> None:
    if crd.audit_log is None:
        pytest.skip("needs the local control plane's audit log")
    today = now()
    if today.hour == 23 and today.minute >= 58:
        pytest.skip("too close to midnight UTC for a whole excluded day")
    soon = (today + timedelta(seconds=12)).replace(microsecond=0)
    with operators(crd, namespace, workdir) as ops:
        ops.start("solo")
        wait_until(lambda: leader_of(crd, namespace) == "solo", 20, what="leadership")
        apply(
            crd,
            namespace,
            schedule(
                "holiday",
                "* * * * * *",
                missedRunPolicy="RunAll",
                exclude=[{"dates": [today.date().isoformat()]}],
            ),
            schedule(
                "blackout",
                "* * * * * *",
                missedRunPolicy="RunAll",
                successfulJobsHistoryLimit=30,
                exclude=[{"from": rfc3339(today - timedelta(minutes=5)), "to": rfc3339(soon)}],
            ),
        )
        wait_until(
            lambda: [c for c in created(crd, namespace, "blackout") if tick_of(c.name) >= soon],
            30,
            what="the first tick after the excluded range",
        )
        time.sleep(3)
        holiday = get(crd, namespace, "cronschedule", "holiday")["status"]
        blackout = get(crd, namespace, "cronschedule", "blackout")["status"]

    assert created(crd, namespace, "holiday") == []
    assert not [f for f in holiday.get("recentFirings") or [] if f["outcome"] == "Missed"]
    assert holiday.get("nextScheduleTime", "") >= (today.date() + timedelta(days=1)).isoformat()
    ticks = sorted(tick_of(c.name) for c in created(crd, namespace, "blackout"))
    assert ticks and ticks[0] == soon, ticks[:3]
    assert not [f for f in blackout.get("recentFirings") or [] if f["outcome"] == "Missed"]
    assert_exactly_once(created(crd, namespace, "blackout"))


def _finished(cluster: Cluster, namespace: str, name: str) -> dict[str, Any] | None:
    status = get(cluster, namespace, "cronschedule", name).get("status") or {}
    conditions = {c["type"]: c for c in status.get("conditions") or []}
    finished = conditions.get("Finished")
    return status if finished and finished["status"] == "True" else None


def test_max_runs_fires_three_jobs_then_finishes_also_across_a_leader_kill(
    crd: Cluster, namespace: str, workdir: Path
) -> None:
    if crd.audit_log is None:
        pytest.skip("needs the local control plane's audit log")
    with operators(crd, namespace, workdir) as ops:
        replicas = {"m0": ops.start("m0"), "m1": ops.start("m1")}
        wait_until(lambda: leader_of(crd, namespace) in replicas, 20, what="a leader")
        apply(
            crd,
            namespace,
            schedule("three", "*/2 * * * * *", maxRuns=3, startingDeadlineSeconds=60),
            schedule("quick", "* * * * * *", maxRuns=3),
        )
        wait_until(lambda: created(crd, namespace, "three"), 20, what="the first of three")
        leader = leader_of(crd, namespace)
        replicas[leader].signal(signal.SIGKILL)
        replicas[leader].proc.wait(5)
        replicas["m2"] = ops.start("m2")
        status = wait_until(lambda: _finished(crd, namespace, "three"), 60, what="three finished")
        wait_until(lambda: _finished(crd, namespace, "quick"), 30, what="quick finished")
        # A restart of every replica changes nothing: the count is in status.
        for replica in replicas.values():
            if replica.proc.poll() is None:
                replica.signal(signal.SIGKILL)
        ops.start("m3")
        time.sleep(8)
        get_output = crd.kubectl("get", "-n", namespace, "cronschedules").stdout

    for name in ("three", "quick"):
        creates = created(crd, namespace, name)
        assert_exactly_once(creates)
        assert len(creates) == 3, [c.name for c in creates]
    conditions = {c["type"]: c for c in status["conditions"]}
    assert conditions["Finished"]["reason"] == "MaxRunsReached"
    assert conditions["Ready"]["status"] == "False"
    assert status["runs"] == 3 and status["runsRemaining"] == 0
    assert "nextScheduleTime" not in status
    events = crd.kubectl("get", "events", "-n", namespace, "-o", "json").stdout
    assert '"reason": "Finished"' in events
    print(f"\n{get_output}")
    assert "MaxRunsReached" in get_output


def test_end_time_stops_firing_and_finishes(crd: Cluster, namespace: str, workdir: Path) -> None:
    if crd.audit_log is None:
        pytest.skip("needs the local control plane's audit log")
    with operators(crd, namespace, workdir) as ops:
        replicas = {"e0": ops.start("e0"), "e1": ops.start("e1")}
        wait_until(lambda: leader_of(crd, namespace) in replicas, 20, what="a leader")
        end = (now() + timedelta(seconds=10)).replace(microsecond=0)
        apply(
            crd,
            namespace,
            schedule(
                "until",
                "* * * * * *",
                endTime=rfc3339(end),
                missedRunPolicy="RunAll",
                startingDeadlineSeconds=60,
                successfulJobsHistoryLimit=30,
            ),
        )
        wait_until(lambda: created(crd, namespace, "until"), 20, what="a first firing")
        leader = leader_of(crd, namespace)
        replicas[leader].signal(signal.SIGKILL)
        replicas[leader].proc.wait(5)
        status = wait_until(lambda: _finished(crd, namespace, "until"), 60, what="finished")
        time.sleep(4)

    ticks = sorted(tick_of(c.name) for c in created(crd, namespace, "until"))
    assert_exactly_once(created(crd, namespace, "until"))
    assert ticks and ticks[-1] == end - timedelta(seconds=1), ticks[-3:]
    assert all(t < end for t in ticks)
    conditions = {c["type"]: c for c in status["conditions"]}
    assert conditions["Finished"]["reason"] == "EndTimeReached"
    assert "nextScheduleTime" not in status


def test_raising_max_runs_revives_a_finished_schedule(
    crd: Cluster, namespace: str, workdir: Path
) -> None:
    body = schedule("revived", "* * * * * *", maxRuns=2)
    with operators(crd, namespace, workdir) as ops:
        ops.start("solo")
        apply(crd, namespace, body)
        wait_until(lambda: _finished(crd, namespace, "revived"), 30, what="finished")
        raised = copy.deepcopy(body)
        raised["spec"]["maxRuns"] = 4
        apply(crd, namespace, raised)
        status = wait_until(lambda: _finished(crd, namespace, "revived"), 30, what="again")
    assert status["runs"] == 4
    assert len(created(crd, namespace, "revived")) == 4


def test_old_single_schedule_objects_behave_as_before(
    crd: Cluster, namespace: str, workdir: Path
) -> None:
    if crd.audit_log is None:
        pytest.skip("needs the local control plane's audit log")
    with operators(crd, namespace, workdir) as ops:
        ops.start("solo")
        apply(crd, namespace, schedule("plain", "* * * * * *"))
        wait_until(lambda: len(created(crd, namespace, "plain")) >= 8, 30, what="firings")
        status = get(crd, namespace, "cronschedule", "plain")["status"]
    creates = created(crd, namespace, "plain")
    assert_exactly_once(creates)
    ticks = sorted(tick_of(c.name) for c in creates)
    assert all(b - a == timedelta(seconds=1) for a, b in pairwise(ticks))
    conditions = {c["type"] for c in status["conditions"]}
    assert conditions == {"Ready", "Suspended", "InvalidSpec"}
    assert "runs" not in status and "runsRemaining" not in status
    assert not [c for c in job_creates(crd, namespace) if c.code not in (201, 409)]
