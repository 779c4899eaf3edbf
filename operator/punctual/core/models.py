"""The CronSchedule resource as typed data: spec and status, parsed and dumped.

Why it exists: the rest of the core works on typed, validated values, never on raw
dicts from the API server. Field names follow the API (camelCase aliases) and the
CRD schema (defaults and bounds here match it, and a test checks the enums).
Unknown fields are ignored, so an older operator can read a newer object.

What it must never do: talk to the API server, read the clock, or decide anything
about ticks (that is `planning`). Times are aware UTC datetimes in Python and RFC
3339 UTC strings ("2026-11-25T02:00:00Z") in the API.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import date, datetime, timedelta
from enum import StrEnum
from typing import Annotated, Any, Final, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    PlainSerializer,
    ValidationError,
    model_validator,
)
from pydantic.alias_generators import to_camel

from punctual.core.schedules.combining import parse_duration
from punctual.core.schedules.parsing import ScheduleError
from punctual.core.times import as_utc, format_time

# How many entries status.recentFirings keeps, newest first.
MAX_RECENT_FIRINGS: Final = 20
# How many ticks status.upcomingTicks lists, oldest first.
MAX_UPCOMING_TICKS: Final = 5
# How many ticks status.buffered may hold under BufferAll, at most (spec.maxBuffered).
MAX_BUFFERED: Final = 100
# The most runs of one schedule spec.maxConcurrent may allow at once.
MAX_CONCURRENT: Final = 1000
# Bounds of the lists of a spec (the CRD says the same).
MAX_SCHEDULES: Final = 20
MAX_EXCLUSIONS: Final = 50
MAX_DATES: Final = 400
MAX_CALENDARS: Final = 10  # spec.excludeCalendars
MAX_AFTER: Final = 10  # spec.after: upstreams of one schedule


class MissedRunPolicy(StrEnum):
    """What to do with ticks that became due while nobody fired them."""

    SKIP = "Skip"
    RUN_LATEST = "RunLatest"
    RUN_ALL = "RunAll"


class ConcurrencyPolicy(StrEnum):
    """What to do when a tick is due while an earlier Job still runs."""

    ALLOW = "Allow"
    FORBID = "Forbid"
    REPLACE = "Replace"
    BUFFER_ONE = "BufferOne"  # keep one due tick (the first) until the running Job ends
    BUFFER_ALL = "BufferAll"  # keep every due tick, oldest first, up to spec.maxBuffered

    @property
    def buffers(self) -> bool:
        return self in (ConcurrencyPolicy.BUFFER_ONE, ConcurrencyPolicy.BUFFER_ALL)


class FiringOutcome(StrEnum):
    """What became of one tick, as recorded in status.recentFirings."""

    CREATED = "Created"
    SKIPPED = "Skipped"
    MISSED = "Missed"
    REPLACED = "Replaced"
    SUCCEEDED = "Succeeded"
    FAILED = "Failed"


UtcTime = Annotated[
    datetime,
    AfterValidator(as_utc),
    PlainSerializer(format_time, return_type=str, when_used="json"),
]


class _ApiModel(BaseModel):
    model_config = ConfigDict(
        alias_generator=to_camel,
        populate_by_name=True,
        extra="ignore",
        frozen=True,
    )


class Backoff(StrEnum):
    """How the wait before each retry of a failed tick grows."""

    FIXED = "Fixed"
    EXPONENTIAL = "Exponential"


class Retry(_ApiModel):
    """spec.retry: a failed tick runs again, up to maxAttempts runs in all."""

    max_attempts: int = Field(ge=2, le=20)
    delay_seconds: int = Field(default=10, ge=0, le=86_400)
    backoff: Backoff = Backoff.FIXED
    max_delay_seconds: int | None = Field(default=None, ge=1, le=86_400)

    @model_validator(mode="after")
    def _cap_above_delay(self) -> Retry:
        if self.max_delay_seconds is not None and self.max_delay_seconds < self.delay_seconds:
            raise ValueError("maxDelaySeconds must be at least delaySeconds")
        return self

    def delay(self, attempt: int) -> timedelta:
        """The wait after a failure before `attempt` (2 and up): delaySeconds, doubled for
        each attempt after the second under Exponential, at most maxDelaySeconds."""
        seconds = self.delay_seconds
        if self.backoff is Backoff.EXPONENTIAL:
            seconds = self.delay_seconds * 2 ** max(0, attempt - 2)
        if self.max_delay_seconds is not None:
            seconds = min(seconds, self.max_delay_seconds)
        return timedelta(seconds=seconds)


class PauseOnFailure(_ApiModel):
    """spec.pauseOnFailure: pause after this many failed Jobs in a row."""

    consecutive_failures: int = Field(ge=1, le=MAX_RECENT_FIRINGS)


class ScheduleEntry(_ApiModel):
    """One entry of spec.schedules: a cron expression, or an interval with an offset."""

    cron: str | None = Field(default=None, min_length=1, max_length=256)
    every: str | None = Field(default=None, min_length=1, max_length=32)
    offset: str | None = Field(default=None, min_length=1, max_length=32)

    @model_validator(mode="after")
    def _one_kind(self) -> ScheduleEntry:
        if (self.cron is None) == (self.every is None):
            raise ValueError("set exactly one of cron and every")
        if self.offset is not None and self.every is None:
            raise ValueError("offset needs every")
        return self


class Exclusion(_ApiModel):
    """One entry of spec.exclude (or of a Calendar): a cron expression, whole local
    dates, or a range. A cron or dates entry is read in `time_zone` if set, else in its
    Calendar's zone, else in the schedule's."""

    cron: str | None = Field(default=None, min_length=1, max_length=256)
    dates: tuple[date, ...] | None = Field(default=None, min_length=1, max_length=MAX_DATES)
    start: UtcTime | None = Field(default=None, alias="from")
    to: UtcTime | None = None
    time_zone: str | None = Field(default=None, min_length=1, max_length=64)

    @model_validator(mode="after")
    def _one_kind(self) -> Exclusion:
        kinds = (self.cron is not None) + (self.dates is not None) + (self.start is not None)
        if kinds != 1 or (self.start is None) != (self.to is None):
            raise ValueError("set exactly one of cron, dates, and from with to")
        if self.start is not None and self.to is not None and self.start >= self.to:
            raise ValueError("from must be before to")
        if self.time_zone is not None and self.start is not None:
            raise ValueError("timeZone needs cron or dates (from and to are instants)")
        return self


class WorkloadTemplate(_ApiModel):
    """spec.workloadTemplate: an object of any kind the installation serves, fired as
    `<name>-<tick>` like a Job (see `workloads`)."""

    api_version: str = Field(min_length=1, max_length=253)
    kind: str = Field(min_length=1, max_length=63)
    metadata: dict[str, Any] = Field(default_factory=dict)
    spec: dict[str, Any] = Field(default_factory=dict)


class ChainOn(StrEnum):
    """Which outcome of an upstream's run starts the downstream (spec.after[].on)."""

    SUCCEEDED = "Succeeded"
    FAILED = "Failed"  # its last attempt failed (a tick that will be retried waits)
    FINISHED = "Finished"  # either


class After(_ApiModel):
    """One entry of spec.after: an upstream schedule of the same namespace, the outcome
    of its runs that starts this one, and (a gate, with a schedule of its own) how long
    a tick of this schedule waits for it (see `chaining`)."""

    schedule: str = Field(min_length=1, max_length=253, pattern=r"^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$")
    on: ChainOn = ChainOn.SUCCEEDED
    within: str | None = Field(default=None, min_length=1, max_length=32)
    backfills: bool = True  # a backfill of the upstream (`punctual backfill`) runs this too
    manual: bool = True  # a manual trigger of the upstream (`punctual trigger`) runs this too

    @property
    def within_seconds(self) -> int | None:
        return None if self.within is None else parse_duration(self.within, "within")

    @model_validator(mode="after")
    def _a_duration(self) -> After:
        try:
            _ = self.within_seconds
        except ScheduleError as error:
            raise ValueError(error.reason) from None
        return self


class Completion(_ApiModel):
    """spec.completion: CEL rules that say when a workload succeeded or failed, in place
    of its kind's profile (see `completion`)."""

    succeeded: str | None = Field(default=None, min_length=1, max_length=4096)
    failed: str | None = Field(default=None, min_length=1, max_length=4096)


class CronScheduleSpec(_ApiModel):
    """spec of a CronSchedule. Exactly one of `schedule`, `schedules` and `run_at` is set."""

    schedule: str | None = Field(default=None, min_length=1, max_length=256)
    schedules: list[ScheduleEntry] | None = Field(
        default=None, min_length=1, max_length=MAX_SCHEDULES
    )
    run_at: UtcTime | None = None
    exclude: list[Exclusion] = Field(default_factory=list, max_length=MAX_EXCLUSIONS)
    exclude_calendars: list[str] = Field(default_factory=list, max_length=MAX_CALENDARS)
    start_time: UtcTime | None = None
    end_time: UtcTime | None = None
    max_runs: int | None = Field(default=None, ge=1, le=1_000_000_000)
    time_zone: str = Field(default="UTC", min_length=1, max_length=64)
    starting_deadline_seconds: int | None = Field(default=None, ge=0, le=31_622_400)
    missed_run_policy: MissedRunPolicy = MissedRunPolicy.RUN_LATEST
    max_missed_runs: int = Field(default=10, ge=1, le=1000)
    concurrency_policy: ConcurrencyPolicy = ConcurrencyPolicy.ALLOW
    max_buffered: int = Field(default=10, ge=1, le=MAX_BUFFERED)
    max_concurrent: int | None = Field(default=None, ge=1, le=MAX_CONCURRENT)
    suspend: bool = False
    suspend_until: UtcTime | None = None
    pause_on_failure: PauseOnFailure | None = None
    success_deadline_seconds: int | None = Field(default=None, ge=1, le=31_622_400)
    pending_timeout_seconds: int | None = Field(default=None, ge=1, le=31_622_400)
    retry: Retry | None = None
    concurrency_group: str | None = Field(
        default=None, min_length=1, max_length=63, pattern=r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"
    )
    jitter_seconds: int = Field(default=0, ge=0, le=3600)
    class_name: str | None = Field(default=None, min_length=1, max_length=63)
    successful_jobs_history_limit: int = Field(default=3, ge=0, le=100)
    failed_jobs_history_limit: int = Field(default=1, ge=0, le=100)
    job_template: dict[str, Any] = Field(default_factory=dict)
    workload_template: WorkloadTemplate | None = None
    completion: Completion | None = None
    after: list[After] | None = Field(default=None, min_length=1, max_length=MAX_AFTER)

    @model_validator(mode="after")
    def _one_trigger(self) -> CronScheduleSpec:
        kinds = sum(x is not None for x in (self.schedule, self.schedules, self.run_at))
        if kinds != 1 and not (kinds == 0 and self.after):
            raise ValueError("set exactly one of schedule, schedules and runAt (or only after)")
        self._chain_shape(own=kinds == 1)
        if self.run_at is not None and self.exclude_calendars:
            raise ValueError("excludeCalendars needs schedule or schedules")
        if self.workload_template is not None and "job_template" in self.model_fields_set:
            raise ValueError("set exactly one of jobTemplate and workloadTemplate")
        if self.completion is not None and self.workload_template is None:
            raise ValueError("completion needs workloadTemplate (a Job's is its conditions)")
        if self.concurrency_group and self.concurrency_policy is ConcurrencyPolicy.REPLACE:
            raise ValueError(
                "concurrencyPolicy Replace cannot be used with concurrencyGroup (it would "
                "delete another schedule's run)"
            )
        start, end = self.start_time, self.end_time
        if start is not None and end is not None and start >= end:
            raise ValueError("startTime must be before endTime")
        return self

    def _chain_shape(self, *, own: bool) -> None:
        """spec.after alone fires once per upstream run; with a schedule of its own it is
        a gate, and each entry says how long a tick waits (`within`)."""
        names = [a.schedule for a in self.after or ()]
        if len(set(names)) != len(names):
            raise ValueError("after: an upstream is named twice")
        timed = self.exclude or self.exclude_calendars or self.start_time or self.end_time
        if self.after and not own and (timed or self.max_runs is not None):
            raise ValueError(
                "exclude, excludeCalendars, startTime, endTime and maxRuns need a schedule of "
                "its own (after alone runs once per upstream run)"
            )
        for entry in self.after or ():
            if own and entry.within is None:
                raise ValueError("after: with a schedule of its own (a gate), set within")
            if not own and entry.within is not None:
                raise ValueError("after: within needs a schedule of its own (a gate)")

    @property
    def chained(self) -> bool:
        """Fired by its upstreams' runs alone: spec.after without a schedule of its own."""
        return (
            bool(self.after)
            and self.schedule is None
            and self.schedules is None
            and (self.run_at is None)
        )

    @property
    def limited(self) -> bool:
        """Whether the spec can finish: it has an endTime or a maxRuns."""
        return self.end_time is not None or self.max_runs is not None


class ActiveJob(_ApiModel):
    """A Job of this schedule that has not finished."""

    name: str
    tick: UtcTime
    uid: str | None = None


class BufferedTick(_ApiModel):
    """One entry of status.buffered: a due tick waiting for the running Job to end."""

    tick: UtcTime
    job: str  # its own Job name, as if it had fired on time: still exactly once
    manual: bool = False
    upstream: list[str] | None = None  # a run after upstream runs (spec.after): which


class BackfillState(StrEnum):
    RUNNING = "Running"
    DONE = "Done"
    CANCELLED = "Cancelled"
    INVALID = "Invalid"


class Span(_ApiModel):
    """[from, to): a range of ticks."""

    start: UtcTime = Field(alias="from")
    to: UtcTime


class Backfill(_ApiModel):
    """status.backfill: the newest backfill request and how far it got."""

    request: str
    start: UtcTime | None = Field(default=None, alias="from")
    to: UtcTime | None = None
    overlap: ConcurrencyPolicy = ConcurrencyPolicy.ALLOW
    state: BackfillState
    total: int = 0
    done: int = 0  # ticks this backfill created a Job for
    skipped: int = 0  # ticks that already had their Job (already done)
    cursor: UtcTime | None = None  # the newest tick considered
    message: str | None = None
    # Ranges earlier backfills of this schedule went through: never run again.
    covered: list[Span] = Field(default_factory=list)


class InFlightClaim(_ApiModel):
    """A tick claimed in status whose Job is not yet confirmed created."""

    tick: UtcTime
    job: str
    epoch: int
    backfill: bool | None = None  # True: claimed by a backfill (punctual backfill)
    attempt: int | None = None  # a retry of a failed tick (spec.retry): 2 and up
    # A run after upstream runs (spec.after): "schedule/run" of each, which started it.
    upstream: list[str] | None = None


class RetryingTick(_ApiModel):
    """One entry of status.retrying: a failed tick's next attempt, waiting for its time."""

    tick: UtcTime
    attempt: int
    job: str  # its own Job name (naming.retry_job_name): still exactly once per attempt
    at: UtcTime


class StartedAttempt(_ApiModel):
    """One entry of status.attempted: the newest retry attempt started of a tick."""

    tick: UtcTime
    attempt: int


def _true_or_none(value: bool | None) -> bool | None:
    return True if value else None


class RecordedFiring(_ApiModel):
    """One entry of status.recentFirings (missed and skipped ticks have no Job)."""

    tick: UtcTime
    job: str | None = None
    outcome: FiringOutcome
    epoch: int
    reason: str | None = None
    # A manual trigger: who asked (as `punctual trigger` saw it), why, and the
    # concurrencyPolicy it asked for this one firing (None: the schedule's).
    triggered_by: str | None = None
    # Whether the API server vouched for triggeredBy (the triggers admission policy).
    triggered_by_verified: bool | None = None
    trigger_reason: str | None = None
    concurrency_policy: ConcurrencyPolicy | None = None
    env_overrides: list[str] | None = None  # a trigger's --env, KEY=VALUE (values cut at 64)
    # True: a manual trigger's run. False is kept as None, so not written: 15 bytes an
    # entry, a tenth of a busy schedule's status (readers take a missing one as false).
    manual: Annotated[bool | None, AfterValidator(_true_or_none)] = None
    backfill: bool | None = None  # True: fired by a backfill (punctual backfill)
    attempt: int | None = None  # a retry (spec.retry): 2 and up; None is the first run
    dead: bool | None = None  # True: the tick's last attempt failed (spec.retry)
    upstream: list[str] | None = None  # spec.after: "schedule/run" of the runs that started it


class AfterCursor(_ApiModel):
    """One entry of status.after: per upstream, the newest of its ticks this schedule has
    handled (run after, or passed over with the reason), and what became of it."""

    schedule: str
    tick: UtcTime
    outcome: str | None = None  # the upstream run's outcome at `tick` (Succeeded, Failed)
    job: str | None = None  # this schedule's run for it, when one was started
    # Backfilled upstream ticks handled (older than `tick`), while the upstream records them.
    backfilled: list[UtcTime] | None = None


class GatedTick(_ApiModel):
    """One entry of status.gated: a tick of a gate (a schedule with spec.after) waiting
    for its upstreams' runs of its period, at most until `until`."""

    tick: UtcTime
    job: str
    until: UtcTime


class Condition(_ApiModel):
    """A standard Kubernetes condition."""

    type: str
    status: Literal["True", "False", "Unknown"]
    reason: str
    message: str = ""
    last_transition_time: UtcTime
    observed_generation: int | None = None


class CronScheduleStatus(_ApiModel):
    """status of a CronSchedule; `last_scheduled_time` is the cursor."""

    last_scheduled_time: UtcTime | None = None
    next_schedule_time: UtcTime | None = None
    last_successful_time: UtcTime | None = None
    schedule_fingerprint: str | None = None
    active: list[ActiveJob] = Field(default_factory=list)
    # The claim window: scheduled ticks after the cursor up to this instant are claimed.
    claimed_through: UtcTime | None = None
    claim_epoch: int | None = None  # the epoch of the leader that wrote claimed_through
    in_flight: list[InFlightClaim] = Field(default_factory=list)
    recent_firings: list[RecordedFiring] = Field(default_factory=list)
    conditions: list[Condition] = Field(default_factory=list)
    observed_generation: int | None = None
    active_count: int | None = None
    upcoming_ticks: list[UtcTime] | None = None
    runs: int | None = None  # scheduled ticks fired while spec.maxRuns is set
    runs_remaining: int | None = None
    last_trigger: str | None = None  # the last manual trigger request handled
    buffered: list[BufferedTick] | None = None  # BufferOne/BufferAll: due ticks waiting
    retrying: list[RetryingTick] | None = None  # spec.retry: failed ticks' next attempts
    # spec.retry: the newest attempt started of each tick a Job of is still kept
    attempted: list[StartedAttempt] | None = None
    backfill: Backfill | None = None  # the newest backfill request and its progress
    consecutive_failures: int | None = None  # failed Jobs in a row, under pauseOnFailure
    last_resume: str | None = None  # the last resume request handled (punctual resume)
    last_rerun: str | None = None  # the last rerun-failed request handled (backfill --failed)
    last_successful_tick: UtcTime | None = None  # the tick of the newest succeeded Job
    installation: str | None = None  # the installation that fires it: "namespace/lease"
    after: list[AfterCursor] | None = None  # spec.after: the upstream runs handled
    gated: list[GatedTick] | None = None  # spec.after as a gate: ticks waiting for upstreams

    @property
    def cursor(self) -> datetime | None:
        """The newest decided tick (status.lastScheduledTime)."""
        return self.last_scheduled_time


def parse_body(body: Mapping[str, Any]) -> tuple[CronScheduleSpec, CronScheduleStatus]:
    """Read a raw CronSchedule (as from the API) into typed spec and status.

    Raises pydantic.ValidationError; `describe_error` turns it into one line.
    """
    spec = CronScheduleSpec.model_validate(body.get("spec") or {})
    status = parse_status(body)
    return spec, status


def parse_status(body: Mapping[str, Any]) -> CronScheduleStatus:
    """Read only the status of a raw CronSchedule (an empty status if none)."""
    return CronScheduleStatus.model_validate(body.get("status") or {})


def dump_status(status: CronScheduleStatus) -> dict[str, Any]:
    """The status as the API wants it: camelCase keys, RFC 3339 strings, no nulls; with
    `nextScheduleMinute` beside `nextScheduleTime` (`minute_of`)."""
    dumped: dict[str, Any] = status.model_dump(mode="json", by_alias=True, exclude_none=True)
    upcoming = dumped.get("nextScheduleTime")
    if upcoming is not None:
        dumped["nextScheduleMinute"] = minute_of(upcoming)
    return dumped


def minute_of(text: str) -> str:
    """An RFC 3339 UTC instant as `format_time` writes it, cut to its minute: the value
    of status.nextScheduleMinute, which the API server selects on (kube.schedulewatching,
    `list_due`)."""
    return text[:16] + ":00Z"


def dump_spec(spec: CronScheduleSpec) -> dict[str, Any]:
    """The spec as the API spells it (for tests and for `punctual` CLI output)."""
    dumped: dict[str, Any] = spec.model_dump(mode="json", by_alias=True, exclude_none=True)
    return dumped


def describe_error(error: ValidationError, prefix: str = "spec") -> str:
    """One line naming the first bad field: `spec.maxMissedRuns: Input should be ...`."""
    first = error.errors()[0]
    path = prefix
    for part in first["loc"]:
        if isinstance(part, int):
            path += f"[{part}]"
        elif part != "":
            path += f".{part}"
    return f"{path}: {first['msg']}"
