"""The real node of a cluster killed without `make cluster-down` is undone by the next one.

A CI job or a session cut short kills every process of its cluster and leaves the real
node's bridge, netfilter tables and cgroups on the host; the next clone's `cluster-up`
used to refuse ("another real node runs on this host") until someone ran cluster-down in
the dead clone. This check starts a cluster with a real node, kills all its processes
the way a cut-short session does, starts a second cluster from another state directory,
and asserts: the second comes up, the first's ledger is gone (its own cluster-down then
undoes nothing of the second's), and after both are down the host is as the first found
it. A second cluster beside a live one is still refused. Needs root; takes about 20 s;
`make check-reclaim` runs it (not in `make test`: the suite's own real node is live).
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import tempfile
import time
from pathlib import Path

import hoststate
import realnode
from localcluster import DEFAULT_STATE_DIR, LocalCluster


def cluster(root: Path, name: str, port: int, bin_dir: Path) -> LocalCluster:
    return LocalCluster(state_dir=root / name, port_base=port, bin_dir=bin_dir, real_node=True)


def kill_everything(dead: LocalCluster) -> None:
    for pid in dead.pids.values():
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    time.sleep(1)
    for entry in hoststate.node_processes(dead.node.dir):
        with contextlib.suppress(ProcessLookupError):
            os.kill(int(entry.split()[0]), signal.SIGKILL)
    time.sleep(1)


def main() -> int:
    reason = realnode.unavailable_reason()
    if reason or realnode.another_node_runs():
        print(f"check-reclaim: cannot run here: {reason or 'a real node runs on this host'}")
        return 1
    bin_dir = DEFAULT_STATE_DIR / "bin"
    with tempfile.TemporaryDirectory(prefix="punctual-reclaim-") as tmp:
        root = Path(tmp)
        before = hoststate.take(root / "first" / "node")
        first = cluster(root, "first", 21443, bin_dir)
        first.up()
        second = cluster(root, "second", 22443, bin_dir)
        try:
            second.up()
            raise AssertionError("a second real node started beside a live one")
        except RuntimeError as refused:
            assert "another real node runs" in str(refused), refused
        second.down()
        kill_everything(first)
        assert realnode.another_node_runs(), "the killed cluster's bridge should be left"
        second = cluster(root, "second", 22443, bin_dir)
        second.up()
        assert realnode.recorded_owner() is not None
        assert not first.node.ledger.exists(), "the dead cluster's ledger should be gone"
        second.down()
        cluster(root, "first", 21443, bin_dir).down()  # its own cluster-down, late
        left = hoststate.differences(before, hoststate.take(root / "first" / "node"))
        assert not left, left
        assert not realnode.another_node_runs() and not realnode.OWNER.exists()
    print("check-reclaim: a killed cluster's real node was undone by the next cluster-up")
    return 0


if __name__ == "__main__":
    sys.exit(main())
