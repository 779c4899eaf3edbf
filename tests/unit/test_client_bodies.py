"""What the client sends and reads, now that its JSON is orjson's (`encode`, `decode`).

The codec changed for speed (bench/json_bench.py); what callers get must not: the
same objects from an answer and from each watch line, non-ASCII text intact both
ways, an answer that is not JSON as {"message": text}, and errors classified from
their Status as before. A real aiohttp server stands in for the API server, so the
bytes go over HTTP as they would.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import pytest
from aiohttp import web

from punctual.kube.client import ApiError, KubeClient, Unavailable, decode, encode
from punctual.kube.credentials import Credentials

from .localserver import serving

# Non-ASCII in a label value, a message and an annotation: the standard library wrote
# \u escapes, orjson writes UTF-8; the API server reads both alike.
BODY: dict[str, Any] = {
    "metadata": {"name": "nightly", "annotations": {"team": "Zürich ☀"}},
    "spec": {"schedule": "0 2 * * *", "suspend": False, "startingDeadlineSeconds": 600},
    "status": {"recentFirings": [{"tick": "2026-12-04T02:00:00Z", "epoch": 3}], "n": 1.5},
}


async def _echo(request: web.Request) -> web.Response:
    """Answers with what it was sent, after decoding it as the API server would."""
    sent = json.loads(await request.read())
    return web.json_response({"received": sent, "type": request.content_type})


async def _plain(request: web.Request) -> web.Response:
    return web.Response(status=503, text="upstream connect error", content_type="text/plain")


async def _forbidden(request: web.Request) -> web.Response:
    status = {"kind": "Status", "reason": "Forbidden", "message": "jobs is forbidden: é"}
    return web.json_response(status, status=403)


async def _watch(request: web.Request) -> web.StreamResponse:
    answer = web.StreamResponse()
    answer.enable_chunked_encoding()
    await answer.prepare(request)
    for name in ("a", "ü"):
        event = {"type": "ADDED", "object": {**BODY, "metadata": {"name": name}}}
        line = json.dumps(event).encode() + b"\n"
        await answer.write(line[:10])  # a line split across chunks
        await answer.write(line[10:])
    await answer.write_eof()
    return answer


@pytest.fixture
async def server() -> AsyncIterator[str]:
    routes = {
        ("POST", "/echo"): _echo,
        ("GET", "/plain"): _plain,
        ("GET", "/forbidden"): _forbidden,
        ("GET", "/things"): _watch,
    }
    async with serving(routes) as url:
        yield url


async def test_a_body_sent_and_read_back_is_the_same_object(server: str) -> None:
    async with KubeClient(Credentials(server=server)) as api:
        answer = await api.create("/echo", BODY)
    assert answer == {"received": BODY, "type": "application/json"}


async def test_an_answer_that_is_not_json_is_its_text_as_the_message(server: str) -> None:
    async with KubeClient(Credentials(server=server)) as api:
        with pytest.raises(Unavailable) as raised:
            await api.get("/plain")
    assert raised.value.status == 503
    assert raised.value.message == "upstream connect error"


async def test_a_status_answer_is_classified_with_its_reason_and_message(server: str) -> None:
    async with KubeClient(Credentials(server=server)) as api:
        with pytest.raises(ApiError) as raised:
            await api.get("/forbidden")
    assert (raised.value.status, raised.value.reason) == (403, "Forbidden")
    assert raised.value.message == "jobs is forbidden: é"


async def test_each_watch_line_is_one_event_however_the_chunks_fall(server: str) -> None:
    async with KubeClient(Credentials(server=server)) as api:
        events = [e async for e in api.watch("/things", timeoutSeconds="5")]
    assert [e["object"]["metadata"]["name"] for e in events] == ["a", "ü"]
    assert events[1]["object"]["status"] == BODY["status"]


def test_the_codec_round_trips_and_reads_the_standard_librarys_json() -> None:
    assert decode(encode(BODY)) == BODY
    assert decode(json.dumps(BODY).encode()) == BODY  # \u escapes, as before
    assert decode(b"  \n" + encode(BODY)) == BODY  # leading whitespace
    assert decode(b"<html>bad gateway</html>") == {"message": "<html>bad gateway</html>"}
    with pytest.raises(ValueError):
        decode(b'{"kind":')  # JSON cut short is an error, not a message
