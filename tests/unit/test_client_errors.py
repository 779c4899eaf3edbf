"""How the client reports an answer the API server cut short.

A restart of the API server closes its connections mid-answer. aiohttp then raises
ClientPayloadError, which is not a ClientConnectionError: the client let it through,
and the follower reading a watch ended on it (the soak's leaders then saw their own
Jobs run for ever). Each is an Unavailable now, as a refused connection is. A real
aiohttp server stands in for the API server, since the cut is at the HTTP level.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest
from aiohttp import web

from punctual.kube.client import KubeClient, Unavailable
from punctual.kube.credentials import Credentials

from .localserver import serving

EVENT = b'{"type":"ADDED","object":{"metadata":{"name":"a","resourceVersion":"1"}}}\n'


async def _cut_watch(request: web.Request) -> web.StreamResponse:
    answer = web.StreamResponse()
    answer.enable_chunked_encoding()
    await answer.prepare(request)
    await answer.write(EVENT)
    await asyncio.sleep(0.05)
    assert request.transport is not None
    request.transport.close()  # mid-stream, as a stopping API server does
    return answer


async def _cut_body(request: web.Request) -> web.StreamResponse:
    answer = web.StreamResponse(headers={"Content-Length": "1000"})
    await answer.prepare(request)
    await answer.write(b'{"kind":')  # far fewer bytes than promised
    assert request.transport is not None
    request.transport.close()
    return answer


@pytest.fixture
async def server() -> AsyncIterator[str]:
    routes = {("GET", "/api/v1/namespaces/team/things"): _cut_watch, ("GET", "/version"): _cut_body}
    async with serving(routes) as url:
        yield url


async def test_a_watch_cut_mid_stream_is_unavailable_after_the_events_it_carried(
    server: str,
) -> None:
    seen = []
    async with KubeClient(Credentials(server=server)) as api:
        with pytest.raises(Unavailable):
            async for event in api.watch("/api/v1/namespaces/team/things", timeoutSeconds="5"):
                seen.append(event["object"]["metadata"]["name"])
    assert seen == ["a"]


async def test_an_answer_cut_short_is_unavailable(server: str) -> None:
    async with KubeClient(Credentials(server=server)) as api:
        with pytest.raises(Unavailable):
            await api.get("/version")
