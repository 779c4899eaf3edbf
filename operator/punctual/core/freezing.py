"""Freeze windows: spans of time in which selected CronSchedules do not fire.

Why it exists: platform teams stop scheduled work during a release, a migration or a
holiday for many schedules at once, without editing each one (argo#7868 asked for a
"no-start range for all CronWorkflows"). A FreezeWindow selects CronSchedules of its
namespace by label and holds them during a fixed window (`from`/`to`) or a recurring
one (a cron expression for its starts, a duration, a zone). Its action is `Skip` (ticks
inside are skipped, the window named as the reason) or `Defer` (they wait, and run once
when the window ends, as one RunLatest tick).

A ClusterFreezeWindow is the same window, cluster-scoped, for a platform team: its
`namespaceSelector` (a label selector over Namespaces; empty: every namespace) chooses
the namespaces, and its `selector` the CronSchedules in them. It holds a schedule
exactly as a FreezeWindow of its namespace would.

This module reads FreezeWindow objects into typed values and answers, purely, "which
window freezes this schedule at this instant, and until when?" (`freeze_over`). It never
talks to the API server, reads the clock, or decides what fires: `deciding` and
`pausing` do, with these answers.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from enum import StrEnum
from typing import Any

from pydantic import Field, ValidationError, model_validator

from punctual.core.models import UtcTime, _ApiModel, describe_error
from punctual.core.schedules import (
    CronTicks,
    ScheduleError,
    load_zone,
    parse_duration,
    parse_fields,
)
from punctual.core.times import format_time

MAX_FREEZE_DURATION = 366 * 24 * 3600  # a recurring window lasts at most a year


class FreezeAction(StrEnum):
    SKIP = "Skip"
    DEFER = "Defer"


class Requirement(_ApiModel):
    """One matchExpressions entry of a label selector."""

    key: str
    operator: str = Field(pattern="^(In|NotIn|Exists|DoesNotExist)$")
    values: tuple[str, ...] = ()


class Selector(_ApiModel):
    """A standard label selector; an empty one selects every CronSchedule."""

    match_labels: dict[str, str] = Field(default_factory=dict)
    match_expressions: tuple[Requirement, ...] = ()


class FreezeWindowSpec(_ApiModel):
    selector: Selector = Field(default_factory=Selector)
    start: UtcTime | None = Field(default=None, alias="from")
    to: UtcTime | None = None
    cron: str | None = Field(default=None, min_length=1, max_length=256)
    duration: str | None = Field(default=None, min_length=1, max_length=32)
    time_zone: str = Field(default="UTC", min_length=1, max_length=64)
    action: FreezeAction = FreezeAction.SKIP

    @model_validator(mode="after")
    def _one_window(self) -> FreezeWindowSpec:
        fixed = self.start is not None or self.to is not None
        recurring = self.cron is not None or self.duration is not None
        if fixed == recurring:
            raise ValueError("set either from and to, or cron and duration")
        if fixed and (self.start is None or self.to is None or self.start >= self.to):
            raise ValueError("from and to are both needed, from before to")
        if recurring and (self.cron is None or self.duration is None):
            raise ValueError("cron and duration are both needed")
        return self


class ClusterFreezeWindowSpec(FreezeWindowSpec):
    namespace_selector: Selector = Field(default_factory=Selector)


@dataclass(frozen=True, slots=True)
class Freeze:
    """One usable FreezeWindow: its name ("namespace/name"; a ClusterFreezeWindow's is
    its name), action, and how to find its window occurrences."""

    name: str
    action: FreezeAction
    selector: Selector
    start: datetime | None = None  # a fixed window
    end: datetime | None = None
    starts: CronTicks | None = None  # a recurring window: its starts, and its length
    length: timedelta = timedelta(0)
    kind: str = "FreezeWindow"  # or ClusterFreezeWindow

    @property
    def title(self) -> str:
        """How status and Events name it: "FreezeWindow team-a/release"."""
        return f"{self.kind} {self.name}"

    def window_at(self, instant: datetime) -> tuple[datetime, datetime] | None:
        """The occurrence [start, end) that contains `instant`, if any."""
        if self.start is not None and self.end is not None:
            return (self.start, self.end) if self.start <= instant < self.end else None
        assert self.starts is not None
        began = self.starts.prev_tick(instant)
        if began is None or instant >= began + self.length:
            return None
        return began, began + self.length

    def selects(self, labels: Mapping[str, str]) -> bool:
        return selects(self.selector, labels)


def read_freeze(body: Mapping[str, Any]) -> Freeze | str:
    """A FreezeWindow object as a Freeze, or why it is unusable (one line naming the field)."""
    meta = body.get("metadata") or {}
    name = f"{meta.get('namespace', '')}/{meta.get('name', '')}"
    try:
        spec = FreezeWindowSpec.model_validate(body.get("spec") or {})
    except ValidationError as error:
        return describe_error(error)
    return _freeze(spec, name, "FreezeWindow")


def read_cluster_freeze(body: Mapping[str, Any]) -> tuple[Freeze, Selector] | str:
    """A ClusterFreezeWindow as a Freeze and its namespaceSelector, or why it is unusable."""
    try:
        spec = ClusterFreezeWindowSpec.model_validate(body.get("spec") or {})
    except ValidationError as error:
        return describe_error(error)
    freeze = _freeze(spec, str((body.get("metadata") or {}).get("name", "")), "ClusterFreezeWindow")
    return freeze if isinstance(freeze, str) else (freeze, spec.namespace_selector)


def _freeze(spec: FreezeWindowSpec, name: str, kind: str) -> Freeze | str:
    if spec.start is not None and spec.to is not None:
        return Freeze(name, spec.action, spec.selector, start=spec.start, end=spec.to, kind=kind)
    assert spec.cron is not None and spec.duration is not None
    try:
        seconds = parse_duration(spec.duration, "spec.duration")
        starts = CronTicks(spec.cron, parse_fields(spec.cron), load_zone(spec.time_zone))
    except ScheduleError as error:
        return str(error)
    if not 0 < seconds <= MAX_FREEZE_DURATION:
        return f"spec.duration: must be more than 0s and at most 366 days, got {spec.duration}"
    length = timedelta(seconds=seconds)
    return Freeze(name, spec.action, spec.selector, starts=starts, length=length, kind=kind)


def selects(selector: Selector, labels: Mapping[str, str]) -> bool:
    """Whether a label selector selects an object with these labels."""
    if any(labels.get(k) != v for k, v in selector.match_labels.items()):
        return False
    for req in selector.match_expressions:
        present = req.key in labels
        if req.operator == "In" and not (present and labels[req.key] in req.values):
            return False
        if req.operator == "NotIn" and present and labels[req.key] in req.values:
            return False
        if req.operator == "Exists" and not present:
            return False
        if req.operator == "DoesNotExist" and present:
            return False
    return True


def freeze_over(
    freezes: Sequence[Freeze], instant: datetime, action: FreezeAction | None = None
) -> tuple[Freeze, datetime] | None:
    """The freeze (of `action`, if given) whose window covers `instant`, with its end;
    of several, the one that ends last (it decides when firing resumes)."""
    found = [
        (f, window[1])
        for f in freezes
        if (action is None or f.action is action) and (window := f.window_at(instant))
    ]
    return max(found, key=lambda pair: (pair[1], pair[0].name), default=None)


def ended_between(
    freezes: Sequence[Freeze], after: datetime, until: datetime, action: FreezeAction
) -> datetime | None:
    """The end of the latest window of `action` that ended in (after, until], if any."""
    ends = []
    for freeze in freezes:
        if freeze.action is not action:
            continue
        if freeze.end is not None:
            ends.append(freeze.end)
        elif freeze.starts is not None:  # the latest occurrence over by `until`
            began = freeze.starts.prev_tick(until - freeze.length)
            if began is not None:
                ends.append(began + freeze.length)
    return max((end for end in ends if after < end <= until), default=None)


def freeze_status(
    body: Mapping[str, Any],
    schedule_labels: Sequence[Mapping[str, str]],
    now: datetime,
    freeze: Freeze | str | None = None,
) -> dict[str, Any]:
    """The status a FreezeWindow (or, given its `freeze`, a ClusterFreezeWindow) should
    have: how many CronSchedules it selects, whether a window holds them now and until
    when, and an InvalidSpec condition (kept with its transition time while unchanged)
    when the spec is unusable."""
    freeze = read_freeze(body) if freeze is None else freeze
    status: dict[str, Any] = {"schedules": 0, "active": False}
    if not isinstance(freeze, str):
        status["schedules"] = sum(1 for labels in schedule_labels if freeze.selects(labels))
        window = freeze.window_at(now)
        if window is not None:
            status["active"] = True
            status["windowStart"], status["windowEnd"] = (format_time(t) for t in window)
    invalid = freeze if isinstance(freeze, str) else None
    status["conditions"] = [invalid_condition(body, invalid, now)]
    return status


def invalid_condition(
    body: Mapping[str, Any], invalid: str | None, now: datetime
) -> dict[str, Any]:
    """The InvalidSpec condition of a FreezeWindow, ClusterFreezeWindow or Calendar: True
    with why, or False; its transition time kept while its status is unchanged."""
    condition = {
        "type": "InvalidSpec",
        "status": "True" if invalid else "False",
        "reason": "InvalidSpec" if invalid else "Valid",
        "message": invalid or "",
    }
    old = body.get("status") or {}
    before = next((c for c in old.get("conditions") or [] if c.get("type") == "InvalidSpec"), None)
    same = before is not None and before.get("status") == condition["status"]
    condition["lastTransitionTime"] = (
        before.get("lastTransitionTime") if same and before else format_time(now)
    )
    return condition
