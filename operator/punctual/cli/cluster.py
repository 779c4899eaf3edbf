"""The cluster subcommands of `punctual`: `run` (the operator), `trigger` and `history`.

Why it exists: the operator and the commands a user runs against a live cluster share
one CLI with the schedule-math commands, but not their dependencies; this module adds
its parsers to `punctual.cli.main` and imports the heavy parts (kopf, aiohttp) only when
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
from dataclasses import replace
from typing import TYPE_CHECKING, Any, Protocol, TextIO

if TYPE_CHECKING:
    from punctual.kube.client import KubeClient
    from punctual.runtime.options import Options


class _Context(Protocol):
    stdout: TextIO
    stderr: TextIO


def _env(name: str) -> str | None:
    return os.environ.get(name) or None


def _env_or(name: str, default: str) -> str:
    return os.environ.get(name) or default


# Over 60 lines on purpose: one declaration per flag, read as a table (--help renders it).
def add_run_command(subparsers: Any) -> None:
    # Long on purpose: one add() per flag of `punctual run`, its help beside it.
    from punctual.runtime.options import Options

    defaults = Options()
    parser = subparsers.add_parser(
        "run",
        help="run the operator",
        description="Run the Punctual operator: watch CronSchedules and their Jobs, take the "
        "leader Lease when it is free, and create exactly one Job per tick while leading. "
        "Every flag can also be set by the environment variable named in its help.",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )

    def add(flag: str, variable: str | None, help: str, **kwargs: Any) -> None:
        """A flag whose default is the variable's value, or Options' own default.

        argparse converts a string default with the flag's type, so a bad value in
        the environment is one line naming the flag and exit status 2, as on the
        command line.
        """
        dest = kwargs.pop("dest", flag.lstrip("-").replace("-", "_"))
        default = kwargs.pop("default", getattr(defaults, dest))
        if variable is not None:
            default = _env_or(variable, "" if default is None else str(default)) or None
            help = f"{help} [{variable}]"
        parser.add_argument(flag, dest=dest, default=default, help=help, **kwargs)

    add("--kubeconfig", "KUBECONFIG", "kubeconfig file; in a pod, the service account when unset")
    parser.add_argument(
        "--namespace",
        "-n",
        dest="namespaces",
        action="append",
        default=[n for n in (_env("PUNCTUAL_NAMESPACES") or "").split(",") if n],
        help="watch only this namespace (repeat for more); all namespaces when unset "
        "[PUNCTUAL_NAMESPACES, comma-separated]",
    )
    add("--lease-name", "PUNCTUAL_LEASE_NAME", "name of the leader-election Lease")
    add(
        "--lease-namespace",
        None,
        "namespace of the Lease; defaults to the kubeconfig's or the pod's namespace "
        "[PUNCTUAL_LEASE_NAMESPACE, POD_NAMESPACE]",
        default=_env("PUNCTUAL_LEASE_NAMESPACE") or _env("POD_NAMESPACE"),
    )
    add(
        "--lease-duration",
        "PUNCTUAL_LEASE_DURATION",
        "seconds a standby waits on an unrenewed Lease before taking it",
        type=float,
    )
    add(
        "--renew-deadline",
        "PUNCTUAL_RENEW_DEADLINE",
        "seconds after its last renewal a leader stops writing; less than the lease duration",
        type=float,
    )
    add(
        "--retry-period",
        "PUNCTUAL_RETRY_PERIOD",
        "seconds between attempts to acquire or renew the Lease",
        type=float,
    )
    add(
        "--identity",
        None,
        "this replica's name in the Lease; hostname plus a random suffix when unset "
        "[PUNCTUAL_IDENTITY, POD_NAME]",
        default=_env("PUNCTUAL_IDENTITY") or _env("POD_NAME"),
    )
    add(
        "--shards",
        "PUNCTUAL_SHARDS",
        "split the schedules into this many shards, each led through its own Lease and "
        "shared evenly by the live replicas; 1 is one leader Lease. Changing it hands "
        "over once every replica of the old count is gone (see the README)",
        type=int,
    )
    add("--workers", "PUNCTUAL_WORKERS", "schedules processed at once", type=int)
    add(
        "--qps",
        "PUNCTUAL_QPS",
        "an optional cap on API writes per second; unset or 0: as fast as the API server "
        "admits (every write pauses on its 429 Retry-After and backs off on 5xx)",
        type=float,
    )
    add(
        "--burst",
        "PUNCTUAL_BURST",
        "API writes allowed in a burst above --qps (default: twice --qps)",
        type=int,
    )
    add(
        "--status-delay",
        "PUNCTUAL_STATUS_DELAY",
        "seconds a status change that only follows the Jobs (a Job seen created or "
        "finished) may wait for a later write to carry it; longer saves writes, shorter "
        "keeps status fresher; 0 writes at once",
        type=float,
    )
    add(
        "--log-level",
        "PUNCTUAL_LOG_LEVEL",
        "log level",
        choices=["DEBUG", "INFO", "WARNING", "ERROR"],
    )
    add(
        "--fence",
        None,
        "name of the Fence (crds/fences.punctual.dev.yaml) beside the Lease that a new "
        "leader raises to its epoch before writing, for the API server's fencing policy; "
        "an empty value disables it [PUNCTUAL_FENCE]",
        default=os.environ.get("PUNCTUAL_FENCE", defaults.fence),
    )
    add(
        "--class",
        "PUNCTUAL_CLASS",
        "fire only the CronSchedules whose spec.className is this; unset: those without a "
        "className (run two installations side by side with different classes)",
        dest="class_name",
    )
    add(
        "--log-format",
        "PUNCTUAL_LOG_FORMAT",
        "log lines as text or one JSON object each",
        choices=["text", "json"],
    )
    add(
        "--metrics-port",
        "PUNCTUAL_METRICS_PORT",
        "port for /metrics, /healthz and /readyz; 0 disables them",
        type=int,
    )
    parser.set_defaults(handler=_run)


def _run(arguments: argparse.Namespace, context: _Context) -> int:
    from punctual.runtime.options import Options
    from punctual.runtime.process import Fatal, run

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
        shards=arguments.shards,
        qps=arguments.qps,
        burst=arguments.burst,
        status_delay=arguments.status_delay,
        log_level=arguments.log_level,
        log_format=arguments.log_format,
        fence=arguments.fence or None,
        metrics_port=arguments.metrics_port or None,
        class_name=arguments.class_name or None,
    )
    problem = _problem_with(options)
    if problem is not None:
        print(f"punctual: {problem}", file=context.stderr)
        return 2
    try:
        asyncio.run(run(options))
    except Fatal as error:
        print(f"punctual: {error}", file=context.stderr)
        return 1
    return 0


# Each shard costs every replica one Lease read (and its holder one write) per retry
# period, and one watch.
MAX_SHARDS = 256


def _problem_with(options: Options) -> str | None:
    """What is wrong with a set of run options, in one line, or None."""
    from punctual.kube.ratelimiting import RateLimiter

    if not options.status_delay >= 0:
        return f"--status-delay must be 0 or more, got {options.status_delay}"
    if not 1 <= options.shards <= MAX_SHARDS:
        return f"--shards must be 1-{MAX_SHARDS}, got {options.shards}"
    if options.workers < 1:
        return f"--workers must be 1 or more, got {options.workers}"
    if options.metrics_port is not None and not 0 < options.metrics_port < 65536:
        return f"--metrics-port must be 0 (off) or a port 1-65535, got {options.metrics_port}"
    try:
        options.lease_config("-")
        RateLimiter(options.qps, options.burst)
    except ValueError as error:
        return str(error)
    return None


def add_trigger_command(subparsers: Any) -> None:
    from punctual.core.triggers import MAX_TRIGGER_REASON, OVERRIDABLE

    parser = subparsers.add_parser(
        "trigger",
        help="fire a schedule now",
        description="Fire CronSchedule NAME now, once, subject to its concurrencyPolicy "
        "(or --overlap), by setting its punctual.dev/trigger annotation to a new request. "
        "The request names you as the API server knows you (its SelfSubjectReview, as "
        "`kubectl auth whoami`) and --reason; the firing is recorded with both in "
        "status.recentFirings, `punctual history`, the Triggered Event and the Job's "
        "punctual.dev/triggered-by and punctual.dev/trigger-reason annotations.",
    )
    _add_schedule_arguments(parser)
    parser.add_argument(
        "--reason",
        help=f"why you fire it, recorded with the firing (at most {MAX_TRIGGER_REASON} characters)",
    )
    parser.add_argument(
        "--overlap",
        metavar="POLICY",
        choices=[p.value for p in OVERRIDABLE],
        help="the concurrencyPolicy for this firing only, instead of the schedule's: "
        + ", ".join(p.value for p in OVERRIDABLE),
    )
    parser.set_defaults(handler=_trigger)


def _trigger(arguments: argparse.Namespace, context: _Context) -> int:
    from punctual.core.keys import ANNOTATION_TRIGGER
    from punctual.core.triggers import (
        MAX_TRIGGER_REASON,
        TriggerError,
        TriggerRequest,
        overlap_policy,
    )
    from punctual.kube.client import ApiError
    from punctual.kube.reviewing import caller_name

    reason = arguments.reason
    if reason is not None and not 0 < len(reason) <= MAX_TRIGGER_REASON:
        print(
            f"punctual: --reason must be 1 to {MAX_TRIGGER_REASON} characters, not {len(reason)}",
            file=context.stderr,
        )
        return 2
    try:
        policy = overlap_policy(arguments.overlap, "--overlap")
    except TriggerError as error:  # argparse's choices catch it first; kept for callers
        print(f"punctual: {error}", file=context.stderr)
        return 2
    request = new_request_id()
    asked = TriggerRequest(request, None, reason, policy)

    async def ask(api: KubeClient, path: str) -> dict[str, Any]:
        nonlocal asked
        try:
            asked = replace(asked, triggered_by=await caller_name(api))
        except ApiError as error:
            print(
                f"punctual: the API server cannot say who you are ({error}); "
                "the trigger names nobody",
                file=context.stderr,
            )
        patch = {"metadata": {"annotations": {ANNOTATION_TRIGGER: asked.annotation()}}}
        return await api.patch(path, patch)

    done = _on_schedule(arguments, context, ask)
    if done is None:
        return 1
    meta = done["metadata"]
    who = "" if asked.triggered_by is None else f" by {asked.triggered_by}"
    print(
        f"cronschedule {meta['namespace']}/{meta['name']} triggered{who} (request {request})",
        file=context.stdout,
    )
    return 0


def new_request_id() -> str:
    """A request id for an annotation the operator acts on once per value (trigger,
    resume, backfill): the time it was asked, and 6 random hex digits."""
    from punctual.clocks import SystemClock
    from punctual.core.times import format_time

    return f"{format_time(SystemClock().now().replace(microsecond=0))}-{secrets.token_hex(3)}"


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


def fetch_schedule(
    name: str, namespace: str | None, kubeconfig: str | None, context: _Context
) -> dict[str, Any] | None:
    """The live CronSchedule NAME (for `punctual next NAME`); None (said why) if unreadable."""
    arguments = argparse.Namespace(
        name=name, namespace=namespace, kubeconfig=kubeconfig or _env("KUBECONFIG")
    )
    return _on_schedule(arguments, context, lambda api, path: api.get(path))


def add_history_command(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "history",
        help="show a schedule's recent firings",
        description="Show the recent firings of CronSchedule NAME, newest first: each tick, "
        "its Job, what became of it and why, the leader epoch that decided it, and for a "
        "manual trigger who asked and why.",
    )
    _add_schedule_arguments(parser)
    parser.set_defaults(handler=_history)


def _history(arguments: argparse.Namespace, context: _Context) -> int:
    from punctual.cli.describing import firings_table

    body = _on_schedule(arguments, context, lambda api, path: api.get(path))
    if body is None:
        return 1
    status = body.get("status") or {}
    for row in firings_table(status.get("recentFirings") or []):
        print(row, file=context.stdout)
    print(
        f"\nlast scheduled {status.get('lastScheduledTime', '-')}, "
        f"next {status.get('nextScheduleTime', '-')}, "
        f"last success {status.get('lastSuccessfulTime', '-')}, "
        f"active {status.get('activeCount', 0)}",
        file=context.stdout,
    )
    backfill = status.get("backfill")
    if backfill:
        from punctual.cli.describing import backfill_line

        print(backfill_line(backfill), file=context.stdout)
    return 0


def add_resume_command(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "resume",
        help="resume a schedule that pauseOnFailure paused",
        description="Resume CronSchedule NAME after spec.pauseOnFailure paused it, by setting "
        "its punctual.dev/resume annotation to a new request id: the Paused condition clears, "
        "the failure count restarts at 0, and the ticks of the pause are handled by "
        "missedRunPolicy. The spec is not edited. A schedule that is not paused is unchanged.",
    )
    _add_schedule_arguments(parser)
    parser.set_defaults(handler=_resume)


def _resume(arguments: argparse.Namespace, context: _Context) -> int:
    from punctual.core.keys import ANNOTATION_RESUME

    request = new_request_id()
    patch = {"metadata": {"annotations": {ANNOTATION_RESUME: request}}}
    done = _on_schedule(arguments, context, lambda api, path: api.patch(path, patch))
    if done is None:
        return 1
    meta = done["metadata"]
    paused = [
        c
        for c in (done.get("status") or {}).get("conditions") or []
        if c.get("type") == "Paused" and c.get("status") == "True"
    ]
    state = "was paused; resuming" if paused else "was not paused; nothing to resume"
    print(
        f"cronschedule {meta['namespace']}/{meta['name']} {state} (request {request})",
        file=context.stdout,
    )
    return 0


def add_backfill_command(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "backfill",
        help="run every tick of a past range, once each",
        description="Ask for every tick of CronSchedule NAME in [--from, --to) to run, through "
        "the same claim-then-create path as any tick, oldest first, paced (at most 5 Jobs a "
        "second). A tick whose Job exists or is recorded as fired is reported as already "
        "done and never runs twice, so asking again creates nothing new. Progress is in "
        "status.backfill and `punctual history`; it survives a failover. Ticks after now "
        "are left to the schedule.",
    )
    _add_schedule_arguments(parser)
    parser.add_argument("--from", dest="start", metavar="T1", help="RFC 3339, inclusive")
    parser.add_argument("--to", dest="end", metavar="T2", help="RFC 3339, exclusive")
    parser.add_argument(
        "--overlap",
        choices=["Allow", "Forbid"],
        default="Allow",
        help="Allow: up to 5 Jobs a second beside running ones (default); Forbid: one at a "
        "time, each after no Job of the schedule runs",
    )
    parser.add_argument("--dry-run", action="store_true", help="list the ticks; change nothing")
    parser.add_argument("--cancel", action="store_true", help="stop the running backfill")
    parser.set_defaults(handler=_backfill)


def _backfill(arguments: argparse.Namespace, context: _Context) -> int:
    import json

    from punctual.core.backfilling import read_request
    from punctual.core.keys import ANNOTATION_BACKFILL

    request: dict[str, Any] = {"request": new_request_id()}
    if arguments.cancel:
        request["cancel"] = True
    else:
        if not arguments.start or not arguments.end:
            print("punctual: backfill needs --from and --to (or --cancel)", file=context.stderr)
            return 2
        request.update({"from": arguments.start, "to": arguments.end})
        request["overlap"] = arguments.overlap
    problem = read_request(json.dumps(request))
    if isinstance(problem, str):
        print(f"punctual: {problem.split(': ', 1)[-1]}", file=context.stderr)
        return 2
    if arguments.dry_run:
        return _backfill_dry_run(arguments, problem, context)
    patch = {"metadata": {"annotations": {ANNOTATION_BACKFILL: json.dumps(request)}}}
    done = _on_schedule(arguments, context, lambda api, path: api.patch(path, patch))
    if done is None:
        return 1
    meta = done["metadata"]
    what = (
        "cancel asked"
        if arguments.cancel
        else f"backfill of [{arguments.start}, {arguments.end}) asked"
    )
    print(
        f"cronschedule {meta['namespace']}/{meta['name']}: {what} (request {request['request']});"
        " follow it with `punctual history`",
        file=context.stdout,
    )
    return 0


def _backfill_dry_run(arguments: argparse.Namespace, request: Any, context: _Context) -> int:
    """List the ticks of the range and which already have their Job; write nothing."""
    from datetime import timedelta

    from punctual.core.backfilling import MAX_BACKFILL_TICKS
    from punctual.core.keys import LABEL_SCHEDULE_UID
    from punctual.core.models import CronScheduleSpec
    from punctual.core.naming import job_name
    from punctual.core.planning import tick_source
    from punctual.core.times import format_time

    async def read(api: KubeClient, path: str) -> dict[str, Any]:
        body = await api.get(path)
        namespace = body["metadata"]["namespace"]
        jobs = await api.get(
            f"/apis/batch/v1/namespaces/{namespace}/jobs",
            labelSelector=f"{LABEL_SCHEDULE_UID}={body['metadata']['uid']}",
        )
        return {"schedule": body, "jobs": jobs.get("items") or []}

    found = _on_schedule(arguments, context, read)
    if found is None:
        return 1
    body = found["schedule"]
    existing = {j["metadata"]["name"] for j in found["jobs"]}
    recorded = {
        f.get("job") for f in (body.get("status") or {}).get("recentFirings") or [] if f.get("job")
    }
    try:
        source = tick_source(
            CronScheduleSpec.model_validate(body.get("spec") or {}), uid=body["metadata"]["uid"]
        )
    except ValueError as error:
        print(f"punctual: the schedule cannot be read: {error}", file=context.stderr)
        return 1
    cursor = request.start - timedelta(microseconds=1)
    run = done = 0
    for _ in range(MAX_BACKFILL_TICKS):
        tick = source.next_tick(cursor)
        if tick is None or tick >= request.to:
            break
        cursor = tick
        name = job_name(body["metadata"]["name"], tick)
        already = name in existing or name in recorded
        done += already
        run += not already
        state = "already done" if already else "would run"
        print(f"{format_time(tick)}  {name}  {state}", file=context.stdout)
    print(f"\n{run} ticks would run, {done} already done (dry run: nothing changed)",
          file=context.stdout)  # fmt: skip
    return 0
