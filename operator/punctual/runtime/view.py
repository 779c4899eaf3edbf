"""The leader's view of its schedules and Jobs: the watched indices, made fresher by its own writes.

Why it exists: the watch delivers our own writes a moment after they land. Deciding on
the watch alone would claim on a stale resourceVersion (and lose a round to a 409) and
not see a Job just created or deleted. So the view keeps the schedule as the leader's
last write returned it, the Jobs it created or deleted that the watch has not
delivered yet, and what decisions last read of each Job (so a Job's routine status
updates wake nobody). It also remembers since when a schedule has status changes left
unwritten (see core.delaying).

What it must never do: write to the API server, decide, or outlive a leadership: a
new leader starts with it cleared.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from datetime import datetime, timedelta
from typing import Any

from punctual.core.jobs import JobSnapshot, JobState
from punctual.kube.applying import Applied
from punctual.kube.following import without_managed_fields
from punctual.kube.schedulewatching import unpack
from punctual.runtime.scheduling import Key

Body = dict[str, Any]


def _resource_version(body: Mapping[str, Any] | None) -> int:
    """resourceVersions are opaque, but from etcd they are increasing integers."""
    return _version_number((body or {}).get("metadata", {}).get("resourceVersion"))


def _version_number(text: object) -> int:
    try:
        return int(str(text))
    except (TypeError, ValueError):
        return -1


class LeaderView:
    def __init__(
        self,
        schedules: Mapping[Key, bytes],
        jobs: Mapping[str, list[JobSnapshot]],
        uids: Mapping[Key, str] | None = None,
        versions: Mapping[Key, str] | None = None,
    ) -> None:
        self._schedules = schedules  # packed bodies (kube.schedulewatching)
        self._uids = uids  # each schedule's uid, when the index keeps them beside
        self._versions = versions  # and each one's resourceVersion
        self._jobs = jobs  # a schedule uid's Jobs (kube.jobwatching)
        self.written: dict[Key, Body] = {}  # the schedule as our last write returned it
        self.created: dict[str, dict[str, JobSnapshot]] = {}  # schedule uid -> name -> Job
        self.deleted: dict[str, set[str]] = {}  # schedule uid -> names being deleted
        self.freed: dict[str, set[str]] = {}  # schedule uid -> names we freed
        self.uids: dict[Key, str] = {}  # the uid each schedule had when last seen
        self.jobs_seen: dict[str, JobSnapshot] = {}  # Job uid -> what decisions read of it
        self.unwritten_since: dict[Key, datetime] = {}  # status changes left for later
        self.quiet: set[Key] = set()  # Decision.quiet_endings, as the last pass said
        # Creates of the last pass that failed for a transient reason (unsettled), by name:
        # the next pass writes its status before trying them again (`Reconciler._decide`).
        self.unsettled: dict[Key, frozenset[str]] = {}
        # Clean-up steps the last pass left for a later one (`Applied.left_for_later`).
        self.cleanup_backlog: dict[Key, int] = {}

    def clear(self) -> None:
        """Forget everything but the watch's own view (a new leadership starts)."""
        self.written.clear()
        self.unwritten_since.clear()
        self.quiet.clear()
        self.unsettled.clear()
        self.cleanup_backlog.clear()
        self.created.clear()
        self.deleted.clear()
        self.freed.clear()

    def schedule_keys(self) -> list[Key]:
        return list(self._schedules)

    # -- what the watch says, filtered -----------------------------------------------

    def is_echo(self, key: Key, resource_version: str | None) -> bool:
        """Whether a schedule event is the echo of our own last write (nothing new). Our
        copy goes once the index holds our write or a newer version: kept any longer,
        it was one parsed body per schedule for as long as nothing read it again (a
        standby never does)."""
        ours = self.written.get(key)
        if ours is None:
            return False
        if _version_number(resource_version) >= _resource_version(ours):
            del self.written[key]
        return bool(ours["metadata"].get("resourceVersion") == resource_version)

    def job_changed(self, uid: str, job: JobSnapshot | None) -> bool:
        """Whether what decisions read of a Job changed (created, finished, deleted).

        A Job's status changes several times while it runs (pods created, ready,
        counted); only its creation, its finishing and its deletion matter here. Its
        first pod starting does not either: only a pendingTimeoutSeconds reads it, at a
        deadline its own timer wakes for (a pass per firing when it woke one).

        Nor does what happens to a Job after a pass saw it being deleted: a deleting Job
        counts as no run, its firing was recorded before its finalizer was freed, so the
        echo of that release and the Job's going change no decision (two passes per
        firing under a TTL, when they woke them).
        """
        seen = self.jobs_seen.get(uid)
        if job is None:
            self.jobs_seen.pop(uid, None)
            return not (seen is not None and seen.deleting and not seen.has_finalizer)
        self.jobs_seen[uid] = job
        if seen is None:
            return True
        if seen == dataclasses.replace(job, started=seen.started):
            return False
        released = seen.deleting and job.deleting and seen.has_finalizer and not job.has_finalizer
        return not (released and seen == dataclasses.replace(job, has_finalizer=True))

    def job_news(
        self, key: Key, uid: str, job: JobSnapshot | None, *, now: datetime, delay: timedelta
    ) -> datetime | None:
        """When the schedule `key` must be looked at for this change of one of its Jobs
        (None: deleted): `now`; or by `now + delay`, for an ending its last pass said may
        wait for the next write (`ends_quietly`; that write is then due); or never (None),
        when nothing a decision reads changed (`job_changed`)."""
        before = self.jobs_seen.get(uid)
        if not self.job_changed(uid, job):
            return None
        if not self.ends_quietly(key, before, job):
            return now
        self.unwritten_since.setdefault(key, now)
        return now + delay

    def ends_quietly(self, key: Key, before: JobSnapshot | None, job: JobSnapshot | None) -> bool:
        """Whether a Job's change (from `before`, as last seen) is an ending its
        schedule's last pass said may wait for the next write (`Decision.quiet_endings`):
        a run that succeeded, or a finished run whose deletion began."""
        if key not in self.quiet or before is None or job is None:
            return False
        succeeded = before.state is JobState.ACTIVE and job.state is JobState.SUCCEEDED
        finished = before.state is not JobState.ACTIVE and job.state is before.state
        going = finished and not before.deleting and job.deleting
        return (succeeded and not job.deleting) or going

    # -- what a decision reads ---------------------------------------------------------

    def _indexed_version(self, key: Key) -> int:
        """The resourceVersion the index holds for the schedule (-1: none)."""
        if self._versions is not None:
            return _version_number(self._versions.get(key))
        packed = self._schedules.get(key)
        return -1 if packed is None else _resource_version(unpack(packed))

    def knows(self, key: Key) -> bool:
        """Whether the index holds the schedule (no parse)."""
        return key in self._schedules

    def schedule(self, key: Key) -> Body | None:
        """The freshest body we know: the watch's, or our own last write if newer."""
        packed = self._schedules.get(key)
        watched = unpack(packed) if packed is not None else None
        ours = self.written.get(key)
        if watched is None:
            self.written.pop(key, None)
            return None
        uid: str = watched["metadata"]["uid"]
        indexed = None if self._uids is None else self._uids.get(key)
        self.uids[key] = indexed if indexed is not None and indexed == uid else uid  # not a copy
        same = ours is not None and ours["metadata"].get("uid") == watched["metadata"].get("uid")
        if same and _resource_version(ours) > _resource_version(watched):
            return ours
        self.written.pop(key, None)
        return watched

    def jobs(self, uid: str) -> list[JobSnapshot]:
        """The schedule's Jobs: the watch's, plus ours it has not delivered yet."""
        seen = {j.name: j for j in self._jobs.get(uid, [])}
        mine = self.created.get(uid, {})
        for name in [n for n in mine if n in seen]:
            del mine[name]  # the watch caught up
        # Forget our deletes and releases once the watch shows them (or the Job gone).
        gone = self.deleted.get(uid, set())
        gone &= {n for n, j in seen.items() if not j.deleting}
        let_go = self.freed.get(uid, set())
        let_go &= {n for n, j in seen.items() if j.has_finalizer}
        jobs = {**mine, **seen}
        if not gone and not let_go:
            return list(jobs.values())
        return [
            dataclasses.replace(
                j,
                deleting=j.deleting or j.name in gone,
                has_finalizer=j.has_finalizer and j.name not in let_go,
            )
            if j.name in gone or j.name in let_go
            else j
            for j in jobs.values()
        ]

    def schedule_uids(self) -> set[str]:
        """The uids of every schedule in the index. (Without the index's own uids it
        parses each: 100 000 took seconds of a new leader's first moments.)"""
        if self._uids is not None:
            return set(self._uids.values())
        return {unpack(packed)["metadata"]["uid"] for packed in self._schedules.values()}

    def finalized_jobs(self) -> dict[str, list[JobSnapshot]]:
        """Jobs that carry our finalizer, by their schedule's uid."""
        held: dict[str, list[JobSnapshot]] = {}
        for uid, store in self._jobs.items():
            jobs = [j for j in store if j.has_finalizer]
            if jobs:
                held[uid] = jobs
        return held

    def forget_schedule(self, key: Key) -> str | None:
        """The schedule is gone: forget it; returns the uid it had, if known."""
        self.written.pop(key, None)
        self.unwritten_since.pop(key, None)
        self.quiet.discard(key)
        self.unsettled.pop(key, None)
        self.cleanup_backlog.pop(key, None)
        return self.uids.pop(key, None)

    # -- what our writes did -----------------------------------------------------------

    def claimed(self, key: Key, schedule: Body) -> None:
        """Our claim as the API server answered it, kept as the freshest body until the
        watch delivers it: its echo is then known as ours (no second pass). Nothing is
        kept if the watch was quicker: the index holds it already."""
        kept = self.written.get(key)
        if kept is not None and _resource_version(kept) == _resource_version(schedule):
            return  # told already (the applier tells, then the pass remembers)
        mine = without_managed_fields(schedule)
        if self._indexed_version(key) < _resource_version(mine):
            self.written[key] = mine
        else:
            self.written.pop(key, None)

    def created_now(self, uid: str, job: JobSnapshot) -> None:
        """A Job we created, kept until the watch delivers it; the watch's ADDED event for
        it then says nothing new (no second pass)."""
        self.created.setdefault(uid, {})[job.name] = job
        self.jobs_seen.setdefault(job.uid, job)

    def remember(self, key: Key, uid: str, applied: Applied, *, wrote_status: bool) -> None:
        """Keep what applying a Decision did until the watch delivers it."""
        for job in applied.created:
            self.created_now(uid, job)
        if applied.deleted:
            self.deleted.setdefault(uid, set()).update(applied.deleted)
        if applied.freed:
            self.freed.setdefault(uid, set()).update(applied.freed)
        if applied.left_for_later:
            self.cleanup_backlog[key] = applied.left_for_later
        else:
            self.cleanup_backlog.pop(key, None)
        if applied.pending:
            self.unsettled[key] = frozenset(applied.pending)
        else:
            self.unsettled.pop(key, None)
        if not applied.stale and applied.schedule is not None and wrote_status:
            self.claimed(key, applied.schedule)
            self.unwritten_since.pop(key, None)

    def reread(self, key: Key, body: Body | None) -> None:
        """The schedule as read after a conflict (None: it is gone)."""
        if body is None:
            self.written.pop(key, None)
        else:
            self.written[key] = without_managed_fields(body)
