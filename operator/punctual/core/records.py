"""The records one decision is composed from, shared by `deciding`, its rules and `status`.

Why it exists: `deciding` outlines a decision; the rules of a run's life (overlapping
runs, pauses, freezes, backfills, finishing, freshness, the claims) each return a small
frozen record of what they decided, and `status` turns those records into the status
write, the Events and the metric labels. The pieces several of them share live here: the
schedule as read (`ScheduleRead`), the Jobs a decision may create (`Candidate`) and delete
(`JobToDelete`), the Events it posts (`EventNote`), a skipped tick (`Skip`) with its
reason (`SkipReason`, whose value is the metric label), and the upstreams of spec.after
as the shell reads them (`Upstreams`, read by `reading` and `chaining`). Here, so that
each rule is a module of its own and none imports `deciding`, `status` or another rule.

What it must never do: decide, or hold anything mutable. Every record is frozen; policy
lives in the modules that build them. Like all of `punctual.core`, it never talks to the
API server or reads the clock.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum
from typing import Any, Final, Literal

from pydantic import ValidationError

from punctual.core.jobs import JobSnapshot
from punctual.core.keys import ANNOTATION_MIGRATED_CURSOR
from punctual.core.models import CronScheduleStatus, FiringOutcome, parse_status
from punctual.core.stamping import FiringKind
from punctual.core.times import maybe_time, parse_time
from punctual.core.triggers import TriggerRequest, shown
from punctual.core.workloads import JOB, WorkloadKind

EventType = Literal["Normal", "Warning"]


@dataclass(frozen=True, slots=True)
class EventNote:
    """A Kubernetes Event to post about the schedule once the Decision is applied."""

    type: EventType
    reason: str
    message: str


@dataclass(frozen=True, slots=True)
class Candidate:
    """A Job this decision may create: for a scheduled tick, or for a manual trigger."""

    job: str
    tick: datetime
    manual: bool = False
    request: str | None = None  # the trigger's request id, when it is still known
    kind: FiringKind = FiringKind.SCHEDULED  # told to the workload (PUNCTUAL_FIRING)
    trigger: TriggerRequest | None = None  # a manual trigger's request, when still known
    attempt: int = 1  # a retry of a failed tick (spec.retry): 2 and up
    upstream: tuple[str, ...] = ()  # spec.after: "schedule/run" of the runs that started it


@dataclass(frozen=True, slots=True)
class JobToDelete:
    """A Job to delete: one Replace supersedes, or one beyond the history limits."""

    name: str
    uid: str
    reason: str
    has_finalizer: bool = False  # ours: released right after the delete
    kind: WorkloadKind = JOB


@dataclass(frozen=True, slots=True)
class ScheduleRead:
    """What one decision reads of the schedule and its Jobs."""

    name: str
    uid: str
    generation: int
    annotations: Mapping[str, str]
    created: datetime
    old: CronScheduleStatus
    ours: tuple[JobSnapshot, ...]  # the Jobs this schedule owns
    by_name: Mapping[str, JobSnapshot]

    @classmethod
    def from_body(cls, body: Mapping[str, Any], jobs: Sequence[JobSnapshot]) -> ScheduleRead:
        """The schedule as read from its body, and the Jobs it owns among `jobs`."""
        meta = body["metadata"]
        uid = str(meta["uid"])
        try:
            old = parse_status(body)
        except ValidationError:
            old = CronScheduleStatus()  # an unreadable status is rebuilt, never a crash
        ours = tuple(j for j in jobs if j.schedule_uid == uid)
        return cls(
            name=str(meta["name"]),
            uid=uid,
            generation=int(meta.get("generation") or 0),
            annotations=meta.get("annotations") or {},
            created=_floor(parse_time(meta["creationTimestamp"]), meta.get("annotations") or {}),
            old=old,
            ours=ours,
            by_name={j.name: j for j in ours},
        )

    @property
    def live(self) -> list[JobSnapshot]:
        return [j for j in self.ours if j.active]


def _floor(created: datetime, annotations: Mapping[str, str]) -> datetime:
    """Where a schedule with no cursor starts: its creation, or, migrated from a CronJob,
    that CronJob's cursor (the ticks after it are this schedule's; see `migrating`)."""
    cursor = maybe_time(annotations.get(ANNOTATION_MIGRATED_CURSOR))
    return created if cursor is None else min(created, cursor)


class SkipReason(StrEnum):
    """Why a tick was skipped on purpose. The value is the label of the skip metric
    (`punctual_ticks_skipped_total{reason}`): fixed, never cut from a message."""

    FORBID = "concurrencyPolicy=Forbid"
    REPLACE = "concurrencyPolicy=Replace"
    BUFFER_ONE = "concurrencyPolicy=BufferOne"
    BUFFER_ALL = "concurrencyPolicy=BufferAll"
    # A buffered tick dropped because the policy no longer buffers.
    UNBUFFERED = "concurrencyPolicy=Unbuffered"
    FREEZE_WINDOW = "FreezeWindow=Skip"
    MISSED_RUN_POLICY = "missedRunPolicy=Skip"
    MAX_CONCURRENT = "maxConcurrent"  # Allow or Forbid with spec.maxConcurrent runs running
    CONCURRENCY_GROUP = "concurrencyGroup"  # Allow or Forbid while the group is full
    SUSPENDED = "suspend"  # a run after an upstream's (spec.after) while suspended or paused


@dataclass(frozen=True, slots=True)
class Skip:
    """A candidate skipped on purpose: the fixed reason, and the message people read."""

    candidate: Candidate
    reason: SkipReason
    message: str


def trigger_fields(candidate: Candidate) -> dict[str, Any]:
    """What a manual firing records of its request in status.recentFirings."""
    asked = candidate.trigger
    if asked is None:
        return {}
    return {
        "triggered_by": asked.triggered_by,
        "triggered_by_verified": None if asked.triggered_by is None else asked.verified,
        "trigger_reason": asked.trigger_reason,
        "concurrency_policy": asked.concurrency_policy,
        "env_overrides": shown(asked.env) or None,
    }


# -- spec.after: what a decision is given of the upstreams (`chaining`) ------------


@dataclass(frozen=True, slots=True)
class Ended:
    """How an upstream tick ended: its outcome (Succeeded, Failed, or what status recorded
    for a tick that never ran: Skipped, Missed, Replaced), when, and by which run."""

    outcome: FiringOutcome
    at: datetime | None
    job: str | None
    # A run of `punctual backfill` (as the upstream records it), or a rerun of a dead tick
    # that succeeded (`punctual backfill --failed`): a tick older than the chain's cursor.
    backfill: bool = False
    rerun: bool = False  # that rerun
    manual: bool = False  # a manual trigger's run


@dataclass(frozen=True, slots=True)
class Upstream:
    """An upstream schedule as this decision sees it: its ended ticks and the ticks whose
    run is still to come (running, claimed, or waiting for a retry)."""

    name: str
    ended: Mapping[datetime, Ended]
    pending: frozenset[datetime]

    @property
    def newest(self) -> datetime | None:
        return max([*self.ended, *self.pending], default=None)


@dataclass(frozen=True, slots=True)
class Upstreams:
    """What the shell gives a decision of spec.after: each upstream named, as read (None:
    no such schedule), and a chain of spec.after back to the schedule, if there is one."""

    found: Mapping[str, Upstream | None]
    cycle: tuple[str, ...] | None = None


NO_UPSTREAMS: Final = Upstreams({})
