"""The status builder: conditions by one precedence table, Events once per transition,
and skip metric labels that are fixed values, never message text.

`status.conditions` is given what the rules decided (a `Standing`) and the conditions
as written; Ready is set there and nowhere else. Same fixed instant as `builders`.
"""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from punctual.core.deciding import decide
from punctual.core.models import Condition
from punctual.core.pausing import Pause, Suspension
from punctual.core.planning import MAX_RUNS_REACHED
from punctual.core.records import SkipReason
from punctual.core.status import NOT_READY, Standing, conditions
from punctual.core.succeeding import Freshness

from .builders import (
    BROKEN,
    GENERATION,
    LEADER,
    T0,
    H,
    M,
    S,
    condition,
    iso,
    job,
    schedule_body,
    spec_body,
    status_body,
    window,
)

PAUSED = Pause(failures=3, failed=("a", "b", "c"), paused=True, resumed=None, message="3 failed")
RUNNING = Pause(failures=0, failed=(), paused=False, resumed=None)
SUSPENDED = Suspension("Suspended", "spec.suspend is true: no tick fires")
UNTIL = Suspension("SuspendedUntil", f"no tick fires before {iso(T0 + H)}")
FRESH = Freshness(objective=False)
BASE = Standing(pause=RUNNING, freshness=FRESH, next_tick=T0 + H)


def ready_of(standing: Standing, old: tuple[Condition, ...] = ()) -> tuple[str, str, str]:
    conds, _ = conditions(old, standing, now=T0, generation=GENERATION)
    [found] = [c for c in conds if c.type == "Ready"]
    return found.status, found.reason or "", found.message or ""


def test_the_precedence_table_is_the_documented_order() -> None:
    assert [reason for reason, _ in NOT_READY] == ["InvalidSpec", "Paused", "Finished", "Suspended"]


@pytest.mark.parametrize(
    ("standing", "expected"),
    [
        (BASE, ("True", "Scheduled", f"next tick {iso(T0 + H)}")),
        (replace(BASE, next_tick=None), ("True", "Scheduled", "no further tick")),
        (replace(BASE, suspension=SUSPENDED), ("False", "Suspended", SUSPENDED.message)),
        (replace(BASE, suspension=UNTIL), ("False", "SuspendedUntil", UNTIL.message)),
        (
            replace(BASE, suspension=SUSPENDED, finished=MAX_RUNS_REACHED, limited=True),
            ("False", "Finished", "spec.maxRuns scheduled runs have fired"),
        ),
        (
            replace(
                BASE,
                suspension=SUSPENDED,
                finished=MAX_RUNS_REACHED,
                limited=True,
                pause=PAUSED,
                pause_on_failure=True,
            ),
            ("False", "Paused", "3 failed"),
        ),
        (Standing(invalid="spec.schedule: bad"), ("False", "InvalidSpec", "spec.schedule: bad")),
        (
            replace(BASE, frozen=(window("w", T0 - H, T0 + H), T0 + H)),
            ("True", "Scheduled", f"next tick {iso(T0 + H)}"),
        ),  # a freeze holds ticks; the schedule is still Ready
    ],
    ids=[
        "scheduled",
        "no further tick",
        "suspended",
        "suspended until",
        "finished beats suspended",
        "paused beats finished",
        "invalid",
        "frozen stays ready",
    ],
)
def test_ready_is_false_for_the_first_reason_in_the_table(
    standing: Standing, expected: tuple[str, str, str]
) -> None:
    assert ready_of(standing) == expected


def test_ready_keeps_its_transition_time_while_the_reason_holds() -> None:
    first, _ = conditions(
        (), replace(BASE, pause=PAUSED, pause_on_failure=True), now=T0, generation=GENERATION
    )
    again, notes = conditions(
        first, replace(BASE, pause=PAUSED, pause_on_failure=True), now=T0 + H, generation=GENERATION
    )
    [ready] = [c for c in again if c.type == "Ready"]
    assert ready.status == "False" and ready.last_transition_time == T0
    assert notes == ()  # no transition, no Event


def test_each_transition_is_said_once_in_order() -> None:
    standing = replace(
        BASE,
        suspension=SUSPENDED,
        finished=MAX_RUNS_REACHED,
        limited=True,
        pause=PAUSED,
        pause_on_failure=True,
        frozen=(window("w", T0 - H, T0 + H), T0 + H),
    )
    conds, notes = conditions((), standing, now=T0, generation=GENERATION)
    assert [n.reason for n in notes] == ["Suspended", "Finished", "Paused", "Frozen"]
    assert [c.type for c in conds] == [
        "InvalidSpec",
        "Suspended",
        "Ready",
        "Finished",
        "Paused",
        "Frozen",
    ]
    _, quiet = conditions(conds, standing, now=T0 + M, generation=GENERATION)
    assert quiet == ()


def test_an_invalid_spec_leaves_the_other_conditions_as_written() -> None:
    paused, _ = conditions(
        (), replace(BASE, pause=PAUSED, pause_on_failure=True), now=T0, generation=GENERATION
    )
    conds, notes = conditions(paused, Standing(invalid="bad"), now=T0 + H, generation=GENERATION)
    by_type = {c.type: c for c in conds}
    assert by_type["Paused"] == next(c for c in paused if c.type == "Paused")
    assert (by_type["InvalidSpec"].status, by_type["Ready"].reason) == ("True", "InvalidSpec")
    assert [n.reason for n in notes] == ["InvalidSpec"]


def test_no_success_objective_removes_the_stale_condition() -> None:
    stale = replace(BASE, freshness=Freshness(objective=True, stale="late"))
    conds, notes = conditions((), stale, now=T0, generation=GENERATION)
    assert any(c.type == "Stale" and c.status == "True" for c in conds)
    assert [n.reason for n in notes] == ["Stale"]
    gone, _ = conditions(conds, BASE, now=T0 + H, generation=GENERATION)
    assert all(c.type != "Stale" for c in gone)


# -- through decide: the labels the skip metric counts ---------------------------------


def skipped(body: dict[str, Any], jobs: list[Any], now: datetime, **kw: Any) -> Any:
    return decide(body, jobs, now=now, leadership=LEADER, **kw).skipped


def test_a_freeze_window_skip_is_counted_under_a_fixed_label_not_the_windows_name() -> None:
    spec = spec_body()
    body = schedule_body(spec, status_body(spec, cursor=T0 - H))
    labels = skipped(body, [], T0 + S, freezes=[window("release-42", T0 - M, T0 + M)])
    assert labels == ((SkipReason.FREEZE_WINDOW, 1),)
    assert all("release-42" not in reason.value for reason, _ in labels)


def test_forbid_and_missed_run_policy_skips_keep_their_labels() -> None:
    spec = spec_body(concurrencyPolicy="Forbid")
    body = schedule_body(spec, status_body(spec, cursor=T0 - H))
    assert skipped(body, [job(T0 - H)], T0 + S) == ((SkipReason.FORBID, 1),)
    assert SkipReason.FORBID.value == "concurrencyPolicy=Forbid"
    skip_all = spec_body(missedRunPolicy="Skip")
    late = schedule_body(skip_all, status_body(skip_all, cursor=T0 - 3 * H))
    assert skipped(late, [], T0 + S) == ((SkipReason.MISSED_RUN_POLICY, 3),)
    assert SkipReason.MISSED_RUN_POLICY.value == "missedRunPolicy=Skip"


def test_a_paused_schedule_keeps_ready_as_it_was_across_passes() -> None:
    spec = spec_body(pauseOnFailure={"consecutiveFailures": 1})
    jobs = [job(T0 - H, BROKEN)]
    first = decide(
        schedule_body(spec, status_body(spec, cursor=T0 - H)),
        jobs,
        now=T0 - 30 * M,
        leadership=LEADER,
    )
    assert first.status is not None
    ready = condition(first.status, "Ready")
    assert ready["reason"] == "Paused"
    later = decide(schedule_body(spec, first.status), jobs, now=T0 - 20 * M, leadership=LEADER)
    status = later.status or first.status
    assert condition(status, "Ready")["lastTransitionTime"] == ready["lastTransitionTime"]


def test_the_readme_lists_every_skip_label() -> None:
    readme = (Path(__file__).parents[2] / "README.md").read_text()
    [row] = [line for line in readme.splitlines() if "punctual_ticks_skipped_total" in line]
    assert [r.value for r in SkipReason if f"`{r.value}`" not in row] == []
