"""One room for every run (`admitting`): due ticks, triggers, retries, backfill fills and
buffered ticks are all admitted against the same limits, the schedule's own and its group's.

The bug this explains: a backfill under `concurrencyPolicy: Allow, maxConcurrent: 2`
sized its batch as 5 whatever ran, and ran 11 Jobs at once.
"""

from __future__ import annotations

import pytest

from punctual.core import admitting
from punctual.core.deciding import decide
from punctual.core.groups import Group
from punctual.core.jobs import JobState
from punctual.core.keys import ANNOTATION_BACKFILL
from punctual.core.models import ConcurrencyPolicy
from punctual.core.naming import retry_job_name
from tests.unit.builders import (
    ACTIVE,
    LEADER,
    NAME,
    T0,
    H,
    S,
    job,
    schedule_body,
    spec_body,
    status_body,
)
from tests.unit.test_backfilling import ask

A, F, R, B1 = (
    ConcurrencyPolicy.ALLOW,
    ConcurrencyPolicy.FORBID,
    ConcurrencyPolicy.REPLACE,
    ConcurrencyPolicy.BUFFER_ONE,
)
U = admitting.UNBOUNDED

# (policy, maxConcurrent, held, group (limit, held by others)) -> (free, by_group)
TABLE = [
    ("Allow alone is unbounded", A, None, 7, None, (U, False)),
    ("Allow under maxConcurrent 2, one held", A, 2, 1, None, (1, False)),
    ("Allow under maxConcurrent 2, three held: none, never negative", A, 2, 3, None, (0, False)),
    ("Forbid is one at a time", F, None, 0, None, (1, False)),
    ("Forbid with one held", F, None, 1, None, (0, False)),
    ("Replace's own limit is one", R, None, 0, None, (1, False)),
    ("BufferOne widened by maxConcurrent 3", B1, 3, 1, None, (2, False)),
    ("Allow in a mutex the others hold", A, None, 0, (1, 1), (0, True)),
    ("Allow in a semaphore of 3, one held by others, one own", A, None, 1, (3, 1), (1, True)),
    ("maxConcurrent 1 binds before a semaphore of 3", A, 1, 0, (3, 0), (1, False)),
    ("a group with as much room as the own limit binds", A, 2, 0, (3, 1), (2, True)),
    ("Forbid with one own run binds before the group", F, None, 1, (3, 0), (0, False)),
]


@pytest.mark.parametrize(
    ("case", "policy", "limit", "held", "group", "expected"), TABLE, ids=[t[0] for t in TABLE]
)
def test_the_room(
    case: str,
    policy: ConcurrencyPolicy,
    limit: int | None,
    held: int,
    group: tuple[int, int] | None,
    expected: tuple[int, bool],
) -> None:
    shared = None if group is None else Group("etl", *group)
    space = admitting.room(policy, limit, running=held, group=shared)
    assert (space.free, space.by_group) == expected


def test_every_policy_has_a_disposition_for_a_tick_with_no_room() -> None:
    assert {p: admitting.disposition(p) for p in ConcurrencyPolicy} == {
        ConcurrencyPolicy.ALLOW: admitting.Disposition.SKIP,
        ConcurrencyPolicy.FORBID: admitting.Disposition.SKIP,
        ConcurrencyPolicy.REPLACE: admitting.Disposition.REPLACE,
        ConcurrencyPolicy.BUFFER_ONE: admitting.Disposition.WAIT,
        ConcurrencyPolicy.BUFFER_ALL: admitting.Disposition.WAIT,
    }


def backfilling(running: int, group: Group | None = None, **spec: object) -> list[str]:
    """The Jobs one decision creates for a backfill of the 12 hours before T0."""
    body_spec = spec_body(concurrencyPolicy="Allow", **spec)
    body = schedule_body(
        body_spec, status_body(body_spec, cursor=T0), annotations={ANNOTATION_BACKFILL: ask()}
    )
    live = [job(T0 - (i + 1) * 60 * S, ACTIVE, name=f"{NAME}-live-{i}") for i in range(running)]
    decision = decide(body, live, now=T0 + 10 * S, leadership=LEADER, group=group)
    return [c.name for c in decision.creates]


@pytest.mark.parametrize(("running", "created"), [(0, 2), (1, 1), (2, 0), (3, 0)])
def test_a_backfill_never_runs_more_than_max_concurrent(running: int, created: int) -> None:
    assert len(backfilling(running, maxConcurrent=2)) == created


def test_a_backfill_without_a_limit_is_only_paced() -> None:
    assert len(backfilling(3)) == 5


@pytest.mark.parametrize(("limit", "held", "created"), [(1, 1, 0), (1, 0, 1), (3, 1, 2)])
def test_a_backfill_of_a_group_member_stays_within_the_groups_limit(
    limit: int, held: int, created: int
) -> None:
    assert len(backfilling(0, Group("etl", limit, held), concurrencyGroup="etl")) == created


def failed_tick_due_for_retry(group: Group | None, **spec: object) -> list[str]:
    body_spec = spec_body(
        retry={"maxAttempts": 3, "delaySeconds": 10}, concurrencyPolicy="Allow", **spec
    )
    failed = job(T0 - H, JobState.FAILED, finished=T0 - H + 60 * S)
    body = schedule_body(body_spec, status_body(body_spec, cursor=T0))
    decision = decide(body, [failed], now=T0 + 5 * S, leadership=LEADER, group=group)
    return [c.name for c in decision.creates]


def test_a_retry_of_a_group_member_waits_while_the_group_is_full() -> None:
    attempt = retry_job_name(NAME, T0 - H, 2)
    assert failed_tick_due_for_retry(Group("etl", 1, 0), concurrencyGroup="etl") == [attempt]
    assert failed_tick_due_for_retry(Group("etl", 1, 1), concurrencyGroup="etl") == []


def test_the_one_loop_hands_out_room_in_order_and_always_admits_a_recovered_claim() -> None:
    D = admitting.Disposition
    handed = [("recovered", D.ALWAYS), ("retry", D.WAIT), ("tick", D.SKIP), ("fill", D.WAIT)]
    assert admitting.admit(handed, 1) == admitting.Admission(
        ("recovered", "retry"), ("tick", "fill")
    )
    assert admitting.admit(handed, 0).admitted == ("recovered",)
    assert admitting.admit(handed, 5).refused == ()
