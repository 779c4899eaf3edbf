"""Requests by annotation are never lost: written only over a request the operator has
taken, with a resourceVersion precondition, and followed until status shows them taken.

Two `punctual trigger` at once used to lose one while both said "triggered": each was a
merge patch of the same annotation without a precondition.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

from punctual.core.asking import request_of, taken, waiting
from punctual.core.keys import (
    ANNOTATION_BACKFILL,
    ANNOTATION_RERUN_FAILED,
    ANNOTATION_RESUME,
    ANNOTATION_TRIGGER,
)
from punctual.core.triggers import TriggerRequest
from punctual.kube.asking import Asked, NotAsked, ask
from tests.unit.fakeapi import FakeApi
from tests.unit.faketime import FakeTime

PATH = "/apis/punctual.dev/v1/namespaces/reports/cronschedules/nightly"


def trigger(request: str) -> str:
    return TriggerRequest(request, triggered_by="admin").annotation()


def backfill(request: str, **more: Any) -> str:
    return json.dumps({"request": request, **more})


TAKEN = [
    ("a trigger is taken once lastTrigger names it", ANNOTATION_TRIGGER, trigger("r1"),
     {"lastTrigger": "r1"}, True),
    ("a trigger lastTrigger does not name waits", ANNOTATION_TRIGGER, trigger("r2"),
     {"lastTrigger": "r1"}, False),
    ("a bare trigger id", ANNOTATION_TRIGGER, "by-hand", {"lastTrigger": "by-hand"}, True),
    ("a resume", ANNOTATION_RESUME, "r1", {"lastResume": "r1"}, True),
    ("a resume not yet taken", ANNOTATION_RESUME, "r2", {"lastResume": "r1"}, False),
    ("a backfill named by status.backfill", ANNOTATION_BACKFILL, backfill("b1"),
     {"backfill": {"request": "b1", "state": "Running"}}, True),
    ("a backfill not yet started", ANNOTATION_BACKFILL, backfill("b2"),
     {"backfill": {"request": "b1", "state": "Done"}}, False),
    ("a cancel with nothing running", ANNOTATION_BACKFILL, backfill("c1", cancel=True),
     {"backfill": {"request": "b1", "state": "Cancelled"}}, True),
    ("a cancel of a backfill still running", ANNOTATION_BACKFILL, backfill("c1", cancel=True),
     {"backfill": {"request": "b1", "state": "Running"}}, False),
    ("a rerun", ANNOTATION_RERUN_FAILED, backfill("f1"), {"lastRerun": "f1"}, True),
    ("an unreadable rerun is recorded whole", ANNOTATION_RERUN_FAILED, "{no",
     {"lastRerun": "{no"}, True),
]  # fmt: skip


@pytest.mark.parametrize(
    ("case", "annotation", "value", "status", "expected"), TAKEN, ids=[t[0] for t in TAKEN]
)
def test_taken(
    case: str, annotation: str, value: str, status: dict[str, Any], expected: bool
) -> None:
    assert taken(annotation, value, status) is expected


def test_the_request_waiting_is_the_one_status_has_not_taken() -> None:
    body: dict[str, Any] = {
        "metadata": {"annotations": {ANNOTATION_TRIGGER: trigger("r2")}},
        "status": {},
    }
    assert waiting(ANNOTATION_TRIGGER, body) == "r2"
    body["status"] = {"lastTrigger": "r2"}
    assert waiting(ANNOTATION_TRIGGER, body) is None
    assert waiting(ANNOTATION_RESUME, body) is None  # no annotation: nothing waits
    assert request_of(ANNOTATION_BACKFILL, "x" * 200) == "x" * 128


class Operator:
    """The operator's part, reduced to what a request needs: every `delay` seconds it
    takes the trigger the annotation holds (status.lastTrigger), and counts each once."""

    def __init__(self, api: FakeApi, time: FakeTime, delay: float = 0.5) -> None:
        self.api, self.time, self.delay = api, time, delay
        self.fired: list[str] = []

    async def run(self) -> None:
        client = self.api.client("operator")
        while True:
            await self.time.sleep(self.delay)
            body = await client.get(PATH)
            value = (body["metadata"].get("annotations") or {}).get(ANNOTATION_TRIGGER)
            if not value or not waiting(ANNOTATION_TRIGGER, body):
                continue
            request = request_of(ANNOTATION_TRIGGER, value)
            self.fired.append(request)
            await client.patch(
                PATH + "/status",
                {"metadata": {"resourceVersion": body["metadata"]["resourceVersion"]},
                 "status": {"lastTrigger": request}},
            )  # fmt: skip


def schedule(api: FakeApi) -> None:
    api.put(
        PATH,
        {
            "apiVersion": "punctual.dev/v1",
            "kind": "CronSchedule",
            "metadata": {"name": "nightly", "namespace": "reports"},
            "status": {},
        },
    )


async def asking(api: FakeApi, time: FakeTime, request: str, **more: Any) -> Asked:
    """`ask` for a trigger `request`, simulated time moved until it returns."""
    task = asyncio.create_task(asked(api, time, request, **more))
    await time.until(task.done, within=120)
    return task.result()


async def asked(api: FakeApi, time: FakeTime, request: str, **more: Any) -> Asked:
    return await ask(
        api.client(f"cli-{request}"),
        PATH,
        ANNOTATION_TRIGGER,
        trigger(request),
        timeout=more.pop("timeout", 30.0),
        sleeper=time,
        monotonic=time.monotonic,
        **more,
    )


@pytest.mark.parametrize("count", [2, 10])
async def test_concurrent_triggers_each_fire_once_and_each_is_told_it_was_taken(count: int) -> None:
    time = FakeTime()
    api = FakeApi(time)
    schedule(api)
    operator = Operator(api, time)
    running = asyncio.create_task(operator.run())
    asks = [asyncio.create_task(asked(api, time, f"r{i}")) for i in range(count)]
    await time.until(lambda: all(a.done() for a in asks), within=120)
    running.cancel()
    assert all(a.result().taken for a in asks)
    assert sorted(operator.fired) == sorted(f"r{i}" for i in range(count))
    # Some writes met a 409 (the precondition) and were made again from a fresh read.
    writes = [r for r in api.requests if r.verb == "patch" and r.by.startswith("cli-")]
    assert len([w for w in writes if w.error is None]) == count


async def test_a_request_is_never_written_over_one_not_taken_and_says_so() -> None:
    time = FakeTime()
    api = FakeApi(time)
    schedule(api)  # no operator: the first request is never taken
    first = await asking(api, time, "r1", timeout=5.0)
    assert not first.taken
    with pytest.raises(NotAsked, match="request r1 is ahead of this one"):
        await asking(api, time, "r2", timeout=5.0)
    annotations = api.objects[PATH]["metadata"]["annotations"]
    assert json.loads(annotations[ANNOTATION_TRIGGER])["request"] == "r1"


async def test_no_wait_returns_once_written() -> None:
    time = FakeTime()
    api = FakeApi(time)
    schedule(api)
    asked = await asking(api, time, "r1", follow=False)
    assert not asked.taken and time.seconds == 0
