"""The short fault campaign of `make test`, with the API server's audit log as the oracle.

Every-second schedules fire while the campaign kills the leader (kill -9), pauses it
past its Lease (SIGSTOP), restarts the API server, deletes Jobs the moment they appear,
and deletes the Lease by hand; one schedule's Jobs go on their own
(`ttlSecondsAfterFinished: 0`). Then the audit log must show exactly one create per
(schedule, tick) and a Job for every tick (each outage is shorter than the starting
deadline, and RunAll runs what was missed).

The faults, the schedules and the oracle are tests/e2e/faults.py's; `make chaos` runs
the long campaign of nine kinds with the fencing policy bound
(tests/e2e/test_chaos_campaign.py). CHAOS_FAULTS (default 10) and CHAOS_SEED vary this one.
"""

from __future__ import annotations

import os
import random
from pathlib import Path

import pytest

from .conftest import Cluster
from .faults import FIRST_FIVE, Campaign, explain, explain_lost, judge, run
from .operators import operators

pytestmark = pytest.mark.e2e


@pytest.fixture
def workdir(tmp_path: Path) -> Path:
    return tmp_path


def test_a_fault_campaign_creates_one_job_per_tick_and_loses_none(
    crd: Cluster, namespace: str, workdir: Path
) -> None:
    if crd.local is None or crd.audit_log is None:
        pytest.skip("needs the local control plane (restarts, audit log)")
    count = int(os.environ.get("CHAOS_FAULTS", "10"))
    interval = float(os.environ.get("CHAOS_INTERVAL", "6"))
    rng = random.Random(int(os.environ.get("CHAOS_SEED", "7")))
    with operators(crd, namespace, workdir) as ops:
        campaign = Campaign(crd, namespace, ops, rng)
        started, finished = run(campaign, FIRST_FIVE, count, interval)

    report = judge(crd, namespace, campaign.log, started, finished)
    print("\n" + report.table)
    assert not report.duplicates, explain(crd, namespace, report.duplicates)
    assert not report.lost, explain_lost(crd, namespace, report.lost)
    assert sum(campaign.faults.values()) >= count * 0.8
