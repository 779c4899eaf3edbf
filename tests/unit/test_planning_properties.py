"""Property tests: the planner against the brute-force reference.

One pass: every tick in (cursor, now - jitter] is decided exactly once (fired,
missed or skipped), the fired ones are those the policy names, and the counts of
the others are computed right, also across daylight-saving changes.

Many passes: applying plan after plan (the cursor each plan says) never fires a
tick twice or out of order, and accounts for every tick since creation.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from punctual.core.models import CronScheduleSpec, MissedRunPolicy
from punctual.core.planning import plan_ticks, reach_of, schedule_fingerprint, tick_source
from punctual.core.schedules import jitter_offset
from tests.unit.cron_reference import Drawn, drawn_schedules, reference_ticks

UID = "9c4f2a30-8f5e-4f55-9a53-0d35a7b0c001"
SETTINGS = settings(
    max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow], database=None
)
policies = st.sampled_from(list(MissedRunPolicy))
deadlines = st.one_of(st.none(), st.sampled_from([0, 30, 600, 3600, 6 * 3600, 30 * 3600]))


@SETTINGS
@given(
    drawn_schedules(),
    policies,
    deadlines,
    st.integers(1, 5),
    st.sampled_from([0, 0, 90, 3600]),
)
def test_one_pass_decides_every_due_tick_once(
    drawn: Drawn, policy: MissedRunPolicy, deadline: int | None, cap: int, jitter: int
) -> None:
    spec = CronScheduleSpec(
        schedule=drawn.expression,
        time_zone=drawn.zone.key,
        missed_run_policy=policy,
        starting_deadline_seconds=deadline,
        max_missed_runs=cap,
        jitter_seconds=jitter,
    )
    cursor, now = drawn.after, drawn.until
    plan = plan_ticks(
        spec,
        uid=UID,
        created=cursor - timedelta(days=1),
        cursor=cursor,
        fingerprint=schedule_fingerprint(spec),
        now=now,
    )
    offset = jitter_offset(UID, jitter)
    due = reference_ticks(drawn.reference, drawn.zone, cursor, now - offset)
    on_time = [
        t for t in due if deadline is None or now - (t + offset) <= timedelta(seconds=deadline)
    ]
    fired = [d.tick for d in plan.due]

    assert plan.invalid is None
    assert len(fired) + plan.missed_count + plan.skipped_count == len(due)
    assert all(d.fire_at == d.tick + offset for d in plan.due)
    assert plan.cursor == (due[-1] if due else cursor)
    if policy is MissedRunPolicy.RUN_LATEST:
        assert fired == on_time[-1:]
    elif policy is MissedRunPolicy.RUN_ALL:
        assert fired == on_time[-cap:]
    else:
        assert fired == (due if len(due) == 1 and on_time else [])
    for group in (*plan.missed, *plan.skipped):
        assert group.count >= 1
        assert group.examples[0] == group.newest
        assert set(group.examples) <= set(due) - set(fired)
    decided_until = max(now - offset, cursor)  # ticks up to here are decided
    after = reference_ticks(drawn.reference, drawn.zone, decided_until, now + timedelta(days=3))
    if after:
        assert plan.next_tick == after[0]
        assert plan.next_wake == after[0] + offset


@settings(SETTINGS, max_examples=40)
@given(
    drawn_schedules(),
    policies,
    deadlines,
    st.integers(1, 5),
    st.lists(st.integers(1, 4 * 3600), min_size=1, max_size=12),
)
def test_pass_after_pass_never_fires_a_tick_twice(
    drawn: Drawn,
    policy: MissedRunPolicy,
    deadline: int | None,
    cap: int,
    steps: list[int],
) -> None:
    spec = CronScheduleSpec(
        schedule=drawn.expression,
        time_zone=drawn.zone.key,
        missed_run_policy=policy,
        starting_deadline_seconds=deadline,
        max_missed_runs=cap,
    )
    created = drawn.after
    cursor: datetime | None = None
    fingerprint: str | None = None
    now = created
    fired: list[datetime] = []
    decided = 0
    for step in steps:
        now += timedelta(seconds=step)
        plan = plan_ticks(
            spec, uid=UID, created=created, cursor=cursor, fingerprint=fingerprint, now=now
        )
        fired.extend(d.tick for d in plan.due)
        decided += len(plan.due) + plan.missed_count + plan.skipped_count
        if cursor is not None and plan.cursor is not None:
            assert plan.cursor >= cursor
        cursor, fingerprint = plan.cursor, plan.fingerprint
    assert fired == sorted(set(fired))
    assert all(tick > created for tick in fired)
    if cursor is not None:
        assert decided == len(reference_ticks(drawn.reference, drawn.zone, created, cursor))
        assert all(tick <= cursor for tick in fired)
    else:
        assert decided == 0


field_text = st.one_of(
    st.sampled_from(["*", "?", "L", "H", "H/7", "H(3-9)", "*/0", "1-5/2", "mon", "jan", "7", "0"]),
    st.from_regex(r"\A[0-9*/,HhLlWw#?RrA-Za-z()\-]{1,8}\Z"),
)


@settings(SETTINGS, max_examples=300)
@given(
    st.lists(field_text, min_size=3, max_size=7).map(" ".join) | st.text(max_size=30),
    st.sampled_from(["UTC", "Europe/Berlin", "Mars/Base", "", "Etc/GMT+14"]),
)
def test_any_spec_gives_a_plan_never_an_exception(expression: str, zone: str) -> None:
    # Built without validation: the planner must cope even with what the model refuses.
    spec = CronScheduleSpec.model_construct(schedule=expression, time_zone=zone)
    now = datetime(2026, 11, 25, 10, tzinfo=UTC)
    plan = plan_ticks(
        spec, uid=UID, created=now - timedelta(days=2), cursor=None, fingerprint=None, now=now
    )
    if plan.invalid is not None:
        assert plan.invalid.startswith(("spec.schedule: ", "spec.timeZone: "))
        assert "\n" not in plan.invalid
        assert plan.due == () and plan.next_wake is None
    else:
        assert plan.next_wake is not None or plan.due


def _walked_reach(spec: CronScheduleSpec, first: datetime, until: datetime, most: int) -> datetime:
    """reach_of as it was: walk the ticks one by one."""
    source = tick_source(spec, uid=UID)
    last = first
    for _ in range(most):
        found = source.next_tick(last)
        if found is None or found > until:
            break
        last = found
    return last


@SETTINGS
@given(
    drawn_schedules(seconds=True),
    st.integers(0, 3 * 3600),
    st.sampled_from([1, 3, 30, 600]),
    st.booleans(),
)
def test_a_windows_reach_is_the_last_tick_before_its_end_as_a_walk_finds_it(
    drawn: Drawn, span: int, most: int, excluded: bool
) -> None:
    """The claim window's last tick (`reach_of`), found by one step back and a count,
    is the one a walk over every tick from the first finds, the cap `most` included, also
    across daylight-saving changes and an exclusion."""
    exclude = (
        [{"from": drawn.after + timedelta(minutes=20), "to": drawn.after + timedelta(hours=1)}]
        if excluded
        else []
    )
    spec = CronScheduleSpec.model_validate(
        {"schedule": drawn.expression, "timeZone": drawn.zone.key, "exclude": exclude}
    )
    source = tick_source(spec, uid=UID)
    first = source.next_tick(drawn.after)
    if first is None:
        return
    until = first + timedelta(seconds=span)
    found = reach_of(spec, uid=UID, first=first, until=until, most=most)
    assert found == _walked_reach(spec, first, until, most)
    ticks = reference_ticks(drawn.reference, drawn.zone, first, until)
    if not excluded and len(ticks) <= most:
        assert found == (ticks[-1] if ticks else first)
