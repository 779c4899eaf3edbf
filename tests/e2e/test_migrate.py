"""`punctual migrate` against the real CronJob controller, with the audit log as the oracle.

A CronJob `*/1 * * * *` (2 s Jobs) runs under kube-controller-manager; at a random second
of a minute it is switched to Punctual (`--apply`), and at a random second of a later
minute given back (`--undo`). Every minute's tick from the CronJob's first run to the
CronJob's first run after the hand-back is created exactly once, by one of the two
(the CronJob's Jobs are `<name>-<unix minutes>`, Punctual's `<name>-<unix seconds>`), and
none is lost. MIGRATE_SEED replays the seconds chosen.

Also: the dry-run output applies cleanly with `kubectl apply --dry-run=server`, and a
refusal changes nothing.
"""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from .conftest import REPO, Cluster
from .operators import job_creates, now, operators, wait_until
from .test_operator import leader_of, schedule

pytestmark = pytest.mark.e2e


def cronjob(name: str, **spec: Any) -> dict[str, Any]:
    """A CronJob with the e2e schedules' Job template (2 s runs on kwok)."""
    template = schedule(name, "* * * * *", run_ms=2000)["spec"]["jobTemplate"]
    return {
        "apiVersion": "batch/v1",
        "kind": "CronJob",
        "metadata": {"name": name, "labels": {"team": "e2e"}},
        "spec": {
            "schedule": "*/1 * * * *",
            "successfulJobsHistoryLimit": 10,
            **spec,
            "jobTemplate": template,
        },
    }


def punctual(cluster: Cluster, namespace: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "punctual.cli", "migrate", "cronjob", *args, "-n", namespace],
        capture_output=True,
        text=True,
        cwd=REPO,
        env={"KUBECONFIG": str(cluster.kubeconfig), "PATH": "/usr/bin:/bin"},
        timeout=120,
    )


def minute_of(job: str, name: str) -> datetime | None:
    """The minute tick a Job of `name` is for: the CronJob's `<name>-<unix minutes>` or
    Punctual's `<name>-<unix seconds>`; None for anything else."""
    suffix = job.removeprefix(f"{name}-")
    if suffix == job or not suffix.isdigit():
        return None
    number = int(suffix)
    seconds = number * 60 if number < 100_000_000 else number
    return datetime.fromtimestamp(seconds, UTC)


def at_second(second: float) -> None:
    """Sleep until `second` past a minute: this minute's if still ahead, else the next's."""
    current = now()
    target = current.replace(second=0, microsecond=0) + timedelta(seconds=second)
    if target <= current:
        target += timedelta(minutes=1)
    time.sleep((target - current).total_seconds())


def test_migrate_and_undo_fire_every_minute_exactly_once(
    crd: Cluster, namespace: str, tmp_path: Path
) -> None:
    if crd.audit_log is None:
        pytest.skip("needs the local control plane's audit log")
    seed = int(os.environ.get("MIGRATE_SEED") or time.time())
    chooser = random.Random(seed)
    # Seconds inside the minute; now and then right at its end, so the switch's settle
    # straddles the next tick.
    switch, back = (chooser.choice([chooser.uniform(0, 60), 58.5]) for _ in range(2))
    print(f"MIGRATE_SEED={seed}: --apply at :{switch:04.1f}, --undo at :{back:04.1f}")
    name = "legacy"
    with operators(crd, namespace, tmp_path) as ops:
        ops.start("solo")
        wait_until(lambda: leader_of(crd, namespace) == "solo", 20, what="leadership")
        crd.kubectl("apply", "-n", namespace, "-f", "-", input=json.dumps(cronjob(name)))

        def minutes() -> list[datetime]:
            creates = [c for c in job_creates(crd, namespace) if 200 <= c.code < 300]
            return [m for m in (minute_of(c.name, name) for c in creates) if m is not None]

        wait_until(lambda: len(minutes()) >= 1, 75, what="the CronJob's first run")
        first = min(minutes())
        at_second(switch)
        moved = punctual(crd, namespace, name, "--apply")
        assert moved.returncode == 0, moved.stderr
        assert "kind: CronSchedule" in moved.stdout
        switched_at = now()
        # A full minute under Punctual: at least one tick it fires on time.
        wait_until(lambda: now() > switched_at + timedelta(minutes=1), 90, what="a minute")
        at_second(back)
        given = punctual(crd, namespace, name, "--undo")
        assert given.returncode == 0, given.stderr
        handed_at = now()
        # The CronJob's first tick after the hand-back (late by the switch, at most).
        last = handed_at.replace(second=0, microsecond=0) + timedelta(minutes=1)
        wait_until(lambda: last in minutes(), 90, what="the CronJob's run after --undo")
        time.sleep(3)  # a double would come within a second or two

    creates = [c for c in job_creates(crd, namespace) if 200 <= c.code < 300]
    by_minute: dict[datetime, list[str]] = {}
    for create in creates:
        minute = minute_of(create.name, name)
        if minute is not None:
            by_minute.setdefault(minute, []).append(f"{create.name} by {create.user_agent}")
    expected = []
    tick = first
    while tick <= last:
        expected.append(tick)
        tick += timedelta(minutes=1)
    doubled = {m: who for m, who in by_minute.items() if len(who) > 1}
    lost = [m for m in expected if m not in by_minute]
    assert not doubled, f"seed {seed}: doubled {doubled}"
    assert not lost, f"seed {seed}: lost {lost} (fired: {sorted(by_minute)})"
    punctuals = [m for m, who in by_minute.items() if "kube-controller-manager" not in who[0]]
    assert punctuals, f"seed {seed}: Punctual fired nothing between the switches"
    schedule = json.loads(
        crd.kubectl("get", "cronschedule", name, "-n", namespace, "-o", "json").stdout
    )
    cronjob_now = json.loads(
        crd.kubectl("get", "cronjob", name, "-n", namespace, "-o", "json").stdout
    )
    assert schedule["spec"]["suspend"] is True
    assert cronjob_now["spec"]["suspend"] is False


def test_the_dry_run_applies_cleanly_and_refusals_change_nothing(
    crd: Cluster, namespace: str
) -> None:
    crd.kubectl(
        "apply",
        "-n",
        namespace,
        "-f",
        "-",
        input=json.dumps(
            cronjob(
                "nightly",
                schedule="30 2 * * 1-5",
                timeZone="Europe/Berlin",
                startingDeadlineSeconds=300,
                concurrencyPolicy="Forbid",
                suspend=True,
                failedJobsHistoryLimit=4,
            )
        ),
    )
    printed = punctual(crd, namespace, "nightly")
    assert printed.returncode == 0, printed.stderr
    applied = crd.kubectl(
        "apply", "-n", namespace, "--dry-run=server", "-f", "-", input=printed.stdout, check=False
    )
    assert applied.returncode == 0, applied.stderr
    assert "cronschedule.punctual.dev/nightly created (server dry run)" in applied.stdout

    # A CronSchedule of that name exists: refused, one line, exit 2, nothing changed.
    crd.kubectl("apply", "-n", namespace, "-f", "-", input=printed.stdout)
    before = crd.kubectl("get", "cronjob", "nightly", "-n", namespace, "-o", "json").stdout
    refused = punctual(crd, namespace, "nightly", "--apply")
    assert refused.returncode == 2
    assert refused.stderr.strip().splitlines() == [
        f"punctual: cronschedule {namespace}/nightly exists; delete it or migrate by hand"
    ]
    after = crd.kubectl("get", "cronjob", "nightly", "-n", namespace, "-o", "json").stdout
    assert (
        json.loads(before)["metadata"]["resourceVersion"]
        == (json.loads(after)["metadata"]["resourceVersion"])
    )
    missing = punctual(crd, namespace, "absent", "--apply")
    assert missing.returncode == 2
    assert missing.stderr.strip() == f"punctual: cronjob {namespace}/absent not found"


def test_the_printed_yaml_of_every_kind_of_cronjob_applies_strictly(
    crd: Cluster, namespace: str
) -> None:
    """CronJobs as `kubectl create cronjob` makes them (its jobTemplate.metadata carries a
    name and a null creationTimestamp), as a Helm chart renders them, and as a person
    writes them: each printed CronSchedule applies with strict field validation."""
    crd.kubectl(
        "create", "cronjob", "made-by-kubectl", "-n", namespace,
        "--image=busybox", "--schedule=*/5 * * * *", "--", "true",
    )  # fmt: skip
    helm = cronjob("made-by-helm", concurrencyPolicy="Forbid")
    helm["metadata"]["labels"] = {
        "app.kubernetes.io/managed-by": "Helm",
        "helm.sh/chart": "reports-1.2.0",
    }
    helm["metadata"]["annotations"] = {
        "meta.helm.sh/release-name": "reports",
        "meta.helm.sh/release-namespace": namespace,
    }
    helm["spec"]["jobTemplate"]["metadata"] = {"labels": {"app.kubernetes.io/name": "reports"}}
    by_hand = cronjob("made-by-hand", schedule="0 3 * * *", timeZone="UTC")
    for manifest in (helm, by_hand):
        crd.kubectl("apply", "-n", namespace, "-f", "-", input=json.dumps(manifest))
    for name in ("made-by-kubectl", "made-by-helm", "made-by-hand"):
        printed = punctual(crd, namespace, name)
        assert printed.returncode == 0, printed.stderr
        applied = crd.kubectl(
            "apply", "-n", namespace, "--validate=strict", "-f", "-",
            input=printed.stdout, check=False,
        )  # fmt: skip
        assert applied.returncode == 0, (name, applied.stderr)
        assert "Warning" not in applied.stderr, (name, applied.stderr)
        assert f"cronschedule.punctual.dev/{name} created" in applied.stdout
    helm_schedule = json.loads(
        crd.kubectl("get", "cronschedule", "made-by-helm", "-n", namespace, "-o", "json").stdout
    )
    template = helm_schedule["spec"]["jobTemplate"]
    assert template["metadata"] == {"labels": {"app.kubernetes.io/name": "reports"}}
