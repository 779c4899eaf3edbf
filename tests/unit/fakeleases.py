"""The fake API server (tests/unit/fakeapi.py) as the Lease loops' tests see it.

Why it exists: the LeaderElector and ShardedElection loops read, write, list and watch
Leases on simulated time (tests/unit/faketime.py); their tests speak of Leases, of who
wrote what when, and of a Lease held by another replica. `LeaseServer` is `FakeApi`
with those words: each replica gets its own client (`client`), a replica can be cut
off (`cut`) and requests slowed (`latency`), and `writes` are the Lease writes the
server accepted, with the simulated instant each arrived at.

What it must never do: decide anything the real API server does not (no expiry, no
Lease semantics: it stores what it is sent), or wait real time.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from punctual.kube.client import Body
from punctual.kube.leases import LeaseConfig, micro_time
from tests.unit.fakeapi import FakeApi
from tests.unit.faketime import T0, FakeTime

NAMESPACE = "punctual"
COLLECTION = f"/apis/coordination.k8s.io/v1/namespaces/{NAMESPACE}/leases"
LEASE = f"{COLLECTION}/punctual-leader"
DURATION, DEADLINE, RETRY = 15.0, 10.0, 2.0  # runtime.options' defaults


def lease_config(identity: str) -> LeaseConfig:
    """The Lease `punctual-leader` at the default timings, no Fence, for `identity`."""
    return LeaseConfig(
        namespace=NAMESPACE,
        name="punctual-leader",
        identity=identity,
        lease_duration=DURATION,
        renew_deadline=DEADLINE,
        retry_period=RETRY,
        fence=None,
    )


@dataclass(frozen=True)
class Write:
    seconds: float  # simulated seconds since T0
    by: str
    verb: str
    holder: str


class LeaseServer(FakeApi):
    """The API server, as far as Leases go: `FakeApi`, and the Lease writes it accepted."""

    def __init__(self, time: FakeTime) -> None:
        super().__init__(time)

    @property
    def leases(self) -> dict[str, Body]:
        return {path: body for path, body in self.objects.items() if "/leases/" in path}

    @property
    def writes(self) -> list[Write]:
        """Every accepted write of a Lease, in order (a test's own `hold`s aside)."""
        return [
            Write(r.at, r.by, r.verb, ((r.body or {}).get("spec") or {}).get("holderIdentity", ""))
            for r in self.requests
            if r.verb in ("create", "replace", "delete") and r.error is None
        ]

    def spec(self, path: str = LEASE) -> dict[str, Any]:
        return dict(self.leases[path]["spec"])

    def writes_by(self, replica: str) -> list[Write]:
        return [write for write in self.writes if write.by == replica]

    def hold(
        self, holder: str, *, renewed: datetime, transitions: int = 4, duration: float = DURATION
    ) -> None:
        """Write the Lease as another replica would (create or renew)."""
        spec = {
            "holderIdentity": holder,
            "leaseDurationSeconds": int(duration),
            "acquireTime": micro_time(T0),
            "renewTime": micro_time(renewed),
            "leaseTransitions": transitions,
        }
        current = self.leases.get(LEASE)
        metadata = {"name": "punctual-leader"}
        if current:
            metadata = {k: v for k, v in current["metadata"].items() if k != "resourceVersion"}
        self.put(LEASE, {"metadata": metadata, "spec": spec})
