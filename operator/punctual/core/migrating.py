"""Migrating a CronJob to a CronSchedule, and back: what each object must say.

Why it exists: a platform team that adopts Punctual already runs CronJobs, and a switch
that loses or doubles one tick is a switch nobody makes. `punctual migrate` (cli.migrating)
does the writes; this module decides, purely, what they contain:

* `cronschedule_from_cronjob`: the CronSchedule equivalent to a CronJob (schedule,
  timeZone, startingDeadlineSeconds, concurrencyPolicy, suspend, the history limits, the
  jobTemplate with its labels and annotations, the CronJob's own labels and annotations),
  with every field that does not carry over named (`Migration.unmapped`). A `TZ=` or
  `CRON_TZ=` prefix on the schedule (which CronJob once accepted) becomes `timeZone`.
  Refused (`MigrationError`, one line): a name over 52 characters, a schedule Punctual
  refuses (`@every`), a zone in both the prefix and `spec.timeZone` that disagree.
* The switch's hand-over, both ways, by the cursor. On the way in the CronSchedule
  carries `punctual.dev/migrated-from-cronjob: NAME` and
  `punctual.dev/migrated-cursor: <the CronJob's lastScheduleTime>`: ticks after that
  cursor are Punctual's (`records.ScheduleRead` starts there instead of at creation),
  and before firing one Punctual looks for the CronJob's own Job of that tick
  (`cronjob_job_name`, as the CronJob controller names it); found, the tick is recorded
  as fired by the CronJob, never fired again. On the way out (`--undo`) the CronJob's
  `status.lastScheduleTime` is set to Punctual's cursor (`cronjob_status_for_undo`), so
  the CronJob fires only the ticks after it.

What it must never do: perform I/O or read the clock; guess a mapping (a field that does
not carry over exactly is named, not approximated).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Final

from pydantic import ValidationError

from punctual.core.keys import (
    ANNOTATION_MIGRATED_CURSOR,
    ANNOTATION_MIGRATED_FROM_CRONJOB,
    GROUP,
)
from punctual.core.models import CronScheduleSpec, describe_error
from punctual.core.naming import MAX_SCHEDULE_NAME_LENGTH
from punctual.core.planning import tick_source
from punctual.core.schedules import ScheduleError
from punctual.core.times import format_time, maybe_time

# The spec fields a CronJob and a CronSchedule share, with the same meaning and name.
SHARED_FIELDS: Final = (
    "timeZone",
    "startingDeadlineSeconds",
    "concurrencyPolicy",
    "suspend",
    "successfulJobsHistoryLimit",
    "failedJobsHistoryLimit",
)
# Annotations of the CronJob that describe that object, not the schedule: not copied.
DROPPED_ANNOTATIONS: Final = ("kubectl.kubernetes.io/last-applied-configuration",)
_ZONE_PREFIX = re.compile(r"^\s*(CRON_TZ|TZ)=(\S+)\s+(.*)$")


class MigrationError(ValueError):
    """A CronJob that cannot be migrated, and why (one line, naming the field)."""


@dataclass(frozen=True, slots=True)
class Migration:
    """The CronSchedule for a CronJob, and what did not carry over (`path: why`)."""

    manifest: dict[str, Any]
    unmapped: tuple[str, ...]
    notes: tuple[str, ...]  # conversions made, said to the user (a TZ= prefix)

    def with_cursor(self, cursor: datetime) -> dict[str, Any]:
        """The manifest for `--apply`: the CronJob's cursor, so that the ticks after it,
        and only those, are this CronSchedule's."""
        manifest = dict(self.manifest)
        metadata = dict(manifest["metadata"])
        metadata["annotations"] = {
            **metadata.get("annotations", {}),
            ANNOTATION_MIGRATED_CURSOR: format_time(cursor),
        }
        manifest["metadata"] = metadata
        return manifest


def cronjob_job_name(cronjob: str, tick: datetime) -> str:
    """The name the CronJob controller gives the Job of `tick`: `<name>-<unix minutes>`."""
    return f"{cronjob}-{int(tick.timestamp()) // 60}"


def cronjob_cursor(cronjob: Mapping[str, Any]) -> datetime | None:
    """The CronJob's newest scheduled tick (`status.lastScheduleTime`), or its creation
    when it never ran (the CronJob controller starts there too); None if neither reads."""
    status = cronjob.get("status") or {}
    last = maybe_time(status.get("lastScheduleTime"))
    if last is not None:
        return last
    return maybe_time((cronjob.get("metadata") or {}).get("creationTimestamp"))


def migrated_from(annotations: Mapping[str, str]) -> str | None:
    """The CronJob a CronSchedule was migrated from (its Jobs are looked for), or None."""
    name = annotations.get(ANNOTATION_MIGRATED_FROM_CRONJOB)
    return name or None


def cronschedule_from_cronjob(cronjob: Mapping[str, Any]) -> Migration:
    """The CronSchedule equivalent to `cronjob` (a batch/v1 CronJob as read)."""
    meta = cronjob.get("metadata") or {}
    name = str(meta.get("name") or "")
    if len(name) > MAX_SCHEDULE_NAME_LENGTH:
        raise MigrationError(
            f"metadata.name: {name!r} is {len(name)} characters; a CronSchedule's name is at "
            f"most {MAX_SCHEDULE_NAME_LENGTH} (its Jobs add a tick to it), so this CronJob "
            "cannot keep its name"
        )
    source = cronjob.get("spec") or {}
    schedule, zone, notes = _schedule_and_zone(source)
    spec: dict[str, Any] = {"schedule": schedule}
    for field in SHARED_FIELDS:
        if source.get(field) is not None:
            spec[field] = source[field]
    if zone is not None:
        spec["timeZone"] = zone
    template = source.get("jobTemplate") or {}
    template_meta = template.get("metadata") or {}
    # Only what a Job template's metadata keeps in a CronSchedule: its labels and
    # annotations (`kubectl create cronjob` writes a name and a null creationTimestamp
    # there, fields the CronSchedule's schema does not have and strict apply refuses).
    kept_meta = {k: template_meta[k] for k in ("labels", "annotations") if template_meta.get(k)}
    spec["jobTemplate"] = {
        **({"metadata": kept_meta} if kept_meta else {}),
        **({"spec": template["spec"]} if template.get("spec") is not None else {}),
    }
    _check(spec, name)

    unmapped = []
    for field in sorted(set(source) - set(SHARED_FIELDS) - {"schedule", "jobTemplate"}):
        unmapped.append(f"spec.{field}: not a CronJob field Punctual knows; not copied")
    for field in sorted(k for k, v in template_meta.items() if v is not None):
        if field in ("labels", "annotations"):
            continue
        unmapped.append(
            f"spec.jobTemplate.metadata.{field}: not copied (Punctual names and owns its Jobs)"
        )
    if meta.get("ownerReferences"):
        unmapped.append(
            "metadata.ownerReferences: not copied (whatever owns the CronJob does not own "
            "the CronSchedule; give it the owner it should have)"
        )
    if meta.get("finalizers"):
        unmapped.append("metadata.finalizers: not copied (they belong to the CronJob)")

    annotations = {
        key: value
        for key, value in (meta.get("annotations") or {}).items()
        if key not in DROPPED_ANNOTATIONS and not key.startswith(f"{GROUP}/")
    }
    annotations[ANNOTATION_MIGRATED_FROM_CRONJOB] = name
    metadata: dict[str, Any] = {"name": name}
    if meta.get("namespace"):
        metadata["namespace"] = meta["namespace"]
    if meta.get("labels"):
        metadata["labels"] = dict(meta["labels"])
    metadata["annotations"] = annotations
    manifest = {
        "apiVersion": f"{GROUP}/v1",
        "kind": "CronSchedule",
        "metadata": metadata,
        "spec": spec,
    }
    return Migration(manifest, tuple(unmapped), tuple(notes))


def _schedule_and_zone(source: Mapping[str, Any]) -> tuple[str, str | None, list[str]]:
    """spec.schedule without a `TZ=` prefix, the zone the prefix named (or None), and
    what was converted."""
    schedule = str(source.get("schedule") or "").strip()
    if not schedule:
        raise MigrationError("spec.schedule: the CronJob has no schedule")
    prefixed = _ZONE_PREFIX.match(schedule)
    if prefixed is None:
        return schedule, None, []
    variable, zone, rest = prefixed.groups()
    declared = source.get("timeZone")
    if declared is not None and declared != zone:
        raise MigrationError(
            f"spec.schedule: its {variable}={zone} prefix disagrees with spec.timeZone "
            f"{declared!r}; say which zone is meant"
        )
    note = f"spec.schedule: the {variable}={zone} prefix became timeZone: {zone}"
    return rest.strip(), zone, [note]


def _check(spec: Mapping[str, Any], name: str) -> None:
    """Refuse a spec Punctual would refuse, naming the field."""
    schedule = str(spec["schedule"])
    if schedule.startswith("@every"):
        raise MigrationError(
            f"spec.schedule: {schedule!r} is an interval from whenever the controller last "
            "looked; Punctual fires at fixed instants: write it as a cron expression, or "
            "as spec.schedules: [{every: ..., offset: ...}], by hand"
        )
    try:
        parsed = CronScheduleSpec.model_validate(spec)
        tick_source(parsed, uid=name)
    except ValidationError as error:
        raise MigrationError(describe_error(error)) from None
    except ScheduleError as error:
        raise MigrationError(f"{error} (CronJob accepts it; Punctual does not)") from None


def cronjob_status_for_undo(cursor: datetime | None) -> dict[str, Any]:
    """The CronJob status patch that hands the schedule back: the CronJob controller
    fires only ticks after `lastScheduleTime` (a CronSchedule that never fired hands
    back nothing: the CronJob keeps its own)."""
    if cursor is None:
        return {}
    return {"status": {"lastScheduleTime": format_time(cursor)}}
