"""`punctual run`: the operator's command line, every flag with its environment variable.

Why it exists: the Helm chart configures the operator through environment variables,
not a templated command line, so each flag reads its variable as its default; the
options are checked here and a mistake is one line and exit status 2 before anything
starts. The process itself is `punctual.runtime.process`, imported only when `run`
runs (the schedule-math commands never load kopf or aiohttp).

What it must never do: print a traceback for a user's mistake, or start the process on
options it found wrong.
"""

from __future__ import annotations

import argparse
import asyncio
import os
from typing import TYPE_CHECKING, Any

from punctual.cli.cluster import Context

if TYPE_CHECKING:
    from punctual.runtime.options import Options


def _env(name: str) -> str | None:
    return os.environ.get(name) or None


def _env_or(name: str, default: str) -> str:
    return os.environ.get(name) or default


# Over 60 lines on purpose: one declaration per flag, read as a table (--help renders it).
def add_run_command(subparsers: Any) -> None:
    # Long on purpose: one add() per flag of `punctual run`, its help beside it.
    from punctual.core.claiming import MAX_WINDOW, MIN_WINDOW
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
    parser.add_argument(
        "--workload-kinds",
        dest="workload_kinds",
        action="append",
        default=[k for k in (_env("PUNCTUAL_WORKLOAD_KINDS") or "").split(",") if k],
        metavar="RESOURCE.VERSION.GROUP[,...]",
        help="kinds a spec.workloadTemplate may create besides batch/v1 Jobs, in kubectl's "
        "form (workflows.v1alpha1.argoproj.io,pipelineruns.v1.tekton.dev; repeatable); "
        "the operator needs create/get/list/watch/delete/patch on them "
        "[PUNCTUAL_WORKLOAD_KINDS, comma-separated]",
    )
    parser.add_argument(
        "--verified-triggers",
        dest="verified_triggers",
        action="store_true",
        default=(_env("PUNCTUAL_VERIFIED_TRIGGERS") or "").lower() in ("1", "true", "yes"),
        help="the triggers admission policy (crds/triggers.punctual.dev.yaml) is bound for "
        "the watched namespaces: record a trigger's triggeredBy as verified when it names "
        "the caller the API server checked [PUNCTUAL_VERIFIED_TRIGGERS]",
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
        "--claim-window",
        "PUNCTUAL_CLAIM_WINDOW",
        f"seconds of scheduled ticks one status write claims ahead ({MIN_WINDOW:g}-"
        f"{MAX_WINDOW:g}); claimed again when half is used, so a schedule with several ticks "
        "in it fires them with one write; it never fires a tick early",
        type=float,
    )
    add(
        "--decide-ahead",
        "PUNCTUAL_DECIDE_AHEAD",
        f"seconds before a tick (0-{MAX_AHEAD:g}) its pass may decide, on what the watches "
        "hold then; its Job is still sent at the tick, never before: at a second many "
        "schedules share, only their creates are left for it",
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


def _run(arguments: argparse.Namespace, context: Context) -> int:
    from punctual.core.workloads import KindError, parse_kinds
    from punctual.runtime.options import Options
    from punctual.runtime.process import Fatal, run

    try:
        parse_kinds(arguments.workload_kinds)
    except KindError as error:
        print(f"punctual: {error}", file=context.stderr)
        return 2
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
        claim_window=arguments.claim_window,
        decide_ahead=arguments.decide_ahead,
        log_level=arguments.log_level,
        log_format=arguments.log_format,
        fence=arguments.fence or None,
        metrics_port=arguments.metrics_port or None,
        class_name=arguments.class_name or None,
        workload_kinds=list(arguments.workload_kinds),
        verified_triggers=arguments.verified_triggers,
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


# A pass decided further ahead acts on older news of its schedule and Jobs (a suspend
# sent that long before a tick may not stop it) and holds a worker while it waits.
MAX_AHEAD = 2.0

# Each shard costs every replica one Lease read (and its holder one write) per retry
# period, and one watch.
MAX_SHARDS = 256


def _problem_with(options: Options) -> str | None:
    """What is wrong with a set of run options, in one line, or None."""
    from punctual.core.claiming import MAX_WINDOW, MIN_WINDOW
    from punctual.kube.ratelimiting import RateLimiter

    if not options.status_delay >= 0:
        return f"--status-delay must be 0 or more, got {options.status_delay}"
    if not MIN_WINDOW <= options.claim_window <= MAX_WINDOW:
        return (
            f"--claim-window must be {MIN_WINDOW:g}-{MAX_WINDOW:g} seconds, "
            f"got {options.claim_window:g}"
        )
    if not 0 <= options.decide_ahead <= MAX_AHEAD:
        return f"--decide-ahead must be 0-{MAX_AHEAD:g} seconds, got {options.decide_ahead:g}"
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
