"""Calendars: exclusions in a zone of their own, reading a Calendar, and a schedule that
names one (its dates skipped; held while it is missing or invalid; an edit is an edit).

The zone cases cross both March clock changes of 2026: America/New_York on the 8th,
Europe/Berlin on the 29th, and are checked against a brute-force walk of every tick.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, date, datetime
from typing import Any
from zoneinfo import ZoneInfo

import pytest

from punctual.core.calendars import (
    Calendar,
    Known,
    calendar_status,
    read_calendar,
    with_calendars,
)
from punctual.core.deciding import decide
from punctual.core.decisions import Decision
from punctual.core.models import CronScheduleSpec, Exclusion
from punctual.core.planning import schedule_fingerprint, tick_source
from punctual.core.schedules import CombinedTicks, parse_fields, parse_schedule

from .builders import LEADER, T0, H, M, S, condition, events, iso, schedule_body, spec_body

NEW_YORK, BERLIN, KOLKATA = (
    ZoneInfo(z) for z in ("America/New_York", "Europe/Berlin", "Asia/Kolkata")
)
MARCH = datetime(2026, 3, 5, tzinfo=UTC)
APRIL = datetime(2026, 4, 1, tzinfo=UTC)


def walk(
    next_tick: Callable[[datetime], datetime | None], start: datetime, end: datetime
) -> list[datetime]:
    ticks, at = [], start
    while (found := next_tick(at)) is not None and found < end:
        ticks.append(found)
        at = found
    return ticks


def brute(keep: Callable[[datetime], bool]) -> list[datetime]:
    """Every tick of `*/20 * * * *` in Berlin from MARCH to APRIL that `keep` keeps."""
    plain = parse_schedule("*/20 * * * *", time_zone="Europe/Berlin")
    return [t for t in walk(plain.next_tick, MARCH, APRIL) if keep(t)]


def sunday_night_in_new_york(tick: datetime) -> bool:
    local = tick.astimezone(NEW_YORK)
    return local.weekday() == 6 and 1 <= local.hour <= 3


@pytest.mark.parametrize(
    ("exclusions", "excluded"),
    [
        ({"zoned_wall": [(parse_fields("* 1-3 * * 0"), NEW_YORK)]}, sunday_night_in_new_york),
        ({"zoned_dates": [(date(2026, 3, 29), KOLKATA)]},
         lambda t: t.astimezone(KOLKATA).date() == date(2026, 3, 29)),
        ({"zoned_wall": [(parse_fields("* * 8 3 *"), NEW_YORK)],
          "wall": [parse_fields("* 2 * * *")]},
         lambda t: t.astimezone(NEW_YORK).date() == date(2026, 3, 8)
         or t.astimezone(BERLIN).hour == 2),
    ],
    ids=["new-york-cron", "kolkata-date", "new-york-date-and-berlin-cron"],
)  # fmt: skip
def test_an_exclusion_in_its_own_zone_removes_what_a_brute_force_walk_removes(
    exclusions: dict[str, Any], excluded: Callable[[datetime], bool]
) -> None:
    entry = parse_schedule("*/20 * * * *", time_zone="Europe/Berlin")
    ticks = CombinedTicks([entry], zone=BERLIN, **exclusions)
    expected = brute(lambda t: not excluded(t))
    assert walk(ticks.next_tick, MARCH, APRIL) == expected
    assert ticks.count_ticks(MARCH, APRIL - S) == len(expected)
    assert ticks.prev_tick(APRIL - S) == expected[-1]
    middle = expected[len(expected) // 2]
    assert ticks.prev_tick(middle + 19 * M) == middle


def test_an_exclusion_in_the_schedules_own_zone_is_the_plain_one() -> None:
    entry = parse_schedule("0 * * * *", time_zone="Europe/Berlin")
    plain = CombinedTicks([entry], zone=BERLIN, wall=[parse_fields("* 9-17 * * *")])
    zoned = CombinedTicks([entry], zone=BERLIN, zoned_wall=[(parse_fields("* 9-17 * * *"), BERLIN)])
    assert walk(plain.next_tick, MARCH, APRIL) == walk(zoned.next_tick, MARCH, APRIL)


def test_a_spec_exclusion_may_name_its_zone_and_a_range_may_not() -> None:
    spec = CronScheduleSpec(
        schedule="0 12 * * *",
        exclude=[Exclusion(dates=(date(2026, 11, 26),), time_zone="Pacific/Kiritimati")],
    )
    ticks = tick_source(spec, uid="u")
    # 26 November in Kiritimati (UTC+14) is 10:00 on the 25th to 10:00 on the 26th, UTC.
    assert ticks.next_tick(T0 - S) == datetime(2026, 11, 26, 12, tzinfo=UTC)
    with pytest.raises(ValueError, match="timeZone needs cron or dates"):
        Exclusion.model_validate({"from": iso(T0), "to": iso(T0 + H), "timeZone": "UTC"})


# -- reading a Calendar ------------------------------------------------------------------


def calendar_body(name: str = "us-holidays", **spec: Any) -> dict[str, Any]:
    return {"metadata": {"name": name}, "spec": spec}


US_HOLIDAYS = calendar_body(
    timeZone="America/New_York",
    exclude=[
        {"dates": ["2026-11-26", "2026-12-25"]},
        {"cron": "* * 4 7 *", "timeZone": "UTC"},
        {"from": "2026-12-31T00:00:00Z", "to": "2027-01-01T00:00:00Z"},
    ],
)


def test_a_calendars_zone_goes_to_its_entries_unless_they_name_their_own() -> None:
    calendar = read_calendar(US_HOLIDAYS)
    assert isinstance(calendar, Calendar) and calendar.name == "us-holidays"
    assert [e.time_zone for e in calendar.exclude] == ["America/New_York", "UTC", None]
    unzoned = read_calendar(calendar_body(exclude=[{"dates": ["2026-11-26"]}]))
    assert isinstance(unzoned, Calendar) and unzoned.exclude[0].time_zone is None


@pytest.mark.parametrize(
    ("spec", "error"),
    [
        ({"timeZone": "Mars/Olympus", "exclude": []},
         'spec.timeZone: unknown time zone "Mars/Olympus"'),
        ({"exclude": [{"cron": "0 25 * * *"}]}, "spec.exclude[0].cron: "),
        ({"exclude": [{"cron": "H * * * *"}]}, "spec.exclude[0].cron: H fields need"),
        ({"exclude": [{"dates": ["2026-11-26"], "timeZone": "Nowhere"}]},
         "spec.exclude[0].timeZone"),
        ({"exclude": [{"dates": ["2026-11-26"], "cron": "* * * * *"}]}, "set exactly one of"),
    ],
)  # fmt: skip
def test_an_unusable_calendar_says_why_naming_the_field(spec: dict[str, Any], error: str) -> None:
    problem = read_calendar(calendar_body(**spec))
    assert isinstance(problem, str) and error in problem, problem
    status = calendar_status(calendar_body(**spec), 2, T0)
    assert status["schedules"] == 2
    assert (
        status["conditions"][0]["status"] == "True" and error in status["conditions"][0]["message"]
    )


def test_a_valid_calendars_status_keeps_its_transition_time() -> None:
    body = {**US_HOLIDAYS, "status": calendar_status(US_HOLIDAYS, 0, T0)}
    later = calendar_status(body, 3, T0 + H)
    assert later["conditions"][0]["status"] == "False"
    assert later["conditions"][0]["lastTransitionTime"] == iso(T0)


# -- a schedule naming Calendars -----------------------------------------------------------


def known(*bodies: dict[str, Any]) -> Known:
    return {b["metadata"]["name"]: read_calendar(b) for b in bodies}


def test_a_schedules_calendars_follow_its_own_exclusions_once_each() -> None:
    own = {"cron": "0 0 1 1 *"}
    spec = CronScheduleSpec.model_validate(
        {
            "schedule": "0 * * * *",
            "exclude": [own],
            "excludeCalendars": ["us-holidays", "us-holidays"],
        }
    )
    folded = with_calendars(spec, known(US_HOLIDAYS))
    assert isinstance(folded, CronScheduleSpec)
    dates = (date(2026, 11, 26), date(2026, 12, 25))
    new_year = datetime(2026, 12, 31, tzinfo=UTC)
    assert [e.cron or e.dates or e.start for e in folded.exclude] == [
        "0 0 1 1 *", dates, "* * 4 7 *", new_year
    ]  # fmt: skip
    assert with_calendars(CronScheduleSpec(schedule="0 * * * *"), {}) is not None


def test_a_missing_or_invalid_calendar_is_named() -> None:
    spec = CronScheduleSpec.model_validate(
        {"schedule": "0 * * * *", "excludeCalendars": ["us-holidays", "eu-holidays"]}
    )
    missing = with_calendars(spec, known(US_HOLIDAYS))
    assert missing == (
        "spec.excludeCalendars[1]: Calendar eu-holidays not found; nothing fires until it exists"
    )
    broken = calendar_body("eu-holidays", timeZone="Nowhere")
    invalid = with_calendars(spec, known(US_HOLIDAYS, broken))
    assert isinstance(invalid, str)
    assert invalid.startswith(
        "spec.excludeCalendars[1]: Calendar eu-holidays is invalid (spec.timeZone"
    )


def test_run_at_cannot_name_calendars() -> None:
    with pytest.raises(ValueError, match="excludeCalendars needs schedule or schedules"):
        CronScheduleSpec.model_validate({"runAt": iso(T0), "excludeCalendars": ["us-holidays"]})


# T0 is 12:00 UTC on Wednesday 25 November 2026; in New York, 07:00 that day.
THANKSGIVING_EVE = calendar_body(
    "office", timeZone="America/New_York", exclude=[{"dates": ["2026-11-25"]}]
)
HOURLY_WITH_OFFICE = spec_body(excludeCalendars=["office"])


def fingerprint_with(spec: dict[str, Any], calendars: Known) -> str:
    folded = with_calendars(CronScheduleSpec.model_validate(spec), calendars)
    assert isinstance(folded, CronScheduleSpec)
    return schedule_fingerprint(folded)


def calendar_run(now: datetime, calendars: Known, status: dict[str, Any] | None = None) -> Decision:
    if status is None:
        status = {
            "lastScheduledTime": iso(T0 - H),
            "scheduleFingerprint": fingerprint_with(HOURLY_WITH_OFFICE, calendars),
        }
    body = schedule_body(HOURLY_WITH_OFFICE, status, created=T0 - 5 * H)
    return decide(body, [], now=now, leadership=LEADER, calendars=calendars)


def test_a_schedule_fires_nothing_on_its_calendars_dates_in_the_calendars_zone() -> None:
    calendars = known(THANKSGIVING_EVE)
    decision = calendar_run(T0 + S, calendars)
    assert decision.creates == ()
    status = decision.status or {}
    # The next tick is the first hour of 26 November in New York: 05:00 UTC.
    assert status["nextScheduleTime"] == iso(datetime(2026, 11, 26, 5, tzinfo=UTC))
    assert condition(status, "Ready")["status"] == "True"
    # The same schedule under another Calendar body: an edit, so the cursor moves to now.
    before = {
        "lastScheduledTime": iso(T0 - H),
        "scheduleFingerprint": fingerprint_with(HOURLY_WITH_OFFICE, calendars),
    }
    edited = known(calendar_body("office", exclude=[{"dates": ["2026-11-24"]}]))
    fires = calendar_run(T0 + S, edited, status=before)
    assert fires.creates == () and (fires.status or {})["lastScheduledTime"] == iso(T0 + S)
    unedited = calendar_run(T0 + S, edited)  # the fingerprint already of this body
    assert [c.tick for c in unedited.creates] == [T0]


def test_a_missing_calendar_holds_the_schedule_and_its_return_fires_no_old_tick() -> None:
    calendars = known(THANKSGIVING_EVE)
    held = calendar_run(T0 + S, {}, status={
        "lastScheduledTime": iso(T0 - H),
        "scheduleFingerprint": fingerprint_with(HOURLY_WITH_OFFICE, calendars),
    })  # fmt: skip
    assert held.creates == ()
    status = held.status or {}
    assert condition(status, "Ready")["reason"] == "InvalidSpec"
    message = condition(status, "InvalidSpec")["message"]
    assert (
        message
        == "spec.excludeCalendars[0]: Calendar office not found; nothing fires until it exists"
    )
    assert events(held, "InvalidSpec") == [("Warning", message)]
    # Back a day later, with the 25th no longer excluded: nothing of the held day fires.
    back = calendar_run(T0 + 24 * H + S, known(calendar_body("office")), status=status)
    assert back.creates == ()
    status = back.status or {}
    assert status["lastScheduledTime"] == iso(T0 + 24 * H + S)
    assert condition(status, "Ready")["status"] == "True"
    assert condition(status, "InvalidSpec")["status"] == "False"
