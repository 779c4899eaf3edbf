"""Manual trigger requests: the value of a CronSchedule's `punctual.dev/trigger` annotation.

Why it exists: a manual trigger is asked for by writing that annotation (what `punctual
trigger` does, with the caller's own credentials), and the operator fires once per
new request. The value has two spellings, both read forever:

* a bare request id (`2026-11-25T10:07:30Z-a1b2c3`, or any text a person writes with
  `kubectl annotate`): the original format, nothing more is known;
* a JSON object, written by `punctual trigger`: `{"request": ID, "triggeredBy": USER,
  "triggerReason": TEXT, "concurrencyPolicy": POLICY, "env": {KEY: VALUE}}`, every key
  but `request` optional. `concurrencyPolicy` overrides the schedule's for this one
  firing; `env` sets (or replaces) those variables in every container of that one run
  (at most 32, each value at most 4 KiB, names as Kubernetes takes them and none of
  Punctual's own `PUNCTUAL_` variables). Whoever may patch the CronSchedule may ask.

`triggeredBy` is what the CLI saw in the API server's SelfSubjectReview for its caller;
the operator records it as written. Anyone allowed to patch the CronSchedule can write
any name there, so it is an account of who asked, not proof (see the README).

What it must never do: raise on a malformed value other than as `TriggerError`, whose
message names the field; read the clock; do I/O.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
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
MAX_ENV_OVERRIDES: Final = 32
MAX_ENV_VALUE: Final = 4096
# Kubernetes' rule for an environment variable's name (IsEnvVarName, before 1.32's relaxed
# rule, which not every cluster has): letters, digits, '_', '-', '.', not a digit first.
_ENV_NAME: Final = re.compile(r"^[-._a-zA-Z][-._a-zA-Z0-9]*$")
OWN_PREFIX: Final = "PUNCTUAL_"


class TriggerError(ValueError):
    """A trigger annotation that cannot be honoured; the message names the field."""


class _Written(BaseModel):
    """The JSON spelling, checked: unknown keys are refused (a typo must not pass)."""

    model_config = ConfigDict(alias_generator=to_camel, extra="forbid", frozen=True)

    request: str = Field(min_length=1, max_length=MAX_REQUEST)
    triggered_by: str | None = Field(default=None, min_length=1, max_length=MAX_TRIGGERED_BY)
    trigger_reason: str | None = Field(default=None, min_length=1, max_length=MAX_TRIGGER_REASON)
    concurrency_policy: str | None = None
    env: dict[str, str] | None = None


@dataclass(frozen=True, slots=True)
class TriggerRequest:
    """One manual trigger request, however it was spelled."""

    request: str  # the id: each new one fires once (status.lastTrigger)
    triggered_by: str | None = None
    trigger_reason: str | None = None
    concurrency_policy: ConcurrencyPolicy | None = None
    env: tuple[tuple[str, str], ...] = ()  # (name, value): set in every container
    # The API server vouched for `triggered_by` (crds/triggers.punctual.dev.yaml): the
    # policy is in force and the caller's own name is the plain annotation, the same one.
    verified: bool = False

    def annotation(self) -> str:
        """The annotation value that asks for this request (the JSON spelling)."""
        written = {
            "request": self.request,
            "triggeredBy": self.triggered_by,
            "triggerReason": self.trigger_reason,
            "concurrencyPolicy": None
            if self.concurrency_policy is None
            else self.concurrency_policy.value,
            "env": dict(self.env) or None,
        }
        return json.dumps({k: v for k, v in written.items() if v is not None}, sort_keys=True)

    def describe(self) -> str:
        """For the Triggered Event: `'ID' by admin: "rerun" (concurrencyPolicy Replace)`."""
        text = repr(self.request)
        if self.triggered_by is not None:
            text += f" by {self.triggered_by}" + ("" if self.verified else " (unverified)")
        if self.trigger_reason is not None:
            text += f": {json.dumps(self.trigger_reason, ensure_ascii=False)}"
        if self.concurrency_policy is not None:
            text += f" (concurrencyPolicy {self.concurrency_policy.value} for this firing)"
        if self.env:
            text += f" with {', '.join(shown(self.env))}"
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
        env=checked_env((written.env or {}).items(), f"{FIELD}.env"),
    )


def parse_env(pairs: Iterable[str], field: str = "--env") -> tuple[tuple[str, str], ...]:
    """`KEY=VALUE` texts as overrides; TriggerError naming the first bad one."""
    found = []
    for pair in pairs:
        name, sep, value = pair.partition("=")
        if not sep:
            raise TriggerError(f"{field} {pair!r}: must be KEY=VALUE")
        found.append((name, value))
    return checked_env(found, field)


def checked_env(pairs: Iterable[tuple[str, str]], field: str) -> tuple[tuple[str, str], ...]:
    """Overrides as a trigger may ask them (the last of a name wins); TriggerError naming
    the first that is not."""
    env: dict[str, str] = {}
    for name, value in pairs:
        if not isinstance(name, str) or not _ENV_NAME.match(name):
            raise TriggerError(
                f"{field} {name!r}: not a variable name Kubernetes takes "
                "(letters, digits, '_', '-' and '.', not a digit first)"
            )
        if name.startswith(OWN_PREFIX):
            raise TriggerError(f"{field} {name}: {OWN_PREFIX}* are Punctual's own variables")
        if not isinstance(value, str) or len(value.encode()) > MAX_ENV_VALUE:
            raise TriggerError(f"{field} {name}: the value is over {MAX_ENV_VALUE} bytes")
        env[name] = value
    if len(env) > MAX_ENV_OVERRIDES:
        raise TriggerError(f"{field}: {len(env)} variables, at most {MAX_ENV_OVERRIDES}")
    return tuple(sorted(env.items()))


def shown(env: Iterable[tuple[str, str]] | Mapping[str, str], width: int = 64) -> list[str]:
    """`KEY=VALUE` for people (status, Events, history), each value cut at `width`."""
    pairs = env.items() if isinstance(env, Mapping) else env
    return [f"{k}={v if len(v) <= width else v[: width - 1] + '…'}" for k, v in pairs]


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
