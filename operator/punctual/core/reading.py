"""Step 1 of a decision: the spec as one record, a usable spec, or why not, or a wait.

Why it exists: a decision starts from the spec, and the spec can be unusable in six ways
(the schema, a kind the installation does not serve, CEL completion rules that do not
compile, a Calendar missing or invalid, spec.after in a cycle) or
not yet decidable (a kind whose objects, or upstreams, are not all known yet). Each used
to leave `deciding` by its own exit, in its own error style. `read_spec` turns them all
into one `SpecRead`: the spec and its kind, or the reason it is invalid with the
fingerprint to write (a fingerprint no valid spec has, so that any fix is an edit and
moves the cursor to now; none for a cycle of spec.after, which is fixed without an edit),
or a wait. `clash` reads one thing more of it once per
generation: a Job template that sets Punctual's own variables.

What it must never do: raise for a user's spec, decide anything about ticks, or change
its arguments. Like all of `punctual.core`, it never talks to the API server or reads the
clock.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from pydantic import ValidationError

from punctual.core.calendars import Known, with_calendars
from punctual.core.completion import CompletionError, compile_rules
from punctual.core.models import CronScheduleSpec, describe_error
from punctual.core.planning import schedule_fingerprint
from punctual.core.records import NO_UPSTREAMS, EventNote, ScheduleRead, Upstreams
from punctual.core.stamping import clashes, describe_clashes
from punctual.core.times import parse_time
from punctual.core.workloads import Served, WorkloadKind


@dataclass(frozen=True, slots=True)
class SpecRead:
    """The spec as a decision can use it: exactly one of `spec` (with its `kind`),
    `invalid` (with `fingerprint`, written so that any fix is an edit), or `wait`."""

    spec: CronScheduleSpec | None = None
    kind: WorkloadKind | None = None
    invalid: str | None = None
    fingerprint: str | None = None
    wait: bool = False  # the kind's objects are not all known yet: decide nothing


def read_spec(
    body: Mapping[str, Any],
    served: Served,
    calendars: Known,
    upstreams: Upstreams | None = NO_UPSTREAMS,
) -> SpecRead:
    """The spec of `body` with its Calendars folded into its exclusions, and its kind;
    with spec.after, its `upstreams` (None: not all known yet, a wait; a cycle: invalid,
    with no fingerprint, so that it is fixed without an edit)."""
    raw = body.get("spec") or {}
    try:
        spec = CronScheduleSpec.model_validate(raw)
    except ValidationError as error:
        return _invalid(raw, describe_error(error))
    kind = served.resolve(None if spec.workload_template is None else raw["workloadTemplate"])
    if isinstance(kind, str):
        return _invalid(raw, kind)
    if served.waits(kind):
        return SpecRead(wait=True)
    try:
        if spec.completion is not None:
            compile_rules(spec.completion.succeeded, spec.completion.failed)
    except CompletionError as error:
        return _invalid(raw, error.message)
    folded = with_calendars(spec, calendars)
    if isinstance(folded, str):
        return _invalid(raw, folded)
    if folded.after and upstreams is None:
        return SpecRead(wait=True)
    if folded.after and upstreams is not None and upstreams.cycle:
        path = " -> ".join(upstreams.cycle)
        return SpecRead(invalid=f"spec.after: a cycle ({path}): no run of it could ever start")
    return SpecRead(spec=folded, kind=kind)


def _invalid(raw: Mapping[str, Any], reason: str) -> SpecRead:
    # (Computed only here: building it took a sixth of a herd's CPU when it was done for
    # every valid spec too, in pydantic's model_construct.)
    return SpecRead(invalid=reason, fingerprint="invalid-" + _raw_fingerprint(raw))


def _raw_fingerprint(raw: Mapping[str, Any]) -> str:
    """The fingerprint of a spec that fails validation, from the fields that decide ticks."""
    run_at = raw.get("runAt")
    try:
        when = parse_time(run_at) if isinstance(run_at, str) else None
    except ValueError:
        when = None
    jitter = raw.get("jitterSeconds")
    return schedule_fingerprint(
        CronScheduleSpec.model_construct(
            schedule=raw.get("schedule") if isinstance(raw.get("schedule"), str) else None,
            run_at=when,
            time_zone=str(raw.get("timeZone", "UTC")),
            jitter_seconds=jitter if isinstance(jitter, int) else 0,
        )
    )


def clash(schedule: ScheduleRead, spec: CronScheduleSpec) -> EventNote | None:
    """A jobTemplate that sets one of Punctual's variables itself keeps its value, and
    says so in one Warning Event per generation of the schedule: in the decision that
    first writes that generation as status.observedGeneration. That write is fenced,
    so the Event is posted once across leaders and restarts, at no write of its own;
    an edit reports it again, while Events expire (an hour, by default)."""
    if schedule.old.observed_generation == schedule.generation:
        return None
    found = clashes(spec.job_template)
    return EventNote("Warning", "EnvironmentClash", describe_clashes(found)) if found else None
