"""`punctual migrate cronjob NAME|--all [-n NS] [--apply | --undo]`: from CronJob to Punctual.

Why it exists: the way in for a team that runs CronJobs. Without `--apply` it prints the
equivalent CronSchedule as YAML (for GitOps users who commit it), every field that does
not carry over named in a comment and on stderr; `--apply` performs the switch on the
cluster and `--undo` gives the schedule back, both without a tick lost or doubled (the
order of the writes: kube.migrating; the mapping: core.migrating).

What it must never do: change anything when it refuses (one line per object refused,
exit 2), or print a traceback.
"""

from __future__ import annotations

import argparse
import asyncio
import os
from typing import TYPE_CHECKING, Any, Protocol, TextIO

if TYPE_CHECKING:
    from punctual.core.migrating import Migration


class Context(Protocol):
    """Where a command writes (cli.main.Context)."""

    stdout: TextIO
    stderr: TextIO


def add_migrate_command(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "migrate",
        help="move a CronJob's schedule to a CronSchedule (and back)",
        description="Print the CronSchedule equivalent to CronJob NAME (or every CronJob of "
        "the namespace with --all) as YAML; what does not carry over is named in a comment "
        "and on stderr. --apply makes the switch: the CronJob is suspended and the "
        "CronSchedule takes over from the CronJob's lastScheduleTime; a tick that falls due "
        "during the switch is fired by exactly one of the two. --undo gives the schedule "
        "back the same way: the CronSchedule is suspended and the CronJob resumes from "
        "Punctual's cursor.",
    )
    parser.add_argument("kind", choices=["cronjob"], help="what to migrate from")
    parser.add_argument("name", metavar="NAME", nargs="?", help="the CronJob's name")
    parser.add_argument("--all", action="store_true", help="every CronJob of the namespace")
    parser.add_argument(
        "--namespace", "-n", default=None, help="the kubeconfig's namespace if unset"
    )
    parser.add_argument("--kubeconfig", default=os.environ.get("KUBECONFIG") or None)
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--apply", action="store_true", help="make the switch on the cluster")
    mode.add_argument("--undo", action="store_true", help="give the schedule back to the CronJob")
    parser.set_defaults(handler=_migrate)


def _migrate(arguments: argparse.Namespace, context: Context) -> int:
    from punctual.kube.client import ApiError, KubeClient
    from punctual.kube.credentials import load_credentials
    from punctual.kube.migrating import Failed, Refused

    if (arguments.name is None) == (not arguments.all):
        print("punctual migrate: name a CronJob or give --all, not both", file=context.stderr)
        return 2
    try:
        credentials = load_credentials(arguments.kubeconfig)
    except (OSError, KeyError, ValueError) as error:
        print(f"punctual: cannot load credentials: {error}", file=context.stderr)
        return 2
    namespace = arguments.namespace or credentials.namespace
    names = None if arguments.all else [arguments.name]

    async def run() -> int:
        async with KubeClient(credentials) as api:
            return await _act(api, namespace, names, arguments, context)

    try:
        return asyncio.run(run())
    except Refused as refused:
        for line in refused.lines:
            print(f"punctual: {line}", file=context.stderr)
        return 2
    except Failed as error:
        print(f"punctual: {error}", file=context.stderr)
        return 1
    except ApiError as error:
        print(f"punctual: {error}", file=context.stderr)
        return 1


async def _act(
    api: Any,
    namespace: str,
    names: list[str] | None,
    arguments: argparse.Namespace,
    context: Context,
) -> int:
    from punctual.core.times import format_time
    from punctual.kube.migrating import hand_back, read_migrations, switch_in

    if arguments.undo:
        handed = await hand_back(api, namespace, names, sleep=asyncio.sleep)
        for back in handed:
            since = "its own cursor" if back.cursor is None else format_time(back.cursor)
            state = "stays suspended, as the CronSchedule was" if back.suspended else "resumed"
            print(
                f"cronschedule {namespace}/{back.name} suspended; cronjob {namespace}/{back.name} "
                f"{state}, from {since}",
                file=context.stdout,
            )
        if not handed:
            print(
                f"punctual: no CronSchedule migrated from a CronJob in {namespace}",
                file=context.stderr,
            )
        return 0
    migrations = await read_migrations(api, namespace, names)
    if not migrations:
        print(f"punctual: no CronJobs in {namespace}", file=context.stderr)
        return 0
    if not arguments.apply:
        _print(migrations, context)
        return 0
    switched = await switch_in(api, namespace, migrations, sleep=asyncio.sleep)
    _print([(s.name, s.migration) for s in switched], context, [s.manifest for s in switched])
    for done in switched:
        since = "its creation" if done.cursor is None else format_time(done.cursor)
        print(
            f"punctual: cronjob {namespace}/{done.name} suspended; cronschedule "
            f"{namespace}/{done.name} fires the ticks after {since}",
            file=context.stderr,
        )
    return 0


def _print(
    migrations: list[tuple[str, Migration]],
    context: Context,
    manifests: list[dict[str, Any]] | None = None,
) -> None:
    """Each CronSchedule as a YAML document; what did not carry over as comments above it
    (and on stderr, where a pipe into kubectl still shows it)."""
    import yaml

    for index, (name, migration) in enumerate(migrations):
        manifest = migration.manifest if manifests is None else manifests[index]
        if index:
            print("---", file=context.stdout)
        for line in migration.notes:
            print(f"# {line}", file=context.stdout)
            print(f"punctual: cronjob {name}: {line}", file=context.stderr)
        for line in migration.unmapped:
            print(f"# not carried over: {line}", file=context.stdout)
            print(f"punctual: cronjob {name}: not carried over: {line}", file=context.stderr)
        context.stdout.write(yaml.safe_dump(manifest, sort_keys=False))
