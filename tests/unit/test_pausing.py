"""What keeps a schedule from firing for a while: `pausing`'s records, checked directly.

`suspension` (spec.suspend, spec.suspendUntil), `pause` (pauseOnFailure and resume
requests), `freeze` (Skip FreezeWindows over the due ticks) and `planned` (the spec as
planned while paused or right after a Defer window). Same fixed instant as `builders`.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from punctual.core.keys import ANNOTATION_RESUME
from punctual.core.models import CronScheduleSpec, MissedRunPolicy
from punctual.core.pausing import Pause, Suspension, freeze, pause, planned, suspension
from punctual.core.records import Candidate, SkipReason

from .builders import (
    BROKEN,
    DONE,
    FAILED,
    T0,
    H,
    M,
    iso,
    job,
    n,
    read,
    spec_body,
    status_body,
    window,
)

PAUSE = {"pauseOnFailure": {"consecutiveFailures": 2}}


def parsed(spec: dict[str, Any]) -> CronScheduleSpec:
    return CronScheduleSpec.model_validate(spec)


def test_suspend_true_suspends_and_says_so() -> None:
    assert suspension(parsed(spec_body(suspend=True)), T0) == Suspension(
        "Suspended", "spec.suspend is true: no tick fires"
    )


def test_suspend_until_holds_until_its_instant_and_not_after() -> None:
    spec = parsed(spec_body(suspendUntil=iso(T0 + H)))
    assert suspension(spec, T0) == Suspension(
        "SuspendedUntil", f"no tick fires before {iso(T0 + H)}"
    )
    assert suspension(spec, T0 + H) is None


def test_without_pause_on_failure_nothing_is_counted() -> None:
    spec = spec_body()
    record = pause(read(spec, jobs=[job(T0 - H, BROKEN)]), parsed(spec))
    assert record == Pause(failures=None, failed=(), paused=False, resumed=None)


def test_failed_jobs_in_a_row_pause_at_the_threshold_naming_them_newest_first() -> None:
    spec = spec_body(**PAUSE)
    jobs = [job(T0 - 2 * H, BROKEN), job(T0 - H, BROKEN)]
    record = pause(read(spec, status_body(spec), jobs), parsed(spec))
    assert record.paused and record.failures == 2
    assert record.failed == (n(T0 - H), n(T0 - 2 * H))
    assert record.message.startswith(f"2 Jobs failed in a row ({n(T0 - H)}, {n(T0 - 2 * H)})")


def test_more_failures_than_the_threshold_are_counted_and_the_newest_named_as_such() -> None:
    spec = spec_body(**PAUSE)  # the threshold is 2
    jobs = [job(T0 - 3 * H, BROKEN), job(T0 - 2 * H, BROKEN), job(T0 - H, BROKEN)]
    record = pause(read(spec, status_body(spec), jobs), parsed(spec))
    assert record.failures == 3 and record.failed == (n(T0 - H), n(T0 - 2 * H))
    assert record.message.startswith(
        f"3 Jobs failed in a row (the newest: {n(T0 - H)}, {n(T0 - 2 * H)})"
    )


def test_a_success_resets_the_count() -> None:
    spec = spec_body(**PAUSE)
    jobs = [job(T0 - 3 * H, BROKEN), job(T0 - 2 * H, DONE), job(T0 - H, BROKEN)]
    record = pause(read(spec, status_body(spec), jobs), parsed(spec))
    assert not record.paused and record.failures == 1 and record.message == ""


def test_a_finished_job_already_recorded_is_not_counted_again() -> None:
    spec = spec_body(**PAUSE)
    status = status_body(spec, firings=[(T0 - H, FAILED)])
    status["consecutiveFailures"] = 1
    record = pause(read(spec, status, [job(T0 - H, BROKEN)]), parsed(spec))
    assert record.failures == 1 and not record.paused


def test_a_pause_stays_until_a_resume_request_which_resets_the_count() -> None:
    spec = spec_body(**PAUSE)
    status = status_body(spec, firings=[(T0 - H, FAILED), (T0 - 2 * H, FAILED)])
    status["consecutiveFailures"] = 2
    status["conditions"] = [
        {
            "type": "Paused",
            "status": "True",
            "reason": "ConsecutiveFailures",
            "lastTransitionTime": iso(T0 - H),
        },
    ]
    still = pause(read(spec, status), parsed(spec))
    assert still.paused and still.resumed is None
    asked = read(spec, status, annotations={ANNOTATION_RESUME: "r1"})
    resumed = pause(asked, parsed(spec))
    assert resumed == Pause(
        failures=0, failed=(n(T0 - H), n(T0 - 2 * H)), paused=False, resumed="r1"
    )
    status["lastResume"] = "r1"  # handled: the same request resumes only once
    assert (
        pause(read(spec, status, annotations={ANNOTATION_RESUME: "r1"}), parsed(spec)).resumed
        is None
    )


def test_a_skip_window_skips_the_due_ticks_inside_it_naming_the_window() -> None:
    freezes = [window("release", T0 - M, T0 + H)]
    due = [Candidate(n(T0 - H), T0 - H), Candidate(n(T0), T0)]
    record = freeze(due, freezes, T0 + M)
    assert record.kept == (due[0],)
    [skip] = record.skips
    assert skip.candidate == due[1] and skip.reason is SkipReason.FREEZE_WINDOW
    assert skip.message == f"FreezeWindow reports/release: Skip until {iso(T0 + H)}"
    assert record.now == (freezes[0], T0 + H)


def test_a_defer_window_skips_nothing_but_still_freezes_the_schedule_now() -> None:
    freezes = [window("release", T0 - M, T0 + H, action="Defer")]
    record = freeze([Candidate(n(T0), T0)], freezes, T0)
    assert record.kept == (Candidate(n(T0), T0),) and record.skips == ()
    assert record.now == (freezes[0], T0 + H)


def test_planned_suspends_while_paused_and_runs_latest_right_after_a_defer_window() -> None:
    spec = spec_body(startingDeadlineSeconds=60)
    schedule = read(spec, status_body(spec, cursor=T0 - 3 * H))
    freezes = [window("release", T0 - 3 * H + M, T0 - M, action="Defer")]
    assert planned(parsed(spec), schedule, freezes, paused=True, now=T0).suspend
    after = planned(parsed(spec), schedule, freezes, paused=False, now=T0)
    assert after.missed_run_policy is MissedRunPolicy.RUN_LATEST
    assert after.starting_deadline_seconds is None
    untouched: datetime = T0 - 3 * H - M  # a window that ended before the cursor
    early = [window("old", untouched - H, untouched, action="Defer")]
    assert planned(parsed(spec), schedule, early, paused=False, now=T0) == parsed(spec)
