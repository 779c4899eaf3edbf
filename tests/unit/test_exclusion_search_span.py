"""A search through excluded days stops after about eleven years of time, not of ticks.

Found by tests/e2e/test_random_specs.py (issue 25, item 3): `0 0 1 1 *` with an
exclusion `* * 1 1 *` (InvalidSpec: the exclusion removes every tick) made each search
for its next tick skip 4000 excluded days, one a year: 4000 years, half a second of
the operator's event loop per search, twice per decision and again on its own status
write, while every other schedule's tick waited (the good schedules' p99 lag went from
under 1 s to 3 s). The bound is now also in time: MAX_SKIPPED_DAYS days from the start
of the search, or from the last excluded range it jumped.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo

from punctual.core.deciding import decide
from punctual.core.decisions import Leadership
from punctual.core.schedules import CombinedTicks, parse_fields, parse_schedule
from punctual.core.schedules.combining import MAX_SKIPPED_DAYS

UTC_ZONE = ZoneInfo("UTC")
T0 = datetime(2026, 11, 25, 12, 0, tzinfo=UTC)


class Counting:
    """An entry that counts the searches made of it (and is the entry otherwise)."""

    def __init__(self, entry: Any) -> None:
        self.entry = entry
        self.searches = 0

    def __getattr__(self, name: str) -> Any:
        return getattr(self.entry, name)

    def next_second(self, after: int) -> int | None:
        self.searches += 1
        found: int | None = self.entry.next_second(after)
        return found

    def prev_second(self, at_or_before: int) -> int | None:
        self.searches += 1
        found: int | None = self.entry.prev_second(at_or_before)
        return found


def combined(cron: str, **exclusions: Any) -> tuple[CombinedTicks, Counting]:
    ticks = CombinedTicks([parse_schedule(cron, time_zone="UTC")], zone=UTC_ZONE, **exclusions)
    counting = Counting(ticks.entries[0])
    ticks.entries = (counting,)  # type: ignore[assignment]
    return ticks, counting


def test_a_yearly_entry_whose_every_tick_is_excluded_is_searched_eleven_years_not_4000() -> None:
    ticks, counting = combined("0 0 1 1 *", wall=[parse_fields("* * 1 1 *")])

    assert ticks.next_tick(T0) is None
    assert ticks.prev_tick(T0) is None
    years = MAX_SKIPPED_DAYS // 365 + 2
    assert counting.searches <= 2 * years, counting.searches


def test_wall_excluded_days_within_the_span_are_skipped_as_before() -> None:
    """A daily entry with January to November excluded: December 1, a year on."""
    ticks, _ = combined("0 0 * * *", wall=[parse_fields("* * * 1-11 *")])
    assert ticks.next_tick(datetime(2027, 1, 1, tzinfo=UTC)) == datetime(2027, 12, 1, tzinfo=UTC)
    assert ticks.prev_tick(datetime(2027, 11, 30, tzinfo=UTC)) == datetime(2026, 12, 31, tzinfo=UTC)


def test_an_excluded_range_restarts_the_span() -> None:
    """A range of 15 years excluded, then half a year of wall-excluded days: the search
    counts its span from the range's end, and finds the tick after them."""
    ranges = [(T0, datetime(2042, 1, 1, tzinfo=UTC))]
    ticks, _ = combined("0 0 * * *", ranges=ranges, wall=[parse_fields("* * * 1-6 *")])
    assert ticks.next_tick(T0) == datetime(2042, 7, 1, tzinfo=UTC)
    back = [(datetime(2011, 1, 1, tzinfo=UTC), T0)]
    ticks, _ = combined("0 0 * * *", ranges=back, wall=[parse_fields("* * * 7-12 *")])
    assert ticks.prev_tick(T0) == datetime(2010, 6, 30, tzinfo=UTC)


def test_deciding_such_a_schedule_says_invalid_spec_at_once() -> None:
    body = {
        "metadata": {
            "name": "yearly",
            "namespace": "n",
            "uid": "u",
            "generation": 1,
            "creationTimestamp": (T0 - timedelta(seconds=3)).strftime("%Y-%m-%dT%H:%M:%SZ"),
        },
        "spec": {
            "schedule": "0 0 1 1 *",
            "exclude": [{"cron": "* * 1 1 *"}],
            "jobTemplate": {"spec": {"template": {}}},
        },
    }
    decision = decide(body, [], now=T0, leadership=Leadership(epoch=1, identity="p"))

    assert decision.status is not None
    [invalid] = [c for c in decision.status["conditions"] if c["type"] == "InvalidSpec"]
    assert invalid["message"] == "spec.exclude: removes every tick the schedule has left"
