"""Punctual's Jobs, listed and watched by Punctual's own client: an index without kopf.

Why it exists: every firing makes a Job, and every Job changes several times (created,
its pod started, finished, its finalizer released, deleted); every replica sees every
change. Through kopf each such event cost a per-object worker task, its cause
detection, and the invocation of an index handler and an event handler: in the
profile of a 1 000 herd kopf was 30% of the operator's CPU while firing, most of it
for Jobs, and with shards that cost is paid by every replica for every Job (measured:
about 0.4 ms per Job per replica). Here a watch event is one JSON line, one
`JobSnapshot` and one dict update. Schedules are followed the same way
(kube.schedulewatching).

What it keeps: `{schedule uid: {job uid: JobSnapshot}}` for the Jobs labelled with a
schedule uid, followed by kube.following (a list, then a watch; a relist after 410 Gone
reports exactly the differences). `ready` is set once the first list of every
namespace is in. The objects of workloadTemplates, of the other kinds an installation
serves, join the same index through a follower each (`follow`, called by
kube.workloads); their state is their kind's completion profile's verdict, or the
schedule's own rules' (spec.completion), judged as they are indexed and again when the
schedule's rules change (`rejudge`), from the body kept for that.

What it must never do: write, decide, or report a Job change it has not seen (a relist
reports exactly the differences).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from typing import Any

from punctual.core.completion import CompletionError, Rules, compile_rules, judge
from punctual.core.jobs import JobSnapshot, owned_by
from punctual.core.keys import LABEL_SCHEDULE_UID
from punctual.core.workloads import JOB, WorkloadKind
from punctual.kube.client import Api
from punctual.kube.following import Follower, without_managed_fields

Key = tuple[str, str]  # (namespace, schedule name)
OnJob = Callable[[Key, str, JobSnapshot | None], None]
RulesOf = Callable[[str], Rules | None]  # a schedule uid's spec.completion, compiled


class JobsByScheduleUid(Mapping[str, list[JobSnapshot]]):
    """The index as decisions read it: a schedule uid's Jobs, as a list."""

    def __init__(self, jobs: dict[str, dict[str, JobSnapshot]]) -> None:
        self._jobs = jobs

    def __getitem__(self, uid: str) -> list[JobSnapshot]:
        return list(self._jobs[uid].values())

    def __iter__(self) -> Iterator[str]:
        return iter(list(self._jobs))

    def __len__(self) -> int:
        return len(self._jobs)


class JobIndex:
    def __init__(
        self,
        api: Api,
        namespaces: list[str],
        on_job: OnJob,
        rules_of: RulesOf = lambda uid: None,
    ) -> None:
        self.api = api
        self.namespaces = namespaces
        self.on_job = on_job
        self.rules_of = rules_of
        self._jobs: dict[str, dict[str, JobSnapshot]] = {}
        self._where: dict[str, str] = {}  # job uid -> its schedule uid
        self._bodies: dict[str, dict[str, Any]] = {}  # another kind's object uid -> body
        # Jobs listed early for a few schedules (runtime.early): uid -> resourceVersion.
        self._early: dict[str, int] = {}
        self._complete: set[str | None] = set()  # namespaces (None: all) whose list is in
        self.index = JobsByScheduleUid(self._jobs)
        self.follower = Follower(
            api, self.path, self, namespaces=namespaces, what="Jobs", selector=LABEL_SCHEDULE_UID
        )
        self.ready = self.follower.ready
        self.run = self.follower.run

    @property
    def events(self) -> int:
        """Watch events handled, for tests and the benchmark."""
        return self.follower.events

    @staticmethod
    def path(namespace: str | None) -> str:
        return f"/apis/batch/v1/namespaces/{namespace}/jobs" if namespace else "/apis/batch/v1/jobs"

    def follow(self, kind: WorkloadKind) -> Follower:
        """A follower of another kind's objects into this index (kube.workloads runs it)."""
        return Follower(
            self.api,
            kind.path,
            _KindCollection(self, kind),
            namespaces=self.namespaces,
            what=kind.name,
            selector=LABEL_SCHEDULE_UID,
        )

    def rejudge(self, schedule_uid: str) -> None:
        """Judge a schedule's objects of other kinds again (its spec.completion changed)."""
        for uid, job in list(self._jobs.get(schedule_uid, {}).items()):
            body = self._bodies.get(uid)
            if body is not None:
                self.put(body, job.kind)

    # -- kube.following.Collection ----------------------------------------------------

    def put_early(self, namespace: str, schedule_uid: str, items: list[dict[str, Any]]) -> None:
        """A schedule's Jobs, listed while the namespace's complete list is not in
        (runtime.early): they replace what the index held of that schedule's Jobs. Once
        that list is in, its watch keeps them, and this does nothing. The complete list,
        begun earlier, may lack one: it is kept then."""
        if None in self._complete or namespace in self._complete:
            return
        listed = {self.put(item) for item in items}
        for item in items:
            self._early[str(item["metadata"]["uid"])] = _version(item)
        for uid, job in list(self._jobs.get(schedule_uid, {}).items()):
            if uid not in listed and job.kind.is_job:
                self.drop(uid)

    def listed(self, namespace: str | None, uids: set[str], kind: WorkloadKind = JOB) -> None:
        """Drop the namespace's Jobs (of `kind`) the list no longer has, but for the ones
        listed early after this list was read (its watch will tell of them)."""
        version = _version({"metadata": {"resourceVersion": self.follower.list_version}})
        if kind.is_job:
            self._complete.add(namespace)
        for uid in [u for u in self._where if u not in uids]:
            job = self._jobs.get(self._where[uid], {}).get(uid)
            if job is None or job.kind != kind:
                continue
            if kind.is_job and self._early.get(uid, -1) > version:
                continue
            if namespace is None or job.namespace == namespace:
                self.drop(uid)

    def changed(self, obj: dict[str, Any]) -> None:
        self.put(obj)

    def deleted(self, obj: dict[str, Any]) -> None:
        self.drop(str(obj["metadata"]["uid"]))

    def put(self, body: Mapping[str, Any], kind: WorkloadKind = JOB) -> str:
        """Index a Job (or another kind's object, judged by its profile or the schedule's
        rules); tell whether it changed. Its uid."""
        if kind.is_job:
            job = JobSnapshot.from_body(body)
        else:
            schedule_uid = str(
                ((body.get("metadata") or {}).get("labels") or {}).get(LABEL_SCHEDULE_UID, "")
            )
            if not owned_by(body, schedule_uid):
                # Labelled as ours by a controller that copies its parent's labels (Tekton's
                # TaskRuns, KubeRay's RayCluster): not a firing of the schedule.
                return str((body.get("metadata") or {}).get("uid", ""))
            verdict = judge(
                body, group=kind.group, kind=kind.kind, rules=self.rules_of(schedule_uid)
            )
            job = JobSnapshot.from_body(
                body, kind, (verdict.state, verdict.finished_at, verdict.error)
            )
            if job.schedule_uid:
                self._bodies[job.uid] = without_managed_fields(body)
        if not job.schedule_uid:
            return job.uid
        self._where[job.uid] = job.schedule_uid
        jobs = self._jobs.setdefault(job.schedule_uid, {})
        if jobs.get(job.uid) != job:
            jobs[job.uid] = job
        self._tell(job, job)
        return job.uid

    def drop(self, uid: str) -> None:
        self._bodies.pop(uid, None)
        self._early.pop(uid, None)
        schedule_uid = self._where.pop(uid, None)
        if schedule_uid is None:
            return
        jobs = self._jobs.get(schedule_uid, {})
        job = jobs.pop(uid, None)
        if not jobs:
            self._jobs.pop(schedule_uid, None)
        if job is not None:
            self._tell(job, None)

    def _tell(self, job: JobSnapshot, now: JobSnapshot | None) -> None:
        if job.schedule:
            self.on_job((job.namespace, job.schedule), job.uid, now)


def _version(body: Mapping[str, Any]) -> int:
    """resourceVersions are opaque, but from etcd they are increasing integers."""
    try:
        return int((body.get("metadata") or {}).get("resourceVersion", "-1"))
    except (TypeError, ValueError):
        return -1


class CompletionRules:
    """Each schedule's spec.completion, compiled, by uid: what the index judges by."""

    def __init__(self) -> None:
        self._rules: dict[str, Rules] = {}
        self._uids: dict[Key, str] = {}

    def get(self, uid: str) -> Rules | None:
        return self._rules.get(uid)

    def observe(self, key: Key, body: Mapping[str, Any] | None) -> str | None:
        """Follow a schedule's change; the uid whose rules changed, if they did. A rule
        that does not compile is none here (the schedule's InvalidSpec says why). Only
        schedules with rules are kept."""
        if body is None:
            gone = self._uids.pop(key, None)
            if gone is not None:
                self._rules.pop(gone, None)
            return gone
        uid = str(body["metadata"]["uid"])
        rules = _compiled((body.get("spec") or {}).get("completion"))
        before = self._rules.get(uid)
        if rules is None:
            self._rules.pop(uid, None)
            self._uids.pop(key, None)
        else:
            self._rules[uid] = rules
            self._uids[key] = uid
        return uid if rules != before else None


def _compiled(completion: Any) -> Rules | None:
    if not isinstance(completion, Mapping):
        return None
    try:
        return compile_rules(completion.get("succeeded"), completion.get("failed"))
    except (CompletionError, TypeError):
        return None


class _KindCollection:
    """The index as one other kind's follower sees it: its objects carry that kind."""

    def __init__(self, index: JobIndex, kind: WorkloadKind) -> None:
        self.index = index
        self.kind = kind

    def listed(self, namespace: str | None, uids: set[str]) -> None:
        self.index.listed(namespace, uids, self.kind)

    def changed(self, obj: dict[str, Any]) -> None:
        self.index.put(obj, self.kind)

    def deleted(self, obj: dict[str, Any]) -> None:
        self.index.drop(str(obj["metadata"]["uid"]))
