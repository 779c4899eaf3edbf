"""The docs stay true: the README's field table matches the CRD; `make help` lists every target."""

from __future__ import annotations

import re
from pathlib import Path

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
