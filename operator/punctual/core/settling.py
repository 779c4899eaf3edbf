"""Settling claims whose Job can never be created.

Why it exists: a create the API server refuses for good (422 Invalid, 403 Forbidden
by a policy, a foreign Job that holds our name) must not stay in flight, or every
pass would try it again forever. Its claim is settled instead: the firing is
recorded as Failed with the reason, and the tick leaves `inFlight` and `active`.
The applier writes the result right after the creates, fenced like any claim.

A claim whose tick the CronJob a migration came from fired during the switch (its Job
found by name) is settled the same way, as Skipped with how (see `migrating`).

What it must never do: touch a claim that may still succeed (a transient failure,
or the fence's 403 during a takeover, stays in flight), change anything but the
failed Jobs' entries, or edit a raw status: it takes and returns the typed one.
"""

from __future__ import annotations

from collections.abc import Mapping

from punctual.core.models import CronScheduleStatus, FiringOutcome, RecordedFiring


def settle_failures(
    status: CronScheduleStatus,
    failed: Mapping[str, str],
    fired_elsewhere: Mapping[str, str] | None = None,
) -> CronScheduleStatus:
    """`status` with the Jobs in `failed` (name -> why) settled as Failed, and those in
    `fired_elsewhere` (name -> how: the CronJob a migration came from fired the tick)
    settled as Skipped."""
    outcomes = {job: (FiringOutcome.FAILED, why) for job, why in failed.items()}
    for job, how in (fired_elsewhere or {}).items():
        outcomes[job] = (FiringOutcome.SKIPPED, how)
    active = [a for a in status.active if a.name not in outcomes]
    return status.model_copy(
        update={
            "in_flight": [c for c in status.in_flight if c.job not in outcomes],
            "active": active,
            "active_count": len(active),
            "recent_firings": [_settled(f, outcomes) for f in status.recent_firings],
        }
    )


def _settled(
    firing: RecordedFiring, outcomes: Mapping[str, tuple[FiringOutcome, str]]
) -> RecordedFiring:
    settled = outcomes.get(firing.job) if firing.job is not None else None
    if settled is None or firing.outcome is not FiringOutcome.CREATED:
        return firing
    outcome, why = settled
    if outcome is FiringOutcome.SKIPPED:  # no Job of ours was made: the reason names theirs
        return firing.model_copy(update={"outcome": outcome, "reason": why, "job": None})
    return firing.model_copy(update={"outcome": outcome, "reason": why})
