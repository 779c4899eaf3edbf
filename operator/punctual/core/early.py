"""Which schedules a new leader may decide before its lists are complete.

Why it exists: at 100 000 schedules the list takes a minute, and a leader that decides
nothing until it is in leaves every tick of that minute unfired (issue 24 item 2). As
each page of the list arrives, the schedules whose status names a next tick within the
horizon (or past) are picked here; the shell (runtime.early) then lists their Jobs and
lets them be decided at once. The rest wait for the complete lists, as before.

Only a schedule that needs nothing but its own body and its own Jobs is picked: not a
member of a concurrency group (the group's other members may not be listed yet), not
one with a workloadTemplate (its kind's objects are listed by another follower), not
one without a status (a first claim waits on no tick: it is routine work for later).

Once the lists are in, a new leader looks at every schedule, those due first. A schedule
never decided has no status to say when it is due: `first_tick` reads it from the spec
(the first tick after it was created), so that one due now is not looked at after
every other never-decided one (at 200 000, 196 000 of them: an every-second schedule
among the last listed had not fired 60 s after the list).

What it must never do: read the clock (`now` is given) or talk to the API server.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime, timedelta
from typing import Any

from punctual.core.groups import group_of
from punctual.core.models import minute_of
from punctual.core.planning import plain_cron_ticks
from punctual.core.schedules import ScheduleError
from punctual.core.times import format_time, maybe_time

HORIZON = timedelta(minutes=5)  # further than a list of 100 000 takes (66 s measured)
MINUTE_FIELD = "status.nextScheduleMinute"  # the field the API server selects on


def due_soon(
    body: Mapping[str, Any], *, now: datetime, horizon: timedelta = HORIZON
) -> datetime | None:
    """The schedule's next tick as its status names it, if it is due within `horizon`
    of `now` (or overdue) and the schedule can be decided on its own body and Jobs;
    otherwise None."""
    spec = body.get("spec") or {}
    if not isinstance(spec, Mapping) or spec.get("workloadTemplate") or group_of(body):
        return None
    upcoming = maybe_time((body.get("status") or {}).get("nextScheduleTime"))
    if upcoming is None or upcoming > now + horizon:
        return None
    return upcoming


def first_tick(body: Mapping[str, Any]) -> str | None:
    """A never-decided schedule's first tick (RFC 3339 UTC text, as status writes it): the
    first of its cron expression after it was created, or after its startTime if that is
    later. Only an order for a new leader's first look (kube.schedulewatching): the pass
    decides as always, so an estimate early by exclusions or jitter costs nothing. None
    where it is not cheap to know: a spec that is not one plain expression (a list of
    schedules, runAt, `H` fields), one that does not parse, no creation time."""
    spec = body.get("spec") or {}
    if not isinstance(spec, Mapping):
        return None
    expression = spec.get("schedule")
    if not isinstance(expression, str) or spec.get("schedules") is not None:
        return None
    created = maybe_time((body.get("metadata") or {}).get("creationTimestamp"))
    start = maybe_time(spec.get("startTime"))
    if created is None:
        return None
    zone = spec.get("timeZone") or "UTC"
    try:
        ticks = plain_cron_ticks(expression, zone) if isinstance(zone, str) else None
    except ScheduleError:
        return None
    tick = None if ticks is None else ticks.next_tick(max(created, start or created))
    return None if tick is None else format_time(tick)


def due_minutes(now: datetime, *, behind: timedelta, ahead: timedelta = HORIZON) -> list[str]:
    """The values of status.nextScheduleMinute a new leader lists before the whole list
    (`MINUTE_FIELD`), now's minute first, then the ones before it back to `behind`, then
    the ones ahead up to `ahead`. Behind, because a schedule's status names the tick
    after its last write: one that fires often was written at most half a claim window
    before its last leader stopped, so its minute is as old as that and the leader's
    absence together, while its ticks are due now."""
    minute = timedelta(minutes=1)
    current = now.replace(second=0, microsecond=0)
    back = [current - k * minute for k in range(1, int(behind / minute) + 1)]
    forth = [current + k * minute for k in range(1, int(ahead / minute) + 1)]
    return [minute_of(format_time(m)) for m in [current, *back, *forth]]
