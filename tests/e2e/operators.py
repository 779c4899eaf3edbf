"""Real `punctual run` processes for e2e tests, and the audit log as the oracle.

Operators run as separate OS processes (not in the test's event loop) so tests can
kill -9 them, SIGSTOP and SIGCONT them, and SIGTERM them as Kubernetes would. Each
test watches only its own namespace and uses its own Lease there, so tests never
see each other's schedules. The process itself (start, signals, /metrics) is
e2e/operatorprocess.py's OperatorProcess, which the bench uses too; this module adds what
a test needs around it.

The oracle for "exactly one create per (schedule, tick)" is the API server's audit
log: every create request for a Job, with its response code, the user agent (which
names the replica) and the microsecond time the server received it.
"""

from __future__ import annotations

import contextlib
import os
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from operatorprocess import OperatorProcess

from .conftest import REPO, Cluster

FAST_LEASE = ("--lease-duration", "6", "--renew-deadline", "4", "--retry-period", "1")


@dataclass
class Operators:
    """Starts operators for one test and makes sure none outlives it."""

    cluster: Cluster
    namespace: str
    workdir: Path
    started: list[OperatorProcess] = field(default_factory=list)

    def start(
        self,
        identity: str,
        *extra: str,
        lease: tuple[str, ...] = FAST_LEASE,
        env: dict[str, str] | None = None,
        uid: int | None = None,
        wrapper: tuple[str, ...] = (),
    ) -> OperatorProcess:
        """Start `punctual run` for this test's namespace.

        `env` adds to (or, with an empty value, removes from) the environment. `uid`
        runs the process as that numeric user and group with no supplementary groups,
        as a container runtime does; it keeps only CAP_DAC_READ_SEARCH so that the
        interpreter and kubeconfig under root-only directories stay readable. `wrapper`
        runs before that (for example `ip netns exec NS`, to start it in a network
        namespace).
        """
        environ = {**os.environ, "KUBECONFIG": str(self.cluster.kubeconfig)}
        environ["PYTHONUNBUFFERED"] = "1"
        environ["PYTHONMALLOC"] = "malloc"  # as the image runs it (operator/Dockerfile)
        for name, value in (env or {}).items():
            if value:
                environ[name] = value
            else:
                environ.pop(name, None)
        as_user: list[str] = []
        if uid is not None:
            caps = ["--inh-caps", "+dac_read_search", "--ambient-caps", "+dac_read_search"]
            as_user = ["setpriv", f"--reuid={uid}", f"--regid={uid}", "--clear-groups", *caps]
        op = OperatorProcess.start(
            identity,
            self.namespace,
            *lease,
            *extra,
            log=self.workdir / f"operator-{identity}.log",
            env=environ,
            cwd=REPO,
            wrapper=[*wrapper, *as_user],
        )
        self.started.append(op)
        return op

    def close(self) -> None:
        for op in self.started:
            op.kill()


@contextlib.contextmanager
def operators(cluster: Cluster, namespace: str, workdir: Path) -> Iterator[Operators]:
    ops = Operators(cluster, namespace, workdir)
    try:
        yield ops
    finally:
        ops.close()
        for op in ops.started:  # leave the logs where a failing test's report shows them
            sys.stderr.write(f"--- {op.identity} (last lines) ---\n")
            sys.stderr.write("\n".join(op.output().splitlines()[-40:]) + "\n")


@dataclass(frozen=True)
class Create:
    """One Job create request seen by the API server."""

    name: str
    code: int
    user_agent: str
    at: datetime


def job_creates(cluster: Cluster, namespace: str, resource: str = "jobs") -> list[Create]:
    """Every Job (or other `resource`) create in `namespace` so far, oldest first, from
    the audit log."""
    creates = []
    for event in cluster.audit_events():
        ref = event.get("objectRef") or {}
        if event.get("verb") != "create" or ref.get("resource") != resource:
            continue
        if ref.get("namespace") != namespace or ref.get("subresource"):
            continue
        creates.append(
            Create(
                name=ref.get("name", ""),
                code=int((event.get("responseStatus") or {}).get("code", 0)),
                user_agent=event.get("userAgent", ""),
                at=parse(event["requestReceivedTimestamp"]),
            )
        )
    return sorted(creates, key=lambda c: c.at)


def existed(cluster: Cluster, namespace: str, prefix: str) -> set[str]:
    """The Jobs named `prefix-…` that the audit log proves existed: created (201), refused
    as already there (409), or written to successfully later (the finalizer's update, the
    history limit's delete).

    A create whose client is killed mid-request can be committed while the API server
    records it as failed (the request's context ends with the connection): at least once
    is about the Job existing, at most once about 201s (no name is created twice). Such a
    Job that nobody wrote to since is proven by being there still (`present`).
    """
    prefixes = (prefix + "-",)
    proven = set(later_writes(cluster, namespace, prefixes, creates=True))
    return proven | present(cluster, namespace, prefixes)


def present(cluster: Cluster, namespace: str, prefixes: tuple[str, ...]) -> set[str]:
    """The Jobs named with one of `prefixes` that exist now."""
    out = cluster.kubectl(
        "get", "jobs", "-n", namespace, "-o", "jsonpath={.items[*].metadata.name}", check=False
    )
    return {name for name in out.stdout.split() if name.startswith(prefixes)}


def later_writes(
    cluster: Cluster, namespace: str, prefixes: tuple[str, ...], *, creates: bool = False
) -> dict[str, list[datetime]]:
    """When each Job named with one of `prefixes` was written to successfully by anyone
    other than a create (the finalizer freed, a delete, the Job controller's status), or
    refused a create as already there (409): each proves that the Job existed then.
    With `creates`, its creates answered 2xx too (for "it existed" at any time)."""
    seen: dict[str, list[datetime]] = {}
    for event in cluster.audit_events():
        ref = event.get("objectRef") or {}
        name = ref.get("name", "")
        if ref.get("resource") != "jobs" or ref.get("namespace") != namespace:
            continue
        if not name.startswith(prefixes):
            continue
        code = int((event.get("responseStatus") or {}).get("code", 0))
        create = event.get("verb") == "create"
        if ((creates or not create) and 200 <= code < 300) or (create and code == 409):
            seen.setdefault(name, []).append(parse(event["requestReceivedTimestamp"]))
    return seen


def explain_gaps(
    cluster: Cluster, namespace: str, schedule: str, gaps: list[tuple[datetime, datetime]]
) -> str:
    """What the audit log holds about lost ticks: every write naming a missing tick's Job,
    and every write to the schedule from a second before the gap to a second after."""
    lines = []
    for first, last in gaps:
        missing = {
            f"{schedule}-{int((first + timedelta(seconds=k)).timestamp())}"
            for k in range(1, int((last - first).total_seconds()))
        }
        for event in cluster.audit_events():
            ref = event.get("objectRef") or {}
            at = parse(event["requestReceivedTimestamp"])
            near = first - timedelta(seconds=1) <= at <= last + timedelta(seconds=1)
            if ref.get("namespace") != namespace:
                continue
            if ref.get("name") in missing or (near and ref.get("name") == schedule):
                code = (event.get("responseStatus") or {}).get("code", 0)
                lines.append(
                    f"{at.isoformat()} {event.get('userAgent', '')} {event.get('verb')} "
                    f"{ref.get('resource')}/{ref.get('subresource', '')}{ref.get('name')} "
                    f"-> {code} {event.get('stage')}"
                )
    return "\n".join(lines) or "the audit log names none of the lost ticks' Jobs"


def writes_by(
    cluster: Cluster, namespace: str, user_agent: str, since: datetime
) -> list[dict[str, Any]]:
    """Every write that a replica (by user agent) sent to `namespace` after `since`."""
    return [
        e
        for e in cluster.audit_events()
        if e.get("userAgent") == user_agent
        and (e.get("objectRef") or {}).get("namespace") == namespace
        and parse(e["requestReceivedTimestamp"]) > since
    ]


def parse(value: str) -> datetime:
    return datetime.fromisoformat(value.replace("Z", "+00:00")).astimezone(UTC)


def tick_of(job_name: str) -> datetime:
    return datetime.fromtimestamp(int(job_name.rsplit("-", 1)[1]), UTC)


def now() -> datetime:
    return datetime.now(UTC)


def wait_until(
    predicate: Any, timeout: float, interval: float = 0.25, what: str = "condition"
) -> Any:
    end = time.monotonic() + timeout
    while True:
        result = predicate()
        if result:
            return result
        if time.monotonic() > end:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        time.sleep(interval)
