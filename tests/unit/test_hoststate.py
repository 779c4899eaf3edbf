"""What cluster-down reports as left changed on the host: the pure comparison of two snapshots."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "e2e"))

import hoststate


def snapshot(**changes: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "sysctls": {"vm/overcommit_memory": "0", "kernel/panic": "1"},
        "netfilter": ["ip nat", "ip nat POSTROUTING", "ip filter", "ip filter FORWARD"],
        "links": ["eth0", "lo"],
        "mounts": ["/", "/proc"],
        "directories": {"/var/lib/kubelet": None, "/var/run/netns": []},
        "cgroups": {"memory": ["cgroup.procs", "libpod_parent"]},
        "processes": [],
    }
    return {**base, **changes}


def test_an_unchanged_host_has_no_differences() -> None:
    assert hoststate.differences(snapshot(), snapshot()) == []


def test_each_kind_of_leftover_is_named() -> None:
    after = snapshot(
        sysctls={"vm/overcommit_memory": "1", "kernel/panic": "10", "net/ipv4/conf/veth1/x": "1"},
        netfilter=[
            "ip nat",
            "ip nat POSTROUTING",
            "ip filter",
            "ip filter FORWARD",
            "ip filter KUBE-FIREWALL",
            "ip kube-proxy",
        ],
        links=["eth0", "lo", "punctual0"],
        mounts=["/", "/proc", "/work/.cluster/node/kubelet/pods/x/volumes/token"],
        directories={"/var/lib/kubelet": ["device-plugins"], "/var/run/netns": ["cni-1"]},
        cgroups={"memory": ["cgroup.procs", "libpod_parent", "punctual"]},
        processes=["4242 (containerd-shim-runc-v2 -namespace k8s.io)"],
    )
    assert hoststate.differences(snapshot(), after) == [
        "sysctl vm.overcommit_memory is '1', was '0'",
        "sysctl kernel.panic is '10', was '1'",
        "netfilter ip filter KUBE-FIREWALL was added",
        "netfilter ip kube-proxy was added",
        "link punctual0 was added",
        "mount /work/.cluster/node/kubelet/pods/x/volumes/token was added",
        "directory /var/lib/kubelet exists, did not before",
        "entry of /var/run/netns: cni-1 was added",
        "cgroup in memory: punctual was added",
        "process 4242 (containerd-shim-runc-v2 -namespace k8s.io) was added",
    ]


def test_what_existed_before_is_never_reported_and_removals_are_not_leftovers() -> None:
    before = snapshot(processes=["17 (containerd --config /etc/containerd/config.toml)"])
    after = snapshot(links=["lo"], processes=before["processes"])
    assert hoststate.differences(before, after) == []


def test_only_changed_sysctls_are_restored_to_their_old_value() -> None:
    after = snapshot(sysctls={"vm/overcommit_memory": "1", "kernel/panic": "1", "new/key": "3"})
    assert hoststate.changed_sysctls(snapshot(), after) == {"vm/overcommit_memory": "0"}
