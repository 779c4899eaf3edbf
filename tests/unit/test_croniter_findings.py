"""What croniter 7.0.0 itself does where it departs from cronie, pinned.

Punctual used croniter to parse expressions and still uses none of its tick search,
because croniter's answers differ from cronie's rules: on daylight-saving days, and
in reading the fields (`5-5` is the whole field; `*,5` expands to a list mixing `*`
with numbers). Punctual now reads the text itself (its `H` values are croniter's,
see test_cron_hashing.py). These tests record the differences found. If one fails
after a croniter upgrade, croniter changed: re-check whether Punctual could lean on
it again.
"""

from __future__ import annotations

from datetime import datetime
from zoneinfo import ZoneInfo

import pytest
from croniter import croniter

from punctual.core.schedules import parse_fields, parse_schedule


def croniter_next(expression: str, zone: str, start: str, count: int) -> list[str]:
    begin = datetime.fromisoformat(start)
    iterator = croniter(expression, begin.astimezone(ZoneInfo(zone)))
    return [iterator.get_next(datetime).isoformat() for _ in range(count)]


def punctual_next(expression: str, zone: str, start: str, count: int) -> list[str]:
    ticks = parse_schedule(expression, time_zone=zone)
    found: list[str] = []
    tick = datetime.fromisoformat(start)
    for _ in range(count):
        following = ticks.next_tick(tick)
        assert following is not None
        tick = following
        found.append(tick.astimezone(ticks.zone).isoformat())
    return found


@pytest.mark.parametrize(
    ("expression", "zone", "start", "croniter_says", "cronie_says"),
    [
        pytest.param(
            "30 1 * * *",
            "America/New_York",
            "2026-10-31T12:00:00-04:00",
            ["2026-11-01T01:30:00-04:00", "2026-11-01T01:30:00-05:00"],
            ["2026-11-01T01:30:00-04:00", "2026-11-02T01:30:00-05:00"],
            id="fall back, fixed hour: croniter runs both 01:30s",
        ),
        pytest.param(
            "45 1 * * *",
            "Australia/Lord_Howe",
            "2026-04-04T12:00:00+11:00",
            ["2026-04-05T01:45:00+11:00", "2026-04-05T01:45:00+10:30"],
            ["2026-04-05T01:45:00+11:00", "2026-04-06T01:45:00+10:30"],
            id="30-minute fall back, fixed hour: croniter runs both 01:45s",
        ),
        pytest.param(
            "30 */2 * * *",
            "Europe/Berlin",
            "2026-03-29T00:00:00+01:00",
            ["2026-03-29T00:30:00+01:00", "2026-03-29T03:00:00+02:00"],
            ["2026-03-29T00:30:00+01:00", "2026-03-29T04:30:00+02:00"],
            id="spring forward, stepped hour: croniter moves 02:30 to 03:00 as if fixed",
        ),
        pytest.param(
            "5,22,27,28,31,32,37 * * * *",
            "Australia/Lord_Howe",
            "2026-04-05T01:35:00+11:00",
            ["2026-04-05T01:37:00+11:00", "2026-04-05T02:05:00+10:30"],
            ["2026-04-05T01:37:00+11:00", "2026-04-05T01:31:00+10:30"],
            id="30-minute fall back, wildcard hour: croniter loses real second occurrences",
        ),
    ],
)
def test_croniter_departs_from_cronie(
    expression: str, zone: str, start: str, croniter_says: list[str], cronie_says: list[str]
) -> None:
    assert croniter_next(expression, zone, start, len(croniter_says)) == croniter_says
    assert punctual_next(expression, zone, start, len(cronie_says)) == cronie_says


@pytest.mark.parametrize(
    ("expression", "zone", "start", "both_say"),
    [
        pytest.param(
            "30 2 * * *",
            "America/New_York",
            "2026-03-07T12:00:00-05:00",
            ["2026-03-08T03:00:00-04:00", "2026-03-09T02:30:00-04:00"],
            id="spring forward, fixed hour: moved to the end of the gap",
        ),
        pytest.param(
            "30 * * * *",
            "America/New_York",
            "2026-11-01T00:00:00-04:00",
            ["2026-11-01T00:30:00-04:00", "2026-11-01T01:30:00-04:00", "2026-11-01T01:30:00-05:00"],
            id="fall back, wildcard hour: both occurrences",
        ),
        pytest.param(
            "*/15 * * * *",
            "Australia/Lord_Howe",
            "2026-10-04T01:30:00+10:30",
            ["2026-10-04T01:45:00+10:30", "2026-10-04T02:30:00+11:00"],
            id="30-minute spring forward, wildcard hour: the gap is skipped",
        ),
    ],
)
def test_croniter_agrees_with_cronie(
    expression: str, zone: str, start: str, both_say: list[str]
) -> None:
    assert croniter_next(expression, zone, start, len(both_say)) == both_say
    assert punctual_next(expression, zone, start, len(both_say)) == both_say


@pytest.mark.parametrize(
    ("expression", "position", "attribute", "cronie_says"),
    [
        ("5-5 * * * *", 0, "minutes", (5,)),
        ("0 9-9 * * *", 1, "hours", (9,)),
    ],
)
def test_croniter_reads_a_one_value_range_as_the_whole_field(
    expression: str, position: int, attribute: str, cronie_says: tuple[int, ...]
) -> None:
    expanded, _ = croniter.expand(expression)
    assert expanded[position] == ["*"]
    assert getattr(parse_fields(expression), attribute) == cronie_says


def test_croniter_expands_a_list_with_a_star_to_a_mixed_list() -> None:
    expanded, _ = croniter.expand("*,5 * * * *")
    assert expanded[0] == ["*", 5]  # which Punctual's old reading failed on
    assert len(parse_fields("*,5 * * * *").minutes) == 60
