"""FreezeWindows: reading them, selecting schedules, and Skip vs Defer in a decision.

The DST cases use Europe/Berlin on 2026-03-29, when 02:00 local does not exist: a
window starting at 01:00 local for 2 hours ends at 04:00 local (2 real hours).
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from punctual.core.deciding import decide
from punctual.core.decisions import Decision
from punctual.core.freezing import (
    Freeze,
    FreezeAction,
    Selector,
    ended_between,
    freeze_over,
    freeze_status,
    read_cluster_freeze,
    read_freeze,
    selects,
)

from .builders import LEADER, condition, iso, schedule_body, spec_body, status_body

H = timedelta(hours=1)
M = timedelta(minutes=1)
SPRING = datetime(2026, 3, 29, 0, 0, tzinfo=UTC)  # 01:00 in Berlin, the window's start


def freeze_body(**spec: Any) -> dict[str, Any]:
    return {"metadata": {"namespace": "reports", "name": "release"}, "spec": spec}


def berlin_freeze(action: str) -> Freeze:
    body = freeze_body(
        cron="0 1 * * *",
        duration="2h",
        timeZone="Europe/Berlin",
        action=action,
        selector={"matchLabels": {"tier": "batch"}},
    )
    freeze = read_freeze(body)
    assert isinstance(freeze, Freeze)
    return freeze


@pytest.mark.parametrize(
    ("spec", "error"),
    [
        ({"from": "2026-08-01T00:00:00Z"}, "spec: Value error, from and to are both needed"),
        ({"from": "2026-08-02T00:00:00Z", "to": "2026-08-01T00:00:00Z"}, "from before to"),
        ({"cron": "0 1 * * *"}, "cron and duration are both needed"),
        (
            {"cron": "0 1 * * *", "duration": "2h", "from": "2026-08-01T00:00:00Z"},
            "either from and to, or cron and duration",
        ),
        ({"cron": "0 1 * * *", "duration": "400d"}, "spec.duration"),
        ({"cron": "0 25 * * *", "duration": "1h"}, "hour"),
        (
            {"from": "2026-08-01T00:00:00Z", "to": "2026-08-02T00:00:00Z", "action": "Pause"},
            "spec.action",
        ),
    ],
)  # fmt: skip
def test_an_unusable_freeze_window_says_why_naming_the_field(
    spec: dict[str, Any], error: str
) -> None:
    problem = read_freeze(freeze_body(**spec))
    assert isinstance(problem, str) and error in problem, problem


def test_selectors_match_labels_and_expressions() -> None:
    chosen = Selector.model_validate(
        {"matchLabels": {"tier": "batch"},
         "matchExpressions": [{"key": "team", "operator": "In", "values": ["a", "b"]},
                              {"key": "legacy", "operator": "DoesNotExist"}]}
    )  # fmt: skip
    assert selects(chosen, {"tier": "batch", "team": "a"})
    assert not selects(chosen, {"tier": "batch", "team": "c"})
    assert not selects(chosen, {"tier": "batch", "team": "a", "legacy": "yes"})
    assert not selects(chosen, {"team": "a"})
    assert selects(Selector(), {})  # empty: everything


def test_a_recurring_window_follows_its_zone_across_spring_forward() -> None:
    freeze = berlin_freeze("Skip")
    assert freeze.window_at(SPRING - M) is None
    assert freeze.window_at(SPRING) == (SPRING, SPRING + 2 * H)
    assert freeze.window_at(SPRING + 2 * H) is None  # end exclusive
    assert freeze_over([freeze], SPRING + H) == (freeze, SPRING + 2 * H)
    assert ended_between([freeze], SPRING, SPRING + 3 * H, FreezeAction.SKIP) == SPRING + 2 * H


BERLIN_HOURLY = {"schedule": "0 * * * *", "timeZone": "Europe/Berlin"}


def frozen_run(
    action: str,
    now: datetime,
    status: dict[str, Any] | None = None,
    labels: dict[str, str] | None = None,
) -> tuple[Decision, dict[str, Any]]:
    spec = spec_body(**BERLIN_HOURLY)
    status = status or status_body(spec, cursor=SPRING - H)
    body = schedule_body(spec, status, created=SPRING - 5 * H)
    body["metadata"]["labels"] = {"tier": "batch"} if labels is None else labels
    decision = decide(body, [], now=now, leadership=LEADER, freezes=[berlin_freeze(action)])
    return decision, decision.status or status


def test_skip_skips_each_tick_inside_naming_the_window_and_fires_after() -> None:
    first, status = frozen_run("Skip", SPRING + timedelta(seconds=1))
    assert first.creates == ()
    [skip] = [f for f in status["recentFirings"] if f["outcome"] == "Skipped"]
    assert skip["tick"] == iso(SPRING) and "FreezeWindow reports/release" in skip["reason"]
    assert condition(status, "Frozen")["reason"] == "Skip"
    assert not [c for c in status.get("inFlight", []) if c["tick"] == iso(SPRING + H)]
    second, status = frozen_run("Skip", SPRING + H + timedelta(seconds=1), status)
    assert second.creates == ()  # 03:00 local, the hour after the gap: inside too
    third, status = frozen_run("Skip", SPRING + 2 * H + timedelta(seconds=1), status)
    assert [c.tick for c in third.creates] == [SPRING + 2 * H]
    assert condition(status, "Frozen")["status"] == "False"


def test_defer_holds_the_ticks_and_runs_one_when_the_window_ends() -> None:
    first, status = frozen_run("Defer", SPRING + timedelta(seconds=1))
    assert first.creates == ()
    assert first.next_wake is not None and first.next_wake <= SPRING + 2 * H
    assert condition(status, "Frozen")["reason"] == "Defer"
    second, status = frozen_run("Defer", SPRING + H + timedelta(seconds=1), status)
    assert second.creates == ()
    spec = spec_body(**BERLIN_HOURLY, startingDeadlineSeconds=60)
    after = dict(status)
    body = schedule_body(spec, after, created=SPRING - 5 * H)
    body["metadata"]["labels"] = {"tier": "batch"}
    end = decide(body, [], now=SPRING + 2 * H + timedelta(seconds=1), leadership=LEADER,
                 freezes=[berlin_freeze("Defer")])  # fmt: skip
    assert [c.tick for c in end.creates] == [SPRING + 2 * H]  # one firing, the newest


def test_a_schedule_the_selector_does_not_select_fires_as_usual() -> None:
    decision, _ = frozen_run("Skip", SPRING + timedelta(seconds=1), labels={"tier": "web"})
    assert [c.tick for c in decision.creates] == [SPRING]


def test_a_cluster_freeze_window_reads_its_namespace_selector_and_is_named_by_its_kind() -> None:
    body = {
        "metadata": {"name": "holiday-freeze"},
        "spec": {
            "from": "2026-03-28T00:00:00Z",
            "to": "2026-03-30T00:00:00Z",
            "namespaceSelector": {"matchLabels": {"env": "prod"}},
            "selector": {"matchLabels": {"tier": "batch"}},
        },
    }
    read = read_cluster_freeze(body)
    assert not isinstance(read, str)
    freeze, namespaces = read
    assert freeze.title == "ClusterFreezeWindow holiday-freeze"
    assert selects(namespaces, {"env": "prod"}) and not selects(namespaces, {"env": "dev"})
    spec = spec_body(**BERLIN_HOURLY)
    body_ = schedule_body(spec, status_body(spec, cursor=SPRING - H), created=SPRING - 5 * H)
    body_["metadata"]["labels"] = {"tier": "batch"}
    held = decide(body_, [], now=SPRING + timedelta(seconds=1), leadership=LEADER, freezes=[freeze])
    [skip] = [f for f in (held.status or {})["recentFirings"] if f["outcome"] == "Skipped"]
    assert "ClusterFreezeWindow holiday-freeze: Skip" in skip["reason"]
    frozen = condition(held.status or {}, "Frozen")["message"]
    assert frozen.startswith("ClusterFreezeWindow holiday-freeze skips ticks until")
    bad = read_cluster_freeze({"metadata": {"name": "x"}, "spec": {"cron": "0 1 * * *"}})
    assert isinstance(bad, str) and "cron and duration are both needed" in bad
    status = freeze_status(body, [{"tier": "batch"}, {"tier": "web"}], SPRING, freeze)
    assert status["schedules"] == 1 and status["active"] is True
