"""Calendars and ClusterFreezeWindows against the real control plane, with a real
`punctual run`.

A schedule naming a Calendar that does not exist is held (InvalidSpec names it, no Job);
once the Calendar exists, its dates (read in its zone) are not ticks; an edit of it
applies within a list period. A ClusterFreezeWindow holds the schedules of the
namespaces its namespaceSelector selects, and only those. The audit log is the oracle
for what was created.

Calendars and ClusterFreezeWindows are cluster-scoped: each test names its own (a uuid)
and deletes it, and the freeze selects namespaces by a label only its namespace has.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

import pytest

from punctual.core.keys import FINALIZER

from .conftest import Cluster
from .operators import now, operators, parse, tick_of, wait_until
from .test_operator import apply, assert_exactly_once, created, get, leader_of, schedule

pytestmark = pytest.mark.e2e

KIRITIMATI = ZoneInfo("Pacific/Kiritimati")  # UTC+14: its dates are not UTC's


@pytest.fixture
def workdir(tmp_path: Path) -> Path:
    return tmp_path


def condition(status: dict[str, Any], kind: str) -> dict[str, Any]:
    return next((c for c in status.get("conditions") or [] if c["type"] == kind), {})


def status_of(cluster: Cluster, namespace: str, name: str) -> dict[str, Any]:
    return dict(get(cluster, namespace, "cronschedule", name).get("status") or {})


def rfc3339(instant: datetime) -> str:
    return instant.strftime("%Y-%m-%dT%H:%M:%SZ")


@contextmanager
def cluster_object(cluster: Cluster, body: dict[str, Any]) -> Iterator[None]:
    """A cluster-scoped object for one test, deleted afterwards whatever happens."""
    cluster.kubectl("apply", "-f", "-", input=json.dumps(body))
    try:
        yield
    finally:
        kind, name = body["kind"].lower(), body["metadata"]["name"]
        cluster.kubectl("delete", kind, name, "--wait=false", "--ignore-not-found", check=False)


@contextmanager
def another_namespace(cluster: Cluster) -> Iterator[str]:
    name = f"t-{uuid.uuid4().hex[:10]}"
    cluster.kubectl("create", "namespace", name)
    try:
        yield name
    finally:  # its operator is gone: let its Jobs go, or the namespace never does
        for job in get(cluster, name, "jobs")["items"]:
            if FINALIZER in (job["metadata"].get("finalizers") or []):
                patch = {"metadata": {"$deleteFromPrimitiveList/finalizers": [FINALIZER]}}
                args = ("patch", "job", job["metadata"]["name"], "-n", name, "--type=strategic")
                cluster.kubectl(*args, "-p", json.dumps(patch), check=False)
        cluster.kubectl("delete", "namespace", name, "--wait=false", check=False)


def test_a_schedule_is_held_until_its_calendar_exists_then_skips_its_dates_and_follows_edits(
    crd: Cluster, namespace: str, workdir: Path
) -> None:
    if crd.audit_log is None:
        pytest.skip("needs the local control plane's audit log")
    name = f"e2e-{uuid.uuid4().hex[:8]}"
    held = schedule("held", "* * * * * *", successfulJobsHistoryLimit=30, excludeCalendars=[name])
    today = now().astimezone(KIRITIMATI).date()
    calendar: dict[str, Any] = {
        "apiVersion": "punctual.dev/v1",
        "kind": "Calendar",
        "metadata": {"name": name},
        "spec": {
            "timeZone": "Pacific/Kiritimati",
            "exclude": [{"dates": [str(today), str(today + timedelta(days=1))]}],
        },
    }
    with operators(crd, namespace, workdir) as ops:
        ops.start("solo")
        wait_until(lambda: leader_of(crd, namespace) == "solo", 20, what="leadership")
        apply(crd, namespace, held)

        # 1. No Calendar: held, InvalidSpec naming it, a Warning Event, no Job.
        ready = wait_until(
            lambda: condition(status_of(crd, namespace, "held"), "Ready").get("reason")
            == "InvalidSpec"
            and condition(status_of(crd, namespace, "held"), "Ready"),
            20, 0.5, what="the schedule held for its missing Calendar",
        )  # fmt: skip
        assert f"Calendar {name} not found" in ready["message"], ready
        events = json.loads(crd.kubectl("get", "events", "-n", namespace, "-o", "json").stdout)
        assert any(e["reason"] == "InvalidSpec" and e["type"] == "Warning" and name in e["message"]
                   for e in events["items"])  # fmt: skip

        # 2. The Calendar excludes today and tomorrow in Kiritimati: no tick before the
        #    day after, which starts there at 10:00 UTC the day before.
        with cluster_object(crd, calendar):
            status = wait_until(
                lambda: (s := status_of(crd, namespace, "held"))
                and condition(s, "Ready").get("status") == "True"
                and s,
                20, 0.5, what="the schedule released once its Calendar exists",
            )  # fmt: skip
            after = datetime.combine(today + timedelta(days=2), datetime.min.time(), KIRITIMATI)
            assert parse(status["nextScheduleTime"]) == after
            assert condition(status, "InvalidSpec")["status"] == "False"

            # 3. Edited to exclude even seconds (a cron entry, in the Calendar's zone):
            #    odd seconds fire, and nothing else has.
            calendar["spec"]["exclude"] = [{"cron": "*/2 * * * * *"}]
            crd.kubectl("apply", "-f", "-", input=json.dumps(calendar))
            wait_until(lambda: len(created(crd, namespace, "held")) >= 4, 30, 0.5,
                       what="odd seconds firing after the edit")  # fmt: skip

    ticks = [tick_of(c.name) for c in created(crd, namespace, "held")]
    assert ticks and all(t.second % 2 == 1 for t in ticks), sorted(ticks)
    assert_exactly_once(created(crd, namespace, "held"))


def test_a_cluster_freeze_window_holds_the_schedules_of_selected_namespaces_only(
    crd: Cluster, namespace: str, workdir: Path
) -> None:
    if crd.audit_log is None:
        pytest.skip("needs the local control plane's audit log")
    key = f"e2e.punctual.dev/freeze-{uuid.uuid4().hex[:8]}"
    crd.kubectl("label", "namespace", namespace, f"{key}=yes")
    start = (now() + timedelta(seconds=9)).replace(microsecond=0)  # the list comes every 5 s
    end = start + timedelta(seconds=5)
    freeze_name = f"e2e-{uuid.uuid4().hex[:8]}"
    freeze: dict[str, Any] = {
        "apiVersion": "punctual.dev/v1",
        "kind": "ClusterFreezeWindow",
        "metadata": {"name": freeze_name},
        "spec": {
            "namespaceSelector": {"matchLabels": {key: "yes"}},
            "selector": {"matchLabels": {"tier": "batch"}},
            "from": rfc3339(start),
            "to": rfc3339(end),
        },
    }
    job = schedule("job", "* * * * * *", successfulJobsHistoryLimit=30)
    job["metadata"]["labels"] = {"tier": "batch"}
    with another_namespace(crd) as other, cluster_object(crd, freeze):
        with operators(crd, namespace, workdir) as ops:
            ops.start("solo", "--namespace", other)
            wait_until(lambda: leader_of(crd, namespace) == "solo", 20, what="leadership")
            apply(crd, namespace, job)
            apply(crd, other, job)
            frozen = wait_until(
                lambda: condition(status_of(crd, namespace, "job"), "Frozen").get("status")
                == "True"
                and condition(status_of(crd, namespace, "job"), "Frozen"),
                25, 0.5, what="the selected namespace's schedule frozen",
            )  # fmt: skip
            assert frozen["message"].startswith(f"ClusterFreezeWindow {freeze_name}")
            resumed = end + timedelta(seconds=1)
            wait_until(
                lambda: [c for c in created(crd, namespace, "job") if tick_of(c.name) >= resumed],
                20, 0.5, what="the frozen schedule firing again after the window",
            )  # fmt: skip
            assert condition(status_of(crd, other, "job"), "Frozen") == {}

        inside = {start + timedelta(seconds=i) for i in range(5)}
        selected = {tick_of(c.name) for c in created(crd, namespace, "job")}
        unselected = {tick_of(c.name) for c in created(crd, other, "job")}
        assert not selected & inside, sorted(selected & inside)
        assert inside <= unselected, sorted(inside - unselected)
        assert_exactly_once(created(crd, namespace, "job"))  # the two share Job names
        assert_exactly_once(created(crd, other, "job"))
