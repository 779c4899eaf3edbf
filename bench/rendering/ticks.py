"""The tables of bench/run.py's results: results.md's text and skew.png.

Why it exists: every figure of a run's report is computed here from the raw files
(`<folder>/raw/*.json`, and `<folder>/baseline/raw/` for "Before and after"), so the
report can be rebuilt, and its numbers checked, without running the benchmark again;
and every committed results folder, whatever version of the bench wrote it, must still
render. The rendering package's `render` decides where the text goes.

What it must never do: measure, start or touch a process or a cluster, write a raw
file, or state a figure that is not in the raw files.
"""

from __future__ import annotations

import json
import math
import sys
from collections.abc import Iterable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from rendering import targets

Result = dict[str, Any]

LABELS = {
    "punctual-herd-defaults": "Punctual, defaults",
    "cronjob-herd-defaults": "CronJob, defaults",
    "punctual-herd-same": "Punctual, same QPS/burst",
    "cronjob-herd-same": "CronJob, same QPS/burst",
    "punctual-herd-fast": "Punctual, --qps 1000 --burst 2000 (tuning)",
    "raw-same": "raw limit (plain client)",
    "raw-same-punctual-jobs": "plain client, Punctual's Jobs (fenced)",
    "raw-defaults": "raw limit (defaults cluster)",
    "punctual-spread-defaults": "Punctual spread (H seconds), defaults",
    "cronjob-spread-defaults": "CronJob spread (distinct minutes), defaults",
    "failover-defaults": "Punctual failover, defaults",
    "punctual-herd-overload": "Punctual, defaults, overloaded API server",
    "raw-overload": "raw client (client-go's retries), overloaded API server",
}
ORDER = list(LABELS)
TARGET_P99 = 1.0
TARGET_WRITES = 2.0
TARGET_RSS = 250.0
TARGET_RAW_RATIO = 1.25


# -- loading ----------------------------------------------------------------------------


def load(results: Path) -> tuple[list[Result], list[Result], dict[str, Any]]:
    """(main results, profiled results, machine) from results/raw."""
    main: list[Result] = []
    profiled: list[Result] = []
    machine: dict[str, Any] = {}
    for path in sorted((results / "raw").glob("*.json")):
        data = json.loads(path.read_text())
        if path.name == "machine.json":
            machine = data
            continue
        (profiled if data.get("profiler") else main).append(data)
    main.sort(key=lambda r: (r["n"], _rank(r["scenario"])))
    profiled.sort(key=lambda r: (r["n"], _rank(r["scenario"])))
    return main, profiled, machine


def _rank(scenario: str) -> int:
    return ORDER.index(scenario) if scenario in ORDER else len(ORDER)


def _get(results: Iterable[Result], scenario: str, n: int) -> Result | None:
    return next((r for r in results if r["scenario"] == scenario and r["n"] == n), None)


# -- formatting -------------------------------------------------------------------------


def fmt_s(value: float | None, digits: int = 3) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "-"
    if abs(value) >= 100:
        return f"{value:.0f} s"
    if abs(value) >= 10:
        return f"{value:.1f} s"
    return f"{value:.{digits}f} s"


def fmt_ratio(a: float | None, b: float | None) -> str:
    if a is None or b is None or not b or math.isnan(a) or math.isnan(b):
        return "-"
    return f"{a / b:.2f}x"


def fmt_num(value: float | None, digits: int = 1) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "-"
    return f"{value:.{digits}f}"


def writes_per_firing(r: Result) -> float | None:
    created: int = r["firings"]["created"]
    if "writes" not in r or not created:
        return None
    return float(r["writes"]["without_leases"]) / created


def events_per_firing(r: Result) -> float | None:
    created: int = r["firings"]["created"]
    if "events" not in r or not created:
        return None
    events: dict[str, int] = r["events"]
    return sum(events.values()) / created


def controller_cpu(r: Result) -> float | None:
    seconds = (r.get("cpu") or {}).get("seconds") or {}
    if r["kind"] in ("punctual", "failover"):
        ops = [v for k, v in seconds.items() if k.startswith("operator")]
        if r["kind"] == "failover":
            ops = [v for k, v in seconds.items() if k == "operator bench-b"]
        return sum(ops) if ops else None
    if r["kind"] == "cronjob":
        return seconds.get("cronjob-controller")
    return (r.get("client") or {}).get("cpu")


def skew(r: Result, key: str) -> float | None:
    value = r["firings"]["skew"].get(key)
    return None if value is None else float(value)


def write_breakdown(r: Result) -> str:
    created = r["firings"]["created"] or 1
    parts = []
    for kind, count in (r.get("writes") or {}).get("by_kind", {}).items():
        if kind.endswith(" leases"):
            continue
        parts.append(f"{kind} {count / created:.2f}")
    return ", ".join(parts) or "-"


# -- the report -------------------------------------------------------------------------


def _client_cap(p: dict[str, Any]) -> str:
    """The operator's client-side limit as run: a QPS and burst, or none (the default
    since the scale-out work: as fast as the API server admits, pausing on 429 and 5xx)."""
    if not p.get("qps"):
        return "no client cap (follows the API server)"
    return f"QPS {p['qps']:g}, burst {p['burst']}"


def _settings_table(results: list[Result]) -> list[str]:
    lines = [
        "| profile | Punctual (`punctual run`) "
        "| CronJob controller (its own kube-controller-manager) |",
        "|---|---|---|",
    ]
    seen = set()
    for r in results:
        if r["profile"] in seen:
            continue
        seen.add(r["profile"])
        p = r["settings"]["punctual"]
        k = r["settings"]["cronjob-controller"]
        flags = p.get("flags")
        given = f"`{flags}`" if flags else "no flags"
        lines.append(
            f"| {r['profile']} | {given}: {_client_cap(p)}, workers "
            f"{p['workers']} | --kube-api-qps {k['kube-api-qps']} --kube-api-burst "
            f"{k['kube-api-burst']}, --concurrent-cron-job-syncs "
            f"{k['concurrent-cron-job-syncs']} |"
        )
    return lines


def _herd_table(results: list[Result], n: int) -> list[str]:
    lines = [
        "| scenario | created / expected | missing | duplicate | skew p50 | p99 | max "
        "| writes per firing (kinds) | Events per firing | controller CPU | peak RSS |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in results:
        if r["n"] != n or r["shape"] == "spread" or r["kind"] == "failover":
            continue
        f = r["firings"]
        wpf = writes_per_firing(r)
        cpu = controller_cpu(r)
        rss = r.get("subject_peak_rss_mb") if r["kind"] == "punctual" else None
        if r["kind"] == "cronjob":
            rss = (r.get("peak_rss_mb") or {}).get("cronjob-controller")
        lines.append(
            f"| {LABELS.get(r['scenario'], r['scenario'])} | {f['created']} / {f['expected']} "
            f"| {f['missing']} | {f['duplicates']} | {fmt_s(skew(r, 'p50'))} "
            f"| {fmt_s(skew(r, 'p99'))} | {fmt_s(skew(r, 'max'))} "
            f"| {fmt_num(wpf, 2) if wpf is not None else '-'}{_capped(r)}"
            f"{' (' + write_breakdown(r) + ')' if wpf is not None else ''} "
            f"| {fmt_num(events_per_firing(r), 2)} "
            f"| {fmt_s(cpu, 1)}{'¹' if r['kind'] == 'cronjob' else ''}"
            f"{'²' if r['kind'] == 'raw' else ''} "
            f"| {fmt_num(rss, 0) + ' MB' if rss else '-'}{'¹' if r['kind'] == 'cronjob' else ''} |"
        )
    return lines


def _capped(r: Result) -> str:
    """A mark for writes counted before every Job finished (the settle time cap)."""
    return "†" if (r.get("settle") or {}).get("reason") == "time cap" else ""


def _ratio_rows(results: list[Result], n: int) -> list[str]:
    pairs = [
        (
            "Punctual / CronJob, **both at defaults**",
            "punctual-herd-defaults",
            "cronjob-herd-defaults",
        ),
        (
            "Punctual / CronJob, **same QPS/burst** (200/400)",
            "punctual-herd-same",
            "cronjob-herd-same",
        ),
        ("Punctual (defaults) / raw limit", "punctual-herd-defaults", "raw-same"),
        (
            "Punctual (defaults) / plain client with Punctual's Jobs",
            "punctual-herd-defaults",
            "raw-same-punctual-jobs",
        ),
        ("plain client: Punctual's Jobs / its own", "raw-same-punctual-jobs", "raw-same"),
        ("Punctual (same QPS/burst) / raw limit", "punctual-herd-same", "raw-same"),
        ("CronJob (defaults) / raw limit", "cronjob-herd-defaults", "raw-same"),
        ("CronJob (same QPS/burst) / raw limit", "cronjob-herd-same", "raw-same"),
    ]
    lines = [
        "| ratio (lower is better for Punctual) | skew p50 | skew p99 | skew max "
        "(= time to create all N) |",
        "|---|---|---|---|",
    ]
    for label, a_id, b_id in pairs:
        a, b = _get(results, a_id, n), _get(results, b_id, n)
        if a is None or b is None:
            continue
        lines.append(
            f"| {label} | {fmt_ratio(skew(a, 'p50'), skew(b, 'p50'))} "
            f"| {fmt_ratio(skew(a, 'p99'), skew(b, 'p99'))} "
            f"| {fmt_ratio(skew(a, 'max'), skew(b, 'max'))} |"
        )
    return lines


def _rate_rows(results: list[Result], n: int) -> list[str]:
    """Where the time goes: creates per second and what each process burned meanwhile."""
    lines = [
        "| scenario | Jobs created per s (tick → last create) | subject's writes per s until "
        "the last create | the API server's time on a create, p50 · p90 (audit: received to "
        "answered) | creates in the API server at once, mean | CPU while firing, cores: "
        "subject · kube-apiserver · etcd · other controllers (KCM) · processes outside the "
        "benchmark |",
        "|---|---|---|---|---|---|",
    ]
    for r in results:
        if r["n"] != n or r["kind"] == "failover" or r["shape"] == "spread":
            continue
        f = r["firings"]
        span = r.get("makespan")
        if not span or span <= 0:
            continue
        rate = f["created"] / span
        writes = (r.get("writes") or {}).get("until_last_create")
        cpu = r.get("cpu_firing") or r.get("cpu") or {}
        wall = cpu.get("wall") or 0
        seconds = cpu.get("seconds") or {}

        def cores(name: str, seconds: dict[str, Any] = seconds, wall: float = wall) -> str:
            value = seconds.get(name)
            return f"{value / wall:.2f}" if value is not None and wall else "-"

        subject = "-"
        if r["kind"] in ("punctual", "failover") and wall:
            ops = [v for k, v in seconds.items() if k.startswith("operator")]
            subject = f"{sum(ops) / wall:.2f}"
        elif r["kind"] == "cronjob" and wall:
            subject = cores("cronjob-controller")
        elif r["kind"] == "raw" and wall:
            subject = f"{(cpu.get('harness') or 0) / wall:.2f} (client)"
        answered = f.get("answered_in") or {}
        server = (
            f"{answered['p50'] * 1000:.0f} · {answered['p90'] * 1000:.0f} ms"
            if answered.get("count")
            else "-"
        )
        held = targets.held_at_once(r)
        lines.append(
            f"| {LABELS.get(r['scenario'], r['scenario'])} | {rate:.0f} "
            f"| {fmt_num(writes / span if writes else None, 0)} | {server} "
            f"| {fmt_num(held, 1)} | {subject} · {cores('kube-apiserver')} · {cores('etcd')} · "
            f"{cores('kube-controller-manager')} · {fmt_num(cpu.get('other_cores'), 2)} |"
        )
    return lines


def _spread_table(results: list[Result]) -> list[str]:
    lines = [
        "| N | scenario | ticks | created / expected | missing | duplicate | skew p50 | p99 "
        "| max | worst tick's p99 | writes per firing |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    rows = [r for r in results if r["shape"] == "spread"]
    for r in rows:
        f = r["firings"]
        lines.append(
            f"| {r['n']} | {LABELS.get(r['scenario'], r['scenario'])} | {f['ticks']} "
            f"| {f['created']} / {f['expected']} | {f['missing']} | {f['duplicates']} "
            f"| {fmt_s(skew(r, 'p50'))} | {fmt_s(skew(r, 'p99'))} | {fmt_s(skew(r, 'max'))} "
            f"| {fmt_s(f.get('worst_tick_p99'))} | {fmt_num(writes_per_firing(r), 2)} |"
        )
    return lines if rows else []


def _failover_table(results: list[Result]) -> list[str]:
    rows = [r for r in results if r["kind"] == "failover"]
    if not rows:
        return []
    lines = [
        "| N | leader killed before the tick | standby took the Lease, after the tick "
        "| first create by the standby, after the tick | all N created, after the tick "
        "| skew p50 / p99 | missing | duplicate | creates by the killed leader |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        fo = r.get("failover") or {}
        f = r["firings"]
        lines.append(
            f"| {r['n']} | {fmt_s(fo.get('kill_before_tick'), 2)} "
            f"| {fmt_s(fo.get('takeover_after_tick'), 2)} "
            f"| {fmt_s(fo.get('first_create_after_tick'), 2)} | {fmt_s(skew(r, 'max'), 2)} "
            f"| {fmt_s(skew(r, 'p50'), 2)} / {fmt_s(skew(r, 'p99'), 2)} | {f['missing']} "
            f"| {f['duplicates']} | {fo.get('creates_by_killed_leader', '-')} |"
        )
    return lines


def _targets(results: list[Result]) -> list[str]:
    punctual = [r for r in results if r["kind"] in ("punctual", "failover")]
    return [
        "| target | measured | met? |",
        "|---|---|---|",
        *_correctness_target(punctual),
        *_latency_targets(results),
        *_cost_targets(punctual),
        *_cronjob_targets(results),
    ]


def _correctness_target(punctual: list[Result]) -> list[str]:
    bad = [
        f"{r['scenario']} N={r['n']}: {r['firings']['missing']} missing, "
        f"{r['firings']['duplicates']} duplicate"
        for r in punctual
        if r["firings"]["missing"] or r["firings"]["duplicates"]
    ]
    return [
        "| zero missing and zero duplicate Jobs at every N (Punctual) | "
        + ("; ".join(bad) if bad else f"0 and 0 in all {len(punctual)} Punctual runs")
        + f" | {'no' if bad else 'yes'} |"
    ]


def _latency_targets(results: list[Result]) -> list[str]:
    sizes = sorted({r["n"] for r in results})
    lines = []
    for profile in ("defaults", "same"):
        r = _get(results, f"punctual-herd-{profile}", 1000)
        if r:
            p99 = skew(r, "p99") or math.nan
            lines.append(
                f"| p99 skew ≤ 1 s at 1 000 simultaneous schedules ({profile}) | {fmt_s(p99)} "
                f"| {'yes' if p99 <= TARGET_P99 else 'no'} |"
            )
    for profile in ("defaults", "same", "fast"):
        r, raw = _get(results, f"punctual-herd-{profile}", 10000), _get(results, "raw-same", 10000)
        if r and raw:
            ratio = (r["makespan"] or math.nan) / (raw["makespan"] or math.nan)
            lines.append(
                f"| at 10 000 simultaneous, all Jobs within 1.25x the raw create limit ({profile}) "
                f"| {fmt_s(r['makespan'])} vs {fmt_s(raw['makespan'])}: {ratio:.2f}x "
                f"| {'yes' if ratio <= TARGET_RAW_RATIO else 'no'} |"
            )
    if 10000 not in sizes:
        lines.append("| at 10 000 simultaneous, within 1.25x the raw limit | not run | - |")
    return lines


def _cost_targets(punctual: list[Result]) -> list[str]:
    lines = []
    wpf = [(r, writes_per_firing(r)) for r in punctual if writes_per_firing(r) is not None]
    if wpf:
        worst = max(wpf, key=lambda x: x[1] or 0)
        text = ", ".join(f"{r['scenario']} N={r['n']}: {v:.2f}" for r, v in wpf)
        lines.append(
            f"| ≤ 2 API writes per firing on average (audited writes, Leases excluded) | {text} "
            f"| {'yes' if (worst[1] or 0) <= TARGET_WRITES else 'no'} |"
        )
    rss = [
        (r["n"], r.get("subject_peak_rss_mb") or 0)
        for r in punctual
        if r.get("subject_peak_rss_mb")
    ]
    if rss:
        n_max = max(n for n, _ in rss)
        peak = max(v for n, v in rss if n == n_max)
        label = "at 10 000" if n_max >= 10000 else f"at N={n_max} (10 000 not run)"
        lines.append(
            f"| operator RSS ≤ 250 MB with 10 000 schedules | {peak:.0f} MB {label} "
            f"| {('yes' if peak <= TARGET_RSS else 'no') if n_max >= 10000 else '-'} |"
        )
    return lines


def _cronjob_targets(results: list[Result]) -> list[str]:
    lines = []
    for n in sorted({r["n"] for r in results}):
        for profile in ("defaults", "same"):
            a = _get(results, f"punctual-herd-{profile}", n)
            b = _get(results, f"cronjob-herd-{profile}", n)
            note = ""
            if a is None and b is not None and profile == "same":
                # Punctual's defaults may be the "same" limits: then that run stands for both.
                d = _get(results, "punctual-herd-defaults", n)
                if d and _punctual_limits(d) == _punctual_limits(b):
                    a, note = d, " (Punctual's defaults are these limits)"
            if a and b:
                better = all(
                    (skew(a, k) or math.inf) < (skew(b, k) or math.inf)
                    for k in ("p50", "p99", "max")
                )
                lines.append(
                    f"| lower skew than CronJob, N={n}, {profile}{note} "
                    f"| p50 {fmt_s(skew(a, 'p50'))} vs "
                    f"{fmt_s(skew(b, 'p50'))}, p99 {fmt_s(skew(a, 'p99'))} vs "
                    f"{fmt_s(skew(b, 'p99'))}, max {fmt_s(skew(a, 'max'))} vs "
                    f"{fmt_s(skew(b, 'max'))} | {'yes' if better else 'no'} |"
                )
    return lines


def _commits(results: list[Result], machine: dict[str, Any]) -> str:
    """The commit benchmarked, or which scenarios ran on which when they differ."""
    runs: dict[str, list[str]] = {}
    for r in sorted(results, key=lambda r: (r["n"], _rank(r["scenario"]))):
        commit = (r.get("machine") or {}).get("commit", "?")
        runs.setdefault(commit, []).append(f"{r['scenario']} N={r['n']}")
    if len(runs) <= 1:
        return f"commit {next(iter(runs), machine.get('commit', '?'))}"
    return "commits " + "; ".join(f"{c} ({', '.join(names)})" for c, names in runs.items())


def _punctual_limits(result: Result) -> tuple[Any, ...]:
    """The client limits and workers Punctual ran with (or would have, in a CronJob run)."""
    values = (result.get("settings") or {}).get("punctual") or {}
    # None: no client cap (Punctual's default since the scale-out work), told apart from any number.
    return tuple(values.get(k) for k in ("qps", "burst", "workers"))


def _profile_section(profiled: list[Result]) -> list[str]:
    lines: list[str] = []
    for r in profiled:
        spy = r.get("py_spy") or {}
        summary = spy.get("summary")
        if not summary:
            continue
        f = r["firings"]
        lines += [
            "",
            f"### py-spy: {LABELS.get(r['scenario'], r['scenario'])}, N={r['n']}",
            "",
            f"Sampled at {spy['rate']} Hz for {spy['seconds']:.0f} s, from 1 s before the tick "
            f"until the last Job was created; {summary['samples']} samples with the operator "
            "on CPU "
            f"(busy {100 * (summary['busy_share'] or 0):.0f}% of the time). In this profiled "
            f"run: skew p50 {fmt_s(skew(r, 'p50'))}, p99 {fmt_s(skew(r, 'p99'))}, max "
            f"{fmt_s(skew(r, 'max'))}, {f['created']}/{f['expected']} created. "
            f"Raw stacks: `{spy['file']}` (not committed).",
            "",
            "| where (first matching frame on the stack) | share of busy samples |",
            "|---|---|",
        ]
        lines += [f"| {name} | {share * 100:.1f}% |" for name, share in summary["categories"]]
        lines += [
            "",
            "| function (inclusive: on the stack) | share of busy samples |",
            "|---|---|",
        ]
        lines += [f"| `{name}` | {share * 100:.1f}% |" for name, share in summary["inclusive"][:25]]
        lines += ["", "| function (self: on top of the stack) | share |", "|---|---|"]
        lines += [f"| `{name}` | {share * 100:.1f}% |" for name, share in summary["self"][:15]]
    return lines


def _before_after(baseline: list[Result], results: list[Result]) -> list[str]:
    """The same scenarios on an earlier commit (results/baseline/raw) and on this one."""
    if not baseline:
        return []
    before = baseline[0].get("machine", {}).get("commit", "?")
    compared = [
        r
        for r in results
        if any(b["scenario"] == r["scenario"] and b["n"] == r["n"] for b in baseline)
    ]
    after = _commits(compared, {}).removeprefix("commit ").removeprefix("commits ")
    lines = [
        "## Before and after",
        "",
        f"The same scenarios on commit {before} (results in `baseline/raw/`) and on "
        f"commit {after} (this report). Punctual's \"defaults\" are each commit's own "
        "`punctual run` defaults (see the settings of each raw file).",
        "",
        f"| N | scenario | skew p50 {before} → {after} | p99 | max | writes per firing "
        "| operator CPU |",
        "|---|---|---|---|---|---|---|",
    ]
    for old in baseline:
        if old["kind"] not in ("punctual", "failover"):
            continue
        new = _get(results, old["scenario"], old["n"])
        if new is None:
            continue

        def pair(a: float | None, b: float | None, digits: int = 3) -> str:
            return f"{fmt_s(a, digits)} → {fmt_s(b, digits)}"

        lines.append(
            f"| {old['n']} | {LABELS.get(old['scenario'], old['scenario'])} "
            f"| {pair(skew(old, 'p50'), skew(new, 'p50'))} "
            f"| {pair(skew(old, 'p99'), skew(new, 'p99'))} "
            f"| {pair(skew(old, 'max'), skew(new, 'max'))} "
            f"| {fmt_num(writes_per_firing(old), 2)} → {fmt_num(writes_per_firing(new), 2)} "
            f"| {pair(controller_cpu(old), controller_cpu(new), 1)} |"
        )
    return [*lines, ""]


def markdown(results_dir: Path) -> str | None:
    """results.md's text from `results_dir`'s raw files; None when there are none."""
    results, profiled, machine = load(results_dir)
    baseline: list[Result] = []
    if (results_dir / "baseline" / "raw").is_dir():
        baseline, _, _ = load(results_dir / "baseline")
    if not results:
        return None
    machine = machine or results[0].get("machine", {})
    out = [*_introduction(results, machine), *_method(results)]
    scale = targets.load_scale(results_dir.parent / "results-scale")
    out += [
        "## Scale-out targets",
        "",
        "From this run's raw files and, for the sustained and 100 000-schedule rows, "
        "`bench/results-scale/raw/` (`make bench-scale`). Where a target is not met, the "
        "last column gives the measured reason.",
        "",
        *targets.rows(results, scale),
        "",
    ]
    for n in sorted({r["n"] for r in results}):
        out += _herd_section(results, n)
    out += _spread_section(results)
    out += _failover_section(results)
    out += _overload_section(results)
    out += _before_after(baseline, results)
    profile = _profile_section(profiled)
    if profile:
        out += ["## Profile of the operator", *profile, ""]
    out += [
        "## Skew distributions",
        "",
        "![skew distributions](skew.png)",
        "",
    ]
    return "\n".join(out)


def _introduction(results: list[Result], machine: dict[str, Any]) -> list[str]:
    """The title, what ran when, and on which machine and versions."""
    sizes = sorted({r["n"] for r in results})
    versions: dict[str, Any] = next((r["versions"] for r in results if r.get("versions")), {}) or {}
    started = min(r["started"] for r in results)
    total = sum(r.get("duration", 0) for r in results)
    loads = [r["loadavg_before"][0] for r in results if r.get("loadavg_before")]
    other: list[float] = [
        r["cpu"]["other_cores"]
        for r in results
        if (r.get("cpu") or {}).get("other_cores") is not None
    ]
    pod_run = next((r.get("pod_run_ms") for r in results), 1000)
    dirty = " with uncommitted changes" if machine.get("dirty") else ""
    return [
        "# Punctual vs the built-in CronJob controller",
        "",
        "Generated by `bench/run.py` (rebuild with `python bench/render.py <folder>`); the "
        "analysis and how to run it are in [bench/README.md](../README.md). Every scenario "
        "ran on its own fresh local control plane (etcd, kube-apiserver, kube-controller-manager, "
        "kube-scheduler, kwok) started for it and torn down after it. The CronJob controller "
        "runs in a kube-controller-manager of its own (`--controllers=cronjob-controller`) "
        "so that its client limits can be set without changing those of the Job controller "
        "and the others (always 200 QPS / 400 burst, as e2e/localcluster.py sets them): the "
        "rest of the control plane is the same in every scenario.",
        "",
        f"Run started {datetime.fromtimestamp(started, UTC):%Y-%m-%d %H:%M} UTC; "
        f"{len(results)} scenarios, N = {', '.join(str(n) for n in sizes)}; "
        f"{total / 60:.1f} min of scenario time.",
        "",
        "## Machine and versions",
        "",
        f"- {machine.get('nproc', '?')} CPUs ({machine.get('cpu_model', '?')}), "
        f"{machine.get('memory', '?')} memory, Linux {machine.get('kernel', '?')}; "
        f"load average before the scenarios {min(loads, default=0):.2f}-"
        f"{max(loads, default=0):.2f}; CPU used by processes outside the benchmark during "
        f"the measured windows {min(other, default=0):.2f}-{max(other, default=0):.2f} cores "
        "(other clusters and sessions share this machine).",
        f"- Kubernetes {versions.get('kubernetes', '?')} (API server `/version`), "
        f"{machine.get('etcd', '?')}, kwok {machine.get('kwok', '?')}; Python "
        f"{machine.get('python', '?')}; Punctual {machine.get('punctual', '?')} at "
        f"{_commits(results, machine)}{dirty}.",
        f"- kwok fake pods run {pod_run} ms; kube-scheduler at its defaults (QPS 50, burst "
        "100); one fake node; the API server's audit log records every write to Jobs, "
        "CronJobs, CronSchedules (and status) and Leases.",
        "",
    ]


def _method(results: list[Result]) -> list[str]:
    """The settings of each scenario, how the figures are measured, and the targets."""
    return [
        "## Settings",
        "",
        '**"defaults"** compares each controller as shipped: `punctual run` with its default '
        "flags against the CronJob controller with kube-controller-manager's default client "
        'limits. **"same QPS/burst"** gives both clients 200 QPS / 400 burst (what '
        "e2e/localcluster.py gives the controller-manager). Both keep their default worker "
        "counts (as the table says). The raw limit needs no controller.",
        "",
        *_settings_table(results),
        "",
        "How each scenario measures (all from the API server): skew = audit "
        "`requestReceivedTimestamp` of a Job's create (201) minus the tick the Job's name "
        "stands for (`<schedule>-<unix s>` for Punctual, `<cronjob>-<unix min>` for "
        'CronJob); the raw limit\'s "tick" is its first create. Missing = a schedule '
        "without a Job for its tick; duplicate = a schedule with more than one Job. Writes "
        "per firing = the controller's audited writes (by user agent) from 1 s before the "
        "tick until every Job completed and the controller stayed quiet for 12 s, Lease "
        "renewals excluded, divided by the Jobs created; Events are not audited and are "
        "counted separately from the Events left in the namespace. CPU = utime+stime from "
        "/proc over the same window; RSS = VmHWM at the end. The API server's time on a "
        "create = its audit `stageTimestamp` (answered) minus `requestReceivedTimestamp`: "
        "where it is a small part of the time a create is in flight, the client sets the pace.",
        "",
        "## Targets",
        "",
        *_targets(results),
        "",
    ]


def _herd_section(results: list[Result], n: int) -> list[str]:
    return [
        f"## N = {n:,}: every schedule on the same tick".replace(",", " "),
        "",
        *_herd_table(results, n),
        "",
        "¹ the kube-controller-manager process that runs only the CronJob controller. "
        "² the plain client's own CPU. † counted when the settle time cap ran out, "
        "before every Job had finished: the bookkeeping writes of the rest are missing.",
        "",
        *_ratio_rows(results, n),
        "",
        "Where the time goes while firing:",
        "",
        *_rate_rows(results, n),
        "",
    ]


def _spread_section(results: list[Result]) -> list[str]:
    spread = _spread_table(results)
    if not spread:
        return []
    return [
        "## Spread variant",
        "",
        "Punctual's schedules use `H M H * * *`: each schedule's second is hashed from its "
        "uid, so the N firings spread over one minute. CronJob schedules have minute "
        "resolution, so the nearest it can do is distinct minutes.",
        "",
        *spread,
        "",
    ]


def _failover_section(results: list[Result]) -> list[str]:
    failover = _failover_table(results)
    if not failover:
        return []
    return [
        "## Leader failover",
        "",
        "Two `punctual run` replicas at their defaults (Lease 15 s, renew deadline 10 s, "
        "retry 2 s); the leader is killed with SIGKILL just before the tick; the standby "
        "(indices warm) takes the Lease when it expires and fires every schedule. The "
        "CronJob controller has no comparable figure here: the local controller-manager "
        "runs without leader election.",
        "",
        *failover,
        "",
    ]


# The herd on the overloaded API server, each beside the raw client of the same server,
# and the same herd on the normal server as the reference.
OVERLOAD_PAIRS = [
    ("punctual-herd-overload", "raw-overload"),
    ("punctual-herd-defaults", "raw-same"),
]


def _overload_rows(results: list[Result], n: int) -> list[str]:
    lines = []
    for subject, raw_id in OVERLOAD_PAIRS:
        raw = _get(results, raw_id, n)
        for r in (_get(results, subject, n), raw):
            if r is None or "refusals" not in r:
                continue
            f, refusals = r["firings"], r["refusals"]
            created = f["created"] or 1
            seen = (r.get("operator_requests") or {}).get("post 429")
            own = f" · {seen:.0f}" if seen is not None else ""
            ratio = fmt_ratio(r.get("makespan"), raw.get("makespan")) if raw else "-"
            peak_refused = refusals["peak_rate_refused"] if refusals["refused"] else "-"
            lines.append(
                f"| {LABELS.get(r['scenario'], r['scenario'])} "
                f"| {'overloaded' if r.get('overload') else 'normal'} "
                f"| {f['created']} / {f['expected']} | {f['missing']} | {f['duplicates']} "
                f"| {refusals['refused']}{own} | {refusals['creates'] / created:.2f} "
                f"| {1 + refusals['refused'] / created:.2f} "
                f"| {refusals.get('sent_during_retry_after', '-')} | {peak_refused} "
                f"| {refusals['peak_rate']} | {fmt_s(r.get('makespan'), 2)} "
                f"| {ratio if r is not raw else '1.00x'} |"
            )
    return lines


def _timeline(r: Result) -> str:
    """Creates sent per second from the tick (refused in brackets), seconds with any."""
    return ", ".join(
        f"{second - 1}: {sent}" + (f" ({refused})" if refused else "")
        for second, sent, refused in r["refusals"]["per_second"]
    )


def _overload_section(results: list[Result]) -> list[str]:
    overloaded = [r for r in results if r.get("overload")]
    if not overloaded:
        return []
    level = overloaded[0]["overload"]
    seats = " or ".join(sorted({str(r["overload"].get("seats", "?")) for r in overloaded}))
    lines = [
        "## An overloaded API server",
        "",
        f"The same herd on an API server that refuses part of it: API Priority and Fairness "
        f"puts the Job creates of `{level['user']}` (a user bound to cluster-admin, outside "
        "system:masters, which is never refused) in a priority level of "
        f"{seats} seats that answers 429 instead of queueing. Punctual "
        "(at its defaults: no client-side rate, a 429 pauses every write for its "
        "Retry-After) and the raw client (200 in flight; a refused create is sent again "
        "after its own Retry-After, as client-go does) run as that user, each on a fresh "
        "server; the normal server's rows are the reference. All from the audit log (Job "
        "creates by user agent, with their response codes) but the operator's own count "
        "of 429s (`punctual_api_requests_total`, after the ·).",
        "",
    ]
    for n in sorted({r["n"] for r in overloaded}):
        lines += [
            f"N = {n}:",
            "",
            "| scenario | API server | created / expected | missing | duplicate | 429s "
            "| create requests per Job created | 1 + 429s per Job | creates sent during a "
            "Retry-After¹ | peak creates sent per s while refused | peak creates per s "
            "| time to create all | vs the raw client, same server |",
            "|---|---|---|---|---|---|---|---|---|---|---|---|---|",
            *_overload_rows(results, n),
            "",
        ]
        lines += [
            "¹ more than 0.5 s (requests already sent) after a 429, before its Retry-After "
            "ran out: Punctual pauses every write; the raw client, like client-go, only "
            "the refused request. Each 429's Retry-After is APF's rule replayed on the "
            "audit log's 429s (`measure.apf_retry_after`); the raw client's own record of "
            "the Retry-After headers it got is its check.",
            "",
        ]
        for r in results:
            if r["n"] == n and r.get("overload"):
                replayed = _times(r["refusals"].get("retry_after") or {})
                own = _times((r.get("client") or {}).get("retry_after") or {})
                check = f"; as the raw client recorded them: {own}" if own else ""
                lines.append(
                    f"- {LABELS.get(r['scenario'], r['scenario'])}, creates sent per second "
                    f"from the tick (429s in brackets): {_timeline(r)}. Retry-After given: "
                    f"{replayed}{check}."
                )
        lines.append("")
    return lines


def _times(counts: dict[str, int]) -> str:
    return ", ".join(f"{count} times {value} s" for value, count in counts.items()) or "-"


def plot(results: list[Result], path: Path) -> bool:
    """skew.png: the ECDF of each scenario's skews; False when matplotlib is missing."""
    try:
        # Not a dependency of the project (see README.md); typed when it is installed.
        import matplotlib  # type: ignore[import-not-found, unused-ignore]

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt  # type: ignore[import-not-found, unused-ignore]
    except ImportError:
        print("matplotlib is not installed: no plot (pip install matplotlib)", file=sys.stderr)
        return False
    sizes = sorted({r["n"] for r in results})
    fig, axes = plt.subplots(
        2, len(sizes), figsize=(6.5 * len(sizes), 9), squeeze=False, sharey=True
    )
    styles = {
        "punctual-herd-defaults": ("tab:blue", "-"),
        "punctual-herd-same": ("tab:blue", "--"),
        "punctual-herd-fast": ("tab:cyan", "-."),
        "cronjob-herd-defaults": ("tab:red", "-"),
        "cronjob-herd-same": ("tab:red", "--"),
        "raw-same": ("black", ":"),
        "punctual-spread-defaults": ("tab:blue", "-"),
        "cronjob-spread-defaults": ("tab:red", "-"),
        "failover-defaults": ("tab:purple", "-"),
        "punctual-herd-overload": ("tab:orange", "-"),
        "raw-overload": ("tab:orange", ":"),
    }
    for col, n in enumerate(sizes):
        for row, shapes in enumerate((("herd", "burst"), ("spread", "failover"))):
            ax = axes[row][col]
            for r in results:
                if r["n"] != n:
                    continue
                key = "failover" if r["kind"] == "failover" else r["shape"]
                if key not in shapes or not r.get("skews"):
                    continue
                values = [max(v, 1e-3) for v in r["skews"]]
                ys = [(i + 1) / len(values) for i in range(len(values))]
                color, style = styles.get(r["scenario"], ("gray", "-"))
                ax.step(
                    values,
                    ys,
                    where="post",
                    color=color,
                    linestyle=style,
                    label=LABELS.get(r["scenario"], r["scenario"]),
                )
            ax.set_xscale("log")
            ax.set_xlim(1e-3, None)
            ax.grid(True, which="both", alpha=0.3)
            title = "one tick" if row == 0 else "spread and failover"
            ax.set_title(f"N = {n}, {title}")
            ax.set_xlabel("skew: Job create received by the API server - tick (s, log)")
            if col == 0:
                ax.set_ylabel("fraction of Jobs created")
            ax.legend(fontsize=8, loc="lower right")
    fig.suptitle("Job creation skew (ECDF; values under 1 ms drawn at 1 ms)")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return True
