"""spec.after: a run after each upstream run that ends as named, exactly once, and the gate.

Same fixed instant as `builders`: the downstream (`nightly-report`) was created at
T0 - 30m; its upstream `extract` runs hourly at T0, T0 + 1h, ..., each run ending ten
minutes after its tick. Each test hands `decide` the downstream's body and Jobs and the
upstream as the shell reads it (`chaining.upstream_of`), as the loop would.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

import pytest

from punctual.core import chaining
from punctual.core.deciding import decide
from punctual.core.decisions import Decision
from punctual.core.freezing import Freeze
from punctual.core.jobs import JobSnapshot, JobState
from punctual.core.naming import job_name, retry_job_name
from punctual.core.records import Upstream, Upstreams
from tests.unit.builders import (
    ACTIVE,
    BROKEN,
    CREATED,
    DONE,
    LEADER,
    NAME,
    T0,
    TEMPLATE,
    H,
    M,
    S,
    condition,
    events,
    fingerprint,
    iso,
    job,
    n,
    schedule_body,
    window,
)

UP, UP_UID = "extract", "9d1f0c3e-0000-4000-8000-00000000e0e0"
LOAD, LOAD_UID = "load", "9d1f0c3e-0000-4000-8000-00000000f0f0"


def down_spec(*after: dict[str, Any], **more: Any) -> dict[str, Any]:
    entries = list(after) or [{"schedule": UP, "on": "Succeeded"}]
    return {"after": entries, "jobTemplate": dict(TEMPLATE), **more}


def upstream(
    name: str = UP,
    uid: str = UP_UID,
    jobs: Sequence[JobSnapshot] = (),
    status: dict[str, Any] | None = None,
    spec: dict[str, Any] | None = None,
) -> Upstream:
    body = {
        "metadata": {"name": name, "namespace": "reports", "uid": uid},
        "spec": spec or {"schedule": "0 * * * *"},
        "status": status or {},
    }
    return chaining.upstream_of(name, body, jobs)


def up_job(
    tick: datetime,
    state: JobState,
    *,
    name: str = UP,
    uid: str = UP_UID,
    attempt: int = 1,
) -> JobSnapshot:
    run = retry_job_name(name, tick, attempt) if attempt > 1 else job_name(name, tick)
    made = job(tick, state, schedule_uid=uid, name=run)
    return dataclasses.replace(made, attempt=attempt)


def at(
    now: datetime,
    ups: Mapping[str, Upstream | None],
    *,
    spec: dict[str, Any] | None = None,
    status: dict[str, Any] | None = None,
    jobs: Sequence[JobSnapshot] = (),
    cycle: Sequence[str] | None = None,
    freezes: Sequence[Freeze] = (),
) -> Decision:
    body = schedule_body(spec or down_spec(), status)
    known = Upstreams(ups, None if cycle is None else tuple(cycle))
    return decide(body, jobs, now=now, leadership=LEADER, upstreams=known, freezes=freezes)


def created(decision: Decision) -> list[str]:
    return [c.name for c in decision.creates]


def cursor(decision: Decision) -> list[tuple[str, str, str | None]]:
    assert decision.status is not None
    return [(c["schedule"], c["tick"], c.get("outcome")) for c in decision.status["after"]]


# -- the rule, through `decide` --------------------------------------------------------


def test_a_succeeded_upstream_run_starts_one_run_named_for_its_tick() -> None:
    decision = at(T0 + 11 * M, {UP: upstream(jobs=[up_job(T0, DONE)])})
    assert created(decision) == [n(T0)]
    assert decision.status is not None
    [claim] = decision.status["inFlight"]
    assert claim["upstream"] == [f"{UP}/{job_name(UP, T0)}"]  # the fence, and who started it
    assert cursor(decision) == [(UP, iso(T0), "Succeeded")]
    body = decision.creates[0].body
    env = body["spec"]["template"]["spec"]["containers"][0]["env"]
    told = {e["name"]: e["value"] for e in env}
    assert told["PUNCTUAL_FIRING"] == "after"
    assert told["PUNCTUAL_UPSTREAM"] == f"{UP}/{job_name(UP, T0)}"
    assert decision.lags == ((n(T0), 60.0),)  # ended at T0 + 10m, created at T0 + 11m


def test_a_failed_upstream_run_starts_nothing_and_is_handled() -> None:
    decision = at(T0 + 11 * M, {UP: upstream(jobs=[up_job(T0, BROKEN)])})
    assert created(decision) == []
    assert cursor(decision) == [(UP, iso(T0), "Failed")]


@pytest.mark.parametrize(
    ("on", "state", "runs"),
    [
        ("Succeeded", DONE, True),
        ("Succeeded", BROKEN, False),
        ("Failed", BROKEN, True),
        ("Failed", DONE, False),
        ("Finished", DONE, True),
        ("Finished", BROKEN, True),
    ],
)
def test_on_names_the_outcome_that_starts_a_run(on: str, state: JobState, runs: bool) -> None:
    spec = down_spec({"schedule": UP, "on": on})
    decision = at(T0 + 11 * M, {UP: upstream(jobs=[up_job(T0, state)])}, spec=spec)
    assert created(decision) == ([n(T0)] if runs else [])


def test_a_running_upstream_run_is_waited_for() -> None:
    decision = at(T0 + 5 * M, {UP: upstream(jobs=[up_job(T0, ACTIVE)])})
    assert created(decision) == []
    assert cursor(decision) == [(UP, iso(CREATED), None)]  # a new schedule: from its creation


def test_upstream_runs_from_before_the_downstream_existed_are_not_run_after() -> None:
    early = T0 - H  # before CREATED
    decision = at(T0 + 11 * M, {UP: upstream(jobs=[up_job(early, DONE), up_job(T0, DONE)])})
    assert created(decision) == [n(T0)]


def test_runs_are_handled_in_upstream_tick_order_never_past_one_still_running() -> None:
    jobs = [up_job(T0, ACTIVE), up_job(T0 + H, DONE)]  # Allow: the older one runs long
    decision = at(T0 + H + 11 * M, {UP: upstream(jobs=jobs)})
    assert created(decision) == []
    jobs = [up_job(T0, DONE), up_job(T0 + H, DONE)]
    decision = at(T0 + H + 12 * M, {UP: upstream(jobs=jobs)})
    assert created(decision) == [n(T0), n(T0 + H)]


def test_a_leader_killed_after_the_claim_is_followed_by_one_create_of_the_same_run() -> None:
    ups = {UP: upstream(jobs=[up_job(T0, DONE)])}
    first = at(T0 + 11 * M, ups)
    assert first.status is not None
    # Killed after the claim was written, before the create: the next leader creates it
    # from the claim (the cursor has moved: the rule does not offer it again).
    again = at(T0 + 12 * M, ups, status=first.status)
    assert created(again) == [n(T0)]
    assert again.status is None or again.status["inFlight"] == first.status["inFlight"]
    # Once its Job exists, nothing more.
    made = job(T0, ACTIVE)
    later = at(T0 + 13 * M, ups, status=first.status, jobs=[made])
    assert created(later) == []


def test_a_leader_killed_before_the_claim_decides_the_same_run_again() -> None:
    ups = {UP: upstream(jobs=[up_job(T0, DONE)])}
    assert created(at(T0 + 11 * M, ups)) == created(at(T0 + 14 * M, ups)) == [n(T0)]


def test_a_run_the_downstream_already_has_is_not_started_again() -> None:
    ups = {UP: upstream(jobs=[up_job(T0, DONE)])}
    status = {
        "after": [{"schedule": UP, "tick": iso(CREATED)}],
        "recentFirings": [{"tick": iso(T0), "job": n(T0), "outcome": "Succeeded", "epoch": 6}],
    }
    decision = at(T0 + 11 * M, ups, status=status)
    assert created(decision) == []
    assert cursor(decision) == [(UP, iso(T0), "Succeeded")]


def test_an_upstream_run_pruned_but_recorded_still_counts() -> None:
    status = {
        "recentFirings": [
            {"tick": iso(T0), "job": job_name(UP, T0), "outcome": "Succeeded", "epoch": 6}
        ]
    }
    decision = at(T0 + 11 * M, {UP: upstream(status=status)})
    assert created(decision) == [n(T0)]


def test_an_upstream_tick_to_be_retried_waits_and_runs_after_the_attempt_that_succeeds() -> None:
    spec = {"schedule": "0 * * * *", "retry": {"maxAttempts": 3}}
    failed = up_job(T0, BROKEN)
    decision = at(T0 + 11 * M, {UP: upstream(jobs=[failed], spec=spec)})
    assert created(decision) == []  # attempt 2 comes
    second = up_job(T0, DONE, attempt=2)
    decision = at(T0 + 21 * M, {UP: upstream(jobs=[failed, second], spec=spec)})
    assert created(decision) == [n(T0)]
    [claim] = decision.status["inFlight"] if decision.status else []
    assert claim["upstream"] == [f"{UP}/{retry_job_name(UP, T0, 2)}"]


def test_an_upstream_tick_dead_after_its_last_attempt_starts_on_failed() -> None:
    spec = {"schedule": "0 * * * *", "retry": {"maxAttempts": 2}}
    runs = [up_job(T0, BROKEN), up_job(T0, BROKEN, attempt=2)]
    down = down_spec({"schedule": UP, "on": "Failed"})
    decision = at(T0 + 21 * M, {UP: upstream(jobs=runs, spec=spec)}, spec=down)
    assert created(decision) == [n(T0)]


def test_fan_in_runs_once_every_upstream_ended_as_named_for_the_same_tick() -> None:
    spec = down_spec({"schedule": UP}, {"schedule": LOAD})
    one = upstream(jobs=[up_job(T0, DONE)])
    waiting = upstream(LOAD, LOAD_UID, jobs=[up_job(T0, ACTIVE, name=LOAD, uid=LOAD_UID)])
    assert created(at(T0 + 11 * M, {UP: one, LOAD: waiting}, spec=spec)) == []
    done = upstream(LOAD, LOAD_UID, jobs=[up_job(T0, DONE, name=LOAD, uid=LOAD_UID)])
    decision = at(T0 + 12 * M, {UP: one, LOAD: done}, spec=spec)
    assert created(decision) == [n(T0)]
    assert decision.status is not None
    assert decision.status["inFlight"][0]["upstream"] == [
        f"{UP}/{job_name(UP, T0)}",
        f"{LOAD}/{job_name(LOAD, T0)}",
    ]
    failed = upstream(LOAD, LOAD_UID, jobs=[up_job(T0, BROKEN, name=LOAD, uid=LOAD_UID)])
    assert created(at(T0 + 12 * M, {UP: one, LOAD: failed}, spec=spec)) == []


def test_fan_in_passes_a_tick_one_upstream_never_ran() -> None:
    spec = down_spec({"schedule": UP}, {"schedule": LOAD})
    one = upstream(jobs=[up_job(T0, DONE), up_job(T0 + H, DONE)])
    other = upstream(LOAD, LOAD_UID, jobs=[up_job(T0 + H, DONE, name=LOAD, uid=LOAD_UID)])
    decision = at(T0 + H + 11 * M, {UP: one, LOAD: other}, spec=spec)
    assert created(decision) == [n(T0 + H)]


def test_a_suspended_downstream_records_the_upstream_runs_it_skipped() -> None:
    decision = at(
        T0 + 11 * M, {UP: upstream(jobs=[up_job(T0, DONE)])}, spec=down_spec(suspend=True)
    )
    assert created(decision) == []
    assert decision.status is not None
    [firing] = decision.status["recentFirings"]
    assert (firing["outcome"], firing["tick"]) == ("Skipped", iso(T0))
    assert "suspended" in firing["reason"]
    assert cursor(decision) == [(UP, iso(T0), "Succeeded")]


def test_forbid_skips_a_run_after_while_the_downstream_still_runs() -> None:
    ups = {UP: upstream(jobs=[up_job(T0, DONE), up_job(T0 + H, DONE)])}
    older = job(T0, ACTIVE)  # its run for T0 still runs
    status = {"after": [{"schedule": UP, "tick": iso(T0)}]}
    spec = down_spec(concurrencyPolicy="Forbid")
    decision = at(T0 + H + 11 * M, ups, spec=spec, status=status, jobs=[older])
    assert created(decision) == []
    assert decision.skipped[0][0].value == "concurrencyPolicy=Forbid"


@pytest.mark.parametrize(
    ("ups", "cycle", "says"),
    [
        ({UP: None}, None, "no CronSchedule extract in this namespace"),
        (
            {UP: upstream()},
            (NAME, UP, NAME),
            "a cycle (nightly-report -> extract -> nightly-report)",
        ),
    ],
    ids=["a missing upstream", "a cycle"],
)
def test_a_chain_that_cannot_be_followed_is_an_invalid_spec(
    ups: dict[str, Upstream | None], cycle: Sequence[str] | None, says: str
) -> None:
    decision = at(T0, ups, cycle=cycle)
    assert decision.creates == ()
    assert decision.status is not None
    invalid = condition(decision.status, "InvalidSpec")
    assert invalid["status"] == "True" and says in invalid["message"]
    assert any(says in message for _, message in events(decision, "InvalidSpec"))


def test_nothing_is_decided_before_the_upstreams_are_known() -> None:
    decision = decide(schedule_body(down_spec()), [], now=T0, leadership=LEADER, upstreams=None)
    assert decision.status is None and not decision.writes


# -- the gate --------------------------------------------------------------------------


def gate_spec(within: str = "30m") -> dict[str, Any]:
    return down_spec({"schedule": UP, "within": within}, schedule="15 * * * *")


def test_a_gated_tick_waits_then_runs_when_its_period_succeeded() -> None:
    tick = T0 + 15 * M
    status = {"lastScheduledTime": iso(T0 - 45 * M)}
    waiting = at(
        tick + S, {UP: upstream(jobs=[up_job(T0, ACTIVE)])}, spec=gate_spec(), status=status
    )
    assert created(waiting) == []
    assert waiting.status is not None
    assert waiting.status["gated"] == [
        {"tick": iso(tick), "job": n(tick), "until": iso(tick + 30 * M)}
    ]
    assert waiting.next_wake is not None and waiting.next_wake <= tick + 30 * M
    opened = at(
        tick + 5 * M,
        {UP: upstream(jobs=[up_job(T0, DONE)])},
        spec=gate_spec(),
        status=waiting.status,
    )
    assert created(opened) == [n(tick)]


def test_a_gated_tick_is_missed_with_the_reason_when_within_passes() -> None:
    tick = T0 + 15 * M
    status = {"lastScheduledTime": iso(T0 - 45 * M)}
    ups = {UP: upstream(jobs=[up_job(T0, BROKEN)])}
    waiting = at(tick + S, ups, spec=gate_spec(), status=status)
    missed = at(tick + 31 * M, ups, spec=gate_spec(), status=waiting.status)
    assert created(missed) == []
    assert missed.status is not None
    [firing] = [f for f in missed.status["recentFirings"] if f["outcome"] == "Missed"]
    assert firing["tick"] == iso(tick) and "gate" in firing["reason"]
    assert "gated" not in missed.status


# -- the pure parts --------------------------------------------------------------------


def test_find_cycle_follows_after_back_to_the_start() -> None:
    graph = {"a": ["b"], "b": ["c"], "c": ["a"], "d": ["a"]}
    assert chaining.find_cycle("a", lambda s: graph.get(s, [])) == ("a", "b", "c", "a")
    assert chaining.find_cycle("d", lambda s: graph.get(s, [])) is None
    assert chaining.find_cycle("s", lambda s: ["s"]) == ("s", "s")


def test_upstream_of_reads_runs_from_jobs_and_status() -> None:
    status = {
        "recentFirings": [
            {"tick": iso(T0 - H), "job": job_name(UP, T0 - H), "outcome": "Failed", "epoch": 1},
            {"tick": iso(T0 - 2 * H), "outcome": "Missed", "epoch": 1},
        ],
        "inFlight": [{"tick": iso(T0 + H), "job": job_name(UP, T0 + H), "epoch": 1}],
        "lastScheduledTime": iso(T0 + H),
    }
    up = upstream(jobs=[up_job(T0, DONE)], status=status)
    assert {t: e.outcome.value for t, e in up.ended.items()} == {
        T0: "Succeeded",
        T0 - H: "Failed",
        T0 - 2 * H: "Missed",
    }
    assert up.pending == {T0 + H}  # claimed, not yet seen


def test_a_missing_upstream_keeps_the_fingerprint_so_its_return_is_not_an_edit() -> None:
    gate = gate_spec()
    status = {"lastScheduledTime": iso(T0 - 45 * M), "scheduleFingerprint": fingerprint(gate)}
    decision = at(T0, {UP: None}, spec=gate, status=status)
    assert decision.status is not None
    assert decision.status["scheduleFingerprint"] == fingerprint(gate)
    back = at(T0 + S, {UP: upstream()}, spec=gate, status=decision.status)
    assert not events(back, "ScheduleChanged")


# -- backfills of the upstream ---------------------------------------------------------


def backfilled(*ticks: datetime, outcome: str = "Succeeded") -> dict[str, Any]:
    """The upstream's status after a backfill ran `ticks` (its Jobs pruned since)."""
    return {
        "recentFirings": [
            {
                "tick": iso(t),
                "job": job_name(UP, t),
                "outcome": outcome,
                "epoch": 6,
                "backfill": True,
            }
            for t in ticks
        ]
    }


def test_a_backfill_of_the_upstream_runs_after_each_backfilled_run_once() -> None:
    past = [T0 - 3 * H, T0 - 2 * H]  # before the downstream existed
    ups = {UP: upstream(status=backfilled(*past))}
    first = at(T0, ups)
    assert created(first) == [n(t) for t in past]
    assert first.status is not None
    [entry] = first.status["after"]
    assert entry["backfilled"] == [iso(t) for t in past]
    # Its runs pruned and out of its recentFirings: the list alone keeps it from a second.
    forgotten = {**first.status, "inFlight": [], "recentFirings": []}
    assert created(at(T0 + M, ups, status=forgotten)) == []


def test_the_backfilled_list_forgets_a_tick_the_upstream_no_longer_records() -> None:
    past = [T0 - 3 * H, T0 - 2 * H]
    first = at(T0, {UP: upstream(status=backfilled(*past))})
    assert first.status is not None
    runs = [job(t, ACTIVE) for t in past]  # created on their claims
    ups = {UP: upstream(status=backfilled(past[1]))}
    later = at(T0 + M, ups, status=first.status, jobs=runs)
    assert later.status is not None
    assert later.status["after"][0]["backfilled"] == [iso(past[1])]
    assert created(later) == []


def test_a_backfilled_run_that_failed_or_an_entry_that_says_no_starts_nothing() -> None:
    failed = {UP: upstream(status=backfilled(T0 - 2 * H, outcome="Failed"))}
    assert created(at(T0, failed)) == []
    no = down_spec({"schedule": UP, "backfills": False})
    assert created(at(T0, {UP: upstream(status=backfilled(T0 - 2 * H))}, spec=no)) == []


def test_an_upstream_tick_still_buffered_or_gated_is_waited_for() -> None:
    for key, entry in (
        ("buffered", {"tick": iso(T0), "job": job_name(UP, T0)}),
        ("gated", {"tick": iso(T0), "job": job_name(UP, T0), "until": iso(T0 + H)}),
    ):
        up = upstream(jobs=[up_job(T0 + H, DONE)], status={key: [entry]})
        assert up.pending == {T0}
        assert created(at(T0 + H + 11 * M, {UP: up})) == [], key


def test_the_downstreams_index_follows_spec_after_as_schedules_change() -> None:
    from punctual.runtime.chains import Downstreams

    index = Downstreams()
    load = {"spec": {"after": [{"schedule": "extract"}, {"schedule": "fetch"}]}}
    index.observe(("ns", "load"), load)
    index.observe(("ns", "report"), {"spec": {"after": [{"schedule": "extract"}]}})
    index.observe(("other", "load"), load)
    assert index.of(("ns", "extract")) == [("ns", "load"), ("ns", "report")]
    assert index.of(("ns", "fetch")) == [("ns", "load")]
    index.observe(("ns", "load"), {"spec": {"schedule": "* * * * *"}})  # no longer after
    assert index.of(("ns", "extract")) == [("ns", "report")]
    index.observe(("ns", "report"), None)  # deleted
    assert index.of(("ns", "extract")) == []


def test_after_added_to_a_schedule_that_ran_does_not_replay_the_upstreams_past() -> None:
    ran = {"recentFirings": [{"tick": iso(T0 - H), "outcome": "Missed", "epoch": 6}]}
    ups = {UP: upstream(jobs=[up_job(T0, DONE)])}
    assert created(at(T0 + 11 * M, ups, status=ran)) == []
    grown = {"after": [{"schedule": LOAD, "tick": iso(T0 - H)}]}  # an upstream added
    spec = down_spec({"schedule": LOAD}, {"schedule": UP})
    load = upstream(LOAD, LOAD_UID, jobs=[up_job(T0, DONE, name=LOAD, uid=LOAD_UID)])
    assert created(at(T0 + 11 * M, {**ups, LOAD: load}, spec=spec, status=grown)) == [n(T0)]


def test_a_manual_trigger_of_the_upstream_starts_it_unless_the_entry_says_no() -> None:
    manual = dataclasses.replace(up_job(T0 + 5 * M, DONE, name=UP), trigger="r1")
    ups = {UP: upstream(jobs=[manual])}
    assert created(at(T0 + 16 * M, ups)) == [n(T0 + 5 * M)]
    no = down_spec({"schedule": UP, "manual": False})
    assert created(at(T0 + 16 * M, ups, spec=no)) == []


def test_a_defer_window_holds_runs_after_until_its_end_and_a_skip_window_skips_them() -> None:
    ups = {UP: upstream(jobs=[up_job(T0, DONE)])}
    defer = window("release", T0, T0 + H, "Defer")
    held = at(T0 + 11 * M, ups, freezes=[defer])
    assert created(held) == []
    assert held.next_wake == T0 + H
    after_it = at(T0 + H + S, ups, status=held.status, freezes=[defer])
    assert created(after_it) == [n(T0)]
    skip = window("release", T0, T0 + H, "Skip")
    skipped = at(T0 + 11 * M, ups, freezes=[skip])
    assert created(skipped) == []
    assert [r.value for r, _ in skipped.skipped] == ["FreezeWindow=Skip"]


def test_a_run_after_that_waits_in_a_buffer_stays_one_when_it_fires() -> None:
    ups = {UP: upstream(jobs=[up_job(T0, DONE)])}
    spec = down_spec(concurrencyPolicy="BufferOne")
    status = {"after": [{"schedule": UP, "tick": iso(CREATED)}]}
    other = job(T0 - 10 * M, ACTIVE, name=n(T0 - 10 * M))  # a run still running
    waiting = at(T0 + 11 * M, ups, spec=spec, status=status, jobs=[other])
    assert created(waiting) == []
    assert waiting.status is not None
    [entry] = waiting.status["buffered"]
    assert entry["upstream"] == [f"{UP}/{job_name(UP, T0)}"]
    fired = at(T0 + 12 * M, ups, spec=spec, status=waiting.status)
    assert created(fired) == [n(T0)]
    assert fired.status is not None
    [claim] = [c for c in fired.status["inFlight"] if c["job"] == n(T0)]
    assert claim["upstream"] == [f"{UP}/{job_name(UP, T0)}"]  # recovered as a run after


def test_an_upstream_with_an_unreadable_spec_or_status_is_read_without_a_crash() -> None:
    body = {
        "metadata": {"name": UP, "uid": UP_UID},
        "spec": {"retry": {"maxAttempts": "many"}},
        "status": {"recentFirings": "garbage"},
    }
    up = chaining.upstream_of(UP, body, [up_job(T0, BROKEN)])
    assert up.ended[T0].outcome.value == "Failed" and up.pending == frozenset()


def test_a_claim_in_flight_is_still_created_while_its_upstream_is_missing() -> None:
    first = at(T0 + 11 * M, {UP: upstream(jobs=[up_job(T0, DONE)])})
    assert first.status is not None  # claimed; then the upstream is deleted, the leader dies
    again = at(T0 + 12 * M, {UP: None}, status=first.status)
    assert created(again) == [n(T0)]
    assert again.status is not None
    invalid = condition(again.status, "InvalidSpec")
    assert invalid["status"] == "True" and "no CronSchedule extract" in invalid["message"]
    assert again.status["after"] == first.status["after"]  # held where it was


def test_a_gate_whose_upstream_is_missing_waits_then_misses_and_says_why() -> None:
    tick = T0 + 15 * M
    status = {"lastScheduledTime": iso(T0 - 45 * M)}
    waiting = at(tick + S, {UP: None}, spec=gate_spec(), status=status)
    assert waiting.status is not None and waiting.status["gated"]
    assert condition(waiting.status, "InvalidSpec")["status"] == "True"
    missed = at(tick + 31 * M, {UP: None}, spec=gate_spec(), status=waiting.status)
    assert missed.status is not None
    assert [f["outcome"] for f in missed.status["recentFirings"]][:1] == ["Missed"]


def test_a_rerun_of_a_dead_upstream_tick_that_succeeds_runs_after_once() -> None:
    failed = up_job(T0, BROKEN)
    first = at(T0 + 11 * M, {UP: upstream(jobs=[failed])})
    assert created(first) == []  # dead: passed over
    rerun = up_job(T0, DONE, attempt=2)  # punctual backfill --failed, hours later
    ups = {UP: upstream(jobs=[failed, rerun])}
    later = at(T0 + 3 * H, ups, status=first.status)
    assert created(later) == [n(T0)]
    assert later.status is not None
    assert later.status["after"][0]["backfilled"] == [iso(T0)]
    forgotten = {**later.status, "inFlight": [], "recentFirings": []}
    assert created(at(T0 + 4 * H, ups, status=forgotten)) == []


def test_a_rerun_that_succeeds_does_not_run_a_finished_downstream_a_second_time() -> None:
    spec = down_spec({"schedule": UP, "on": "Finished"})
    failed = up_job(T0, BROKEN)
    first = at(T0 + 11 * M, {UP: upstream(jobs=[failed])}, spec=spec)
    assert created(first) == [n(T0)]  # the tick's first end
    ups = {UP: upstream(jobs=[failed, up_job(T0, DONE, attempt=2)])}
    forgotten = {**(first.status or {}), "inFlight": [], "recentFirings": []}
    assert created(at(T0 + 3 * H, ups, spec=spec, status=forgotten)) == []
