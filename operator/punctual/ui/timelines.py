"""The fleet timeline, aggregated: per schedule a row of tick counts, for the fleet a strip
of firings per minute.

Why it exists: a browser cannot take every tick of 10 000 schedules over a week, nor
compute them (the tick engine is Python, in `punctual.core`). The server walks each
schedule's ticks with Punctual's own engine (`core.planning.tick_source`, the same
ticks `punctual next` prints and the operator fires), and sends only counts: one short
string per schedule (a character per column, `0`-`9` then `a`-`z`, capped at 35) and one
list of per-minute totals for the fleet, where a herd is a spike. Calendars are folded
into a schedule's exclusions as the operator folds them (`core.calendars`), and the
columns they empty are sent beside the row; FreezeWindows and ClusterFreezeWindows are
sent as spans, with each row naming those that select it (`core.freezing`).

What it must never do: read the clock or the API (the caller hands it `now` and the
bodies), or walk an unbounded number of ticks: past `WALK_LIMIT` ticks a schedule's
remaining minutes are counted (`count_ticks`), not walked.
"""

from __future__ import annotations

import json
from collections.abc import Hashable, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any, Final

from pydantic import ValidationError

from punctual.core.calendars import Known, with_calendars
from punctual.core.freezing import Freeze, FreezeAction, Selector, selects
from punctual.core.models import CronScheduleSpec
from punctual.core.planning import tick_source
from punctual.core.schedules import CronTicks, ScheduleError, TickSource, uses_hash
from punctual.core.times import format_time

MIN_SPAN: Final = 3600  # seconds: an hour
MAX_SPAN: Final = 7 * 86400  # a week
MAX_COLUMNS: Final = 240  # a row's columns: a minute each up to 4 hours, wider after
WALK_LIMIT: Final = 2000  # ticks walked per schedule before the rest is counted
MAX_SOURCES: Final = 100_000  # sources kept across windows before starting afresh
DIGITS: Final = "0123456789abcdefghijklmnopqrstuvwxyz"
# The spec fields that decide ticks; the rest (jobTemplate, policies) do not.
_TICK_FIELDS: Final = (
    "schedule",
    "schedules",
    "timeZone",
    "runAt",
    "exclude",
    "startTime",
    "endTime",
    "excludeCalendars",
)


@dataclass(frozen=True)
class Window:
    """The span shown: (start, start + span], cut into `columns` equal columns."""

    start: datetime  # a whole minute
    span: int  # seconds, MIN_SPAN..MAX_SPAN, a whole number of minutes
    columns: int

    @classmethod
    def of(cls, now: datetime, span: int) -> Window:
        """From the minute `now` is in, `span` seconds clamped to an hour..a week."""
        span = max(MIN_SPAN, min(MAX_SPAN, span)) // 60 * 60
        minutes = span // 60
        columns = minutes if minutes <= MAX_COLUMNS else MAX_COLUMNS
        return cls(now.replace(second=0, microsecond=0), span, columns)

    @property
    def end(self) -> datetime:
        return self.start + timedelta(seconds=self.span)

    @property
    def minutes(self) -> int:
        return self.span // 60

    def column_of(self, instant: datetime) -> int:
        """The column of an instant in (start, end]: a tick at exactly a column's end
        belongs to it, as (after, until] intervals do."""
        offset = (instant - self.start).total_seconds()
        return min(self.columns - 1, max(0, int((offset - 1e-6) * self.columns // self.span)))


@dataclass(frozen=True)
class Ticks:
    """One schedule's ticks in a window: its row, its per-minute counts (sparse), its
    first tick and how many in all."""

    row: str
    minutes: dict[int, int]
    first: datetime | None
    total: int
    problem: str | None = None
    excluded: str = ""  # per column, the ticks its Calendars take away ("" when none)


def row_text(counts: list[int]) -> str:
    """Counts as one character each: 0-9, then a-z (10-35); 35 means 35 or more."""
    return "".join(DIGITS[min(count, len(DIGITS) - 1)] for count in counts)


def source_of(body: Mapping[str, Any], calendars: Known | None = None) -> TickSource:
    """The ticks of a CronSchedule body, less its Calendars' entries when `calendars` are
    given; ScheduleError or ValueError if it has none (a Calendar missing holds it)."""
    spec = CronScheduleSpec.model_validate(body.get("spec") or {})
    if calendars is not None:
        folded = with_calendars(spec, calendars)
        if isinstance(folded, str):
            raise ValueError(f"held: {folded}")
        spec = folded
    return tick_source(spec, uid=str((body.get("metadata") or {}).get("uid") or ""))


def cache_key(body: Mapping[str, Any]) -> str:
    """What a schedule's ticks depend on: the tick fields of its spec, and its uid only
    when an H field or an every/offset entry could make it matter."""
    spec = body.get("spec") or {}
    fields = {key: spec.get(key) for key in _TICK_FIELDS if spec.get(key) is not None}
    text = json.dumps(fields, sort_keys=True, default=str)
    expression = str(spec.get("schedule") or "")
    hashed = "schedules" in fields or (expression and uses_hash(expression)) or "H" in text
    uid = str((body.get("metadata") or {}).get("uid") or "") if hashed else ""
    return f"{text}|{uid}"


def ticks_in(source: TickSource, window: Window) -> Ticks:
    """Walk the ticks in the window (at most WALK_LIMIT; the rest is counted by minute)."""
    counts = [0] * window.columns
    minutes: dict[int, int] = {}
    first: datetime | None = None
    total = 0
    cursor, end = window.start, window.end
    while total < WALK_LIMIT:
        tick = source.next_tick(cursor)
        if tick is None or tick > end:
            cursor = end
            break
        first = first or tick
        total += 1
        counts[window.column_of(tick)] += 1
        minute = min(window.minutes - 1, int((tick - window.start).total_seconds() - 1e-6) // 60)
        minutes[minute] = minutes.get(minute, 0) + 1
        cursor = tick
    if cursor < end:  # a dense schedule: count the rest a minute at a time
        minute = int((cursor - window.start).total_seconds()) // 60
        low = cursor
        for index in range(minute, window.minutes):
            high = window.start + timedelta(minutes=index + 1)
            found = source.count_ticks(low, high)
            if found:
                minutes[index] = minutes.get(index, 0) + found
                counts[window.column_of(high)] += found
                total += found
            low = high
    return Ticks(row_text(counts), minutes, first, total)


def state_of(body: Mapping[str, Any], now: datetime) -> str:
    """One word for a row: Suspended, Paused, Finished, Invalid, or Active."""
    spec = body.get("spec") or {}
    status = body.get("status") or {}
    true = {
        str(c.get("type"))
        for c in status.get("conditions") or []
        if isinstance(c, Mapping) and c.get("status") == "True"
    }
    until = spec.get("suspendUntil")
    if spec.get("suspend") or "Suspended" in true or (until and str(until) > format_time(now)):
        return "Suspended"
    for word, condition in (("Paused", "Paused"), ("Finished", "Finished")):
        if condition in true:
            return word
    if "InvalidSpec" in true:
        return "Invalid"
    return "Active"


@dataclass
class Shared:
    """What the cluster holds beside the schedules and changes their ticks: Calendars,
    FreezeWindows, ClusterFreezeWindows (with their namespaceSelector), and the labels of
    the Namespaces (None: the caller may not list them). `version` changes with any."""

    calendars: Known | None = None  # None: unreadable, so not folded in
    freezes: list[Freeze] = field(default_factory=list)
    cluster_freezes: list[tuple[Freeze, Selector]] = field(default_factory=list)
    namespace_labels: dict[str, dict[str, str]] | None = None
    version: str = ""

    def freezes_of(self, body: Mapping[str, Any]) -> list[Freeze]:
        """The freeze windows that select this schedule; a ClusterFreezeWindow whose
        namespaceSelector cannot be judged (the Namespaces unreadable) only if it is empty."""
        meta = body.get("metadata") or {}
        namespace, labels = str(meta.get("namespace", "")), meta.get("labels") or {}
        found = [
            f for f in self.freezes if f.name.split("/", 1)[0] == namespace and f.selects(labels)
        ]
        for freeze, chooses in self.cluster_freezes:
            if self.namespace_labels is None:
                inside = not chooses.match_labels and not chooses.match_expressions
            else:
                inside = selects(chooses, self.namespace_labels.get(namespace, {}))
            if inside and freeze.selects(labels):
                found.append(freeze)
        return found


MAX_OCCURRENCES: Final = 1000  # of one recurring freeze window in one span


def occurrences(freeze: Freeze, window: Window) -> list[tuple[datetime, datetime]]:
    """The freeze's windows [start, end) that overlap the span, clipped to it."""
    spans: list[tuple[datetime, datetime]] = []
    if freeze.start is not None and freeze.end is not None:
        spans.append((freeze.start, freeze.end))
    elif freeze.starts is not None:
        began = freeze.starts.prev_tick(window.start) or freeze.starts.next_tick(window.start)
        while began is not None and began < window.end and len(spans) < MAX_OCCURRENCES:
            spans.append((began, began + freeze.length))
            began = freeze.starts.next_tick(began)
    return [
        (max(start, window.start), min(end, window.end))
        for start, end in spans
        if end > window.start and start < window.end
    ]


def _offsets(spans: list[tuple[datetime, datetime]], window: Window) -> list[list[int]]:
    return [
        [int((a - window.start).total_seconds()), int((b - window.start).total_seconds())]
        for a, b in spans
    ]


class Timeline:
    """Rows of the fleet for one window, reusing the ticks of schedules that tick alike:
    a schedule's source is kept while its tick fields and uid stay (`cache_key`), and
    plain cron sources are keyed by their expanded fields and zone, so 10 000 copies of
    one expression, or of `H/10 * * * *` under 10 000 uids (10 expansions), cost a
    handful of walks. A new window (the next minute, another span) walks again."""

    def __init__(self) -> None:
        self._window: Window | None = None
        self._ticks: dict[Hashable, Ticks] = {}
        self._sources: dict[str, tuple[Hashable, TickSource | str]] = {}
        self._version = ""

    def ticks(self, body: Mapping[str, Any], window: Window, shared: Shared | None = None) -> Ticks:
        shared = shared or Shared()
        if window != self._window or shared.version != self._version:
            self._window, self._ticks = window, {}
        if shared.version != self._version:
            self._version, self._sources = shared.version, {}
        key = cache_key(body)
        known = self._sources.get(key)
        if known is None:
            if len(self._sources) > MAX_SOURCES:
                self._sources.clear()
            known = self._sources[key] = _source(body, key, shared.calendars)
        alike, source = known
        found = self._ticks.get(alike)
        if found is None:
            if isinstance(source, str):
                found = Ticks("0" * window.columns, {}, None, 0, problem=source)
            else:
                found = ticks_in(source, window)
                if shared.calendars is not None and (body.get("spec") or {}).get(
                    "excludeCalendars"
                ):
                    found = _with_excluded(found, body, window)
            self._ticks[alike] = found
        return found

    def fleet(
        self,
        bodies: Iterable[Mapping[str, Any]],
        window: Window,
        now: datetime,
        shared: Shared | None = None,
    ) -> Body:
        """The JSON the page draws: the window, one row per schedule, the per-minute strip
        of what would fire (of the rows given: the filtered fleet), and the freeze windows
        that hold some of them, with their spans in seconds after the start.

        The strip leaves out suspended, paused and finished schedules and the ticks a
        freeze window holds; a Defer window's held ticks count once, at its end, as the
        operator runs them (one RunLatest tick)."""
        shared = shared or Shared()
        strip = [0] * window.minutes
        rows = []
        held: dict[str, tuple[int, Freeze, list[tuple[datetime, datetime]]]] = {}
        for body in bodies:
            meta = body.get("metadata") or {}
            state = state_of(body, now)
            ticks = self.ticks(body, window, shared)
            frozen: list[int] = []
            for freeze in shared.freezes_of(body):
                if freeze.title not in held:
                    held[freeze.title] = (len(held), freeze, occurrences(freeze, window))
                index, _, spans = held[freeze.title]
                if spans:
                    frozen.append(index)
            if state not in ("Suspended", "Paused", "Finished"):
                _add(strip, ticks, [held[t] for t in held if held[t][0] in frozen], window)
            spec = body.get("spec") or {}
            rows.append(
                {
                    "namespace": meta.get("namespace", ""),
                    "name": meta.get("name", ""),
                    "state": state,
                    "schedule": _what(spec),
                    "timeZone": spec.get("timeZone") or "UTC",
                    "row": ticks.row,
                    "excluded": ticks.excluded,
                    "frozen": frozen,
                    "ticks": ticks.total,
                    "first": format_time(ticks.first) if ticks.first else None,
                    "problem": ticks.problem,
                }
            )
        rows.sort(key=lambda r: (r["namespace"], r["name"]))
        freezes = [
            {"title": f.title, "action": str(f.action), "spans": _offsets(spans, window)}
            for _, f, spans in sorted(held.values(), key=lambda h: h[0])
        ]
        return {
            "now": format_time(now),
            "start": format_time(window.start),
            "span": window.span,
            "columns": window.columns,
            "strip": strip,
            "rows": rows,
            "freezes": freezes,
        }


def _add(
    strip: list[int],
    ticks: Ticks,
    holding: list[tuple[int, Freeze, list[tuple[datetime, datetime]]]],
    window: Window,
) -> None:
    """Add a row's firings to the strip: a minute's ticks at the minute's end instant,
    unless a freeze holds it then; a Defer window that held any, once at its end."""
    if not holding:
        for minute, count in ticks.minutes.items():
            strip[minute] += count
        return
    deferred: set[datetime] = set()
    for minute, count in ticks.minutes.items():
        instant = window.start + timedelta(minutes=minute + 1)
        covering = [
            (freeze, end)
            for _, freeze, spans in holding
            for start, end in spans
            if start <= instant < end
        ]
        if not covering:
            strip[minute] += count
            continue
        freeze, end = max(covering, key=lambda pair: pair[1])
        if freeze.action is FreezeAction.DEFER:
            deferred.add(end)
    for end in deferred:
        if end < window.end:
            strip[min(window.minutes - 1, int((end - window.start).total_seconds()) // 60)] += 1


def _with_excluded(ticks: Ticks, body: Mapping[str, Any], window: Window) -> Ticks:
    """The ticks, with the columns its Calendars empty: its ticks without them, less these."""
    try:
        nominal = ticks_in(source_of(body), window)
    except (ScheduleError, ValidationError, ValueError):
        return ticks
    removed = [
        max(0, DIGITS.index(a) - DIGITS.index(b))
        for a, b in zip(nominal.row, ticks.row, strict=True)
    ]
    return Ticks(
        ticks.row, ticks.minutes, ticks.first, ticks.total, ticks.problem, row_text(removed)
    )


Body = dict[str, Any]


def _what(spec: Mapping[str, Any]) -> str:
    if spec.get("schedule"):
        return str(spec["schedule"])
    if spec.get("runAt"):
        return f"runAt {spec['runAt']}"
    entries = spec.get("schedules") or []
    return "; ".join(str(e.get("cron") or f"every {e.get('every')}") for e in entries) or "-"


def _source(
    body: Mapping[str, Any], key: str, calendars: Known | None
) -> tuple[Hashable, TickSource | str]:
    """A schedule's source and what identifies its ticks; or why it has none."""
    try:
        source = source_of(body, calendars)
    except (ScheduleError, ValidationError, ValueError) as error:
        return key, str(error)[:200]
    if isinstance(source, CronTicks):
        return (source.fields, source.zone.key), source
    return key, source


def upcoming(
    body: Mapping[str, Any], now: datetime, count: int, calendars: Known | None = None
) -> list[datetime]:
    """The next `count` ticks after now (fewer when the schedule ends)."""
    source = source_of(body, calendars)
    found: list[datetime] = []
    cursor = now
    while len(found) < count:
        tick = source.next_tick(cursor)
        if tick is None:
            break
        found.append(tick)
        cursor = tick
    return found
