"""Schedule math: from a cron expression, or a one-shot instant, to UTC ticks.

Why it exists: every decision Punctual makes starts with "which ticks does this
schedule have between these two instants?". This package answers that question and
only that one, in five rooms: `parsing` (text to expanded fields), `zones` (local
days cut where the UTC offset changes), `ticks` (next, previous and how many, under
the daylight-saving rule, without walking), `combining` (several entries, intervals,
exclusions and a window as one set of ticks) and `explaining` (one line of English).

What it must never do: read the clock, talk to the API server, know of the
CronSchedule resource, report bad user input any other way than by raising
`ScheduleError`, or loop without a bound.

The rules it implements (see DESIGN.md, "Semantics to get right"), those of
cronie (`src/entry.c` for the fields, `src/cron.c` for matching and daylight
saving) plus a few extensions:

* 5 fields (minute hour day-of-month month day-of-week), or 6 with a leading
  seconds field; the macros @yearly @annually @monthly @weekly @daily @midnight
  @hourly (@reboot and @every are refused). Fields are separated by ASCII blanks
  and read as ASCII: other digits (Arabic-Indic, fullwidth) are not numbers.
* A field is a list of items; an item is `*`, `a` or `a-b`, each with an optional
  `/n` (n > 0; a step wider than the range leaves its first value). Month and
  day-of-week take three-letter names; day-of-week takes 0-7 (0 and 7 are Sunday).
  A one-value range `5-5` is `{5}`; a reversed range `5-1` is refused, except a
  day-of-week range ending on Sunday (`sat-sun`, `fri-0`, `5-0/2`), which ends at 7
  (cronie accepts it and never runs it; croniter runs it); a list
  containing `*` (`*,5`) is the whole field. Extension: `a/n` means `a-max/n`
  (for day-of-week, `a-6/n`, as croniter read it).
* Day-of-month and day-of-week: when either field's text starts with `*` (`*`,
  `*/2`, `*,5`; `?` counts as `*`, and is allowed only as a whole day field), a
  date must match both; otherwise it must match either. So `0 0 1-31 * 5` runs
  every day, `0 0 */2 * 5` on odd-numbered Fridays and `0 0 */100,1-7 * 1` on the
  first Monday of the month.
* Extensions in day-of-month (Quartz, cronsim): `L` the last day, `L-n` n days
  before it (0..30; L-2 of a 31-day month is the 29th; a day before the 1st does
  not exist), `LW` the last Monday-to-Friday, `nW` the Monday-to-Friday nearest day
  n, never leaving the month (1W on Saturday the 1st is Monday the 3rd, 31W on
  Sunday the 31st is Friday the 29th); a month without day n (30W in February) has
  no such day. In day-of-week: `dL` the last weekday d of the month (`5L`, `FRIL`),
  `d#n` the n-th (n 1..5; `1#2`, `MON#2`; a month without a fifth has none). They
  are values of their field like any other: they take no step and no range, may
  share a list with plain values, and combine by the rule above (`0 0 L * 5` runs
  on the last day and on every Friday; `0 0 ? * 5L` or `0 0 * * 5L` on the last
  Friday only). Day fields that no date of the allowed months can match
  (`0 0 30 2 *`, `0 0 30W 2 *`) are refused.
* `H`, `H/n`, `H(a-b)` and `H(a-b)/n`, as a whole field, pick values from the
  schedule's uid exactly as croniter 7 did (crc32 of the uid; day-of-week H picks
  from 0-6). `R` (random) is refused: it is not deterministic.
* Daylight saving, as in cronie: a schedule is "wildcard" when its minute or hour
  field starts with `*` (cronie's MIN_STAR | HR_STAR) or with `H/` (`H(a-b)/n` does
  not count, as before); otherwise it is "fixed". 6-field expressions keep the rule
  they had before Punctual followed cronie here: the hour field alone decides, and the
  seconds and minute fields never make them wildcard (`*/10 30 2 * * *` and
  `0 */30 1 * * *` are fixed: their times run once on a fall-back day).
  On a fall-back day a fixed schedule runs once per wall time, at its first
  occurrence; a wildcard one at every real occurrence (both 01:30s). Wall times that
  do not exist on a spring-forward day run a fixed schedule once, at the first
  instant after the gap (however many of its times the gap held), and are skipped
  by a wildcard one.
* Ticks are whole-second UTC instants.

What croniter 7.0.0 does on those days (pinned by tests/unit/test_croniter_findings.py,
in America/New_York, Europe/Berlin and Australia/Lord_Howe): a spring-forward gap
is right for a `*` hour (skipped) and for a fixed hour (moved to the end of the
gap), but a stepped hour such as `*/2` is moved as if it were fixed; on fall-back
days it runs fixed-hour schedules at both occurrences; and across a 30-minute
fall-back (Lord_Howe) it can skip real second occurrences of a `*` hour. It also
reads `5-5` as the whole field and expands `*,5` to a list mixing `*` with numbers
(which Punctual's old reading of it failed on). So croniter is not used at all:
`parsing` reads the text, and ticks come from a per-day model of our own: each local
day cut where the UTC offset changes, the time fields as sorted lists, and each
month's matching days from a table per month shape (weekday of the 1st, length). The
same model counts ticks arithmetically, so a year of every-second ticks costs a few
milliseconds, and next/previous tick cost a few microseconds on an ordinary day.
Ticks exist from 1970 to the year 9000; outside that window there are none (Job
names use Unix seconds, and datetime stops at the year 9999).

Known limit: a local day is assumed to hold at most a few offset changes and not to
be re-entered after midnight by a fall-back that crosses midnight. tzdata has had
no such transition since 2011 (Canadian zones used 00:01 changes until 2010); on
such historical days, counting can be off for wildcard schedules.
"""

from punctual.core.schedules.combining import (
    CombinedTicks,
    IntervalTicks,
    parse_duration,
)
from punctual.core.schedules.explaining import describe, explain
from punctual.core.schedules.parsing import (
    MACROS,
    MONTH_NAMES,
    WEEKDAY_NAMES,
    CronFields,
    DayRule,
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
    "CombinedTicks",
    "CronFields",
    "CronTicks",
    "DayRule",
    "IntervalTicks",
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
    "parse_duration",
    "parse_fields",
    "parse_schedule",
    "uses_hash",
]


def clear_caches() -> None:
    """Forget every cached parse, zone and day model (for benchmarks of cold costs)."""
    from punctual.core.schedules import zones

    uses_hash.cache_clear()
    zones.clear_caches()
