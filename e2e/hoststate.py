"""What a real node changes on the host, recorded before it starts and compared after it stops.

A kubelet, containerd and kube-proxy change the machine they run on: kernel settings
(the kubelet sets vm.overcommit_memory, kernel.panic, kernel.panic_on_oops), netfilter
tables, network links, mounts, cgroups and a few fixed directories (/var/log/containers,
/var/lib/kubelet/device-plugins). `make cluster-down` must leave the machine as
`make cluster-up` found it, so the real node takes a snapshot of all of that first,
restores what it can from it when it stops, and then compares: whatever still differs is
reported by name, and cluster-down fails.

Snapshots are plain JSON-able dicts; `differences` is a pure function of two of them, so
the comparison itself is unit-tested without a node. This module never changes anything it
did not find changed against its own snapshot, and never touches a sysctl it cannot name.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

Snapshot = dict[str, Any]

# Counters and other values the kernel changes by itself while the machine runs.
VOLATILE_SYSCTLS = (
    "kernel/random/",
    "kernel/ns_last_pid",
    "kernel/pty/nr",
    "kernel/tainted",
    "fs/dentry-state",
    "fs/inode-nr",
    "fs/inode-state",
    "fs/file-nr",
    "fs/quota/",
    "net/netfilter/nf_conntrack_count",
    "vm/stat_refresh",
    "user/",
)
# Fixed paths a kubelet or containerd create whatever their configured directories are.
WATCHED_DIRECTORIES = (
    "/var/lib/kubelet",
    "/var/lib/kubelet/device-plugins",
    "/var/lib/cni",
    "/var/log/pods",
    "/var/log/containers",
    "/run/containerd",
    "/var/lib/containerd",
    "/opt/containerd",
    "/opt/cni",
    "/etc/cni/net.d",
    "/var/run/netns",
)
CGROUP_ROOT = Path("/sys/fs/cgroup")
# Executables of the node's processes: any of them alive after the node stopped is left over.
NODE_EXECUTABLES = ("containerd", "containerd-shim", "containerd-shim-runc-v2", "kubelet",
                    "kube-proxy", "runc")  # fmt: skip


def take(node_dir: Path) -> Snapshot:
    """Everything `differences` compares, read from the running machine."""
    return {
        "sysctls": _sysctls(),
        "netfilter": _netfilter(),
        "links": sorted(links()),
        "mounts": sorted(mounts()),
        "directories": {d: _listing(Path(d)) for d in WATCHED_DIRECTORIES},
        "cgroups": {h.name: _listing(h) or [] for h in cgroup_hierarchies()},
        "processes": sorted(node_processes(node_dir)),
    }


def differences(before: Snapshot, after: Snapshot) -> list[str]:
    """One line per thing that differs, naming it; empty when the host is as it was."""
    found: list[str] = []
    for key, value in after["sysctls"].items():
        old = before["sysctls"].get(key)
        if old is not None and old != value:
            found.append(f"sysctl {_dotted(key)} is {value!r}, was {old!r}")
    found += _added("netfilter", before["netfilter"], after["netfilter"])
    found += _added("link", before["links"], after["links"])
    found += _added("mount", before["mounts"], after["mounts"])
    for directory, entries in after["directories"].items():
        old_entries = before["directories"].get(directory)
        if entries is not None and old_entries is None:
            found.append(f"directory {directory} exists, did not before")
        elif entries is not None and old_entries is not None:
            found += _added(f"entry of {directory}:", old_entries, entries)
    for hierarchy, entries in after["cgroups"].items():
        found += _added(f"cgroup in {hierarchy}:", before["cgroups"].get(hierarchy, []), entries)
    found += _added("process", before["processes"], after["processes"])
    return found


def changed_sysctls(before: Snapshot, after: Snapshot) -> dict[str, str]:
    """The sysctls whose value differs now, mapped to the value they had before."""
    return {
        key: before["sysctls"][key]
        for key, value in after["sysctls"].items()
        if key in before["sysctls"] and before["sysctls"][key] != value
    }


def restore_sysctls(values: Mapping[str, str]) -> list[str]:
    """Write each sysctl back; returns the ones the kernel refused, as messages."""
    refused = []
    for key, value in values.items():
        try:
            (Path("/proc/sys") / key).write_text(value + "\n")
        except OSError as exc:
            refused.append(f"sysctl {_dotted(key)}: could not restore {value!r}: {exc}")
    return refused


def save(snapshot: Snapshot, path: Path) -> None:
    path.write_text(json.dumps(snapshot))


def load(path: Path) -> Snapshot:
    return dict(json.loads(path.read_text()))


# -- reading the machine ---------------------------------------------------------------


def _sysctls() -> dict[str, str]:
    values: dict[str, str] = {}
    root = Path("/proc/sys")
    for dirpath, _dirnames, filenames in os.walk(root):
        for name in filenames:
            path = Path(dirpath) / name
            key = str(path.relative_to(root))
            if key.startswith(VOLATILE_SYSCTLS) or not os.access(path, os.W_OK):
                continue
            with contextlib.suppress(OSError):
                values[key] = " ".join(path.read_text().split())
    return values


def _netfilter() -> list[str]:
    """Every table and chain, as "family table" and "family table chain" (rules are theirs)."""
    try:
        out = subprocess.run(
            ["nft", "-j", "list", "ruleset"], capture_output=True, text=True, check=True
        ).stdout
    except (OSError, subprocess.CalledProcessError):
        return []
    names = []
    for item in json.loads(out).get("nftables", []):
        if "table" in item:
            names.append(f"{item['table']['family']} {item['table']['name']}")
        elif "chain" in item:
            c = item["chain"]
            names.append(f"{c['family']} {c['table']} {c['name']}")
    return names


def links() -> list[str]:
    return sorted(os.listdir("/sys/class/net"))


def mounts() -> list[str]:
    with open("/proc/self/mountinfo") as f:
        return [line.split()[4] for line in f]


def _listing(path: Path) -> list[str] | None:
    try:
        return sorted(entry.name for entry in path.iterdir())
    except (FileNotFoundError, NotADirectoryError):
        return None


def cgroup_hierarchies() -> Iterable[Path]:
    if not CGROUP_ROOT.is_dir():
        return []
    return [h for h in sorted(CGROUP_ROOT.iterdir()) if h.is_dir() and not h.is_symlink()]


def node_processes(node_dir: Path) -> list[str]:
    """Processes running one of the node's executables, or mentioning its directory."""
    found = []
    marker = str(node_dir).encode()
    for pid in filter(str.isdigit, os.listdir("/proc")):
        if int(pid) == os.getpid():
            continue
        try:
            exe = os.path.basename(os.readlink(f"/proc/{pid}/exe"))
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
        except OSError:
            continue
        if exe in NODE_EXECUTABLES or marker in cmdline:
            command = cmdline.replace(b"\0", b" ").decode(errors="replace")[:120]
            found.append(f"{pid} ({command.strip()})")
    return found


def _added(what: str, before: Iterable[str], after: Iterable[str]) -> list[str]:
    old = set(before)
    return [f"{what} {item} was added" for item in after if item not in old]


def _dotted(key: str) -> str:
    return key.replace("/", ".")
