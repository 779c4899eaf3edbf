"""The docs stay true: the README's field table matches the CRD; `make help` lists every
target; every package's opening docstring, and docs/architecture.md, name every module
(a module added without being named fails here)."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]


def crd_spec_fields() -> dict[str, dict[str, object]]:
    crd = yaml.safe_load((REPO / "crds" / "cronschedules.punctual.dev.yaml").read_text())
    schema = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    return dict(schema["properties"]["spec"]["properties"])


def readme_field_table() -> dict[str, str]:
    """`| `field` | default | meaning |` rows of the README's CronSchedule table."""
    rows = re.findall(r"^\| `(\w+)` \|\s*([^|]*?)\s*\|", (REPO / "README.md").read_text(), re.M)
    return {name: default.strip() for name, default in rows}


def test_readme_documents_every_spec_field_with_the_crds_default() -> None:
    table = readme_field_table()
    fields = crd_spec_fields()
    assert set(fields) <= set(table), f"undocumented: {set(fields) - set(table)}"
    for name, schema in fields.items():
        if "default" in schema:
            expected = (
                str(schema["default"]).lower()
                if isinstance(schema["default"], bool)
                else str(schema["default"])
            )
            assert table[name] == f"`{expected}`", (name, table[name], expected)
        else:
            assert "`" not in table[name], (name, "the CRD has no default", table[name])


def test_make_help_lists_every_target() -> None:
    makefile = (REPO / "Makefile").read_text()
    targets = set(re.findall(r"^([a-zA-Z0-9_-]+):(?!=)", makefile, re.M))
    documented = set(re.findall(r"^([a-zA-Z0-9_-]+):.*?## ", makefile, re.M))
    assert targets == documented, f"targets without a ## description: {targets - documented}"


PACKAGE = REPO / "operator" / "punctual"
PACKAGES = sorted(p.parent for p in PACKAGE.rglob("__init__.py"))


def modules_of(package: Path) -> list[str]:
    """The modules and subpackages a package's opening docstring must name."""
    files = [p.stem for p in package.glob("*.py") if p.stem not in ("__init__", "__main__")]
    return sorted(files + [p.parent.name for p in package.glob("*/__init__.py")])


def named(text: str, module: str) -> bool:
    """`module` appears in backticks, alone or as part of a path (`kube/applying`)."""
    return re.search(rf"`[^`\n]*\b{re.escape(module)}\b[^`\n]*`", text) is not None


@pytest.mark.parametrize("package", PACKAGES, ids=lambda p: str(p.relative_to(PACKAGE.parent)))
def test_a_packages_opening_docstring_names_every_module(package: Path) -> None:
    docstring = ast.get_docstring(ast.parse((package / "__init__.py").read_text())) or ""
    missing = [m for m in modules_of(package) if not named(docstring, m)]
    assert not missing, f"{package.name}/__init__.py's docstring does not name {missing}"


def test_the_architecture_doc_names_every_module() -> None:
    text = (REPO / "docs" / "architecture.md").read_text()
    missing = [
        f"{package.relative_to(PACKAGE)}/{module}"
        for package in PACKAGES
        for module in modules_of(package)
        if not named(text, module)
    ]
    assert not missing, f"docs/architecture.md does not name {missing}"


# `room/module.symbol` (or `room/module.Class.attribute`) as the docs cite code.
CITED = re.compile(r"`((?:core|kube|runtime|cli)(?:/\w+)+)\.(?!py\b)(\w+(?:\.\w+)?)")


def cited_symbols(text: str) -> list[tuple[str, str]]:
    return sorted(set(CITED.findall(text)))


@pytest.mark.parametrize("doc", ["docs/architecture.md", "docs/workloads.md", "README.md"])
def test_every_symbol_the_docs_cite_exists(doc: str) -> None:
    """A doc that cites `core/deciding._prune` after `_prune` is gone misleads its reader."""
    missing = []
    for module, symbol in cited_symbols((REPO / doc).read_text()):
        path = PACKAGE / f"{module}.py"
        if not path.exists():
            missing.append(f"{module}.{symbol} (no module {module})")
            continue
        tree = ast.parse(path.read_text())
        names = (
            {
                node.name
                for node in ast.walk(tree)
                if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef)
            }
            | {
                target.id
                for node in ast.walk(tree)
                if isinstance(node, ast.Assign | ast.AnnAssign)
                for target in (node.targets if isinstance(node, ast.Assign) else [node.target])
                if isinstance(target, ast.Name)
            }
            | {
                node.target.id
                for node in ast.walk(tree)
                if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name)
            }
        )
        if symbol.split(".")[0] not in names:
            missing.append(f"{module}.{symbol}")
    assert not missing, f"{doc} cites what does not exist: {missing}"


def test_the_symbol_check_fails_on_a_citation_of_something_gone() -> None:
    assert cited_symbols("see `core/deciding._prune` and `kube/leases.leading`") == [
        ("core/deciding", "_prune"),
        ("kube/leases", "leading"),
    ]
