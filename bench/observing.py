"""Measuring one tick: waiting for the firings, letting the controller settle, recording.

Why it exists: the CronJob and the Punctual scenarios set up differently but are measured
the same way, from the API server's own data: the audit log's creates and writes (by the
controller's user agent), the Jobs and Events it lists, and the CPU and memory /proc
reports between the moment before the tick and the moment the controller goes quiet.
This module is that measurement, written into the scenario's result.

What it must never do: take a figure from the process under test where the API server
has it (the operator's own counters are kept only as a cross-check), create or change
anything in the cluster, or do anything at import time.
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import measure
import stacks
from clock import hms, log, sleep_until, wall
from kubeapi import is_complete, list_all, summarize_events
from operatorprocess import OperatorProcess
from procfs import CpuSnapshot, cpu_between, peak_rss_mb, snapshot
from replicas import PySpy
from settings import EXPORTS_GROUP, NAMESPACE, rel
from trial import Trial

# Longer than Punctual's status deferral (10 s: bookkeeping waits for a write to carry it),
# so that a deferred write is counted, not cut off.
QUIET_FOR = 12.0


@dataclass(frozen=True)
class Expectation:
    """What a scenario set up: when its schedules fire, and whose requests count."""

    tick: float  # the first tick
    last_tick: float
    expected: dict[str, float]  # schedule name -> the tick it must fire for
    tick_of: Callable[[int], float]  # the number in a Job's name -> the tick it stands for
    agent: Callable[[str], bool]  # is this user agent the controller under test?


@dataclass
class Window:
    """The measured stretch of time, from just before the tick until the controller is quiet."""

    before: CpuSnapshot
    created: int = 0  # Jobs created for the tick
    fired: float = math.nan  # when the last of them was seen (or the cap)
    after_firing: CpuSnapshot | None = None
    settled: float = math.nan
    last_write: float = math.nan  # the controller's last write (not counting its Lease)
    complete: int = 0  # Jobs complete when it settled
    settle_reason: str = ""
    after: CpuSnapshot | None = None


async def observe(
    trial: Trial,
    expect: Expectation,
    *,
    subject_pid: int,
    operator: OperatorProcess | None = None,
) -> None:
    """Measure the tick `expect` describes; `subject_pid` is the controller's process."""
    n = trial.n
    spy = None
    if operator is not None and trial.settings.profiler == "py-spy":
        spy = PySpy(operator.pid, trial.workdir / f"py-spy-{operator.identity}.txt")
    requests_before = operator.api_requests() if operator else {}
    passes_before = operator.metric("punctual_passes_total") if operator else None
    if operator is not None:
        await sleep_until(expect.tick - 1.5)
        trial.result["operator_clock"] = {
            "offset": operator.metric("punctual_clock_offset_seconds"),
            "uncertainty": operator.metric("punctual_clock_uncertainty_seconds"),
        }
    await sleep_until(expect.tick - 1.0)
    trial.tail.poll()
    window = Window(before=snapshot(trial.component_pids()))
    log(f"waiting for {n} creates (tick {hms(expect.tick)}, last tick {hms(expect.last_tick)})")
    await _await_firings(trial, expect, window)
    if spy is not None:  # the profile covers the firing, not the bookkeeping after it
        _record_py_spy(trial, spy)
    after = window.fired - expect.tick
    log(f"{window.created}/{n} created, {after:.1f}s after the tick; settling")
    await _settle(trial, expect, window)
    requests_after = operator.api_requests() if operator else {}
    passes_after = operator.metric("punctual_passes_total") if operator else None
    await _record(trial, expect, window, subject_pid)
    if operator is not None:
        trial.result["operator_requests"] = {
            k: v - requests_before.get(k, 0.0)
            for k, v in requests_after.items()
            if v - requests_before.get(k, 0.0)
        }
    if passes_before is not None and passes_after is not None:  # passes per firing
        trial.result["operator_passes"] = passes_after - passes_before
    f = trial.result["firings"]
    writes = trial.result["writes"]
    log(
        f"{trial.scenario.id} n={n}: created {f['created']}/{n}, missing {f['missing']}, "
        f"duplicates {f['duplicates']}, skew p50 {f['skew']['p50']:.3f}s "
        f"p99 {f['skew']['p99']:.3f}s max {f['skew']['max']:.3f}s, "
        f"writes/firing {writes['without_leases'] / max(1, f['created']):.2f}"
        + (
            f", passes/firing {trial.result['operator_passes'] / max(1, f['created']):.2f}"
            if "operator_passes" in trial.result
            else ""
        )
    )


async def _await_firings(trial: Trial, expect: Expectation, window: Window) -> None:
    """Until every expected Job is created, or a time cap."""
    fire_cap = expect.last_tick + 60 + 0.3 * trial.n
    while wall() < fire_cap:
        await asyncio.sleep(1.0)
        window.created += sum(
            1
            for r in trial.tail.poll()
            if r.verb == "create"
            and r.resource in measure.FIRED
            and r.code == 201
            and expect.agent(r.agent)
        )
        if window.created >= trial.n:
            break
    window.fired = wall()
    window.after_firing = snapshot(trial.component_pids())


def _record_py_spy(trial: Trial, spy: PySpy) -> None:
    spied = spy.stop()
    trial.result["py_spy"] = {"file": rel(spy.out), "seconds": round(spied, 1), "rate": 100}
    if spy.out.exists():
        trial.result["py_spy"]["summary"] = stacks.summarize_collapsed(
            spy.out.read_text(), seconds=spied, rate=100
        )


async def _settle(trial: Trial, expect: Expectation, window: Window) -> None:
    """Until the Jobs finish and the controller has written what it records about them."""
    n = trial.n
    settle_cap = window.fired + (trial.settings.settle_cap or min(600.0, 30 + 0.15 * n))
    last_write = window.fired
    complete = 0
    next_list = 0.0
    while wall() < settle_cap:
        await asyncio.sleep(2.0)
        for r in trial.tail.poll():
            if expect.agent(r.agent) and r.resource != "leases":
                last_write = max(last_write, r.received)
        if wall() >= next_list:
            jobs = await list_all(trial.api, f"/apis/batch/v1/namespaces/{NAMESPACE}/jobs")
            # Exports have no controller: they never finish, and nothing waits for them.
            complete = sum(1 for j in jobs if is_complete(j)) + trial.result.get("exports", 0)
            next_list = wall() + (5.0 if n <= 2000 else 15.0)
        if complete >= window.created and wall() - last_write >= QUIET_FOR:
            break
    window.settled = wall()
    window.after = snapshot(trial.component_pids())
    window.last_write = last_write
    window.complete = complete
    window.settle_reason = (
        "all Jobs complete and the controller quiet"
        if complete >= window.created and window.settled - last_write >= QUIET_FOR
        else "time cap"
    )
    log(
        f"settled ({window.settle_reason}) {window.settled - window.fired:.1f}s later, "
        f"{complete} Jobs complete"
    )


async def _record(trial: Trial, expect: Expectation, window: Window, subject_pid: int) -> None:
    """The figures of the tick, from the audit log, the Jobs and Events, and /proc."""
    assert window.after is not None and window.after_firing is not None
    tick = expect.tick
    jobs = await list_all(trial.api, f"/apis/batch/v1/namespaces/{NAMESPACE}/jobs")
    if trial.result.get("exports"):
        jobs += await list_all(trial.api, f"{EXPORTS_GROUP}/namespaces/{NAMESPACE}/exports")
    events = await list_all(trial.api, f"/api/v1/namespaces/{NAMESPACE}/events")
    trial.tail.poll()
    requests = trial.tail.requests
    firings = measure.firings(
        requests,
        namespace=NAMESPACE,
        expected_ticks=expect.expected,
        tick_of=expect.tick_of,
        agent=expect.agent,
    )
    writes = measure.writes(
        requests,
        agent=expect.agent,
        start=tick - 1.0,
        end=window.settled,
        split=firings.last_create,
    )
    before_tick = measure.writes(requests, agent=expect.agent, start=0, end=tick - 1.0)

    def tick_of_job(name: str) -> float:
        parsed = measure.split_job_name(name)
        return expect.tick_of(parsed[1]) if parsed else math.nan

    pids = trial.component_pids()
    figures: dict[str, Any] = {
        "tick": tick,
        "last_tick": expect.last_tick,
        "firings": firings.as_dict(),
        "skews": sorted(round(s, 4) for s in firings.skews),
        "makespan": firings.last_create - tick,
        "writes": writes,
        "writes_before_tick": before_tick,
        "events": summarize_events(events),
        "jobs_complete": window.complete,
        "settle": {
            "reason": window.settle_reason,
            "after_firing": round(window.settled - window.fired, 1),
            "last_write_after_tick": round(window.last_write - tick, 2),
        },
        "cpu": cpu_between(window.before, window.after),
        "cpu_firing": cpu_between(window.before, window.after_firing),
        "subject_peak_rss_mb": round(peak_rss_mb(subject_pid), 1),
        "peak_rss_mb": {name: round(peak_rss_mb(pid), 1) for name, pid in pids.items()},
        "crosscheck": measure.creation_check(jobs, firings.created, tick_of_job),
        "refusals": measure.refusals(
            requests, agent=expect.agent, start=tick - 1.0, end=window.settled
        ),
    }
    trial.result.update(figures)
