"""Calendars: named lists of exclusions, kept by a platform team, shared by schedules.

Why it exists: a holiday list is the same for many teams; copied into every schedule's
spec.exclude, it is edited in many places or, more often, in a few of them. A Calendar
is cluster-scoped: `spec.exclude` (the entries of a CronSchedule's spec.exclude: cron
expressions, whole dates, ranges of instants) and an optional `spec.timeZone`. A
CronSchedule names Calendars in `spec.excludeCalendars`, and their entries are its own
exclusions (`with_calendars`):

* A Calendar's cron and dates entries are read in the entry's timeZone, else the
  Calendar's, else the schedule's: `us-holidays` with timeZone America/New_York removes
  the instants of New York's 4 July from a Europe/Berlin schedule, and a Calendar
  without a zone means each schedule's own local dates.
* Its entries count as the schedule's: the schedule's fingerprint covers them, so an
  edit of the Calendar is an edit of each schedule that names it (the cursor moves to
  now, as for spec.exclude; an edit never fires an old tick).
* A named Calendar that does not exist, or cannot be used, holds the schedule: nothing
  fires (better than firing on a holiday), InvalidSpec names the Calendar, and the
  cursor moves to now once it is there (no tick of the held period fires).

What it must never do: talk to the API server, read the clock, or plan ticks
(`planning` does, from the spec returned here).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from pydantic import Field, ValidationError

from punctual.core.freezing import invalid_condition
from punctual.core.models import (
    MAX_EXCLUSIONS,
    CronScheduleSpec,
    Exclusion,
    _ApiModel,
    describe_error,
)
from punctual.core.planning import tick_source
from punctual.core.schedules import ScheduleError, load_zone, parse_fields


class CalendarSpec(_ApiModel):
    exclude: list[Exclusion] = Field(default_factory=list, max_length=MAX_EXCLUSIONS)
    time_zone: str | None = Field(default=None, min_length=1, max_length=64)


@dataclass(frozen=True, slots=True)
class Calendar:
    """One usable Calendar: its name and its entries, each with the zone it is read in
    (its own, else the Calendar's; None: the schedule's)."""

    name: str
    exclude: tuple[Exclusion, ...]


# A Calendar as the operator knows it: usable, or why not (one line naming the field).
Known = Mapping[str, Calendar | str]


def read_calendar(body: Mapping[str, Any]) -> Calendar | str:
    """A Calendar object as a Calendar, or why it is unusable (one line naming the field)."""
    name = str((body.get("metadata") or {}).get("name", ""))
    try:
        spec = CalendarSpec.model_validate(body.get("spec") or {})
    except ValidationError as error:
        return describe_error(error)
    try:
        if spec.time_zone is not None:
            load_zone(spec.time_zone)
    except ScheduleError:
        return f'spec.timeZone: unknown time zone "{spec.time_zone}"'
    zone = spec.time_zone
    entries = tuple(
        e
        if e.time_zone is not None or e.start is not None or zone is None
        else e.model_copy(update={"time_zone": zone})
        for e in spec.exclude
    )
    # The entries as a schedule's: the same checks, the same words (spec.exclude[2].cron);
    # and no H: a Calendar is no one schedule's, so it has no uid to hash.
    try:
        for index, entry in enumerate(entries):
            if entry.cron is not None:
                try:
                    parse_fields(entry.cron)
                except ScheduleError as error:
                    raise error.at(f"exclude[{index}].cron") from None
        tick_source(CronScheduleSpec(schedule="0 0 * * *", exclude=list(entries)), uid="")
    except ScheduleError as error:
        return error.reason
    return Calendar(name, entries)


def with_calendars(spec: CronScheduleSpec, known: Known) -> CronScheduleSpec | str:
    """The spec with its Calendars' entries after its own spec.exclude, or why it is held
    (a Calendar missing or unusable, named)."""
    if not spec.exclude_calendars:
        return spec
    added: list[Exclusion] = []
    for index, name in enumerate(spec.exclude_calendars):
        if name in spec.exclude_calendars[:index]:
            continue
        found = known.get(name)
        field = f"spec.excludeCalendars[{index}]"
        if found is None:
            return f"{field}: Calendar {name} not found; nothing fires until it exists"
        if isinstance(found, str):
            return f"{field}: Calendar {name} is invalid ({found}); nothing fires until it is fixed"
        added.extend(found.exclude)
    return spec.model_copy(update={"exclude": [*spec.exclude, *added]})


def referencing(spec: Mapping[str, Any], name: str) -> bool:
    """Whether a raw CronSchedule spec names Calendar `name` (to wake it on a change)."""
    names = spec.get("excludeCalendars")
    return isinstance(names, list) and name in names


def calendar_status(body: Mapping[str, Any], schedules: int, now: datetime) -> dict[str, Any]:
    """The status a Calendar should have: how many CronSchedules name it, and InvalidSpec
    (why it holds them) when it cannot be used."""
    read = read_calendar(body)
    invalid = read if isinstance(read, str) else None
    return {"schedules": schedules, "conditions": [invalid_condition(body, invalid, now)]}
