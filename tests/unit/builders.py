"""Builders for the unit tests: schedules, Jobs and statuses as the API server has them.

Why it exists: every test of a decision starts from a CronSchedule body, its status and
its Jobs, around one fixed instant. T0 is the top of an hour and a tick of the hourly
schedule most tests use, so "T0 - 3h" is three ticks ago. Bodies are raw dicts as the
API server returns them (times spelled out here, not by the code under test); Jobs are
JobSnapshots as the watch would report them. Test modules import these, never each
other's helpers.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

from punctual.core.deciding import decide
from punctual.core.decisions import Decision, Leadership
from punctual.core.freezing import Freeze, read_freeze
from punctual.core.jobs import JobSnapshot, JobState
from punctual.core.keys import ANNOTATION_TRIGGER
from punctual.core.models import CronScheduleSpec, FiringOutcome
from punctual.core.naming import job_name
from punctual.core.planning import schedule_fingerprint
from punctual.core.records import ScheduleRead

T0 = datetime(2026, 11, 25, 12, 0, tzinfo=UTC)
S = timedelta(seconds=1)
M = timedelta(minutes=1)
H = timedelta(hours=1)
MS = timedelta(milliseconds=1)

NAME = "nightly-report"
NAMESPACE = "reports"
UID = "5f0c1e2d-7a4b-4c3d-9e8f-0a1b2c3d4e5f"
OTHER_UID = "0b7e5f7a-5d0c-4a4e-9d7e-2f0f4a0c8a11"  # a deleted schedule of the same name
HOURLY = "0 * * * *"
CREATED = T0 - 30 * M
GENERATION = 3
LEADER = Leadership(epoch=7, identity="punctual-0")
PREVIOUS_EPOCH = 6  # claims written by the leader before this one

CREATED_ = FiringOutcome.CREATED
SKIPPED = FiringOutcome.SKIPPED
MISSED = FiringOutcome.MISSED
REPLACED = FiringOutcome.REPLACED
SUCCEEDED = FiringOutcome.SUCCEEDED
FAILED = FiringOutcome.FAILED

ACTIVE = JobState.ACTIVE
DONE = JobState.SUCCEEDED
BROKEN = JobState.FAILED

TEMPLATE: dict[str, Any] = {
    "metadata": {
        "labels": {"team": "reports", "punctual.dev/schedule-uid": "forged"},
        "annotations": {"owner": "alice@example.com"},
    },
    "spec": {
        "backoffLimit": 2,
        "template": {
            "spec": {
                "restartPolicy": "Never",
                "containers": [{"name": "report", "image": "busybox", "args": ["true"]}],
            }
        },
    },
}


# -- raw bodies ------------------------------------------------------------------------


def iso(instant: datetime) -> str:
    """RFC 3339 as the API server writes it (spelled out here, not by the code under test)."""
    text = instant.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S")
    if instant.microsecond:
        text += f".{instant.microsecond:06d}"
    return text + "Z"


def n(tick: datetime) -> str:
    """The Job name of a tick of the schedule."""
    return job_name(NAME, tick)


def spec_body(**overrides: Any) -> dict[str, Any]:
    spec: dict[str, Any] = {"schedule": HOURLY, "jobTemplate": copy.deepcopy(TEMPLATE)}
    spec.update(overrides)
    return {k: v for k, v in spec.items() if v is not None}


def fingerprint(spec: Mapping[str, Any]) -> str:
    """The fingerprint the status carries once the spec has been decided on."""
    return schedule_fingerprint(CronScheduleSpec.model_validate(spec))


def status_body(
    spec: Mapping[str, Any],
    *,
    cursor: datetime | None = None,
    in_flight: Sequence[datetime] = (),
    firings: Sequence[tuple[datetime, FiringOutcome]] = (),
    last_trigger: str | None = None,
    last_success: datetime | None = None,
) -> dict[str, Any]:
    """A status written by an earlier leader for `spec` (its fingerprint is current)."""
    status: dict[str, Any] = {"scheduleFingerprint": fingerprint(spec)}
    if cursor is not None:
        status["lastScheduledTime"] = iso(cursor)
    if in_flight:
        status["inFlight"] = [
            {"tick": iso(t), "job": n(t), "epoch": PREVIOUS_EPOCH} for t in in_flight
        ]
    if firings:
        status["recentFirings"] = [
            {"tick": iso(t), "job": n(t), "outcome": o.value, "epoch": PREVIOUS_EPOCH}
            for t, o in firings
        ]
    if last_trigger is not None:
        status["lastTrigger"] = last_trigger
    if last_success is not None:
        status["lastSuccessfulTime"] = iso(last_success)
    return status


def schedule_body(
    spec: Mapping[str, Any] | None = None,
    status: Mapping[str, Any] | None = None,
    *,
    trigger: str | None = None,
    created: datetime = CREATED,
    uid: str = UID,
    annotations: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    annotations = {"kubectl.kubernetes.io/last-applied-configuration": "{}", **(annotations or {})}
    if trigger is not None:
        annotations[ANNOTATION_TRIGGER] = trigger
    body: dict[str, Any] = {
        "apiVersion": "punctual.dev/v1",
        "kind": "CronSchedule",
        "metadata": {
            "name": NAME,
            "namespace": NAMESPACE,
            "uid": uid,
            "generation": GENERATION,
            "resourceVersion": "4711",
            "creationTimestamp": iso(created),
            "annotations": annotations,
        },
        "spec": dict(spec if spec is not None else spec_body()),
    }
    if status is not None:
        body["status"] = dict(status)
    return body


def job(
    tick: datetime,
    state: JobState = ACTIVE,
    *,
    finished: datetime | None = None,
    schedule_uid: str = UID,
    name: str | None = None,
    deleting: bool = False,
) -> JobSnapshot:
    name = name or n(tick)
    if state is not ACTIVE and finished is None:
        finished = tick + 10 * M
    return JobSnapshot(
        name=name,
        uid=f"uid-of-{name}-{schedule_uid[:4]}",
        schedule_uid=schedule_uid,
        tick=tick,
        state=state,
        created=tick + S,
        finished_at=finished,
        deleting=deleting,
    )


def run(body: Mapping[str, Any], jobs: Sequence[JobSnapshot] = (), *, now: datetime) -> Decision:
    return decide(body, jobs, now=now, leadership=LEADER)


def written(decision: Decision, old: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The status after the decision: what it writes, or the old one if it writes none."""
    if decision.status is not None:
        return decision.status
    return dict(old or {})


def condition(status: Mapping[str, Any], kind: str) -> dict[str, Any]:
    [found] = [c for c in status.get("conditions", []) if c["type"] == kind]
    return dict(found)


def events(decision: Decision, reason: str) -> list[tuple[str, str]]:
    return [(e.type, e.message) for e in decision.events if e.reason == reason]


def steady_status(
    spec: Mapping[str, Any], jobs: Sequence[JobSnapshot], *, now: datetime, status: Any = None
) -> dict[str, Any]:
    """Decide until the status stops changing (as the loop would), return that status."""
    for _ in range(5):
        decision = run(schedule_body(spec, status), jobs, now=now)
        if decision.status is None:
            return dict(status or {})
        status = decision.status
    raise AssertionError("the status never settled")


def parse_iso(text: str) -> datetime:
    return datetime.strptime(text, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC)


def claimed_ahead_status(spec: Mapping[str, Any], *, listed: bool = False) -> dict[str, Any]:
    """T0 fired and succeeded, all recorded; T0 + H claimed ahead by the previous leader:
    by its claim window (status.claimedThrough), or, `listed`, as an operator before the
    window claimed it (an inFlight entry)."""
    start = status_body(spec, cursor=T0, firings=[(T0, SUCCEEDED)])
    status = steady_status(spec, [job(T0, DONE)], now=T0 + 10 * M + S, status=start)
    assert status["claimedThrough"] == iso(T0 + H) and status.get("inFlight", []) == []
    if not listed:
        return {**status, "claimEpoch": PREVIOUS_EPOCH}
    del status["claimedThrough"], status["claimEpoch"]
    claim = {"tick": iso(T0 + H), "job": n(T0 + H), "epoch": PREVIOUS_EPOCH}
    return {**status, "inFlight": [claim]}


def read(
    spec: Mapping[str, Any] | None = None,
    status: Mapping[str, Any] | None = None,
    jobs: Sequence[JobSnapshot] = (),
    *,
    annotations: Mapping[str, str] | None = None,
) -> ScheduleRead:
    """The schedule as one decision reads it (what each rule is given)."""
    return ScheduleRead.from_body(schedule_body(spec, status, annotations=annotations), jobs)


def window(name: str, start: datetime, end: datetime, action: str = "Skip") -> Freeze:
    """A fixed FreezeWindow [start, end) in namespace `reports`, selecting every schedule."""
    body = {
        "metadata": {"namespace": NAMESPACE, "name": name},
        "spec": {"from": iso(start), "to": iso(end), "action": action},
    }
    freeze = read_freeze(body)
    assert isinstance(freeze, Freeze), freeze
    return freeze
