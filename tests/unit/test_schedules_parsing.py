"""Reading expressions: what is accepted, what each field means, what is refused and why."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from itertools import islice

import pytest

from punctual.core.schedules import (
    ScheduleError,
    explain,
    jitter_offset,
    load_zone,
    parse_fields,
    parse_schedule,
    uses_hash,
)
from punctual.core.schedules.explaining import FIXED_ON_CLOCK_CHANGES, WILDCARD_ON_CLOCK_CHANGES

START = datetime(2026, 11, 25, 10, 0, tzinfo=UTC)  # a Wednesday
FIXED = FIXED_ON_CLOCK_CHANGES
WILDCARD = WILDCARD_ON_CLOCK_CHANGES


def upcoming(expression: str, count: int = 3, *, uid: str | None = None) -> list[str]:
    ticks = parse_schedule(expression, uid=uid)
    found = list(islice(ticks.ticks(START, START + timedelta(days=800)), count))
    return [tick.isoformat() for tick in found]


@pytest.mark.parametrize(
    ("expression", "expected"),
    [
        ("*/15 * * * *", ["10:15", "10:30", "10:45"]),
        ("0 2 * * *", ["2026-11-26T02:00", "2026-11-27T02:00", "2026-11-28T02:00"]),
        ("@hourly", ["11:00", "12:00", "13:00"]),
        ("@daily", ["2026-11-26T00:00", "2026-11-27T00:00", "2026-11-28T00:00"]),
        ("@midnight", ["2026-11-26T00:00", "2026-11-27T00:00", "2026-11-28T00:00"]),
        ("@weekly", ["2026-11-29T00:00", "2026-12-06T00:00", "2026-12-13T00:00"]),
        ("@monthly", ["2026-12-01T00:00", "2027-01-01T00:00", "2027-02-01T00:00"]),
        ("@yearly", ["2027-01-01T00:00", "2028-01-01T00:00"]),
        ("@annually", ["2027-01-01T00:00", "2028-01-01T00:00"]),
        ("@DAILY", ["2026-11-26T00:00"]),
        ("30 10 * * *", ["2026-11-25T10:30", "2026-11-26T10:30"]),
        ("0 0 L * *", ["2026-11-30T00:00", "2026-12-31T00:00", "2027-01-31T00:00"]),
        ("0 0 29 2 *", ["2028-02-29T00:00"]),
        ("0 9 * * mon-fri", ["2026-11-26T09:00", "2026-11-27T09:00", "2026-11-30T09:00"]),
        ("0 9 * * 7", ["2026-11-29T09:00", "2026-12-06T09:00"]),
        ("0 9 ? dec sun", ["2026-12-06T09:00", "2026-12-13T09:00"]),
        ("0 0 1 jan,jul *", ["2027-01-01T00:00", "2027-07-01T00:00"]),
    ],
    ids=lambda value: value if isinstance(value, str) else None,
)
def test_expressions_tick_as_cron_does(expression: str, expected: list[str]) -> None:
    found = upcoming(expression, len(expected))
    assert all(wanted in tick for tick, wanted in zip(found, expected, strict=True)), found


def test_six_fields_lead_with_seconds() -> None:
    assert upcoming("*/20 * * * * *", 3) == [
        "2026-11-25T10:00:20+00:00",
        "2026-11-25T10:00:40+00:00",
        "2026-11-25T10:01:00+00:00",
    ]
    assert upcoming("30 0 2 * * *", 1) == ["2026-11-26T02:00:30+00:00"]


@pytest.mark.parametrize(
    ("expression", "expected"),
    [
        pytest.param(
            "0 0 13 * 5", ["2026-11-27", "2026-12-04", "2026-12-11", "2026-12-13"], id="or"
        ),
        pytest.param("0 0 * * 5", ["2026-11-27", "2026-12-04"], id="weekday only"),
        pytest.param("0 0 13 * *", ["2026-12-13", "2027-01-13"], id="day only"),
        pytest.param("0 0 13 * ?", ["2026-12-13"], id="day only, question mark weekday"),
        pytest.param(
            "0 0 1-31 * 5",
            ["2026-11-26", "2026-11-27", "2026-11-28"],
            id="1-31 does not start with a star: either matches, so every day",
        ),
        pytest.param("0 0 ? * 5", ["2026-11-27", "2026-12-04"], id="question mark day"),
        pytest.param(
            "0 0 */2 * 5",
            ["2026-11-27", "2026-12-11", "2026-12-25", "2027-01-01"],
            id="a stepped star day makes both match: odd-numbered Fridays",
        ),
    ],
)
def test_day_of_month_and_day_of_week_follow_cronie(expression: str, expected: list[str]) -> None:
    assert [tick[:10] for tick in upcoming(expression, len(expected))] == expected


@pytest.mark.parametrize(
    ("expression", "problem"),
    [
        ("61 * * * *", "minute 61 is out of range 0-59"),
        ("* 24 * * *", "hour 24 is out of range 0-23"),
        ("* * 0 * *", "day-of-month 0 is out of range 1-31"),
        ("* * * 13 *", "month 13 is out of range 1-12"),
        ("* * * * 8", "day-of-week 8 is out of range 0-7"),
        ("60 * * * * *", "second 60 is out of range 0-59"),
        ("5-61 * * * *", "minute 61 is out of range 0-59"),
        ("*/0 * * * *", "minute step '0' is not a positive whole number"),
        ("*/x * * * *", "minute step 'x' is not a positive whole number"),
        ("x * * * *", "minute value 'x' is not a number"),
        ("* * * foo *", "month value 'foo' is not a number or a name"),
        ("-5 * * * *", "minute field '-5' is not understood"),
        ("* * * *", "expected 5 fields (minute hour day-of-month month day-of-week) or 6"),
        ("* * * * * * *", "got 7"),
        ("", "is empty"),
        ("@fortnightly", 'unknown macro "@fortnightly"'),
        ("0 0 30 2 *", "day 30 never occurs in February"),
        ("0 0 30,31 2 *", "days 30 and 31 never occur in February"),
        ("0 0 31 2,4,6 *", "day 31 never occurs in February, April or June"),
        ("R * * * *", "R (random) is not supported"),
        ("0 0 * * 5#6", "day-of-week '5#6': the week after # must be 1 to 5"),
        ("0 0 1-5W * *", "day-of-month '1-5W': W takes one day, not a range"),
        ("0 0 L * *", None),
        ("0 0 * * L", "day-of-week L needs a weekday before it"),
        ("? * * * *", "minute field '?': '?' is only allowed in the day fields"),
        ("5-1 * * * *", "minute range 5-1 is reversed"),
        ("H,5 * * * *", "minute field 'H,5' is not understood: H must be the whole field"),
        ("H(0-99) * * * *", "minute 99 is out of range 0-59"),
        ("H(9-3) * * * *", "minute range H(9-3) is empty"),
    ],
)
def test_invalid_expressions_say_what_is_wrong(expression: str, problem: str | None) -> None:
    if problem is None:  # valid, listed beside its invalid neighbours
        parse_fields(expression)
        return
    with pytest.raises(ScheduleError) as caught:
        parse_fields(expression, uid="uid-1")
    assert caught.value.field == "schedule"
    assert problem in caught.value.problem
    assert caught.value.reason.startswith("spec.schedule: ")


def test_impossible_day_reason_names_the_field() -> None:
    with pytest.raises(ScheduleError) as caught:
        parse_schedule("0 0 30 2 *")
    assert caught.value.reason == "spec.schedule: day 30 never occurs in February"


def test_29_february_is_possible_even_if_rare() -> None:
    ticks = parse_schedule("0 0 29 2 *")
    assert ticks.next_tick(datetime(2097, 3, 1, tzinfo=UTC)) == datetime(2104, 2, 29, tzinfo=UTC)
    assert ticks.prev_tick(datetime(2104, 2, 28, tzinfo=UTC)) == datetime(2096, 2, 29, tzinfo=UTC)


@pytest.mark.parametrize("name", ["Mars/Base", "", "Europe", "../etc/passwd", "Not A Zone"])
def test_unknown_zones_are_refused_by_name(name: str) -> None:
    with pytest.raises(ScheduleError) as caught:
        load_zone(name)
    assert caught.value.field == "timeZone"
    assert caught.value.reason == f'spec.timeZone: unknown time zone "{name}"'


class TestHashedFields:
    def test_need_the_uid(self) -> None:
        with pytest.raises(ScheduleError, match="H fields need the schedule's uid"):
            parse_fields("H H * * *")

    def test_are_stable_for_one_uid(self) -> None:
        first = parse_fields("H H * * *", uid="6f1c-uid")
        again = parse_fields("H H * * *", uid="6f1c-uid")
        assert (first.minutes, first.hours) == (again.minutes, again.hours)
        assert len(first.minutes) == len(first.hours) == 1

    def test_spread_across_uids(self) -> None:
        minutes = {parse_fields("H * * * *", uid=f"uid-{n}").minutes for n in range(50)}
        assert len(minutes) > 10

    def test_step_keeps_the_period(self) -> None:
        fields = parse_fields("H/15 * * * *", uid="uid-7")
        assert len(fields.minutes) == 4
        assert {b - a for a, b in zip(fields.minutes, fields.minutes[1:], strict=False)} == {15}
        assert fields.wildcard

    def test_range_stays_in_range(self) -> None:
        for n in range(30):
            fields = parse_fields("H(0-29) 2 * * *", uid=f"uid-{n}")
            assert len(fields.minutes) == 1 and 0 <= fields.minutes[0] <= 29
            assert not fields.wildcard

    def test_macros_do_not_hash(self) -> None:
        assert parse_fields("@daily", uid="uid-1").minutes == (0,)
        assert not uses_hash("@hourly")
        assert not uses_hash("0 0 * * thu")
        assert uses_hash("H 2 * * *")


@pytest.mark.parametrize(
    ("minute_field", "hour_field", "wildcard"),
    [("0", "*", True), ("0", "*/2", True), ("0", "*/1", True), ("0", "H/3", True),
     ("0", "*,5", True), ("*/5", "2", True), ("*", "2", True), ("H/15", "2", True),
     ("0", "2", False), ("0", "1-5", False), ("0", "0-23/2", False), ("0", "H", False),
     ("0", "1,13", False), ("0-59", "2", False), ("5,*", "2", False), ("0", "5,*", False),
     ("H", "2", False), ("0", "H(0-11)/2", False)],
)  # fmt: skip
def test_wildcard_means_the_minute_or_the_hour_starts_with_a_star(
    minute_field: str, hour_field: str, wildcard: bool
) -> None:
    assert parse_fields(f"{minute_field} {hour_field} * * *", uid="u").wildcard is wildcard


@pytest.mark.parametrize(
    ("expression", "wildcard"),
    [("*/10 30 2 * * *", False), ("* 30 2 * * *", False), ("0 */10 2 * * *", False),
     ("0 0 * * * *", True), ("0 0 */2 * * *", True), ("0 0 2 * * *", False)],
)  # fmt: skip
def test_in_six_fields_the_hour_alone_makes_a_schedule_wildcard(
    expression: str, wildcard: bool
) -> None:
    assert parse_fields(expression).wildcard is wildcard


class TestJitter:
    def test_zero_means_none(self) -> None:
        assert jitter_offset("uid", 0) == timedelta(0)

    def test_is_stable_and_bounded(self) -> None:
        offsets = [jitter_offset(f"uid-{n}", 600) for n in range(200)]
        assert offsets == [jitter_offset(f"uid-{n}", 600) for n in range(200)]
        assert all(timedelta(0) <= offset <= timedelta(seconds=600) for offset in offsets)
        assert len(set(offsets)) > 100

    def test_is_whole_seconds(self) -> None:
        assert jitter_offset("uid", 3600).microseconds == 0


@pytest.mark.parametrize(
    ("expression", "zone", "sentence"),
    [
        ("0 2 * * *", "Europe/Berlin", "At 02:00, every day, in Europe/Berlin. " + FIXED),
        ("0 */2 * * *", "Europe/Berlin",
         "At minute 0, in every 2nd hour, in Europe/Berlin. " + WILDCARD),
        ("*/30 2 * * *", "America/New_York",
         "At 02:00 and 02:30, every day, in America/New_York. " + WILDCARD),
        ("0 2 * * *", "Asia/Kolkata", "At 02:00, every day, in Asia/Kolkata."),
        ("*/15 * * * *", "UTC", "Every 15 minutes."),
        ("* * * * *", "UTC", "Every minute."),
        ("30 * * * *", "UTC", "At minute 30 of every hour."),
        ("@hourly", "UTC", "At minute 0 of every hour."),
        ("0 */2 * * *", "UTC", "At minute 0, in every 2nd hour."),
        ("*/5 9-17 * * 1-5", "UTC",
         "Every 5 minutes, between 09:00 and 17:59, on Monday through Friday."),
        ("0 9 * * mon,wed,fri", "UTC", "At 09:00, on Monday, Wednesday and Friday."),
        ("0 0 29 2 *", "UTC", "At 00:00, on day 29 of the month, in February."),
        ("0 0 L * *", "UTC", "At 00:00, on the last day of the month."),
        ("0 0 1,15 * 5", "UTC", "At 00:00, on days 1 and 15 of the month or on Friday."),
        ("0,30 2,14 * * *", "UTC", "At 02:00, 02:30, 14:00 and 14:30, every day."),
        ("0 1,3,5,9,11 * * *", "UTC", "At minute 0, during hours 1, 3, 5, 9 and 11."),
        ("0 0 * 1-3 *", "UTC", "At 00:00, every day, in January through March."),
        ("*/10 * * * * *", "UTC", "Every 10 seconds."),
        ("30 0 2 * * *", "UTC", "At 02:00:30, every day."),
        ("*/10 5 * * * *", "UTC", "Every 10 seconds, during minute 5."),
        ("7,22,37,52 * * * *", "UTC", "Every 15 minutes from minute 7."),
    ],
)  # fmt: skip
def test_explain_says_it_in_one_sentence(expression: str, zone: str, sentence: str) -> None:
    assert explain(expression, time_zone=zone) == sentence


def test_explain_uses_the_uid_for_hashed_fields() -> None:
    fields = parse_fields("H H * * *", uid="uid-1")
    hour, minute = fields.hours[0], fields.minutes[0]
    assert explain("H H * * *", uid="uid-1") == f"At {hour:02d}:{minute:02d}, every day."
