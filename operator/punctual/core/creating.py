"""The Jobs a decision creates: each candidate as a Job body, stamped.

Why it exists: a candidate (`records.Candidate`) says which tick fires and why; the Job
created for it (a Job, or the object of a workloadTemplate, see `workloads`) carries the
schedule's template, its name, tick, epoch, leader and
the facts its containers are told (`stamping`). `deciding` calls `job_to_create` for
each candidate it claimed.

What it must never do: decide whether a candidate fires (that is done when it is
claimed), or fire on a guess: a tick whose zone or schedule cannot be read is told with
no previous tick. Like all of `punctual.core`, it never talks to the API server or reads
the clock.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime, timedelta
from typing import Any, Final

from punctual.core.decisions import JobToCreate, Leadership
from punctual.core.jobs import build_job
from punctual.core.models import CronScheduleSpec
from punctual.core.planning import tick_source
from punctual.core.records import Candidate
from punctual.core.schedules import ScheduleError, jitter_offset, load_zone
from punctual.core.stamping import Firing
from punctual.core.workloads import JOB, WorkloadKind


def job_to_create(
    body: Mapping[str, Any],
    candidate: Candidate,
    spec: CronScheduleSpec,
    leadership: Leadership,
    *,
    uid: str,
    now: datetime,
    kind: WorkloadKind = JOB,
    last_success: datetime | None = None,
) -> JobToCreate:
    tick = candidate.tick
    asked = candidate.trigger
    return JobToCreate(
        name=candidate.job,
        tick=tick,
        manual=candidate.manual,
        kind=kind,
        fire_at=now if candidate.manual else tick + jitter_offset(uid, spec.jitter_seconds),
        body=build_job(
            schedule=body,
            job_name=candidate.job,
            tick=tick,
            epoch=leadership.epoch,
            leader=leadership.identity,
            trigger=candidate.request,
            installation=leadership.installation,
            firing=_firing(body, candidate, spec, leadership, uid=uid, last_success=last_success),
            triggered_by=None if asked is None else asked.triggered_by,
            trigger_reason=None if asked is None else asked.trigger_reason,
            shard=leadership.shard,
            kind=kind,
        ),
    )


def _firing(
    body: Mapping[str, Any],
    candidate: Candidate,
    spec: CronScheduleSpec,
    leadership: Leadership,
    *,
    uid: str,
    last_success: datetime | None,
) -> Firing:
    """What the Job's containers are told (see `stamping`): the previous tick is the
    newest of the schedule's combined ticks before this firing's."""
    try:
        zone = load_zone(spec.time_zone)
        # A schedule fired by its upstreams alone has no ticks of its own (`chaining`).
        source = None if spec.chained else tick_source(spec, uid=uid)
        previous = None if source is None else source.prev_tick(candidate.tick - _BEFORE)
    except ScheduleError:  # the plan would have refused it; never fire on a guess
        zone, previous = load_zone("UTC"), None
    return Firing(
        tick=candidate.tick,
        previous_tick=previous,
        zone=zone,
        schedule=str(body["metadata"]["name"]),
        namespace=str(body["metadata"]["namespace"]),
        kind=candidate.kind,
        epoch=leadership.epoch,
        overrides=() if candidate.trigger is None else candidate.trigger.env,
        last_successful_tick=last_success,
        attempt=candidate.attempt,
        upstream=candidate.upstream,
    )


_BEFORE: Final = timedelta(microseconds=1)
