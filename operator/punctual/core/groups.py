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

The shell (runtime.reconciling) gives a decision the group as it stands (`Group`: the
limit, the runs the other members hold, the oldest tick another member waits with) and
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

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any


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
