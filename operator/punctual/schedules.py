"""Schedule math: from a cron expression, or a one-shot instant, to UTC ticks.

Why it exists: every decision Punctual makes starts with "which ticks does this
schedule have between these two instants?". This module answers that question and
only that one. It parses and validates expressions (croniter underneath), applies
the time zone and the daylight-saving rule, spreads `H` fields and jitter by the
schedule's uid, counts ticks without walking them, and explains an expression in
one sentence.

What it must never do: read the clock, talk to the API server, report bad user
input any other way than by raising `ScheduleError`, or loop without a bound.

The rules it implements (see DESIGN.md, "Semantics to get right"):

* 5 fields (minute hour day-of-month month day-of-week), or 6 with a leading
  seconds field; the macros @yearly @annually @monthly @weekly @daily @midnight
  @hourly; `?` for "any" in the day fields; `L` (last day) in day-of-month; `H`,
  `H/n`, `H(a-b)` and `H(a-b)/n` hashed by the schedule's uid. `R` (random), `#`
  (nth weekday) and `W` (nearest weekday) are rejected: they are either not
  deterministic or not covered by the tick counter and its tests.
* Day-of-month and day-of-week: when both are restricted (neither covers every
  value) a day matches if either matches; otherwise both must match (Vixie cron).
* Daylight saving, as in Vixie cron/cronie. The hour field is "periodic" when it
  starts with `*` or `H/` (`*`, `*/2`, `H/3`) and "fixed" otherwise (`2`, `1-5`,
  `H`). On a fall-back day a fixed-hour schedule runs once, at the first
  occurrence of a repeated wall time; a periodic one runs at every real
  occurrence (both 01:30s). A wall time that does not exist on a spring-forward
  day runs once at the first instant after the gap when the hour is fixed, and is
  skipped when the hour is periodic.
* Ticks are whole-second UTC instants.

What croniter 7.0.0 does on those days (pinned by tests/unit/test_croniter_findings.py,
in America/New_York, Europe/Berlin and Australia/Lord_Howe): a spring-forward gap
is right for a `*` hour (skipped) and for a fixed hour (moved to the end of the
gap), but a stepped hour such as `*/2` is moved as if it were fixed; on fall-back
days it runs fixed-hour schedules at both occurrences; and across a 30-minute
fall-back (Lord_Howe) it can skip real second occurrences of a `*` hour. So
croniter only parses and expands expressions here (names, ranges, steps, `H`);
ticks come from a per-day model of our own: each local day cut where the UTC
offset changes, with the expanded fields as sorted lists. The same model counts
ticks arithmetically, so a year of every-second ticks costs a few milliseconds, and
next/previous tick cost a few microseconds on an ordinary day. Ticks exist from
1970 to the year 9000; outside that window there are none (Job names use Unix
seconds, and datetime stops at the year 9999).

Known limit: a local day is assumed to hold at most a few offset changes and not to
be re-entered after midnight by a fall-back that crosses midnight. tzdata has had
no such transition since 2011 (Canadian zones used 00:01 changes until 2010); on
such historical days, counting can be off for periodic-hour schedules.
"""

from __future__ import annotations

import calendar
import hashlib
import re
from bisect import bisect_left, bisect_right
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta, tzinfo
from functools import lru_cache
from typing import Final, Literal, Protocol
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

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

_EPOCH: Final = datetime(1970, 1, 1, tzinfo=UTC)
_NAIVE_EPOCH: Final = _EPOCH.replace(tzinfo=None)
_EPOCH_ORDINAL: Final = date(1970, 1, 1).toordinal()
_ONE_SECOND: Final = timedelta(seconds=1)
_DAY_SECONDS: Final = 86400
# How far next_tick/prev_tick look: 29 February can be 8 years from the last one.
_SEARCH_DAYS: Final = 9 * 366
# Ticks exist in [1970-01-01, 9000-01-01): no negative Unix seconds in Job names,
# and room below datetime's year 9999 for zone offsets and day arithmetic.
_FIRST_ORDINAL: Final = _EPOCH_ORDINAL - 2
_LAST_ORDINAL: Final = date(9000, 1, 1).toordinal() - 1
_END_SECOND: Final = (_LAST_ORDINAL + 1 - _EPOCH_ORDINAL) * 86400
# Days whose ticks one CronTicks keeps cut into pieces (a few kB at most).
_MAX_CACHED_DAYS: Final = 64


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


class TickSource(Protocol):
    """What the planner needs from a schedule: ticks as aware UTC datetimes."""

    @property
    def zone(self) -> ZoneInfo: ...

    def next_tick(self, after: datetime) -> datetime | None:
        """The first tick strictly after `after`, or None if there is none."""
        ...

    def prev_tick(self, at_or_before: datetime) -> datetime | None:
        """The last tick at or before `at_or_before`, or None if there is none."""
        ...

    def count_ticks(self, after: datetime, until: datetime) -> int:
        """How many ticks lie in (after, until], computed rather than walked."""
        ...


def load_zone(name: str) -> ZoneInfo:
    """The IANA zone called `name`, or ScheduleError naming spec.timeZone."""
    try:
        return _load_zone(name)
    except (ZoneInfoNotFoundError, ValueError, OSError) as exc:
        raise ScheduleError("timeZone", name, f'unknown time zone "{name}"') from exc


@lru_cache(maxsize=1024)
def _load_zone(name: str) -> ZoneInfo:
    return ZoneInfo(name)


@lru_cache(maxsize=16384)
def uses_hash(expression: str) -> bool:
    """Whether the expression has `H` fields, which need the schedule's uid."""
    return any(
        part.startswith("h") for token in expression.lower().split() for part in token.split(",")
    )


def jitter_offset(uid: str, jitter_seconds: int) -> timedelta:
    """The fixed delay of every tick of one schedule: sha256(uid) % (jitter + 1) s.

    Deterministic per schedule, so a tick always maps to the same fire instant.
    """
    if jitter_seconds <= 0:
        return timedelta(0)
    digest = hashlib.sha256(f"punctual/jitter/{uid}".encode()).digest()
    return timedelta(seconds=int.from_bytes(digest[:8], "big") % (jitter_seconds + 1))


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

    def matches_time(self, hour: int, minute: int, second: int) -> bool:
        return hour in self.hour_set and minute in self.minute_set and second in self.second_set

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
    day_text = f"day {days[0]}" if len(days) == 1 else f"days {_join(map(str, days))}"
    verb = "occurs" if len(days) == 1 else "occur"
    month_text = _join((MONTH_NAMES[m] for m in sorted(fields.months)), "or")
    raise _bad(expression, f"{day_text} never {verb} in {month_text}")


def _join(words: Iterable[str], last: str = "and") -> str:
    items = list(words)
    if len(items) <= 1:
        return "".join(items)
    return f"{', '.join(items[:-1])} {last} {items[-1]}"


# --- tick sources -----------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Piece:
    """Some ticks of one local day: times of day [first, last] at instant t + shift,
    or, when `point` is set, the single tick at that instant (the end of a gap)."""

    first: int
    last: int
    shift: int
    point: int | None = None


class CronTicks:
    """The ticks of one cron expression in one time zone.

    All three questions (next, previous, how many) are answered from the same
    per-day model: the local day cut where the UTC offset changes, and the
    expanded fields as sorted lists. croniter parses and expands the expression;
    its own tick search is not used, because on daylight-saving days it departs
    from the Vixie rule (see the module docstring and test_croniter_findings.py).
    """

    def __init__(self, expression: str, fields: CronFields, zone: ZoneInfo) -> None:
        self.expression = expression
        self.fields = fields
        self._zone = zone
        self._day_pieces: dict[int, tuple[_Piece, ...]] = {}

    @property
    def zone(self) -> ZoneInfo:
        return self._zone

    def __repr__(self) -> str:
        return f"CronTicks({self.expression!r}, zone={self._zone.key!r})"

    def next_tick(self, after: datetime) -> datetime | None:
        low = max(_seconds(after), -1)
        if low >= _END_SECOND:
            return None
        # Ticks of earlier days are at or before this day's first instant.
        for ordinal in self._days(_local_date(self._zone, low).toordinal(), 1):
            for piece in self._pieces(ordinal):
                found = _first_in(self.fields, piece, low)
                if found is not None:
                    return _EPOCH + timedelta(seconds=found)
        return None

    def prev_tick(self, at_or_before: datetime) -> datetime | None:
        high = min(_seconds(at_or_before), _END_SECOND - 1)
        if high < 0:
            return None
        # Ticks of later days are after the end of this one.
        for ordinal in self._days(_local_date(self._zone, high).toordinal(), -1):
            for piece in reversed(self._pieces(ordinal)):
                found = _last_in(self.fields, piece, high)
                if found is not None:
                    return _EPOCH + timedelta(seconds=found) if found >= 0 else None
        return None

    def ticks(self, after: datetime, until: datetime) -> Iterator[datetime]:
        """Walk the ticks in (after, until], oldest first. Only for bounded spans."""
        tick = self.next_tick(after)
        while tick is not None and tick <= until:
            yield tick
            tick = self.next_tick(tick)

    def count_ticks(self, after: datetime, until: datetime) -> int:
        low, high = max(_seconds(after), -1), min(_seconds(until), _END_SECOND - 1)
        if high <= low:
            return 0
        first = _local_date(self._zone, low).toordinal() - 1
        last = _local_date(self._zone, high).toordinal() + 1
        fields = self.fields
        total = 0
        for ordinal in self._days(first, 1, last):
            day = _day_model(self._zone, ordinal)
            if day.end <= low or day.start > high:
                continue
            if day.ordinary and low < day.start and day.end <= high:
                total += fields.per_day
                continue
            for piece in self._pieces(ordinal):
                if piece.point is not None:
                    total += low < piece.point <= high
                else:
                    total += fields.count_between(
                        max(piece.first, low + 1 - piece.shift),
                        min(piece.last, high - piece.shift),
                    )
        return total

    def _days(self, ordinal: int, direction: int, stop: int | None = None) -> Iterator[int]:
        """The matching local days from `ordinal` on, skipping months wholesale.

        Without `stop`, the walk ends after _SEARCH_DAYS days: no valid expression
        goes that long without a tick (29 February can be 8 years apart).
        """
        fields = self.fields
        limit = ordinal + direction * _SEARCH_DAYS if stop is None else stop
        limit = min(max(limit, _FIRST_ORDINAL), _LAST_ORDINAL)
        ordinal = min(max(ordinal, _FIRST_ORDINAL), _LAST_ORDINAL)
        while (ordinal <= limit) if direction > 0 else (ordinal >= limit):
            day = date.fromordinal(ordinal)
            if day.month not in fields.months:
                if direction > 0:
                    ordinal += calendar.monthrange(day.year, day.month)[1] - day.day + 1
                else:
                    ordinal -= day.day
                continue
            if fields.matches_date(day):
                yield ordinal
            ordinal += direction

    def _pieces(self, ordinal: int) -> tuple[_Piece, ...]:
        """The ticks of a matching local day, in time order, under the DST rule."""
        pieces = self._day_pieces.get(ordinal)
        if pieces is None:
            if len(self._day_pieces) >= _MAX_CACHED_DAYS:
                self._day_pieces.clear()
            pieces = self._day_pieces[ordinal] = tuple(self._cut_day(ordinal))
        return pieces

    def _cut_day(self, ordinal: int) -> list[_Piece]:
        day = _day_model(self._zone, ordinal)
        fields = self.fields
        pieces: list[_Piece] = []
        covered = -1  # the latest wall second of the day that has occurred so far
        for begin, end, offset in day.segments:
            first_wall = begin + offset - day.midnight
            last_wall = end - 1 + offset - day.midnight
            if first_wall > covered + 1 and self._gap_tick(covered + 1, first_wall):
                pieces.append(_Piece(0, -1, 0, point=begin))
            first = first_wall if fields.periodic_hour else max(first_wall, covered + 1)
            first, last = max(first, 0), min(last_wall, _DAY_SECONDS - 1)
            if first <= last:
                pieces.append(_Piece(first, last, day.midnight - offset))
            covered = max(covered, last_wall)
        # A gap that runs past midnight: its tick is the next day's first instant,
        # unless the next day has a tick there itself.
        if (
            covered < _DAY_SECONDS - 1
            and self._gap_tick(covered + 1, _DAY_SECONDS)
            and not self._starts_with_tick(ordinal + 1)
        ):
            pieces.append(_Piece(0, -1, 0, point=day.end))
        return pieces

    def _gap_tick(self, first_missing: int, first_after: int) -> bool:
        """Whether wall times [first_missing, first_after) that do not exist make a tick.

        They do for a fixed hour, at the first instant after the gap, unless a tick
        at `first_after` itself already lands on that instant.
        """
        fields = self.fields
        if fields.periodic_hour:
            return False
        if fields.count_between(first_missing, first_after - 1) == 0:
            return False
        return fields.count_between(first_after, first_after) == 0

    def _starts_with_tick(self, ordinal: int) -> bool:
        if not self.fields.matches_date(date.fromordinal(ordinal)):
            return False
        day = _day_model(self._zone, ordinal)
        if not day.segments:
            return False
        begin, _end, offset = day.segments[0]
        first_wall = begin + offset - day.midnight
        return (
            self._gap_tick(0, first_wall) or self.fields.count_between(first_wall, first_wall) > 0
        )


def _first_in(fields: CronFields, piece: _Piece, low: int) -> int | None:
    """The first tick of `piece` strictly after instant `low`."""
    if piece.point is not None:
        return piece.point if piece.point > low else None
    found = fields.first_time_from(max(piece.first, low + 1 - piece.shift))
    return None if found is None or found > piece.last else found + piece.shift


def _last_in(fields: CronFields, piece: _Piece, high: int) -> int | None:
    """The last tick of `piece` at or before instant `high`."""
    if piece.point is not None:
        return piece.point if piece.point <= high else None
    found = fields.last_time_until(min(piece.last, high - piece.shift))
    return None if found is None or found < piece.first else found + piece.shift


@dataclass(frozen=True, slots=True)
class OneShot:
    """The single tick of `spec.runAt`, truncated to the whole second."""

    instant: datetime
    zone: ZoneInfo

    @classmethod
    def at(cls, instant: datetime, zone: ZoneInfo) -> OneShot:
        if instant.utcoffset() is None:
            raise ScheduleError("runAt", instant.isoformat(), "needs a UTC offset (RFC 3339)")
        whole = _EPOCH + timedelta(seconds=_seconds(instant))
        return cls(whole, zone)

    def next_tick(self, after: datetime) -> datetime | None:
        return self.instant if self.instant > after else None

    def prev_tick(self, at_or_before: datetime) -> datetime | None:
        return self.instant if self.instant <= at_or_before else None

    def count_ticks(self, after: datetime, until: datetime) -> int:
        return 1 if after < self.instant <= until else 0


def parse_schedule(expression: str, *, time_zone: str = "UTC", uid: str | None = None) -> CronTicks:
    """The ticks of `expression` in `time_zone`; ScheduleError if either is unusable."""
    zone = load_zone(time_zone)
    return CronTicks(expression, parse_fields(expression, uid=uid), zone)


def format_local(instant: datetime, zone: tzinfo) -> str:
    """RFC 3339 with the zone's offset at that instant: 2026-11-02T01:30:00-05:00."""
    return instant.astimezone(zone).isoformat()


# --- time-zone arithmetic on whole epoch seconds ----------------------------------


@dataclass(frozen=True, slots=True)
class _Day:
    """One local date: its instants [start, end) cut where the UTC offset changes."""

    midnight: int  # the local wall clock at 00:00 of the day, in "wall epoch seconds"
    start: int  # the first instant whose local date is this day
    end: int  # the first instant of the next day
    segments: tuple[tuple[int, int, int], ...]  # (begin, end, offset) per constant offset

    @property
    def ordinary(self) -> bool:
        """Exactly 24 hours at one offset, so every time of day occurs once."""
        if len(self.segments) != 1:
            return False
        begin, end, offset = self.segments[0]
        return begin + offset == self.midnight and end + offset == self.midnight + _DAY_SECONDS


@lru_cache(maxsize=16384)
def _day_model(zone: ZoneInfo, ordinal: int) -> _Day:
    midnight = (ordinal - _EPOCH_ORDINAL) * _DAY_SECONDS
    start = _day_start(zone, ordinal)
    offset = _offset(zone, start)
    if (
        start + offset == midnight
        and _offset(zone, start + _DAY_SECONDS - 1) == offset
        and _offset(zone, start + _DAY_SECONDS) == offset
    ):
        # The usual day: 24 hours at one offset (a change and its undoing within
        # one day would go unseen; tzdata has none).
        end = start + _DAY_SECONDS
        _remember_start(zone, ordinal + 1, end)
        return _Day(midnight, start, end, ((start, end, offset),))
    end = _day_start(zone, ordinal + 1)
    segments: list[tuple[int, int, int]] = []
    begin = start
    while begin < end and len(segments) < 8:
        offset = _offset(zone, begin)
        if _offset(zone, end - 1) == offset:
            segments.append((begin, end, offset))
            break
        change = _next_change(zone, begin, end - 1)
        segments.append((begin, change, offset))
        begin = change
    return _Day(midnight, start, end, tuple(segments))


# First instants of local days, shared by a day and the one before it.
_STARTS: dict[tuple[ZoneInfo, int], int] = {}
_MAX_STARTS: Final = 65536


def _day_start(zone: ZoneInfo, ordinal: int) -> int:
    """The first instant whose local date is the day `ordinal`."""
    start = _STARTS.get((zone, ordinal))
    if start is None:
        start = _first_instant_at(zone, (ordinal - _EPOCH_ORDINAL) * _DAY_SECONDS)
        _remember_start(zone, ordinal, start)
    return start


def _remember_start(zone: ZoneInfo, ordinal: int, start: int) -> None:
    if len(_STARTS) >= _MAX_STARTS:
        _STARTS.clear()
    _STARTS[(zone, ordinal)] = start


def _seconds(instant: datetime) -> int:
    """Whole seconds since the epoch, rounded down."""
    return (instant - _EPOCH) // _ONE_SECOND


def _offset(zone: ZoneInfo, instant: int) -> int:
    offset = datetime.fromtimestamp(instant, zone).utcoffset()
    return 0 if offset is None else offset // _ONE_SECOND


def _local_date(zone: ZoneInfo, instant: int) -> date:
    return datetime.fromtimestamp(instant, zone).date()


def _next_change(zone: ZoneInfo, low: int, high: int) -> int:
    """The first instant in (low, high] whose offset differs from low's (one change)."""
    base = _offset(zone, low)
    while high - low > 1:
        middle = (low + high) // 2
        if _offset(zone, middle) == base:
            low = middle
        else:
            high = middle
    return high


def _first_instant_at(zone: ZoneInfo, wall: int) -> int:
    """The first instant whose local wall clock is at or after `wall`."""
    naive = _NAIVE_EPOCH + timedelta(seconds=wall)
    first = _seconds(naive.replace(tzinfo=zone))
    if first + _offset(zone, first) == wall:
        return first
    # The wall time falls in a gap: fold=0 and fold=1 bracket the change.
    other = _seconds(naive.replace(tzinfo=zone, fold=1))
    return _next_change(zone, min(first, other), max(first, other))


def _repeat_start(zone: ZoneInfo, second_occurrence: datetime) -> datetime:
    """The instant the clock fell back, for a tick in the repeated wall range."""
    local = second_occurrence.astimezone(zone)
    first = local.replace(fold=0).astimezone(UTC)
    change = _next_change(zone, _seconds(first), _seconds(second_occurrence))
    return _EPOCH + timedelta(seconds=change)


def _repeat_end(zone: ZoneInfo, second_occurrence: datetime) -> datetime:
    """The first instant after the repeated wall range that holds this tick."""
    local = second_occurrence.astimezone(zone)
    first_offset = local.replace(fold=0).utcoffset()
    second_offset = local.utcoffset()
    assert first_offset is not None and second_offset is not None
    return _repeat_start(zone, second_occurrence) + (first_offset - second_offset)


# --- explaining -------------------------------------------------------------------


def explain(expression: str, *, time_zone: str = "UTC", uid: str | None = None) -> str:
    """One English sentence for a schedule: "At 02:00, every day, in Europe/Berlin."."""
    ticks = parse_schedule(expression, time_zone=time_zone, uid=uid)
    return describe(ticks.fields, ticks.zone.key)


def describe(fields: CronFields, zone_name: str = "UTC") -> str:
    """The sentence for already expanded fields (`explain` without the parsing)."""
    parts: list[str] = []
    few_times = fields.per_day <= 4
    if few_times:
        show_seconds = fields.has_seconds and fields.seconds != (0,)
        times = [
            f"{h:02d}:{m:02d}:{s:02d}" if show_seconds else f"{h:02d}:{m:02d}"
            for h in fields.hours
            for m in fields.minutes
            for s in fields.seconds
        ]
        parts.append(f"at {_join(times)}")
    else:
        parts.extend(_frequency_parts(fields))
    days = _day_part(fields)
    if days or few_times:
        parts.append(days or "every day")
    if len(fields.months) < 12:
        parts.append(f"in {_values_text(sorted(fields.months), MONTH_NAMES)}")
    if zone_name != "UTC":
        parts.append(f"in {zone_name}")
    sentence = ", ".join(parts)
    return sentence[0].upper() + sentence[1:] + "."


def _frequency_parts(fields: CronFields) -> list[str]:
    minutes, hours = fields.minutes, fields.hours
    if fields.has_seconds and fields.seconds != (0,):
        parts = [_cycle_text(fields.seconds, 59, "second")]
        if len(minutes) < 60:
            label = "minute" if len(minutes) == 1 else "minutes"
            parts.append(f"during {label} {_values_text(minutes)}")
    else:
        parts = [_cycle_text(minutes, 59, "minute")]
        if len(minutes) == 1 and len(hours) == 24:
            parts[0] += " of every hour"
    if len(hours) == 24:
        return parts
    progression = _progression(hours, 23)
    runs = _runs(hours)
    if progression is not None and progression[0] == 0:
        parts.append(f"in every {_ordinal(progression[1])} hour")
    elif len(runs) == 1:
        parts.append(f"between {runs[0][0]:02d}:00 and {runs[0][1]:02d}:59")
    else:
        parts.append(f"during hours {_values_text(hours)}")
    return parts


def _cycle_text(values: tuple[int, ...], high: int, unit: str) -> str:
    if len(values) == high + 1:
        return f"every {unit}"
    if len(values) == 1:
        return f"at {unit} {values[0]}"
    progression = _progression(values, high)
    if progression is not None:
        start, step = progression
        every = f"every {step} {unit}s"
        return every if start == 0 else f"{every} from {unit} {start}"
    return f"at {unit}s {_values_text(values)}"


def _day_part(fields: CronFields) -> str:
    day_text = weekday_text = ""
    if fields.days_restricted:
        days = sorted(fields.days)
        label = "day" if len(days) == 1 else "days"
        if days and fields.last_day:
            day_text = f"on {label} {_values_text(days)} and the last day of the month"
        elif days:
            day_text = f"on {label} {_values_text(days)} of the month"
        else:
            day_text = "on the last day of the month"
    if fields.weekdays_restricted:
        weekday_text = f"on {_values_text(sorted(fields.weekdays), WEEKDAY_NAMES)}"
    if day_text and weekday_text:
        return f"{day_text} or {weekday_text}"
    return day_text or weekday_text


def _values_text(values: tuple[int, ...] | list[int], names: tuple[str, ...] = ()) -> str:
    """ "1, 3 and 5", "Monday through Friday": runs of three or more become ranges."""

    def name(value: int) -> str:
        return names[value] if names else str(value)

    items: list[str] = []
    for first, last in _runs(values):
        if last - first >= 2:
            items.append(f"{name(first)} through {name(last)}")
        else:
            items.extend(name(v) for v in range(first, last + 1))
    return _join(items)


def _runs(values: tuple[int, ...] | list[int]) -> list[tuple[int, int]]:
    runs: list[tuple[int, int]] = []
    for value in values:
        if runs and value == runs[-1][1] + 1:
            runs[-1] = (runs[-1][0], value)
        else:
            runs.append((value, value))
    return runs


def _progression(values: tuple[int, ...], high: int) -> tuple[int, int] | None:
    """(start, step) when values are exactly range(start, high + 1, step), start < step."""
    if len(values) < 2:
        return None
    start, step = values[0], values[1] - values[0]
    if start >= step or tuple(range(start, high + 1, step)) != values:
        return None
    return start, step


def _ordinal(number: int) -> str:
    if 10 <= number % 100 <= 20:
        return f"{number}th"
    return f"{number}{ {1: 'st', 2: 'nd', 3: 'rd'}.get(number % 10, 'th') }"
