"""A brute-force reference for cron ticks, written apart from punctual.core.schedules.

It walks every UTC minute (or second, for 6 fields) of a span, reads the local
wall clock of each instant and applies the cron fields and cronie's rules directly:

* a date matches when its month does and, for the two day fields, both do if the
  text of either starts with `*` or `?`, either does otherwise;
* the day-of-month extensions are found by looking at the whole month: `L-n` is
  the (n+1)-th day from the end, `LW` the latest Monday-to-Friday, `nW` the
  Monday-to-Friday of the month at the least distance from day n (none if the month
  has no day n); in day-of-week, `dL` is the latest day of that weekday and `d#n`
  the n-th in a list of them;
* daylight saving: a schedule is wildcard when its minute or hour text starts with
  `*` (with a seconds field: its hour text alone); a wall time that occurs twice runs
  at both occurrences when wildcard and only
  at the first (fold=0) otherwise; wall times skipped by a spring-forward gap run
  once, at the first instant after the gap, when not wildcard, and not at all when
  wildcard.

It is slow on purpose and used only by the property tests, together with the
hypothesis strategy `drawn_schedules` that draws fields (plain cron, cronie's odd
corners and the extensions), a zone and a span around a daylight-saving change.
"""

from __future__ import annotations

import calendar
from dataclasses import dataclass, replace
from datetime import UTC, date, datetime, timedelta
from functools import lru_cache
from typing import Any
from zoneinfo import ZoneInfo

from hypothesis import assume
from hypothesis import strategies as st

EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
ALL_DAYS = frozenset(range(1, 32))
ALL_WEEKDAYS = frozenset(range(7))
ALL_MONTHS = frozenset(range(1, 13))
WEEKDAY_ABBREVIATIONS = ("SUN", "MON", "TUE", "WED", "THU", "FRI", "SAT")


@dataclass(frozen=True)
class ReferenceCron:
    """Cron fields as plain sets; `seconds` is None for a 5-field expression."""

    minutes: frozenset[int]
    hours: frozenset[int]
    wildcard: bool
    seconds: frozenset[int] | None = None
    months: frozenset[int] = ALL_MONTHS
    days: frozenset[int] = ALL_DAYS
    weekdays: frozenset[int] = ALL_WEEKDAYS  # 0 = Sunday
    day_star: bool = True  # the day-of-month text starts with * or ?
    weekday_star: bool = True
    last_offsets: frozenset[int] = frozenset()
    last_weekday: bool = False
    nearest: frozenset[int] = frozenset()
    last_weekdays: frozenset[int] = frozenset()
    nth_weekdays: frozenset[tuple[int, int]] = frozenset()

    @property
    def step(self) -> int:
        return 60 if self.seconds is None else 1

    def day_matches(self, day: date) -> bool:
        return day.day in matching_days(self, day.year, day.month)

    def wall_matches(self, wall: datetime) -> bool:
        seconds = frozenset({0}) if self.seconds is None else self.seconds
        return (
            wall.second in seconds
            and wall.minute in self.minutes
            and wall.hour in self.hours
            and self.day_matches(wall.date())
        )


@lru_cache(maxsize=65536)
def matching_days(cron: ReferenceCron, year: int, month: int) -> frozenset[int]:
    """The days of one month that the day fields match, from the whole month's dates."""
    if month not in cron.months:
        return frozenset()
    dates = [date(year, month, n) for n in range(1, calendar.monthrange(year, month)[1] + 1)]
    workdays = [d for d in dates if d.isoweekday() <= 5]
    by_day = {d.day for d in dates if d.day in cron.days}
    by_day |= {dates[-1 - k].day for k in cron.last_offsets if k < len(dates)}
    if cron.last_weekday:
        by_day.add(workdays[-1].day)
    for target in cron.nearest:
        if target <= len(dates):
            by_day.add(min(workdays, key=lambda d: abs(d.day - target)).day)
    by_weekday = {d.day for d in dates if d.isoweekday() % 7 in cron.weekdays}
    for weekday in range(7):
        same = [d.day for d in dates if d.isoweekday() % 7 == weekday]
        if weekday in cron.last_weekdays:
            by_weekday.add(same[-1])
        by_weekday |= {same[n - 1] for w, n in cron.nth_weekdays if w == weekday and n <= len(same)}
    if cron.day_star or cron.weekday_star:
        return frozenset(by_day & by_weekday)
    return frozenset(by_day | by_weekday)


def _representative_months() -> list[tuple[int, int]]:
    """One (year, month) for each (month, weekday of the 1st, length) that occurs."""
    seen: dict[tuple[int, int, int], tuple[int, int]] = {}
    for year in range(2000, 2028):
        for month in range(1, 13):
            shape = (month, date(year, month, 1).weekday(), calendar.monthrange(year, month)[1])
            seen.setdefault(shape, (year, month))
    return sorted(seen.values())


REPRESENTATIVE_MONTHS = _representative_months()


def reference_possible(cron: ReferenceCron) -> bool:
    """Whether any date ever matches (every month shape occurs in 28 years)."""
    return any(
        matching_days(cron, year, month)
        for year, month in REPRESENTATIVE_MONTHS
        if month in cron.months
    )


def reference_ticks(
    cron: ReferenceCron, zone: ZoneInfo, after: datetime, until: datetime
) -> list[datetime]:
    """Every tick in (after, until], oldest first, by walking every step."""
    step = cron.step
    first = int((after - EPOCH).total_seconds()) // step * step - step
    last = int((until - EPOCH).total_seconds())
    ticks: list[datetime] = []
    previous_wall: datetime | None = None
    for instant in range(first, last + 1, step):
        local = datetime.fromtimestamp(instant, zone)
        wall = local.replace(tzinfo=None, fold=0)
        found = False
        if cron.wall_matches(wall) and (local.fold == 0 or cron.wildcard):
            found = True
        if previous_wall is not None and not cron.wildcard:
            skipped = previous_wall + timedelta(seconds=step)
            while skipped < wall and not found:
                if cron.wall_matches(skipped):
                    found = True
                skipped += timedelta(seconds=step)
        previous_wall = wall if previous_wall is None else max(previous_wall, wall)
        moment = EPOCH + timedelta(seconds=instant)
        if found and after < moment <= until:
            ticks.append(moment)
    return ticks


# (zone, an instant of interest): daylight-saving changes of several sizes and signs
# (1 h, 30 min at Lord Howe, at -3:30 in St John's, at +12:45 in Chatham), changes at
# midnight (Santiago, Tehran), a skipped day (Apia), and plain days.
MOMENTS = [
    ("America/New_York", datetime(2026, 3, 8, 7, tzinfo=UTC)),
    ("America/New_York", datetime(2026, 11, 1, 6, tzinfo=UTC)),
    ("Europe/Berlin", datetime(2026, 3, 29, 1, tzinfo=UTC)),
    ("Europe/Berlin", datetime(2026, 10, 25, 1, tzinfo=UTC)),
    ("Australia/Lord_Howe", datetime(2026, 4, 4, 15, tzinfo=UTC)),
    ("Australia/Lord_Howe", datetime(2026, 10, 3, 15, 30, tzinfo=UTC)),
    ("America/St_Johns", datetime(2026, 3, 8, 5, 30, tzinfo=UTC)),
    ("America/St_Johns", datetime(2026, 11, 1, 4, 30, tzinfo=UTC)),
    ("Pacific/Chatham", datetime(2026, 4, 4, 14, tzinfo=UTC)),
    ("Pacific/Chatham", datetime(2026, 9, 26, 14, tzinfo=UTC)),
    ("Asia/Tehran", datetime(2021, 3, 21, 20, 30, tzinfo=UTC)),
    ("Asia/Tehran", datetime(2021, 9, 21, 19, 30, tzinfo=UTC)),
    ("America/Santiago", datetime(2026, 4, 5, 3, tzinfo=UTC)),
    ("America/Santiago", datetime(2026, 9, 6, 4, tzinfo=UTC)),
    ("Antarctica/Casey", datetime(2019, 3, 16, 16, tzinfo=UTC)),
    ("Pacific/Apia", datetime(2011, 12, 30, 10, tzinfo=UTC)),
    ("Asia/Kolkata", datetime(2026, 6, 1, tzinfo=UTC)),
    ("UTC", datetime(2028, 2, 28, 12, tzinfo=UTC)),
    ("UTC", datetime(2027, 2, 28, 12, tzinfo=UTC)),
]


@dataclass(frozen=True)
class Drawn:
    expression: str
    reference: ReferenceCron
    zone: ZoneInfo
    after: datetime
    until: datetime


def _values(draw: st.DrawFn, low: int, high: int, most: int) -> frozenset[int]:
    return frozenset(draw(st.lists(st.integers(low, high), min_size=1, max_size=most)))


def _listed(draw: st.DrawFn, values: frozenset[int]) -> str:
    """A list of values, some written as one-value ranges (`5-5` is 5, as in cronie)."""
    return ",".join(f"{v}-{v}" if draw(st.integers(0, 4)) == 0 else str(v) for v in sorted(values))


TIME_STYLES = ["list", "list", "star", "step", "range", "starlist", "liststar", "bigstep", "ranged"]


def _time_field(
    draw: st.DrawFn, low: int, high: int, near: frozenset[int], steps: list[int]
) -> tuple[str, frozenset[int]]:
    """A minute, hour or second field: its text and the values it allows."""
    style = draw(st.sampled_from(TIME_STYLES))
    full = frozenset(range(low, high + 1))
    if style == "list":
        values = _values(draw, low, high, 3) | frozenset(
            draw(st.sets(st.sampled_from(sorted(near))))
        )
        return _listed(draw, values), values
    if style == "star":
        return "*", full
    if style == "step":
        step = draw(st.sampled_from(steps))
        return f"*/{step}", frozenset(range(low, high + 1, step))
    if style == "starlist":
        return f"*,{draw(st.integers(low, high))}", full
    if style == "liststar":  # the whole field, but it does not start with `*`
        return f"{draw(st.integers(low, high))},*", full
    if style == "bigstep":
        return "*/100", frozenset({low})
    first = draw(st.sampled_from(sorted(near)))
    last = min(high, first + draw(st.integers(0, 3)))
    if style == "range":
        return f"{first}-{last}", frozenset(range(first, last + 1))
    step = draw(st.integers(1, 3))
    last = min(high, last + 3)
    return f"{first}-{last}/{step}", frozenset(range(first, last + 1, step))


@dataclass(frozen=True)
class _Day:
    """What the strategy knows of the moment's local date."""

    day: int
    length: int
    weekday: int  # 0 = Sunday
    week: int  # 1 for days 1-7, ...


def _day_of_month(draw: st.DrawFn, moment: _Day, plain_only: bool) -> tuple[str, dict[str, Any]]:
    """A day-of-month field near the moment's date: its text and ReferenceCron fields."""
    styles = ["star", "star", "question", "list", "full", "starstep", "starlist"]
    if not plain_only:
        styles += ["last", "lastweekday", "nearest", "mixed"]
    style = draw(st.sampled_from(styles))
    near = max(1, min(31, moment.day + draw(st.integers(-1, 1))))
    if style in ("star", "question"):
        return ("*" if style == "star" else "?"), {}
    if style == "list":
        values = _values(draw, 1, 31, 3) | {near}
        return _listed(draw, values), {"days": values, "day_star": False}
    if style == "full":
        return "1-31", {"day_star": False}
    if style == "starstep":
        step = draw(st.sampled_from([2, 3, 7, 100]))
        return f"*/{step}", {"days": frozenset(range(1, 32, step))}
    if style == "starlist":  # cronie users' trick: a `*` first makes both fields count
        first = max(1, moment.day - 2)
        last = min(31, moment.day + draw(st.integers(0, 2)))
        return f"*/100,{first}-{last}", {"days": frozenset({1} | set(range(first, last + 1)))}
    special: dict[str, Any] = {"days": frozenset(), "day_star": False}
    if style == "last":
        offset = max(0, min(30, moment.length - near))
        text = "L" if offset == 0 and draw(st.booleans()) else f"L-{offset}"
        return text, special | {"last_offsets": frozenset({offset})}
    if style == "lastweekday":
        return "LW", special | {"last_weekday": True}
    if style == "nearest":
        return f"{near}W", special | {"nearest": frozenset({near})}
    return f"{near},L", special | {"days": frozenset({near}), "last_offsets": frozenset({0})}


def _weekday_name(draw: st.DrawFn, weekday: int) -> str:
    choice = draw(st.integers(0, 3))
    if choice == 0:
        return WEEKDAY_ABBREVIATIONS[weekday]
    if choice == 1 and weekday == 0:
        return "7"
    return str(weekday)


def _day_of_week(draw: st.DrawFn, moment: _Day, plain_only: bool) -> tuple[str, dict[str, Any]]:
    """A day-of-week field near the moment's weekday: its text and ReferenceCron fields."""
    styles = ["star", "star", "question", "list", "full", "starstep"]
    if not plain_only:
        styles += ["last", "nth", "mixed"]
    style = draw(st.sampled_from(styles))
    near = (moment.weekday + draw(st.integers(-1, 1))) % 7
    if style in ("star", "question"):
        return ("*" if style == "star" else "?"), {}
    if style == "list":
        values = _values(draw, 0, 6, 2) | {near}
        text = ",".join(_weekday_name(draw, v) for v in sorted(values))
        return text, {"weekdays": values, "weekday_star": False}
    if style == "full":
        return draw(st.sampled_from(["0-6", "1-7", "sun-sat"])), {"weekday_star": False}
    if style == "starstep":
        step = draw(st.sampled_from([2, 3]))
        return f"*/{step}", {"weekdays": frozenset(range(0, 7, step))}
    special: dict[str, Any] = {"weekdays": frozenset(), "weekday_star": False}
    if style == "last":
        return f"{_weekday_name(draw, near)}L", special | {"last_weekdays": frozenset({near})}
    week = max(1, min(5, moment.week + draw(st.integers(-1, 1))))
    nth = f"{_weekday_name(draw, near)}#{week}"
    if style == "nth":
        return nth, special | {"nth_weekdays": frozenset({(near, week)})}
    other = draw(st.integers(0, 6))
    return f"{other},{nth}", special | {
        "weekdays": frozenset({other}),
        "nth_weekdays": frozenset({(near, week)}),
    }


@dataclass(frozen=True)
class DrawnDays:
    """The day fields of a schedule: text for day-of-month, month and day-of-week."""

    day_text: str
    month_text: str
    weekday_text: str
    fields: dict[str, Any]  # ReferenceCron fields: months, days, weekdays, ...


def _draw_days(draw: st.DrawFn, local: date) -> DrawnDays:
    """Day fields that often match on or around `local`, plain or with extensions."""
    length = calendar.monthrange(local.year, local.month)[1]
    day = _Day(local.day, length, local.isoweekday() % 7, (local.day - 1) // 7 + 1)
    day_text, day_fields = _day_of_month(draw, day, plain_only=False)
    # Keep the day-of-week plain beside a day-of-month extension: most such pairs
    # joined by AND never meet.
    extension = bool({"last_offsets", "last_weekday", "nearest"} & day_fields.keys())
    weekday_text, weekday_fields = _day_of_week(draw, day, plain_only=extension)
    fields = day_fields | weekday_fields
    month_text = "*"
    if draw(st.integers(0, 5)) == 0:
        fields["months"] = frozenset({local.month})
        month_text = draw(st.sampled_from([str(local.month), f"{local.month}-{local.month}"]))
    return DrawnDays(day_text, month_text, weekday_text, fields)


@st.composite
def drawn_day_rules(draw: st.DrawFn) -> tuple[DrawnDays, ReferenceCron]:
    """Day fields drawn around a date of 2026-2029, and the reference for `0 12 ...`."""
    local = draw(st.dates(date(2026, 1, 1), date(2029, 12, 31)))
    days = _draw_days(draw, local)
    reference = replace(
        ReferenceCron(minutes=frozenset({0}), hours=frozenset({12}), wildcard=False),
        **days.fields,
    )
    assume(reference_possible(reference))
    return days, reference


@st.composite
def drawn_schedules(draw: st.DrawFn, *, seconds: bool = False) -> Drawn:
    zone_name, moment = draw(st.sampled_from(MOMENTS))
    zone = ZoneInfo(zone_name)
    local = moment.astimezone(zone)
    hour = local.hour
    minute_text, minutes = _time_field(draw, 0, 59, frozenset({0, 30}), [5, 15, 20])
    near_hours = frozenset({hour, (hour + 1) % 24, (hour - 1) % 24})
    hour_text, hours = _time_field(draw, 0, 23, near_hours, [2, 3])
    days = _draw_days(draw, local.date())

    fields = [minute_text, hour_text, days.day_text, days.month_text, days.weekday_text]
    second_values: frozenset[int] | None = None
    if seconds:
        second_text, second_values = _time_field(draw, 0, 59, frozenset({0, 59}), [20, 30])
        fields.insert(0, second_text)

    reference = ReferenceCron(
        minutes=minutes,
        hours=hours,
        # cronie's MIN_STAR | HR_STAR; with a seconds field, the hour alone (Punctual's rule
        # for 6-field expressions, older than its cronie rule and kept).
        wildcard=hour_text.startswith("*") or (not seconds and minute_text.startswith("*")),
        seconds=second_values,
    )
    reference = replace(reference, **days.fields)
    assume(reference_possible(reference))
    # Spans straddle the moment; fractions keep hypothesis from preferring tiny spans.
    longest = 3 * 3600 if seconds else 48 * 3600
    fractions = st.sampled_from([0.0, 0.1, 0.25, 0.5, 0.75, 1.0])
    after = moment - timedelta(seconds=longest / 2 * draw(fractions) + draw(st.integers(0, 999)))
    after += timedelta(microseconds=draw(st.sampled_from([0, 0, 1, 500_000])))
    until = after + timedelta(seconds=longest * draw(fractions) + draw(st.integers(1, 999)))
    return Drawn(" ".join(fields), reference, zone, after, until)
