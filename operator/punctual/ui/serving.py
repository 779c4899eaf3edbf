"""`punctual ui`'s web server: a page on 127.0.0.1 that reads and acts as the caller.

Why it exists: a person wants to look at the fleet (the timeline, a schedule's story)
and press "run now", without a new in-cluster component or new RBAC. This server talks to
the API server with the caller's own kubeconfig, so the page can do exactly what the
caller may do; every action runs the CLI's own command (`Runner`, handed in by
`punctual.cli.main`: `punctual trigger`, `resume`, `backfill`), so the page and the CLI
change the same things the same way, and a refusal shows the API server's message. The
fleet is listed once and then followed with a watch (`kube.following`), so the page is
live; what changes ticks (Calendars, freeze windows, Namespace labels) is listed every
`poll`.

Who may use it: whoever holds the per-run token printed in the URL (as Jupyter does).
Every request without it is refused (401); a write also needs it in the
`X-Punctual-Token` header (a cross-site form cannot set one) and, when the browser sends
an Origin, an Origin of this server (403 otherwise); a Host other than this server's is
refused (403), so a DNS-rebinding page cannot reach it by name.

What it must never do: listen on anything but loopback, serve a file from outside its
`static/` directory, fetch anything from the network but the API server, or write to the
API server other than through an action the page confirmed.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import secrets
import signal
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from importlib import resources
from typing import Any, Final

from aiohttp import web

from punctual.clocks import Clock
from punctual.core.calendars import read_calendar
from punctual.core.freezing import read_cluster_freeze, read_freeze
from punctual.core.keys import LABEL_SCHEDULE_UID
from punctual.core.schedules import format_local, load_zone
from punctual.core.times import format_time, parse_time
from punctual.kube.client import Api, ApiError
from punctual.kube.following import Follower
from punctual.ui.stories import event_rows, job_rows, why, workload_rows
from punctual.ui.timelines import Shared, Timeline, Window, state_of, upcoming

TOKEN_HEADER: Final = "X-Punctual-Token"
TOKEN_COOKIE: Final = "punctual-ui-token"
POLL_SECONDS: Final = 5.0  # how often the fleet is listed again (the page polls as often)
PAGE_SIZE: Final = 500  # items per list request
GROUP_PATH: Final = "/apis/punctual.dev/v1"
STATES: Final = ("Active", "Suspended", "Paused", "Finished", "Invalid")
CONTENT_TYPES: Final = {".html": "text/html", ".js": "text/javascript", ".css": "text/css"}

Body = dict[str, Any]
# Runs one `punctual` command line (argv without "punctual"); returns (status, stdout, stderr).
Runner = Callable[[list[str]], tuple[int, str, str]]


@dataclass
class Settings:
    """What the server is for: whose namespaces, which kubeconfig the CLI commands use."""

    namespaces: Sequence[str] = ()  # empty: every namespace the caller can list
    home: str = "default"  # the kubeconfig's namespace, when a cluster-wide list is refused
    kubeconfig: str | None = None
    poll: float = POLL_SECONDS


@dataclass
class Fleet:
    """The schedules last listed, and what listing them said."""

    items: list[Body] = field(default_factory=list)
    listed: datetime | None = None
    problem: str | None = None
    scope: str = ""
    shared: Shared = field(default_factory=Shared)


def _schedules_path(namespace: str | None) -> str:
    where = f"/namespaces/{namespace}" if namespace else ""
    return f"{GROUP_PATH}{where}/cronschedules"


class _Followed:
    """The fleet as the watch tells of it (`kube.following.Collection`). A change only
    marks the server's `Fleet` stale; the next request that reads it rebuilds it once
    (`Server.current`): a herd's thousand status updates cost one sort, not a thousand."""

    def __init__(self, server: Server) -> None:
        self.server = server
        self.bodies: dict[str, Body] = {
            str(b["metadata"].get("uid", "")): b for b in server.fleet.items
        }
        server.followed = self
        self.stale = False

    def listed(self, namespace: str | None, uids: set[str]) -> None:
        for uid, body in list(self.bodies.items()):
            if uid not in uids and (
                namespace is None or body["metadata"].get("namespace") == namespace
            ):
                del self.bodies[uid]
        self._publish()

    def changed(self, obj: Body) -> None:
        self.bodies[str(obj["metadata"].get("uid", ""))] = obj
        self._publish()

    def deleted(self, obj: Body) -> None:
        self.bodies.pop(str(obj["metadata"].get("uid", "")), None)
        self._publish()

    def _publish(self) -> None:
        self.stale = True
        self.server.changed_at = self.server.clock.now()

    def items(self) -> list[Body]:
        self.stale = False
        return sorted(
            self.bodies.values(),
            key=lambda b: (b["metadata"].get("namespace", ""), b["metadata"].get("name", "")),
        )


class Server:
    """The aiohttp application and the state it serves. See the module docstring. Over
    200 lines: one method per route (the fleet, a schedule, why, each action) and the
    guard they share; what they compute is `timelines` and `stories`."""

    def __init__(
        self, api: Api, run: Runner, clock: Clock, settings: Settings, token: str | None = None
    ) -> None:
        self.api = api
        self.run = run
        self.clock = clock
        self.settings = settings
        self.token = token or secrets.token_urlsafe(24)
        self.port = 0  # set when bound; 0 in tests, where any Host of 127.0.0.1 is taken
        self.fleet = Fleet()
        self.followed: _Followed | None = None  # the watch's fleet, once it follows
        self.changed_at: datetime | None = None  # its last change
        self.timeline = Timeline()
        self._listed = asyncio.Event()
        self._poller: asyncio.Task[None] | None = None
        self.app = web.Application(middlewares=[self._guard])
        self.app.router.add_get("/", self._index)
        self.app.router.add_get("/static/{file}", self._static)
        self.app.router.add_get("/api/fleet", self._fleet)
        self.app.router.add_get("/api/schedules/{namespace}/{name}", self._schedule)
        self.app.router.add_get("/api/schedules/{namespace}/{name}/why", self._why)
        self.app.router.add_post("/api/schedules/{namespace}/{name}/{action}", self._act)
        self.app.on_startup.append(self._start)
        self.app.on_cleanup.append(self._stop)

    # -- the guard ---------------------------------------------------------------------------

    @web.middleware
    async def _guard(
        self, request: web.Request, handler: Callable[[web.Request], Any]
    ) -> web.StreamResponse:
        if not self._host_allowed(request.host):
            return _refused(403, f"Host {request.host} is not this server")
        given = (
            request.headers.get(TOKEN_HEADER)
            or request.query.get("token")
            or request.cookies.get(TOKEN_COOKIE)
        )
        if not given or not self._is_token(given):
            return _refused(401, "a token is needed: open the URL `punctual ui` printed")
        if request.method not in ("GET", "HEAD"):
            header = request.headers.get(TOKEN_HEADER) or ""
            if not self._is_token(header):
                return _refused(403, f"a write needs the {TOKEN_HEADER} header")
            origin = request.headers.get("Origin")
            if origin is not None and not self._origin_allowed(origin):
                return _refused(403, f"cross-origin write from {origin} refused")
        response: web.StreamResponse = await handler(request)
        return response

    def _is_token(self, given: str) -> bool:
        """In constant time, as bytes (a header may carry any character)."""
        return secrets.compare_digest(given.encode("utf-8", "replace"), self.token.encode())

    def _host_allowed(self, host: str) -> bool:
        name, _, port = host.rpartition(":") if host.count(":") == 1 else (host, "", "")
        if name not in ("127.0.0.1", "localhost"):
            return False
        return self.port == 0 or port == str(self.port)

    def _origin_allowed(self, origin: str) -> bool:
        scheme, _, rest = origin.partition("://")
        return scheme == "http" and self._host_allowed(rest)

    # -- the fleet, listed again every few seconds -------------------------------------------

    async def _start(self, app: web.Application) -> None:
        self._poller = asyncio.create_task(self._poll())

    async def _stop(self, app: web.Application) -> None:
        if self._poller is not None:
            self._poller.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._poller

    async def _poll(self) -> None:
        """List the fleet, then follow it: a watch of the schedules from that list on (a
        relist after 410 Gone, `kube.following`), so the page's next poll sees every
        change; what changes their ticks (Calendars, freeze windows, Namespace labels) is
        listed again every `poll`. Where the watch cannot be held, the fleet is listed
        again every `poll` instead."""
        await self.refresh()
        stop = asyncio.Event()
        following = asyncio.create_task(self._follow(stop))
        try:
            while True:
                await asyncio.sleep(self.settings.poll)
                if following.done():  # the watch could not be held: list
                    await self.refresh()
                else:
                    self.fleet.shared = await self._shared()
        finally:
            stop.set()
            following.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await following

    async def _follow(self, stop: asyncio.Event) -> None:
        """Follow the schedules of the scope the first list found readable."""
        if self.fleet.problem is not None:
            return
        scope = self.fleet.scope
        namespaces = [] if scope == "all namespaces" else list(self.settings.namespaces) or [scope]
        followed = _Followed(self)
        path = _schedules_path
        await Follower(self.api, path, followed, namespaces=namespaces, what="CronSchedules").run(
            stop
        )

    async def refresh(self) -> None:
        """List the schedules again, and what changes their ticks (Calendars, freeze
        windows, Namespace labels); a failure keeps the last list and says why."""
        try:
            items, scope = await self._list()
            self.fleet = Fleet(items, self.clock.now(), None, scope, self.fleet.shared)
        except ApiError as error:
            self.fleet = Fleet(
                self.fleet.items, self.fleet.listed, str(error), self.fleet.scope, self.fleet.shared
            )
        self.fleet.shared = await self._shared()
        self._listed.set()

    async def _shared(self) -> Shared:
        """Calendars, FreezeWindows of the namespaces shown, ClusterFreezeWindows and the
        Namespaces' labels: each empty when the caller may not read it (or the CRD is not
        installed), as the page then says nothing of it rather than guess."""
        namespaces = list(self.settings.namespaces)
        calendars = await self._maybe_all(f"{GROUP_PATH}/calendars")
        found = [
            await self._maybe_all(f"{GROUP_PATH}/namespaces/{namespace}/freezewindows")
            for namespace in namespaces
        ] or [await self._maybe_all(f"{GROUP_PATH}/freezewindows")]
        if not namespaces and found[0] is None:  # not cluster-wide: the home namespace's
            found = [
                await self._maybe_all(f"{GROUP_PATH}/namespaces/{self.settings.home}/freezewindows")
            ]
        freezes = [body for bodies in found for body in bodies or []]
        cluster_freezes = await self._maybe_all(f"{GROUP_PATH}/clusterfreezewindows")
        spaces = await self._maybe_all("/api/v1/namespaces")
        read = [read_freeze(b) for b in freezes]
        read_cluster = [read_cluster_freeze(b) for b in cluster_freezes or []]
        bodies = [*(calendars or []), *freezes, *(cluster_freezes or [])]
        return Shared(
            calendars=None
            if calendars is None
            else {str(b["metadata"]["name"]): read_calendar(b) for b in calendars},
            freezes=[f for f in read if not isinstance(f, str)],
            cluster_freezes=[f for f in read_cluster if not isinstance(f, str)],
            namespace_labels=None
            if spaces is None
            else {str(n["metadata"]["name"]): n["metadata"].get("labels") or {} for n in spaces},
            version=",".join(
                f"{b['metadata'].get('uid')}@{b['metadata'].get('resourceVersion')}" for b in bodies
            ),
        )

    async def _maybe_all(self, path: str) -> list[Body] | None:
        try:
            return await self._all(path)
        except ApiError:
            return None

    async def _list(self) -> tuple[list[Body], str]:
        if self.settings.namespaces:
            items: list[Body] = []
            for namespace in self.settings.namespaces:
                items += await self._all(f"{GROUP_PATH}/namespaces/{namespace}/cronschedules")
            return items, ", ".join(self.settings.namespaces)
        try:
            return await self._all(f"{GROUP_PATH}/cronschedules"), "all namespaces"
        except ApiError as error:
            if error.status != 403:
                raise
        home = self.settings.home
        return await self._all(f"{GROUP_PATH}/namespaces/{home}/cronschedules"), home

    async def _all(self, path: str) -> list[Body]:
        items: list[Body] = []
        token = ""
        while True:
            params = {"limit": str(PAGE_SIZE)} | ({"continue": token} if token else {})
            page = await self.api.get(path, **params)
            items += page.get("items") or []
            token = str((page.get("metadata") or {}).get("continue") or "")
            if not token:
                return items

    # -- pages -------------------------------------------------------------------------------

    async def _index(self, request: web.Request) -> web.StreamResponse:
        response = _file("index.html")
        response.set_cookie(TOKEN_COOKIE, self.token, httponly=True, samesite="Strict")
        return response

    async def _static(self, request: web.Request) -> web.StreamResponse:
        return _file(request.match_info["file"])

    def current(self) -> Fleet:
        """The fleet, with what the watch told since it was last read."""
        followed = self.followed
        if followed is not None and followed.stale:
            fleet = self.fleet
            listed = self.changed_at or fleet.listed
            self.fleet = Fleet(followed.items(), listed, None, fleet.scope, fleet.shared)
        return self.fleet

    async def _fleet(self, request: web.Request) -> web.StreamResponse:
        await self._listed.wait()
        self.current()
        try:
            span = int(request.query.get("span", "3600"))
        except ValueError:
            return _refused(400, "span must be a number of seconds")
        now = self.clock.now()
        window = Window.of(now, span)
        wanted = _Filter.of(request.query)
        bodies = [b for b in self.fleet.items if wanted.keeps(b, now)]
        answer = await asyncio.to_thread(
            self.timeline.fleet, bodies, window, now, self.fleet.shared
        )
        answer |= {
            "scope": self.fleet.scope,
            "listed": format_time(self.fleet.listed) if self.fleet.listed else None,
            "problem": self.fleet.problem,
            "total": len(self.fleet.items),
            "namespaces": sorted(
                {str((b.get("metadata") or {}).get("namespace")) for b in self.fleet.items}
            ),
            "poll": self.settings.poll,
        }
        return _json(answer)

    async def _schedule(self, request: web.Request) -> web.StreamResponse:
        namespace, name = request.match_info["namespace"], request.match_info["name"]
        try:
            body = await self.api.get(f"{GROUP_PATH}/namespaces/{namespace}/cronschedules/{name}")
        except ApiError as error:
            return _refused(error.status if 400 <= error.status < 600 else 502, str(error))
        now = self.clock.now()
        uid = str(body["metadata"].get("uid", ""))
        events, jobs = await asyncio.gather(
            self._maybe_items(
                f"/api/v1/namespaces/{namespace}/events",
                fieldSelector=f"involvedObject.uid={uid}",
            ),
            self._runs(body, namespace, uid),
        )
        try:
            found = upcoming(body, now, 10, self.fleet.shared.calendars)
            zone = load_zone(str((body.get("spec") or {}).get("timeZone") or "UTC"))
            ticks = [format_time(t) for t in found]
            local = [format_local(t, zone) for t in found]
            problem = None
        except ValueError as error:
            ticks, local, problem = [], [], str(error)
        describe = await asyncio.to_thread(self.run, ["describe", name, *self._where(namespace)])
        status = body.get("status") or {}
        return _json(
            {
                "namespace": namespace,
                "name": name,
                "state": state_of(body, now),
                "spec": body.get("spec") or {},
                "upcoming": ticks,
                "upcomingLocal": local,
                "problem": problem,
                "firings": status.get("recentFirings") or [],
                "conditions": status.get("conditions") or [],
                "events": event_rows(events[0]) if events[1] is None else [],
                "eventsProblem": events[1],
                "jobs": jobs[0],
                "jobsProblem": jobs[1],
                "describe": describe[1] if describe[0] == 0 else describe[2],
                "now": format_time(now),
            }
        )

    async def _runs(
        self, body: Mapping[str, Any], namespace: str, uid: str
    ) -> tuple[list[Body], str | None]:
        """The schedule's Jobs, or its workloadTemplate kind's objects (found by discovery,
        as `punctual backfill --dry-run` finds them), as rows; or why they cannot be read."""
        selector = f"{LABEL_SCHEDULE_UID}={uid}"
        spec = body.get("spec") or {}
        template = spec.get("workloadTemplate")
        if not isinstance(template, Mapping):
            items, problem = await self._maybe_items(
                f"/apis/batch/v1/namespaces/{namespace}/jobs", labelSelector=selector
            )
            return job_rows(items, namespace), problem
        api_version, kind = str(template.get("apiVersion", "")), str(template.get("kind", ""))
        group = api_version.rpartition("/")[0]
        prefix = f"/apis/{api_version}" if group else f"/api/{api_version}"
        try:
            discovered = list((await self.api.get(prefix)).get("resources") or [])
        except ApiError as error:
            return [], str(error)
        resource = next(
            (
                str(r["name"])
                for r in discovered
                if r.get("kind") == kind and "/" not in str(r.get("name", ""))
            ),
            None,
        )
        if resource is None:
            return [], f"the API server does not serve {kind} ({api_version})"
        items, problem = await self._maybe_items(
            f"{prefix}/namespaces/{namespace}/{resource}", labelSelector=selector
        )
        rows = workload_rows(
            items,
            namespace,
            group=group,
            kind=kind,
            resource=resource,
            completion=spec.get("completion"),
        )
        return rows, problem

    async def _maybe_items(self, path: str, **params: str) -> tuple[list[Body], str | None]:
        """A list, or what the API server said instead (a caller may not read Events)."""
        try:
            return list((await self.api.get(path, **params)).get("items") or []), None
        except ApiError as error:
            return [], str(error)

    async def _why(self, request: web.Request) -> web.StreamResponse:
        namespace, name = request.match_info["namespace"], request.match_info["name"]
        try:
            instant = parse_time(request.query.get("at", ""))
        except ValueError as error:
            return _refused(400, f"at: {error}")
        try:
            body = await self.api.get(f"{GROUP_PATH}/namespaces/{namespace}/cronschedules/{name}")
        except ApiError as error:
            return _refused(error.status if 400 <= error.status < 600 else 502, str(error))
        uid = str(body["metadata"].get("uid", ""))
        events, _ = await self._maybe_items(
            f"/api/v1/namespaces/{namespace}/events", fieldSelector=f"involvedObject.uid={uid}"
        )
        shared = self.fleet.shared
        answer = why(body, events, instant, shared.calendars, shared.freezes_of(body))
        return _json({"at": format_time(instant), "answer": answer})

    # -- actions -----------------------------------------------------------------------------

    async def _act(self, request: web.Request) -> web.StreamResponse:
        namespace, name = request.match_info["namespace"], request.match_info["name"]
        action = request.match_info["action"]
        try:
            asked = await request.json()
        except json.JSONDecodeError:
            asked = {}
        if not isinstance(asked, dict):
            return _refused(400, "the body must be a JSON object")
        if action in ("suspend", "unsuspend"):
            return await self._suspend(namespace, name, action == "suspend")
        argv = command_line(action, name, asked)
        if argv is None:
            return _refused(404, f"no action {action}")
        status, out, err = await asyncio.to_thread(self.run, [*argv, *self._where(namespace)])
        if status != 0:
            return _json({"ok": False, "error": err.strip() or out.strip()}, status=422)
        return _json({"ok": True, "output": out.strip(), "command": _shown(argv, namespace)})

    async def _suspend(self, namespace: str, name: str, suspend: bool) -> web.StreamResponse:
        """spec.suspend, as `kubectl patch cronschedule NAME --type merge -p
        '{"spec":{"suspend":true}}'` sets it (the CLI has no command of its own for it)."""
        path = f"{GROUP_PATH}/namespaces/{namespace}/cronschedules/{name}"
        try:
            await self.api.patch(path, {"spec": {"suspend": suspend}})
        except ApiError as error:
            return _json({"ok": False, "error": f"punctual: {error}"}, status=422)
        word = "suspended" if suspend else "resumed (spec.suspend false)"
        return _json({"ok": True, "output": f"cronschedule {namespace}/{name} {word}"})

    def _where(self, namespace: str) -> list[str]:
        kubeconfig = self.settings.kubeconfig
        return ["-n", namespace, *(["--kubeconfig", kubeconfig] if kubeconfig else [])]


def command_line(action: str, name: str, asked: Mapping[str, Any]) -> list[str] | None:
    """The `punctual` command line an action of the page runs (without -n/--kubeconfig)."""
    if action == "trigger":
        argv = ["trigger", name]
        if asked.get("reason"):
            argv += ["--reason", str(asked["reason"])]
        if asked.get("overlap"):
            argv += ["--overlap", str(asked["overlap"])]
        for pair in asked.get("env") or []:
            argv += ["--env", str(pair)]
        return argv
    if action == "resume":
        return ["resume", name]
    if action == "backfill":
        argv = ["backfill", name]
        if asked.get("cancel"):
            return [*argv, "--cancel"]
        argv += ["--from", str(asked.get("from") or ""), "--to", str(asked.get("to") or "")]
        if asked.get("overlap"):
            argv += ["--overlap", str(asked["overlap"])]
        return [*argv, "--dry-run"] if asked.get("dryRun") else argv
    return None


def _shown(argv: Sequence[str], namespace: str) -> str:
    return " ".join(["punctual", *(_quoted(a) for a in argv), "-n", namespace])


def _quoted(word: str) -> str:
    return word if word and all(c.isalnum() or c in "-_.:=/@" for c in word) else repr(word)


@dataclass(frozen=True)
class _Filter:
    """The page's filters: namespace, a label selector (key=value, key!=value, key; joined
    by commas), state, and a substring of the name."""

    namespace: str = ""
    labels: tuple[str, ...] = ()
    state: str = ""
    text: str = ""

    @classmethod
    def of(cls, query: Mapping[str, str]) -> _Filter:
        labels = tuple(t.strip() for t in query.get("label", "").split(",") if t.strip())
        return cls(query.get("namespace", ""), labels, query.get("state", ""), query.get("q", ""))

    def keeps(self, body: Mapping[str, Any], now: datetime) -> bool:
        meta = body.get("metadata") or {}
        if self.namespace and meta.get("namespace") != self.namespace:
            return False
        if self.text and self.text not in str(meta.get("name", "")):
            return False
        have = meta.get("labels") or {}
        for term in self.labels:
            if "!=" in term:
                key, value = term.split("!=", 1)
                if have.get(key.strip()) == value.strip():
                    return False
            elif "=" in term:
                key, value = term.split("=", 1)
                if have.get(key.strip()) != value.strip().lstrip("="):
                    return False
            elif term not in have:
                return False
        return not self.state or state_of(body, now) == self.state


def _file(name: str) -> web.StreamResponse:
    """A file of the package's static/ directory (a bare name: no path can leave it)."""
    suffix = name[name.rfind(".") :] if "." in name else ""
    if "/" in name or "\\" in name or name.startswith(".") or suffix not in CONTENT_TYPES:
        return _refused(404, f"no file {name}")
    try:
        text = resources.files("punctual.ui").joinpath("static", name).read_text()
    except (FileNotFoundError, IsADirectoryError):
        return _refused(404, f"no file {name}")
    return web.Response(
        text=text,
        content_type=CONTENT_TYPES[suffix],
        headers={"Cache-Control": "no-store", "X-Content-Type-Options": "nosniff"},
    )


def _json(body: Body, status: int = 200) -> web.Response:
    return web.Response(
        text=json.dumps(body, default=str),
        status=status,
        content_type="application/json",
        headers={"Cache-Control": "no-store"},
    )


def _refused(status: int, message: str) -> web.Response:
    return _json({"ok": False, "error": message}, status=status)


async def serve(
    run: Runner,
    clock: Clock,
    settings: Settings,
    *,
    port: int = 0,
    browser: bool = True,
    say: Callable[[str], None] = print,
) -> None:
    """Serve until cancelled (Ctrl-C): bind 127.0.0.1:PORT (0: a free one), say the URL
    with its token, open it in a browser when asked to."""
    import webbrowser

    from punctual.kube.client import KubeClient
    from punctual.kube.credentials import load_credentials

    credentials = load_credentials(settings.kubeconfig)
    settings.home = credentials.namespace or settings.home
    async with KubeClient(credentials, user_agent="punctual-ui") as api:
        server = Server(api, run, clock, settings)
        runner = web.AppRunner(server.app, access_log=None)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", port)
        await site.start()
        sockets = site._server.sockets if site._server is not None else []  # type: ignore[attr-defined]
        server.port = int(sockets[0].getsockname()[1]) if sockets else port
        url = f"http://127.0.0.1:{server.port}/?token={server.token}"
        shown = ", ".join(settings.namespaces) or "every namespace you can read"
        say(f"punctual ui: serving the schedules of {shown} at")
        say(f"    {url}")
        say("Press Ctrl-C to stop.")
        if browser:
            await asyncio.to_thread(webbrowser.open, url)
        # Ctrl-C or SIGTERM ends it, even where SIGINT came in ignored (a shell's `&`).
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for signum in (signal.SIGINT, signal.SIGTERM):
            with contextlib.suppress(NotImplementedError, RuntimeError):
                loop.add_signal_handler(signum, stop.set)
        try:
            await stop.wait()
        finally:
            await runner.cleanup()
        say("punctual ui: stopped")
