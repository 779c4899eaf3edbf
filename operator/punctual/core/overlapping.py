"""What fires when runs would overlap: the concurrencyPolicy, one rule of a decision.

Why it exists: a tick can come due while a Job of the schedule still runs. `Allow`
creates it anyway; `Forbid` skips it; `Replace` deletes what runs and creates the newest;
`BufferOne` and `BufferAll` keep due ticks in status.buffered and fire them one at a
time, oldest first. `spec.maxConcurrent: N` widens "one at a time" to N and bounds
`Allow` at N: with `Allow` or `Forbid` a tick due while N run is skipped (reason
`maxConcurrent`), the buffers fire while fewer than N run, and `Replace` replaces only the
oldest runs beyond N - 1. A manual trigger may ask for a policy of its own, decided after
the others, against the Jobs still running and those the decision creates (the limit
still holds). `deciding` hands
`choose` the candidates it gathered; it returns an `Overlap`: the ones to create, the
Jobs Replace deletes first, every skip (with its fixed reason), the buffer, and the
buffered ticks that passed their deadline. `status` turns it into firings and Events.

What it must never do: turn away a claim being recovered (it was decided before, and is
created whatever the policy), fire a buffered tick under any name but its own tick's
(so it still fires exactly once), or change its arguments. Like all of `punctual.core`,
it never talks to the API server or reads the clock.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from punctual.core import admitting
from punctual.core.groups import Group
from punctual.core.jobs import JobSnapshot
from punctual.core.models import BufferedTick, ConcurrencyPolicy, CronScheduleSpec
from punctual.core.records import Candidate, JobToDelete, ScheduleRead, Skip, SkipReason
from punctual.core.stamping import FiringKind
from punctual.core.times import format_time

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


@dataclass(frozen=True, slots=True)
class Overlap:
    """What the concurrency policy decided for one decision's candidates."""

    creates: tuple[Candidate, ...]
    replaced: tuple[JobToDelete, ...] = ()  # running Jobs Replace deletes first
    skips: tuple[Skip, ...] = ()
    late: tuple[Candidate, ...] = ()  # buffered ticks past startingDeadlineSeconds: missed
    late_after: int | None = None  # that startingDeadlineSeconds
    buffered: tuple[BufferedTick, ...] | None = None  # status.buffered; None: not buffering
    newly_buffered: tuple[Candidate, ...] = ()  # ticks that start waiting now
    deadline: datetime | None = None  # when the oldest buffered scheduled tick goes late


def choose(
    spec: CronScheduleSpec,
    schedule: ScheduleRead,
    wanted: Sequence[Candidate],
    *,
    recovering: frozenset[str],
    now: datetime,
    group: Group | None = None,
) -> Overlap:
    """The schedule's policy over `wanted`, then each trigger's own policy after it; with
    a concurrency `group`, within the room the group has left (see `groups`)."""
    overriding = [
        c
        for c in wanted
        if c.trigger is not None
        and c.trigger.concurrency_policy is not None
        and c.job not in recovering
    ]
    rest = [c for c in wanted if c not in overriding]
    limit = spec.max_concurrent
    if spec.concurrency_policy.buffers:
        first = buffer(spec, schedule, rest, recovering=recovering, now=now, group=group)
    else:
        dropped = unbuffered(schedule, spec.concurrency_policy)
        first = concurrency(
            spec.concurrency_policy,
            rest,
            schedule.live,
            recovering=recovering,
            limit=limit,
            group=group,
        )
        if dropped:  # (replace is slow enough to matter on every decision)
            first = dataclasses.replace(first, skips=dropped + first.skips)
    return _override(overriding, first, schedule.live, limit, group)


def concurrency(
    policy: ConcurrencyPolicy,
    wanted: Sequence[Candidate],
    live: Sequence[JobSnapshot],
    *,
    recovering: frozenset[str],
    limit: int | None = None,
    group: Group | None = None,
) -> Overlap:
    """Allow, Forbid, Replace: which candidates to create (the oldest that fit the room,
    `admitting`), which to skip, and which running Jobs Replace deletes first."""
    # Claims being recovered were decided before; they are created whatever the policy.
    recovered = tuple(c for c in wanted if c.job in recovering)
    fresh = [c for c in wanted if c.job not in recovering]
    held = len(live) + len(recovered)
    if not fresh and policy is ConcurrencyPolicy.REPLACE and recovered and live:
        # A claim recovered under Replace still replaces what runs before it: its Job
        # was not created because the delete before it failed, or its leader died there.
        newest = max(recovered, key=lambda c: c.tick)
        older = [j for j in live if (j.tick or _EPOCH) < newest.tick]
        oldest = sorted(older, key=lambda j: (j.tick or j.created or _EPOCH, j.name))
        excess = max(0, held - (limit or 1))
        replaced = tuple(
            JobToDelete(j.name, j.uid, f"replaced by {newest.job}", j.has_finalizer, j.kind)
            for j in oldest[:excess]
        )
        return Overlap(tuple(wanted), replaced=replaced)
    if not fresh:
        return Overlap(tuple(wanted))
    if policy is ConcurrencyPolicy.REPLACE:
        replacing = _replace(fresh, recovered, live, held=held, limit=limit or 1)
        # Replace deletes only this schedule's runs: the group's limit still holds for the
        # runs of the other members (a manual trigger's `--overlap Replace` in a group).
        after = held - len(replacing.replaced)
        if group is None or group.room(after) >= 1:
            return replacing
        skips = tuple(Skip(c, SkipReason.CONCURRENCY_GROUP, group.message(held)) for c in fresh)
        return Overlap(recovered, skips=skips)
    space = admitting.room(policy, limit, running=held, group=group)
    skip = admitting.Disposition.SKIP
    chosen = admitting.admit([(c, skip) for c in fresh], space.free)
    if space.by_group:
        assert group is not None
        reason, message = SkipReason.CONCURRENCY_GROUP, group.message(held)
    elif limit is not None:
        reason = SkipReason.MAX_CONCURRENT
        message = f"maxConcurrent {limit}: {held} runs of this schedule still run"
    else:  # Forbid, one at a time
        running = [j.name for j in live] + [c.job for c in recovered]
        blocker = running[0] if running else fresh[0].job
        what = live[0].kind.kind if live else "Job"  # a claim in flight: named as a Job
        reason, message = (
            SkipReason.FORBID,
            f"concurrencyPolicy Forbid: {what} {blocker} still runs",
        )
    skips = tuple(Skip(c, reason, message) for c in chosen.refused)
    going = {c.job for c in chosen.admitted}
    return Overlap(tuple(c for c in wanted if c.job in recovering or c.job in going), skips=skips)


def _replace(
    fresh: Sequence[Candidate],
    recovered: Sequence[Candidate],
    live: Sequence[JobSnapshot],
    *,
    held: int,
    limit: int,
) -> Overlap:
    """Replace: the newest candidate is created, and the oldest runs that would make one
    too many under `limit` (maxConcurrent, else 1: every run) are deleted first."""
    newest = max(fresh, key=lambda c: c.tick)
    message = f"concurrencyPolicy Replace: superseded by {newest.job}"
    skips = tuple(Skip(c, SkipReason.REPLACE, message) for c in fresh if c is not newest)
    oldest = sorted(live, key=lambda j: (j.tick or j.created or _EPOCH, j.name))
    excess = max(0, held + 1 - limit)
    replaced = tuple(
        JobToDelete(j.name, j.uid, f"replaced by {newest.job}", j.has_finalizer, j.kind)
        for j in oldest[:excess]
    )
    return Overlap((*recovered, newest), replaced=replaced, skips=skips)


def _override(
    overriding: Sequence[Candidate],
    first: Overlap,
    live: Sequence[JobSnapshot],
    limit: int | None = None,
    group: Group | None = None,
) -> Overlap:
    """A manual trigger that asked for its own concurrencyPolicy is decided after the
    others, under its policy, against the Jobs still running and those `first` creates."""
    result = first
    for candidate in overriding:
        assert candidate.trigger is not None and candidate.trigger.concurrency_policy is not None
        going = {j.name for j in result.replaced}
        more = concurrency(
            candidate.trigger.concurrency_policy,
            [*result.creates, candidate],
            [j for j in live if j.name not in going],
            recovering=frozenset(c.job for c in result.creates),
            limit=limit,
            group=None
            if group is None
            else dataclasses.replace(group, occupied=group.occupied + len(result.creates)),
        )
        result = dataclasses.replace(
            result,
            creates=more.creates,
            replaced=result.replaced + more.replaced,
            skips=result.skips + more.skips,
        )
    return result


def buffer(
    spec: CronScheduleSpec,
    schedule: ScheduleRead,
    wanted: Sequence[Candidate],
    *,
    recovering: frozenset[str],
    now: datetime,
    group: Group | None = None,
) -> Overlap:
    """BufferOne and BufferAll: one Job at a time; due ticks wait in status.buffered.

    The buffer (oldest first) is the written one plus this decision's new candidates. A
    buffered tick past startingDeadlineSeconds is missed. When nothing runs, the oldest
    fires, under its own tick's Job name (so it is still exactly once); the others wait,
    at most one under BufferOne (the first: later ones are skipped) and maxBuffered under
    BufferAll (the oldest kept, newer ones skipped). The buffer is written in the same
    status write that claims what fires from it, so a failover keeps it.
    """
    recovered = tuple(c for c in wanted if c.job in recovering)
    queue = [
        _unbuffered(b) for b in schedule.old.buffered or [] if b.job not in {c.job for c in wanted}
    ] + [c for c in wanted if c.job not in recovering]
    deadline = spec.starting_deadline_seconds
    queue = [c for c in queue if c.job not in schedule.by_name]  # fired on a claim ahead
    late = tuple(
        c
        for c in queue
        if deadline is not None and now - c.tick > timedelta(seconds=deadline) and not c.manual
    )
    waiting = [c for c in queue if c not in late]
    running = len(schedule.live) + len(recovered)
    space = admitting.room(
        spec.concurrency_policy, spec.max_concurrent, running=running, group=group
    )
    free = space.free
    if group is not None:  # the group's members wait in tick order
        behind = waiting and group.waiting_since is not None
        if behind and group.waiting_since is not None and group.waiting_since < waiting[0].tick:
            free = 0
    chosen = admitting.admit([(c, admitting.Disposition.WAIT) for c in waiting], free).admitted
    one = spec.concurrency_policy is ConcurrencyPolicy.BUFFER_ONE
    room = 1 if one else spec.max_buffered
    kept = waiting[len(chosen) : len(chosen) + room]
    reason, message = _full(one, kept, room)
    old_buffer = {b.job for b in schedule.old.buffered or []}
    ticks = [c.tick for c in kept if not c.manual]
    goes_late = (
        None
        if deadline is None or not ticks
        else min(ticks) + timedelta(seconds=deadline, microseconds=1)
    )
    return Overlap(
        (*recovered, *chosen),
        skips=tuple(Skip(c, reason, message) for c in waiting[len(chosen) + room :]),
        late=late,
        late_after=deadline,
        buffered=tuple(
            BufferedTick(tick=c.tick, job=c.job, manual=c.manual, upstream=list(c.upstream) or None)
            for c in kept
        ),
        newly_buffered=tuple(c for c in kept if c.job not in old_buffer),
        deadline=goes_late,
    )


def _full(one: bool, kept: Sequence[Candidate], room: int) -> tuple[SkipReason, str]:
    """Why a tick finds the buffer full."""
    if one:
        oldest = format_time(kept[0].tick) if kept else ""
        message = f"concurrencyPolicy BufferOne: tick {oldest} is already buffered"
        return SkipReason.BUFFER_ONE, message
    message = f"concurrencyPolicy BufferAll: the buffer is full (maxBuffered {room})"
    return SkipReason.BUFFER_ALL, message


def unbuffered(schedule: ScheduleRead, policy: ConcurrencyPolicy) -> tuple[Skip, ...]:
    """Ticks still buffered when the policy stops buffering are skipped, and said so
    (the message names the new policy; the metric label is always UNBUFFERED)."""
    message = f"concurrencyPolicy {policy.value}: no longer buffered"
    return tuple(
        Skip(_unbuffered(b), SkipReason.UNBUFFERED, message)
        for b in schedule.old.buffered or []
        if b.job not in schedule.by_name
    )


def _unbuffered(entry: BufferedTick) -> Candidate:
    """A buffered tick as the candidate it was: a run after upstream runs stays one (its
    claim must say so, or it would pass for a tick claimed ahead)."""
    if entry.upstream:
        started = tuple(entry.upstream)
        return Candidate(entry.job, entry.tick, kind=FiringKind.AFTER, upstream=started)
    return Candidate(entry.job, entry.tick, entry.manual)
