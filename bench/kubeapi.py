"""The harness's own requests to the API server: bulk creates, paged lists, waiting.

Why it exists: the scenarios set up thousands of objects and read back Jobs, Events and
the Lease; these helpers do that with Punctual's asyncio client (punctual.kube.client),
retrying only what the API server asks to be retried.

What it must never do: write on behalf of the controller under test (the harness's
requests carry its own user agent, so the audit log tells them apart), or do anything
at import time.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import Counter
from collections.abc import Callable
from typing import Any

from clock import wall
from settings import LEASE, NAMESPACE

from punctual.kube.client import AlreadyExists, KubeClient, NotFound, Unavailable


async def create_all(
    api: KubeClient, path: str, bodies: list[dict[str, Any]], concurrency: int
) -> list[dict[str, Any]]:
    """Create every body (retrying only 429/5xx); returns the created objects in order."""
    gate = asyncio.Semaphore(concurrency)

    async def one(body: dict[str, Any]) -> dict[str, Any]:
        async with gate:
            for attempt in range(8):
                try:
                    return await api.create(path, body)
                except Unavailable:
                    await asyncio.sleep(0.2 * (attempt + 1))
                except AlreadyExists:
                    return await api.get(f"{path}/{body['metadata']['name']}")
            return await api.create(path, body)

    return list(await asyncio.gather(*(one(b) for b in bodies)))


async def create_as_client_go(
    api: KubeClient, path: str, bodies: list[dict[str, Any]], concurrency: int
) -> Counter[float]:
    """The raw client's creates: a request refused with 429 or 5xx is sent again after the
    Retry-After the server gave (1 s without one), as client-go does, though until it is
    created (client-go gives up after 10). How many times each Retry-After was given."""
    gate = asyncio.Semaphore(concurrency)
    waits: Counter[float] = Counter()

    async def one(body: dict[str, Any]) -> None:
        async with gate:
            while True:
                try:
                    await api.create(path, body)
                    return
                except Unavailable as error:
                    wait = 1.0 if error.retry_after is None else error.retry_after
                    waits[wait] += 1
                    await asyncio.sleep(wait)

    await asyncio.gather(*(one(b) for b in bodies))
    return waits


async def list_all(api: KubeClient, path: str, page: int = 500) -> list[dict[str, Any]]:
    """Every item of a list, page by page."""
    items: list[dict[str, Any]] = []
    token = ""
    while True:
        params = {"limit": str(page)}
        if token:
            params["continue"] = token
        body = await api.get(path, **params)
        items.extend(body.get("items") or [])
        token = (body.get("metadata") or {}).get("continue") or ""
        if not token:
            return items


async def prepare_namespace(api: KubeClient) -> None:
    """Create the bench's namespace and wait for its default ServiceAccount."""
    with contextlib.suppress(AlreadyExists):
        await api.create(
            "/api/v1/namespaces",
            {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}},
        )
    # The Job controller's pods need the namespace's default ServiceAccount, which the
    # controller-manager creates: its presence also says the controller-manager runs.
    deadline = wall() + 60
    while wall() < deadline:
        try:
            await api.get(f"/api/v1/namespaces/{NAMESPACE}/serviceaccounts/default")
            return
        except NotFound:
            await asyncio.sleep(0.2)
    raise TimeoutError("no default ServiceAccount: is kube-controller-manager running?")


async def lease_holder(api: KubeClient) -> str:
    """The identity holding the bench's Lease, "" if none."""
    try:
        lease = await api.get(f"/apis/coordination.k8s.io/v1/namespaces/{NAMESPACE}/leases/{LEASE}")
    except NotFound:
        return ""
    return str((lease.get("spec") or {}).get("holderIdentity") or "")


async def wait_for(
    what: str, check: Callable[[], Any], timeout: float, interval: float = 0.25
) -> None:
    """Until `check()` (a function or a coroutine function) is true; TimeoutError after."""
    deadline = wall() + timeout
    while wall() < deadline:
        result = check()
        if asyncio.iscoroutine(result):
            result = await result
        if result:
            return
        await asyncio.sleep(interval)
    raise TimeoutError(f"timed out after {timeout:.0f}s waiting for {what}")


def is_complete(job: dict[str, Any]) -> bool:
    """Whether a Job has succeeded or failed."""
    status = job.get("status") or {}
    if status.get("succeeded") or status.get("failed"):
        return True
    return any(
        c.get("type") in ("Complete", "Failed") and c.get("status") == "True"
        for c in status.get("conditions") or []
    )


def summarize_events(events: list[dict[str, Any]]) -> dict[str, int]:
    """Events about the schedules themselves (not their Jobs or pods), by source and reason."""
    out: Counter[str] = Counter()
    for event in events:
        kind = (event.get("involvedObject") or {}).get("kind")
        if kind not in ("CronSchedule", "CronJob"):
            continue
        source = (
            event.get("reportingComponent") or (event.get("source") or {}).get("component") or "?"
        )
        count = int(event.get("count") or 1)
        series = (event.get("series") or {}).get("count")
        out[f"{source} {event.get('reason')}"] += int(series) if series else count
    return dict(sorted(out.items()))
