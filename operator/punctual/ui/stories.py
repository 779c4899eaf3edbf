"""A schedule's page, and the story of one instant: "why didn't it run at T?".

Why it exists: the page of one schedule puts together what a person otherwise reads in
four places (the spec, status.recentFirings, conditions, Events and the Jobs); and it
answers, for any instant a user names, what Punctual recorded about it: not a tick (and
the ticks around it), excluded by its Calendars, held by a freeze window, decided with
this outcome and reason, not yet decided (after the cursor), before the schedule existed,
or older than the bounded history keeps.

Its Jobs, or the objects of its workloadTemplate's kind, are listed with their state as
the operator judges it and the command that shows their logs.

What it must never do: guess. Every answer quotes status, Events or the tick engine; when
they say nothing about T, the answer says that they say nothing.
"""

from __future__ import annotations

import contextlib
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from punctual.core.calendars import Known
from punctual.core.completion import CompletionError, compile_rules, judge
from punctual.core.freezing import Freeze
from punctual.core.schedules import ScheduleError
from punctual.core.times import format_time, maybe_time
from punctual.ui.timelines import source_of

Body = dict[str, Any]


def job_state(job: Mapping[str, Any]) -> str:
    """A Job's state from its conditions: Complete, Failed, Suspended, or Running."""
    status = job.get("status") or {}
    for condition in status.get("conditions") or []:
        if condition.get("status") == "True" and condition.get("type") in (
            "Complete",
            "Failed",
            "Suspended",
        ):
            return str(condition["type"])
    if (job.get("metadata") or {}).get("deletionTimestamp"):
        return "Deleting"
    return "Running" if status.get("active") else "Pending"


def job_rows(jobs: Sequence[Mapping[str, Any]], namespace: str) -> list[Body]:
    """The schedule's Jobs, newest first, with the command that shows their logs."""
    rows = []
    for job in jobs:
        meta = job.get("metadata") or {}
        name = str(meta.get("name", ""))
        rows.append(
            {
                "name": name,
                "created": meta.get("creationTimestamp"),
                "state": job_state(job),
                "logs": f"kubectl logs job/{name} -n {namespace}",
            }
        )
    rows.sort(key=lambda r: str(r["created"] or ""), reverse=True)
    return rows


# How to see a workload's logs, by (group, kind): its pods' label, or its own tool's view.
_LOGS: dict[tuple[str, str], str] = {
    ("argoproj.io", "Workflow"): "kubectl logs -n {ns} -l workflows.argoproj.io/workflow={name}",
    ("tekton.dev", "PipelineRun"): "kubectl logs -n {ns} -l tekton.dev/pipelineRun={name}",
    ("tekton.dev", "TaskRun"): "kubectl logs -n {ns} -l tekton.dev/taskRun={name}",
    ("ray.io", "RayJob"): "kubectl logs job/{name} -n {ns}",  # its submitter Job
    ("jobset.x-k8s.io", "JobSet"): "kubectl logs -n {ns} -l jobset.sigs.k8s.io/jobset-name={name}",
}


def workload_rows(
    items: Sequence[Mapping[str, Any]],
    namespace: str,
    *,
    group: str,
    kind: str,
    resource: str,
    completion: Mapping[str, Any] | None = None,
) -> list[Body]:
    """A workloadTemplate's objects, newest first: their state as the operator judges it
    (`core.completion`: the kind's profile, or the schedule's spec.completion rules), and a
    command for their logs (for a kind it knows no pods of, `kubectl describe`)."""
    try:
        rules = compile_rules((completion or {}).get("succeeded"), (completion or {}).get("failed"))
    except CompletionError:
        rules = None
    pattern = _LOGS.get((group, kind), "kubectl describe {resource}/{name} -n {ns}")
    rows = []
    for item in items:
        meta = item.get("metadata") or {}
        name = str(meta.get("name", ""))
        verdict = judge(item, group=group, kind=kind, rules=rules)
        rows.append(
            {
                "name": name,
                "created": meta.get("creationTimestamp"),
                "state": str(verdict.state),
                "logs": pattern.format(ns=namespace, name=name, resource=resource),
            }
        )
    rows.sort(key=lambda r: str(r["created"] or ""), reverse=True)
    return rows


def event_rows(events: Sequence[Mapping[str, Any]]) -> list[Body]:
    """Events about the schedule, newest first: when, type, reason, message."""
    rows = [
        {
            "at": e.get("lastTimestamp") or e.get("eventTime") or e.get("firstTimestamp"),
            "type": e.get("type"),
            "reason": e.get("reason"),
            "message": e.get("message"),
            "count": e.get("count") or 1,
        }
        for e in events
    ]
    rows.sort(key=lambda r: str(r["at"] or ""), reverse=True)
    return rows


def _chain(body: Mapping[str, Any], at: str) -> list[str] | None:
    """For a schedule fired by its upstreams alone (spec.after without a schedule): what
    its status says of the upstream runs it handled, and of its run of tick `at`."""
    spec = body.get("spec") or {}
    if not spec.get("after") or any(spec.get(k) for k in ("schedule", "schedules", "runAt")):
        return None
    status = body.get("status") or {}
    names = ", ".join(str(a.get("schedule")) for a in spec["after"] if isinstance(a, Mapping))
    lines = [f"It has no ticks of its own: it runs once for each run of {names} (spec.after)."]
    for cursor in status.get("after") or []:
        if not isinstance(cursor, Mapping):
            continue
        handled = f"{cursor.get('schedule')}: its runs up to {cursor.get('tick')} are handled"
        if cursor.get("outcome"):
            ran = cursor.get("job") or "none (not the outcome it waits for)"
            handled += f"; the newest ended {cursor['outcome']}, run after: {ran}"
        lines.append(handled + ".")
    for firing in status.get("recentFirings") or []:
        if isinstance(firing, Mapping) and firing.get("tick") == at:
            reason = f" ({firing['reason']})" if firing.get("reason") else ""
            lines.append(
                f"Its run for {at}: {firing.get('job') or '-'} {firing.get('outcome')}{reason}."
            )
    return lines


def why(
    body: Mapping[str, Any],
    events: Sequence[Mapping[str, Any]],
    instant: datetime,
    calendars: Known | None = None,
    freezes: Sequence[Freeze] = (),
) -> list[str]:
    """What status, Events and the tick engine say about `instant`, one sentence each
    (with its Calendars' entries left out when they are given, and the freeze windows
    that select it named when one holds T)."""
    meta = body.get("metadata") or {}
    status = body.get("status") or {}
    at = format_time(instant)
    chain = _chain(body, at)
    if chain is not None:
        return chain
    try:
        source = source_of(body, calendars)
    except (ScheduleError, ValueError) as error:
        return [f"The schedule cannot be read, so it has no ticks: {error}"]
    before = source.prev_tick(instant)
    if (
        before != instant
        and calendars is not None
        and (body.get("spec") or {}).get("excludeCalendars")
    ):
        with contextlib.suppress(ScheduleError, ValueError):
            if source_of(body).prev_tick(instant) == instant:
                names = ", ".join(body["spec"]["excludeCalendars"])
                return [f"{at} is a tick of the schedule that its Calendars ({names}) exclude."]
    if before != instant:
        after = source.next_tick(instant)
        around = ", ".join(
            f"{word} {format_time(t)}"
            for word, t in (("the tick before is", before), ("the tick after is", after))
            if t is not None
        )
        return [f"{at} is not a tick of this schedule; {around or 'it has no ticks'}."]
    lines: list[str] = []
    for freeze in freezes:
        window = freeze.window_at(instant)
        if window is not None:
            lines.append(
                f"{freeze.title} holds it ({freeze.action}) from {format_time(window[0])} "
                f"until {format_time(window[1])}."
            )
    for firing in status.get("recentFirings") or []:
        if maybe_time(firing.get("tick")) != instant:
            continue
        text = f"{at} was decided: {firing.get('outcome')}"
        if firing.get("reason"):
            text += f" ({firing['reason']})"
        if firing.get("job"):
            text += f", Job {firing['job']}"
        if firing.get("attempt"):
            text += f", attempt {firing['attempt']}"
        if firing.get("dead"):
            text += ", its last attempt (dead)"
        if firing.get("triggeredBy"):
            text += f", triggered by {firing['triggeredBy']}"
        lines.append(text + ".")
    for event in events:
        if at in str(event.get("message") or ""):
            lines.append(f"Event {event.get('reason')}: {event.get('message')}")
    if lines:
        return lines
    created = maybe_time(meta.get("creationTimestamp"))
    cursor = maybe_time(status.get("lastScheduledTime"))
    if created is not None and instant < created:
        return [f"{at} is a tick, but before the schedule was created ({format_time(created)})."]
    if cursor is None or instant > cursor:
        return [
            f"{at} is a tick not yet decided: the cursor (status.lastScheduledTime) is "
            f"{format_time(cursor) if cursor else 'unset'}."
        ]
    firings = status.get("recentFirings") or []
    oldest = firings[-1].get("tick") if firings else None
    return [
        f"{at} is a tick at or before the cursor ({format_time(cursor)}), and neither "
        f"status.recentFirings (oldest {oldest or 'none'}) nor the Events mention it: it "
        "was decided, and its record has aged out of the bounded history."
    ]
