"""The Punctual replicas under test, started with a profile's flags, and py-spy on them.

Why it exists: a Punctual scenario runs one `punctual run` (two for failover) from the
benchmarked source, with the profile's client limits and nothing from the caller's
PUNCTUAL_* environment, optionally under cProfile or sampled by py-spy. The process
itself is e2e/operatorprocess.py's OperatorProcess, the same the e2e tests use.

What it must never do: start anything at import time, pass a KUBECONFIG or PUNCTUAL_*
variable of the caller's to the operator (only the bench cluster's kubeconfig for the
controller under test), or stop a process it did not start. STARTED lists every replica
this run started, so that an interrupted run can kill exactly those.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

from clock import wall
from cluster import BenchCluster
from operatorprocess import OperatorProcess
from settings import NAMESPACE, REPO, VENV, Profile

STARTED: list[OperatorProcess] = []  # every operator process this run started


def start_operator(
    cluster: BenchCluster,
    workdir: Path,
    identity: str,
    profile: Profile,
    source: Path,
    *,
    cprofile: bool,
    extra: tuple[str, ...] = (),
) -> OperatorProcess:
    """`punctual run` from `source` against the bench cluster, its log in `workdir`."""
    profile_path = workdir / f"cprofile-{identity}.pstats" if cprofile else None
    python = (
        [sys.executable, "-m", "cProfile", "-o", str(profile_path)]
        if cprofile
        else [sys.executable]
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("PUNCTUAL_")}
    env.update({"PYTHONUNBUFFERED": "1", "PYTHONPATH": str(source / "operator")})
    env["PYTHONMALLOC"] = "malloc"  # as the image runs it (operator/Dockerfile)
    env.pop("KUBECONFIG", None)
    started = OperatorProcess.start(
        identity,
        NAMESPACE,
        *profile.punctual_flags(),
        *extra,
        log=workdir / f"operator-{identity}.log",
        env=env,
        cwd=REPO,
        kubeconfig=cluster.subject_kubeconfig,
        python=python,
        profile_path=profile_path,
    )
    STARTED.append(started)
    return started


class PySpy:
    """py-spy record attached to a running process, raw (collapsed) stacks at 100 Hz."""

    def __init__(self, pid: int, out: Path) -> None:
        self.out = out
        self.started = wall()
        binary = shutil.which("py-spy") or str(VENV / "bin" / "py-spy")
        self.proc = subprocess.Popen(
            [
                *(binary, "record", "--pid", str(pid), "--format", "raw", "--rate", "100"),
                *("--nonblocking", "--output", str(out)),
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )

    def stop(self) -> float:
        """Stop sampling (py-spy writes its file on SIGINT); the seconds it sampled."""
        elapsed = wall() - self.started
        with contextlib.suppress(ProcessLookupError):
            self.proc.send_signal(signal.SIGINT)
        try:
            self.proc.wait(30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
        return elapsed
