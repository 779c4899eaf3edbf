"""What the figures were measured on: the host, the versions, the commit.

Why it exists: results are only comparable with the machine, the Kubernetes binaries and
the Punctual commit they came from, so every raw result carries this description
(bench/results/raw/machine.json and each result's "machine").

What it must never do: change anything (it only reads /proc, asks git and runs the
binaries' --version), or run at import time.
"""

from __future__ import annotations

import contextlib
import os
import platform
import subprocess
from typing import Any

from settings import BIN_DIR, REPO

from punctual import __version__ as punctual_version


def machine(rev: str) -> dict[str, Any]:
    """The host and versions; `rev` is BENCH_PUNCTUAL_REV ("" for the work tree)."""
    model = "?"
    with contextlib.suppress(OSError), open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    memory = "?"
    with contextlib.suppress(OSError), open("/proc/meminfo") as f:
        for line in f:
            if line.startswith("MemTotal:"):
                memory = f"{int(line.split()[1]) / 1024 / 1024:.1f} GiB"
                break
    return {
        "nproc": os.cpu_count(),
        "memory": memory,
        "cpu_model": model,
        "kernel": platform.release(),
        "python": platform.python_version(),
        "punctual": punctual_version,
        "commit": _git("rev-parse", "--short", rev or "HEAD"),
        "source": "commit " + rev if rev else "work tree",
        "dirty": not rev and bool(_git("status", "--porcelain", "--untracked-files=no")),
        "etcd": _binary_version("etcd", "--version"),
        "kwok": _binary_version("kwok", "--version"),
    }


def _git(*args: str) -> str:
    try:
        return subprocess.run(
            ["git", *args], cwd=REPO, capture_output=True, text=True, timeout=10
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return "?"


def _binary_version(name: str, flag: str) -> str:
    try:
        out = subprocess.run(
            [str(BIN_DIR / name), flag],
            capture_output=True,
            text=True,
            timeout=10,
        )
        return (out.stdout or out.stderr).strip().splitlines()[0]
    except (OSError, subprocess.SubprocessError, IndexError):
        return "?"
