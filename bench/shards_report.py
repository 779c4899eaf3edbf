"""The shard figures of one run, side by side, as ratios to the baselines of the same run.

Run: .venv/bin/python bench/shards_report.py [results folder]   (default bench/results-shards)

Reads the raw files that `bench/run.py` wrote for the shard scenarios (ids ending in
`-r<R>s<S>` and `-kill`) and, from the same folder, the raw client (`raw-same-<N>`) and
Punctual with one replica and no shards (`punctual-herd-defaults-<N>`) measured in the
same run; prints a Markdown table and writes it to `shards.md` beside them. Starts
nothing, changes nothing else.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent


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


def main() -> None:
    folder = Path(sys.argv[1]) if len(sys.argv) > 1 else HERE / "results-shards"
    results = load(folder)
    text = "\n".join(["## Shards", "", *rows(results), "", *kills(results), ""])
    (folder / "shards.md").write_text(text)
    print(text)


if __name__ == "__main__":
    main()
