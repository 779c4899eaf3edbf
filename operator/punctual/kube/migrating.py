"""The switch between a CronJob and a CronSchedule, both ways, as writes in order.

Why it exists: `punctual migrate --apply` and `--undo` must never double or lose a tick.
The order of the writes is the proof, so it lives here, apart from the command line
(cli.migrating prints and exits) and from the mapping (core.migrating decides what each
object says), and is tested in that order against a fake of our Api and on the real
control plane:

Switch in (`switch_in`), for every CronJob asked, after all of them are checked:
1. suspend the CronJob (the CronJob controller fires nothing after it sees that);
2. wait `settle` (the controller's informer may lag the write by that much);
3. read the CronJob again: its cursor (`status.lastScheduleTime`, else its creation);
4. create the CronSchedule with that cursor and the CronJob's name in annotations: the
   ticks after the cursor are Punctual's, and for each Punctual first looks for the
   CronJob's own Job of that tick (kube.applying), so a tick the controller fired
   between 1 and its informer catching up is recorded as fired, not fired again.
   A create that fails puts the CronJob's suspend back as it was.

Hand back (`hand_back`):
1. suspend the CronSchedule;
2. wait until the operator has seen it (`status.observedGeneration`): from then on no
   claim is made; a claim already made moved the cursor before its Job is created;
3. set the CronJob's `status.lastScheduleTime` to Punctual's cursor (the newest tick
   Punctual decided), so the controller fires only the ticks after it;
4. resume the CronJob (or leave it suspended, if the CronSchedule was).
   An operator that never acknowledges (not running) leaves the CronSchedule's suspend
   as it was and changes nothing else.

What it must never do: change anything before every CronJob asked has been checked (a
refusal changes nothing), or write a CronJob's status other than its lastScheduleTime.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Final

from punctual.core.keys import ANNOTATION_MIGRATED_FROM_CRONJOB
from punctual.core.migrating import (
    Migration,
    MigrationError,
    cronjob_cursor,
    cronjob_status_for_undo,
    cronschedule_from_cronjob,
    migrated_from,
)
from punctual.core.times import maybe_time
from punctual.kube.applying import schedule_path
from punctual.kube.client import Api, ApiError, NotFound

# How long the CronJob controller may take to see the suspension (its informer's lag).
SETTLE_SECONDS: Final = 2.0
# How long the operator may take to acknowledge the CronSchedule's suspension.
ACKNOWLEDGE_SECONDS: Final = 60.0

Sleep = Callable[[float], Awaitable[None]]


class Refused(Exception):
    """Nothing was changed: the lines say why (one per object refused)."""

    def __init__(self, lines: list[str]) -> None:
        super().__init__("; ".join(lines))
        self.lines = lines


class Failed(Exception):
    """A write failed midway; what was changed has been put back (the message says so)."""


@dataclass(frozen=True, slots=True)
class Switched:
    """One CronJob switched to Punctual: the CronSchedule as created, and the cursor."""

    name: str
    migration: Migration
    manifest: dict[str, Any]
    cursor: datetime | None


@dataclass(frozen=True, slots=True)
class HandedBack:
    """One schedule given back to its CronJob from Punctual's cursor (None: none yet)."""

    name: str
    cursor: datetime | None
    suspended: bool  # the CronJob stays suspended, as the CronSchedule was


def cronjobs_path(namespace: str) -> str:
    return f"/apis/batch/v1/namespaces/{namespace}/cronjobs"


def schedules_path(namespace: str) -> str:
    return f"/apis/punctual.dev/v1/namespaces/{namespace}/cronschedules"


async def read_migrations(
    api: Api, namespace: str, names: list[str] | None
) -> list[tuple[str, Migration]]:
    """The CronSchedule for each CronJob named (None: every CronJob of the namespace);
    Refused, naming every one that cannot be migrated, if any cannot."""
    if names is None:
        listed = await api.get(cronjobs_path(namespace))
        cronjobs = list(listed.get("items") or [])
    else:
        cronjobs, missing = [], []
        for name in names:
            try:
                cronjobs.append(await api.get(f"{cronjobs_path(namespace)}/{name}"))
            except NotFound:
                missing.append(f"cronjob {namespace}/{name} not found")
        if missing:
            raise Refused(missing)
    migrations, refused = [], []
    for cronjob in cronjobs:
        name = str(cronjob["metadata"]["name"])
        try:
            migrations.append((name, cronschedule_from_cronjob(cronjob)))
        except MigrationError as error:
            refused.append(f"cronjob {namespace}/{name}: {error}")
    if refused:
        raise Refused(refused)
    return migrations


async def switch_in(
    api: Api,
    namespace: str,
    migrations: list[tuple[str, Migration]],
    *,
    sleep: Sleep,
    settle: float = SETTLE_SECONDS,
) -> list[Switched]:
    """Give each CronJob's schedule to a new CronSchedule (the order in the docstring)."""
    taken = [n for n, _ in migrations if await _exists(api, f"{schedules_path(namespace)}/{n}")]
    if taken:
        raise Refused(
            [f"cronschedule {namespace}/{n} exists; delete it or migrate by hand" for n in taken]
        )
    was_suspended: dict[str, bool] = {}
    for name, migration in migrations:
        was_suspended[name] = bool(migration.manifest["spec"].get("suspend"))
        await _suspend(api, f"{cronjobs_path(namespace)}/{name}", True)
    await sleep(settle)
    switched: list[Switched] = []
    for name, migration in migrations:
        try:
            cronjob = await api.get(f"{cronjobs_path(namespace)}/{name}")
            cursor = cronjob_cursor(cronjob)
            manifest = migration.manifest if cursor is None else migration.with_cursor(cursor)
            await api.create(schedules_path(namespace), manifest)
        except ApiError as error:
            undone = [n for n, _ in migrations if n not in {s.name for s in switched}]
            for left in undone:
                await _suspend(api, f"{cronjobs_path(namespace)}/{left}", was_suspended[left])
            raise Failed(
                f"creating cronschedule {namespace}/{name}: {error}; "
                f"suspend put back as it was on cronjob {', '.join(undone)}"
            ) from None
        switched.append(Switched(name, migration, manifest, cursor))
    return switched


async def hand_back(
    api: Api,
    namespace: str,
    names: list[str] | None,
    *,
    sleep: Sleep,
    wait: float = ACKNOWLEDGE_SECONDS,
    monotonic: Callable[[], float] = time.monotonic,
) -> list[HandedBack]:
    """Give each migrated CronSchedule's schedule back to its CronJob (the docstring's
    order). None: every CronSchedule of the namespace migrated from a CronJob."""
    schedules = await _migrated_schedules(api, namespace, names)
    for schedule in schedules:  # every CronJob must be there before anything changes
        cronjob = migrated_from(schedule["metadata"].get("annotations") or {})
        if not await _exists(api, f"{cronjobs_path(namespace)}/{cronjob}"):
            raise Refused([f"cronjob {namespace}/{cronjob} not found: nothing to give back to"])
    handed: list[HandedBack] = []
    for schedule in schedules:
        name = str(schedule["metadata"]["name"])
        path = schedule_path(namespace, name)
        was_suspended = bool((schedule.get("spec") or {}).get("suspend"))
        written = await _suspend(api, path, True)
        generation = int(written["metadata"].get("generation") or 0)
        status = await _acknowledged(api, path, generation, sleep, wait, monotonic)
        if status is None:
            await _suspend(api, path, was_suspended)
            raise Failed(
                f"cronschedule {namespace}/{name}: the operator did not acknowledge its "
                f"suspension within {wait:.0f}s (is it running?); nothing given back"
            )
        cursor = maybe_time(status.get("lastScheduledTime"))
        cronjob = migrated_from(schedule["metadata"].get("annotations") or {})
        cronjob_path = f"{cronjobs_path(namespace)}/{cronjob}"
        current = cronjob_cursor(await api.get(cronjob_path))
        if cursor is not None and (current is None or cursor > current):
            await api.patch(f"{cronjob_path}/status", cronjob_status_for_undo(cursor))
        await _suspend(api, cronjob_path, was_suspended)
        handed.append(HandedBack(name, cursor, was_suspended))
    return handed


async def _migrated_schedules(
    api: Api, namespace: str, names: list[str] | None
) -> list[dict[str, Any]]:
    if names is None:
        listed = await api.get(schedules_path(namespace))
        return [
            s
            for s in listed.get("items") or []
            if migrated_from(s["metadata"].get("annotations") or {})
        ]
    schedules, refused = [], []
    for name in names:
        try:
            schedule = await api.get(schedule_path(namespace, name))
        except NotFound:
            refused.append(f"cronschedule {namespace}/{name} not found")
            continue
        if not migrated_from(schedule["metadata"].get("annotations") or {}):
            refused.append(
                f"cronschedule {namespace}/{name} was not migrated from a CronJob "
                f"(no {ANNOTATION_MIGRATED_FROM_CRONJOB} annotation)"
            )
            continue
        schedules.append(schedule)
    if refused:
        raise Refused(refused)
    return schedules


async def _acknowledged(
    api: Api,
    path: str,
    generation: int,
    sleep: Sleep,
    wait: float,
    monotonic: Callable[[], float],
) -> dict[str, Any] | None:
    """The CronSchedule's status once the operator has observed `generation`, or None."""
    deadline = monotonic() + wait
    while True:
        status = (await api.get(path)).get("status") or {}
        if int(status.get("observedGeneration") or 0) >= generation:
            return dict(status)
        if monotonic() >= deadline:
            return None
        await sleep(0.5)


async def _suspend(api: Api, path: str, suspend: bool) -> dict[str, Any]:
    return await api.patch(path, {"spec": {"suspend": suspend}})


async def _exists(api: Api, path: str) -> bool:
    try:
        await api.get(path)
    except NotFound:
        return False
    return True
