"""Workload kinds: parsing --workload-kinds, what an installation serves, the bodies a
workloadTemplate fires, and the shell that discovers, follows and writes other kinds.

The shell's parts run against the shared fake API server (tests/unit/fakeapi.py); what
the real one does with custom resources (discovery, finalizers, admission) is tested
against the real control plane with real CRDs in tests/e2e/test_workloads.py.
"""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime
from typing import Any

import pytest

from punctual.clocks import FixedClock
from punctual.core.deciding import IN_FLIGHT_RECHECK, decide
from punctual.core.decisions import Decision, JobToCreate
from punctual.core.jobs import JobState
from punctual.core.keys import FINALIZER, LABEL_SCHEDULE_UID
from punctual.core.records import JobToDelete
from punctual.core.workloads import JOB, KindError, Served, WorkloadKind, parse_kinds
from punctual.kube.applying import Applied, Applier
from punctual.kube.client import ApiError, NotFound
from punctual.kube.events import EventRecorder
from punctual.kube.jobwatching import CompletionRules, JobIndex
from punctual.kube.ratelimiting import RateLimiter
from punctual.kube.workloads import Workloads
from tests.unit.builders import LEADER, NAMESPACE, condition, events, schedule_body, spec_body
from tests.unit.fakeapi import FakeApi

WORKFLOWS = WorkloadKind("argoproj.io", "v1alpha1", "workflows", "Workflow")
JOBSETS = WorkloadKind("jobset.x-k8s.io", "v1alpha2", "jobsets", "JobSet")
RAYJOBS = WorkloadKind("ray.io", "v1", "rayjobs", "RayJob")
RUNS = WorkloadKind("tekton.dev", "v1", "pipelineruns", "PipelineRun")
SERVED = Served(
    asked=(WORKFLOWS, JOBSETS, RAYJOBS, RUNS), found=(WORKFLOWS, JOBSETS, RAYJOBS, RUNS)
)
T = datetime(2026, 11, 26, 12, 0, tzinfo=UTC)


def workload_spec(kind: WorkloadKind, spec: dict[str, Any], **more: Any) -> dict[str, Any]:
    body = spec_body(**more)
    body.pop("jobTemplate", None)
    body["workloadTemplate"] = {
        "apiVersion": kind.api_version,
        "kind": kind.kind,
        "metadata": {"labels": {"team": "data"}, "annotations": {"owner": "ana"}},
        "spec": spec,
    }
    return body


def due(spec: dict[str, Any], served: Served = SERVED) -> Decision:
    """The decision when the schedule (created a day ago, hourly) is first looked at:
    its latest tick is due (missedRunPolicy RunLatest)."""
    return decide(schedule_body(spec), [], now=T, leadership=LEADER, served=served)


# -- parsing and serving ----------------------------------------------------------------


def test_kinds_parse_in_kubectls_form_once_each() -> None:
    kinds = parse_kinds(
        [
            "workflows.v1alpha1.argoproj.io,pipelineruns.v1.tekton.dev",
            "workflows.v1alpha1.argoproj.io",
        ]
    )
    assert [k.name for k in kinds] == [
        "workflows.v1alpha1.argoproj.io",
        "pipelineruns.v1.tekton.dev",
    ]
    assert kinds[1].path("ns") == "/apis/tekton.dev/v1/namespaces/ns/pipelineruns"
    assert parse_kinds([]) == ()


@pytest.mark.parametrize(
    "bad", ["workflows", "Workflow.v1alpha1.argoproj.io", "workflows.alpha.argoproj.io"]
)
def test_a_malformed_kind_is_one_line_naming_it(bad: str) -> None:
    with pytest.raises(KindError, match=f"--workload-kinds: '{bad}' is not RESOURCE.VERSION.GROUP"):
        parse_kinds([bad])


def test_jobs_are_always_served_and_a_found_kind_resolves() -> None:
    assert Served().resolve(None) is JOB
    assert Served().resolve({"apiVersion": "batch/v1", "kind": "Job"}) == JOB
    assert SERVED.resolve({"apiVersion": "argoproj.io/v1alpha1", "kind": "Workflow"}) == WORKFLOWS


def test_a_kind_not_asked_or_not_served_names_the_field() -> None:
    asked_only = Served(asked=(WorkloadKind("argoproj.io", "v1alpha1", "workflows"),))
    missing = asked_only.resolve({"apiVersion": "argoproj.io/v1alpha1", "kind": "Workflow"})
    assert isinstance(missing, str)
    assert missing.startswith("spec.workloadTemplate.kind: Workflow (argoproj.io/v1alpha1)")
    assert "does not serve workflows.v1alpha1.argoproj.io" in missing
    other = SERVED.resolve({"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob"})
    assert isinstance(other, str)
    assert "is not a kind this installation creates" in other and "--workload-kinds" in other


def test_a_kind_being_listed_or_not_yet_discovered_waits() -> None:
    listing = Served(asked=(WORKFLOWS,), found=(WORKFLOWS,), unsynced=frozenset({WORKFLOWS.name}))
    kind = listing.resolve({"apiVersion": "argoproj.io/v1alpha1", "kind": "Workflow"})
    assert isinstance(kind, WorkloadKind) and listing.waits(kind)
    asking = Served(
        asked=(WorkloadKind("argoproj.io", "v1alpha1", "workflows"),),
        unsynced=frozenset({WORKFLOWS.name}),
    )
    kind = asking.resolve({"apiVersion": "argoproj.io/v1alpha1", "kind": "Workflow"})
    assert isinstance(kind, WorkloadKind) and asking.waits(kind)


# -- deciding --------------------------------------------------------------------------


def test_a_workload_template_fires_its_kind_named_labelled_and_fenced_as_a_job() -> None:
    decision = due(workload_spec(WORKFLOWS, {"entrypoint": "main", "templates": []}))
    [create] = decision.creates
    assert create.kind == WORKFLOWS
    body = create.body
    assert (body["apiVersion"], body["kind"]) == ("argoproj.io/v1alpha1", "Workflow")
    meta = body["metadata"]
    assert meta["name"] == create.name and meta["namespace"] == NAMESPACE
    assert meta["labels"]["team"] == "data" and meta["labels"][LABEL_SCHEDULE_UID]
    assert meta["finalizers"] == [FINALIZER]
    assert meta["ownerReferences"][0]["kind"] == "CronSchedule"
    notes = meta["annotations"]
    assert notes["owner"] == "ana"
    for key in ("tick", "tick-local", "previous-tick", "schedule", "firing", "epoch", "leader"):
        assert f"punctual.dev/{key}" in notes, key
    assert body["spec"]["entrypoint"] == "main"


def test_an_unserved_kind_is_invalid_spec_naming_the_field_and_fires_nothing() -> None:
    spec = workload_spec(WorkloadKind("kubeflow.org", "v1", "pytorchjobs", "PyTorchJob"), {})
    decision = decide(schedule_body(spec), [], now=T, leadership=LEADER, served=SERVED)
    assert decision.status is not None and not decision.creates
    ready = condition(decision.status, "Ready")
    assert ready["reason"] == "InvalidSpec"
    assert ready["message"].startswith("spec.workloadTemplate.kind: PyTorchJob (kubeflow.org/v1)")
    assert events(decision, "InvalidSpec")[0][0] == "Warning"


def test_a_schedule_of_a_kind_still_listing_waits_and_writes_nothing() -> None:
    listing = Served(asked=(WORKFLOWS,), found=(WORKFLOWS,), unsynced=frozenset({WORKFLOWS.name}))
    decision = decide(
        schedule_body(workload_spec(WORKFLOWS, {})), [], now=T, leadership=LEADER, served=listing
    )
    assert not decision.writes
    assert decision.next_wake == T + IN_FLIGHT_RECHECK


def test_both_templates_or_completion_with_a_job_are_invalid() -> None:
    both = workload_spec(WORKFLOWS, {})
    both["jobTemplate"] = spec_body()["jobTemplate"]
    decision = decide(schedule_body(both), [], now=T, leadership=LEADER, served=SERVED)
    assert (
        "set exactly one of jobTemplate and workloadTemplate"
        in condition(decision.status or {}, "Ready")["message"]
    )
    rules = spec_body(completion={"succeeded": "true"})
    decision = decide(schedule_body(rules), [], now=T, leadership=LEADER, served=SERVED)
    assert (
        "completion needs workloadTemplate" in condition(decision.status or {}, "Ready")["message"]
    )


def test_a_completion_rule_that_does_not_compile_names_its_field() -> None:
    spec = workload_spec(
        WORKFLOWS, {}, completion={"succeeded": "self.status.phase ==", "failed": "false"}
    )
    decision = decide(schedule_body(spec), [], now=T, leadership=LEADER, served=SERVED)
    assert condition(decision.status or {}, "Ready")["message"].startswith(
        "spec.completion.succeeded"
    )
    assert not decision.creates


# -- the tick told to each kind -----------------------------------------------------------


def pod(name: str) -> dict[str, Any]:
    return {"spec": {"containers": [{"name": name, "image": "busybox"}]}}


def env_of(container: dict[str, Any]) -> dict[str, str]:
    return {e["name"]: e["value"] for e in container.get("env", [])}


def test_a_jobsets_replicated_jobs_pods_get_the_variables() -> None:
    spec = {"replicatedJobs": [{"name": "w", "template": {"spec": {"template": pod("worker")}}}]}
    [create] = due(workload_spec(JOBSETS, spec)).creates
    [container] = create.body["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"][
        "containers"
    ]
    assert (
        env_of(container)["PUNCTUAL_TICK"]
        == create.body["metadata"]["annotations"]["punctual.dev/tick"]
    )


def test_a_rayjobs_head_worker_and_submitter_pods_get_the_variables() -> None:
    spec = {
        "entrypoint": "python job.py",
        "rayClusterSpec": {
            "headGroupSpec": {"template": pod("head")},
            "workerGroupSpecs": [{"template": pod("w")}],
        },
        "submitterPodTemplate": pod("submit"),
    }
    [create] = due(workload_spec(RAYJOBS, spec)).creates
    made = create.body["spec"]
    for template in (
        made["rayClusterSpec"]["headGroupSpec"]["template"],
        made["rayClusterSpec"]["workerGroupSpecs"][0]["template"],
        made["submitterPodTemplate"],
    ):
        assert "PUNCTUAL_SCHEDULE" in env_of(template["spec"]["containers"][0])
        assert "punctual.dev/tick" in template["metadata"]["annotations"]


def test_argo_container_and_script_templates_get_the_variables_a_set_one_kept() -> None:
    spec: dict[str, Any] = {
        "entrypoint": "main",
        "templates": [
            {
                "name": "main",
                "container": {"image": "a", "env": [{"name": "PUNCTUAL_TICK", "value": "mine"}]},
            },
            {"name": "s", "script": {"image": "b", "source": "echo"}},
            {"name": "steps", "steps": [[{"name": "x", "template": "s"}]]},
        ],
    }
    [create] = due(workload_spec(WORKFLOWS, spec)).creates
    main, script, steps = create.body["spec"]["templates"]
    assert env_of(main["container"])["PUNCTUAL_TICK"] == "mine"
    assert "PUNCTUAL_EPOCH" in env_of(main["container"])
    assert "PUNCTUAL_TICK" in env_of(script["script"])
    assert steps == spec["templates"][2]
    assert spec["templates"][1]["script"] == {"image": "b", "source": "echo"}  # not changed


def test_tekton_and_unknown_kinds_keep_their_spec_and_read_annotations() -> None:
    spec = {"pipelineRef": {"name": "build"}, "params": [{"name": "x", "value": "1"}]}
    [create] = due(workload_spec(RUNS, spec)).creates
    assert create.body["spec"] == spec
    assert "punctual.dev/tick-local" in create.body["metadata"]["annotations"]


# -- the shell: writing, indexing, discovering -------------------------------------------

NS = "team"
WF_PATH = WORKFLOWS.path(NS)


def applier(api: FakeApi) -> Applier:
    return Applier(
        api,
        may_write=lambda: True,
        events=EventRecorder(api, clock=FixedClock(T)),
        limiter=RateLimiter(0, 0),
        clock=FixedClock(T),
    )


def workflow(
    name: str,
    uid: str = "",
    *,
    phase: str | None = None,
    finalizers: tuple[str, ...] = (FINALIZER,),
) -> dict[str, Any]:
    body: dict[str, Any] = {
        "apiVersion": WORKFLOWS.api_version,
        "kind": "Workflow",
        "metadata": {
            "name": name,
            "namespace": NS,
            "labels": {LABEL_SCHEDULE_UID: "s-1", "punctual.dev/schedule": "nightly"},
            "finalizers": list(finalizers),
            "ownerReferences": [{"uid": "s-1", "controller": True}],
        },
    }
    if uid:
        body["metadata"]["uid"] = uid
    if phase is not None:
        body["status"] = {"phase": phase}
    return body


async def test_creates_deletes_and_releases_go_to_the_kinds_collection() -> None:
    api = FakeApi()
    api.put(
        f"{WF_PATH}/old",
        workflow("old", "u-old", finalizers=(FINALIZER, "workflows.argoproj.io/x")),
    )
    write = applier(api)
    applied = Applied()
    await write._create(
        {"metadata": {"namespace": NS, "name": "nightly", "uid": "s-1"}},
        JobToCreate(name="nightly-1", tick=T, body=workflow("nightly-1"), kind=WORKFLOWS),
        applied,
    )
    [made] = applied.created
    assert made.kind == WORKFLOWS and made.state is JobState.ACTIVE
    await write._delete(NS, JobToDelete("old", "u-old", "replaced", True, WORKFLOWS), applied)
    deleting = [r for r in api.of("delete")]
    assert deleting[0].path == f"{WF_PATH}/old"
    assert deleting[0].body["propagationPolicy"] == "Foreground"
    # A custom resource takes no strategic merge patch: the finalizers are written whole,
    # without ours, under the resourceVersion they were read at.
    [patch] = api.of("patch")
    assert patch.params["contentType"] == "application/merge-patch+json"
    assert patch.body["metadata"]["finalizers"] == ["workflows.argoproj.io/x"]
    assert patch.body["metadata"]["resourceVersion"]
    assert applied.freed == ["old"]


async def test_release_leaves_an_object_of_another_uid_alone() -> None:
    api = FakeApi()
    api.put(f"{WF_PATH}/x", workflow("x", "u-new"))
    applied = Applied()
    await applier(api).free(NS, "x", "u-old", applied, WORKFLOWS)
    assert not api.of("patch") and applied.freed == []


async def test_a_kinds_objects_are_indexed_judged_and_judged_again_when_the_rules_change() -> None:
    api = FakeApi()
    api.put(f"{WF_PATH}/a", workflow("a", phase="Running"))
    rules = CompletionRules()
    told: list[tuple[str, Any]] = []
    index = JobIndex(api, [NS], lambda key, uid, now: told.append((uid, now)), rules_of=rules.get)
    stop = asyncio.Event()
    follower = index.follow(WORKFLOWS)
    task = asyncio.create_task(follower.run(stop))
    await asyncio.wait_for(follower.ready.wait(), 5)
    [snapshot] = index.index["s-1"]
    assert (snapshot.kind, snapshot.state) == (WORKFLOWS, JobState.ACTIVE)
    body = schedule_body(
        workload_spec(WORKFLOWS, {}, completion={"succeeded": "self.status.phase == 'Running'"}),
        uid="s-1",
    )
    changed = rules.observe(("team", "nightly"), body)
    assert changed == "s-1"
    index.rejudge(changed)
    [snapshot] = index.index["s-1"]
    assert snapshot.state is JobState.SUCCEEDED
    assert rules.observe(("team", "nightly"), body) is None  # the same rules: nothing to do
    stop.set()
    await task


async def test_discovery_finds_a_kind_later_and_wakes_its_schedules() -> None:
    api = FakeApi()
    api.fail("get", "/apis/argoproj.io/v1alpha1", NotFound(404, "NotFound", "no such group"))
    woken: list[WorkloadKind] = []
    index = JobIndex(api, [NS], lambda key, uid, now: None)
    kinds = Workloads(
        api, [WorkloadKind("argoproj.io", "v1alpha1", "workflows")], index, on_served=woken.append
    )
    stop = asyncio.Event()
    import punctual.kube.workloads as module

    module_rediscover, module.REDISCOVER = module.REDISCOVER, 0.01
    try:
        api.answer(
            "get",
            "/apis/argoproj.io/v1alpha1",
            {"resources": [{"name": "workflows", "kind": "Workflow", "namespaced": True}]},
        )
        task = asyncio.create_task(kinds.run(stop))
        await asyncio.wait_for(kinds.discovered.wait(), 5)
        missing = kinds.served().resolve({"apiVersion": "argoproj.io/v1alpha1", "kind": "Workflow"})
        assert isinstance(missing, str) and "does not serve" in missing
        assert kinds.unready() is None
        for _ in range(200):
            if woken:
                break
            await asyncio.sleep(0.01)
        assert woken == [WORKFLOWS]
        assert (
            kinds.served().resolve({"apiVersion": "argoproj.io/v1alpha1", "kind": "Workflow"})
            == WORKFLOWS
        )
        assert not kinds.served().waits(WORKFLOWS)
        stop.set()
        await task
    finally:
        module.REDISCOVER = module_rediscover


async def test_a_discovery_error_makes_schedules_wait_not_invalid() -> None:
    api = FakeApi()
    api.fail("get", "/apis/argoproj.io/v1alpha1", ApiError(503, "ServiceUnavailable", "down"))
    kinds = Workloads(
        api,
        [WorkloadKind("argoproj.io", "v1alpha1", "workflows")],
        JobIndex(api, [NS], lambda *a: None),
    )
    stop = asyncio.Event()
    task = asyncio.create_task(kinds.run(stop))
    await asyncio.wait_for(kinds.discovered.wait(), 5)
    kind = kinds.served().resolve({"apiVersion": "argoproj.io/v1alpha1", "kind": "Workflow"})
    assert isinstance(kind, WorkloadKind) and kinds.served().waits(kind)
    stop.set()
    await task
