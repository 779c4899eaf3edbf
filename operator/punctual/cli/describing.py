"""What `punctual describe` and `punctual history` print: a CronSchedule on one screen.

Why it exists: Temporal's `schedule describe` shows a schedule's meaning, its next
runs, its state and its recent actions at once; `kubectl describe` shows only fields.
This module turns a CronSchedule (as the API returns it) and what the caller computed
from its spec (the sentences of `punctual explain`, the next ticks) into lines of
text, so that the whole screen is tested without a cluster.

It reads status fields that other features write only when they are present
(`buffered`, `paused`, `backfill`, and any condition that is True), so a newer
operator's status is shown by an older CLI as far as it understands it, and an
older status by a newer CLI without empty sections.

What it must never do: fetch, read the clock (`now` is given), or fail on a status it
does not understand (an unreadable part is shown as it is, never a traceback).
"""

from __future__ import annotations

import json
import textwrap
from collections.abc import Mapping, Sequence
from datetime import datetime, timedelta, tzinfo
from typing import Any, Final

from punctual.core.times import format_time, maybe_time

# Conditions that say all is well when True (the others are states worth a line).
_QUIET_WHEN_TRUE: Final = ("Ready",)
_LABEL_WIDTH: Final = 14


def describe_schedule(
    body: Mapping[str, Any],
    *,
    now: datetime,
    explained: Sequence[str],
    upcoming: Sequence[datetime],
    zone: tzinfo,
    downstreams: Sequence[str] | None = None,
) -> list[str]:
    """The lines of `punctual describe` for `body`: identity, the spec in words, the
    policies, the chain (spec.after, and `downstreams`: the schedules that run after
    it, when known), the state, the next ticks, what waits, recent firings, conditions."""
    meta = body.get("metadata") or {}
    spec = body.get("spec") or {}
    status = body.get("status") or {}
    lines = [
        _field("Name", str(meta.get("name", "-"))),
        _field("Namespace", str(meta.get("namespace", "-"))),
        _field("Time zone", str(spec.get("timeZone", "UTC"))),
    ]
    if isinstance(spec.get("workloadTemplate"), Mapping):
        lines.append(_field("Creates", _creates(spec)))
    lines += _block("Schedule", _what(spec))
    lines += _block("Meaning", _wrapped(explained) or ["-"])
    lines += _block("Policies", _policies(spec))
    lines += _block("Chain", chain_lines(spec, status, downstreams))
    lines += _block("State", _state(spec, status))
    lines += _block("Cursor", _cursor(status))
    lines += _next_ticks(upcoming, now=now, zone=zone, suspended=_suspended(spec, status, now))
    lines += _waiting(status)
    lines.append("")
    firings = status.get("recentFirings") or []
    lines.append(f"Recent firings ({len(firings)}, newest first):")
    rows = firings_table(firings, kind=kind_of(spec))
    lines += ["  " + row for row in rows] if firings else ["  none yet"]
    lines.append("")
    lines.append("Conditions:")
    lines += ["  " + row for row in _conditions_table(status.get("conditions") or [])]
    return lines


def kind_of(spec: Mapping[str, Any]) -> str:
    """The kind a schedule creates: its workloadTemplate's, or Job."""
    template = spec.get("workloadTemplate")
    return str(template.get("kind") or "?") if isinstance(template, Mapping) else "Job"


def _creates(spec: Mapping[str, Any]) -> str:
    template = spec["workloadTemplate"]
    return f"{kind_of(spec)} ({template.get('apiVersion', '?')}), from spec.workloadTemplate"


def firings_table(firings: Sequence[Any], kind: str = "Job") -> list[str]:
    """status.recentFirings as aligned rows under a header: TICK JOB KIND OUTCOME EPOCH
    BY REASON (JOB: the name of the Job, or of the workloadTemplate's object, of that
    KIND); a manual firing's reason is what its trigger said, then the decision's."""
    rows = [("TICK", "JOB", "KIND", "OUTCOME", "EPOCH", "BY", "REASON")]
    for firing in firings:
        if not isinstance(firing, Mapping):
            continue
        outcome = str(firing.get("outcome", ""))
        if firing.get("manual"):
            outcome += " (manual)"
        rows.append(
            (
                str(firing.get("tick", "")),
                str(firing.get("job") or "-"),
                kind if firing.get("job") else "-",
                outcome,
                str(firing.get("epoch", "")),
                str(firing.get("triggeredBy") or "-")
                + ("?" if firing.get("triggeredByVerified") is False else ""),
                _firing_reason(firing),
            )
        )
    return _aligned(rows)


def _firing_reason(firing: Mapping[str, Any]) -> str:
    parts = []
    if firing.get("triggerReason"):
        parts.append(json.dumps(str(firing["triggerReason"]), ensure_ascii=False))
    if firing.get("concurrencyPolicy"):
        parts.append(f"concurrencyPolicy {firing['concurrencyPolicy']} for this firing")
    if firing.get("envOverrides"):
        parts.append(f"with {', '.join(str(e) for e in firing['envOverrides'])}")
    if firing.get("reason"):
        parts.append(str(firing["reason"]))
    return "; ".join(parts)


def _aligned(rows: Sequence[Sequence[str]]) -> list[str]:
    """Columns padded to their widest cell; the last one is left ragged."""
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]) - 1)]
    return [
        "   ".join([*(c.ljust(w) for c, w in zip(row[:-1], widths, strict=True)), row[-1]]).rstrip()
        for row in rows
    ]


def _field(label: str, value: str) -> str:
    return f"{label + ':':<{_LABEL_WIDTH}}{value}"


def _block(label: str, values: Sequence[str]) -> list[str]:
    """The first value beside the label, the others under it."""
    if not values:
        return []
    return [_field(label, values[0]), *(" " * _LABEL_WIDTH + v for v in values[1:])]


def chain_lines(
    spec: Mapping[str, Any], status: Mapping[str, Any], downstreams: Sequence[str] | None
) -> list[str]:
    """spec.after and what became of it (status.after: per upstream, the newest tick
    handled, its outcome, and the run started for it or why none), and the schedules
    that run after this one."""
    lines: list[str] = []
    handled = {
        str(c.get("schedule")): c for c in status.get("after") or [] if isinstance(c, Mapping)
    }
    own = any(spec.get(k) is not None for k in ("schedule", "schedules", "runAt"))
    for entry in spec.get("after") or []:
        if not isinstance(entry, Mapping):
            continue
        name = str(entry.get("schedule", "?"))
        on = str(entry.get("on", "Succeeded"))
        text = f"after {name} (on {on}"
        text += f", a gate: waits up to {entry['within']})" if own and entry.get("within") else ")"
        cursor = handled.get(name)
        if cursor is not None and cursor.get("outcome"):
            ran = cursor.get("job")
            why = f"ran {ran}" if ran else f"not run: {cursor['outcome']} is not {on}"
            text += f"; its run of {cursor.get('tick')} {cursor['outcome']}: {why}"
        elif cursor is not None:
            text += f"; waiting for its first run after {cursor.get('tick')}"
        lines.append(text)
    if downstreams:
        lines.append(f"runs before: {', '.join(downstreams)}")
    return lines


def _what(spec: Mapping[str, Any]) -> list[str]:
    """The spec's own words: the expression, the entries, or the instant."""
    if spec.get("schedule") is not None:
        return [json.dumps(spec["schedule"])]
    if spec.get("runAt") is not None:
        return [f"runAt {spec['runAt']}"]
    entries = spec.get("schedules")
    if isinstance(entries, list):
        return [f"{len(entries)} entries (schedules), one tick set"]
    if spec.get("after"):
        return ["none of its own: it runs after its upstreams (spec.after)"]
    return ["-"]


def _wrapped(lines: Sequence[str], width: int = 100 - _LABEL_WIDTH) -> list[str]:
    """Long sentences folded to the screen, continuation lines indented."""
    folded: list[str] = []
    for line in lines:
        folded += textwrap.wrap(line, width, subsequent_indent="  ") or [""]
    return folded


def _policies(spec: Mapping[str, Any]) -> list[str]:
    missed = str(spec.get("missedRunPolicy", "RunLatest"))
    if missed == "RunAll":
        missed += f" (at most {spec.get('maxMissedRuns', 10)})"
    deadline = spec.get("startingDeadlineSeconds")
    lines = [
        f"missedRunPolicy {missed}, concurrencyPolicy {spec.get('concurrencyPolicy', 'Allow')}",
        "startingDeadlineSeconds "
        + ("none (a late tick still runs)" if deadline is None else f"{deadline}")
        + f", jitterSeconds {spec.get('jitterSeconds', 0)}",
        f"keeps {spec.get('successfulJobsHistoryLimit', 3)} succeeded and "
        f"{spec.get('failedJobsHistoryLimit', 1)} failed Jobs",
    ]
    for key in ("pauseOnFailure", "maxBuffered", "successDeadlineSeconds", "className"):
        if spec.get(key) is not None:
            lines.append(f"{key} {_compact(spec[key])}")
    return lines


def _suspended(spec: Mapping[str, Any], status: Mapping[str, Any], now: datetime) -> bool:
    until = maybe_time(spec.get("suspendUntil"))
    return (
        bool(spec.get("suspend"))
        or (until is not None and until > now)
        or _true(status, "Suspended")
        or _true(status, "Paused")
    )


def _state(spec: Mapping[str, Any], status: Mapping[str, Any]) -> list[str]:
    """One line per state worth knowing: every condition that is True (Suspended, Paused,
    Stale, Finished, InvalidSpec, ... whatever the operator writes), then spec.suspend
    and spec.suspendUntil; `Active` when there is none."""
    lines = []
    for cond in status.get("conditions") or []:
        if not isinstance(cond, Mapping) or cond.get("status") != "True":
            continue
        kind = str(cond.get("type", "?"))
        if kind in _QUIET_WHEN_TRUE:
            continue
        since = cond.get("lastTransitionTime")
        text = f"{kind} ({cond.get('reason', '')}"
        text += f", since {since})" if since else ")"
        if cond.get("message"):
            text += f": {cond['message']}"
        lines.append(text)
    if spec.get("suspendUntil"):
        lines.append(f"spec.suspendUntil {spec['suspendUntil']}: fires again by itself then")
    elif spec.get("suspend") and not _true(status, "Suspended"):
        lines.append("spec.suspend is true (not yet seen by the operator)")
    if not lines:
        ready = _condition(status, "Ready")
        if ready is None:
            lines.append("not yet seen by the operator")
        elif ready.get("status") == "True":
            lines.append("Active")
        else:
            lines.append(f"Not ready ({ready.get('reason', '')}): {ready.get('message', '')}")
    return lines


def _cursor(status: Mapping[str, Any]) -> list[str]:
    parts = [
        f"last scheduled {status.get('lastScheduledTime', '-')}",
        f"last success {status.get('lastSuccessfulTime', '-')}",
    ]
    active = [a.get("name", "?") for a in status.get("active") or [] if isinstance(a, Mapping)]
    lines = [", ".join(parts)]
    lines.append(f"active: {', '.join(active)}" if active else "active: none")
    if status.get("runsRemaining") is not None:
        lines.append(f"runs: {status.get('runs', 0)}, remaining {status['runsRemaining']}")
    return lines


def _next_ticks(
    upcoming: Sequence[datetime], *, now: datetime, zone: tzinfo, suspended: bool
) -> list[str]:
    lines = ["", f"Next {len(upcoming)} ticks:" if upcoming else "Next ticks: none"]
    if upcoming and suspended:
        lines[-1] += " (while suspended or paused none of them fires)"
    for tick in upcoming:
        lines.append(
            f"  {tick.astimezone(zone).isoformat():<27}{format_time(tick):<22}{_until(tick - now)}"
        )
    return lines


def _until(delta: timedelta) -> str:
    seconds = int(delta.total_seconds())
    if seconds < 0:
        return "due"
    days, rest = divmod(seconds, 86400)
    hours, rest = divmod(rest, 3600)
    minutes, secs = divmod(rest, 60)
    parts = [
        f"{days}d" if days else "",
        f"{hours}h" if hours else "",
        f"{minutes}m" if minutes else "",
    ]
    text = "".join(parts) if days or hours or minutes else f"{secs}s"
    return f"in {text}"


def _waiting(status: Mapping[str, Any]) -> list[str]:
    """Ticks buffered behind a running Job, a pause, a backfill in progress: shown when
    the status has them."""
    lines: list[str] = []
    buffered = status.get("buffered")
    if isinstance(buffered, list) and buffered:
        ticks = [
            str(b.get("tick", _compact(b))) if isinstance(b, Mapping) else str(b) for b in buffered
        ]
        noun = "tick waits" if len(ticks) == 1 else "ticks wait"
        lines += _block("Buffered", [f"{len(ticks)} {noun} for the running Job:", *ticks])
    gated = status.get("gated")
    if isinstance(gated, list) and gated:
        ticks = [
            f"{g.get('tick')} until {g.get('until')}" if isinstance(g, Mapping) else str(g)
            for g in gated
        ]
        lines += _block("Gated", ["waiting for the upstreams' runs (spec.after):", *ticks])
    backfill = status.get("backfill")
    if isinstance(backfill, Mapping) and backfill:
        lines += _block("Backfill", [backfill_line(backfill)])
    for key, label in (("paused", "Paused"),):
        value = status.get(key)
        if value:
            shown = value if isinstance(value, list) else [value]
            lines += _block(label, [_compact(v) for v in shown])
    return ["", *lines] if lines else []


def backfill_line(backfill: Mapping[str, Any]) -> str:
    """status.backfill in one line: `backfill R [from, to): Running, 12/50 done, ...`."""
    window = f"[{backfill.get('from', '?')}, {backfill.get('to', '?')})"
    line = (
        f"backfill {backfill.get('request')} {window}: {backfill.get('state')}, "
        f"{backfill.get('done', 0)} run + {backfill.get('skipped', 0)} already done "
        f"of {backfill.get('total', 0)} ticks"
    )
    return line + (f" ({backfill['message']})" if backfill.get("message") else "")


def _compact(value: Any) -> str:
    """A status part this CLI knows only by name: `key value, key value`."""
    if isinstance(value, Mapping):
        return ", ".join(f"{k} {_compact(v)}" for k, v in value.items())
    if isinstance(value, list):
        return "[" + ", ".join(_compact(v) for v in value) + "]"
    return str(value)


def _conditions_table(conditions: Sequence[Any]) -> list[str]:
    rows = [("TYPE", "STATUS", "REASON", "SINCE", "MESSAGE")]
    for cond in conditions:
        if isinstance(cond, Mapping):
            rows.append(
                (
                    str(cond.get("type", "")),
                    str(cond.get("status", "")),
                    str(cond.get("reason", "")),
                    str(cond.get("lastTransitionTime", "")),
                    str(cond.get("message", "")),
                )
            )
    return _aligned(rows) if len(rows) > 1 else ["none yet"]


def _condition(status: Mapping[str, Any], kind: str) -> Mapping[str, Any] | None:
    for cond in status.get("conditions") or []:
        if isinstance(cond, Mapping) and cond.get("type") == kind:
            return cond
    return None


def _true(status: Mapping[str, Any], kind: str) -> bool:
    cond = _condition(status, kind)
    return cond is not None and cond.get("status") == "True"
