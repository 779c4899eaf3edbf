"""Daylight-saving days, as in cronie, in zones with different shifts.

Wildcard (the minute or the hour starts with `*`, or `H/`; cronie's MIN_STAR |
HR_STAR): every real occurrence; wall times in a gap are skipped.
Fixed (anything else; the seconds field never counts): once, at the first
occurrence, on a fall-back day; moved to the first instant after the gap on a
spring-forward day.

2026 changes used below (checked against zoneinfo):
  America/New_York     2026-03-08 02:00 EST -> 03:00 EDT;  2026-11-01 02:00 EDT -> 01:00 EST
  Europe/Berlin        2026-03-29 02:00 CET -> 03:00 CEST; 2026-10-25 03:00 CEST -> 02:00 CET
  Australia/Lord_Howe  2026-10-04 02:00 +10:30 -> 02:30 +11; 2026-04-05 02:00 +11 -> 01:30 +10:30
  America/Santiago     2026-09-06 00:00 -04 -> 01:00 -03;    2026-04-05 00:00 -03 -> 04-04 23:00 -04
  Pacific/Apia         2011-12-29 24:00 -10 -> 2011-12-31 00:00 +14 (30 December never happened)
"""

from __future__ import annotations

from datetime import datetime, timedelta

import pytest

from punctual.core.schedules import parse_schedule


def local(text: str) -> datetime:
    return datetime.fromisoformat(text)


def next_ticks(expression: str, zone: str, start: str, count: int) -> list[str]:
    ticks = parse_schedule(expression, time_zone=zone)
    found: list[str] = []
    tick: datetime | None = local(start)
    for _ in range(count):
        assert tick is not None
        tick = ticks.next_tick(tick)
        assert tick is not None
        found.append(tick.astimezone(ticks.zone).isoformat())
    return found


DST_CASES = [
    # --- fall back ----------------------------------------------------------------
    pytest.param(
        "30 1 * * *",
        "America/New_York",
        "2026-10-31T12:00:00-04:00",
        ["2026-11-01T01:30:00-04:00", "2026-11-02T01:30:00-05:00"],
        id="New York fall back, fixed hour: first 01:30 only",
    ),
    pytest.param(
        "30 * * * *",
        "America/New_York",
        "2026-11-01T00:00:00-04:00",
        [
            "2026-11-01T00:30:00-04:00",
            "2026-11-01T01:30:00-04:00",
            "2026-11-01T01:30:00-05:00",
            "2026-11-01T02:30:00-05:00",
        ],
        id="New York fall back, wildcard hour: both 01:30s",
    ),
    pytest.param(
        "*/20 */1 * * *",
        "America/New_York",
        "2026-11-01T00:50:00-04:00",
        [
            "2026-11-01T01:00:00-04:00",
            "2026-11-01T01:20:00-04:00",
            "2026-11-01T01:40:00-04:00",
            "2026-11-01T01:00:00-05:00",
            "2026-11-01T01:20:00-05:00",
            "2026-11-01T01:40:00-05:00",
            "2026-11-01T02:00:00-05:00",
        ],
        id="New York fall back, stepped hour: the repeated hour runs twice",
    ),
    pytest.param(
        "*/20 1 * * *",
        "America/New_York",
        "2026-11-01T00:50:00-04:00",
        [
            "2026-11-01T01:00:00-04:00",
            "2026-11-01T01:20:00-04:00",
            "2026-11-01T01:40:00-04:00",
            "2026-11-01T01:00:00-05:00",
            "2026-11-01T01:20:00-05:00",
            "2026-11-01T01:40:00-05:00",
            "2026-11-02T01:00:00-05:00",
        ],
        id="New York fall back, fixed hour but stepped minutes: wildcard, both hours",
    ),
    pytest.param(
        "0,20,40 1 * * *",
        "America/New_York",
        "2026-11-01T00:50:00-04:00",
        [
            "2026-11-01T01:00:00-04:00",
            "2026-11-01T01:20:00-04:00",
            "2026-11-01T01:40:00-04:00",
            "2026-11-02T01:00:00-05:00",
        ],
        id="New York fall back, fixed hour and listed minutes: first hour only",
    ),
    pytest.param(
        "5,* 1 * * *",
        "America/New_York",
        "2026-11-01T01:58:00-04:00",
        ["2026-11-01T01:59:00-04:00", "2026-11-02T01:00:00-05:00"],
        id="New York fall back, every minute written 5,*: not a star first, so fixed",
    ),
    pytest.param(
        "*,5 1 * * *",
        "America/New_York",
        "2026-11-01T01:58:00-04:00",
        ["2026-11-01T01:59:00-04:00", "2026-11-01T01:00:00-05:00"],
        id="New York fall back, every minute written *,5: a star first, so wildcard",
    ),
    pytest.param(
        "30 2 * * *",
        "Europe/Berlin",
        "2026-10-24T12:00:00+02:00",
        ["2026-10-25T02:30:00+02:00", "2026-10-26T02:30:00+01:00"],
        id="Berlin fall back, fixed hour: first 02:30 only",
    ),
    pytest.param(
        "30 */2 * * *",
        "Europe/Berlin",
        "2026-10-25T00:00:00+02:00",
        [
            "2026-10-25T00:30:00+02:00",
            "2026-10-25T02:30:00+02:00",
            "2026-10-25T02:30:00+01:00",
            "2026-10-25T04:30:00+01:00",
        ],
        id="Berlin fall back, stepped hour: both 02:30s",
    ),
    pytest.param(
        "45 1 * * *",
        "Australia/Lord_Howe",
        "2026-04-04T12:00:00+11:00",
        ["2026-04-05T01:45:00+11:00", "2026-04-06T01:45:00+10:30"],
        id="Lord Howe 30-minute fall back, fixed hour: first 01:45 only",
    ),
    pytest.param(
        "*/15 * * * *",
        "Australia/Lord_Howe",
        "2026-04-05T01:00:00+11:00",
        [
            "2026-04-05T01:15:00+11:00",
            "2026-04-05T01:30:00+11:00",
            "2026-04-05T01:45:00+11:00",
            "2026-04-05T01:30:00+10:30",
            "2026-04-05T01:45:00+10:30",
            "2026-04-05T02:00:00+10:30",
        ],
        id="Lord Howe 30-minute fall back, wildcard hour: the half hour twice",
    ),
    pytest.param(
        "31,32,37 */1 * * *",
        "Australia/Lord_Howe",
        "2026-04-05T01:35:00+11:00",
        [
            "2026-04-05T01:37:00+11:00",
            "2026-04-05T01:31:00+10:30",
            "2026-04-05T01:32:00+10:30",
            "2026-04-05T01:37:00+10:30",
            "2026-04-05T02:31:00+10:30",
        ],
        id="Lord Howe 30-minute fall back, stepped hour: second occurrences not lost",
    ),
    pytest.param(
        "30 23 * * *",
        "America/Santiago",
        "2026-04-04T12:00:00-03:00",
        ["2026-04-04T23:30:00-03:00", "2026-04-05T23:30:00-04:00"],
        id="Santiago falls back at midnight, fixed hour: first 23:30 only",
    ),
    # --- spring forward -----------------------------------------------------------
    pytest.param(
        "30 2 * * *",
        "America/New_York",
        "2026-03-07T12:00:00-05:00",
        ["2026-03-08T03:00:00-04:00", "2026-03-09T02:30:00-04:00"],
        id="New York spring forward, fixed 02:30: once at 03:00",
    ),
    pytest.param(
        "0,30 2 * * *",
        "America/New_York",
        "2026-03-07T12:00:00-05:00",
        ["2026-03-08T03:00:00-04:00", "2026-03-09T02:00:00-04:00", "2026-03-09T02:30:00-04:00"],
        id="New York spring forward, two fixed times in the gap: one tick at 03:00",
    ),
    pytest.param(
        "0 2,3 * * *",
        "America/New_York",
        "2026-03-07T12:00:00-05:00",
        ["2026-03-08T03:00:00-04:00", "2026-03-09T02:00:00-04:00", "2026-03-09T03:00:00-04:00"],
        id="New York spring forward, 02:00 and 03:00: one tick at 03:00",
    ),
    pytest.param(
        "30 * * * *",
        "America/New_York",
        "2026-03-08T00:00:00-05:00",
        ["2026-03-08T00:30:00-05:00", "2026-03-08T01:30:00-05:00", "2026-03-08T03:30:00-04:00"],
        id="New York spring forward, wildcard hour: 02:30 skipped",
    ),
    pytest.param(
        "30 */2 * * *",
        "Europe/Berlin",
        "2026-03-29T00:00:00+01:00",
        ["2026-03-29T00:30:00+01:00", "2026-03-29T04:30:00+02:00"],
        id="Berlin spring forward, stepped hour: 02:30 skipped, not moved",
    ),
    pytest.param(
        "*/30 2 * * *",
        "Europe/Berlin",
        "2026-03-28T12:00:00+01:00",
        ["2026-03-30T02:00:00+02:00", "2026-03-30T02:30:00+02:00"],
        id="Berlin spring forward, fixed hour but stepped minutes: wildcard, skipped",
    ),
    pytest.param(
        "0,30 2 * * *",
        "Europe/Berlin",
        "2026-03-28T12:00:00+01:00",
        ["2026-03-29T03:00:00+02:00", "2026-03-30T02:00:00+02:00"],
        id="Berlin spring forward, fixed hour and listed minutes: once at 03:00",
    ),
    pytest.param(
        "30 2 * * *",
        "Europe/Berlin",
        "2026-03-28T12:00:00+01:00",
        ["2026-03-29T03:00:00+02:00", "2026-03-30T02:30:00+02:00"],
        id="Berlin spring forward, fixed 02:30: once at 03:00",
    ),
    pytest.param(
        "15 2 * * *",
        "Australia/Lord_Howe",
        "2026-10-03T12:00:00+10:30",
        ["2026-10-04T02:30:00+11:00", "2026-10-05T02:15:00+11:00"],
        id="Lord Howe 30-minute spring forward, fixed 02:15: once at 02:30",
    ),
    pytest.param(
        "*/15 * * * *",
        "Australia/Lord_Howe",
        "2026-10-04T01:30:00+10:30",
        ["2026-10-04T01:45:00+10:30", "2026-10-04T02:30:00+11:00", "2026-10-04T02:45:00+11:00"],
        id="Lord Howe 30-minute spring forward, wildcard hour: 02:00 and 02:15 skipped",
    ),
    pytest.param(
        "15 */2 * * *",
        "Australia/Lord_Howe",
        "2026-10-04T00:00:00+10:30",
        ["2026-10-04T00:15:00+10:30", "2026-10-04T04:15:00+11:00"],
        id="Lord Howe 30-minute spring forward, stepped hour: 02:15 skipped",
    ),
    pytest.param(
        "0 0 * * *",
        "America/Santiago",
        "2026-09-05T12:00:00-04:00",
        ["2026-09-06T01:00:00-03:00", "2026-09-07T00:00:00-03:00"],
        id="Santiago springs forward at midnight: daily midnight runs at 01:00",
    ),
    pytest.param(
        "0 12 * * *",
        "Pacific/Apia",
        "2011-12-29T00:00:00-10:00",
        ["2011-12-29T12:00:00-10:00", "2011-12-31T00:00:00+14:00", "2011-12-31T12:00:00+14:00"],
        id="Apia skipped a whole day, fixed hour: its noon runs right after the gap",
    ),
    pytest.param(
        "0 0 * * *",
        "Pacific/Apia",
        "2011-12-28T12:00:00-10:00",
        ["2011-12-29T00:00:00-10:00", "2011-12-31T00:00:00+14:00", "2012-01-01T00:00:00+14:00"],
        id="Apia skipped a whole day, daily midnight: one tick where two days meet",
    ),
    pytest.param(
        "0 */12 * * *",
        "Pacific/Apia",
        "2011-12-29T06:00:00-10:00",
        ["2011-12-29T12:00:00-10:00", "2011-12-31T00:00:00+14:00", "2011-12-31T12:00:00+14:00"],
        id="Apia skipped a whole day, stepped hour: nothing for the missing day",
    ),
    # --- seconds ------------------------------------------------------------------
    pytest.param(
        "59 59 1 * * *",
        "America/New_York",
        "2026-10-31T12:00:00-04:00",
        ["2026-11-01T01:59:59-04:00", "2026-11-02T01:59:59-05:00"],
        id="seconds field, New York fall back, fixed hour: first 01:59:59 only",
    ),
    pytest.param(
        "*/30 30 1 * * *",
        "America/New_York",
        "2026-11-01T00:00:00-04:00",
        ["2026-11-01T01:30:00-04:00", "2026-11-01T01:30:30-04:00", "2026-11-02T01:30:00-05:00"],
        id="seconds field stepped, fixed minute and hour: the seconds do not make it wildcard",
    ),
    pytest.param(
        "0 */30 1 * * *",
        "America/New_York",
        "2026-11-01T01:20:00-04:00",
        ["2026-11-01T01:30:00-04:00", "2026-11-02T01:00:00-05:00", "2026-11-02T01:30:00-05:00"],
        id="seconds field, stepped minute: in 6 fields the hour alone decides: fixed, once",
    ),
    pytest.param(
        "*/20 59 1,2,3 * * *",
        "America/New_York",
        "2026-03-08T01:59:30-05:00",
        ["2026-03-08T01:59:40-05:00", "2026-03-08T03:00:00-04:00", "2026-03-08T03:59:00-04:00"],
        id="seconds field, New York spring forward, fixed hour: gap tick exactly at 03:00:00",
    ),
]


@pytest.mark.parametrize(("expression", "zone", "start", "expected"), DST_CASES)
def test_next_ticks_on_dst_days(
    expression: str, zone: str, start: str, expected: list[str]
) -> None:
    assert next_ticks(expression, zone, start, len(expected)) == expected


@pytest.mark.parametrize(("expression", "zone", "start", "expected"), DST_CASES)
def test_prev_ticks_walk_the_same_ticks_backwards(
    expression: str, zone: str, start: str, expected: list[str]
) -> None:
    ticks = parse_schedule(expression, time_zone=zone)
    last = local(expected[-1])
    walked = [last.isoformat()]
    tick: datetime | None = last
    while len(walked) < len(expected):
        assert tick is not None
        tick = ticks.prev_tick(tick - timedelta(seconds=1))
        assert tick is not None
        walked.append(tick.astimezone(ticks.zone).isoformat())
    assert walked[::-1] == expected


@pytest.mark.parametrize(("expression", "zone", "start", "expected"), DST_CASES)
def test_count_agrees_with_the_listed_ticks(
    expression: str, zone: str, start: str, expected: list[str]
) -> None:
    ticks = parse_schedule(expression, time_zone=zone)
    assert ticks.count_ticks(local(start), local(expected[-1])) == len(expected)


@pytest.mark.parametrize(
    ("expression", "zone", "day", "hours", "expected"),
    [
        pytest.param("*/15 * * * *", "America/New_York", "2026-11-01", 25, 100, id="NY 25 h day"),
        pytest.param("*/15 * * * *", "America/New_York", "2026-03-08", 23, 92, id="NY 23 h day"),
        pytest.param("30 1 * * *", "America/New_York", "2026-11-01", 25, 1, id="NY fixed once"),
        pytest.param("30 2 * * *", "America/New_York", "2026-03-08", 23, 1, id="NY gap once"),
        pytest.param("*/15 * * * *", "Australia/Lord_Howe", "2026-04-05", 24.5, 98, id="LH 24.5"),
        pytest.param("*/15 * * * *", "Australia/Lord_Howe", "2026-10-04", 23.5, 94, id="LH 23.5"),
        pytest.param("* * * * * *", "Europe/Berlin", "2026-10-25", 25, 90000, id="Berlin 25h s"),
        pytest.param("* * * * * *", "Europe/Berlin", "2026-03-29", 23, 82800, id="Berlin 23h s"),
        # 6 fields: the hour alone decides, so a starred minute under a fixed hour is fixed.
        pytest.param("* * 2 * * *", "Europe/Berlin", "2026-03-29", 23, 1, id="Berlin gap *"),
        pytest.param("* * 2 * * *", "Europe/Berlin", "2026-10-25", 25, 3600, id="Berlin fold *"),
        pytest.param("* 0-59 2 * * *", "Europe/Berlin", "2026-03-29", 23, 1, id="gap 0-59"),
        pytest.param("* 0-59 2 * * *", "Europe/Berlin", "2026-10-25", 25, 3600, id="fold 0-59"),
        pytest.param("* * */2 * * *", "Europe/Berlin", "2026-10-25", 25, 46800, id="Berlin 2h s"),
    ],
)
def test_ticks_per_dst_day(
    expression: str, zone: str, day: str, hours: float, expected: int
) -> None:
    ticks = parse_schedule(expression, time_zone=zone)
    start = datetime.fromisoformat(day).replace(tzinfo=ticks.zone)
    end = (start + timedelta(days=1)).replace(tzinfo=ticks.zone)
    assert end.timestamp() - start.timestamp() == hours * 3600  # the day is that long
    tiny = timedelta(microseconds=1)
    assert ticks.count_ticks(start - tiny, end - tiny) == expected
