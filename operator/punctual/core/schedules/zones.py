"""Time-zone arithmetic on whole epoch seconds: local days cut where the offset changes.

Why it exists: ticks are computed per local day, and a day on which the UTC offset
changes (daylight saving, a zone's change of standard time) is not 24 hours of one
offset. This module models each local date as its instants [start, end) in segments
of constant offset, cached, so that the tick math above it never asks zoneinfo twice.

What it must never do: know of cron fields, ticks or the CronSchedule resource.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta, tzinfo
from functools import lru_cache
from typing import Final
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from punctual.core.schedules.parsing import ScheduleError, printable
from punctual.core.times import EPOCH

_NAIVE_EPOCH: Final = EPOCH.replace(tzinfo=None)
EPOCH_ORDINAL: Final = date(1970, 1, 1).toordinal()
_ONE_SECOND: Final = timedelta(seconds=1)
DAY_SECONDS: Final = 86400


def load_zone(name: str) -> ZoneInfo:
    """The IANA zone called `name`, or ScheduleError naming spec.timeZone."""
    try:
        return _load_zone(name)
    except (ZoneInfoNotFoundError, ValueError, OSError, TypeError) as exc:
        shown = printable(name)
        raise ScheduleError("timeZone", shown, f'unknown time zone "{shown}"') from exc


@lru_cache(maxsize=1024)
def _load_zone(name: str) -> ZoneInfo:
    return ZoneInfo(name)


@lru_cache(maxsize=1024)
def changes_clocks(zone: ZoneInfo) -> bool:
    """Whether the zone's UTC offset differs between winter and summer in some year
    from 1990 to 2040 (a fixed window: this only chooses what `explain` says)."""
    offsets = {
        _offset(zone, seconds_of(datetime(year, month, 1, tzinfo=UTC)))
        for year in range(1990, 2041)
        for month in (1, 7)
    }
    return len(offsets) > 1


def format_local(instant: datetime, zone: tzinfo) -> str:
    """RFC 3339 with the zone's offset at that instant: 2026-11-02T01:30:00-05:00."""
    return instant.astimezone(zone).isoformat()


@dataclass(frozen=True, slots=True)
class Day:
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
        return begin + offset == self.midnight and end + offset == self.midnight + DAY_SECONDS


@lru_cache(maxsize=16384)
def day_model(zone: ZoneInfo, ordinal: int) -> Day:
    midnight = (ordinal - EPOCH_ORDINAL) * DAY_SECONDS
    start = _day_start(zone, ordinal)
    offset = _offset(zone, start)
    if (
        start + offset == midnight
        and _offset(zone, start + DAY_SECONDS - 1) == offset
        and _offset(zone, start + DAY_SECONDS) == offset
    ):
        # The usual day: 24 hours at one offset (a change and its undoing within
        # one day would go unseen; tzdata has none).
        end = start + DAY_SECONDS
        _remember_start(zone, ordinal + 1, end)
        return Day(midnight, start, end, ((start, end, offset),))
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
    return Day(midnight, start, end, tuple(segments))


# First instants of local days, shared by a day and the one before it.
_STARTS: dict[tuple[ZoneInfo, int], int] = {}
_MAX_STARTS: Final = 65536


def _day_start(zone: ZoneInfo, ordinal: int) -> int:
    """The first instant whose local date is the day `ordinal`."""
    start = _STARTS.get((zone, ordinal))
    if start is None:
        start = _first_instant_at(zone, (ordinal - EPOCH_ORDINAL) * DAY_SECONDS)
        _remember_start(zone, ordinal, start)
    return start


def _remember_start(zone: ZoneInfo, ordinal: int, start: int) -> None:
    if len(_STARTS) >= _MAX_STARTS:
        _STARTS.clear()
    _STARTS[(zone, ordinal)] = start


def seconds_of(instant: datetime) -> int:
    """Whole seconds since the epoch, rounded down."""
    return (instant - EPOCH) // _ONE_SECOND


def _offset(zone: ZoneInfo, instant: int) -> int:
    offset = datetime.fromtimestamp(instant, zone).utcoffset()
    return 0 if offset is None else offset // _ONE_SECOND


def local_date(zone: ZoneInfo, instant: int) -> date:
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
    first = seconds_of(naive.replace(tzinfo=zone))
    if first + _offset(zone, first) == wall:
        return first
    # The wall time falls in a gap: fold=0 and fold=1 bracket the change.
    other = seconds_of(naive.replace(tzinfo=zone, fold=1))
    return _next_change(zone, min(first, other), max(first, other))


def clear_caches() -> None:
    """Forget cached zones, day models and day starts."""
    _load_zone.cache_clear()
    changes_clocks.cache_clear()
    day_model.cache_clear()
    _STARTS.clear()
