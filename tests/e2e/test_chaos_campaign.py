"""The long fault campaign (`make chaos`, not in `make test`), nine kinds of fault, with the
API server's audit log as the oracle.

Every-second schedules fire while the campaign kills the leader (kill -9), pauses it
past its Lease (SIGSTOP), restarts the API server, deletes Jobs the moment they appear,
deletes the Lease by hand, kills etcd and starts it again, cuts the leader's network
past its Lease, slows every answer of the API server by 1-3 s and restarts
kube-controller-manager (the Job controller and the garbage collector pause); one
schedule's Jobs go on their own (`ttlSecondsAfterFinished: 0`). Then the audit log must
show exactly one create per (schedule, tick) and a Job for every tick (each outage is
shorter than the starting deadline, and RunAll runs what was missed).

The operators reach the API server through e2e/chaosnet.py: each replica runs in a
network namespace of its own, and connects through a proxy that can hold responses. The
faults, the schedules and the oracle are tests/e2e/faults.py's, shared with the short
campaign of `make test`.

It runs with CHAOS_CAMPAIGN set: `make chaos` runs 150 faults (about 30 minutes) and
prints a table with the lag of the Jobs whose ticks fell after each kind of fault (until
the next fault); CHAOS_FAULTS, CHAOS_KINDS (a subset) and CHAOS_SEED vary it. `make test`
runs tests/e2e/test_chaos.py instead: a short campaign of the first five kinds.
"""

from __future__ import annotations

import contextlib
import os
import random
import socket
import threading
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from chaosnet import DelayProxy

from .conftest import Cluster
from .faults import KINDS, Campaign, chaos_network, committed, explain, explain_lost, judge, run
from .operators import Create, operators, wait_until
from .test_fencing import create, fenced, stamped_job  # noqa: F401 - fenced: a fixture

pytestmark = pytest.mark.e2e


@pytest.fixture
def workdir(tmp_path: Path) -> Path:
    return tmp_path


@pytest.mark.usefixtures("fenced")
def test_a_fault_campaign_creates_one_job_per_tick_and_loses_none(
    crd: Cluster, namespace: str, workdir: Path
) -> None:
    """With the fencing policy bound, as the chart binds it: a leader cut off from the API
    server may have creates in flight (queued in its kernel) that arrive after a
    successor took over and the tick's Job was cleaned up, and only the fence refuses
    them (without it, the campaign's first network cuts duplicate ticks)."""
    if not os.environ.get("CHAOS_CAMPAIGN"):
        pytest.skip("the long campaign runs with CHAOS_CAMPAIGN set (make chaos)")
    if crd.local is None or crd.audit_log is None:
        pytest.skip("needs the local control plane (restarts, audit log)")
    if os.geteuid() != 0:
        pytest.skip("needs root (network namespaces and nftables)")
    wanted = tuple(k for k in os.environ.get("CHAOS_KINDS", "").split(",") if k) or KINDS
    assert set(wanted) <= set(KINDS), f"CHAOS_KINDS: unknown {set(wanted) - set(KINDS)}"
    count = int(os.environ.get("CHAOS_FAULTS", str(len(wanted))))
    interval = float(os.environ.get("CHAOS_INTERVAL", "6"))
    rng = random.Random(int(os.environ.get("CHAOS_SEED", "7")))

    def enforced() -> bool:
        """The policy takes a moment to reach the admission chain; until a leader raises
        the Fence, the binding refuses every Punctual Job (no parameter: Deny)."""
        code, err = create(crd, namespace, stamped_job("probe", "nobody", 0))
        if code == 0:
            crd.kubectl("delete", "-n", namespace, "job", "probe")
        return code != 0 and ("punctual fencing" in err or "punctual-fencing" in err)

    wait_until(enforced, 30, what="the fencing policy to be enforced")
    with chaos_network(crd, workdir) as network, operators(crd, namespace, workdir) as ops:
        campaign = Campaign(crd, namespace, ops, rng, network)
        started, finished = run(campaign, wanted, count, interval)

    report = judge(crd, namespace, campaign.log, started, finished)
    print("\n" + report.table)
    assert not report.duplicates, explain(crd, namespace, report.duplicates)
    assert not report.lost, explain_lost(crd, namespace, report.lost)
    assert sum(campaign.faults.values()) >= count * 0.8
    if count >= len(wanted):
        assert set(campaign.faults) == set(wanted), campaign.faults


def test_the_delay_proxy_holds_answers_only_while_slow() -> None:
    """The proxy the campaign slows the API server with: bytes pass both ways, and the
    server's answers come 1-3 s late while `slow` is set, at once otherwise."""
    server = socket.create_server(("127.0.0.1", 0))

    def echo() -> None:
        with contextlib.suppress(OSError):
            conn, _ = server.accept()
            with conn:
                while data := conn.recv(4096):
                    conn.sendall(data)

    threading.Thread(target=echo, daemon=True).start()
    with (
        DelayProxy(("127.0.0.1", 0), server.getsockname()) as proxy,
        socket.create_connection(("127.0.0.1", proxy.port), timeout=10) as client,
    ):

        def round_trip(payload: bytes) -> float:
            began = time.monotonic()
            client.sendall(payload)
            assert client.recv(4096) == payload
            return time.monotonic() - began

        assert round_trip(b"fast") < 0.5
        proxy.slow = True
        assert 1.0 <= round_trip(b"slow") < 3.5
        proxy.slow = False
        assert round_trip(b"fast again") < 0.5
    server.close()


def test_a_create_answered_504_counts_once_the_job_is_proven_to_exist() -> None:
    """The oracle's reading of a create whose replica was killed mid-request: the API
    server commits the Job and records 504. Proven by a later write before the name's next
    201, it made the Job (and a 201 after that proof is a duplicate); unproven, it did not."""
    t0 = datetime(2026, 12, 2, 2, 14, 39, tzinfo=UTC)

    def at(seconds: float) -> datetime:
        return t0 + timedelta(seconds=seconds)

    creates = [
        Create("c0-1", 504, "punctual/x34", at(0)),  # committed: freed and deleted later
        Create("c0-2", 504, "punctual/x34", at(0)),  # not committed: made again by x35
        Create("c0-2", 201, "punctual/x35", at(5)),
        Create("c0-3", 504, "punctual/x34", at(0)),  # committed, then made again: twice
        Create("c0-3", 201, "punctual/x35", at(9)),
        Create("c0-4", 403, "punctual/x33", at(0)),  # fenced, whatever follows
    ]
    proofs = {"c0-1": [at(14)], "c0-2": [at(6)], "c0-3": [at(2)], "c0-4": [at(3)]}
    made = [(c.name, c.code) for c in committed(creates, proofs)]
    assert made == [("c0-1", 504), ("c0-2", 201), ("c0-3", 504), ("c0-3", 201)]
