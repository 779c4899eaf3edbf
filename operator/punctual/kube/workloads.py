"""The kinds of --workload-kinds, found by discovery and followed into the Job index.

Why it exists: an installation may create the kinds its operator was given (`punctual
run --workload-kinds`, the chart's `workloadKinds`), once the API server serves them.
Discovery (`GET /apis/GROUP/VERSION`) tells whether it does and the kind's name
(`Workflow` for `workflows`); a kind it serves is then listed and watched into the same
index as the Jobs (kube.jobwatching), and its schedules are decided once that list is
in. A kind the API server does not serve yet (its CustomResourceDefinition not
installed, or cluster-scoped) is asked again every `REDISCOVER`: when it appears, its
schedules are woken and fire, without a restart. `served()` is what decisions read
(core.workloads.Served).

A discovery error other than 404 (the API server down, an aggregated API failing) says
nothing: the kind's schedules wait, as if it were being listed, rather than be called
invalid.

What it must never do: write, or decide; or let a kind's schedules be decided before
its objects are all in the index.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
from collections.abc import Callable, Sequence

from punctual.clocks import first_of
from punctual.core.workloads import Served, WorkloadKind
from punctual.kube.client import Api, ApiError, NotFound
from punctual.kube.jobwatching import JobIndex

logger = logging.getLogger(__name__)

REDISCOVER = 10.0  # seconds between asks for a kind the API server does not serve yet


class Workloads:
    """Discovery of the asked kinds, and a follower for each one found."""

    def __init__(
        self,
        api: Api,
        asked: Sequence[WorkloadKind],
        jobs: JobIndex,
        *,
        on_served: Callable[[WorkloadKind], None] = lambda kind: None,
    ) -> None:
        self.api = api
        self.asked = tuple(asked)
        self.jobs = jobs
        self.on_served = on_served  # a kind's objects are all listed: wake its schedules
        self.found: dict[str, WorkloadKind] = {}
        self.missing: set[str] = set()  # discovery said 404 or did not list the resource
        self.listed: set[str] = set()
        self.discovered = asyncio.Event()  # every asked kind asked once (readiness)
        self._first: set[str] = set()  # kinds found by the first round: readiness waits
        self._tasks: list[asyncio.Task[None]] = []
        self.current = self._served()

    def served(self) -> Served:
        return self.current

    def _served(self) -> Served:
        waiting = {k.name for k in self.asked if k.name not in self.listed}
        return Served(
            asked=self.asked,
            found=tuple(self.found.values()),
            unsynced=frozenset(waiting - self.missing),
        )

    def unready(self) -> str | None:
        """What readiness still waits for: the first round of discovery, and the lists
        of the kinds it found."""
        if not self.discovered.is_set():
            return "discovering the workload kinds"
        pending = sorted(self._first - self.listed)
        return f"listing {', '.join(pending)}" if pending else None

    async def run(self, stop: asyncio.Event) -> None:
        """Discover until every asked kind is found; follow each found kind until `stop`."""
        try:
            while not stop.is_set():
                for kind in self.asked:
                    if kind.name not in self.found:
                        await self._discover(kind, stop)
                if not self.discovered.is_set():
                    self._first = set(self.found)
                    self.discovered.set()
                if len(self.found) == len(self.asked):
                    await stop.wait()
                    break
                await first_of(stop, timeout=REDISCOVER)
        finally:
            for task in self._tasks:
                task.cancel()
            await asyncio.gather(*self._tasks, return_exceptions=True)

    async def _discover(self, kind: WorkloadKind, stop: asyncio.Event) -> None:
        root = f"/apis/{kind.group}/{kind.version}" if kind.group else f"/api/{kind.version}"
        try:
            body = await self.api.get(root)
        except NotFound:
            self._missing(kind)
            return
        except ApiError as error:
            logger.warning("discovering %s: %s (its schedules wait)", kind.name, error)
            return
        for resource in body.get("resources") or []:
            if resource.get("name") == kind.resource and not resource.get("namespaced", True):
                logger.warning(
                    "%s is cluster-scoped: a schedule creates its runs in its own namespace, "
                    "so its schedules are InvalidSpec",
                    kind.name,
                )
                break
            if resource.get("name") == kind.resource:
                found = dataclasses.replace(kind, kind=str(resource.get("kind") or ""))
                self.found[kind.name] = found
                self.missing.discard(kind.name)
                self.current = self._served()
                logger.info("following %s (kind %s)", kind.name, found.kind)
                self._tasks.append(asyncio.create_task(self._follow(found, stop)))
                return
        self._missing(kind)

    def _missing(self, kind: WorkloadKind) -> None:
        if kind.name not in self.missing:
            logger.warning(
                "the API server does not serve %s: its schedules are InvalidSpec until it does",
                kind.name,
            )
        self.missing.add(kind.name)
        self.current = self._served()

    async def _follow(self, kind: WorkloadKind, stop: asyncio.Event) -> None:
        follower = self.jobs.follow(kind)
        following = asyncio.create_task(follower.run(stop))
        await follower.ready.wait()
        self.listed.add(kind.name)
        self.current = self._served()
        self.on_served(kind)
        await following
