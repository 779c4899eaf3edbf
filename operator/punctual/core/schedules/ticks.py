"""Tick sources: the ticks of a cron expression, or of one instant, in a time zone.

Why it exists: every decision Punctual makes starts with "which ticks does this
schedule have between these two instants?". `CronTicks` answers next, previous and
how many from one per-day model (see `punctual.core.schedules` for the rules), without
walking: a year of every-second ticks is counted in milliseconds.

What it must never do: read the clock, or loop without a bound.
"""

from __future__ import annotations

import calendar
import hashlib
from bisect import bisect_left, bisect_right
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import date, datetime, timedelta
from functools import lru_cache
from typing import Final, Protocol
from zoneinfo import ZoneInfo

from punctual.core.schedules.parsing import CronFields, ScheduleError, parse_fields
from punctual.core.schedules.zones import (
    DAY_SECONDS,
    EPOCH_ORDINAL,
    day_model,
    load_zone,
    local_date,
    seconds_of,
)
from punctual.core.times import EPOCH

# How far next_tick/prev_tick look: the Gregorian calendar repeats every 400 years
# (146 097 days), so a day rule that matches some date matches one within that; a
# rare one (29 February on a Sunday) can be 40 years from the last.
_SEARCH_DAYS: Final = 146097 + 366
# Ticks exist in [1970-01-01, 9000-01-01): no negative Unix seconds in Job names,
# and room below datetime's year 9999 for zone offsets and day arithmetic.
_FIRST_ORDINAL: Final = EPOCH_ORDINAL - 2
_LAST_ORDINAL: Final = date(9000, 1, 1).toordinal() - 1
_END_SECOND: Final = (_LAST_ORDINAL + 1 - EPOCH_ORDINAL) * 86400
END_SECOND: Final = _END_SECOND  # the first instant (Unix seconds) with no ticks
# Days whose ticks one CronTicks keeps cut into pieces (a few kB at most).
_MAX_CACHED_DAYS: Final = 64


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


def jitter_offset(uid: str, jitter_seconds: int) -> timedelta:
    """The fixed delay of every tick of one schedule: sha256(uid) % (jitter + 1) s.

    Deterministic per schedule, so a tick always maps to the same fire instant.
    """
    if jitter_seconds <= 0:
        return timedelta(0)
    digest = hashlib.sha256(f"punctual/jitter/{uid}".encode()).digest()
    return timedelta(seconds=int.from_bytes(digest[:8], "big") % (jitter_seconds + 1))


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
    per-day model: the local day cut where the UTC offset changes, the expanded
    time fields as sorted lists, and the matching days of each month from the day
    rule. croniter's tick search is not used: on daylight-saving days it departs
    from cronie's rule (see the package docstring and test_croniter_findings.py).
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
        low = max(seconds_of(after), -1)
        if low >= _END_SECOND:
            return None
        found = _next_answer(self, low)
        return None if found is None else EPOCH + timedelta(seconds=found)

    def _after(self, low: int) -> int | None:
        # Ticks of earlier days are at or before this day's first instant.
        for ordinal in self._days(local_date(self._zone, low).toordinal(), 1):
            for piece in self._pieces(ordinal):
                found = _first_in(self.fields, piece, low)
                if found is not None:
                    return found
        return None

    def prev_tick(self, at_or_before: datetime) -> datetime | None:
        high = min(seconds_of(at_or_before), _END_SECOND - 1)
        if high < 0:
            return None
        found = _previous_answer(self, high)
        return None if found is None else EPOCH + timedelta(seconds=found)

    def _before(self, high: int) -> int | None:
        # Ticks of later days are after the end of this one.
        for ordinal in self._days(local_date(self._zone, high).toordinal(), -1):
            for piece in reversed(self._pieces(ordinal)):
                found = _last_in(self.fields, piece, high)
                if found is not None:
                    return found if found >= 0 else None
        return None

    def ticks(self, after: datetime, until: datetime) -> Iterator[datetime]:
        """Walk the ticks in (after, until], oldest first. Only for bounded spans."""
        tick = self.next_tick(after)
        while tick is not None and tick <= until:
            yield tick
            tick = self.next_tick(tick)

    def count_ticks(self, after: datetime, until: datetime) -> int:
        low, high = max(seconds_of(after), -1), min(seconds_of(until), _END_SECOND - 1)
        if high <= low:
            return 0
        first = local_date(self._zone, low).toordinal() - 1
        last = local_date(self._zone, high).toordinal() + 1
        fields = self.fields
        total = 0
        for ordinal in self._days(first, 1, last):
            day = day_model(self._zone, ordinal)
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

    def tick_bits(self, low: int, high: int) -> int:
        """The ticks in instants [low, high) as the bits of an int (bit i: instant low + i).

        For spans of about a day (`combining` counts unions day by day with it); the
        day before `low`'s is looked at too, for a gap tick that lands on midnight.
        """
        if high <= low:
            return 0
        bits = 0
        first = local_date(self._zone, max(low, 0)).toordinal() - 1
        last = local_date(self._zone, max(high - 1, 0)).toordinal()
        wall = wall_bits(self.fields)
        for ordinal in self._days(first, 1, last):
            day = day_model(self._zone, ordinal)
            if day.end < low or day.start >= high:
                continue
            for piece in self._pieces(ordinal):
                if piece.point is not None:
                    if low <= piece.point < high:
                        bits |= 1 << (piece.point - low)
                    continue
                span = (wall >> piece.first) & ((1 << (piece.last - piece.first + 1)) - 1)
                bits |= shifted(span, piece.first + piece.shift - low)
        return bits & ((1 << (high - low)) - 1)

    def _days(self, ordinal: int, direction: int, stop: int | None = None) -> Iterator[int]:
        """The matching local days from `ordinal` on (`stop` included), month by month.

        Each month's matching days come from the day rule's table for months of its
        shape (weekday of the 1st, length), so months without one cost a lookup.
        Without `stop`, the walk ends after _SEARCH_DAYS days: parsing refuses day
        fields that no month shape matches, and every shape occurs within 400 years.
        """
        rule = self.fields.day_rule
        limit = ordinal + direction * _SEARCH_DAYS if stop is None else stop
        limit = min(max(limit, _FIRST_ORDINAL), _LAST_ORDINAL)
        ordinal = min(max(ordinal, _FIRST_ORDINAL), _LAST_ORDINAL)
        while (ordinal <= limit) if direction > 0 else (ordinal >= limit):
            day = date.fromordinal(ordinal)
            matching = rule.days_in(day.year, day.month)
            base = ordinal - day.day  # the ordinal of day 0 of this month
            if direction > 0:
                for number in matching[bisect_left(matching, day.day) :]:
                    if base + number > limit:
                        return
                    yield base + number
                ordinal = base + calendar.monthrange(day.year, day.month)[1] + 1
            else:
                for number in reversed(matching[: bisect_right(matching, day.day)]):
                    if base + number < limit:
                        return
                    yield base + number
                ordinal = base

    def _pieces(self, ordinal: int) -> tuple[_Piece, ...]:
        """The ticks of a matching local day, in time order, under the DST rule."""
        pieces = self._day_pieces.get(ordinal)
        if pieces is None:
            if len(self._day_pieces) >= _MAX_CACHED_DAYS:
                self._day_pieces.clear()
            pieces = self._day_pieces[ordinal] = tuple(self._cut_day(ordinal))
        return pieces

    def _cut_day(self, ordinal: int) -> list[_Piece]:
        day = day_model(self._zone, ordinal)
        fields = self.fields
        pieces: list[_Piece] = []
        covered = -1  # the latest wall second of the day that has occurred so far
        for begin, end, offset in day.segments:
            first_wall = begin + offset - day.midnight
            last_wall = end - 1 + offset - day.midnight
            if first_wall > covered + 1 and self._gap_tick(covered + 1, first_wall):
                pieces.append(_Piece(0, -1, 0, point=begin))
            first = first_wall if fields.wildcard else max(first_wall, covered + 1)
            first, last = max(first, 0), min(last_wall, DAY_SECONDS - 1)
            if first <= last:
                pieces.append(_Piece(first, last, day.midnight - offset))
            covered = max(covered, last_wall)
        # A gap that runs past midnight: its tick is the next day's first instant,
        # unless the next day has a tick there itself.
        if (
            covered < DAY_SECONDS - 1
            and self._gap_tick(covered + 1, DAY_SECONDS)
            and not self._starts_with_tick(ordinal + 1)
        ):
            pieces.append(_Piece(0, -1, 0, point=day.end))
        return pieces

    def _gap_tick(self, first_missing: int, first_after: int) -> bool:
        """Whether wall times [first_missing, first_after) that do not exist make a tick.

        They do for a fixed schedule (not wildcard), once, at the first instant after
        the gap, unless a tick at `first_after` itself already lands on that instant.
        """
        fields = self.fields
        if fields.wildcard:
            return False
        if fields.count_between(first_missing, first_after - 1) == 0:
            return False
        return fields.count_between(first_after, first_after) == 0

    def _starts_with_tick(self, ordinal: int) -> bool:
        if not self.fields.matches_date(date.fromordinal(ordinal)):
            return False
        day = day_model(self._zone, ordinal)
        if not day.segments:
            return False
        begin, _end, offset = day.segments[0]
        first_wall = begin + offset - day.midnight
        return (
            self._gap_tick(0, first_wall) or self.fields.count_between(first_wall, first_wall) > 0
        )


def shifted(bits: int, by: int) -> int:
    """`bits` moved `by` places up (down when negative)."""
    return bits << by if by >= 0 else bits >> -by


_ALL_SECONDS: Final = tuple(range(60))
_WALL_BITS: dict[tuple[tuple[int, ...], ...], int] = {}


def wall_bits(fields: CronFields, *, whole_minutes: bool = False) -> int:
    """The times of day of `fields` as the bits of an int (bit s: second s of the day).

    With `whole_minutes`, a 5-field expression covers every second of its minutes
    (how an exclusion matches). Cached per set of times: 10 kB each.
    """
    every_second = whole_minutes and not fields.has_seconds
    key = (_ALL_SECONDS if every_second else fields.seconds, fields.minutes, fields.hours)
    bits = _WALL_BITS.get(key)
    if bits is None:
        seconds = sum(1 << s for s in key[0])
        hour = sum(seconds << (60 * m) for m in key[1])
        bits = sum(hour << (3600 * h) for h in key[2])
        if len(_WALL_BITS) >= 256:
            _WALL_BITS.clear()
        _WALL_BITS[key] = bits
    return bits


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
        whole = EPOCH + timedelta(seconds=seconds_of(instant))
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


# Answers kept, by tick source and whole second, for all sources together. One decision
# asks the same question two to four times (the plan, the claim window, the firing's
# previous tick) and walks the next five ticks for status.upcomingTicks, which the
# previous pass walked one tick back: in `bench/deciding_bench.py`'s minutely case 62 of
# 80 next-tick questions searched without them, 24 with them. Kept in one bounded cache
# (about 200 bytes an answer) rather than on each source, since `planning` keeps up to
# 20 000 sources alive for a fleet of `H` schedules.
REMEMBERED: Final = 4096


@lru_cache(maxsize=REMEMBERED)
def _next_answer(ticks: CronTicks, low: int) -> int | None:
    return ticks._after(low)


@lru_cache(maxsize=REMEMBERED)
def _previous_answer(ticks: CronTicks, high: int) -> int | None:
    return ticks._before(high)
