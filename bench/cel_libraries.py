"""The two maintained Python CEL libraries side by side: what spec.completion would cost.

Run: .venv/bin/python bench/cel_libraries.py [--runs N]

Why it exists: `core/completion` evaluates a CronSchedule's `spec.completion` rules (CEL,
the object bound as `self` and `object`) on every status change of every workload it
created. This measures, for `cel-python` (module `celpy`, pure Python) and
`common-expression-language` (module `cel`, Rust through PyO3), the time to compile a
rule, the time to evaluate it on two realistic objects (a Tekton PipelineRun of 3 KB, an
Argo Workflow of 20 KB with 40 nodes in its status; the conversion of the object
included, as each evaluation pays it, and each library used as core/completion would
use it: the Rust one binds only the names a rule reads, `self` here), and
what each does with a rule that goes wrong: a missing key, a wrong type, a division by
zero, a non-bool result, a rule that does not compile. A library that is not installed
is reported as such; install both into a throwaway venv to compare them.

Prints one table; takes a few seconds. What it must never do: take longer than a minute
(the default runs are sized for a shared two-core machine).
"""

from __future__ import annotations

import argparse
import importlib
import statistics
import time
from collections.abc import Callable
from functools import partial
from typing import Any

FAST = "has(self.status) && self.status.phase == 'Succeeded'"
EXISTS = "self.status.conditions.exists(c, c.type == 'Succeeded' && c.status == 'True')"
ERRORS = {
    "missing key": "self.spec.nothere == 1",
    "wrong type": "self.status.phase > 1",
    "division by zero": "self.status.progressTotal / 0 == 1",
    "non-bool result": "self.status.phase",
}
BROKEN = "self.status.phase =="
# (rule, source, object): a PipelineRun has no phase, so only the exists rule reads it.
CASES = (
    ("phase", FAST, "Workflow 20 KB"),
    ("exists", EXISTS, "Workflow 20 KB"),
    ("exists", EXISTS, "PipelineRun 3 KB"),
)


def workflow() -> dict[str, Any]:
    """An Argo Workflow as the API server returns it after it succeeded: 40 nodes."""
    when = "2026-11-25T10:00:05Z"
    nodes = {
        f"nightly-etl-7f2k-{i}": {
            "id": f"nightly-etl-7f2k-{i}",
            "name": f"nightly-etl-7f2k[0].step-{i}",
            "displayName": f"step-{i}",
            "type": "Pod",
            "templateName": "run-step",
            "phase": "Succeeded",
            "startedAt": when,
            "finishedAt": when,
            "progress": "1/1",
            "resourcesDuration": {"cpu": 12, "memory": 40},
            "outputs": {"exitCode": "0", "artifacts": [{"name": "main-logs", "s3": {"key": "x"}}]},
            "children": [f"nightly-etl-7f2k-{i + 1}"],
            "hostNodeName": "worker-3",
        }
        for i in range(40)
    }
    return {
        "apiVersion": "argoproj.io/v1alpha1",
        "kind": "Workflow",
        "metadata": {
            "name": "nightly-etl-7f2k",
            "namespace": "data",
            "uid": "0b7e5f7a-5d0c-4a4e-9d7e-2f0f4a0c8a11",
            "labels": {"workflows.argoproj.io/phase": "Succeeded", "app": "etl"},
            "annotations": {"punctual.dev/tick": when},
            "creationTimestamp": when,
        },
        "spec": {"entrypoint": "main", "serviceAccountName": "etl", "arguments": {}},
        "status": {
            "phase": "Succeeded",
            "startedAt": when,
            "finishedAt": when,
            "progress": "40/40",
            "progressTotal": 40,
            "conditions": [
                {"type": "PodRunning", "status": "False"},
                {"type": "Completed", "status": "True"},
                {"type": "Succeeded", "status": "True"},
            ],
            "nodes": nodes,
            "resourcesDuration": {"cpu": 480, "memory": 1600},
        },
    }


def pipelinerun() -> dict[str, Any]:
    """A Tekton PipelineRun as the API server returns it after it succeeded."""
    when = "2026-11-25T10:00:05Z"
    tasks = [f"step-{i}" for i in range(4)]
    return {
        "apiVersion": "tekton.dev/v1",
        "kind": "PipelineRun",
        "metadata": {
            "name": "nightly-build-x7k2p",
            "namespace": "ci",
            "uid": "5d0c4a4e-0b7e-4f7a-9d7e-2f0f4a0c8a11",
            "labels": {"tekton.dev/pipeline": "nightly-build", "app": "build"},
            "annotations": {"punctual.dev/tick": when},
            "creationTimestamp": when,
        },
        "spec": {
            "pipelineRef": {"name": "nightly-build"},
            "params": [{"name": "revision", "value": "main"}],
            "taskRunTemplate": {"serviceAccountName": "builder"},
            "timeouts": {"pipeline": "1h0m0s"},
        },
        "status": {
            "startTime": when,
            "completionTime": when,
            "conditions": [
                {
                    "type": "Succeeded",
                    "status": "True",
                    "reason": "Succeeded",
                    "message": "Tasks Completed: 4 (Failed: 0, Cancelled 0), Skipped: 0",
                    "lastTransitionTime": when,
                }
            ],
            "pipelineSpec": {
                "params": [{"name": "revision", "type": "string"}],
                "tasks": [
                    {
                        "name": task,
                        "taskRef": {"kind": "Task", "name": task},
                        "params": [{"name": "revision", "value": "$(params.revision)"}],
                        "runAfter": tasks[:i],
                    }
                    for i, task in enumerate(tasks)
                ],
            },
            "childReferences": [
                {
                    "apiVersion": "tekton.dev/v1",
                    "kind": "TaskRun",
                    "name": f"nightly-build-x7k2p-{task}",
                    "pipelineTaskName": task,
                }
                for task in tasks
            ],
            "provenance": {"featureFlags": {"enableAPIFields": "beta", "maxResultSize": 4096}},
        },
    }


class Library:
    """One CEL library behind the three calls the bench makes."""

    def __init__(self, name: str, module: Any) -> None:
        self.name = name
        self.module = module

    def compile(self, source: str) -> Callable[[dict[str, Any]], Any]:
        raise NotImplementedError


class CelPython(Library):
    def compile(self, source: str) -> Callable[[dict[str, Any]], Any]:
        celpy = self.module
        env = celpy.Environment()
        program = env.program(env.compile(source))

        def run(obj: dict[str, Any]) -> Any:
            value = celpy.json_to_cel(obj)
            return program.evaluate({"self": value, "object": value})

        return run


class CelRust(Library):
    def compile(self, source: str) -> Callable[[dict[str, Any]], Any]:
        program = self.module.compile(source)
        names = [name for name in ("self", "object") if name in program.variables()]
        return lambda obj: program.execute({name: obj for name in names})


def libraries() -> list[tuple[str, str, Library | None]]:
    found: list[tuple[str, str, Library | None]] = []
    for dist, module, kind in (
        ("cel-python", "celpy", CelPython),
        ("common-expression-language", "cel", CelRust),
    ):
        try:
            lib: Library | None = kind(dist, importlib.import_module(module))
        except ImportError:
            lib = None
        found.append((dist, module, lib))
    return found


def median_us(action: Callable[[], object], runs: int) -> float:
    action()
    samples = []
    for _ in range(runs):
        started = time.perf_counter_ns()
        action()
        samples.append((time.perf_counter_ns() - started) / 1000)
    return statistics.median(samples)


def outcome(lib: Library, source: str, obj: dict[str, Any]) -> str:
    """What a rule gives: its value, or the exception's type and message (one line)."""
    try:
        value = lib.compile(source)(obj)
    except Exception as exc:  # the point is to see what each library raises
        flat = " | ".join(line.strip() for line in str(exc).splitlines() if line.strip())
        return f"{type(exc).__name__}: {flat}"[:110]
    return f"{type(value).__name__} {value!r}"[:70]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=300, help="timed runs per figure")
    runs = parser.parse_args().runs
    obj = workflow()
    objects = {"PipelineRun 3 KB": pipelinerun(), "Workflow 20 KB": obj}
    rows: list[tuple[str, ...]] = []
    for dist, module, lib in libraries():
        if lib is None:
            rows.append((f"{dist} ({module})", "not installed"))
            continue
        version = importlib.metadata.version(dist)
        label = f"{dist} {version}"
        for rule, source in (("phase", FAST), ("exists", EXISTS)):
            took = median_us(partial(lib.compile, source), runs)
            rows.append((label, f"compile {rule} rule", f"{took:.0f} us"))
        for rule, source, what in CASES:
            compiled, target = lib.compile(source), objects[what]
            took = median_us(partial(compiled, target), runs)
            rows.append((label, f"evaluate {rule} rule, {what}", f"{took:.0f} us"))
            rows.append((label, "  its result", outcome(lib, source, target)))
        for name, source in ERRORS.items():
            rows.append((label, name, outcome(lib, source, obj)))
        rows.append((label, "compile error", outcome(lib, BROKEN, obj)))
    widths = [max(len(row[i]) for row in rows if len(row) > i) for i in range(3)]
    for row in rows:
        print("  ".join(cell.ljust(widths[i]) for i, cell in enumerate(row)).rstrip())


if __name__ == "__main__":
    main()
