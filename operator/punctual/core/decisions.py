"""What a decision hands the shell: the Decision and the pieces it is made of.

Why it exists: `deciding` makes a Decision; `kube.applying` applies it, `delaying` may
leave its status write for later, `runtime` schedules it and counts its metrics. They
share these types, here, so that none of them imports the outline of a decision
(`deciding`) for its types, and so that `delaying` can be used by `deciding` without a
cycle.

What it must never do: decide. It holds frozen data only. Like all of `punctual.core`,
it never talks to the API server or reads the clock.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from enum import Enum
from typing import Any

from punctual.core.models import CronScheduleStatus
from punctual.core.records import EventNote, JobToDelete, SkipReason
from punctual.core.workloads import JOB, WorkloadKind


class WriteDelay(Enum):
    """Whether a Decision's status write may wait for a later write to carry it."""

    NEVER = "never"  # it fences a create, reports something, or moves the cursor
    # It changes only bookkeeping (a Job finished, a claim was seen created): it may
    # wait up to the status delay, so a Job finishing meanwhile costs no write.
    BOOKKEEPING = "bookkeeping"
    # Its only change: claims whose Jobs are now seen leave inFlight. Never worth a
    # write of its own; the next write carries it (and recovery finds the Jobs).
    RESOLVES_CLAIMS_ONLY = "resolves-claims-only"


@dataclass(frozen=True, slots=True)
class JobToCreate:
    name: str
    tick: datetime
    body: dict[str, Any]
    manual: bool = False
    fire_at: datetime | None = None  # tick plus jitter: where firing lag is measured from
    kind: WorkloadKind = JOB  # a workloadTemplate's kind, or a Job


@dataclass(frozen=True, slots=True)
class JobToFree:
    """A Job with our finalizer, being deleted, whose firing the written status records
    (or will, once this Decision's status is written): its finalizer may go.
    `needs_status`: its firing is recorded only by this Decision's status, so it goes
    only after that status is written, and stays held while the write is left for later."""

    name: str
    uid: str
    kind: WorkloadKind = JOB
    needs_status: bool = False


@dataclass(frozen=True, slots=True)
class JobToFail:
    """A Job none of whose pods started within spec.pendingTimeoutSeconds (see `pending`):
    the shell writes why on it and stops it."""

    name: str
    uid: str
    reason: str


@dataclass(frozen=True, slots=True)
class Decision:
    """What the shell applies (`kube.applying.Applier.apply`), in this order, the one
    place it is written (the other docs link here):

    1. `status`, written with the schedule's resourceVersion as precondition: the claim
       (cursor moved, new ticks in `inFlight`). A 409 means someone else wrote first:
       nothing more of this Decision is done; it is made again from a fresh read.
    2. `replace`: the running Jobs Replace supersedes are deleted.
    3. `creates` (a 409 AlreadyExists from a Job we own means done); a create refused for
       good is settled in status (`settling`).
    4. `fail`: Jobs stuck pending are failed, and say why.
    5. `prune`: history clean-up, never the Job of a tick still in flight.
    6. `free`: our finalizer leaves Jobs being deleted whose firing status records.
    7. `events`, best effort, off the firing path.
    """

    status: dict[str, Any] | None
    replace: tuple[JobToDelete, ...] = ()
    creates: tuple[JobToCreate, ...] = ()
    prune: tuple[JobToDelete, ...] = ()
    free: tuple[JobToFree, ...] = ()
    fail: tuple[JobToFail, ...] = ()  # stuck pending past spec.pendingTimeoutSeconds
    events: tuple[EventNote, ...] = ()
    next_wake: datetime | None = None
    # When to look again once every create of it has landed: the next wake without the
    # soon recheck of the claims it fills (their Jobs are known then; what is left is the
    # write that records them, which may wait as bookkeeping does).
    landed_wake: datetime | None = None
    # When and how the status write may wait for a later one (see `delaying`).
    write_delay: WriteDelay = WriteDelay.NEVER
    # Set by `delaying` when the status is left for a later write: what that write will
    # say, typed. A create that fails for good is settled on top of it, at once.
    delayed_status: CronScheduleStatus | None = None
    # `status` as the status builder made it, typed, so that leaving it for later needs
    # no second validation of its dump (None: `status` is None, or the typed form was
    # not kept; `delaying` then validates the dump).
    typed_status: CronScheduleStatus | None = None
    # When its writes are needed: now for a create or a Replace, a new claim's tick for
    # a claim made ahead; None when nothing in it waits on a tick (a first status far
    # from its first tick, conditions, history). The shell lets due writes go first.
    due_by: datetime | None = None
    # For metrics, counted once the status that records them is written.
    missed: int = 0
    skipped: tuple[tuple[SkipReason, int], ...] = ()  # (reason, count): the label is fixed
    newly_failed: int = 0
    newly_dead: int = 0  # ticks whose last attempt failed (spec.retry)
    # Runs after upstream runs (spec.after): (run, seconds from the upstreams' end to now),
    # observed as punctual_chain_lag_seconds once created.
    lags: tuple[tuple[str, float], ...] = ()
    # A run of it ending well, or a finished run being deleted, changes only bookkeeping
    # (`delaying.quiet_endings`): the shell looks at it by the next write, not at once.
    quiet_endings: bool = False

    @property
    def writes(self) -> bool:
        return bool(
            self.status is not None
            or self.replace
            or self.creates
            or self.prune
            or self.free
            or self.fail
        )


@dataclass(frozen=True, slots=True)
class Leadership:
    """Who decides: stamped on every Job (the epoch is the Lease's leaseTransitions)."""

    epoch: int
    identity: str
    # The installation (its Lease, "namespace/name"), written in status with every claim
    # and labelled on every Job; None: not recorded (tests, single installations).
    installation: str | None = None
    # With shards: the shard ("<i>-of-<n>") whose Lease gave the epoch, labelled on every
    # Job so that the admission policy judges it by that shard's Fence entry.
    shard: str | None = None
