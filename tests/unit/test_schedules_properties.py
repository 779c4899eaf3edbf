"""Property tests: the tick math against a brute-force walk of every minute or second.

Each example draws cron fields (plain cron, cronie's corners such as `5-5`, `*,5`
and `*/100,1-7`, and the extensions L, L-n, LW, nW, dL, d#n), a zone and a span
(mostly around a daylight-saving change, where mistakes live, in zones that shift
by an hour, by 30 minutes, at -3:30, at +12:45 and at midnight), then compares
Punctual's enumeration, previous tick and computed count with `cron_reference`,
which walks every step and applies the fields and cronie's rules directly.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from itertools import pairwise

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from punctual.core.schedules import parse_schedule
from tests.unit.cron_reference import Drawn, drawn_schedules, reference_ticks

FAST = settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow], database=None
)


def check_against_reference(drawn: Drawn) -> None:
    ticks = parse_schedule(drawn.expression, time_zone=drawn.zone.key)
    expected = reference_ticks(drawn.reference, drawn.zone, drawn.after, drawn.until)
    assert list(ticks.ticks(drawn.after, drawn.until)) == expected
    assert ticks.count_ticks(drawn.after, drawn.until) == len(expected)
    if expected:
        assert ticks.prev_tick(drawn.until) == expected[-1]
        for earlier, later in pairwise(expected):
            assert ticks.prev_tick(later - timedelta(microseconds=1)) == earlier
            middle = earlier + (later - earlier) / 2
            assert ticks.next_tick(middle) == later


@FAST
@given(drawn_schedules(seconds=True), st.lists(st.floats(0, 1), min_size=1, max_size=12))
def test_answers_kept_from_earlier_questions_are_the_answers_asked_afresh(
    drawn: Drawn, fractions: list[float]
) -> None:
    """Tick sources keep answers (`ticks.REMEMBERED`; a decision asks the same question two to four
    times): asked again, in any order, one instance says what a new instance says."""
    asked = parse_schedule(drawn.expression, time_zone=drawn.zone.key)
    span = drawn.until - drawn.after
    instants = [drawn.after + span * f for f in fractions]
    tick = asked.next_tick(instants[0])  # and the seconds about a tick, where answers change
    if tick is not None:
        instants += [tick + timedelta(seconds=d) for d in (-2, -1, 0, 1, 2)]
    for instant in [*instants, *reversed(instants), *instants]:
        fresh = parse_schedule(drawn.expression, time_zone=drawn.zone.key)
        assert asked.next_tick(instant) == fresh.next_tick(instant)
        assert asked.prev_tick(instant) == fresh.prev_tick(instant)


@settings(FAST, max_examples=250)
@given(drawn_schedules())
def test_minute_schedules_match_a_walk_of_every_minute(drawn: Drawn) -> None:
    check_against_reference(drawn)


@settings(FAST, max_examples=80)
@given(drawn_schedules(seconds=True))
def test_second_schedules_match_a_walk_of_every_second(drawn: Drawn) -> None:
    check_against_reference(drawn)


@FAST
@given(drawn_schedules(), st.floats(0, 1), st.floats(0, 1))
def test_counting_adds_up(drawn: Drawn, first: float, second: float) -> None:
    ticks = parse_schedule(drawn.expression, time_zone=drawn.zone.key)
    span = drawn.until - drawn.after
    low, high = sorted((first, second))
    middle_a = drawn.after + span * low
    middle_b = drawn.after + span * high
    assert ticks.count_ticks(drawn.after, middle_a) + ticks.count_ticks(
        middle_a, middle_b
    ) + ticks.count_ticks(middle_b, drawn.until) == ticks.count_ticks(drawn.after, drawn.until)


LONG_SPAN_EXPRESSIONS = [
    "0 2 * * *", "30 1 * * *", "15 */3 * * *", "0 0 L * *", "0 9 13 * 5", "0 0 29 2 *",
    "30 2 LW * *", "*/30 1 * * 0#1", "15 2 * * 0L", "0 3 15W * *", "45 1 L-2 * *",
    "*/20 2 */100,1-7 * 0", "0 0 * 2 2#5", "30 0 1W * *", "0 2 * * 0#2",
]  # fmt: skip
LONG_SPAN_ZONES = [
    "Europe/Berlin", "America/New_York", "Australia/Lord_Howe", "America/St_Johns",
    "Asia/Kolkata", "Pacific/Chatham", "Asia/Tehran", "UTC",
]  # fmt: skip


@settings(FAST, max_examples=60)
@given(
    st.sampled_from(LONG_SPAN_EXPRESSIONS),
    st.sampled_from(LONG_SPAN_ZONES),
    st.integers(0, 3 * 365 * 86400),
    st.integers(1, 4 * 365),
)
def test_counting_long_spans_agrees_with_walking(
    expression: str, zone: str, start: int, days: int
) -> None:
    ticks = parse_schedule(expression, time_zone=zone)
    after = datetime(2024, 1, 1, tzinfo=UTC) + timedelta(seconds=start)
    until = after + timedelta(days=days)
    assert ticks.count_ticks(after, until) == sum(1 for _ in ticks.ticks(after, until))


@FAST
@given(drawn_schedules(), st.lists(st.floats(0, 1), min_size=1, max_size=10))
def test_every_start_point_before_a_tick_lands_on_it(drawn: Drawn, fractions: list[float]) -> None:
    ticks = parse_schedule(drawn.expression, time_zone=drawn.zone.key)
    tick = ticks.next_tick(drawn.after)
    assert tick is not None
    previous = ticks.prev_tick(tick - timedelta(microseconds=1))
    floor = previous if previous is not None else tick - timedelta(days=1)
    for fraction in fractions:
        start = floor + (tick - floor) * fraction
        if start < tick:
            assert ticks.next_tick(start) == tick
