"""The operating subcommands of `punctual`: `run` (the operator) and `trigger`.

Why it exists: the operator and the commands a user runs against a live cluster share
one CLI with the schedule-math commands, but not their dependencies; this module adds
its parsers to `punctual.cli` and imports the heavy parts (kopf, aiohttp) only when
one of its commands runs. Every `run` flag has an environment variable, so the Helm
chart configures the operator without a templated command line.

What it must never do: print a traceback for a user's mistake; errors are one line.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import secrets
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, Protocol, TextIO

if TYPE_CHECKING:
    from punctual.kube.client import KubeClient


class _Context(Protocol):
    stdout: TextIO
    stderr: TextIO


def _env(name: str) -> str | None:
    return os.environ.get(name) or None


def _env_or(name: str, default: str) -> str:
    return os.environ.get(name) or default


def add_run_command(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "run",
        help="run the operator",
        description="Run the Punctual operator: watch CronSchedules and their Jobs, take the "
        "leader Lease when it is free, and create exactly one Job per tick while leading. "
        "Every flag can also be set by the environment variable named in its help.",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    add = parser.add_argument
    add(
        "--kubeconfig",
        default=_env("KUBECONFIG"),
        help="kubeconfig file; in a pod, the service account is used when unset [KUBECONFIG]",
    )
    add(
        "--namespace",
        "-n",
        dest="namespaces",
        action="append",
        default=[n for n in (_env("PUNCTUAL_NAMESPACES") or "").split(",") if n],
        help="watch only this namespace (repeat for more); all namespaces when unset "
        "[PUNCTUAL_NAMESPACES, comma-separated]",
    )
    add(
        "--lease-name",
        default=_env_or("PUNCTUAL_LEASE_NAME", "punctual-leader"),
        help="name of the leader-election Lease [PUNCTUAL_LEASE_NAME]",
    )
    add(
        "--lease-namespace",
        default=_env("PUNCTUAL_LEASE_NAMESPACE") or _env("POD_NAMESPACE"),
        help="namespace of the Lease; defaults to the kubeconfig's or the pod's namespace "
        "[PUNCTUAL_LEASE_NAMESPACE, POD_NAMESPACE]",
    )
    add(
        "--lease-duration",
        type=float,
        default=float(_env_or("PUNCTUAL_LEASE_DURATION", "15")),
        help="seconds a standby waits on an unrenewed Lease before taking it "
        "[PUNCTUAL_LEASE_DURATION]",
    )
    add(
        "--renew-deadline",
        type=float,
        default=float(_env_or("PUNCTUAL_RENEW_DEADLINE", "10")),
        help="seconds after its last renewal a leader stops writing; less than the lease "
        "duration [PUNCTUAL_RENEW_DEADLINE]",
    )
    add(
        "--retry-period",
        type=float,
        default=float(_env_or("PUNCTUAL_RETRY_PERIOD", "2")),
        help="seconds between attempts to acquire or renew the Lease [PUNCTUAL_RETRY_PERIOD]",
    )
    add(
        "--identity",
        default=_env("PUNCTUAL_IDENTITY") or _env("POD_NAME"),
        help="this replica's name in the Lease; hostname plus a random suffix when unset "
        "[PUNCTUAL_IDENTITY, POD_NAME]",
    )
    add(
        "--workers",
        type=int,
        default=int(_env_or("PUNCTUAL_WORKERS", "128")),
        help="schedules processed at once [PUNCTUAL_WORKERS]",
    )
    add(
        "--qps",
        type=float,
        default=float(_env_or("PUNCTUAL_QPS", "200")),
        help="sustained API writes per second [PUNCTUAL_QPS]",
    )
    add(
        "--burst",
        type=int,
        default=int(_env_or("PUNCTUAL_BURST", "400")),
        help="API writes allowed in a burst above --qps [PUNCTUAL_BURST]",
    )
    add(
        "--status-delay",
        type=float,
        default=float(_env_or("PUNCTUAL_STATUS_DELAY", "10")),
        help="seconds a status change that only follows the Jobs (a Job seen created or "
        "finished) may wait for a later write to carry it; longer saves writes, shorter "
        "keeps status fresher; 0 writes at once [PUNCTUAL_STATUS_DELAY]",
    )
    add(
        "--log-level",
        default=_env_or("PUNCTUAL_LOG_LEVEL", "INFO"),
        choices=["DEBUG", "INFO", "WARNING", "ERROR"],
        help="log level [PUNCTUAL_LOG_LEVEL]",
    )
    add(
        "--fence",
        default=os.environ.get("PUNCTUAL_FENCE", "punctual-fence"),
        help="name of the Fence (crds/fences.punctual.dev.yaml) beside the Lease that a new "
        "leader raises to its epoch before writing, for the API server's fencing policy; "
        "an empty value disables it [PUNCTUAL_FENCE]",
    )
    add(
        "--log-format",
        default=_env_or("PUNCTUAL_LOG_FORMAT", "text"),
        choices=["text", "json"],
        help="log lines as text or one JSON object each [PUNCTUAL_LOG_FORMAT]",
    )
    add(
        "--metrics-port",
        type=int,
        default=int(_env_or("PUNCTUAL_METRICS_PORT", "8080")),
        help="port for /metrics, /healthz and /readyz; 0 disables them [PUNCTUAL_METRICS_PORT]",
    )
    parser.set_defaults(handler=_run)


def _run(arguments: argparse.Namespace, context: _Context) -> int:
    from punctual.kube.leases import LeaseConfig
    from punctual.runtime.process import Fatal, Options, run

    options = Options(
        kubeconfig=arguments.kubeconfig,
        namespaces=list(dict.fromkeys(arguments.namespaces)),
        lease_name=arguments.lease_name,
        lease_namespace=arguments.lease_namespace,
        lease_duration=arguments.lease_duration,
        renew_deadline=arguments.renew_deadline,
        retry_period=arguments.retry_period,
        identity=arguments.identity,
        workers=arguments.workers,
        qps=arguments.qps,
        burst=arguments.burst,
        status_delay=arguments.status_delay,
        log_level=arguments.log_level,
        log_format=arguments.log_format,
        fence=arguments.fence or None,
        metrics_port=arguments.metrics_port or None,
    )
    if not options.status_delay >= 0:
        print(
            f"punctual: --status-delay must be 0 or more, got {options.status_delay}",
            file=context.stderr,
        )
        return 2
    try:
        LeaseConfig(
            namespace="-",
            lease_duration=options.lease_duration,
            renew_deadline=options.renew_deadline,
            retry_period=options.retry_period,
        )
    except ValueError as error:
        print(f"punctual: {error}", file=context.stderr)
        return 2
    try:
        asyncio.run(run(options))
    except Fatal as error:
        print(f"punctual: {error}", file=context.stderr)
        return 1
    return 0


def add_trigger_command(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "trigger",
        help="fire a schedule now",
        description="Fire CronSchedule NAME now, once, subject to its concurrencyPolicy, by "
        "setting its punctual.dev/trigger annotation to a new request id. The firing is "
        "recorded in status.recentFirings like any other.",
    )
    _add_schedule_arguments(parser)
    parser.set_defaults(handler=_trigger)


def _trigger(arguments: argparse.Namespace, context: _Context) -> int:
    from punctual.clocks import SystemClock
    from punctual.core.deciding import TRIGGER_ANNOTATION
    from punctual.core.times import format_time

    request = f"{format_time(SystemClock().now().replace(microsecond=0))}-{secrets.token_hex(3)}"
    patch = {"metadata": {"annotations": {TRIGGER_ANNOTATION: request}}}
    done = _on_schedule(arguments, context, lambda api, path: api.patch(path, patch))
    if done is None:
        return 1
    meta = done["metadata"]
    print(
        f"cronschedule {meta['namespace']}/{meta['name']} triggered (request {request})",
        file=context.stdout,
    )
    return 0


def _add_schedule_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("name", metavar="NAME")
    parser.add_argument(
        "--namespace", "-n", default=None, help="the kubeconfig's namespace if unset"
    )
    parser.add_argument("--kubeconfig", default=_env("KUBECONFIG"))


def _on_schedule(
    arguments: argparse.Namespace,
    context: _Context,
    action: Callable[[KubeClient, str], Awaitable[dict[str, Any]]],
) -> dict[str, Any] | None:
    """Run `action(api, path)` on the CronSchedule NAME; None (said why) if it failed."""
    from punctual.kube.applying import schedule_path
    from punctual.kube.client import ApiError, KubeClient, NotFound, load_credentials

    try:
        credentials = load_credentials(arguments.kubeconfig)
    except (OSError, KeyError, ValueError) as error:
        print(f"punctual: cannot load credentials: {error}", file=context.stderr)
        return None
    namespace = arguments.namespace or credentials.namespace

    async def run() -> dict[str, Any]:
        async with KubeClient(credentials) as api:
            return await action(api, schedule_path(namespace, arguments.name))

    try:
        return asyncio.run(run())
    except NotFound:
        print(f"punctual: cronschedule {namespace}/{arguments.name} not found", file=context.stderr)
    except ApiError as error:
        print(f"punctual: {error}", file=context.stderr)
    return None


def add_history_command(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "history",
        help="show a schedule's recent firings",
        description="Show the recent firings of CronSchedule NAME, newest first: each tick, "
        "its Job, what became of it and why, and the leader epoch that decided it.",
    )
    _add_schedule_arguments(parser)
    parser.set_defaults(handler=_history)


def _history(arguments: argparse.Namespace, context: _Context) -> int:
    body = _on_schedule(arguments, context, lambda api, path: api.get(path))
    if body is None:
        return 1
    status = body.get("status") or {}
    rows = [("TICK", "JOB", "OUTCOME", "EPOCH", "REASON")]
    for firing in status.get("recentFirings") or []:
        outcome = firing.get("outcome", "")
        if firing.get("manual"):
            outcome += " (manual)"
        rows.append(
            (
                firing.get("tick", ""),
                firing.get("job") or "-",
                outcome,
                str(firing.get("epoch", "")),
                firing.get("reason") or "",
            )
        )
    widths = [max(len(row[i]) for row in rows) for i in range(4)]
    for row in rows:
        cells = [cell.ljust(width) for cell, width in zip(row[:4], widths, strict=True)]
        print("   ".join([*cells, row[4]]).rstrip(), file=context.stdout)
    print(
        f"\nlast scheduled {status.get('lastScheduledTime', '-')}, "
        f"next {status.get('nextScheduleTime', '-')}, "
        f"last success {status.get('lastSuccessfulTime', '-')}, "
        f"active {status.get('activeCount', 0)}",
        file=context.stdout,
    )
    return 0
