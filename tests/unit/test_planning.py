"""The planner, as a table of cases around one fixed instant.

T0 is the top of an hour; most cases use an hourly schedule, so "T0 - 3h" is three
ticks ago. Each case lists spec, status and environment, then what the plan must
say. Case names read as the rule they pin.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

import pytest

from punctual.core.models import CronScheduleSpec, FiringOutcome, MissedRunPolicy
from punctual.core.planning import (
    OVER_CAP,
    PAST_DEADLINE,
    SKIP_BACKLOG,
    SUPERSEDED,
    TickPlan,
    plan_ticks,
    schedule_fingerprint,
)
from punctual.core.schedules import jitter_offset

T0 = datetime(2026, 11, 25, 10, 0, tzinfo=UTC)
H = timedelta(hours=1)
S = timedelta(seconds=1)
UID = "0b7e5f7a-5d0c-4a4e-9d7e-2f0f4a0c8a11"
HOURLY = "0 * * * *"
CURRENT = "current"  # status carries the spec's own fingerprint

RUN_LATEST = MissedRunPolicy.RUN_LATEST
RUN_ALL = MissedRunPolicy.RUN_ALL
SKIP = MissedRunPolicy.SKIP


@dataclass(frozen=True)
class Case:
    name: str
    # spec
    schedule: str | None = HOURLY
    run_at: datetime | None = None
    time_zone: str = "UTC"
    policy: MissedRunPolicy = RUN_LATEST
    deadline: int | None = None
    cap: int = 10
    suspend: bool = False
    # status
    cursor: datetime | None = None
    fingerprint: str | None = CURRENT
    # environment
    created: datetime = T0 - 30 * timedelta(minutes=1)
    now: datetime = T0 + 5 * S
    # expectations
    due: tuple[datetime, ...] = ()
    missed: dict[str, int] = field(default_factory=dict)
    skipped: dict[str, int] = field(default_factory=dict)
    cursor_after: datetime | str | None = "unchanged"
    next_wake: datetime | str | None = "any"
    invalid: str | None = None
    reset: bool = False


CASES = [
    # --- never ran ----------------------------------------------------------------
    Case(
        "never ran, not time yet",
        now=T0 - S,
        next_wake=T0,
    ),
    Case("never ran, is time, RunLatest", due=(T0,), cursor_after=T0, next_wake=T0 + H),
    Case("never ran, is time, Skip", policy=SKIP, due=(T0,), cursor_after=T0),
    Case("never ran, is time, RunAll", policy=RUN_ALL, due=(T0,), cursor_after=T0),
    Case(
        "never ran, created after the tick: ticks before creation never fire",
        created=T0 + 2 * S,
        next_wake=T0 + H,
    ),
    Case(
        "never ran, created exactly at the tick: it does not fire",
        created=T0,
        next_wake=T0 + H,
    ),
    Case(
        "never ran, created 3 ticks ago, RunLatest",
        created=T0 - 2 * H - 30 * 60 * S,
        due=(T0,),
        missed={SUPERSEDED: 2},
        cursor_after=T0,
    ),
    # --- ordinary passes ----------------------------------------------------------
    Case("prev ran, not time yet", cursor=T0 - H, now=T0 - S, next_wake=T0),
    Case("prev ran, is time, RunLatest", cursor=T0 - H, due=(T0,), cursor_after=T0),
    Case("prev ran, is time, Skip", cursor=T0 - H, policy=SKIP, due=(T0,), cursor_after=T0),
    Case("prev ran, is time, RunAll", cursor=T0 - H, policy=RUN_ALL, due=(T0,), cursor_after=T0),
    Case("prev ran, exactly on the tick", cursor=T0 - H, now=T0, due=(T0,), cursor_after=T0),
    Case(
        "prev ran, is time, within deadline",
        cursor=T0 - H,
        deadline=60,
        now=T0 + 59 * S,
        due=(T0,),
        cursor_after=T0,
    ),
    Case(
        "prev ran, is time, exactly at deadline",
        cursor=T0 - H,
        deadline=60,
        now=T0 + 60 * S,
        due=(T0,),
        cursor_after=T0,
    ),
    Case(
        "prev ran, is time, past deadline",
        cursor=T0 - H,
        deadline=60,
        now=T0 + 61 * S,
        missed={PAST_DEADLINE: 1},
        cursor_after=T0,
        next_wake=T0 + H,
    ),
    Case(
        "deadline zero, exactly on the tick",
        cursor=T0 - H,
        deadline=0,
        now=T0,
        due=(T0,),
        cursor_after=T0,
    ),
    Case(
        "deadline zero, a second late",
        cursor=T0 - H,
        deadline=0,
        now=T0 + S,
        missed={PAST_DEADLINE: 1},
        cursor_after=T0,
    ),
    Case(
        "prev ran, is time, Skip, past deadline",
        cursor=T0 - H,
        policy=SKIP,
        deadline=1,
        missed={PAST_DEADLINE: 1},
        cursor_after=T0,
    ),
    Case(
        "cursor ahead of now (clock went back): nothing fires twice",
        cursor=T0,
        now=T0 - 30 * S,
        next_wake=T0 + H,
    ),
    # --- backlogs -----------------------------------------------------------------
    Case(
        "operator down 3 ticks, RunLatest",
        cursor=T0 - 3 * H,
        due=(T0,),
        missed={SUPERSEDED: 2},
        cursor_after=T0,
        next_wake=T0 + H,
    ),
    Case(
        "operator down 3 ticks, Skip",
        cursor=T0 - 3 * H,
        policy=SKIP,
        skipped={SKIP_BACKLOG: 3},
        cursor_after=T0,
        next_wake=T0 + H,
    ),
    Case(
        "operator down 3 ticks, RunAll",
        cursor=T0 - 3 * H,
        policy=RUN_ALL,
        due=(T0 - 2 * H, T0 - H, T0),
        cursor_after=T0,
    ),
    Case(
        "operator down 3 ticks, RunAll, cap 2",
        cursor=T0 - 3 * H,
        policy=RUN_ALL,
        cap=2,
        due=(T0 - H, T0),
        missed={OVER_CAP: 1},
        cursor_after=T0,
    ),
    Case(
        "operator down 3 ticks, RunAll, cap 1",
        cursor=T0 - 3 * H,
        policy=RUN_ALL,
        cap=1,
        due=(T0,),
        missed={OVER_CAP: 2},
        cursor_after=T0,
    ),
    Case(
        "operator down 3 ticks, RunAll, deadline covers 2",
        cursor=T0 - 3 * H,
        policy=RUN_ALL,
        deadline=3600 + 30,
        due=(T0 - H, T0),
        missed={PAST_DEADLINE: 1},
        cursor_after=T0,
    ),
    Case(
        "operator down 3 ticks, RunLatest, deadline covers 1",
        cursor=T0 - 3 * H,
        deadline=60,
        due=(T0,),
        missed={PAST_DEADLINE: 2},
        cursor_after=T0,
    ),
    Case(
        "operator down 3 ticks, RunLatest, deadline covers 2",
        cursor=T0 - 3 * H,
        deadline=3600 + 30,
        due=(T0,),
        missed={SUPERSEDED: 1, PAST_DEADLINE: 1},
        cursor_after=T0,
    ),
    Case(
        "operator down 3 ticks, RunLatest, newest past deadline",
        cursor=T0 - 3 * H,
        deadline=1,
        missed={PAST_DEADLINE: 3},
        cursor_after=T0,
    ),
    Case(
        "operator down 3 ticks, RunAll, newest past deadline",
        cursor=T0 - 3 * H,
        policy=RUN_ALL,
        deadline=1,
        missed={PAST_DEADLINE: 3},
        cursor_after=T0,
    ),
    Case(
        "operator down 3 ticks, Skip, deadline covers 1",
        cursor=T0 - 3 * H,
        policy=SKIP,
        deadline=60,
        skipped={SKIP_BACKLOG: 1},
        missed={PAST_DEADLINE: 2},
        cursor_after=T0,
    ),
    Case(
        "operator down 2 ticks and now between ticks, RunLatest",
        cursor=T0 - 2 * H,
        now=T0 + 30 * 60 * S,
        due=(T0,),
        missed={SUPERSEDED: 1},
        cursor_after=T0,
        next_wake=T0 + H,
    ),
    # --- suspend ------------------------------------------------------------------
    Case(
        "suspended, is time: nothing fires, the cursor stays",
        cursor=T0 - H,
        suspend=True,
        next_wake=None,
    ),
    Case(
        "suspended, never ran: the cursor stays unset",
        suspend=True,
        next_wake=None,
    ),
    Case(
        "resumed after 3 suspended ticks, RunLatest: a backlog like any other",
        cursor=T0 - 3 * H,
        due=(T0,),
        missed={SUPERSEDED: 2},
        cursor_after=T0,
    ),
    Case(
        "resumed after 3 suspended ticks, Skip",
        cursor=T0 - 3 * H,
        policy=SKIP,
        skipped={SKIP_BACKLOG: 3},
        cursor_after=T0,
    ),
    # --- edits --------------------------------------------------------------------
    Case(
        "edited schedule: old ticks never fire, the cursor moves to now",
        cursor=T0 - 3 * H,
        fingerprint="0123456789abcdef",
        cursor_after=T0 + 5 * S,
        next_wake=T0 + H,
        reset=True,
    ),
    Case(
        "edited schedule, never ran: the cursor moves to now",
        fingerprint="0123456789abcdef",
        created=T0 - 5 * H,
        cursor_after=T0 + 5 * S,
        reset=True,
    ),
    Case(
        "edited while suspended: the cursor still moves to now",
        cursor=T0 - 3 * H,
        fingerprint="0123456789abcdef",
        suspend=True,
        cursor_after=T0 + 5 * S,
        next_wake=None,
        reset=True,
    ),
    Case(
        "no fingerprint yet but a cursor: adopted without a reset",
        cursor=T0 - H,
        fingerprint=None,
        due=(T0,),
        cursor_after=T0,
    ),
    Case(
        "no fingerprint and no cursor: a new schedule",
        fingerprint=None,
        due=(T0,),
        cursor_after=T0,
    ),
    # --- invalid ------------------------------------------------------------------
    Case(
        "impossible schedule is invalid",
        schedule="0 0 30 2 *",
        cursor=T0 - H,
        next_wake=None,
        invalid="spec.schedule: day 30 never occurs in February",
    ),
    Case(
        "out-of-range field is invalid",
        schedule="61 * * * *",
        next_wake=None,
        invalid="spec.schedule: minute 61 is out of range 0-59",
    ),
    Case(
        "unknown zone is invalid",
        time_zone="Mars/Base",
        next_wake=None,
        invalid='spec.timeZone: unknown time zone "Mars/Base"',
    ),
    Case(
        "edited into an invalid schedule: cursor moves to now, so a fix fires nothing old",
        schedule="0 0 30 2 *",
        cursor=T0 - 3 * H,
        fingerprint="0123456789abcdef",
        cursor_after=T0 + 5 * S,
        next_wake=None,
        invalid="spec.schedule: day 30 never occurs in February",
        reset=True,
    ),
    # --- runAt --------------------------------------------------------------------
    Case("runAt, not yet", schedule=None, run_at=T0 + H, next_wake=T0 + H),
    Case(
        "runAt, is time",
        schedule=None,
        run_at=T0,
        due=(T0,),
        cursor_after=T0,
        next_wake=None,
    ),
    Case(
        "runAt before creation, within deadline: still fires once",
        schedule=None,
        run_at=T0,
        deadline=60,
        created=T0 + 2 * S,
        due=(T0,),
        cursor_after=T0,
        next_wake=None,
    ),
    Case(
        "runAt before creation, no deadline: fires once",
        schedule=None,
        run_at=T0 - 48 * H,
        created=T0,
        due=(T0 - 48 * H,),
        cursor_after=T0 - 48 * H,
        next_wake=None,
    ),
    Case(
        "runAt past deadline: missed, never again",
        schedule=None,
        run_at=T0,
        deadline=1,
        missed={PAST_DEADLINE: 1},
        cursor_after=T0,
        next_wake=None,
    ),
    Case(
        "runAt already decided: nothing more ever",
        schedule=None,
        run_at=T0,
        cursor=T0,
        now=T0 + 48 * H,
        next_wake=None,
    ),
    Case(
        "runAt with fractional seconds: the tick is the whole second",
        schedule=None,
        run_at=T0 + timedelta(milliseconds=900),
        due=(T0,),
        cursor_after=T0,
        next_wake=None,
    ),
    Case(
        "runAt edited to the past: nothing old fires",
        schedule=None,
        run_at=T0,
        fingerprint="0123456789abcdef",
        cursor_after=T0 + 5 * S,
        next_wake=None,
        reset=True,
    ),
    # --- zones --------------------------------------------------------------------
    Case(
        "daily at 02:00 Berlin on the fall-back day fires once",
        schedule="0 2 * * *",
        time_zone="Europe/Berlin",
        cursor=datetime(2026, 10, 24, 0, tzinfo=UTC),
        now=datetime(2026, 10, 25, 3, tzinfo=UTC),
        due=(datetime(2026, 10, 25, 0, tzinfo=UTC),),
        cursor_after=datetime(2026, 10, 25, 0, tzinfo=UTC),
        next_wake=datetime(2026, 10, 26, 1, tzinfo=UTC),
    ),
    Case(
        "hourly in New York across the fall-back: the repeated 01:00 is its own tick",
        schedule="0 * * * *",
        time_zone="America/New_York",
        policy=RUN_ALL,
        cursor=datetime(2026, 11, 1, 4, tzinfo=UTC),
        now=datetime(2026, 11, 1, 7, tzinfo=UTC),
        due=(
            datetime(2026, 11, 1, 5, tzinfo=UTC),
            datetime(2026, 11, 1, 6, tzinfo=UTC),
            datetime(2026, 11, 1, 7, tzinfo=UTC),
        ),
        cursor_after=datetime(2026, 11, 1, 7, tzinfo=UTC),
    ),
]


def make_spec(case: Case) -> CronScheduleSpec:
    return CronScheduleSpec(
        schedule=case.schedule,
        run_at=case.run_at,
        time_zone=case.time_zone,
        starting_deadline_seconds=case.deadline,
        missed_run_policy=case.policy,
        max_missed_runs=case.cap,
        suspend=case.suspend,
    )


def plan_for(case: Case) -> TickPlan:
    spec = make_spec(case)
    fingerprint = schedule_fingerprint(spec) if case.fingerprint == CURRENT else case.fingerprint
    return plan_ticks(
        spec,
        uid=UID,
        created=case.created,
        cursor=case.cursor,
        fingerprint=fingerprint,
        now=case.now,
    )


@pytest.mark.parametrize("case", CASES, ids=[case.name for case in CASES])
def test_plan(case: Case) -> None:
    plan = plan_for(case)
    assert plan.invalid == case.invalid
    assert tuple(due.tick for due in plan.due) == case.due
    assert all(due.fire_at == due.tick for due in plan.due)  # no jitter here
    assert {group.reason: group.count for group in plan.missed} == case.missed
    assert {group.reason: group.count for group in plan.skipped} == case.skipped
    assert all(g.outcome is FiringOutcome.MISSED for g in plan.missed)
    assert all(g.outcome is FiringOutcome.SKIPPED for g in plan.skipped)
    expected_cursor = case.cursor if case.cursor_after == "unchanged" else case.cursor_after
    assert plan.cursor == expected_cursor
    if case.next_wake != "any":
        assert plan.next_wake == case.next_wake
    assert plan.reset is case.reset
    assert plan.fingerprint == schedule_fingerprint(make_spec(case))
    assert plan.suspended is case.suspend


def test_groups_carry_a_few_examples_newest_first() -> None:
    plan = plan_for(Case("x", cursor=T0 - 48 * H, policy=RUN_ALL, cap=2))
    [group] = plan.missed
    assert group.reason == OVER_CAP and group.count == 46
    assert group.newest == T0 - 2 * H
    assert group.examples == (T0 - 2 * H, T0 - 3 * H, T0 - 4 * H)


def test_jitter_delays_the_fire_instant_but_keeps_the_tick() -> None:
    offset = jitter_offset(UID, 600)
    assert timedelta(0) < offset <= timedelta(seconds=600)
    spec = CronScheduleSpec(schedule=HOURLY, jitter_seconds=600)
    fingerprint = schedule_fingerprint(spec)

    def plan_at(now: datetime) -> TickPlan:
        return plan_ticks(
            spec, uid=UID, created=T0 - 2 * H, cursor=T0 - H, fingerprint=fingerprint, now=now
        )

    early = plan_at(T0 + offset - S)
    assert early.due == ()
    assert early.next_wake == T0 + offset
    assert early.next_tick == T0
    on_time = plan_at(T0 + offset)
    assert [(due.tick, due.fire_at) for due in on_time.due] == [(T0, T0 + offset)]
    assert on_time.cursor == T0
    assert on_time.next_wake == T0 + H + offset


def test_jitter_counts_against_the_deadline_from_the_fire_instant() -> None:
    offset = jitter_offset(UID, 600)
    spec = CronScheduleSpec(schedule=HOURLY, jitter_seconds=600, starting_deadline_seconds=10)
    plan = plan_ticks(
        spec,
        uid=UID,
        created=T0 - 2 * H,
        cursor=T0 - H,
        fingerprint=schedule_fingerprint(spec),
        now=T0 + offset + 10 * S,
    )
    assert [due.tick for due in plan.due] == [T0]


def test_hashed_schedule_is_the_same_for_the_same_uid() -> None:
    spec = CronScheduleSpec(schedule="H H * * *")
    plans = [
        plan_ticks(spec, uid=UID, created=T0, cursor=None, fingerprint=None, now=T0)
        for _ in range(3)
    ]
    assert len({plan.next_wake for plan in plans}) == 1
    other = plan_ticks(spec, uid="another-uid", created=T0, cursor=None, fingerprint=None, now=T0)
    assert other.next_wake is not None


def test_a_year_of_every_second_is_computed_not_walked() -> None:
    spec = CronScheduleSpec(
        schedule="* * * * * *", missed_run_policy=RUN_ALL, starting_deadline_seconds=None
    )
    started = time.perf_counter()
    plan = plan_ticks(
        spec,
        uid=UID,
        created=T0 - 400 * 24 * H,
        cursor=T0 - 365 * 24 * H,
        fingerprint=schedule_fingerprint(spec),
        now=T0,
    )
    elapsed = time.perf_counter() - started
    assert [due.tick for due in plan.due] == [T0 - n * S for n in range(9, -1, -1)]
    assert plan.missed_count == 365 * 86400 - 10
    assert plan.cursor == T0
    assert elapsed < 0.5, f"planning took {elapsed:.3f}s"


def test_fingerprint_ignores_spacing_but_not_meaning() -> None:
    base = schedule_fingerprint(CronScheduleSpec(schedule="0 2 * * *"))
    assert schedule_fingerprint(CronScheduleSpec(schedule=" 0  2 * * * ")) == base
    assert schedule_fingerprint(CronScheduleSpec(schedule="0 3 * * *")) != base
    assert schedule_fingerprint(CronScheduleSpec(schedule="0 2 * * *", time_zone="Asia/Tokyo")) != (
        base
    )
    assert schedule_fingerprint(CronScheduleSpec(schedule="0 2 * * *", jitter_seconds=5)) != base
    # Policy, deadline and suspend do not decide the ticks: changing them is no edit.
    assert (
        schedule_fingerprint(
            CronScheduleSpec(schedule="0 2 * * *", suspend=True, missed_run_policy=SKIP)
        )
        == base
    )
    assert len(base) == 16


def test_naive_times_are_a_programming_error() -> None:
    spec = CronScheduleSpec(schedule=HOURLY)
    with pytest.raises(ValueError, match="now must be an aware datetime"):
        plan_ticks(
            spec, uid=UID, created=T0, cursor=None, fingerprint=None, now=T0.replace(tzinfo=None)
        )


def test_upcoming_ticks_keep_one_entry_per_source_however_many_ticks_pass(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A leader's heap grew by an entry per firing while the cache was keyed by tick
    too; now a source keeps only its latest, and the sources kept are bounded."""
    from punctual.core import planning

    planning.clear_caches()
    every5 = planning._cron_ticks("*/5 * * * *", "UTC", None)
    start = datetime(2026, 11, 27, tzinfo=UTC)
    step = timedelta(minutes=5)
    for i in range(100):
        first = start + i * step
        assert planning.upcoming_ticks(every5, first, 5) == tuple(
            first + k * step for k in range(5)
        )
    assert len(planning._upcoming) == 1
    monkeypatch.setattr(planning, "UPCOMING_SOURCES", 3)
    sources = [planning._cron_ticks(f"{m} * * * *", "UTC", None) for m in range(5)]
    for source in sources:
        planning.upcoming_ticks(source, start, 2)
    assert len(planning._upcoming) == 3  # the least recently asked went first
    assert every5 not in planning._upcoming and sources[-1] in planning._upcoming
