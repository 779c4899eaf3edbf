"""py-spy's collapsed stacks of the operator, summarized into the raw result.

Why it exists: a profiled run keeps py-spy's raw output outside the repository (it is
large); what the report needs is where the busy samples went: shares by category (the
first matching frame of each stack), by function on the stack, and by function on top.
observing.py stores that summary in the scenario's raw result, and the renderer only
reads it from there.

What it must never do: read or write a file (it is given the text), render markdown, or
do anything at import time.
"""

from __future__ import annotations

import re
from collections import Counter
from typing import Any

_FRAME = re.compile(r"^(?P<func>.*?) \((?P<file>[^()]*?)(?::(?P<line>\d+))?\)$")


def _short(frame: str) -> str:
    match = _FRAME.match(frame.strip())
    if not match:
        return frame.strip()
    path = match.group("file")
    for marker in ("site-packages/", "operator/", "lib/python3.11/"):
        if marker in path:
            path = path.split(marker, 1)[1]
            break
    return f"{match.group('func')} ({path})"


# Where a sample's time goes, by the first of these frames found on its stack.
# Frames of the layout since adff5d2 first, then those of the profiles committed before it.
CATEGORIES = [
    ("punctual: deciding (deciding.decide)", "decide (punctual/core/deciding.py)"),
    (
        "punctual: claim and create requests (firing.Firer.apply)",
        "Applier.apply (punctual/kube/applying.py)",
    ),
    ("punctual: rest of Operator.process", "Reconciler.__call__ (punctual/runtime/"),
    ("punctual: clock calibration", "calibrate (punctual/runtime/calibrating.py)"),
    ("punctual: deciding (deciding.decide)", "decide (punctual/deciding.py)"),
    (
        "punctual: claim and create requests (firing.Firer.apply)",
        "Firer.apply (punctual/firing.py)",
    ),
    ("punctual: rest of Operator.process", "Operator.process (punctual/running.py)"),
    ("punctual: Events (events.EventRecorder)", "EventRecorder."),
    ("punctual: leader election", "LeaderElector."),
    ("punctual: clock calibration", "Operator._calibrate_clock"),
    ("punctual: scheduler loop", "SchedulerLoop."),
    ("kopf: index handlers on watch events", "index_resource (kopf/"),
    ("kopf: other processing of watch events", "process_resource_event (kopf/"),
    ("kopf: watch streams", "(kopf/_cogs/clients/watching.py)"),
    ("kopf: other", "(kopf/"),
    ("threads: kopf's sync handlers and the executor", "Thread._bootstrap (threading.py)"),
    ("aiohttp/TLS: reading responses", "_SelectorSocketTransport."),
    ("asyncio: selecting and scheduling", "(asyncio/"),
]
# Frames on (nearly) every stack, which say nothing about where time goes.
_GENERIC = re.compile(
    r"\((asyncio/(runners|base_events|events)\.py|<frozen runpy>|punctual/(cli|operating)\.py|"
    r"threading\.py|concurrent/futures/thread\.py)\)$"
)


def summarize_collapsed(text: str, *, seconds: float, rate: int, top: int = 20) -> dict[str, Any]:
    """py-spy's raw output (`frame;frame;... count` per line) as shares of the samples."""
    total = 0
    inclusive: Counter[str] = Counter()
    leaf: Counter[str] = Counter()
    categories: Counter[str] = Counter()
    for line in text.splitlines():
        stack, _, count_text = line.rpartition(" ")
        if not stack or not count_text.isdigit():
            continue
        count = int(count_text)
        frames = [_short(f) for f in stack.split(";") if f]
        if not frames:
            continue
        total += count
        leaf[frames[-1]] += count
        for name in set(frames):
            if not _GENERIC.search(name):
                inclusive[name] += count
        joined = ";".join(frames)
        label = next((lbl for lbl, marker in CATEGORIES if marker in joined), "other")
        categories[label] += count
    possible = seconds * rate

    def shares(counter: Counter[str], limit: int) -> list[tuple[str, float]]:
        return [(name, round(c / total, 4)) for name, c in counter.most_common(limit)]

    return {
        "samples": total,
        "busy_share": round(total / possible, 3) if possible else None,
        "categories": shares(categories, 50) if total else [],
        "inclusive": shares(inclusive, top) if total else [],
        "self": shares(leaf, top) if total else [],
    }
