"""One decision for one schedule, as a table of cases around one fixed instant.

T0 is the top of an hour and a tick of the hourly schedule most cases use, so
"T0 - 3h" is three ticks ago (see `builders`, which makes the bodies and Jobs). Each
case lists spec, status and environment, then what the Decision must say. Case names
read as the rule.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

import pytest

from punctual.core.deciding import IN_FLIGHT_RECHECK
from punctual.core.decisions import WriteDelay
from punctual.core.jobs import JobSnapshot, manual_job_name
from punctual.core.models import FiringOutcome

from .builders import (
    ACTIVE,
    BROKEN,
    CREATED,
    CREATED_,
    DONE,
    GENERATION,
    LEADER,
    MISSED,
    MS,
    NAME,
    NAMESPACE,
    OTHER_UID,
    PREVIOUS_EPOCH,
    SKIPPED,
    SUCCEEDED,
    T0,
    TEMPLATE,
    UID,
    H,
    M,
    S,
    claimed_ahead_status,
    condition,
    events,
    fingerprint,
    iso,
    job,
    n,
    parse_iso,
    run,
    schedule_body,
    spec_body,
    status_body,
    steady_status,
    written,
)

# -- the table -------------------------------------------------------------------------


@dataclass(frozen=True)
class Case:
    name: str
    # spec
    spec: Mapping[str, Any] = field(default_factory=dict)
    # status
    cursor: datetime | None = None
    in_flight: tuple[datetime, ...] = ()
    last_trigger: str | None = None
    # environment
    jobs: tuple[JobSnapshot, ...] = ()
    trigger: str | None = None
    created: datetime = CREATED
    now: datetime = T0 + 5 * S
    # expectations
    creates: tuple[str, ...] = ()
    replace: tuple[str, ...] = ()
    prune: tuple[str, ...] = ()
    in_flight_after: tuple[str, ...] = ()
    firings: tuple[tuple[str | None, FiringOutcome], ...] = ()  # newest first
    cursor_after: datetime | str | None = "unchanged"


MANUAL_1 = manual_job_name(NAME, "req-1")
FORBID = {"concurrencyPolicy": "Forbid"}
REPLACE = {"concurrencyPolicy": "Replace"}

CASES = [
    # --- never ran / ordinary ticks -------------------------------------------------
    Case("never ran, not time yet: nothing", now=T0 - S),
    Case(
        "never ran, is time: one Job for the tick, claimed in flight",
        creates=(n(T0),),
        in_flight_after=(n(T0),),
        firings=((n(T0), CREATED_),),
        cursor_after=T0,
    ),
    Case("never ran, created after the tick: it never fires", created=T0 + 2 * S),
    Case(
        "prev ran, is time: one Job for the tick",
        cursor=T0 - H,
        creates=(n(T0),),
        in_flight_after=(n(T0),),
        firings=((n(T0), CREATED_),),
        cursor_after=T0,
    ),
    Case("prev ran, not time yet: nothing", cursor=T0, now=T0 + 59 * M),
    Case("prev ran, Job done, not time yet: nothing", cursor=T0, jobs=(job(T0, DONE),)),
    # --- in-flight claims -----------------------------------------------------------
    Case(
        "claim in flight, its Job not seen: created again, still in flight",
        cursor=T0,
        in_flight=(T0,),
        creates=(n(T0),),
        in_flight_after=(n(T0),),
    ),
    Case(
        "claim in flight, its Job seen running: resolved",
        cursor=T0,
        in_flight=(T0,),
        jobs=(job(T0),),
    ),
    Case(
        "claim in flight, its Job seen finished: resolved",
        cursor=T0,
        in_flight=(T0,),
        jobs=(job(T0, DONE),),
    ),
    Case(
        "claim in flight, only another schedule's Job of that name seen: created again",
        cursor=T0,
        in_flight=(T0,),
        jobs=(job(T0, schedule_uid=OTHER_UID),),
        creates=(n(T0),),
        in_flight_after=(n(T0),),
    ),
    Case(
        "claim in flight, Forbid, another Job runs: still created (it was decided before)",
        spec=FORBID,
        cursor=T0,
        in_flight=(T0,),
        jobs=(job(T0 - H),),
        creates=(n(T0),),
        in_flight_after=(n(T0),),
    ),
    Case(
        "claim in flight and the next tick due, Forbid: the claim counts as running",
        spec=FORBID,
        cursor=T0 - H,
        in_flight=(T0 - H,),
        creates=(n(T0 - H),),
        in_flight_after=(n(T0 - H),),
        firings=((None, SKIPPED),),
        cursor_after=T0,
    ),
    Case(
        "two claims in flight, one seen: only the other is created again",
        cursor=T0,
        in_flight=(T0 - H, T0),
        jobs=(job(T0 - H),),
        creates=(n(T0),),
        in_flight_after=(n(T0),),
    ),
    # --- concurrency ----------------------------------------------------------------
    Case(
        "is time, Forbid, prev Job still runs: tick skipped",
        spec=FORBID,
        cursor=T0 - H,
        jobs=(job(T0 - H),),
        firings=((None, SKIPPED),),
        cursor_after=T0,
    ),
    Case(
        "is time, Forbid, prev Job succeeded: created",
        spec=FORBID,
        cursor=T0 - H,
        jobs=(job(T0 - H, DONE),),
        creates=(n(T0),),
        in_flight_after=(n(T0),),
        firings=((n(T0), CREATED_),),
        cursor_after=T0,
    ),
    Case(
        "is time, Forbid, prev Job failed: created",
        spec=FORBID,
        cursor=T0 - H,
        jobs=(job(T0 - H, BROKEN),),
        creates=(n(T0),),
        in_flight_after=(n(T0),),
        firings=((n(T0), CREATED_),),
        cursor_after=T0,
    ),
    Case(
        "is time, Forbid, prev Job being deleted: created",
        spec=FORBID,
        cursor=T0 - H,
        jobs=(job(T0 - H, deleting=True),),
        creates=(n(T0),),
        in_flight_after=(n(T0),),
        firings=((n(T0), CREATED_),),
        cursor_after=T0,
    ),
    Case(
        "is time, Forbid, only another schedule's Job runs: created",
        spec=FORBID,
        cursor=T0 - H,
        jobs=(job(T0 - H, schedule_uid=OTHER_UID),),
        creates=(n(T0),),
        in_flight_after=(n(T0),),
        firings=((n(T0), CREATED_),),
        cursor_after=T0,
    ),
    Case(
        "is time, Replace, prev Job still runs: it is deleted and the new one created",
        spec=REPLACE,
        cursor=T0 - H,
        jobs=(job(T0 - H),),
        replace=(n(T0 - H),),
        creates=(n(T0),),
        in_flight_after=(n(T0),),
        firings=((n(T0), CREATED_),),
        cursor_after=T0,
    ),
    Case(
        "is time, Replace, nothing runs: created, nothing deleted",
        spec=REPLACE,
        cursor=T0 - H,
        jobs=(job(T0 - H, DONE),),
        creates=(n(T0),),
        in_flight_after=(n(T0),),
        firings=((n(T0), CREATED_),),
        cursor_after=T0,
    ),
    Case(
        "is time, Allow, prev Job still runs: created anyway",
        spec={"concurrencyPolicy": "Allow"},
        cursor=T0 - H,
        jobs=(job(T0 - H), job(T0 - 2 * H)),
        creates=(n(T0),),
        in_flight_after=(n(T0),),
        firings=((n(T0), CREATED_),),
        cursor_after=T0,
    ),
    # --- missed ticks ---------------------------------------------------------------
    Case(
        "operator down 3 ticks, RunLatest: the newest is created, the others missed",
        cursor=T0 - 3 * H,
        creates=(n(T0),),
        in_flight_after=(n(T0),),
        firings=((n(T0), CREATED_), (None, MISSED)),
        cursor_after=T0,
    ),
    Case(
        "operator down 3 ticks, RunAll: all three created, oldest first",
        spec={"missedRunPolicy": "RunAll"},
        cursor=T0 - 3 * H,
        creates=(n(T0 - 2 * H), n(T0 - H), n(T0)),
        in_flight_after=(n(T0 - 2 * H), n(T0 - H), n(T0)),
        firings=((n(T0), CREATED_), (n(T0 - H), CREATED_), (n(T0 - 2 * H), CREATED_)),
        cursor_after=T0,
    ),
    Case(
        "operator down 3 ticks, RunAll, cap 2: the newest two created, one missed",
        spec={"missedRunPolicy": "RunAll", "maxMissedRuns": 2},
        cursor=T0 - 3 * H,
        creates=(n(T0 - H), n(T0)),
        in_flight_after=(n(T0 - H), n(T0)),
        firings=((n(T0), CREATED_), (n(T0 - H), CREATED_), (None, MISSED)),
        cursor_after=T0,
    ),
    Case(
        "operator down 3 ticks, Skip: none created, all recorded skipped",
        spec={"missedRunPolicy": "Skip"},
        cursor=T0 - 3 * H,
        firings=((None, SKIPPED),),
        cursor_after=T0,
    ),
    Case(
        "operator down 3 ticks, RunLatest, past deadline: none created, all missed",
        spec={"startingDeadlineSeconds": 1},
        cursor=T0 - 3 * H,
        firings=((None, MISSED),),
        cursor_after=T0,
    ),
    Case(
        "operator down 3 ticks, RunAll, Forbid: the oldest runs, the others are skipped",
        spec={"missedRunPolicy": "RunAll", **FORBID},
        cursor=T0 - 3 * H,
        creates=(n(T0 - 2 * H),),
        in_flight_after=(n(T0 - 2 * H),),
        firings=((None, SKIPPED), (None, SKIPPED), (n(T0 - 2 * H), CREATED_)),
        cursor_after=T0,
    ),
    Case(
        "operator down 3 ticks, RunAll, Replace: only the newest runs",
        spec={"missedRunPolicy": "RunAll", **REPLACE},
        cursor=T0 - 3 * H,
        creates=(n(T0),),
        in_flight_after=(n(T0),),
        firings=((n(T0), CREATED_), (None, SKIPPED), (None, SKIPPED)),
        cursor_after=T0,
    ),
    # --- history --------------------------------------------------------------------
    Case(
        "successful history 2: the oldest successful Jobs are pruned",
        spec={"successfulJobsHistoryLimit": 2},
        cursor=T0,
        jobs=tuple(job(T0 - k * H, DONE) for k in range(4)),
        prune=(n(T0 - 3 * H), n(T0 - 2 * H)),
    ),
    Case(
        "failed history 1: older failed Jobs pruned, successful ones counted apart",
        spec={"failedJobsHistoryLimit": 1, "successfulJobsHistoryLimit": 3},
        cursor=T0,
        jobs=(
            job(T0, BROKEN),
            job(T0 - H, DONE),
            job(T0 - 2 * H, BROKEN),
            job(T0 - 3 * H, DONE),
            job(T0 - 4 * H, BROKEN),
        ),
        prune=(n(T0 - 2 * H), n(T0 - 4 * H)),
    ),
    Case(
        "history is by finish time: a Job that finished last is kept though its tick is older",
        spec={"successfulJobsHistoryLimit": 1},
        cursor=T0,
        jobs=(job(T0 - H, DONE, finished=T0 + 2 * M), job(T0, DONE, finished=T0 + M)),
        prune=(n(T0),),
    ),
    Case(
        "history 0: every finished Job pruned, running Jobs never",
        spec={"successfulJobsHistoryLimit": 0, "failedJobsHistoryLimit": 0},
        cursor=T0,
        jobs=(job(T0), job(T0 - H, DONE), job(T0 - 2 * H, BROKEN), job(T0 - 3 * H)),
        prune=(n(T0 - H), n(T0 - 2 * H)),
    ),
    Case(
        "history: a Job already being deleted is not pruned again and does not count",
        spec={"successfulJobsHistoryLimit": 1},
        cursor=T0,
        jobs=(job(T0, DONE, deleting=True), job(T0 - H, DONE), job(T0 - 2 * H, DONE)),
        prune=(n(T0 - 2 * H),),
    ),
    Case(
        "history: another schedule's finished Jobs are never pruned",
        spec={"successfulJobsHistoryLimit": 0},
        cursor=T0,
        jobs=(job(T0 - H, DONE, schedule_uid=OTHER_UID),),
    ),
    Case(
        "history 0: a due tick whose Job exists is recorded, not created again",
        # The claim was lost (a restored status), or claimed ahead and its status write
        # left for later: the Job is the record. The status write (cursor past the tick)
        # goes first, never delayed, so pruning the Job then cannot bring the tick back.
        spec={"successfulJobsHistoryLimit": 0},
        cursor=T0 - H,
        jobs=(job(T0, DONE), job(T0 - H, DONE)),
        creates=(),
        in_flight_after=(),
        firings=((n(T0), SUCCEEDED),),
        prune=(n(T0 - H), n(T0)),
        cursor_after=T0,
    ),
    Case(
        "history 0: a resolved claim's finished Job goes (the status write comes first)",
        spec={"successfulJobsHistoryLimit": 0},
        cursor=T0,
        in_flight=(T0,),
        jobs=(job(T0, DONE),),
        prune=(n(T0),),
    ),
    # --- manual triggers ------------------------------------------------------------
    Case(
        "trigger with a new request: a manual Job fires now",
        cursor=T0,
        trigger="req-1",
        now=T0 + 30 * M,
        creates=(MANUAL_1,),
        in_flight_after=(MANUAL_1,),
        firings=((MANUAL_1, CREATED_),),
    ),
    Case(
        "trigger with the request already handled: nothing",
        cursor=T0,
        trigger="req-1",
        last_trigger="req-1",
        now=T0 + 30 * M,
    ),
    Case(
        "trigger with a newer request than the one handled: fires",
        cursor=T0,
        trigger="req-1",
        last_trigger="req-0",
        now=T0 + 30 * M,
        creates=(MANUAL_1,),
        in_flight_after=(MANUAL_1,),
        firings=((MANUAL_1, CREATED_),),
    ),
    Case(
        "trigger, Forbid, a Job runs: the manual firing is skipped",
        spec=FORBID,
        cursor=T0,
        jobs=(job(T0),),
        trigger="req-1",
        now=T0 + 30 * M,
        firings=((None, SKIPPED),),
    ),
    Case(
        "trigger and a due tick at once, Allow: both fire",
        cursor=T0 - H,
        trigger="req-1",
        creates=(n(T0), MANUAL_1),
        in_flight_after=(n(T0), MANUAL_1),
        firings=((MANUAL_1, CREATED_), (n(T0), CREATED_)),
        cursor_after=T0,
    ),
    # --- suspend --------------------------------------------------------------------
    Case(
        "suspended, is time: nothing fires, the cursor stays",
        spec={"suspend": True},
        cursor=T0 - H,
    ),
    Case(
        "suspended, a claim in flight: it is still finished",
        spec={"suspend": True},
        cursor=T0,
        in_flight=(T0,),
        creates=(n(T0),),
        in_flight_after=(n(T0),),
    ),
]


def _firing_key(entry: Mapping[str, Any]) -> tuple[str | None, FiringOutcome]:
    return entry.get("job"), FiringOutcome(entry["outcome"])


@pytest.mark.parametrize("case", CASES, ids=[case.name for case in CASES])
def test_decide(case: Case) -> None:
    spec = spec_body(**case.spec)
    status = status_body(
        spec, cursor=case.cursor, in_flight=case.in_flight, last_trigger=case.last_trigger
    )
    body = schedule_body(spec, status, trigger=case.trigger, created=case.created)
    decision = run(body, case.jobs, now=case.now)

    assert tuple(c.name for c in decision.creates) == case.creates
    assert tuple(d.name for d in decision.replace) == case.replace
    assert sorted(d.name for d in decision.prune) == sorted(case.prune)
    after = written(decision, status)
    claims = after.get("inFlight", [])
    due_claims = [c for c in claims if parse_iso(c["tick"]) <= case.now]
    assert tuple(c["job"] for c in due_claims) == case.in_flight_after
    # Beyond the due claims nothing is in flight: the ticks ahead are claimed by the
    # window, which reaches at least the next tick.
    assert [c["job"] for c in claims if parse_iso(c["tick"]) > case.now] == []
    if decision.status is not None:
        upcoming = after.get("nextScheduleTime")
        suspended = condition(after, "Suspended")["status"] == "True"
        if upcoming and not suspended:
            assert parse_iso(after["claimedThrough"]) >= parse_iso(upcoming)
    assert tuple(_firing_key(f) for f in after.get("recentFirings", [])) == case.firings
    expected_cursor = case.cursor if case.cursor_after == "unchanged" else case.cursor_after
    assert after.get("lastScheduledTime") == (
        iso(expected_cursor) if isinstance(expected_cursor, datetime) else None
    )
    # Whatever else happens: a Job named for a tick at or before the old cursor is only
    # ever created to finish a claim, and nothing is both created and deleted.
    for create in decision.creates:
        if case.cursor is not None and create.tick <= case.cursor and not create.manual:
            assert create.tick in case.in_flight
    deleted = {d.name for d in (*decision.replace, *decision.prune)}
    assert not deleted & {c.name for c in decision.creates}
    # A Job is created only on a written claim: one claimed ahead, or one this
    # decision writes first.
    for create in decision.creates:
        claimed_before = create.name in {c["job"] for c in status.get("inFlight", [])}
        if not claimed_before:
            assert decision.status is not None and decision.write_delay is WriteDelay.NEVER
            assert create.name in {c["job"] for c in after["inFlight"]}


# -- the first tick, in full -----------------------------------------------------------


def test_first_tick_claims_the_tick_in_status_and_creates_one_job() -> None:
    now = T0 + 5 * S
    decision = run(schedule_body(), now=now)

    # One Job, named by the schedule and the tick's Unix seconds.
    [create] = decision.creates
    assert create.name == f"{NAME}-{int(T0.timestamp())}" == n(T0)
    assert create.tick == T0
    assert create.manual is False
    # The claim: cursor moved, tick in flight and recorded, all in one status write.
    status = decision.status
    assert status is not None
    assert status["lastScheduledTime"] == "2026-11-25T12:00:00Z"
    assert status["nextScheduleTime"] == "2026-11-25T13:00:00Z"
    assert status["inFlight"] == [
        {"tick": "2026-11-25T12:00:00Z", "job": create.name, "epoch": LEADER.epoch},
    ]
    # The next tick, claimed ahead by the window: firing it will need only the create.
    assert status["claimedThrough"] == "2026-11-25T13:00:00Z"
    assert status["claimEpoch"] == LEADER.epoch
    [firing] = status["recentFirings"]
    assert firing["job"] == create.name
    assert firing["outcome"] == "Created"
    assert firing["tick"] == "2026-11-25T12:00:00Z"
    assert firing["epoch"] == LEADER.epoch
    assert status["activeCount"] == 1
    assert [a["name"] for a in status["active"]] == [create.name]
    assert status["observedGeneration"] == GENERATION
    assert status["scheduleFingerprint"] == fingerprint(spec_body())
    assert condition(status, "Ready")["status"] == "True"
    assert condition(status, "InvalidSpec")["status"] == "False"
    assert condition(status, "Suspended")["status"] == "False"
    # Nothing to delete; look again soon, to see the claim's Job.
    assert decision.replace == () and decision.prune == ()
    assert decision.next_wake == now + IN_FLIGHT_RECHECK
    assert decision.writes


def test_nothing_due_and_status_current_writes_nothing_and_sleeps_until_the_next_tick() -> None:
    spec = spec_body()
    first = run(schedule_body(spec), now=T0 + 5 * S)
    [create] = first.creates
    jobs = [job(T0)]  # the watch delivers the Job

    # The claim resolves (one more write), then the status is current.
    second = run(schedule_body(spec, first.status), jobs, now=T0 + 7 * S)
    assert second.status is not None
    assert second.status.get("inFlight", []) == []
    assert second.status["claimedThrough"] == iso(T0 + H)  # claimed ahead
    assert second.creates == ()
    assert [a["name"] for a in second.status["active"]] == [create.name]

    for now in (T0 + 10 * S, T0 + 30 * M, T0 + H - S):
        third = run(schedule_body(spec, second.status), jobs, now=now)
        assert third.status is None, now
        assert third.creates == () and third.replace == () and third.prune == ()
        assert third.events == ()
        assert not third.writes
        assert third.next_wake == T0 + H

    # The next tick, on time, fires again, on the claim claimed ahead: no write first.
    fourth = run(schedule_body(spec, second.status), jobs, now=T0 + H)
    assert [c.name for c in fourth.creates] == [n(T0 + H)]
    assert fourth.write_delay is not WriteDelay.NEVER


def test_an_unresolved_claim_asks_to_be_looked_at_again_before_the_next_tick() -> None:
    spec = spec_body()
    decision = run(
        schedule_body(spec, status_body(spec, cursor=T0, in_flight=[T0])), now=T0 + 30 * M
    )
    assert [c.name for c in decision.creates] == [n(T0)]
    assert decision.next_wake == T0 + 30 * M + IN_FLIGHT_RECHECK


def test_a_recovered_claim_is_stamped_with_this_leaders_epoch_and_not_recorded_twice() -> None:
    spec = spec_body()
    status = status_body(spec, cursor=T0, in_flight=[T0], firings=[(T0, CREATED_)])
    decision = run(schedule_body(spec, status), now=T0 + 20 * S)
    [create] = decision.creates
    assert create.body["metadata"]["annotations"]["punctual.dev/epoch"] == str(LEADER.epoch)
    assert decision.status is not None
    # The claim keeps the epoch that decided it; the firing is recorded once.
    assert decision.status["inFlight"] == [
        {"tick": iso(T0), "job": n(T0), "epoch": PREVIOUS_EPOCH},
    ]
    assert decision.status["claimedThrough"] == iso(T0 + H)  # claimed ahead
    assert [f["job"] for f in decision.status["recentFirings"]] == [n(T0)]


# -- concurrency, in detail ------------------------------------------------------------


def test_forbid_records_the_skipped_tick_with_a_reason_naming_the_running_job() -> None:
    spec = spec_body(**FORBID)
    running = job(T0 - H)
    decision = run(schedule_body(spec, status_body(spec, cursor=T0 - H)), [running], now=T0)
    assert decision.creates == ()
    assert decision.status is not None
    [skip] = decision.status["recentFirings"]
    assert skip["outcome"] == "Skipped"
    assert skip["tick"] == iso(T0)
    assert "job" not in skip
    assert running.name in skip["reason"]
    assert "Forbid" in skip["reason"]
    assert any(running.name in message for _, message in events(decision, "Skipped"))
    # The skipped tick is decided: the cursor passed it, so it never fires later.
    assert decision.status["lastScheduledTime"] == iso(T0)
    later = run(schedule_body(spec, decision.status), [job(T0 - H, DONE)], now=T0 + M)
    assert later.creates == ()


def test_replace_names_the_running_job_with_its_uid_and_marks_its_firing_replaced() -> None:
    spec = spec_body(**REPLACE)
    running = job(T0 - H)
    status = status_body(spec, cursor=T0 - H, firings=[(T0 - H, CREATED_)])
    decision = run(schedule_body(spec, status), [running], now=T0 + S)

    [old] = decision.replace
    assert (old.name, old.uid) == (running.name, running.uid)  # deleted with a uid precondition
    assert [c.name for c in decision.creates] == [n(T0)]
    assert decision.status is not None
    outcomes = {f["job"]: f["outcome"] for f in decision.status["recentFirings"]}
    assert outcomes == {n(T0): "Created", n(T0 - H): "Replaced"}
    # Only the new Job counts as active: the old one is on its way out.
    assert [a["name"] for a in decision.status["active"]] == [n(T0)]
    assert decision.status["activeCount"] == 1
    assert events(decision, "Replaced")


def test_allow_counts_every_running_job_as_active() -> None:
    spec = spec_body()
    jobs = [job(T0 - 2 * H), job(T0 - H), job(T0 - H, schedule_uid=OTHER_UID, name="stranger")]
    decision = run(schedule_body(spec, status_body(spec, cursor=T0 - H)), jobs, now=T0 + S)
    assert decision.status is not None
    assert [a["name"] for a in decision.status["active"]] == [n(T0 - 2 * H), n(T0 - H), n(T0)]
    assert decision.status["activeCount"] == 3


# -- Jobs' fate in status --------------------------------------------------------------


def test_created_firings_become_succeeded_or_failed_when_their_jobs_finish() -> None:
    spec = spec_body()
    status = status_body(
        spec,
        cursor=T0,
        firings=[(T0, CREATED_), (T0 - H, CREATED_), (T0 - 2 * H, CREATED_)],
        last_success=T0 - 3 * H,
    )
    jobs = [
        job(T0),
        job(T0 - H, DONE, finished=T0 - H + 7 * M),
        job(T0 - 2 * H, BROKEN, finished=T0 - 2 * H + 3 * M),
    ]
    decision = run(schedule_body(spec, status), jobs, now=T0 + 20 * M)
    assert decision.status is not None
    outcomes = [(f["job"], f["outcome"]) for f in decision.status["recentFirings"]]
    assert outcomes == [
        (n(T0), "Created"),
        (n(T0 - H), "Succeeded"),
        (n(T0 - 2 * H), "Failed"),
    ]
    assert decision.status["lastSuccessfulTime"] == iso(T0 - H + 7 * M)


def test_last_successful_time_never_moves_back() -> None:
    spec = spec_body()
    status = status_body(spec, cursor=T0, last_success=T0 + 5 * M)
    jobs = [job(T0 - H, DONE, finished=T0 - H + 7 * M)]
    decision = run(schedule_body(spec, status), jobs, now=T0 + 20 * M)
    assert written(decision, status)["lastSuccessfulTime"] == iso(T0 + 5 * M)


def test_recent_firings_are_bounded_and_newest_first() -> None:
    spec = spec_body(missedRunPolicy="RunAll", maxMissedRuns=30)
    status = status_body(spec, cursor=T0 - 30 * H)
    decision = run(schedule_body(spec, status), now=T0 + S)
    assert len(decision.creates) == 30
    assert decision.status is not None
    ticks = [f["tick"] for f in decision.status["recentFirings"]]
    assert 0 < len(ticks) < 30
    assert ticks == sorted(ticks, reverse=True)
    assert ticks[0] == iso(T0)


# -- the Jobs' bodies ------------------------------------------------------------------


def test_every_job_body_is_owned_labelled_and_stamped() -> None:
    spec = spec_body(missedRunPolicy="RunAll")
    status = status_body(spec, cursor=T0 - 3 * H, in_flight=[T0 - 3 * H])
    body = schedule_body(spec, status, trigger="req-1")
    pristine = copy.deepcopy(body)
    decision = run(body, now=T0 + 5 * S)
    # The recovered claim, three due ticks and the manual trigger.
    assert len(decision.creates) == 5
    for create in decision.creates:
        meta = create.body["metadata"]
        assert create.body["apiVersion"] == "batch/v1"
        assert create.body["kind"] == "Job"
        assert meta["name"] == create.name
        assert meta["namespace"] == NAMESPACE
        assert meta["ownerReferences"] == [
            {
                "apiVersion": "punctual.dev/v1",
                "kind": "CronSchedule",
                "name": NAME,
                "uid": UID,
                "controller": True,
                "blockOwnerDeletion": True,
            }
        ]
        # Punctual's labels win over the template's; the template's others stay.
        assert meta["labels"]["punctual.dev/schedule"] == NAME
        assert meta["labels"]["punctual.dev/schedule-uid"] == UID
        assert meta["labels"]["team"] == "reports"
        assert meta["annotations"]["owner"] == "alice@example.com"
        assert meta["annotations"]["punctual.dev/tick"] == iso(create.tick)
        assert meta["annotations"]["punctual.dev/epoch"] == str(LEADER.epoch)
        # The template's spec, its pod template told the firing (see test_stamping).
        pod = create.body["spec"]["template"]
        assert {**create.body["spec"], "template": None} == {**TEMPLATE["spec"], "template": None}
        [container] = pod["spec"]["containers"]
        assert {k: v for k, v in container.items() if k != "env"} == {
            "name": "report",
            "image": "busybox",
            "args": ["true"],
        }
        env = {e["name"]: e["value"] for e in container["env"]}
        assert env["PUNCTUAL_TICK"] == iso(create.tick)
        assert env["PUNCTUAL_FIRING"] == ("manual" if create.manual else "scheduled")
        assert pod["metadata"]["annotations"]["punctual.dev/tick"] == iso(create.tick)
    manual = [c for c in decision.creates if c.manual]
    assert [c.name for c in manual] == [MANUAL_1]
    assert manual[0].body["metadata"]["annotations"]["punctual.dev/trigger"] == "req-1"
    # The schedule as read is not touched, and the bodies share nothing with it.
    assert body == pristine
    decision.creates[0].body["spec"]["template"]["spec"]["containers"].clear()
    assert body == pristine


# -- missed ticks ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("spec_overrides", "cursor", "outcome", "count"),
    [
        pytest.param({}, T0 - 3 * H, MISSED, 2, id="RunLatest: the 2 older ticks are missed"),
        pytest.param(
            {"missedRunPolicy": "RunAll", "maxMissedRuns": 1},
            T0 - 3 * H,
            MISSED,
            2,
            id="RunAll cap 1: 2 ticks beyond the cap are missed",
        ),
        pytest.param(
            {"missedRunPolicy": "Skip"}, T0 - 3 * H, SKIPPED, 3, id="Skip: all 3 ticks skipped"
        ),
        pytest.param(
            {"startingDeadlineSeconds": 1},
            T0 - H,
            MISSED,
            1,
            id="one tick past the deadline is missed",
        ),
        pytest.param(
            {"schedule": "* * * * *"},
            T0 - 365 * 24 * H,
            MISSED,
            365 * 24 * 60 - 1,
            id="a year of minutely ticks is counted, not capped",
        ),
    ],
)
def test_missed_ticks_are_recorded_with_their_count_and_a_warning(
    spec_overrides: dict[str, Any], cursor: datetime, outcome: FiringOutcome, count: int
) -> None:
    spec = spec_body(**spec_overrides)
    decision = run(schedule_body(spec, status_body(spec, cursor=cursor)), now=T0 + 5 * S)
    assert decision.status is not None
    recorded = [f for f in decision.status["recentFirings"] if f["outcome"] == outcome.value]
    [group] = recorded
    noun = "tick" if count == 1 else "ticks"
    assert group["reason"].startswith(f"{count} {noun}:")
    assert group["epoch"] == LEADER.epoch
    assert parse_iso(group["tick"]) > cursor
    warnings = [e for e in decision.events if e.type == "Warning"]
    assert [e.reason for e in warnings] == [outcome.value]
    assert f"{count} {noun}" in warnings[0].message
    # Every due tick was decided: none of them fires on the next pass.
    again = run(schedule_body(spec, decision.status), now=T0 + 10 * S)
    assert [c.name for c in again.creates] == [c.name for c in decision.creates]  # claims only
    assert written(again, decision.status)["recentFirings"] == decision.status["recentFirings"]


# -- manual triggers -------------------------------------------------------------------


def test_a_trigger_request_fires_once() -> None:
    spec = spec_body()
    now = T0 + 30 * M + 250_000 * timedelta(microseconds=1)
    status = status_body(spec, cursor=T0)
    first = run(schedule_body(spec, status, trigger="req-1"), [job(T0, DONE)], now=now)
    [create] = first.creates
    assert create.name == manual_job_name(NAME, "req-1")
    assert create.manual
    assert first.status is not None
    assert first.status["lastTrigger"] == "req-1"
    assert first.status["recentFirings"][0]["manual"] is True
    assert first.status["recentFirings"][0]["outcome"] == "Created"

    # A scheduled firing's entry says nothing of `manual` (false is not written: bytes).
    scheduled = run(schedule_body(spec, first.status), [job(T0, DONE)], now=T0 + H + S)
    assert scheduled.status is not None
    entries = scheduled.status["recentFirings"]
    assert [f.get("manual") for f in entries] == [None, True]
    assert "manual" not in entries[0]
    assert events(first, "Triggered")
    # A manual firing moves no cursor: the schedule's own ticks are unaffected.
    assert first.status["lastScheduledTime"] == iso(T0)

    jobs = [job(T0, DONE), job(now, name=create.name)]
    same = run(schedule_body(spec, first.status, trigger="req-1"), jobs, now=now + M)
    assert same.creates == ()
    assert not events(same, "Triggered")

    settled = steady_status(spec, jobs, now=now + M, status=first.status)
    again = run(schedule_body(spec, settled, trigger="req-1"), jobs, now=now + 5 * M)
    assert again.creates == ()

    newer = run(schedule_body(spec, settled, trigger="req-2"), jobs, now=now + 5 * M)
    assert [c.name for c in newer.creates] == [manual_job_name(NAME, "req-2")]
    assert newer.status is not None and newer.status["lastTrigger"] == "req-2"


def test_a_trigger_skipped_by_forbid_is_not_fired_later() -> None:
    spec = spec_body(**FORBID)
    status = status_body(spec, cursor=T0)
    skipped = run(schedule_body(spec, status, trigger="req-1"), [job(T0)], now=T0 + M)
    assert skipped.creates == ()
    assert skipped.status is not None
    assert skipped.status["recentFirings"][0]["outcome"] == "Skipped"
    assert skipped.status["recentFirings"][0]["manual"] is True
    # Once the Job finished, the old request does not come back to life.
    later = run(schedule_body(spec, skipped.status, trigger="req-1"), [job(T0, DONE)], now=T0 + M)
    assert later.creates == ()


# -- suspend ---------------------------------------------------------------------------


def test_suspended_creates_nothing_and_says_so_in_conditions() -> None:
    spec = spec_body(suspend=True)
    status = status_body(spec, cursor=T0 - H)
    decision = run(schedule_body(spec, status), now=T0 + 5 * S)
    assert decision.creates == ()
    assert decision.status is not None
    assert decision.status["lastScheduledTime"] == iso(T0 - H)
    assert "nextScheduleTime" not in decision.status
    assert condition(decision.status, "Suspended")["status"] == "True"
    ready = condition(decision.status, "Ready")
    assert ready["status"] == "False"
    assert ready["reason"] == "Suspended"
    assert decision.next_wake is None  # only an edit (a watch event) can matter now


def test_suspending_and_resuming_each_leave_one_event() -> None:
    running = spec_body()
    status = steady_status(running, [job(T0 - H, DONE)], now=T0 - 30 * M, status=None)

    paused_spec = spec_body(suspend=True)
    paused = run(schedule_body(paused_spec, status), now=T0 - 20 * M)
    assert len(events(paused, "Suspended")) == 1
    still = run(schedule_body(paused_spec, paused.status), now=T0 - 10 * M)
    assert still.events == ()
    assert still.status is None

    resumed = run(schedule_body(running, paused.status), now=T0 - 5 * M)
    assert len(events(resumed, "Resumed")) == 1
    assert resumed.status is not None
    assert condition(resumed.status, "Suspended")["status"] == "False"
    assert condition(resumed.status, "Ready")["status"] == "True"


def test_a_new_schedule_that_was_never_suspended_posts_no_resumed_event() -> None:
    decision = run(schedule_body(), now=T0 + 5 * S)
    assert [c.name for c in decision.creates] == [n(T0)]
    assert events(decision, "Resumed") == []


# -- invalid specs ---------------------------------------------------------------------

INVALID = [
    pytest.param({"schedule": "0 0 30 2 *"}, "spec.schedule", id="Feb 30 never comes"),
    pytest.param({"timeZone": "Mars/Base"}, "spec.timeZone", id="unknown time zone"),
    pytest.param({"maxMissedRuns": 0}, "spec.maxMissedRuns", id="pydantic: maxMissedRuns 0"),
    pytest.param(
        {"concurrencyPolicy": "Sometimes"},
        "spec.concurrencyPolicy",
        id="pydantic: unknown concurrencyPolicy",
    ),
    pytest.param({"runAt": iso(T0)}, "runAt", id="pydantic: both schedule and runAt"),
]


@pytest.mark.parametrize(("overrides", "field_name"), INVALID)
def test_an_invalid_spec_fires_nothing_and_is_reported_once(
    overrides: dict[str, Any], field_name: str
) -> None:
    good = spec_body()
    bad = spec_body(**overrides)
    status = status_body(good, cursor=T0 - H)
    first = run(schedule_body(bad, status), now=T0 + 5 * S)

    assert first.creates == () and first.replace == () and first.prune == ()
    assert first.status is not None
    invalid = condition(first.status, "InvalidSpec")
    assert invalid["status"] == "True"
    assert field_name in invalid["message"]
    ready = condition(first.status, "Ready")
    assert ready["status"] == "False"
    assert field_name in ready["message"]
    assert "nextScheduleTime" not in first.status
    warnings = [e for e in first.events if e.type == "Warning"]
    assert [e.reason for e in warnings] == ["InvalidSpec"]
    assert field_name in warnings[0].message

    # Looked at again, with its own status: no second Event, nothing to write.
    second = run(schedule_body(bad, first.status), now=T0 + M)
    assert second.events == ()
    assert second.status is None
    assert second.creates == ()


@pytest.mark.parametrize(
    "overrides",
    [
        pytest.param({"schedule": "0 0 30 2 *"}, id="Feb 30 never comes"),
        pytest.param({"timeZone": "Mars/Base"}, id="unknown time zone"),
        pytest.param({"maxMissedRuns": 0}, id="pydantic: maxMissedRuns 0"),
        pytest.param({"runAt": iso(T0)}, id="pydantic: schedule and runAt"),
    ],
)
@pytest.mark.parametrize("history", ["ran before", "invalid from creation"])
def test_fixing_an_invalid_spec_fires_no_tick_of_the_invalid_period(
    overrides: dict[str, Any], history: str
) -> None:
    good = spec_body(missedRunPolicy="RunAll")
    bad = {**good, **overrides}
    if history == "ran before":
        created = T0 - 2 * H - 30 * M
        status: dict[str, Any] | None = status_body(good, cursor=T0 - H)
    else:
        created = T0 - 30 * M
        status = None

    broken = run(schedule_body(bad, status, created=created), now=T0 + 5 * S)
    assert broken.creates == ()
    # Two hours pass while the spec is invalid; then the user fixes it.
    for now in (T0 + H + 5 * S, T0 + 2 * H + 5 * S):
        while_broken = run(schedule_body(bad, written(broken, status), created=created), now=now)
        assert while_broken.creates == ()
    fixed_at = T0 + 2 * H + 10 * S
    fixed = run(schedule_body(good, written(broken, status), created=created), now=fixed_at)

    assert fixed.creates == ()
    assert fixed.status is not None
    assert fixed.status["lastScheduledTime"] == iso(fixed_at)
    assert fixed.status["nextScheduleTime"] == iso(T0 + 3 * H)
    assert condition(fixed.status, "InvalidSpec")["status"] == "False"
    assert condition(fixed.status, "Ready")["status"] == "True"
    assert not [f for f in fixed.status.get("recentFirings", []) if f["outcome"] == "Missed"]
    # And the next tick after the fix fires as usual.
    nxt = run(schedule_body(good, fixed.status, created=created), now=T0 + 3 * H)
    assert [c.name for c in nxt.creates] == [n(T0 + 3 * H)]


def test_an_invalid_spec_ignores_other_schedules_and_keeps_a_claim_in_status() -> None:
    good = spec_body()
    bad = spec_body(schedule="0 0 30 2 *")
    status = status_body(good, cursor=T0, in_flight=[T0])
    decision = run(schedule_body(bad, status), [job(T0, schedule_uid=OTHER_UID)], now=T0 + M)
    assert decision.creates == ()
    assert decision.status is not None
    # The claim is not dropped in silence: it is still there to be finished later.
    assert [c["job"] for c in decision.status["inFlight"]] == [n(T0)]


# -- other schedules' Jobs -------------------------------------------------------------


def test_jobs_of_another_schedule_uid_are_ignored() -> None:
    spec = spec_body(successfulJobsHistoryLimit=0, failedJobsHistoryLimit=0, **FORBID)
    status = status_body(spec, cursor=T0 - H, firings=[(T0 - H, CREATED_)])
    strangers = [
        job(T0 - H, schedule_uid=OTHER_UID),  # running, same name as our last Job
        job(T0 - 2 * H, DONE, schedule_uid=OTHER_UID),
        job(T0 - 3 * H, BROKEN, schedule_uid=OTHER_UID),
    ]
    decision = run(schedule_body(spec, status), strangers, now=T0 + S)
    assert [c.name for c in decision.creates] == [n(T0)]  # Forbid sees nothing running
    assert decision.prune == ()
    assert decision.replace == ()
    assert decision.status is not None
    assert [a["name"] for a in decision.status["active"]] == [n(T0)]
    outcomes = {f["job"]: f["outcome"] for f in decision.status["recentFirings"]}
    assert outcomes[n(T0 - H)] == "Created"  # not their Job's fate
    assert "lastSuccessfulTime" not in decision.status


def test_a_recovered_manual_claim_creates_the_same_job_body_as_the_first_attempt() -> None:
    spec = spec_body()
    triggered_at = T0 + 30 * M
    first = run(
        schedule_body(spec, status_body(spec, cursor=T0), trigger="req-1"),
        [job(T0, DONE)],
        now=triggered_at,
    )
    [original] = first.creates
    # The create was lost (a crash, a 5xx): the next pass finishes the claim.
    again = run(
        schedule_body(spec, first.status, trigger="req-1"), [job(T0, DONE)], now=triggered_at + S
    )
    [recovered] = again.creates
    assert recovered.name == original.name
    assert recovered.manual
    annotations = recovered.body["metadata"]["annotations"]
    assert annotations.get("punctual.dev/trigger") == "req-1"


def test_a_running_job_without_a_tick_annotation_does_not_make_every_pass_write() -> None:
    spec = spec_body()
    # A Job with our labels but no tick annotation (made by hand, or its annotation edited).
    stray = JobSnapshot(
        name=f"{NAME}-adhoc", uid="uid-adhoc", schedule_uid=UID, tick=None, state=ACTIVE
    )
    status = steady_status(spec, [stray], now=T0 + 5 * M, status=status_body(spec, cursor=T0))
    later = run(schedule_body(spec, status), [stray], now=T0 + 6 * M)
    assert later.status is None


def test_pruning_the_job_of_a_written_claim_is_never_delayed() -> None:
    spec = spec_body(successfulJobsHistoryLimit=0)
    decision = run(
        schedule_body(spec, status_body(spec, cursor=T0, in_flight=(T0,))),
        [job(T0, DONE)],
        now=T0 + 5 * M,
    )
    assert [p.name for p in decision.prune] == [n(T0)]
    assert decision.status is not None
    assert decision.write_delay is WriteDelay.NEVER


def test_seeing_a_claimed_job_only_resolves_the_claim_and_may_wait_for_the_next_write() -> None:
    spec = spec_body()
    claim = run(schedule_body(spec, status_body(spec, cursor=T0 - H)), now=T0 + S)
    assert [c.name for c in claim.creates] == [n(T0)]
    seen = run(schedule_body(spec, claim.status), [job(T0)], now=T0 + 2 * S)
    assert seen.creates == () and seen.prune == ()
    assert seen.status is not None
    assert seen.status.get("inFlight", []) == []  # resolved; the next tick is in the window
    assert seen.write_delay is WriteDelay.RESOLVES_CLAIMS_ONLY


# -- claims made ahead of their tick (claimed ahead) ----------------------------------


@pytest.mark.parametrize("listed", [False, True], ids=["window", "inFlight (before v2)"])
def test_a_tick_claimed_ahead_fires_with_only_the_create_and_keeps_the_claim_epoch(
    listed: bool,
) -> None:
    spec = spec_body()
    decision = run(schedule_body(spec, claimed_ahead_status(spec, listed=listed)), now=T0 + H)
    assert [c.name for c in decision.creates] == [n(T0 + H)]
    assert decision.write_delay is not WriteDelay.NEVER  # the claim is already written
    assert decision.status is not None
    claims = {c["job"]: c["epoch"] for c in decision.status.get("inFlight", [])}
    # In flight until its Job is seen, with the epoch of the write that claimed it (a
    # window's, or an older operator's claim ahead): the cursor moves past it in this
    # status, so if the create failed, only this entry says the tick is still owed.
    assert claims == {n(T0 + H): PREVIOUS_EPOCH}
    # Half of the window used: the next one is claimed, by this leader, in the same write.
    assert decision.status["claimedThrough"] == iso(T0 + 2 * H)
    assert decision.status["claimEpoch"] == LEADER.epoch


@pytest.mark.parametrize("listed", [False, True], ids=["window", "inFlight (before v2)"])
def test_a_tick_claimed_ahead_whose_job_exists_is_recorded_without_a_create(listed: bool) -> None:
    spec = spec_body()
    status = claimed_ahead_status(spec, listed=listed)
    decision = run(schedule_body(spec, status), [job(T0 + H)], now=T0 + H + 3 * S)
    assert decision.creates == ()
    assert decision.status is not None and decision.write_delay is not WriteDelay.NEVER
    assert decision.status["lastScheduledTime"] == iso(T0 + H)
    assert [f["job"] for f in decision.status["recentFirings"]] == [n(T0 + H), n(T0)]
    assert decision.status["recentFirings"][0]["epoch"] == PREVIOUS_EPOCH
    assert decision.status.get("inFlight", []) == []
    assert decision.status["claimedThrough"] == iso(T0 + 2 * H)


def test_a_tick_claimed_ahead_of_an_edited_schedule_never_fires() -> None:
    old_spec = spec_body()
    new_spec = spec_body(schedule="30 * * * *")
    body = schedule_body(new_spec, claimed_ahead_status(old_spec))
    for now in (T0 + 10 * M, T0 + H, T0 + H + S):
        decision = run(body, now=now)
        assert n(T0 + H) not in {c.name for c in decision.creates}, now
        assert decision.status is not None
        assert n(T0 + H) not in {c["job"] for c in decision.status["inFlight"]}
        assert decision.write_delay is WriteDelay.NEVER  # the edit is reported and written at once


def test_a_tick_claimed_ahead_of_a_suspended_schedule_never_fires_and_its_claim_goes() -> None:
    spec = spec_body(suspend=True)
    decision = run(schedule_body(spec, claimed_ahead_status(spec_body())), now=T0 + H)
    assert decision.creates == ()
    assert decision.status is not None and decision.status.get("inFlight", []) == []


def test_a_tick_claimed_ahead_past_its_starting_deadline_is_missed_not_fired() -> None:
    spec = spec_body(startingDeadlineSeconds=60)
    decision = run(schedule_body(spec, claimed_ahead_status(spec)), now=T0 + H + 5 * M)
    assert decision.creates == ()
    assert decision.status is not None and decision.write_delay is WriteDelay.NEVER
    assert decision.status["recentFirings"][0]["outcome"] == MISSED.value
    assert n(T0 + H) not in {c["job"] for c in decision.status["inFlight"]}


def test_forbid_decides_a_tick_claimed_ahead_when_it_comes_not_when_it_was_claimed() -> None:
    spec = spec_body(concurrencyPolicy="Forbid")
    running = job(T0)  # the previous Job still runs at T0 + H
    decision = run(schedule_body(spec, claimed_ahead_status(spec)), [running], now=T0 + H)
    assert decision.creates == ()
    assert decision.status is not None and decision.write_delay is WriteDelay.NEVER
    [skip] = [f for f in decision.status["recentFirings"] if f["tick"] == iso(T0 + H)]
    assert skip["outcome"] == SKIPPED.value
    assert n(T0 + H) not in {c["job"] for c in decision.status["inFlight"]}


def test_a_claim_made_ahead_is_not_a_claim_to_recheck_before_its_tick() -> None:
    spec = spec_body()
    decision = run(schedule_body(spec, claimed_ahead_status(spec)), now=T0 + 30 * M)
    assert decision.creates == ()
    assert decision.next_wake == T0 + H  # not now + IN_FLIGHT_RECHECK


def test_a_tick_fired_on_its_claim_made_ahead_is_never_called_missed_later() -> None:
    """Every second, RunLatest: T0 + 1 s fired on its claim made ahead, and the write that
    records it was left for later; the pass after T0 + 2 s must not count T0 + 1 s again
    (as missed, superseded by T0 + 2 s) but record it as created, with its claim's epoch."""
    second = timedelta(seconds=1)
    spec = spec_body(schedule="* * * * * *")
    status = status_body(spec, cursor=T0, firings=[(T0, SUCCEEDED)])
    status["inFlight"] = [{"tick": iso(T0 + second), "job": n(T0 + second), "epoch": 6}]
    jobs = [job(T0, DONE), job(T0 + second)]
    decision = run(schedule_body(spec, status), jobs, now=T0 + 2 * second + 50 * MS)
    assert decision.missed == 0
    assert [c.name for c in decision.creates] == [n(T0 + 2 * second)]
    assert decision.status is not None
    firings = decision.status["recentFirings"]
    assert [(f["job"], f["outcome"], f["epoch"]) for f in firings[:2]] == [
        (n(T0 + 2 * second), "Created", LEADER.epoch),
        (n(T0 + second), "Created", 6),
    ]
    assert not [f for f in firings if f["outcome"] == "Missed"]


def test_a_decision_says_when_its_writes_are_due() -> None:
    """`due_by`: now for a create, the tick of a claim not yet written, None otherwise."""
    spec = spec_body()
    # The first pass half an hour before the first tick: its claim ahead is due at T0.
    first = run(schedule_body(spec), now=T0 - 20 * M)
    assert first.creates == () and first.status is not None
    assert first.status.get("inFlight", []) == []
    assert first.status["claimedThrough"] == iso(T0)
    assert first.due_by == T0
    # At the tick: the create is due at once.
    due = run(schedule_body(spec, first.status), now=T0 + S)
    assert [c.name for c in due.creates] == [n(T0)]
    assert due.due_by == T0 + S
    # Recording a finished Job whose next tick is already claimed: due at no tick.
    recorded = run(schedule_body(spec, claimed_ahead_status(spec)), [job(T0, DONE)], now=T0 + H - M)
    assert recorded.creates == ()
    assert recorded.due_by is None


def test_a_window_tick_whose_job_failed_before_any_write_is_counted_failed_once() -> None:
    """A tick of the claim window is created with no write of its own; when its Job fails
    before the next write, its firing is recorded Failed at once: counted for
    punctual_jobs_failed_total then, and not again by the write after."""
    spec = spec_body()
    status = claimed_ahead_status(spec)  # T0 + H claimed by the window
    broken = job(T0 + H, BROKEN, finished=T0 + H + M)
    decision = run(schedule_body(spec, status), [job(T0, DONE), broken], now=T0 + H + 2 * M)
    assert decision.status is not None
    [first] = [f for f in decision.status["recentFirings"] if f["job"] == n(T0 + H)]
    assert first["outcome"] == "Failed"
    assert decision.newly_failed == 1
    again = run(schedule_body(spec, decision.status), [job(T0, DONE), broken], now=T0 + H + 3 * M)
    assert again.newly_failed == 0


@pytest.mark.parametrize("policy", ["RunAll", "RunLatest"])
def test_a_window_tick_whose_create_failed_while_later_ones_landed_is_created_not_passed(
    policy: str,
) -> None:
    """`make chaos`: a restarted API server's fencing policy refused one tick's create,
    then took the next ones. The window claimed them all; their Jobs, but not the first's,
    exist. The cursor as it really is stops before the missing one, so it is created, and
    the later ones are recorded as fired, neither created again nor called missed."""
    spec = spec_body(schedule="* * * * *", startingDeadlineSeconds=600, missedRunPolicy=policy)
    status = {
        **status_body(spec, cursor=T0, firings=[(T0, SUCCEEDED)]),
        "claimedThrough": iso(T0 + 10 * M),
        "claimEpoch": 6,
    }
    landed = [T0 + k * M for k in (2, 3, 4)]  # T0 + 1 minute: its create failed
    now = T0 + 4 * M + 30 * S
    decision = run(schedule_body(spec, status), [job(t) for t in landed], now=now)
    assert decision.status is not None
    recorded = {f.get("job"): f["outcome"] for f in decision.status["recentFirings"]}
    assert all(recorded.get(n(t)) == "Created" for t in landed)
    if policy == "RunAll":
        assert [c.name for c in decision.creates] == [n(T0 + M)]
        assert recorded[n(T0 + M)] == "Created"
        assert decision.missed == 0
        assert n(T0 + M) in [c["job"] for c in decision.status["inFlight"]]
    else:  # superseded by the newer ticks, as RunLatest says (and the fired ones fired)
        assert decision.creates == ()


def test_window_ticks_fired_before_an_edit_are_recorded_not_judged_by_the_new_ticks() -> None:
    """The cursor stops at a missing window tick only on the ticks the claims were made
    on: after an edit of the schedule (the written fingerprint is the old spec's), the
    Jobs fired on the old window are recorded as fired, and the new spec's ticks, none of
    which they are, neither hold them back nor fire at once (k8s#63371: the first build
    of the stop judged them by the new spec and recorded none)."""
    old_spec = spec_body(
        schedule="* * * * *", startingDeadlineSeconds=600, missedRunPolicy="RunAll"
    )
    status = {
        **status_body(old_spec, cursor=T0, firings=[(T0, SUCCEEDED)]),
        "claimedThrough": iso(T0 + 10 * M),
        "claimEpoch": 6,
    }
    landed = [T0 + M, T0 + 2 * M]
    edited = {**old_spec, "schedule": "30 * * * *"}
    decision = run(schedule_body(edited, status), [job(t) for t in landed], now=T0 + 2 * M + 30 * S)
    assert decision.status is not None
    recorded = {f.get("job"): f["outcome"] for f in decision.status["recentFirings"]}
    assert all(recorded.get(n(t)) == "Created" for t in landed), recorded
    assert decision.creates == ()
    assert decision.status["scheduleFingerprint"] == fingerprint(edited)
