"""`punctual describe` and `punctual history` as text, from objects alone (no cluster),
and the trigger command's flags."""

from __future__ import annotations

import copy
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

import pytest
import yaml

from punctual.cli.describing import describe_schedule, firings_table
from punctual.cli.main import Context, main
from punctual.clocks import FixedClock

NOW = datetime(2026, 11, 25, 10, 7, 30, tzinfo=UTC)
BERLIN = ZoneInfo("Europe/Berlin")

SCHEDULE: dict[str, Any] = {
    "apiVersion": "punctual.dev/v1",
    "kind": "CronSchedule",
    "metadata": {"name": "nightly-report", "namespace": "reports", "uid": "5f0c1e2d"},
    "spec": {
        "schedule": "0 2 * * *",
        "timeZone": "Europe/Berlin",
        "concurrencyPolicy": "Forbid",
        "missedRunPolicy": "RunAll",
        "startingDeadlineSeconds": 600,
        "jobTemplate": {"spec": {"template": {"spec": {"containers": [{"name": "c"}]}}}},
    },
    "status": {
        "lastScheduledTime": "2026-11-25T01:00:00Z",
        "lastSuccessfulTime": "2026-11-25T01:00:09Z",
        "active": [{"name": "nightly-report-m1a2b3c4", "tick": "2026-11-25T10:00:00Z"}],
        "recentFirings": [
            {
                "tick": "2026-11-25T10:00:00Z",
                "job": "nightly-report-m1a2b3c4",
                "outcome": "Created",
                "epoch": 7,
                "manual": True,
                "triggeredBy": "admin",
                "triggerReason": "rerun after the fix",
                "concurrencyPolicy": "Allow",
            },
            {
                "tick": "2026-11-25T01:00:00Z",
                "job": "nightly-report-1795568400",
                "outcome": "Succeeded",
                "epoch": 7,
            },
            {
                "tick": "2026-11-24T01:00:00Z",
                "outcome": "Skipped",
                "epoch": 6,
                "reason": "concurrencyPolicy Forbid: Job x still runs",
            },
        ],
        "conditions": [
            {
                "type": "Ready",
                "status": "True",
                "reason": "Scheduled",
                "message": "next tick 2026-11-26T01:00:00Z",
                "lastTransitionTime": "2026-11-20T00:00:00Z",
            },
            {
                "type": "Suspended",
                "status": "False",
                "reason": "Active",
                "lastTransitionTime": "2026-11-20T00:00:00Z",
            },
        ],
    },
}
TICKS = [datetime(2026, 11, 26, 1, tzinfo=UTC), datetime(2026, 11, 27, 1, tzinfo=UTC)]


def render(body: dict[str, Any], upcoming: list[datetime] | None = None) -> list[str]:
    return describe_schedule(
        body,
        now=NOW,
        explained=["schedule: At 02:00, every day, in Europe/Berlin."],
        upcoming=TICKS if upcoming is None else upcoming,
        zone=BERLIN,
    )


def section(lines: list[str], title: str) -> list[str]:
    start = next(i for i, line in enumerate(lines) if line.startswith(title))
    end = next((i for i in range(start + 1, len(lines)) if not lines[i]), len(lines))
    return lines[start:end]


def test_one_screen_says_what_when_how_and_what_happened() -> None:
    lines = render(SCHEDULE)
    assert lines[:5] == [
        "Name:         nightly-report",
        "Namespace:    reports",
        "Time zone:    Europe/Berlin",
        'Schedule:     "0 2 * * *"',
        "Meaning:      schedule: At 02:00, every day, in Europe/Berlin.",
    ]
    assert "Policies:     missedRunPolicy RunAll (at most 10), concurrencyPolicy Forbid" in lines
    assert "State:        Active" in lines
    assert section(lines, "Next 2 ticks:") == [
        "Next 2 ticks:",
        "  2026-11-26T02:00:00+01:00  2026-11-26T01:00:00Z  in 14h52m",
        "  2026-11-27T02:00:00+01:00  2026-11-27T01:00:00Z  in 1d14h52m",
    ]
    firings = section(lines, "Recent firings")
    assert firings[0] == "Recent firings (3, newest first):"
    assert firings[1].split() == ["TICK", "JOB", "KIND", "OUTCOME", "EPOCH", "BY", "REASON"]
    assert firings[2].split()[2:8] == ["Job", "Created", "(manual)", "7", "admin", '"rerun']
    assert firings[2].endswith('"rerun after the fix"; concurrencyPolicy Allow for this firing')
    assert firings[3].split() == [
        "2026-11-25T01:00:00Z",
        "nightly-report-1795568400",
        "Job",
        "Succeeded",
        "7",
        "-",
    ]
    assert firings[4].endswith("-       concurrencyPolicy Forbid: Job x still runs")
    conditions = section(lines, "Conditions:")
    assert [row.split()[:3] for row in conditions[1:]] == [
        ["TYPE", "STATUS", "REASON"],
        ["Ready", "True", "Scheduled"],
        ["Suspended", "False", "Active"],
    ]


def test_every_true_condition_is_a_state_and_nothing_fires_while_paused() -> None:
    body = copy.deepcopy(SCHEDULE)
    body["status"]["conditions"].append(
        {
            "type": "Paused",
            "status": "True",
            "reason": "ConsecutiveFailures",
            "message": "3 failed Jobs in a row",
            "lastTransitionTime": "2026-11-25T09:00:00Z",
        }
    )
    lines = render(body)
    assert (
        "State:        Paused (ConsecutiveFailures, since 2026-11-25T09:00:00Z): "
        "3 failed Jobs in a row"
    ) in lines
    assert "Next 2 ticks: (while suspended or paused none of them fires)" in lines


def test_suspension_from_the_spec_before_the_operator_has_seen_it() -> None:
    body = copy.deepcopy(SCHEDULE)
    body["spec"]["suspend"] = True
    lines = render(body)
    assert "State:        spec.suspend is true (not yet seen by the operator)" in lines
    body["spec"]["suspendUntil"] = "2026-12-01T00:00:00Z"
    assert "State:        spec.suspendUntil 2026-12-01T00:00:00Z: fires again by itself then" in (
        render(body)
    )


def test_what_waits_is_shown_when_the_status_has_it() -> None:
    body = copy.deepcopy(SCHEDULE)
    assert not any(line.startswith(("Buffered", "Backfill", "Paused:")) for line in render(body))
    body["status"]["buffered"] = ["2026-11-26T01:00:00Z", {"tick": "2026-11-27T01:00:00Z"}]
    body["status"]["backfill"] = {
        "request": "r1",
        "from": "2026-11-01T00:00:00Z",
        "to": "2026-11-02T00:00:00Z",
        "state": "Running",
        "done": 3,
        "skipped": 1,
        "total": 50,
    }
    lines = render(body)
    assert section(lines, "Buffered:") == [
        "Buffered:     2 ticks wait for the running Job:",
        "              2026-11-26T01:00:00Z",
        "              2026-11-27T01:00:00Z",
        "Backfill:     backfill r1 [2026-11-01T00:00:00Z, 2026-11-02T00:00:00Z): Running, "
        "3 run + 1 already done of 50 ticks",
    ]


def test_a_new_schedule_and_a_malformed_status_still_render() -> None:
    body = copy.deepcopy(SCHEDULE)
    body.pop("status")
    lines = render(body, upcoming=[])
    assert "State:        not yet seen by the operator" in lines
    assert "Next ticks: none" in lines
    assert "  none yet" in lines
    body["status"] = {"recentFirings": ["junk", {"tick": 5}], "conditions": [7], "active": [1]}
    assert render(body)  # shown as far as understood, never a traceback


def test_history_rows_name_who_asked() -> None:
    rows = firings_table(SCHEDULE["status"]["recentFirings"])
    assert rows[0].split() == ["TICK", "JOB", "KIND", "OUTCOME", "EPOCH", "BY", "REASON"]
    assert "Created (manual)" in rows[1] and " admin " in rows[1]


# -- through the command line ----------------------------------------------------------


def run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, list[str], str]:
    status = main(argv, context=Context(clock=FixedClock(NOW)))
    captured = capsys.readouterr()
    return status, captured.out.splitlines(), captured.err


def write(tmp_path: Path, body: dict[str, Any]) -> str:
    path = tmp_path / "schedule.yaml"
    path.write_text(yaml.safe_dump(body))
    return str(path)


def test_describe_a_manifest_lists_the_next_ten_ticks_from_the_clock(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    status, lines, err = run(["describe", "-f", write(tmp_path, SCHEDULE)], capsys)
    assert (status, err) == (0, "")
    ticks = section(lines, "Next 10 ticks:")
    assert len(ticks) == 11
    assert ticks[1].startswith("  2026-11-26T02:00:00+01:00  2026-11-26T01:00:00Z")
    assert any(line.startswith("Meaning:      schedule: At 02:00, every day") for line in lines)


def test_describe_stops_at_max_runs_and_shows_none_once_finished(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    body = copy.deepcopy(SCHEDULE)
    body["spec"]["maxRuns"] = 5
    body["status"]["runs"] = 3
    body["status"]["runsRemaining"] = 2
    _status, lines, _err = run(["describe", "-f", write(tmp_path, body)], capsys)
    assert "Next 2 ticks:" in lines
    assert "              runs: 3, remaining 2" in lines
    body["status"]["conditions"].append(
        {"type": "Finished", "status": "True", "reason": "MaxRunsReached"}
    )
    _status, lines, _err = run(["describe", "-f", write(tmp_path, body)], capsys)
    assert "Next ticks: none" in lines
    assert "State:        Finished (MaxRunsReached)" in lines


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["describe"], "punctual: give NAME (-n NS) or -f FILE\n"),
        (["describe", "x", "-f", "y"], "punctual: give NAME (-n NS) or -f FILE\n"),
        (["describe", "-f", "/nonexistent.yaml"], "punctual: cannot read /nonexistent.yaml"),
        (["describe", "-f", "-", "--count", "-1"], "punctual: --count must be between 0"),
        (["trigger", "x", "--overlap", "Sometimes"], "punctual trigger: argument --overlap"),
        (["trigger", "x", "--reason", ""], "punctual: --reason must be 1 to 512 characters"),
    ],
    ids=["nothing", "both", "no file", "count", "overlap", "empty reason"],
)
def test_bad_describe_and_trigger_input_is_one_line_and_status_2(
    argv: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    status, lines, err = run(argv, capsys)
    assert status == 2
    assert err.startswith(message)
    assert err.count("\n") == 1 and lines == []


def test_describe_names_a_bad_spec_field(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    body = copy.deepcopy(SCHEDULE)
    body["spec"]["concurrencyPolicy"] = "Sometimes"
    status, _lines, err = run(["describe", "-f", write(tmp_path, body)], capsys)
    assert status == 2
    assert err.startswith("punctual: spec.concurrencyPolicy: Input should be")


def test_describe_shows_the_chain_and_why_the_downstream_did_or_did_not_run() -> None:
    body = copy.deepcopy(SCHEDULE)
    del body["spec"]["schedule"]
    body["spec"]["after"] = [
        {"schedule": "extract", "on": "Succeeded"},
        {"schedule": "fetch", "on": "Finished"},
    ]
    body["status"]["after"] = [
        {"schedule": "extract", "tick": "2026-11-25T09:00:00Z", "outcome": "Failed"},
        {"schedule": "fetch", "tick": "2026-11-25T08:00:00Z"},
    ]
    lines = describe_schedule(
        body, now=NOW, explained=[], upcoming=[], zone=BERLIN, downstreams=["publish"]
    )
    text = "\n".join(lines)
    assert "none of its own: it runs after its upstreams (spec.after)" in text
    assert (
        "after extract (on Succeeded); its run of 2026-11-25T09:00:00Z Failed: "
        "not run: Failed is not Succeeded"
    ) in text
    assert "after fetch (on Finished); waiting for its first run after 2026-11-25T08:00:00Z" in text
    assert "runs before: publish" in text
