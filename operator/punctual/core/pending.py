"""Runs stuck pending: spec.pendingTimeoutSeconds, one rule of a decision.

Why it exists: a Job whose pods never start (an image that never pulls, a pod nothing
can schedule, a quota) never fails by itself: `backoffLimit` counts failed pods and a
pending pod has not failed (kubernetes#58748, #101584), so under Forbid it wedges the
schedule forever. With `pendingTimeoutSeconds: P`, a Job none of whose pods has started
(its status counts none ready, succeeded or failed) P seconds after its creation is
failed by Punctual: the shell (kube.applying) writes on it why (its pods' waiting
reasons) and sets its `activeDeadlineSeconds`, so that the Job controller stops it too.
From the moment the annotation is written the Job reads as Failed (`jobs`): it no longer
holds Forbid, its firing is recorded Failed with reason `PendingTimeout`, and it counts
for pauseOnFailure and successDeadlineSeconds like any failure. Why not delete it: the
Job and its pods are the evidence a person looks at, and history limits remove it later.

What it must never do: fail a Job of another kind (its pods are not known here), or one
that has started. Like all of `punctual.core`, it never talks to the API server or reads
the clock.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta

from punctual.core.decisions import JobToFail
from punctual.core.jobs import JobSnapshot
from punctual.core.models import CronScheduleSpec
from punctual.core.records import ScheduleRead


@dataclass(frozen=True, slots=True)
class Stuck:
    """Runs stuck pending in one decision."""

    fail: tuple[JobToFail, ...] = ()  # the running Jobs to fail now
    wake: datetime | None = None  # when the next one would be due (None: none)


def stuck(spec: CronScheduleSpec, schedule: ScheduleRead, *, now: datetime) -> Stuck:
    """The running Jobs to fail now, and when the next one would be due."""
    limit = spec.pending_timeout_seconds
    if limit is None:
        return Stuck()
    due: list[JobToFail] = []
    wakes: list[datetime] = []
    for job in schedule.live:
        if not never_started(job) or job.created is None:
            continue
        deadline = job.created + timedelta(seconds=limit)
        if now >= deadline:
            reason = f"no pod started within pendingTimeoutSeconds {limit}"
            due.append(JobToFail(job.name, job.uid, reason))
        else:
            wakes.append(deadline)
    return Stuck(tuple(due), min(wakes, default=None))


def never_started(job: JobSnapshot) -> bool:
    """A running Job none of whose pods has started (another kind's pods are not known)."""
    return job.active and not job.started and job.kind.is_job and job.created is not None


def pending_seconds(jobs: Iterable[JobSnapshot], now: datetime) -> float:
    """How long the oldest Job of `jobs` that never started has waited (0: none)."""
    waits = [(now - j.created).total_seconds() for j in jobs if never_started(j) and j.created]
    return max([0.0, *waits])
