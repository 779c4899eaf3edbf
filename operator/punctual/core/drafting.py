"""The pieces one decision is assembled from, shared by `deciding` and the rules it calls.

Why it exists: `deciding` outlines a decision; the rules of a run's life (overlapping
runs, pauses, freezes, backfills, finishing, freshness) each add to it: a skipped tick,
a condition, an Event. They share the schedule as read (`Schedule`), the status being
drafted (`Draft`), the Jobs a decision may create (`Candidate`) and delete
(`JobToDelete`), the Events it posts (`EventNote`), and the two ways a rule writes into
the draft: `set_condition` and `record_skip`. Here, so that each rule is a module of its
own and none imports `deciding`.

What it must never do: decide. It holds data and records what a rule decided; policy
lives in the modules that import it. Like all of `punctual.core`, it never talks to the
API server or reads the clock.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal

from punctual.core.jobs import JobSnapshot
from punctual.core.models import (
    Backfill,
    BufferedTick,
    Condition,
    CronScheduleStatus,
    FiringOutcome,
    RecordedFiring,
)
from punctual.core.stamping import FiringKind
from punctual.core.times import format_time
from punctual.core.triggers import TriggerRequest

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


@dataclass(frozen=True, slots=True)
class JobToDelete:
    """A Job to delete: one Replace supersedes, or one beyond the history limits."""

    name: str
    uid: str
    reason: str
    held: bool = False  # it carries our finalizer: released right after the delete


@dataclass(frozen=True, slots=True)
class Schedule:
    """What one decision reads of the schedule and its Jobs."""

    name: str
    uid: str
    generation: int
    annotations: Mapping[str, str]
    created: datetime
    old: CronScheduleStatus
    ours: tuple[JobSnapshot, ...]  # the Jobs this schedule owns
    by_name: Mapping[str, JobSnapshot]

    @property
    def live(self) -> list[JobSnapshot]:
        return [j for j in self.ours if j.active]


@dataclass(slots=True)
class Draft:
    """The status being assembled for one decision."""

    status: CronScheduleStatus
    epoch: int
    firings: list[RecordedFiring] = field(default_factory=list)
    skips: list[str] = field(default_factory=list)  # metric label per concurrency skip
    events: list[EventNote] = field(default_factory=list)
    buffered: list[BufferedTick] | None = None  # status.buffered after this decision
    backfill: Backfill | None = None  # status.backfill after this decision


def set_condition(
    conditions: list[Condition],
    *,
    kind: str,
    status: Literal["True", "False", "Unknown"],
    reason: str,
    message: str,
    now: datetime,
    generation: int,
) -> bool:
    """Set one condition in place; True if its status changed (a transition)."""
    for i, cond in enumerate(conditions):
        if cond.type == kind:
            changed = cond.status != status
            conditions[i] = Condition(
                type=kind,
                status=status,
                reason=reason,
                message=message,
                last_transition_time=now if changed else cond.last_transition_time,
                observed_generation=generation,
            )
            return changed
    conditions.append(
        Condition(
            type=kind,
            status=status,
            reason=reason,
            message=message,
            last_transition_time=now,
            observed_generation=generation,
        )
    )
    return True


def record_skip(draft: Draft, candidate: Candidate, reason: str) -> None:
    draft.skips.append(reason.split(":", 1)[0].replace(" ", "="))  # concurrencyPolicy=Forbid
    draft.firings.append(
        RecordedFiring(
            tick=candidate.tick,
            outcome=FiringOutcome.SKIPPED,
            epoch=draft.epoch,
            reason=reason,
            manual=candidate.manual,
            **trigger_fields(candidate),
        )
    )
    draft.events.append(
        EventNote("Normal", "Skipped", f"Tick {format_time(candidate.tick)}: {reason}")
    )


def trigger_fields(candidate: Candidate) -> dict[str, Any]:
    """What a manual firing records of its request in status.recentFirings."""
    asked = candidate.trigger
    if asked is None:
        return {}
    return {
        "triggered_by": asked.triggered_by,
        "trigger_reason": asked.trigger_reason,
        "concurrency_policy": asked.concurrency_policy,
    }
