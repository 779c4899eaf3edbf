"""The model cluster: the fake API server with the fence, pauses and a Job controller.

Why it exists: tests/unit/fakeapi.py answers as the API server does, but decides
nothing the real one does not. A simulated cluster needs a little more of the real one:
the fencing ValidatingAdmissionPolicy (crds/fencing.punctual.dev.yaml: a Job whose
leader and epoch annotations are not the Fence's is refused, 403 "punctual fencing"),
`creationTimestamp` by the server's clock, `metadata.generation` that moves with the
spec, a replica whose requests are held while it is paused (a SIGSTOP between
"I lead" and the request arriving), a Job controller that finishes Jobs (each
succeeds, fails, stays pending or runs long, by the seed), and the TTL controller that
deletes the finished Jobs of a template with ttlSecondsAfterFinished.

`SimApi` subclasses `FakeApi` (the unit tests' server is left as it is); every accepted
Job create is told to `on_create` at the instant it is accepted, with the Lease as the
server holds it then, so the checkers judge it against the state of that instant.

What it must never do: decide anything for the operator, read the wall clock, or wait
real time (a paused replica waits on simulated time).
"""

from __future__ import annotations

import asyncio
import copy
import random
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from punctual.core.keys import (
    ANNOTATION_EPOCH,
    ANNOTATION_LEADER,
    ANNOTATION_PENDING_TIMEOUT,
    LABEL_SCHEDULE_UID,
)
from punctual.kube.applying import FENCED
from punctual.kube.client import ApiError, Body
from punctual.kube.fencing import fence_path
from tests.unit.fakeapi import FakeApi, Where
from tests.unit.faketime import FakeTime

LEASE_NAMESPACE = "punctual"
LEASE_NAME = "punctual-leader"
FENCE_NAME = "punctual"
LEASE = f"/apis/coordination.k8s.io/v1/namespaces/{LEASE_NAMESPACE}/leases/{LEASE_NAME}"
FENCE = f"{fence_path(LEASE_NAMESPACE)}/{FENCE_NAME}"


DISCOVERY = "/apis/punctual.dev/v1"
SERVED = ["cronschedules", "fences", "concurrencygroups"]


def iso(instant: datetime) -> str:
    """RFC 3339 UTC, as the API server writes times (microseconds when there are)."""
    text = instant.strftime("%Y-%m-%dT%H:%M:%S")
    if instant.microsecond:
        text += f".{instant.microsecond:06d}"
    return text + "Z"


@dataclass(frozen=True)
class Accepted:
    """A Job create the server accepted, with what the server held at that instant."""

    at: datetime  # the server's clock
    by: str  # the replica's client
    body: Body  # as stored
    lease: Body | None  # the Lease's spec at that instant (None: no Lease)
    siblings: list[Body]  # the schedule's other Jobs at that instant
    jobs: list[Body]  # every Punctual Job at that instant (the new one aside)
    schedule: Body | None  # the schedule at that instant


class SimApi(FakeApi):
    """FakeApi plus the fence, creationTimestamp, generation, pauses and a create hook."""

    def __init__(self, time: FakeTime) -> None:
        super().__init__(time)
        self.fencing = True  # the admission policy is bound (off: show what it prevents)
        self.paused: dict[str, asyncio.Event] = {}  # client -> set when it resumes
        self.on_create: list[Callable[[Accepted], None]] = []
        self.refused_by_fence = 0
        self._by = ""  # the client whose request is being served
        self.stalls: list[tuple[str | None, str, str, float]] = []
        # Status writes accepted from a client that did not hold the Lease then: fenced by
        # their resourceVersion only (README, Fencing), counted, not a broken promise.
        self.status_by_non_holder: list[tuple[str, datetime, str]] = []
        self.stalled: list[tuple[str, datetime, float]] = []  # who, when, how long
        self._resumes: set[asyncio.Future[None]] = set()

    # -- pauses -----------------------------------------------------------------------

    def pause(self, by: str) -> None:
        self.paused.setdefault(by, asyncio.Event())

    def stall_next(self, verb: str, prefix: str, seconds: float, by: str | None = None) -> None:
        """Pause the client that sends the next `verb` request on `prefix` (from `by`, or
        anyone) for `seconds`, that request held with it: a SIGSTOP between the check
        "I still lead" and the request reaching the server."""
        self.stalls.append((by, verb, prefix, seconds))

    async def _resume_after(self, by: str, seconds: float) -> None:
        await self.time.sleep(seconds)
        self.resume(by)

    def resume(self, by: str) -> None:
        event = self.paused.pop(by, None)
        if event is not None:
            event.set()

    async def _serve(
        self, by: str, verb: str, path: str, params: dict[str, str], body: Any
    ) -> Body:
        for stall in self.stalls:
            if stall[0] in (None, by) and verb == stall[1] and path.startswith(stall[2]):
                self.stalls.remove(stall)
                self.pause(by)
                self.stalled.append((by, self.time.now(), stall[3]))
                self._resumes.add(asyncio.ensure_future(self._resume_after(by, stall[3])))
                break
        held = None if by in self.cut else self.paused.get(by)  # a dead one waits for nobody
        if held is not None:  # sent before the pause, it arrives after it
            await self.time.wait(held, timeout=None)
        # With no latency FakeApi serves without awaiting before `_do`: who asks is known.
        assert not self.latency, "the simulator's server answers at once"
        self._by = by
        return await super()._serve(by, verb, path, params, body)

    def delete_now(self, path: str) -> None:
        """Delete the object at `path` as a controller of the server's would (the TTL
        controller): finalizers kept, no replica's request."""
        self._do("delete", path, {}, None)

    # -- what the real server does besides ---------------------------------------------

    def _do(self, verb: str, path: str, params: dict[str, str], body: Any) -> Body:
        if verb == "get" and path.rstrip("/") == DISCOVERY:  # the group's resources
            return {"resources": [{"name": name} for name in SERVED]}
        return super()._do(verb, path, params, body)

    def _create(self, where: Where, body: Body) -> Body:
        body = copy.deepcopy(body)
        meta = body.setdefault("metadata", {})
        meta["creationTimestamp"] = iso(self.time.now())
        meta.setdefault("generation", 1)
        labels = meta.get("labels") or {}
        punctual_job = where.resource == "jobs" and LABEL_SCHEDULE_UID in labels
        if punctual_job and self.fencing:
            self._admit(meta)
        every = self._jobs_of(None) if punctual_job else []
        uid = labels.get(LABEL_SCHEDULE_UID)
        siblings = [j for j in every if j["metadata"]["labels"][LABEL_SCHEDULE_UID] == uid]
        stored = super()._create(where, body)
        if punctual_job:
            lease = self.objects.get(LEASE)
            accepted = Accepted(
                self.time.now(),
                self._by,
                copy.deepcopy(stored),
                None if lease is None else copy.deepcopy(lease.get("spec") or {}),
                siblings,
                every,
                self._schedule_of(labels.get(LABEL_SCHEDULE_UID)),
            )
            for tell in self.on_create:
                tell(accepted)
        return stored

    def _admit(self, meta: Body) -> None:
        """crds/fencing.punctual.dev.yaml, unsharded: leader and epoch must be the Fence's."""
        annotations = meta.get("annotations") or {}
        spec = (self.objects.get(FENCE) or {}).get("spec") or {}
        holder, epoch = spec.get("holder", ""), str(spec.get("epoch", ""))
        leader, stamped = annotations.get(ANNOTATION_LEADER), annotations.get(ANNOTATION_EPOCH)
        if holder and leader == holder and stamped == epoch:
            return
        self.refused_by_fence += 1
        raise ApiError(
            403,
            "Forbidden",
            f"{FENCED}: Job from a stale leader ({leader} epoch {stamped}); "
            f"the fence is at {holder or 'no leader for it'} epoch {epoch}",
        )

    def _jobs_of(self, uid: str | None) -> list[Body]:
        """The Jobs of the schedule `uid` (None: of every schedule), as stored."""
        jobs = []
        for path, body in sorted(self.objects.items()):
            owner = ((body.get("metadata") or {}).get("labels") or {}).get(LABEL_SCHEDULE_UID)
            if "/jobs/" in path and owner is not None and uid in (None, owner):
                jobs.append(copy.deepcopy(body))
        return jobs

    def _schedule_of(self, uid: str | None) -> Body | None:
        for path, body in self.objects.items():
            if "/cronschedules/" in path and body["metadata"].get("uid") == uid:
                return copy.deepcopy(body)
        return None

    def _replace(self, where: Where, body: Body) -> Body:
        if where.resource == "cronschedules" and where.subresource == "status":
            holder = ((self.objects.get(LEASE) or {}).get("spec") or {}).get("holderIdentity")
            answer = super()._replace(where, body)
            if self._by != holder:  # accepted: its resourceVersion was the latest
                self.status_by_non_holder.append((self._by, self.time.now(), where.name or ""))
            return answer
        if where.resource == "cronschedules" and where.subresource is None:
            current = self.objects.get(where.object_path)
            if current is not None:
                body = copy.deepcopy(body)
                meta = body.setdefault("metadata", {})
                generation = int(current["metadata"].get("generation", 1))
                changed = body.get("spec") != current.get("spec")
                meta["generation"] = generation + 1 if changed else generation
                meta["creationTimestamp"] = current["metadata"].get("creationTimestamp")
                body["status"] = copy.deepcopy(current.get("status"))
        return super()._replace(where, body)


def finished(job: Body) -> bool:
    """Whether a Job's run is over: Complete or Failed, or failed by Punctual for
    pendingTimeoutSeconds (the annotation it writes), or being deleted (its pods go)."""
    meta = job.get("metadata") or {}
    if meta.get("deletionTimestamp"):
        return True
    if (meta.get("annotations") or {}).get(ANNOTATION_PENDING_TIMEOUT):
        return True
    for cond in (job.get("status") or {}).get("conditions") or []:
        if cond.get("type") in ("Complete", "Failed") and cond.get("status") == "True":
            return True
    return False


@dataclass
class Fate:
    """What the model Job controller does with one Job."""

    kind: str  # succeed, fail, pending, long
    start: datetime  # its pod starts (pending: never)
    end: datetime  # it finishes (pending: never)
    started: bool = False


@dataclass
class JobController:
    """Gives each Job created a fate drawn from the seed, and writes its status when due."""

    api: SimApi
    rng: random.Random
    mean_run: float = 60.0  # seconds a typical run takes
    fates: dict[str, Fate] = field(default_factory=dict)  # by object path
    weights: tuple[float, float, float, float] = (0.6, 0.2, 0.05, 0.15)
    # The TTL-after-finished controller's: when each finished Job with
    # spec.ttlSecondsAfterFinished is deleted (by the server, not by a replica).
    expiring: dict[str, datetime] = field(default_factory=dict)

    def created(self, accepted: Accepted) -> None:
        meta = accepted.body["metadata"]
        path = f"/apis/batch/v1/namespaces/{meta['namespace']}/jobs/{meta['name']}"
        kind = self.rng.choices(["succeed", "fail", "pending", "long"], self.weights)[0]
        start = accepted.at + timedelta(seconds=self.rng.uniform(0.5, 5))
        run = self.rng.expovariate(1 / self.mean_run)
        if kind == "long":
            run = self.rng.uniform(10, 40) * self.mean_run
        never = datetime.max.replace(tzinfo=accepted.at.tzinfo)
        if kind == "pending":
            start = end = never
        else:
            end = start + timedelta(seconds=run)
        self.fates[path] = Fate(kind, start, end)

    def next_event(self) -> datetime | None:
        times = [f.start for f in self.fates.values() if not f.started]
        times += [f.end for f in self.fates.values() if f.started]
        times += list(self.expiring.values())
        return min(times, default=None)

    def run_due(self, now: datetime) -> None:
        """Write the status of every Job whose pod started or whose run ended by `now`;
        delete each whose ttlSecondsAfterFinished has passed, as the TTL controller does
        (a finalizer keeps it, deleting, until its holder lets go)."""
        for path, at in sorted(self.expiring.items()):
            if at <= now:
                del self.expiring[path]
                job = self.api.objects.get(path)
                if job is not None and not job["metadata"].get("deletionTimestamp"):
                    self.api.delete_now(path)
        for path, fate in sorted(self.fates.items()):
            job = self.api.objects.get(path)
            if job is None:
                del self.fates[path]
                continue
            if finished(job):  # failed by Punctual, or being deleted
                del self.fates[path]
                continue
            status: dict[str, Any] | None = None
            if not fate.started and fate.start <= now:
                fate.started = True
                status = {"startTime": iso(fate.start), "active": 1, "ready": 1}
            if fate.started and fate.end <= now:
                when = iso(fate.end)
                ok = fate.kind in ("succeed", "long")
                condition = {"type": "Complete" if ok else "Failed", "status": "True"}
                condition["lastTransitionTime"] = when
                status = {
                    "startTime": iso(fate.start),
                    "conditions": [condition],
                    "succeeded" if ok else "failed": 1,
                }
                if ok:
                    status["completionTime"] = when
                del self.fates[path]
                ttl = (job.get("spec") or {}).get("ttlSecondsAfterFinished")
                if isinstance(ttl, int):
                    self.expiring[path] = fate.end + timedelta(seconds=ttl)
            if status is not None:
                body = copy.deepcopy(job)
                body["status"] = status
                body["metadata"].pop("resourceVersion", None)
                self.api.put(path, body)
