"""spec.retry: a failed tick runs again after a delay, each attempt claimed and named on
its own, until its last attempt; then it is dead.

Same fixed instant as `builders`: T0 is a tick of the hourly schedule, its run fails ten
minutes later. Each test gives `decide` the schedule and its Jobs, as the loop would.
"""

from __future__ import annotations

import dataclasses
from datetime import datetime
from typing import Any

import pytest

from punctual.core.deciding import decide
from punctual.core.decisions import Decision
from punctual.core.jobs import JobSnapshot, JobState
from punctual.core.models import FiringOutcome, Retry
from punctual.core.naming import MAX_JOB_NAME_LENGTH, retry_job_name
from tests.unit.builders import (
    BROKEN,
    LEADER,
    NAME,
    T0,
    H,
    M,
    S,
    events,
    job,
    n,
    schedule_body,
    spec_body,
    status_body,
    steady_status,
)

FAIL_AT = T0 + 10 * M
RETRY = {"maxAttempts": 3, "delaySeconds": 60}


def spec(**more: Any) -> dict[str, Any]:
    return spec_body(retry=dict(RETRY), concurrencyPolicy="Forbid", **more)


def attempt(
    tick: datetime, number: int, state: JobState = BROKEN, finished: datetime = FAIL_AT
) -> JobSnapshot:
    name = n(tick) if number == 1 else retry_job_name(NAME, tick, number)
    made = job(tick, state, finished=finished, name=name)
    return dataclasses.replace(made, attempt=number)


def at(
    now: datetime, jobs: list[JobSnapshot], status: dict[str, Any] | None = None, **more: Any
) -> tuple[Decision, dict[str, Any]]:
    """The decision at `now`, on the status the loop would have written before it."""
    body_spec = spec(**more)
    start = status or status_body(body_spec, cursor=T0, firings=[(T0, FiringOutcome.CREATED)])
    settled = steady_status(body_spec, jobs, now=now - S, status=start)
    decision = decide(schedule_body(body_spec, settled), jobs, now=now, leadership=LEADER)
    return decision, decision.status or settled


@pytest.mark.parametrize(
    ("retry", "delays"),
    [
        ({"maxAttempts": 4, "delaySeconds": 30}, [30, 30, 30]),
        ({"maxAttempts": 5, "delaySeconds": 10, "backoff": "Exponential"}, [10, 20, 40, 80]),
        (
            {"maxAttempts": 5, "delaySeconds": 10, "backoff": "Exponential", "maxDelaySeconds": 25},
            [10, 20, 25, 25],
        ),
        ({"maxAttempts": 2, "delaySeconds": 0}, [0]),
    ],
    ids=["fixed", "exponential", "exponential capped", "at once"],
)
def test_the_wait_before_each_attempt(retry: dict[str, Any], delays: list[int]) -> None:
    parsed = Retry.model_validate(retry)
    assert [parsed.delay(a).total_seconds() for a in range(2, parsed.max_attempts + 1)] == delays


def test_a_cap_below_the_delay_is_refused() -> None:
    with pytest.raises(ValueError, match="maxDelaySeconds must be at least delaySeconds"):
        Retry.model_validate({"maxAttempts": 2, "delaySeconds": 60, "maxDelaySeconds": 30})


def test_names_per_attempt_are_distinct_fit_63_and_never_a_ticks_own() -> None:
    longest = "a" * 52
    names = {retry_job_name(longest, T0, a) for a in range(2, 21)}
    assert len(names) == 19 and all(len(x) <= MAX_JOB_NAME_LENGTH for x in names)
    assert retry_job_name(NAME, T0, 2) != retry_job_name(NAME, T0 + H, 2)
    assert all(not x.endswith(str(int(T0.timestamp()))) for x in names)


def test_a_failed_run_waits_its_delay_then_its_next_attempt_is_claimed_and_created() -> None:
    first = attempt(T0, 1)
    waiting, status = at(FAIL_AT + 30 * S, [first])
    assert not waiting.creates
    [entry] = status["retrying"]
    second_name = retry_job_name(NAME, T0, 2)
    assert entry == {
        "tick": "2026-11-25T12:00:00Z",
        "attempt": 2,
        "job": second_name,
        "at": "2026-11-25T12:11:00Z",
    }
    assert waiting.next_wake is not None and waiting.next_wake <= FAIL_AT + 60 * S
    due, status = at(FAIL_AT + 60 * S, [first], status=status)
    [create] = due.creates
    assert create.name == second_name and create.tick == T0
    assert create.body["metadata"]["annotations"]["punctual.dev/attempt"] == "2"
    env = {
        e["name"]: e["value"]
        for e in create.body["spec"]["template"]["spec"]["containers"][0]["env"]
    }
    assert env["PUNCTUAL_ATTEMPT"] == "2" and env["PUNCTUAL_TICK"] == "2026-11-25T12:00:00Z"
    assert due.status is not None
    [claim] = [c for c in due.status["inFlight"] if c["job"] == second_name]
    assert claim["attempt"] == 2
    [recorded] = [f for f in due.status["recentFirings"] if f.get("job") == second_name]
    assert recorded["attempt"] == 2 and recorded["outcome"] == "Created"
    assert not due.status.get("retrying")


def test_an_attempt_claimed_by_a_killed_leader_is_created_again_under_its_own_name() -> None:
    first = attempt(T0, 1)
    _, status = at(FAIL_AT + 60 * S, [first])
    # The claim was written; the leader died before the create: the successor recovers it.
    later, _ = at(FAIL_AT + 70 * S, [first], status=status)
    assert [c.name for c in later.creates] == [retry_job_name(NAME, T0, 2)]
    assert later.creates[0].body["metadata"]["annotations"]["punctual.dev/firing"] == "scheduled"
    # Once its Job is seen, it is never created again, nor waited for.
    second = attempt(T0, 2, state=JobState.ACTIVE)
    seen, status = at(FAIL_AT + 80 * S, [first, second], status=status)
    assert not seen.creates and not status.get("retrying")


def test_the_last_attempt_failing_makes_the_tick_dead_once() -> None:
    jobs = [attempt(T0, 1), attempt(T0, 2), attempt(T0, 3, finished=FAIL_AT + 5 * M)]
    history = status_body(spec(), cursor=T0, firings=[(T0, FiringOutcome.CREATED)])
    history["recentFirings"] += [
        {
            "tick": "2026-11-25T12:00:00Z",
            "job": jobs[1].name,
            "outcome": "Failed",
            "epoch": 7,
            "attempt": 2,
        },
        {
            "tick": "2026-11-25T12:00:00Z",
            "job": jobs[2].name,
            "outcome": "Created",
            "epoch": 7,
            "attempt": 3,
        },
    ]
    history["recentFirings"][0]["outcome"] = "Failed"
    decision = decide(schedule_body(spec(), history), jobs, now=FAIL_AT + 6 * M, leadership=LEADER)
    assert not decision.creates
    assert decision.status is not None
    [last] = [f for f in decision.status["recentFirings"] if f.get("job") == jobs[2].name]
    assert last["outcome"] == "Failed" and last["dead"] is True
    assert last["reason"] == "dead after 3 attempts"
    [(kind, message)] = events(decision, "TickFailed")
    assert kind == "Warning" and message.startswith(
        "Tick 2026-11-25T12:00:00Z failed its last attempt"
    )
    assert decision.newly_dead == 1
    again = decide(
        schedule_body(spec(), decision.status), jobs, now=FAIL_AT + 7 * M, leadership=LEADER
    )
    assert events(again, "TickFailed") == [] and again.newly_dead == 0
    assert not (again.status or decision.status).get("retrying")


def test_an_attempt_waits_for_room_under_forbid_and_is_never_skipped() -> None:
    first = attempt(T0, 1)
    running = job(T0 + H, JobState.ACTIVE)
    start = status_body(
        spec(),
        cursor=T0 + H,
        firings=[(T0, FiringOutcome.CREATED), (T0 + H, FiringOutcome.CREATED)],
    )
    decision, status = at(T0 + H + 5 * M, [first, running], status=start)
    assert not decision.creates
    assert [w["attempt"] for w in status["retrying"]] == [2]
    assert not any(f["outcome"] == "Skipped" and f.get("attempt") for f in status["recentFirings"])


def test_pause_on_failure_counts_dead_ticks_not_attempts() -> None:
    jobs = [attempt(T0, 1), attempt(T0, 2, state=JobState.ACTIVE)]
    _, status = at(FAIL_AT + 2 * M, jobs, pauseOnFailure={"consecutiveFailures": 1})
    assert status.get("consecutiveFailures", 0) == 0
    assert not any(
        c["type"] == "Paused" and c["status"] == "True" for c in status.get("conditions", [])
    )


def test_backfill_failed_runs_a_failed_tick_again_as_its_next_attempt() -> None:
    first = attempt(T0, 1)
    body_spec = spec_body()  # no retry: a Failed tick is failed for good
    start = status_body(body_spec, cursor=T0, firings=[(T0, FiringOutcome.FAILED)])
    request = '{"request": "r-1", "from": "2026-11-25T00:00:00Z", "to": "2026-11-25T13:00:00Z"}'
    body = schedule_body(body_spec, start, annotations={"punctual.dev/rerun-failed": request})
    decision = decide(body, [first], now=T0 + 20 * M, leadership=LEADER)
    assert [c.name for c in decision.creates] == [retry_job_name(NAME, T0, 2)]
    assert decision.status is not None and decision.status["lastRerun"] == "r-1"
    [(_, message)] = events(decision, "RerunFailed")
    assert message.startswith("1 failed ticks of [2026-11-25T00:00:00Z, 2026-11-25T13:00:00Z)")
    again = decide(
        schedule_body(
            body_spec, decision.status, annotations={"punctual.dev/rerun-failed": request}
        ),
        [first],
        now=T0 + 21 * M,
        leadership=LEADER,
    )
    assert [c.name for c in again.creates] in (
        [],
        [retry_job_name(NAME, T0, 2)],
    )  # recovered claim only
    assert not events(again, "RerunFailed")


def test_a_manual_run_is_not_retried() -> None:
    manual = dataclasses.replace(attempt(T0, 1), trigger="req-1")
    _, status = at(FAIL_AT + 2 * M, [manual])
    assert not status.get("retrying")


def test_a_tick_whose_attempt_succeeded_keeps_that_job_while_its_failed_first_is_kept() -> None:
    """History clean-up would delete the succeeded attempt 2 (successfulJobsHistoryLimit 0)
    and keep the failed attempt 1 (failedJobsHistoryLimit 3); with attempt 2's entry gone
    from recentFirings, nothing said it had run, and it ran again (the simulator's finding
    3). The newest attempt of a tick stays while an earlier one does."""
    first = attempt(T0, 1)
    second = attempt(T0, 2, state=JobState.SUCCEEDED, finished=FAIL_AT + 90 * S)
    other = attempt(T0 + H, 1, state=JobState.SUCCEEDED, finished=T0 + H + 60 * S)
    decision, status = at(
        FAIL_AT + 120 * S,
        [first, second, other],
        successfulJobsHistoryLimit=0,
        failedJobsHistoryLimit=3,
    )
    assert [j.name for j in decision.prune] == [other.name]
    status["recentFirings"] = []  # every entry rolled off: only the Jobs remain
    again, _ = at(FAIL_AT + 600 * S, [first, second], status=status, successfulJobsHistoryLimit=0)
    assert not again.creates


def test_a_failed_attempt_being_deleted_spawns_no_next_attempt() -> None:
    """History clean-up deletes a tick's attempts together; in the pass after, the failed
    first may still be seen (deleting) when the later attempt is already gone: the next
    attempt was taken when it failed, not again now (the simulator's finding 3)."""
    going = dataclasses.replace(attempt(T0, 1), deleting=True)
    decision, status = at(FAIL_AT + 600 * S, [going])
    assert not decision.creates and not status.get("retrying")


def test_an_attempt_a_person_deleted_never_starts_again_once_its_record_rolls_off() -> None:
    """Attempt 2 ran and succeeded; a person deleted its Job (history, which would have
    kept it, was not asked); its recentFirings entry rolled off; the failed attempt 1 is
    still kept. status.attempted says attempt 2 started: it does not start again (the
    simulator's finding 5)."""
    first = attempt(T0, 1)
    second = attempt(T0, 2, state=JobState.SUCCEEDED, finished=FAIL_AT + 90 * S)
    _, status = at(FAIL_AT + 120 * S, [first, second])
    assert status["attempted"] == [{"tick": "2026-11-25T12:00:00Z", "attempt": 2}]
    status["recentFirings"] = []  # rolled off; the person's delete took attempt 2's Job
    again, after = at(FAIL_AT + 600 * S, [first], status=status)
    assert not again.creates and not after.get("retrying")
    # Without the record, the same state starts attempt 2 a second time.
    bare = {k: v for k, v in status.items() if k != "attempted"}
    twice, _ = at(FAIL_AT + 600 * S, [first], status=bare)
    assert [c.name for c in twice.creates] == [retry_job_name(NAME, T0, 2)]
    # Once no Job of the tick is kept, nothing derives an attempt of it: the entry goes.
    gone, after = at(FAIL_AT + 700 * S, [], status=status)
    assert not gone.creates and "attempted" not in after
