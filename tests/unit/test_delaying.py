"""When a status write may wait for a later one: the rule, on a fixed clock."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from punctual.core.deciding import decide
from punctual.core.decisions import Decision, WriteDelay
from punctual.core.delaying import (
    ROUTINE_HORIZON,
    delay_write,
    quiet_endings,
    routine,
    routine_wake,
)
from punctual.core.jobs import JobSnapshot
from punctual.core.models import CronScheduleSpec, CronScheduleStatus, FiringOutcome, dump_status
from punctual.core.records import JobToDelete
from punctual.core.settling import settle_failures

from .builders import DONE, LEADER, MS, M, S, job, schedule_body, spec_body
from .builders import T0 as B0

T0 = datetime(2026, 11, 26, 12, 0, tzinfo=UTC)
DELAY = timedelta(seconds=10)
STATUS = {"lastScheduledTime": "2026-11-26T12:00:00Z"}


def decision(write_delay: WriteDelay, *, status: dict[str, str] | None = STATUS) -> Decision:
    return Decision(status=status, write_delay=write_delay, next_wake=T0 + timedelta(hours=1))


def test_never_is_written_now_and_keeps_the_unwritten_instant() -> None:
    since = T0 - timedelta(seconds=3)
    result = delay_write(decision(WriteDelay.NEVER), unwritten_since=since, now=T0, delay=DELAY)
    assert result.decision.status == STATUS
    assert result.unwritten_since == since  # forgotten by the shell once the write lands


def test_bookkeeping_waits_up_to_the_delay_and_wakes_at_its_end() -> None:
    result = delay_write(
        decision(WriteDelay.BOOKKEEPING), unwritten_since=None, now=T0, delay=DELAY
    )
    assert result.decision.status is None
    assert result.decision.delayed_status == CronScheduleStatus.model_validate(STATUS)
    assert result.decision.next_wake == T0 + DELAY
    assert result.unwritten_since == T0


@pytest.mark.parametrize(("waited", "written"), [(9.999, False), (10, True), (60, True)])
def test_bookkeeping_is_written_once_the_first_unwritten_change_is_delay_old(
    waited: float, written: bool
) -> None:
    since = T0 - timedelta(seconds=waited)
    result = delay_write(
        decision(WriteDelay.BOOKKEEPING), unwritten_since=since, now=T0, delay=DELAY
    )
    assert (result.decision.status is not None) is written
    assert result.unwritten_since == since


def test_resolving_claims_only_waits_for_whatever_write_comes_next() -> None:
    since = T0 - timedelta(hours=1)
    result = delay_write(
        decision(WriteDelay.RESOLVES_CLAIMS_ONLY), unwritten_since=since, now=T0, delay=DELAY
    )
    assert result.decision.status is None
    assert result.decision.delayed_status == CronScheduleStatus.model_validate(STATUS)
    assert result.decision.next_wake == T0 + timedelta(hours=1)  # no wake of its own


def test_a_decision_without_status_passes_through_with_its_other_writes() -> None:
    prune = (JobToDelete("old", "u", "history"),)
    plain = Decision(status=None, prune=prune, write_delay=WriteDelay.BOOKKEEPING)
    result = delay_write(plain, unwritten_since=None, now=T0, delay=DELAY)
    assert result.decision is plain and result.unwritten_since is None


def test_settling_a_failed_create_touches_only_its_entries() -> None:
    raw: dict[str, Any] = {
        "inFlight": [
            {"tick": "2026-11-26T12:01:00Z", "job": "a-1", "epoch": 1},
            {"tick": "2026-11-26T12:02:00Z", "job": "a-2", "epoch": 1},
        ],
        "active": [
            {"name": "a-1", "tick": "2026-11-26T12:01:00Z"},
            {"name": "a-0", "tick": "2026-11-26T12:00:00Z"},
        ],
        "activeCount": 2,
        "recentFirings": [
            {"tick": "2026-11-26T12:02:00Z", "job": "a-2", "outcome": "Created", "epoch": 1},
            {"tick": "2026-11-26T12:01:00Z", "job": "a-1", "outcome": "Created", "epoch": 1},
            {"tick": "2026-11-26T11:01:00Z", "job": "a-1", "outcome": "Succeeded", "epoch": 1},
        ],
        "lastScheduledTime": "2026-11-26T12:00:00Z",
    }
    status = CronScheduleStatus.model_validate(raw)
    settled = settle_failures(status, {"a-1": "rejected"})
    assert [c.job for c in settled.in_flight] == ["a-2"]
    assert [a.name for a in settled.active] == ["a-0"] and settled.active_count == 1
    newest, failed, older = status.recent_firings
    assert settled.recent_firings == [
        newest,
        failed.model_copy(update={"outcome": FiringOutcome.FAILED, "reason": "rejected"}),
        older,
    ]
    wire = {**raw["recentFirings"][1], "outcome": "Failed", "reason": "rejected"}
    assert dump_status(settled)["recentFirings"][1].items() >= wire.items()
    assert settled.in_flight == status.in_flight[1:] and settled.active == status.active[1:]
    assert settled.last_scheduled_time == status.last_scheduled_time
    assert [c.job for c in status.in_flight] == ["a-1", "a-2"]  # the input is not changed
    assert dump_status(status) == dump_status(CronScheduleStatus.model_validate(raw))


@pytest.mark.parametrize(
    ("due_in", "is_routine"),
    [(None, True), (timedelta(0), False), (ROUTINE_HORIZON, False), (timedelta(hours=1), True)],
)
def test_a_write_is_routine_when_no_tick_needs_it_within_the_horizon(
    due_in: timedelta | None, is_routine: bool
) -> None:
    due_by = None if due_in is None else T0 + due_in
    assert routine(Decision(status=STATUS, due_by=due_by), now=T0) is is_routine


@pytest.mark.parametrize(
    ("due_in", "next_in", "wake_in"),
    [
        # A claim a year ahead, the schedule looked at again at its tick: a horizon before.
        (timedelta(days=365), timedelta(days=365), timedelta(days=365) - ROUTINE_HORIZON),
        # A bookkeeping write that wakes in 10 s: that wake comes first.
        (timedelta(hours=1), timedelta(seconds=10), timedelta(seconds=10)),
        # Nothing tied to a tick: its own next wake.
        (None, timedelta(hours=2), timedelta(hours=2)),
        (None, None, None),
    ],
)
def test_a_postponed_write_is_looked_at_again_a_horizon_before_its_tick_at_the_latest(
    due_in: timedelta | None, next_in: timedelta | None, wake_in: timedelta | None
) -> None:
    postponed = Decision(
        status=STATUS,
        due_by=None if due_in is None else T0 + due_in,
        next_wake=None if next_in is None else T0 + next_in,
    )
    assert routine_wake(postponed) == (None if wake_in is None else T0 + wake_in)


@pytest.mark.parametrize(
    ("spec", "status", "quiet"),
    [
        ({}, {}, True),
        ({"endTime": "2026-12-01T00:00:00Z", "maxRuns": 5}, {}, True),  # by ticks, not ends
        ({"concurrencyPolicy": "Forbid"}, {}, True),  # nothing waits for the room
        ({"concurrencyPolicy": "BufferOne"}, {"buffered": [{"tick": "2026-11-25T12:00:00Z",
                                                            "job": "a-1"}]}, False),
        ({}, {"retrying": [{"tick": "2026-11-25T12:00:00Z", "attempt": 2, "job": "a-r1",
                            "at": "2026-11-25T12:01:00Z"}]}, False),
        ({}, {"backfill": {"request": "r", "state": "Running"}}, False),
        ({}, {"backfill": {"request": "r", "state": "Done"}}, True),
        ({"pauseOnFailure": {"consecutiveFailures": 3}}, {}, False),  # a success resets the count
        ({"successDeadlineSeconds": 600}, {}, False),  # the newest success is read
        ({"concurrencyGroup": "etl"}, {}, False),  # the room is shared
    ],
)  # fmt: skip
def test_which_schedules_let_a_runs_ending_wait_for_the_next_write(
    spec: dict[str, Any], status: dict[str, Any], quiet: bool
) -> None:
    read = CronScheduleSpec.model_validate({"schedule": "* * * * *", **spec})
    assert quiet_endings(read, CronScheduleStatus.model_validate(status)) is quiet


def test_a_decisions_typed_status_is_its_status_and_is_what_a_later_write_says() -> None:
    """decide hands its status typed as well (`Decision.typed_status`), so leaving it for
    later validates nothing again: the two must say the same, pass after pass."""
    spec = spec_body(schedule="* * * * *", successfulJobsHistoryLimit=2)
    body = schedule_body(spec)
    jobs: list[JobSnapshot] = []
    typed = 0
    for minute in range(1, 8):
        tick = B0 + minute * M
        for now in (tick + 20 * MS, tick + 30 * S):
            made = decide(body, jobs, now=now, leadership=LEADER)
            if made.status is None:
                assert made.typed_status is None
                continue
            assert made.typed_status is not None
            assert dump_status(made.typed_status) == made.status
            typed += 1
            left = delay_write(made, unwritten_since=None, now=now, delay=DELAY)
            if left.decision.status is None:  # left for later: the typed form, as is
                assert left.decision.delayed_status is made.typed_status
            body = {**body, "status": made.status}
            jobs = [j for j in jobs if j.name not in {p.name for p in made.prune}]
            jobs += [job(c.tick, DONE, finished=now) for c in made.creates]
    assert typed >= 7
