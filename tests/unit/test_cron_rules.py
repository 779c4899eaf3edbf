"""cronie's rules for the fields (src/entry.c) and for matching (src/cron.c), one table
per rule, each named as the rule it pins."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from itertools import islice

import pytest

from punctual.core.schedules import MACROS, ScheduleError, explain, parse_fields, parse_schedule

START = datetime(2026, 11, 25, 10, 0, tzinfo=UTC)  # a Wednesday


def upcoming(
    expression: str, count: int, *, zone: str = "UTC", uid: str | None = None
) -> list[str]:
    ticks = parse_schedule(expression, time_zone=zone, uid=uid)
    found = islice(ticks.ticks(START, START + timedelta(days=800)), count)
    return [tick.astimezone(ticks.zone).isoformat() for tick in found]


def days_of(day_field: str, weekday_field: str, year: int, month: int) -> list[int]:
    """The days of one month on which `0 12 <day> * <weekday>` ticks (UTC)."""
    ticks = parse_schedule(f"0 12 {day_field} * {weekday_field}")
    first = datetime(year, month, 1, tzinfo=UTC)
    last = datetime(year + month // 12, month % 12 + 1, 1, tzinfo=UTC)
    return [tick.day for tick in ticks.ticks(first, last)]


def refusal(expression: str) -> str:
    with pytest.raises(ScheduleError) as caught:
        parse_fields(expression, uid="uid-1")
    assert caught.value.field == "schedule"
    return caught.value.problem


@pytest.mark.parametrize(
    ("expression", "attribute", "expected"),
    [
        ("5-5 * * * *", "minutes", (5,)),
        ("0 9-9 * * *", "hours", (9,)),
        ("7-7 * * * * *", "seconds", (7,)),
        ("5-5/10 * * * *", "minutes", (5,)),
        ("0 0 * 3-3 *", "months", frozenset({3})),
        ("0 0 * mar-mar *", "months", frozenset({3})),
    ],
)
def test_a_one_value_range_is_that_value(expression: str, attribute: str, expected: object) -> None:
    assert getattr(parse_fields(expression), attribute) == expected


@pytest.mark.parametrize(
    ("expression", "expected"),
    [
        ("5-5 * * * *", ["2026-11-25T10:05:00+00:00", "2026-11-25T11:05:00+00:00"]),
        ("0 9 * * 1-1", ["2026-11-30T09:00:00+00:00", "2026-12-07T09:00:00+00:00"]),
        ("0 9 * * mon-mon", ["2026-11-30T09:00:00+00:00", "2026-12-07T09:00:00+00:00"]),
        ("0 9 * * 7-7", ["2026-11-29T09:00:00+00:00", "2026-12-06T09:00:00+00:00"]),
        ("0 0 15-15 * *", ["2026-12-15T00:00:00+00:00", "2027-01-15T00:00:00+00:00"]),
    ],
)
def test_a_one_value_range_ticks_only_at_that_value(expression: str, expected: list[str]) -> None:
    assert upcoming(expression, len(expected)) == expected


@pytest.mark.parametrize(
    ("expression", "problem"),
    [
        ("5-1 * * * *", "minute range 5-1 is reversed"),
        ("* 23-1 * * *", "hour range 23-1 is reversed"),
        ("* * 31-1 * *", "day-of-month range 31-1 is reversed"),
        ("* * * dec-jan *", "month range dec-jan is reversed"),
        ("* * * * 5-1", "day-of-week range 5-1 is reversed"),
        ("* * * * tue-mon", "day-of-week range tue-mon is reversed"),
        ("* * * * 5-3", "day-of-week range 5-3 is reversed"),
        ("* * * * 7-sat", "day-of-week range 7-sat is reversed"),
        ("30-10 * * * * *", "second range 30-10 is reversed"),
        ("10-5/2 * * * *", "minute range 10-5 is reversed"),
    ],
)
def test_a_reversed_range_is_refused_naming_its_field(expression: str, problem: str) -> None:
    assert refusal(expression) == problem


# 2026-11-28 is a Saturday, 2026-11-27 a Friday, 2026-11-30 a Monday.
@pytest.mark.parametrize(
    ("weekdays", "values", "first_ticks", "sentence"),
    [
        ("sat-sun", (0, 6), ["11-28", "11-29", "12-05"], "on Saturday and Sunday"),
        ("SAT-SUN", (0, 6), ["11-28", "11-29", "12-05"], "on Saturday and Sunday"),
        ("6-0", (0, 6), ["11-28", "11-29", "12-05"], "on Saturday and Sunday"),
        ("fri-0", (0, 5, 6), ["11-27", "11-28", "11-29", "12-04"], "on Friday through Sunday"),
        ("5-0", (0, 5, 6), ["11-27", "11-28", "11-29", "12-04"], "on Friday through Sunday"),
        ("mon-sun", (0, 1, 2, 3, 4, 5, 6), ["11-26", "11-27", "11-28"], "every day"),
        ("fri-sun/2", (0, 5), ["11-27", "11-29", "12-04"], "on Sunday and Friday"),
        ("sat-sun/2", (6,), ["11-28", "12-05"], "on Saturday"),
        ("mon-0/2", (0, 1, 3, 5), ["11-27", "11-29", "11-30", "12-02"],
         "on Sunday, Monday, Wednesday and Friday"),
        ("7-0", (0,), ["11-29", "12-06"], "on Sunday"),
        ("1,sat-sun", (0, 1, 6), ["11-28", "11-29", "11-30"], "on Monday, Saturday and Sunday"),
    ],
)  # fmt: skip
def test_a_day_of_week_range_ending_on_sunday_ends_at_7(
    weekdays: str, values: tuple[int, ...], first_ticks: list[str], sentence: str
) -> None:
    expression = f"0 9 * * {weekdays}"
    assert tuple(sorted(parse_fields(expression).day_rule.weekdays)) == values
    expected = [f"2026-{day}T09:00:00+00:00" for day in first_ticks]
    assert upcoming(expression, len(first_ticks)) == expected
    assert explain(expression) == f"At 09:00, {sentence}."


@pytest.mark.parametrize(
    ("expression", "attribute", "size"),
    [
        ("*,5 * * * *", "minutes", 60),
        ("5,* * * * *", "minutes", 60),
        ("0 *,3 * * *", "hours", 24),
        ("0 0 * *,jan *", "months", 12),
        ("*,30 0 0 * * *", "seconds", 60),
    ],
)
def test_a_list_containing_a_star_is_the_whole_field(
    expression: str, attribute: str, size: int
) -> None:
    assert len(getattr(parse_fields(expression), attribute)) == size


def test_a_list_containing_a_star_in_the_day_fields_is_every_day() -> None:
    assert parse_fields("0 0 1,* * *").day_rule.all_days
    assert parse_fields("0 0 * * *,1").day_rule.all_weekdays
    assert upcoming("0 0 1,* * *", 2) == ["2026-11-26T00:00:00+00:00", "2026-11-27T00:00:00+00:00"]


def test_a_stepped_star_in_a_list_keeps_its_step() -> None:
    assert parse_fields("*/15,7 * * * *").minutes == (0, 7, 15, 30, 45)


# February 2026 starts on a Sunday: Fridays are the 6th, 13th, 20th and 27th, Mondays
# the 2nd, 9th, 16th and 23rd.
EVERY_DAY = list(range(1, 29))


@pytest.mark.parametrize(
    ("day_field", "weekday_field", "expected"),
    [
        pytest.param("1", "5", [1, 6, 13, 20, 27], id="neither starts with a star: either"),
        pytest.param("1-31", "5", EVERY_DAY, id="1-31 is no star: either, so every day"),
        pytest.param("1", "0-6", EVERY_DAY, id="0-6 is no star: either, so every day"),
        pytest.param("1,*", "5", EVERY_DAY, id="1,* starts with 1: either, so every day"),
        pytest.param("1", "5,*", EVERY_DAY, id="5,* starts with 5: either, so every day"),
        pytest.param("*", "5", [6, 13, 20, 27], id="star day: both, so the weekday"),
        pytest.param("?", "5", [6, 13, 20, 27], id="question mark counts as a star"),
        pytest.param("1", "*", [1], id="star weekday: both, so the day"),
        pytest.param("1", "?", [1], id="question mark weekday"),
        pytest.param("*/2", "5", [13, 27], id="stepped star day: odd-numbered Fridays"),
        pytest.param("*/100,1-7", "1", [2], id="star first forces both: the first Monday"),
        pytest.param("1-7", "1", [1, 2, 3, 4, 5, 6, 7, 9, 16, 23], id="same without the star"),
        pytest.param("*,1", "5", [6, 13, 20, 27], id="*,1 starts with a star: both"),
        pytest.param("13", "*/7", [], id="*/7 is Sunday, and a star: 13 only if Sunday"),
        pytest.param("1", "*/7", [1], id="the 1st is a Sunday"),
        pytest.param("1", "*,5", [1], id="a star-first weekday list that is every day"),
    ],
)
def test_the_day_fields_must_both_match_when_either_starts_with_a_star(
    day_field: str, weekday_field: str, expected: list[int]
) -> None:
    assert days_of(day_field, weekday_field, 2026, 2) == expected


@pytest.mark.parametrize(
    ("expression", "attribute", "expected"),
    [
        ("*/100 * * * *", "minutes", (0,)),
        ("0 */25 * * *", "hours", (0,)),
        ("5/15 * * * *", "minutes", (5, 20, 35, 50)),
        ("59/15 * * * *", "minutes", (59,)),
        ("*/20 * * * * *", "seconds", (0, 20, 40)),
        ("0-30/10 * * * *", "minutes", (0, 10, 20, 30)),
    ],
)
def test_a_step_counts_from_the_start_of_its_range(
    expression: str, attribute: str, expected: tuple[int, ...]
) -> None:
    assert getattr(parse_fields(expression), attribute) == expected


@pytest.mark.parametrize(
    ("weekday_field", "expected"),
    [("*/2", {0, 2, 4, 6}), ("*/7", {0}), ("1/2", {1, 3, 5}), ("7/2", {0}), ("5-7", {5, 6, 0}),
     ("0,7", {0}), ("sun-sat", set(range(7)))],
)  # fmt: skip
def test_day_of_week_seven_is_sunday(weekday_field: str, expected: set[int]) -> None:
    assert parse_fields(f"0 0 * * {weekday_field}").day_rule.weekdays == expected


@pytest.mark.parametrize("macro", sorted(MACROS))
def test_a_macro_is_its_five_fields(macro: str) -> None:
    assert parse_fields(macro) == parse_fields(MACROS[macro])
    assert parse_fields(macro.upper()) == parse_fields(MACROS[macro])


@pytest.mark.parametrize(
    ("expression", "problem"),
    [
        ("@reboot", "@reboot is not supported"),
        ("@REBOOT", "@reboot is not supported"),
        ("@every 5m", "@every is not supported"),
        ("@every", "@every is not supported"),
        ("@fortnightly", 'unknown macro "@fortnightly"'),
    ],
)
def test_reboot_and_every_are_refused(expression: str, problem: str) -> None:
    assert problem in refusal(expression)


@pytest.mark.parametrize(
    ("expression", "problem"),
    [
        ("\u0665 * * * *", "minute value '\u0665' is not a number"),  # Arabic-Indic five
        ("* \uff11 * * *", "hour value '\uff11' is not a number"),  # fullwidth one
        ("0 0 * * \uff2d\uff2f\uff2e", "day-of-week value"),  # fullwidth MON
        ("0\u00a00 * * * *", "minute value '0\\xa00' is not a number"),  # no-break space
    ],
)
def test_only_ascii_digits_and_blanks_count(expression: str, problem: str) -> None:
    assert problem in refusal(expression)


def test_a_wildcard_hashed_minute_runs_at_every_real_occurrence() -> None:
    ticks = parse_schedule("H/30 1 * * *", time_zone="America/New_York", uid="uid-1")
    assert ticks.fields.wildcard
    start = datetime.fromisoformat("2026-11-01T00:50:00-04:00")
    found = [tick.astimezone(ticks.zone).isoformat() for tick in islice(ticks.ticks(
        start, start + timedelta(days=1)), 4)]  # fmt: skip
    first = ticks.fields.minutes[0]
    second = ticks.fields.minutes[1]
    assert found == [
        f"2026-11-01T01:{first:02d}:00-04:00",
        f"2026-11-01T01:{second:02d}:00-04:00",
        f"2026-11-01T01:{first:02d}:00-05:00",
        f"2026-11-01T01:{second:02d}:00-05:00",
    ]


@pytest.mark.parametrize(
    ("expression", "sentence"),
    [
        ("5-5 * * * *", "At minute 5 of every hour."),
        ("*,5 * * * *", "Every minute."),
        ("0 *,3 * * *", "At minute 0 of every hour."),
        ("0 9 * * 1-1", "At 09:00, on Monday."),
        ("0 0 1-31 * 5", "At 00:00, every day."),
        ("0 0 1 * 0-6", "At 00:00, every day."),
        ("0 0 13 * 5", "At 00:00, on day 13 of the month or on Friday."),
        ("0 0 */100,1-7 * 1", "At 00:00, on days 1 through 7 of the month, but only on Monday."),
        ("0 0 13 * */7", "At 00:00, on day 13 of the month, but only on Sunday."),
        ("0 0 1-7 * mon,fri",
         "At 00:00, on days 1 through 7 of the month or on Monday and Friday."),
        ("0 0 */100,1-7 * mon,fri",
         "At 00:00, on days 1 through 7 of the month, but only on Monday or Friday."),
        ("0 0 ? * 5", "At 00:00, on Friday."),
    ],
)  # fmt: skip
def test_explain_says_the_rules_as_they_apply(expression: str, sentence: str) -> None:
    assert explain(expression) == sentence
