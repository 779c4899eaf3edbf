"""The cluster subcommands of `punctual`: `trigger`, `history`, `resume`, `backfill`, and
reading a schedule for `describe` (`run` is `cli.running`).

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
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import replace
from typing import TYPE_CHECKING, Any, Protocol, TextIO

if TYPE_CHECKING:
    from punctual.kube.client import KubeClient


class Context(Protocol):
    """Where a command writes (cli.main.Context)."""

    stdout: TextIO
    stderr: TextIO


def _env(name: str) -> str | None:
    return os.environ.get(name) or None


def add_trigger_command(subparsers: Any) -> None:
    from punctual.core.triggers import (
        MAX_ENV_OVERRIDES,
        MAX_ENV_VALUE,
        MAX_TRIGGER_REASON,
        OVERRIDABLE,
    )

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
    parser.add_argument(
        "--env",
        metavar="KEY=VALUE",
        action="append",
        default=[],
        help=f"set (or replace) this variable in every container of this one run (repeatable, "
        f"at most {MAX_ENV_OVERRIDES}, values at most {MAX_ENV_VALUE} bytes); recorded with the "
        "firing and on the Job",
    )
    _add_asking_arguments(parser)
    parser.set_defaults(handler=_trigger)


def _trigger(arguments: argparse.Namespace, context: Context) -> int:
    from punctual.core.keys import ANNOTATION_TRIGGER, ANNOTATION_TRIGGERED_BY
    from punctual.core.triggers import (
        MAX_TRIGGER_REASON,
        TriggerError,
        TriggerRequest,
        overlap_policy,
        parse_env,
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
        env = parse_env(arguments.env)
    except TriggerError as error:  # argparse's choices catch a bad --overlap first
        print(f"punctual: {error}", file=context.stderr)
        return 2
    request = new_request_id()
    asked = TriggerRequest(request, None, reason, policy, env)

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
        # The name again, plain, where the triggers admission policy compares it with the
        # caller (crds/triggers.punctual.dev.yaml); a name it refuses is not written.
        named = {ANNOTATION_TRIGGERED_BY: asked.triggered_by} if asked.triggered_by else {}
        return await _ask(api, path, arguments, ANNOTATION_TRIGGER, asked.annotation(), named)

    done = _on_schedule(arguments, context, ask)
    if done is None:
        return 1
    meta = done["metadata"]
    who = "" if asked.triggered_by is None else f" by {asked.triggered_by}"
    print(
        f"cronschedule {meta['namespace']}/{meta['name']} triggered{who} (request {request})",
        file=context.stdout,
    )
    _say_taken(arguments, done, context)
    return 0


def _add_asking_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--no-wait",
        action="store_true",
        help="return once the request is written, without waiting for the operator to take it "
        "(a request is still never written over one the operator has not taken)",
    )
    parser.add_argument(
        "--timeout",
        type=float,
        default=30.0,
        metavar="SECONDS",
        help="how long to wait for an earlier request to be taken, and then for this one "
        "(default 30)",
    )


async def _ask(
    api: KubeClient,
    path: str,
    arguments: argparse.Namespace,
    annotation: str,
    value: str,
    also: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """Write a request by annotation (`kube.asking`): never over one not yet taken, and
    followed until taken unless --no-wait. The schedule as last read, with
    `_taken` set to whether status shows the request taken."""
    from punctual.clocks import EventLoopSleeper, monotonic
    from punctual.kube.asking import ask

    asked = await ask(
        api,
        path,
        annotation,
        value,
        also=also,
        follow=not arguments.no_wait,
        timeout=arguments.timeout,
        sleeper=EventLoopSleeper(),
        monotonic=monotonic,
    )
    return {**asked.body, _TAKEN: asked.taken}


_TAKEN = "_taken"  # set on the body `_ask` returns: not a field of any object


def _say_taken(arguments: argparse.Namespace, done: Mapping[str, Any], context: Context) -> None:
    """After a request's line: whether the operator took it, when the CLI waited."""
    if arguments.no_wait:
        return
    if done.get(_TAKEN):
        print("taken by the operator", file=context.stdout)
    else:
        print(
            f"punctual: written, but the operator has not taken it within {arguments.timeout:g} s "
            "(is it running?); it stays asked",
            file=context.stderr,
        )


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
    context: Context,
    action: Callable[[KubeClient, str], Awaitable[dict[str, Any]]],
) -> dict[str, Any] | None:
    """Run `action(api, path)` on the CronSchedule NAME; None (said why) if it failed."""
    from punctual.kube.applying import schedule_path
    from punctual.kube.asking import NotAsked
    from punctual.kube.client import ApiError, KubeClient, NotFound
    from punctual.kube.credentials import load_credentials

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
    except NotAsked as error:
        print(f"punctual: not asked: {error}", file=context.stderr)
    except ApiError as error:
        print(f"punctual: {error}", file=context.stderr)
    return None


def fetch_schedule(
    name: str, namespace: str | None, kubeconfig: str | None, context: Context
) -> dict[str, Any] | None:
    """The live CronSchedule NAME (for `punctual next NAME`); None (said why) if unreadable."""
    arguments = argparse.Namespace(
        name=name, namespace=namespace, kubeconfig=kubeconfig or _env("KUBECONFIG")
    )
    return _on_schedule(arguments, context, lambda api, path: api.get(path))


def fetch_with_downstreams(
    name: str, namespace: str | None, kubeconfig: str | None, context: Context
) -> tuple[dict[str, Any], list[str] | None] | None:
    """The live CronSchedule NAME and the CronSchedules of its namespace whose spec.after
    names it (for `punctual describe NAME`; None when they could not be listed), read
    with one client (one login, as for every command); None (said why) if NAME is
    unreadable."""
    from punctual.core.chaining import after_names

    arguments = argparse.Namespace(
        name=name, namespace=namespace, kubeconfig=kubeconfig or _env("KUBECONFIG")
    )

    async def read(api: KubeClient, path: str) -> dict[str, Any]:
        from punctual.kube.client import ApiError

        body = await api.get(path)
        try:
            listed: dict[str, Any] | None = await api.get(path.rsplit("/", 1)[0])
        except ApiError:
            listed = None
        return {"schedule": body, "listed": listed}

    found = _on_schedule(arguments, context, read)
    if found is None:
        return None
    listed = found["listed"]
    downstreams = (
        None
        if listed is None
        else sorted(
            str(item["metadata"]["name"])
            for item in listed.get("items") or []
            if name in after_names(item)
        )
    )
    return found["schedule"], downstreams


def add_history_command(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "history",
        help="show a schedule's recent firings",
        description="Show the recent firings of CronSchedule NAME, newest first: each tick, "
        "its Job, what became of it and why, the leader epoch that decided it, and for a "
        "manual trigger who asked and why.",
    )
    _add_schedule_arguments(parser)
    parser.add_argument(
        "--failed",
        action="store_true",
        help="only the ticks that failed for good: dead after their last spec.retry attempt, "
        "or Failed without spec.retry",
    )
    parser.set_defaults(handler=_history)


def _history(arguments: argparse.Namespace, context: Context) -> int:
    from punctual.cli.describing import firings_table, kind_of

    body = _on_schedule(arguments, context, lambda api, path: api.get(path))
    if body is None:
        return 1
    status = body.get("status") or {}
    kind = kind_of(body.get("spec") or {})
    firings = status.get("recentFirings") or []
    if arguments.failed:
        retried = bool((body.get("spec") or {}).get("retry"))
        firings = [
            f
            for f in firings
            if isinstance(f, dict) and (f.get("dead") if retried else f.get("outcome") == "Failed")
        ]
    for row in firings_table(firings, kind=kind):
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
    _add_asking_arguments(parser)
    parser.set_defaults(handler=_resume)


def _resume(arguments: argparse.Namespace, context: Context) -> int:
    from punctual.core.keys import ANNOTATION_RESUME

    request = new_request_id()
    paused: list[Any] = []

    async def resume(api: KubeClient, path: str) -> dict[str, Any]:
        before = await api.get(path)
        paused.extend(
            c
            for c in (before.get("status") or {}).get("conditions") or []
            if c.get("type") == "Paused" and c.get("status") == "True"
        )
        return await _ask(api, path, arguments, ANNOTATION_RESUME, request)

    done = _on_schedule(arguments, context, resume)
    if done is None:
        return 1
    meta = done["metadata"]
    state = "was paused; resuming" if paused else "was not paused; nothing to resume"
    print(
        f"cronschedule {meta['namespace']}/{meta['name']} {state} (request {request})",
        file=context.stdout,
    )
    _say_taken(arguments, done, context)
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
    parser.add_argument(
        "--failed",
        action="store_true",
        help="instead: run again each tick of the range that failed for good (its newest "
        "attempt Failed, as status.recentFirings records it), once, as its next attempt "
        "(`punctual history --failed` lists them)",
    )
    _add_asking_arguments(parser)
    parser.set_defaults(handler=_backfill)


def _backfill(arguments: argparse.Namespace, context: Context) -> int:
    import json

    from punctual.core.backfilling import read_request
    from punctual.core.keys import ANNOTATION_BACKFILL

    request: dict[str, Any] = {"request": new_request_id()}
    if arguments.failed:
        return _rerun_failed(arguments, request, context)
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
    value = json.dumps(request)
    done = _on_schedule(
        arguments, context, lambda api, path: _ask(api, path, arguments, ANNOTATION_BACKFILL, value)
    )
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
    _say_taken(arguments, done, context)
    return 0


def _rerun_failed(arguments: argparse.Namespace, request: dict[str, Any], context: Context) -> int:
    """`backfill --failed`: the punctual.dev/rerun-failed annotation (core.retrying)."""
    import json

    from punctual.core.keys import ANNOTATION_RERUN_FAILED
    from punctual.core.times import maybe_time

    if arguments.cancel or arguments.dry_run:
        print("punctual: --failed takes neither --cancel nor --dry-run", file=context.stderr)
        return 2
    for flag, value in (("--from", arguments.start), ("--to", arguments.end)):
        try:
            if not value or maybe_time(value) is None:
                raise ValueError
        except ValueError:
            print(f"punctual: --failed needs {flag} as an RFC 3339 time", file=context.stderr)
            return 2
    request.update({"from": arguments.start, "to": arguments.end})
    written = json.dumps(request)
    done = _on_schedule(
        arguments,
        context,
        lambda api, path: _ask(api, path, arguments, ANNOTATION_RERUN_FAILED, written),
    )
    if done is None:
        return 1
    meta = done["metadata"]
    print(
        f"cronschedule {meta['namespace']}/{meta['name']}: the failed ticks of "
        f"[{arguments.start}, {arguments.end}) run again (request {request['request']}); "
        "follow it with `punctual history`",
        file=context.stdout,
    )
    _say_taken(arguments, done, context)
    return 0


def _backfill_dry_run(arguments: argparse.Namespace, request: Any, context: Context) -> int:
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
        jobs = await api.get(
            await _collection_of(api, body),
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


async def _collection_of(api: KubeClient, body: Mapping[str, Any]) -> str:
    """Where a schedule's Jobs are: batch/v1 jobs, or its workloadTemplate's kind's
    collection (found by discovery, as the operator does)."""
    from punctual.kube.client import ApiError

    namespace = body["metadata"]["namespace"]
    template = (body.get("spec") or {}).get("workloadTemplate")
    if not isinstance(template, Mapping):
        return f"/apis/batch/v1/namespaces/{namespace}/jobs"
    api_version, kind = str(template.get("apiVersion", "")), str(template.get("kind", ""))
    group_version = f"/apis/{api_version}" if "/" in api_version else f"/api/{api_version}"
    for resource in (await api.get(group_version)).get("resources") or []:
        if resource.get("kind") == kind and "/" not in str(resource.get("name", "")):
            return f"{group_version}/namespaces/{namespace}/{resource['name']}"
    raise ApiError(404, "NotFound", f"the API server does not serve {kind} ({api_version})")
