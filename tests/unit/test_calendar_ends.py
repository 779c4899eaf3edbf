"""Instants at the ends of the calendar: InvalidSpec naming the field, never a traceback.

Found by tests/e2e/test_random_specs.py (issue 25, item 3): the API server's date-time
format takes 9999-12-31T23:59:59-01:00 and 0001-01-01T00:00:00+01:00, which are outside
what Python's datetime holds in UTC, and takes runAt, startTime and exclusions on the
calendar's first and last days, which planning steps past (a zone's offset, the jitter,
the tick before). Each raised OverflowError (or ValueError) out of decide(): the
operator logged a traceback every 5 s and never wrote the schedule a status.
"""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from typing import Any

import pytest

from punctual.core.times import as_utc, parse_time

from .builders import CREATED, T0, condition, run, schedule_body, spec_body

OUT_OF_UTC = [
    ({"schedule": None, "runAt": "9999-12-31T23:59:59-01:00"}, "spec.runAt"),
    ({"startTime": "0001-01-01T00:00:00+01:00"}, "spec.startTime"),
    ({"endTime": "9999-12-31T23:30:00-01:00"}, "spec.endTime"),
    ({"suspendUntil": "9999-12-31T23:30:00-01:00"}, "spec.suspendUntil"),
    (
        {"exclude": [{"from": "0001-01-01T00:00:00+01:00", "to": "2027-01-01T00:00:00Z"}]},
        "spec.exclude[0].from",
    ),
]
AT_THE_ENDS = [
    ({"schedule": None, "runAt": "9999-12-31T23:59:59Z", "jitterSeconds": 3600}, "spec.runAt"),
    (
        {"schedule": None, "runAt": "0001-01-01T00:00:00Z", "startingDeadlineSeconds": 60},
        "spec.runAt",
    ),
    ({"schedule": "* * * * * *", "startTime": "0001-01-01T00:00:00Z"}, "spec.startTime"),
    (
        {"exclude": [{"from": "0001-01-01T00:00:00Z", "to": "9999-12-31T23:59:59Z"}]},
        "spec.exclude[0].from",
    ),
    ({"exclude": [{"dates": ["2027-01-01", "9999-12-31"]}]}, "spec.exclude[0].dates[1]"),
]


@pytest.mark.parametrize(("overrides", "field_name"), OUT_OF_UTC + AT_THE_ENDS)
def test_an_instant_at_the_calendars_ends_is_invalid_spec_naming_its_field(
    overrides: dict[str, Any], field_name: str
) -> None:
    decision = run(schedule_body(spec_body(**overrides), created=CREATED), now=T0)

    assert decision.status is not None and decision.creates == ()
    invalid = condition(decision.status, "InvalidSpec")
    assert invalid["status"] == "True"
    assert invalid["message"].startswith(field_name + ":"), invalid["message"]
    assert condition(decision.status, "Ready")["reason"] == "InvalidSpec"


def test_an_end_time_on_the_last_day_is_a_schedule_without_end() -> None:
    """`endTime: 9999-12-31T23:59:59Z` means "forever" to a user: still valid."""
    spec = spec_body(endTime="9999-12-31T23:59:59Z", jitterSeconds=3600)
    decision = run(schedule_body(spec, created=CREATED), now=T0)

    assert decision.status is not None
    assert condition(decision.status, "Ready")["reason"] == "Scheduled"


def test_as_utc_says_out_of_range_as_a_value_error() -> None:
    with pytest.raises(ValueError, match="outside the years 1-9999 in UTC"):
        as_utc(datetime(9999, 12, 31, 23, 59, 59, tzinfo=timezone(-timedelta(hours=1))))
    with pytest.raises(ValueError, match="outside the years 1-9999 in UTC"):
        parse_time("9999-12-31T23:59:59-01:00")
