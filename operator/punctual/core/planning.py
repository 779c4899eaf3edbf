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
  while suspended still moves the cursor to now. suspendUntil is a suspension that
  ends by itself: before it nothing fires, and the plan wakes at it. (A schedule
  paused by pauseOnFailure is planned as suspended by its caller.)

* Several entries, exclusions and a window (spec.schedules, exclude, startTime,
  endTime) make one combined set of ticks (`schedules.combining`); every rule above
  applies to it unchanged. An edit of any of them, or of maxRuns, is an edit.
* maxRuns: `runs_left` (how many scheduled ticks may still fire, counted by the
  caller from status) caps the due ticks, oldest first; ticks beyond it are neither
  fired nor recorded as missed, and none fires at 0. A schedule whose window has no
  tick left says so (`finished`); one whose exclusions remove every tick left is
  invalid.

Counts of missed and skipped ticks are computed, not walked (schedules.count_ticks);
only the fired ticks (at most maxMissedRuns) and a few examples are walked.

Over 500 lines on purpose: the rules above and the one function that applies them are
read together (a fifth of the module is this docstring); split, a reader would hold
two files to check one rule.
"""

from __future__ import annotations

import hashlib
import json
from collections import OrderedDict
from collections.abc import Hashable
from dataclasses import dataclass, replace
from datetime import date, datetime, timedelta
from enum import StrEnum
from functools import lru_cache
from typing import Final, cast
from zoneinfo import ZoneInfo

from punctual.core.models import (
    MAX_UPCOMING_TICKS,
    CronScheduleSpec,
    Exclusion,
    FiringOutcome,
    MissedRunPolicy,
    ScheduleEntry,
)
from punctual.core.schedules import (
    CombinedTicks,
    CronFields,
    CronTicks,
    IntervalTicks,
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
# The instants a runAt or an exclusion may name: what datetime holds, less two days at
# each end, so that a zone's offset, the jitter and a day's step stay inside it.
_EARLIEST: Final = date(1, 1, 3)
_LATEST: Final = date(9999, 12, 29)


class TickReason(StrEnum):
    """Why ticks were decided without firing (a TickGroup's reason): a fixed name, and
    the text people read (`message`, in status and Events) beside it."""

    PAST_DEADLINE = "PastDeadline"
    SUPERSEDED = "Superseded"
    OVER_CAP = "BeyondMaxMissedRuns"
    SKIP_BACKLOG = "SkipBacklog"  # skipped, not missed: the skip label is missedRunPolicy=Skip

    @property
    def message(self) -> str:
        return _TICK_REASON_TEXT[self]


_TICK_REASON_TEXT: Final = {
    TickReason.PAST_DEADLINE: "past startingDeadlineSeconds",
    TickReason.SUPERSEDED: "superseded by a newer tick (missedRunPolicy RunLatest)",
    TickReason.OVER_CAP: "beyond maxMissedRuns (missedRunPolicy RunAll)",
    TickReason.SKIP_BACKLOG: "several ticks were due at once (missedRunPolicy Skip)",
}
PAST_DEADLINE: Final = TickReason.PAST_DEADLINE
SUPERSEDED: Final = TickReason.SUPERSEDED
OVER_CAP: Final = TickReason.OVER_CAP
SKIP_BACKLOG: Final = TickReason.SKIP_BACKLOG

# Why a schedule has no tick left (the reasons of the Finished condition).
END_TIME_REACHED: Final = "EndTimeReached"
MAX_RUNS_REACHED: Final = "MaxRunsReached"


@dataclass(frozen=True, slots=True)
class DueTick:
    """A tick to fire now: its nominal instant (names the Job) and its fire instant."""

    tick: datetime
    fire_at: datetime


@dataclass(frozen=True, slots=True)
class TickGroup:
    """Ticks decided without firing, for one reason: a count and a few examples."""

    outcome: FiringOutcome  # MISSED or SKIPPED
    reason: TickReason
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
    # The next few ticks from next_tick on, oldest first (status.upcomingTicks).
    upcoming: tuple[datetime, ...] = ()
    # END_TIME_REACHED when the window has no tick left (maxRuns is the caller's).
    finished: str | None = None
    limited: bool = False  # the spec has endTime or maxRuns: it can finish

    @property
    def missed_count(self) -> int:
        return sum(group.count for group in self.missed)

    @property
    def skipped_count(self) -> int:
        return sum(group.count for group in self.skipped)


def schedule_fingerprint(spec: CronScheduleSpec) -> str:
    """A short stable hash of what decides the ticks: schedule(s), runAt, zone, jitter,
    and, when set, exclude, the window and maxRuns (so a spec without them keeps the
    fingerprint it had before they existed)."""
    extra: str | None = None
    if spec.schedules is not None or spec.exclude or spec.limited or spec.start_time:
        extra = json.dumps(
            spec.model_dump(
                mode="json",
                by_alias=True,
                exclude_none=True,
                include={"schedules", "exclude", "start_time", "end_time", "max_runs"},
            ),
            sort_keys=True,
        )
    return _fingerprint(spec.schedule, spec.run_at, spec.time_zone, spec.jitter_seconds, extra)


@lru_cache(maxsize=16384)
def _fingerprint(
    schedule: str | None,
    run_at: datetime | None,
    time_zone: str,
    jitter_seconds: int,
    extra: str | None = None,
) -> str:
    spaced = " ".join(schedule.split()) if schedule is not None else None
    instant = run_at.isoformat() if run_at is not None else None
    fields: list[object] = [spaced, instant, time_zone, jitter_seconds]
    if extra is not None:
        fields.append(extra)
    payload = json.dumps(fields)
    return hashlib.sha256(payload.encode()).hexdigest()[:16]


def tick_source(spec: CronScheduleSpec, *, uid: str) -> TickSource:
    """The ticks of a spec (cron, one-shot or combined); ScheduleError if unusable, or if
    it has none of its own (spec.after alone: see `chaining`)."""
    if spec.chained:
        raise ScheduleError("after", "", "no ticks of its own: it runs after its upstreams")
    _require_in_range(spec)
    combined = spec.schedules is not None or spec.exclude or spec.start_time or spec.end_time
    if spec.run_at is not None:
        if combined or spec.max_runs is not None:
            raise ScheduleError(
                "runAt", "", "exclude, startTime, endTime and maxRuns need schedule or schedules"
            )
        return OneShot.at(spec.run_at, load_zone(spec.time_zone))
    if spec.schedule is not None and not combined:
        hash_key = uid if uses_hash(spec.schedule) else None
        return _cron_ticks(spec.schedule, spec.time_zone, hash_key)
    return _combined(spec, uid, with_exclusions=True)


def _require_in_range(spec: CronScheduleSpec) -> None:
    """ScheduleError naming a runAt, startTime or exclusion at the very ends of the
    calendar (0001-01-01, 9999-12-31): planning them would step outside what datetime
    holds. (An endTime there is fine: nothing is planned past it.)"""
    named: list[tuple[str, date]] = []
    for key, instant in (("runAt", spec.run_at), ("startTime", spec.start_time)):
        if instant is not None:
            named.append((key, instant.date()))
    for i, exclusion in enumerate(spec.exclude):
        named += [(f"exclude[{i}].dates[{k}]", d) for k, d in enumerate(exclusion.dates or ())]
        for key, instant in (("from", exclusion.start), ("to", exclusion.to)):
            if instant is not None:
                named.append((f"exclude[{i}].{key}", instant.date()))
    for field, day in named:
        if not _EARLIEST <= day <= _LATEST:
            raise ScheduleError(
                field, day.isoformat(), f"must be between {_EARLIEST} and {_LATEST}"
            )


def _combined(spec: CronScheduleSpec, uid: str, *, with_exclusions: bool) -> CombinedTicks:
    entries = (
        tuple(spec.schedules)
        if spec.schedules is not None
        else (ScheduleEntry(cron=spec.schedule or ""),)
    )
    exclude = tuple(spec.exclude) if with_exclusions else ()
    texts = [e.cron for e in entries] + [x.cron for x in exclude]
    hash_key = uid if any(t is not None and uses_hash(t) for t in texts) else None
    return _combined_ticks(
        entries,
        exclude,
        spec.start_time,
        spec.end_time,
        spec.time_zone,
        hash_key,
        spec.schedules is None,
    )


@lru_cache(maxsize=4096)
def _combined_ticks(
    entries: tuple[ScheduleEntry, ...],
    exclude: tuple[Exclusion, ...],
    start: datetime | None,
    end: datetime | None,
    time_zone: str,
    uid: str | None,
    single: bool,
) -> CombinedTicks:
    # Cached like _cron_ticks: the same spec parts and uid give the same ticks. A
    # ScheduleError names the entry: "spec.schedules[2].cron: ...".
    zone = load_zone(time_zone)
    sources: list[CronTicks | IntervalTicks] = []
    for index, entry in enumerate(entries):
        field = "schedule" if single else f"schedules[{index}]"
        if entry.cron is not None:
            try:
                sources.append(CronTicks(entry.cron, parse_fields(entry.cron, uid=uid), zone))
            except ScheduleError as error:
                raise error.at(field if single else f"{field}.cron") from None
        else:
            sources.append(IntervalTicks.of(entry.every or "", entry.offset, field))
    wall: list[CronFields] = []
    dates: list[date] = []
    ranges: list[tuple[datetime, datetime]] = []
    zoned_wall: list[tuple[CronFields, ZoneInfo]] = []
    zoned_dates: list[tuple[date, ZoneInfo]] = []
    for index, exclusion in enumerate(exclude):
        try:
            own = None if exclusion.time_zone is None else load_zone(exclusion.time_zone)
        except ScheduleError as error:
            raise error.at(f"exclude[{index}].timeZone") from None
        if exclusion.cron is not None:
            try:
                fields = parse_fields(exclusion.cron, uid=uid)
            except ScheduleError as error:
                raise error.at(f"exclude[{index}].cron") from None
            if own is None:
                wall.append(fields)
            else:
                zoned_wall.append((fields, own))
        elif exclusion.dates is not None:
            if own is None:
                dates.extend(exclusion.dates)
            else:
                zoned_dates.extend((day, own) for day in exclusion.dates)
        elif exclusion.start is not None and exclusion.to is not None:
            ranges.append((exclusion.start, exclusion.to))
    return CombinedTicks(
        sources,
        zone=zone,
        wall=wall,
        dates=dates,
        ranges=ranges,
        zoned_wall=zoned_wall,
        zoned_dates=zoned_dates,
        start=start,
        end=end,
    )


@lru_cache(maxsize=16384)
def _cron_ticks(expression: str, time_zone: str, uid: str | None) -> CronTicks:
    # Parsing costs more than planning an ordinary pass, and a CronTicks depends only
    # on its arguments (the uid only for H fields), so schedules share them. Errors
    # are not cached.
    return CronTicks(expression, parse_fields(expression, uid=uid), load_zone(time_zone))


def plain_cron_ticks(expression: str, time_zone: str) -> CronTicks | None:
    """The ticks of one cron expression, shared with every pass that plans the same (the
    cache `tick_source` uses); None for an expression with `H` fields (its ticks are
    the schedule's own: caching one per schedule would push out the passes' entries).
    ScheduleError if unusable."""
    if uses_hash(expression):
        return None
    return _cron_ticks(expression, time_zone, None)


UPCOMING_SOURCES: Final = 16384  # sources whose upcoming ticks are kept
# Per source, its latest (first, count, ticks): a schedule's next tick only moves on, so
# the ticks from an earlier one are never asked for again. (Keyed by tick too, as an LRU
# cache was, the entries of past ticks stayed until the cache was full: a leader's heap
# grew by one entry per firing for 40 minutes of a soak before it levelled off.)
_upcoming: OrderedDict[Hashable, tuple[datetime, int, tuple[datetime, ...]]] = OrderedDict()


def upcoming_ticks(source: Hashable, first: datetime, count: int) -> tuple[datetime, ...]:
    """`count` ticks from `first` (a tick) on, oldest first; kept per source for its
    latest `first`."""
    assert isinstance(source, CombinedTicks | CronTicks | OneShot)
    held = _upcoming.get(source)
    if held is not None and held[0] == first and held[1] == count:
        _upcoming.move_to_end(source)
        return held[2]
    ticks = [first]
    while len(ticks) < count:
        found = source.next_tick(ticks[-1])
        if found is None:
            break
        ticks.append(found)
    kept = tuple(ticks)
    _upcoming[source] = (first, count, kept)
    _upcoming.move_to_end(source)
    if len(_upcoming) > UPCOMING_SOURCES:
        _upcoming.popitem(last=False)
    return kept


def reach_of(
    spec: CronScheduleSpec, *, uid: str, first: datetime, until: datetime, most: int = 600
) -> datetime:
    """The last tick of `spec` from `first` (a tick) on that is at or before `until`,
    `most` ticks on at the farthest: `first` itself when the next is later (a claim
    window reaches at least one tick, `claiming.claim_window`). Found by one step back
    from `until` and a count, not by walking the window's ticks (30 steps a write for a
    schedule every 2 s under the default window); walked only when `most` cuts it short."""
    source = tick_source(spec, uid=uid)
    second = source.next_tick(first)
    if second is None or second > until:  # one tick: the walk's first step, no step back
        return first
    found = source.prev_tick(until)
    if found is None or found <= first:
        return first
    if source.count_ticks(first, found) <= most:
        return found
    last = first
    for _ in range(most):
        found = source.next_tick(last)
        if found is None or found > until:
            break
        last = found
    return last


def clear_caches() -> None:
    """Forget cached fingerprints, parsed schedules and zone models (cold-cost benchmarks)."""
    _cron_ticks.cache_clear()
    _combined_ticks.cache_clear()
    _upcoming.clear()
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
    runs_left: int | None = None,
) -> TickPlan:
    """Decide which ticks of one schedule fire at `now` (see the module docstring)."""
    _require_aware(created=created, now=now, cursor=cursor)
    # 1. An edit moves the cursor to now; a missing fingerprint is adopted.
    wanted = schedule_fingerprint(spec)
    reset = fingerprint is not None and fingerprint != wanted
    if reset:
        cursor = now

    # 2. A schedule fired by its upstreams alone (spec.after, see `chaining`) has no
    #    ticks of its own. An unusable schedule plans nothing but says why.
    if spec.chained:
        until = spec.suspend_until is not None and now < spec.suspend_until
        return _idle(cursor, wanted, reset=reset, suspended=spec.suspend or until)
    try:
        source = tick_source(spec, uid=uid)
    except ScheduleError as error:
        return _idle(cursor, wanted, reset=reset, invalid=error.reason)

    # 3. Suspended: nothing fires and the cursor stays put. No run left: likewise.
    if spec.suspend:
        return _idle(cursor, wanted, reset=reset, suspended=True)
    if spec.suspend_until is not None and now < spec.suspend_until:
        idle = _idle(cursor, wanted, reset=reset, suspended=True)
        return replace(idle, next_wake=spec.suspend_until)
    if runs_left is not None and runs_left <= 0:
        idle = _idle(cursor, wanted, reset=reset)
        return replace(idle, finished=MAX_RUNS_REACHED, limited=True)

    offset = jitter_offset(uid, spec.jitter_seconds)
    cutoff = now - offset
    # Cron schedules never fire a tick from before they existed; a runAt may be in the past.
    floor = created if cursor is None and not isinstance(source, OneShot) else cursor
    plan = _plan(source, spec, offset=offset, cutoff=cutoff, floor=floor, cursor=cursor)
    if runs_left is not None and len(plan.due) > runs_left:
        plan = replace(plan, due=plan.due[:runs_left])  # the oldest: the last runs
    return _with_upcoming(plan, source, spec, wanted, uid=uid, floor=floor, reset=reset)


def _with_upcoming(
    plan: TickPlan,
    source: TickSource,
    spec: CronScheduleSpec,
    wanted: str,
    *,
    uid: str,
    floor: datetime | None,
    reset: bool,
) -> TickPlan:
    """The plan with its fingerprint, upcoming ticks, and whether the window is done.

    No tick left: with exclusions that removed every tick the entries still have
    inside the window, the spec is invalid; with an endTime, the schedule finished.
    """
    upcoming = (
        ()
        if plan.next_tick is None
        else upcoming_ticks(cast(Hashable, source), plan.next_tick, MAX_UPCOMING_TICKS)
    )
    finished = None
    if plan.next_tick is None and isinstance(source, CombinedTicks):
        after = plan.cursor if plan.cursor is not None else floor
        if spec.exclude and after is not None:
            bare = _combined(spec, uid, with_exclusions=False)
            if bare.next_tick(after) is not None:
                removes = _CALENDARS_REMOVE_ALL if spec.exclude_calendars else _REMOVES_ALL
                return _idle(plan.cursor, wanted, reset=reset, invalid=removes)
        if spec.end_time is not None:
            finished = END_TIME_REACHED
    return replace(
        plan,
        fingerprint=wanted,
        reset=reset,
        upcoming=upcoming,
        finished=finished,
        limited=spec.limited,
    )


_REMOVES_ALL: Final = "spec.exclude: removes every tick the schedule has left"
_CALENDARS_REMOVE_ALL: Final = (
    "spec.exclude and spec.excludeCalendars: remove every tick the schedule has left"
)


def _plan(
    source: TickSource,
    spec: CronScheduleSpec,
    *,
    offset: timedelta,
    cutoff: datetime,
    floor: datetime | None,
    cursor: datetime | None,
) -> TickPlan:
    """Steps 4 and 5: the due, missed and skipped ticks and the next one."""

    # 4. Nothing due: sleep until the next fire instant.
    newest = source.prev_tick(cutoff)
    if newest is None or (floor is not None and newest <= floor):
        upcoming = source.next_tick(cutoff if floor is None else max(cutoff, floor))
        return TickPlan(
            due=(),
            missed=(),
            skipped=(),
            cursor=cursor,
            fingerprint="",
            next_tick=upcoming,
            next_wake=None if upcoming is None else upcoming + offset,
        )

    # 5. Something is due: decide every due tick, newest first.
    due, missed, skipped = _plan_due(source, spec, newest=newest, floor=floor, cutoff=cutoff)
    upcoming = source.next_tick(cutoff)
    return TickPlan(
        due=tuple(DueTick(tick, tick + offset) for tick in sorted(due)),
        missed=tuple(missed),
        skipped=tuple(skipped),
        cursor=newest,
        fingerprint="",
        next_tick=upcoming,
        next_wake=None if upcoming is None else upcoming + offset,
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
    reason: TickReason,
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
