"""How many more runs may start now: the one room every kind of run is admitted against.

Why it exists: a run may start for a due tick, a manual trigger, a retry attempt, a
backfill fill or a buffered tick, and each must respect the same limits: the schedule's
own (`maxConcurrent`; without it `Allow` is unbounded and every other policy runs one at
a time) and its concurrency group's (`groups`). When each rule computed that room itself,
a backfill ran 11 Jobs under `maxConcurrent: 2`. Now `room` is the only place the number
is computed; `overlapping` (due ticks, triggers, buffers), `retrying` and `backfilling`
each ask it, with the runs it already has (running, being recovered, or admitted earlier in
the same decision), and differ only in what a candidate does when there is none: a due
tick under `Allow`/`Forbid` is skipped, a buffered tick, a retry and a backfill fill wait,
`Replace` makes room by deleting the oldest runs, and a recovered claim always goes (it
was admitted when it was claimed). That is each candidate's `Disposition`; `admit` is
the one loop that hands the room out in order (recovered claims, then retry attempts, then
due ticks and triggers, then backfill fills, each source passing the runs admitted before
it as held). A backfill walks its range and stops at its room, which is the same loop
with its candidates made as it goes.

What it must never do: count a run twice or not at all (the caller passes every run it
holds), or admit past a limit. Like all of `punctual.core`, it never talks to the API
server or reads the clock.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Final, Generic, TypeVar

from punctual.core.groups import Group
from punctual.core.models import ConcurrencyPolicy

# No limit at all: Allow without maxConcurrent, outside a group.
UNBOUNDED: Final = 1_000_000


class Disposition(StrEnum):
    """What a candidate does when the room is full."""

    SKIP = "Skip"  # a due tick under Allow or Forbid: skipped, with the limit as reason
    WAIT = "Wait"  # a buffered tick, a retry attempt, a backfill fill: tried again later
    REPLACE = "Replace"  # Replace: the oldest runs beyond the limit are deleted first
    ALWAYS = "Always"  # a claim being recovered: admitted when it was claimed


def disposition(policy: ConcurrencyPolicy) -> Disposition:
    """What a due tick does under `policy` when there is no room."""
    if policy is ConcurrencyPolicy.REPLACE:
        return Disposition.REPLACE
    return Disposition.WAIT if policy.buffers else Disposition.SKIP


@dataclass(frozen=True, slots=True)
class Room:
    """How many more runs may start, and which limit says so."""

    free: int  # UNBOUNDED when nothing limits
    limit: int | None  # the schedule's own limit (None: unbounded)
    by_group: bool  # the group's limit is the one that binds (or ties)

    @property
    def bounded(self) -> bool:
        return self.free < UNBOUNDED


T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class Admission(Generic[T]):
    """What the loop did with the candidates it was handed, each list in their order."""

    admitted: tuple[T, ...]
    refused: tuple[T, ...]  # no room: skipped (SKIP) or left waiting (WAIT), as disposed


def admit(candidates: Sequence[tuple[T, Disposition]], free: int) -> Admission[T]:
    """The one loop that hands out room: in order, a candidate marked ALWAYS goes whatever
    the room (it was admitted when it was claimed, and is already counted among the runs
    held); any other takes one place while `free` lasts, and is refused after. (REPLACE
    candidates are not handed here: Replace makes its room by deleting, `overlapping`.)"""
    admitted: list[T] = []
    refused: list[T] = []
    for candidate, disposed in candidates:
        if disposed is Disposition.ALWAYS:
            admitted.append(candidate)
        elif free > 0:
            admitted.append(candidate)
            free -= 1
        else:
            refused.append(candidate)
    return Admission(tuple(admitted), tuple(refused))


def own_limit(policy: ConcurrencyPolicy, max_concurrent: int | None) -> int | None:
    """The schedule's own limit on runs at once: maxConcurrent, else one at a time for every
    policy but Allow (unbounded)."""
    if max_concurrent is not None:
        return max_concurrent
    return None if policy is ConcurrencyPolicy.ALLOW else 1


def room(
    policy: ConcurrencyPolicy,
    max_concurrent: int | None,
    *,
    running: int,
    group: Group | None = None,
) -> Room:
    """The room for more runs of a schedule with `running` runs (running, recovered, or
    admitted earlier in this decision): the smaller of its own limit's and its group's."""
    limit = own_limit(policy, max_concurrent)
    own = UNBOUNDED if limit is None else max(0, limit - running)
    if group is not None:
        shared = group.room(running)
        if shared <= own:
            return Room(shared, limit, by_group=True)
    return Room(own, limit, by_group=False)
