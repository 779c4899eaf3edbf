"""Manual trigger requests: the value of a CronSchedule's `punctual.dev/trigger` annotation.

Why it exists: a manual trigger is asked for by writing that annotation (what `punctual
trigger` does, with the caller's own credentials), and the operator fires once per
new request. The value has two spellings, both read forever:

* a bare request id (`2026-11-25T10:07:30Z-a1b2c3`, or any text a person writes with
  `kubectl annotate`): the original format, nothing more is known;
* a JSON object, written by `punctual trigger`: `{"request": ID, "triggeredBy": USER,
  "triggerReason": TEXT, "concurrencyPolicy": POLICY}`, every key but `request`
  optional. `concurrencyPolicy` overrides the schedule's for this one firing.

`triggeredBy` is what the CLI saw in the API server's SelfSubjectReview for its caller;
the operator records it as written. Anyone allowed to patch the CronSchedule can write
any name there, so it is an account of who asked, not proof (see the README).

What it must never do: raise on a malformed value other than as `TriggerError`, whose
message names the field; read the clock; do I/O.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Final

from pydantic import BaseModel, ConfigDict, Field, ValidationError
from pydantic.alias_generators import to_camel

from punctual.core.keys import ANNOTATION_TRIGGER
from punctual.core.models import ConcurrencyPolicy, describe_error

FIELD: Final = f"metadata.annotations[{ANNOTATION_TRIGGER}]"
# The policies a trigger may ask for: the ones that decide one firing on its own.
OVERRIDABLE: Final = (ConcurrencyPolicy.ALLOW, ConcurrencyPolicy.FORBID, ConcurrencyPolicy.REPLACE)
MAX_REQUEST: Final = 253
MAX_TRIGGERED_BY: Final = 253
MAX_TRIGGER_REASON: Final = 512


class TriggerError(ValueError):
    """A trigger annotation that cannot be honoured; the message names the field."""


class _Written(BaseModel):
    """The JSON spelling, checked: unknown keys are refused (a typo must not pass)."""

    model_config = ConfigDict(alias_generator=to_camel, extra="forbid", frozen=True)

    request: str = Field(min_length=1, max_length=MAX_REQUEST)
    triggered_by: str | None = Field(default=None, min_length=1, max_length=MAX_TRIGGERED_BY)
    trigger_reason: str | None = Field(default=None, min_length=1, max_length=MAX_TRIGGER_REASON)
    concurrency_policy: str | None = None


@dataclass(frozen=True, slots=True)
class TriggerRequest:
    """One manual trigger request, however it was spelled."""

    request: str  # the id: each new one fires once (status.lastTrigger)
    triggered_by: str | None = None
    trigger_reason: str | None = None
    concurrency_policy: ConcurrencyPolicy | None = None

    def annotation(self) -> str:
        """The annotation value that asks for this request (the JSON spelling)."""
        written = {
            "request": self.request,
            "triggeredBy": self.triggered_by,
            "triggerReason": self.trigger_reason,
            "concurrencyPolicy": None
            if self.concurrency_policy is None
            else self.concurrency_policy.value,
        }
        return json.dumps({k: v for k, v in written.items() if v is not None}, sort_keys=True)

    def describe(self) -> str:
        """For the Triggered Event: `'ID' by admin: "rerun" (concurrencyPolicy Replace)`."""
        text = repr(self.request)
        if self.triggered_by is not None:
            text += f" by {self.triggered_by}"
        if self.trigger_reason is not None:
            text += f": {json.dumps(self.trigger_reason, ensure_ascii=False)}"
        if self.concurrency_policy is not None:
            text += f" (concurrencyPolicy {self.concurrency_policy.value} for this firing)"
        return text


def parse_trigger(value: str) -> TriggerRequest:
    """Read the annotation's value; TriggerError naming the field if it is unusable."""
    if not value.lstrip().startswith("{"):
        return TriggerRequest(request=value)
    try:
        raw = json.loads(value)
    except ValueError as error:
        raise TriggerError(f"{FIELD}: not JSON: {error}") from None
    if not isinstance(raw, dict):
        raise TriggerError(f"{FIELD}: must be a request id or a JSON object")
    try:
        written = _Written.model_validate(raw)
    except ValidationError as error:
        raise TriggerError(describe_error(error, prefix=FIELD)) from None
    return TriggerRequest(
        request=written.request,
        triggered_by=written.triggered_by,
        trigger_reason=written.trigger_reason,
        concurrency_policy=overlap_policy(written.concurrency_policy),
    )


def overlap_policy(
    name: str | None, field: str = f"{FIELD}.concurrencyPolicy"
) -> ConcurrencyPolicy | None:
    """A policy a trigger may ask for, by name; TriggerError naming `field` otherwise."""
    if name is None:
        return None
    allowed = {p.value: p for p in OVERRIDABLE}
    if name not in allowed:
        raise TriggerError(f"{field}: must be one of {', '.join(allowed)}, not {name!r}")
    return allowed[name]


def request_id(value: str) -> str:
    """The request id of an annotation value; the whole value when it is unreadable, so
    that a bad request is reported once, like any other, and not again."""
    try:
        return parse_trigger(value).request
    except TriggerError:
        return value
