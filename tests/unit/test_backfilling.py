"""Backfill: starting, cancelling and advancing a request, and a decision that carries one.

The hourly schedule of `builders`; a backfill asks for the 12 ticks of T0-12h..T0-1h.
"""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any

from punctual.core.backfilling import BATCH, advance, begin, covers, read_request
from punctual.core.keys import ANNOTATION_BACKFILL
from punctual.core.models import Backfill, BackfillState, CronScheduleSpec
from punctual.core.planning import tick_source

from .builders import T0, H, S, job, n, run, schedule_body, spec_body, status_body

SOURCE = tick_source(CronScheduleSpec.model_validate(spec_body()), uid="u")


def ask(start: datetime = T0 - 12 * H, to: datetime = T0, **more: Any) -> str:
    return json.dumps({"request": "r1", "from": start.isoformat(), "to": to.isoformat(), **more})


def test_a_request_counts_its_ticks_and_the_same_request_is_not_started_twice() -> None:
    step = begin(ask(), None, SOURCE, T0 + S)
    assert step is not None and step.backfill.state is BackfillState.RUNNING
    assert step.backfill.total == 12  # [T0-12h, T0): T0 itself is excluded
    assert begin(ask(), step.backfill, SOURCE, T0 + S) is None


def test_bad_requests_are_refused_naming_the_field() -> None:
    assert "not JSON" in str(read_request("{oops"))
    assert "from must be before to" in str(read_request(ask(T0, T0 - H)))
    assert "overlap" in str(read_request(ask(overlap="Replace")))
    step = begin(ask(T0 - 2000 * 24 * H, T0), None, SOURCE, T0)
    assert step is not None and step.backfill.state is BackfillState.INVALID
    assert "ask in parts" in (step.backfill.message or "")


def test_advancing_takes_a_batch_oldest_first_and_skips_ticks_already_done() -> None:
    started = begin(ask(), None, SOURCE, T0 + S)
    assert started is not None
    done_before = {T0 - 12 * H, T0 - 10 * H}
    step = advance(started.backfill, SOURCE, already=lambda t: t in done_before, room=BATCH,
                   now=T0 + S)  # fmt: skip
    assert step.ticks == tuple(T0 - h * H for h in (11, 9, 8, 7, 6))[:BATCH]
    assert step.backfill.skipped == 2 and step.backfill.done == BATCH
    assert step.wake is not None
    rest = step.backfill
    while rest.state is BackfillState.RUNNING:
        rest = advance(rest, SOURCE, already=lambda t: False, room=BATCH, now=T0 + S).backfill
    assert rest.done + rest.skipped == rest.total == 12
    assert rest.state is BackfillState.DONE


def test_forbid_takes_one_tick_at_a_time_and_none_while_a_job_runs() -> None:
    started = begin(ask(overlap="Forbid"), None, SOURCE, T0 + S)
    assert started is not None
    one = advance(started.backfill, SOURCE, already=lambda t: False, room=1, now=T0)
    assert one.ticks == (T0 - 12 * H,)
    none = advance(one.backfill, SOURCE, already=lambda t: False, room=0, now=T0)
    assert none.ticks == () and none.backfill.state is BackfillState.RUNNING


def test_a_cancel_stops_a_running_backfill() -> None:
    started = begin(ask(), None, SOURCE, T0 + S)
    assert started is not None
    cancel = json.dumps({"request": "r2", "cancel": True})
    stopped = begin(cancel, started.backfill, SOURCE, T0 + 2 * S)
    assert stopped is not None and stopped.backfill.state is BackfillState.CANCELLED
    assert (
        advance(stopped.backfill, SOURCE, already=lambda t: False, room=BATCH, now=T0).ticks == ()
    )


def test_a_decision_claims_backfill_ticks_like_any_other_and_they_never_count_as_runs() -> None:
    spec = spec_body(maxRuns=100)
    status = status_body(spec, cursor=T0)
    body = schedule_body(spec, status, annotations={ANNOTATION_BACKFILL: ask()})
    existing = [job(T0 - 12 * H)]  # already ran: reported as already done
    decision = run(body, existing, now=T0 + 10 * S)
    assert [c.name for c in decision.creates] == [n(T0 - h * H) for h in (11, 10, 9, 8, 7)]
    assert decision.status is not None
    claims = {c["job"]: c for c in decision.status["inFlight"]}
    assert all(claims[c.name].get("backfill") is True for c in decision.creates)
    backfill = Backfill.model_validate(decision.status["backfill"])
    assert (backfill.done, backfill.skipped, backfill.total) == (5, 1, 12)
    assert decision.status.get("runs", 0) == 0
    assert decision.next_wake is not None and decision.next_wake <= T0 + 11 * S
    envs = decision.creates[0].body["spec"]["template"]["spec"]["containers"][0]["env"]
    assert {"name": "PUNCTUAL_FIRING", "value": "backfill"} in envs


def test_a_range_a_finished_backfill_went_through_never_runs_again() -> None:
    first = begin(ask(), None, SOURCE, T0 + S)
    assert first is not None
    state = first.backfill
    while state.state is BackfillState.RUNNING:
        state = advance(state, SOURCE, already=lambda t: False, room=BATCH, now=T0).backfill
    again = begin(ask(T0 - 14 * H, T0).replace('"r1"', '"r3"'), state, SOURCE, T0 + 2 * S)
    assert again is not None
    fresh = advance(again.backfill, SOURCE, already=lambda t: covers(state, t), room=BATCH, now=T0)
    assert fresh.ticks == (T0 - 14 * H, T0 - 13 * H)  # only what the first did not cover
