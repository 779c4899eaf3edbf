"""`punctual ui`'s server against the fake API server: who it refuses, what it answers.

The guard: no token, 401; a write without the token header, from another Origin, or to
another Host, 403. The JSON: the fleet's rows and strip come from Punctual's own tick
engine and from the listed schedules only; a schedule's page puts status, Events and Jobs
together; "why" quotes status. The actions run the CLI's command lines (a recording
`Runner` here; the real one is `punctual.cli.main.main`), and a refusal carries the
message the command printed.
"""

from __future__ import annotations

import asyncio
import contextlib
import io
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from aiohttp.test_utils import TestClient, TestServer

from punctual.cli.main import Context, main
from punctual.clocks import FixedClock
from punctual.core.freezing import read_cluster_freeze, read_freeze
from punctual.kube.client import ApiError
from punctual.ui.serving import Server, Settings, command_line
from punctual.ui.timelines import Shared, Timeline, Window, row_text
from tests.unit.fakeapi import FakeApi

NOW = datetime(2026, 11, 28, 22, 0, 30, tzinfo=UTC)
TOKEN = "t0ken"
GROUP = "/apis/punctual.dev/v1"


def schedule(name: str, expression: str, namespace: str = "ns", **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "punctual.dev/v1",
        "kind": "CronSchedule",
        "metadata": {"name": name, "namespace": namespace, "labels": {"team": name[:1]}},
        "spec": {"schedule": expression, "jobTemplate": {"spec": {}}, **spec},
    }


class Runs:
    """A recording Runner: every command line, and a scripted answer."""

    def __init__(self, answer: tuple[int, str, str] = (0, "done", "")) -> None:
        self.argvs: list[list[str]] = []
        self.answer = answer

    def __call__(self, argv: list[str]) -> tuple[int, str, str]:
        self.argvs.append(argv)
        return self.answer


@pytest.fixture
def api() -> FakeApi:
    fake = FakeApi()
    fake.put(f"{GROUP}/namespaces/ns/cronschedules/every5", schedule("every5", "*/5 * * * *"))
    fake.put(
        f"{GROUP}/namespaces/ns/cronschedules/held", schedule("held", "* * * * *", suspend=True)
    )
    fake.put(f"{GROUP}/namespaces/other/cronschedules/top", schedule("top", "0 * * * *", "other"))
    return fake


async def client_of(server: Server) -> TestClient[Any, Any]:
    client: TestClient[Any, Any] = TestClient(TestServer(server.app))
    await client.start_server()
    return client


@pytest.fixture
async def served(api: FakeApi) -> AsyncIterator[tuple[TestClient[Any, Any], Runs]]:
    runs = Runs()
    server = Server(api, runs, FixedClock(NOW), Settings(poll=3600), token=TOKEN)
    client = await client_of(server)
    yield client, runs
    await client.close()


AUTH = {"X-Punctual-Token": TOKEN}


# -- the guard -----------------------------------------------------------------------------


@pytest.mark.parametrize("path", ["/", "/static/app.js", "/api/fleet", "/api/schedules/ns/every5"])
async def test_a_request_without_the_token_is_refused(served: Any, path: str) -> None:
    client, _ = served
    for headers in ({}, {"X-Punctual-Token": "wrong"}, {"X-Punctual-Token": "tökén"}):
        answer = await client.get(path, headers=headers)
        assert answer.status == 401
        assert "token" in (await answer.json())["error"]


async def test_the_token_in_the_url_opens_the_page_and_sets_a_strict_cookie(served: Any) -> None:
    client, _ = served
    page = await client.get(f"/?token={TOKEN}")
    assert page.status == 200
    assert '<script src="/static/app.js"></script>' in await page.text()
    cookie = page.headers["Set-Cookie"]
    assert "HttpOnly" in cookie and "SameSite=Strict" in cookie
    script = await client.get("/static/app.js")  # the cookie is enough to read
    assert script.status == 200
    assert script.content_type == "text/javascript"


async def test_a_write_needs_the_header_not_only_the_cookie(served: Any) -> None:
    client, runs = served
    await client.get(f"/?token={TOKEN}")
    answer = await client.post("/api/schedules/ns/every5/trigger", json={})
    assert answer.status == 403
    assert "X-Punctual-Token" in (await answer.json())["error"]
    assert runs.argvs == []


async def test_a_cross_origin_write_is_refused(served: Any) -> None:
    client, runs = served
    for origin in ("http://evil.example", "https://127.0.0.1", "null"):
        headers = {**AUTH, "Origin": origin}
        answer = await client.post("/api/schedules/ns/every5/trigger", json={}, headers=headers)
        assert answer.status == 403, origin
        assert "cross-origin" in (await answer.json())["error"]
    assert runs.argvs == []
    same = {**AUTH, "Origin": f"http://127.0.0.1:{client.port}"}
    answer = await client.post("/api/schedules/ns/every5/trigger", json={}, headers=same)
    assert answer.status == 200


async def test_another_host_is_refused_even_with_the_token(served: Any) -> None:
    client, _ = served
    answer = await client.get("/api/fleet", headers={**AUTH, "Host": "rebound.example:80"})
    assert answer.status == 403


async def test_a_bound_server_takes_its_own_port_only(api: FakeApi) -> None:
    server = Server(api, Runs(), FixedClock(NOW), Settings(poll=3600), token=TOKEN)
    server.port = 8123
    assert server._host_allowed("127.0.0.1:8123") and server._host_allowed("localhost:8123")
    assert not server._host_allowed("127.0.0.1:8124")
    assert not server._origin_allowed("http://127.0.0.1:8124")


async def test_no_file_outside_static_is_served(served: Any) -> None:
    client, _ = served
    for name in ("..%2Fserving.py", "serving.py", ".hidden.js", "missing.js"):
        answer = await client.get(f"/static/{name}", headers=AUTH)
        assert answer.status == 404, name


# -- the fleet -------------------------------------------------------------------------------


async def test_the_fleet_has_a_row_per_schedule_and_a_strip_per_minute(served: Any) -> None:
    client, _ = served
    answer = await client.get("/api/fleet?span=3600", headers=AUTH)
    assert answer.status == 200
    fleet = await answer.json()
    assert fleet["scope"] == "all namespaces"
    assert fleet["start"] == "2026-11-28T22:00:00Z" and fleet["columns"] == 60
    rows = {f"{r['namespace']}/{r['name']}": r for r in fleet["rows"]}
    assert list(rows) == ["ns/every5", "ns/held", "other/top"]
    every5 = rows["ns/every5"]
    # */5 after 22:00:00 up to 23:00:00 inclusive: 22:05 ... 23:00, 12 ticks.
    assert every5["ticks"] == 12 and every5["first"] == "2026-11-28T22:05:00Z"
    assert every5["row"] == "".join("1" if (i + 1) % 5 == 0 else "0" for i in range(60))
    assert rows["ns/held"]["state"] == "Suspended" and rows["ns/held"]["ticks"] == 60
    assert rows["other/top"]["first"] == "2026-11-28T23:00:00Z"
    # The strip counts the schedules that fire: the suspended one is drawn, not counted.
    assert len(fleet["strip"]) == 60
    assert fleet["strip"][4] == 1 and fleet["strip"][59] == 2 and sum(fleet["strip"]) == 13
    assert fleet["namespaces"] == ["ns", "other"] and fleet["total"] == 3


async def test_filters_by_namespace_label_state_and_name(served: Any) -> None:
    client, _ = served

    async def names(query: str) -> list[str]:
        fleet = await (await client.get(f"/api/fleet?{query}", headers=AUTH)).json()
        return [r["name"] for r in fleet["rows"]]

    assert await names("namespace=other") == ["top"]
    assert await names("label=team%3De") == ["every5"]
    assert await names("label=team!%3De") == ["held", "top"]
    assert await names("state=Suspended") == ["held"]
    assert await names("q=ve") == ["every5"]


async def test_a_refused_cluster_wide_list_falls_back_to_the_home_namespace(api: FakeApi) -> None:
    api.fail("get", f"{GROUP}/cronschedules", ApiError(403, "Forbidden", "cannot list"))
    settings = Settings(poll=3600, home="other")
    server = Server(api, Runs(), FixedClock(NOW), settings, token=TOKEN)
    client = await client_of(server)
    try:
        fleet = await (await client.get("/api/fleet", headers=AUTH)).json()
    finally:
        await client.close()
    assert fleet["scope"] == "other"
    assert [r["name"] for r in fleet["rows"]] == ["top"]


def test_a_week_is_cut_into_240_columns_and_a_dense_schedule_is_counted() -> None:
    window = Window.of(NOW, 10**9)
    assert window.span == 7 * 86400 and window.columns == 240 and window.minutes == 10080
    every_second = schedule("fast", "* * * * * *")
    ticks = Timeline().ticks(every_second, window)
    assert ticks.total == 7 * 86400
    assert ticks.row == "z" * 240  # 2520 a column, shown as "35 or more"
    assert sum(ticks.minutes.values()) == 7 * 86400 and len(ticks.minutes) == 10080


def test_row_text_caps_at_35() -> None:
    assert row_text([0, 1, 9, 10, 35, 99]) == "019azz"


def test_schedules_with_the_same_ticks_are_walked_once() -> None:
    timeline = Timeline()
    window = Window.of(NOW, 3600)
    bodies = [schedule(f"s{i}", "*/5 * * * *") for i in range(500)]
    for i, body in enumerate(bodies):
        body["metadata"]["uid"] = f"uid-{i}"
    fleet = timeline.fleet(bodies, window, NOW)
    assert len(fleet["rows"]) == 500 and len(timeline._ticks) == 1
    hashed = [schedule(f"h{i}", "H/10 * * * *") for i in range(100)]
    for i, body in enumerate(hashed):
        body["metadata"]["uid"] = f"u{i}"
    fleet = timeline.fleet(hashed, window, NOW)
    assert len(timeline._sources) == 1 + 100  # H depends on the uid ...
    assert len(timeline._ticks) <= 1 + 10  # ... but H/10 expands to 10 schedules at most
    assert {r["ticks"] for r in fleet["rows"]} == {6}


# -- a schedule ----------------------------------------------------------------------------


async def test_a_schedules_page_gathers_status_events_and_jobs(api: FakeApi, served: Any) -> None:
    client, runs = served
    path = f"{GROUP}/namespaces/ns/cronschedules/every5"
    body = api.objects[path]
    uid = body["metadata"]["uid"]
    firing = {"tick": "2026-11-28T21:55:00Z", "outcome": "Failed", "job": "every5-abc"}
    manual = {"tick": "2026-11-28T21:57:13Z", "outcome": "Created", "manual": True,
              "triggeredBy": "alice", "triggerReason": "hotfix", "job": "every5-m"}  # fmt: skip
    api.put(
        path,
        {**body, "status": {"recentFirings": [manual, firing], "conditions": [
            {"type": "Ready", "status": "True", "reason": "Scheduling"}]}},
    )  # fmt: skip
    api.put(
        "/apis/batch/v1/namespaces/ns/jobs/every5-abc",
        {"metadata": {"labels": {"punctual.dev/schedule-uid": uid}},
         "status": {"conditions": [{"type": "Failed", "status": "True"}]}},
    )  # fmt: skip
    api.put(
        "/api/v1/namespaces/ns/events/e1",
        {"involvedObject": {"uid": uid}, "reason": "Missed", "type": "Warning",
         "message": "tick 2026-11-28T21:50:00Z missed: the deadline passed"},
    )  # fmt: skip
    answer = await client.get("/api/schedules/ns/every5", headers=AUTH)
    assert answer.status == 200
    page = await answer.json()
    assert page["upcoming"][:2] == ["2026-11-28T22:05:00Z", "2026-11-28T22:10:00Z"]
    assert len(page["upcoming"]) == 10
    assert page["upcomingLocal"][0] == "2026-11-28T22:05:00+00:00"
    assert [f["outcome"] for f in page["firings"]] == ["Created", "Failed"]
    assert page["firings"][0]["triggeredBy"] == "alice"
    assert page["jobs"] == [
        {"name": "every5-abc", "created": None, "state": "Failed",
         "logs": "kubectl logs job/every5-abc -n ns"}
    ]  # fmt: skip
    assert page["events"][0]["reason"] == "Missed"
    assert page["conditions"][0]["type"] == "Ready"
    assert runs.argvs == [["describe", "every5", "-n", "ns"]]
    assert page["describe"] == "done"


async def test_why_quotes_status_events_and_the_tick_engine(api: FakeApi, served: Any) -> None:
    client, _ = served
    path = f"{GROUP}/namespaces/ns/cronschedules/every5"
    body = api.objects[path]
    body["metadata"]["creationTimestamp"] = "2026-11-28T20:00:00Z"
    firing = {"tick": "2026-11-28T21:55:00Z", "outcome": "Skipped", "reason": "Forbid"}
    status = {"lastScheduledTime": "2026-11-28T21:55:00Z", "recentFirings": [firing]}
    api.put(path, {**body, "status": status})
    api.put(
        "/api/v1/namespaces/ns/events/e1",
        {"involvedObject": {"uid": body["metadata"]["uid"]}, "reason": "Missed",
         "message": "tick 2026-11-28T21:50:00Z missed"},
    )  # fmt: skip

    async def why(at: str) -> list[str]:
        answer = await client.get(f"/api/schedules/ns/every5/why?at={at}", headers=AUTH)
        return list((await answer.json())["answer"])

    assert (await why("2026-11-28T21:56:00Z"))[0].startswith(
        "2026-11-28T21:56:00Z is not a tick of this schedule; the tick before is "
        "2026-11-28T21:55:00Z, the tick after is 2026-11-28T22:00:00Z"
    )
    assert await why("2026-11-28T21:55:00Z") == [
        "2026-11-28T21:55:00Z was decided: Skipped (Forbid)."
    ]
    assert await why("2026-11-28T21:50:00Z") == ["Event Missed: tick 2026-11-28T21:50:00Z missed"]
    assert "not yet decided" in (await why("2026-11-28T22:05:00Z"))[0]
    assert "before the schedule was created" in (await why("2026-11-28T19:00:00Z"))[0]
    assert "aged out" in (await why("2026-11-28T21:00:00Z"))[0]


# -- actions -------------------------------------------------------------------------------


async def test_actions_run_the_cli_command_lines(served: Any) -> None:
    client, runs = served
    asks = [
        ("trigger", {"reason": "now please", "overlap": "Allow", "env": ["A=1", "B=2"]}),
        ("resume", {}),
        ("backfill", {"from": "2026-11-28T20:00:00Z", "to": "2026-11-28T21:00:00Z",
                      "overlap": "Forbid", "dryRun": True}),
        ("backfill", {"cancel": True}),
    ]  # fmt: skip
    for action, body in asks:
        answer = await client.post(f"/api/schedules/ns/every5/{action}", json=body, headers=AUTH)
        assert answer.status == 200
        assert (await answer.json())["ok"] is True
    where = ["-n", "ns"]
    assert runs.argvs == [
        ["trigger", "every5", "--reason", "now please", "--overlap", "Allow",
         "--env", "A=1", "--env", "B=2", *where],
        ["resume", "every5", *where],
        ["backfill", "every5", "--from", "2026-11-28T20:00:00Z", "--to",
         "2026-11-28T21:00:00Z", "--overlap", "Forbid", "--dry-run", *where],
        ["backfill", "every5", "--cancel", *where],
    ]  # fmt: skip


async def test_a_refused_action_shows_the_commands_message(api: FakeApi) -> None:
    refused = 'punctual: HTTP 403 Forbidden: cronschedules.punctual.dev "every5" is forbidden'
    runs = Runs((1, "", refused + "\n"))
    server = Server(api, runs, FixedClock(NOW), Settings(poll=3600, kubeconfig="/k"), TOKEN)
    client = await client_of(server)
    try:
        answer = await client.post("/api/schedules/ns/every5/trigger", json={}, headers=AUTH)
        assert answer.status == 422
        assert (await answer.json()) == {"ok": False, "error": refused}
        assert runs.argvs == [["trigger", "every5", "-n", "ns", "--kubeconfig", "/k"]]
        missing = await client.post("/api/schedules/ns/every5/delete", json={}, headers=AUTH)
        assert missing.status == 404
    finally:
        await client.close()


async def test_suspend_patches_spec_suspend_with_the_callers_client(
    api: FakeApi, served: Any
) -> None:
    client, _ = served
    path = f"{GROUP}/namespaces/ns/cronschedules/every5"
    answer = await client.post("/api/schedules/ns/every5/suspend", json={}, headers=AUTH)
    assert answer.status == 200
    assert api.objects[path]["spec"]["suspend"] is True
    api.fail("patch", path, ApiError(403, "Forbidden", "no patch for you"))
    answer = await client.post("/api/schedules/ns/every5/unsuspend", json={}, headers=AUTH)
    assert answer.status == 422
    assert "no patch for you" in (await answer.json())["error"]
    assert api.objects[path]["spec"]["suspend"] is True


async def test_the_real_runner_is_the_cli_and_says_why_it_failed(api: FakeApi) -> None:
    def run(argv: list[str]) -> tuple[int, str, str]:
        out, err = io.StringIO(), io.StringIO()
        status = main(argv, context=Context(clock=FixedClock(NOW), stdout=out, stderr=err))
        return status, out.getvalue(), err.getvalue()

    settings = Settings(poll=3600, kubeconfig="/nonexistent/kubeconfig")
    client = await client_of(Server(api, run, FixedClock(NOW), settings, TOKEN))
    try:
        answer = await client.post("/api/schedules/ns/every5/trigger", json={}, headers=AUTH)
        assert answer.status == 422
        assert (await answer.json())["error"].startswith("punctual: cannot load credentials")
    finally:
        await client.close()


def test_command_line_knows_only_the_cli_actions() -> None:
    assert command_line("delete", "x", {}) is None
    assert command_line("backfill", "x", {"from": "a", "to": "b"}) == [
        "backfill", "x", "--from", "a", "--to", "b"
    ]  # fmt: skip


def test_ui_help_names_the_token_and_no_browser() -> None:
    shown = io.StringIO()
    with contextlib.redirect_stdout(shown):
        assert main(["ui", "--help"]) == 0
    help_text = shown.getvalue()
    assert "--no-browser" in help_text and "token" in help_text and "127.0.0.1" in help_text
    out = io.StringIO()
    assert main(["ui", "--port", "70000", "--no-browser"], context=Context(
        stdout=out, stderr=(err := io.StringIO()))) == 2  # fmt: skip
    assert "--port must be between 0 and 65535" in err.getvalue()


def test_the_window_starts_at_the_minute() -> None:
    window = Window.of(NOW, 1)
    assert window.start == NOW.replace(second=0) and window.span == 3600
    assert window.column_of(window.start + timedelta(minutes=1)) == 0
    assert window.column_of(window.start + timedelta(minutes=1, seconds=1)) == 1


# -- freeze windows and Calendars ------------------------------------------------------------


async def test_freeze_windows_are_spans_and_calendar_exclusions_are_marked(api: FakeApi) -> None:
    api.put(
        f"{GROUP}/namespaces/ns/freezewindows/release",
        {"spec": {"from": "2026-11-28T22:10:00Z", "to": "2026-11-28T22:20:00Z",
                  "selector": {"matchLabels": {"team": "e"}}}},
    )  # fmt: skip
    api.put(
        f"{GROUP}/calendars/nights",
        {"spec": {"exclude": [{"from": "2026-11-28T22:30:00Z", "to": "2026-11-28T23:30:00Z"}]}},
    )
    top = api.objects[f"{GROUP}/namespaces/other/cronschedules/top"]
    top["spec"]["excludeCalendars"] = ["nights"]
    api.put(f"{GROUP}/namespaces/other/cronschedules/top", top)
    server = Server(api, Runs(), FixedClock(NOW), Settings(poll=3600), token=TOKEN)
    client = await client_of(server)
    try:
        fleet = await (await client.get("/api/fleet", headers=AUTH)).json()

        async def why(name: str, namespace: str, at: str) -> list[str]:
            path = f"/api/schedules/{namespace}/{name}/why?at={at}"
            return list((await (await client.get(path, headers=AUTH)).json())["answer"])

        frozen = await why("every5", "ns", "2026-11-28T22:15:00Z")
        excluded = await why("top", "other", "2026-11-28T23:00:00Z")
    finally:
        await client.close()
    assert fleet["freezes"] == [
        {"title": "FreezeWindow ns/release", "action": "Skip", "spans": [[600, 1200]]}
    ]
    rows = {r["name"]: r for r in fleet["rows"]}
    assert rows["every5"]["frozen"] == [0] and rows["held"]["frozen"] == []
    assert rows["every5"]["ticks"] == 12  # the row shows every tick, the shading the freeze
    # The 23:00 tick of top is its Calendar's: gone from the row, marked as excluded.
    assert rows["top"]["ticks"] == 0 and rows["top"]["excluded"] == "0" * 59 + "1"
    # The strip: every5's 22:10 and 22:15 are held (22:20 is the window's end, free).
    assert fleet["strip"][9] == 0 and fleet["strip"][14] == 0 and fleet["strip"][19] == 1
    assert sum(fleet["strip"]) == 10
    assert frozen[0] == (
        "FreezeWindow ns/release holds it (Skip) from 2026-11-28T22:10:00Z until "
        "2026-11-28T22:20:00Z."
    )
    assert excluded == [
        "2026-11-28T23:00:00Z is a tick of the schedule that its Calendars (nights) exclude."
    ]


def test_a_defer_window_fires_once_at_its_end_on_the_strip() -> None:
    freeze = read_freeze(
        {"metadata": {"namespace": "ns", "name": "hold"},
         "spec": {"from": "2026-11-28T22:10:00Z", "to": "2026-11-28T22:32:00Z",
                  "action": "Defer"}},
    )  # fmt: skip
    assert not isinstance(freeze, str)
    window = Window.of(NOW, 3600)
    fleet = Timeline().fleet(
        [schedule("every5", "*/5 * * * *")], window, NOW, Shared(freezes=[freeze])
    )
    # 22:10 ... 22:30 are held (5 ticks), and run once at 22:32, in the minute ending 22:33.
    assert fleet["strip"][31:33] == [0, 1] and sum(fleet["strip"]) == 12 - 5 + 1
    assert fleet["freezes"][0]["spans"] == [[600, 1920]]


async def test_a_workload_schedules_page_lists_its_kinds_objects(api: FakeApi, served: Any) -> None:
    client, _ = served
    body = schedule("flows", "0 * * * *")
    del body["spec"]["jobTemplate"]
    body["spec"]["workloadTemplate"] = {"apiVersion": "argoproj.io/v1alpha1", "kind": "Workflow"}
    stored = api.put(f"{GROUP}/namespaces/ns/cronschedules/flows", body)
    uid = stored["metadata"]["uid"]
    api.answer(
        "get",
        "/apis/argoproj.io/v1alpha1",
        {"resources": [{"name": "workflows/status", "kind": "Workflow"},
                       {"name": "workflows", "kind": "Workflow"}]},
    )  # fmt: skip
    for name, phase in (("flows-a", "Succeeded"), ("flows-b", "Running")):
        api.put(
            f"/apis/argoproj.io/v1alpha1/namespaces/ns/workflows/{name}",
            {"metadata": {"labels": {"punctual.dev/schedule-uid": uid},
                          "creationTimestamp": f"2026-11-28T21:0{len(phase) % 9}:00Z"},
             "status": {"phase": phase}},
        )  # fmt: skip
    page = await (await client.get("/api/schedules/ns/flows", headers=AUTH)).json()
    assert {(j["name"], j["state"]) for j in page["jobs"]} == {
        ("flows-a", "Succeeded"),
        ("flows-b", "Active"),
    }
    assert page["jobs"][0]["logs"].startswith("kubectl logs -n ns -l workflows.argoproj.io/")
    assert page["jobsProblem"] is None


def test_a_cluster_freeze_window_selects_by_namespace_labels_when_they_can_be_read() -> None:
    found = read_cluster_freeze(
        {"metadata": {"name": "holidays"},
         "spec": {"from": "2026-11-28T22:10:00Z", "to": "2026-11-28T22:20:00Z",
                  "namespaceSelector": {"matchLabels": {"env": "prod"}}}},
    )  # fmt: skip
    assert not isinstance(found, str)
    prod, dev = schedule("a", "*/5 * * * *", "prod"), schedule("b", "*/5 * * * *", "dev")
    labelled = Shared(cluster_freezes=[found], namespace_labels={"prod": {"env": "prod"}})
    assert [f.title for f in labelled.freezes_of(prod)] == ["ClusterFreezeWindow holidays"]
    assert labelled.freezes_of(dev) == []
    # The Namespaces unreadable: a window that chooses namespaces by label is not guessed.
    assert Shared(cluster_freezes=[found]).freezes_of(prod) == []
    everywhere = read_cluster_freeze(
        {"metadata": {"name": "all"},
         "spec": {"from": "2026-11-28T22:10:00Z", "to": "2026-11-28T22:20:00Z"}},
    )  # fmt: skip
    assert not isinstance(everywhere, str)
    assert len(Shared(cluster_freezes=[everywhere]).freezes_of(dev)) == 1


async def test_the_fleet_follows_the_watch_between_polls(served: Any, api: FakeApi) -> None:
    """Listed once, then followed: a schedule created, edited or deleted shows on the next
    request, though the next list is an hour away (Settings(poll=3600))."""
    client, _ = served

    async def names() -> list[str]:
        answer = await client.get("/api/fleet", headers=AUTH)
        return sorted(row["name"] for row in (await answer.json())["rows"])

    assert await names() == ["every5", "held", "top"]
    lists = len([r for r in api.requests if r.verb == "get" and r.path.endswith("cronschedules")])
    api.put(f"{GROUP}/namespaces/ns/cronschedules/new", schedule("new", "0 3 * * *"))
    for _ in range(100):  # the watch delivers on the event loop
        if "new" in await names():
            break
        await asyncio.sleep(0.01)
    assert await names() == ["every5", "held", "new", "top"]
    api.remove(f"{GROUP}/namespaces/ns/cronschedules/held")
    for _ in range(100):
        if "held" not in await names():
            break
        await asyncio.sleep(0.01)
    assert await names() == ["every5", "new", "top"]
    watches = [r for r in api.requests if r.verb == "watch"]
    assert watches and watches[0].path.endswith("/cronschedules")
    again = len([r for r in api.requests if r.verb == "get" and r.path.endswith("cronschedules")])
    assert again == lists  # the follower's own first list aside, nothing listed again


def test_why_of_a_schedule_that_runs_after_another_quotes_its_chain() -> None:
    from punctual.ui.stories import why

    body = {
        "metadata": {"name": "load", "namespace": "ns", "uid": "u"},
        "spec": {"after": [{"schedule": "extract", "on": "Succeeded"}], "jobTemplate": {}},
        "status": {
            "after": [{"schedule": "extract", "tick": "2026-11-28T21:55:00Z", "outcome": "Failed"}],
            "recentFirings": [
                {"tick": "2026-11-28T21:50:00Z", "job": "load-1795902600", "outcome": "Succeeded"}
            ],
        },
    }
    answer = why(body, [], datetime(2026, 11, 28, 21, 50, tzinfo=UTC))
    assert answer == [
        "It has no ticks of its own: it runs once for each run of extract (spec.after).",
        "extract: its runs up to 2026-11-28T21:55:00Z are handled; the newest ended Failed, "
        "run after: none (not the outcome it waits for).",
        "Its run for 2026-11-28T21:50:00Z: load-1795902600 Succeeded.",
    ]
