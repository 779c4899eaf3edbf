"""Explaining a cron expression in one line of English.

Why it exists: `punctual explain` and the `InvalidSpec`-free path of `kubectl get`
let a user check what a schedule means before it fires: its times, its days (under
cronie's day-of-month/day-of-week rule and the L, W and # extensions) and, in a zone
that changes its clocks, what it does on those days (fixed or wildcard).

What it must never do: decide anything; it only words what parsing expanded.
"""

from __future__ import annotations

from punctual.core.schedules.parsing import (
    MONTH_NAMES,
    WEEKDAY_NAMES,
    CronFields,
    DayRule,
    join_words,
    ordinal_word,
)
from punctual.core.schedules.ticks import parse_schedule
from punctual.core.schedules.zones import changes_clocks

# The daylight-saving rule, worded for the two kinds of schedule (see the package).
FIXED_ON_CLOCK_CHANGES = (
    "When clocks change, a repeated time runs once, and skipped times run once, right "
    "after the change."
)
WILDCARD_ON_CLOCK_CHANGES = (
    "When clocks change, a repeated time runs each time it occurs, and skipped times do not run."
)


def explain(expression: str, *, time_zone: str = "UTC", uid: str | None = None) -> str:
    """One line for a schedule: "At 02:00, every day, in Europe/Berlin. When clocks..."."""
    ticks = parse_schedule(expression, time_zone=time_zone, uid=uid)
    sentence = describe(ticks.fields, ticks.zone.key)
    if not changes_clocks(ticks.zone):
        return sentence
    rule = WILDCARD_ON_CLOCK_CHANGES if ticks.fields.wildcard else FIXED_ON_CLOCK_CHANGES
    return f"{sentence} {rule}"


def describe(fields: CronFields, zone_name: str = "UTC") -> str:
    """The sentence for already expanded fields (`explain` without the parsing)."""
    parts: list[str] = []
    few_times = fields.per_day <= 4
    if few_times:
        show_seconds = fields.has_seconds and fields.seconds != (0,)
        times = [
            f"{h:02d}:{m:02d}:{s:02d}" if show_seconds else f"{h:02d}:{m:02d}"
            for h in fields.hours
            for m in fields.minutes
            for s in fields.seconds
        ]
        parts.append(f"at {join_words(times)}")
    else:
        parts.extend(_frequency_parts(fields))
    days = _day_part(fields)
    if days or few_times:
        parts.append(days or "every day")
    if len(fields.months) < 12:
        parts.append(f"in {_values_text(sorted(fields.months), MONTH_NAMES)}")
    if zone_name != "UTC":
        parts.append(f"in {zone_name}")
    sentence = ", ".join(parts)
    return sentence[0].upper() + sentence[1:] + "."


def _frequency_parts(fields: CronFields) -> list[str]:
    minutes, hours = fields.minutes, fields.hours
    if fields.has_seconds and fields.seconds != (0,):
        parts = [_cycle_text(fields.seconds, 59, "second")]
        if len(minutes) < 60:
            label = "minute" if len(minutes) == 1 else "minutes"
            parts.append(f"during {label} {_values_text(minutes)}")
    else:
        parts = [_cycle_text(minutes, 59, "minute")]
        if len(minutes) == 1 and len(hours) == 24:
            parts[0] += " of every hour"
    if len(hours) == 24:
        return parts
    progression = _progression(hours, 23)
    runs = _runs(hours)
    if progression is not None and progression[0] == 0:
        parts.append(f"in every {_ordinal(progression[1])} hour")
    elif len(runs) == 1:
        parts.append(f"between {runs[0][0]:02d}:00 and {runs[0][1]:02d}:59")
    else:
        parts.append(f"during hours {_values_text(hours)}")
    return parts


def _cycle_text(values: tuple[int, ...], high: int, unit: str) -> str:
    if len(values) == high + 1:
        return f"every {unit}"
    if len(values) == 1:
        return f"at {unit} {values[0]}"
    progression = _progression(values, high)
    if progression is not None:
        start, step = progression
        every = f"every {step} {unit}s"
        return every if start == 0 else f"{every} from {unit} {start}"
    return f"at {unit}s {_values_text(values)}"


def _day_part(fields: CronFields) -> str:
    """The days, under cronie's rule: both day fields must match when either starts
    with `*` or `?`, and either may match otherwise (then one that matches every
    date makes every date match)."""
    rule = fields.day_rule
    day_text = "" if rule.all_days else _month_days_text(rule)
    weekday_text = "" if rule.all_weekdays else _weekdays_text(rule, "and")
    if rule.both:
        if day_text and weekday_text:
            return f"{day_text}, but only on {_weekdays_text(rule, 'or')}"
        if weekday_text:
            return f"on {weekday_text}"
        return day_text
    if not day_text or not weekday_text:
        return ""  # one field matches every date, so every date matches
    return f"{day_text} or on {weekday_text}"


def _month_days_text(rule: DayRule) -> str:
    """ "on days 1 and 15, the last weekday and the weekday nearest day 20 of the month"."""
    items: list[str] = []
    if rule.days:
        label = "day" if len(rule.days) == 1 else "days"
        items.append(f"{label} {_values_text(sorted(rule.days))}")
    items.extend(
        "the last day" if offset == 0 else f"the {ordinal_word(offset + 1)}-to-last day"
        for offset in sorted(rule.last_offsets)
    )
    if rule.last_weekday:
        items.append("the last weekday")
    items.extend(f"the weekday nearest day {day}" for day in sorted(rule.nearest))
    return f"on {join_words(items)} of the month"


def _weekdays_text(rule: DayRule, last: str) -> str:
    """ "Monday through Friday", "the last Friday and the second Monday of the month"."""
    items: list[str] = []
    if rule.weekdays:
        # With Saturday, Sunday ends the week: `fri-sun` is "Friday through Sunday".
        weekdays = sorted(day or 7 if 6 in rule.weekdays else day for day in rule.weekdays)
        items.append(_values_text(weekdays, (*WEEKDAY_NAMES, WEEKDAY_NAMES[0]), last))
    items.extend(f"the last {WEEKDAY_NAMES[day]}" for day in sorted(rule.last_weekdays))
    items.extend(
        f"the {ordinal_word(number)} {WEEKDAY_NAMES[day]}"
        for day, number in sorted(rule.nth_weekdays, key=lambda pair: (pair[1], pair[0]))
    )
    text = join_words(items, last)
    return f"{text} of the month" if rule.last_weekdays or rule.nth_weekdays else text


def _values_text(
    values: tuple[int, ...] | list[int], names: tuple[str, ...] = (), last: str = "and"
) -> str:
    """ "1, 3 and 5", "Monday through Friday": runs of three or more become ranges."""

    def name(value: int) -> str:
        return names[value] if names else str(value)

    items: list[str] = []
    for first, stop in _runs(values):
        if stop - first >= 2:
            items.append(f"{name(first)} through {name(stop)}")
        else:
            items.extend(name(v) for v in range(first, stop + 1))
    return join_words(items, last)


def _runs(values: tuple[int, ...] | list[int]) -> list[tuple[int, int]]:
    runs: list[tuple[int, int]] = []
    for value in values:
        if runs and value == runs[-1][1] + 1:
            runs[-1] = (runs[-1][0], value)
        else:
            runs.append((value, value))
    return runs


def _progression(values: tuple[int, ...], high: int) -> tuple[int, int] | None:
    """(start, step) when values are exactly range(start, high + 1, step), start < step."""
    if len(values) < 2:
        return None
    start, step = values[0], values[1] - values[0]
    if start >= step or tuple(range(start, high + 1, step)) != values:
        return None
    return start, step


def _ordinal(number: int) -> str:
    if 10 <= number % 100 <= 20:
        return f"{number}th"
    return f"{number}{ {1: 'st', 2: 'nd', 3: 'rd'}.get(number % 10, 'th') }"
