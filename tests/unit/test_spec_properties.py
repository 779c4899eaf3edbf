"""Combined ticks against a brute-force reference that walks every second.

The reference knows nothing of bitsets, day signatures or skipping: for each second of
a span it asks "does an entry tick here?" (the entries' own ticks, which their tests
check against cronie's rules, and `epoch + offset + k*every` for intervals), "is it
excluded?" (the wall clock, read with zoneinfo, against the exclusion's fields; the
local date against the excluded dates; the ranges) and "is it inside the window?".
Spans are drawn around daylight-saving changes in zones with 1-hour and 30-minute
shifts, so the union, the exclusions and the clock changes meet.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from zoneinfo import ZoneInfo

from hypothesis import given, settings
from hypothesis import strategies as st

from punctual.core.schedules import (
    CombinedTicks,
    CronFields,
    CronTicks,
    IntervalTicks,
    parse_fields,
    parse_schedule,
)

S = timedelta(seconds=1)
EPOCH = datetime(1970, 1, 1, tzinfo=UTC)

CHANGES = {
    "UTC": datetime(2026, 11, 25, 0, 0, tzinfo=UTC),
    "Europe/Berlin": datetime(2026, 10, 25, 0, 0, tzinfo=UTC),
    "America/New_York": datetime(2026, 3, 8, 6, 0, tzinfo=UTC),
    "Australia/Lord_Howe": datetime(2026, 4, 4, 14, 0, tzinfo=UTC),
}
CRONS = [
    "*/7 * * * * *",
    "0 */5 * * * *",
    "30 1 * * *",
    "* * * * *",
    "*/10 2 * * *",
    "15 1-3 * * *",
    "0 0 * * *",
    "*/20 * 1 * * *",
]
WALL = ["* 1 * * *", "*/2 * * * * *", "30 1 * * *", "0-29 2 * * *", "* * * * 0", "5 * * * *"]


@dataclass(frozen=True)
class Reference:
    """The spec as the brute force reads it."""

    entries: list[CronTicks | IntervalTicks]
    wall: list[CronFields]
    dates: list[date]
    ranges: list[tuple[datetime, datetime]]
    start: datetime | None
    end: datetime | None
    zone: ZoneInfo


@st.composite
def specs(draw: st.DrawFn) -> tuple[CombinedTicks, Reference, datetime, datetime]:
    zone_name = draw(st.sampled_from(sorted(CHANGES)))
    zone = ZoneInfo(zone_name)
    center = CHANGES[zone_name] + timedelta(minutes=draw(st.integers(-36 * 60, 36 * 60)))
    after = center - timedelta(seconds=draw(st.integers(0, 3 * 3600)))
    until = center + timedelta(seconds=draw(st.integers(0, 3 * 3600)))
    entries: list[CronTicks | IntervalTicks] = []
    for _ in range(draw(st.integers(1, 3))):
        if draw(st.booleans()):
            entries.append(parse_schedule(draw(st.sampled_from(CRONS)), time_zone=zone_name))
        else:
            every = draw(st.sampled_from([1, 7, 60, 97, 5400, 3601]))
            entries.append(IntervalTicks(every, draw(st.integers(0, every - 1))))
    wall = draw(st.lists(st.sampled_from(WALL), max_size=2))
    local = center.astimezone(zone).date()
    dates = draw(st.lists(st.sampled_from([local - timedelta(days=1), local]), max_size=1))
    ranges: list[tuple[datetime, datetime]] = []
    if draw(st.booleans()):
        begin = center + timedelta(seconds=draw(st.integers(-4 * 3600, 4 * 3600)))
        ranges.append((begin, begin + timedelta(seconds=draw(st.integers(1, 3 * 3600)))))
    start: datetime | None = None
    end: datetime | None = None
    if draw(st.booleans()):
        start = center + timedelta(seconds=draw(st.integers(-4 * 3600, 0)), microseconds=500)
    if draw(st.booleans()):
        end = center + timedelta(seconds=draw(st.integers(0, 4 * 3600)))
    combined = CombinedTicks(
        entries,
        zone=zone,
        wall=[parse_fields(w) for w in wall],
        dates=dates,
        ranges=ranges,
        start=start,
        end=end,
    )
    reference = Reference(entries, [parse_fields(w) for w in wall], dates, ranges, start, end, zone)
    return combined, reference, after.replace(microsecond=0), until.replace(microsecond=0)


def brute_force(reference: Reference, after: datetime, until: datetime) -> list[datetime]:
    """Every tick in (after, until], by looking at every second."""
    entries = reference.entries
    cron_ticks: set[datetime] = set()
    for entry in entries:
        if not isinstance(entry, IntervalTicks):
            cron_ticks.update(entry.ticks(after - S, until))
    found = []
    instant = after + S
    while instant <= until:
        seconds = int((instant - EPOCH).total_seconds())
        hit = instant in cron_ticks or any(
            isinstance(e, IntervalTicks) and (seconds - e.offset) % e.every == 0 for e in entries
        )
        if hit and _kept(instant, reference):
            found.append(instant)
        instant += S
    return found


def _kept(instant: datetime, spec: Reference) -> bool:
    if spec.start is not None and instant < spec.start:
        return False
    if spec.end is not None and instant >= spec.end:
        return False
    if any(a <= instant < b for a, b in spec.ranges):
        return False
    local = instant.astimezone(spec.zone)
    if local.date() in spec.dates:
        return False
    for fields in spec.wall:
        second_ok = not fields.has_seconds or local.second in fields.second_set
        if (
            fields.matches_date(local.date())
            and local.hour in fields.hour_set
            and local.minute in fields.minute_set
            and second_ok
        ):
            return False
    return True


@settings(max_examples=80, deadline=None)
@given(specs())
def test_combined_ticks_match_a_walk_of_every_second(
    case: tuple[CombinedTicks, Reference, datetime, datetime],
) -> None:
    combined, reference, after, until = case
    expected = brute_force(reference, after, until)
    assert combined.count_ticks(after, until) == len(expected)
    following = combined.next_tick(after)
    if expected:
        assert following == expected[0]
        assert combined.prev_tick(until) == expected[-1]
    else:
        assert following is None or following > until
        preceding = combined.prev_tick(until)
        assert preceding is None or preceding <= after
    # Walking from tick to tick finds the same ticks.
    walked: list[datetime] = []
    tick = following
    while tick is not None and tick <= until and len(walked) <= len(expected):
        walked.append(tick)
        tick = combined.next_tick(tick)
    assert walked == expected


def test_dates_are_whole_local_days() -> None:
    zone = ZoneInfo("Europe/Berlin")
    every_minute = parse_schedule("* * * * *", time_zone="Europe/Berlin")
    combined = CombinedTicks([every_minute], zone=zone, dates=[date(2026, 10, 25)])
    # 25 October 2026 in Berlin is 25 hours long (fall back): all 1500 of its minutes go.
    day = (datetime(2026, 10, 24, 22, tzinfo=UTC), datetime(2026, 10, 25, 23, tzinfo=UTC))
    assert combined.count_ticks(day[0] - S, day[1] - S) == 0
    assert every_minute.count_ticks(day[0] - S, day[1] - S) == 25 * 60
    assert combined.next_tick(day[0]) == day[1]
