"""One simulated run: a seed, some hours, two replicas, random schedules, actions and faults.

Why it exists: to put everything together on one simulated clock. The model server
(tests.sim.cluster) and the replicas (tests.sim.replicas) run as tasks on `FakeTime`; so
do the Job controller and the driver that applies users' requests and faults at random
instants. The run advances time from one wake to the next (a *step*: whatever was due
then has run until every task waits again) and runs the checkers after each step;
every accepted Job create is judged at the instant it is accepted. The first broken
promise ends the run, with the seed and the trace of what led to it.

Faults stop `quiet` before the end, so that liveness can be judged on the last stretch:
every tick due there must be fired or recorded within `bound`.

What it must never do: draw randomness from anything but the run's `random.Random(seed)`
(and streams split from it), read the wall clock for anything but the speed it reports,
or touch code under operator/.
"""

from __future__ import annotations

import asyncio
import json
import logging
import random
import time as walltime
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from punctual.core.keys import ANNOTATION_RESUME, ANNOTATION_TRIGGER, LABEL_SCHEDULE_UID
from punctual.core.models import CronScheduleSpec
from punctual.core.naming import job_name
from punctual.core.planning import tick_source
from punctual.kube import following
from punctual.kube.client import ApiError, Conflict, Unavailable
from tests.sim.checking import Broken, Checkers, SpecLog
from tests.sim.cluster import LEASE, Accepted, JobController, SimApi, iso
from tests.sim.replicas import DECIDE_AHEAD, NAMESPACE, STATUS_DELAY, Replica
from tests.sim.specs import TEMPLATE, backfill_patch, edited, random_spec, trigger_patch
from tests.unit.faketime import FakeTime

SCHEDULES = f"/apis/punctual.dev/v1/namespaces/{NAMESPACE}/cronschedules"
JOBS = f"/apis/batch/v1/namespaces/{NAMESPACE}/jobs"
GROUPS = f"/apis/punctual.dev/v1/namespaces/{NAMESPACE}/concurrencygroups"
LIST_PAGE = 3  # objects a list answers per page (the operator's 100 would be one page)
ACTION_EVERY = 600.0  # mean simulated seconds between users' requests
FAULT_EVERY = 900.0  # mean simulated seconds between faults
BOUND = timedelta(minutes=3)  # liveness: a due tick is fired or recorded within this
SETTLE = timedelta(minutes=2)  # after the last fault, before liveness is judged


@dataclass
class Result:
    seed: int
    hours: float
    steps: int
    creates: int
    refused_by_fence: int
    faults: int
    actions: int
    broken: list[Broken]
    trace: list[str]
    checked: dict[str, int]
    wall_seconds: float
    simulated_hours: float  # up to the first broken promise
    caveats: list[str]  # ticks a backfill ran again, as the README's caveat allows
    status_by_non_holder: int  # status writes accepted from a replica not holding the Lease
    planted: str = ""  # the CLI settings beyond SEEDS and HOURS that replay it

    @property
    def ok(self) -> bool:
        return not self.broken

    def report(self) -> str:
        lines = [f"seed {self.seed}: BROKEN after {self.steps} steps", *map(str, self.broken)]
        lines += ["trace (newest last):", *("  " + line for line in self.trace)]
        lines.append(f"replay: python -m tests.sim SEEDS={self.seed} HOURS={self.hours:g}")
        if self.planted:
            lines[-1] += f" {self.planted}"
        return "\n".join(lines)


@dataclass
class Options:
    hours: float = 2.0
    schedules: int = 4
    replicas: int = 2
    faults: bool = True
    quiet: timedelta = timedelta(minutes=30)
    # Tests plant bugs or shape a run through these (never the code under operator/).
    fencing: bool = True
    specs: list[dict[str, Any]] | None = None  # instead of random ones
    actions: tuple[str, ...] = (
        "trigger",
        "backfill",
        "edit",
        "suspend",
        "resume",
        "delete-job",
        "foreign",
    )
    job_weights: tuple[float, float, float, float] = (0.6, 0.2, 0.05, 0.15)
    mean_run: float = 60.0
    disabled: frozenset[str] = frozenset()
    clock_skew: float = 0.0  # seconds the replicas' clocks are off the server's
    # The replicas' --claim-window; None: one of CLAIM_WINDOWS, chosen by the seed (by a
    # generator of its own, so that the rest of a seed's run is what it was before).
    claim_window: timedelta | None = None
    status_delay: timedelta = STATUS_DELAY  # the replicas' --status-delay
    decide_ahead: timedelta = DECIDE_AHEAD  # the replicas' --decide-ahead
    # Steer clear of the bugs FINDINGS.md lists (no backfills, no failed deletes, no
    # retry, no trigger asking Replace), so that a long campaign can look for others.
    avoid_known: bool = False
    before_start: Callable[[Simulation], None] | None = None


# The claim windows a campaign covers: the shortest, the default and the longest.
CLAIM_WINDOWS = (timedelta(seconds=10), timedelta(seconds=60), timedelta(seconds=600))


@dataclass
class Simulation:
    seed: int
    options: Options = field(default_factory=Options)

    def __post_init__(self) -> None:
        self.rng = random.Random(self.seed)
        self.claim_window = self.options.claim_window or random.Random(-self.seed).choice(
            CLAIM_WINDOWS
        )
        self.time = FakeTime()
        self.api = SimApi(self.time)
        self.api.fencing = self.options.fencing
        self.user = self.api.client("user")
        self.jobs = JobController(
            self.api,
            random.Random(self.rng.getrandbits(64)),
            mean_run=self.options.mean_run,
            weights=self.options.job_weights,
        )
        self.specs = SpecLog()
        self.checkers = Checkers(self.specs, disabled=set(self.options.disabled))
        self.checkers.on_broken = lambda broken: self.note(str(broken).splitlines()[0])
        self.trace: deque[str] = deque(maxlen=300)
        self.replicas: list[Replica] = []
        self.born = 0
        self.steps = 0
        self.creates = 0
        self.faults = 0
        self.actions = 0
        self.holder: tuple[str, int] | None = None
        self.seen_requests = 0
        self.seen_stalls = 0
        self.kick = asyncio.Event()
        self.api.on_create += [self.checkers.created, self._created]
        self.end = self.time.now() + timedelta(hours=self.options.hours)
        quiet = min(self.options.quiet, timedelta(hours=self.options.hours / 3))
        self.faults_end = self.end - quiet

    # -- the trace --------------------------------------------------------------------

    def note(self, what: str) -> None:
        self.trace.append(f"{self.time.now().strftime('%d %H:%M:%S.%f')[:-3]} {what}")

    def _created(self, accepted: Accepted) -> None:
        self.creates += 1
        meta = accepted.body["metadata"]
        self.note(f"{accepted.by} created Job {meta['name']} ({_firing(accepted.body)})")
        self.jobs.created(accepted)
        self.kick.set()

    # -- the run ----------------------------------------------------------------------

    async def run(self) -> Result:
        started = walltime.perf_counter()
        logger = logging.getLogger("punctual")
        level = logger.level
        logger.setLevel(logging.CRITICAL)  # the faults make it warn a lot; the trace tells
        if self.options.before_start is not None:
            self.options.before_start(self)
        group = {"metadata": {"name": "g1", "namespace": NAMESPACE}, "spec": {"maxConcurrent": 2}}
        await self.user.create(GROUPS, {"apiVersion": "punctual.dev/v1", **group})
        self.checkers.group_limits["g1"] = 2
        for index in range(self.options.schedules):
            await self._create_schedule(index)
        for _ in range(self.options.replicas):
            self._start_replica()
        helpers = [
            asyncio.ensure_future(self._run_jobs()),
            asyncio.ensure_future(self._drive()),
        ]
        page, following.LIST_PAGE = following.LIST_PAGE, LIST_PAGE  # lists in pages
        # A follower waits its retry with asyncio.sleep: on simulated time here.
        real = vars(following)["asyncio"]
        setattr(following, "asyncio", _OnSimulatedTime(self.time))  # noqa: B010
        try:
            while self.time.now() < self.end and not self.checkers.broken:
                await self.time.step()
                self.steps += 1
                self._check()
                for helper in helpers:  # a driver that died would end coverage in silence
                    if helper.done():
                        helper.result()
            if not self.checkers.broken:
                self._liveness()
        finally:
            for replica in self.replicas:
                await replica.kill()
            for task in helpers:
                task.cancel()
            await asyncio.gather(*helpers, return_exceptions=True)
            logger.setLevel(level)
            following.LIST_PAGE = page
            setattr(following, "asyncio", real)  # noqa: B010
        return Result(
            self.seed,
            self.options.hours,
            self.steps,
            self.creates,
            self.api.refused_by_fence,
            self.faults,
            self.actions,
            list(self.checkers.broken),
            list(self.trace),
            dict(self.checkers.checked),
            walltime.perf_counter() - started,
            self.time.seconds / 3600,
            list(self.checkers.caveats),
            len(self.api.status_by_non_holder),
            " ".join(
                setting
                for setting, on in [
                    ("AVOID_KNOWN=1", self.options.avoid_known),
                    (f"SKEW={self.options.clock_skew:g}", bool(self.options.clock_skew)),
                    (f"SCHEDULES={self.options.schedules}", self.options.schedules != 4),
                    (f"WINDOW={self.claim_window.total_seconds():g}", True),
                    (
                        f"AHEAD={self.options.decide_ahead.total_seconds():g}",
                        self.options.decide_ahead != DECIDE_AHEAD,
                    ),
                ]
                if on
            ),
        )

    def _check(self) -> None:
        lease = self.api.objects.get(LEASE)
        spec = (lease or {}).get("spec") or {}
        holder = (str(spec.get("holderIdentity", "")), int(spec.get("leaseTransitions", 0)))
        if holder != self.holder:
            self.note(f"Lease: held by {holder[0] or 'nobody'}, epoch {holder[1]}")
            self.holder = holder
        self.checkers.step(self.time.now(), self._schedules())
        for request in self.api.requests[self.seen_requests :]:
            if request.verb in ("delete", "patch") and request.path.startswith(JOBS):
                outcome = "refused" if request.error is not None else "accepted"
                name = request.path.rsplit("/", 1)[-1]
                self.note(f"{request.by or 'server'} {request.verb} Job {name}: {outcome}")
        self.seen_requests = len(self.api.requests)
        for by, at, seconds in self.api.stalled[self.seen_stalls :]:
            self.note(f"FAULT {by} paused {seconds:.1f} s, its Job create held (at {at:%H:%M:%S})")
        self.seen_stalls = len(self.api.stalled)

    def _schedules(self) -> list[dict[str, Any]]:
        """The schedules as the server holds them, not copied: the checkers only read."""
        prefix = f"{SCHEDULES}/"
        return [body for path, body in sorted(self.api.objects.items()) if path.startswith(prefix)]

    def _liveness(self) -> None:
        since = self.faults_end + SETTLE
        for body in self.api.items(SCHEDULES):
            uid = body["metadata"]["uid"]
            changed = [at for at, _ in self.specs.by_uid.get(uid, [])]
            start = max([since, *[at + SETTLE for at in changed]])
            # The cursor is bookkeeping once its ticks are claimed: written within the
            # status delay (--status-delay), which may be longer than BOUND.
            bound = max(BOUND, self.options.status_delay + SETTLE)
            self.checkers.liveness(self.time.now(), body, start, bound)

    # -- the parts --------------------------------------------------------------------

    def _start_replica(self) -> None:
        self.born += 1
        replica = Replica(
            self.api,
            self.time,
            f"r{self.born}",
            skew=self.options.clock_skew,
            claim_window=self.claim_window,
            status_delay=self.options.status_delay,
            decide_ahead=self.options.decide_ahead,
        )
        self.replicas.append(replica)
        replica.start()
        self.note(f"replica {replica.identity} started")

    def _steer(self, spec: dict[str, Any]) -> dict[str, Any]:
        if self.options.avoid_known:
            spec.pop("retry", None)
        return spec

    async def _create_schedule(self, index: int) -> None:
        if self.options.specs is not None:
            spec = self.options.specs[index % len(self.options.specs)]
        else:
            spec = self._steer(random_spec(self.rng, self.time.now()))
        body = {
            "apiVersion": "punctual.dev/v1",
            "kind": "CronSchedule",
            "metadata": {"name": f"s{index}", "namespace": NAMESPACE},
            "spec": spec,
        }
        created = await self.user.create(SCHEDULES, body)
        self.specs.record(created["metadata"]["uid"], self.time.now(), spec)
        self.note(f"schedule s{index}: {_short(spec)}")

    async def _run_jobs(self) -> None:
        while True:
            now = self.time.now()
            self.jobs.run_due(now)
            following = self.jobs.next_event()
            self.kick.clear()
            timeout = None if following is None else max(0.0, (following - now).total_seconds())
            await self.time.wait(self.kick, timeout=timeout)

    async def _drive(self) -> None:
        """Users' requests and faults at random instants; restarts and resumes after."""
        now = self.time.now()
        next_action = now + timedelta(seconds=self.rng.expovariate(1 / ACTION_EVERY))
        next_fault = now + timedelta(seconds=self.rng.expovariate(1 / FAULT_EVERY))
        later: list[tuple[datetime, int, Callable[[], Any]]] = []
        count = 0
        while True:
            times = [next_action, *(at for at, _, _ in later)]
            if self.options.faults and next_fault < self.faults_end:
                times.append(next_fault)
            until = min(times)
            await self.time.sleep(max(0.0, (until - self.time.now()).total_seconds()))
            now = self.time.now()
            for entry in sorted(later):
                if entry[0] <= now:
                    later.remove(entry)
                    await _maybe(entry[2]())
            if now >= next_action:
                next_action = now + timedelta(seconds=self.rng.expovariate(1 / ACTION_EVERY))
                if now < self.faults_end:
                    await self._act()
            if self.options.faults and now >= next_fault and now < self.faults_end:
                next_fault = now + timedelta(seconds=self.rng.expovariate(1 / FAULT_EVERY))
                for at, then in await self._fault():
                    count += 1
                    later.append((at, count, then))

    async def _act(self) -> None:
        """One user's request, as the CLI or kubectl makes it."""
        if not self.options.actions:
            return
        self.actions += 1
        what = self.rng.choice(self.options.actions)
        if self.options.avoid_known and what == "backfill":
            what = "trigger"
        bodies = self.api.items(SCHEDULES)
        body = self.rng.choice(bodies)
        name = body["metadata"]["name"]
        path = f"{SCHEDULES}/{name}"
        request = f"req-{self.actions}"
        try:
            if what == "trigger":
                patch = trigger_patch(self.rng, request)
                asked = json.loads(next(iter(patch["metadata"]["annotations"].values())))
                if self.options.avoid_known and asked.get("concurrencyPolicy") == "Replace":
                    asked.pop("concurrencyPolicy")  # FINDINGS.md 4
                    value = json.dumps(asked, sort_keys=True)
                    patch = {"metadata": {"annotations": {ANNOTATION_TRIGGER: value}}}
                self.checkers.overlaps[request] = asked.get("concurrencyPolicy")
                await self.user.patch(path, patch)
                overlap = asked.get("concurrencyPolicy") or "the schedule's"
                self.note(f"user: trigger {name} ({request}, overlap {overlap})")
            elif what == "backfill":
                patch = backfill_patch(self.rng, request, self.time.now())
                await self.user.patch(path, patch)
                asked = next(iter(patch["metadata"]["annotations"].values()))
                self.note(f"user: backfill {name} {asked}")
            elif what in ("edit", "suspend"):
                spec = body["spec"]
                if what == "suspend":
                    new = {**spec, "suspend": not spec.get("suspend", False)}
                else:
                    new = self._steer(edited(self.rng, spec, self.time.now()))
                await self.user.replace(path, {**body, "spec": new})
                self.specs.record(body["metadata"]["uid"], self.time.now(), new)
                self.note(f"user: {what} {name}: {_short(new)}")
            elif what == "resume":
                patch = {"metadata": {"annotations": {ANNOTATION_RESUME: request}}}
                await self.user.patch(path, patch)
                self.note(f"user: resume {name} ({request})")
            elif what == "foreign":
                await self._foreign(body)
            else:
                jobs = [
                    j
                    for j in self.api.items(JOBS)
                    if (j["metadata"].get("labels") or {}).get(LABEL_SCHEDULE_UID)
                ]
                if jobs:
                    job = self.rng.choice(jobs)["metadata"]["name"]
                    await self.user.delete(f"{JOBS}/{job}")
                    self.note(f"user: deleted Job {job}")
        except ApiError as error:  # a person's request fails as any client's may
            self.note(f"user: {what} {name} refused: {error}")

    async def _foreign(self, body: dict[str, Any]) -> None:
        """Someone creates a Job of their own under the name of the schedule's next tick."""
        spec = CronScheduleSpec.model_validate(body["spec"])
        source = tick_source(spec, uid=body["metadata"]["uid"])
        tick = source.next_tick(self.time.now())
        if tick is None:
            return
        name = job_name(body["metadata"]["name"], tick)
        job = {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": name}}
        await self.user.create(JOBS, {**job, "spec": TEMPLATE["spec"]})
        self.note(f"user: created a foreign Job {name} on the name of tick {iso(tick)}")

    async def _fault(self) -> list[tuple[datetime, Callable[[], Any]]]:
        """One fault now; what undoes it later, and when."""
        self.faults += 1
        now = self.time.now()
        kind = self.rng.choice(
            ["kill", "pause", "stall", "error", "error", "error", "cut", "gone", "lease-deleted"]
        )
        live = [r for r in self.replicas if r.identity not in self.api.cut]
        leader = next((r for r in live if r.leads()), None)
        if kind == "kill" and len(live) > 1:
            victim = leader or self.rng.choice(live)
            await victim.kill()
            self.note(f"FAULT kill -9 {victim.identity}")
            back = now + timedelta(seconds=self.rng.uniform(5, 60))
            return [(back, self._start_replica)]
        if kind == "pause" and live:
            victim = leader or self.rng.choice(live)
            self.api.pause(victim.identity)
            seconds = self.rng.uniform(12, 45)
            self.note(f"FAULT pause {victim.identity} for {seconds:.1f} s")

            def resume() -> None:
                self.api.resume(victim.identity)
                self.note(f"resume {victim.identity}")

            return [(now + timedelta(seconds=seconds), resume)]
        if kind == "stall":
            seconds = self.rng.uniform(12, 45)
            self.api.stall_next("create", JOBS, seconds)
            self.note(f"FAULT the next Job create's sender pauses for {seconds:.1f} s")
            return []
        if kind == "error":
            verb, prefix, error = self.rng.choice(_ERRORS)
            if self.options.avoid_known and verb == "delete":
                verb, prefix, error = _ERRORS[0]
            for _ in range(self.rng.randrange(1, 4)):
                self.api.fail(verb, prefix, error)
            self.note(f"FAULT next {verb} {prefix}: {error.status}")
            return []
        if kind in ("cut", "gone"):
            prefix = self.rng.choice([SCHEDULES, JOBS])
            if kind == "cut":
                self.api.close_watches(prefix)
            else:
                gone = {"type": "ERROR", "object": {"code": 410, "message": "too old"}}
                self.api.inject(gone, prefix)
            self.note(f"FAULT watches of {prefix}: {kind}")
            return []
        if kind == "lease-deleted" and LEASE in self.api.objects:
            self.api.remove(LEASE)
            self.note("FAULT Lease deleted")
        return []


_ERRORS: list[tuple[str, str, ApiError]] = [
    ("create", JOBS, Unavailable(500, "InternalError", "etcdserver: request timed out")),
    ("create", JOBS, Unavailable(429, "TooManyRequests", "slow down", retry_after=1)),
    ("replace", f"{SCHEDULES}/", Conflict(409, "Conflict", "the object has been modified")),
    ("replace", f"{SCHEDULES}/", Unavailable(500, "InternalError", "timeout")),
    ("delete", f"{JOBS}/", Unavailable(500, "InternalError", "timeout")),
    ("patch", f"{JOBS}/", Unavailable(503, "ServiceUnavailable", "unavailable")),
    ("get", LEASE, Unavailable(500, "InternalError", "timeout")),
    ("replace", LEASE, Unavailable(500, "InternalError", "timeout")),
    ("get", f"{SCHEDULES}/", Unavailable(500, "InternalError", "timeout")),
]


class _OnSimulatedTime:
    """asyncio, but its `sleep` waits on simulated time (for kube.following's retry)."""

    def __init__(self, time: FakeTime) -> None:
        self._time = time

    def __getattr__(self, name: str) -> Any:
        return getattr(asyncio, name)

    async def sleep(self, seconds: float) -> None:
        await self._time.sleep(seconds)


async def _maybe(value: Any) -> None:
    if asyncio.iscoroutine(value):
        await value


def _firing(body: dict[str, Any]) -> str:
    annotations = (body.get("metadata") or {}).get("annotations") or {}
    tick = annotations.get("punctual.dev/tick", "")
    attempt = annotations.get("punctual.dev/attempt")
    kind = annotations.get("punctual.dev/firing", "?")
    return f"{kind} tick {tick}" + (f" attempt {attempt}" if attempt else "")


def _short(spec: dict[str, Any]) -> str:
    keep = {k: v for k, v in spec.items() if k != "jobTemplate"}
    return ", ".join(f"{k}={v}" for k, v in keep.items())


def simulate(seed: int, options: Options | None = None) -> Result:
    """Run one seed to its end (or its first broken promise), in a fresh event loop."""
    return asyncio.run(Simulation(seed, options or Options()).run())


__all__ = ["Options", "Result", "Simulation", "iso", "simulate"]
