"""`python -m tests.sim SEEDS=1-50 HOURS=24`: a campaign of simulated runs, one per seed.

Why it exists: the fixed seeds in tests/sim/test_sim.py take a minute; finding the bugs
where features meet takes volume. This runs each seed for HOURS simulated hours, prints
one line per seed, then the simulated hours per second, the steps per second and how
many times each promise was checked, and the seed, broken promise and trace of every
failing run. It exits 1 if any promise broke.

Python randomizes the hashes of strings per process, and the operator iterates sets of
strings here and there, so for a replay that is exact across processes this re-runs
itself with PYTHONHASHSEED=0 when that is not set (within one process a seed always
replays exactly).

What it must never do: read the wall clock for anything but the speed it reports.
"""

from __future__ import annotations

import dataclasses
import os
import sys
import time
from datetime import timedelta

from tests.sim.checking import PROMISES
from tests.sim.simulating import Options, Result, simulate

USAGE = (
    "usage: python -m tests.sim [SEEDS=1-50|1,4,9] [HOURS=24] [SCHEDULES=4] [QUIET=1] "
    "[AVOID_KNOWN=1] [SKEW=seconds] [WINDOW=seconds of --claim-window] "
    "[STATUS_DELAY=seconds of --status-delay] [AHEAD=seconds of --decide-ahead]"
)


def seeds_of(text: str) -> list[int]:
    """`1-50`, `3,7,9` or `1-5,9`."""
    seeds: list[int] = []
    for part in text.split(","):
        if "-" in part:
            first, last = part.split("-", 1)
            seeds += range(int(first), int(last) + 1)
        elif part.strip():
            seeds.append(int(part))
    return seeds


def main(argv: list[str]) -> int:
    settings = {
        "SEEDS": "1-10",
        "HOURS": "24",
        "SCHEDULES": "4",
        "QUIET": "",
        "AVOID_KNOWN": "",
        "SKEW": "0",
        "WINDOW": "",  # seconds of --claim-window; unset: chosen by each seed (10, 60, 600)
        "STATUS_DELAY": "",  # seconds of --status-delay; unset: the default (10)
        "AHEAD": "",  # seconds of --decide-ahead; unset: the default (0.5)
    }
    for arg in argv:
        key, _, value = arg.partition("=")
        if key not in settings or not value:
            print(USAGE, file=sys.stderr)
            return 2
        settings[key] = value
    if os.environ.get("PYTHONHASHSEED") != "0":  # an exact replay across processes
        os.environ["PYTHONHASHSEED"] = "0"
        os.execv(sys.executable, [sys.executable, "-m", "tests.sim", *argv])
    seeds = seeds_of(settings["SEEDS"])
    hours = float(settings["HOURS"])
    options = Options(
        hours=hours,
        schedules=int(settings["SCHEDULES"]),
        avoid_known=bool(settings["AVOID_KNOWN"]),
        clock_skew=float(settings["SKEW"]),  # a planted bug: the replicas' clocks ahead
        claim_window=timedelta(seconds=float(settings["WINDOW"])) if settings["WINDOW"] else None,
    )
    if settings["STATUS_DELAY"]:
        delay = timedelta(seconds=float(settings["STATUS_DELAY"]))
        options = dataclasses.replace(options, status_delay=delay)
    if settings["AHEAD"]:
        ahead = timedelta(seconds=float(settings["AHEAD"]))
        options = dataclasses.replace(options, decide_ahead=ahead)
    results: list[Result] = []
    started = time.perf_counter()
    for seed in seeds:
        result = simulate(seed, options)
        results.append(result)
        verdict = "ok" if result.ok else f"BROKEN {result.broken[0].promise}"
        line = (
            f"seed {seed}: {verdict}, {result.steps} steps, {result.creates} Jobs, "
            f"{result.faults} faults, {result.actions} requests, "
            f"{result.refused_by_fence} refused by the fence, "
            f"{len(result.caveats)} backfill re-runs (README caveat), "
            f"{result.status_by_non_holder} status writes of a non-holder, "
            f"{result.wall_seconds:.1f} s"
        )
        print(line, flush=True)
        if not result.ok and not settings["QUIET"]:
            print(result.report(), flush=True)
    wall = time.perf_counter() - started
    simulated = sum(r.simulated_hours for r in results)
    steps = sum(r.steps for r in results)
    print(
        f"\n{len(results)} seeds, {simulated:.1f} simulated hours in {wall:.1f} s: "
        f"{simulated / wall:.2f} simulated hours/s, {steps / wall:.0f} steps/s"
    )
    print("promises checked:")
    for promise, sentence in PROMISES.items():
        count = sum(r.checked.get(promise, 0) for r in results)
        print(f"  {promise:22} {count:>9}  {sentence[:90]}")
    broken = [r for r in results if not r.ok]
    if broken:
        print(f"\nBROKEN in {len(broken)} seeds: " + ", ".join(str(r.seed) for r in broken))
        for result in broken:
            print(f"  seed {result.seed}: {result.broken[0]}".splitlines()[0])
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
