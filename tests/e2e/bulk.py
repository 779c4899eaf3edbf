"""Many CronSchedules at once, for the tests that need an index too large to list in a blink.

Why it exists: readiness is only worth testing when listing takes long enough to watch
(20 000 schedules take seconds, not milliseconds). Creating them one `kubectl apply` at a
time would take minutes; here they go through the async client, many at a time, and are
removed with one deletecollection so the namespace controller is not left a backlog that
slows the tests after.

What it must never do: create anything that fires: the bulk schedules name a tick a
year away, so the audit log of a test holds only the Jobs it checks.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from typing import Any

from punctual.kube.client import AlreadyExists, KubeClient, Unavailable

YEARLY = "0 0 1 1 *"  # never due while a test runs (a test on New Year's Eve still passes)


def rare(name: str, class_name: str | None = None) -> dict[str, Any]:
    """A yearly schedule; with `class_name`, one that an installation without that class
    indexes (lists, watches, counts for readiness) but never writes to."""
    body: dict[str, Any] = {
        "apiVersion": "punctual.dev/v1",
        "kind": "CronSchedule",
        "metadata": {"name": name, "labels": {"punctual.dev/bulk": "true"}},
        "spec": {
            "schedule": YEARLY,
            "jobTemplate": {
                "spec": {
                    "template": {
                        "spec": {
                            "restartPolicy": "Never",
                            "containers": [{"name": "c", "image": "busybox"}],
                        }
                    }
                }
            },
        },
    }
    if class_name is not None:
        body["spec"]["className"] = class_name
    return body


def path(namespace: str) -> str:
    return f"/apis/punctual.dev/v1/namespaces/{namespace}/cronschedules"


async def create_rare(
    api: KubeClient,
    namespace: str,
    count: int,
    *,
    at_once: int = 32,
    class_name: str | None = None,
) -> None:
    """Create `count` yearly schedules named bulk-0 ... (retrying 429 and 5xx answers)."""
    names: asyncio.Queue[str | None] = asyncio.Queue()
    for i in range(count):
        names.put_nowait(f"bulk-{i}")
    for _ in range(at_once):
        names.put_nowait(None)

    async def worker() -> None:
        while (name := await names.get()) is not None:
            for attempt in range(20):
                try:
                    await api.create(path(namespace), rare(name, class_name))
                    break
                except AlreadyExists:
                    break
                except Unavailable:
                    await asyncio.sleep(min(2.0, 0.2 * (attempt + 1)))

    await asyncio.gather(*(worker() for _ in range(at_once)))


async def delete_rare(api: KubeClient, namespace: str, *, within: float = 300) -> None:
    """Remove them by deletecollection (of their label), again after a client time-out
    (the server stops where the request ended), until none is left."""
    selector = {"labelSelector": "punctual.dev/bulk=true"}
    deadline = time.monotonic() + within
    while True:
        with contextlib.suppress(Unavailable):
            await api.request("DELETE", path(namespace), params=selector)
        left = await api.get(path(namespace), limit="1", **selector)
        if not left.get("items"):
            return
        if time.monotonic() > deadline:
            raise TimeoutError(f"bulk schedules of {namespace} still there after {within}s")
