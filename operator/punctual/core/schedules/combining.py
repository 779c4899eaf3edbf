"""Combined tick sources: several entries, intervals, exclusions and a window, as one.

Why it exists: a schedule may hold several cron expressions and fixed intervals
(`every` with an `offset`), minus exclusions (cron expressions matched on the local
wall clock, whole local dates, ranges of instants), inside a window [start, end).
The planner asks the combined set the same three questions as a single expression
(next, previous, how many), and one instant reached by two entries is one tick.

How it stays arithmetic: next and previous take the nearest entry tick and, only when
an exclusion removes it, look at that local day as a bitset (bit i: instant start + i;
Python ints make union, exclusion and popcount one operation each), then jump to the
next day or past the excluded range. Counting goes day by day: a whole ordinary day
(24 hours at one offset) costs a dictionary lookup, keyed by which entries and
exclusions match its date and where the intervals fall in it; other days (a clock
change, the ends of the span, a partly excluded day) are one bitset each. A year of
every-second ticks with exclusions is counted in a few milliseconds.

Rules:
* An interval ticks at Unix epoch + offset + k * every (whole seconds, UTC): time
  zones and daylight saving never move it.
* A cron exclusion matches a tick whose local wall-clock time (in the schedule's zone)
  its fields match; a 5-field exclusion matches every second of its minutes
  (`* * 25 12 *` removes the whole of 25 December, whatever the entries' seconds).
  It is matched on the wall clock, not by the daylight-saving rule of ticks: on a
  fall-back night `30 1 * * *` removes both 01:30s.
* Excluded dates are whole local days; excluded ranges are [from, to); the window
  removes every instant before `start` and from `end` on.
* An exclusion may be read in a zone of its own (`zoned_wall`, `zoned_dates`: a
  Calendar's entries, in the Calendar's zone): its dates are that zone's days and its
  cron fields match that zone's wall clock, whatever the schedule's zone.

What it must never do: read the clock, know the CronSchedule resource, or loop without
a bound: a search skips at most MAX_SKIPPED_DAYS excluded days in a row (and no more
than that many days of time), then says there is no further tick.
"""

from __future__ import annotations

import re
from bisect import bisect_right
from collections.abc import Hashable, Sequence
from dataclasses import dataclass
from datetime import date, datetime, timedelta
from fractions import Fraction
from functools import lru_cache
from typing import Final, Protocol
from zoneinfo import ZoneInfo

from punctual.core.schedules.parsing import CronFields, ScheduleError
from punctual.core.schedules.ticks import END_SECOND, REMEMBERED, CronTicks, shifted, wall_bits
from punctual.core.schedules.zones import DAY_SECONDS, EPOCH_ORDINAL, day_model, seconds_of
from punctual.core.times import EPOCH

# How many wholly excluded days (or excluded ranges) one next/previous search skips
# before it gives up: about eleven years of an excluded daily schedule.
MAX_SKIPPED_DAYS: Final = 4000
# And how far in time it skips days the wall exclusions empty, from the start or the
# last excluded range: the same eleven years for sparser entries too. (Counted in days
# only, a yearly entry whose every tick an exclusion removes was searched for 4000
# years: half a second of the event loop per search, every other schedule waiting.)
_SKIPPED_SPAN: Final = MAX_SKIPPED_DAYS * 86_400
# Whole ordinary days whose count one CombinedTicks remembers, by signature.
_MAX_SIGNATURES: Final = 4096
_NEVER: Final = 1 << 62  # an instant after every tick

_DURATION_PART: Final = re.compile(r"([0-9]+(?:\.[0-9]*)?|\.[0-9]+)(ns|us|µs|ms|s|m|h)")
_UNITS: Final = {
    "ns": Fraction(1, 10**9),
    "us": Fraction(1, 10**6),
    "µs": Fraction(1, 10**6),
    "ms": Fraction(1, 1000),
    "s": Fraction(1),
    "m": Fraction(60),
    "h": Fraction(3600),
}
# The longest interval: longer ones have no tick between 1970 and 9000 but the first.
MAX_EVERY_SECONDS: Final = 100 * 366 * DAY_SECONDS


def parse_duration(text: str, field: str) -> int:
    """A Go duration ("90m", "1h30m", "1.5h") as whole seconds; ScheduleError if it is
    not one, or not a whole number of seconds (ticks are whole seconds)."""
    position, total = 0, Fraction(0)
    for match in _DURATION_PART.finditer(text):
        if match.start() != position:
            break
        total += Fraction(match.group(1)) * _UNITS[match.group(2)]
        position = match.end()
    if position != len(text) or not text:
        raise ScheduleError(field, text, f'"{text}" is not a duration such as 90m or 1h30m')
    if total.denominator != 1:
        raise ScheduleError(
            field, text, f"{text} is not a whole number of seconds: ticks are whole seconds"
        )
    return int(total)


class Source(Protocol):
    """What CombinedTicks needs of an entry, in whole Unix seconds."""

    def next_second(self, after: int) -> int | None: ...

    def prev_second(self, at_or_before: int) -> int | None: ...

    def count_seconds(self, low: int, high: int) -> int:
        """How many ticks lie in [low, high]."""
        ...

    def tick_bits(self, low: int, high: int) -> int: ...


@dataclass(frozen=True, slots=True)
class IntervalTicks:
    """Ticks at Unix epoch + offset + k * every, in whole seconds, from 1970 to 9000."""

    every: int
    offset: int

    @classmethod
    def of(cls, every: str, offset: str | None, field: str) -> IntervalTicks:
        seconds = parse_duration(every, f"{field}.every")
        if seconds < 1:
            raise ScheduleError(f"{field}.every", every, "must be at least 1s")
        if seconds > MAX_EVERY_SECONDS:
            raise ScheduleError(f"{field}.every", every, "must be at most 100 years (878400h)")
        phase = 0 if offset is None else parse_duration(offset, f"{field}.offset")
        if phase >= seconds:
            raise ScheduleError(
                f"{field}.offset", offset or "", f"must be less than every ({every})"
            )
        return cls(seconds, phase)

    def next_second(self, after: int) -> int | None:
        tick = self.offset + ((max(after, -1) - self.offset) // self.every + 1) * self.every
        return tick if tick < END_SECOND else None

    def prev_second(self, at_or_before: int) -> int | None:
        high = min(at_or_before, END_SECOND - 1)
        tick = self.offset + ((high - self.offset) // self.every) * self.every
        return tick if tick >= 0 else None

    def count_seconds(self, low: int, high: int) -> int:
        low, high = max(low, 0), min(high, END_SECOND - 1)
        if high < low:
            return 0
        return (high - self.offset) // self.every - (low - 1 - self.offset) // self.every

    def tick_bits(self, low: int, high: int) -> int:
        first = self.next_second(low - 1)
        if first is None or first >= high:
            return 0
        count = (high - 1 - first) // self.every + 1
        if count == 1:
            return 1 << (first - low)
        pattern = ((1 << (self.every * count)) - 1) // ((1 << self.every) - 1)
        return pattern << (first - low)

    def phase_in(self, start: int) -> int:
        """Where in a day starting at instant `start` the first tick falls (mod every)."""
        return (self.offset - start) % self.every


class CronSource:
    """A CronTicks in whole seconds (the Source protocol)."""

    def __init__(self, ticks: CronTicks) -> None:
        self.ticks = ticks
        self.fields = ticks.fields

    def next_second(self, after: int) -> int | None:
        found = self.ticks.next_tick(EPOCH + timedelta(seconds=after))
        return None if found is None else seconds_of(found)

    def prev_second(self, at_or_before: int) -> int | None:
        found = self.ticks.prev_tick(EPOCH + timedelta(seconds=at_or_before))
        return None if found is None else seconds_of(found)

    def count_seconds(self, low: int, high: int) -> int:
        return self.ticks.count_ticks(
            EPOCH + timedelta(seconds=low - 1), EPOCH + timedelta(seconds=high)
        )

    def tick_bits(self, low: int, high: int) -> int:
        return self.ticks.tick_bits(low, high)


@dataclass(frozen=True, slots=True)
class WallExclusion:
    """A cron exclusion: removes ticks whose local wall-clock time its fields match (in
    `zone`, or in the schedule's zone when None)."""

    fields: CronFields
    zone: ZoneInfo | None = None

    def excludes(self, zone: ZoneInfo, tick: int) -> bool:
        """Whether it removes instant `tick` (`zone`: the schedule's)."""
        zone = self.zone or zone
        ordinal = ordinal_of(zone, tick)
        day = day_model(zone, ordinal)
        offset = next(o for b, e, o in day.segments if b <= tick < e)
        return self.matches(date.fromordinal(ordinal), tick + offset - day.midnight)

    def bits_between(self, zone: ZoneInfo, ordinal: int, low: int, high: int) -> int:
        """The excluded instants of [low, high), within the schedule's local day
        `ordinal` in `zone`, as bits from low: in its own zone, day by day of that zone."""
        if self.zone is None or self.zone == zone:
            return self.day_bits(zone, ordinal, low, high)
        bits, own = 0, ordinal_of(self.zone, low)
        while True:
            day = day_model(self.zone, own)
            begin, end = max(low, day.start), min(high, day.end)
            if begin < end:
                bits |= self.day_bits(self.zone, own, begin, end) << (begin - low)
            if day.end >= high:
                return bits
            own += 1

    def signature(self, zone: ZoneInfo, start: int, end: int) -> Hashable | None:
        """What decides its bits over the ordinary day [start, end) of `zone`: which of its
        own days it matches and how its wall clock lies on the day; None when its own zone
        changes offset in the day (then the day is not counted by signature)."""
        if self.zone is None or self.zone == zone:
            return self.fields.matches_date(date.fromordinal(ordinal_of(zone, start)))
        first, last = ordinal_of(self.zone, start), ordinal_of(self.zone, end - 1)
        days = [day_model(self.zone, o) for o in range(first, last + 1)]
        if not all(d.ordinary for d in days):
            return None
        wall = start + days[0].segments[0][2] - days[0].midnight  # where the day begins
        return (
            wall,
            tuple(self.fields.matches_date(date.fromordinal(o)) for o in range(first, last + 1)),
        )

    def matches(self, day: date, second_of_day: int) -> bool:
        hour, rest = divmod(second_of_day, 3600)
        minute, second = divmod(rest, 60)
        fields = self.fields
        return (
            fields.matches_date(day)
            and hour in fields.hour_set
            and minute in fields.minute_set
            and (not fields.has_seconds or second in fields.second_set)
        )

    def day_bits(self, zone: ZoneInfo, ordinal: int, low: int, high: int) -> int:
        """The excluded instants of local day `ordinal` within [low, high), as bits from low."""
        if not self.fields.matches_date(date.fromordinal(ordinal)):
            return 0
        day = day_model(zone, ordinal)
        wall = wall_bits(self.fields, whole_minutes=True)
        bits = 0
        for begin, end, offset in day.segments:
            begin, end = max(begin, low), min(end, high)
            if begin >= end:
                continue
            first_wall = begin + offset - day.midnight
            span = (wall >> first_wall) & ((1 << (end - begin)) - 1)
            bits |= shifted(span, begin - low)
        return bits


class CombinedTicks:
    """The union of entries, minus exclusions, inside a window (see the module)."""

    def __init__(
        self,
        entries: Sequence[CronTicks | IntervalTicks],
        *,
        zone: ZoneInfo,
        wall: Sequence[CronFields] = (),
        dates: Sequence[date] = (),
        ranges: Sequence[tuple[datetime, datetime]] = (),
        zoned_wall: Sequence[tuple[CronFields, ZoneInfo]] = (),
        zoned_dates: Sequence[tuple[date, ZoneInfo]] = (),
        start: datetime | None = None,
        end: datetime | None = None,
    ) -> None:
        self._zone = zone
        self.entries: tuple[CronSource | IntervalTicks, ...] = tuple(
            CronSource(e) if isinstance(e, CronTicks) else e for e in entries
        )
        self.wall = (
            *(WallExclusion(f) for f in wall),
            *(WallExclusion(f, z) for f, z in zoned_wall),
        )
        spans = [(_ceil_seconds(a), _ceil_seconds(b)) for a, b in ranges]
        for day, day_zone in [*((d, zone) for d in dates), *zoned_dates]:
            model = day_model(day_zone, day.toordinal())
            spans.append((model.start, model.end))
        if start is not None:
            spans.append((-_NEVER, _ceil_seconds(start)))
        if end is not None:
            spans.append((_ceil_seconds(end), _NEVER))
        self._cuts = _merge(spans)  # excluded [begin, end) instants, sorted, disjoint
        self._cut_starts = [begin for begin, _ in self._cuts]
        self._counts: dict[tuple[object, ...], int] = {}

    @property
    def zone(self) -> ZoneInfo:
        return self._zone

    # --- the TickSource questions, in datetimes ------------------------------------

    def next_tick(self, after: datetime) -> datetime | None:
        found = self.next_second(seconds_of(after))
        return None if found is None else EPOCH + timedelta(seconds=found)

    def prev_tick(self, at_or_before: datetime) -> datetime | None:
        found = self.prev_second(seconds_of(at_or_before))
        return None if found is None else EPOCH + timedelta(seconds=found)

    def count_ticks(self, after: datetime, until: datetime) -> int:
        return self.count_seconds(seconds_of(after) + 1, seconds_of(until))

    # --- the same in whole seconds -------------------------------------------------

    def next_second(self, after: int) -> int | None:
        return _next_answer(self, after)

    def _after(self, after: int) -> int | None:
        horizon = after + _SKIPPED_SPAN
        for _ in range(MAX_SKIPPED_DAYS):
            found = [t for t in (e.next_second(after) for e in self.entries) if t is not None]
            if not found:
                return None
            tick = min(found)
            cut = self._cut_at(tick)
            if cut is not None:
                if cut[1] >= _NEVER:
                    return None
                after = cut[1] - 1
                horizon = after + _SKIPPED_SPAN
                continue
            if not self._wall_excludes(tick):
                return tick
            day = day_model(self._zone, self._ordinal(tick))
            bits = self._bits(tick, day.end)
            if bits:
                return tick + (bits & -bits).bit_length() - 1
            after = day.end - 1
            if after > horizon:
                return None
        return None

    def prev_second(self, at_or_before: int) -> int | None:
        return _previous_answer(self, at_or_before)

    def _before(self, at_or_before: int) -> int | None:
        horizon = at_or_before - _SKIPPED_SPAN
        for _ in range(MAX_SKIPPED_DAYS):
            found = [
                t for t in (e.prev_second(at_or_before) for e in self.entries) if t is not None
            ]
            if not found:
                return None
            tick = max(found)
            cut = self._cut_at(tick)
            if cut is not None:
                if cut[0] <= -_NEVER:
                    return None
                at_or_before = cut[0] - 1
                horizon = at_or_before - _SKIPPED_SPAN
                continue
            if not self._wall_excludes(tick):
                return tick
            day = day_model(self._zone, self._ordinal(tick))
            bits = self._bits(day.start, tick + 1)
            if bits:
                return day.start + bits.bit_length() - 1
            at_or_before = day.start - 1
            if at_or_before < horizon:
                return None
        return None

    def count_seconds(self, low: int, high: int) -> int:
        """How many ticks lie in instants [low, high]."""
        low, high = max(low, 0), min(high, END_SECOND - 1)
        if len(self.entries) == 1 and not self.wall:
            return self._count_one(self.entries[0], low, high)
        total = 0
        while low <= high:
            cut = self._cut_at(low)
            if cut is not None:
                low = cut[1]
                continue
            day = day_model(self._zone, self._ordinal(low))
            stop = min(high + 1, day.end, self._next_cut_start(low))
            if low == day.start and stop == day.end:
                total += self._whole_day(day.start, self._ordinal(low))
            else:
                total += self._bits(low, stop).bit_count()
            low = stop
        return total

    # --- the parts ------------------------------------------------------------------

    def _count_one(self, entry: CronSource | IntervalTicks, low: int, high: int) -> int:
        """One entry, no wall exclusions: its count, minus its counts in the cuts."""
        if high < low:
            return 0
        total = entry.count_seconds(low, high)
        first = max(bisect_right(self._cut_starts, low) - 1, 0)
        for begin, end in self._cuts[first:]:
            if begin > high:
                break
            total -= entry.count_seconds(max(begin, low), min(end - 1, high))
        return total

    def _whole_day(self, start: int, ordinal: int) -> int:
        """The count of a whole day that no cut touches: cached for ordinary days."""
        day = day_model(self._zone, ordinal)
        if not (day.ordinary and day_model(self._zone, ordinal - 1).ordinary):
            return self._bits(day.start, day.end).bit_count()
        on = date.fromordinal(ordinal)
        walls = tuple(w.signature(self._zone, day.start, day.end) for w in self.wall)
        if None in walls:  # an exclusion's own zone changes its clocks in this day
            return self._bits(day.start, day.end).bit_count()
        signature = (
            tuple(
                e.phase_in(start) if isinstance(e, IntervalTicks) else e.fields.matches_date(on)
                for e in self.entries
            ),
            walls,
        )
        count = self._counts.get(signature)
        if count is None:
            if len(self._counts) >= _MAX_SIGNATURES:
                self._counts.clear()
            count = self._counts[signature] = self._bits(day.start, day.end).bit_count()
        return count

    def _bits(self, low: int, high: int) -> int:
        """The ticks in [low, high) (within one local day) as bits from low."""
        bits = 0
        for entry in self.entries:
            bits |= entry.tick_bits(low, high)
        if bits and self.wall:
            ordinal = self._ordinal(low)
            for exclusion in self.wall:
                bits &= ~exclusion.bits_between(self._zone, ordinal, low, high)
        if bits:
            for begin, end in self._cuts:
                if begin < high and end > low:
                    mask = (1 << (min(end, high) - max(begin, low))) - 1
                    bits &= ~(mask << (max(begin, low) - low))
        return bits

    def _wall_excludes(self, tick: int) -> bool:
        return any(w.excludes(self._zone, tick) for w in self.wall)

    def _ordinal(self, instant: int) -> int:
        """The local date of an instant, as an ordinal."""
        return ordinal_of(self._zone, instant)

    def _cut_at(self, instant: int) -> tuple[int, int] | None:
        index = bisect_right(self._cut_starts, instant) - 1
        if index >= 0 and self._cuts[index][1] > instant:
            return self._cuts[index]
        return None

    def _next_cut_start(self, instant: int) -> int:
        index = bisect_right(self._cut_starts, instant)
        return self._cuts[index][0] if index < len(self._cuts) else _NEVER


def ordinal_of(zone: ZoneInfo, instant: int) -> int:
    """The local date of an instant in `zone`, as an ordinal."""
    guess = EPOCH_ORDINAL + instant // DAY_SECONDS
    for ordinal in (guess, guess - 1, guess + 1, guess - 2, guess + 2):
        day = day_model(zone, ordinal)
        if day.start <= instant < day.end:
            return ordinal
    raise AssertionError(f"no local day holds instant {instant}")  # pragma: no cover


def _ceil_seconds(instant: datetime) -> int:
    """Whole seconds since the epoch, rounded up: the first whole-second tick at or after."""
    return -((EPOCH - instant) // timedelta(seconds=1))


def _merge(spans: list[tuple[int, int]]) -> list[tuple[int, int]]:
    merged: list[tuple[int, int]] = []
    for begin, end in sorted(s for s in spans if s[0] < s[1]):
        if merged and begin <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(merged[-1][1], end))
        else:
            merged.append((begin, end))
    return merged


@lru_cache(maxsize=REMEMBERED)  # answers kept as CronTicks keeps them (see REMEMBERED)
def _next_answer(ticks: CombinedTicks, after: int) -> int | None:
    return ticks._after(after)


@lru_cache(maxsize=REMEMBERED)
def _previous_answer(ticks: CombinedTicks, at_or_before: int) -> int | None:
    return ticks._before(at_or_before)
