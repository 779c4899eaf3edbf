"""Every label, annotation and finalizer key Punctual reads or writes, in one place.

Why it exists: a key is an interface. Users set annotations on a CronSchedule, the
admission policy and dashboards select Jobs by their labels, a workload reads its
tick from its pod's annotations, and a Job's finalizer must be the same string for
every replica and every version. Defined once here, a key cannot drift between the
module that writes it and the one that reads it; `punctual.dev/trigger` (asked on a
CronSchedule, answered on its Job) is one constant, not two.

What it must never do: hold anything but these constants, or import anything. Its
importers import from here; no other module re-exports a key.
"""

from __future__ import annotations

from typing import Final

GROUP: Final = "punctual.dev"

# On a CronSchedule, set by a user or the CLI; each distinct value is one request.
ANNOTATION_TRIGGER: Final = f"{GROUP}/trigger"  # fire now; on its Job: the request answered
ANNOTATION_RESUME: Final = f"{GROUP}/resume"  # resume after pauseOnFailure
ANNOTATION_BACKFILL: Final = f"{GROUP}/backfill"  # backfill a past range (JSON)
# Run the failed (dead) ticks of a range again: {"request": ID, "from": T1, "to": T2}.
ANNOTATION_RERUN_FAILED: Final = f"{GROUP}/rerun-failed"
# Set by `punctual migrate --apply`: the CronJob whose Job of a tick, if it exists, means
# the tick was fired already; and that CronJob's cursor, where this schedule's ticks start.
ANNOTATION_MIGRATED_FROM_CRONJOB: Final = f"{GROUP}/migrated-from-cronjob"
ANNOTATION_MIGRATED_CURSOR: Final = f"{GROUP}/migrated-cursor"

# On every Job (and the CronSchedule's own labels never carry them).
LABEL_SCHEDULE: Final = f"{GROUP}/schedule"
LABEL_SCHEDULE_UID: Final = f"{GROUP}/schedule-uid"
# Which installation created a Job: its fencing binding admits only its own Jobs.
LABEL_INSTALLATION: Final = f"{GROUP}/installation"
# With shards: "<i>-of-<n>", the shard whose Fence entry the admission policy judges it by.
LABEL_SHARD: Final = f"{GROUP}/shard"
ANNOTATION_LEADER: Final = f"{GROUP}/leader"
# On a manual Job: who asked (as `punctual trigger` saw it) and why.
ANNOTATION_TRIGGERED_BY: Final = f"{GROUP}/triggered-by"
ANNOTATION_TRIGGER_REASON: Final = f"{GROUP}/trigger-reason"
# A manual trigger's --env on its Job: a JSON object of the variables it set.
ANNOTATION_ENV_OVERRIDES: Final = f"{GROUP}/env-overrides"
# Keeps a Job until its firing is recorded in the written status (see `jobs`).
FINALIZER: Final = f"{GROUP}/record-firing"

# The facts of a firing, on the Job and its pod template (see `stamping`), each also
# told as an environment variable.
ANNOTATION_TICK: Final = f"{GROUP}/tick"
ANNOTATION_TICK_LOCAL: Final = f"{GROUP}/tick-local"
ANNOTATION_PREVIOUS_TICK: Final = f"{GROUP}/previous-tick"
ANNOTATION_SCHEDULE: Final = f"{GROUP}/schedule"
ANNOTATION_NAMESPACE: Final = f"{GROUP}/namespace"
ANNOTATION_FIRING: Final = f"{GROUP}/firing"
ANNOTATION_EPOCH: Final = f"{GROUP}/epoch"
ANNOTATION_LAST_SUCCESSFUL_TICK: Final = f"{GROUP}/last-successful-tick"
ANNOTATION_ATTEMPT: Final = f"{GROUP}/attempt"
# A run after upstream runs (spec.after): "schedule/run" of each, comma-separated.
ANNOTATION_UPSTREAM: Final = f"{GROUP}/upstream"
# On a Job Punctual failed for spec.pendingTimeoutSeconds: {"at": TIME, "reason": TEXT}.
ANNOTATION_PENDING_TIMEOUT: Final = f"{GROUP}/pending-timeout"

# On a replica's membership Lease (kube.sharding): the installation it belongs to.
LABEL_MEMBER_OF: Final = f"{GROUP}/member-of"
