"""Requests made by annotation, and whether the operator has taken them.

Why it exists: a person asks the operator for something by writing an annotation on the
CronSchedule (`punctual trigger`: punctual.dev/trigger, `punctual resume`:
punctual.dev/resume, `punctual backfill`: punctual.dev/backfill, `backfill --failed`:
punctual.dev/rerun-failed). Each annotation holds one request; the operator acts once
per new value and says so in status (lastTrigger, lastResume, backfill.request,
lastRerun). A second request written before the operator read the first overwrote it:
two `punctual trigger` at once lost one, and both said "triggered" (Temporal #3614 is
the same bug). So a request is written only when the annotation holds none the operator
has not taken (`waiting`), with the resourceVersion read as precondition (a 409: read
again), and the CLI waits until status says its own was taken (`taken`). Requests are
thus served one at a time, in the order their writes land, and none is lost.

What it must never do: read the clock or do I/O (the CLI polls; this only judges what it
read), or call a request taken that status does not show taken.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, Final

from punctual.core.keys import (
    ANNOTATION_BACKFILL,
    ANNOTATION_RERUN_FAILED,
    ANNOTATION_RESUME,
    ANNOTATION_TRIGGER,
)
from punctual.core.triggers import request_id

# The annotations that carry a request, each with the status field that takes it.
REQUESTS: Final = (
    ANNOTATION_TRIGGER,
    ANNOTATION_RESUME,
    ANNOTATION_BACKFILL,
    ANNOTATION_RERUN_FAILED,
)


def request_of(annotation: str, value: str) -> str:
    """The request id an annotation's value carries (the value itself when unreadable:
    the operator then records the value, see `triggers.request_id` and `retrying`)."""
    if annotation == ANNOTATION_TRIGGER:
        return request_id(value)
    if annotation == ANNOTATION_RESUME:
        return value
    try:
        found = json.loads(value).get("request")
    except (ValueError, AttributeError):
        found = None
    if found:
        return str(found)
    # Unreadable: the backfill records its first 128 characters, a rerun all of it.
    return value[:128] if annotation == ANNOTATION_BACKFILL else value


def taken(annotation: str, value: str, status: Mapping[str, Any]) -> bool:
    """Whether status shows the request `value` of `annotation` taken by the operator:
    fired, skipped, refused as invalid, or (a cancel) with no backfill left running."""
    request = request_of(annotation, value)
    if annotation == ANNOTATION_TRIGGER:
        return status.get("lastTrigger") == request
    if annotation == ANNOTATION_RESUME:
        return status.get("lastResume") == request
    if annotation == ANNOTATION_RERUN_FAILED:
        return status.get("lastRerun") in (request, value)
    if annotation == ANNOTATION_BACKFILL:
        backfill = status.get("backfill") or {}
        if backfill.get("request") == request:
            return True
        try:
            cancel = bool(json.loads(value).get("cancel"))
        except (ValueError, AttributeError):
            cancel = False
        # A cancel leaves the request it stopped in status: it was taken once nothing runs.
        return cancel and backfill.get("state") != "Running"
    raise ValueError(f"{annotation} carries no request")


def waiting(annotation: str, body: Mapping[str, Any]) -> str | None:
    """The request `annotation` holds that the operator has not taken yet (its id), if
    any: a new request written now would overwrite it."""
    value = ((body.get("metadata") or {}).get("annotations") or {}).get(annotation)
    if not value or taken(annotation, value, body.get("status") or {}):
        return None
    return request_of(annotation, value)
