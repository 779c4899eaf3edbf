"""Ready means able to lead: /readyz waits for the whole index; a free Lease goes first
to a replica whose index is whole; one still listing decides only what is due soon.

A Deployment's rollout moves on once the new pod is Ready, and the old leader hands its
Lease over on SIGTERM. A replica that said Ready before it had listed every schedule
would leave them unfired until its list completed: a minute at 100 000. So, with 20 000
schedules (a list that takes seconds) and one that fires every second, listed first:

1. One replica: sample /readyz, then its own `punctual_schedules_indexed`, as fast as
   they answer from the process's start; never may /readyz be 200 while a later sample
   of the index is short. It may take the Lease while listing (it is alone), but only
   after its patience (two retry periods).
2. A second replica, Ready, stands by; a third starts and the leader stops (releasing
   the Lease) while the third lists: the second, whose index is whole, takes the Lease,
   never the third.
3. Once a leader has decided both every-second schedules (a never-decided one has no
   minute to be found by), everything stopped, one new replica: it fires them before its
   own list is in: the one on the list's first page, and the one on its last, found by
   the minute of its next tick (status.nextScheduleMinute, a selectable field). Sampled
   in the order that makes a violation no race: the Jobs first, then the replica's
   `punctual_synced`.

Figures (how long the list took, how many samples) are printed with `-s`.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from pathlib import Path
from typing import Any

import pytest

from punctual.kube.client import KubeClient, NotFound

from .bulk import create_rare, delete_rare
from .bulk import path as bulk_path
from .conftest import Cluster
from .operators import operators, wait_until
from .test_operator import apply, schedule

pytestmark = pytest.mark.e2e

COUNT = 20_000
RETRY = 1.0  # the tests' FAST_LEASE retry period: patience is two of them
BEAT = "aa-beat"  # sorts before bulk-0: on the list's first page
LAST_BEAT = "zz-beat"  # sorts after every bulk-N: on the list's last page


async def holder_of(api: KubeClient, namespace: str) -> str:
    lease = f"/apis/coordination.k8s.io/v1/namespaces/{namespace}/leases/punctual-leader"
    with contextlib.suppress(NotFound):
        return str((await api.get(lease)).get("spec", {}).get("holderIdentity") or "")
    return ""


async def wait_for_minutes(
    api: KubeClient, namespace: str, names: tuple[str, ...], timeout: float
) -> None:
    """Until each schedule's status has a nextScheduleMinute (`timeout` seconds at most)."""
    began = time.monotonic()
    missing: list[str] = list(names)
    while missing and time.monotonic() - began < timeout:
        missing = []
        for name in names:
            body = await api.get(f"{bulk_path(namespace)}/{name}")
            if not (body.get("status") or {}).get("nextScheduleMinute"):
                missing.append(name)
        await asyncio.sleep(0.5)
    assert not missing, f"{missing} never decided in {timeout:.0f}s"


async def beat_jobs_by(
    api: KubeClient, namespace: str, identity: str, beat: str = BEAT
) -> list[dict[str, Any]]:
    jobs = await api.get(
        f"/apis/batch/v1/namespaces/{namespace}/jobs",
        labelSelector=f"punctual.dev/schedule={beat}",
    )
    return [
        j
        for j in jobs.get("items") or []
        if (j["metadata"].get("annotations") or {}).get("punctual.dev/leader") == identity
    ]


async def test_readyz_waits_for_the_index_and_a_free_lease_goes_to_a_whole_one_first(
    crd: Cluster, api: KubeClient, namespace: str, tmp_path: Path
) -> None:
    started = time.monotonic()
    await create_rare(api, namespace, COUNT)
    created = time.monotonic() - started
    apply(crd, namespace, schedule(BEAT, "* * * * * *", run_ms=100))
    apply(crd, namespace, schedule(LAST_BEAT, "* * * * * *", run_ms=100))
    total = COUNT + 2
    try:
        with operators(crd, namespace, tmp_path) as ops:
            # 1. Alone: /readyz never 200 while the index is short.
            r1 = ops.start("r1")
            samples: list[tuple[int, str, float | None, str, float]] = []
            began = time.monotonic()
            while time.monotonic() - began < 120:
                code, body = r1.get("/readyz")
                indexed = r1.metric("punctual_schedules_indexed")
                holder = await holder_of(api, namespace)
                at = time.monotonic() - began
                samples.append((code, body.strip(), indexed, holder, at))
                # Read in this order, a violation cannot be a race: the index only grows.
                assert code != 200 or (indexed or 0) >= total, samples[-3:]
                # Alone, it may lead while listing, but only after its patience.
                assert holder != "r1" or (indexed or 0) >= total or at >= 2 * RETRY, samples[-3:]
                if code == 200 and holder == "r1":
                    break
                assert r1.proc.poll() is None, r1.output()
            ready_after = time.monotonic() - began
            waiting = [s for s in samples if s[0] == 503]
            early = [s for s in samples if s[3] == "r1" and (s[2] or 0) < total]
            print(
                f"\nreadiness: {COUNT} created in {created:.1f}s; Ready {ready_after:.1f}s "
                f"after start; {len(samples)} samples, {len(waiting)} of them 503; "
                f"leading while listing from {early[0][4] if early else None}s"
            )
            assert samples[-1][0] == 200 and samples[-1][3] == "r1", samples[-3:]
            # The test could have failed: it saw the replica unready while it listed.
            assert any("indexed so far" in s[1] for s in waiting), samples[:3]
            assert r1.metric("punctual_synced") == 1
            assert r1.metric("punctual_schedules_indexed") == total

            # 2. A free Lease goes to the standby whose index is whole.
            r2 = ops.start("r2")
            wait_until(lambda: r2.get("/readyz")[0] == 200, 120, what="r2 Ready")
            r3 = ops.start("r3")
            # r3 up and listing (it has read the Lease, or will within a round) ...
            wait_until(lambda: "indexed so far" in r3.get("/readyz")[1], 30, what="r3 listing")
            assert r1.stop() == 0  # ... when r1 releases the Lease
            holders: list[str] = []
            while r3.get("/readyz")[0] != 200:
                holders.append(await holder_of(api, namespace))
                assert "r3" not in holders, holders[-5:]
                assert r3.proc.poll() is None, r3.output()
            assert holders and holders[-1] == "r2", holders[-5:]
            assert await holder_of(api, namespace) == "r2"
            # Both beats decided by a leader, so that each status names the minute of
            # its next tick: a schedule never decided has none to be found by and waits
            # for the whole list, behind the 20 000 first passes (r1 may not have reached
            # the last page's beat before it stopped).
            await wait_for_minutes(api, namespace, (BEAT, LAST_BEAT), 180)

            # 3. A new replica alone fires what is due before its list is in.
            assert r3.stop() == 0 and r2.stop() == 0
            # Retries every 0.5 s: its patience on the released Lease is 1 s, well inside
            # the seconds its list takes.
            r4 = ops.start("r4", lease=("--lease-duration", "6", "--renew-deadline", "4",
                                        "--retry-period", "0.5"))  # fmt: skip
            fired_while_listing: dict[str, float] = {}
            began = time.monotonic()
            while time.monotonic() - began < 60:
                assert r4.proc.poll() is None, r4.output()
                fired = [
                    b for b in (BEAT, LAST_BEAT) if await beat_jobs_by(api, namespace, "r4", b)
                ]
                synced = r4.metric("punctual_synced")  # read after: no race
                if synced == 1:
                    break
                if synced is None:  # /metrics not served yet: nothing to judge by
                    continue
                for beat in fired:
                    fired_while_listing.setdefault(beat, time.monotonic() - began)
                if len(fired_while_listing) == 2:
                    break
            print(f"early: r4 fired {fired_while_listing} (s after its start), unsynced")
            assert set(fired_while_listing) == {BEAT, LAST_BEAT}, (
                f"r4 fired only {fired_while_listing} before its list was in\n"
                + r4.output()[-3000:]
            )
            wait_until(lambda: r4.metric("punctual_synced") == 1, 120, what="r4 synced")
    finally:
        await delete_rare(api, namespace)
