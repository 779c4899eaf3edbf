"""What fires when runs would overlap: the concurrencyPolicy, step 5 of a decision.

Why it exists: a tick can come due while a Job of the schedule still runs. `Allow`
creates it anyway; `Forbid` skips it; `Replace` deletes what runs and creates the newest;
`BufferOne` and `BufferAll` keep due ticks in status.buffered and fire them one at a
time, oldest first. A manual trigger may ask for a policy of its own, decided after the
others, against the Jobs still running and those the decision creates. `deciding` hands
these rules the candidates it gathered; they return the ones to create and the Jobs
Replace deletes first, and record every skip (and every buffered tick) in the draft.

What it must never do: turn away a claim being recovered (it was decided before, and is
created whatever the policy), or fire a buffered tick under any name but its own tick's
(so it still fires exactly once). Like all of `punctual.core`, it never talks to the API
server or reads the clock.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from punctual.core.drafting import Candidate, Draft, EventNote, JobToDelete, Schedule, record_skip
from punctual.core.jobs import JobSnapshot
from punctual.core.models import (
    BufferedTick,
    ConcurrencyPolicy,
    CronScheduleSpec,
    FiringOutcome,
    RecordedFiring,
)
from punctual.core.times import format_time


def apply_concurrency(
    policy: ConcurrencyPolicy,
    wanted: list[Candidate],
    live: list[JobSnapshot],
    draft: Draft,
    *,
    recovering: set[str],
) -> tuple[list[Candidate], list[JobToDelete]]:
    """5. Which candidates to create, and which running Jobs Replace deletes first."""
    if policy is ConcurrencyPolicy.ALLOW or not wanted:
        return wanted, []
    # Claims being finished were decided before; they are created whatever the policy.
    finishing = [c for c in wanted if c.job in recovering]
    fresh = [c for c in wanted if c.job not in recovering]
    if not fresh:
        return finishing, []
    if policy is ConcurrencyPolicy.FORBID:
        running = [j.name for j in live] + [c.job for c in finishing]
        chosen = [] if running else fresh[:1]
        blocker = running[0] if running else fresh[0].job
        for candidate in fresh[len(chosen) :]:
            record_skip(draft, candidate, f"concurrencyPolicy Forbid: Job {blocker} still runs")
        return finishing + chosen, []
    # Replace: the newest candidate replaces everything running.
    newest = max(fresh, key=lambda c: c.tick)
    for candidate in fresh:
        if candidate.job != newest.job:
            record_skip(draft, candidate, f"concurrencyPolicy Replace: superseded by {newest.job}")
    replace = [JobToDelete(j.name, j.uid, f"replaced by {newest.job}", j.held) for j in live]
    for job in replace:
        draft.events.append(
            EventNote("Normal", "Replaced", f"Deleting Job {job.name}: {job.reason}")
        )
    return [*finishing, newest], replace


def overriding(wanted: list[Candidate], recovering: set[str]) -> list[Candidate]:
    """Manual triggers that asked for their own concurrencyPolicy (not being recovered)."""
    return [
        c
        for c in wanted
        if c.trigger is not None
        and c.trigger.concurrency_policy is not None
        and c.job not in recovering
    ]


def apply_overrides(
    overriding: list[Candidate],
    creates: list[Candidate],
    replace: list[JobToDelete],
    live: list[JobSnapshot],
    draft: Draft,
) -> tuple[list[Candidate], list[JobToDelete]]:
    """5. A manual trigger that asked for its own concurrencyPolicy is decided after the
    others, under its policy, against the Jobs still running and those this decision
    creates."""
    for candidate in overriding:
        assert candidate.trigger is not None and candidate.trigger.concurrency_policy is not None
        going = {j.name for j in replace}
        running = [j for j in live if j.name not in going]
        creates, more = apply_concurrency(
            candidate.trigger.concurrency_policy,
            [*creates, candidate],
            running,
            draft,
            recovering={c.job for c in creates},
        )
        replace = [*replace, *more]
    return creates, replace


def apply_buffer(
    spec: CronScheduleSpec,
    schedule: Schedule,
    wanted: list[Candidate],
    draft: Draft,
    *,
    recovering: set[str],
    now: datetime,
) -> list[Candidate]:
    """5. BufferOne and BufferAll: one Job at a time; due ticks wait in status.buffered.

    The buffer (oldest first) is the written one plus this decision's new candidates. A
    buffered tick past startingDeadlineSeconds is missed. When nothing runs, the oldest
    fires, under its own tick's Job name (so it is still exactly once); the others wait,
    at most one under BufferOne (the first: later ones are skipped) and maxBuffered under
    BufferAll (the oldest kept, newer ones skipped). The buffer is written in the same
    status write that claims what fires from it, so a failover keeps it.
    """
    finishing = [c for c in wanted if c.job in recovering]
    queue = [
        Candidate(b.job, b.tick, b.manual)
        for b in schedule.old.buffered or []
        if b.job not in {c.job for c in wanted}
    ] + [c for c in wanted if c.job not in recovering]
    waiting: list[Candidate] = []
    deadline = spec.starting_deadline_seconds
    for candidate in queue:
        if candidate.job in schedule.by_name:  # fired already (a claim made ahead)
            continue
        late = deadline is not None and now - candidate.tick > timedelta(seconds=deadline)
        if late and not candidate.manual:
            draft.firings.append(
                RecordedFiring(
                    tick=candidate.tick,
                    outcome=FiringOutcome.MISSED,
                    epoch=draft.epoch,
                    reason=f"buffered past startingDeadlineSeconds {deadline}",
                )
            )
            draft.events.append(
                EventNote(
                    "Warning",
                    "Missed",
                    f"Buffered tick {format_time(candidate.tick)} passed its deadline",
                )
            )
            continue
        waiting.append(candidate)
    running = bool(schedule.live or finishing)
    chosen = [] if running or not waiting else waiting[:1]
    room = 1 if spec.concurrency_policy is ConcurrencyPolicy.BUFFER_ONE else spec.max_buffered
    kept = waiting[len(chosen) : len(chosen) + room]
    old_buffer = {b.job for b in schedule.old.buffered or []}
    for candidate in waiting[len(chosen) + room :]:
        why = (
            f"concurrencyPolicy BufferOne: tick {format_time(kept[0].tick)} is already buffered"
            if spec.concurrency_policy is ConcurrencyPolicy.BUFFER_ONE
            else f"concurrencyPolicy BufferAll: the buffer is full (maxBuffered {room})"
        )
        record_skip(draft, candidate, why)
    for candidate in kept:
        if candidate.job not in old_buffer:
            draft.events.append(
                EventNote(
                    "Normal",
                    "Buffered",
                    f"Tick {format_time(candidate.tick)} waits for the running Job to finish",
                )
            )
    draft.buffered = [BufferedTick(tick=c.tick, job=c.job, manual=c.manual) for c in kept]
    return finishing + chosen


def drop_buffer(schedule: Schedule, spec: CronScheduleSpec, draft: Draft) -> None:
    """Ticks still buffered when the policy stops buffering are skipped, and said so."""
    for entry in schedule.old.buffered or []:
        if entry.job not in schedule.by_name:
            candidate = Candidate(entry.job, entry.tick, entry.manual)
            record_skip(draft, candidate, f"concurrencyPolicy {spec.concurrency_policy.value}: "
                         "no longer buffered")  # fmt: skip


def buffer_deadline(spec: CronScheduleSpec, draft: Draft) -> datetime | None:
    """When the oldest buffered scheduled tick would pass startingDeadlineSeconds."""
    deadline = spec.starting_deadline_seconds
    ticks = [b.tick for b in draft.buffered or [] if not b.manual]
    if deadline is None or not ticks:
        return None
    return min(ticks) + timedelta(seconds=deadline, microseconds=1)
