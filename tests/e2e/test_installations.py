"""Two installations (two Leases) watching one namespace never both write a schedule.

The second to find a schedule owned by a live installation (status.installation) writes
nothing to it, and says so: a log line, an Event on the schedule, a metric. When the
owner goes away (its Lease released), the other takes the schedule over.
"""

from __future__ import annotations

import json
import re
import time
from pathlib import Path

import pytest
from operatorprocess import OperatorProcess

from .conftest import Cluster
from .operators import job_creates, operators, parse, wait_until
from .test_operator import apply, assert_exactly_once, created, get, schedule

pytestmark = pytest.mark.e2e


@pytest.fixture
def workdir(tmp_path: Path) -> Path:
    return tmp_path


def holder(cluster: Cluster, namespace: str, lease: str) -> str:
    out = cluster.kubectl("get", "lease", lease, "-n", namespace, "-o", "json", check=False)
    return str(json.loads(out.stdout)["spec"].get("holderIdentity") or "") if out.stdout else ""


def conflicts(op: OperatorProcess) -> float:
    found = re.search(r"^punctual_schedule_conflicts (\S+)$", op.scrape(), re.M)
    return float(found.group(1)) if found else -1.0


def test_a_second_installation_writes_nothing_reports_the_conflict_and_takes_over_later(
    crd: Cluster, namespace: str, workdir: Path
) -> None:
    if crd.audit_log is None:
        pytest.skip("needs the local control plane's audit log")
    with operators(crd, namespace, workdir) as ops:
        installs = {
            name: ops.start(name, "--lease-name", f"{name}-leader", "--fence", f"{name}-fence")
            for name in ("a", "b")
        }
        for name in installs:
            wait_until(lambda n=name: holder(crd, namespace, f"{n}-leader") == n, 20, what=name)
        apply(crd, namespace, schedule("shared", "* * * * * *"))
        owner_lease = wait_until(
            lambda: (
                get(crd, namespace, "cronschedule", "shared").get("status", {}).get("installation")
            ),
            20,
            what="an owner in status",
        )
        owner = owner_lease.split("/")[1].removesuffix("-leader")
        other = "b" if owner == "a" else "a"
        wait_until(lambda: conflicts(installs[other]) == 1, 20, what="the conflict reported")
        time.sleep(4)  # a few ticks with both running
        wait_until(
            lambda: "writes nothing to it" in installs[other].output(), 5, what="the log line"
        )
        events = json.loads(
            crd.kubectl(
                "get", "events", "-n", namespace, "--field-selector", "reason=Conflict", "-o",
                "json",
            ).stdout
        )["items"]  # fmt: skip
        assert len(events) == 1, events
        assert owner_lease in events[0]["message"]
        handed_over = parse(
            time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        )  # from here on the other may write
        installs[owner].stop()
        wait_until(
            lambda: [
                c
                for c in created(crd, namespace, "shared")
                if c.user_agent == installs[other].user_agent
            ],
            30,
            what="the other installation fires after the owner left",
        )
        wait_until(lambda: conflicts(installs[other]) == 0, 10, what="the conflict over")
        status = get(crd, namespace, "cronschedule", "shared")["status"]
        assert status["installation"] == f"{namespace}/{other}-leader"

    writes = [
        e
        for e in crd.audit_events()
        if e.get("userAgent") == installs[other].user_agent
        and (e.get("objectRef") or {}).get("namespace") == namespace
        and (e.get("objectRef") or {}).get("resource") in ("cronschedules", "jobs")
        and e.get("verb") in ("create", "update", "patch", "delete")
        and 200 <= int((e.get("responseStatus") or {}).get("code", 0)) < 300
        and parse(e["requestReceivedTimestamp"]) < handed_over
    ]
    assert not writes, [(e["verb"], e["objectRef"]) for e in writes]
    assert_exactly_once(created(crd, namespace, "shared"))
    assert len([c for c in job_creates(crd, namespace) if c.code == 201]) >= 5
