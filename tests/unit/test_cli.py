"""The `punctual next` and `punctual explain` commands, called through main()."""

from __future__ import annotations

import os
import re
from datetime import UTC, datetime
from importlib import metadata

import pytest

from punctual.cli.main import Context, main
from punctual.clocks import FixedClock
from punctual.core.schedules.parsing import printable

NOW = datetime(2026, 11, 25, 10, 7, 30, tzinfo=UTC)


def run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, list[str], str]:
    status = main(argv, context=Context(clock=FixedClock(NOW)))
    captured = capsys.readouterr()
    return status, captured.out.splitlines(), captured.err


def test_next_counts_from_the_injected_clock(capsys: pytest.CaptureFixture[str]) -> None:
    status, lines, err = run(["next", "*/15 * * * *", "--count", "3"], capsys)
    assert (status, err) == (0, "")
    assert lines == [
        "2026-11-25T10:15:00+00:00",
        "2026-11-25T10:30:00+00:00",
        "2026-11-25T10:45:00+00:00",
    ]


def test_next_prints_the_zone_offset_of_each_instant(capsys: pytest.CaptureFixture[str]) -> None:
    status, lines, _err = run(
        ["next", "30 1 * * *", "--timezone", "America/New_York", "--from", "2026-10-31T12:00:00Z"],
        capsys,
    )
    assert status == 0
    assert lines[:3] == [
        "2026-11-01T01:30:00-04:00",
        "2026-11-02T01:30:00-05:00",
        "2026-11-03T01:30:00-05:00",
    ]
    assert len(lines) == 5


def test_next_is_strictly_after_from(capsys: pytest.CaptureFixture[str]) -> None:
    _status, lines, _err = run(
        ["next", "0 2 * * *", "--from", "2026-11-25T02:00:00Z", "--count", "1"], capsys
    )
    assert lines == ["2026-11-26T02:00:00+00:00"]


def test_next_reads_a_naive_from_in_the_schedule_zone(capsys: pytest.CaptureFixture[str]) -> None:
    _status, lines, _err = run(
        [
            "next",
            "0 2 * * *",
            "--timezone",
            "Europe/Berlin",
            "--from",
            "2026-11-25T01:59:00",
            "--count",
            "1",
        ],
        capsys,
    )
    assert lines == ["2026-11-25T02:00:00+01:00"]


def test_next_with_hashed_fields_and_a_uid(capsys: pytest.CaptureFixture[str]) -> None:
    status, lines, _err = run(["next", "H H * * *", "--uid", "u-1", "--count", "2"], capsys)
    assert status == 0 and len(lines) == 2


def test_next_with_seconds(capsys: pytest.CaptureFixture[str]) -> None:
    _status, lines, _err = run(["next", "*/20 * * * * *", "--count", "2"], capsys)
    assert lines == ["2026-11-25T10:07:40+00:00", "2026-11-25T10:08:00+00:00"]


BAD_MINUTE = 'invalid schedule "61 * * * *": minute 61 is out of range 0-59'
MARS = 'unknown time zone "Mars/Base"'


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["next", "61 * * * *"], BAD_MINUTE),
        (["explain", "61 * * * *"], BAD_MINUTE),
        (["next", "* * * * *", "--timezone", "Mars/Base"], MARS),
        (["explain", "* * * * *", "--timezone", "Mars/Base"], MARS),
        (["next", "0 0 30 2 *"], 'invalid schedule "0 0 30 2 *": day 30 never occurs in February'),
        (["next", "* * * * *", "--count", "0"], "--count must be between 1 and 10000, not 0"),
        (["next", "* * * * *", "--from", "x"], 'invalid --from "x": not an RFC 3339 time'),
        (["next", "* * * *"], 'invalid schedule "* * * *": expected 5 fields'),
        (["next", "H H * * *"], 'invalid schedule "H H * * *": H fields need the schedule\'s uid'),
        (["run", "--status-delay", "-1"], "--status-delay must be 0 or more, got -1.0"),
        (["run", "--claim-window", "5"], "--claim-window must be 10-600 seconds, got 5"),
        (["run", "--claim-window", "601"], "--claim-window must be 10-600 seconds, got 601"),
        (["run", "--decide-ahead", "-0.1"], "--decide-ahead must be 0-2 seconds, got -0.1"),
        (["run", "--decide-ahead", "3"], "--decide-ahead must be 0-2 seconds, got 3"),
    ],
)
def test_bad_input_is_one_line_and_status_2(
    argv: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    status, lines, err = run(argv, capsys)
    assert status == 2
    assert lines == []
    assert err.count("\n") == 1
    assert err.startswith(f"punctual: {message}")


def test_version_prints_the_installed_version(capsys: pytest.CaptureFixture[str]) -> None:
    status, lines, err = run(["--version"], capsys)
    assert (status, err) == (0, "")
    assert lines == [f"punctual {metadata.version('punctual')}"]


def test_version_from_a_bare_source_tree_says_unknown(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    def missing(name: str) -> str:
        raise metadata.PackageNotFoundError(name)

    monkeypatch.setattr(metadata, "version", missing)
    assert run(["--version"], capsys)[:2] == (0, ["punctual unknown"])


def test_explain(capsys: pytest.CaptureFixture[str]) -> None:
    status, lines, _err = run(["explain", "0 2 * * *", "--timezone", "Europe/Berlin"], capsys)
    assert (status, lines) == (
        0,
        [
            "At 02:00, every day, in Europe/Berlin. When clocks change, a repeated time runs "
            "once, and skipped times run once, right after the change."
        ],
    )
    _status, lines, _err = run(["explain", "*/15 * * * *"], capsys)
    assert lines == ["Every 15 minutes."]


def test_explain_words_a_day_of_week_range_ending_on_sunday(
    capsys: pytest.CaptureFixture[str],
) -> None:
    status, lines, err = run(["explain", "0 9 * * sat-sun"], capsys)
    assert (status, lines, err) == (0, ["At 09:00, on Saturday and Sunday."], "")
    _status, lines, _err = run(["explain", "0 9 * * fri-0"], capsys)
    assert lines == ["At 09:00, on Friday through Sunday."]


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        ([], "punctual: the following arguments are required: COMMAND"),
        (["next"], "punctual: give SCHEDULE (a cron expression), NAME (-n NS) or -f FILE"),
        (["nope"], "punctual: argument COMMAND: invalid choice: 'nope'"),
        (
            ["next", "* * * * *", "--count", "x"],
            "punctual next: argument --count: invalid int value",
        ),
        (["trigger"], "punctual trigger: the following arguments are required: NAME"),
        (["history"], "punctual history: the following arguments are required: NAME"),
        (["run", "--workers", "many"], "punctual run: argument --workers: invalid int value"),
        (["run", "--log-level", "LOUD"], "argument --log-level: invalid choice: 'LOUD'"),
        (["explain", "* * * * *", "--bogus"], "unrecognized arguments: --bogus"),
    ],
)
def test_usage_errors_are_one_line_and_status_2(
    capsys: pytest.CaptureFixture[str], argv: list[str], message: str
) -> None:
    status, lines, err = run(argv, capsys)
    assert status == 2
    assert lines == []
    assert err.count("\n") == 1, err
    assert message in err, err


def test_help_exits_0(capsys: pytest.CaptureFixture[str]) -> None:
    status, lines, _err = run(["next", "--help"], capsys)
    assert status == 0
    assert any("--timezone" in line for line in lines)


def test_run_flags_default_to_the_options_dataclass(monkeypatch: pytest.MonkeyPatch) -> None:
    from dataclasses import fields

    from punctual.cli.main import build_parser
    from punctual.runtime.options import Options

    for name in list(os.environ):
        if name.startswith("PUNCTUAL_") or name in ("KUBECONFIG", "POD_NAME", "POD_NAMESPACE"):
            monkeypatch.delenv(name)
    arguments = build_parser().parse_args(["run"])
    defaults = Options()
    for f in fields(Options):
        assert getattr(arguments, f.name) == getattr(defaults, f.name), f.name


@pytest.mark.parametrize(
    ("variable", "value", "message"),
    [
        ("PUNCTUAL_WORKERS", "many", "argument --workers: invalid int value: 'many'"),
        ("PUNCTUAL_LEASE_DURATION", "15s", "argument --lease-duration: invalid float value"),
        ("PUNCTUAL_RETRY_PERIOD", "20", "need 0 < retry period < renew deadline"),
        ("PUNCTUAL_QPS", "-5", "need qps > 0 and burst >= 1"),
        ("PUNCTUAL_METRICS_PORT", "70000", "--metrics-port must be 0 (off) or a port"),
    ],
)
def test_a_bad_run_setting_in_the_environment_is_one_line_and_status_2(
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    variable: str,
    value: str,
    message: str,
) -> None:
    monkeypatch.setenv(variable, value)
    status, lines, err = run(["run"], capsys)
    assert status == 2
    assert lines == []
    assert message in err
    assert "Traceback" not in err


# --- malformed input: never a traceback, always one line naming the field ----------

UID = ["--uid", "u-1"]
FIELDS = "minute"  # a message about the whole expression lists the fields, minute first

MALFORMED_SCHEDULES: list[tuple[str, list[str], str]] = [
    ("61 * * * *", [], "minute"),
    ("* 24 * * *", [], "hour"),
    ("* * 0 * *", [], "day-of-month"),
    ("* * 32 * *", [], "day-of-month"),
    ("* * * 13 *", [], "month"),
    ("* * * 0 *", [], "month"),
    ("* * * * 8", [], "day-of-week"),
    ("60 * * * * *", [], "second"),
    ("", [], FIELDS),
    ("   ", [], FIELDS),
    ("* * * *", [], FIELDS),
    ("* * * * * * *", [], FIELDS),
    ("*/0 * * * *", [], "minute"),
    ("* */0 * * *", [], "hour"),
    ("*/0 * * * * *", [], "second"),
    ("5-1 * * * *", [], "minute"),
    ("* * * * 5-1", [], "day-of-week"),
    ("* * * dec-jan *", [], "month"),
    ("0 0 * * tue-mon", [], "day-of-week"),
    ("0 0 L/2 * *", [], "day-of-month"),
    ("0 0 LW/2 * *", [], "day-of-month"),
    ("0 0 * * 5L/2", [], "day-of-week"),
    ("\u0665 * * * *", [], "minute"),  # Arabic-Indic five
    ("* \uff11 * * *", [], "hour"),  # fullwidth one
    ("0 0 \uff11\uff15 * *", [], "day-of-month"),
    ("0 0 * * \u0661", [], "day-of-week"),
    ("0 0 * \u0663 *", [], "month"),
    ("@reboot", [], FIELDS),
    ("@every 5m", [], FIELDS),
    ("@every", [], FIELDS),
    ("@fortnightly", [], FIELDS),
    ("L * * * *", [], "minute"),
    ("0 L * * *", [], "hour"),
    ("0 0 * L *", [], "month"),
    ("0 0 * * L", [], "day-of-week"),
    ("0 0 * * 5#6", [], "day-of-week"),
    ("0 0 * * 5#0", [], "day-of-week"),
    ("0 0 * * 5#", [], "day-of-week"),
    ("0 0 * * FRI#9", [], "day-of-week"),
    ("0 0 * * xyz#1", [], "day-of-week"),
    ("0 0 1-5W * *", [], "day-of-month"),
    ("0 0 W * *", [], "day-of-month"),
    ("0 0 32W * *", [], "day-of-month"),
    ("0 0 L-31 * *", [], "day-of-month"),
    ("0 0 5#2 * *", [], "day-of-month"),
    ("0 0 * * 15W", [], "day-of-week"),
    ("0 0 30W 2 *", [], "day-of-month"),
    ("0 0 */100 * 5L", [], "day-of-week"),
    ("x * * * *", [], "minute"),
    ("* * * foo *", [], "month"),
    ("* * * * funday", [], "day-of-week"),
    ("-5 * * * *", [], "minute"),
    ("5- * * * *", [], "minute"),
    ("1,,2 * * * *", [], "minute"),
    ("1, * * * *", [], "minute"),
    ("1-2-3 * * * *", [], "minute"),
    ("0 0 * * 1-7-2", [], "day-of-week"),
    ("R * * * *", [], "minute"),
    ("H(0-99) * * * *", UID, "minute"),
    ("H(9-3) * * * *", UID, "minute"),
    ("H,5 * * * *", UID, "minute"),
    ("H/0 * * * *", UID, "minute"),
    ("0 H(5-70) * * *", UID, "hour"),
    ("? * * * *", [], "minute"),
    ("0 0 ?,1 * *", [], "day-of-month"),
    ("*/x * * * *", [], "minute"),
    ("99999999999999999999 * * * *", [], "minute"),
    ("* * * * * %", [], "day-of-week"),
    ("$ * * * *", [], "minute"),
    ("\x00 * * * *", [], "minute"),
    ("61\n* * * *", [], "minute"),
    ("* * * * *", ["--timezone", "Mars/Base"], "time zone"),
    ("* * * * *", ["--timezone", ""], "time zone"),
    ("* * * * *", ["--timezone", "../etc/passwd"], "time zone"),
    ("* * * * *", ["--timezone", "Europe/Berlin\n"], "time zone"),
    ("* * * * *", ["--timezone", "\udc80"], "time zone"),
]
MALFORMED_FROM: list[str] = [
    "0001-01-01T00:00:00+14:00",
    "9999-12-31T23:59:59-14:00",
    "yesterday",
    "",
    "2026-13-01T00:00:00Z",
]


def assert_one_line_naming(err: str, field: str) -> None:
    assert "Traceback" not in err
    assert err.startswith("punctual: ") and err.endswith("\n")
    assert err.count("\n") == 1, err
    # `month` must be its own word, not the end of `day-of-month`.
    assert re.search(rf"(?<![\w-]){re.escape(field)}(?![\w-])", err), err


@pytest.mark.parametrize("command", ["next", "explain"])
@pytest.mark.parametrize(
    ("schedule", "extra", "field"),
    MALFORMED_SCHEDULES,
    ids=[f"{printable(s)} {' '.join(e)}".strip() or "empty" for s, e, _ in MALFORMED_SCHEDULES],
)
def test_a_malformed_schedule_is_one_line_naming_the_field_and_status_2(
    capsys: pytest.CaptureFixture[str], command: str, schedule: str, extra: list[str], field: str
) -> None:
    status, lines, err = run([command, schedule, *extra], capsys)
    assert (status, lines) == (2, [])
    assert_one_line_naming(err, field)


@pytest.mark.parametrize("start", MALFORMED_FROM)
def test_a_malformed_from_is_one_line_naming_it_and_status_2(
    capsys: pytest.CaptureFixture[str], start: str
) -> None:
    status, lines, err = run(["next", "* * * * *", "--from", start], capsys)
    assert (status, lines) == (2, [])
    assert_one_line_naming(err, "--from")


def test_there_are_more_than_sixty_malformed_inputs() -> None:
    assert len(MALFORMED_SCHEDULES) + len(MALFORMED_FROM) >= 60


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (["next", "* * * * *", "--from", "9999-12-31T00:00:00Z"], []),
        (["next", "0 0 * * *", "--from", "0001-01-01T00:00:00Z", "--count", "1"],
         ["1970-01-01T00:00:00+00:00"]),
        (["next", "0 0 * * *", "--from", "8999-12-31T00:00:00Z"], []),
        (["next", "*/5 2 * 3 0#2", "--timezone", "America/New_York"], []),
        (["next", "0 0 * 2 1#5", "--count", "1"], ["2044-02-29T00:00:00+00:00"]),
        (["next", "0 0 29 2 */7", "--from", "2088-03-01T00:00:00Z", "--count", "1"],
         ["2128-02-29T00:00:00+00:00"]),
    ],
)  # fmt: skip
def test_extreme_but_valid_input_prints_what_exists_and_status_0(
    capsys: pytest.CaptureFixture[str], argv: list[str], expected: list[str]
) -> None:
    status, lines, err = run(argv, capsys)
    assert (status, lines, err) == (0, expected, "")


SAMPLES = os.path.join(os.path.dirname(__file__), "..", "..", "crds", "samples")


def test_next_on_a_whole_spec_takes_entries_exclusions_and_max_runs(
    capsys: pytest.CaptureFixture[str], tmp_path: object
) -> None:
    manifest = os.path.join(str(tmp_path), "schedule.yaml")
    with open(manifest, "w") as out:
        out.write(
            "apiVersion: punctual.dev/v1\nkind: CronSchedule\nmetadata: {name: x}\nspec:\n"
            "  schedules: [{cron: '0 11 * * *'}, {every: 1h, offset: 30m}]\n"
            "  exclude: [{from: '2026-11-25T12:00:00Z', to: '2026-11-25T14:00:00Z'}]\n"
            "  maxRuns: 3\n  jobTemplate: {spec: {template: {}}}\n"
        )
    status, lines, err = run(["next", "-f", manifest, "--count", "10"], capsys)
    assert (status, err) == (0, "")
    assert lines == [
        "2026-11-25T10:30:00+00:00",
        "2026-11-25T11:00:00+00:00",
        "2026-11-25T11:30:00+00:00",
    ]


def test_explain_on_a_whole_spec_says_one_line_per_part(
    capsys: pytest.CaptureFixture[str],
) -> None:
    sample = os.path.join(SAMPLES, "holidays-excluded.yaml")
    status, lines, err = run(["explain", "-f", sample], capsys)
    assert (status, err) == (0, "")
    assert [line.split(":")[0] for line in lines] == [
        "schedule",
        "exclude[0]",
        "exclude[1]",
        "exclude[2]",
    ]


def test_an_invalid_entry_in_a_manifest_is_one_line_naming_it(
    capsys: pytest.CaptureFixture[str], tmp_path: object
) -> None:
    manifest = os.path.join(str(tmp_path), "bad.yaml")
    with open(manifest, "w") as out:
        out.write("spec: {schedules: [{cron: '0 0 * * *'}, {cron: '0 0 30 2 *'}]}\n")
    status, lines, err = run(["next", "-f", manifest], capsys)
    assert status == 2 and lines == []
    assert err.startswith("punctual: spec.schedules[1].cron: "), err


def test_explain_says_what_a_schedule_runs_after(
    capsys: pytest.CaptureFixture[str], tmp_path: object
) -> None:
    manifest = os.path.join(str(tmp_path), "after.yaml")
    with open(manifest, "w") as out:
        out.write(
            "apiVersion: punctual.dev/v1\nkind: CronSchedule\nmetadata: {name: x}\nspec:\n"
            "  after: [{schedule: extract, 'on': Succeeded}, {schedule: fetch, 'on': Finished}]\n"
            "  jobTemplate: {spec: {template: {}}}\n"
        )
    status, lines, err = run(["explain", "-f", manifest], capsys)
    assert (status, err) == (0, "")
    assert lines == [
        "after[0]: once for each run of extract that ends Succeeded (the same tick for every "
        "entry).",
        "after[1]: once for each run of fetch that ends (the same tick for every entry).",
    ]
    status, lines, err = run(["next", "-f", manifest], capsys)
    assert (status, lines, err) == (0, [], "")
