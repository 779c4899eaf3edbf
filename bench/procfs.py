"""CPU time and peak memory of the processes under test, read from /proc.

Why it exists: "what did firing cost" includes the CPU seconds and the peak RSS of the
controller under test and of the control plane's components, which only the kernel
knows; and the CPU the rest of the machine used meanwhile, since other work shares it.
This module reads them; nothing else in the bench opens /proc/<pid>/.

What it must never do: write to /proc, signal or otherwise touch a process, or read
anything at import time but the clock tick rate.
"""

from __future__ import annotations

import math
import os
import resource
from dataclasses import dataclass
from typing import Any

from clock import wall

CLK_TCK = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid: int) -> float:
    """utime + stime of a process, in seconds (NaN once it is gone)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except OSError:
        return math.nan
    return (int(fields[11]) + int(fields[12])) / CLK_TCK


def peak_rss_mb(pid: int) -> float:
    """A process's peak resident set (VmHWM), in MiB (NaN once it is gone)."""
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return math.nan


def rss_mb(pid: int) -> float:
    """A process's resident set now (VmRSS), in MiB (NaN once it is gone)."""
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return math.nan


def system_busy_seconds() -> float:
    """CPU seconds the whole machine spent not idle since boot."""
    with open("/proc/stat") as f:
        values = [int(v) for v in f.readline().split()[1:]]
    idle = values[3] + (values[4] if len(values) > 4 else 0)
    return (sum(values[:8]) - idle) / CLK_TCK


def harness_cpu() -> float:
    """CPU seconds this process (the harness) has used."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


@dataclass
class CpuSnapshot:
    at: float
    processes: dict[str, float]
    system: float
    harness: float


def snapshot(pids: dict[str, int]) -> CpuSnapshot:
    return CpuSnapshot(
        at=wall(),
        processes={name: cpu_seconds(pid) for name, pid in pids.items()},
        system=system_busy_seconds(),
        harness=harness_cpu(),
    )


def cpu_between(a: CpuSnapshot, b: CpuSnapshot) -> dict[str, Any]:
    """CPU seconds per process between two snapshots, and what the rest of the machine used."""
    seconds = {
        name: round(b.processes[name] - a.processes[name], 3)
        for name in a.processes
        if name in b.processes and not math.isnan(b.processes[name] - a.processes[name])
    }
    ours = sum(seconds.values()) + (b.harness - a.harness)
    elapsed = b.at - a.at
    return {
        "wall": round(elapsed, 3),
        "seconds": seconds,
        "harness": round(b.harness - a.harness, 3),
        "system_busy": round(b.system - a.system, 3),
        "other_processes": round(max(0.0, (b.system - a.system) - ours), 3),
        "other_cores": round(max(0.0, (b.system - a.system) - ours) / elapsed, 3)
        if elapsed > 0
        else math.nan,
    }
