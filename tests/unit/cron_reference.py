"""A brute-force reference for cron ticks, written apart from punctual.core.schedules.

It walks every UTC minute (or second, for 6 fields) of a span, reads the local
wall clock of each instant and applies the cron fields and the Vixie cron
daylight-saving rule directly:

* a wall time that occurs twice runs at both occurrences when the hour field is
  periodic (`*`, `*/n`), and only at the first (fold=0) when it is fixed;
* wall times skipped by a spring-forward gap run once, at the first instant after
  the gap, when the hour is fixed, and not at all when it is periodic.

It is slow on purpose and used only by the property tests, together with the
hypothesis strategy `drawn_schedules` that draws fields, a zone and a span.
"""

from __future__ import annotations

import calendar
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from zoneinfo import ZoneInfo

from hypothesis import strategies as st

EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


@dataclass(frozen=True)
class ReferenceCron:
    """Cron fields as plain sets; `seconds` is None for a 5-field expression."""

    minutes: frozenset[int]
    hours: frozenset[int]
    days: frozenset[int]
    months: frozenset[int]
    weekdays: frozenset[int]
    periodic_hour: bool
    seconds: frozenset[int] | None = None
    last_day: bool = False

    @property
    def step(self) -> int:
        return 60 if self.seconds is None else 1

    def day_matches(self, day: date) -> bool:
        if day.month not in self.months:
            return False
        days_restricted = self.last_day or self.days != frozenset(range(1, 32))
        weekdays_restricted = self.weekdays != frozenset(range(7))
        last = calendar.monthrange(day.year, day.month)[1]
        by_day = day.day in self.days or (self.last_day and day.day == last)
        by_weekday = day.isoweekday() % 7 in self.weekdays
        if days_restricted and weekdays_restricted:
            return by_day or by_weekday
        if days_restricted:
            return by_day
        if weekdays_restricted:
            return by_weekday
        return True

    def wall_matches(self, wall: datetime) -> bool:
        seconds = frozenset({0}) if self.seconds is None else self.seconds
        return (
            wall.second in seconds
            and wall.minute in self.minutes
            and wall.hour in self.hours
            and self.day_matches(wall.date())
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
        if cron.wall_matches(wall) and (local.fold == 0 or cron.periodic_hour):
            found = True
        if previous_wall is not None and not cron.periodic_hour:
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


def render(values: frozenset[int], low: int, high: int, style: str) -> str:
    """Spell a set of field values as a cron field: a list, `*` or `*/n`."""
    full = frozenset(range(low, high + 1))
    if style == "star" and values == full:
        return "*"
    if style.startswith("step"):
        step = int(style[4:])
        if values == frozenset(range(low, high + 1, step)):
            return f"*/{step}"
    return ",".join(str(v) for v in sorted(values))


# (zone, an instant of interest): daylight-saving changes of several sizes and signs,
# a changing at midnight, a skipped day, and plain days.
MOMENTS = [
    ("America/New_York", datetime(2026, 3, 8, 7, tzinfo=UTC)),
    ("America/New_York", datetime(2026, 11, 1, 6, tzinfo=UTC)),
    ("Europe/Berlin", datetime(2026, 3, 29, 1, tzinfo=UTC)),
    ("Europe/Berlin", datetime(2026, 10, 25, 1, tzinfo=UTC)),
    ("Australia/Lord_Howe", datetime(2026, 4, 4, 15, tzinfo=UTC)),
    ("Australia/Lord_Howe", datetime(2026, 10, 3, 15, 30, tzinfo=UTC)),
    ("America/Santiago", datetime(2026, 4, 5, 3, tzinfo=UTC)),
    ("America/Santiago", datetime(2026, 9, 6, 4, tzinfo=UTC)),
    ("Antarctica/Casey", datetime(2019, 3, 16, 16, tzinfo=UTC)),
    ("Pacific/Apia", datetime(2011, 12, 30, 10, tzinfo=UTC)),
    ("Asia/Kolkata", datetime(2026, 6, 1, tzinfo=UTC)),
    ("UTC", datetime(2028, 2, 28, 12, tzinfo=UTC)),
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


@st.composite
def drawn_schedules(draw: st.DrawFn, *, seconds: bool = False) -> Drawn:
    zone_name, moment = draw(st.sampled_from(MOMENTS))
    zone = ZoneInfo(zone_name)
    local_hour = moment.astimezone(zone).hour

    minute_style = draw(st.sampled_from(["list", "star", "step5", "step15", "step20"]))
    if minute_style == "list":
        minutes = _values(draw, 0, 59, 4) | draw(st.sampled_from([frozenset(), {0}, {30}]))
    elif minute_style == "star":
        minutes = frozenset(range(60))
    else:
        minutes = frozenset(range(0, 60, int(minute_style[4:])))

    hour_style = draw(st.sampled_from(["list", "list", "star", "step2", "step3"]))
    if hour_style == "list":
        near = {local_hour, (local_hour + 1) % 24, (local_hour - 1) % 24}
        hours = _values(draw, 0, 23, 3) | frozenset(draw(st.sets(st.sampled_from(sorted(near)))))
    elif hour_style == "star":
        hours = frozenset(range(24))
    else:
        hours = frozenset(range(0, 24, int(hour_style[4:])))

    days = frozenset(range(1, 32))
    if draw(st.integers(0, 4)) == 0:
        days = _values(draw, 1, 31, 6) | {moment.astimezone(zone).day}
    weekdays = frozenset(range(7))
    if draw(st.integers(0, 4)) == 0:
        weekdays = _values(draw, 0, 6, 3)

    second_values: frozenset[int] | None = None
    fields = [
        render(minutes, 0, 59, minute_style),
        render(hours, 0, 23, hour_style),
        render(days, 1, 31, "star"),
        "*",
        render(weekdays, 0, 6, "star"),
    ]
    if seconds:
        second_style = draw(st.sampled_from(["list", "star", "step20"]))
        if second_style == "list":
            second_values = _values(draw, 0, 59, 3)
        elif second_style == "star":
            second_values = frozenset(range(60))
        else:
            second_values = frozenset(range(0, 60, 20))
        fields.insert(0, render(second_values, 0, 59, second_style))

    reference = ReferenceCron(
        minutes=minutes,
        hours=hours,
        days=days,
        months=frozenset(range(1, 13)),
        weekdays=weekdays,
        periodic_hour=hour_style != "list",
        seconds=second_values,
    )
    # Spans straddle the moment; fractions keep hypothesis from preferring tiny spans.
    longest = 3 * 3600 if seconds else 48 * 3600
    fractions = st.sampled_from([0.0, 0.1, 0.25, 0.5, 0.75, 1.0])
    after = moment - timedelta(seconds=longest / 2 * draw(fractions) + draw(st.integers(0, 999)))
    after += timedelta(microseconds=draw(st.sampled_from([0, 0, 1, 500_000])))
    until = after + timedelta(seconds=longest * draw(fractions) + draw(st.integers(1, 999)))
    return Drawn(" ".join(fields), reference, zone, after, until)
