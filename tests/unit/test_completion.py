"""Whether a workload of any kind runs, succeeded or failed: `completion.judge`.

Each profile on bodies shaped as its upstream controller writes them (running,
succeeded, failed, no status at all, odd values); then the CEL rules of
`spec.completion`: compile errors name the field, evaluation errors leave the workload
running and say why, failed before succeeded, a half left out falls back to the
profile, compiling is memoized. Properties: judge never raises, whatever the status.
"""

from __future__ import annotations

import copy
from datetime import UTC, datetime
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from punctual.core.completion import (
    FAILED_FIELD,
    SUCCEEDED_FIELD,
    CompletionError,
    Rules,
    Verdict,
    compile_rules,
    judge,
    profile_name,
)
from punctual.core.jobs import JobSnapshot, JobState

ACTIVE, SUCCEEDED, FAILED = JobState.ACTIVE, JobState.SUCCEEDED, JobState.FAILED
T1 = datetime(2026, 11, 25, 10, 0, 5, tzinfo=UTC)
T2 = datetime(2026, 11, 25, 10, 7, 30, tzinfo=UTC)
ISO1, ISO2 = "2026-11-25T10:00:05Z", "2026-11-25T10:07:30Z"

KINDS = {
    "Job": ("batch", "Job"),
    "Workflow": ("argoproj.io", "Workflow"),
    "PipelineRun": ("tekton.dev", "PipelineRun"),
    "TaskRun": ("tekton.dev", "TaskRun"),
    "RayJob": ("ray.io", "RayJob"),
    "JobSet": ("jobset.x-k8s.io", "JobSet"),
    "kstatus": ("kubeflow.org", "PyTorchJob"),
}


def obj(status: Any = None, *, kind: str = "Thing", **extra: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "apiVersion": "example.com/v1",
        "kind": kind,
        "metadata": {"name": "nightly-1795572000", "namespace": "data", "uid": "u-1"},
        "spec": {"x": 1},
        **extra,
    }
    if status is not None:
        body["status"] = status
    return body


def cond(kind: str, status: str, when: str | None = ISO2, **extra: Any) -> dict[str, Any]:
    found = {"type": kind, "status": status, **extra}
    if when is not None:
        found["lastTransitionTime"] = when
    return found


def judged(profile: str, status: Any = None, rules: Rules | None = None) -> Verdict:
    group, kind = KINDS[profile]
    return judge(obj(status, kind=kind), group=group, kind=kind, rules=rules)


# Profiles by kind.


@pytest.mark.parametrize(
    ("group", "kind", "name"),
    [
        ("batch", "Job", "Job"),
        ("argoproj.io", "Workflow", "Workflow"),
        ("tekton.dev", "PipelineRun", "PipelineRun"),
        ("tekton.dev", "TaskRun", "TaskRun"),
        ("ray.io", "RayJob", "RayJob"),
        ("jobset.x-k8s.io", "JobSet", "JobSet"),
        ("", "Pod", "kstatus"),
        ("argoproj.io", "CronWorkflow", "kstatus"),
        ("example.com", "Job", "kstatus"),  # a Job of another group is not batch's
        ("tekton.dev", "CustomRun", "kstatus"),
        ("kubeflow.org", "PyTorchJob", "kstatus"),
    ],
)
def test_each_kind_has_its_profile(group: str, kind: str, name: str) -> None:
    assert profile_name(group, kind) == name


@pytest.mark.parametrize("profile", sorted(KINDS))
@pytest.mark.parametrize("status", [None, {}, [], "Succeeded", 3, {"conditions": None}])
def test_a_workload_without_a_status_is_running(profile: str, status: Any) -> None:
    assert judged(profile, status) == Verdict(ACTIVE, None)


# batch/v1 Job: exactly what jobs reads.

JOB_STATUSES = [
    {"active": 1, "startTime": ISO1},
    {"conditions": [cond("Complete", "True")], "completionTime": ISO1, "succeeded": 1},
    {"conditions": [cond("SuccessCriteriaMet", "True"), cond("Complete", "True")]},
    {"conditions": [cond("FailureTarget", "True"), cond("Failed", "True")], "failed": 3},
    {"conditions": [cond("Complete", "False")]},
    {"conditions": [cond("Suspended", "True")]},
]


@pytest.mark.parametrize("status", JOB_STATUSES)
def test_a_batch_job_reads_as_the_job_snapshot_reads_it(status: dict[str, Any]) -> None:
    snapshot = JobSnapshot.from_body(obj(status, kind="Job"))
    assert judged("Job", status) == Verdict(snapshot.state, snapshot.finished_at)


def test_a_batch_job_with_odd_conditions_is_read_from_those_it_can_read() -> None:
    status = {"conditions": ["Complete", None, 7, cond("Failed", "True")]}
    assert judged("Job", status) == Verdict(FAILED, T2)
    assert judged("Job", {"conditions": "Complete"}) == Verdict(ACTIVE, None)


def test_a_succeeded_batch_job_finished_at_its_completion_time() -> None:
    status = {"conditions": [cond("Complete", "True")], "completionTime": ISO1}
    assert judged("Job", status) == Verdict(SUCCEEDED, T1)


# Argo Workflow: status.phase, finishedAt.


@pytest.mark.parametrize(
    ("phase", "state"),
    [
        ("", ACTIVE),
        ("Pending", ACTIVE),
        ("Running", ACTIVE),
        ("Succeeded", SUCCEEDED),
        ("Failed", FAILED),
        ("Error", FAILED),
        ("succeeded", ACTIVE),  # Argo writes the capitalised form only
        (None, ACTIVE),
        (7, ACTIVE),
    ],
)
def test_a_workflow_is_read_from_its_phase(phase: Any, state: JobState) -> None:
    status = {"phase": phase, "startedAt": ISO1, "finishedAt": ISO2, "progress": "3/3"}
    finished_at = None if state is ACTIVE else T2
    assert judged("Workflow", status) == Verdict(state, finished_at)


def test_a_workflow_finished_without_finished_at_has_no_finish_time() -> None:
    assert judged("Workflow", {"phase": "Failed", "finishedAt": None}) == Verdict(FAILED, None)
    assert judged("Workflow", {"phase": "Error", "finishedAt": "soon"}) == Verdict(FAILED, None)


# Tekton PipelineRun and TaskRun: the Succeeded condition.


@pytest.mark.parametrize("profile", ["PipelineRun", "TaskRun"])
@pytest.mark.parametrize(
    ("condition", "state"),
    [
        (cond("Succeeded", "Unknown", reason="Running"), ACTIVE),
        (cond("Succeeded", "Unknown", reason="PipelineRunPending"), ACTIVE),
        (cond("Succeeded", "True", reason="Succeeded"), SUCCEEDED),
        (cond("Succeeded", "True", reason="Completed"), SUCCEEDED),  # some tasks skipped
        (cond("Succeeded", "False", reason="Failed"), FAILED),
        (cond("Succeeded", "False", reason="Cancelled"), FAILED),
        (cond("Succeeded", "False", reason="PipelineRunTimeout"), FAILED),
        (cond("Ready", "True"), ACTIVE),  # Tekton says done on Succeeded only
    ],
)
def test_a_tekton_run_is_read_from_its_succeeded_condition(
    profile: str, condition: dict[str, Any], state: JobState
) -> None:
    status = {"startTime": ISO1, "conditions": [condition]}
    finished_at = None if state is ACTIVE else T2  # no completionTime: the transition
    assert judged(profile, status) == Verdict(state, finished_at)


def test_a_tekton_run_finished_at_its_completion_time_first() -> None:
    status = {"completionTime": ISO1, "conditions": [cond("Succeeded", "True")]}
    assert judged("PipelineRun", status) == Verdict(SUCCEEDED, T1)
    status = {"completionTime": ISO1, "conditions": [cond("Succeeded", "False", None)]}
    assert judged("TaskRun", status) == Verdict(FAILED, T1)
    assert judged("TaskRun", {"conditions": [cond("Succeeded", "False", None)]}) == Verdict(
        FAILED, None
    )


# RayJob: jobDeploymentStatus says finished, jobStatus says how.


@pytest.mark.parametrize(
    ("deployment", "job_status", "state"),
    [
        ("", "", ACTIVE),
        ("Initializing", "", ACTIVE),
        ("Running", "PENDING", ACTIVE),
        ("Running", "RUNNING", ACTIVE),
        ("Running", "SUCCEEDED", ACTIVE),  # not yet moved to Complete
        ("Retrying", "FAILED", ACTIVE),  # backoffLimit allows another attempt
        ("Waiting", "", ACTIVE),
        ("Suspending", "RUNNING", ACTIVE),
        ("Suspended", "STOPPED", ACTIVE),
        ("Complete", "SUCCEEDED", SUCCEEDED),
        ("Complete", "FAILED", FAILED),
        ("Complete", "STOPPED", FAILED),
        ("Complete", "", FAILED),  # the submitter failed before the Ray job had a status
        ("Failed", "FAILED", FAILED),
        ("Failed", "RUNNING", FAILED),  # activeDeadlineSeconds exceeded
        ("Failed", "SUCCEEDED", FAILED),  # KubeRay's verdict on the whole RayJob wins
    ],
)
def test_a_rayjob_is_read_from_its_deployment_status_then_its_job_status(
    deployment: str, job_status: str, state: JobState
) -> None:
    status = {
        "jobDeploymentStatus": deployment,
        "jobStatus": job_status,
        "startTime": ISO1,
        "endTime": ISO2,
        "rayClusterName": "nightly-raycluster-x7k2p",
    }
    finished_at = None if state is ACTIVE else T2
    assert judged("RayJob", status) == Verdict(state, finished_at)


def test_a_rayjob_without_end_time_finished_at_the_ray_jobs_end() -> None:
    status = {
        "jobDeploymentStatus": "Complete",
        "jobStatus": "SUCCEEDED",
        "rayJobInfo": {"startTime": ISO1, "endTime": ISO2},
    }
    assert judged("RayJob", status) == Verdict(SUCCEEDED, T2)
    status = {**status, "rayJobInfo": "none"}
    assert judged("RayJob", status) == Verdict(SUCCEEDED, None)


# JobSet: Completed and Failed conditions.


@pytest.mark.parametrize(
    ("conditions", "state"),
    [
        ([cond("StartupPolicyInProgress", "True")], ACTIVE),
        ([cond("StartupPolicyCompleted", "True")], ACTIVE),  # started, not finished
        ([cond("Suspended", "True")], ACTIVE),
        ([cond("Completed", "False")], ACTIVE),
        ([cond("Completed", "True", reason="AllJobsCompleted")], SUCCEEDED),
        ([cond("Failed", "True", reason="FailedJobs")], FAILED),
        ([cond("Completed", "True"), cond("Failed", "True")], FAILED),
    ],
)
def test_a_jobset_is_read_from_its_conditions(
    conditions: list[dict[str, Any]], state: JobState
) -> None:
    status = {"conditions": conditions, "restarts": 0, "replicatedJobsStatus": []}
    assert judged("JobSet", status) == Verdict(state, None if state is ACTIVE else T2)


def test_a_jobset_without_conditions_is_read_from_its_terminal_state() -> None:
    assert judged("JobSet", {"terminalState": "Completed"}) == Verdict(SUCCEEDED, None)
    assert judged("JobSet", {"terminalState": "Failed"}) == Verdict(FAILED, None)
    assert judged("JobSet", {"terminalState": ""}) == Verdict(ACTIVE, None)


# Every other kind: conventions, failure first.


@pytest.mark.parametrize(
    ("status", "verdict"),
    [
        ({"conditions": [cond("Created", "True"), cond("Running", "True")]}, (ACTIVE, None)),
        ({"conditions": [cond("Succeeded", "True")]}, (SUCCEEDED, T2)),
        ({"conditions": [cond("Complete", "True")]}, (SUCCEEDED, T2)),
        ({"conditions": [cond("Succeeded", "False")]}, (FAILED, T2)),
        ({"conditions": [cond("Failed", "True")]}, (FAILED, T2)),
        ({"conditions": [cond("Succeeded", "Unknown")]}, (ACTIVE, None)),
        # failure first, whatever the order of the conditions
        ({"conditions": [cond("Succeeded", "True", ISO1), cond("Failed", "True")]}, (FAILED, T2)),
        (
            {"conditions": [cond("Complete", "True", ISO1), cond("Succeeded", "False")]},
            (FAILED, T2),
        ),
        ({"phase": "Succeeded", "completionTime": ISO1}, (SUCCEEDED, T1)),
        ({"phase": "Completed", "finishedAt": ISO1}, (SUCCEEDED, T1)),
        ({"phase": "COMPLETE", "endTime": ISO1}, (SUCCEEDED, T1)),
        ({"phase": "Failed", "completedAt": ISO1}, (FAILED, T1)),
        ({"phase": "error"}, (FAILED, None)),
        ({"phase": "Failed", "conditions": [cond("Other", "True")]}, (FAILED, T2)),
        ({"phase": "Running"}, (ACTIVE, None)),
        ({"phase": "Succeeded", "conditions": [cond("Failed", "True")]}, (FAILED, T2)),
        ({"phase": "Failed", "conditions": [cond("Complete", "True")]}, (FAILED, T2)),
        ({"phase": 3}, (ACTIVE, None)),
        # Ready True is done only when nothing says the object still runs
        ({"conditions": [cond("Ready", "True")]}, (SUCCEEDED, T2)),
        ({"conditions": [cond("Ready", "False")]}, (ACTIVE, None)),
        ({"phase": "Running", "conditions": [cond("Ready", "True")]}, (ACTIVE, None)),
        ({"conditions": [cond("Ready", "True"), cond("Running", "True")]}, (ACTIVE, None)),
        ({"conditions": [cond("Ready", "True"), cond("Reconciling", "True")]}, (ACTIVE, None)),
        ({"conditions": [cond("Ready", "True"), cond("Succeeded", "Unknown")]}, (ACTIVE, None)),
        ({"conditions": [cond("Ready", "True"), cond("Running", "False")]}, (SUCCEEDED, T2)),
    ],
)
def test_any_other_kind_is_read_by_convention(
    status: dict[str, Any], verdict: tuple[JobState, datetime | None]
) -> None:
    assert judged("kstatus", status) == Verdict(*verdict)


# Rules: compiling.


def test_no_rules_compile_to_none() -> None:
    assert compile_rules(None, None) is None


def test_rules_compile_and_keep_their_sources() -> None:
    rules = compile_rules("has(self.status)", None)
    assert rules is not None
    assert rules.failed is None
    assert rules.succeeded is not None
    assert (rules.succeeded.field, rules.succeeded.source) == (SUCCEEDED_FIELD, "has(self.status)")


@pytest.mark.parametrize(
    ("succeeded", "failed", "field"),
    [
        ("self.status.phase ==", None, SUCCEEDED_FIELD),
        (None, "self.status.phase ==", FAILED_FIELD),
        ("true", "has(self)", FAILED_FIELD),
        ("self.x ==== 1", "true", SUCCEEDED_FIELD),
        ("'unterminated", None, SUCCEEDED_FIELD),
        ("", None, SUCCEEDED_FIELD),
        (None, "   ", FAILED_FIELD),
        ("bad ((", "also bad ((", FAILED_FIELD),  # failed is compiled first
    ],
)
def test_a_rule_that_does_not_compile_names_its_field_in_one_line(
    succeeded: str | None, failed: str | None, field: str
) -> None:
    with pytest.raises(CompletionError) as raised:
        compile_rules(succeeded, failed)
    error = raised.value
    assert isinstance(error, ValueError)
    assert error.field == field
    assert error.message.startswith(f"{field}: ")
    assert str(error) == error.message
    assert "\n" not in error.message
    assert len(error.message) < 400


def test_a_syntax_error_says_where_and_why() -> None:
    with pytest.raises(CompletionError) as raised:
        compile_rules(None, "self.status.phase ==")
    assert raised.value.message.startswith(
        "spec.completion.failed: line 1, column 21: Syntax error: mismatched input '<EOF>'"
    )
    with pytest.raises(CompletionError) as raised:
        compile_rules("has(self)", None)
    assert raised.value.message == (
        "spec.completion.succeeded: line 1, column 5: invalid argument to has() macro"
    )
    with pytest.raises(CompletionError) as raised:
        compile_rules("", None)
    assert "is empty" in raised.value.message


def test_compiling_is_memoized_by_the_sources() -> None:
    compile_rules.cache_clear()
    first = compile_rules("has(self.status)", "false")
    assert compile_rules("has(self.status)", "false") is first
    assert compile_rules("has(self.status) ", "false") is not first
    assert compile_rules.cache_info().hits == 1
    assert compile_rules.cache_info().maxsize is not None  # bounded


# Rules: evaluating.

PHASE_DONE = "has(self.status) && self.status.phase == 'Succeeded'"
CONDITION_DONE = "self.status.conditions.exists(c, c.type == 'Done' && c.status == 'True')"


def rules(succeeded: str | None = None, failed: str | None = None) -> Rules:
    compiled = compile_rules(succeeded, failed)
    assert compiled is not None
    return compiled


def test_a_rule_decides_and_finished_at_is_the_newest_condition_change() -> None:
    status = {
        "phase": "Succeeded",
        "conditions": [cond("Started", "True", ISO1), cond("Done", "True", ISO2)],
    }
    assert judged("kstatus", status, rules(PHASE_DONE)) == Verdict(SUCCEEDED, T2)
    assert judged("kstatus", status, rules(CONDITION_DONE)) == Verdict(SUCCEEDED, T2)
    assert judged("kstatus", {"phase": "Succeeded"}, rules(PHASE_DONE)) == Verdict(SUCCEEDED, None)


def test_a_rule_sees_the_object_as_self_and_as_object() -> None:
    body = obj({"phase": "Done"})
    for source in ("self.status.phase == 'Done'", "object.status.phase == 'Done'"):
        verdict = judge(body, group="example.com", kind="Thing", rules=rules(source))
        assert verdict == Verdict(SUCCEEDED, None)
    both = rules("self.metadata.name == object.metadata.name && object.spec.x == 1")
    assert judge(body, group="example.com", kind="Thing", rules=both).state is SUCCEEDED


def test_a_rule_can_read_labels_and_annotations() -> None:
    body = obj({}, metadata={"name": "n", "labels": {"example.com/done": "yes"}})
    rule = rules("self.metadata.labels['example.com/done'] == 'yes'")
    assert judge(body, group="example.com", kind="Thing", rules=rule).state is SUCCEEDED


def test_failed_is_evaluated_before_succeeded() -> None:
    both = rules(succeeded="true", failed="self.status.bad")
    assert judged("kstatus", {"bad": True}, both) == Verdict(FAILED, None)
    assert judged("kstatus", {"bad": False}, both) == Verdict(SUCCEEDED, None)


def test_a_rule_left_out_falls_back_to_the_profile_for_its_half() -> None:
    only_failed = rules(failed="has(self.status.error)")
    assert judged("Workflow", {"phase": "Succeeded", "finishedAt": ISO1}, only_failed) == Verdict(
        SUCCEEDED, T1
    )
    assert judged("Workflow", {"phase": "Running", "error": "x"}, only_failed).state is FAILED
    # the rule replaces the profile's failed half: a Failed phase alone is not failure
    assert judged("Workflow", {"phase": "Failed"}, only_failed) == Verdict(ACTIVE, None)

    only_succeeded = rules(succeeded="self.status.progress == '3/3'")
    assert judged("Workflow", {"phase": "Error", "finishedAt": ISO1}, only_succeeded) == Verdict(
        FAILED, T1
    )
    assert judged("Workflow", {"phase": "Running", "progress": "3/3"}, only_succeeded).state is (
        SUCCEEDED
    )
    # the rule replaces the profile's succeeded half
    status = {"phase": "Succeeded", "progress": "2/3"}
    assert judged("Workflow", status, only_succeeded) == Verdict(ACTIVE, None)


def test_with_both_rules_the_profile_is_not_consulted() -> None:
    never = rules(succeeded="false", failed="false")
    assert judged("Job", {"conditions": [cond("Failed", "True")]}, never) == Verdict(ACTIVE, None)


@pytest.mark.parametrize(
    ("source", "status", "reason"),
    [
        (PHASE_DONE.removeprefix("has(self.status) && "), None, "no such key: 'status'"),
        ("self.spec.nothere == 1", {}, "no such key: 'nothere'"),
        ("self.status.phase > 1", {"phase": "Running"}, "No such overload:"),
        ("self.status.n / 0 == 1", {"n": 4}, "division by zero"),
        ("self.status.phase", {"phase": "Running"}, "gave str 'Running', not a bool"),
        ("self.status.n", {"n": 1}, "gave int 1, not a bool"),
        ("status.phase == 'x'", {}, "Undefined variable or function: 'status'"),
    ],
)
@pytest.mark.parametrize("field", [SUCCEEDED_FIELD, FAILED_FIELD])
def test_a_rule_that_errors_leaves_the_workload_running_and_says_why(
    source: str, status: dict[str, Any] | None, reason: str, field: str
) -> None:
    compiled = rules(source) if field == SUCCEEDED_FIELD else rules(failed=source)
    verdict = judged("kstatus", status, compiled)
    assert (verdict.state, verdict.finished_at) == (ACTIVE, None)
    assert verdict.error is not None
    assert verdict.error.startswith(f"{field}: ")
    assert reason in verdict.error
    assert "\n" not in verdict.error


def test_a_failed_rule_that_errors_stops_before_succeeded() -> None:
    compiled = rules(succeeded="true", failed="self.status.nope")
    assert judged("kstatus", {}, compiled) == Verdict(
        ACTIVE, None, "spec.completion.failed: no such key: 'nope'"
    )


def test_has_guards_an_object_without_status() -> None:
    assert judged("kstatus", None, rules(PHASE_DONE)) == Verdict(ACTIVE, None)
    guarded = rules(failed="has(self.status) && has(self.status.error)")
    assert judged("kstatus", None, guarded) == Verdict(ACTIVE, None)


def test_judging_changes_nothing_in_the_object() -> None:
    body = obj({"phase": "Succeeded", "conditions": [cond("Done", "True")]})
    before = copy.deepcopy(body)
    judge(body, group="argoproj.io", kind="Workflow", rules=rules(CONDITION_DONE, "false"))
    judge(body, group="argoproj.io", kind="Workflow")
    assert body == before


# Properties.

# No NaN: JSON from the API server has none, and NaN is not equal to itself (the property
# compares the object before and after).
scalars = (
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8)
)
values = st.recursive(
    scalars,
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=12,
)
known = st.sampled_from(
    ["Succeeded", "Failed", "Complete", "Completed", "Ready", "Error", "True", "False", ISO1, ""]
)
condition = st.fixed_dictionaries(
    {},
    optional={"type": known, "status": known, "lastTransitionTime": known | scalars},
)
statuses = st.fixed_dictionaries(
    {},
    optional={
        "phase": known | scalars,
        "conditions": st.lists(condition | values, max_size=4) | values,
        "jobStatus": st.sampled_from(["SUCCEEDED", "FAILED", "STOPPED", "RUNNING"]) | scalars,
        "jobDeploymentStatus": st.sampled_from(["Complete", "Failed", "Running"]) | scalars,
        "terminalState": known | scalars,
        "completionTime": known | scalars,
        "finishedAt": known | scalars,
        "endTime": known | scalars,
        "rayJobInfo": values,
    },
)
RULES = [
    None,
    rules(PHASE_DONE),
    rules(CONDITION_DONE, "has(self.status.phase) && self.status.phase == 'Failed'"),
    rules(failed="self.status.conditions.size() > 2"),
]


@settings(max_examples=300, deadline=None)
@given(
    status=statuses | values,
    profile=st.sampled_from(sorted(KINDS)),
    compiled=st.sampled_from(RULES),
)
def test_judge_never_raises_and_errs_only_with_a_rule(
    status: Any, profile: str, compiled: Rules | None
) -> None:
    before = copy.deepcopy(status)
    verdict = judged(profile, status, compiled)
    assert isinstance(verdict.state, JobState)
    assert verdict.finished_at is None or verdict.finished_at.tzinfo is not None
    assert verdict.finished_at is None or verdict.state is not ACTIVE
    if verdict.error is not None:
        assert compiled is not None
        assert verdict.state is ACTIVE
    assert status == before  # deepcopy keeps a NaN the same object: equal to itself


@settings(max_examples=200, deadline=None)
@given(status=statuses)
def test_a_batch_job_always_reads_as_its_snapshot(status: dict[str, Any]) -> None:
    conditions = status.get("conditions")
    if not (isinstance(conditions, list) and all(isinstance(c, dict) for c in conditions)):
        status = {**status, "conditions": []}
    snapshot = JobSnapshot.from_body(obj(status, kind="Job"))
    assert judged("Job", status) == Verdict(snapshot.state, snapshot.finished_at)
