"""The firing, told to the workload: environment variables and pod annotations.

Why it exists: a Job's containers should know which tick they run for, without parsing
their own name (kubernetes#105183, Argo's `{{workflow.scheduledTime}}`, EventBridge's
`<aws.scheduler.scheduled-time>`). Every container and init container of a Job's pod
template gets the facts of its firing as environment variables, and the pod template
gets the same facts as `punctual.dev/...` annotations, so that the Downward API can
expose them to anything else (a volume, a sidecar added by a webhook).

A variable the user already sets in a container's `env` is left alone: the user
meant it. `clashes` names those, so that `deciding` can report them (once per
generation of the schedule, see there); a variable that comes from `envFrom` cannot be
seen without reading the ConfigMap or Secret, and Kubernetes lets `env` win over
`envFrom`, so Punctual's value wins there.

What it must never do: change or remove a variable or annotation the user set (other
than under Punctual's own `punctual.dev/` prefix), read the clock, do I/O, or raise on
a malformed template (the API server refuses that Job and says why).
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, tzinfo
from enum import StrEnum
from typing import Any, Final

from punctual.core import keys
from punctual.core.times import format_time


class FiringKind(StrEnum):
    """Why a Job was created (PUNCTUAL_FIRING, annotation punctual.dev/firing)."""

    SCHEDULED = "scheduled"  # a tick of the schedule came
    MANUAL = "manual"  # `punctual trigger` (the punctual.dev/trigger annotation)
    BACKFILL = "backfill"  # `punctual backfill` (the punctual.dev/backfill annotation)
    AFTER = "after"  # upstream runs ended as spec.after names (see `chaining`)


# Each fact of a firing: its environment variable and its pod template annotation.
ENV_TICK: Final = "PUNCTUAL_TICK"
ENV_TICK_LOCAL: Final = "PUNCTUAL_TICK_LOCAL"
ENV_PREVIOUS_TICK: Final = "PUNCTUAL_PREVIOUS_TICK"
ENV_SCHEDULE: Final = "PUNCTUAL_SCHEDULE"
ENV_NAMESPACE: Final = "PUNCTUAL_NAMESPACE"
ENV_FIRING: Final = "PUNCTUAL_FIRING"
ENV_EPOCH: Final = "PUNCTUAL_EPOCH"
# The tick of the schedule's newest run that succeeded (empty: none yet), and which attempt
# of its tick this run is (1; more once a failed tick is retried).
ENV_LAST_SUCCESSFUL_TICK: Final = "PUNCTUAL_LAST_SUCCESSFUL_TICK"
ENV_ATTEMPT: Final = "PUNCTUAL_ATTEMPT"
# A run after upstream runs (spec.after): the runs that started it, "schedule/run,...".
# Set only on such runs.
ENV_UPSTREAM: Final = "PUNCTUAL_UPSTREAM"

ANNOTATIONS: Final[Mapping[str, str]] = {
    ENV_TICK: keys.ANNOTATION_TICK,
    ENV_TICK_LOCAL: keys.ANNOTATION_TICK_LOCAL,
    ENV_PREVIOUS_TICK: keys.ANNOTATION_PREVIOUS_TICK,
    ENV_SCHEDULE: keys.ANNOTATION_SCHEDULE,
    ENV_NAMESPACE: keys.ANNOTATION_NAMESPACE,
    ENV_FIRING: keys.ANNOTATION_FIRING,
    ENV_EPOCH: keys.ANNOTATION_EPOCH,
    ENV_LAST_SUCCESSFUL_TICK: keys.ANNOTATION_LAST_SUCCESSFUL_TICK,
    ENV_ATTEMPT: keys.ANNOTATION_ATTEMPT,
    ENV_UPSTREAM: keys.ANNOTATION_UPSTREAM,
}
VARIABLES: Final = tuple(ANNOTATIONS)

_CONTAINER_LISTS: Final = ("initContainers", "containers")


@dataclass(frozen=True, slots=True)
class Firing:
    """The facts of one firing that its workload is told."""

    tick: datetime  # the nominal tick (a manual firing: the instant it was decided)
    previous_tick: datetime | None  # the schedule's tick before it, if there is one
    zone: tzinfo  # the schedule's timeZone
    schedule: str
    namespace: str
    kind: FiringKind
    epoch: int
    # A manual trigger's --env: set in every container, replacing what the template says.
    overrides: tuple[tuple[str, str], ...] = ()
    last_successful_tick: datetime | None = None
    attempt: int = 1
    upstream: tuple[str, ...] = ()  # spec.after: the upstream runs that started it

    def values(self) -> dict[str, str]:
        """Variable name to value; PUNCTUAL_PREVIOUS_TICK is empty when there is none."""
        previous = "" if self.previous_tick is None else format_time(self.previous_tick)
        upstream = {ENV_UPSTREAM: ",".join(self.upstream)} if self.upstream else {}
        return {
            ENV_TICK: format_time(self.tick),
            ENV_TICK_LOCAL: self.tick.astimezone(self.zone).isoformat(),
            ENV_PREVIOUS_TICK: previous,
            ENV_SCHEDULE: self.schedule,
            ENV_NAMESPACE: self.namespace,
            ENV_FIRING: self.kind.value,
            ENV_EPOCH: str(self.epoch),
            ENV_LAST_SUCCESSFUL_TICK: ""
            if self.last_successful_tick is None
            else format_time(self.last_successful_tick),
            ENV_ATTEMPT: str(self.attempt),
            **upstream,
        }


@dataclass(frozen=True, slots=True)
class Clash:
    """A container of the Job template that sets one of Punctual's variables itself."""

    container: str
    variable: str


def stamp(pod_template: Mapping[str, Any], firing: Firing) -> dict[str, Any]:
    """A copy of `pod_template` (a Job's spec.template) told about `firing`: the
    annotations on its metadata, the variables appended to every container's env
    (init containers too), except where the container sets that name already.

    `pod_template` is left as it was; what the copy does not change (volumes, a
    container's other fields) it shares with it, so a caller that will change those
    copies first. `jobs.build_job` hands it a template it copied already (a deep copy
    here as well was 2 % of a firing's CPU in the ramp's profile)."""
    stamped = dict(pod_template)
    values = firing.values()
    metadata = stamped.get("metadata")
    metadata = dict(metadata) if isinstance(metadata, Mapping) else {}
    annotations = metadata.get("annotations")
    annotations = dict(annotations) if isinstance(annotations, Mapping) else {}
    annotations.update({ANNOTATIONS[name]: value for name, value in values.items()})
    stamped["metadata"] = {**metadata, "annotations": annotations}
    spec = stamped.get("spec")
    if not isinstance(spec, dict):
        return stamped
    spec = stamped["spec"] = dict(spec)
    for key in _CONTAINER_LISTS:
        listed = spec.get(key)
        if isinstance(listed, list):
            spec[key] = [_told(c, values, firing.overrides) for c in listed]
    return stamped


def stamp_containers(containers: list[Any], firing: Firing) -> list[Any]:
    """Copies of `containers` (container specs, as an Argo template's) whose env carries
    the firing's variables, except those a container sets itself."""
    values = firing.values()
    return [_told(copy.deepcopy(c), values, firing.overrides) for c in containers]


def _told(
    container: Any, values: Mapping[str, str], overrides: tuple[tuple[str, str], ...] = ()
) -> Any:
    """`container` with the variables it does not set appended to its env, and the
    overrides set (an entry of the same name, value or valueFrom, replaced)."""
    if not isinstance(container, dict):
        return container
    env = container.get("env")
    if env is None:
        env = []
    if not isinstance(env, list):
        return container  # malformed: the API server will say so
    taken = _names(env)
    added = [{"name": n, "value": v} for n, v in values.items() if n not in taken]
    if overrides:
        forced = dict(overrides)
        kept = [e for e in env if not (isinstance(e, Mapping) and e.get("name") in forced)]
        return {
            **container,
            "env": [*kept, *added, *({"name": n, "value": v} for n, v in overrides)],
        }
    return {**container, "env": [*env, *added]}


def clashes(job_template: Mapping[str, Any]) -> list[Clash]:
    """The (container, variable) pairs of a jobTemplate that set Punctual's variables."""
    spec = job_template.get("spec")
    pod = spec.get("template") if isinstance(spec, Mapping) else None
    pod_spec = pod.get("spec") if isinstance(pod, Mapping) else None
    if not isinstance(pod_spec, Mapping):
        return []
    found: list[Clash] = []
    for container in _containers(pod_spec):
        env = container.get("env")
        taken = _names(env) if isinstance(env, list) else set()
        name = str(container.get("name", "?"))
        found += [Clash(name, variable) for variable in VARIABLES if variable in taken]
    return found


def describe_clashes(found: list[Clash]) -> str:
    """One line: `container report sets PUNCTUAL_TICK, PUNCTUAL_EPOCH; ...`."""
    by_container: dict[str, list[str]] = {}
    for clash in found:
        by_container.setdefault(clash.container, []).append(clash.variable)
    parts = [f"container {c} sets {', '.join(v)}" for c, v in by_container.items()]
    return (
        f"{'; '.join(parts)}: left as the jobTemplate sets them, so those containers do not "
        "get Punctual's values (the pod's punctual.dev/ annotations still carry them)"
    )


def _containers(pod_spec: Mapping[str, Any]) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = []
    for key in _CONTAINER_LISTS:
        listed = pod_spec.get(key)
        if isinstance(listed, list):
            found += [c for c in listed if isinstance(c, dict)]
    return found


def _names(env: list[Any]) -> set[str]:
    return {str(e.get("name")) for e in env if isinstance(e, Mapping)}
