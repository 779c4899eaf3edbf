"""Two installations on one schedule: who fires it, and what the other one does."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pytest

from punctual.clocks import FixedClock
from punctual.core.ownership import Ownership, ownership
from punctual.core.records import EventNote
from punctual.kube.client import ApiError
from punctual.kube.leases import Installations
from punctual.runtime.reconciling import CONFLICT_RECHECK, Installation
from tests.unit.fakeapi import FakeApi

from .builders import T0, schedule_body, spec_body
from .test_reconciling import KEY, World

A, B = "ops/punctual-leader", "canary/punctual-leader"
A_LEASE = "/apis/coordination.k8s.io/v1/namespaces/ops/leases/punctual-leader"


def body(*, owner: str | None = None, class_name: str | None = None) -> dict[str, Any]:
    spec = spec_body(className=class_name)
    return schedule_body(spec, {"installation": owner} if owner else None)


@pytest.mark.parametrize(
    ("schedule", "class_name", "alive", "expected"),
    [
        (body(), None, None, Ownership.MINE),  # nobody fires it yet
        (body(owner=B), None, None, Ownership.MINE),  # it names us
        (body(owner=A), None, True, Ownership.CONFLICT),  # another live installation
        (body(owner=A), None, False, Ownership.TAKEOVER),  # its owner is gone
        (body(class_name="canary"), None, None, Ownership.OTHER_CLASS),
        (body(), "canary", None, Ownership.OTHER_CLASS),
        (body(class_name="canary"), "canary", None, Ownership.MINE),
        (body(owner=A, class_name="canary"), None, True, Ownership.OTHER_CLASS),
    ],
)
def test_ownership(
    schedule: dict[str, Any], class_name: str | None, alive: bool | None, expected: Ownership
) -> None:
    assert ownership(schedule, installation=B, class_name=class_name, owner_alive=alive) is (
        expected
    )


@dataclass
class Judge:
    answers: dict[str, bool]
    asked: list[str] = field(default_factory=list)

    async def alive(self, installation: str) -> bool:
        self.asked.append(installation)
        return self.answers[installation]


@dataclass
class Recorder:
    notes: list[EventNote] = field(default_factory=list)

    def post(self, obj: Any, note: EventNote) -> None:
        self.notes.append(note)


async def test_a_schedule_another_live_installation_fires_gets_nothing_but_one_event() -> None:
    world = World(body(owner=A))
    reconciler, _ = world.reconciler()
    judge, recorder = Judge({A: True}), Recorder()
    reconciler.installation = Installation(B)
    reconciler.others, reconciler.events = judge, recorder
    assert await reconciler(KEY) == T0 + CONFLICT_RECHECK
    assert await reconciler(KEY) == T0 + CONFLICT_RECHECK
    assert world.applier.decisions == []  # nothing written, ever
    assert [n.reason for n in recorder.notes] == ["Conflict"]  # said once
    assert reconciler.conflicts == {KEY: A}
    judge.answers[A] = False  # the owner goes away: this installation takes over
    await reconciler(KEY)
    [decision] = world.applier.decisions
    assert decision.status is not None and decision.status["installation"] == B
    assert reconciler.conflicts == {}


async def test_every_claim_names_the_installation() -> None:
    world = World(body())
    reconciler, _ = world.reconciler()
    reconciler.installation = Installation(A)
    await reconciler(KEY)
    [decision] = world.applier.decisions
    assert decision.status is not None and decision.status["installation"] == A
    assert all(c.body["metadata"]["labels"]["punctual.dev/installation"] for c in decision.creates)


def lease(holder: str, renewed: str = "2026-11-25T12:00:00.000000Z") -> dict[str, Any]:
    spec = {"holderIdentity": holder, "renewTime": renewed, "leaseDurationSeconds": 15}
    return {"spec": spec}


@dataclass
class Tick:
    now: float = 100.0

    def __call__(self) -> float:
        return self.now


async def test_another_installation_is_alive_until_its_lease_is_gone_released_or_stale() -> None:
    tick = Tick()
    api = FakeApi()
    api.put(A_LEASE, lease("a-0"))
    judge = Installations(api, clock=FixedClock(T0), monotonic=tick)
    assert await judge.alive(A)
    tick.now += 14.9
    assert await judge.alive(A)  # seen unchanged, but not yet for its duration
    tick.now += Installations.REREAD
    assert not await judge.alive(A)  # unchanged for 15 s on our clock: gone
    api.put(A_LEASE, lease("a-1", renewed="2026-11-25T12:00:20.000000Z"))
    tick.now += Installations.REREAD
    assert await judge.alive(A)  # renewed: alive again
    api.put(A_LEASE, lease(""))
    tick.now += Installations.REREAD
    assert not await judge.alive(A)  # released
    api.remove(A_LEASE)
    tick.now += Installations.REREAD
    assert not await judge.alive(A)  # gone, and no membership Leases either
    api.fail("get", A_LEASE, ApiError(403, "Forbidden", "cannot get leases"))
    tick.now += Installations.REREAD
    assert await judge.alive(A)  # cannot tell: never fight
    assert {verb for verb, _ in api.calls} == {"get"}  # judging only reads
