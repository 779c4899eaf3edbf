"""Chains on the real control plane: spec.after, with the API server's audit log as the oracle.

A downstream runs once for each upstream run that ends as it names, under the upstream's
tick (`<downstream>-<upstream tick>`), never for a run that did not; chains of three,
fan-in of two, a gate that gives up (Missed) when its upstream fails, and a leader killed
after the upstream's run ended and before the downstream's create, three rounds. Pods run
on kwok's fake nodes: `punctual.dev/test-outcome: fail` makes a run fail.
"""

from __future__ import annotations

import json
import signal
import time
from collections import Counter
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from punctual.kube.sharding import shard_of

from .conftest import Cluster
from .operators import job_creates, now, operators, tick_of, wait_until
from .test_lifecycle import _cli, _rfc3339
from .test_operator import apply, leader_of, schedule
from .test_run_control import status_of

pytestmark = pytest.mark.e2e


def after(name: str, *upstreams: str, on: str = "Succeeded", run_ms: int = 300) -> dict[str, Any]:
    """A schedule fired by its upstreams' runs alone."""
    body = schedule(name, "unused", run_ms=run_ms)
    del body["spec"]["schedule"]
    body["spec"]["after"] = [{"schedule": u, "on": on} for u in upstreams]
    body["spec"]["successfulJobsHistoryLimit"] = 100
    return body


def failing(body: dict[str, Any]) -> dict[str, Any]:
    pod = body["spec"]["jobTemplate"]["spec"]["template"]["metadata"]
    pod["annotations"]["punctual.dev/test-outcome"] = "fail"
    return body


def upstream(name: str, cron: str, run_ms: int = 300, **spec: Any) -> dict[str, Any]:
    body = schedule(name, cron, run_ms=run_ms, concurrencyPolicy="Forbid", **spec)
    body["spec"] |= {"successfulJobsHistoryLimit": 100, "failedJobsHistoryLimit": 100}
    return body


def jobs(cluster: Cluster, namespace: str) -> dict[str, dict[str, Any]]:
    out = cluster.kubectl("get", "jobs", "-n", namespace, "-o", "json")
    return {j["metadata"]["name"]: j for j in json.loads(out.stdout)["items"]}


def outcome(job: dict[str, Any]) -> str | None:
    for cond in (job.get("status") or {}).get("conditions") or []:
        if cond.get("status") == "True" and cond.get("type") in ("Complete", "Failed"):
            return "Succeeded" if cond["type"] == "Complete" else "Failed"
    return None


def runs_of(found: dict[str, dict[str, Any]], name: str) -> dict[int, str | None]:
    """The runs of schedule `name` by tick (Unix seconds), with their outcome."""
    return {
        int(tick_of(j).timestamp()): outcome(body)
        for j, body in found.items()
        if body["metadata"].get("labels", {}).get("punctual.dev/schedule") == name
    }


def creates_of(cluster: Cluster, namespace: str, name: str) -> Counter[str]:
    return Counter(
        c.name
        for c in job_creates(cluster, namespace)
        if c.code == 201 and c.name.rsplit("-", 1)[0] == name
    )


def test_b_runs_once_per_successful_a_run_and_never_for_a_failed_one(
    crd: Cluster, namespace: str, tmp_path: Path
) -> None:
    if crd.audit_log is None:
        pytest.skip("needs the local control plane's audit log")
    with operators(crd, namespace, tmp_path) as ops:
        solo = ops.start("solo")
        wait_until(lambda: leader_of(crd, namespace) == "solo", 20, what="leadership")
        apply(
            crd,
            namespace,
            after("b-ok", "a-ok"),
            after("b-bad", "a-bad"),
            after("c-bad", "a-bad", on="Failed"),
            upstream("a-ok", "*/4 * * * * *"),
            failing(upstream("a-bad", "*/4 * * * * *")),
        )
        time.sleep(18)
        found = jobs(crd, namespace)
        ok, bad = runs_of(found, "a-ok"), runs_of(found, "a-bad")
        done = [t for t, o in ok.items() if o == "Succeeded"]
        failed = [t for t, o in bad.items() if o == "Failed"]
        assert len(done) >= 3 and len(failed) >= 3
        # Every ended upstream run is followed within a few seconds.
        wait_until(lambda: set(done) <= set(runs_of(jobs(crd, namespace), "b-ok")), 10, what="b-ok")
        wait_until(
            lambda: set(failed) <= set(runs_of(jobs(crd, namespace), "c-bad")), 10, what="c-bad"
        )
        lagged = solo.metric("punctual_chain_lag_seconds_count") or 0
        assert lagged >= len(done) + len(failed)
        assert (solo.metric("punctual_chain_lag_seconds_sum") or 0) / lagged < 5
    found = jobs(crd, namespace)
    assert set(runs_of(found, "b-ok")) <= set(runs_of(found, "a-ok"))
    assert runs_of(found, "b-bad") == {}, "a failed run starts nothing on: Succeeded"
    assert set(runs_of(found, "c-bad")) <= set(runs_of(found, "a-bad"))
    for name in ("b-ok", "c-bad"):
        creates = creates_of(crd, namespace, name)
        assert creates and max(creates.values()) == 1, creates
    status = status_of(crd, namespace, "b-ok")
    assert status["after"][0]["schedule"] == "a-ok"
    firing = next(f for f in status["recentFirings"] if f.get("upstream"))
    assert firing["upstream"] == [f"a-ok/a-ok-{int(tick_of(firing['job']).timestamp())}"]


def test_chains_of_three_and_fan_in_of_two(crd: Cluster, namespace: str, tmp_path: Path) -> None:
    if crd.audit_log is None:
        pytest.skip("needs the local control plane's audit log")
    with operators(crd, namespace, tmp_path) as ops:
        ops.start("solo")
        wait_until(lambda: leader_of(crd, namespace) == "solo", 20, what="leadership")
        apply(
            crd,
            namespace,
            after("b", "a"),
            after("c", "b"),
            after("d", "a", "e"),
            upstream("a", "*/4 * * * * *"),
            upstream("e", "*/8 * * * * *"),
        )
        time.sleep(20)
        found = jobs(crd, namespace)
        a = [t for t, o in runs_of(found, "a").items() if o == "Succeeded"]
        e = [t for t, o in runs_of(found, "e").items() if o == "Succeeded"]
        assert len(a) >= 4 and len(e) >= 2

        def followed() -> bool:
            now = jobs(crd, namespace)
            b = {t for t, o in runs_of(now, "b").items() if o == "Succeeded"}
            return set(a) <= b and set(a) <= set(runs_of(now, "c"))

        wait_until(followed, 10, what="b after a, c after b")
        wait_until(lambda: set(a) & set(e) <= set(runs_of(jobs(crd, namespace), "d")), 10, what="d")
    found = jobs(crd, namespace)
    assert set(runs_of(found, "c")) <= set(runs_of(found, "b")) <= set(runs_of(found, "a"))
    both = set(runs_of(found, "a")) & set(runs_of(found, "e"))
    assert set(runs_of(found, "d")) <= both, "fan-in: only ticks both upstreams ran"
    assert runs_of(found, "d"), "fan-in ran"
    for name in ("b", "c", "d"):
        creates = creates_of(crd, namespace, name)
        assert creates and max(creates.values()) == 1, (name, creates)


def test_a_leader_killed_after_a_ends_runs_b_exactly_once_each_round(
    crd: Cluster, namespace: str, tmp_path: Path
) -> None:
    """Rounds 1 and 2 stop the leader (SIGSTOP) while A's run still runs and kill it
    (SIGKILL) once the run has ended: the kill lands after A's end and before B's create
    for certain. Round 3 kills it the moment A's run is seen ended (a race with its
    create). Each round a new standby is started, so that there is one to take over."""
    if crd.audit_log is None:
        pytest.skip("needs the local control plane's audit log")
    rounds: list[int] = []
    with operators(crd, namespace, tmp_path) as ops:
        replicas = {"k0": ops.start("k0"), "k1": ops.start("k1")}
        wait_until(lambda: leader_of(crd, namespace) in replicas, 20, what="a leader")
        apply(crd, namespace, after("kb", "ka"), upstream("ka", "*/15 * * * * *", run_ms=3000))
        for round_ in range(3):

            def new_run() -> str | None:
                names = sorted(runs_of(jobs(crd, namespace), "ka"))
                fresh = [t for t in names if t not in rounds]
                return f"ka-{fresh[-1]}" if fresh else None

            run = wait_until(new_run, 30, what="a new run of A")
            tick = int(run.rsplit("-", 1)[1])
            leader = wait_until(
                lambda: leader_of(crd, namespace) in replicas and leader_of(crd, namespace),
                30,
                what="a live leader",
            )
            if round_ < 2:
                replicas[leader].signal(signal.SIGSTOP)
            wait_until(
                lambda run=run: outcome(jobs(crd, namespace).get(run, {})) == "Succeeded",
                20,
                interval=0.05,
                what=f"{run} ended",
            )
            replicas[leader].signal(signal.SIGKILL)
            replicas[leader].proc.wait(5)
            del replicas[leader]
            standby = f"k{round_ + 2}"
            replicas[standby] = ops.start(standby)
            wait_until(
                lambda tick=tick: f"kb-{tick}" in jobs(crd, namespace),
                30,
                what=f"kb-{tick} after a kill",
            )
            rounds.append(tick)
        time.sleep(3)  # anything doubled late would be created by now
    creates = creates_of(crd, namespace, "kb")
    for tick in rounds:
        assert creates[f"kb-{tick}"] == 1, creates
    assert max(creates.values()) == 1, creates


def test_a_gate_runs_when_its_upstream_succeeded_and_is_missed_when_it_failed(
    crd: Cluster, namespace: str, tmp_path: Path
) -> None:
    with operators(crd, namespace, tmp_path) as ops:
        ops.start("solo")
        wait_until(lambda: leader_of(crd, namespace) == "solo", 20, what="leadership")
        gates = []
        for name, up in (("g-ok", "u-ok"), ("g-bad", "u-bad")):
            gate = schedule(name, "*/6 * * * * *", successfulJobsHistoryLimit=100)
            gate["spec"]["after"] = [{"schedule": up, "on": "Succeeded", "within": "3s"}]
            gates.append(gate)
        apply(
            crd,
            namespace,
            *gates,
            upstream("u-ok", "*/6 * * * * *"),
            failing(upstream("u-bad", "*/6 * * * * *")),
        )
        time.sleep(20)
    found = jobs(crd, namespace)
    ok = runs_of(found, "g-ok")
    assert len(ok) >= 2 and set(ok) <= set(runs_of(found, "u-ok"))
    assert runs_of(found, "g-bad") == {}, "a gate whose upstream failed never runs"
    missed = [
        f for f in status_of(crd, namespace, "g-bad")["recentFirings"] if f["outcome"] == "Missed"
    ]
    assert len(missed) >= 2 and all("gate: no run of u-bad" in f["reason"] for f in missed)


def test_a_cycle_and_a_missing_upstream_are_invalid_specs_and_the_crd_checks_after(
    crd: Cluster, namespace: str, tmp_path: Path
) -> None:
    refused = crd.kubectl(
        "apply",
        "-n",
        namespace,
        "-f",
        "-",
        input=json.dumps(
            {
                **(bad := after("x", "y")),
                "spec": {**bad["spec"], "after": [{"schedule": "y", "on": "Sometimes"}]},
            }
        ),
        check=False,
    )
    assert refused.returncode != 0 and "Unsupported value" in refused.stderr
    bare = crd.kubectl(
        "apply", "-n", namespace, "-f", "-", check=False,
        input="apiVersion: punctual.dev/v1\nkind: CronSchedule\nmetadata: {name: bare}\n"
        "spec:\n  after:\n  - schedule: y\n    on: Failed\n"
        "  jobTemplate: {spec: {template: {spec: {restartPolicy: Never, containers: "
        "[{name: c, image: busybox}]}}}}\n",
    )  # fmt: skip
    # YAML 1.1 reads a bare `on` as true: refused, never silently the default.
    assert bare.returncode != 0 and 'unknown field "spec.after[0].true"' in bare.stderr
    gate_without_within = schedule("gw", "* * * * *")
    gate_without_within["spec"]["after"] = [{"schedule": "y"}]
    refused = crd.kubectl(
        "apply", "-n", namespace, "-f", "-", input=json.dumps(gate_without_within), check=False
    )
    assert refused.returncode != 0 and "within" in refused.stderr
    with operators(crd, namespace, tmp_path) as ops:
        ops.start("solo")
        wait_until(lambda: leader_of(crd, namespace) == "solo", 20, what="leadership")
        apply(crd, namespace, after("x", "y"), after("y", "x"), after("lonely", "nobody"))

        def invalid(name: str) -> str:
            conditions = status_of(crd, namespace, name).get("conditions") or []
            found = [c for c in conditions if c["type"] == "InvalidSpec" and c["status"] == "True"]
            return str(found[0]["message"]) if found else ""

        assert "a cycle (x -> y -> x)" in wait_until(lambda: invalid("x"), 20, what="x invalid")
        assert "a cycle (y -> x -> y)" in wait_until(lambda: invalid("y"), 20, what="y invalid")
        assert "no CronSchedule nobody" in wait_until(
            lambda: invalid("lonely"), 20, what="lonely invalid"
        )
        apply(crd, namespace, upstream("nobody", "*/5 * * * * *"))  # the upstream comes
        wait_until(lambda: not invalid("lonely"), 20, what="lonely valid again")
        crd.kubectl("delete", "cronschedule", "nobody", "-n", namespace)  # deleted mid-chain
        assert "no CronSchedule nobody" in wait_until(
            lambda: invalid("lonely"), 20, what="lonely invalid again"
        )


def test_a_backfill_of_a_runs_b_once_for_each_backfilled_run_unless_asked_not_to(
    crd: Cluster, namespace: str, tmp_path: Path
) -> None:
    if crd.audit_log is None:
        pytest.skip("needs the local control plane's audit log")
    end = now().replace(microsecond=0) - timedelta(seconds=20)
    start = end - timedelta(seconds=6)  # six ticks, all before B exists
    window = ("--from", _rfc3339(start), "--to", _rfc3339(end))
    not_backfills = after("nb", "past")
    not_backfills["spec"]["after"][0]["backfills"] = False
    with operators(crd, namespace, tmp_path) as ops:
        ops.start("solo")
        wait_until(lambda: leader_of(crd, namespace) == "solo", 20, what="leadership")
        apply(
            crd,
            namespace,
            upstream("past", "* * * * * *", suspend=True),  # only the backfill fires
            after("pb", "past"),
            not_backfills,
        )
        time.sleep(2)
        asked = _cli(crd, "backfill", "past", "-n", namespace, *window)
        assert asked.returncode == 0, asked.stderr
        ticks = {int((start + timedelta(seconds=s)).timestamp()) for s in range(6)}
        wait_until(
            lambda: set(runs_of(jobs(crd, namespace), "pb")) == ticks, 30, what="pb after each"
        )
        time.sleep(3)
    creates = creates_of(crd, namespace, "pb")
    assert set(creates) == {f"pb-{t}" for t in ticks} and max(creates.values()) == 1
    assert runs_of(jobs(crd, namespace), "nb") == {}, "backfills: false"


def test_a_chain_across_two_shards_runs_once_per_upstream_run(
    crd: Cluster, namespace: str, tmp_path: Path
) -> None:
    """With --shards 2 and one replica per shard, an upstream and its downstream decided by
    different leaders: the downstream reads its upstream from its own index, and its own
    claim is the fence."""
    if crd.audit_log is None:
        pytest.skip("needs the local control plane's audit log")
    lease = ("--lease-duration", "6", "--renew-deadline", "4", "--retry-period", "1")

    def holders() -> set[str]:
        out = crd.kubectl("get", "leases", "-n", namespace, "-o", "json")
        return {
            str(item["spec"].get("holderIdentity") or "")
            for item in json.loads(out.stdout)["items"]
            if item["metadata"]["name"].endswith("-of-2")
        } - {""}

    def uid(name: str) -> str:
        out = crd.kubectl("get", "cronschedule", name, "-n", namespace, "-o", "json")
        return str(json.loads(out.stdout)["metadata"]["uid"])

    with operators(crd, namespace, tmp_path) as ops:
        for name in ("s0", "s1"):
            ops.start(name, "--shards", "2", lease=lease)
        wait_until(lambda: holders() == {"s0", "s1"}, 60, what="one shard each")
        crossing: list[tuple[str, str]] = []
        for i in range(6):  # until a pair lands on two shards
            up, down = f"x{i}", f"y{i}"
            # The downstream first: a new one follows the upstream runs after its own
            # creation, and applied second it could be created a second after the
            # upstream's first tick (CI: y3 created just after x3's run at :48, rightly
            # not run for it, and the test waited for it).
            apply(crd, namespace, after(down, up), upstream(up, "*/4 * * * * *"))
            if shard_of(uid(up), 2) != shard_of(uid(down), 2):
                crossing.append((up, down))
                break
        assert crossing, "no pair landed on two shards"
        up, down = crossing[0]
        time.sleep(14)
        done = [t for t, o in runs_of(jobs(crd, namespace), up).items() if o == "Succeeded"]
        assert len(done) >= 2
        wait_until(lambda: set(done) <= set(runs_of(jobs(crd, namespace), down)), 10, what=down)
    creates = creates_of(crd, namespace, down)
    assert creates and max(creates.values()) == 1, creates
