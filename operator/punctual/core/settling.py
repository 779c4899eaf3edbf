"""Settling claims whose Job can never be created.

Why it exists: a create the API server refuses for good (422 Invalid, 403 Forbidden
by a policy, a foreign Job that holds our name) must not stay in flight, or every
pass would try it again forever. Its claim is settled instead: the firing is
recorded as Failed with the reason, and the tick leaves `inFlight` and `active`.
The applier writes the result right after the creates, fenced like any claim.

What it must never do: touch a claim that may still succeed (a transient failure,
or the fence's 403 during a takeover, stays in flight), or change anything but the
failed Jobs' entries.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from punctual.core.models import FiringOutcome


def settle_failures(status: Mapping[str, Any], failed: Mapping[str, str]) -> dict[str, Any]:
    """`status` (as written in the API) with the Jobs in `failed` (name -> why) settled."""
    settled = dict(status)
    settled["inFlight"] = [c for c in status.get("inFlight") or [] if c["job"] not in failed]
    settled["active"] = [a for a in status.get("active") or [] if a["name"] not in failed]
    settled["activeCount"] = len(settled["active"])
    settled["recentFirings"] = [
        {**f, "outcome": FiringOutcome.FAILED.value, "reason": failed[f["job"]]}
        if f.get("job") in failed and f.get("outcome") == FiringOutcome.CREATED.value
        else f
        for f in status.get("recentFirings") or []
    ]
    return settled
