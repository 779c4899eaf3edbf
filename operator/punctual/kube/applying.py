"""Applying a Decision to the API server, in the order that keeps both invariants.

Why it exists: `deciding` says what should happen; this module makes it happen and
is the only place that writes schedules' status and Jobs, in the order written once in
`core.decisions.Decision`. Every write first checks that this replica still leads.

* A 409 Conflict on the claim means another writer (a newer leader, or a user's edit)
  got there first: nothing else of the Decision is done; the caller re-reads and
  decides again. Never a blind retry.
* A 409 AlreadyExists on a create is success if the Job is ours (same schedule uid),
  which is exactly what finishing an in-flight claim after a crash looks like.
* A create the API server rejects for good (422 Invalid, 403 Forbidden, a foreign
  Job with our name) is recorded in status and an Event; the claim is settled as
  Failed so that it is not retried forever. A create that fails for a transient
  reason (5xx, timeout, API server down) stays in flight and is finished later.

What it must never do: decide policy, or write when `is_leader()` is False.
"""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import inspect
import logging
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Final

from pydantic import ValidationError

from punctual.clocks import Clock
from punctual.core.decisions import Decision, JobToCreate, JobToFail
from punctual.core.jobs import JobSnapshot, JobState, owned_by, pending_timeout_note
from punctual.core.keys import ANNOTATION_PENDING_TIMEOUT, FINALIZER
from punctual.core.migrating import cronjob_job_name, migrated_from
from punctual.core.models import CronScheduleStatus, dump_status, parse_status
from punctual.core.records import EventNote, JobToDelete
from punctual.core.settling import settle_failures
from punctual.core.times import format_time
from punctual.core.workloads import JOB, WorkloadKind
from punctual.kube.client import (
    MERGE_PATCH,
    STRATEGIC_MERGE_PATCH,
    AlreadyExists,
    Api,
    ApiError,
    Conflict,
    Invalid,
    NotFound,
    Unavailable,
)
from punctual.kube.events import EventRecorder
from punctual.kube.ratelimiting import RateLimiter
from punctual.metrics import Metrics

logger = logging.getLogger(__name__)

Body = dict[str, Any]


# Clean-up requests of one pass in flight at once (`_clean_up`): a few, so that a
# herd's clean-up leaves the connection pool to the creates.
CLEAN_UP_AT_ONCE: Final = 4

# The message prefix of the ValidatingAdmissionPolicy in crds/fencing.punctual.dev.yaml.
FENCED = "punctual fencing"
# The API server's words when an admission policy could not be evaluated at all (its
# paramKind not resolved yet, its parameter absent under parameterNotFoundAction: Deny):
# "ValidatingAdmissionPolicy '...' denied request: failed to configure policy: failed to
# find resource referenced by paramKind: 'punctual.dev/v1, Kind=Fence'". A restarted
# kube-apiserver says this of the fence for about 20 s after it is ready, until it has
# discovered the Fence CRD again: a verdict on the server, not on the Job. Its code is
# 422 (reason Invalid), though its message says "is forbidden".
POLICY_UNCONFIGURED = "denied request: failed to configure"


def refused_for_now(error: ApiError) -> bool:
    """Whether a refused create should be tried again (the claim stays in flight) rather
    than recorded as a failed firing: the fence refused it (this replica is not yet, or
    no longer, the leader the server knows), or an admission policy could not be
    evaluated yet."""
    fenced = error.status == 403 and FENCED in error.message
    return fenced or (error.status in (403, 422) and POLICY_UNCONFIGURED in error.message)


class NotLeader(Exception):
    """This replica may not write now."""


@dataclass
class Applied:
    """What applying one Decision did (for the caller's caches, metrics and tests)."""

    stale: bool = False  # the claim got 409 Conflict: decide again from fresh state
    schedule: Body | None = None  # the schedule as written by the claim
    created: list[JobSnapshot] = field(default_factory=list)
    failed: dict[str, str] = field(default_factory=dict)  # job name -> why, for good
    # job name -> how: the tick was fired by the CronJob this schedule was migrated from
    fired_elsewhere: dict[str, str] = field(default_factory=dict)
    pending: list[str] = field(default_factory=list)  # transient failure: still in flight
    deleted: list[str] = field(default_factory=list)
    freed: list[str] = field(default_factory=list)  # our finalizer removed
    failed_pending: list[str] = field(default_factory=list)  # stuck pending: failed by us
    # Clean-up steps (a Job of history deleted, a Job's finalizer freed) not begun because
    # the schedule's next wake came first: the next pass decides them again.
    left_for_later: int = 0


def _ignore(_: object) -> None:
    pass


def schedule_path(namespace: str, name: str) -> str:
    return f"/apis/punctual.dev/v1/namespaces/{namespace}/cronschedules/{name}"


def jobs_path(namespace: str, kind: WorkloadKind = JOB) -> str:
    """Where a schedule's Jobs (or its workloadTemplate's objects) are created."""
    return kind.path(namespace)


async def put_status(api: Api, schedule: Mapping[str, Any], status: Body) -> Body:
    """PUT the status subresource, fenced by the resourceVersion the schedule was read at."""
    meta = schedule["metadata"]
    body = {
        "apiVersion": "punctual.dev/v1",
        "kind": "CronSchedule",
        "metadata": {
            "name": meta["name"],
            "namespace": meta["namespace"],
            "resourceVersion": meta["resourceVersion"],
        },
        "status": status,
    }
    return await api.replace(f"{schedule_path(meta['namespace'], meta['name'])}/status", body)


# The label the Job controller puts on a Job's pods (Kubernetes 1.27+).
JOB_NAME_LABEL: Final = "batch.kubernetes.io/job-name"


def waiting_reasons(pods: list[Body]) -> str:
    """`pods waiting: ImagePullBackOff (2), Unschedulable (1)`: why pods have not started,
    from their containers' waiting states and their PodScheduled condition."""
    reasons: dict[str, int] = {}
    for pod in pods:
        status = pod.get("status") or {}
        found = [
            (c.get("state") or {}).get("waiting", {}).get("reason")
            for c in [
                *(status.get("initContainerStatuses") or []),
                *(status.get("containerStatuses") or []),
            ]
        ]
        found += [
            c.get("reason")
            for c in status.get("conditions") or []
            if c.get("type") == "PodScheduled" and c.get("status") == "False"
        ]
        for reason in {str(r) for r in found if r} or {str(status.get("phase") or "Pending")}:
            reasons[reason] = reasons.get(reason, 0) + 1
    if not reasons:
        return "no pod was created"
    return "pods waiting: " + ", ".join(f"{r} ({n})" for r, n in sorted(reasons.items()))


# What a just-created object of another kind is known to be (its status comes later).
_just_created: Final = (JobState.ACTIVE, None, None)


def count_outcomes(
    metrics: Metrics, namespace: str, name: str, decision: Decision, applied: Applied
) -> None:
    """Count what a claim decided, once its status is written, and creates refused."""
    if decision.status is not None:  # recorded: count what the claim decided
        for reason, count in decision.skipped:
            metrics.ticks_skipped.labels(namespace, name, reason.value).inc(count)
        if decision.missed:
            metrics.ticks_missed.labels(namespace, name).inc(decision.missed)
        if decision.newly_failed:
            metrics.jobs_failed.labels(namespace, name).inc(decision.newly_failed)
        if decision.newly_dead:
            metrics.ticks_dead.labels(namespace, name).inc(decision.newly_dead)
    if applied.failed:
        metrics.create_failures.labels(namespace, name).inc(len(applied.failed))
    created = {j.name for j in applied.created}
    for job, lag in decision.lags:  # runs after upstream runs (spec.after), once created
        if job in created:
            metrics.chain_lag.observe(lag)


class Applier:
    """Applies Decisions for the leader: the claim protocol's writes, in order. Over 300
    lines on purpose: one method per write the leader makes (claim, create, adopt, delete,
    release, fail a stuck Job, a group's status), each sharing the one guard, rate limiter
    and error handling; split, every piece would need all three."""

    def __init__(
        self,
        api: Api,
        *,
        may_write: Callable[[], bool],
        events: EventRecorder,
        limiter: RateLimiter,
        clock: Clock,
        metrics: Metrics | None = None,
    ) -> None:
        self.metrics = metrics or Metrics()
        self.clock = clock
        self.api = api
        self.may_write = may_write
        self.events = events
        self.limiter = limiter

    async def _guard(self) -> None:
        await self.limiter.acquire()
        if not self.may_write():
            raise NotLeader()

    async def _call(self, request: Awaitable[Body]) -> Body:
        """Send one write within the limiter's window; tell it how the server answered (a
        429 or 5xx pauses every write, see ratelimiting). Errors are raised as they are,
        never retried. Leadership is asked again once the slot is ours: a write that
        waited for it (a full window, or a process paused by SIGSTOP) may not go out after
        the Lease lapsed."""
        async with self.limiter.slot() as sent_at:
            if not self.may_write():
                if inspect.iscoroutine(request):
                    request.close()  # never sent
                raise NotLeader()
            try:
                answer = await request
            except ApiError as error:
                self.limiter.answered(error.status, error.retry_after, sent_at=sent_at)
                raise
            self.limiter.answered(200, sent_at=sent_at)
            return answer

    async def apply(
        self,
        schedule: Mapping[str, Any],
        decision: Decision,
        *,
        claimed: Callable[[Body], None] = _ignore,
        created: Callable[[JobSnapshot], None] = _ignore,
    ) -> Applied:
        """Apply `decision` to `schedule` (as it was read): claim, replace, create, record,
        prune, report. Raises NotLeader, before a write, once this replica may not write.

        `claimed` and `created` are told of the claim as written and of each Job created
        as soon as the API server answers, before the next write: the watch's echo of a
        write often comes while the pass goes on, and is then known as ours."""
        meta = schedule["metadata"]
        namespace, name = meta["namespace"], meta["name"]
        applied = Applied(schedule=dict(schedule))

        # 1. The claim: status written with the resourceVersion we decided on.
        if decision.status is not None:
            if not await self._claim(schedule, decision, applied):
                return applied
            assert applied.schedule is not None
            claimed(applied.schedule)
        # 2. Replace: the running Jobs go before the new one comes. One that could not be
        #    deleted holds the creates back: they stay claimed, and the next pass, which
        #    sees it still running, deletes it again first (core.overlapping).
        replaced = [await self._delete(namespace, job, applied) for job in decision.replace]
        creates = decision.creates if all(replaced) else ()
        # 3. The creates.
        for create in creates:
            before = len(applied.created)
            await self._create(schedule, create, applied)
            for made in applied.created[before:]:
                created(made)
        count_outcomes(self.metrics, namespace, name, decision, applied)
        if (applied.failed or applied.fired_elsewhere) and applied.schedule is not None:
            await self._settle_failures(applied, decision.delayed_status)
        # 3b. Jobs stuck pending past spec.pendingTimeoutSeconds: failed, and said why.
        for stuck in decision.fail:
            await self._fail(namespace, stuck, applied)
        # 4. History clean-up, and 5. Jobs being deleted whose firing the written status
        #    now records let go: a few at once, and no more begun once the next wake has
        #    come (the rest are decided again by the next pass).
        applied.left_for_later = await _clean_up(
            [
                *(
                    functools.partial(self._prune, namespace, job, applied)
                    for job in decision.prune
                ),
                *(
                    functools.partial(self.free, namespace, held.name, held.uid, applied, held.kind)
                    for held in decision.free
                ),
            ],
            until=decision.next_wake,
            clock=self.clock,
        )
        # 6. Events, best effort and off the firing path.
        self._report(schedule, decision, applied)
        return applied

    async def _claim(
        self, schedule: Mapping[str, Any], decision: Decision, applied: Applied
    ) -> bool:
        """Write the claim; False when it lost (409) or the schedule is gone: stop there."""
        assert decision.status is not None
        await self._guard()
        try:
            applied.schedule = await self._call(put_status(self.api, schedule, decision.status))
        except Conflict:
            self.metrics.claim_conflicts.inc()
            applied.stale = True
            return False
        except NotFound:
            applied.stale = True  # deleted meanwhile
            return False
        return True

    async def _create(
        self, schedule: Mapping[str, Any], create: JobToCreate, applied: Applied
    ) -> None:
        """One create; its outcome lands in `applied`: created, pending or failed."""
        meta = schedule["metadata"]
        namespace, name, uid = meta["namespace"], meta["name"], meta["uid"]
        # A scheduled tick of a schedule migrated from a CronJob: did the CronJob fire it?
        cronjob = migrated_from(meta.get("annotations") or {}) if create.kind.is_job else None
        if cronjob and not create.manual and await self._held_by(meta, cronjob, create, applied):
            return
        await self._guard()
        try:
            with self.events.creating():
                created = await self._call(
                    self.api.create(jobs_path(namespace, create.kind), create.body)
                )
        except AlreadyExists:
            await self._adopt(namespace, name, uid, create, applied)
            return
        except Unavailable as error:
            applied.pending.append(create.name)
            logger.warning(
                "%s/%s: creating %s %s: %s (will retry)",
                namespace,
                name,
                create.kind.kind,
                create.name,
                error,
            )
            return
        except ApiError as error:
            if refused_for_now(error):
                # The API server's fence saw an epoch other than the Lease's: either this
                # replica lost its Lease (it will stop), or the server has not yet seen
                # our takeover; or the fence could not be evaluated yet (a restarted API
                # server). Never a failed firing: the claim stays in flight.
                applied.pending.append(create.name)
                logger.warning("%s/%s: %s", namespace, name, error.message)
                return
            applied.failed[create.name] = (
                f"the API server rejected {create.kind.kind} {create.name}: {error.message}"
            )
            return
        verdict = None if create.kind.is_job else _just_created
        applied.created.append(JobSnapshot.from_body(created, create.kind, verdict))
        self.metrics.jobs_created.labels(namespace, name).inc()
        if create.fire_at is not None:
            lag = (self.clock.now() - create.fire_at).total_seconds()
            self.metrics.firing_lag.observe(max(0.0, lag))

    async def _held_by(
        self, meta: Mapping[str, Any], cronjob: str, create: JobToCreate, applied: Applied
    ) -> bool:
        """Whether the tick must not be created now: the CronJob this schedule was
        migrated from has its Job (it fired the tick during the switch: recorded in
        `fired_elsewhere`), or that could not be read (the claim stays in flight)."""
        namespace, name = meta["namespace"], meta["name"]
        theirs = cronjob_job_name(cronjob, create.tick)
        try:
            found = await self.api.get(f"{jobs_path(namespace)}/{theirs}")
        except NotFound:
            return False
        except ApiError as error:
            applied.pending.append(create.name)
            logger.warning("%s/%s: reading %s: %s", namespace, name, theirs, error)
            return True
        owners = (found.get("metadata") or {}).get("ownerReferences") or []
        if not any(o.get("kind") == "CronJob" and o.get("name") == cronjob for o in owners):
            return False  # a Job of that name the CronJob did not create: not its firing
        applied.fired_elsewhere[create.name] = f"CronJob {cronjob} fired it as Job {theirs}"
        return True

    async def _adopt(
        self, namespace: str, name: str, uid: str, create: JobToCreate, applied: Applied
    ) -> None:
        """A Job with the name exists: ours (finishing a claim after a crash) is success,
        anyone else's is a failure for good."""
        try:
            existing = await self.api.get(f"{jobs_path(namespace, create.kind)}/{create.name}")
        except ApiError as error:
            applied.pending.append(create.name)
            logger.warning(
                "%s/%s: reading existing %s %s: %s",
                namespace,
                name,
                create.kind.kind,
                create.name,
                error,
            )
            return
        if owned_by(existing, uid):
            verdict = None if create.kind.is_job else _just_created
            applied.created.append(JobSnapshot.from_body(existing, create.kind, verdict))
        else:
            applied.failed[create.name] = (
                f"a {create.kind.kind} named {create.name} exists and is not this schedule's"
            )

    def _report(self, schedule: Mapping[str, Any], decision: Decision, applied: Applied) -> None:
        for note in decision.events:
            self.events.post(schedule, note)
        for made in applied.created:
            tick = format_time(made.tick) if made.tick else "a manual trigger"
            what = f"{made.kind.kind} {made.name}"
            self.events.post(schedule, EventNote("Normal", "Created", f"Created {what} for {tick}"))
        for why in applied.failed.values():
            self.events.post(schedule, EventNote("Warning", "FailedCreate", why))
        for create in decision.creates:
            how = applied.fired_elsewhere.get(create.name)
            if how is not None:
                message = f"Tick {format_time(create.tick)}: {how}"
                self.events.post(schedule, EventNote("Normal", "Skipped", message))
        for stuck in decision.fail:
            if stuck.name in applied.failed_pending:
                message = f"Failed Job {stuck.name}: {stuck.reason}"
                self.events.post(schedule, EventNote("Warning", "PendingTimeout", message))

    async def _settle_failures(self, applied: Applied, delayed: CronScheduleStatus | None) -> None:
        """Write the claims whose Job can never be created as settled (see `settling`):
        on the status as written, or, when the create went out on a claim made ahead
        and its status write was left for later, on what that write would have said."""
        assert applied.schedule is not None
        try:
            base = delayed if delayed is not None else parse_status(applied.schedule)
        except ValidationError as error:  # not ours to repair here: the next pass rebuilds it
            logger.warning("recording failed creates: unreadable status: %s", error)
            return
        status = dump_status(settle_failures(base, applied.failed, applied.fired_elsewhere))
        try:
            await self._guard()
            applied.schedule = await self._call(put_status(self.api, applied.schedule, status))
        except (Conflict, NotFound):
            applied.stale = True
        except ApiError as error:
            logger.warning("recording failed creates: %s", error)

    async def _delete(self, namespace: str, job: JobToDelete, applied: Applied) -> bool:
        """Delete a Job (Replace, history); one with our finalizer is freed right after,
        so it goes. Another kind's object is deleted in the foreground: it is seen
        deleting until what it made (its pods, its cluster) is gone. False when the
        delete failed (the Job may still run)."""
        await self._guard()
        try:
            await self._call(
                self.api.delete(
                    f"{jobs_path(namespace, job.kind)}/{job.name}",
                    {
                        "apiVersion": "v1",
                        "kind": "DeleteOptions",
                        "propagationPolicy": "Background" if job.kind.is_job else "Foreground",
                        "preconditions": {"uid": job.uid} if job.uid else None,
                    },
                )
            )
            applied.deleted.append(job.name)
        except (NotFound, Conflict):
            return True  # already gone, or a different Job now has the name
        except ApiError as error:
            logger.warning("deleting Job %s/%s (%s): %s", namespace, job.name, job.reason, error)
            return False
        if job.has_finalizer:
            await self.free(namespace, job.name, job.uid, applied, job.kind)
        return True

    async def _prune(self, namespace: str, job: JobToDelete, applied: Applied) -> None:
        """Delete a Job of history, and let our finalizer go at the same time: its outcome
        is recorded (clean-up deletes no other), so nothing waits for the delete first,
        and the two requests take one round trip, not two. (Another kind's object is
        deleted in the foreground, which writes it: its release, read then written, goes
        after, as with any delete.)"""
        if not job.has_finalizer or not job.kind.is_job:
            await self._delete(namespace, job, applied)
            return
        kept = dataclasses.replace(job, has_finalizer=False)
        await _all(
            self._delete(namespace, kept, applied),
            self.free(namespace, job.name, job.uid, applied, job.kind),
        )

    async def _fail(self, namespace: str, stuck: JobToFail, applied: Applied) -> None:
        """Fail a Job stuck pending (core.pending): its pods' waiting reasons and the time in
        an annotation (from then on it reads as Failed), and activeDeadlineSeconds 1 so
        that the Job controller stops it. Only that uid's Job (a patch naming another uid
        is refused)."""
        why = f"{stuck.reason}; {await self._waiting(namespace, stuck.name)}"
        await self._guard()
        patch = {
            "metadata": {
                "uid": stuck.uid,
                "annotations": {
                    ANNOTATION_PENDING_TIMEOUT: pending_timeout_note(self.clock.now(), why)
                },
            },
            "spec": {"activeDeadlineSeconds": 1},
        }
        try:
            await self._call(
                self.api.patch(
                    f"{jobs_path(namespace)}/{stuck.name}", patch, content_type=MERGE_PATCH
                )
            )
            applied.failed_pending.append(stuck.name)
        except (NotFound, Conflict, Invalid):
            pass  # gone, or another Job has the name now
        except ApiError as error:
            logger.warning("failing Job %s/%s stuck pending: %s", namespace, stuck.name, error)

    async def _waiting(self, namespace: str, job: str) -> str:
        """Why the Job's pods have not started, from the pods (best effort)."""
        try:
            pods = await self.api.get(
                f"/api/v1/namespaces/{namespace}/pods", labelSelector=f"{JOB_NAME_LABEL}={job}"
            )
        except ApiError as error:
            return f"its pods could not be read ({error.status})"
        return waiting_reasons(pods.get("items") or [])

    async def group_status(self, namespace: str, group: str, status: Body) -> bool:
        """Write who holds a ConcurrencyGroup and who waits into its status; False when it
        has no object (a mutex group) or the write failed (it is only a report)."""
        path = f"/apis/punctual.dev/v1/namespaces/{namespace}/concurrencygroups/{group}/status"
        return await self.report_status(path, status)

    async def report_status(self, path: str, status: Body) -> bool:
        """Write the status of one of the small kinds Punctual reports on (a FreezeWindow,
        a ClusterFreezeWindow, a Calendar, a ConcurrencyGroup), as every other write: only
        while this replica leads and within the rate limit. False when it does not lead,
        the object is gone or the write failed (it is only a report)."""
        try:
            await self._guard()
        except NotLeader:
            return False
        try:
            await self._call(self.api.patch(path, {"status": status}, content_type=MERGE_PATCH))
        except NotFound:
            return False
        except ApiError as error:
            logger.warning("status of %s: %s", path, error)
            return False
        return True

    async def free(
        self, namespace: str, name: str, uid: str, applied: Applied, kind: WorkloadKind = JOB
    ) -> None:
        """Remove our finalizer from a Job (only ours, only from that uid's Job)."""
        if not kind.is_job:
            await self._release_object(namespace, name, uid, applied, kind)
            return
        await self._guard()
        patch = {"metadata": {"uid": uid, "$deleteFromPrimitiveList/finalizers": [FINALIZER]}}
        try:
            await self._call(
                self.api.patch(
                    f"{jobs_path(namespace)}/{name}", patch, content_type=STRATEGIC_MERGE_PATCH
                )
            )
            applied.freed.append(name)
        except (NotFound, Conflict, Invalid):
            pass  # gone already, or another Job has the name now (its uid differs: 422)
        except ApiError as error:
            logger.warning("releasing Job %s/%s: %s", namespace, name, error)

    async def _release_object(
        self, namespace: str, name: str, uid: str, applied: Applied, kind: WorkloadKind
    ) -> None:
        """A custom resource takes no strategic merge patch: read it, and write its
        finalizers without ours under its resourceVersion (a 409 reads it again)."""
        path = f"{jobs_path(namespace, kind)}/{name}"
        for _ in range(3):
            await self._guard()
            try:
                meta = (await self.api.get(path)).get("metadata") or {}
                held = list(meta.get("finalizers") or [])
                if meta.get("uid") != uid or FINALIZER not in held:
                    return  # another object has the name now, or ours is gone already
                rest = [f for f in held if f != FINALIZER]
                patch = {
                    "metadata": {"resourceVersion": meta["resourceVersion"], "finalizers": rest}
                }
                await self._call(self.api.patch(path, patch, content_type=MERGE_PATCH))
                applied.freed.append(name)
                return
            except NotFound:
                return
            except Conflict:
                continue
            except ApiError as error:
                logger.warning("releasing %s %s/%s: %s", kind.kind, namespace, name, error)
                return


async def _clean_up(
    steps: Sequence[Callable[[], Awaitable[object]]], *, until: datetime | None, clock: Clock
) -> int:
    """Run the clean-up `steps` CLEAN_UP_AT_ONCE at a time, beginning no batch after
    the first once `until` (the schedule's next wake) has come; returns how many steps
    were not begun (`punctual_cleanup_backlog` sums them).

    A pass holds its schedule: its next tick waits for the pass to end. Clean-up one
    request after another held an every-second schedule's ticks back by seconds (a
    pass after a status write deletes and frees some ten Jobs, two requests each;
    test_random_specs saw a p99 lag of 3.7 s while the API server was busy). What is
    not begun is left for the next pass, which decides the clean-up again from the
    Jobs as they are; the first batch is always run, so clean-up keeps up however slow
    the API server is. A step's error (NotLeader) is raised once its batch ends."""
    for start in range(0, len(steps), CLEAN_UP_AT_ONCE):
        if start and until is not None and clock.now() >= until:
            return len(steps) - start
        await _all(*(step() for step in steps[start : start + CLEAN_UP_AT_ONCE]))
    return 0


async def _all(*steps: Awaitable[object]) -> None:
    """Await `steps` at once; the first error (NotLeader) is raised once all have ended."""
    for result in await asyncio.gather(*steps, return_exceptions=True):
        if isinstance(result, BaseException):
            raise result
