"""Runs after other schedules' runs: spec.after, one rule of a decision.

Why it exists: "run B after A succeeds" is what teams fake with guessed offsets (extract
at 02:00, load at 02:30 and hope). Punctual records every run's outcome with its tick, so
the chain can be exact. `spec.after: [{schedule: A, on: Succeeded|Failed|Finished}]`
without a schedule of its own starts one run of B for each run of A that ends with that
outcome (with several upstreams, fan-in: each must have that outcome for the same tick).
The run is a candidate like a due tick: its tick is the upstream's tick, its name
`<B>-<tick>` (`naming.job_name`), it is admitted against the one room (`admitting`, by
the concurrency policy in `overlapping`) and claimed in status.inFlight before it is
created (`claiming`), carrying the upstream runs that started it.

Exactly once: the fact is the upstream run's outcome as its Job or its status.recentFirings
records it; the fence is B's claim of `<B>-<tick>`, written with B's resourceVersion; the
cursor is status.after (per upstream, the newest tick B has handled), moved in the same
write as the claim. A leader killed before that write leaves the cursor where it was and
the outcome still recorded: the next leader decides the same run again. Killed after it,
the claim is in flight and is created on takeover. Upstream ticks are handled oldest
first, and none while an older one of the same upstream is still running or will be
retried, so the cursor never passes a run it has not decided.

How far back: a chain sees the upstream runs the upstream still records, its kept Jobs
(its history limits) and status.recentFirings (the 20 newest); a run older than both
that was never handled (B's operator down, or the upstream missing, past twenty upstream
runs) is not run after. Where the cursor starts: at B's creation for a new B; at the
upstream's newest ended run when `after` is added to a schedule that already ran (its past
is not replayed); where the chain is for an upstream added to the list.

Backfills (`_backfilled`): a backfill of the upstream, or a rerun of a dead tick that
succeeds, ends ticks older than the cursor. Each cursor keeps those it handled
(status.after[].backfilled) for as long as the upstream still records them so, which
bounds the list and never lets one be offered twice.

With a schedule of its own, spec.after is a gate (`gate`): a due tick of B waits in
status.gated up to `within` for each upstream's run of its period (an upstream tick after
B's previous tick, up to B's tick plus `within`) to end with the outcome named, fires
when they have, and is Missed, with the reason, when `within` passes first.

What it must never do: start a run for an upstream tick at or before the cursor (but a
backfilled one not yet handled), for an upstream run still running or about to be
retried, or for a tick whose run B already has (its Job, its claim, its recorded firing);
or raise for a missing upstream or a cycle (InvalidSpec says why). Like all of
`punctual.core`, it never talks to the API server or reads the clock.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Final, Protocol

from pydantic import ValidationError

from punctual.core.freezing import Freeze, FreezeAction
from punctual.core.jobs import JobSnapshot, JobState
from punctual.core.models import (
    After,
    AfterCursor,
    ChainOn,
    CronScheduleSpec,
    FiringOutcome,
    GatedTick,
    parse_status,
)
from punctual.core.naming import job_name
from punctual.core.planning import tick_source
from punctual.core.records import (
    Candidate,
    Ended,
    EventNote,
    ScheduleRead,
    Skip,
    SkipReason,
    Upstream,
    Upstreams,
)
from punctual.core.schedules import ScheduleError
from punctual.core.stamping import FiringKind
from punctual.core.times import format_time

# How many upstreams deep a cycle is looked for.
MAX_DEPTH: Final = 32
_TINY: Final = timedelta(microseconds=1)
_ENDED: Final = (FiringOutcome.SUCCEEDED, FiringOutcome.FAILED)


def upstream_of(name: str, body: Mapping[str, Any], jobs: Sequence[JobSnapshot]) -> Upstream:
    """What a downstream reads of upstream `name`: from its Jobs (a finished one is the
    fact, before status records it) and its status (runs whose Jobs history clean-up
    deleted, ticks skipped or missed, claims and retries still to come)."""
    try:
        status = parse_status(body)
    except ValidationError:
        status = parse_status({})
    asked = ((body.get("spec") or {}).get("retry") or {}).get("maxAttempts")
    retry = asked if isinstance(asked, int) else 1  # an unreadable spec: no retry to wait for
    uid = str((body.get("metadata") or {}).get("uid", ""))
    ended: dict[datetime, Ended] = {}
    pending: set[datetime] = set()
    # Per tick, its newest attempt: (attempt, how it ended, whether another one comes).
    attempts: dict[datetime, tuple[int, Ended, bool]] = {}

    def note(tick: datetime, attempt: int, end: Ended, manual: bool, dead: bool) -> None:
        if end.outcome is FiringOutcome.SUCCEEDED:
            # An attempt past spec.retry's is a rerun of a dead tick (`punctual backfill
            # --failed`): followed like a backfilled run, the tick being older than the cursor.
            rerun = attempt > retry
            ended[tick] = dataclasses.replace(end, backfill=True, rerun=True) if rerun else end
        failed = end.outcome is FiringOutcome.FAILED
        again = failed and not (manual or dead) and attempt < retry  # spec.retry
        if tick not in attempts or attempt > attempts[tick][0]:
            attempts[tick] = (attempt, end, again)

    done = {j.name for j in jobs if j.schedule_uid == uid and not j.active}
    for firing in status.recent_firings:
        if firing.outcome is FiringOutcome.CREATED:
            if firing.job not in done:  # a run ended but not yet recorded: its Job says
                pending.add(firing.tick)
            continue
        manual = bool(firing.manual)
        end = Ended(firing.outcome, None, firing.job, manual=manual)
        note(firing.tick, firing.attempt or 1, end, manual, bool(firing.dead))
    for job in jobs:
        if job.schedule_uid != uid or job.tick is None or (job.deleting and job.active):
            continue
        if job.state is JobState.ACTIVE:
            pending.add(job.tick)
            continue
        outcome = FiringOutcome(job.state.value)
        manual = job.trigger is not None
        note(
            job.tick,
            job.attempt,
            Ended(outcome, job.finished_at, job.name, manual=manual),
            manual,
            False,
        )
    seen = {j.name for j in jobs}
    cursor = status.last_scheduled_time
    for claim in status.in_flight:
        ahead = (
            claim.job == job_name(name, claim.tick)
            and not claim.backfill
            and not claim.upstream
            and (cursor is None or claim.tick > cursor)
        )  # claimed ahead (`claiming.claimed_ahead`): decided again at its tick
        if claim.job not in seen and not ahead:
            pending.add(claim.tick)
    pending |= {r.tick for r in status.retrying or ()}
    waiting = [*(status.buffered or ()), *(status.gated or ())]  # due, their runs to come
    pending |= {w.tick for w in waiting if w.job not in seen}
    for tick, (_, end, again) in attempts.items():
        if again:
            pending.add(tick)
        elif tick not in ended and tick not in pending:
            ended[tick] = end
    backfilled = {f.tick for f in status.recent_firings if f.backfill}
    for tick in backfilled & set(ended):
        ended[tick] = dataclasses.replace(ended[tick], backfill=True)
    return Upstream(name, ended, frozenset(t for t in pending if t not in ended))


def after_names(body: Mapping[str, Any] | None) -> tuple[str, ...]:
    """The upstreams a schedule names in spec.after, as written (unvalidated)."""
    if body is None:
        return ()
    entries = (body.get("spec") or {}).get("after")
    if not isinstance(entries, list):
        return ()
    return tuple(
        str(e["schedule"]) for e in entries if isinstance(e, Mapping) and e.get("schedule")
    )


def find_cycle(name: str, upstreams_of: Callable[[str], Sequence[str]]) -> tuple[str, ...] | None:
    """A chain of spec.after from `name` back to itself (`name`, ..., `name`), if any,
    following `upstreams_of` at most MAX_DEPTH deep."""
    path = [name]
    seen: set[str] = set()

    def walk(at: str, depth: int) -> tuple[str, ...] | None:
        if depth > MAX_DEPTH:
            return None
        for up in upstreams_of(at):
            if up == name:
                return (*path, up)
            if up in seen:
                continue
            seen.add(up)
            path.append(up)
            found = walk(up, depth + 1)
            if found is not None:
                return found
            path.pop()
        return None

    return walk(name, 0)


def missing(spec: CronScheduleSpec, upstreams: Upstreams) -> str | None:
    """Why spec.after cannot be followed for now: an upstream not found (not yet created,
    deleted, or in another namespace, which spec.after cannot name). The decision goes on
    (claims in flight are still created) and InvalidSpec says why; it clears by itself."""
    for index, entry in enumerate(spec.after or ()):
        if upstreams.found.get(entry.schedule) is None:
            return (
                f"spec.after[{index}].schedule: no CronSchedule {entry.schedule} in this "
                "namespace (an upstream must be in the same namespace)"
            )
    return None


@dataclass(frozen=True, slots=True)
class Chain:
    """spec.after in one decision."""

    candidates: tuple[Candidate, ...] = ()  # runs to start, oldest upstream tick first
    skips: tuple[Skip, ...] = ()  # upstream runs a suspended or paused schedule skipped
    cursors: tuple[AfterCursor, ...] | None = None  # status.after
    lags: tuple[tuple[str, float], ...] = ()  # per run to start: seconds since upstreams ended
    gated: tuple[GatedTick, ...] | None = None  # status.gated
    missed: tuple[tuple[Candidate, str], ...] = ()  # gated ticks whose `within` passed
    open: tuple[Candidate, ...] = ()  # gated ticks whose upstreams' runs ended as named
    wake: datetime | None = None  # when the oldest gated tick gives up
    notes: tuple[EventNote, ...] = ()
    problem: str | None = None  # an upstream not found (`missing`): InvalidSpec says so


def _matches(on: ChainOn, outcome: FiringOutcome) -> bool:
    if on is ChainOn.FINISHED:
        return outcome in _ENDED
    return outcome.value == on.value


def runs_after(
    spec: CronScheduleSpec,
    schedule: ScheduleRead,
    upstreams: Mapping[str, Upstream],
    *,
    held: tuple[SkipReason, str] | None = None,
    now: datetime,
) -> Chain:
    """The runs a schedule fired by its upstreams alone starts now (`held`: skipped, with
    that reason and message), and its new cursors:
    the upstream ticks after the cursor, in order, then backfilled ones (`_backfilled`)."""
    entries = spec.after or ()
    if not spec.chained or not entries:
        return Chain()
    old = schedule.old
    written = {c.schedule: c for c in old.after or ()}
    floors: dict[str, datetime] = {}
    for entry in entries:
        up = upstreams[entry.schedule]
        if entry.schedule in written:
            floors[entry.schedule] = written[entry.schedule].tick
        elif written:  # an upstream added to the chain: from where the chain is
            floors[entry.schedule] = max(c.tick for c in written.values())
        elif old.recent_firings or old.last_scheduled_time:  # after added to one that ran:
            floors[entry.schedule] = max([schedule.created, *up.ended])  # no replay
        else:  # a new schedule: from its creation on
            floors[entry.schedule] = schedule.created
    start = max(floors.values())
    cursors = {e.schedule: written.get(e.schedule) for e in entries}
    chosen: list[tuple[datetime, Ends]] = []  # the ticks to run after, in order
    for tick in sorted({t for e in entries for t in upstreams[e.schedule].ended if t > start}):
        if any(p <= tick for e in entries for p in upstreams[e.schedule].pending if p > start):
            break  # an older (or this) run of an upstream has not ended: wait, in order
        ends, passed, waiting = _ends(entries, upstreams, tick)
        if waiting and not passed:
            break
        name = job_name(schedule.name, tick)
        for upstream, end in ends:
            ran = None if passed else name
            cursors[upstream] = AfterCursor(
                schedule=upstream, tick=tick, outcome=end.outcome.value, job=ran
            )
        for entry in entries:
            if entry.schedule not in dict(ends):
                cursors[entry.schedule] = AfterCursor(schedule=entry.schedule, tick=tick)
        if not passed:
            chosen.append((tick, ends))
    handled = {
        e.schedule: cursors[e.schedule] or AfterCursor(schedule=e.schedule, tick=floors[e.schedule])
        for e in entries
    }
    backfilled, late = _backfilled(entries, upstreams, handled)
    candidates, skips, lags = _started(schedule, chosen + late, held=held, now=now)
    new_cursors = tuple(
        handled[e.schedule].model_copy(update={"backfilled": backfilled[e.schedule] or None})
        for e in entries
    )
    return Chain(tuple(candidates), tuple(skips), new_cursors, tuple(lags))


def _ends(
    entries: Sequence[After],
    upstreams: Mapping[str, Upstream],
    tick: datetime,
    *,
    late: bool = False,
) -> tuple[Ends, bool, bool]:
    """How each upstream's run of `tick` ended; whether the tick is passed over (one
    ended otherwise, or never ran it: its next run is newer), or waits (one may yet).
    `late`: a tick at or before the cursor, decided once already, which only a success
    can add to (a rerun succeeds once; its failed end was the Failed one)."""
    ends: Ends = []
    passed = waiting = False
    for entry in entries:
        up = upstreams[entry.schedule]
        end = up.ended.get(tick)
        if end is None:
            newest = up.newest
            if newest is not None and newest > tick:
                passed = True  # this upstream never ran that tick
            else:
                waiting = True  # it may yet
            continue
        ends.append((entry.schedule, end))
        unwanted = (end.backfill and not entry.backfills) or (end.manual and not entry.manual)
        unwanted = unwanted or (late and end.rerun and entry.on is not ChainOn.SUCCEEDED)
        if not _matches(entry.on, end.outcome) or unwanted:
            passed = True
    return ends, passed, waiting


Ends = list[tuple[str, Ended]]  # how each upstream's run of one tick ended


def _started(
    schedule: ScheduleRead,
    chosen: Sequence[tuple[datetime, Ends]],
    *,
    held: tuple[SkipReason, str] | None,
    now: datetime,
) -> tuple[list[Candidate], list[Skip], list[tuple[str, float]]]:
    """The runs after the `chosen` ticks (or, `held`, their skips), and their lags;
    never one this schedule has (its Job, its claim, its recorded firing)."""
    old = schedule.old
    known = {*schedule.by_name, *(c.job for c in old.in_flight)}
    known |= {f.job for f in old.recent_firings if f.job is not None}
    candidates: list[Candidate] = []
    skips: list[Skip] = []
    lags: list[tuple[str, float]] = []
    for tick, ends in chosen:
        name = job_name(schedule.name, tick)
        if name in known:
            continue
        known.add(name)
        started = tuple(f"{u}/{e.job}" for u, e in ends if e.job is not None)
        candidate = Candidate(name, tick, kind=FiringKind.AFTER, upstream=started)
        if held is not None:
            message = f"{held[1]}: the run after {', '.join(started)} is skipped"
            skips.append(Skip(candidate, held[0], message))
            continue
        candidates.append(candidate)
        finished = [e.at for _, e in ends if e.at is not None]
        if finished:
            lags.append((name, max(0.0, (now - max(finished)).total_seconds())))
    return candidates, skips, lags


def _backfilled(
    entries: Sequence[After],
    upstreams: Mapping[str, Upstream],
    cursors: Mapping[str, AfterCursor],
) -> tuple[dict[str, list[datetime]], list[tuple[datetime, Ends]]]:
    """Backfilled upstream runs (`punctual backfill` of the upstream) run after too, unless
    an entry says `backfills: false`: their ticks are older than the cursor, so each
    upstream's cursor keeps the backfilled ticks it handled (`backfilled`) for as long as
    the upstream still records them as backfilled; a tick no longer recorded so can no
    longer be offered, so the list is bounded by the upstream's recentFirings and a
    backfilled run is followed once. Returns each upstream's list after this decision, and
    the backfilled ticks to run after (`_started` leaves out the ones it has)."""
    marked = {
        e.schedule: {t for t, end in upstreams[e.schedule].ended.items() if end.backfill}
        for e in entries
    }
    handled = {
        e.schedule: set(cursors[e.schedule].backfilled or ()) & marked[e.schedule] for e in entries
    }
    cursor = max(c.tick for c in cursors.values())
    late: list[tuple[datetime, Ends]] = []
    for tick in sorted(set().union(*marked.values())):
        if tick > cursor or any(tick in handled[n] for n in handled):
            continue  # the in-order pass decides it, or it was decided
        ends, passed, waiting = _ends(entries, upstreams, tick, late=True)
        if waiting and not passed:
            continue
        handled = {n: ticks | ({tick} & marked[n]) for n, ticks in handled.items()}
        if not passed:
            late.append((tick, ends))
    return {name: sorted(ticks) for name, ticks in handled.items()}, late


def gate(
    spec: CronScheduleSpec,
    schedule: ScheduleRead,
    due: Sequence[Candidate],
    upstreams: Mapping[str, Upstream],
    *,
    now: datetime,
) -> Chain:
    """spec.after with a schedule of its own: each due scheduled tick waits (status.gated)
    until every upstream has a run of its period that ended as named (then it goes on
    to the concurrency policy), or until `within` passes (then it is Missed)."""
    entries = spec.after or ()
    if spec.chained or not entries:
        return Chain(open=tuple(due))
    longest = max(e.within_seconds or 0 for e in entries)
    queue = [
        Candidate(g.job, g.tick)
        for g in schedule.old.gated or ()
        if g.job not in schedule.by_name and g.job not in {c.job for c in due}
    ]
    queue += [c for c in due if not c.manual and c.kind is FiringKind.SCHEDULED]
    opened = [c for c in due if c.manual or c.kind is not FiringKind.SCHEDULED]
    waiting: list[GatedTick] = []
    missed: list[tuple[Candidate, str]] = []
    notes: list[EventNote] = []
    for candidate in sorted(queue, key=lambda c: c.tick):
        since = _previous(spec, schedule.uid, candidate.tick)
        short = [
            e for e in entries if not _ran(upstreams.get(e.schedule), since, candidate.tick, e)
        ]
        if not short:
            opened.append(candidate)
            continue
        until = candidate.tick + timedelta(seconds=longest)
        if now >= until:
            names = ", ".join(f"{e.schedule} ({e.on.value})" for e in short)
            within = ", ".join(str(e.within) for e in short)
            reason = f"gate: no run of {names} ended as named within {within}"
            missed.append((candidate, reason))
            notes.append(
                EventNote("Warning", "Missed", f"Tick {format_time(candidate.tick)}: {reason}")
            )
            continue
        if candidate.job not in {g.job for g in schedule.old.gated or ()}:
            names = ", ".join(e.schedule for e in short)
            message = f"Tick {format_time(candidate.tick)} waits for {names} (gate)"
            notes.append(EventNote("Normal", "Gated", message))
        waiting.append(GatedTick(tick=candidate.tick, job=candidate.job, until=until))
    wake = min((g.until for g in waiting), default=None)
    return Chain(
        gated=tuple(waiting),
        missed=tuple(missed),
        open=tuple(opened),
        wake=wake,
        notes=tuple(notes),
    )


def _previous(spec: CronScheduleSpec, uid: str, tick: datetime) -> datetime | None:
    try:
        return tick_source(spec, uid=uid).prev_tick(tick - _TINY)
    except ScheduleError:
        return None


def _ran(up: Upstream | None, since: datetime | None, tick: datetime, entry: After) -> bool:
    """Whether `up` has a run of the period (since, tick + within] that ended as
    `entry.on` (a missing upstream has none)."""
    until = tick + timedelta(seconds=entry.within_seconds or 0)
    return up is not None and any(
        (since is None or t > since) and t <= until and _matches(entry.on, end.outcome)
        for t, end in up.ended.items()
    )


class Frozen(Protocol):
    """What `follow` reads of the freezes applied (`pausing.Freezing`, not imported: the
    rules meet only in `deciding`)."""

    @property
    def kept(self) -> tuple[Candidate, ...]: ...  # the due ticks a Skip window let through

    @property
    def now(self) -> tuple[Freeze, datetime] | None: ...  # the window over now


def follow(
    spec: CronScheduleSpec,
    schedule: ScheduleRead,
    freezing: Frozen,
    upstreams: Upstreams,
    suspended: bool,
    *,
    now: datetime,
) -> Chain:
    """spec.after in one decision: the runs after upstream runs (`runs_after`) for a
    schedule fired by them alone, the gate (`gate`) over the due ticks a Skip freeze window
    left (`freezing.kept`) for one with a schedule of its own. An upstream not found
    (`missing`) holds a chain, and is the reason InvalidSpec gives. A freeze window over
    now holds the runs after (Defer: they wait for its end) or skips them (Skip), as it
    does ticks; `suspended` (suspend, suspendUntil, a pause after failures) skips them."""
    found = {name: up for name, up in upstreams.found.items() if up is not None}
    lost = missing(spec, upstreams)
    if not spec.chained:  # a missing upstream never ran: its ticks wait, then are Missed
        return dataclasses.replace(
            gate(spec, schedule, freezing.kept, found, now=now), problem=lost
        )
    if lost is not None:  # nothing is decided until it is back: the cursor stays
        return Chain(cursors=tuple(schedule.old.after or ()) or None, problem=lost)
    window = freezing.now
    if window is not None and window[0].action is FreezeAction.DEFER:
        return Chain(cursors=tuple(schedule.old.after or ()) or None)  # at its end
    held: tuple[SkipReason, str] | None = None
    if window is not None:
        held = SkipReason.FREEZE_WINDOW, f"{window[0].title}: Skip until {format_time(window[1])}"
    elif suspended:
        held = SkipReason.SUSPENDED, "suspended or paused"
    return runs_after(spec, schedule, found, held=held, now=now)
