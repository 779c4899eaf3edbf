"""The Quartz/cronsim extensions: L, L-n, LW and nW in day-of-month, dL and d#n in
day-of-week; their days, their words, their refusals, and a calendar property test
against the brute-force reference.

Months used (first weekday, length): February 2026 (Sunday, 28), February 2027
(Monday, 28; the 28th a Sunday), February 2028 (Tuesday, 29), May 2026 (Friday, 31;
the 31st a Sunday), August 2026 (Saturday, 31), November 2026 (Sunday, 30), January
2028 (Saturday, 31), April 2028 (Saturday, 30; the 30th a Sunday).
"""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta

import pytest
from hypothesis import HealthCheck, given, settings

from punctual.core.schedules import ScheduleError, explain, parse_fields, parse_schedule
from tests.unit.cron_reference import DrawnDays, ReferenceCron, drawn_day_rules, matching_days


def days_of(day_field: str, weekday_field: str, year: int, month: int) -> list[int]:
    """The days of one month on which `0 12 <day> * <weekday>` ticks (UTC)."""
    ticks = parse_schedule(f"0 12 {day_field} * {weekday_field}")
    first = datetime(year, month, 1, tzinfo=UTC)
    last = datetime(year + month // 12, month % 12 + 1, 1, tzinfo=UTC)
    return [tick.day for tick in ticks.ticks(first, last)]


MONTH_CASES = [
    # --- L and L-n ------------------------------------------------------------------
    ("L", "*", 2026, 2, [28]),
    ("L", "*", 2028, 2, [29]),
    ("L", "*", 2026, 11, [30]),
    ("L", "*", 2026, 5, [31]),
    ("L-1", "*", 2026, 2, [27]),
    ("L-2", "*", 2026, 5, [29]),
    ("L-2", "*", 2028, 2, [27]),
    ("L-0", "*", 2027, 2, [28]),
    ("L-30", "*", 2026, 5, [1]),
    ("L-30", "*", 2026, 11, []),
    ("1,L", "*", 2026, 2, [1, 28]),
    # --- LW ---------------------------------------------------------------------------
    ("LW", "*", 2026, 2, [27]),  # the 28th is a Saturday
    ("LW", "*", 2027, 2, [26]),  # the 28th is a Sunday
    ("LW", "*", 2028, 2, [29]),  # a Tuesday
    ("LW", "*", 2026, 5, [29]),  # the 31st is a Sunday
    ("LW", "*", 2026, 8, [31]),  # a Monday
    ("LW", "*", 2028, 4, [28]),  # the 30th is a Sunday
    # --- nW ---------------------------------------------------------------------------
    ("1W", "*", 2026, 8, [3]),  # Saturday the 1st: Monday the 3rd, not July's 31st
    ("1W", "*", 2028, 1, [3]),
    ("1W", "*", 2026, 2, [2]),  # Sunday the 1st: Monday the 2nd
    ("1W", "*", 2026, 5, [1]),  # a Friday
    ("15W", "*", 2026, 2, [16]),  # Sunday: the Monday after
    ("6W", "*", 2027, 2, [5]),  # Saturday: the Friday before
    ("7W", "*", 2027, 2, [8]),  # Sunday: the Monday after
    ("31W", "*", 2026, 5, [29]),  # Sunday the 31st: Friday the 29th, not June's 1st
    ("31W", "*", 2026, 8, [31]),
    ("31W", "*", 2026, 11, []),  # November has no 31st
    ("30W", "*", 2028, 4, [28]),  # Sunday the 30th, the last day: Friday the 28th
    ("29W", "*", 2028, 2, [29]),
    ("29W", "*", 2026, 2, []),  # February 2026 has no 29th
    ("28W", "*", 2026, 2, [27]),  # Saturday the 28th: Friday the 27th
    ("1W,15W", "*", 2026, 2, [2, 16]),
    # --- dL -----------------------------------------------------------------------------
    ("*", "5L", 2026, 2, [27]),
    ("*", "FRIL", 2026, 2, [27]),
    ("*", "friL", 2028, 2, [25]),
    ("*", "0L", 2026, 2, [22]),
    ("*", "7L", 2026, 5, [31]),
    ("*", "2L", 2028, 2, [29]),
    ("?", "6L", 2026, 8, [29]),
    ("*", "1L,5L", 2026, 2, [23, 27]),
    # --- d#n ----------------------------------------------------------------------------
    ("*", "1#2", 2026, 2, [9]),
    ("*", "MON#2", 2026, 2, [9]),
    ("*", "0#1", 2026, 2, [1]),
    ("*", "7#1", 2026, 11, [1]),
    ("*", "6#1", 2026, 8, [1]),
    ("*", "0#1", 2026, 8, [2]),
    ("*", "6#4", 2026, 2, [28]),
    ("*", "1#5", 2026, 2, []),  # no fifth Monday
    ("*", "2#5", 2028, 2, [29]),  # the leap day is the fifth Tuesday
    ("*", "5#5", 2026, 5, [29]),
    ("*", "0#5", 2026, 11, [29]),
    ("*", "1#1,1#3", 2026, 2, [2, 16]),
    ("*", "1,5#1", 2026, 2, [2, 6, 9, 16, 23]),
]


@pytest.mark.parametrize(
    ("day_field", "weekday_field", "year", "month", "expected"),
    MONTH_CASES,
    ids=[f"{d} {w} {y}-{m:02d}" for d, w, y, m, _ in MONTH_CASES],
)
def test_extensions_pick_these_days(
    day_field: str, weekday_field: str, year: int, month: int, expected: list[int]
) -> None:
    assert days_of(day_field, weekday_field, year, month) == expected


@pytest.mark.parametrize(
    ("day_field", "weekday_field", "year", "month", "expected"),
    [
        pytest.param("L", "5", 2026, 2, [6, 13, 20, 27, 28], id="L or Friday"),
        pytest.param("15W", "1#3", 2026, 2, [16], id="15W or the third Monday, the same day"),
        pytest.param("LW", "0#1", 2026, 2, [1, 27], id="LW or the first Sunday"),
        pytest.param("13", "5L", 2026, 2, [13, 27], id="13 or the last Friday"),
        pytest.param("*/2", "5L", 2026, 2, [27], id="odd days and the last Friday"),
        pytest.param("*/2", "1#2", 2026, 2, [9], id="odd days and the second Monday"),
        pytest.param("*/100,22-31", "1L", 2026, 2, [23], id="star first: both"),
        pytest.param("L", "*", 2026, 2, [28], id="star weekday: the last day only"),
        pytest.param("L", "?", 2026, 2, [28], id="question mark weekday: the last day"),
        pytest.param("L", "0-6", 2026, 2, list(range(1, 29)), id="0-6 is no star: every day"),
    ],
)
def test_extensions_combine_by_the_star_rule(
    day_field: str, weekday_field: str, year: int, month: int, expected: list[int]
) -> None:
    assert days_of(day_field, weekday_field, year, month) == expected


@pytest.mark.parametrize(
    ("expression", "sentence"),
    [
        ("0 0 L * *", "At 00:00, on the last day of the month."),
        ("0 0 L-1 * *", "At 00:00, on the second-to-last day of the month."),
        ("0 0 L-2 * *", "At 00:00, on the third-to-last day of the month."),
        ("0 0 L-20 * *", "At 00:00, on the 21st-to-last day of the month."),
        ("0 0 LW * *", "At 00:00, on the last weekday of the month."),
        ("0 0 15W * *", "At 00:00, on the weekday nearest day 15 of the month."),
        ("0 0 1,L * *", "At 00:00, on day 1 and the last day of the month."),
        ("0 0 * * 5L", "At 00:00, on the last Friday of the month."),
        ("0 0 ? * FRIL", "At 00:00, on the last Friday of the month."),
        ("0 0 * * 1#2", "At 00:00, on the second Monday of the month."),
        ("0 0 * * mon#3,fri#1", "At 00:00, on the first Friday and the third Monday of the month."),
        ("0 0 * * 1,5#1", "At 00:00, on Monday and the first Friday of the month."),
        ("0 0 L * 5", "At 00:00, on the last day of the month or on Friday."),
        ("0 0 */2 * 5L",
         "At 00:00, on days 1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23, 25, 27, 29 and 31 of "
         "the month, but only on the last Friday of the month."),
        ("0 9 * 2 1#5", "At 09:00, on the fifth Monday of the month, in February."),
    ],
)  # fmt: skip
def test_explain_words_the_extensions(expression: str, sentence: str) -> None:
    assert explain(expression) == sentence


@pytest.mark.parametrize(
    ("expression", "problem"),
    [
        ("0 0 L/2 * *", "day-of-month 'L' cannot be part of a range or take a step"),
        ("0 0 1-L * *", "day-of-month 'L' cannot be part of a range or take a step"),
        ("0 0 LW/2 * *", "day-of-month 'LW' cannot be part of a range or take a step"),
        ("0 0 L-31 * *", "day-of-month 'L-31' is out of range: L-n takes n from 0 to 30"),
        ("0 0 L-x * *", "day-of-month 'L-X' is out of range: L-n takes n from 0 to 30"),
        ("0 0 32W * *", "day-of-month 32 is out of range 1-31"),
        ("0 0 0W * *", "day-of-month 0 is out of range 1-31"),
        ("0 0 W * *", "day-of-month 'W': W follows one day"),
        ("0 0 1-5W * *", "day-of-month '1-5W': W takes one day, not a range"),
        ("0 0 15W/2 * *", "day-of-month '15W' cannot be part of a range or take a step"),
        ("0 0 WL * *", "day-of-month 'WL': W follows one day"),
        ("0 0 * * L", "day-of-week L needs a weekday before it"),
        ("0 0 * * 8L", "day-of-week 8 is out of range 0-7"),
        ("0 0 * * 5L/2", "day-of-week '5L' cannot be part of a range or take a step"),
        ("0 0 * * 1-5L", "day-of-week '5L' cannot be part of a range or take a step"),
        ("0 0 * * 5#0", "day-of-week '5#0': the week after # must be 1 to 5"),
        ("0 0 * * 5#6", "day-of-week '5#6': the week after # must be 1 to 5"),
        ("0 0 * * 5#", "day-of-week '5#': the week after # must be 1 to 5"),
        ("0 0 * * #2", "day-of-week '#2': # takes one weekday"),
        ("0 0 * * 1-5#2", "day-of-week '1-5#2': # takes one weekday"),
        ("0 0 * * 8#1", "day-of-week 8 is out of range 0-7"),
        ("0 0 * * xyz#1", "day-of-week value 'xyz' is not a number or a name"),
        ("0 0 5#2 * *", "day-of-month '5#2': # belongs in day-of-week"),
        ("0 0 * * 15W", "day-of-week '15W': W belongs in day-of-month"),
        (
            "L * * * *",
            "minute value 'l' is not a number; L, W and # are only allowed in the day fields",
        ),
        (
            "0 L * * *",
            "hour value 'l' is not a number; L, W and # are only allowed in the day fields",
        ),
        (
            "0 0 * L *",
            "month value 'l' is not a number or a name; L, W and # are only allowed in the day",
        ),
        ("0 0 30W 2 *", "day-of-month '30W' and day-of-week '*' match no day in February"),
        ("0 0 L-29 2 *", "match no day in February"),
        ("0 0 */100 * 5L", "day-of-month '*/100' and day-of-week '5L' match no day"),
    ],
)
def test_misused_extensions_are_refused_naming_the_field(expression: str, problem: str) -> None:
    with pytest.raises(ScheduleError) as caught:
        parse_fields(expression)
    assert problem in caught.value.problem


def test_a_fifth_monday_in_february_waits_for_a_leap_year_that_has_one() -> None:
    ticks = parse_schedule("0 0 * 2 1#5")
    assert ticks.next_tick(datetime(2026, 1, 1, tzinfo=UTC)) == datetime(2044, 2, 29, tzinfo=UTC)
    assert ticks.prev_tick(datetime(2044, 2, 28, tzinfo=UTC)) == datetime(2016, 2, 29, tzinfo=UTC)


def test_a_leap_day_on_a_sunday_can_be_forty_years_away() -> None:
    # Both fields must match ("*/7" starts with a star): 29 February that is a Sunday.
    ticks = parse_schedule("0 0 29 2 */7")
    found = list(ticks.ticks(datetime(2026, 1, 1, tzinfo=UTC), datetime(2200, 1, 1, tzinfo=UTC)))
    assert [tick.year for tick in found] == [2032, 2060, 2088, 2128, 2156, 2184]
    assert ticks.prev_tick(datetime(2128, 2, 28, tzinfo=UTC)) == datetime(2088, 2, 29, tzinfo=UTC)
    assert (
        ticks.count_ticks(datetime(2026, 1, 1, tzinfo=UTC), datetime(2200, 1, 1, tzinfo=UTC)) == 6
    )


def test_counting_a_year_of_last_fridays_is_computed() -> None:
    ticks = parse_schedule("*/5 * * * 5L", time_zone="Europe/Berlin")
    first = datetime(2026, 1, 1, tzinfo=UTC)
    # 12 last Fridays of 288 five-minute ticks, none on a daylight-saving day.
    assert ticks.count_ticks(first, first + timedelta(days=365)) == 12 * 288


def months_of(first: date, count: int) -> list[tuple[int, int]]:
    return [(first.year + (first.month - 1 + n) // 12, (first.month - 1 + n) % 12 + 1) for n in
            range(count)]  # fmt: skip


FOUR_YEARS = months_of(date(2026, 1, 1), 48)  # 2028 is a leap year


@settings(
    max_examples=120, deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow]
)
@given(drawn_day_rules())
def test_day_rules_match_the_reference_over_four_years(
    drawn: tuple[DrawnDays, ReferenceCron],
) -> None:
    days, reference = drawn
    expression = f"0 12 {days.day_text} {days.month_text} {days.weekday_text}"
    ticks = parse_schedule(expression)
    rule = ticks.fields.day_rule
    expected_total = 0
    for year, month in FOUR_YEARS:
        expected = sorted(matching_days(reference, year, month))
        assert list(rule.days_in(year, month)) == expected, (expression, year, month)
        expected_total += len(expected)
    first = datetime(2026, 1, 1, tzinfo=UTC)
    last = datetime(2030, 1, 1, tzinfo=UTC)
    assert ticks.count_ticks(first, last) == expected_total
    found = list(ticks.ticks(first, datetime(2026, 7, 1, tzinfo=UTC)))
    wanted = [
        datetime(year, month, day, 12, tzinfo=UTC)
        for year, month in FOUR_YEARS[:6]
        for day in sorted(matching_days(reference, year, month))
    ]
    assert found == wanted
