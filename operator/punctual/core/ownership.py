"""Which installation fires a schedule, and what another one does when it finds it owned.

Why it exists: two Punctual installations (different Leases) can watch the same
namespaces, on purpose (a canary beside the stable one) or by mistake. Their fences
keep their creates apart, but both would claim in the same status and fight over the
cursor. So a schedule names the installation that fires it (`status.installation`, the
namespace/name of its leader Lease, written with every claim), and a schedule picks
installations by class (`spec.className`, the operator's `--class`), as an Ingress picks
its controller by `ingressClassName`.

What it must never do: let an installation write to a schedule that another live
installation owns, or take one over before the owner's Lease has expired.
"""

from __future__ import annotations

from collections.abc import Mapping
from enum import Enum
from typing import Any


class Ownership(Enum):
    """What an installation may do with a schedule."""

    MINE = "mine"  # fire it
    OTHER_CLASS = "other-class"  # another class's schedule: leave it alone, silently
    CONFLICT = "conflict"  # another installation owns it and is alive: write nothing, say so
    TAKEOVER = "takeover"  # its owner is gone: fire it, and say so in status


def owner_of(body: Mapping[str, Any]) -> str | None:
    """The installation named in the schedule's status, if any."""
    owner = (body.get("status") or {}).get("installation")
    return owner if isinstance(owner, str) and owner else None


def class_of(body: Mapping[str, Any]) -> str | None:
    name = (body.get("spec") or {}).get("className")
    return name if isinstance(name, str) and name else None


def ownership(
    body: Mapping[str, Any],
    *,
    installation: str,
    class_name: str | None,
    owner_alive: bool | None,
) -> Ownership:
    """What `installation` (of class `class_name`) may do with the schedule `body`.

    `owner_alive` is whether the installation named in its status holds a live Lease
    (None: it names none, or names this one).
    """
    if class_of(body) != class_name:
        return Ownership.OTHER_CLASS
    owner = owner_of(body)
    if owner is None or owner == installation:
        return Ownership.MINE
    return Ownership.CONFLICT if owner_alive else Ownership.TAKEOVER
