"""Workload kinds: what a schedule's `spec.workloadTemplate` creates, and where.

Why it exists: a schedule fires a batch/v1 Job by default, or, with
`spec.workloadTemplate`, an object of any kind an installation serves (an Argo Workflow,
a Tekton PipelineRun, a RayJob, a JobSet, a CRD of one's own). A `WorkloadKind` names
such a kind the way the API server does (group, version, resource, kind); `Served` is
what an installation may create: the kinds of `punctual run --workload-kinds` that the
API server's discovery has confirmed, and which of them are listed into the index yet.
`resolve` turns a schedule's template into its kind, or into the one line its
`InvalidSpec` condition says.

The tick reaches every kind as annotations on the object; as environment variables
where the kind's pod templates or containers are known (`stamp_workload`): a JobSet's
replicated Jobs, a RayJob's head, worker and submitter pods, an Argo Workflow's
container and script templates. Tekton's steps are not touched (a param needs the
Pipeline to declare it): its runs read the annotations.

What it must never do: talk to the API server (discovery is `kube.workloads`), read the
clock, or change a template it was given (the body it builds is a copy).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from punctual.core.stamping import ANNOTATIONS, Firing, stamp, stamp_containers


class KindError(ValueError):
    """A --workload-kinds entry that is not RESOURCE.VERSION.GROUP."""


@dataclass(frozen=True, slots=True)
class WorkloadKind:
    """One kind of object a schedule can create, as the API server names it."""

    group: str  # "" for the core group
    version: str
    resource: str  # plural, lower case: "workflows"
    kind: str = ""  # "Workflow"; "" until discovery has told it

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    @property
    def name(self) -> str:
        """kubectl's fully qualified form: workflows.v1alpha1.argoproj.io."""
        return f"{self.resource}.{self.version}.{self.group}" if self.group else self.resource

    @property
    def is_job(self) -> bool:
        return self.group == "batch" and self.resource == "jobs"

    def path(self, namespace: str | None = None) -> str:
        """The collection's path in `namespace` (None: in every namespace)."""
        root = f"/apis/{self.group}/{self.version}" if self.group else f"/api/{self.version}"
        where = f"/namespaces/{namespace}" if namespace else ""
        return f"{root}{where}/{self.resource}"


JOB: Final = WorkloadKind("batch", "v1", "jobs", "Job")

_NAME: Final = re.compile(r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?)\.(v[0-9]+[a-z0-9]*)\.([a-z0-9.-]+)$")


def parse_kinds(values: Iterable[str]) -> tuple[WorkloadKind, ...]:
    """`--workload-kinds` values (each comma-separated) as kinds, without repeats; raises
    KindError naming the first entry that is not RESOURCE.VERSION.GROUP."""
    found: dict[str, WorkloadKind] = {}
    for value in values:
        for entry in filter(None, (part.strip() for part in value.split(","))):
            match = _NAME.match(entry)
            if match is None:
                raise KindError(
                    f"--workload-kinds: {entry!r} is not RESOURCE.VERSION.GROUP "
                    "(e.g. workflows.v1alpha1.argoproj.io)"
                )
            kind = WorkloadKind(match.group(4), match.group(3), match.group(1))
            found.setdefault(kind.name, kind)
    return tuple(found.values())


@dataclass(frozen=True, slots=True)
class Served:
    """What an installation may create, as it knows it now.

    `asked`: the kinds of --workload-kinds (Jobs are always served). `found`: those the
    API server's discovery confirmed, with their kind names. `unsynced`: kinds whose
    objects are not yet all in the index, or whose discovery has not answered yet (an
    error other than "not found"): a schedule of such a kind waits, since an object
    created before a restart must be seen before its tick is decided again, and a
    passing error must not make a good schedule invalid.
    """

    asked: tuple[WorkloadKind, ...] = ()
    found: tuple[WorkloadKind, ...] = ()
    unsynced: frozenset[str] = field(default_factory=frozenset)  # WorkloadKind.name

    def resolve(self, template: Mapping[str, Any] | None) -> WorkloadKind | str:
        """The kind a workloadTemplate names, or why it cannot be created (one line
        naming spec.workloadTemplate.kind). None (a jobTemplate): Jobs."""
        if template is None:
            return JOB
        api_version = str(template.get("apiVersion") or "")
        kind = str(template.get("kind") or "")
        group, _, version = api_version.rpartition("/")
        if group == JOB.group and version == JOB.version and kind == JOB.kind:
            return JOB
        for served in self.found:
            if (served.group, served.version, served.kind) == (group, version, kind):
                return served
        where = f"{kind} ({api_version})"
        for asked in self.asked:
            if (asked.group, asked.version) == (group, version):
                if asked.name in self.unsynced:
                    return asked  # not known yet: the caller waits (`waits`)
                if not any(f.name == asked.name for f in self.found):
                    return (
                        f"spec.workloadTemplate.kind: {where}: the API server does not serve "
                        f"{asked.name} (is its CustomResourceDefinition installed?)"
                    )
        served_names = ", ".join(k.name for k in self.asked) or "none besides jobs.v1.batch"
        return (
            f"spec.workloadTemplate.kind: {where} is not a kind this installation creates "
            f"(punctual run --workload-kinds, the chart's workloadKinds; served: {served_names})"
        )

    def waits(self, kind: WorkloadKind) -> bool:
        """Whether a schedule of `kind` must wait before it is decided."""
        return kind.name in self.unsynced


JOBS_ONLY: Final = Served()


def workload_body(
    template: Mapping[str, Any], kind: WorkloadKind, firing: Firing | None
) -> dict[str, Any]:
    """The object a workloadTemplate fires, before Punctual's metadata is added: its
    apiVersion and kind, its spec told the firing (see `stamp_workload`)."""
    spec = template.get("spec")
    spec = dict(spec) if isinstance(spec, Mapping) else {}
    if firing is not None:
        spec = stamp_workload(kind, spec, firing)
    return {"apiVersion": kind.api_version, "kind": kind.kind, "spec": spec}


def firing_annotations(firing: Firing) -> dict[str, str]:
    """The firing's facts as the object's own annotations (a Job's pod template has them)."""
    return {ANNOTATIONS[name]: value for name, value in firing.values().items()}


def stamp_workload(kind: WorkloadKind, spec: dict[str, Any], firing: Firing) -> dict[str, Any]:
    """A copy of a workload's spec whose known pod templates or containers carry the
    firing's variables; the spec as it is for kinds whose pods are not known."""
    if kind.group == "jobset.x-k8s.io":
        stamped: dict[str, Any] = _each(
            spec, ("replicatedJobs", "*", "template", "spec", "template"), firing
        )
        return stamped
    if kind.group == "ray.io":
        spec = _each(spec, ("rayClusterSpec", "headGroupSpec", "template"), firing)
        spec = _each(spec, ("rayClusterSpec", "workerGroupSpecs", "*", "template"), firing)
        ray: dict[str, Any] = _each(spec, ("submitterPodTemplate",), firing)
        return ray
    if kind.group == "argoproj.io" and kind.kind == "Workflow":
        return _argo(spec, firing)
    return spec


def _each(node: Any, path: tuple[str, ...], firing: Firing) -> Any:
    """`node` with the pod template at `path` ("*": every item of a list) stamped."""
    if not path:
        return stamp(node, firing) if isinstance(node, Mapping) else node
    step, rest = path[0], path[1:]
    if step == "*":
        return [_each(item, rest, firing) for item in node] if isinstance(node, list) else node
    if not isinstance(node, Mapping) or step not in node:
        return node
    return {**node, step: _each(node[step], rest, firing)}


def _argo(spec: dict[str, Any], firing: Firing) -> dict[str, Any]:
    """Every container and script template of an Argo Workflow, and a containerSet's
    containers, get the variables (a template that sets one keeps its own)."""
    templates = spec.get("templates")
    if not isinstance(templates, list):
        return spec
    stamped = []
    for template in templates:
        if not isinstance(template, Mapping):
            stamped.append(template)
            continue
        template = dict(template)
        for key in ("container", "script"):
            if isinstance(template.get(key), Mapping):
                template[key] = stamp_containers([template[key]], firing)[0]
        group = template.get("containerSet")
        if isinstance(group, Mapping) and isinstance(group.get("containers"), list):
            template["containerSet"] = {
                **group,
                "containers": stamp_containers(group["containers"], firing),
            }
        stamped.append(template)
    return {**spec, "templates": stamped}
