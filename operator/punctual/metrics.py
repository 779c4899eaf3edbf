"""Prometheus metrics for every decision Punctual makes, and the probe endpoints.

Why it exists: an operator that promises one Job per tick must show, per schedule,
whether it keeps the promise: how late firings are (tick to Job created, on the API
server's clock), how many ticks were skipped and why, missed, failed; whether this
replica leads and with which epoch; how far this node's clock is from the API
server's. One HTTP port serves /metrics, /healthz (the process serves) and /readyz
(the replica could lead at once: every schedule, Job and FreezeWindow listed, the
Leases read; otherwise 503 saying what it waits for).

Names follow Prometheus conventions: `punctual_` prefix, base units (seconds),
`_total` for counters.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from aiohttp import web
from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.exposition import CONTENT_TYPE_LATEST

LAG_BUCKETS = (0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 300.0)


class Metrics:
    # Over 60 lines on purpose: one declaration per metric, the catalogue the README lists.
    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry or CollectorRegistry()
        r = self.registry
        self.firing_lag = Histogram(
            "punctual_firing_lag_seconds",
            "Seconds from a tick's fire instant (tick plus jitter) to its Job being created, "
            "on the API server's clock.",
            buckets=LAG_BUCKETS,
            registry=r,
        )
        self.chain_lag = Histogram(
            "punctual_chain_lag_seconds",
            "Seconds from the end of the upstream runs (spec.after) to the create of the "
            "run after them, on the API server's clock.",
            buckets=LAG_BUCKETS,
            registry=r,
        )
        self.jobs_created = Counter(
            "punctual_jobs_created_total",
            "Jobs created, by schedule (manual triggers included).",
            ["namespace", "schedule"],
            registry=r,
        )
        self.ticks_skipped = Counter(
            "punctual_ticks_skipped_total",
            "Ticks deliberately not run, by schedule and reason.",
            ["namespace", "schedule", "reason"],
            registry=r,
        )
        self.ticks_dead = Counter(
            "punctual_ticks_dead_total",
            "Ticks whose last attempt failed (spec.retry): no run of them succeeded.",
            ["namespace", "schedule"],
            registry=r,
        )
        self.ticks_missed = Counter(
            "punctual_ticks_missed_total",
            "Ticks that could not run (past their deadline, beyond maxMissedRuns, superseded).",
            ["namespace", "schedule"],
            registry=r,
        )
        self.jobs_failed = Counter(
            "punctual_jobs_failed_total",
            "Jobs of a schedule seen to finish Failed.",
            ["namespace", "schedule"],
            registry=r,
        )
        self.create_failures = Counter(
            "punctual_job_create_failures_total",
            "Job creates the API server rejected for good (invalid template, forbidden).",
            ["namespace", "schedule"],
            registry=r,
        )
        self.claim_conflicts = Counter(
            "punctual_claim_conflicts_total",
            "Status claims that got 409 Conflict (another writer was first).",
            registry=r,
        )
        self.api_requests = Counter(
            "punctual_api_requests_total",
            "Requests to the API server, by verb and HTTP status code (0: unreachable).",
            ["verb", "code"],
            registry=r,
        )
        self.passes = Counter(
            "punctual_passes_total",
            "Passes over a schedule (a decision, and its writes if any): per firing, one "
            "decides it; the others were woken by a change, a Job or a timer.",
            registry=r,
        )
        self.leader = Gauge(
            "punctual_leader", "1 while this replica leads and may write, else 0.", registry=r
        )
        self.epoch = Gauge(
            "punctual_leader_epoch",
            "The Lease's leaseTransitions when this replica took it (-1 when not leading).",
            registry=r,
        )
        self.shards_led = Gauge(
            "punctual_shards_led",
            "Shards whose Lease this replica holds and may write for (with one shard: 0 or 1).",
            registry=r,
        )
        self.schedules = Gauge(
            "punctual_schedules", "CronSchedules known to this replica's index.", registry=r
        )
        self.schedules_indexed = Gauge(
            "punctual_schedules_indexed",
            "CronSchedules in this replica's index, counted as the first list streams in.",
            registry=r,
        )
        self.synced = Gauge(
            "punctual_synced",
            "1 once this replica could lead at once (what /readyz answers 200 for), else 0.",
            registry=r,
        )
        self.workload_kinds = Gauge(
            "punctual_workload_kind_served",
            "Per kind of --workload-kinds: 1 once the API server serves it and its objects are "
            "listed (its schedules fire), 0 while it is not served or still being listed.",
            ["kind"],
            registry=r,
        )
        self.event_loop_lag = Gauge(
            "punctual_event_loop_lag_seconds",
            "The largest delay of the event loop in the last 10 s: how much later than asked "
            "a timer woke (every firing waits behind whatever holds the loop).",
            registry=r,
        )
        self.heap_blocks = Gauge(
            "punctual_heap_blocks",
            "Memory blocks the Python interpreter holds allocated (sys.getallocatedblocks): "
            "it follows the live objects and falls when they are freed, where resident "
            "memory keeps the allocator's high-water mark.",
            registry=r,
        )
        self.heap_blocks.set_function(sys.getallocatedblocks)
        self.heap_bytes = Gauge(
            "punctual_heap_bytes",
            "Bytes the C allocator holds allocated (glibc's mallinfo2; 0 without it). Under "
            "PYTHONMALLOC=malloc, as the image runs, every Python object is there (and "
            "punctual_heap_blocks reads 0): it follows the live objects and falls when "
            "they are freed.",
            registry=r,
        )
        self.postponed = Gauge(
            "punctual_writes_postponed",
            "CronSchedules whose routine status write (one that waits on no tick in the "
            "next 10 s, such as a first claim) waits behind due writes for a free slot.",
            registry=r,
        )
        self.cleanup_backlog = Gauge(
            "punctual_cleanup_backlog",
            "History clean-up requests (a finished Job beyond its history limits deleted, a "
            "deleted Job's finalizer freed) that the last pass of their schedule left for a "
            "later one, its next wake having come first. Rising: clean-up falls behind.",
            registry=r,
        )
        self.conflicts = Gauge(
            "punctual_schedule_conflicts",
            "CronSchedules this installation leaves alone because another live installation "
            "fires them (status.installation).",
            registry=r,
        )
        self.clock_offset = Gauge(
            "punctual_clock_offset_seconds",
            "Estimated API server clock minus this node's clock.",
            registry=r,
        )
        self.clock_uncertainty = Gauge(
            "punctual_clock_uncertainty_seconds",
            "Half the width of the interval the clock offset is known to lie in.",
            registry=r,
        )
        # Per schedule, only for those that ask for them (pauseOnFailure,
        # successDeadlineSeconds), read from status at scrape time.
        self.schedule_paused = Gauge(
            "punctual_schedule_paused",
            "1 while pauseOnFailure keeps a schedule paused, else 0.",
            ["namespace", "schedule"],
            registry=r,
        )
        self.schedule_stale = Gauge(
            "punctual_schedule_stale",
            "1 while no Job of a tick has succeeded within successDeadlineSeconds, else 0.",
            ["namespace", "schedule"],
            registry=r,
        )
        self.last_success = Gauge(
            "punctual_last_success_timestamp_seconds",
            "When the newest successful Job of a schedule with successDeadlineSeconds completed.",
            ["namespace", "schedule"],
            registry=r,
        )
        self.run_pending = Gauge(
            "punctual_run_pending_seconds",
            "How long the oldest running Job of a schedule with pendingTimeoutSeconds or "
            "successDeadlineSeconds has had no pod started (0: none is pending).",
            ["namespace", "schedule"],
            registry=r,
        )
        self.epoch.set(-1)
        self.per_schedule = ScheduleGauges(self)

    def forget_schedule(self, namespace: str, name: str, *, skip_reasons: Iterable[str]) -> None:
        """A deleted schedule's counters go: a series per schedule ever seen would grow
        without end where schedules come and go (a schedule made again counts from 0)."""
        for counter in (
            self.jobs_created,
            self.ticks_missed,
            self.jobs_failed,
            self.ticks_dead,
            self.create_failures,
        ):
            counter.remove(namespace, name)
        for reason in skip_reasons:
            self.ticks_skipped.remove(namespace, name, reason)

    def exposition(self) -> bytes:
        return generate_latest(self.registry)


@dataclass(frozen=True, slots=True)
class _Asked:
    """What one schedule's per-schedule gauges read, as its status last said."""

    uid: str
    placement: str  # what decides its shard (core.groups.placement_of)
    paused: bool | None  # None: no pauseOnFailure, no gauge
    stale: bool | None  # None: no successDeadlineSeconds, no gauge
    last_success: float | None
    pending: bool = False  # pendingTimeoutSeconds or successDeadlineSeconds: the pending gauge


class ScheduleGauges:
    """The per-schedule gauges (paused, stale, last success), kept for the schedules whose
    spec asks for them (pauseOnFailure, successDeadlineSeconds) as the index tells of each
    change, and exported at scrape time for the schedules whose shard this replica leads.

    Why here: a scrape must cost nothing per schedule that asks for none (at 100 000
    schedules, reading every one at each scrape took seconds of CPU)."""

    def __init__(self, metrics: Metrics) -> None:
        self._metrics = metrics
        self._asked: dict[tuple[str, str], _Asked] = {}

    def observe(
        self, key: tuple[str, str], body: Mapping[str, Any] | None, placement: str = ""
    ) -> None:
        """A schedule as listed or watched (None: deleted); `placement`: what decides its
        shard (core.groups.placement_of; empty: its uid)."""
        spec = (body or {}).get("spec") or {}
        asks = ("pauseOnFailure", "successDeadlineSeconds", "pendingTimeoutSeconds")
        if body is None or not any(field in spec for field in asks):
            self._asked.pop(key, None)
            return
        status = body.get("status") or {}
        true = {c.get("type") for c in status.get("conditions") or [] if c.get("status") == "True"}
        success = status.get("lastSuccessfulTime")
        self._asked[key] = _Asked(
            uid=str((body.get("metadata") or {}).get("uid", "")),
            placement=placement or str((body.get("metadata") or {}).get("uid", "")),
            paused=("Paused" in true) if "pauseOnFailure" in spec else None,
            stale=("Stale" in true) if "successDeadlineSeconds" in spec else None,
            last_success=_instant(success) if "successDeadlineSeconds" in spec else None,
            pending="pendingTimeoutSeconds" in spec or "successDeadlineSeconds" in spec,
        )

    def export(
        self,
        leads: Callable[[str], bool],
        pending_for: Callable[[str], float] = lambda uid: 0.0,
    ) -> None:
        """Set the gauges of the schedules whose uid `leads` says this replica leads;
        `pending_for(uid)`: seconds its oldest running Job has had no pod started."""
        m = self._metrics
        for gauge in (m.schedule_paused, m.schedule_stale, m.last_success, m.run_pending):
            gauge.clear()
        for (namespace, name), asked in self._asked.items():
            if not leads(asked.placement):
                continue  # another replica leads its shard and exports it
            if asked.paused is not None:
                m.schedule_paused.labels(namespace, name).set(1 if asked.paused else 0)
            if asked.stale is not None:
                m.schedule_stale.labels(namespace, name).set(1 if asked.stale else 0)
            if asked.last_success is not None:
                m.last_success.labels(namespace, name).set(asked.last_success)
            if asked.pending:
                m.run_pending.labels(namespace, name).set(pending_for(asked.uid))


def _instant(text: object) -> float | None:
    """An RFC 3339 time as written in status, as a Unix timestamp (None: absent or bad)."""
    try:
        return datetime.fromisoformat(text).timestamp() if isinstance(text, str) else None
    except ValueError:
        return None


async def serve(
    metrics: Metrics,
    *,
    port: int,
    unready: Callable[[], str | None],
    refresh: Callable[[], None],
    host: str = "0.0.0.0",
) -> web.AppRunner:
    """Start /metrics, /healthz and /readyz on `port`; returns the runner to clean up."""

    async def scrape(_: web.Request) -> web.Response:
        refresh()
        return web.Response(
            body=metrics.exposition(), headers={"Content-Type": CONTENT_TYPE_LATEST}
        )

    async def healthz(_: web.Request) -> web.Response:
        return web.Response(text="ok\n")

    async def readyz(_: web.Request) -> web.Response:
        reason = unready()
        if reason is None:
            return web.Response(text="ok\n")
        return web.Response(status=503, text=f"not ready: {reason}\n")

    app = web.Application()
    app.add_routes(
        [web.get("/metrics", scrape), web.get("/healthz", healthz), web.get("/readyz", readyz)]
    )
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    await web.TCPSite(runner, host, port).start()
    return runner
