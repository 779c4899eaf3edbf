"""Shard assignment and balancing, as pure functions on a fake clock.

Rows read as "replica me, with these live members and these shards held, at this
moment": what its share is, how many free shards it may take and which it releases.
The loop that reads and writes the Leases is tested against the real API server
(tests/e2e/test_shards.py).
"""

from __future__ import annotations

import re
import uuid
from collections import Counter
from dataclasses import dataclass
from datetime import UTC, datetime

import pytest

from punctual.kube.leases import LeaseRecord, Observation, shard_lease_name
from punctual.kube.sharding import (
    Membership,
    fair_share,
    live_members,
    member_lease_name,
    preference,
    shard_key,
    shard_moves,
    shard_of,
    track,
)

T0 = datetime(2026, 11, 26, 12, 0, tzinfo=UTC)
NOW = 1000.0
SETTLE = 15.0


# -- which shard -------------------------------------------------------------------------


def test_a_uid_is_always_in_the_same_shard_and_one_shard_holds_everything() -> None:
    uid = "6f1c2a7e-0d3b-4d6e-9a51-3c2f7b8e9d10"
    assert shard_of(uid, 8) == shard_of(uid, 8)  # not Python's salted hash()
    assert shard_of(uid, 8) == 2  # pinned: a change would move every schedule
    assert shard_of(uid, 1) == 0


def test_shards_are_even_for_random_uids() -> None:
    counts = Counter(shard_of(str(uuid.UUID(int=i * 7919 + 1)), 16) for i in range(16_000))
    assert set(counts) == set(range(16))
    assert max(counts.values()) < 1.1 * 1000 and min(counts.values()) > 0.9 * 1000


def test_one_shard_keeps_the_names_of_an_installation_without_shards() -> None:
    assert shard_lease_name("punctual-leader", 0, 1) == "punctual-leader"
    assert shard_key(0, 1) is None  # no Job label, the Fence's holder and epoch
    assert shard_lease_name("punctual-leader", 3, 8) == "punctual-leader-3-of-8"
    assert shard_key(3, 8) == "3-of-8"


@pytest.mark.parametrize("identity", ["a", "punctual-7d9f-x2k", "pod/with:odd chars", "Ü" * 300])
def test_a_membership_lease_name_is_valid_and_its_own_whatever_the_identity(
    identity: str,
) -> None:
    name = member_lease_name("punctual-leader", identity)
    assert name == member_lease_name("punctual-leader", identity)  # stable
    assert re.fullmatch(r"punctual-leader-member-[0-9a-f]{12}", name)  # a valid object name
    assert name != member_lease_name("punctual-leader", identity + "2")  # one per replica


# -- who is live -------------------------------------------------------------------------


def seen(holder: str, *, for_: float, renewed: datetime | None = None) -> Observation:
    record = LeaseRecord(holder=holder, renew_time=renewed, transitions=0, duration=15.0)
    return Observation(record, NOW - for_)


@dataclass(frozen=True)
class LiveCase:
    name: str
    leases: dict[str, Observation]
    server_now: datetime | None
    expected: list[str]


LIVE = [
    LiveCase("alone: me, even before my own Lease is listed", {}, None, ["me"]),
    LiveCase(
        "a member renewing", {"a": seen("a", for_=1), "me": seen("me", for_=1)}, None, ["a", "me"]
    ),
    LiveCase(
        "a member unchanged for its duration is gone", {"a": seen("a", for_=15)}, None, ["me"]
    ),
    LiveCase("a member unchanged for less is live", {"a": seen("a", for_=14.9)}, None, ["a", "me"]),
    LiveCase(
        "past renewTime + duration on the server's clock: gone before a whole duration seen",
        {"a": seen("a", for_=1, renewed=T0)},
        T0.replace(second=16),
        ["me"],
    ),
    LiveCase("a released membership (left on SIGTERM)", {"a": seen("", for_=0)}, None, ["me"]),
]


@pytest.mark.parametrize("case", LIVE, ids=[c.name for c in LIVE])
def test_live_members(case: LiveCase) -> None:
    live = live_members(case.leases, me="me", now=NOW, server_now=case.server_now)
    assert live == case.expected


# -- fair shares -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("members", "count", "shares"),
    [
        (["a"], 16, [16]),
        (["a", "b"], 16, [8, 8]),
        (["a", "b", "c"], 8, [3, 3, 2]),
        (["a", "b", "c"], 16, [6, 5, 5]),
        (["a", "b", "c", "d"], 16, [4, 4, 4, 4]),
        (["a", "b", "c", "d", "e"], 4, [1, 1, 1, 1, 0]),  # more replicas than shards
    ],
)
def test_shares_add_up_to_the_count_and_differ_by_at_most_one(
    members: list[str], count: int, shares: list[int]
) -> None:
    got = [fair_share(m, members, count) for m in members]
    assert got == shares
    assert sum(got) == count and max(got) - min(got) <= 1


def test_replicas_prefer_different_shards() -> None:
    members = ["a", "b"]
    assert preference("a", members, 16)[0] == 0
    assert preference("b", members, 16)[0] == 8
    assert sorted(preference("b", members, 16)) == list(range(16))


# -- what a round does -------------------------------------------------------------------


@dataclass(frozen=True)
class PlanCase:
    name: str
    members: tuple[str, ...]
    stable_for: float
    held: list[int]
    count: int
    share: int
    may_take: int
    release: tuple[int, ...]


PLANS = [
    PlanCase("alone: take every shard", ("me",), 0, [], 16, 16, 16, ()),
    PlanCase("two replicas starting: take half", ("me", "x"), 0, [], 16, 8, 8, ()),
    PlanCase("at its share: take nothing", ("me", "x"), 60, [0, 1, 2, 3, 4, 5, 6, 7], 16, 8, 0, ()),
    PlanCase(
        "a replica joined: release the excess once the view is stable",
        ("me", "x"),
        SETTLE,
        list(range(16)),
        16,
        8,
        0,
        (8, 9, 10, 11, 12, 13, 14, 15),
    ),
    PlanCase(
        "a replica joined a moment ago (or flaps): release nothing yet",
        ("me", "x"),
        SETTLE - 0.1,
        list(range(16)),
        16,
        8,
        0,
        (),
    ),
    PlanCase(
        "a replica left: take its shards up to the new share at once",
        ("me",),
        0,
        [0, 1, 2, 3, 4, 5, 6, 7],
        16,
        16,
        8,
        (),
    ),
    PlanCase(
        "uneven: three replicas, 8 shards, first rank takes 3",
        ("me", "x", "y"),
        0,
        [1],
        8,
        3,
        2,
        (),
    ),
    PlanCase(
        "uneven: last rank's share is 2; holding 3 it gives one back when stable",
        ("a", "b", "me"),
        SETTLE,
        [5, 6, 7],
        8,
        2,
        0,
        (7,),
    ),
]


@pytest.mark.parametrize("case", PLANS, ids=[c.name for c in PLANS])
def test_plan(case: PlanCase) -> None:
    membership = Membership(case.members, NOW - case.stable_for)
    plan = shard_moves(
        me="me", membership=membership, held=case.held, count=case.count, now=NOW, stable_for=SETTLE
    )
    assert (plan.share, plan.may_take, plan.release) == (case.share, case.may_take, case.release)


def test_membership_clock_restarts_on_any_change_and_only_then() -> None:
    first = track(None, ["a", "me"], NOW)
    assert track(first, ["a", "me"], NOW + 5) is first
    flapped = track(first, ["me"], NOW + 6)
    assert flapped.since == NOW + 6
    back = track(flapped, ["a", "me"], NOW + 7)
    assert back.since == NOW + 7  # back again: stable only from now


def test_flapping_member_moves_no_shard() -> None:
    """A member that comes and goes every few seconds never lets the view settle, so the
    replica holding 16 shards gives none away; and takes none beyond its share."""
    membership = None
    held = list(range(16))
    shares = []
    for step in range(20):
        members = ["me", "x"] if step % 2 else ["me"]
        membership = track(membership, members, NOW + 3 * step)
        plan = shard_moves(
            me="me",
            membership=membership,
            held=held,
            count=16,
            now=NOW + 3 * step,
            stable_for=SETTLE,
        )
        shares.append(plan.share)
        assert plan.release == ()  # gives none away ...
        assert plan.may_take == 0  # ... and, at or above its share, takes none
        assert len(held) + plan.may_take <= max(plan.share, len(held))
    assert shares == [16, 8] * 10  # the flap was seen each time: it is the settling that waits


@pytest.mark.parametrize("held", [0, 3, 7, 8, 9, 16])
@pytest.mark.parametrize("members", [("me",), ("me", "x"), ("a", "me", "x"), ("a", "b", "me")])
def test_a_round_never_takes_beyond_the_share(held: int, members: tuple[str, ...]) -> None:
    """Whatever it holds and whoever is live: what it may take tops it up to its share at
    most, and what it releases brings it down to its share exactly (once settled)."""
    for stable_for in (0, SETTLE):
        plan = shard_moves(
            me="me",
            membership=Membership(members, NOW - stable_for),
            held=list(range(held)),
            count=16,
            now=NOW,
            stable_for=SETTLE,
        )
        assert plan.share == fair_share("me", members, 16)
        assert plan.may_take == max(0, plan.share - held)
        kept = held - len(plan.release)
        assert kept == (min(held, plan.share) if stable_for >= SETTLE else held)
        assert kept + plan.may_take <= max(plan.share, kept)


def test_two_replicas_converge_to_an_even_split() -> None:
    """Simulated rounds: 'a' holds all 16, 'b' joins; after the settle time 'a' releases
    8 and 'b' takes them; the split then stays 8/8."""
    held = {"a": set(range(16)), "b": set[int]()}
    memberships = {name: track(None, ["a", "b"], NOW) for name in held}
    splits = []
    for step in range(12):
        now = NOW + 2 * step
        for name in ("a", "b"):
            plan = shard_moves(
                me=name,
                membership=memberships[name],
                held=sorted(held[name]),
                count=16,
                now=now,
                stable_for=SETTLE,
            )
            held[name] -= set(plan.release)
            free = set(range(16)) - held["a"] - held["b"]
            for shard in [s for s in preference(name, ["a", "b"], 16) if s in free][
                : plan.may_take
            ]:
                held[name].add(shard)
            assert not held["a"] & held["b"]  # no shard is ever held twice
        splits.append((now - NOW, len(held["a"]), len(held["b"])))
    # Rounds every 2 s: nothing moves before the view has been stable for 15 s; at the
    # first round after (16 s) 'a' releases 8 and 'b' takes them; then it stays 8/8.
    assert splits == [(2.0 * i, 16, 0) for i in range(8)] + [(2.0 * i, 8, 8) for i in range(8, 12)]
    assert held["b"] == set(preference("b", ["a", "b"], 16)[:8]) == set(range(8, 16))
