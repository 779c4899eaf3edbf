"""Whether one workload Punctual created is running, succeeded or failed: any kind.

Why it exists: with `spec.workloadTemplate` a CronSchedule creates any kind (an Argo
Workflow, a Tekton PipelineRun or TaskRun, a RayJob, a JobSet, any CRD), not only
batch/v1 Jobs, and everything downstream (concurrencyPolicy, history, pauseOnFailure,
successDeadlineSeconds) needs the one fact a Job's conditions gave: still running,
succeeded or failed, and since when. `judge` reads it from the object with the kind's
profile, or with the schedule's own rules (`spec.completion`, CEL).

The profiles, each from the upstream API's status shape:
- `Job` (batch): `jobs.job_state`, exactly (Complete/Failed conditions).
- `Workflow` (argoproj.io): `status.phase` Succeeded -> succeeded; Failed or Error ->
  failed; "", Pending, Running -> running. Finished at `status.finishedAt`.
- `PipelineRun`, `TaskRun` (tekton.dev): the Knative condition `Succeeded`: True ->
  succeeded, False -> failed (cancelled and timed out runs too), Unknown or absent ->
  running. Finished at `status.completionTime`, else the condition's lastTransitionTime.
- `RayJob` (ray.io): `status.jobDeploymentStatus` is KubeRay's verdict on the whole
  RayJob (cluster, submission and Ray job), so it alone says finished: Complete or
  Failed (KubeRay's own IsJobDeploymentTerminal; Kueue reads it the same way).
  Complete with `jobStatus` SUCCEEDED -> succeeded; Complete with any other jobStatus
  (FAILED, STOPPED, or none when the submitter failed) -> failed; Failed (deadline
  exceeded, submission failed, retries used up, ...) -> failed, whatever jobStatus
  says. A terminal jobStatus under any other deployment status (Running, Retrying while
  backoffLimit allows another attempt, Suspending) is not the end: running. Finished at
  `status.endTime`, else `status.rayJobInfo.endTime`.
- `JobSet` (jobset.x-k8s.io): condition Failed True -> failed, Completed True ->
  succeeded (not StartupPolicyCompleted), else `status.terminalState` Failed/Completed.
  Finished at the condition's lastTransitionTime.
- `kstatus`, every other kind, by convention, failure first: condition Failed True or
  Succeeded False, or `status.phase` Failed or Error -> failed; condition Succeeded or
  Complete True, or phase Succeeded, Completed or Complete (any case) -> succeeded;
  condition Ready True -> succeeded only when nothing else says the object still runs
  (no phase, no Succeeded condition, no Running or Reconciling condition True): for a
  long-running kind Ready True means "up", not "done", and such a kind says more.
  Finished at the deciding condition's lastTransitionTime, or for a phase at
  completionTime, finishedAt, endTime or completedAt, else the newest condition change.

The rules (`spec.completion.failed` and `.succeeded`) are CEL, with the object bound as
`self` and as `object` (as CRD validation rules and admission policies name it). Failed
is evaluated first; a rule left out falls back to the profile for its half; a rule must
give a bool. A rule that errors on this object (`self.status` on an object without a
status: `has(self.status)` guards it), or gives no bool, makes the verdict "running"
with the error, never a guess. When a rule decides, finished_at is the newest
lastTransitionTime among the object's conditions, if it has any.

The CEL library, measured by bench/cel_libraries.py (CPython 3.11, a shared two-core
machine, medians; conversion of the object included, as every evaluation pays it):

| | cel-python 0.5.0 (celpy, pure Python) | common-expression-language 0.10.0 (Rust) |
|---|---|---|
| compile `has(self.status) && self.status.phase == 'Succeeded'` | 187 us | 23 us |
| compile `self.status.conditions.exists(c, ...)` | 285 us | 30 us |
| evaluate the exists rule, Tekton PipelineRun (3 KB) | 500-550 us | 194 us |
| evaluate the phase rule, Argo Workflow of 40 nodes (20 KB) | 2740 us | 1870-1930 us |
| evaluate the exists rule, the same Workflow | 3250-3300 us | 1905 us |
| missing key, wrong type, 1/0 | CELEvalError (a tuple) | KeyError, TypeError, ZeroDivisionError |
| non-bool result | celtypes.StringType | str |
| syntax error | CELParseError: source, caret, no reason | ValueError: line, column, reason |

common-expression-language it is: faster on every figure (eight to ten times to compile,
which is memoized; 1.4 to 2.8 times to evaluate, which is not), plain Python values and
exceptions with readable messages (a user reads them in the schedule's status), a reason
for every syntax error, type stubs of its own (mypy --strict needs no override), and
wheels for CPython 3.11, 3.12 and 3.13 on Linux (manylinux2014) and macOS, x86_64 and
arm64. Its cost: it pulls its command line's libraries (typer, prompt-toolkit; rich and
pygments were already locked). cel-python's own dependencies weigh no less (lark,
pendulum, google-re2), and its BoolType is an int, not a bool. Evaluation binds only the
names a rule uses: the conversion of the object is most of an evaluation, and binding
both names doubles it.

What it must never do: talk to the API server, read the clock, change the object, or
raise from `judge` (a malformed status is "running"; a rule that fails says so).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from functools import lru_cache
from typing import Any

import cel

from punctual.core.jobs import JobState, job_state
from punctual.core.times import maybe_time

SUCCEEDED_FIELD = "spec.completion.succeeded"
FAILED_FIELD = "spec.completion.failed"
NAMES = ("self", "object")  # what a rule calls the object

# The profiles by (group, kind); every other kind is judged by convention ("kstatus").
PROFILES: Mapping[tuple[str, str], str] = {
    ("batch", "Job"): "Job",
    ("argoproj.io", "Workflow"): "Workflow",
    ("tekton.dev", "PipelineRun"): "PipelineRun",
    ("tekton.dev", "TaskRun"): "TaskRun",
    ("ray.io", "RayJob"): "RayJob",
    ("jobset.x-k8s.io", "JobSet"): "JobSet",
}
KSTATUS = "kstatus"

# The conventions of kstatus-like kinds (see the docstring). The last one only counts
# when nothing else says the object is still running.
_DONE_CONDITIONS = ("Succeeded", "Complete")
_UP_CONDITION = "Ready"
_RUNNING_CONDITIONS = ("Running", "Reconciling")
_DONE_PHASES = frozenset({"succeeded", "completed", "complete"})
_FAILED_PHASES = frozenset({"failed", "error"})
_FINISH_FIELDS = ("completionTime", "finishedAt", "endTime", "completedAt")
_MAX_REASON = 300  # characters of a library's error message kept in a reason


class CompletionError(ValueError):
    """A `spec.completion` rule that does not compile: which field, and why (one line)."""

    def __init__(self, field: str, reason: str) -> None:
        super().__init__(field, reason)

    @property
    def field(self) -> str:
        return str(self.args[0])

    @property
    def message(self) -> str:
        return f"{self.args[0]}: {self.args[1]}"

    def __str__(self) -> str:
        return self.message


@dataclasses.dataclass(frozen=True, slots=True)
class Rule:
    """One compiled rule: its field, its source, and the names of the object it reads."""

    field: str
    source: str
    program: cel.Program = dataclasses.field(compare=False, repr=False)
    binds: tuple[str, ...] = dataclasses.field(compare=False, repr=False)


@dataclasses.dataclass(frozen=True, slots=True)
class Rules:
    """A schedule's compiled `spec.completion`; a half left out is None (the profile's)."""

    succeeded: Rule | None
    failed: Rule | None


@dataclasses.dataclass(frozen=True, slots=True)
class Verdict:
    """What `judge` read: the state, when it finished if known, and a rule's error."""

    state: JobState
    finished_at: datetime | None
    error: str | None = None  # a rule that errored at evaluation; state is ACTIVE then


ACTIVE = Verdict(JobState.ACTIVE, None)


@lru_cache(maxsize=1024)
def compile_rules(succeeded: str | None, failed: str | None) -> Rules | None:
    """`spec.completion` compiled, memoized by its sources; None when it has no rule.

    CompletionError names the field of a rule that does not compile (failed first)."""
    if succeeded is None and failed is None:
        return None
    failed_rule = None if failed is None else _compile(FAILED_FIELD, failed)
    succeeded_rule = None if succeeded is None else _compile(SUCCEEDED_FIELD, succeeded)
    return Rules(succeeded=succeeded_rule, failed=failed_rule)


def _compile(field: str, source: str) -> Rule:
    if not source.strip():
        raise CompletionError(field, "is empty: write a CEL expression that gives a bool")
    try:
        program = cel.compile(source)
    except Exception as exc:  # the library's parse errors are ValueErrors; any other too
        raise CompletionError(field, _compile_reason(exc)) from None
    used = set(program.variables())
    return Rule(field, source, program, tuple(name for name in NAMES if name in used))


def _compile_reason(exc: Exception) -> str:
    """The parser's first error, one line: "line 1, column 21: Syntax error: ..."."""
    for line in str(exc).splitlines():
        _, found, rest = line.partition("ERROR: <input>:")
        if found:
            row, _, rest = rest.partition(":")
            column, _, what = rest.partition(":")
            return _clip(f"line {row}, column {column}: {what.strip()}")
    return _reason(exc)


def profile_name(group: str, kind: str) -> str:
    """The profile that judges this kind: its name, or "kstatus" for any other kind."""
    return PROFILES.get((group, kind), KSTATUS)


def judge(body: Mapping[str, Any], *, group: str, kind: str, rules: Rules | None = None) -> Verdict:
    """Running, succeeded or failed: by the rules where the schedule has them, else by
    the kind's profile. Never raises; a rule's error comes back in the verdict."""
    profile = _PROFILE_FUNCTIONS[profile_name(group, kind)]
    status = _status(body)
    if rules is None:
        return profile(status)
    # The profile answers for a half left out: its failure, or its success.
    halves = rules.failed is None or rules.succeeded is None
    fallback = profile(status) if halves else ACTIVE
    for rule, state in ((rules.failed, JobState.FAILED), (rules.succeeded, JobState.SUCCEEDED)):
        if rule is None:
            if fallback.state is state:
                return fallback
            continue
        decided, error = _evaluate(rule, body)
        if error is not None:
            return Verdict(JobState.ACTIVE, None, error)
        if decided:
            return Verdict(state, _newest_transition(status))
    return ACTIVE


def _evaluate(rule: Rule, body: Mapping[str, Any]) -> tuple[bool, str | None]:
    """The rule's bool on this object, or its error as "<field>: <reason>"."""
    obj = body if isinstance(body, dict) else dict(body)
    try:
        value = rule.program.execute({name: obj for name in rule.binds})
    except (KeyboardInterrupt, SystemExit):
        raise
    except BaseException as exc:  # a panic in the library is a BaseException (PyO3)
        return False, f"{rule.field}: {_reason(exc)}"
    if not isinstance(value, bool):
        shown = _clip(repr(value), 60)
        return False, f"{rule.field}: gave {type(value).__name__} {shown}, not a bool"
    return value, None


def _reason(exc: BaseException) -> str:
    """An error of the library as one readable line."""
    if isinstance(exc, KeyError) and exc.args:
        return f"no such key: {exc.args[0]!r}"
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    first = lines[0] if lines else type(exc).__name__
    # "No such overload: <two sentences of advice>": the first sentence says it.
    head, dot, _ = first.partition(". ")
    return _clip(head + dot.strip() if dot else first)


def _clip(text: str, limit: int = _MAX_REASON) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."


# Reading a status: every helper takes whatever the object holds and never raises.


def _status(body: Mapping[str, Any]) -> Mapping[str, Any]:
    status = body.get("status") if isinstance(body, Mapping) else None
    return status if isinstance(status, Mapping) else {}


def _conditions(status: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    found = status.get("conditions")
    if not isinstance(found, list | tuple):
        return []
    return [cond for cond in found if isinstance(cond, Mapping)]


def _condition(status: Mapping[str, Any], kind: str) -> Mapping[str, Any] | None:
    return next((c for c in _conditions(status) if c.get("type") == kind), None)


def _is(status: Mapping[str, Any], kind: str, value: str) -> Mapping[str, Any] | None:
    """The condition of this type if its status is `value` ("True", "False")."""
    cond = _condition(status, kind)
    return cond if cond is not None and cond.get("status") == value else None


def _transition(cond: Mapping[str, Any]) -> datetime | None:
    return maybe_time(cond.get("lastTransitionTime"))


def _newest_transition(status: Mapping[str, Any]) -> datetime | None:
    times = [t for t in map(_transition, _conditions(status)) if t is not None]
    return max(times, default=None)


def _text(value: object) -> str:
    return value if isinstance(value, str) else ""


def _first_time(status: Mapping[str, Any], fields: Sequence[str]) -> datetime | None:
    return next((t for t in (maybe_time(status.get(f)) for f in fields) if t), None)


# The profiles: status -> Verdict, each for the kinds named in the docstring.


def _job(status: Mapping[str, Any]) -> Verdict:
    """batch/v1 Job: the very reading of `jobs` (on conditions that are mappings)."""
    state, finished_at = job_state({**status, "conditions": _conditions(status)})
    return Verdict(state, finished_at)


def _workflow(status: Mapping[str, Any]) -> Verdict:
    phase = status.get("phase")
    if phase == "Succeeded":
        return Verdict(JobState.SUCCEEDED, maybe_time(status.get("finishedAt")))
    if phase in ("Failed", "Error"):
        return Verdict(JobState.FAILED, maybe_time(status.get("finishedAt")))
    return ACTIVE


def _tekton(status: Mapping[str, Any]) -> Verdict:
    cond = _condition(status, "Succeeded")
    if cond is None:
        return ACTIVE
    finished_at = maybe_time(status.get("completionTime")) or _transition(cond)
    if cond.get("status") == "True":
        return Verdict(JobState.SUCCEEDED, finished_at)
    if cond.get("status") == "False":
        return Verdict(JobState.FAILED, finished_at)
    return ACTIVE


def _rayjob(status: Mapping[str, Any]) -> Verdict:
    deployment = status.get("jobDeploymentStatus")
    if deployment not in ("Complete", "Failed"):
        return ACTIVE
    info = status.get("rayJobInfo")
    finished_at = maybe_time(status.get("endTime")) or (
        maybe_time(info.get("endTime")) if isinstance(info, Mapping) else None
    )
    if deployment == "Complete" and status.get("jobStatus") == "SUCCEEDED":
        return Verdict(JobState.SUCCEEDED, finished_at)
    return Verdict(JobState.FAILED, finished_at)


def _jobset(status: Mapping[str, Any]) -> Verdict:
    for kind, state in (("Failed", JobState.FAILED), ("Completed", JobState.SUCCEEDED)):
        cond = _is(status, kind, "True")
        if cond is not None:
            return Verdict(state, _transition(cond))
    terminal = status.get("terminalState")
    if terminal == "Failed":
        return Verdict(JobState.FAILED, _newest_transition(status))
    if terminal == "Completed":
        return Verdict(JobState.SUCCEEDED, _newest_transition(status))
    return ACTIVE


def _kstatus(status: Mapping[str, Any]) -> Verdict:
    """Any other kind, by the conventions most run-to-completion kinds follow."""
    phase = _text(status.get("phase")).lower()
    finished_by_phase = _first_time(status, _FINISH_FIELDS) or _newest_transition(status)
    cond = _is(status, "Failed", "True") or _is(status, "Succeeded", "False")
    if cond is not None:
        return Verdict(JobState.FAILED, _transition(cond))
    if phase in _FAILED_PHASES:
        return Verdict(JobState.FAILED, finished_by_phase)
    for kind in _DONE_CONDITIONS:
        cond = _is(status, kind, "True")
        if cond is not None:
            return Verdict(JobState.SUCCEEDED, _transition(cond))
    if phase in _DONE_PHASES:
        return Verdict(JobState.SUCCEEDED, finished_by_phase)
    still_running = (
        bool(phase)
        or _condition(status, "Succeeded") is not None
        or any(_is(status, kind, "True") for kind in _RUNNING_CONDITIONS)
    )
    up = _is(status, _UP_CONDITION, "True")
    if up is not None and not still_running:
        return Verdict(JobState.SUCCEEDED, _transition(up))
    return ACTIVE


_PROFILE_FUNCTIONS: Mapping[str, Callable[[Mapping[str, Any]], Verdict]] = {
    "Job": _job,
    "Workflow": _workflow,
    "PipelineRun": _tekton,
    "TaskRun": _tekton,
    "RayJob": _rayjob,
    "JobSet": _jobset,
    KSTATUS: _kstatus,
}
