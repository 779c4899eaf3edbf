"""One pass over one schedule, with fakes of the view's index, the Lease and the applier,
and the shared fake API server for the re-reads (tests/unit/fakeapi.py).

This tests Punctual's own loop: decide, let the status wait if it may, apply,
remember, and after a 409 re-read and decide again (never retry blindly), at most
three times. The decisions themselves are `decide`'s (tested in test_deciding); the
API's answers are tested against the real control plane.
"""

from __future__ import annotations

import asyncio
import copy
import dataclasses
import logging
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

import pytest

from punctual.clocks import FixedClock
from punctual.core.deciding import IN_FLIGHT_RECHECK
from punctual.core.decisions import Decision
from punctual.core.delaying import ROUTINE_HORIZON
from punctual.core.jobs import JobSnapshot, JobState
from punctual.core.workloads import JOB, WorkloadKind
from punctual.kube.applying import Applied, NotLeader, schedule_path
from punctual.kube.client import Invalid, Unavailable
from punctual.kube.schedulewatching import pack
from punctual.kube.sharding import shard_of
from punctual.runtime.reconciling import (
    LAPSED_RETRY,
    REFUSED_RETRY,
    UNAVAILABLE_RETRY,
    Reconciler,
    Role,
    Roles,
    decidable_ahead,
    trace,
)
from punctual.runtime.view import LeaderView
from tests.unit.fakeapi import FakeApi
from tests.unit.faketime import FakeTime

from .builders import (
    DONE,
    NAME,
    NAMESPACE,
    T0,
    UID,
    H,
    M,
    S,
    claimed_ahead_status,
    job,
    n,
    schedule_body,
    spec_body,
)

KEY = (NAMESPACE, NAME)
DELAY = timedelta(seconds=10)


@dataclass
class FakeLease:
    leading: bool = True
    epoch: int | None = 7
    identity: str = "punctual-0"

    def is_leader(self) -> bool:
        return self.leading


@dataclass
class FakeApplier:
    """Records every Decision; answers with scripted outcomes, then plain success."""

    outcomes: list[Applied | Exception] = field(default_factory=list)
    decisions: list[Decision] = field(default_factory=list)
    unavailable: set[str] = field(default_factory=set)  # creates that fail for now
    freed: list[tuple[str, str, str]] = field(default_factory=list)
    group_reports: list[tuple[str, str, dict[str, Any]]] = field(default_factory=list)

    async def group_status(self, namespace: str, group: str, status: dict[str, Any]) -> bool:
        self.group_reports.append((namespace, group, status))
        return True

    async def report_status(self, path: str, status: dict[str, Any]) -> bool:
        return True

    async def free(
        self, namespace: str, name: str, uid: str, applied: Applied, kind: WorkloadKind = JOB
    ) -> None:
        self.freed.append((namespace, name, uid))
        applied.freed.append(name)

    # Called while the write is in flight, after the claim and after each create (the
    # watch delivering a write's echo before the pass ends).
    during: list[Callable[[], None]] = field(default_factory=list)

    async def apply(
        self,
        schedule: Any,
        decision: Decision,
        *,
        claimed: Callable[[dict[str, Any]], None] = lambda body: None,
        created: Callable[[JobSnapshot], None] = lambda job: None,
    ) -> Applied:
        self.decisions.append(decision)
        outcome = self.outcomes.pop(0) if self.outcomes else None
        if isinstance(outcome, Exception):
            raise outcome
        if outcome is not None:
            return outcome
        written = {**schedule, "status": decision.status or schedule.get("status")}
        written["metadata"] = {**schedule["metadata"], "resourceVersion": "4712"}
        applied = Applied(schedule=written)
        if decision.status is not None:
            claimed(written)
        for create in decision.creates:
            if create.name in self.unavailable:
                applied.pending.append(create.name)
                continue
            made = JobSnapshot(create.name, f"uid-{create.name}", UID, create.tick, JobState.ACTIVE)
            applied.created.append(made)
            created(made)
        for then in self.during:
            then()
        return applied


class Live(Mapping[Any, Any]):
    """An index read afresh at every lookup, as the watched ones are kept current."""

    def __init__(self, read: Callable[[], dict[Any, Any]]) -> None:
        self.read = read

    def __getitem__(self, key: Any) -> Any:
        return self.read()[key]

    def __iter__(self) -> Iterator[Any]:
        return iter(self.read())

    def __len__(self) -> int:
        return len(self.read())


@dataclass
class FakeQueue:
    """The scheduler loop's routine slots: free or all taken."""

    free: bool
    asked: list[tuple[str, str]] = field(default_factory=list)
    postponed: list[tuple[str, str]] = field(default_factory=list)
    ahead: dict[tuple[str, str], bool] = field(default_factory=dict)

    def admit(self, key: tuple[str, str]) -> bool:
        self.asked.append(key)
        return self.free

    def postpone(self, key: tuple[str, str]) -> None:
        self.postponed.append(key)

    def woken_for(self, key: tuple[str, str]) -> datetime | None:
        return None

    def decide_ahead(self, key: tuple[str, str], allowed: bool) -> None:
        self.ahead[key] = allowed


@dataclass
class World:
    body: dict[str, Any]
    jobs: list[JobSnapshot] = field(default_factory=list)
    lease: FakeLease = field(default_factory=FakeLease)
    applier: FakeApplier = field(default_factory=FakeApplier)
    api: FakeApi = field(default_factory=FakeApi)
    clock: FixedClock = field(default_factory=lambda: FixedClock(T0))
    forgotten: list[tuple[str, str]] = field(default_factory=list)
    queue: FakeQueue | None = None

    def reconciler(self) -> tuple[Reconciler, LeaderView]:
        schedules = Live(lambda: {KEY: pack(self.body)} if self.body else {})
        view = LeaderView(schedules, Live(lambda: {UID: list(self.jobs)}))
        reconciler = Reconciler(
            api=self.api,
            view=view,
            roles=Roles([Role(self.lease, self.applier)]),
            clock=self.clock,
            status_delay=DELAY,
            forget=self.forgotten.append,
            queue=self.queue,
        )
        return reconciler, view


def due_now() -> World:
    """An hourly schedule whose tick T0 is due at T0, never fired before."""
    return World(schedule_body(spec_body()))


async def test_a_due_tick_is_decided_applied_and_remembered() -> None:
    world = due_now()
    reconciler, view = world.reconciler()
    wake = await reconciler(KEY)
    [decision] = world.applier.decisions
    assert [c.name for c in decision.creates] == [n(T0)]
    assert decision.status is not None  # the claim
    # The Job landed: what is left is the write that records it, at most the delay away
    # (not a recheck in seconds, which in a herd competed with the herd's own passes).
    assert wake == T0 + DELAY
    assert view.unwritten_since[KEY] == T0
    assert view.schedule(KEY) is not None
    assert view.written[KEY]["metadata"]["resourceVersion"] == "4712"  # our write, kept


@dataclass
class AheadQueue(FakeQueue):
    """The scheduler loop woke the pass ahead of its timer's instant."""

    instant: datetime = T0

    def woken_for(self, key: tuple[str, str]) -> datetime | None:
        return self.instant


def woken_ahead(world: World, time: FakeTime, instant: datetime) -> Reconciler:
    """A reconciler on simulated time whose passes the scheduler woke ahead of `instant`."""
    return Reconciler(
        api=world.api,
        view=LeaderView(
            Live(lambda: {KEY: pack(world.body)}), Live(lambda: {UID: list(world.jobs)})
        ),
        roles=Roles([Role(world.lease, world.applier)]),
        clock=time,
        sleeper=time,
        status_delay=DELAY,
        forget=world.forgotten.append,
        queue=AheadQueue(free=True, instant=instant),
    )


async def test_a_pass_woken_ahead_decides_as_of_its_instant_and_writes_only_then() -> None:
    """`--decide-ahead`: the pass runs before the tick and decides the tick's create as a
    pass at the tick would; nothing is sent until the clock reaches the tick."""
    time = FakeTime(T0 - timedelta(milliseconds=400))
    world = due_now()
    sent_at: list[datetime] = []
    world.applier.during.append(lambda: sent_at.append(time.now()))
    pass_ = asyncio.create_task(woken_ahead(world, time, T0)(KEY))
    await time.advance(0.4 - 1e-6)
    assert not sent_at and not pass_.done()  # decided, waiting for its instant
    await time.advance(1e-6)
    wake = await pass_
    [decision] = world.applier.decisions
    assert [c.name for c in decision.creates] == [n(T0)]  # as a pass at T0 decides
    assert sent_at and min(sent_at) == T0  # nothing before the tick
    assert wake == T0 + DELAY
    # Without the queue's instant the same pass at T0 - 0.4 s has nothing to create.
    early = due_now()
    early.clock = FixedClock(T0 - timedelta(milliseconds=400))
    early_reconciler, _ = early.reconciler()
    await early_reconciler(KEY)
    assert all(not d.creates for d in early.applier.decisions)


async def test_a_pass_woken_ahead_decides_a_run_dependent_schedule_only_at_its_instant() -> None:
    """Under Forbid a run ending in the moments before the tick changes what the tick
    does: such a pass decides as of now (nothing due yet), and tells the loop to serve
    the schedule's timers at their instant from then on."""
    time = FakeTime(T0 - timedelta(milliseconds=400))
    world = World(schedule_body(spec_body(concurrencyPolicy="Forbid")))
    queue = AheadQueue(free=True, instant=T0)
    reconciler = woken_ahead(world, time, T0)
    reconciler.queue = queue
    assert await reconciler(KEY) == T0  # nothing due as of now: look again at the tick
    assert all(not d.creates for d in world.applier.decisions)
    assert queue.ahead == {KEY: False}


@pytest.mark.parametrize(
    ("spec", "ahead"),
    [
        ({}, True),
        ({"concurrencyPolicy": "Allow"}, True),
        ({"concurrencyPolicy": "Forbid"}, False),
        ({"concurrencyPolicy": "Replace"}, False),
        ({"concurrencyPolicy": "BufferOne"}, False),
        ({"maxConcurrent": 3}, False),
        ({"concurrencyGroup": "nightly"}, False),
        ({"after": [{"schedule": "upstream"}]}, False),
    ],
)
def test_only_a_schedule_no_runs_state_decides_is_decided_ahead(
    spec: dict[str, Any], ahead: bool
) -> None:
    assert decidable_ahead(schedule_body(spec_body(**spec))) is ahead


async def test_a_create_that_did_not_land_is_looked_at_again_in_seconds() -> None:
    world = due_now()
    written = {**world.body, "metadata": {**world.body["metadata"], "resourceVersion": "4712"}}
    world.applier.outcomes.append(Applied(schedule=written, pending=[n(T0)]))
    reconciler, _ = world.reconciler()
    assert await reconciler(KEY) == T0 + IN_FLIGHT_RECHECK  # the claim stays in flight


async def test_our_write_is_not_kept_once_the_index_holds_it_or_newer() -> None:
    """The soak's standby held one parsed body per schedule: our last writes, kept in
    `written` because no echo matched them and nothing read them again."""
    world = due_now()
    world.body["metadata"]["resourceVersion"] = "4712"  # the watch was quicker than the pass
    reconciler, view = world.reconciler()
    await reconciler(KEY)
    assert KEY not in view.written
    world.body["metadata"]["resourceVersion"] = "1"
    await reconciler(KEY)
    assert KEY in view.written  # the index is behind: our copy is the freshest
    assert view.is_echo(KEY, "4713") is False  # not our write, but newer than it
    assert KEY not in view.written


async def test_echoes_of_our_claim_and_job_that_come_during_the_pass_are_ours() -> None:
    """The watch delivers the claim's echo while the pass creates its Job, and the Job's
    while it prunes and reports: known as ours, they wake no second pass per firing."""
    world = due_now()
    reconciler, view = world.reconciler()
    echoes: list[bool] = []
    echo = JobSnapshot(n(T0), f"uid-{n(T0)}", UID, T0, JobState.ACTIVE)
    world.applier.during.append(lambda: echoes.append(view.is_echo(KEY, "4712")))
    world.applier.during.append(lambda: echoes.append(not view.job_changed(echo.uid, echo)))
    await reconciler(KEY)
    assert echoes == [True, True]


def test_a_jobs_first_pod_starting_wakes_no_pass_and_its_finishing_does() -> None:
    """Only a pendingTimeoutSeconds reads whether a Job started, at a deadline its own
    timer wakes for: the start woke one pass per firing for nothing."""
    _, view = due_now().reconciler()
    created = JobSnapshot(n(T0), "u1", UID, T0, JobState.ACTIVE, started=False)
    assert view.job_changed("u1", created)  # new
    assert not view.job_changed("u1", dataclasses.replace(created, started=True))
    assert view.job_changed("u1", dataclasses.replace(created, started=True, state=DONE))
    assert view.job_changed("u1", None)  # deleted


def test_a_quiet_ending_asks_for_the_next_writes_pass_and_a_loud_one_for_a_pass_now() -> None:
    """Where the schedule's last pass said its runs' endings may wait (nothing waits on
    them), a success and a finished run's deletion ask for a pass a status delay from now
    (its write is then due); a failure, a start, or any ending elsewhere ask for one now."""
    _, view = due_now().reconciler()
    delay = timedelta(seconds=10)
    running = JobSnapshot(n(T0), "u1", UID, T0, JobState.ACTIVE, has_finalizer=True)
    assert view.job_news(KEY, "u1", running, now=T0, delay=delay) == T0  # new: now
    view.quiet.add(KEY)
    done = dataclasses.replace(running, state=DONE)
    assert view.job_news(KEY, "u1", done, now=T0 + S, delay=delay) == T0 + S + delay
    assert view.unwritten_since[KEY] == T0 + S  # the write is due a delay after the ending
    going = dataclasses.replace(done, deleting=True)  # a TTL
    assert view.job_news(KEY, "u1", going, now=T0 + 40 * S, delay=delay) == T0 + 50 * S
    assert view.unwritten_since[KEY] == T0 + S  # kept: the first change left unwritten
    # A failure is never quiet (retries, pauseOnFailure, its Warning).
    other = JobSnapshot(n(T0 + H), "u2", UID, T0 + H, JobState.ACTIVE)
    view.job_news(KEY, "u2", other, now=T0, delay=delay)
    failed = dataclasses.replace(other, state=JobState.FAILED)
    assert view.job_news(KEY, "u2", failed, now=T0 + H, delay=delay) == T0 + H
    # Not quiet any more (the last pass said something waits): now.
    view.quiet.discard(KEY)
    third = JobSnapshot(n(T0 + 2 * H), "u3", UID, T0 + 2 * H, JobState.ACTIVE)
    view.job_news(KEY, "u3", third, now=T0, delay=delay)
    ended = dataclasses.replace(third, state=DONE)
    assert view.job_news(KEY, "u3", ended, now=T0 + 2 * H, delay=delay) == T0 + 2 * H


def test_a_job_seen_being_deleted_wakes_no_pass_when_released_or_gone() -> None:
    """Under a TTL, each firing's Job is deleted: the deletion wakes a pass (it frees our
    finalizer once the firing is recorded); the echo of that release and the Job's going
    change no decision, and woke two passes per firing."""
    _, view = due_now().reconciler()
    done = JobSnapshot(n(T0), "u1", UID, T0, DONE, has_finalizer=True)
    assert view.job_changed("u1", done)
    deleting = dataclasses.replace(done, deleting=True)
    assert view.job_changed("u1", deleting)  # the deletion: a pass frees the finalizer
    assert not view.job_changed("u1", dataclasses.replace(deleting, has_finalizer=False))
    assert not view.job_changed("u1", None)  # gone
    # A Job gone without being seen deleting, or still holding our finalizer, still wakes.
    assert view.job_changed("u2", dataclasses.replace(done, uid="u2"))
    assert view.job_changed("u2", None)
    assert view.job_changed("u3", dataclasses.replace(deleting, uid="u3"))
    assert view.job_changed("u3", None)
    # Anything else changing on a deleting Job still wakes a pass.
    running = dataclasses.replace(deleting, uid="u4", state=JobState.ACTIVE)
    assert view.job_changed("u4", running)
    assert view.job_changed("u4", dataclasses.replace(running, state=DONE))


async def test_a_replica_that_does_not_lead_does_nothing() -> None:
    world = due_now()
    world.lease.leading, world.lease.epoch = False, None
    reconciler, _ = world.reconciler()
    assert await reconciler(KEY) is None
    assert world.applier.decisions == []


async def test_a_pass_while_leadership_has_only_lapsed_is_handed_back_later() -> None:
    """A renew deadline passed between two renewals (the epoch is kept): the next renewal
    gains no shard, so the dropped schedule must be remembered, or nothing wakes it."""
    world = due_now()
    world.lease.leading = False  # lapsed: still epoch 7
    reconciler, _ = world.reconciler()
    assert await reconciler(KEY) == world.clock.now() + LAPSED_RETRY
    assert world.applier.decisions == []
    assert reconciler.take_dropped() == {KEY}
    assert reconciler.take_dropped() == set()  # handed back once


async def test_a_pass_dropped_in_a_lapse_wakes_itself_though_nothing_announces_the_return() -> None:
    """The soak's lost ticks: a renewal slower than the renew deadline lapses leadership
    and restores it in one request, so no leadership change is announced and the
    leadership loop takes the dropped schedule back only at its resync (5 minutes). The
    pass's own timer must look again, and then it fires."""
    world = due_now()
    world.lease.leading = False
    reconciler, _ = world.reconciler()
    wake = await reconciler(KEY)
    assert wake is not None and wake <= world.clock.now() + timedelta(seconds=1)
    world.lease.leading = True  # the slow renewal answered: leading again, nothing said
    await reconciler(KEY)
    assert world.applier.decisions, "the pass after the lapse decided nothing"


async def test_a_pass_of_a_replica_that_never_led_is_not_remembered() -> None:
    world = due_now()
    world.lease.leading = False
    world.lease.epoch = None
    reconciler, _ = world.reconciler()
    assert await reconciler(KEY) is None
    assert reconciler.take_dropped() == set()


async def test_losing_the_lease_mid_pass_remembers_the_schedule_while_the_epoch_is_kept() -> None:
    world = due_now()
    world.applier.outcomes = [NotLeader()]
    reconciler, _ = world.reconciler()
    assert await reconciler(KEY) == world.clock.now() + LAPSED_RETRY
    assert reconciler.take_dropped() == {KEY}


async def test_a_lost_claim_is_read_again_and_decided_again_at_most_three_times() -> None:
    world = due_now()
    world.applier.outcomes = [Applied(stale=True) for _ in range(3)]
    world.api.put(schedule_path(*KEY), world.body)
    reconciler, _ = world.reconciler()
    wake = await reconciler(KEY)
    assert len(world.applier.decisions) == 3
    assert world.api.calls == [("get", schedule_path(*KEY))] * 3  # reads, never writes
    assert wake == T0 + UNAVAILABLE_RETRY


async def test_after_one_lost_claim_the_fresh_read_is_decided_on() -> None:
    world = due_now()
    world.applier.outcomes = [Applied(stale=True)]
    fresh = copy.deepcopy(world.body)
    fresh["metadata"]["resourceVersion"] = "5000"
    world.api.put(schedule_path(*KEY), fresh)
    reconciler, _ = world.reconciler()
    await reconciler(KEY)
    assert len(world.applier.decisions) == 2
    assert world.api.calls == [("get", schedule_path(*KEY))]


async def test_a_schedule_deleted_during_a_conflict_is_left_alone() -> None:
    world = due_now()
    world.applier.outcomes = [Applied(stale=True)]
    # The API server holds no such schedule: the re-read finds it gone.
    reconciler, _ = world.reconciler()
    assert await reconciler(KEY) is None
    assert len(world.applier.decisions) == 1
    assert [r.error.status for r in world.api.requests if r.error] == [404]


async def test_an_unavailable_api_server_means_try_again_soon() -> None:
    world = due_now()
    world.applier.outcomes = [Unavailable(503, "ServiceUnavailable", "busy")]
    reconciler, _ = world.reconciler()
    assert await reconciler(KEY) == T0 + UNAVAILABLE_RETRY


async def test_a_write_refused_for_good_is_one_warning_and_a_later_try_not_a_traceback(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """argo#14719's injection: an admission policy refuses the status write (422). The
    pass says so in one line and tries again later; nothing raises to the loop."""
    world = due_now()
    world.applier.outcomes = [Invalid(422, "Invalid", "denied by policy")]
    reconciler, _ = world.reconciler()
    with caplog.at_level(logging.WARNING):
        assert await reconciler(KEY) == T0 + REFUSED_RETRY
    assert "the API server refused a write" in caplog.text
    assert "Traceback" not in caplog.text


async def test_losing_the_lease_mid_pass_stops_it() -> None:
    world = due_now()
    world.applier.outcomes = [NotLeader()]
    reconciler, _ = world.reconciler()
    assert await reconciler(KEY) == world.clock.now() + LAPSED_RETRY  # the epoch is kept
    assert len(world.applier.decisions) == 1


async def test_a_deleted_schedule_is_forgotten_by_the_loop() -> None:
    world = due_now()
    world.body = {}
    reconciler, _ = world.reconciler()
    assert await reconciler(KEY) is None
    assert world.forgotten == [KEY]


async def test_a_schedule_deleted_while_this_replica_stands_by_leaves_nothing_behind() -> None:
    """What a replica kept of a schedule while it led (the uid, a conflict, its timer)
    goes when the schedule is deleted while it stands by: otherwise every schedule
    deleted during a standby stint stays for the life of the process."""
    world = due_now()
    reconciler, view = world.reconciler()
    await reconciler(KEY)  # leading: it reads the schedule, keeps its uid and our write
    reconciler.conflicts[KEY] = "another-installation"
    world.lease.leading, world.lease.epoch = False, None  # stands by now
    world.body = {}  # deleted meanwhile
    assert await reconciler(KEY) is None
    assert world.forgotten == [KEY]
    assert KEY not in reconciler.conflicts
    assert KEY not in view.uids and KEY not in view.written
    assert world.applier.decisions[1:] == []  # and it released nothing: not its to do


async def test_a_schedule_that_still_exists_is_kept_by_a_standby() -> None:
    world = due_now()
    reconciler, view = world.reconciler()
    await reconciler(KEY)
    world.lease.leading, world.lease.epoch = False, None
    assert await reconciler(KEY) is None
    assert world.forgotten == [] and KEY in view.uids


async def test_a_deleted_schedules_conflict_is_forgotten_by_the_leader() -> None:
    world = due_now()
    reconciler, _ = world.reconciler()
    reconciler.conflicts[KEY] = "another-installation"
    world.body = {}
    assert await reconciler(KEY) is None
    assert KEY not in reconciler.conflicts


async def test_a_failing_completion_rule_warns_once_and_is_forgotten_with_its_object(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """One warning per object and error, kept only while the schedule still has the
    object (the record was keyed by object uid and never pruned)."""
    world = due_now()
    stuck = dataclasses.replace(job(T0 - H), completion_error="status.phase is missing")
    world.jobs = [stuck]
    reconciler, _ = world.reconciler()
    with caplog.at_level(logging.WARNING):
        await reconciler(KEY)
        await reconciler(KEY)
    assert caplog.text.count("counts as running: status.phase is missing") == 1
    assert reconciler.rule_errors == {KEY: {stuck.uid: "status.phase is missing"}}
    world.jobs = []  # the object is gone
    await reconciler(KEY)
    assert reconciler.rule_errors == {}


async def test_a_bookkeeping_status_waits_up_to_the_delay_then_is_written() -> None:
    spec = spec_body()
    # T0 + H was claimed ahead and its Job exists: recording it is bookkeeping only.
    world = World(
        schedule_body(spec, claimed_ahead_status(spec)),
        jobs=[job(T0, DONE), job(T0 + H)],
        clock=FixedClock(T0 + H + 3 * timedelta(seconds=1)),
    )
    reconciler, view = world.reconciler()
    wake = await reconciler(KEY)
    assert world.applier.decisions == []  # nothing to write yet
    assert view.unwritten_since[KEY] == world.clock.now()
    assert wake == world.clock.now() + DELAY
    world.clock.advance(DELAY.total_seconds())
    await reconciler(KEY)
    [decision] = world.applier.decisions
    assert decision.status is not None
    assert KEY not in view.unwritten_since  # written: nothing left for later


async def test_a_window_tick_whose_create_failed_is_written_as_owed_past_its_deadline() -> None:
    """The chaos campaign's lost ticks: after an API server restart its fencing policy
    refuses creates as not configured for 20-54 s. A tick of the claim window whose
    create fails is written into inFlight by the next pass, before the create is tried
    again, so that it is owed however long the failures last (as a v1 claim was); left
    as bookkeeping it was planned again each pass and recorded Missed past the
    startingDeadlineSeconds."""
    spec = spec_body(startingDeadlineSeconds=30)
    tick = T0 + H  # claimed ahead by the window
    world = World(
        schedule_body(spec, claimed_ahead_status(spec)),
        jobs=[job(T0, DONE)],
        clock=FixedClock(tick + timedelta(milliseconds=50)),
    )
    world.applier.unavailable.add(n(tick))
    reconciler, view = world.reconciler()
    await reconciler(KEY)
    [first] = world.applier.decisions
    assert [c.name for c in first.creates] == [n(tick)]
    assert first.status is None  # the window claims it: no write before its create
    assert view.unsettled[KEY] == {n(tick)}
    world.clock.advance(IN_FLIGHT_RECHECK.total_seconds())
    await reconciler(KEY)
    second = world.applier.decisions[-1]
    assert second.status is not None  # written first, this time
    assert n(tick) in [c["job"] for c in second.status["inFlight"]]
    world.clock.advance(60)  # the failures outlast the starting deadline
    await reconciler(KEY)
    third = world.applier.decisions[-1]
    assert [c.name for c in third.creates] == [n(tick)]  # owed: created, not Missed
    world.applier.unavailable.clear()
    world.clock.advance(IN_FLIGHT_RECHECK.total_seconds())
    await reconciler(KEY)
    assert KEY not in view.unsettled


async def test_a_deleted_schedules_held_jobs_are_released_so_they_can_go() -> None:
    world = due_now()
    held = JobSnapshot(
        name=n(T0),
        uid="job-uid",
        schedule_uid=UID,
        tick=T0,
        state=DONE,
        has_finalizer=True,
        namespace=NAMESPACE,
        schedule=NAME,
    )
    world.jobs = [held, job(T0 - H, DONE)]  # the second predates the finalizer
    reconciler, view = world.reconciler()
    await reconciler(KEY)  # seen once: its uid is known
    world.body = {}  # then deleted
    world.applier.decisions.clear()
    assert await reconciler(KEY) is None
    assert world.applier.freed == [(NAMESPACE, n(T0), "job-uid")]
    assert world.applier.decisions == []
    assert view.uids == {}


async def test_a_routine_first_claim_waits_for_a_slot_and_returns_before_its_tick() -> None:
    # Twenty minutes before the first tick: the first status (the claim ahead of T0) is
    # routine, and every slot is taken.
    queue = FakeQueue(free=False)
    world = World(schedule_body(spec_body()), clock=FixedClock(T0 - 20 * M), queue=queue)
    reconciler, _ = world.reconciler()
    wake = await reconciler(KEY)
    assert world.applier.decisions == []  # nothing written
    assert queue.postponed == [KEY]
    assert wake == T0 - ROUTINE_HORIZON  # looked at again before the tick, at the latest
    # With a slot free it is written.
    queue.free = True
    await reconciler(KEY)
    [decision] = world.applier.decisions
    assert decision.status is not None and decision.due_by == T0


async def test_a_due_write_never_asks_for_a_routine_slot() -> None:
    queue = FakeQueue(free=False)
    world = World(schedule_body(spec_body()), clock=FixedClock(T0 + S), queue=queue)
    reconciler, _ = world.reconciler()
    await reconciler(KEY)
    [decision] = world.applier.decisions
    assert [c.name for c in decision.creates] == [n(T0)]
    assert queue.asked == [] and queue.postponed == []


async def test_with_two_shards_a_pass_writes_through_its_own_shard_only() -> None:
    world = due_now()
    mine = shard_of(UID, 2)
    other = FakeApplier()
    leases = [FakeLease(), FakeLease()]
    appliers = [world.applier, other] if mine == 0 else [other, world.applier]
    world_roles = Roles(
        [Role(lease, applier) for lease, applier in zip(leases, appliers, strict=True)]
    )
    reconciler, _ = world.reconciler()
    reconciler.roles = world_roles
    # Its shard not led here (the other one is): nothing is decided or written.
    leases[mine].leading, leases[mine].epoch = False, None
    assert await reconciler(KEY) is None
    assert world.applier.decisions == [] and other.decisions == []
    # Its shard led: the pass writes through that shard's applier, never the other's.
    leases[mine].leading, leases[mine].epoch = True, 7
    await reconciler(KEY)
    assert len(world.applier.decisions) == 1 and other.decisions == []


async def test_a_downstream_reads_its_upstream_from_the_view_and_waits_until_synced() -> None:
    """spec.after: the pass hands `decide` the upstream as the view holds it (its body and
    Jobs), a missing upstream only once the lists are in, and a cycle."""
    up_uid = "up-uid"
    spec = {"after": [{"schedule": "extract"}], "jobTemplate": spec_body()["jobTemplate"]}
    down = schedule_body(spec)
    extract = {
        "metadata": {"name": "extract", "namespace": NAMESPACE, "uid": up_uid},
        "spec": {"schedule": "0 * * * *"},
        "status": {},
    }
    ran = JobSnapshot(
        f"extract-{int(T0.timestamp())}", "j", up_uid, T0, JobState.SUCCEEDED,
        finished_at=T0 + timedelta(minutes=10),
    )  # fmt: skip
    bodies: dict[Any, Any] = {KEY: pack(down)}
    view = LeaderView(Live(lambda: bodies), Live(lambda: {up_uid: [ran]}))
    applier, synced = FakeApplier(), [False]
    reconciler = Reconciler(
        api=FakeApi(),
        view=view,
        roles=Roles([Role(FakeLease(), applier)]),
        clock=FixedClock(T0 + timedelta(minutes=11)),
        status_delay=DELAY,
        forget=lambda key: None,
        synced=lambda: synced[0],
    )
    await reconciler(KEY)
    assert applier.decisions == []  # not synced: the upstream may only be unlisted yet
    synced[0] = True
    await reconciler(KEY)
    [invalid] = applier.decisions  # listed, and not there: InvalidSpec, nothing created
    assert invalid.creates == () and invalid.status is not None
    assert "no CronSchedule extract" in str(invalid.status["conditions"])
    bodies[(NAMESPACE, "extract")] = pack(extract)
    bodies[KEY] = pack(schedule_body(spec))
    await reconciler(KEY)
    assert [c.name for c in applier.decisions[-1].creates] == [n(T0)]


async def test_clean_up_left_for_later_is_counted_until_a_pass_does_it() -> None:
    """`punctual_cleanup_backlog` reads the view: what the last pass of each schedule left
    of its clean-up (its next wake came first), gone once a pass leaves none."""
    world = due_now()
    world.applier.outcomes.append(Applied(left_for_later=6))
    reconciler, view = world.reconciler()
    await reconciler(KEY)
    assert view.cleanup_backlog == {KEY: 6}
    world.clock.advance(1)
    await reconciler(KEY)
    assert KEY not in view.cleanup_backlog


async def test_the_debug_trace_says_the_claims_read_and_decided_and_the_creates() -> None:
    """`--log-level DEBUG`'s line for a pass: what the campaign of faults reads to tell
    how a tick went."""
    world = due_now()
    reconciler, _ = world.reconciler()
    await reconciler(KEY)
    [decision] = world.applier.decisions
    line = trace(world.body, decision)
    tick = T0.strftime("%M:%S")
    assert line.startswith("rv=") and " read cursor=- through=- inFlight=[] -> " in line
    assert f"inFlight=[{tick}]" in line.split(" -> ")[1]  # the claim, before its create
    assert line.endswith(f"creates=[{n(T0)[-2:]}]")
