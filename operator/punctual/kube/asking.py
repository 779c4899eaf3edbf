"""A request by annotation, written so that none is lost, and followed until it is taken.

Why it exists: `punctual trigger`, `resume` and `backfill` each ask by writing one
annotation (see `core.asking`). Written blindly (a merge patch, no precondition), a
request landing before the operator read the one before it replaced it: two triggers at
once made one run. Here a request is written only when the annotation holds none the
operator has not taken, with the resourceVersion read as a precondition (a 409 means
someone wrote first: read again), and then followed until status says it was taken.

What it must never do: overwrite a request the operator has not taken, or report one
taken that status does not show taken. It decides nothing about the schedule.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Final

from punctual.clocks import Sleeper
from punctual.core.asking import request_of, taken, waiting
from punctual.kube.client import Api, Body, Conflict

# How often the schedule is read again while a request waits or is followed.
POLL: Final = 0.2


class NotAsked(Exception):
    """The request was not written: another, not yet taken, was ahead of it throughout."""


@dataclass(frozen=True, slots=True)
class Asked:
    """A request written: the schedule as last read, and whether status shows it taken."""

    body: Body
    taken: bool


async def ask(
    api: Api,
    path: str,
    annotation: str,
    value: str,
    *,
    also: Mapping[str, str] | None = None,
    follow: bool = True,
    timeout: float,
    sleeper: Sleeper,
    monotonic: Callable[[], float],
) -> Asked:
    """Write `value` to `annotation` (and the annotations `also`) on the schedule at
    `path` once no earlier request waits there; then, if `follow`, read it again until
    status shows it taken or `timeout` seconds have passed since the start."""
    deadline = monotonic() + timeout
    mine = request_of(annotation, value)
    while True:
        body = await api.get(path)
        ahead = waiting(annotation, body)
        if ahead is not None and ahead != mine:
            if monotonic() >= deadline:
                raise NotAsked(
                    f"request {ahead} is ahead of this one and the operator has not taken it "
                    f"within {timeout:g} s; nothing was written (is the operator running?)"
                )
            await sleeper.sleep(POLL)
            continue
        meta = body["metadata"]
        patch = {
            "metadata": {
                "resourceVersion": meta["resourceVersion"],
                "annotations": {annotation: value, **(also or {})},
            }
        }
        try:
            body = await api.patch(path, patch)
        except Conflict:  # written since it was read: look again
            continue
        break
    while follow:
        current = ((body.get("metadata") or {}).get("annotations") or {}).get(annotation)
        # A newer request is only written once ours is taken (above), so ours was.
        if taken(annotation, value, body.get("status") or {}) or current != value:
            return Asked(body, True)
        if monotonic() >= deadline:
            break
        await sleeper.sleep(POLL)
        body = await api.get(path)
    return Asked(body, False)
