"""Which Punctual is benchmarked, and the process set-up that must come before importing it.

Why it exists: other work may be in progress in the work tree; BENCH_PUNCTUAL_REV=HEAD
(or any revision) benchmarks exactly that commit, extracted with `git archive` into
.cluster-bench-src/<sha>/ (git-ignored). The harness imports `punctual` (the Kubernetes
client, the schedule math) from that same tree, so sys.path must point at it before any
bench module that imports `punctual` is imported; and `punctual run` reads PUNCTUAL_*
variables, which must not change the profiles' flags. run.py's main() calls these, in
that order, before importing the rest of the bench.

What it must never do: act at import time, write to the work tree (only to
.cluster-bench-src/), or check anything out in it.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

from settings import HERE, REPO, Settings


def clear_operator_environment() -> None:
    """Remove every PUNCTUAL_* variable: `punctual run`'s flags come from the profiles alone."""
    for name in [k for k in os.environ if k.startswith("PUNCTUAL_")]:
        del os.environ[name]


def extract(rev: str) -> Path:
    """The tree whose `operator/` and `crds/` are benchmarked: the work tree, or a commit."""
    if not rev:
        return REPO
    sha = subprocess.run(
        ["git", "rev-parse", "--verify", rev + "^{commit}"],
        cwd=REPO,
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()
    target = REPO / ".cluster-bench-src" / sha[:12]
    if not (target / "operator" / "punctual").exists():
        partial = target.with_name(target.name + ".partial")
        shutil.rmtree(partial, ignore_errors=True)
        partial.mkdir(parents=True)
        archive = subprocess.run(
            ["git", "archive", sha, "operator", "crds"], cwd=REPO, check=True, capture_output=True
        ).stdout
        subprocess.run(["tar", "-x", "-C", str(partial)], input=archive, check=True)
        shutil.rmtree(target, ignore_errors=True)
        partial.rename(target)
    return target


def put_on_path(source: Path) -> None:
    """Import the bench's helpers, e2e/ (localcluster, operatorprocess) and `punctual` from
    `source`, ahead of anything installed."""
    sys.path.insert(0, str(REPO / "e2e"))
    sys.path.insert(0, str(HERE))
    sys.path.insert(0, str(source / "operator"))


def prepare(results: str) -> Settings:
    """The process set-up of bench/scale.py and bench/ramp.py, in order: PUNCTUAL_*
    cleared, BENCH_PUNCTUAL_REV's tree on sys.path, and the BENCH_* settings, with
    BENCH_RESULTS defaulting to bench/<results> and BENCH_POD_RUN_MS to 200."""
    clear_operator_environment()
    tree = extract(os.environ.get("BENCH_PUNCTUAL_REV", ""))
    put_on_path(tree)
    environ = dict(os.environ)
    environ.setdefault("BENCH_RESULTS", str(HERE / results))
    environ.setdefault("BENCH_POD_RUN_MS", "200")
    return Settings.from_environment(environ, tree)
