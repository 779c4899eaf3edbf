"""Parsing cron expressions: from text to the values each field allows.

Why it exists: every other part of the schedule math works on `CronFields`, the
validated and expanded form of an expression; this module is the one place that
reads the text. It follows cronie's grammar (`src/entry.c`: lists, ranges, steps,
names) with the extensions listed in `punctual.core.schedules`, and expands `H`
fields exactly as croniter 7 did, byte for byte (Job names of existing schedules
depend on those values; tests/unit/test_cron_hashing.py compares the two over many
uids), without calling croniter.

What it must never do: accept an expression it cannot explain, report bad input any
other way than by raising `ScheduleError` (whose message names the field), or know
anything of time zones or of the CronSchedule resource.

Over 500 lines on purpose: one grammar, read top to bottom in the order cronie reads a
line; its error messages (one per way a field can be wrong) are most of the length.
"""

from __future__ import annotations

import calendar
import re
import zlib
from bisect import bisect_left, bisect_right
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import date
from functools import lru_cache
from typing import Final

# The path of the spec field a ScheduleError is about, below `spec.`: "schedule",
# "runAt", "timeZone", or an entry's field such as "schedules[2].cron".
SpecField = str

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
_FIELD_LIST: Final = "minute hour day-of-month month day-of-week"
_TOO_BIG: Final = 10**6  # any number this large is out of range and any step is "one value"


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

    def at(self, field: SpecField) -> ScheduleError:
        """The same problem, about another field (an entry of spec.schedules or exclude)."""
        return ScheduleError(field, self.value, self.problem)


def printable(text: str, limit: int = 120) -> str:
    """`text` on one line: control and unencodable characters escaped, long text cut."""
    shown = "".join(
        char if char.isprintable() else char.encode("unicode_escape").decode("ascii")
        for char in text[: limit + 1]
    )
    return shown if len(text) <= limit else shown[:limit] + "..."


def _quoted(text: str) -> str:
    return f"'{printable(text, 40)}'"


@lru_cache(maxsize=16384)
def uses_hash(expression: str) -> bool:
    """Whether the expression has `H` fields, which need the schedule's uid."""
    return any(
        part.startswith("h") for token in expression.lower().split() for part in token.split(",")
    )


# --- fields -----------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _FieldSpec:
    name: str
    low: int
    high: int
    hash_index: int  # croniter's field index, which shifts the uid's crc32 for H
    hash_high: int  # croniter's upper bound for H and H/n (6 for day-of-week)
    names: tuple[str, ...] = ()  # lower-case; names[i] means first_name_value + i
    first_name_value: int = 0


_SECOND = _FieldSpec("second", 0, 59, 5, 59)
_MINUTE = _FieldSpec("minute", 0, 59, 0, 59)
_HOUR = _FieldSpec("hour", 0, 23, 1, 23)
_DAY = _FieldSpec("day-of-month", 1, 31, 2, 31)
_MONTH = _FieldSpec(
    "month", 1, 12, 3, 12, tuple(n[:3].lower() for n in MONTH_NAMES[1:]), first_name_value=1
)
_WEEKDAY = _FieldSpec("day-of-week", 0, 7, 4, 6, tuple(n[:3].lower() for n in WEEKDAY_NAMES))
_FIELDS_5: Final = (_MINUTE, _HOUR, _DAY, _MONTH, _WEEKDAY)
_FIELDS_6: Final = (_SECOND, _MINUTE, _HOUR, _DAY, _MONTH, _WEEKDAY)

_ASCII_SPACE = re.compile(r"[ \t\n\r\f\v]+")
_DIGITS = re.compile(r"[0-9]+")
_HASHED = re.compile(r"h(?:\(([0-9]+)-([0-9]+)\))?(?:/([0-9]+))?")
_LAST_MINUS = re.compile(r"l-([^/]*)")
_NEAREST = re.compile(r"([0-9]+)w")
_NTH = re.compile(r"([0-9a-z]+)#(.*)")
_LAST_OF = re.compile(r"([0-9a-z]+)l")
_ORDINAL_WORDS: Final = ("", "first", "second", "third", "fourth", "fifth")


@dataclass(frozen=True, slots=True)
class DayRule:
    """Which dates match: the month, then day-of-month and day-of-week.

    The day fields combine as in cronie: when either field's text starts with `*`
    (or `?`), a date must match both (`both`); otherwise either. The extensions are
    values of their field like any other: `L` (last day), `L-n`, `LW` (last weekday),
    `nW` (weekday nearest day n) in day-of-month; `dL` (last weekday d) and `d#n`
    (n-th weekday d) in day-of-week.
    """

    months: frozenset[int]
    days: frozenset[int]  # plain day-of-month values
    last_offsets: frozenset[int]  # L is 0, L-n is n
    last_weekday: bool  # LW
    nearest: frozenset[int]  # nW
    weekdays: frozenset[int]  # plain day-of-week values, 0 = Sunday
    last_weekdays: frozenset[int]  # dL
    nth_weekdays: frozenset[tuple[int, int]]  # d#n as (d, n)
    both: bool
    _by_shape: dict[tuple[int, int], tuple[int, ...]] = field(
        default_factory=dict, compare=False, hash=False, repr=False
    )

    @property
    def all_days(self) -> bool:
        """Day-of-month matches every date (`*`, `1-31`, `*,5`)."""
        return len(self.days) == 31

    @property
    def all_weekdays(self) -> bool:
        """Day-of-week matches every date (`*`, `0-6`, `1-7`)."""
        return len(self.weekdays) == 7

    def days_in(self, year: int, month: int) -> tuple[int, ...]:
        """The matching days of one month, in order."""
        if month not in self.months:
            return ()
        first = date(year, month, 1).toordinal() % 7  # 0 = Sunday: ordinal 1 was a Monday
        return self.days_of_shape(first, calendar.monthrange(year, month)[1])

    def matches_date(self, day: date) -> bool:
        return day.day in self.days_in(day.year, day.month)

    def days_of_shape(self, first_weekday: int, length: int) -> tuple[int, ...]:
        """The matching days of a month whose 1st is `first_weekday` (0 = Sunday)."""
        key = (first_weekday, length)
        found = self._by_shape.get(key)
        if found is None:
            found = self._by_shape[key] = self._match_shape(first_weekday, length)
        return found

    def _match_shape(self, first_weekday: int, length: int) -> tuple[int, ...]:
        def weekday(day: int) -> int:
            return (first_weekday + day - 1) % 7

        special = {length - k for k in self.last_offsets}
        if self.last_weekday:
            last = weekday(length)
            special.add(length - 1 if last == 6 else length - 2 if last == 0 else length)
        for day in self.nearest:
            if day <= length:  # a day the month does not have has no nearest weekday
                special.add(nearest_weekday(day, weekday(day), length))
        found: list[int] = []
        for day in range(1, length + 1):
            day_of_week = weekday(day)
            by_day = day in self.days or day in special
            by_weekday = (
                day_of_week in self.weekdays
                or (day_of_week in self.last_weekdays and day > length - 7)
                or (day_of_week, (day + 6) // 7) in self.nth_weekdays
            )
            if (by_day and by_weekday) if self.both else (by_day or by_weekday):
                found.append(day)
        return tuple(found)


def nearest_weekday(day: int, day_of_week: int, length: int) -> int:
    """The Monday-to-Friday day nearest `day`, never leaving its month (Quartz's W)."""
    if day_of_week == 6:  # Saturday: the Friday before, or Monday the 3rd
        return day + 2 if day == 1 else day - 1
    if day_of_week == 0:  # Sunday: the Monday after, or the Friday before the end
        return day - 2 if day == length else day + 1
    return day


@dataclass(frozen=True, slots=True)
class CronFields:
    """A validated cron expression, expanded to the values each field allows."""

    seconds: tuple[int, ...]
    minutes: tuple[int, ...]
    hours: tuple[int, ...]
    day_rule: DayRule
    has_seconds: bool
    wildcard: bool  # minute or hour (6 fields: hour) starts with `*` or `H/`: the DST rule
    second_set: frozenset[int]
    minute_set: frozenset[int]
    hour_set: frozenset[int]

    @property
    def months(self) -> frozenset[int]:
        return self.day_rule.months

    @property
    def per_day(self) -> int:
        """Ticks on a matching day of 24 ordinary hours."""
        return len(self.hours) * len(self.minutes) * len(self.seconds)

    def matches_date(self, day: date) -> bool:
        return self.day_rule.matches_date(day)

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


# --- parsing ----------------------------------------------------------------------


@dataclass(slots=True)
class _Specials:
    """The extension values of the two day fields, collected while parsing."""

    last_offsets: set[int] = field(default_factory=set)
    last_weekday: bool = False
    nearest: set[int] = field(default_factory=set)
    last_weekdays: set[int] = field(default_factory=set)
    nth_weekdays: set[tuple[int, int]] = field(default_factory=set)


@dataclass(frozen=True, slots=True)
class _Reader:
    """One expression being read: where errors go, and the uid for H."""

    expression: str
    uid: str | None

    def bad(self, problem: str) -> ScheduleError:
        return _bad(self.expression, problem)


def parse_fields(expression: str, *, uid: str | None = None) -> CronFields:
    """Validate and expand `expression`; raise ScheduleError saying what is wrong."""
    text = expression.strip(" \t\n\r\f\v")
    if not text:
        raise _bad(expression, f"is empty: expected 5 fields ({_FIELD_LIST})")
    if text.startswith("@"):
        text = _macro(expression, text)
    tokens = _ASCII_SPACE.split(text)
    if len(tokens) not in (5, 6):
        raise _bad(
            expression,
            f"expected 5 fields ({_FIELD_LIST}) "
            f"or 6 with a leading seconds field, got {len(tokens)}",
        )
    reader = _Reader(expression, uid)
    specs = _FIELDS_6 if len(tokens) == 6 else _FIELDS_5
    specials = _Specials()
    values = [
        _parse_field(reader, spec, token, specials)
        for spec, token in zip(specs, tokens, strict=True)
    ]
    if len(tokens) == 5:
        values.insert(0, frozenset({0}))
        tokens.insert(0, "0")
    seconds, minutes, hours, days, months, weekdays = (tuple(sorted(v)) for v in values)
    lowered = [token.lower() for token in tokens]
    rule = DayRule(
        months=frozenset(months),
        days=frozenset(days),
        last_offsets=frozenset(specials.last_offsets),
        last_weekday=specials.last_weekday,
        nearest=frozenset(specials.nearest),
        weekdays=frozenset(v % 7 for v in weekdays),
        last_weekdays=frozenset(specials.last_weekdays),
        nth_weekdays=frozenset(specials.nth_weekdays),
        both=lowered[3].startswith(("*", "?")) or lowered[5].startswith(("*", "?")),
    )
    _check_possible(expression, rule, tokens[3], tokens[5])
    return CronFields(
        seconds=seconds,
        minutes=minutes,
        hours=hours,
        day_rule=rule,
        has_seconds=len(specs) == 6,
        # cronie's MIN_STAR | HR_STAR; 6-field expressions keep their own older rule, the
        # hour alone (cronie has no seconds field to follow).
        wildcard=any(
            lowered[i].startswith(("*", "h/")) for i in ((2,) if len(specs) == 6 else (1, 2))
        ),
        second_set=frozenset(seconds),
        minute_set=frozenset(minutes),
        hour_set=frozenset(hours),
    )


def _bad(expression: str, problem: str) -> ScheduleError:
    return ScheduleError("schedule", printable(expression), problem)


def _macro(expression: str, text: str) -> str:
    lowered = text.lower()
    macro = MACROS.get(lowered)
    if macro is not None:
        return macro
    if lowered == "@reboot":
        raise _bad(
            expression,
            f"@reboot is not supported: a Kubernetes schedule has no boot to run at; "
            f"write 5 fields ({_FIELD_LIST})",
        )
    if lowered.split()[0] == "@every":
        raise _bad(
            expression,
            "@every is not supported: write the interval as a step of the minute, hour or "
            'second field, e.g. "*/5 * * * *"',
        )
    known = ", ".join(MACROS)
    problem = f'unknown macro "{printable(text)}" (known: {known}; or 5 fields: {_FIELD_LIST})'
    raise _bad(expression, problem)


def _parse_field(
    reader: _Reader, spec: _FieldSpec, token: str, specials: _Specials
) -> frozenset[int]:
    """The plain values of one field; day-field extensions go to `specials`."""
    lowered = token.lower()
    if lowered.startswith("h"):
        return _hashed(reader, spec, token)
    if lowered == "?":
        if spec not in (_DAY, _WEEKDAY):
            raise reader.bad(f"{spec.name} field '?': '?' is only allowed in the day fields")
        return frozenset(range(spec.low, spec.high + 1))
    values: set[int] = set()
    for item in lowered.split(","):
        values.update(_parse_item(reader, spec, token, item, specials))
    return frozenset(values)


def _parse_item(
    reader: _Reader, spec: _FieldSpec, token: str, item: str, specials: _Specials
) -> range:
    """One list item: `*`, `a`, `a-b`, each with an optional `/step`, or an extension."""
    if not item:
        raise reader.bad(f"{spec.name} field {_quoted(token)} has an empty list item")
    if item.startswith("h"):
        raise reader.bad(f"{spec.name} field {_quoted(token)}: H must be the whole field")
    if item.startswith("r") or "~" in item:
        raise reader.bad(
            f"{spec.name} field {_quoted(token)}: R (random) is not supported; "
            "H gives a spread that stays put"
        )
    if "?" in item:
        raise reader.bad(f"{spec.name} field {_quoted(token)}: '?' must be the whole field")
    if spec is _DAY and _day_special(reader, token, item, specials):
        return range(0)
    if spec is _WEEKDAY and _weekday_special(reader, token, item, specials):
        return range(0)
    base, slash, step_text = item.partition("/")
    step = _step(reader, spec, step_text) if slash else 1
    if base == "*":
        return range(spec.low, spec.high + 1, step)
    first_text, dash, last_text = base.partition("-")
    first = _value(reader, spec, token, first_text)
    if dash:
        last = _value(reader, spec, token, last_text)
        if spec is _WEEKDAY and last == 0 and first > 0:
            last = 7  # `sat-sun`, `fri-0`: a day-of-week range ending on Sunday ends at 7
        if first > last:
            raise reader.bad(f"{spec.name} range {base} is reversed")
    elif slash:  # `a/n`, an extension: from a to the end of the field (Saturday for days)
        last = 6 if spec is _WEEKDAY and first < 7 else spec.high
    else:
        last = first
    return range(first, last + 1, step)


def _step(reader: _Reader, spec: _FieldSpec, text: str) -> int:
    if not (_DIGITS.fullmatch(text) and int(text[:9]) > 0):
        raise reader.bad(f"{spec.name} step {_quoted(text)} is not a positive whole number")
    return min(int(text[:9]), _TOO_BIG)


def _value(reader: _Reader, spec: _FieldSpec, token: str, text: str) -> int:
    """One number or name of a field, checked against the field's range."""
    if _DIGITS.fullmatch(text):
        if len(text) > 6 or not spec.low <= int(text) <= spec.high:
            shown = text if len(text) <= 12 else text[:12] + "..."
            raise reader.bad(f"{spec.name} {shown} is out of range {spec.low}-{spec.high}")
        return int(text)
    if text in spec.names:
        return spec.names.index(text) + spec.first_name_value
    if not text:
        raise reader.bad(f"{spec.name} field {_quoted(token)} is not understood")
    if spec is _DAY and "#" in text:
        raise reader.bad(
            f"day-of-month {_quoted(text.upper())}: # belongs in day-of-week, as in 1#2"
        )
    if spec is _WEEKDAY and "w" in text:
        raise reader.bad(
            f"day-of-week {_quoted(text.upper())}: W belongs in day-of-month, as in 15W"
        )
    if spec in (_DAY, _WEEKDAY) and any(mark in text for mark in "lw#"):
        raise reader.bad(
            f"{spec.name} {_quoted(text.upper())} cannot be part of a range or take a step"
        )
    kind = "a number or a name" if spec.names else "a number"
    if any(mark in text for mark in "lw#"):
        kind += "; L, W and # are only allowed in the day fields"
    raise reader.bad(f"{spec.name} value {_quoted(text)} is not {kind}")


def _day_special(reader: _Reader, token: str, item: str, specials: _Specials) -> bool:
    """Read `L`, `L-n`, `LW` or `nW` into `specials`; False if `item` is none of them."""
    if item == "l":
        specials.last_offsets.add(0)
    elif item == "lw":
        specials.last_weekday = True
    elif (minus := _LAST_MINUS.fullmatch(item)) is not None:
        offset = minus.group(1)
        if not (_DIGITS.fullmatch(offset) and len(offset) <= 2 and int(offset) <= 30):
            raise reader.bad(
                f"day-of-month {_quoted(item.upper())} is out of range: L-n takes n from 0 to 30"
            )
        specials.last_offsets.add(int(offset))
    elif (nearest := _NEAREST.fullmatch(item)) is not None:
        specials.nearest.add(_value(reader, _DAY, token, nearest.group(1)))
    elif "w" in item and "/" not in item and "-" not in item and "," not in item:
        raise reader.bad(
            f"day-of-month {_quoted(item.upper())}: W follows one day, as in 15W (or LW for the "
            "last weekday of the month)"
        )
    elif "w" in item and "/" not in item:
        raise reader.bad(f"day-of-month {_quoted(item.upper())}: W takes one day, not a range")
    else:
        return False
    return True


def _weekday_special(reader: _Reader, token: str, item: str, specials: _Specials) -> bool:
    """Read `dL` or `d#n` into `specials`; False if `item` is neither."""
    if item == "l":
        raise reader.bad(
            "day-of-week L needs a weekday before it, as in 5L (the last Friday of the month)"
        )
    if (nth := _NTH.fullmatch(item)) is not None:
        weekday = _value(reader, _WEEKDAY, token, nth.group(1))
        number = nth.group(2)
        if not (_DIGITS.fullmatch(number) and len(number) <= 2 and 1 <= int(number) <= 5):
            raise reader.bad(
                f"day-of-week {_quoted(item.upper())}: the week after # must be 1 to 5, "
                f"not {_quoted(number)}"
            )
        specials.nth_weekdays.add((weekday % 7, int(number)))
        return True
    if (last := _LAST_OF.fullmatch(item)) is not None:
        specials.last_weekdays.add(_value(reader, _WEEKDAY, token, last.group(1)) % 7)
        return True
    if "#" in item:
        raise reader.bad(f"day-of-week {_quoted(item.upper())}: # takes one weekday, as in 1#2")
    return False


def _hashed(reader: _Reader, spec: _FieldSpec, token: str) -> frozenset[int]:
    """`H`, `H/n`, `H(a-b)`, `H(a-b)/n`: values picked by the uid, exactly as croniter 7.

    croniter: crc = crc32(uid) & 0xFFFFFFFF; a pick from [begin, end] is
    ((crc >> field index) % (end - begin + 1)) + begin; `H/n` picks its start in
    [begin, min(begin + n - 1, end)] and steps by n to `end`.
    """
    lowered = token.lower()
    hashed = _HASHED.fullmatch(lowered)
    if hashed is None:
        where = "the whole field" if "," in lowered else "H, H/n, H(a-b) or H(a-b)/n"
        raise reader.bad(f"{spec.name} field {_quoted(token)} is not understood: H must be {where}")
    if reader.uid is None:
        raise reader.bad("H fields need the schedule's uid to choose their values")
    begin, end = spec.low, spec.hash_high
    if hashed.group(1) is not None:
        begin = _value(reader, spec, token, hashed.group(1))
        end = _value(reader, spec, token, hashed.group(2))
        if begin >= end:
            raise reader.bad(f"{spec.name} range H({begin}-{end}) is empty")
    crc = zlib.crc32(reader.uid.encode("utf-8", "surrogateescape")) & 0xFFFFFFFF

    def pick(low: int, high: int) -> int:
        return ((crc >> spec.hash_index) % (high - low + 1)) + low

    if hashed.group(3) is None:
        return frozenset({pick(begin, end)})
    step = _step(reader, spec, hashed.group(3))
    start = pick(begin, min(begin + step - 1, end))
    return frozenset(range(start, end + 1, step))


def _check_possible(expression: str, rule: DayRule, day_token: str, weekday_token: str) -> None:
    """Reject day fields that no date of the allowed months matches, e.g. `0 0 30 2 *`.

    Every (weekday of the 1st, length) a month can have occurs in the Gregorian
    400-year cycle, so a schedule that passes has a matching date within it.
    """
    for month in rule.months:
        lengths = (28, 29) if month == 2 else (calendar.monthrange(2001, month)[1],)
        if any(rule.days_of_shape(first, n) for first in range(7) for n in lengths):
            return
    month_text = join_words((MONTH_NAMES[m] for m in sorted(rule.months)), "or")
    plain = not (rule.last_offsets or rule.nearest or rule.last_weekday)
    if rule.both and rule.all_weekdays and plain:
        days = sorted(rule.days)
        day_text = f"day {days[0]}" if len(days) == 1 else f"days {join_words(map(str, days))}"
        verb = "occurs" if len(days) == 1 else "occur"
        raise _bad(expression, f"{day_text} never {verb} in {month_text}")
    where = "of any month" if len(rule.months) == 12 else f"in {month_text}"
    raise _bad(
        expression,
        f"day-of-month {_quoted(day_token)} and day-of-week {_quoted(weekday_token)} "
        f"match no day {where}",
    )


def join_words(words: Iterable[str], last: str = "and") -> str:
    items = list(words)
    if len(items) <= 1:
        return "".join(items)
    return f"{', '.join(items[:-1])} {last} {items[-1]}"


def ordinal_word(number: int) -> str:
    """ "second", "third" up to "fifth", then "6th", "21st"."""
    if number < len(_ORDINAL_WORDS):
        return _ORDINAL_WORDS[number]
    if 10 <= number % 100 <= 20:
        return f"{number}th"
    return f"{number}{ {1: 'st', 2: 'nd', 3: 'rd'}.get(number % 10, 'th') }"
