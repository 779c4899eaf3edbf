"""What `punctual run` can be told: one dataclass, the one source of every default.

Why it exists: the flags, their environment variables (cli.running), the process
(runtime.process) and the Lease (kube.leases.LeaseConfig) all need the same defaults;
they read them from here, so a default is written once.

What it must never do: import anything heavy (the CLI reads it to build `--help`).
"""

from __future__ import annotations

import socket
import uuid
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from punctual.kube.leases import LeaseConfig


@dataclass
class Options:
    """Everything `punctual run` can be told (flags and environment, see cli)."""

    kubeconfig: str | None = None
    namespaces: list[str] = field(default_factory=list)  # empty: all namespaces
    lease_name: str = "punctual-leader"
    lease_namespace: str | None = None
    lease_duration: float = 15.0
    renew_deadline: float = 10.0
    retry_period: float = 2.0
    identity: str | None = None
    # Schedules processed at once: each waits mostly on one request, so this bounds the
    # requests in flight (16 held 1 000 Jobs on one tick to about 130 per second here).
    workers: int = 128
    # An optional client-side cap on writes (client-go's QPS and burst; burst defaults to
    # twice qps). Unset: as fast as the API server admits, pausing on 429 (Retry-After)
    # and 5xx (kube.ratelimiting); `workers` bounds the requests in flight.
    qps: float | None = None
    burst: int | None = None
    # How long bookkeeping-only status changes may wait for a later write to carry them:
    # a Job that finishes within it costs no status write of its own.
    status_delay: float = 10.0
    # The claim window (core.claiming.claim_window): one status write claims every
    # scheduled tick of the next this-many seconds, claimed again when half is used.
    claim_window: float = 60.0
    # Seconds ahead of a timer's instant a pass may decide (runtime.scheduling): at an
    # instant many schedules share, their deciding is done before it and only their
    # requests are left at it. Nothing is written before the instant.
    decide_ahead: float = 0.5
    log_level: str = "INFO"
    log_format: str = "text"  # or "json"
    metrics_port: int | None = 8080  # None: no HTTP endpoint
    fence: str | None = "punctual-fence"  # None: no Fence for the admission policy
    # Shards (kube.sharding): schedules split by a hash of their uid, each shard led
    # through its own Lease and Fence entry, the shards shared evenly by the live replicas.
    # 1: one leader Lease, as before shards existed.
    shards: int = 1
    # Which schedules this installation fires: those whose spec.className is this (None:
    # those without a className).
    class_name: str | None = None
    # Kinds a spec.workloadTemplate may create besides Jobs (--workload-kinds), each
    # RESOURCE.VERSION.GROUP (core.workloads.parse_kinds reads them).
    workload_kinds: list[str] = field(default_factory=list)
    # The triggers admission policy is bound (crds/triggers.punctual.dev.yaml): record a
    # trigger's name as verified when it is the one the policy checked.
    verified_triggers: bool = False

    def lease_config(self, namespace: str) -> LeaseConfig:
        """The Lease these options describe, in `namespace` (ValueError if inconsistent)."""
        from punctual.kube.leases import LeaseConfig

        return LeaseConfig(
            namespace=namespace,
            name=self.lease_name,
            identity=self.identity or default_identity(),
            lease_duration=self.lease_duration,
            renew_deadline=self.renew_deadline,
            retry_period=self.retry_period,
            fence=self.fence,
        )


def default_identity() -> str:
    """This replica's Lease holder name: the host (pod) name and a per-process suffix, so a
    restarted process is a new holder and its takeover is a new epoch."""
    return f"{socket.gethostname()}-{uuid.uuid4().hex[:6]}"
