"""Ready means able to lead: /readyz and the Lease wait for the whole index.

A Deployment's rollout moves on once the new pod is Ready, and the old leader hands its
Lease over on SIGTERM. A replica that said Ready (or took a Lease) before it had listed
every schedule would leave them unfired until its list completed: a minute at 100 000.
So, with 20 000 schedules (a list that takes seconds): sample /readyz, then the
replica's own `punctual_schedules_indexed`, then the Lease, as fast as they answer from
the process's start; never may /readyz be 200, or the Lease be this replica's, while a
later sample of the index is short of the count.

Figures (how long the list took, how many samples) are printed with `-s`.
"""

from __future__ import annotations

import contextlib
import time
from pathlib import Path

import pytest

from punctual.kube.client import KubeClient, NotFound

from .bulk import create_rare, delete_rare
from .conftest import Cluster
from .operators import operators

pytestmark = pytest.mark.e2e

COUNT = 20_000


async def test_readyz_and_the_lease_wait_until_every_schedule_is_indexed(
    crd: Cluster, api: KubeClient, namespace: str, tmp_path: Path
) -> None:
    started = time.monotonic()
    await create_rare(api, namespace, COUNT)
    created = time.monotonic() - started
    lease = f"/apis/coordination.k8s.io/v1/namespaces/{namespace}/leases/punctual-leader"
    try:
        with operators(crd, namespace, tmp_path) as ops:
            op = ops.start("r1")
            samples: list[tuple[int, str, float | None, str]] = []
            began = time.monotonic()
            while time.monotonic() - began < 120:
                code, body = op.get("/readyz")
                holder = ""
                with contextlib.suppress(NotFound):
                    holder = (await api.get(lease)).get("spec", {}).get("holderIdentity") or ""
                indexed = op.metric("punctual_schedules_indexed")
                samples.append((code, body.strip(), indexed, holder))
                # Read in this order, a violation cannot be a race: the index only grows.
                assert code != 200 or (indexed or 0) >= COUNT, samples[-3:]
                assert holder != "r1" or (indexed or 0) >= COUNT, samples[-3:]
                if code == 200 and holder == "r1":
                    break
                assert op.proc.poll() is None, op.output()
            ready_after = time.monotonic() - began
            waiting = [s for s in samples if s[0] == 503]
            print(
                f"\nreadiness: {COUNT} created in {created:.1f}s; Ready {ready_after:.1f}s "
                f"after start; {len(samples)} samples, {len(waiting)} of them 503"
            )
            assert samples[-1][0] == 200 and samples[-1][3] == "r1", samples[-3:]
            # The test could have failed: it saw the replica unready while it listed.
            assert any("indexed so far" in s[1] for s in waiting), samples[:3]
            assert op.metric("punctual_synced") == 1
            assert op.metric("punctual_schedules_indexed") == COUNT
    finally:
        await delete_rare(api, namespace)
