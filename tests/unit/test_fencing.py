"""What the Fence's spec becomes when a leader raises it, unsharded and per shard.

The admission policy that reads it is checked against the real API server
(tests/e2e/test_fencing.py, tests/e2e/test_shards.py).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pytest

from punctual.kube.fencing import entry_epoch, fence_count, raised


@dataclass(frozen=True)
class Case:
    name: str
    current: dict[str, Any] | None
    key: str | None
    count: int
    epoch: int
    expected: dict[str, Any] | None
    other_count_alive: bool = False
    holder: str = "me"
    extra: dict[str, Any] = field(default_factory=dict)


SHARDED: dict[str, Any] = {
    "holder": "old",
    "epoch": 7,
    "shardCount": 4,
    "shards": {"0-of-4": {"holder": "a", "epoch": 2}, "1-of-4": {"holder": "b", "epoch": 5}},
}

CASES = [
    Case(
        "unsharded, no Fence yet: holder and epoch, as before shards",
        None,
        None,
        1,
        0,
        {"holder": "me", "epoch": 0},
    ),
    Case(
        "unsharded, raised to a newer epoch",
        {"holder": "old", "epoch": 3},
        None,
        1,
        4,
        {"holder": "me", "epoch": 4},
    ),
    Case("unsharded, a newer leader holds it", {"holder": "x", "epoch": 5}, None, 1, 4, None),
    Case(
        "sharded, no Fence yet: the entry and the count",
        None,
        "1-of-4",
        4,
        0,
        {
            "holder": "",
            "epoch": 0,
            "shardCount": 4,
            "shards": {"1-of-4": {"holder": "me", "epoch": 0}},
        },
    ),
    Case(
        "sharded: one entry moves, the others stay",
        SHARDED,
        "1-of-4",
        4,
        6,
        {**SHARDED, "shards": {**SHARDED["shards"], "1-of-4": {"holder": "me", "epoch": 6}}},
    ),
    Case("sharded: a newer leader of the shard holds it", SHARDED, "1-of-4", 4, 4, None),
    Case(
        "count change 4 -> 8 while a Lease of 4 lives: not raised",
        SHARDED,
        "5-of-8",
        8,
        0,
        None,
        other_count_alive=True,
    ),
    Case(
        "count change 4 -> 8 once every Lease of 4 is dead: the old entries go",
        SHARDED,
        "5-of-8",
        8,
        0,
        {
            "holder": "old",
            "epoch": 7,
            "shardCount": 8,
            "shards": {"5-of-8": {"holder": "me", "epoch": 0}},
        },
    ),
    Case(
        "count change 1 -> 4: the unsharded holder and epoch are kept for a way back",
        {"holder": "old", "epoch": 7},
        "0-of-4",
        4,
        1,
        {
            "holder": "old",
            "epoch": 7,
            "shardCount": 4,
            "shards": {"0-of-4": {"holder": "me", "epoch": 1}},
        },
    ),
    Case(
        "count change 4 -> 1 once the shards are dead: back to holder and epoch",
        SHARDED,
        None,
        1,
        8,
        {"holder": "me", "epoch": 8},
    ),
    Case("count change 4 -> 1 while a shard lives: not raised", SHARDED, None, 1, 8, None, True),
]


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_raised(case: Case) -> None:
    spec = raised(
        case.current,
        holder=case.holder,
        epoch=case.epoch,
        key=case.key,
        count=case.count,
        other_count_alive=case.other_count_alive,
    )
    assert spec == case.expected


def test_reading_the_fence() -> None:
    assert fence_count({"holder": "a", "epoch": 1}) == 1
    assert fence_count(SHARDED) == 4
    assert entry_epoch(SHARDED, None) == 7
    assert entry_epoch(SHARDED, "1-of-4") == 5
    assert entry_epoch(SHARDED, "3-of-4") is None
    assert entry_epoch({}, None) is None
