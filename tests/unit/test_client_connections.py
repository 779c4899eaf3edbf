"""How many connections the client opens: requests share a small pool (and an overflow
whose connections close soon after a burst), watches do not.

A real aiohttp server stands in for the API server and counts what reaches it: the
requests it holds at once, and the connections they came on. The soak's leader kept a
burst's 100 connections (110 descriptors, 20 MiB) for as long as its load lasted; a
watch per namespace must never leave a write without a connection.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import dataclass, field

import pytest
from aiohttp import web

from punctual.kube.client import KubeClient
from punctual.kube.credentials import Credentials

from .localserver import serving

EVENT = b'{"type":"ADDED","object":{"metadata":{"name":"a","resourceVersion":"1"}}}\n'


@dataclass
class Server:
    url: str = ""
    held: int = 0  # requests being answered now
    most_held: int = 0
    peers: set[asyncio.BaseTransport] = field(default_factory=set)  # connections requests came on
    release: asyncio.Event = field(default_factory=asyncio.Event)


@pytest.fixture
async def server() -> AsyncIterator[Server]:
    state = Server()

    async def slow(request: web.Request) -> web.Response:
        assert request.transport is not None
        state.peers.add(request.transport)
        state.held += 1
        state.most_held = max(state.most_held, state.held)
        await asyncio.sleep(0.05)
        state.held -= 1
        return web.json_response({"kind": "Status"})

    async def watch(request: web.Request) -> web.StreamResponse:
        answer = web.StreamResponse()
        answer.enable_chunked_encoding()
        await answer.prepare(request)
        await answer.write(EVENT)
        await state.release.wait()  # open until the test is done
        return answer

    routes = {("GET", "/version"): slow, ("GET", "/api/v1/namespaces/{namespace}/things"): watch}
    async with serving(routes) as url:
        state.url = url
        yield state
        state.release.set()


async def test_requests_in_flight_never_exceed_the_pool_and_reuse_its_connections(
    server: Server,
) -> None:
    async with KubeClient(Credentials(server=server.url), connections=3, overflow=0) as api:
        await asyncio.gather(*(api.get("/version") for _ in range(30)))
    assert server.most_held == 3
    assert len(server.peers) == 3


async def test_watches_take_no_connection_of_the_pool(server: Server) -> None:
    async with KubeClient(Credentials(server=server.url), connections=1, overflow=0) as api:
        watches = [api.watch(f"/api/v1/namespaces/ns{i}/things") for i in range(5)]
        for stream in watches:  # each holds its connection open, one event read
            assert (await anext(stream))["type"] == "ADDED"
        # Five open watches, a pool of one: a request still gets through at once.
        await asyncio.wait_for(api.get("/version"), timeout=2)
        server.release.set()  # the watches end, and each stream with its last line
        for stream in watches:
            assert [event async for event in stream] == []


async def test_a_burst_beyond_the_pool_takes_the_overflow_whose_connections_then_close(
    server: Server,
) -> None:
    async with KubeClient(
        Credentials(server=server.url), connections=2, overflow=3, overflow_idle=0.2
    ) as api:
        await asyncio.gather(*(api.get("/version") for _ in range(30)))
        assert server.most_held == 5  # the pool's 2 and the overflow's 3
        assert len(server.peers) == 5
        await asyncio.sleep(0.6)  # the overflow's connections idle out; the pool's stay
        open_now = {peer for peer in server.peers if not peer.is_closing()}
        assert len(open_now) == 2
        # A steady load (one request at a time) stays on the pool: no new connection.
        server.most_held = 0
        for _ in range(5):
            await api.get("/version")
        assert server.most_held == 1
        assert len(server.peers) == 5


async def test_without_an_overflow_the_pool_is_the_bound(server: Server) -> None:
    async with KubeClient(Credentials(server=server.url), connections=2, overflow=0) as api:
        await asyncio.gather(*(api.get("/version") for _ in range(10)))
    assert server.most_held == 2
