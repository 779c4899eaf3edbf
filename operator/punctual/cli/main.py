"""The `punctual` command line: the schedule questions here, the cluster commands beside.

Why it exists: a user should be able to check what a schedule means before
applying it (`punctual next "0 2 * * *" --timezone Europe/Berlin`,
`punctual explain ...`), on a whole CronSchedule (`punctual next -f schedule.yaml`:
several entries, exclusions, the window and maxRuns) or a live one (`punctual next
NAME -n NS`), and run, trigger and inspect schedules from the same tool.
Each subcommand is a `Command`: a function that adds its parser to the subparsers
and points it at a handler. `next` and `explain` live here; `run` in `cli.running`;
`trigger`, `history`, `resume` and `backfill` in `cli.cluster` (both import the heavy
parts only when they run); `describe` here, its screen drawn by `cli.describing`;
`ui` here, serving `punctual.ui`'s page and handing it `main` as the way to act.

What it must never do: read the clock other than through the injected `Clock`,
or print a traceback for bad input. A bad schedule or zone exits with status 2
and one line on stderr: `punctual: invalid schedule "61 * * * *": minute 61 is
out of range 0-59`.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from importlib import metadata
from pathlib import Path
from typing import Any, Final, NoReturn, TextIO, TypeAlias, cast

import yaml
from pydantic import ValidationError

from punctual.cli.cluster import (
    add_backfill_command,
    add_history_command,
    add_resume_command,
    add_trigger_command,
    fetch_schedule,
    fetch_with_downstreams,
)
from punctual.cli.describing import describe_schedule
from punctual.cli.migrating import add_migrate_command
from punctual.cli.running import add_run_command
from punctual.clocks import Clock, SystemClock
from punctual.core.models import CronScheduleSpec, describe_error
from punctual.core.planning import tick_source
from punctual.core.schedules import (
    OneShot,
    ScheduleError,
    TickSource,
    explain,
    format_local,
    load_zone,
    parse_duration,
    parse_schedule,
)
from punctual.core.times import EPOCH, format_time, parse_time

EXIT_OK: Final = 0
EXIT_FAILED: Final = 1
EXIT_USAGE: Final = 2
MAX_COUNT: Final = 10_000


class CliError(Exception):
    """A problem with the user's input, reported as one line and exit status 2."""


@dataclass
class Context:
    """What a handler may use instead of globals: the clock and the streams."""

    clock: Clock = field(default_factory=SystemClock)
    stdout: TextIO = field(default_factory=lambda: sys.stdout)
    stderr: TextIO = field(default_factory=lambda: sys.stderr)


Handler = Callable[[argparse.Namespace, Context], int]


# What ArgumentParser.add_subparsers() returns (argparse has no public name for it).
Subparsers: TypeAlias = "argparse._SubParsersAction[argparse.ArgumentParser]"

# A subcommand adds its parser and sets `handler` on it with set_defaults.
Command = Callable[[Subparsers], None]


def add_next_command(subparsers: Subparsers) -> None:
    parser = subparsers.add_parser(
        "next",
        help="print the next fire times of a schedule",
        description="Print the next ticks, strictly after --from, one per line, in RFC 3339 "
        "with the zone's UTC offset at that instant: of SCHEDULE (a cron expression), of "
        "the CronSchedule in FILE (-f: all its entries, exclusions, window and maxRuns), or "
        "of the live CronSchedule NAME (-n NS).",
    )
    _add_source_arguments(parser)
    parser.add_argument(
        "--from",
        dest="start",
        metavar="RFC3339",
        help="start after this instant (default: now); without an offset it is read "
        "in the schedule's zone",
    )
    parser.add_argument("--count", type=int, default=5, metavar="N", help="how many (default: 5)")
    parser.set_defaults(handler=_run_next)


def add_explain_command(subparsers: Subparsers) -> None:
    parser = subparsers.add_parser(
        "explain",
        help="say in one sentence when a schedule runs",
        description="Print one sentence saying when SCHEDULE runs; for a CronSchedule (-f FILE, "
        "or NAME -n NS), one line per entry, exclusion, window and run limit.",
    )
    _add_source_arguments(parser)
    parser.set_defaults(handler=_run_explain)


def _add_source_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "schedule",
        metavar="SCHEDULE|NAME",
        nargs="?",
        help='a cron expression, e.g. "0 2 * * *", or the name of a live CronSchedule',
    )
    parser.add_argument(
        "-f", "--filename", metavar="FILE", help="a CronSchedule manifest (YAML or JSON)"
    )
    parser.add_argument(
        "--namespace", "-n", default=None, help="NAME's namespace (the kubeconfig's if unset)"
    )
    parser.add_argument("--kubeconfig", default=None, help="for NAME (default: $KUBECONFIG)")
    _add_zone_and_uid(parser)


def add_describe_command(subparsers: Subparsers) -> None:
    parser = subparsers.add_parser(
        "describe",
        help="show a schedule on one screen: meaning, next ticks, state, firings",
        description="Show CronSchedule NAME (-n NS), or the one in FILE (-f), on one screen: "
        "its spec in words (as `punctual explain`), its policies, its state (suspended, "
        "paused, finished, invalid, and whatever else its conditions say), the next ticks, "
        "what waits (buffered ticks, a backfill), the recent firings with who asked and "
        "why, and its conditions.",
    )
    parser.add_argument("name", metavar="NAME", nargs="?", help="a live CronSchedule")
    parser.add_argument(
        "-f", "--filename", metavar="FILE", help="a CronSchedule manifest (YAML or JSON)"
    )
    parser.add_argument(
        "--namespace", "-n", default=None, help="NAME's namespace (the kubeconfig's if unset)"
    )
    parser.add_argument("--kubeconfig", default=None, help="for NAME (default: $KUBECONFIG)")
    parser.add_argument(
        "--count", type=int, default=10, metavar="N", help="how many next ticks (default: 10)"
    )
    parser.set_defaults(handler=_run_describe)


def add_ui_command(subparsers: Subparsers) -> None:
    parser = subparsers.add_parser(
        "ui",
        help="a local web page of the schedules: timeline, history, actions",
        description="Serve a web page on 127.0.0.1 showing the CronSchedules you can read: "
        "the fleet's upcoming ticks on a timeline with firings per minute, each schedule's "
        'firings, conditions, Events and Jobs, and "why didn\'t it run at T?"; with '
        "buttons for trigger, suspend, resume and backfill that run the same code as the "
        "commands of those names, with your kubeconfig. The URL carries a token for this "
        "run only; requests without it are refused.",
    )
    parser.add_argument(
        "--namespace",
        "-n",
        action="append",
        default=[],
        help="show this namespace (repeatable; default: every namespace you can list, "
        "else the kubeconfig's)",
    )
    parser.add_argument("--kubeconfig", default=None, help="default: $KUBECONFIG")
    parser.add_argument(
        "--port", type=int, default=0, help="listen on this port of 127.0.0.1 (default: a free one)"
    )
    parser.add_argument("--no-browser", action="store_true", help="print the URL only")
    parser.set_defaults(handler=_run_ui)


def _run_ui(arguments: argparse.Namespace, context: Context) -> int:
    import asyncio
    import io

    from punctual.ui.serving import Settings, serve

    def run(argv: list[str]) -> tuple[int, str, str]:
        """One `punctual` command, its output captured: what the page's actions run."""
        out, err = io.StringIO(), io.StringIO()
        status = main(argv, context=Context(clock=context.clock, stdout=out, stderr=err))
        return status, out.getvalue(), err.getvalue()

    if not 0 <= arguments.port <= 65535:
        raise CliError(f"--port must be between 0 and 65535, not {arguments.port}")
    settings = Settings(namespaces=arguments.namespace, kubeconfig=arguments.kubeconfig)

    def say(line: str) -> None:
        print(line, file=context.stdout, flush=True)

    try:
        asyncio.run(
            serve(run, context.clock, settings, port=arguments.port,
                  browser=not arguments.no_browser, say=say)
        )  # fmt: skip
    except KeyboardInterrupt:
        return EXIT_OK
    except (OSError, KeyError, ValueError) as error:
        print(f"punctual: cannot serve the page: {error}", file=context.stderr)
        return EXIT_FAILED
    return EXIT_OK


COMMANDS: list[Command] = [
    add_next_command,
    add_explain_command,
    add_run_command,
    add_trigger_command,
    add_resume_command,
    add_backfill_command,
    add_describe_command,
    add_history_command,
    add_migrate_command,
    add_ui_command,
]


class OneLineParser(argparse.ArgumentParser):
    """argparse, but a usage error is one line naming what is wrong (and status 2)."""

    def error(self, message: str) -> NoReturn:
        self.exit(EXIT_USAGE, f"{self.prog}: {message} (see {self.prog} --help)\n")


def package_version() -> str:
    """The installed distribution's version; "unknown" when run from a bare source tree."""
    try:
        return metadata.version("punctual")
    except metadata.PackageNotFoundError:
        return "unknown"


class _VersionAction(argparse.Action):
    """`--version`: `punctual <version>` on stdout, exit 0; the version read only if asked."""

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: object,
        option_string: str | None = None,
    ) -> None:
        sys.stdout.write(f"punctual {package_version()}\n")
        parser.exit(EXIT_OK)


def build_parser() -> argparse.ArgumentParser:
    parser = OneLineParser(
        prog="punctual", description="Punctual: cron for Kubernetes, one Job per tick."
    )
    parser.add_argument(
        "--version", action=_VersionAction, nargs=0, help="print the version and exit"
    )
    subparsers: Subparsers = parser.add_subparsers(
        dest="command",
        metavar="COMMAND",
        required=True,
        parser_class=cast(type[argparse.ArgumentParser], OneLineParser),
    )
    for command in COMMANDS:
        command(subparsers)
    return parser


def main(argv: Sequence[str] | None = None, *, context: Context | None = None) -> int:
    """Run the command line; returns the exit status instead of exiting."""
    context = context or Context()
    parser = build_parser()
    try:
        arguments = parser.parse_args(argv)
    except SystemExit as stop:  # argparse has printed usage or help
        return stop.code if isinstance(stop.code, int) else EXIT_USAGE
    handler: Handler = arguments.handler
    try:
        return handler(arguments, context)
    except CliError as error:
        print(f"punctual: {error}", file=context.stderr)
        return EXIT_USAGE
    except BrokenPipeError:  # `punctual history ... | head`: the reader had enough
        return EXIT_OK


def _add_zone_and_uid(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--timezone", "--time-zone", default="UTC", metavar="TZ", help="IANA zone (default: UTC)"
    )
    parser.add_argument(
        "--uid", help="the CronSchedule's metadata.uid, which picks the values of H fields"
    )


@dataclass(frozen=True)
class _Target:
    """What `next` and `explain` look at: a bare expression, or a CronSchedule's spec."""

    ticks: TickSource
    zone_name: str
    spec: CronScheduleSpec | None = None
    uid: str | None = None
    runs_left: int | None = None  # under maxRuns, how many scheduled runs remain


def _run_next(arguments: argparse.Namespace, context: Context) -> int:
    if not 1 <= arguments.count <= MAX_COUNT:
        raise CliError(f"--count must be between 1 and {MAX_COUNT}, not {arguments.count}")
    target = _target(arguments, context)
    start = context.clock.now() if arguments.start is None else _instant(arguments, target)
    count = arguments.count if target.runs_left is None else min(arguments.count, target.runs_left)
    tick = start
    for _ in range(count):
        found = target.ticks.next_tick(tick)
        if found is None:
            break
        print(format_local(found, target.ticks.zone), file=context.stdout)
        tick = found
    return EXIT_OK


def _run_explain(arguments: argparse.Namespace, context: Context) -> int:
    target = _target(arguments, context)
    if target.spec is None:
        try:
            sentence = explain(arguments.schedule, time_zone=target.zone_name, uid=arguments.uid)
        except ScheduleError as error:
            raise CliError(_problem(error)) from error
        print(sentence, file=context.stdout)
        return EXIT_OK
    for line in _explain_spec(target.spec, target.uid):
        print(line, file=context.stdout)
    return EXIT_OK


def _target(arguments: argparse.Namespace, context: Context) -> _Target:
    """The expression, the manifest (-f) or the live object (NAME) the user means."""
    text: str | None = arguments.schedule
    if arguments.filename is not None:
        if text is not None:
            raise CliError("give SCHEDULE, NAME or -f FILE, not two of them")
        return _spec_target(_read_manifest(arguments.filename), arguments)
    if text is None:
        raise CliError("give SCHEDULE (a cron expression), NAME (-n NS) or -f FILE")
    if not text.strip().startswith("@") and len(text.split()) == 1:
        body = fetch_schedule(text, arguments.namespace, arguments.kubeconfig, context)
        if body is None:
            raise CliError(f"cannot read cronschedule {text}")
        return _spec_target(body, arguments)
    try:
        ticks = parse_schedule(text, time_zone=arguments.timezone, uid=arguments.uid)
    except ScheduleError as error:
        raise CliError(_problem(error)) from error
    return _Target(ticks, arguments.timezone)


def _read_manifest(filename: str) -> dict[str, Any]:
    try:
        text = sys.stdin.read() if filename == "-" else Path(filename).read_text()
        body = yaml.safe_load(text)
    except (OSError, yaml.YAMLError) as error:
        raise CliError(f"cannot read {filename}: {error}") from None
    if not isinstance(body, dict) or not isinstance(body.get("spec"), dict):
        raise CliError(f"{filename} holds no CronSchedule (no spec)")
    return body


def _spec_target(body: Mapping[str, Any], arguments: argparse.Namespace) -> _Target:
    try:
        spec = CronScheduleSpec.model_validate(body["spec"])
    except ValidationError as error:
        raise CliError(describe_error(error)) from None
    uid = str((body.get("metadata") or {}).get("uid") or arguments.uid or "")
    try:
        # spec.after alone: no ticks of its own (a one-shot at the epoch never comes again)
        chained = OneShot(EPOCH, load_zone(spec.time_zone)) if spec.chained else None
        ticks = chained or tick_source(spec, uid=uid)
    except ScheduleError as error:
        raise CliError(error.reason) from None
    runs_left = spec.max_runs
    status = body.get("status") or {}
    if spec.max_runs is not None and isinstance(status.get("runsRemaining"), int):
        runs_left = status["runsRemaining"]
    return _Target(ticks, spec.time_zone, spec, uid or None, runs_left)


def _explain_spec(spec: CronScheduleSpec, uid: str | None) -> list[str]:
    """One line per entry, exclusion, window and run limit."""
    zone = spec.time_zone
    lines: list[str] = []
    if spec.schedule is not None:
        lines.append(f"schedule: {explain(spec.schedule, time_zone=zone, uid=uid)}")
    if spec.run_at is not None:
        lines.append(f"runAt: once, at {format_time(spec.run_at)}.")
    for index, entry in enumerate(spec.schedules or ()):
        if entry.cron is not None:
            lines.append(f"schedules[{index}]: {explain(entry.cron, time_zone=zone, uid=uid)}")
        else:
            every = parse_duration(entry.every or "", f"schedules[{index}].every")
            offset = parse_duration(entry.offset or "0s", f"schedules[{index}].offset")
            lines.append(
                f"schedules[{index}]: Every {_seconds_text(every)}, at the Unix epoch plus "
                f"{_seconds_text(offset)} plus a whole number of intervals, in UTC; time zones "
                "and daylight saving do not move it."
            )
    if spec.schedules is not None and len(spec.schedules) > 1:
        lines.append("An instant that two entries reach is one tick, one Job.")
    for index, exclusion in enumerate(spec.exclude):
        own = exclusion.time_zone or zone
        if exclusion.cron is not None:
            sentence = explain(exclusion.cron, time_zone=own, uid=uid).split(". When")[0]
            lines.append(
                f"exclude[{index}]: not {sentence[0].lower()}{sentence[1:].rstrip('.')}"
                " (the local wall clock; 5 fields: the whole minute)."
            )
        elif exclusion.dates is not None:
            days = ", ".join(d.isoformat() for d in exclusion.dates)
            lines.append(f"exclude[{index}]: not on {days} (whole days in {own}).")
        elif exclusion.start is not None and exclusion.to is not None:
            lines.append(
                f"exclude[{index}]: not from {format_time(exclusion.start)} until "
                f"{format_time(exclusion.to)} (the end excluded)."
            )
    if spec.exclude_calendars:
        names = ", ".join(spec.exclude_calendars)
        lines.append(
            f"excludeCalendars: nor on the entries of Calendar {names} (kept in the "
            "cluster and not read here: `punctual next` does not leave them out)."
        )
    if spec.start_time is not None:
        lines.append(f"startTime: no tick before {format_time(spec.start_time)}.")
    if spec.end_time is not None:
        lines.append(f"endTime: no tick at or after {format_time(spec.end_time)}.")
    if spec.max_runs is not None:
        lines.append(
            f"maxRuns: at most {spec.max_runs} scheduled runs (manual triggers do not count)."
        )
    for index, upstream in enumerate(spec.after or ()):
        outcome = {"Finished": "ends"}.get(upstream.on.value, f"ends {upstream.on.value}")
        if spec.chained:
            line = f"after[{index}]: once for each run of {upstream.schedule} that {outcome}"
        else:
            line = (
                f"after[{index}]: each tick waits up to {upstream.within} for a run of "
                f"{upstream.schedule} since the tick before that {outcome}, else it is missed"
            )
        lines.append(
            line + " (the same tick for every entry)." if len(spec.after or ()) > 1 else line + "."
        )
    return lines


def _seconds_text(seconds: int) -> str:
    hours, rest = divmod(seconds, 3600)
    minutes, secs = divmod(rest, 60)
    parts = [
        f"{hours}h" if hours else "",
        f"{minutes}m" if minutes else "",
        f"{secs}s" if secs else "",
    ]
    return "".join(parts) or "0s"


def _problem(error: ScheduleError) -> str:
    if error.field == "timeZone":
        return error.problem
    return f'invalid schedule "{error.value}": {error.problem}'


def _instant(arguments: argparse.Namespace, target: _Target) -> datetime:
    text: str = arguments.start
    try:
        return parse_time(text, naive_zone=load_zone(target.zone_name))
    except ValueError as error:
        raise CliError(f'invalid --from "{text}": {error}') from None


def _run_describe(arguments: argparse.Namespace, context: Context) -> int:
    if not 0 <= arguments.count <= MAX_COUNT:
        raise CliError(f"--count must be between 0 and {MAX_COUNT}, not {arguments.count}")
    if (arguments.name is None) == (arguments.filename is None):
        raise CliError("give NAME (-n NS) or -f FILE")
    downstreams: list[str] | None = None
    if arguments.filename is not None:
        body = _read_manifest(arguments.filename)
    else:
        fetched = fetch_with_downstreams(
            arguments.name, arguments.namespace, arguments.kubeconfig, context
        )
        if fetched is None:
            return EXIT_FAILED
        body, downstreams = fetched
    arguments.uid = None
    target = _spec_target(body, arguments)
    assert target.spec is not None
    now = context.clock.now()
    upcoming: list[datetime] = []
    finished = any(
        c.get("type") == "Finished" and c.get("status") == "True"
        for c in (body.get("status") or {}).get("conditions") or []
        if isinstance(c, Mapping)
    )
    count = arguments.count if target.runs_left is None else min(arguments.count, target.runs_left)
    while not finished and len(upcoming) < count:
        found = target.ticks.next_tick(upcoming[-1] if upcoming else now)
        if found is None:
            break
        upcoming.append(found)
    lines = describe_schedule(
        body,
        now=now,
        explained=_explain_spec(target.spec, target.uid),
        upcoming=upcoming,
        zone=target.ticks.zone,
        downstreams=downstreams,
    )
    print("\n".join(lines), file=context.stdout)
    return EXIT_OK
