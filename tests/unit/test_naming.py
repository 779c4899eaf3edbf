"""Job names: one per (schedule, tick), short enough and DNS-1123 valid."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from punctual.core.naming import (
    MAX_JOB_NAME_LENGTH,
    MAX_SCHEDULE_NAME_LENGTH,
    job_name,
    parse_tick_from_job_name,
)
from punctual.core.schedules import parse_schedule

DNS_1123_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")

schedule_names = st.from_regex(r"\A[a-z0-9]([-a-z0-9]{0,50}[a-z0-9])?\Z")
ticks = st.integers(0, 9_999_999_999).map(
    lambda seconds: datetime(1970, 1, 1, tzinfo=UTC) + timedelta(seconds=seconds)
)


def test_name_is_schedule_name_and_unix_seconds() -> None:
    tick = datetime(2026, 11, 25, 2, 0, tzinfo=UTC)
    assert job_name("nightly-report", tick) == "nightly-report-1795572000"


def test_the_two_fall_back_0130s_get_different_names() -> None:
    ticks_ = parse_schedule("30 * * * *", time_zone="America/New_York")
    first = ticks_.next_tick(datetime(2026, 11, 1, 5, 0, tzinfo=UTC))
    assert first is not None
    second = ticks_.next_tick(first)
    assert second is not None
    assert first.astimezone(ticks_.zone).strftime("%H:%M") == "01:30"
    assert second.astimezone(ticks_.zone).strftime("%H:%M") == "01:30"
    assert job_name("report", first) != job_name("report", second)


def test_longest_schedule_name_fits() -> None:
    name = "a" * MAX_SCHEDULE_NAME_LENGTH
    latest = datetime(2286, 11, 20, 17, 46, 39, tzinfo=UTC)  # 9999999999
    assert len(job_name(name, latest)) == MAX_JOB_NAME_LENGTH


@pytest.mark.parametrize(
    ("name", "tick", "message"),
    [
        ("a" * 53, datetime(2026, 1, 1, tzinfo=UTC), "longer than 52"),
        ("Upper", datetime(2026, 1, 1, tzinfo=UTC), "not a DNS-1123 name"),
        ("ok", datetime(1969, 12, 31, tzinfo=UTC), "before 1970"),
        ("a" * 52, datetime(2300, 1, 1, tzinfo=UTC), "longer than 63"),
        ("ok", datetime(2026, 1, 1), "aware"),  # noqa: DTZ001 - naive on purpose
    ],
)
def test_bad_inputs_are_refused(name: str, tick: datetime, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        job_name(name, tick)


@settings(max_examples=200, deadline=None, database=None)
@given(schedule_names, ticks, ticks)
def test_names_are_valid_short_and_distinct(name: str, first: datetime, second: datetime) -> None:
    one, other = job_name(name, first), job_name(name, second)
    assert len(one) <= MAX_JOB_NAME_LENGTH
    assert DNS_1123_SUBDOMAIN.fullmatch(one)
    assert (one == other) == (first == second)
    assert parse_tick_from_job_name(name, one) == first


@settings(max_examples=200, deadline=None, database=None)
@given(schedule_names, schedule_names, ticks, ticks)
def test_names_of_different_schedules_never_collide(
    name: str, other_name: str, tick: datetime, other_tick: datetime
) -> None:
    # "a-1" at tick 2 and "a" at tick "1-2" cannot both exist: the suffix is digits only.
    if name != other_name:
        assert job_name(name, tick) != job_name(other_name, other_tick)


def test_sub_second_ticks_name_the_whole_second() -> None:
    tick = datetime(2026, 1, 1, tzinfo=UTC)
    assert job_name("x", tick + timedelta(milliseconds=999)) == job_name("x", tick)


@pytest.mark.parametrize(
    "name",
    ["other-1795572000", "report-", "report-abc", "report-01795572000", "report-1795572000x"],
)
def test_foreign_names_have_no_tick(name: str) -> None:
    assert parse_tick_from_job_name("report", name) is None


@settings(max_examples=300, deadline=None, database=None)
@given(schedule_names, st.text(alphabet="0123456789٣x-", max_size=10))
def test_a_name_read_as_a_tick_is_that_ticks_own_name(name: str, suffix: str) -> None:
    """`claiming.Ahead` takes a name the parse reads as the tick's own name: so the parse
    must take no second spelling of it (a leading zero, a non-ASCII digit)."""
    tick = parse_tick_from_job_name(name, f"{name}-{suffix}")
    if tick is not None:
        assert job_name(name, tick) == f"{name}-{suffix}"
