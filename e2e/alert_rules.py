"""The chart's PrometheusRule as a Prometheus rules file, checked and unit-tested by promtool.

Why it exists: the alerts live in a Helm template (charts/punctual/templates/
prometheusrule.yaml), where neither Prometheus nor promtool can read them. This renders
the chart with the rule enabled, takes the rule groups (spec.groups) into a plain rules
file, and runs `promtool check rules` on it and `promtool test rules` on the unit tests in
tests/alerts/, which name that file `punctual-rules.yaml`. It also refuses tests that
leave an alert half-tested: every alert in the rule must have a case where it fires and a
case where it must not (an `alert_rule_test` with empty `exp_alerts`), so that a new
alert cannot ship untested. The e2e monitoring test loads the same rendered file into a
real Prometheus.

What it must never do: write anywhere but a temporary directory (or the path it is
given), talk to a cluster (it runs `helm template` only), or start a Prometheus.

Usage: python e2e/alert_rules.py [--helm PATH] [--promtool PATH] [--tests DIR]
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import yaml

REPO = Path(__file__).resolve().parents[1]
CHART = REPO / "charts" / "punctual"
TESTS = REPO / "tests" / "alerts"
RULES_FILE = "punctual-rules.yaml"  # the name the unit tests' rule_files give
# The release the unit tests are written for: its metrics Service is the scrape job.
RELEASE, RELEASE_NAMESPACE = "punctual", "punctual-system"
JOB = f"{RELEASE}-metrics"


def chart_rules(
    helm: Path, *values: str, release: str = RELEASE, namespace: str = RELEASE_NAMESPACE
) -> dict[str, Any]:
    """The rule groups of the chart's PrometheusRule, as a rules file's content."""
    command = [str(helm), "template", release, str(CHART), "--namespace", namespace]
    out = subprocess.run(
        [*command, "--set", "prometheusRule.enabled=true", *values],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    ).stdout
    docs = [d for d in yaml.safe_load_all(out) if d and d.get("kind") == "PrometheusRule"]
    if len(docs) != 1:
        raise ValueError(f"expected one PrometheusRule in the rendering, found {len(docs)}")
    return {"groups": docs[0]["spec"]["groups"]}


def write_rules(rules: dict[str, Any], path: Path) -> Path:
    path.write_text(yaml.safe_dump(rules, sort_keys=False, width=1000))
    return path


def alert_names(rules: dict[str, Any]) -> list[str]:
    return [r["alert"] for g in rules["groups"] for r in g["rules"] if "alert" in r]


def untested(rules: dict[str, Any], test_files: list[Path]) -> list[str]:
    """Alerts without a case that fires them, or without one where they must not fire."""
    fires: set[str] = set()
    quiet: set[str] = set()
    for path in test_files:
        for group in yaml.safe_load(path.read_text()).get("tests") or []:
            for case in group.get("alert_rule_test") or []:
                (fires if case.get("exp_alerts") else quiet).add(case["alertname"])
    problems = []
    for name in alert_names(rules):
        if name not in fires:
            problems.append(f"{name}: no test where it fires")
        if name not in quiet:
            problems.append(f"{name}: no test where it must not fire")
    return problems


def run(helm: Path, promtool: str, tests: Path) -> int:
    rules = chart_rules(helm)
    test_files = sorted(tests.glob("*.yaml"))
    if not test_files:
        print(f"no promtool tests in {tests}", file=sys.stderr)
        return 1
    problems = untested(rules, test_files)
    for problem in problems:
        print(f"untested alert: {problem}", file=sys.stderr)
    with tempfile.TemporaryDirectory(prefix="punctual-alerts-") as tmp:
        workdir = Path(tmp)
        write_rules(rules, workdir / RULES_FILE)
        for path in test_files:
            shutil.copy(path, workdir / path.name)
        checked = subprocess.run([promtool, "check", "rules", RULES_FILE], cwd=workdir)
        tested = subprocess.run(
            [promtool, "test", "rules", *(p.name for p in test_files)], cwd=workdir
        )
    names = alert_names(rules)
    failed = bool(problems) or checked.returncode != 0 or tested.returncode != 0
    print(
        f"alerts: {len(names)} ({', '.join(names)}) in {len(test_files)} promtool test file(s): "
        + ("FAILED" if failed else "ok")
    )
    return 1 if failed else 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="promtool check and test the chart's alert rules")
    parser.add_argument("--helm", type=Path, default=REPO / ".cluster" / "bin" / "helm")
    parser.add_argument("--promtool", default=shutil.which("promtool") or "promtool")
    parser.add_argument("--tests", type=Path, default=TESTS)
    args = parser.parse_args(argv)
    return run(args.helm, args.promtool, args.tests)


if __name__ == "__main__":
    sys.exit(main())
