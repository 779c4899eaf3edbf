"""Deterministic Job names: one name per (schedule, tick).

Why it exists: the Job name is the firing log's unique index. Creating the Job for
a tick twice gets 409 AlreadyExists from the API server, because both attempts
derive the same name from the schedule's name and the tick's nominal UTC instant
(`nightly-report-1795485600`). Two different ticks, down to the second and
including the two UTC instants of a fall-back 01:30, always get different names.

What it must never do: use anything but the schedule name and the nominal tick (no
jitter, no clock, no randomness, no epoch), or produce a name longer than 63
characters or outside DNS-1123.
"""

from __future__ import annotations

import hashlib
import re
from datetime import datetime, timedelta
from typing import Final

from punctual.core.times import EPOCH, unix_seconds

# CronSchedule names are at most 52 characters (the CRD enforces it), so that the
# "-<unix seconds>" suffix (10 digits until the year 2286) keeps Job names <= 63.
MAX_SCHEDULE_NAME_LENGTH: Final = 52
MAX_JOB_NAME_LENGTH: Final = 63

_SCHEDULE_NAME = re.compile(r"[a-z0-9]([-a-z0-9.]*[a-z0-9])?")


def tick_seconds(tick: datetime) -> int:
    """The nominal tick as whole Unix seconds (rounded down)."""
    if tick.utcoffset() is None:
        raise ValueError(f"tick {tick!r} must be an aware datetime")
    return unix_seconds(tick)


def retry_job_name(schedule_name: str, tick: datetime, attempt: int) -> str:
    """Attempt `attempt` (2 and up) of a tick (spec.retry): `<schedule>-r<8 hex>`, the hex
    of sha256("<unix seconds of the tick>/<attempt>"); at most 52 + 10 = 62 characters,
    one name per (tick, attempt), never a tick's own `<schedule>-<seconds>`."""
    digest = hashlib.sha256(f"{tick_seconds(tick)}/{attempt}".encode()).hexdigest()[:8]
    return f"{schedule_name}-r{digest}"


def job_name(schedule_name: str, tick: datetime) -> str:
    """`<schedule-name>-<unix seconds of the nominal tick>`, at most 63 characters."""
    if len(schedule_name) > MAX_SCHEDULE_NAME_LENGTH:
        raise ValueError(
            f"schedule name {schedule_name!r} is longer than {MAX_SCHEDULE_NAME_LENGTH} characters"
        )
    if not _SCHEDULE_NAME.fullmatch(schedule_name):
        raise ValueError(f"schedule name {schedule_name!r} is not a DNS-1123 name")
    seconds = tick_seconds(tick)
    if seconds < 0:
        raise ValueError(f"tick {tick.isoformat()} is before 1970")
    name = f"{schedule_name}-{seconds}"
    if len(name) > MAX_JOB_NAME_LENGTH:
        raise ValueError(f"Job name {name!r} would be longer than {MAX_JOB_NAME_LENGTH} characters")
    return name


def parse_tick_from_job_name(schedule_name: str, name: str) -> datetime | None:
    """The tick a Job name stands for, or None if the name is not one of ours."""
    prefix = f"{schedule_name}-"
    if not name.startswith(prefix):
        return None
    digits = name[len(prefix) :]
    if not digits.isascii() or not digits.isdigit() or (len(digits) > 1 and digits[0] == "0"):
        return None
    return EPOCH + timedelta(seconds=int(digits))
