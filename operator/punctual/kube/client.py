"""Punctual's own async client for the Kubernetes API: how Punctual's code reaches it.

Every write (fenced status claims, Job creates, Lease renewals) and every list and
watch (CronSchedules, Jobs, Leases) goes through this client; only kopf, following
FreezeWindows (`kube.watching`), has a session of its own. So preconditions such as
`metadata.resourceVersion` are explicit and every 409 is seen and classified, never
retried blindly. It is deliberately small: JSON over HTTPS with a bearer token or a
client certificate (a benchmarked aiohttp transport); where the server is and how to
authenticate come from `kube.credentials`. The rest of the package codes against its
Protocol, `Api`, which unit tests fake.

Connections: requests share a pool of at most `connections` (REQUEST_CONNECTIONS),
and each watch has a connection of its own, outside it, so that watches (one per kind
and namespace) never take a write's connection, however many namespaces are followed.
The pool is small on purpose: aiohttp hands out its idle connections oldest first, so
under a steady load none idles out, and a burst's connections (with their TLS buffers,
about 270 KB each) stayed for as long as the load did: the hour's soak saw a leader hold
100 connections, 110 descriptors and 20 MiB more after one API server restart
(bench/results-soak/at-1a0a54e.md). A request that finds the pool's every connection
taken goes to the overflow, a second pool of at most `overflow` (OVERFLOW_CONNECTIONS)
whose connections close OVERFLOW_IDLE seconds after their last use: a steady load never
fills the first pool, so it never reaches the overflow, and a herd's extra connections
are gone seconds after the herd (see the constants for what they buy).

What it must never do: decide. Callers get typed errors (`Conflict`, `AlreadyExists`,
`NotFound`, `Invalid`, `Unavailable`) and decide what they mean; the only retry here is
one after a 401, with a renewed credential.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable, Mapping
from datetime import datetime
from email.utils import parsedate_to_datetime
from typing import Any, Protocol, Self

import aiohttp
import orjson

from punctual.clocks import ServerClock
from punctual.kube.credentials import Auth, Credentials, CredentialsError

Body = dict[str, Any]


class ApiError(Exception):
    """A non-2xx answer from the API server, with its Status reason and message."""

    def __init__(
        self,
        status: int,
        reason: str,
        message: str,
        body: Body | None = None,
        retry_after: float | None = None,
    ):
        super().__init__(f"HTTP {status} {reason}: {message}")
        self.status = status
        self.reason = reason
        self.message = message
        self.body = body or {}
        self.retry_after = retry_after  # seconds, from a 429's Retry-After


class Conflict(ApiError):
    """409 Conflict: a resourceVersion precondition failed; someone else wrote first."""


class AlreadyExists(ApiError):
    """409 AlreadyExists: an object with this name exists."""


class NotFound(ApiError):
    """404 NotFound."""


class Invalid(ApiError):
    """422 Invalid: the object was rejected by validation (schema, CEL, admission)."""


class Unavailable(ApiError):
    """The API server could not be reached or answered 5xx/429: retry later with backoff."""


def encode(body: Any) -> bytes:
    """A request body as JSON. orjson, not the standard library: encoding and decoding
    were a tenth of the operator's CPU at 50 firings/s (bench/results-ramp-v2's py-spy
    table), and orjson takes a fraction of it (`bench/json_bench.py` prints how much)."""
    return orjson.dumps(body)


def decode(raw: bytes) -> Body:
    """An answer's body: its JSON object, or {"message": text} for anything else (a
    proxy's HTML page, a plain-text error). JSON that is not valid raises ValueError."""
    if raw.lstrip().startswith(b"{"):
        decoded: Body = orjson.loads(raw)
        return decoded
    return {"message": raw.decode("utf-8", errors="replace")}


def retry_after_of(header: str | None, body: Body) -> float | None:
    """Seconds the server asks to wait: its Retry-After header (delta-seconds), or the
    Status's details.retryAfterSeconds; None when it says nothing."""
    for value in (header, (body.get("details") or {}).get("retryAfterSeconds")):
        try:
            if value is not None and str(value).strip():
                return float(value)
        except ValueError:
            continue
    return None


def _classify(status: int, body: Body, retry_after: float | None = None) -> ApiError:
    reason = str(body.get("reason", "")) or str(status)
    message = str(body.get("message", "")) or json.dumps(body)[:500]
    if status == 409:
        cls: type[ApiError] = AlreadyExists if reason == "AlreadyExists" else Conflict
    elif status == 404:
        cls = NotFound
    elif status == 422:
        cls = Invalid
    elif status == 429 or status >= 500:
        cls = Unavailable
    else:
        cls = ApiError
    return cls(status, reason, message, body, retry_after)


MERGE_PATCH = "application/merge-patch+json"
STRATEGIC_MERGE_PATCH = "application/strategic-merge-patch+json"


class Api(Protocol):
    """What Punctual needs of the API server: five verbs on paths, and a watch.

    The one client Protocol: the applier, the Lease loop and its watch, the Followers,
    the Events and the runtime all take an `Api`. `KubeClient` is the real one; every
    shell unit test uses one recording fake of it (tests/unit/fakeapi.py: the applier's
    order and error handling, a Follower's pages, watches and relists, the Leases), and
    API semantics stay tested against the real control plane.
    """

    async def get(self, path: str, **params: str) -> Body: ...

    async def create(self, path: str, body: Body) -> Body: ...

    async def replace(self, path: str, body: Body) -> Body: ...

    async def delete(self, path: str, body: Body | None = None) -> Body: ...

    async def patch(self, path: str, body: Any, *, content_type: str = MERGE_PATCH) -> Body: ...

    # `def`, not `async def`: KubeClient.watch is an async generator, so calling it gives
    # the iterator at once (an `async def` here would be a coroutine returning one).
    def watch(self, path: str, **params: str) -> AsyncIterator[Body]:
        """The events of a watch on a collection, {"type": ..., "object": ...}, until the
        server ends it (give timeoutSeconds)."""
        ...


# Requests in flight at once on the pool that stays, and beyond it on the overflow (the
# rest wait for a connection). A herd of 1 000 creates, the operator alone on its pool
# (bench/results-herd/connections/): 32 connections 2.49-2.63 s, 64 2.11 s, 96
# 1.66-2.10 s, 128 2.26 s: with 32, the operator's loop keeps 15 creates in the API server
# at once; with 96, 36-52 (each waits longer there, but more are answered a second).
REQUEST_CONNECTIONS = 32
OVERFLOW_CONNECTIONS = 64
OVERFLOW_IDLE = 5.0  # seconds: aiohttp's keepalive_timeout for the overflow's connections


class KubeClient:
    """An async JSON client for one API server. Use as `async with KubeClient(creds) as api`."""

    def __init__(
        self,
        credentials: Credentials,
        *,
        timeout: float = 30.0,
        user_agent: str = "punctual",
        server_clock: ServerClock | None = None,
        observer: Callable[[str, int], None] | None = None,
        connections: int = REQUEST_CONNECTIONS,
        overflow: int = OVERFLOW_CONNECTIONS,
        overflow_idle: float = OVERFLOW_IDLE,
    ):
        self.credentials = credentials
        self._connections = connections
        self._overflow_shape = (overflow, overflow_idle)  # its connections, their idle time
        self._pooled = 0  # requests in flight on the pool that stays
        self._timeout = aiohttp.ClientTimeout(total=timeout)
        self._user_agent = user_agent
        self._session: aiohttp.ClientSession | None = None
        self._watches: aiohttp.ClientSession | None = None  # a connection per watch
        self._overflow: aiohttp.ClientSession | None = None  # when the pool is all taken
        # Every response's Date header refines the estimate of the API server's clock.
        self.server_clock = server_clock or ServerClock()
        self._observer = observer  # (verb, status code or 0) of every request, for metrics

    async def __aenter__(self) -> Self:
        self._session = self._new_session(self._connections)
        self._watches = self._new_session(0)  # 0: no limit
        overflow, idle = self._overflow_shape
        if overflow > 0:
            self._overflow = self._new_session(overflow, keepalive=idle)
        return self

    def _new_session(self, limit: int, *, keepalive: float = 15.0) -> aiohttp.ClientSession:
        connector = aiohttp.TCPConnector(
            ssl=self.credentials.ssl_context(), limit=limit, keepalive_timeout=keepalive
        )
        return aiohttp.ClientSession(
            connector=connector,
            timeout=self._timeout,
            headers={"User-Agent": self._user_agent, "Accept": "application/json"},
            proxy=self.credentials.proxy,
        )

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def close(self) -> None:
        for session in (self._session, self._watches, self._overflow):
            if session is not None:
                await session.close()
        self._session = self._watches = self._overflow = None

    async def request(
        self,
        method: str,
        path: str,
        *,
        body: Any = None,
        params: Mapping[str, str] | None = None,
        content_type: str = "application/json",
    ) -> Body:
        """Send one request; return the decoded JSON body or raise a classified ApiError.

        A 401 to a credential that an exec plugin or auth-provider issued is sent once
        more with a renewed one, as kubectl does.
        """
        if self._session is None:
            raise RuntimeError("KubeClient used outside `async with`")
        data = encode(body) if body is not None else None
        auth = await self._authenticate(method, path)
        status, decoded, wait = await self._send(method, path, data, params, content_type, auth)
        if status == 401 and self.credentials.reject(auth):
            auth = await self._authenticate(method, path)
            status, decoded, wait = await self._send(method, path, data, params, content_type, auth)
        if status >= 400:
            raise _classify(status, decoded, wait)
        return decoded

    async def _authenticate(self, method: str, path: str) -> Auth:
        try:
            return await self.credentials.authenticate()
        except CredentialsError as error:  # a plugin that fails now may work later
            raise Unavailable(0, "Unauthenticated", f"{method} {path}: {error}") from error

    async def _send(
        self,
        method: str,
        path: str,
        data: bytes | None,
        params: Mapping[str, str] | None,
        content_type: str,
        auth: Auth,
    ) -> tuple[int, Body, float | None]:
        headers = {"Content-Type": content_type}
        if auth.token:
            headers["Authorization"] = f"Bearer {auth.token}"
        pooled = self._overflow is None or self._pooled < self._connections
        session = self._session if pooled else self._overflow
        assert session is not None  # request() checked the pool; the overflow is there
        self._pooled += pooled
        sent = self.server_clock.local_now()
        try:
            async with session.request(
                method,
                self.credentials.server + path,
                data=data,
                params=params,
                headers=headers,
                ssl=auth.tls,
            ) as resp:
                self._observe_date(sent, resp.headers.get("Date"))
                if self._observer is not None:
                    self._observer(method, resp.status)
                decoded = decode(await resp.read())
                wait = None
                if resp.status == 429:
                    wait = retry_after_of(resp.headers.get("Retry-After"), decoded)
                return resp.status, decoded, wait
        except (aiohttp.ClientError, TimeoutError) as exc:
            # Any aiohttp failure, not only a connection's: an answer cut short (the API
            # server stopped mid-response) raises ClientPayloadError, which is not one.
            if self._observer is not None:
                self._observer(method, 0)
            raise Unavailable(0, "Unreachable", f"{method} {path}: {exc!r}") from exc
        finally:
            self._pooled -= pooled

    async def get(self, path: str, **params: str) -> Body:
        return await self.request("GET", path, params=params or None)

    async def create(self, path: str, body: Body) -> Body:
        return await self.request("POST", path, body=body)

    async def replace(self, path: str, body: Body) -> Body:
        return await self.request("PUT", path, body=body)

    async def patch(self, path: str, body: Any, *, content_type: str = MERGE_PATCH) -> Body:
        return await self.request("PATCH", path, body=body, content_type=content_type)

    async def delete(self, path: str, body: Body | None = None) -> Body:
        return await self.request("DELETE", path, body=body)

    async def watch(self, path: str, **params: str) -> AsyncIterator[Body]:
        """Stream the events of a watch on a collection until the server ends it.

        Each event is {"type": ADDED|MODIFIED|DELETED|ERROR, "object": ...}. The stream
        ends after the server's timeoutSeconds (give one); errors raise ApiError.
        """
        if self._watches is None:
            raise RuntimeError("KubeClient used outside `async with`")
        auth = await self._authenticate("GET", path)
        headers = {"Authorization": f"Bearer {auth.token}"} if auth.token else {}
        lasts = float(params.get("timeoutSeconds", "300"))
        timeout = aiohttp.ClientTimeout(total=None, connect=10, sock_read=lasts + 30)
        try:
            async with self._watches.get(
                self.credentials.server + path,
                params={**params, "watch": "true"},
                headers=headers,
                ssl=auth.tls,
                timeout=timeout,
            ) as resp:
                if self._observer is not None:
                    self._observer("WATCH", resp.status)
                if resp.status >= 400:
                    raise _classify(resp.status, decode(await resp.read()))
                # One JSON object per line; a line may be longer than aiohttp's readline
                # limit (a Job with a large template), so lines are split here.
                pending = b""
                async for chunk in resp.content.iter_any():
                    pending += chunk
                    *lines, pending = pending.split(b"\n")
                    for line in lines:
                        if line.strip():
                            yield orjson.loads(line)
                if pending.strip():
                    yield orjson.loads(pending)
        except (aiohttp.ClientError, TimeoutError) as exc:
            # A watch the API server's restart cuts mid-stream ends in ClientPayloadError
            # (not a connection error): uncaught, it ended the follower that read it.
            raise Unavailable(0, "Unreachable", f"WATCH {path}: {exc!r}") from exc

    def _observe_date(self, sent: datetime, header: str | None) -> None:
        if header:
            try:
                server_date = parsedate_to_datetime(header)
            except (TypeError, ValueError):
                return
            self.server_clock.observe(sent, self.server_clock.local_now(), server_date)
