"""Leader election against the real API server, with the electors' clocks in the test's hands.

The Lease writes, their resourceVersion preconditions and the Fence are real; only the
monotonic clocks that judge expiry and the renew deadline are fake, so each rule is
checked exactly, without waiting 15 seconds.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass

import pytest

from punctual.clocks import SystemClock
from punctual.kube.client import KubeClient
from punctual.kube.leases import LeaderElector
from punctual.runtime.options import Options

from .conftest import Cluster

pytestmark = pytest.mark.e2e


@dataclass
class FakeMonotonic:
    now: float = 1000.0

    def __call__(self) -> float:
        return self.now


def elector(api: KubeClient, namespace: str, identity: str, clock: FakeMonotonic) -> LeaderElector:
    config = Options(identity=identity).lease_config(namespace)  # 15 s / 10 s / 2 s
    return LeaderElector(api, config, clock=SystemClock(), monotonic=clock)


async def fence(api: KubeClient, namespace: str) -> dict[str, object]:
    body = await api.get(f"/apis/punctual.dev/v1/namespaces/{namespace}/fences/punctual-fence")
    return dict(body["spec"])


async def test_one_leader_expiry_on_the_observers_clock_and_epochs(
    crd: Cluster, api: KubeClient, namespace: str
) -> None:
    clock_a, clock_b = FakeMonotonic(), FakeMonotonic()
    a = elector(api, namespace, "a", clock_a)
    b = elector(api, namespace, "b", clock_b)

    assert await a.attempt() is True
    assert a.epoch == 0
    assert await fence(api, namespace) == {"holder": "a", "epoch": 0}
    assert await b.attempt() is False  # held, and b has only just seen it

    # The leader stops counting itself leader at its renew deadline...
    clock_a.now += 10.01
    assert a.is_leader() is False
    # ...while the standby may not take over before the lease duration on its own clock.
    clock_b.now += 14.9
    assert await b.attempt() is False
    clock_b.now += 0.2
    assert await b.attempt() is True
    assert b.epoch == 1
    assert await fence(api, namespace) == {"holder": "b", "epoch": 1}

    # The old leader's renewal is refused: the Lease moved on under it.
    assert await a.attempt() is False
    assert a.epoch is None
    lease = await api.get(
        f"/apis/coordination.k8s.io/v1/namespaces/{namespace}/leases/punctual-leader"
    )
    assert lease["spec"]["holderIdentity"] == "b"
    assert lease["spec"]["leaseTransitions"] == 1


async def test_release_lets_a_standby_take_over_at_once(
    crd: Cluster, api: KubeClient, namespace: str
) -> None:
    clock_a, clock_b = FakeMonotonic(), FakeMonotonic()
    a = elector(api, namespace, "a", clock_a)
    b = elector(api, namespace, "b", clock_b)
    assert await a.attempt() is True
    assert await b.attempt() is False
    await a.release()
    assert a.is_leader() is False
    assert await b.attempt() is True  # no waiting for expiry
    assert b.epoch == 1


async def test_a_lease_deleted_by_hand_is_taken_again_above_the_fence(
    crd: Cluster, api: KubeClient, namespace: str
) -> None:
    clock_a, clock_b = FakeMonotonic(), FakeMonotonic()
    a = elector(api, namespace, "a", clock_a)
    b = elector(api, namespace, "b", clock_b)
    assert await a.attempt() is True
    clock_a.now += 20  # a stops leading; b takes over at epoch 1
    clock_b.now += 20
    await b.attempt()
    clock_b.now += 15.1
    assert await b.attempt() is True and b.epoch == 1
    await api.delete(f"/apis/coordination.k8s.io/v1/namespaces/{namespace}/leases/punctual-leader")
    # Recreated, the Lease would start at leaseTransitions 0, below the fence (1): whoever
    # creates it takes an epoch above the fence instead, and leads.
    clock_a.now += 1
    assert await a.attempt() is True
    assert a.epoch == 2
    assert await fence(api, namespace) == {"holder": "a", "epoch": 2}


async def test_a_watching_standby_takes_over_within_a_request_of_the_release(
    crd: Cluster, api: KubeClient, namespace: str
) -> None:
    # A retry period far longer than the bound: only the watch can make the standby this fast.
    config = Options(identity="b", retry_period=8, renew_deadline=9, lease_duration=10)
    a = LeaderElector(api, Options(identity="a").lease_config(namespace), clock=SystemClock())
    b = LeaderElector(api, config.lease_config(namespace), clock=SystemClock())
    assert await a.attempt() is True
    stop = asyncio.Event()
    standby = asyncio.create_task(b.run(stop))
    try:
        await asyncio.sleep(1.0)  # b has tried once and is watching
        assert b.is_leader() is False
        released = time.monotonic()
        await a.release()
        await asyncio.wait_for(b.changed.wait(), timeout=5)
        took = time.monotonic() - released
        assert b.is_leader() is True
        assert took < 1.0, f"the standby took {took:.2f}s after the release"
    finally:
        stop.set()
        await standby
