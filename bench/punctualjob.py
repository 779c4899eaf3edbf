"""One Job as Punctual creates it, for the benches that send Punctual's Jobs themselves.

Why it exists: the herd's raw client (`scenarios`) and the Jobs' own cost (`jobcost`)
both send the very Job Punctual would create for a schedule's tick, built by Punctual's
own code (`core.jobs.build_job`, its pod template stamped), and they must build it
alike for their figures to compare.

What it must never do: create anything, or differ from what the operator builds for a
scheduled tick.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from settings import LEASE, NAMESPACE

Body = dict[str, Any]


def punctual_job(owner: Body, tick: datetime, *, leader: str, epoch: int) -> Body:
    """The Job of `owner`'s (a CronSchedule as stored) scheduled `tick`, created by
    `leader` under `epoch` (its previous tick a year before, in UTC)."""
    # Imported here: a bench's --help runs without Punctual importable.
    from punctual.core.jobs import build_job
    from punctual.core.naming import job_name
    from punctual.core.stamping import Firing, FiringKind

    name = owner["metadata"]["name"]
    firing = Firing(
        tick=tick,
        previous_tick=tick.replace(year=tick.year - 1),
        zone=UTC,
        schedule=name,
        namespace=NAMESPACE,
        kind=FiringKind.SCHEDULED,
        epoch=epoch,
    )
    return build_job(
        schedule=owner,
        job_name=job_name(name, tick),
        tick=tick,
        epoch=epoch,
        leader=leader,
        installation=f"{NAMESPACE}/{LEASE}",
        firing=firing,
    )
