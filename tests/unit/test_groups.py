"""spec.concurrencyGroup: a limit shared by a namespace's schedules, one rule of a decision.

The decision is given the group as the shell found it (`Group`: its limit, the runs the
other members hold, the oldest tick one of them waits with); these tables check what it
does with it under each policy. That one member decides at a time and that one shard
decides them all is the shell's (runtime.reconciling, kube.sharding), checked in e2e.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

import pytest

from punctual.core import groups
from punctual.core.deciding import decide
from punctual.core.decisions import Decision
from punctual.core.groups import Group, Member, placement_of
from punctual.core.jobs import JobState
from punctual.core.records import SkipReason
from tests.unit.builders import ACTIVE, LEADER, T0, H, S, condition, job, schedule_body, spec_body

NOW = T0 + S


def member(
    policy: str, group: Group | None, jobs: list[Any] | None = None, **more: Any
) -> Decision:
    spec = spec_body(concurrencyPolicy=policy, concurrencyGroup="etl", **more)
    return decide(schedule_body(spec), jobs or [], now=NOW, leadership=LEADER, group=group)


def skips(decision: Decision) -> list[str]:
    status = decision.status or {}
    return [f["reason"] for f in status.get("recentFirings", []) if f["outcome"] == "Skipped"]


# (policy, limit, held by others, own running) -> created
TABLE = [
    ("Allow", 1, 0, 0, 1),
    ("Allow", 1, 1, 0, 0),
    ("Forbid", 1, 1, 0, 0),
    ("Allow", 2, 1, 0, 1),
    ("Allow", 2, 2, 0, 0),
    ("Allow", 3, 1, 1, 1),
    ("Forbid", 3, 0, 1, 0),  # the schedule's own Forbid binds before the group
    ("BufferOne", 1, 1, 0, 0),
    ("BufferOne", 2, 1, 0, 1),
]


@pytest.mark.parametrize(("policy", "limit", "held", "own", "created"), TABLE)
def test_a_member_fires_only_within_the_groups_room(
    policy: str, limit: int, held: int, own: int, created: int
) -> None:
    running = [job(T0 - (i + 1) * H, ACTIVE) for i in range(own)]
    decision = member(policy, Group("etl", limit, held), running)
    assert len(decision.creates) == created


def test_a_tick_skipped_while_the_group_is_full_says_so_under_its_own_label() -> None:
    decision = member("Allow", Group("etl", 1, 1))
    assert not decision.creates
    assert skips(decision) == ["concurrencyGroup etl: 1 of its 1 run in use"]
    assert decision.skipped == ((SkipReason.CONCURRENCY_GROUP, 1),)


def test_a_buffering_member_waits_while_full_and_behind_an_older_waiter() -> None:
    full = member("BufferOne", Group("etl", 1, 1))
    assert not full.creates and full.status is not None and full.status["buffered"]
    older: datetime = T0 - H
    behind = member("BufferAll", Group("etl", 2, 0, waiting_since=older))
    assert not behind.creates, "another member has waited longer: it goes first"
    ahead = member("BufferAll", Group("etl", 2, 0, waiting_since=T0 + H))
    assert len(ahead.creates) == 1


def test_replace_is_refused_in_a_group() -> None:
    decision = member("Replace", Group("etl", 1, 0))
    assert not decision.creates and decision.status is not None
    ready = condition(decision.status, "Ready")
    assert ready["reason"] == "InvalidSpec"
    assert "Replace cannot be used with concurrencyGroup" in ready["message"]


def test_every_member_of_a_group_is_placed_on_one_shard_and_others_by_uid() -> None:
    a = schedule_body(spec_body(concurrencyGroup="etl"), uid="u-a")
    b = schedule_body(spec_body(concurrencyGroup="etl"), uid="u-b")
    alone = schedule_body(spec_body(), uid="u-c")
    assert placement_of(a) == placement_of(b) == "reports/etl"
    assert placement_of(alone) == "u-c"


def test_without_a_group_nothing_changes() -> None:
    spec = spec_body(concurrencyPolicy="Allow")
    alone = decide(schedule_body(spec), [], now=NOW, leadership=LEADER)
    assert len(alone.creates) == 1


# -- the group as it stands (`groups.state`): computed in the core, the shell only reads --


def member_body(name: str, *, group: str = "etl", **status: object) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "uid": f"uid-{name}"},
        "spec": {"concurrencyGroup": group},
        "status": dict(status),
    }


def claim(name: str, tick: datetime, **more: object) -> dict[str, object]:
    from punctual.core.naming import job_name

    return {"tick": iso(tick), "job": job_name(name, tick), "epoch": 1, **more}


def iso(instant: datetime) -> str:
    return instant.strftime("%Y-%m-%dT%H:%M:%SZ")


def state_of(*others: Member, mine: list[Any] | None = None) -> Group:
    return groups.state("etl", 2, me="me", my_jobs=mine or [], others=list(others), now=NOW)


def test_running_runs_of_the_others_occupy_the_group() -> None:
    other = Member("b", member_body("b"), [job(T0 - H, ACTIVE, schedule_uid="uid-b", name="b-1")])
    assert state_of(other) == Group("etl", 2, 1, None)


def test_a_claim_in_flight_for_a_due_tick_not_yet_seen_occupies_it() -> None:
    recovering = claim("b", T0 - H, manual=None)  # a claim behind the cursor: in flight
    body = member_body("b", lastScheduledTime=iso(T0), inFlight=[recovering])
    assert state_of(Member("b", body, [])).occupied == 1


def test_a_claim_made_ahead_does_not_occupy_it_and_a_member_that_ran_less_lately_goes_first() -> (
    None
):
    ahead = claim("b", T0)  # beyond the cursor, due now: decided again at its tick
    body = member_body("b", lastScheduledTime=iso(T0 - H), inFlight=[ahead])
    mine = [job(T0 - H, ACTIVE, name="me-1")]  # I ran lately; b never did
    assert state_of(Member("b", body, []), mine=mine).occupied == 1  # I yield it a place
    b_ran = [job(T0 - H, JobState.SUCCEEDED, name="b-0", schedule_uid="uid-b")]
    assert state_of(Member("b", body, b_ran)).occupied == 0  # b ran lately, I never did
    assert state_of(Member("b", body, [])).occupied == 1  # neither ran: by name, b first


def test_a_tick_of_a_members_window_due_now_is_claimed_ahead_too() -> None:
    """The same turn-taking for a tick the member's claim window holds (claimedThrough),
    read from its nextScheduleTime: no inFlight entry names it."""
    window = {"claimedThrough": iso(T0 + H), "nextScheduleTime": iso(T0)}
    body = member_body("b", lastScheduledTime=iso(T0 - H), **window)
    mine = [job(T0 - H, ACTIVE, name="me-1")]
    assert state_of(Member("b", body, []), mine=mine).occupied == 1  # I yield it a place
    b_ran = [job(T0 - H, JobState.SUCCEEDED, name="b-0", schedule_uid="uid-b")]
    assert state_of(Member("b", body, b_ran)).occupied == 0
    short = member_body(
        "b", lastScheduledTime=iso(T0 - H), claimedThrough=iso(T0 - H), nextScheduleTime=iso(T0)
    )
    assert state_of(Member("b", short, []), mine=mine).occupied == 0  # not in its window


def test_the_oldest_tick_another_member_waits_with() -> None:
    body = member_body(
        "b",
        buffered=[{"tick": iso(T0 - H), "job": "b-x"}, {"tick": iso(T0 - 2 * H), "job": "b-y"}],
    )
    assert state_of(Member("b", body, [])).waiting_since == T0 - 2 * H


def test_a_schedule_that_left_the_group_is_not_counted() -> None:
    other = Member("b", member_body("b", group="other"), [job(T0 - H, ACTIVE, name="b-1")])
    assert state_of(other) == Group("etl", 2, 0, None)


# -- a manual trigger obeys maxConcurrent and the group, with or without its own overlap --


@pytest.mark.parametrize("overlap", [None, "Allow"])
def test_a_manual_trigger_never_exceeds_max_concurrent_or_the_group(overlap: str | None) -> None:
    import json

    asked = {"request": "r1", **({"concurrencyPolicy": overlap} if overlap else {})}
    spec = spec_body(concurrencyPolicy="Allow", concurrencyGroup="etl", schedule="0 0 1 1 *")
    body = schedule_body(spec, trigger=json.dumps(asked))
    free = decide(body, [], now=NOW, leadership=LEADER, group=Group("etl", 1, 0))
    assert len(free.creates) == 1
    full = decide(body, [], now=NOW, leadership=LEADER, group=Group("etl", 1, 1))
    assert full.creates == () and skips(full) == ["concurrencyGroup etl: 1 of its 1 run in use"]
    spec = spec_body(concurrencyPolicy="Allow", maxConcurrent=1, schedule="0 0 1 1 *")
    body = schedule_body(spec, trigger=json.dumps(asked))
    running = [job(T0 - H, ACTIVE)]
    limited = decide(body, running, now=NOW, leadership=LEADER)
    assert limited.creates == () and skips(limited)[0].startswith("maxConcurrent 1:")


def test_a_trigger_asking_replace_keeps_the_groups_limit() -> None:
    """Replace deletes only this schedule's runs: with the group full of another member's
    runs, the trigger is skipped (found by the simulator, tests/sim/FINDINGS.md 4)."""
    import json

    asked = json.dumps({"request": "r1", "concurrencyPolicy": "Replace"})
    spec = spec_body(concurrencyPolicy="Allow", concurrencyGroup="etl", schedule="0 0 1 1 *")
    body = schedule_body(spec, trigger=asked)
    full = decide(body, [], now=NOW, leadership=LEADER, group=Group("etl", 1, 1))
    assert full.creates == () and full.replace == ()
    assert skips(full) == ["concurrencyGroup etl: 1 of its 1 run in use"]
    # Its own run in the group: Replace deletes it and the trigger takes its place.
    own = decide(body, [job(T0 - H, ACTIVE)], now=NOW, leadership=LEADER, group=Group("etl", 1, 0))
    assert len(own.creates) == 1 and [j.name for j in own.replace] == [job(T0 - H, ACTIVE).name]
