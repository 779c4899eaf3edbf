"""The shard figures of one run, side by side, as ratios to the baselines of the same run.

Why it exists: a shard row means something only beside the raw client (`raw-same-<N>`)
and Punctual with one replica and no shards (`punctual-herd-defaults-<N>`) measured in
the same run. This module reads the raw files that `bench/run.py` wrote for the shard
scenarios (ids with `-r<R>s<S>`, and `-kill`) and the baselines from the same folder,
and gives shards.md's text; the rendering package writes it.

What it must never do: measure, start anything, write a file, or state a figure that is
not in the raw files.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

SHARDED = re.compile(r"-r\d+s\d+(-kill)?-\d+$")  # a shard row's id: `<scenario>-r2s16-1000`


def load(folder: Path) -> dict[str, dict[str, Any]]:
    return {p.stem: json.loads(p.read_text()) for p in sorted((folder / "raw").glob("*.json"))}


def makespan(result: dict[str, Any]) -> float:
    return float(result.get("makespan") or float("nan"))


def operator_cpu(result: dict[str, Any]) -> dict[str, float]:
    seconds = (result.get("cpu_firing") or {}).get("seconds") or {}
    return {k.removeprefix("operator "): v for k, v in seconds.items() if k.startswith("operator ")}


def ratio(a: float, b: dict[str, Any] | None) -> str:
    return f"{a / makespan(b):.2f}" if b else "n/a"


def row(label: str, n: int, result: dict[str, Any], *, raw: Any = None, single: Any = None) -> str:
    firings = result.get("firings") or {}
    created = int(firings.get("created", 0))
    per_replica = [str(r["creates"]) for r in (result.get("replicas") or {}).values()]
    cpu = operator_cpu(result)
    total = sum(v for v in cpu.values() if v == v)
    span = makespan(result)
    cells = [
        label,
        str(n),
        str(result.get("split") or ""),
        f"{created}" + (f" ({', '.join(per_replica)})" if per_replica else ""),
        f"{span:.2f} s",
        ratio(span, raw) if raw is not False else "",
        ratio(span, single) if single is not False else "",
        ", ".join(f"{v:.1f} s" for v in cpu.values()),
        f"{1000 * total / max(1, created):.2f}" if cpu else "",
        f"{firings.get('missing')} / {firings.get('duplicates')}",
    ]
    return "| " + " | ".join(cells) + " |"


def rows(results: dict[str, dict[str, Any]]) -> list[str]:
    out = [
        "| scenario | N | split | Jobs created (per replica) | last create after tick | "
        "vs raw client | vs one replica, no shards | operator CPU while firing, per replica "
        "| CPU ms per firing (all replicas) | missing / duplicates |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for name, result in results.items():
        base, _, size = name.rpartition("-")
        if not size.isdigit():
            continue
        n = int(size)
        if base in ("raw-same", "punctual-herd-defaults"):
            out.append(row(f"{base} (baseline)", n, result, raw=False, single=False))
        elif "-r" in base and not base.endswith("-kill"):
            raw = results.get(f"raw-same-{n}")
            single = results.get(f"punctual-herd-defaults-{n}")
            out.append(row(base, n, result, raw=raw, single=single))
    return out


def kills(results: dict[str, dict[str, Any]]) -> list[str]:
    out = []
    for name, result in results.items():
        kill = result.get("kill")
        if not kill:
            continue
        firings = result.get("firings") or {}
        skew = kill.get("skew") or {}
        out.append(
            f"- {name}: split {result.get('split')}, killed {kill['replica']} "
            f"(shards {kill['shards']}); missing {firings.get('missing')}, duplicates "
            f"{firings.get('duplicates')}; skew p99 of the other shards "
            f"{skew.get('others_before', {}).get('p99')} s before the kill, "
            f"{skew.get('others', {}).get('p99')} s after; the dead replica's shards after "
            f"the kill: p50 {skew.get('dead', {}).get('p50')} s, max "
            f"{skew.get('dead', {}).get('max')} s ({skew.get('dead', {}).get('n')} Jobs)"
        )
    return out


def has_rows(folder: Path) -> bool:
    """Whether `folder`'s raw files hold any shard row."""
    return any(SHARDED.search(p.stem) for p in (folder / "raw").glob("*.json"))


def markdown(folder: Path) -> str:
    """shards.md's text from `folder`'s raw files."""
    results = load(folder)
    return "\n".join(["## Shards", "", *rows(results), "", *kills(results), ""])
