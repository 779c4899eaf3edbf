"""The expressive spec (schedules, intervals, exclude, window, maxRuns), as tables around
one fixed instant: each feature, and each interaction the issue names.

T0 is 2026-11-25T12:00:00Z, a Wednesday and the top of an hour. Cases are planned with
`plan_ticks` or decided with `decide`; names read as the rule.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from punctual.core.deciding import decide
from punctual.core.models import CronScheduleSpec
from punctual.core.planning import (
    END_TIME_REACHED,
    MAX_RUNS_REACHED,
    plan_ticks,
    schedule_fingerprint,
    tick_source,
)

from .builders import LEADER, NAME, UID, condition, iso, job, schedule_body, spec_body

T0 = datetime(2026, 11, 25, 12, 0, tzinfo=UTC)
S = timedelta(seconds=1)
M = timedelta(minutes=1)
H = timedelta(hours=1)


def spec(**fields: Any) -> CronScheduleSpec:
    return CronScheduleSpec.model_validate(fields)


@dataclass(frozen=True)
class Case:
    name: str
    spec: dict[str, Any]
    after: datetime
    ticks: tuple[datetime, ...]  # the next ticks after `after`, oldest first
    count_until: datetime | None = None
    count: int | None = None
    invalid: str | None = None


BERLIN_FALL_BACK = datetime(2026, 10, 25, tzinfo=UTC)  # 03:00 CEST -> 02:00 CET at 01:00Z
NY_SPRING = datetime(2026, 3, 8, 7, tzinfo=UTC)  # 02:00 EST -> 03:00 EDT

CASES = [
    Case(
        "two cron entries: the union, oldest first",
        {"schedules": [{"cron": "0 13 * * *"}, {"cron": "30 12 * * *"}]},
        T0,
        (T0 + 30 * M, T0 + H, T0 + 24 * H + 30 * M),
    ),
    Case(
        "two entries hitting the same instant: one tick",
        {"schedules": [{"cron": "0 * * * *"}, {"cron": "*/30 * * * *"}]},
        T0,
        (T0 + 30 * M, T0 + H, T0 + 90 * M),
        count_until=T0 + 24 * H,
        count=48,
    ),
    Case(
        "an interval and a cron entry on the same instant: one tick",
        {"schedules": [{"every": "90m"}, {"cron": "30 13 * * *"}]},
        T0,
        (T0 + 90 * M, T0 + 3 * H),
        count_until=T0 + 24 * H,
        count=16,
    ),
    Case(
        "an interval ticks at epoch + offset + k*every in UTC, whatever the zone",
        {"schedules": [{"every": "90m", "offset": "15m"}], "timeZone": "Asia/Kolkata"},
        T0,
        (T0 + 15 * M, T0 + 105 * M),
    ),
    Case(
        "an interval across a fall-back: evenly spaced in UTC, none doubled or lost",
        {"schedules": [{"every": "1h"}], "timeZone": "Europe/Berlin"},
        BERLIN_FALL_BACK - S,
        (BERLIN_FALL_BACK, BERLIN_FALL_BACK + H, BERLIN_FALL_BACK + 2 * H),
        count_until=BERLIN_FALL_BACK + 24 * H - S,
        count=24,
    ),
    Case(
        "a cron exclusion removes every second of its minutes",
        {"schedules": [{"cron": "*/20 * * * * *"}], "exclude": [{"cron": "0-29 12 * * *"}]},
        T0 - S,
        (T0 + 30 * M, T0 + 30 * M + 20 * S),
    ),
    Case(
        "an excluded date is the whole local day, in timeZone",
        {
            "schedule": "0 * * * *",
            "timeZone": "America/New_York",
            "exclude": [{"dates": ["2026-11-25"]}],
        },
        T0,  # 07:00 in New York; the day ends at 05:00Z on the 26th
        (datetime(2026, 11, 26, 5, tzinfo=UTC), datetime(2026, 11, 26, 6, tzinfo=UTC)),
    ),
    Case(
        "an exclusion on a DST day: the 25-hour fall-back day goes whole",
        {
            "schedule": "*/30 * * * *",
            "timeZone": "Europe/Berlin",
            "exclude": [{"dates": ["2026-10-25"]}],
        },
        datetime(2026, 10, 24, 21, 59, tzinfo=UTC),
        (datetime(2026, 10, 25, 23, 0, tzinfo=UTC),),
        count_until=datetime(2026, 10, 25, 23, 0, tzinfo=UTC) - S,
        count=0,
    ),
    Case(
        "a wall-clock exclusion on a fall-back night removes both 01:30s",
        {
            "schedule": "30 * * * *",
            "timeZone": "America/New_York",
            "exclude": [{"cron": "30 1 * * *"}],
        },
        datetime(2026, 11, 1, 4, 31, tzinfo=UTC),  # after 00:30 EDT
        (datetime(2026, 11, 1, 7, 30, tzinfo=UTC),),  # 02:30 EST
    ),
    Case(
        "a range is end-exclusive",
        {
            "schedule": "0 * * * *",
            "exclude": [{"from": iso(T0 + H), "to": iso(T0 + 3 * H)}],
        },
        T0,
        (T0 + 3 * H, T0 + 4 * H),
    ),
    Case(
        "window edges: startTime is the first allowed tick, endTime is not",
        {"schedule": "0 * * * *", "startTime": iso(T0 + 2 * H), "endTime": iso(T0 + 4 * H)},
        T0,
        (T0 + 2 * H, T0 + 3 * H),
        count_until=T0 + 10 * H,
        count=2,
    ),
    Case(
        "a spring-forward gap tick of a fixed entry next to an interval",
        {
            "schedules": [{"cron": "30 2 * * *"}, {"every": "24h", "offset": "7h"}],
            "timeZone": "America/New_York",
        },
        NY_SPRING - 2 * H,
        (NY_SPRING, datetime(2026, 3, 9, 6, 30, tzinfo=UTC), datetime(2026, 3, 9, 7, tzinfo=UTC)),
    ),
]


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_ticks(case: Case) -> None:
    source = tick_source(spec(**case.spec), uid=UID)
    found: list[datetime] = []
    tick: datetime | None = case.after
    while len(found) < len(case.ticks) and tick is not None:
        tick = source.next_tick(tick)
        if tick is not None:
            found.append(tick)
    assert tuple(found) == case.ticks
    if case.count_until is not None:
        assert source.count_ticks(case.after, case.count_until) == case.count


INVALID = [
    (
        "impossible cron entry",
        {"schedules": [{"cron": "0 0 * * *"}, {"cron": "0 0 30 2 *"}]},
        "spec.schedules[1].cron: ",
    ),
    (
        "impossible cron exclusion",
        {"schedule": "* * * * *", "exclude": [{"cron": "61 * * * *"}]},
        "spec.exclude[0].cron: ",
    ),
    (
        "an interval that is not whole seconds",
        {"schedules": [{"every": "1500ms"}]},
        "spec.schedules[0].every: 1500ms is not a whole number of seconds",
    ),
    (
        "offset not less than every",
        {"schedules": [{"every": "1m", "offset": "1m"}]},
        "spec.schedules[0].offset: must be less than every",
    ),
    (
        "an exclusion that removes every tick",
        {"schedule": "0 9 * * *", "exclude": [{"cron": "* 9 * * *"}]},
        "spec.exclude: removes every tick the schedule has left",
    ),
    (
        "a window with a runAt",
        {"runAt": iso(T0), "endTime": iso(T0 + H)},
        "spec.runAt: exclude, startTime, endTime and maxRuns need schedule or schedules",
    ),
]


@pytest.mark.parametrize(("name", "fields", "message"), INVALID, ids=[c[0] for c in INVALID])
def test_what_only_punctual_can_check_is_invalid_naming_the_entry(
    name: str, fields: dict[str, Any], message: str
) -> None:
    plan = plan_ticks(
        spec(**fields), uid=UID, created=T0 - H, cursor=T0 - H, fingerprint=None, now=T0
    )
    assert plan.invalid is not None and plan.invalid.startswith(message), plan.invalid


def test_old_specs_keep_their_fingerprint() -> None:
    # Pinned: a spec without the new fields must hash as before, or every existing
    # schedule would see an edit (cursor to now) on upgrade.
    assert schedule_fingerprint(spec(schedule="0 2 * * *")) == "ad4f527200b4fe71"


def test_editing_the_window_or_max_runs_is_an_edit() -> None:
    base = schedule_fingerprint(spec(schedule="0 2 * * *", maxRuns=3))
    assert base != schedule_fingerprint(spec(schedule="0 2 * * *", maxRuns=4))
    assert base != schedule_fingerprint(spec(schedule="0 2 * * *"))


def test_end_time_passed_finishes_the_plan() -> None:
    fields = {"schedule": "0 * * * *", "endTime": iso(T0 + 30 * M)}
    plan = plan_ticks(
        spec(**fields), uid=UID, created=T0 - H, cursor=T0, fingerprint=None, now=T0 + S
    )
    assert plan.next_tick is None and plan.finished == END_TIME_REACHED


def test_upcoming_ticks_are_listed_oldest_first() -> None:
    fields = {"schedules": [{"cron": "0 * * * *"}, {"every": "90m"}]}
    plan = plan_ticks(
        spec(**fields), uid=UID, created=T0 - H, cursor=T0, fingerprint=None, now=T0 + S
    )
    assert plan.upcoming == (T0 + H, T0 + 90 * M, T0 + 2 * H, T0 + 3 * H, T0 + 4 * H)


# -- maxRuns, decided ------------------------------------------------------------------


@dataclass(frozen=True)
class RunsCase:
    name: str
    spec: dict[str, Any]
    status: dict[str, Any]
    now: datetime
    creates: tuple[datetime, ...]
    runs: int
    finished: str | None
    jobs: tuple[datetime, ...] = field(default=())


def _status(
    cursor: datetime, runs: int, ahead: tuple[datetime, ...] = (), **spec: Any
) -> dict[str, Any]:
    return {
        "scheduleFingerprint": schedule_fingerprint(
            CronScheduleSpec.model_validate(spec_body(**spec))
        ),
        "lastScheduledTime": iso(cursor),
        "runs": runs,
        "inFlight": [
            {"tick": iso(t), "job": f"{NAME}-{int(t.timestamp())}", "epoch": 6} for t in ahead
        ],
    }


RUNS = [
    RunsCase(
        "maxRuns 3, two fired, one tick due: fires the third and finishes",
        {"maxRuns": 3},
        _status(T0 - H, 2, maxRuns=3),
        T0 + S,
        (T0,),
        3,
        MAX_RUNS_REACHED,
    ),
    RunsCase(
        "maxRuns with missed ticks under RunAll: only the runs left fire, oldest first",
        {"maxRuns": 5, "missedRunPolicy": "RunAll", "maxMissedRuns": 10},
        _status(T0 - 6 * H, 2, maxRuns=5, missedRunPolicy="RunAll", maxMissedRuns=10),
        T0 + S,
        (T0 - 5 * H, T0 - 4 * H, T0 - 3 * H),
        5,
        MAX_RUNS_REACHED,
    ),
    RunsCase(
        "maxRuns used up: nothing fires, nothing is missed",
        {"maxRuns": 3},
        _status(T0 - 3 * H, 3, maxRuns=3),
        T0 + S,
        (),
        3,
        MAX_RUNS_REACHED,
    ),
    RunsCase(
        "a claim made ahead whose Job exists counts as a run (the leader died before writing)",
        {"maxRuns": 3},
        _status(T0 - H, 2, (T0,), maxRuns=3),
        T0 + H + S,
        (),
        3,
        MAX_RUNS_REACHED,
        jobs=(T0,),
    ),
    RunsCase(
        "runs left: the next tick is claimed ahead, not counted until it fires",
        {"maxRuns": 5},
        _status(T0 - H, 2, maxRuns=5),
        T0 + S,
        (T0,),
        3,
        None,
    ),
]


@pytest.mark.parametrize("case", RUNS, ids=[c.name for c in RUNS])
def test_max_runs(case: RunsCase) -> None:
    body = schedule_body(spec_body(**case.spec), case.status, created=T0 - 48 * H)
    decision = decide(body, [job(t) for t in case.jobs], now=case.now, leadership=LEADER)
    assert tuple(c.tick for c in decision.creates) == case.creates
    status = decision.status or case.status
    assert status["runs"] == case.runs
    assert status["runsRemaining"] == max(case.spec["maxRuns"] - case.runs, 0)
    ahead = [c for c in status.get("inFlight", []) if c["tick"] > iso(case.now)]
    assert not ahead, "ticks ahead are claimed by the window, not in flight"
    if case.finished is None:
        assert condition(status, "Finished")["status"] == "False"
        assert status["claimedThrough"] >= status["nextScheduleTime"]
    else:
        finished = condition(status, "Finished")
        assert (finished["status"], finished["reason"]) == ("True", case.finished)
        assert condition(status, "Ready")["status"] == "False"
        assert "nextScheduleTime" not in status and "upcomingTicks" not in status
        assert ("Normal", "Finished") in {(e.type, e.reason) for e in decision.events}


def test_manual_triggers_do_not_count_and_still_fire_once_finished() -> None:
    body = schedule_body(
        spec_body(maxRuns=1), _status(T0 - H, 1, maxRuns=1), trigger="req-1", created=T0 - 48 * H
    )
    decision = decide(body, [], now=T0 + S, leadership=LEADER)
    assert [c.manual for c in decision.creates] == [True]
    assert decision.status is not None and decision.status["runs"] == 1


def test_raising_max_runs_revives_from_now_without_a_backlog() -> None:
    old = _status(T0 - 10 * H, 3, maxRuns=3)
    body = schedule_body(spec_body(maxRuns=5, missedRunPolicy="RunAll"), old, created=T0 - 48 * H)
    decision = decide(body, [], now=T0 + 30 * M, leadership=LEADER)
    assert decision.creates == ()  # the edit moved the cursor to now
    status = decision.status
    assert status is not None
    assert status["runsRemaining"] == 2 and status["nextScheduleTime"] == iso(T0 + H)
    assert condition(status, "Finished")["status"] == "False"
