"""No function of the core changes an argument or shared state: checked on the source.

The core's rules return records; `status` alone turns them into a status write. This
walks every function of `punctual.core` with `ast` and fails on an assignment to an
attribute or item of a parameter (`draft.x = ...`, `status["k"] = ...`), on a call of a
mutating method on a parameter (`conditions.append(...)`), and on `global` or `nonlocal`;
and it fails on a dataclass of the core that is not frozen (the Draft was one).
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import punctual.core

CORE = Path(punctual.core.__file__).parent
MUTATING = frozenset(
    {
        "append",
        "extend",
        "insert",
        "pop",
        "popitem",
        "remove",
        "clear",
        "update",
        "add",
        "discard",
        "setdefault",
        "sort",
        "reverse",
        "__setitem__",
        "__delitem__",
    }
)


def _root(node: ast.expr) -> str | None:
    """The name an attribute or item chain starts from: `a` for `a.b[c].d`."""
    while isinstance(node, ast.Attribute | ast.Subscript):
        node = node.value
    return node.id if isinstance(node, ast.Name) else None


# What the check lets be, each for a reason. A constructor fills in the object it makes.
# The schedule math keeps bounded memo caches inside its tick sources (same answers,
# faster), and the cron parser fills one accumulator private to a parse call.
ALLOWED: dict[str, frozenset[str]] = {
    "schedules/combining.py": frozenset({"__init__", "_whole_day"}),
    "schedules/parsing.py": frozenset(
        {"__init__", "days_of_shape", "_day_special", "_weekday_special"}
    ),
    "schedules/ticks.py": frozenset({"__init__", "_pieces"}),
}


def violations(source: str, allowed: frozenset[str] = frozenset()) -> list[str]:
    found: list[str] = []
    for func in ast.walk(ast.parse(source)):
        if not isinstance(func, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda):
            continue
        name = getattr(func, "name", "<lambda>")
        if name in allowed:
            continue
        args = func.args
        params = {a.arg for a in (*args.posonlyargs, *args.args, *args.kwonlyargs)}
        params |= {a.arg for a in (args.vararg, args.kwarg) if a is not None}
        for node in ast.walk(func):
            line = getattr(node, "lineno", 0)
            if isinstance(node, ast.Global | ast.Nonlocal):
                found.append(f"{name} line {line}: {type(node).__name__.lower()}")
            targets: list[ast.expr] = []
            if isinstance(node, ast.Assign):
                targets = node.targets
            elif isinstance(node, ast.AugAssign | ast.AnnAssign):
                targets = [node.target]
            elif isinstance(node, ast.Delete):
                targets = node.targets
            for target in targets:
                for part in ast.walk(target):
                    if isinstance(part, ast.Attribute | ast.Subscript) and _root(part) in params:
                        found.append(f"{name} line {line}: assigns into {_root(part)}")
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and node.func.attr in MUTATING
                and _root(node.func.value) in params
            ):
                found.append(f"{name} line {line}: {_root(node.func.value)}.{node.func.attr}()")
    return found


@pytest.mark.parametrize("path", sorted(CORE.rglob("*.py")), ids=lambda p: p.name)
def test_no_core_function_changes_an_argument_or_shared_state(path: Path) -> None:
    allowed = ALLOWED.get(path.relative_to(CORE).as_posix(), frozenset())
    assert violations(path.read_text(), allowed) == []


@pytest.mark.parametrize(
    "source",
    [
        "def f(draft):\n    draft.skips = []\n",
        "def f(status):\n    status['inFlight'] = []\n",
        "def f(conditions):\n    conditions[0].x += 1\n",
        "def f(*, draft):\n    draft.events.append(1)\n",
        "def f(x):\n    global Y\n",
        "def f(seen):\n    del seen['k']\n",
    ],
)
def test_the_check_catches_each_kind_of_change(source: str) -> None:
    assert violations(source) != []


def test_the_check_lets_local_state_be() -> None:
    local = "def f(xs):\n    out = list(xs)\n    out.append(1)\n    out[0] = 2\n    return out\n"
    assert violations(local) == []


def mutable_dataclasses(source: str) -> list[str]:
    """Classes decorated @dataclass without frozen=True."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.ClassDef):
            continue
        for deco in node.decorator_list:
            call = deco if isinstance(deco, ast.Call) else None
            target = call.func if call is not None else deco
            if not (isinstance(target, ast.Name) and target.id == "dataclass"):
                continue
            frozen = call is not None and any(
                k.arg == "frozen" and isinstance(k.value, ast.Constant) and k.value.value is True
                for k in call.keywords
            )
            if not frozen:
                found.append(node.name)
    return found


@pytest.mark.parametrize("path", sorted(CORE.rglob("*.py")), ids=lambda p: p.name)
def test_every_record_of_the_core_is_frozen(path: Path) -> None:
    # The cron parser's accumulator is private to one parse call (see ALLOWED).
    allowed = {"_Specials"} if path.name == "parsing.py" else set()
    assert set(mutable_dataclasses(path.read_text())) <= allowed


def test_the_frozen_check_sees_a_mutable_dataclass() -> None:
    assert mutable_dataclasses("@dataclass\nclass Draft:\n    x: int\n") == ["Draft"]
    assert mutable_dataclasses("@dataclass(slots=True)\nclass Draft:\n    x: int\n") == ["Draft"]
    assert mutable_dataclasses("@dataclass(frozen=True)\nclass Record:\n    x: int\n") == []


def where_conditions_are_made(tree: ast.AST) -> set[str]:
    """The functions that build a Condition or name the Ready condition."""
    found: set[str] = set()
    for func in ast.walk(tree):
        if not isinstance(func, ast.FunctionDef):
            continue
        for node in ast.walk(func):
            builds = (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Name)
                and node.func.id == "Condition"
            )
            if builds or (isinstance(node, ast.Constant) and node.value == "Ready"):
                found.add(func.name)
    return found


def test_conditions_are_made_only_by_the_status_builder_and_ready_set_in_one_function() -> None:
    makers = {
        f"{path.stem}.{name}"
        for path in CORE.rglob("*.py")
        for name in where_conditions_are_made(ast.parse(path.read_text()))
    }
    assert makers == {"status._set", "status.conditions"}
