"""How much one planning pass costs, against one plain croniter get_next call.

Run: .venv/bin/python bench/planning_bench.py [--runs N]

Prints, per case, the median and 90th percentile of many runs in microseconds and
the ratio of the median to the median of one croniter get_next call (the
baseline). "warm" means the caches a running operator has are filled (parsed
schedules, zone days); "cold" clears them before every run.
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from zoneinfo import ZoneInfo

from croniter import croniter

from punctual.core import planning, schedules
from punctual.core.models import CronScheduleSpec, Exclusion, MissedRunPolicy, ScheduleEntry
from punctual.core.planning import TickPlan, plan_ticks, schedule_fingerprint

UID = "0b7e5f7a-5d0c-4a4e-9d7e-2f0f4a0c8a11"
NOW = datetime(2026, 11, 25, 10, 0, 5, tzinfo=UTC)


@dataclass(frozen=True)
class Case:
    name: str
    spec: CronScheduleSpec
    cursor: datetime | None
    now: datetime = NOW

    def plan(self) -> TickPlan:
        return plan_ticks(
            self.spec,
            uid=UID,
            created=datetime(2020, 1, 1, tzinfo=UTC),
            cursor=self.cursor,
            fingerprint=schedule_fingerprint(self.spec),
            now=self.now,
        )


def clear_caches() -> None:
    planning.clear_caches()


def measure(action: Callable[[], object], runs: int, *, cold: bool = False) -> list[float]:
    action()  # warm up imports and caches
    samples: list[float] = []
    for _ in range(runs):
        if cold:
            clear_caches()
        started = time.perf_counter_ns()
        action()
        samples.append((time.perf_counter_ns() - started) / 1000)
    return samples


def cases() -> list[Case]:
    spec = CronScheduleSpec
    year_of_seconds = spec(
        schedule="* * * * * *", missed_run_policy=MissedRunPolicy.RUN_ALL, max_missed_runs=10
    )
    return [
        Case("*/5 * * * *, one tick due", spec(schedule="*/5 * * * *"), NOW - timedelta(minutes=5)),
        Case("*/5 * * * *, nothing due", spec(schedule="*/5 * * * *"), NOW - timedelta(seconds=5)),
        Case(
            "0 2 * * * Europe/Berlin, one tick due",
            spec(schedule="0 2 * * *", time_zone="Europe/Berlin"),
            datetime(2026, 11, 24, 1, tzinfo=UTC),
            datetime(2026, 11, 25, 1, 0, 5, tzinfo=UTC),
        ),
        Case("H H * * *, nothing due", spec(schedule="H H * * *"), NOW - timedelta(hours=1)),
        Case(
            "* * * * * * after a year down, RunAll cap 10",
            year_of_seconds,
            NOW - timedelta(days=365),
        ),
        Case(
            "*/15 Lord_Howe, a day down over a fall back, RunLatest",
            spec(schedule="*/15 * * * *", time_zone="Australia/Lord_Howe"),
            datetime(2026, 4, 4, 5, tzinfo=UTC),
            datetime(2026, 4, 5, 5, 0, 5, tzinfo=UTC),
        ),
        Case("0 0 29 2 *, next tick years away", spec(schedule="0 0 29 2 *"), NOW),
        Case("0 0 30 2 * (invalid)", spec(schedule="0 0 30 2 *"), NOW),
        Case(
            "* * * * * * Europe/Berlin + exclusions, a year down, RunAll cap 10",
            spec(
                schedule="* * * * * *",
                time_zone="Europe/Berlin",
                exclude=[
                    Exclusion(cron="* * 25 12 *"),
                    Exclusion(cron="* 2-4 * * SUN"),
                    Exclusion(dates=(date(2026, 1, 1), date(2026, 5, 1))),
                    Exclusion.model_validate(
                        {"from": "2026-08-01T00:00:00Z", "to": "2026-08-15T00:00:00Z"}
                    ),
                ],
                missed_run_policy=MissedRunPolicy.RUN_ALL,
            ),
            NOW - timedelta(days=365),
        ),
        Case(
            "3 entries (2 cron, every 90m) + exclusions, a year down, RunAll",
            spec(
                schedules=[
                    ScheduleEntry(cron="0 9 * * MON-FRI"),
                    ScheduleEntry(cron="*/10 * * * * *"),
                    ScheduleEntry(every="90m", offset="15m"),
                ],
                time_zone="Europe/Berlin",
                exclude=[Exclusion(cron="* * * * SAT,SUN"), Exclusion(dates=(date(2026, 12, 24),))],
                missed_run_policy=MissedRunPolicy.RUN_ALL,
            ),
            NOW - timedelta(days=365),
        ),
        Case(
            "every 1s interval + maxRuns 1000000, a year down, RunLatest",
            spec(schedules=[ScheduleEntry(every="1s")], max_runs=1_000_000),
            NOW - timedelta(days=365),
        ),
        Case(
            "3 entries, one tick due",
            spec(
                schedules=[
                    ScheduleEntry(cron="*/5 * * * *"),
                    ScheduleEntry(cron="0 * * * *"),
                    ScheduleEntry(every="90m", offset="15m"),
                ],
                exclude=[Exclusion(cron="* * 25 12 *")],
            ),
            NOW - timedelta(minutes=5),
        ),
        Case(
            "runAt, due now",
            spec(run_at=NOW - timedelta(seconds=5)),
            None,
        ),
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=2000)
    runs = parser.parse_args().runs

    zone = ZoneInfo("Europe/Berlin")
    start = NOW.astimezone(zone)
    iterator = croniter("0 2 * * *", start)
    baseline = measure(lambda: iterator.get_next(datetime, start_time=start), runs)
    base = statistics.median(baseline)

    rows: list[tuple[str, list[float]]] = [
        ("baseline: croniter get_next, 0 2 * * * Europe/Berlin", baseline),
        (
            "croniter construct + get_next, 0 2 * * * Europe/Berlin",
            measure(lambda: croniter("0 2 * * *", start).get_next(datetime), runs),
        ),
        (
            "punctual parse 0 2 * * * Europe/Berlin (uncached)",
            measure(lambda: schedules.parse_schedule("0 2 * * *", time_zone="Europe/Berlin"), runs),
        ),
    ]
    for case in cases():
        plan = case.plan()
        label = case.name
        if plan.invalid:
            label += f" -> {plan.invalid}"
        else:
            label += f" -> {len(plan.due)} due, {plan.missed_count + plan.skipped_count} not fired"
        rows.append((f"plan, warm: {label}", measure(case.plan, runs)))
        rows.append(
            (f"plan, cold: {case.name}", measure(case.plan, max(runs // 20, 20), cold=True))
        )

    width = max(len(name) for name, _ in rows)
    print(f"{'case':<{width}}  {'median µs':>10}  {'p90 µs':>10}  {'x get_next':>10}")
    for name, samples in rows:
        median = statistics.median(samples)
        p90 = statistics.quantiles(samples, n=10)[-1]
        print(f"{name:<{width}}  {median:>10.1f}  {p90:>10.1f}  {median / base:>10.2f}")


if __name__ == "__main__":
    main()
