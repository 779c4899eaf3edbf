"""Retrying a failed tick: spec.retry, one rule of a decision.

Why it exists: a tick whose run failed often only needs another run (a flaky
dependency, a node lost), a little later, a few times at most, and then someone should
know (EventBridge's RetryPolicy and dead-letter queue, kubernetes#108703). With
`retry: {maxAttempts: N, delaySeconds: D, backoff: Fixed|Exponential, maxDelaySeconds}`,
when attempt a < N of a tick fails, attempt a + 1 waits in status.retrying until its time
(the failure plus `Retry.delay`), then fires like any firing: claimed in status.inFlight
before its Job is created, under its own name (`naming.retry_job_name`), so a leader
kill neither doubles nor loses an attempt. It fires only when the concurrency policy has
room for one more run (Allow without maxConcurrent: always); otherwise it keeps waiting,
never skipped. When attempt N fails the tick is dead: its firing is recorded Failed with
`dead: true` and its attempts, one `TickFailed` Warning Event, `punctual_ticks_dead_total`.
pauseOnFailure counts dead ticks, not attempts (see `pausing`).

What it must never do: retry a tick that succeeded, an attempt twice, or a Job of
another schedule; or change its arguments. Like all of `punctual.core`, it never talks
to the API server or reads the clock.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime

from punctual.core import admitting
from punctual.core.groups import Group
from punctual.core.jobs import JobState
from punctual.core.keys import ANNOTATION_RERUN_FAILED
from punctual.core.models import (
    CronScheduleSpec,
    FiringOutcome,
    RetryingTick,
    StartedAttempt,
)
from punctual.core.naming import retry_job_name
from punctual.core.records import Candidate, EventNote, ScheduleRead
from punctual.core.times import format_time, maybe_time

# status.attempted's bound (its CRD maxItems): the newest ticks are kept.
MAX_ATTEMPTED = 100


@dataclass(frozen=True, slots=True)
class Retries:
    """spec.retry in one decision."""

    due: tuple[Candidate, ...] = ()  # attempts whose time came, with room to run
    waiting: tuple[RetryingTick, ...] = ()  # status.retrying after this decision
    attempted: tuple[StartedAttempt, ...] | None = None  # status.attempted (None: as it was)
    dead: tuple[str, ...] = ()  # Jobs whose failure ends their tick (the last attempt)
    wake: datetime | None = None  # the next waiting attempt's time
    rerun: str | None = None  # the rerun-failed request handled (status.lastRerun)
    notes: tuple[EventNote, ...] = ()


def retries(
    spec: CronScheduleSpec, schedule: ScheduleRead, *, now: datetime, group: Group | None = None
) -> Retries:
    """The attempts that are due, the ones that wait, and the ticks now dead."""
    retry = spec.retry
    asked = _rerun(schedule, now)
    rerun, rerun_ticks, notes = asked.request, asked.ticks, asked.notes
    old = schedule.old
    if retry is None and not rerun_ticks and not old.attempted:
        return Retries(rerun=rerun, notes=notes)
    known = set(schedule.by_name)
    known |= {c.job for c in old.in_flight}
    known |= {f.job for f in old.recent_firings if f.job is not None}
    waiting = {w.job: w for w in old.retrying or () if w.job not in known}
    dead: list[str] = []
    # Runs of a tick known to exist or to have existed, by attempt: never started again.
    # status.attempted keeps the newest attempt once its Job and its recentFirings entry
    # are gone while an earlier attempt's Job is kept (the simulator's finding 5).
    ran = {(j.tick, j.attempt) for j in schedule.ours}
    ran |= {(f.tick, f.attempt or 1) for f in old.recent_firings if f.job is not None}
    ran |= {(c.tick, c.attempt or 1) for c in old.in_flight}
    ran |= {(a.tick, a.attempt) for a in old.attempted or ()}
    for tick, attempt in rerun_ticks:
        name = retry_job_name(schedule.name, tick, attempt)
        if name not in known and not any(t == tick and a >= attempt for t, a in ran):
            waiting[name] = RetryingTick(tick=tick, attempt=attempt, job=name, at=now)
    for job in schedule.ours:
        if retry is None:
            break
        if job.state is not JobState.FAILED or job.tick is None or job.trigger is not None:
            continue
        if job.attempt >= retry.max_attempts:
            dead.append(job.name)
            continue
        if job.deleting:  # history going away: its next attempt was taken when it failed,
            continue  # and that attempt's own Job may be gone first (the simulator's finding 3)
        attempt = job.attempt + 1
        name = retry_job_name(schedule.name, job.tick, attempt)
        if name in known or name in waiting:
            continue
        if any(t == job.tick and a >= attempt for t, a in ran):
            continue
        at = (job.finished_at or now) + retry.delay(attempt)
        waiting[name] = RetryingTick(tick=job.tick, attempt=attempt, job=name, at=at)
    # The room the concurrency policy and the group leave (`admitting`): attempts wait for it.
    room = admitting.room(
        spec.concurrency_policy, spec.max_concurrent, running=len(schedule.live), group=group
    ).free
    time_came = [
        (Candidate(entry.job, entry.tick, attempt=entry.attempt), admitting.Disposition.WAIT)
        for entry in sorted(waiting.values(), key=lambda w: (w.at, w.tick))
        if entry.at <= now
    ]
    due = admitting.admit(time_came, room).admitted
    left = tuple(
        w for w in sorted(waiting.values(), key=lambda w: w.at) if w.job not in {c.job for c in due}
    )
    wake = min((w.at for w in left if w.at > now), default=None)
    attempted = _attempted(schedule, ran, due)
    return Retries(tuple(due), left, attempted, tuple(dead), wake, rerun, notes)


def _attempted(
    schedule: ScheduleRead, ran: set[tuple[datetime | None, int]], due: tuple[Candidate, ...]
) -> tuple[StartedAttempt, ...]:
    """status.attempted: the newest attempt (2 and up) started of each tick a Job of is
    kept, or starts now. A tick none of whose Jobs is kept needs no entry: nothing
    derives an attempt of it any more."""
    newest: dict[datetime, int] = {}
    for tick, attempt in [*ran, *((c.tick, c.attempt) for c in due)]:
        if tick is not None and attempt >= 2:
            newest[tick] = max(attempt, newest.get(tick, 0))
    kept = {j.tick for j in schedule.ours} | {c.tick for c in due}
    entries = [StartedAttempt(tick=t, attempt=a) for t, a in sorted(newest.items()) if t in kept]
    return tuple(entries[-MAX_ATTEMPTED:])


@dataclass(frozen=True, slots=True)
class _Rerun:
    request: str | None  # status.lastRerun after this decision
    ticks: tuple[tuple[datetime, int], ...] = ()  # (tick, attempt) to run again
    notes: tuple[EventNote, ...] = ()


def _rerun(schedule: ScheduleRead, now: datetime) -> _Rerun:
    """`punctual backfill --failed --from --to` (the punctual.dev/rerun-failed annotation):
    each failed tick of [from, to) that status.recentFirings still records (its newest
    attempt Failed, none Succeeded) runs once more, as its next attempt. The request id
    (status.lastRerun) and the (tick, attempt) pairs to add."""
    old = schedule.old
    value = schedule.annotations.get(ANNOTATION_RERUN_FAILED)
    if not value:
        return _Rerun(old.last_rerun)
    try:
        asked = json.loads(value)
        request = str(asked["request"])
        start, end = maybe_time(asked.get("from")), maybe_time(asked.get("to"))
    except (ValueError, KeyError, TypeError):
        note = EventNote("Warning", "InvalidRerun", f"{ANNOTATION_RERUN_FAILED}: unreadable")
        return _Rerun(value, notes=(note,) if value != old.last_rerun else ())
    if request == old.last_rerun or start is None or end is None:
        return _Rerun(old.last_rerun if request == old.last_rerun else request)
    newest: dict[datetime, tuple[int, FiringOutcome]] = {}
    for firing in old.recent_firings:
        if firing.job is None or firing.manual or not start <= firing.tick < end:
            continue
        attempt = firing.attempt or 1
        if firing.tick not in newest or attempt > newest[firing.tick][0]:
            newest[firing.tick] = (attempt, firing.outcome)
    ticks = sorted(
        (tick, attempt + 1)
        for tick, (attempt, outcome) in newest.items()
        if outcome is FiringOutcome.FAILED
    )
    message = (
        f"{len(ticks)} failed ticks of [{format_time(start)}, {format_time(end)}) run again "
        f"(request {request})"
    )
    return _Rerun(request, tuple(ticks), (EventNote("Normal", "RerunFailed", message),))
