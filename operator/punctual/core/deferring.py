"""Whether a status write may wait, and until when: the policy that saves writes.

Why it exists: a status change that only follows the Jobs (one finished, a claim
was seen created, the cursor moved over ticks claimed ahead) fences nothing. Left
for the next write that must happen anyway (the next claim), it costs no request of
its own. `deciding` says which kind of change a Decision makes (`Deferral`); this
module decides, from when the schedule's status was first left unwritten, whether
to write now, and returns the Decision the shell applies.

It also says which writes are routine (`routine`): those whose Decision waits on no
tick within `ROUTINE_HORIZON` (`Decision.due_by`), such as a first claim for a tick a
year away. The shell lets routine writes queue behind due ones when the write path is
busy, and looks at a postponed claim again a horizon before its tick at the latest
(`routine_wake`), when it is due and goes first.

What it must never do: defer a write that `deciding` marked `NEVER` (a new claim, a
Replace, a prune the written status still protects, anything reported), or defer a
bookkeeping write for longer than the delay, except behind due writes.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from datetime import datetime, timedelta

from punctual.core.deciding import Decision, Deferral

# A write needed no sooner than this is routine: it may queue behind due ones.
ROUTINE_HORIZON = timedelta(seconds=10)


@dataclass(frozen=True, slots=True)
class Deferred:
    """The Decision to apply now, and since when the schedule has had status changes
    left unwritten (None: none). The shell forgets that instant once a write lands."""

    decision: Decision
    unwritten_since: datetime | None


def defer(
    decision: Decision, *, unwritten_since: datetime | None, now: datetime, delay: timedelta
) -> Deferred:
    """Leave `decision.status` for a later write when its Deferral allows it.

    RESOLVES_CLAIMS_ONLY waits for whatever write comes next, however late. BOOKKEEPING
    waits at most `delay` after the first change that was left unwritten; the Decision
    then wakes the schedule at that instant, so the write happens on time.
    """
    if decision.status is None or decision.deferral is Deferral.NEVER:
        return Deferred(decision, unwritten_since)
    if decision.deferral is Deferral.RESOLVES_CLAIMS_ONLY:
        left = dataclasses.replace(decision, status=None, deferred_status=decision.status)
        return Deferred(left, unwritten_since)
    since = now if unwritten_since is None else unwritten_since
    due = since + delay
    if now >= due:
        return Deferred(decision, since)
    wake = due if decision.next_wake is None else min(decision.next_wake, due)
    left = dataclasses.replace(
        decision, status=None, deferred_status=decision.status, next_wake=wake
    )
    return Deferred(left, since)


def routine(decision: Decision, *, now: datetime) -> bool:
    """Whether nothing in `decision` is needed within ROUTINE_HORIZON of `now`."""
    return decision.due_by is None or decision.due_by > now + ROUTINE_HORIZON


def routine_wake(decision: Decision) -> datetime | None:
    """When to look again, at the latest, at a schedule whose routine write was
    postponed: its next wake, or a horizon before the tick its new claim is for."""
    if decision.due_by is None:
        return decision.next_wake
    due = decision.due_by - ROUTINE_HORIZON
    return due if decision.next_wake is None else min(decision.next_wake, due)
