"""The Lease decisions, as client-go's leaderelection makes them, on a fake clock.

Each row is one read of the Lease by replica "me": what the Lease says, since when
(on my monotonic clock) I have seen it unchanged, and my estimate of the API
server's clock when I know it to a second. The loop that reads and writes the Lease
is tested on simulated time against a fake API server (tests/unit/test_electing.py)
and against the real one (tests/e2e/test_leading.py).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

import pytest

from punctual.kube.leases import (
    LeaseRecord,
    Observation,
    Step,
    above_fence,
    choose,
    expired,
    leading,
    observe,
    seconds_left,
)

T0 = datetime(2026, 11, 26, 12, 0, tzinfo=UTC)
NOW = 1000.0  # my monotonic clock at the read


def record(holder: str, *, renewed: datetime | None = T0, transitions: int = 4) -> LeaseRecord:
    return LeaseRecord(holder=holder, renew_time=renewed, transitions=transitions, duration=15.0)


@dataclass(frozen=True)
class Case:
    name: str
    lease: LeaseRecord
    seen_for: float  # seconds I have seen this record unchanged
    server_now: datetime | None
    my_epoch: int | None
    step: Step
    epoch: int | None


CASES = [
    Case("released Lease: take it, next epoch", record(""), 0, None, None, Step.TAKE, 5),
    Case("ours: renew, keep my epoch", record("me"), 3, None, 4, Step.RENEW, 4),
    Case("ours after a restart: renew at its epoch", record("me"), 0, None, None, Step.RENEW, 4),
    Case("another holder, fresh: stand by", record("other"), 3, None, None, Step.STAND_BY, None),
    Case(
        "other holder, seen 14.9 s: stand by", record("other"), 14.9, None, None, Step.STAND_BY,
        None,
    ),
    Case("other holder, 15 s unchanged: take", record("other"), 15, None, None, Step.TAKE, 5),
    Case(
        "renewTime old but seen only now, server clock unknown: follow (never compare walls)",
        record("other", renewed=T0 - timedelta(hours=1)), 0, None, None, Step.STAND_BY, None,
    ),
    Case(
        "server clock known, past renewTime + duration: take at expiry",
        record("other"), 2, T0 + timedelta(seconds=15), None, Step.TAKE, 5,
    ),
    Case(
        "server clock known, 1 s before expiry: follow",
        record("other"), 2, T0 + timedelta(seconds=14), None, Step.STAND_BY, None,
    ),
    Case(
        "no renewTime, server clock known: only the observer's clock counts",
        record("other", renewed=None), 2, T0 + timedelta(hours=1), None, Step.STAND_BY, None,
    ),
]  # fmt: skip


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_choose(case: Case) -> None:
    observation = Observation(case.lease, since=NOW - case.seen_for)
    step, epoch = choose(
        observation, "me", epoch=case.my_epoch, now=NOW, server_now=case.server_now
    )
    assert (step, epoch) == (case.step, case.epoch)


PATIENCE_CASES = [
    # (what, lease, seen for, server clock, step)
    ("released, seen free 3 s of 4: wait", record(""), 3.0, None, Step.STAND_BY),
    ("released, seen free 4 s: take", record(""), 4.0, None, Step.TAKE),
    ("expired by my clock, 3 s past: wait", record("other"), 18.0, None, Step.STAND_BY),
    ("expired by my clock, 4 s past: take", record("other"), 19.0, None, Step.TAKE),
    ("server clock: 3 s past expiry: wait", record("other"), 0.0, T0 + timedelta(seconds=18),
     Step.STAND_BY),
    ("server clock: 4 s past expiry: take", record("other"), 0.0, T0 + timedelta(seconds=19),
     Step.TAKE),
    ("mine: renew at once", record("me"), 0.0, None, Step.RENEW),
]  # fmt: skip


@pytest.mark.parametrize(("what", "lease", "seen_for", "server_now", "step"), PATIENCE_CASES)
def test_a_patient_replica_takes_a_free_lease_only_after_its_patience(
    what: str, lease: LeaseRecord, seen_for: float, server_now: datetime | None, step: Step
) -> None:
    """A replica whose lists are not in yet waits 4 s more than one whose lists are, so
    that a standby able to decide everything at once leads instead."""
    observation = Observation(lease, since=NOW - seen_for)
    got, _ = choose(observation, "me", epoch=None, now=NOW, server_now=server_now, patience=4.0)
    assert got == step, what


def test_the_observers_clock_restarts_when_the_record_changes() -> None:
    first = observe(None, record("other"), now=100.0)
    same = observe(first, record("other"), now=110.0)
    assert same.since == 100.0
    renewed = observe(same, record("other", renewed=T0 + timedelta(seconds=2)), now=111.0)
    assert renewed.since == 111.0
    assert not expired(renewed, now=125.0, server_now=None)  # 14 s since the renewal was seen
    assert expired(renewed, now=126.0, server_now=None)


def test_seconds_left_by_the_servers_clock() -> None:
    assert seconds_left(record("other"), T0 + timedelta(seconds=5)) == 10.0
    assert seconds_left(record("other"), None) is None
    assert seconds_left(record("other", renewed=None), T0) is None


@pytest.mark.parametrize(
    ("epoch", "valid_until", "fenced", "fence", "expected"),
    [
        (4, NOW + 1, 4, True, True),  # renewed recently, fence at my epoch
        (4, NOW, 4, True, False),  # the renew deadline has passed: stop writing
        (4, NOW + 1, 3, True, False),  # fence not yet raised to my epoch
        (4, NOW + 1, None, False, True),  # no fence configured
        (None, NOW + 1, 4, True, False),  # no epoch: not holding the Lease
    ],
)
def test_leading(
    epoch: int | None, valid_until: float, fenced: int | None, fence: bool, expected: bool
) -> None:
    assert leading(epoch, valid_until, NOW, fenced=fenced, fence=fence) is expected


def test_a_lease_body_is_read_with_defaults() -> None:
    body = {"spec": {"holderIdentity": "x", "renewTime": "2026-11-26T12:00:00.000000Z"}}
    assert LeaseRecord.from_body(body, 15.0) == LeaseRecord("x", T0, 0, 15.0)
    assert LeaseRecord.from_body({}, 7.0) == LeaseRecord("", None, 0, 7.0)


@pytest.mark.parametrize(
    ("epoch", "fenced", "expected"),
    [(5, None, 5), (5, 3, 5), (5, 4, 5), (5, 5, 6), (0, 7, 8), (1, 1, 2)],
)
def test_a_lease_is_taken_above_the_fence(epoch: int, fenced: int | None, expected: int) -> None:
    """A Lease deleted by hand starts over at 0; taking it below the fence would leave
    every replica unable to lead, so the epoch taken is above the fence's too."""
    assert above_fence(epoch, fenced) == expected
