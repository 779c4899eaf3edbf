"""The `punctual` command line: the schedule questions here, the cluster commands beside.

Why it exists: a user should be able to check what a schedule means before
applying it (`punctual next "0 2 * * *" --timezone Europe/Berlin`,
`punctual explain ...`), and run, trigger and inspect schedules from the same tool.
Each subcommand is a `Command`: a function that adds its parser to the subparsers
and points it at a handler. `next` and `explain` live here; `run`, `trigger` and
`history` in `cli.cluster`, which imports the heavy parts only when they run.

What it must never do: read the clock other than through the injected `Clock`,
or print a traceback for bad input. A bad schedule or zone exits with status 2
and one line on stderr: `punctual: invalid schedule "61 * * * *": minute 61 is
out of range 0-59`.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Final, NoReturn, TextIO, TypeAlias, cast

from punctual.cli.cluster import add_history_command, add_run_command, add_trigger_command
from punctual.clocks import Clock, SystemClock
from punctual.core.schedules import (
    CronTicks,
    ScheduleError,
    explain,
    format_local,
    load_zone,
    parse_schedule,
)
from punctual.core.times import parse_time

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
        description="Print the next fire times of SCHEDULE, strictly after --from, one per "
        "line, in RFC 3339 with the zone's UTC offset at that instant.",
    )
    parser.add_argument("schedule", metavar="SCHEDULE", help='a cron expression, e.g. "0 2 * * *"')
    _add_zone_and_uid(parser)
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
        description="Print one sentence saying when SCHEDULE runs.",
    )
    parser.add_argument("schedule", metavar="SCHEDULE", help='a cron expression, e.g. "0 2 * * *"')
    _add_zone_and_uid(parser)
    parser.set_defaults(handler=_run_explain)


COMMANDS: list[Command] = [
    add_next_command,
    add_explain_command,
    add_run_command,
    add_trigger_command,
    add_history_command,
]


class OneLineParser(argparse.ArgumentParser):
    """argparse, but a usage error is one line naming what is wrong (and status 2)."""

    def error(self, message: str) -> NoReturn:
        self.exit(EXIT_USAGE, f"{self.prog}: {message} (see {self.prog} --help)\n")


def build_parser() -> argparse.ArgumentParser:
    parser = OneLineParser(
        prog="punctual", description="Punctual: cron for Kubernetes, one Job per tick."
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


def _run_next(arguments: argparse.Namespace, context: Context) -> int:
    if not 1 <= arguments.count <= MAX_COUNT:
        raise CliError(f"--count must be between 1 and {MAX_COUNT}, not {arguments.count}")
    ticks = _schedule(arguments)
    start = context.clock.now() if arguments.start is None else _instant(arguments)
    tick = start
    for _ in range(arguments.count):
        found = ticks.next_tick(tick)
        if found is None:
            break
        print(format_local(found, ticks.zone), file=context.stdout)
        tick = found
    return EXIT_OK


def _run_explain(arguments: argparse.Namespace, context: Context) -> int:
    try:
        sentence = explain(arguments.schedule, time_zone=arguments.timezone, uid=arguments.uid)
    except ScheduleError as error:
        raise CliError(_problem(error)) from error
    print(sentence, file=context.stdout)
    return EXIT_OK


def _schedule(arguments: argparse.Namespace) -> CronTicks:
    try:
        return parse_schedule(arguments.schedule, time_zone=arguments.timezone, uid=arguments.uid)
    except ScheduleError as error:
        raise CliError(_problem(error)) from error


def _problem(error: ScheduleError) -> str:
    if error.field == "timeZone":
        return error.problem
    return f'invalid schedule "{error.value}": {error.problem}'


def _instant(arguments: argparse.Namespace) -> datetime:
    text: str = arguments.start
    try:
        return parse_time(text, naive_zone=load_zone(arguments.timezone))
    except ValueError as error:
        raise CliError(f'invalid --from "{text}": {error}') from None
