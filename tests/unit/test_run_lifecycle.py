"""The run lifecycle beyond create-or-skip: buffering, pause on failure, suspend until, freshness.

Same fixed instant and helpers (`builders`) as test_deciding: T0 is a tick of the hourly schedule.
Each test names the rule it checks.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from punctual.core.decisions import Decision
from punctual.core.jobs import JobSnapshot, manual_job_name
from punctual.core.keys import ANNOTATION_RESUME
from punctual.core.models import MAX_RECENT_FIRINGS

from .builders import (
    BROKEN,
    CREATED_,
    DONE,
    FAILED,
    SKIPPED,
    SUCCEEDED,
    T0,
    H,
    M,
    S,
    condition,
    events,
    iso,
    job,
    n,
    parse_iso,
    run,
    schedule_body,
    spec_body,
    status_body,
)

BUFFER_ONE = {"concurrencyPolicy": "BufferOne"}
BUFFER_ALL = {"concurrencyPolicy": "BufferAll"}


def buffered(status: Mapping[str, Any]) -> list[str]:
    return [b["job"] for b in status.get("buffered", [])]


def with_buffer(status: dict[str, Any], *ticks: Any) -> dict[str, Any]:
    return {**status, "buffered": [{"tick": iso(t), "job": n(t)} for t in ticks]}


# -- BufferOne / BufferAll ------------------------------------------------------------


def test_a_tick_due_while_a_job_runs_is_buffered_not_created() -> None:
    spec = spec_body(**BUFFER_ONE)
    decision = run(schedule_body(spec, status_body(spec, cursor=T0 - H)), [job(T0 - H)], now=T0)
    assert decision.creates == ()
    assert decision.status is not None
    assert buffered(decision.status) == [n(T0)]
    assert decision.status["lastScheduledTime"] == iso(T0)  # decided: it waits, it is not lost
    assert events(decision, "Buffered")


def test_a_tick_due_while_nothing_runs_fires_at_once_under_a_buffer_policy() -> None:
    spec = spec_body(**BUFFER_ALL)
    decision = run(schedule_body(spec, status_body(spec, cursor=T0 - H)), [], now=T0)
    assert [c.name for c in decision.creates] == [n(T0)]
    assert decision.status is not None and "buffered" not in decision.status


def test_buffer_one_keeps_the_first_buffered_tick_and_skips_later_ones() -> None:
    spec = spec_body(**BUFFER_ONE)
    status = with_buffer(status_body(spec, cursor=T0), T0)
    decision = run(schedule_body(spec, status), [job(T0 - H)], now=T0 + H)
    assert decision.creates == ()
    assert decision.status is not None
    assert buffered(decision.status) == [n(T0)]
    [skip] = [f for f in decision.status["recentFirings"] if f["outcome"] == "Skipped"]
    assert skip["tick"] == iso(T0 + H)
    assert "BufferOne" in skip["reason"] and iso(T0) in skip["reason"]


def test_buffer_all_keeps_a_backlog_oldest_first_up_to_max_buffered() -> None:
    spec = spec_body(**BUFFER_ALL, maxBuffered=2, missedRunPolicy="RunAll")
    status = status_body(spec, cursor=T0 - 3 * H)
    decision = run(schedule_body(spec, status), [job(T0 - 4 * H)], now=T0 + S)
    assert decision.creates == ()
    assert decision.status is not None
    assert buffered(decision.status) == [n(T0 - 2 * H), n(T0 - H)]
    [skip] = [f for f in decision.status["recentFirings"] if f["outcome"] == "Skipped"]
    assert skip["tick"] == iso(T0)
    assert "maxBuffered 2" in skip["reason"]


def test_the_oldest_buffered_tick_fires_under_its_own_name_when_the_running_job_ends() -> None:
    spec = spec_body(**BUFFER_ALL)
    status = with_buffer(status_body(spec, cursor=T0), T0 - 30 * M, T0)
    decision = run(schedule_body(spec, status), [job(T0 - H, DONE)], now=T0 + 10 * M)
    [create] = decision.creates
    assert create.name == n(T0 - 30 * M) and create.tick == T0 - 30 * M
    assert create.fire_at is not None and create.fire_at <= T0 + 10 * M  # at once
    assert decision.status is not None
    assert buffered(decision.status) == [n(T0)]
    assert n(T0 - 30 * M) in [c["job"] for c in decision.status["inFlight"]]


def test_a_buffered_tick_whose_job_exists_is_not_created_again() -> None:
    spec = spec_body(**BUFFER_ONE)
    status = with_buffer(status_body(spec, cursor=T0), T0)
    decision = run(schedule_body(spec, status), [job(T0 - H, DONE), job(T0)], now=T0 + M)
    assert decision.creates == ()
    assert decision.status is not None and "buffered" not in decision.status


def test_a_buffered_tick_past_its_starting_deadline_is_missed() -> None:
    spec = spec_body(**BUFFER_ONE, startingDeadlineSeconds=300)
    status = with_buffer(status_body(spec, cursor=T0), T0)
    waiting = run(schedule_body(spec, status), [job(T0 - H)], now=T0 + 4 * M)
    assert waiting.next_wake is not None and waiting.next_wake <= T0 + 5 * M + S
    decision = run(schedule_body(spec, status), [job(T0 - H, DONE)], now=T0 + 6 * M)
    assert decision.creates == ()
    assert decision.status is not None and "buffered" not in decision.status
    [missed] = [f for f in decision.status["recentFirings"] if f["outcome"] == "Missed"]
    assert missed["tick"] == iso(T0) and "buffered past startingDeadlineSeconds" in missed["reason"]


def test_leaving_a_buffer_policy_skips_what_was_buffered_and_says_so() -> None:
    spec = spec_body(concurrencyPolicy="Forbid")
    status = with_buffer(status_body(spec, cursor=T0), T0)
    decision = run(schedule_body(spec, status), [job(T0 - H, DONE)], now=T0 + M)
    assert decision.creates == ()
    assert decision.status is not None and "buffered" not in decision.status
    [skip] = [f for f in decision.status["recentFirings"] if f["outcome"] == "Skipped"]
    assert "no longer buffered" in skip["reason"]


# -- pauseOnFailure --------------------------------------------------------------------

PAUSE = {"pauseOnFailure": {"consecutiveFailures": 3}}


def failing_history(spec: Mapping[str, Any], outcomes: list[Any]) -> dict[str, Any]:
    """A status whose last len(outcomes) hourly ticks fired, oldest first, and are running."""
    ticks = [T0 - (len(outcomes) - i) * H for i in range(len(outcomes))]
    firings = [(t, CREATED_) for t in reversed(ticks)]
    return status_body(spec, cursor=ticks[-1], firings=firings)


def decide_after(outcomes: list[Any], spec: Mapping[str, Any], **body: Any) -> Decision:
    status = failing_history(spec, outcomes)
    ticks = [T0 - (len(outcomes) - i) * H for i in range(len(outcomes))]
    jobs = [job(t, state) for t, state in zip(ticks, outcomes, strict=True)]
    return run(schedule_body(spec, status, **body), jobs, now=T0 + S)


def test_three_failed_jobs_in_a_row_pause_the_schedule_and_fire_nothing() -> None:
    decision = decide_after([BROKEN, BROKEN, BROKEN], spec_body(**PAUSE))
    assert decision.creates == ()
    assert decision.status is not None
    paused = condition(decision.status, "Paused")
    assert paused["status"] == "True" and paused["reason"] == "ConsecutiveFailures"
    assert n(T0 - H) in paused["message"] and "punctual resume" in paused["message"]
    assert condition(decision.status, "Ready")["reason"] == "Paused"
    assert decision.status["consecutiveFailures"] == 3
    assert decision.status["lastScheduledTime"] == iso(T0 - H)  # the cursor waits
    assert events(decision, "Paused")


def test_a_success_between_failures_resets_the_count() -> None:
    decision = decide_after([BROKEN, DONE, BROKEN], spec_body(**PAUSE))
    assert decision.status is not None
    assert decision.status["consecutiveFailures"] == 1
    assert condition(decision.status, "Paused")["status"] == "False"
    assert [c.name for c in decision.creates] == [n(T0)]


def test_a_paused_schedule_stays_paused_by_itself_and_a_resume_request_resumes_it() -> None:
    spec = spec_body(**PAUSE)
    paused = decide_after([BROKEN, BROKEN, BROKEN], spec)
    assert paused.status is not None
    status = paused.status
    jobs = [job(T0 - i * H, BROKEN) for i in (1, 2, 3)]
    later = run(schedule_body(spec, status), jobs, now=T0 + 5 * H + S)
    assert later.creates == ()
    assert later.status is None or condition(later.status, "Paused")["status"] == "True"
    resumed = run(schedule_body(spec, status, annotations={ANNOTATION_RESUME: "r1"}), jobs,
                  now=T0 + 5 * H + S)  # fmt: skip
    assert resumed.status is not None
    assert condition(resumed.status, "Paused")["status"] == "False"
    assert resumed.status["consecutiveFailures"] == 0 and resumed.status["lastResume"] == "r1"
    assert events(resumed, "Resumed")
    # The ticks of the pause are a backlog under missedRunPolicy (RunLatest: the newest).
    assert [c.name for c in resumed.creates] == [n(T0 + 5 * H)]
    again = run(schedule_body(spec, resumed.status, annotations={ANNOTATION_RESUME: "r1"}),
                jobs, now=T0 + 5 * H + 2 * S)  # fmt: skip
    assert again.status is None or condition(again.status, "Paused")["status"] == "False"


def test_manual_firings_count_and_a_manual_trigger_still_fires_while_paused() -> None:
    spec = spec_body(**PAUSE)
    status = failing_history(spec, [BROKEN, BROKEN])
    manual = manual_job_name("nightly-report", "m1")
    status["recentFirings"].insert(
        0, {"tick": iso(T0 - 30 * M), "job": manual, "outcome": "Created", "epoch": 6,
            "manual": True},
    )  # fmt: skip
    jobs = [job(T0 - 2 * H, BROKEN), job(T0 - H, BROKEN), job(T0 - 30 * M, BROKEN, name=manual)]
    decision = run(schedule_body(spec, status, trigger="m2"), jobs, now=T0 + S)
    assert decision.status is not None
    assert condition(decision.status, "Paused")["status"] == "True"
    assert [c.name for c in decision.creates] == [manual_job_name("nightly-report", "m2")]


def backfilled(spec: Mapping[str, Any], state: Any) -> tuple[dict[str, Any], list[JobSnapshot]]:
    """Two failed scheduled Jobs (T0-2h, T0-1h), and the Job of a backfill of T0-10h in
    `state`, fired (and recorded as Created) after them."""
    status = failing_history(spec, [BROKEN, BROKEN])
    status["recentFirings"].insert(
        0, {"tick": iso(T0 - 10 * H), "job": n(T0 - 10 * H), "outcome": "Created", "epoch": 6,
            "backfill": True},
    )  # fmt: skip
    jobs = [job(T0 - 2 * H, BROKEN), job(T0 - H, BROKEN), job(T0 - 10 * H, state)]
    return status, jobs


def test_a_failed_backfill_job_counts_as_a_failure_in_tick_order() -> None:
    spec = spec_body(**PAUSE)
    status, jobs = backfilled(spec, BROKEN)
    decision = run(schedule_body(spec, status), jobs, now=T0 + S)
    assert decision.status is not None
    assert decision.status["consecutiveFailures"] == 3
    assert condition(decision.status, "Paused")["status"] == "True"
    assert decision.creates == ()


def test_a_successful_backfill_of_an_older_tick_does_not_reset_newer_failures() -> None:
    spec = spec_body(**PAUSE)
    status, jobs = backfilled(spec, DONE)
    decision = run(schedule_body(spec, status), jobs, now=T0 + S)
    assert decision.status is not None
    assert decision.status["consecutiveFailures"] == 2  # T0-10h comes first in tick order
    assert condition(decision.status, "Paused")["status"] == "False"


# -- suspendUntil ----------------------------------------------------------------------


def test_suspend_until_fires_nothing_before_and_wakes_at_its_end() -> None:
    spec = spec_body(suspendUntil=iso(T0 + 2 * H + 30 * M))
    decision = run(schedule_body(spec, status_body(spec, cursor=T0 - H)), now=T0 + S)
    assert decision.creates == ()
    assert decision.status is not None
    suspended = condition(decision.status, "Suspended")
    assert suspended["status"] == "True" and suspended["reason"] == "SuspendedUntil"
    assert decision.next_wake == T0 + 2 * H + 30 * M


def test_after_suspend_until_the_ticks_in_between_follow_missed_run_policy() -> None:
    spec = spec_body(suspendUntil=iso(T0 + 2 * H + 30 * M))
    decision = run(schedule_body(spec, status_body(spec, cursor=T0 - H)), now=T0 + 2 * H + 30 * M)
    assert decision.status is not None
    assert condition(decision.status, "Suspended")["status"] == "False"
    # RunLatest: the newest due tick (T0 + 2h) is past no deadline, so it fires; the
    # older ones are missed.
    assert [c.name for c in decision.creates] == [n(T0 + 2 * H)]
    missed = [f for f in decision.status["recentFirings"] if f["outcome"] == "Missed"]
    assert missed and "2 ticks" in missed[0]["reason"]


# -- successDeadlineSeconds: Stale -----------------------------------------------------

FRESH = {"successDeadlineSeconds": 600}


def test_no_success_by_the_deadline_makes_the_schedule_stale_naming_the_tick() -> None:
    spec = spec_body(**FRESH)
    status = status_body(spec, cursor=T0, firings=[(T0, CREATED_)])
    decision = run(schedule_body(spec, status), [job(T0)], now=T0 + 11 * M)  # still running
    assert decision.status is not None
    stale = condition(decision.status, "Stale")
    assert stale["status"] == "True" and iso(T0) in stale["message"]
    assert [t for t, _ in events(decision, "Stale")] == ["Warning"]


def test_before_the_deadline_it_is_fresh_and_wakes_at_the_deadline() -> None:
    spec = spec_body(**FRESH)
    status = status_body(spec, cursor=T0, firings=[(T0, CREATED_)])
    decision = run(schedule_body(spec, status), [job(T0)], now=T0 + 5 * M)
    assert decision.status is not None
    assert condition(decision.status, "Stale")["status"] == "False"
    assert decision.next_wake == T0 + 10 * M


def test_a_success_of_that_tick_or_a_later_one_clears_stale() -> None:
    spec = spec_body(**FRESH)
    status = status_body(spec, cursor=T0, firings=[(T0, CREATED_)])
    stale = run(schedule_body(spec, status), [job(T0)], now=T0 + 11 * M)
    assert stale.status is not None
    fresh = run(schedule_body(spec, stale.status), [job(T0, DONE, finished=T0 + 12 * M)],
                now=T0 + 12 * M)  # fmt: skip
    assert fresh.status is not None
    assert condition(fresh.status, "Stale")["status"] == "False"
    assert parse_iso(fresh.status["lastSuccessfulTick"]) == T0


def test_without_the_objective_nothing_about_freshness_is_written() -> None:
    spec = spec_body()
    status = status_body(spec, cursor=T0, firings=[(T0, SUCCEEDED)])
    decision = run(schedule_body(spec, status), [job(T0, DONE)], now=T0 + 2 * M)
    after = decision.status or status
    assert "lastSuccessfulTick" not in after
    assert not [c for c in after.get("conditions", []) if c["type"] in ("Stale", "Paused")]


def test_a_run_whose_firing_left_recent_firings_while_it_ran_counts_once_when_it_fails() -> None:
    # Forbid, one Job stuck for longer than recentFirings holds (the Job controller was
    # down): its Created entry was pushed out by the skips while status.active still
    # listed it. Its failure counts, and pauses at 1; the next decision counts it no more.
    spec = spec_body(pauseOnFailure={"consecutiveFailures": 1}, concurrencyPolicy="Forbid")
    stuck = T0 - 30 * H
    skips = [(T0 - k * H, SKIPPED) for k in range(1, MAX_RECENT_FIRINGS + 1)]
    status = status_body(spec, cursor=T0 - H, firings=skips)
    status["active"] = [{"name": n(stuck), "tick": iso(stuck)}]
    jobs = [job(stuck, BROKEN)]
    decision = run(schedule_body(spec, status), jobs, now=T0 - 30 * M)
    assert decision.status is not None
    assert decision.status["consecutiveFailures"] == 1
    assert condition(decision.status, "Paused")["status"] == "True"
    assert decision.newly_failed == 1
    assert decision.status["active"] == []
    again = run(schedule_body(spec, decision.status), jobs, now=T0 + S)
    assert again.creates == ()
    assert (again.status or decision.status)["consecutiveFailures"] == 1
    assert again.newly_failed == 0


def test_runs_that_outnumber_recent_firings_are_each_counted_once_when_they_fail() -> None:
    # Allow, 30 runs piled up while none could finish: recentFirings holds the newest 20.
    # All fail at once: 30 failures, not 20; and none of them twice.
    spec = spec_body(pauseOnFailure={"consecutiveFailures": 3})
    ticks = [T0 - k * H for k in range(1, 31)]  # newest first
    status = status_body(spec, cursor=T0 - H, firings=[(t, CREATED_) for t in ticks[:20]])
    status["active"] = [{"name": n(t), "tick": iso(t)} for t in reversed(ticks)]
    jobs = [job(t, BROKEN) for t in ticks]
    decision = run(schedule_body(spec, status), jobs, now=T0 - 30 * M)
    assert decision.status is not None
    assert decision.status["consecutiveFailures"] == 30
    assert decision.newly_failed == 30
    again = run(schedule_body(spec, decision.status), jobs, now=T0 - 29 * M)
    assert (again.status or decision.status)["consecutiveFailures"] == 30
    assert again.newly_failed == 0


def test_a_failed_job_status_never_recorded_as_created_still_counts_once() -> None:
    # The Job of T0 - H fired on its claim made ahead; status never said Created before
    # it failed. It counts, once: the next decision sees it recorded Failed.
    spec = spec_body(**PAUSE)
    status = status_body(spec, cursor=T0 - 2 * H,
                         firings=[(T0 - 2 * H, FAILED), (T0 - 3 * H, FAILED)])  # fmt: skip
    status["consecutiveFailures"] = 2
    status["inFlight"] = [{"tick": iso(T0 - H), "job": n(T0 - H), "epoch": 6}]
    jobs = [job(T0 - 3 * H, BROKEN), job(T0 - 2 * H, BROKEN), job(T0 - H, BROKEN)]
    decision = run(schedule_body(spec, status), jobs, now=T0 - 30 * M)
    assert decision.status is not None
    assert decision.status["consecutiveFailures"] == 3
    assert condition(decision.status, "Paused")["status"] == "True"
    again = run(schedule_body(spec, decision.status), jobs, now=T0 - 29 * M)
    assert (again.status or decision.status)["consecutiveFailures"] == 3
