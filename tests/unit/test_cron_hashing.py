"""`H` fields pick exactly the values croniter 7.0.0 picked, for every uid.

Punctual used croniter to expand `H`, `H/n`, `H(a-b)` and `H(a-b)/n`; the parser now
does it itself. A schedule's ticks, and so its Job names, depend on those values,
so they must not move: these tests compare the two over many uids and every form
in every field, and pin a few values outright (should croniter itself change).
"""

from __future__ import annotations

import random
import uuid

import pytest
from croniter import croniter

from punctual.core.schedules import CronFields, ScheduleError, parse_fields

_RANDOM = random.Random(20261125)
UIDS = [str(uuid.UUID(int=_RANDOM.getrandbits(128))) for _ in range(100)] + [
    "",
    "x",
    "uid-1",
    "6f1c-uid",
    "ünïcödé-✓",
    "a" * 300,
]

# (field position in a 5-field expression, or 5 for a leading seconds field; forms)
FORMS: list[tuple[int, list[str]]] = [
    (0, ["H", "H/1", "H/7", "H/15", "H/30", "H/59", "H/60", "H/70", "H(0-29)", "H(10-20)",
         "H(30-59)/10", "H(0-7)/7", "H(58-59)/2"]),
    (1, ["H", "H/2", "H/3", "H/5", "H/23", "H/24", "H(9-17)", "H(0-11)/2", "H(20-23)/3"]),
    (2, ["H", "H/2", "H/10", "H/31", "H(1-28)", "H(1-15)/7", "H(20-31)/5"]),
    (3, ["H", "H/2", "H/3", "H/12", "H(1-6)", "H(6-12)/2"]),
    (4, ["H", "H/2", "H/3", "H/7", "H(1-5)", "H(0-7)", "H(0-7)/2", "H(2-7)/3", "H(0-6)/7"]),
    (5, ["H", "H/10", "H/30", "H(0-29)", "H(30-59)/15"]),
]  # fmt: skip
CASES = [(position, form) for position, forms in FORMS for form in forms]


def expression_for(position: int, form: str) -> str:
    if position == 5:
        return f"{form} * * * * *"
    fields = ["*"] * 5
    fields[position] = form
    return " ".join(fields)


def croniter_values(expression: str, uid: str, position: int) -> tuple[int, ...]:
    expanded, _ = croniter.expand(
        expression, hash_id=uid.encode(), second_at_beginning=position == 5
    )
    values = expanded[position]
    if values == ["*"]:  # croniter's word for "every value"
        low, high = croniter.RANGES[position]
        values = list(range(low, high + 1))
    numbers = {int(v) for v in values}
    return tuple(sorted({v % 7 for v in numbers} if position == 4 else numbers))


def punctual_values(fields: CronFields, position: int) -> tuple[int, ...]:
    rule = fields.day_rule
    chosen = {
        0: fields.minutes,
        1: fields.hours,
        2: tuple(sorted(rule.days)),
        3: tuple(sorted(rule.months)),
        4: tuple(sorted(rule.weekdays)),
        5: fields.seconds,
    }
    return chosen[position]


@pytest.mark.parametrize(("position", "form"), CASES, ids=[f"{p}:{f}" for p, f in CASES])
def test_hashed_values_are_croniters_for_every_uid(position: int, form: str) -> None:
    expression = expression_for(position, form)
    for uid in UIDS:
        try:
            fields = parse_fields(expression, uid=uid)
        except ScheduleError as error:  # an impossible date is refused, as before
            assert "never occurs" in error.problem, (uid, error.problem)
            continue
        assert punctual_values(fields, position) == croniter_values(expression, uid, position), uid


@pytest.mark.parametrize(
    ("uid", "expression", "minutes", "hours", "days", "months", "weekdays"),
    [
        ("6f1c-uid", "H H H H H", (38,), (7,), (3,), (2,), (1,)),
        ("6f1c-uid", "H/15 H/3 * * H/2", (8, 23, 38, 53), tuple(range(1, 24, 3)), None, None,
         (0, 2, 4, 6)),
        ("6f1c-uid", "H(0-29) H(9-17) H(1-28) * H(1-5)", (8,), (10,), (8,), None, (5,)),
        ("9c4f2a30-8f5e-4f55-9a53-0d35a7b0c001", "H H H H H", (28,), (8,), (13,), (3,), (3,)),
        ("9c4f2a30-8f5e-4f55-9a53-0d35a7b0c001", "H/15 H/3 * * H/2", (13, 28, 43, 58),
         tuple(range(2, 24, 3)), None, None, (1, 3, 5)),
        ("9c4f2a30-8f5e-4f55-9a53-0d35a7b0c001", "H(30-59)/10 * * * *", (38, 48, 58), None,
         None, None, None),
    ],
)  # fmt: skip
def test_pinned_hashed_values(
    uid: str,
    expression: str,
    minutes: tuple[int, ...],
    hours: tuple[int, ...] | None,
    days: tuple[int, ...] | None,
    months: tuple[int, ...] | None,
    weekdays: tuple[int, ...] | None,
) -> None:
    fields = parse_fields(expression, uid=uid)
    assert fields.minutes == minutes
    assert hours is None or fields.hours == hours
    assert days is None or tuple(sorted(fields.day_rule.days)) == days
    assert months is None or tuple(sorted(fields.months)) == months
    assert weekdays is None or tuple(sorted(fields.day_rule.weekdays)) == weekdays


def test_seconds_hash_as_croniters_sixth_field() -> None:
    assert parse_fields("H * * * * *", uid="6f1c-uid").seconds == (57,)
    assert parse_fields("H * * * * *", uid="9c4f2a30-8f5e-4f55-9a53-0d35a7b0c001").seconds == (51,)


def test_a_uid_that_is_not_valid_utf8_still_hashes() -> None:
    # Command-line bytes that are not UTF-8 arrive as surrogate escapes.
    fields = parse_fields("H * * * *", uid="uid-\udcff")
    assert len(fields.minutes) == 1


@pytest.mark.parametrize(
    ("expression", "problem"),
    [
        ("H,5 * * * *", "minute field 'H,5' is not understood: H must be the whole field"),
        ("5,H * * * *", "minute field '5,H': H must be the whole field"),
        ("H(5-5) * * * *", "minute range H(5-5) is empty"),
        ("H/0 * * * *", "minute step '0' is not a positive whole number"),
        ("* H(0-24) * * *", "hour 24 is out of range 0-23"),
        ("* * * * H(0-8)", "day-of-week 8 is out of range 0-7"),
        ("Hx * * * *", "minute field 'Hx' is not understood"),
    ],
)
def test_malformed_hashed_fields_are_refused(expression: str, problem: str) -> None:
    with pytest.raises(ScheduleError) as caught:
        parse_fields(expression, uid="uid-1")
    assert problem in caught.value.problem
