"""One recording fake of the Kubernetes API server, for every unit test of the shell.

Why it exists: the applier, the Lease loops, the Followers, the Event queue and the
reconciler all take an `Api` (punctual.kube.client). Each of their tests used to
hand-roll its own fake of it, each answering a little differently; this is the one
they share, so that a new shell test starts from an API server that already behaves:

- it records every request (`requests`: verb, path, params, body, who sent it, when,
  and what it answered), in order, so a test asserts order and content;
- it keeps objects by path, with resourceVersions and uids, and answers as the real
  API server does: 404 NotFound, 409 AlreadyExists, 409 Conflict on a stale
  `metadata.resourceVersion` or a delete's failed uid precondition, 422 Invalid on a
  patch that would change the uid; the `status` subresource; JSON merge patch (and
  the `$deleteFromPrimitiveList` directive of a strategic one); finalizers that keep a
  deleted object until they are removed; lists with a `labelSelector` (equality and
  `in` terms), a `fieldSelector` of equality terms on `metadata.name`,
  `metadata.namespace`, an Event's `involvedObject.uid` and the fields a test makes
  selectable (`selectable`, as a CRD's selectableFields do; any other field answers
  400, as the real one does) and
  `limit`/`continue` paging (the token is the offset into the list, as a string);
- a test scripts the answer or failure of the next matching request (`fail`,
  `answer`, `script_list`), the events of the next matching watch (`script_watch`),
  cuts a client off (`cut`) or slows every request (`latency`, on simulated time:
  tests/unit/faketime.py);
- `watch` is an async iterator fed by what is written (and by `inject`), from the
  given resourceVersion (or, without one, the current objects as ADDED first), that
  ends when the test closes it (`close_watches`) or its `timeoutSeconds` pass on
  simulated time.

`api.client(name)` is another client of the same server whose requests are recorded as
sent `by` that name (one per replica). Writes by the test itself (`put`, `remove`) are
the server's state, not requests: they are not recorded, but watches see them.

What it must never do: decide anything the real API server does not (no Lease expiry,
no Job controller, no defaulting, no admission), or wait real time.
"""

from __future__ import annotations

import asyncio
import copy
import itertools
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from punctual.kube.client import (
    MERGE_PATCH,
    AlreadyExists,
    ApiError,
    Body,
    Conflict,
    Invalid,
    NotFound,
    Unavailable,
)
from tests.unit.faketime import FakeTime

DIRECTIVE = "$deleteFromPrimitiveList/"


@dataclass(frozen=True)
class Request:
    """One request as the server saw it, and what it answered (an `answer` or an `error`)."""

    verb: str  # get, create, replace, delete, patch, watch
    path: str  # as sent (a create's is the collection)
    params: dict[str, str]
    body: Any
    by: str  # the client's name ("" for the fake's own)
    at: float  # simulated seconds since the start, when it arrived
    answer: Body | None = None
    error: ApiError | None = None

    @property
    def target(self) -> str:
        """The object's path: a create's is its collection's plus the new name."""
        if self.verb == "create" and isinstance(self.body, Mapping):
            return f"{self.path}/{self.body['metadata']['name']}"
        return self.path


@dataclass(frozen=True)
class Where:
    """A path taken apart: /api/v1 or /apis/group/version, a namespace or none, the
    resource, and the object's name and subresource when there are."""

    prefix: str
    namespace: str | None
    resource: str
    name: str | None = None
    subresource: str | None = None

    @classmethod
    def of(cls, path: str) -> Where:
        parts = path.strip("/").split("/")
        head = 2 if parts[0] == "api" else 3 if parts[0] == "apis" else len(parts) + 1
        prefix, rest = "/" + "/".join(parts[:head]), parts[head:]
        namespace = None
        if len(rest) > 2 and rest[0] == "namespaces":
            namespace, rest = rest[1], rest[2:]
        if not rest or len(rest) > 3:
            raise ValueError(f"not an API path: {path}")
        return cls(prefix, namespace, *rest)

    @property
    def collection(self) -> str:
        scope = f"/namespaces/{self.namespace}" if self.namespace is not None else ""
        return f"{self.prefix}{scope}/{self.resource}"

    @property
    def object_path(self) -> str:
        return f"{self.collection}/{self.name}"

    def holds(self, other: Where) -> bool:
        """Whether `other`, an object, is in this collection (any namespace, without one)."""
        return (
            (self.prefix, self.resource) == (other.prefix, other.resource)
            and self.namespace in (None, other.namespace)
            and other.name is not None
        )


@dataclass
class _Scripted:
    verb: str
    prefix: str
    params: dict[str, str]
    outcome: Body | ApiError | list[Body]

    def matches(self, verb: str, target: str, params: Mapping[str, str]) -> bool:
        return (
            verb == self.verb
            and target.startswith(self.prefix)
            and all(params.get(k) == v for k, v in self.params.items())
        )


@dataclass(eq=False)
class _Watch:
    where: Where
    params: dict[str, str]
    queue: asyncio.Queue[Body | None] = field(default_factory=asyncio.Queue)

    def sees(self, obj: Body) -> bool:
        meta = obj.get("metadata") or {}
        name = self.params.get("fieldSelector", "").removeprefix("metadata.name=")
        return (not name or meta.get("name") == name) and selected(
            obj, self.params.get("labelSelector", "")
        )


def _field(obj: Body, path: str) -> str:
    """A field selector's value of `obj` (`status.nextScheduleMinute`): "" when absent."""
    value: Any = obj
    for part in path.split("."):
        value = value.get(part) if isinstance(value, dict) else None
    return "" if value is None else str(value)


def _terms(selector: str) -> list[str]:
    """A selector's terms: split at the commas outside parentheses."""
    terms, depth, term = [], 0, ""
    for char in selector:
        depth += {"(": 1, ")": -1}.get(char, 0)
        if char == "," and depth == 0:
            terms.append(term)
            term = ""
        else:
            term += char
    return [t for t in [*terms, term] if t.strip()]


def selected(obj: Body, selector: str) -> bool:
    """Whether `obj`'s labels match a selector of equality terms ("a=b,c=d", "a==b",
    "a!=b", "a") and set terms ("a in (x,y)")."""
    labels = (obj.get("metadata") or {}).get("labels") or {}
    for term in _terms(selector):
        if " in (" in term:
            key, values = term.split(" in (", 1)
            if labels.get(key.strip()) not in {v.strip() for v in values.rstrip(") ").split(",")}:
                return False
        elif "!=" in term:
            key, value = term.split("!=", 1)
            if labels.get(key.strip()) == value.strip():
                return False
        elif "=" in term:
            key, value = term.replace("==", "=").split("=", 1)
            if labels.get(key.strip()) != value.strip():
                return False
        elif term.strip() not in labels:  # "key": it exists
            return False
    return True


class Client:
    """A client of the fake server (the `Api` Protocol): its requests are sent `by` a name."""

    def __init__(self, server: FakeApi, by: str) -> None:
        self.server = server
        self.by = by

    async def get(self, path: str, **params: str) -> Body:
        return await self.server._serve(self.by, "get", path, params, None)

    async def create(self, path: str, body: Body) -> Body:
        return await self.server._serve(self.by, "create", path, {}, body)

    async def replace(self, path: str, body: Body) -> Body:
        return await self.server._serve(self.by, "replace", path, {}, body)

    async def delete(self, path: str, body: Body | None = None) -> Body:
        return await self.server._serve(self.by, "delete", path, {}, body)

    async def patch(self, path: str, body: Any, *, content_type: str = MERGE_PATCH) -> Body:
        return await self.server._serve(self.by, "patch", path, {"contentType": content_type}, body)

    def watch(self, path: str, **params: str) -> AsyncIterator[Body]:
        return self.server._watch(self.by, path, params)


class FakeApi(Client):
    """The server, and its own client (`by` ""). See the module docstring."""

    def __init__(self, time: FakeTime | None = None) -> None:
        super().__init__(self, "")
        self.time = time or FakeTime()
        self.objects: dict[str, Body] = {}  # by object path
        self.requests: list[Request] = []
        self.cut: set[str] = set()  # clients whose every request fails at once
        self.latency = 0.0  # simulated seconds each request takes to arrive
        # The fields a list's fieldSelector may name: every kind's, and an Event's object.
        self.selectable = {"metadata.name", "metadata.namespace", "involvedObject.uid"}
        self._version = 0
        self._uids = itertools.count(1)
        self._scripted: list[_Scripted] = []
        self._watches: list[_Watch] = []
        self._history: list[tuple[int, str, str, Body]] = []  # (version, type, path, object)

    # -- what a test does -------------------------------------------------------------------

    def client(self, by: str) -> Client:
        return Client(self, by)

    def fail(self, verb: str, prefix: str, error: ApiError, **params: str) -> None:
        """The next `verb` request on a path starting with `prefix` (and with these
        params) fails with `error`; several scripted for one request go in turn."""
        self._scripted.append(_Scripted(verb, prefix, params, error))

    def answer(self, verb: str, prefix: str, body: Body, **params: str) -> None:
        """The next matching request is answered with `body` (nothing is stored)."""
        self._scripted.append(_Scripted(verb, prefix, params, copy.deepcopy(body)))

    def script_list(self, prefix: str, items: list[Body], resource_version: str) -> None:
        """The next list of a path starting with `prefix` answers `items` at that version
        (nothing is stored): for a test that scripts a list and the watch after it."""
        listing = {"metadata": {"resourceVersion": resource_version}, "items": items}
        self._scripted.append(_Scripted("get", prefix, {}, copy.deepcopy(listing)))

    def script_watch(self, prefix: str, events: list[Body], **params: str) -> None:
        """The next matching watch replays `events` and ends (nothing is stored)."""
        self._scripted.append(_Scripted("watch", prefix, params, copy.deepcopy(events)))

    def put(self, path: str, body: Body) -> Body:
        """Make `body` the server's object at `path`, as if someone else wrote it: its
        resourceVersion and uid are kept when given, else new ones given."""
        where = Where.of(path)
        body = copy.deepcopy(body)
        meta = body.setdefault("metadata", {})
        meta.setdefault("name", where.name)
        if where.namespace is not None:
            meta.setdefault("namespace", where.namespace)
        meta.setdefault("uid", f"uid-{next(self._uids)}")
        if "resourceVersion" in meta and str(meta["resourceVersion"]).isdigit():
            self._version = max(self._version, int(meta["resourceVersion"]))
            return self._store(path, body, keep_version=True)
        return self._store(path, body)

    def remove(self, path: str) -> Body:
        """Delete the object at `path` at once, as someone else would (finalizers aside)."""
        return self._drop(path)

    def inject(self, event: Body, prefix: str = "") -> None:
        """Send `event` to the open watches on paths starting with `prefix`."""
        for watch in self._watches:
            if watch.where.collection.startswith(prefix):
                watch.queue.put_nowait(copy.deepcopy(event))

    def close_watches(self, prefix: str = "") -> None:
        """End the open watches on paths starting with `prefix`, as the server does."""
        for watch in self._watches:
            if watch.where.collection.startswith(prefix):
                watch.queue.put_nowait(None)

    @property
    def resource_version(self) -> str:
        """The server's latest resourceVersion (what a list now answers with)."""
        return str(self._version)

    @property
    def calls(self) -> list[tuple[str, str]]:
        """(verb, target) of every request, in order."""
        return [(r.verb, r.target) for r in self.requests]

    def of(self, verb: str) -> list[Request]:
        return [r for r in self.requests if r.verb == verb]

    def items(self, collection: str) -> list[Body]:
        """The objects stored in `collection`, by path."""
        where = Where.of(collection)
        return [
            copy.deepcopy(body)
            for path, body in sorted(self.objects.items())
            if where.holds(Where.of(path))
        ]

    # -- inside: requests -------------------------------------------------------------------

    async def _serve(
        self, by: str, verb: str, path: str, params: dict[str, str], body: Any
    ) -> Body:
        request = Request(verb, path, dict(params), copy.deepcopy(body), by, 0.0)
        if by in self.cut:
            error = Unavailable(503, "ServiceUnavailable", f"{by} is cut off")
            self.requests.append(_with(request, self.time.seconds, error=error))
            raise error
        if self.latency:
            await self.time.sleep(self.latency)
        scripted = self._take(verb, request.target, params)
        try:
            if isinstance(scripted, ApiError):
                raise scripted
            answer = scripted if isinstance(scripted, dict) else self._do(verb, path, params, body)
        except ApiError as error:
            self.requests.append(_with(request, self.time.seconds, error=error))
            raise
        self.requests.append(_with(request, self.time.seconds, answer=answer))
        return copy.deepcopy(answer)

    def _take(self, verb: str, target: str, params: Mapping[str, str]) -> Any:
        for scripted in self._scripted:
            if scripted.matches(verb, target, params):
                self._scripted.remove(scripted)
                return scripted.outcome
        return None

    def _do(self, verb: str, path: str, params: dict[str, str], body: Any) -> Body:
        where = Where.of(path)
        if verb == "get":
            return self._list(where, params) if where.name is None else self._get(where)
        if verb == "create":
            return self._create(where, body)
        if verb == "replace":
            return self._replace(where, body)
        if verb == "delete":
            return self._delete(where, body)
        return self._patch(where, body, params["contentType"])

    def _get(self, where: Where) -> Body:
        current = self.objects.get(where.object_path)
        if current is None:
            raise NotFound(404, "NotFound", f"{where.object_path} not found")
        return copy.deepcopy(current)

    def _list(self, where: Where, params: Mapping[str, str]) -> Body:
        selector = params.get("labelSelector", "")
        fields = [t.split("=", 1) for t in params.get("fieldSelector", "").split(",") if t]
        for name, _ in fields:
            if name not in self.selectable:
                raise ApiError(400, "BadRequest", f'field label not supported: "{name}"')
        items = [
            item
            for item in self.items(where.collection)
            if selected(item, selector) and all(_field(item, n) == v for n, v in fields)
        ]
        start = int(params.get("continue") or 0)
        end = start + int(params["limit"]) if params.get("limit") else len(items)
        meta: Body = {"resourceVersion": self.resource_version}
        if end < len(items):
            meta["continue"] = str(end)
        return {"metadata": meta, "items": items[start:end]}

    def _create(self, where: Where, body: Body) -> Body:
        body = copy.deepcopy(body)
        meta = body.setdefault("metadata", {})
        if not meta.get("name") and meta.get("generateName"):
            meta["name"] = f"{meta['generateName']}{next(self._uids):05d}"
        target = Where.of(f"{where.collection}/{meta['name']}")
        if target.object_path in self.objects:
            raise AlreadyExists(409, "AlreadyExists", f"{target.object_path} already exists")
        meta.pop("resourceVersion", None)
        meta["uid"] = f"uid-{next(self._uids)}"
        if target.namespace is not None:
            meta["namespace"] = target.namespace
        return self._store(target.object_path, body)

    def _replace(self, where: Where, body: Body) -> Body:
        current = self._get(where)
        version = (body.get("metadata") or {}).get("resourceVersion")
        if version is not None and str(version) != current["metadata"]["resourceVersion"]:
            raise Conflict(
                409, "Conflict", f"{where.object_path}: the object has been modified ({version})"
            )
        if where.subresource == "status":
            new = {**current, "status": copy.deepcopy(body.get("status"))}
        else:
            new = copy.deepcopy(body)
            new["metadata"] = {**body.get("metadata", {}), "uid": current["metadata"]["uid"]}
        return self._store(where.object_path, new)

    def _delete(self, where: Where, options: Body | None) -> Body:
        current = self._get(where)
        preconditions = (options or {}).get("preconditions") or {}
        for key in ("uid", "resourceVersion"):
            if preconditions.get(key) not in (None, current["metadata"].get(key)):
                raise Conflict(409, "Conflict", f"{where.object_path}: precondition {key} failed")
        if current["metadata"].get("finalizers"):
            current["metadata"].setdefault("deletionTimestamp", "deleting")
            return self._store(where.object_path, current)
        return self._drop(where.object_path)

    def _patch(self, where: Where, patch: Any, content_type: str) -> Body:
        current = self._get(where)
        uid = ((patch or {}).get("metadata") or {}).get("uid")
        if uid is not None and uid != current["metadata"]["uid"]:
            raise Invalid(422, "Invalid", f"{where.object_path}: metadata.uid: field is immutable")
        strategic = content_type != MERGE_PATCH
        if where.subresource == "status":
            patch = {"status": (patch or {}).get("status")}
        return self._store(where.object_path, _merge(current, patch, strategic=strategic))

    # -- inside: the store and the watches --------------------------------------------------

    def _store(self, path: str, body: Body, *, keep_version: bool = False) -> Body:
        if not keep_version:
            self._version += 1
            body["metadata"]["resourceVersion"] = str(self._version)
        meta = body["metadata"]
        if meta.get("deletionTimestamp") and not meta.get("finalizers"):
            self.objects[path] = body
            return self._drop(path)
        event = "MODIFIED" if path in self.objects else "ADDED"
        self.objects[path] = copy.deepcopy(body)
        self._send(path, event, body)
        return copy.deepcopy(body)

    def _drop(self, path: str) -> Body:
        body = self.objects.pop(path, None)
        if body is None:
            raise NotFound(404, "NotFound", f"{path} not found")
        self._version += 1
        body["metadata"]["resourceVersion"] = str(self._version)
        self._send(path, "DELETED", body)
        return copy.deepcopy(body)

    def _send(self, path: str, event: str, body: Body) -> None:
        version = int(body["metadata"]["resourceVersion"])
        self._history.append((version, event, path, copy.deepcopy(body)))
        for watch in self._watches:
            if watch.where.holds(Where.of(path)) and watch.sees(body):
                watch.queue.put_nowait({"type": event, "object": copy.deepcopy(body)})

    async def _watch(self, by: str, path: str, params: dict[str, str]) -> AsyncIterator[Body]:
        where = Where.of(path)
        request = Request("watch", path, dict(params), None, by, self.time.seconds)
        if by in self.cut:
            error = Unavailable(503, "ServiceUnavailable", f"{by} is cut off")
            self.requests.append(_with(request, self.time.seconds, error=error))
            raise error
        if self.latency:
            await self.time.sleep(self.latency)
        scripted = self._take("watch", path, params)
        if isinstance(scripted, ApiError):
            self.requests.append(_with(request, self.time.seconds, error=scripted))
            raise scripted
        self.requests.append(_with(request, self.time.seconds))
        if isinstance(scripted, list):
            for event in scripted:
                yield copy.deepcopy(event)
            return
        watch = _Watch(where, dict(params))
        version = params.get("resourceVersion") or "0"
        if version == "0":  # the current state first, as ADDED
            for body in self.items(path):
                if watch.sees(body):
                    watch.queue.put_nowait({"type": "ADDED", "object": body})
        else:
            for rv, event, written, body in self._history:
                seen = watch.where.holds(Where.of(written)) and watch.sees(body)
                if rv > int(version) and seen:
                    watch.queue.put_nowait({"type": event, "object": copy.deepcopy(body)})
        self._watches.append(watch)
        timeout = float(params["timeoutSeconds"]) if params.get("timeoutSeconds") else None
        ended = asyncio.Event()
        timer = asyncio.ensure_future(self.time.wait(ended, timeout=timeout))
        getting: asyncio.Future[Body | None] | None = None
        try:
            while True:
                getting = asyncio.ensure_future(watch.queue.get())
                await asyncio.wait([getting, timer], return_when=asyncio.FIRST_COMPLETED)
                if not getting.done():
                    getting.cancel()
                    return  # timeoutSeconds passed
                event = getting.result()
                if event is None:
                    return  # closed
                yield event
        finally:
            ended.set()
            timer.cancel()
            if getting is not None:
                getting.cancel()
            self._watches.remove(watch)


def _with(request: Request, at: float, **outcome: Any) -> Request:
    return Request(
        request.verb, request.path, request.params, request.body, request.by, at, **outcome
    )


def _merge(target: Any, patch: Any, *, strategic: bool) -> Any:
    """RFC 7386 JSON merge patch; `strategic` adds the `$deleteFromPrimitiveList/` directive."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    result = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if strategic and key.startswith(DIRECTIVE):
            name = key.removeprefix(DIRECTIVE)
            result[name] = [v for v in result.get(name) or [] if v not in value]
        elif value is None:
            result.pop(key, None)
        else:
            result[key] = _merge(result.get(key), value, strategic=strategic)
    return result
