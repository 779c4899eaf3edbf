"""spec.pendingTimeoutSeconds: a Job none of whose pods started in time is failed by
Punctual, recorded with its pods' waiting reasons, and no longer holds Forbid.

The rule (core.pending) and what a failed Job reads as (core.jobs) are pure; the shell's
part (kube.applying: the pods read, the annotation and activeDeadlineSeconds written) runs
against the shared fake API server. kwok or a real node keeping a pod Pending is the e2e
test's (tests/e2e/test_run_control.py).
"""

from __future__ import annotations

import dataclasses
from datetime import timedelta
from typing import Any

import pytest

from punctual.clocks import FixedClock
from punctual.core.deciding import decide
from punctual.core.decisions import Decision, JobToFail
from punctual.core.jobs import JobSnapshot, JobState, pending_timeout_note
from punctual.core.keys import ANNOTATION_PENDING_TIMEOUT
from punctual.core.models import FiringOutcome
from punctual.core.naming import job_name
from punctual.kube.applying import Applied, Applier, waiting_reasons
from punctual.kube.events import EventRecorder
from punctual.kube.ratelimiting import RateLimiter
from tests.unit.builders import (
    ACTIVE,
    LEADER,
    NAME,
    NAMESPACE,
    T0,
    UID,
    H,
    M,
    S,
    job,
    schedule_body,
    spec_body,
    status_body,
    steady_status,
)
from tests.unit.fakeapi import FakeApi

P = 300  # pendingTimeoutSeconds


def pending(tick: Any, started: bool = False) -> JobSnapshot:
    return dataclasses.replace(job(tick, ACTIVE), started=started)


def decided(jobs: list[JobSnapshot], now: Any, **spec: Any) -> Decision:
    """The decision at `now` on the status the loop would have written by then, T0 fired."""
    body_spec = spec_body(pendingTimeoutSeconds=P, concurrencyPolicy="Forbid", **spec)
    start = status_body(body_spec, cursor=T0, firings=[(T0, FiringOutcome.CREATED)])
    status = steady_status(body_spec, jobs, now=now, status=start)
    decision = decide(schedule_body(body_spec, status), jobs, now=now, leadership=LEADER)
    return dataclasses.replace(decision, status=decision.status or status)


def test_a_job_with_no_pod_started_after_the_timeout_is_failed() -> None:
    stuck = pending(T0)
    created = stuck.created
    assert created is not None
    before = decided([stuck], created + timedelta(seconds=P - 1))
    assert before.fail == ()
    assert before.next_wake is not None and before.next_wake <= created + timedelta(seconds=P)
    after = decided([stuck], created + timedelta(seconds=P))
    assert after.fail == (
        JobToFail(stuck.name, stuck.uid, f"no pod started within pendingTimeoutSeconds {P}"),
    )


def test_a_job_that_started_or_of_another_kind_or_without_the_field_is_left_alone() -> None:
    late = T0 + 10 * M
    assert decided([pending(T0, started=True)], late).fail == ()
    other = dataclasses.replace(pending(T0), kind=dataclasses.replace(pending(T0).kind, group="x"))
    assert decided([other], late).fail == ()
    body_spec = spec_body(concurrencyPolicy="Forbid")
    plain = decide(schedule_body(body_spec), [pending(T0)], now=late, leadership=LEADER)
    assert plain.fail == ()


def marked(
    tick: Any,
    reason: str = (
        "no pod started within pendingTimeoutSeconds 300; pods waiting: ImagePullBackOff (1)"
    ),
) -> dict[str, Any]:
    name = job_name(NAME, tick)
    return {
        "metadata": {
            "name": name,
            "namespace": NAMESPACE,
            "uid": f"uid-of-{name}",
            "creationTimestamp": "2026-11-25T12:00:01Z",
            "labels": {"punctual.dev/schedule-uid": UID, "punctual.dev/schedule": NAME},
            "annotations": {
                "punctual.dev/tick": tick.strftime("%Y-%m-%dT%H:%M:%SZ"),
                ANNOTATION_PENDING_TIMEOUT: pending_timeout_note(T0 + 6 * M, reason),
            },
        },
        "status": {"active": 1},
    }


def test_a_failed_stuck_job_reads_failed_frees_forbid_and_is_recorded_with_its_reason() -> None:
    failed = JobSnapshot.from_body(marked(T0))
    assert failed.state is JobState.FAILED and not failed.active
    assert failed.finished_at == T0 + 6 * M
    decision = decided([failed], T0 + H + S)
    assert [c.tick for c in decision.creates] == [T0 + H]  # Forbid no longer holds
    assert decision.status is not None
    [firing] = [f for f in decision.status["recentFirings"] if f.get("job") == failed.name]
    assert firing["outcome"] == "Failed"
    assert firing["reason"].startswith(
        "PendingTimeout: no pod started within pendingTimeoutSeconds 300"
    )
    assert firing["reason"].endswith("pods waiting: ImagePullBackOff (1)")


def test_a_job_never_started_reads_not_started_and_one_with_a_ready_pod_started() -> None:
    body = marked(T0)
    del body["metadata"]["annotations"][ANNOTATION_PENDING_TIMEOUT]
    assert not JobSnapshot.from_body(body).started
    body["status"] = {"active": 1, "ready": 1}
    assert JobSnapshot.from_body(body).started


@pytest.mark.parametrize(
    ("pods", "said"),
    [
        ([], "no pod was created"),
        (
            [
                {
                    "status": {
                        "phase": "Pending",
                        "containerStatuses": [
                            {"state": {"waiting": {"reason": "ImagePullBackOff"}}}
                        ],
                    }
                },
                {
                    "status": {
                        "phase": "Pending",
                        "containerStatuses": [
                            {"state": {"waiting": {"reason": "ImagePullBackOff"}}}
                        ],
                    }
                },
                {
                    "status": {
                        "phase": "Pending",
                        "conditions": [
                            {"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}
                        ],
                    }
                },
            ],
            "pods waiting: ImagePullBackOff (2), Unschedulable (1)",
        ),
        ([{"status": {"phase": "Pending"}}], "pods waiting: Pending (1)"),
    ],
    ids=["no pods", "pull and schedule", "nothing said"],
)
def test_the_pods_waiting_reasons_are_counted(pods: list[dict[str, Any]], said: str) -> None:
    assert waiting_reasons(pods) == said


async def test_the_applier_writes_why_and_stops_the_job_through_its_deadline() -> None:
    api = FakeApi()
    jobs = f"/apis/batch/v1/namespaces/{NAMESPACE}/jobs"
    api.put(
        f"{jobs}/stuck",
        {"metadata": {"name": "stuck", "namespace": NAMESPACE, "uid": "u-1"}, "spec": {}},
    )
    api.put(
        f"/api/v1/namespaces/{NAMESPACE}/pods/stuck-abc",
        {
            "metadata": {
                "name": "stuck-abc",
                "namespace": NAMESPACE,
                "labels": {"batch.kubernetes.io/job-name": "stuck"},
            },
            "status": {"containerStatuses": [{"state": {"waiting": {"reason": "ErrImagePull"}}}]},
        },
    )
    clock = FixedClock(T0)
    applier = Applier(
        api,
        may_write=lambda: True,
        events=EventRecorder(api, clock=clock),
        limiter=RateLimiter(0, 0),
        clock=clock,
    )
    applied = Applied()
    await applier._fail(
        NAMESPACE,
        JobToFail("stuck", "u-1", "no pod started within pendingTimeoutSeconds 300"),
        applied,
    )
    assert applied.failed_pending == ["stuck"]
    [patch] = api.of("patch")
    assert patch.body["spec"] == {"activeDeadlineSeconds": 1}
    assert patch.body["metadata"]["uid"] == "u-1"
    written = JobSnapshot.from_body(api.objects[f"{jobs}/stuck"])
    assert (
        written.pending_timeout
        == "no pod started within pendingTimeoutSeconds 300; pods waiting: ErrImagePull (1)"
    )
    # another Job with the name now: left alone
    await applier._fail(NAMESPACE, JobToFail("stuck", "u-2", "x"), Applied())
    assert len(api.of("patch")) == 2 and api.of("patch")[1].error is not None


def test_the_pending_gauge_and_the_timeout_judge_by_one_predicate() -> None:
    """`punctual_run_pending_seconds` and pendingTimeoutSeconds read "never started" the
    same way (`pending.never_started`): a Job of another kind is never pending here."""
    from dataclasses import replace

    from punctual.core.pending import never_started, pending_seconds
    from punctual.core.workloads import parse_kinds

    waiting = replace(job(T0, ACTIVE), started=False)  # created at T0 + 1 s
    other = replace(waiting, name="wf", kind=parse_kinds(["workflows.v1alpha1.argoproj.io"])[0])
    assert never_started(waiting) and not never_started(other)
    assert pending_seconds([waiting, other], T0 + 31 * S) == 30.0
