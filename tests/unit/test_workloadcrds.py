"""The workload CRDs the e2e tests install (e2e/workloadcrds.py), and the workload samples.

Parsed, never fetched: the hand-written CRDs always, the fetched ones only when already in
the cache (`make workload-crds` puts them there), else those cases skip.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "e2e"))

import workloadcrds

REPO = Path(__file__).resolve().parents[2]
# name: (group, kind, plural, served versions, storage version, status subresource)
EXPECTED: dict[str, tuple[str, str, str, list[str], str, bool]] = {
    "rayjobs.ray.io": ("ray.io", "RayJob", "rayjobs", ["v1", "v1alpha1"], "v1", True),
    # Argo's Workflow writes its status with the object: no status subresource upstream.
    "workflows.argoproj.io": (
        "argoproj.io",
        "Workflow",
        "workflows",
        ["v1alpha1"],
        "v1alpha1",
        False,
    ),
    "pipelineruns.tekton.dev": ("tekton.dev", "PipelineRun", "pipelineruns", ["v1"], "v1", True),
    "taskruns.tekton.dev": ("tekton.dev", "TaskRun", "taskruns", ["v1"], "v1", True),
    "jobsets.jobset.x-k8s.io": (
        "jobset.x-k8s.io",
        "JobSet",
        "jobsets",
        ["v1alpha2"],
        "v1alpha2",
        True,
    ),
    "exports.batch.example.com": ("batch.example.com", "Export", "exports", ["v1"], "v1", True),
}
SHORT_NAMES = {
    "pipelineruns.tekton.dev": ["pr", "prs"],
    "taskruns.tekton.dev": ["tr", "trs"],
    "workflows.argoproj.io": ["wf"],
    "exports.batch.example.com": ["exp"],
}
HAND_WRITTEN = {
    "pipelineruns.tekton.dev",
    "taskruns.tekton.dev",
    "jobsets.jobset.x-k8s.io",
    "exports.batch.example.com",
}
FETCHED = {
    workloadcrds.KUBERAY.key: {"rayjobs.ray.io"},
    workloadcrds.ARGO_WORKFLOWS.key: {"workflows.argoproj.io"},
}
SAMPLES = sorted((REPO / "crds" / "samples").glob("workload-*.yaml"))
KIND_FORM = re.compile(r"^[a-z0-9-]+\.[a-z0-9]+\.[a-z0-9.-]+$")  # the chart's schema


def load(path: Path) -> dict[str, Any]:
    [doc] = [d for d in yaml.safe_load_all(path.read_text()) if d]
    assert isinstance(doc, dict)
    return doc


def unstructural(schema: dict[str, Any], where: str = "") -> list[str]:
    """Nodes of an openAPIV3Schema without a type, where a structural schema needs one."""
    found = []
    exempt = schema.get("x-kubernetes-preserve-unknown-fields") or schema.get(
        "x-kubernetes-int-or-string"
    )
    if "type" not in schema and not exempt:
        found.append(where or "/")
    for name, sub in (schema.get("properties") or {}).items():
        found += unstructural(sub, f"{where}.{name}")
    if isinstance(schema.get("items"), dict):
        found += unstructural(schema["items"], f"{where}[]")
    if isinstance(schema.get("additionalProperties"), dict):
        found += unstructural(schema["additionalProperties"], f"{where}{{}}")
    return found


def check(crd: dict[str, Any]) -> None:
    name = crd["metadata"]["name"]
    group, kind, plural, versions, storage, status = EXPECTED[name]
    spec = crd["spec"]
    assert (crd["apiVersion"], crd["kind"]) == (
        "apiextensions.k8s.io/v1",
        "CustomResourceDefinition",
    )
    assert name == f"{plural}.{group}"
    assert (spec["group"], spec["names"]["kind"], spec["names"]["plural"]) == (group, kind, plural)
    assert spec["scope"] == "Namespaced"
    assert spec["names"].get("shortNames", []) == SHORT_NAMES.get(name, [])
    # A test API server has no conversion webhook to call.
    assert (spec.get("conversion") or {}).get("strategy", "None") == "None"
    assert [v["name"] for v in spec["versions"] if v["served"]] == versions
    assert [v["name"] for v in spec["versions"] if v["storage"]] == [storage]
    for version in spec["versions"]:
        assert ("status" in (version.get("subresources") or {})) is status, version["name"]
        schema = version["schema"]["openAPIV3Schema"]
        assert unstructural(schema) == [], version["name"]
        assert {"spec", "status"} <= set(schema["properties"])


def test_the_hand_written_crds_are_the_expected_ones() -> None:
    names = {load(p)["metadata"]["name"]: p for p in workloadcrds.hand_written()}
    assert set(names) == HAND_WRITTEN
    for name, path in names.items():
        assert path.name == f"{EXPECTED[name][0]}_{EXPECTED[name][2]}.yaml"


@pytest.mark.parametrize("path", workloadcrds.hand_written(), ids=lambda p: p.stem)
def test_a_hand_written_crd_is_servable_as_is(path: Path) -> None:
    text = path.read_text()
    # Its header names where it came from (or says it is ours).
    assert text.startswith("# ") and ("Written from " in text or "Not an upstream API" in text)
    check(load(path))


@pytest.mark.parametrize("module", workloadcrds.MODULES, ids=lambda m: m.key)
def test_a_fetched_crd_is_the_expected_one_when_cached(module: workloadcrds.Module) -> None:
    paths = workloadcrds.cached(module)
    if paths is None:
        pytest.skip(f"{module.key} not in {workloadcrds.cache_root()} (make workload-crds)")
    crds = [load(p) for p in paths]
    assert {c["metadata"]["name"] for c in crds} == FETCHED[module.key]
    for crd in crds:
        check(crd)


def test_the_cache_is_where_the_build_scripts_keep_theirs(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("PUNCTUAL_CACHE", str(tmp_path / "p"))
    assert workloadcrds.cache_root() == tmp_path / "p" / "crds"
    monkeypatch.delenv("PUNCTUAL_CACHE")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "x"))
    assert workloadcrds.cache_root() == tmp_path / "x" / "punctual" / "crds"


def test_cached_paths_never_fetch(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """With an empty cache: only ours; with a module's files in place: those too."""
    monkeypatch.setenv("PUNCTUAL_CACHE", str(tmp_path))

    def refuse(module: workloadcrds.Module) -> Path:
        raise AssertionError(f"fetched {module.key}")

    monkeypatch.setattr(workloadcrds, "download", refuse)
    assert workloadcrds.cached_paths() == workloadcrds.hand_written()
    module = workloadcrds.KUBERAY
    target = tmp_path / "crds" / module.key
    target.mkdir(parents=True)
    (target / "ray.io_rayjobs.yaml").write_text("kind: CustomResourceDefinition\n")
    assert workloadcrds.cached(module) == [target / "ray.io_rayjobs.yaml"]
    assert workloadcrds.fetch(module) == [target / "ray.io_rayjobs.yaml"]
    assert workloadcrds.cached_paths()[0] == target / "ray.io_rayjobs.yaml"


def test_there_is_a_sample_per_workload_kind() -> None:
    assert [p.name for p in SAMPLES] == [
        "workload-argo-workflow.yaml",
        "workload-jobset.yaml",
        "workload-own-crd.yaml",
        "workload-rayjob.yaml",
        "workload-tekton-pipelinerun.yaml",
    ]


@pytest.mark.parametrize("path", SAMPLES, ids=lambda p: p.stem)
def test_a_workload_sample_names_a_served_kind_and_says_what_the_operator_needs(
    path: Path,
) -> None:
    sample = load(path)
    assert (sample["apiVersion"], sample["kind"]) == ("punctual.dev/v1", "CronSchedule")
    spec = sample["spec"]
    assert spec["schedule"] and spec["concurrencyPolicy"] == "Forbid"
    assert "jobTemplate" not in spec
    template = spec["workloadTemplate"]
    group, _, version = template["apiVersion"].rpartition("/")
    [(name, expected)] = [(n, e) for n, e in EXPECTED.items() if e[:2] == (group, template["kind"])]
    assert version in expected[3]
    assert template["metadata"]["labels"] and template["spec"]
    # The header names the operator's flag and the chart value, with this kind in them.
    kind = f"{expected[2]}.{version}.{group}"
    assert KIND_FORM.match(kind)
    header = path.read_text().split("apiVersion:")[0]
    assert f"--workload-kinds {kind}" in header and "workloadKinds" in header, name
