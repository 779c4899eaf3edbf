"""The CRDs of the workload kinds that e2e tests schedule through spec.workloadTemplate.

Two sources:
- fetched: the upstream CRD files of released Go modules, through the Go module proxy
  (`go mod download -json MODULE@VERSION`, so GOPROXY, GOFLAGS and GONOSUMDB apply as for
  any Go build), extracted once into <cache>/crds/<module>@<version>/ where <cache> is
  $PUNCTUAL_CACHE, or $XDG_CACHE_HOME/punctual, or ~/.cache/punctual (as
  e2e/build-binaries.sh and e2e/build-test-tools.sh cache their builds);
- hand-written, in e2e/manifests/workloads/: kinds whose modules the proxy refuses
  (Tekton, JobSet), each written from the upstream schema its header names, and a CRD
  of our own with no built-in completion profile (Export).

Install them with `kubectl create` or `kubectl apply --server-side`: the RayJob CRD
(1.3 MB of YAML, 0.4 MB as JSON) is too big for client-side apply's last-applied
annotation (256 KiB).

Tests call `paths()`, which fetches on first use and reads the cache afterwards;
`make workload-crds` warms it. `python e2e/workloadcrds.py --print` prints the paths,
one a line (`--sizes`: with each file's size in bytes, as YAML and as compact JSON, the
form the API server stores).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import zipfile
from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parent
HAND_WRITTEN = HERE / "manifests" / "workloads"


@dataclass(frozen=True)
class Module:
    """A released Go module and the CRD files in it (paths inside the module)."""

    path: str
    version: str
    files: tuple[str, ...]

    @property
    def key(self) -> str:
        return f"{self.path}@{self.version}"


# RayJob (ray.io/v1; v1alpha1 also served, no conversion webhook). v1.5.0: KubeRay's
# latest release the proxy served when this was written (`go list -m -versions
# github.com/ray-project/kuberay/ray-operator`: ... v1.4.0 v1.5.0).
KUBERAY = Module(
    "github.com/ray-project/kuberay/ray-operator",
    "v1.5.0",
    ("config/crd/bases/ray.io_rayjobs.yaml",),
)

# Workflow (argoproj.io/v1alpha1). v4.0.5: the only, so latest, version of the v4 module
# the proxy served when this was written (`go list -m -versions
# github.com/argoproj/argo-workflows/v4`). The minimal CRD (spec and status preserve
# unknown fields, 2 kB), which Argo's own install manifests use: the full one is 2.6 MB
# of YAML, 1.1 MB as JSON, close to etcd's default 1.5 MiB request limit, and too big for
# kubectl apply's last-applied annotation. Argo's Workflow has no status subresource.
ARGO_WORKFLOWS = Module(
    "github.com/argoproj/argo-workflows/v4",
    "v4.0.5",
    ("manifests/base/crds/minimal/argoproj.io_workflows.yaml",),
)

MODULES = (KUBERAY, ARGO_WORKFLOWS)


def cache_root() -> Path:
    base = os.environ.get("PUNCTUAL_CACHE") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "punctual"
    )
    return Path(base) / "crds"


def cached(module: Module) -> list[Path] | None:
    """The module's CRD files if they are in the cache, else None (nothing is fetched)."""
    found = [cache_root() / module.key / Path(f).name for f in module.files]
    return found if all(p.is_file() for p in found) else None


def download(module: Module) -> Path:
    """The module's zip, through `go mod download` (from Go's own module cache if there)."""
    with tempfile.TemporaryDirectory(prefix="punctual-crds-") as tmp:
        Path(tmp, "go.mod").write_text("module punctual.dev/workloadcrds\n\ngo 1.21\n")
        env = {**os.environ, "GOFLAGS": "-mod=mod"}
        result = subprocess.run(
            ["go", "mod", "download", "-json", module.key],
            cwd=tmp,
            env=env,
            capture_output=True,
            text=True,
            timeout=600,
        )
    try:
        info = json.loads(result.stdout)
    except json.JSONDecodeError:
        info = {}
    if result.returncode != 0 or info.get("Error") or not info.get("Zip"):
        raise RuntimeError(
            f"go mod download {module.key} failed: {info.get('Error') or result.stderr.strip()}"
        )
    return Path(info["Zip"])


def fetch(module: Module) -> list[Path]:
    """The module's CRD files, fetched and extracted into the cache unless already there."""
    found = cached(module)
    if found is not None:
        return found
    archive = download(module)
    target = cache_root() / module.key
    target.mkdir(parents=True, exist_ok=True)
    out = []
    with zipfile.ZipFile(archive) as zipped:
        for name in module.files:
            data = zipped.read(f"{module.key}/{name}")
            path = target / Path(name).name
            # Written whole, then renamed: a cache file is complete or absent.
            partial = path.with_suffix(f".tmp{os.getpid()}")
            partial.write_bytes(data)
            partial.replace(path)
            out.append(path)
    return out


def hand_written() -> list[Path]:
    return sorted(HAND_WRITTEN.glob("*.yaml"))


def paths() -> list[Path]:
    """Every workload CRD file: the fetched ones (fetched on first use), then ours."""
    return [p for module in MODULES for p in fetch(module)] + hand_written()


def cached_paths() -> list[Path]:
    """The workload CRD files available without fetching: the cached and ours."""
    return [p for module in MODULES for p in cached(module) or []] + hand_written()


def sizes(path: Path) -> tuple[int, int]:
    """Bytes of the file as YAML, and of its objects as compact JSON."""
    import yaml

    text = path.read_text()
    docs = [d for d in yaml.safe_load_all(text) if d]
    return len(text.encode()), sum(len(json.dumps(d, separators=(",", ":"))) for d in docs)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--print", action="store_true", help="print the paths, one a line")
    parser.add_argument("--sizes", action="store_true", help="with their sizes (YAML, JSON)")
    args = parser.parse_args(argv)
    try:
        found = paths()
    except RuntimeError as error:
        print(f"workloadcrds: {error}", file=sys.stderr)
        return 1
    if args.print or args.sizes:
        for path in found:
            if args.sizes:
                as_yaml, as_json = sizes(path)
                print(f"{path}\t{as_yaml}\t{as_json}")
            else:
                print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
