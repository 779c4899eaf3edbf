"""Parsing cron expressions: from text to the values each field allows.

Why it exists: every other part of the schedule math works on `CronFields`, the
validated and expanded form of an expression; this module is the one place that
reads the text, with croniter underneath for names, ranges, steps and `H`.

What it must never do: accept an expression it cannot explain, report bad input any
other way than by raising `ScheduleError` (whose message names the field), or know
anything of time zones or of the CronSchedule resource.
"""

from __future__ import annotations

import calendar
import re
from bisect import bisect_left, bisect_right
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import date
from functools import lru_cache
from typing import Final, Literal

from croniter import CroniterError, croniter

SpecField = Literal["schedule", "runAt", "timeZone"]

MACROS: Final[dict[str, str]] = {
    "@yearly": "0 0 1 1 *",
    "@annually": "0 0 1 1 *",
    "@monthly": "0 0 1 * *",
    "@weekly": "0 0 * * 0",
    "@daily": "0 0 * * *",
    "@midnight": "0 0 * * *",
    "@hourly": "0 * * * *",
}

WEEKDAY_NAMES: Final = (
    "Sunday",
    "Monday",
    "Tuesday",
    "Wednesday",
    "Thursday",
    "Friday",
    "Saturday",
)
MONTH_NAMES: Final = (
    "",
    "January",
    "February",
    "March",
    "April",
    "May",
    "June",
    "July",
    "August",
    "September",
    "October",
    "November",
    "December",
)

_DAY_SECONDS: Final = 86400


class ScheduleError(ValueError):
    """A schedule, run-at instant or time zone that cannot be used, and why.

    `reason` names the spec field, for status conditions and Events:
    `spec.schedule: day 30 never occurs in February`.
    """

    def __init__(self, field: SpecField, value: str, problem: str) -> None:
        super().__init__(f"spec.{field}: {problem}")
        self.field: SpecField = field
        self.value = value
        self.problem = problem

    @property
    def reason(self) -> str:
        return f"spec.{self.field}: {self.problem}"


@lru_cache(maxsize=16384)
def uses_hash(expression: str) -> bool:
    """Whether the expression has `H` fields, which need the schedule's uid."""
    return any(
        part.startswith("h") for token in expression.lower().split() for part in token.split(",")
    )


# --- parsing ----------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _FieldSpec:
    name: str
    low: int
    high: int
    names: tuple[str, ...] = ()  # lower-case; names[i] means first_name_value + i
    first_name_value: int = 0


_SECOND = _FieldSpec("second", 0, 59)
_MINUTE = _FieldSpec("minute", 0, 59)
_HOUR = _FieldSpec("hour", 0, 23)
_DAY = _FieldSpec("day-of-month", 1, 31)
_MONTH = _FieldSpec(
    "month", 1, 12, tuple(n[:3].lower() for n in MONTH_NAMES[1:]), first_name_value=1
)
_WEEKDAY = _FieldSpec("day-of-week", 0, 7, tuple(n[:3].lower() for n in WEEKDAY_NAMES))
_FIELDS_5: Final = (_MINUTE, _HOUR, _DAY, _MONTH, _WEEKDAY)
_FIELDS_6: Final = (_SECOND, _MINUTE, _HOUR, _DAY, _MONTH, _WEEKDAY)

_DIGITS = re.compile(r"[0-9]+")
_HASHED = re.compile(r"h(?:\(([0-9]+)-([0-9]+)\))?")


@dataclass(frozen=True, slots=True)
class CronFields:
    """A validated cron expression, expanded to the values each field allows."""

    seconds: tuple[int, ...]
    minutes: tuple[int, ...]
    hours: tuple[int, ...]
    days: frozenset[int]
    last_day: bool
    months: frozenset[int]
    weekdays: frozenset[int]
    days_restricted: bool
    weekdays_restricted: bool
    has_seconds: bool
    periodic_hour: bool
    second_set: frozenset[int]
    minute_set: frozenset[int]
    hour_set: frozenset[int]

    @property
    def per_day(self) -> int:
        """Ticks on a matching day of 24 ordinary hours."""
        return len(self.hours) * len(self.minutes) * len(self.seconds)

    def matches_date(self, day: date) -> bool:
        if day.month not in self.months:
            return False
        if not self.days_restricted and not self.weekdays_restricted:
            return True
        by_day = day.day in self.days or (
            self.last_day and day.day == calendar.monthrange(day.year, day.month)[1]
        )
        by_weekday = (day.weekday() + 1) % 7 in self.weekdays
        if self.days_restricted and self.weekdays_restricted:
            return by_day or by_weekday
        return by_day if self.days_restricted else by_weekday

    def count_until(self, second_of_day: int) -> int:
        """How many times of day are at or before `second_of_day` (0..86399)."""
        if second_of_day < 0:
            return 0
        hour, rest = divmod(second_of_day, 3600)
        minute, second = divmod(rest, 60)
        per_hour = len(self.minutes) * len(self.seconds)
        count = bisect_left(self.hours, hour) * per_hour
        if hour in self.hour_set:
            count += bisect_left(self.minutes, minute) * len(self.seconds)
            if minute in self.minute_set:
                count += bisect_right(self.seconds, second)
        return count

    def first_time_from(self, second_of_day: int) -> int | None:
        """The first time of day at or after `second_of_day`, or None."""
        if second_of_day >= _DAY_SECONDS:
            return None
        hour, rest = divmod(max(second_of_day, 0), 3600)
        minute, second = divmod(rest, 60)
        if second_of_day < 0:
            hour = minute = second = 0
        for h in self.hours[bisect_left(self.hours, hour) :]:
            if h > hour:
                return h * 3600 + self.minutes[0] * 60 + self.seconds[0]
            for m in self.minutes[bisect_left(self.minutes, minute) :]:
                if m > minute:
                    return h * 3600 + m * 60 + self.seconds[0]
                index = bisect_left(self.seconds, second)
                if index < len(self.seconds):
                    return h * 3600 + m * 60 + self.seconds[index]
        return None

    def last_time_until(self, second_of_day: int) -> int | None:
        """The last time of day at or before `second_of_day`, or None."""
        if second_of_day < 0:
            return None
        hour, rest = divmod(min(second_of_day, _DAY_SECONDS - 1), 3600)
        minute, second = divmod(rest, 60)
        for h in reversed(self.hours[: bisect_right(self.hours, hour)]):
            if h < hour:
                return h * 3600 + self.minutes[-1] * 60 + self.seconds[-1]
            for m in reversed(self.minutes[: bisect_right(self.minutes, minute)]):
                if m < minute:
                    return h * 3600 + m * 60 + self.seconds[-1]
                index = bisect_right(self.seconds, second)
                if index > 0:
                    return h * 3600 + m * 60 + self.seconds[index - 1]
        return None

    def count_between(self, first: int, last: int) -> int:
        """How many times of day lie in [first, last], both seconds of the day."""
        first, last = max(first, 0), min(last, _DAY_SECONDS - 1)
        if first > last:
            return 0
        return self.count_until(last) - self.count_until(first - 1)


def parse_fields(expression: str, *, uid: str | None = None) -> CronFields:
    """Validate and expand `expression`; raise ScheduleError saying what is wrong."""
    text = expression.strip()
    if not text:
        raise _bad(expression, "is empty")
    if text.startswith("@"):
        macro = MACROS.get(text.lower())
        if macro is None:
            known = ", ".join(MACROS)
            raise _bad(expression, f'unknown macro "{text}" (known: {known})')
        text = macro
    tokens = text.split()
    if len(tokens) not in (5, 6):
        raise _bad(
            expression,
            "expected 5 fields (minute hour day-of-month month day-of-week) "
            f"or 6 with a leading seconds field, got {len(tokens)}",
        )
    specs = _FIELDS_6 if len(tokens) == 6 else _FIELDS_5
    for spec, token in zip(specs, tokens, strict=True):
        _check_field(expression, spec, token)
    hashed = uses_hash(text)
    if hashed and uid is None:
        raise _bad(expression, "H fields need the schedule's uid to choose their values")
    try:
        expanded, _nth = croniter.expand(
            " ".join(tokens),
            hash_id=uid.encode() if hashed and uid is not None else None,
            second_at_beginning=len(tokens) == 6,
        )
    except (CroniterError, ValueError, TypeError) as exc:
        raise _bad(expression, f"cannot be read: {exc}") from exc
    return _fields_from_expanded(expression, tokens, expanded)


def _bad(expression: str, problem: str) -> ScheduleError:
    return ScheduleError("schedule", expression, problem)


def _check_field(expression: str, spec: _FieldSpec, token: str) -> None:
    """Reject what croniter would reject, with a message a user can act on."""
    for part in token.lower().split(","):
        base, slash, step = part.partition("/")
        if slash and not (_DIGITS.fullmatch(step) and int(step) > 0):
            raise _bad(expression, f"{spec.name} step {step!r} is not a positive whole number")
        if base == "*":
            continue
        if base == "?":
            if spec not in (_DAY, _WEEKDAY):
                raise _bad(expression, f"'?' is only allowed in the day fields, not {spec.name}")
            continue
        if base.startswith("h"):
            hashed = _HASHED.fullmatch(base)
            if hashed is None:
                raise _bad(expression, f"{spec.name} field {token!r} is not understood")
            if hashed.group(1) is not None:
                low, high = int(hashed.group(1)), int(hashed.group(2))
                for bound in (low, high):
                    _check_value(expression, spec, bound)
                if low >= high:
                    raise _bad(expression, f"{spec.name} range H({low}-{high}) is empty")
            continue
        if base.startswith("r"):
            raise _bad(expression, "R (random) is not supported; H gives a spread that stays put")
        if "#" in base:
            raise _bad(expression, "'#' (nth weekday of the month) is not supported")
        if spec is _DAY and base == "l":
            if slash:
                raise _bad(expression, "L (last day of the month) cannot take a step")
            continue
        if spec is _DAY and "w" in base:
            raise _bad(expression, "W (nearest weekday) is not supported")
        first, dash, last = base.partition("-")
        for value in (first, last) if dash else (first,):
            _check_value(expression, spec, _value_of(expression, spec, token, value))


def _value_of(expression: str, spec: _FieldSpec, token: str, value: str) -> int:
    if _DIGITS.fullmatch(value):
        return int(value)
    if value in spec.names:
        return spec.names.index(value) + spec.first_name_value
    if not value:
        raise _bad(expression, f"{spec.name} field {token!r} is not understood")
    kind = "a number or a name" if spec.names else "a number"
    raise _bad(expression, f"{spec.name} value {value!r} is not {kind}")


def _check_value(expression: str, spec: _FieldSpec, value: int) -> None:
    if not spec.low <= value <= spec.high:
        raise _bad(expression, f"{spec.name} {value} is out of range {spec.low}-{spec.high}")


def _fields_from_expanded(
    expression: str, tokens: list[str], expanded: list[list[int | str]]
) -> CronFields:
    def values(index: int, spec: _FieldSpec) -> tuple[int, ...]:
        field = expanded[index]
        if field == ["*"]:
            return tuple(range(spec.low, spec.high + 1))
        return tuple(sorted({int(v) for v in field if v != "l"}))

    has_seconds = len(tokens) == 6
    seconds = values(5, _SECOND) if has_seconds else (0,)
    minutes, hours = values(0, _MINUTE), values(1, _HOUR)
    day_list = values(2, _DAY)
    last_day = "l" in expanded[2]
    months = values(3, _MONTH)
    weekdays = frozenset(v % 7 for v in values(4, _WEEKDAY))
    days_restricted = len(day_list) < 31
    weekdays_restricted = len(weekdays) < 7
    hour_token = tokens[2 if has_seconds else 1].lower()
    fields = CronFields(
        seconds=seconds,
        minutes=minutes,
        hours=hours,
        days=frozenset(day_list),
        last_day=last_day and days_restricted,
        months=frozenset(months),
        weekdays=weekdays,
        days_restricted=days_restricted,
        weekdays_restricted=weekdays_restricted,
        has_seconds=has_seconds,
        periodic_hour=hour_token.startswith(("*", "h/")),
        second_set=frozenset(seconds),
        minute_set=frozenset(minutes),
        hour_set=frozenset(hours),
    )
    _check_possible(expression, fields)
    return fields


def _check_possible(expression: str, fields: CronFields) -> None:
    """Reject a day-of-month that no allowed month has, e.g. `0 0 30 2 *`."""
    if not fields.days_restricted or fields.weekdays_restricted or fields.last_day:
        return
    longest = {m: 29 if m == 2 else calendar.monthrange(2001, m)[1] for m in fields.months}
    if any(day <= longest[m] for day in fields.days for m in fields.months):
        return
    days = sorted(fields.days)
    day_text = f"day {days[0]}" if len(days) == 1 else f"days {join_words(map(str, days))}"
    verb = "occurs" if len(days) == 1 else "occur"
    month_text = join_words((MONTH_NAMES[m] for m in sorted(fields.months)), "or")
    raise _bad(expression, f"{day_text} never {verb} in {month_text}")


def join_words(words: Iterable[str], last: str = "and") -> str:
    items = list(words)
    if len(items) <= 1:
        return "".join(items)
    return f"{', '.join(items[:-1])} {last} {items[-1]}"
