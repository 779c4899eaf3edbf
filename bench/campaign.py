"""Every chosen scenario at every size, one after the other, each result saved as it comes.

Why it exists: a whole benchmark takes tens of minutes and is often interrupted; this
module runs the scenarios in order, starts a scenario once more with a larger margin
when its set-up overran the tick, writes each scenario's raw figures (and the machine's
description) as soon as they are known, and on Ctrl-C or SIGTERM stops exactly the
operators and the cluster the bench started.

What it must never do: be imported before run.py's main() has put the benchmarked
source on sys.path (it imports `punctual` through the scenarios), overwrite a result
with a partial one, or do anything at import time.
"""

from __future__ import annotations

import asyncio
import json
import math
from typing import Any

from clock import log, wall
from cluster import make_cluster
from machine import machine
from replicas import STARTED
from scenarios import SetupOverrun, execute
from settings import Scenario, Settings, rel


def run_all(sizes: list[int], scenarios: list[Scenario], settings: Settings) -> bool:
    """Every scenario at every size; False if interrupted."""
    info = machine(settings.rev)
    (settings.results / "raw" / "machine.json").write_text(json.dumps(info, indent=2) + "\n")
    began = wall()
    for n in sizes:
        for scenario in scenarios:
            if settings.profiler and scenario.kind not in ("punctual", "failover"):
                continue
            result = run_one(scenario, n, settings)
            if result is None:
                return False
            result["machine"] = info
            path = settings.result_path(scenario, n)
            path.write_text(json.dumps(clean(result), indent=1) + "\n")
            log(f"wrote {rel(path)} ({result['duration']:.0f}s)")
    log(f"all scenarios done in {(wall() - began) / 60:.1f} min")
    return True


def run_one(scenario: Scenario, n: int, settings: Settings) -> dict[str, Any] | None:
    """One scenario, once more with a larger margin if its set-up overran the tick; None if
    interrupted (the operators and the cluster are stopped then)."""
    result: dict[str, Any] | None = None
    for attempt, factor in enumerate((1.0, 2.5)):
        try:
            result = asyncio.run(execute(scenario, n, settings, factor))
            break
        except SetupOverrun as error:
            log(f"{scenario.id} n={n}: {error}; again with more margin")
            if attempt:
                raise
        except KeyboardInterrupt:
            log("interrupted: stopping the operators and the bench cluster")
            for op in list(STARTED):
                op.kill()
            make_cluster(scenario.profile, settings.pod_run_ms).down()
            return None
    assert result is not None
    return result


def clean(value: Any) -> Any:
    """JSON without NaN or infinities (null instead), tuples as lists."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {str(k): clean(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [clean(v) for v in value]
    return value
