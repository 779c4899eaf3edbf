"""Settling claims whose Job can never be created.

Why it exists: a create the API server refuses for good (422 Invalid, 403 Forbidden
by a policy, a foreign Job that holds our name) must not stay in flight, or every
pass would try it again forever. Its claim is settled instead: the firing is
recorded as Failed with the reason, and the tick leaves `inFlight` and `active`.
The applier writes the result right after the creates, fenced like any claim.

What it must never do: touch a claim that may still succeed (a transient failure,
or the fence's 403 during a takeover, stays in flight), change anything but the
failed Jobs' entries, or edit a raw status: it takes and returns the typed one.
"""

from __future__ import annotations

from collections.abc import Mapping

from punctual.core.models import CronScheduleStatus, FiringOutcome, RecordedFiring


def settle_failures(status: CronScheduleStatus, failed: Mapping[str, str]) -> CronScheduleStatus:
    """`status` with the Jobs in `failed` (name -> why) settled."""
    active = [a for a in status.active if a.name not in failed]
    return status.model_copy(
        update={
            "in_flight": [c for c in status.in_flight if c.job not in failed],
            "active": active,
            "active_count": len(active),
            "recent_firings": [_settled(f, failed) for f in status.recent_firings],
        }
    )


def _settled(firing: RecordedFiring, failed: Mapping[str, str]) -> RecordedFiring:
    why = failed.get(firing.job) if firing.job is not None else None
    if why is None or firing.outcome is not FiringOutcome.CREATED:
        return firing
    return firing.model_copy(update={"outcome": FiringOutcome.FAILED, "reason": why})
