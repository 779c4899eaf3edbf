"""The planner: given a schedule, its cursor and the time, which ticks fire now.

Why it exists: "what is due?" is the one decision every other part of Punctual
trusts, so it is a pure function, `plan_ticks`, that returns a `TickPlan` and is
tested with a table of cases around one fixed instant. The shell applies the plan
(claim, create, record); this module only decides.

What it must never do: perform I/O, read the clock (`now` is passed in, and should
be the API server's time), raise on a bad spec (an unusable schedule gives a plan
with `invalid` set), walk an unbounded number of ticks, or fire a tick at or
before the cursor.

The rules, with `cutoff = now - jitter` (a tick fires at tick + jitter):

* Due ticks are the ticks in (cursor, cutoff]. A due tick is *on time* when
  now - (tick + jitter) <= startingDeadlineSeconds, or when there is no deadline.
* Never ran (no cursor): the cursor is taken to be the creation time, so ticks at
  or before creation never fire. A one-shot `runAt` is the exception: it fires
  even if it lies before creation, as long as it is on time; firing it is the
  only point of the object.
* Edited (status.scheduleFingerprint differs from the spec's): the cursor moves to
  `now`; no old or phantom tick fires, and the plan writes the new fingerprint.
  A status with a cursor but no fingerprint adopts the spec's without a reset.
* Exactly one tick due and on time: it fires, whatever the policy.
* More than one tick due (a backlog):
  - Skip: nothing fires; on-time ticks are recorded as skipped, late ones missed.
  - RunLatest: the newest fires if on time; the others are recorded as missed.
  - RunAll: the newest `maxMissedRuns` on-time ticks fire, oldest first; older
    on-time ticks and late ticks are recorded as missed.
  Either way the cursor moves to the newest due tick: every due tick is decided.
* A late tick (past the deadline) never fires and is recorded as missed.
* suspend: nothing fires and the cursor does not move, so on resume the ticks of
  the suspension are a backlog under the policy above (as CronJob does). An edit
  while suspended still moves the cursor to now.

Counts of missed and skipped ticks are computed, not walked (schedules.count_ticks);
only the fired ticks (at most maxMissedRuns) and a few examples are walked.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from datetime import datetime, timedelta
from functools import lru_cache
from typing import Final

from punctual.core.models import CronScheduleSpec, FiringOutcome, MissedRunPolicy
from punctual.core.schedules import (
    CronTicks,
    OneShot,
    ScheduleError,
    TickSource,
    jitter_offset,
    load_zone,
    parse_fields,
    uses_hash,
)
from punctual.core.schedules import clear_caches as clear_schedule_caches

# How many example ticks a TickGroup carries, newest first.
MAX_EXAMPLES: Final = 3

_TINY: Final = timedelta(microseconds=1)

PAST_DEADLINE: Final = "past startingDeadlineSeconds"
SUPERSEDED: Final = "superseded by a newer tick (missedRunPolicy RunLatest)"
OVER_CAP: Final = "beyond maxMissedRuns (missedRunPolicy RunAll)"
SKIP_BACKLOG: Final = "several ticks were due at once (missedRunPolicy Skip)"


@dataclass(frozen=True, slots=True)
class DueTick:
    """A tick to fire now: its nominal instant (names the Job) and its fire instant."""

    tick: datetime
    fire_at: datetime


@dataclass(frozen=True, slots=True)
class TickGroup:
    """Ticks decided without firing, for one reason: a count and a few examples."""

    outcome: FiringOutcome  # MISSED or SKIPPED
    reason: str
    count: int
    newest: datetime
    examples: tuple[datetime, ...]  # at most MAX_EXAMPLES, newest first


@dataclass(frozen=True, slots=True)
class TickPlan:
    """What to do for one schedule at one instant. The shell applies it.

    `cursor` and `fingerprint` are what status.lastScheduledTime and
    status.scheduleFingerprint must say after the plan is applied (the cursor is
    None only while a schedule has never decided a tick). `next_wake` is when the
    loop must look at this schedule again (None: only a spec change can matter).
    """

    due: tuple[DueTick, ...]
    missed: tuple[TickGroup, ...]
    skipped: tuple[TickGroup, ...]
    cursor: datetime | None
    fingerprint: str
    next_tick: datetime | None
    next_wake: datetime | None
    invalid: str | None = None
    reset: bool = False  # the cursor moved to now because the spec was edited
    suspended: bool = False

    @property
    def missed_count(self) -> int:
        return sum(group.count for group in self.missed)

    @property
    def skipped_count(self) -> int:
        return sum(group.count for group in self.skipped)


def schedule_fingerprint(spec: CronScheduleSpec) -> str:
    """A short stable hash of what decides the ticks: schedule, runAt, zone, jitter."""
    return _fingerprint(spec.schedule, spec.run_at, spec.time_zone, spec.jitter_seconds)


@lru_cache(maxsize=16384)
def _fingerprint(
    schedule: str | None, run_at: datetime | None, time_zone: str, jitter_seconds: int
) -> str:
    spaced = " ".join(schedule.split()) if schedule is not None else None
    instant = run_at.isoformat() if run_at is not None else None
    payload = json.dumps([spaced, instant, time_zone, jitter_seconds])
    return hashlib.sha256(payload.encode()).hexdigest()[:16]


def tick_source(spec: CronScheduleSpec, *, uid: str) -> TickSource:
    """The ticks of a spec (cron or one-shot); ScheduleError if unusable."""
    if spec.schedule is not None and spec.run_at is None:
        hash_key = uid if uses_hash(spec.schedule) else None
        return _cron_ticks(spec.schedule, spec.time_zone, hash_key)
    if spec.run_at is not None and spec.schedule is None:
        return OneShot.at(spec.run_at, load_zone(spec.time_zone))
    raise ScheduleError("schedule", spec.schedule or "", "set exactly one of schedule and runAt")


@lru_cache(maxsize=16384)
def _cron_ticks(expression: str, time_zone: str, uid: str | None) -> CronTicks:
    # Parsing costs more than planning an ordinary pass, and a CronTicks depends only
    # on its arguments (the uid only for H fields), so schedules share them. Errors
    # are not cached.
    return CronTicks(expression, parse_fields(expression, uid=uid), load_zone(time_zone))


def clear_caches() -> None:
    """Forget cached fingerprints, parsed schedules and zone models (cold-cost benchmarks)."""
    _cron_ticks.cache_clear()
    _fingerprint.cache_clear()
    clear_schedule_caches()


def plan_ticks(
    spec: CronScheduleSpec,
    *,
    uid: str,
    created: datetime,
    cursor: datetime | None,
    fingerprint: str | None,
    now: datetime,
) -> TickPlan:
    """Decide which ticks of one schedule fire at `now` (see the module docstring)."""
    _require_aware(created=created, now=now, cursor=cursor)
    # 1. An edit moves the cursor to now; a missing fingerprint is adopted.
    wanted = schedule_fingerprint(spec)
    reset = fingerprint is not None and fingerprint != wanted
    if reset:
        cursor = now

    # 2. An unusable schedule plans nothing but says why.
    try:
        source = tick_source(spec, uid=uid)
    except ScheduleError as error:
        return _idle(cursor, wanted, reset=reset, invalid=error.reason)

    # 3. Suspended: nothing fires and the cursor stays put.
    if spec.suspend:
        return _idle(cursor, wanted, reset=reset, suspended=True)

    offset = jitter_offset(uid, spec.jitter_seconds)
    cutoff = now - offset
    # Cron schedules never fire a tick from before they existed; a runAt may be in the past.
    floor = created if cursor is None and isinstance(source, CronTicks) else cursor

    # 4. Nothing due: sleep until the next fire instant.
    newest = source.prev_tick(cutoff)
    if newest is None or (floor is not None and newest <= floor):
        upcoming = source.next_tick(cutoff if floor is None else max(cutoff, floor))
        return TickPlan(
            due=(),
            missed=(),
            skipped=(),
            cursor=cursor,
            fingerprint=wanted,
            next_tick=upcoming,
            next_wake=None if upcoming is None else upcoming + offset,
            reset=reset,
        )

    # 5. Something is due: decide every due tick, newest first.
    due, missed, skipped = _plan_due(source, spec, newest=newest, floor=floor, cutoff=cutoff)
    upcoming = source.next_tick(cutoff)
    return TickPlan(
        due=tuple(DueTick(tick, tick + offset) for tick in sorted(due)),
        missed=tuple(missed),
        skipped=tuple(skipped),
        cursor=newest,
        fingerprint=wanted,
        next_tick=upcoming,
        next_wake=None if upcoming is None else upcoming + offset,
        reset=reset,
    )


def _require_aware(**instants: datetime | None) -> None:
    for name, value in instants.items():
        if value is not None and value.utcoffset() is None:
            raise ValueError(f"{name} must be an aware datetime")


def _plan_due(
    source: TickSource,
    spec: CronScheduleSpec,
    *,
    newest: datetime,
    floor: datetime | None,
    cutoff: datetime,
) -> tuple[list[datetime], list[TickGroup], list[TickGroup]]:
    """The due, missed and skipped ticks when `newest` (after `floor`) is due at `cutoff`."""
    deadline = spec.starting_deadline_seconds
    on_time_from = None if deadline is None else cutoff - timedelta(seconds=deadline)
    older = source.prev_tick(newest - _TINY)
    if older is not None and floor is not None and older <= floor:
        older = None
    if older is not None:
        return _decide_backlog(
            source, spec, newest=newest, older=older, floor=floor, on_time_from=on_time_from
        )
    # The ordinary pass: exactly one tick became due.
    if on_time_from is None or newest >= on_time_from:
        return [newest], [], []
    return [], [_group(source, FiringOutcome.MISSED, PAST_DEADLINE, 1, newest, floor)], []


def _decide_backlog(
    source: TickSource,
    spec: CronScheduleSpec,
    *,
    newest: datetime,
    older: datetime,
    floor: datetime | None,
    on_time_from: datetime | None,
) -> tuple[list[datetime], list[TickGroup], list[TickGroup]]:
    """More than one tick is due: apply the missed-run policy."""
    # Only cron schedules have backlogs, and they always have a floor.
    assert floor is not None
    total = max(source.count_ticks(floor, newest), 2)
    late = 0
    newest_late: datetime | None = None
    if on_time_from is not None:
        newest_late = source.prev_tick(on_time_from - _TINY)
        if newest_late is not None and newest_late > floor:
            late = min(source.count_ticks(floor, newest_late), total)
        else:
            newest_late = None
    on_time = total - late  # the on-time ticks are the newest ones

    due: list[datetime] = []
    missed: list[TickGroup] = []
    skipped: list[TickGroup] = []
    policy = spec.missed_run_policy
    if policy is MissedRunPolicy.SKIP and on_time:
        skipped.append(_group(source, FiringOutcome.SKIPPED, SKIP_BACKLOG, on_time, newest, floor))
    elif policy is MissedRunPolicy.RUN_LATEST and on_time:
        due.append(newest)
        if on_time > 1:
            missed.append(
                _group(source, FiringOutcome.MISSED, SUPERSEDED, on_time - 1, older, floor)
            )
    elif policy is MissedRunPolicy.RUN_ALL and on_time:
        due = _walk_back(source, newest, min(on_time, spec.max_missed_runs), floor)
        left = on_time - len(due)
        if left > 0:
            newest_left = source.prev_tick(due[-1] - _TINY)
            if newest_left is not None and newest_left > floor:
                missed.append(
                    _group(source, FiringOutcome.MISSED, OVER_CAP, left, newest_left, floor)
                )
    if late and newest_late is not None:
        missed.append(_group(source, FiringOutcome.MISSED, PAST_DEADLINE, late, newest_late, floor))
    return due, missed, skipped


def _walk_back(
    source: TickSource, newest: datetime, count: int, floor: datetime | None
) -> list[datetime]:
    """Up to `count` ticks from `newest` backwards, newer than `floor`, newest first."""
    ticks = [newest]
    while len(ticks) < count:
        tick = source.prev_tick(ticks[-1] - _TINY)
        if tick is None or (floor is not None and tick <= floor):
            break
        ticks.append(tick)
    return ticks


def _group(
    source: TickSource,
    outcome: FiringOutcome,
    reason: str,
    count: int,
    newest: datetime,
    floor: datetime | None,
) -> TickGroup:
    examples = _walk_back(source, newest, min(count, MAX_EXAMPLES), floor)
    return TickGroup(outcome, reason, count, newest, tuple(examples))


def _idle(
    cursor: datetime | None,
    fingerprint: str,
    *,
    reset: bool,
    invalid: str | None = None,
    suspended: bool = False,
) -> TickPlan:
    return TickPlan(
        due=(),
        missed=(),
        skipped=(),
        cursor=cursor,
        fingerprint=fingerprint,
        next_tick=None,
        next_wake=None,
        invalid=invalid,
        reset=reset,
        suspended=suspended,
    )
