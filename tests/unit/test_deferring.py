"""When a status write may wait for a later one: the rule, on a fixed clock."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from punctual.core.deciding import Decision, Deferral, JobToDelete
from punctual.core.deferring import defer
from punctual.core.settling import settle_failures

T0 = datetime(2026, 11, 26, 12, 0, tzinfo=UTC)
DELAY = timedelta(seconds=10)
STATUS = {"lastScheduledTime": "2026-11-26T12:00:00Z"}


def decision(deferral: Deferral, *, status: dict[str, str] | None = STATUS) -> Decision:
    return Decision(status=status, deferral=deferral, next_wake=T0 + timedelta(hours=1))


def test_never_is_written_now_and_keeps_the_unwritten_instant() -> None:
    since = T0 - timedelta(seconds=3)
    result = defer(decision(Deferral.NEVER), unwritten_since=since, now=T0, delay=DELAY)
    assert result.decision.status == STATUS
    assert result.unwritten_since == since  # forgotten by the shell once the write lands


def test_bookkeeping_waits_up_to_the_delay_and_wakes_at_its_end() -> None:
    result = defer(decision(Deferral.BOOKKEEPING), unwritten_since=None, now=T0, delay=DELAY)
    assert result.decision.status is None
    assert result.decision.deferred_status == STATUS
    assert result.decision.next_wake == T0 + DELAY
    assert result.unwritten_since == T0


@pytest.mark.parametrize(("waited", "written"), [(9.999, False), (10, True), (60, True)])
def test_bookkeeping_is_written_once_the_first_unwritten_change_is_delay_old(
    waited: float, written: bool
) -> None:
    since = T0 - timedelta(seconds=waited)
    result = defer(decision(Deferral.BOOKKEEPING), unwritten_since=since, now=T0, delay=DELAY)
    assert (result.decision.status is not None) is written
    assert result.unwritten_since == since


def test_resolving_claims_only_waits_for_whatever_write_comes_next() -> None:
    since = T0 - timedelta(hours=1)
    result = defer(
        decision(Deferral.RESOLVES_CLAIMS_ONLY), unwritten_since=since, now=T0, delay=DELAY
    )
    assert result.decision.status is None and result.decision.deferred_status == STATUS
    assert result.decision.next_wake == T0 + timedelta(hours=1)  # no wake of its own


def test_a_decision_without_status_passes_through_with_its_other_writes() -> None:
    prune = (JobToDelete("old", "u", "history"),)
    plain = Decision(status=None, prune=prune, deferral=Deferral.BOOKKEEPING)
    result = defer(plain, unwritten_since=None, now=T0, delay=DELAY)
    assert result.decision is plain and result.unwritten_since is None


def test_settling_a_failed_create_touches_only_its_entries() -> None:
    status = {
        "inFlight": [{"job": "a-1"}, {"job": "a-2"}],
        "active": [{"name": "a-1"}, {"name": "a-0"}],
        "activeCount": 2,
        "recentFirings": [
            {"job": "a-2", "outcome": "Created"},
            {"job": "a-1", "outcome": "Created"},
            {"job": "a-1", "outcome": "Succeeded"},
        ],
        "lastScheduledTime": "2026-11-26T12:00:00Z",
    }
    settled = settle_failures(status, {"a-1": "rejected"})
    assert settled["inFlight"] == [{"job": "a-2"}]
    assert settled["active"] == [{"name": "a-0"}] and settled["activeCount"] == 1
    assert settled["recentFirings"] == [
        {"job": "a-2", "outcome": "Created"},
        {"job": "a-1", "outcome": "Failed", "reason": "rejected"},
        {"job": "a-1", "outcome": "Succeeded"},
    ]
    assert settled["lastScheduledTime"] == status["lastScheduledTime"]
    assert status["inFlight"] == [{"job": "a-1"}, {"job": "a-2"}]  # the input is not changed
