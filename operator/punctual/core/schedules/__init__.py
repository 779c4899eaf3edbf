"""Schedule math: from a cron expression, or a one-shot instant, to UTC ticks.

Why it exists: every decision Punctual makes starts with "which ticks does this
schedule have between these two instants?". This package answers that question and
only that one, in four rooms: `parsing` (text to expanded fields), `zones` (local
days cut where the UTC offset changes), `ticks` (next, previous and how many, under
the daylight-saving rule, without walking) and `explaining` (one English sentence).

What it must never do: read the clock, talk to the API server, know of the
CronSchedule resource, report bad user input any other way than by raising
`ScheduleError`, or loop without a bound.

The rules it implements (see DESIGN.md, "Semantics to get right"):

* 5 fields (minute hour day-of-month month day-of-week), or 6 with a leading
  seconds field; the macros @yearly @annually @monthly @weekly @daily @midnight
  @hourly; `?` for "any" in the day fields; `L` (last day) in day-of-month; `H`,
  `H/n`, `H(a-b)` and `H(a-b)/n` hashed by the schedule's uid. `R` (random), `#`
  (nth weekday) and `W` (nearest weekday) are rejected: they are either not
  deterministic or not covered by the tick counter and its tests.
* Day-of-month and day-of-week: when both are restricted (neither covers every
  value) a day matches if either matches; otherwise both must match (Vixie cron).
* Daylight saving, as in Vixie cron/cronie. The hour field is "periodic" when it
  starts with `*` or `H/` (`*`, `*/2`, `H/3`) and "fixed" otherwise (`2`, `1-5`,
  `H`). On a fall-back day a fixed-hour schedule runs once, at the first
  occurrence of a repeated wall time; a periodic one runs at every real
  occurrence (both 01:30s). A wall time that does not exist on a spring-forward
  day runs once at the first instant after the gap when the hour is fixed, and is
  skipped when the hour is periodic.
* Ticks are whole-second UTC instants.

What croniter 7.0.0 does on those days (pinned by tests/unit/test_croniter_findings.py,
in America/New_York, Europe/Berlin and Australia/Lord_Howe): a spring-forward gap
is right for a `*` hour (skipped) and for a fixed hour (moved to the end of the
gap), but a stepped hour such as `*/2` is moved as if it were fixed; on fall-back
days it runs fixed-hour schedules at both occurrences; and across a 30-minute
fall-back (Lord_Howe) it can skip real second occurrences of a `*` hour. So
croniter only parses and expands expressions here (names, ranges, steps, `H`);
ticks come from a per-day model of our own: each local day cut where the UTC
offset changes, with the expanded fields as sorted lists. The same model counts
ticks arithmetically, so a year of every-second ticks costs a few milliseconds, and
next/previous tick cost a few microseconds on an ordinary day. Ticks exist from
1970 to the year 9000; outside that window there are none (Job names use Unix
seconds, and datetime stops at the year 9999).

Known limit: a local day is assumed to hold at most a few offset changes and not to
be re-entered after midnight by a fall-back that crosses midnight. tzdata has had
no such transition since 2011 (Canadian zones used 00:01 changes until 2010); on
such historical days, counting can be off for periodic-hour schedules.
"""

from punctual.core.schedules.explaining import describe, explain
from punctual.core.schedules.parsing import (
    MACROS,
    MONTH_NAMES,
    WEEKDAY_NAMES,
    CronFields,
    ScheduleError,
    SpecField,
    parse_fields,
    uses_hash,
)
from punctual.core.schedules.ticks import (
    CronTicks,
    OneShot,
    TickSource,
    jitter_offset,
    parse_schedule,
)
from punctual.core.schedules.zones import format_local, load_zone

__all__ = [
    "MACROS",
    "MONTH_NAMES",
    "WEEKDAY_NAMES",
    "CronFields",
    "CronTicks",
    "OneShot",
    "ScheduleError",
    "SpecField",
    "TickSource",
    "clear_caches",
    "describe",
    "explain",
    "format_local",
    "jitter_offset",
    "load_zone",
    "parse_fields",
    "parse_schedule",
    "uses_hash",
]


def clear_caches() -> None:
    """Forget every cached parse, zone and day model (for benchmarks of cold costs)."""
    from punctual.core.schedules import zones

    uses_hash.cache_clear()
    zones.clear_caches()
