"""The scale-out targets, met or not, each with the figures that say why.

Why it exists: the scale-out targets (herds against the raw client, CPU per firing,
shards, an overloaded API server, sustained load, 100 000 schedules) are measured by
several scenarios of `bench/run.py` and by `bench/scale.py`. This module reads their raw
files and gives one table: target, measured, met, and, when not met, the measured reason
(where the time or the CPU went). `rendering.ticks` puts it in results.md.

What it must never do: run anything, write a file, or state a figure that is not in the
raw files.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable
from pathlib import Path
from typing import Any

Result = dict[str, Any]

RAW_RATIO = 1.25  # a herd: time to create all within 1.25x the raw client's
CPU_MS = 1.0  # operator CPU per firing
RSS_MB = 1000.0  # 100 000 schedules, per replica
ON_TIME_S = 1.0


def load_scale(folder: Path) -> dict[str, Result]:
    """bench/scale.py's raw files by row id (`punctual-sustained-defaults-2000`, ...)."""
    raw = folder / "raw"
    if not raw.is_dir():
        return {}
    return {p.stem: json.loads(p.read_text()) for p in sorted(raw.glob("*.json"))}


def _get(results: Iterable[Result], scenario: str, n: int) -> Result | None:
    return next((r for r in results if r["scenario"] == scenario and r["n"] == n), None)


def _cores(r: Result, window: str, name: str) -> float:
    cpu = r.get(window) or r.get("cpu") or {}  # the raw client has one window only
    wall = float(cpu.get("wall") or math.nan)
    return float((cpu.get("seconds") or {}).get(name, math.nan)) / wall


def _operator_seconds(r: Result, window: str) -> float:
    seconds = (r.get(window) or {}).get("seconds") or {}
    return float(sum(v for k, v in seconds.items() if k.startswith("operator ") and v is not None))


def held_at_once(r: Result) -> float | None:
    """The creates the API server held at once, on average: their audit answer times summed
    over the time to create all (Little's law; the client keeps the rest in hand)."""
    answered = (r.get("firings") or {}).get("answered_in") or {}
    if not answered.get("count") or not r.get("makespan"):
        return None
    return float(answered["mean"] * answered["count"] / r["makespan"])


def _held(r: Result) -> str:
    held = held_at_once(r)
    return "n/a" if held is None else f"{held:.0f}"


def _answered(r: Result) -> str:
    answered = (r.get("firings") or {}).get("answered_in") or {}
    return f"{answered['p50'] * 1000:.0f} ms (p50)" if answered.get("count") else "n/a"


def _s(seconds: float | None) -> str:
    return "n/a" if seconds is None else f"{seconds:.1f} s"


def _row(target: str, measured: str, met: bool | None, why: str = "") -> str:
    verdict = "-" if met is None else ("met" if met else "not met")
    return f"| {target} | {measured} | {verdict} | {why if met is not True else ''} |"


def rows(results: list[Result], scale: dict[str, Result]) -> list[str]:
    return [
        "| scale-out target | measured | | why not |",
        "|---|---|---|---|",
        *_herd_rows(results),
        *_cpu_rows(results),
        *_shard_rows(results),
        *_overload_rows(results),
        *_sustained_rows(scale),
        *_startup_rows(scale),
    ]


def _herd_rows(results: list[Result]) -> list[str]:
    out = []
    for n in (1000, 10000):
        r, raw = _get(results, "punctual-herd-defaults", n), _get(results, "raw-same", n)
        if r is None or raw is None:
            target = f"herd of {n}: all created within 1.25x the raw client"
            out.append(_row(target, "not run", None))
            continue
        ratio = r["makespan"] / raw["makespan"]
        mine, theirs = r.get("cpu_firing") or {}, raw.get("cpu_firing") or raw.get("cpu") or {}
        busy = float(mine.get("system_busy") or math.nan) / float(mine.get("wall") or math.nan)
        api = float((mine.get("seconds") or {}).get("kube-apiserver", math.nan))
        raw_api = float((theirs.get("seconds") or {}).get("kube-apiserver", math.nan))
        op = _operator_seconds(r, "cpu_firing")
        why = (
            f"the operator's one event loop spent {op:.1f} CPU-seconds on the herd "
            f"({op / n * 1000:.2f} ms a firing); all processes kept {busy:.2f} of the 2 cores "
            f"busy, the API server {api:.1f} CPU-seconds (for the raw client's creates "
            f"{raw_api:.1f}; the herd's window also holds the watches of every Job)"
        )
        jobs = _get(results, "raw-same-punctual-jobs", n)
        if jobs is not None:  # the API server's part apart from the operator's
            why = (
                f"{_held(r)} of Punctual's creates in the API server at once, each "
                f"{_answered(r)} there; the plain client sending Punctual's own Jobs (fence, "
                f"finalizer, owner, stamped pod template) took {jobs['makespan']:.2f} s "
                f"({jobs['makespan'] / raw['makespan']:.2f}x its own Jobs; {_held(jobs)} at "
                f"once, {_answered(jobs)} each), Punctual {r['makespan'] / jobs['makespan']:.2f}x "
                f"that; {why}"
            )
        out.append(
            _row(
                f"herd of {n}: all created within 1.25x the raw client",
                f"{r['makespan']:.2f} s vs {raw['makespan']:.2f} s: {ratio:.2f}x",
                ratio <= RAW_RATIO,
                why,
            )
        )
        cronjob = _get(results, "cronjob-herd-same", n)
        same = _get(results, "punctual-herd-same", n)
        if cronjob is not None:
            mine = same or r
            label = "at the same QPS (200/400)" if same else "Punctual at its defaults"
            out.append(
                _row(
                    f"herd of {n}: faster than CronJob, {label}",
                    f"{mine['makespan']:.2f} s vs {cronjob['makespan']:.2f} s: "
                    f"{mine['makespan'] / cronjob['makespan']:.2f}x",
                    mine["makespan"] < cronjob["makespan"],
                )
            )
    return out


def _cpu_rows(results: list[Result]) -> list[str]:
    out = []
    for n in (1000, 10000):
        r = _get(results, "punctual-herd-defaults", n)
        if r is None:
            continue
        created = r["firings"]["created"] or 1
        firing = 1000 * _operator_seconds(r, "cpu_firing") / created
        life = 1000 * _operator_seconds(r, "cpu") / created
        requests = sum((r.get("operator_requests") or {}).values()) / created
        why = (
            f"{requests:.1f} requests per firing over its life (create, status writes, "
            "Event, Job clean-up) and the watch events that echo them, each tens to "
            "hundreds of microseconds of Python"
        )
        out.append(
            _row(
                f"≤ 1 ms operator CPU per firing, herd of {n}",
                f"{firing:.2f} ms from the tick to the last create; {life:.2f} ms over the "
                "firings' whole life",
                firing <= CPU_MS and life <= CPU_MS,
                why,
            )
        )
    return out


def _shard_rows(results: list[Result]) -> list[str]:
    out = []
    for replicas in (1, 2, 4):
        r = next(
            (x for x in results if x["scenario"] == f"punctual-herd-defaults-r{replicas}s16"), None
        )
        if r is None:
            continue
        split = sorted((r.get("split") or {}).values())
        per = r.get("replicas") or {}
        cpu = ", ".join(f"{v['cpu_firing']:.2f}" for v in per.values() if v.get("cpu_firing"))
        creates = ", ".join(str(v["creates"]) for v in per.values())
        even = bool(split) and max(split) - min(split) <= 1 and sum(split) == 16
        out.append(
            _row(
                f"{replicas} replica(s), 16 shards, herd of {r['n']}: the split even (±1)",
                f"shards {split}; Jobs created {creates}; CPU while firing {cpu} s",
                even,
                "uneven split",
            )
        )
    kill = next((x for x in results if x["scenario"].endswith("-kill")), None)
    if kill is not None and kill.get("kill"):
        skew = kill["kill"]["skew"]
        dead, others, before = skew["dead"], skew["others"], skew["others_before"]
        lease = 15.0
        ok = (
            kill["firings"]["missing"] == 0
            and kill["firings"]["duplicates"] == 0
            and dead["max"] <= lease + 5
            and others["p99"] <= max(1.0, 3 * before["p99"])
        )
        out.append(
            _row(
                "kill -9 of one of 2 replicas: its shards about one Lease late, the others "
                "unchanged, none lost or twice",
                f"dead replica's shards max {dead['max']:.1f} s (Lease 15 s); others p99 "
                f"{before['p99']:.2f} s before, {others['p99']:.2f} s after; missing "
                f"{kill['firings']['missing']}, twice {kill['firings']['duplicates']}",
                ok,
                "the taken-over shards' catch-up shares the two cores",
            )
        )
    return out


def _overload_rows(results: list[Result]) -> list[str]:
    r = next((x for x in results if x["scenario"] == "punctual-herd-overload"), None)
    raw = next((x for x in results if x["scenario"] == "raw-overload"), None)
    if r is None or "refusals" not in r:
        return []
    refusals = r["refusals"]
    created = r["firings"]["created"] or 1
    extra = refusals["creates"] - created  # create requests beyond one per Job
    per_429 = extra / refusals["refused"] if refusals["refused"] else 0.0
    during = refusals.get("sent_during_retry_after", 0)
    rows = [
        _row(
            "an overloaded API server is not made worse: 429s counted, no retry storm",
            f"{refusals['refused']} 429s, {per_429:.2f} extra create per 429, {during} "
            "creates sent during a Retry-After",
            per_429 <= 1.0 + 1e-9 and not during,
            "more requests than 429s, or creates sent while told to wait",
        )
    ]
    if raw is not None and "refusals" in raw:
        theirs = raw["refusals"]
        rows.append(
            _row(
                "(for reference) the same overloaded server and herd, the raw client",
                f"Punctual {r['makespan']:.1f} s with {refusals['refused']} 429s; the raw "
                f"client {raw['makespan']:.1f} s with {theirs['refused']} 429s and "
                f"{theirs.get('sent_during_retry_after', 0)} creates sent during a "
                "Retry-After (it waits only for the refused request, as client-go does)",
                None,
            )
        )
    return rows


def _sustained_rows(scale: dict[str, Result]) -> list[str]:
    out = []
    for row_id, r in scale.items():
        if not row_id.startswith("punctual-sustained"):
            continue
        s = r["sustained"]
        seconds = s["end"] - s["start"]
        achieved = s["created"] / seconds
        asked = s["expected"] / seconds
        p99 = (s.get("skew") or {}).get("p99", math.nan)
        api = _cores(r, "cpu_window", "kube-apiserver")
        op = _cores(r, "cpu_window", "operator bench-a")
        out.append(
            _row(
                f"sustained: {r['n']} schedules once a minute for {s['minutes']} min, every "
                "firing on time (p99 skew ≤ 1 s)",
                f"{achieved:.0f} of {asked:.0f} firings/s (raw client {r['raw']['rate']:.0f} "
                f"creates/s); p99 skew {p99:.2f} s; missing {s['missing']}, twice "
                f"{s['duplicates']}",
                s["missing"] == 0 and s["duplicates"] == 0 and p99 <= ON_TIME_S,
                f"the API server used {api:.2f} cores and the operator {op:.2f} of 2 "
                "(each firing is several writes, each Job's pod, and its watch events)",
            )
        )
    return out


def _startup_rows(scale: dict[str, Result]) -> list[str]:
    out = []
    for row_id, r in scale.items():
        if not row_id.startswith("punctual-startup"):
            continue
        s = r["startup"]
        for section, when in (("startup", "first start"), ("restart", "restart, with status")):
            if section not in r:
                continue
            part = r[section]
            rss = part.get("operator_peak_rss_mb") or (r.get("peak_rss_mb") or {}).get(
                "operator bench-a" if section == "startup" else "operator bench-b"
            )
            rss = float(rss or math.nan)
            rss_mb = rss * 1.048576  # VmHWM is in MiB
            out.append(
                _row(
                    f"{r['n']} schedules ({when}): peak RSS ≤ 1 GB per replica",
                    f"{rss:.0f} MiB = {rss_mb:.0f} MB; ready at +{part['ready_s']:.1f} s",
                    rss_mb <= RSS_MB,
                    "every replica indexes every schedule (hot standby for any shard), "
                    "about 1.1 KB each packed, on top of the interpreter",
                )
            )
        first = s.get("first_on_time_s")
        due = s.get("first_tick_s")
        done = s.get("first_statuses_done_s")
        claims = (
            f"every first status written by +{done:.0f} s"
            if done is not None
            else f"{s.get('first_statuses')} first statuses written by the cap"
        )
        out.append(
            _row(
                f"{r['n']} schedules: the first due tick fires on time",
                f"first tick at +{_s(due)}, first on-time Job at +{_s(first)}; {claims}",
                first is not None and due is not None and first <= due + ON_TIME_S,
                "due ticks waited behind the first claims",
            )
        )
        restart = r.get("restart")
        if restart is not None:
            first_page = restart.get("first_on_time_listed_first_s")
            last_page = restart.get("first_on_time_listed_last_s")
            reason = (
                "nothing is decided before the list of every schedule, with its status, is complete"
                if first_page is None
                else "a schedule is decided once its page of the list has arrived: those "
                "listed last wait for the whole list"
            )
            out.append(
                _row(
                    f"{r['n']} schedules, restart: the first on-time firing within 10 s (our bar)",
                    f"index complete at +{_s(restart.get('index_complete_s'))}, first Job at "
                    f"+{_s(restart.get('first_create_s'))}, first on-time Job at "
                    f"+{_s(restart.get('first_on_time_s'))} (listed first: +{_s(first_page)}, "
                    f"listed last: +{_s(last_page)})",
                    (restart.get("first_on_time_s") or math.inf) <= 10.0,
                    reason,
                )
            )
        failover = r.get("failover")
        if failover is not None:
            bar = failover["lease_duration_s"] + 2
            first = failover.get("first_on_time_s")
            rss = failover.get("rss_mb") or {}
            leader, standby = rss.get("leader") or math.nan, rss.get("standby") or math.nan
            out.append(
                _row(
                    f"{r['n']} schedules, failover (kill -9): first on-time firing <= one Lease "
                    f"duration + 2 s ({bar:g} s)",
                    f"Lease taken at +{_s(failover.get('lease_taken_s'))}, first on-time Job at "
                    f"+{_s(first)}",
                    (first or math.inf) <= bar,
                    "the standby takes the Lease only once it has expired",
                )
            )
            out.append(
                _row(
                    f"{r['n']} schedules, failover: the standby's memory within 10 % of the "
                    "leader's",
                    f"standby {standby:.0f} MB, leader {leader:.0f} MB",
                    abs(standby - leader) <= 0.1 * leader,
                    "the leader keeps what it wrote until the watch delivers it",
                )
            )
    return out
