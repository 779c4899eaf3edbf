"""The `punctual next` and `punctual explain` commands, called through main()."""

from __future__ import annotations

import os
from datetime import UTC, datetime

import pytest

from punctual.cli.main import Context, main
from punctual.clocks import FixedClock

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


def test_explain(capsys: pytest.CaptureFixture[str]) -> None:
    status, lines, _err = run(["explain", "0 2 * * *", "--timezone", "Europe/Berlin"], capsys)
    assert (status, lines) == (0, ["At 02:00, every day, in Europe/Berlin."])
    _status, lines, _err = run(["explain", "*/15 * * * *"], capsys)
    assert lines == ["Every 15 minutes."]


def test_usage_errors_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    status, _lines, err = run([], capsys)
    assert status == 2
    assert "usage: punctual" in err
    status, _lines, _err = run(["next"], capsys)
    assert status == 2


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
        ("PUNCTUAL_QPS", "0", "need qps > 0 and burst >= 1"),
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
