"""The README's promises as checkers, run on every accepted create and after every step.

Why it exists: a simulation is only as good as what it looks for. Each checker here is
one promise, named by the README sentence it checks (`PROMISES`), and judges what the
model API server accepted, at the instant it accepted it (a create sees the Lease and the
schedule's Jobs of that instant), or the server's objects after a step. None of them
reads the operator's memory: the server is the ground truth, as the audit log is for the
e2e suites.

Where a checker needs a schedule's ticks (liveness), it asks `core.planning.tick_source`
(the schedule math is checked against a brute-force reference in tests/unit); it takes
nothing else from the code under test.

What it must never do: change the server, or pass a run it has not checked (a checker
that cannot judge says so in its count, not in silence).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from punctual.core.keys import (
    ANNOTATION_ATTEMPT,
    ANNOTATION_EPOCH,
    ANNOTATION_FIRING,
    ANNOTATION_LEADER,
    ANNOTATION_TICK,
    ANNOTATION_TRIGGER,
    LABEL_SCHEDULE_UID,
)
from punctual.core.models import CronScheduleSpec
from punctual.core.planning import tick_source
from punctual.core.schedules import ScheduleError
from punctual.core.times import maybe_time
from tests.sim.cluster import Accepted, finished

# Each checker and the README sentence it checks.
PROMISES: dict[str, str] = {
    "one-object-per-tick": (
        "Punctual creates exactly one batch/v1 Job for every tick of its schedule, "
        "and never two, whatever happens to leaders, nodes, clocks and the API server."
    ),
    "never-early": (
        "ticks are fired at the earliest instant the server's clock can have reached "
        "them, never before."
    ),
    "max-concurrent": (
        "`maxConcurrent` | at most this many runs at once (1-1000) [...] "
        "Unset: `Allow` unbounded, the other policies one at a time"
    ),
    "group-limit": (
        "`concurrencyGroup` | the schedules of a namespace naming the same group run at most "
        "one run among them at a time (a mutex), or at most the `spec.maxConcurrent` of the "
        "namespace's `ConcurrencyGroup` of that name (a semaphore)"
    ),
    "max-attempts": (
        "`retry` [...] the tick runs again after the delay [...] up to N runs in all, "
        "each under its own Job name"
    ),
    "fenced": (
        "at most once, fenced by a resourceVersion precondition, a Job name derived from "
        "the tick, and an admission policy that refuses a stale leader's Job"
    ),
    "cursor-forward": (
        "Status: `lastScheduledTime` (the cursor: the newest tick decided) "
        "[an edit moves it to now; nothing moves it back]"
    ),
    "trigger-once": (
        "(setting the annotation `punctual.dev/trigger` to a new value) fires once per request"
    ),
    "liveness": (
        "at least once, with in-flight claims finished by the next leader; "
        "missed ticks are counted, not walked, and every one is recorded (status, Event, metric)"
    ),
}

# A claim written under one spec may be created after an edit (a claim being recovered is
# created whatever the policy): a create is judged by the most permissive spec in force
# within this long before it.
SPEC_GRACE = timedelta(seconds=120)


@dataclass(frozen=True)
class Broken:
    """A promise broken: which, the README sentence, and what happened."""

    promise: str
    detail: str
    at: datetime

    def __str__(self) -> str:
        head = f"BROKEN {self.promise} at {self.at.isoformat()}: {self.detail}"
        return f"{head}\n  README: {PROMISES[self.promise]}"


@dataclass
class SpecLog:
    """Each schedule's spec over time (uid -> [(since, spec)]), kept by the simulator."""

    by_uid: dict[str, list[tuple[datetime, dict[str, Any]]]] = field(default_factory=dict)

    def record(self, uid: str, at: datetime, spec: dict[str, Any]) -> None:
        self.by_uid.setdefault(uid, []).append((at, json.loads(json.dumps(spec))))

    def in_force(
        self, uid: str, at: datetime, grace: timedelta = SPEC_GRACE
    ) -> list[dict[str, Any]]:
        """Every spec in force at some instant of [at - grace, at]."""
        log = self.by_uid.get(uid, [])
        specs = []
        for index, (since, spec) in enumerate(log):
            until = log[index + 1][0] if index + 1 < len(log) else None
            if since <= at and (until is None or until >= at - grace):
                specs.append(spec)
        return specs


def run_limit(spec: dict[str, Any]) -> int | None:
    """The most unfinished runs a spec allows (None: unbounded)."""
    if spec.get("maxConcurrent") is not None:
        return int(spec["maxConcurrent"])
    if spec.get("concurrencyPolicy", "Allow") == "Allow":
        return None
    return 1


def _annotations(body: dict[str, Any]) -> dict[str, str]:
    return dict((body.get("metadata") or {}).get("annotations") or {})


def _in_status(accepted: Accepted, tick: datetime | None) -> bool:
    """Whether the schedule's status names `tick` (recentFirings, inFlight) right now."""
    status = (accepted.schedule or {}).get("status") or {}
    entries = [*(status.get("recentFirings") or []), *(status.get("inFlight") or [])]
    return any(maybe_time(e.get("tick")) == tick for e in entries if not e.get("backfill"))


@dataclass
class Checkers:
    """Every promise, judged as the run goes; `broken` holds what failed."""

    specs: SpecLog
    broken: list[Broken] = field(default_factory=list)
    checked: dict[str, int] = field(default_factory=lambda: dict.fromkeys(PROMISES, 0))
    names: set[str] = field(default_factory=set)
    ticks: dict[tuple[str, str, int], str] = field(default_factory=dict)  # -> name
    attempts: dict[tuple[str, str], list[int]] = field(default_factory=dict)
    triggers: set[tuple[str, str]] = field(default_factory=set)
    cursors: dict[str, datetime] = field(default_factory=dict)
    # Every (uid, tick) seen recorded in status (recentFirings, buffered, retrying) or fired.
    recorded: dict[str, set[datetime]] = field(default_factory=dict)
    # Backfill re-runs of ticks the README's caveat allows (see `created`).
    caveats: list[str] = field(default_factory=list)
    # Each manual trigger request's own concurrencyPolicy, as the user asked it (a Job
    # carries only the request's id).
    overlaps: dict[str, str | None] = field(default_factory=dict)
    # Each ConcurrencyGroup's maxConcurrent (a group without one is a mutex).
    group_limits: dict[str, int] = field(default_factory=dict)
    # Planted bugs of the tests switch a checker off to show another catches it.
    disabled: set[str] = field(default_factory=set)
    # Told of every broken promise as it is found (the trace).
    on_broken: Callable[[Broken], None] = lambda broken: None

    def _fail(self, promise: str, at: datetime, detail: str) -> None:
        if promise in self.disabled:
            return
        broken = Broken(promise, detail, at)
        self.broken.append(broken)
        self.on_broken(broken)

    # -- at the instant a create is accepted -------------------------------------------

    def created(self, accepted: Accepted) -> None:
        body, at = accepted.body, accepted.at
        meta = body["metadata"]
        name = meta["name"]
        uid = meta["labels"][LABEL_SCHEDULE_UID]
        annotations = _annotations(body)
        firing = annotations.get(ANNOTATION_FIRING, "scheduled")
        tick = maybe_time(annotations.get(ANNOTATION_TICK))
        attempt = int(annotations.get(ANNOTATION_ATTEMPT) or 1)
        self.recorded.setdefault(uid, set()).update([tick] if tick else [])

        # Never two objects for one name, tick or attempt, or for one trigger request.
        self.checked["one-object-per-tick"] += 1
        if name in self.names and not (firing == "backfill" and not _in_status(accepted, tick)):
            self._fail("one-object-per-tick", at, f"{name} created a second time")
        self.names.add(name)
        if firing != "manual" and tick is not None:
            key = (uid, tick.isoformat(), attempt)
            if key in self.ticks and firing == "backfill" and not _in_status(accepted, tick):
                # README, Backfill: "One caveat: a scheduled tick whose Job was deleted by
                # the history limits and is no longer in `recentFirings` cannot be told
                # from one that never ran". Counted, not a broken promise.
                self.caveats.append(f"{at.isoformat()} {name}: backfill ran tick again")
            elif key in self.ticks:
                self._fail(
                    "one-object-per-tick",
                    at,
                    f"tick {tick.isoformat()} attempt {attempt} of "
                    f"{meta['labels'].get('punctual.dev/schedule')} "
                    f"has two objects: {self.ticks[key]} and {name}",
                )
            self.ticks[key] = name
        if firing == "manual":
            self.checked["trigger-once"] += 1
            request = annotations.get(ANNOTATION_TRIGGER, "")
            if (uid, request) in self.triggers:
                self._fail("trigger-once", at, f"trigger {request!r} fired a second Job {name}")
            self.triggers.add((uid, request))

        # Never a create before its tick, by the server's clock (scheduled ticks: a
        # backfill's and a trigger's are in the past or now by construction).
        if firing == "scheduled" and tick is not None:
            self.checked["never-early"] += 1
            if at < tick:
                self._fail(
                    "never-early",
                    at,
                    f"{name} created at {at.isoformat()}, {(tick - at).total_seconds():.3f} s "
                    f"before its tick {tick.isoformat()}",
                )

        # The fence: the Job's leader and epoch are the Lease's holder and transitions,
        # and the client that sent it is that holder.
        self.checked["fenced"] += 1
        lease = accepted.lease or {}
        holder, epoch = lease.get("holderIdentity"), lease.get("leaseTransitions")
        stamped = (annotations.get(ANNOTATION_LEADER), annotations.get(ANNOTATION_EPOCH))
        if stamped != (holder, str(epoch)) or accepted.by != holder:
            self._fail(
                "fenced",
                at,
                f"{name} accepted from {accepted.by} stamped {stamped[0]} epoch {stamped[1]} "
                f"while the Lease is held by {holder} epoch {epoch}",
            )

        specs = self.specs.in_force(uid, at) or [{}]
        # At most maxAttempts runs of a tick, each after its previous attempt failed.
        if firing != "manual" and tick is not None:
            self.checked["max-attempts"] += 1
            tries = self.attempts.setdefault((uid, tick.isoformat()), [])
            if firing != "backfill" or _in_status(accepted, tick) or attempt not in tries:
                tries.append(attempt)
            most = max(int((s.get("retry") or {}).get("maxAttempts", 1)) for s in specs)
            if attempt > most or len(tries) > most:
                self._fail(
                    "max-attempts",
                    at,
                    f"{name}: attempt {attempt} of tick {tick.isoformat()} "
                    f"(attempts so far {tries}, maxAttempts {most})",
                )
            if attempt > 1:
                before = [
                    j
                    for j in accepted.siblings
                    if _annotations(j).get(ANNOTATION_TICK) == annotations.get(ANNOTATION_TICK)
                    and int(_annotations(j).get(ANNOTATION_ATTEMPT) or 1) == attempt - 1
                ]
                if before and not finished(before[0]):
                    self._fail(
                        "max-attempts",
                        at,
                        f"{name}: attempt {attempt} while attempt {attempt - 1} still runs",
                    )

        self._group_limit(accepted, uid, specs)

        # Never more unfinished runs than maxConcurrent (Forbid, Replace, the buffers: 1).
        # A trigger's and a backfill's own overlap choice: without maxConcurrent, a trigger
        # asking Allow runs beside the others (core/overlapping: "the limit still holds" is
        # maxConcurrent's), and a backfill runs "at most 5 Jobs a second" (README,
        # Backfill): their runs are not counted against the policy's one at a time. With
        # maxConcurrent every run counts.
        self.checked["max-concurrent"] += 1
        # Judged under each spec in force; broken only if every one of them forbids it.
        over = [self._runs_over(accepted, spec) for spec in specs]
        verdicts = [verdict for verdict in over if verdict is not None]
        if len(verdicts) < len(over):
            return
        limit, running = min(verdicts, key=lambda verdict: len(verdict[1]) - verdict[0])
        if len(running) > limit:
            names = ", ".join(
                f"{j['metadata']['name']}({_annotations(j).get(ANNOTATION_FIRING)})"
                for j in running
            )
            self._fail(
                "max-concurrent",
                at,
                f"{name} ({firing}) makes {len(running)} unfinished runs, "
                f"the limit is {limit}: {names}",
            )

    def _runs_over(
        self, accepted: Accepted, spec: dict[str, Any]
    ) -> tuple[int, list[dict[str, Any]]] | None:
        """Under `spec`: None if the create keeps its limit, else the limit and the runs."""
        limit = run_limit(spec)
        if limit is None:
            return None
        running = [j for j in [*accepted.siblings, accepted.body] if not finished(j)]
        if spec.get("maxConcurrent") is None:  # runs a trigger or backfill asked to overlap
            running = [
                j
                for j in running
                if self.overlaps.get(_annotations(j).get(ANNOTATION_TRIGGER, "")) != "Allow"
                and _annotations(j).get(ANNOTATION_FIRING) != "backfill"
            ]
            if accepted.body not in running:  # this create is one of those: not judged
                return None
        return None if len(running) <= limit else (limit, running)

    def _group_limit(self, accepted: Accepted, uid: str, specs: list[dict[str, Any]]) -> None:
        """Never more unfinished runs among a group's members than its limit. A schedule
        that was outside the group within SPEC_GRACE is not judged (its claim may predate
        the edit); the members are the schedules whose spec names the group now."""
        groups = {s.get("concurrencyGroup") for s in specs}
        if len(groups) != 1 or None in groups:
            return
        group = str(groups.pop())
        self.checked["group-limit"] += 1
        at = accepted.at
        members = {
            other
            for other in self.specs.by_uid
            if (self.specs.in_force(other, at, timedelta(0)) or [{}])[-1].get("concurrencyGroup")
            == group
        } | {uid}
        body = accepted.body
        running = [
            j
            for j in [*accepted.jobs, body]
            if j["metadata"]["labels"][LABEL_SCHEDULE_UID] in members
            and not finished(j)
            and self.overlaps.get(_annotations(j).get(ANNOTATION_TRIGGER, "")) != "Allow"
        ]
        limit = self.group_limits.get(group, 1)
        if len(running) > limit:
            names = ", ".join(
                f"{j['metadata']['name']}({_annotations(j).get(ANNOTATION_FIRING)})"
                for j in running
            )
            self._fail(
                "group-limit",
                at,
                f"{body['metadata']['name']} makes {len(running)} unfinished runs in group "
                f"{group}, its limit is {limit}: {names}",
            )

    # -- after every step -------------------------------------------------------------

    def step(self, at: datetime, schedules: list[dict[str, Any]]) -> None:
        for body in schedules:
            uid = body["metadata"]["uid"]
            status = body.get("status") or {}
            seen = self.recorded.setdefault(uid, set())
            for entry in [
                *(status.get("recentFirings") or []),
                *(status.get("buffered") or []),
                *(status.get("retrying") or []),
                *(status.get("inFlight") or []),
            ]:
                tick = maybe_time(entry.get("tick"))
                if tick is not None:
                    seen.add(tick)
            cursor = maybe_time(status.get("lastScheduledTime"))
            if cursor is None:
                continue
            self.checked["cursor-forward"] += 1
            before = self.cursors.get(uid)
            if before is not None and cursor < before:
                self._fail(
                    "cursor-forward",
                    at,
                    f"{body['metadata']['name']}: lastScheduledTime went back from "
                    f"{before.isoformat()} to {cursor.isoformat()}",
                )
            self.cursors[uid] = cursor

    # -- at the end -------------------------------------------------------------------

    def liveness(
        self, at: datetime, body: dict[str, Any], since: datetime, bound: timedelta
    ) -> None:
        """Every tick due in [since, at - bound] is recorded: fired, missed, skipped,
        frozen, buffered or retrying (seen in status or as a Job), and the cursor passed it."""
        spec_body = body.get("spec") or {}
        if spec_body.get("suspend") or spec_body.get("maxRuns"):
            return  # suspended: nothing is due; maxRuns: may have ended (not judged)
        conditions = (body.get("status") or {}).get("conditions") or []
        if any(c.get("type") == "Paused" and c.get("status") == "True" for c in conditions):
            return  # paused by pauseOnFailure: "the cursor waits, as under suspend"
        until = maybe_time(spec_body.get("suspendUntil"))
        if until is not None:
            since = max(since, until + bound)
        try:
            spec = CronScheduleSpec.model_validate(spec_body)
            source = tick_source(spec, uid=body["metadata"]["uid"])
        except (ValueError, ScheduleError):
            return
        seen = self.recorded.get(body["metadata"]["uid"], set())
        cursor = maybe_time((body.get("status") or {}).get("lastScheduledTime"))
        tick = source.next_tick(since)
        while tick is not None and tick <= at - bound:
            self.checked["liveness"] += 1
            if tick not in seen:
                self._fail(
                    "liveness",
                    at,
                    f"{body['metadata']['name']}: tick {tick.isoformat()} due for "
                    f"{(at - tick).total_seconds():.0f} s, neither fired nor recorded",
                )
                return
            if cursor is None or cursor < tick:
                self._fail(
                    "liveness",
                    at,
                    f"{body['metadata']['name']}: cursor {cursor} behind tick {tick.isoformat()}",
                )
                return
            tick = source.next_tick(tick)
