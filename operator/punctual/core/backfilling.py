"""Backfill: run every tick of a past range, once each, paced, oldest first.

Why it exists: after an outage longer than any missedRunPolicy covers, or when a new
schedule must catch up with history, a person asks for the ticks of [from, to) to run
(`punctual backfill NAME --from T1 --to T2`, which sets the annotation
punctual.dev/backfill). The ticks go through the same claim-then-create path as any
other and are named for their tick (`<name>-<unix seconds>`), so a tick whose Job
exists, or is recorded as fired, is reported as already done and never runs twice;
asking for the same range again creates nothing new. The progress (done, skipped as
already done, total, the newest tick considered) lives in status.backfill, written with
the claims, so a failover resumes where it stopped; a new request with `cancel` stops it.

This module holds the request's format, the pure steps (start, cancel, and advance by one
batch) and `backfill`, which returns the next batch of a decision as a `Batch` record
(`deciding` calls it, `status` writes it). It never talks to the API server, reads the
clock, or changes its arguments.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Final

from pydantic import Field, ValidationError

from punctual.core import admitting
from punctual.core.groups import Group
from punctual.core.keys import ANNOTATION_BACKFILL
from punctual.core.models import (
    Backfill,
    BackfillState,
    ConcurrencyPolicy,
    CronScheduleSpec,
    Span,
    UtcTime,
    _ApiModel,
    describe_error,
)
from punctual.core.naming import job_name
from punctual.core.planning import tick_source
from punctual.core.records import Candidate, EventNote, EventType, ScheduleRead
from punctual.core.schedules import ScheduleError, TickSource
from punctual.core.stamping import FiringKind

MAX_BACKFILL_TICKS: Final = 10_000
BATCH: Final = 5  # Jobs a backfill creates per decision at most: paced, not a herd
PACE: Final = timedelta(seconds=1)  # between batches
OVERLAPS: Final = (ConcurrencyPolicy.ALLOW, ConcurrencyPolicy.FORBID)


class BackfillRequest(_ApiModel):
    """The value of the punctual.dev/backfill annotation, as JSON."""

    request: str = Field(min_length=1, max_length=128)
    start: UtcTime | None = Field(default=None, alias="from")
    to: UtcTime | None = None
    overlap: ConcurrencyPolicy = ConcurrencyPolicy.ALLOW
    cancel: bool = False


@dataclass(frozen=True, slots=True)
class Step:
    backfill: Backfill
    ticks: tuple[datetime, ...] = ()  # to create now, oldest first
    wake: datetime | None = None
    note: str | None = None  # an Event's message, when the state changed


def read_request(value: str) -> BackfillRequest | str:
    """The annotation's request, or why it is unusable (naming the field)."""
    where = f"metadata.annotations[{ANNOTATION_BACKFILL}]"
    try:
        request = BackfillRequest.model_validate(json.loads(value))
    except json.JSONDecodeError as error:
        return f"{where}: not JSON: {error.msg}"
    except ValidationError as error:
        return describe_error(error, where)
    if not request.cancel:
        if request.start is None or request.to is None:
            return f"{where}: from and to are both needed"
        if request.start >= request.to:
            return f"{where}: from must be before to"
    if request.overlap not in OVERLAPS:
        return f"{where}.overlap: must be Allow or Forbid"
    return request


def begin(value: str, old: Backfill | None, source: TickSource, now: datetime) -> Step | None:
    """A Step for a new request (None when the annotation names the request in status)."""
    request = read_request(value)
    if isinstance(request, str):
        rid = _request_id(value)
        if old is not None and old.request == rid:
            return None
        bad = Backfill(request=rid, state=BackfillState.INVALID, message=request)
        return Step(bad, note=f"Backfill refused: {request}")
    if old is not None and old.request == request.request:
        return None
    if request.cancel:
        if old is None or old.state is not BackfillState.RUNNING:
            return None
        covered = _cover(old, old.cursor + _US if old.cursor is not None else None)
        stopped = old.model_copy(update={"state": BackfillState.CANCELLED, "covered": covered})
        return Step(stopped, note=f"Backfill {old.request} cancelled at {stopped.done} done")
    assert request.start is not None and request.to is not None
    until = min(request.to, now)
    total = source.count_ticks(request.start - _US, until - _US) if until > request.start else 0
    if total > MAX_BACKFILL_TICKS:
        message = f"{total} ticks in the range, more than {MAX_BACKFILL_TICKS}: ask in parts"
        bad = Backfill(request=request.request, state=BackfillState.INVALID, message=message)
        return Step(bad, note=f"Backfill refused: {message}")
    started = Backfill.model_validate(
        {
            "request": request.request,
            "from": request.start,
            "to": until,
            "overlap": request.overlap,
            "state": BackfillState.RUNNING,
            "total": total,
            "covered": old.covered if old is not None else [],
        }
    )
    return Step(started, wake=now, note=f"Backfill {request.request}: {total} ticks to run")


def advance(
    backfill: Backfill,
    source: TickSource,
    *,
    already: Callable[[datetime], bool],
    room: int,
    now: datetime,
) -> Step:
    """One batch of at most `room` ticks (`admitting`; and at most BATCH, the pace), the
    next of the range, oldest first; those `already` done are counted as skipped."""
    if backfill.state is not BackfillState.RUNNING:
        return Step(backfill)
    assert backfill.start is not None and backfill.to is not None
    cursor = backfill.cursor or backfill.start - _US
    room = min(room, BATCH)
    ticks: list[datetime] = []
    skipped = 0
    while len(ticks) < room:
        tick = source.next_tick(cursor)
        if tick is None or tick >= backfill.to:
            break
        cursor = tick
        if already(tick):
            skipped += 1
            if skipped > 10 * BATCH:  # a long run of done ticks: go on at the next step
                break
            continue
        ticks.append(tick)
    updated = backfill.model_copy(
        update={
            "cursor": cursor if cursor >= backfill.start else None,
            "done": backfill.done + len(ticks),
            "skipped": backfill.skipped + skipped,
        }
    )
    following = source.next_tick(cursor)
    if following is None or following >= backfill.to:
        covered = _cover(updated, backfill.to)
        done = updated.model_copy(update={"state": BackfillState.DONE, "covered": covered})
        note = f"Backfill {backfill.request} done: {done.done} run, {done.skipped} already done"
        return Step(done, tuple(ticks), note=note)
    return Step(updated, tuple(ticks), wake=now + PACE)


def covers(backfill: Backfill | None, tick: datetime) -> bool:
    """Whether an earlier backfill went through this tick."""
    return backfill is not None and any(s.start <= tick < s.to for s in backfill.covered)


@dataclass(frozen=True, slots=True)
class Batch:
    """A backfill in one decision: the Jobs to create, status.backfill after it (None:
    no backfill), the Events about it, and when to take the next batch."""

    fills: tuple[Candidate, ...] = ()
    backfill: Backfill | None = None
    notes: tuple[EventNote, ...] = ()
    wake: datetime | None = None


def backfill(
    schedule: ScheduleRead,
    spec: CronScheduleSpec,
    creates: Sequence[Candidate],
    *,
    now: datetime,
    group: Group | None = None,
) -> Batch:
    """The next batch of a backfill, taken into one decision: a new request starts, a
    cancel stops, a running one advances. Ticks already done are never created again."""
    old = schedule.old.backfill
    value = schedule.annotations.get(ANNOTATION_BACKFILL)
    try:
        source = tick_source(spec, uid=schedule.uid)
    except ScheduleError:
        return Batch()
    current = old
    notes: list[EventNote] = []
    if value:
        started = begin(value, old, source, now)
        if started is not None:
            current = started.backfill
            if started.note:
                kind: EventType = "Warning" if current.state is BackfillState.INVALID else "Normal"
                notes.append(EventNote(kind, "Backfill", started.note))
    if current is None:
        return Batch()
    recorded = {f.job for f in schedule.old.recent_firings if f.job is not None}
    recorded |= {c.job for c in schedule.old.in_flight} | {c.job for c in creates}

    def already(tick: datetime) -> bool:
        name = job_name(schedule.name, tick)
        return name in schedule.by_name or name in recorded or covers(old, tick)

    # Fills wait for room like any run (`admitting`): Allow within maxConcurrent and the
    # group, Forbid one at a time while nothing else runs.
    allow = current.overlap is ConcurrencyPolicy.ALLOW
    room = admitting.room(
        current.overlap,
        spec.max_concurrent if allow else None,
        running=len(schedule.live) + len(creates),
        group=group,
    ).free
    step = advance(current, source, already=already, room=room, now=now)
    if step.note:
        notes.append(EventNote("Normal", "Backfill", step.note))
    fills = tuple(
        Candidate(job_name(schedule.name, tick), tick, kind=FiringKind.BACKFILL)
        for tick in step.ticks
    )
    return Batch(fills, step.backfill, tuple(notes), step.wake)


def _cover(backfill: Backfill, until: datetime | None) -> list[Span]:
    """The covered ranges with [start, until) added, merged, the newest 20 kept."""
    spans = list(backfill.covered)
    if backfill.start is not None and until is not None and until > backfill.start:
        spans.append(Span.model_validate({"from": backfill.start, "to": until}))
    spans.sort(key=lambda s: s.start)
    merged: list[Span] = []
    for span in spans:
        if merged and span.start <= merged[-1].to:
            last = merged[-1]
            merged[-1] = Span.model_validate({"from": last.start, "to": max(last.to, span.to)})
        else:
            merged.append(span)
    return merged[-20:]


def _request_id(value: str) -> str:
    try:
        found = json.loads(value).get("request")
    except (json.JSONDecodeError, AttributeError):
        found = None
    return str(found) if found else value[:128]


_US = timedelta(microseconds=1)
