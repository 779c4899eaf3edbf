"""Concurrency groups: schedules of a namespace that share a limit on runs at once.

Why it exists: some schedules must not run together (two jobs writing the same table, a
nightly batch and its compaction), across schedules, not only within one (k8s#76570,
argo#7389, #12757). `spec.concurrencyGroup: NAME`: the schedules of a namespace naming
the same group run at most one run among them at a time (a mutex), or at most
`spec.maxConcurrent` of the namespace's `ConcurrencyGroup` object of that name when
there is one (a semaphore). While the group is full, a member's own concurrencyPolicy
says what its tick does: Allow and Forbid skip it (reason `concurrencyGroup`), BufferOne
and BufferAll keep it waiting; Replace is refused (it would delete another schedule's
run). Waiting members go in tick order: a member whose oldest waiting tick is newer than
another member's waits behind it.

The shell (runtime.reconciling) reads the members and the limit; `state` says how the
group stands (`Group`: the limit, the runs the other members occupy, the oldest tick
another member waits with, the fairness rule), and the shell
decides a group's members one at a time; every member is decided by the shard of its
group (`placement_of`: the hash of namespace/group instead of the uid), so one leader
sees the whole group, across failover and with shards. A schedule that joins or leaves a
group moves to that shard: its status claims are fenced by resourceVersion, so the leader
of its old shard, still deciding on the old spec, writes nothing once the edit is in.

What it must never do: let a member exceed the limit by its own decision, or change its
arguments. Like all of `punctual.core`, it never talks to the API server or reads the
clock.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from punctual.core.jobs import JobSnapshot
from punctual.core.naming import job_name
from punctual.core.times import maybe_time


@dataclass(frozen=True, slots=True)
class Group:
    """A concurrency group as one member's decision sees it."""

    name: str
    limit: int  # runs among all members at once: 1 (a mutex) or the object's maxConcurrent
    occupied: int  # runs of the other members: running, or claimed and not yet seen
    waiting_since: datetime | None = None  # the oldest tick another member waits with

    def room(self, running: int) -> int:
        """How many more runs this member may start, holding `running` itself."""
        return max(0, self.limit - self.occupied - running)

    def message(self, running: int) -> str:
        return (
            f"concurrencyGroup {self.name}: {self.occupied + running} of its {self.limit} "
            f"{'run' if self.limit == 1 else 'runs'} in use"
        )


@dataclass(frozen=True, slots=True)
class Member:
    """Another member of the group as last read: its name, body and Jobs."""

    name: str
    body: Mapping[str, Any]
    jobs: Sequence[JobSnapshot]


def state(
    name: str,
    limit: int,
    *,
    me: str,
    my_jobs: Sequence[JobSnapshot],
    others: Sequence[Member],
    now: datetime,
) -> Group:
    """The group as member `me` sees it: the runs the other members occupy (running, or
    claimed in flight for a due tick and not yet seen: a claim a new leader creates
    whatever the policy) and the oldest tick one of them waits with (buffered). A claim
    made ahead does not occupy the group (it is decided again at its tick), but the
    fairness rule: a member that ran less lately and is due now goes first, so `me`
    yields it a place, and two members due together take turns, not one always."""
    occupied = 0
    waiting: list[datetime] = []
    mine = newest_run(my_jobs)
    yields = False
    for other in others:
        if group_of(other.body) != name:
            continue
        seen = {j.name for j in other.jobs}
        occupied += sum(1 for j in other.jobs if j.active)
        status = other.body.get("status") or {}
        cursor = maybe_time(status.get("lastScheduledTime"))
        for claim in status.get("inFlight") or []:
            tick = maybe_time(claim.get("tick"))
            if claim.get("job") in seen or tick is None or tick > now:
                continue
            ahead = (
                claim.get("job") == job_name(other.name, tick)
                and not claim.get("backfill")
                and not claim.get("upstream")
                and (cursor is None or tick > cursor)
            )  # as `claiming.claimed_ahead` says, read from the raw status (no parse)
            if not ahead:
                occupied += 1
            elif (newest_run(other.jobs), other.name) < (mine, me):
                yields = True  # due now too, and it ran less lately: it goes first
        # Its next tick, due now and claimed by its window (status.claimedThrough), its
        # Job not seen yet: claimed ahead as well, so the same turn-taking holds.
        upcoming = maybe_time(status.get("nextScheduleTime"))
        through = maybe_time(status.get("claimedThrough"))
        if (
            upcoming is not None
            and through is not None
            and upcoming <= now
            and upcoming <= through
            and (cursor is None or upcoming > cursor)
            and job_name(other.name, upcoming) not in seen
            and (newest_run(other.jobs), other.name) < (mine, me)
        ):
            yields = True
        for entry in status.get("buffered") or []:
            tick = maybe_time(entry.get("tick"))
            if entry.get("job") not in seen and tick is not None:
                waiting.append(tick)
    return Group(name, limit, occupied + int(yields), min(waiting, default=None))


def newest_run(jobs: Sequence[JobSnapshot]) -> datetime:
    """When a member last started a run (the epoch when never)."""
    return max((j.created for j in jobs if j.created is not None), default=_NEVER)


_NEVER = datetime(1970, 1, 1, tzinfo=UTC)


def group_of(body: Mapping[str, Any]) -> str | None:
    """The group a schedule names (spec.concurrencyGroup), if any."""
    name = (body.get("spec") or {}).get("concurrencyGroup")
    return name if isinstance(name, str) and name else None


def placement_of(body: Mapping[str, Any]) -> str:
    """What decides a schedule's shard: its uid, or its namespace and group, so that every
    member of a group is decided by the same shard."""
    meta = body.get("metadata") or {}
    group = group_of(body)
    if group is None:
        return str(meta.get("uid", ""))
    return f"{meta.get('namespace', '')}/{group}"
