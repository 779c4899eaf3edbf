"""The Event queue: posting never blocks firing, Events wait (a while) for the creates in
flight, a full queue drops the oldest, and a failed post is dropped quietly (Events are
best effort)."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime
from typing import Any

from punctual.clocks import FixedClock
from punctual.core.records import EventNote
from punctual.kube.client import ApiError
from punctual.kube.events import EventRecorder
from tests.unit.fakeapi import FakeApi

T0 = datetime(2026, 11, 26, 12, 0, 0, 123456, tzinfo=UTC)
SCHEDULE = {"metadata": {"namespace": "team", "name": "nightly", "uid": "u-1"}}


EVENTS = "/api/v1/namespaces/team/events"


def sent(api: FakeApi) -> list[dict[str, Any]]:
    """The Events the API server accepted, in the order they were posted."""
    return [r.body for r in api.of("create") if r.error is None]


async def drain(recorder: EventRecorder) -> None:
    stop = asyncio.Event()
    task = asyncio.create_task(recorder.run(stop))
    for _ in range(100):
        await asyncio.sleep(0)
    stop.set()
    await task


async def test_posted_notes_are_sent_in_order_about_the_schedule() -> None:
    api = FakeApi()
    recorder = EventRecorder(api, clock=FixedClock(T0))
    recorder.post(SCHEDULE, EventNote("Normal", "Created", "Created Job nightly-1"))
    recorder.post(SCHEDULE, EventNote("Warning", "Missed", "1 tick missed"))
    assert api.requests == []  # posting never waits on the API server
    await drain(recorder)
    assert [e["reason"] for e in sent(api)] == ["Created", "Missed"]
    assert [r.path for r in api.requests] == [EVENTS, EVENTS]
    first = sent(api)[0]
    assert first["involvedObject"] == {
        "apiVersion": "punctual.dev/v1",
        "kind": "CronSchedule",
        "name": "nightly",
        "namespace": "team",
        "uid": "u-1",
    }
    assert first["firstTimestamp"] == "2026-11-26T12:00:00Z"  # Event times are whole seconds
    assert recorder.posted == 2


async def test_a_full_queue_drops_the_oldest_note() -> None:
    api = FakeApi()
    recorder = EventRecorder(api, clock=FixedClock(T0), capacity=2)
    for i in range(3):
        recorder.post(SCHEDULE, EventNote("Normal", "Created", f"job {i}"))
    await drain(recorder)
    assert [e["message"] for e in sent(api)] == ["job 1", "job 2"]
    assert recorder.dropped == 1


async def test_a_refused_post_is_dropped_and_the_queue_goes_on() -> None:
    api = FakeApi()
    api.fail("create", EVENTS, ApiError(403, "Forbidden", "events are not allowed"))
    recorder = EventRecorder(api, clock=FixedClock(T0))
    recorder.post(SCHEDULE, EventNote("Normal", "Created", "job"))
    await drain(recorder)
    recorder.post(SCHEDULE, EventNote("Normal", "Created", "next"))
    await drain(recorder)
    assert [e["message"] for e in sent(api)] == ["next"]
    assert [e["message"] for e in api.items(EVENTS)] == ["next"]
    assert recorder.posted == 1


async def test_a_long_message_is_cut_to_the_api_limit() -> None:
    api = FakeApi()
    recorder = EventRecorder(api, clock=FixedClock(T0))
    recorder.post(SCHEDULE, EventNote("Warning", "FailedCreate", "x" * 5000))
    await drain(recorder)
    assert len(sent(api)[0]["message"]) == 1024


async def test_events_wait_while_jobs_are_being_created_then_go() -> None:
    api = FakeApi()
    recorder = EventRecorder(api, clock=FixedClock(T0))
    stop = asyncio.Event()
    task = asyncio.create_task(recorder.run(stop))
    with recorder.creating():
        recorder.post(SCHEDULE, EventNote("Normal", "Created", "job"))
        for _ in range(100):
            await asyncio.sleep(0)
        assert api.requests == []  # a create is in flight: the API server is the firing's
    for _ in range(100):
        await asyncio.sleep(0)
    assert [e["message"] for e in sent(api)] == ["job"]
    stop.set()
    await task


async def test_an_event_waits_for_creates_at_most_a_while(monkeypatch: Any) -> None:
    monkeypatch.setattr("punctual.kube.events.YIELD_AT_MOST", 0.05)
    api = FakeApi()
    recorder = EventRecorder(api, clock=FixedClock(T0))
    stop = asyncio.Event()
    task = asyncio.create_task(recorder.run(stop))
    with recorder.creating():  # a sustained load: creates never stop
        recorder.post(SCHEDULE, EventNote("Normal", "Created", "job"))
        await asyncio.sleep(0.2)
        assert [e["message"] for e in sent(api)] == ["job"]
    stop.set()
    await task


async def test_the_notes_queued_at_the_stop_are_still_sent() -> None:
    # A graceful stop right after a decision (the status written, its Event queued) must
    # not lose the Event: the queue is flushed after the stop.
    api = FakeApi()
    recorder = EventRecorder(api, clock=FixedClock(T0))
    stop = asyncio.Event()
    stop.set()
    recorder.post(SCHEDULE, EventNote("Warning", "TickFailed", "attempt 3 failed"))
    recorder.post(SCHEDULE, EventNote("Normal", "Created", "job"))
    await recorder.run(stop)
    assert [e["reason"] for e in sent(api)] == ["TickFailed", "Created"]
    assert recorder.posted == 2
