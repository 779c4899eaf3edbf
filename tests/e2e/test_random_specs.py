# ruff: noqa: E501 (the tables of mutations keep one case a line)
"""Random CronSchedules through the live API server while 20 good ones fire every second.

Why it exists: the CRD's schema and CEL rules refuse some bad specs, Punctual's own
reading (pydantic, the cron parser, the zone database, the kinds it serves) refuses
others, and between the two every spec must end somewhere a user can see: a 422 from
the API server that names its field, or an `InvalidSpec` condition whose message starts
with the field (`spec.schedule: day 30 never occurs in February`). Nothing a user can
write may crash the operator, log a traceback, or slow the schedules that are fine.

What it generates (hypothesis strategies, `cases()` below), each case with an intent:
- valid: every spec field with values inside its bounds (cron with seconds, H, L, W,
  #, macros and odd spacing; lists of cron and interval entries; runAt; exclusions by
  cron, dates and ranges; windows; every policy; real time zones; huge annotations and
  full lists). Accepted, and never InvalidSpec. Their crons are rare (fixed hours and
  days, months other than December), so they do not add a herd to the good schedules.
- refused: one field broken as the CRD refuses it (wrong type, out of range, unknown
  enum value, too long, bad pattern, a CEL rule such as startTime >= endTime, no
  jobTemplate). A 422 whose message names that field.
- invalid: one field broken as only Punctual sees it (`0 0 30 2 *`, minute 61, an
  unknown time zone, an interval that is no whole second, an exclusion that removes
  every tick, a workloadTemplate kind not served, a CEL completion that does not
  compile, instants beyond what datetime holds in UTC). Accepted; InvalidSpec naming it.
- any: one to three fields (nested ones too) set to junk (nulls, huge numbers, unicode
  and control characters, near-RFC 3339 times, odd cron tokens) or removed. Refused
  naming a spec field, or accepted with a Ready condition that has a reason, and an
  InvalidSpec message, if any, starting with `spec.`.

The seed: the cases are the examples of one `@given` run in hypothesis's generate phase
only, with `@seed(FUZZ_SEED)`, no example database and no constants read from the
modules loaded (`without_local_constants`), so the same seed gives the same cases
whatever else runs (their sha256 is printed with -s to compare runs). FUZZ_SEED defaults to a fixed
number; set it to vary the cases, FUZZ_COUNT to change how many (500).

Figures (refused / InvalidSpec / valid, the good schedules' lag) are printed with -s.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import hashlib
import json
import os
import statistics
import time
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from itertools import pairwise
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, Phase, given, seed, settings
from hypothesis import strategies as st

try:
    from hypothesis.internal.conjecture import providers
except ImportError:  # pragma: no cover - another hypothesis
    providers = None  # type: ignore[assignment]

from punctual.kube.client import ApiError, KubeClient, Unavailable

from .conftest import Cluster
from .operators import job_creates, now, operators, tick_of, wait_until
from .test_operator import leader_of, schedule

pytestmark = pytest.mark.e2e

FUZZ_SEED = int(os.environ.get("FUZZ_SEED", "25003"))
COUNT = int(os.environ.get("FUZZ_COUNT", "500"))
GOOD = 20
# The good schedules' p99 firing lag (Job create received by the API server minus its
# tick). A quiet operator keeps it under 1 s (test_operator); here the API server,
# etcd and the operator also take in 500 creates and as many first status writes on
# two cores, so twice that.
LAG_P99_BOUND = 2.0
STATUS_DEADLINE = 120.0  # seconds after the last create for every status to be written

Spec = dict[str, Any]
Draw = st.DrawFn


@dataclass
class Case:
    """One generated spec and what must become of it."""

    intent: str  # valid, refused, invalid or any
    spec: Spec
    field: str = ""  # refused: the text the 422 must hold; invalid: InvalidSpec's prefix
    note: str = ""  # which mutation, for failure messages


# -- valid values ------------------------------------------------------------------------

ZONES = [
    "UTC",
    "Europe/Berlin",
    "America/New_York",
    "America/St_Johns",
    "Asia/Kathmandu",
    "Australia/Lord_Howe",
    "Pacific/Chatham",
    "Etc/GMT+12",
    "Etc/GMT-14",
    "America/Argentina/Buenos_Aires",
    "Africa/Casablanca",
]
OFFSETS = ["Z", "+00:00", "+05:30", "-08:00", "+14:00", "-12:00", "+05:45"]


def rfc3339(instant: datetime, offset: str, fraction: str = "") -> str:
    return instant.strftime("%Y-%m-%dT%H:%M:%S") + fraction + offset


@st.composite
def times(draw: Draw, low: int, high: int) -> str:
    """An RFC 3339 instant between the years `low` and `high`, in various spellings."""
    instant = draw(st.datetimes(datetime(low, 1, 1), datetime(high, 12, 28)))  # noqa: DTZ001
    fraction = draw(st.sampled_from(["", "", ".5", ".123456", ".000000001"]))
    return rfc3339(instant, draw(st.sampled_from(OFFSETS)), fraction)


@st.composite
def rare_crons(draw: Draw) -> str:
    """A cron expression that fires on few days (never in December, so the valid
    exclusions below never remove every tick), a few times on those days at most."""
    if draw(st.integers(0, 9)) == 0:
        return draw(st.sampled_from(["@yearly", "@annually", "@monthly", "@weekly", "@daily"]))
    second = draw(st.sampled_from(["", "", "0 ", "30 ", "H ", "0,30 ", "15-17 "]))
    minute = draw(st.sampled_from(["0", "30", "H", "5,35", "0-2", "H(0-29)", "*/20"]))
    hour = draw(st.sampled_from(["0", "3", "H", "9-17/4", "23", "12"]))
    month = draw(
        st.sampled_from(["1", "2", "6", "11", "JAN", "mar", "4-5", "1,6", "*/4", "FEB-APR"])
    )
    if draw(st.booleans()):
        # H(1-28), not H: a day hashed from the uid (which the API server makes up) may
        # be the 31st, which June alone never has (a valid case called invalid, once in
        # some runs: CI's r-203, an entry with H for its day and June for its month).
        dom = draw(
            st.sampled_from(["1", "13", "15", "28", "L", "L-3", "15W", "1W", "LW", "H(1-28)"])
        )
        dow = "*"
    else:
        dom = "*"
        dow = draw(st.sampled_from(["1#3", "5L", "0", "MON", "sat", "1-5", "2,4"]))
    space = draw(st.sampled_from([" ", " ", "  ", "\t"]))
    text = space.join([minute, hour, dom, month, dow])
    return second + text if space == " " else second.replace(" ", space) + text


EVERY = ["1h", "90m", "24h", "1h30m", "720h", "8760h", "45m", "2h0m0s", "3600s", "1.5h"]


@st.composite
def entries(draw: Draw) -> dict[str, str]:
    if draw(st.booleans()):
        return {"cron": draw(rare_crons())}
    every = draw(st.sampled_from(EVERY))
    entry = {"every": every}
    if draw(st.booleans()):
        entry["offset"] = draw(st.sampled_from(["0s", "30s", "15m", "10m0s"]))
    return entry


@st.composite
def exclusions(draw: Draw) -> dict[str, Any]:
    kind = draw(st.sampled_from(["cron", "dates", "range"]))
    if kind == "cron":
        return {"cron": draw(st.sampled_from(["* * * 12 *", "* * 31 12 *", "0 0 24-26 12 *"]))}
    if kind == "dates":
        dates = draw(
            st.lists(
                st.dates(datetime(2026, 1, 1).date(), datetime(2030, 12, 31).date()),  # noqa: DTZ001
                min_size=1,
                max_size=draw(st.sampled_from([3, 3, 400])),
                unique=True,
            )
        )
        return {"dates": [d.isoformat() for d in dates]}
    start = draw(st.datetimes(datetime(2027, 1, 1), datetime(2027, 12, 1)))  # noqa: DTZ001
    end = start + timedelta(seconds=draw(st.integers(1, 30 * 86400)))
    return {"from": rfc3339(start, "Z"), "to": rfc3339(end, "Z")}


def pod_template(run_ms: int = 200) -> dict[str, Any]:
    return {
        "metadata": {"annotations": {"pod-complete.stage.kwok.x-k8s.io/delay": f"{run_ms}ms"}},
        "spec": {"restartPolicy": "Never", "containers": [{"name": "c", "image": "busybox"}]},
    }


@st.composite
def job_templates(draw: Draw) -> dict[str, Any]:
    template: dict[str, Any] = {"spec": {"backoffLimit": 0, "template": pod_template()}}
    if draw(st.booleans()):
        labels = draw(
            st.dictionaries(
                st.from_regex(r"\A[a-z][a-z0-9-]{0,20}\Z"),
                st.from_regex(r"\A[A-Za-z0-9]{0,20}\Z"),
                max_size=4,
            )
        )
        template["metadata"] = {"labels": labels}
    if draw(st.integers(0, 19)) == 0:  # a huge annotation (50 kB of unicode)
        template.setdefault("metadata", {})["annotations"] = {"note": "é☃" * 10_000}
    return template


@st.composite
def valid_specs(draw: Draw) -> Spec:
    spec: Spec = {}
    trigger = draw(st.sampled_from(["schedule", "schedule", "schedules", "runAt"]))
    if trigger == "schedule":
        spec["schedule"] = draw(rare_crons())
    elif trigger == "schedules":
        spec["schedules"] = draw(st.lists(entries(), min_size=1, max_size=20))
    elif draw(st.integers(0, 9)) == 0:  # in the past: fires once at creation
        spec["runAt"] = draw(times(2020, 2025))
    else:
        spec["runAt"] = draw(times(2031, 2200))

    def maybe(name: str, values: st.SearchStrategy[Any]) -> None:
        if draw(st.integers(0, 3)) == 0:
            spec[name] = draw(values)

    maybe("timeZone", st.sampled_from(ZONES))
    maybe("startingDeadlineSeconds", st.integers(0, 31_622_400))
    policies = ["Skip", "RunLatest"] + ([] if trigger == "runAt" else ["RunAll"])
    maybe("missedRunPolicy", st.sampled_from(policies))
    maybe("maxMissedRuns", st.integers(1, 1000))
    maybe(
        "concurrencyPolicy",
        st.sampled_from(["Allow", "Forbid", "Replace", "BufferOne", "BufferAll"]),
    )
    maybe("maxBuffered", st.integers(1, 100))
    maybe("maxConcurrent", st.integers(1, 1000))
    maybe("suspend", st.booleans())
    maybe("suspendUntil", times(2020, 2200))
    maybe("pauseOnFailure", st.builds(lambda n: {"consecutiveFailures": n}, st.integers(1, 20)))
    maybe("successDeadlineSeconds", st.integers(1, 31_622_400))
    maybe("pendingTimeoutSeconds", st.integers(1, 31_622_400))
    maybe("jitterSeconds", st.integers(0, 3600))
    maybe("successfulJobsHistoryLimit", st.integers(0, 100))
    maybe("failedJobsHistoryLimit", st.integers(0, 100))
    if trigger != "runAt":
        maybe("exclude", st.lists(exclusions(), min_size=1, max_size=50))
        maybe("startTime", times(2020, 2040))
        maybe("endTime", times(2099, 2300))
        maybe("maxRuns", st.integers(1, 1_000_000_000))
    if draw(st.integers(0, 9)) == 0:  # the Job kind spelled as a workloadTemplate
        spec["workloadTemplate"] = {
            "apiVersion": "batch/v1",
            "kind": "Job",
            "spec": {"backoffLimit": 0, "template": pod_template()},
        }
    else:
        spec["jobTemplate"] = draw(job_templates())
    return spec


# -- one field broken as the CRD refuses it ----------------------------------------------

Mutation = Callable[[Spec], None]


def put(key: str, value: Any) -> Mutation:
    def mutate(spec: Spec) -> None:
        spec[key] = value

    return mutate


def trigger(key: str, value: Any) -> Mutation:
    """Replace whichever trigger the spec has with `key: value`."""

    def mutate(spec: Spec) -> None:
        for name in ("schedule", "schedules", "runAt"):
            spec.pop(name, None)
        if key != "runAt":
            spec.pop("runAt", None)
        else:
            for name in ("exclude", "startTime", "endTime", "maxRuns"):
                spec.pop(name, None)
            if spec.get("missedRunPolicy") == "RunAll":
                del spec["missedRunPolicy"]
        spec[key] = value

    return mutate


def template(value: Any, *, drop: bool = False) -> Mutation:
    def mutate(spec: Spec) -> None:
        spec.pop("jobTemplate", None)
        spec.pop("workloadTemplate", None)
        if not drop:
            spec.update(value)

    return mutate


def window(start: str, end: str) -> Mutation:
    def mutate(spec: Spec) -> None:
        trigger("schedule", "0 0 1 1 *")(spec)
        spec["startTime"], spec["endTime"] = start, end

    return mutate


def both(*mutations: Mutation) -> Mutation:
    def mutate(spec: Spec) -> None:
        for m in mutations:
            m(spec)

    return mutate


JOB = {"spec": {"template": pod_template()}}
EXCLUDE_BASE = trigger("schedule", "0 0 1 1 *")
REFUSED: list[tuple[str, str, Mutation]] = [
    ("spec.schedule", "empty schedule", trigger("schedule", "")),
    ("spec.schedule", "three fields", trigger("schedule", "* * *")),
    ("spec.schedule", "seven fields", trigger("schedule", "* * * * * * *")),
    ("spec.schedule", "unknown macro", trigger("schedule", "@fortnightly")),
    ("spec.schedule", "schedule too long", trigger("schedule", "0 0 1 1 " + "*" * 300)),
    ("spec.schedule", "schedule a number", trigger("schedule", 5)),
    ("spec.schedule", "schedule a list", trigger("schedule", ["* * * * *"])),
    ("spec.schedules", "no entries", trigger("schedules", [])),
    ("spec.schedules", "21 entries", trigger("schedules", [{"every": "1h"}] * 21)),
    ("spec.schedules", "cron and every", trigger("schedules", [{"cron": "0 0 1 1 *", "every": "1h"}])),
    ("spec.schedules", "empty entry", trigger("schedules", [{}])),
    ("spec.schedules", "offset without every", trigger("schedules", [{"cron": "0 0 1 1 *", "offset": "5m"}])),
    ("spec.schedules", "every 0s", trigger("schedules", [{"every": "0s"}])),
    ("spec.schedules", "every 500ms", trigger("schedules", [{"every": "500ms"}])),
    ("spec.schedules", "offset past every", trigger("schedules", [{"every": "1h", "offset": "2h"}])),
    ("spec.schedules", "every with a space", trigger("schedules", [{"every": "1 h"}])),
    ("spec.schedules", "every in days", trigger("schedules", [{"every": "1d"}])),
    ("spec.schedules", "schedules an object", trigger("schedules", {"cron": "0 0 1 1 *"})),
    ("spec.runAt", "runAt not a time", trigger("runAt", "tomorrow")),
    ("spec.runAt", "runAt month 13", trigger("runAt", "2027-13-01T00:00:00Z")),
    ("spec.runAt", "runAt a number", trigger("runAt", 1_800_000_000)),
    ("spec.schedule", "no trigger", trigger("schedule", None)),
    ("spec.schedule", "two triggers", both(trigger("schedule", "0 0 1 1 *"), put("runAt", "2031-01-01T00:00:00Z"))),
    ("spec.exclude", "exclude with runAt", both(trigger("runAt", "2031-01-01T00:00:00Z"), put("exclude", [{"cron": "* * * 12 *"}]))),
    ("spec.exclude", "maxRuns with runAt", both(trigger("runAt", "2031-01-01T00:00:00Z"), put("maxRuns", 3))),
    ("spec.missedRunPolicy", "RunAll with runAt", both(trigger("runAt", "2031-01-01T00:00:00Z"), put("missedRunPolicy", "RunAll"))),
    ("spec.exclude", "no exclusions", both(EXCLUDE_BASE, put("exclude", []))),
    ("spec.exclude", "51 exclusions", both(EXCLUDE_BASE, put("exclude", [{"cron": "* * * 12 *"}] * 51))),
    ("spec.exclude", "cron and dates", both(EXCLUDE_BASE, put("exclude", [{"cron": "* * * 12 *", "dates": ["2027-01-01"]}]))),
    ("spec.exclude", "from without to", both(EXCLUDE_BASE, put("exclude", [{"from": "2027-01-01T00:00:00Z"}]))),
    ("spec.exclude", "to before from", both(EXCLUDE_BASE, put("exclude", [{"from": "2027-02-01T00:00:00Z", "to": "2027-01-01T00:00:00Z"}]))),
    ("spec.exclude", "a date without zeros", both(EXCLUDE_BASE, put("exclude", [{"dates": ["2027-1-1"]}]))),
    ("spec.exclude", "no dates", both(EXCLUDE_BASE, put("exclude", [{"dates": []}]))),
    ("spec.exclude", "401 dates", both(EXCLUDE_BASE, put("exclude", [{"dates": ["2027-01-01"] * 401}]))),
    ("spec.exclude", "cron exclusion of 3 fields", both(EXCLUDE_BASE, put("exclude", [{"cron": "* * *"}]))),
    ("spec.startTime", "startTime equal to endTime", window("2027-01-01T00:00:00Z", "2027-01-01T00:00:00Z")),
    ("spec.startTime", "startTime after endTime", window("2028-01-01T00:00:00Z", "2027-01-01T00:00:00+01:00")),
    ("spec.startTime", "startTime not a time", both(EXCLUDE_BASE, put("startTime", "soon"))),
    ("spec.maxRuns", "maxRuns 0", both(EXCLUDE_BASE, put("maxRuns", 0))),
    ("spec.maxRuns", "maxRuns over a billion", both(EXCLUDE_BASE, put("maxRuns", 1_000_000_001))),
    ("spec.maxRuns", "maxRuns a string", both(EXCLUDE_BASE, put("maxRuns", "5"))),
    ("spec.timeZone", "empty timeZone", put("timeZone", "")),
    ("spec.timeZone", "timeZone with a space", put("timeZone", "Europe/New York")),
    ("spec.timeZone", "timeZone of 65 characters", put("timeZone", "A" * 65)),
    ("spec.timeZone", "timeZone with a leading slash", put("timeZone", "/UTC")),
    ("spec.timeZone", "timeZone in unicode", put("timeZone", "Europe/Zürich")),
    ("spec.timeZone", "timeZone a number", put("timeZone", 3)),
    ("spec.startingDeadlineSeconds", "negative deadline", put("startingDeadlineSeconds", -1)),
    ("spec.startingDeadlineSeconds", "deadline over a year", put("startingDeadlineSeconds", 31_622_401)),
    ("spec.startingDeadlineSeconds", "fractional deadline", put("startingDeadlineSeconds", 1.5)),
    ("spec.missedRunPolicy", "unknown missedRunPolicy", put("missedRunPolicy", "Sometimes")),
    ("spec.missedRunPolicy", "missedRunPolicy in lower case", put("missedRunPolicy", "runall")),
    ("spec.missedRunPolicy", "empty missedRunPolicy", put("missedRunPolicy", "")),
    ("spec.maxMissedRuns", "maxMissedRuns 0", put("maxMissedRuns", 0)),
    ("spec.maxMissedRuns", "maxMissedRuns 1001", put("maxMissedRuns", 1001)),
    ("spec.concurrencyPolicy", "concurrencyPolicy Never", put("concurrencyPolicy", "Never")),
    ("spec.concurrencyPolicy", "concurrencyPolicy in lower case", put("concurrencyPolicy", "allow")),
    ("spec.concurrencyPolicy", "concurrencyPolicy a boolean", put("concurrencyPolicy", True)),
    ("spec.maxBuffered", "maxBuffered 0", put("maxBuffered", 0)),
    ("spec.maxBuffered", "maxBuffered 101", put("maxBuffered", 101)),
    ("spec.maxConcurrent", "maxConcurrent 0", put("maxConcurrent", 0)),
    ("spec.maxConcurrent", "maxConcurrent 1001", put("maxConcurrent", 1001)),
    ("spec.suspend", "suspend yes", put("suspend", "yes")),
    ("spec.suspend", "suspend 1", put("suspend", 1)),
    ("spec.suspendUntil", "suspendUntil not a time", put("suspendUntil", "later")),
    ("spec.pauseOnFailure", "pauseOnFailure empty", put("pauseOnFailure", {})),
    ("spec.pauseOnFailure", "pauseOnFailure 0", put("pauseOnFailure", {"consecutiveFailures": 0})),
    ("spec.pauseOnFailure", "pauseOnFailure 21", put("pauseOnFailure", {"consecutiveFailures": 21})),
    ("spec.pauseOnFailure", "pauseOnFailure a number", put("pauseOnFailure", 3)),
    ("spec.successDeadlineSeconds", "successDeadlineSeconds 0", put("successDeadlineSeconds", 0)),
    ("spec.pendingTimeoutSeconds", "pendingTimeoutSeconds over a year", put("pendingTimeoutSeconds", 31_622_401)),
    ("spec.jitterSeconds", "negative jitter", put("jitterSeconds", -1)),
    ("spec.jitterSeconds", "jitter over an hour", put("jitterSeconds", 3601)),
    ("spec.className", "className in upper case", put("className", "Canary")),
    ("spec.className", "className with a leading dash", put("className", "-canary")),
    ("spec.className", "className of 64 characters", put("className", "a" * 64)),
    ("spec.successfulJobsHistoryLimit", "history 101", put("successfulJobsHistoryLimit", 101)),
    ("spec.failedJobsHistoryLimit", "negative failed history", put("failedJobsHistoryLimit", -1)),
    ("spec.jobTemplate", "no template at all", template(None, drop=True)),
    ("spec.jobTemplate", "jobTemplate without spec", template({"jobTemplate": {}})),
    ("spec.jobTemplate", "jobTemplate without a pod template", template({"jobTemplate": {"spec": {"backoffLimit": 1}}})),
    ("spec.jobTemplate", "jobTemplate a string", template({"jobTemplate": "busybox"})),
    ("spec.jobTemplate", "a label that is a number", template({"jobTemplate": {**JOB, "metadata": {"labels": {"a": 1}}}})),
    ("spec.jobTemplate", "both templates", template({"jobTemplate": JOB, "workloadTemplate": {"apiVersion": "batch/v1", "kind": "Job", "spec": {}}})),
    ("spec.workloadTemplate", "workloadTemplate without kind", template({"workloadTemplate": {"apiVersion": "argoproj.io/v1alpha1", "spec": {}}})),
    ("spec.workloadTemplate", "workloadTemplate with an empty kind", template({"workloadTemplate": {"apiVersion": "v1", "kind": "", "spec": {}}})),
    ("spec.workloadTemplate", "workloadTemplate apiVersion too long", template({"workloadTemplate": {"apiVersion": "a" * 254, "kind": "X", "spec": {}}})),
    ("spec.completion", "completion with a jobTemplate", both(template({"jobTemplate": JOB}), put("completion", {"succeeded": "true"}))),
    ("spec.completion", "empty completion rule", both(template({"workloadTemplate": {"apiVersion": "batch/v1", "kind": "Job", "spec": JOB["spec"]}}), put("completion", {"failed": ""}))),
]  # fmt: skip


# -- one field broken as only Punctual sees it -------------------------------------------


def unsuspended(spec: Spec) -> None:
    """Firing on (a suspended schedule plans no tick, so finds no exclusion too wide)."""
    spec.pop("suspend", None)
    spec.pop("suspendUntil", None)


UNSUSPENDED: Mutation = unsuspended
JOB_WORKLOAD = {"workloadTemplate": {"apiVersion": "batch/v1", "kind": "Job", "spec": JOB["spec"]}}
INVALID: list[tuple[str, str, Mutation]] = [
    ("spec.schedule", "30 February", trigger("schedule", "0 0 30 2 *")),
    ("spec.schedule", "31 April", trigger("schedule", "0 0 31 4 *")),
    ("spec.schedule", "minute 61", trigger("schedule", "61 * * * *")),
    ("spec.schedule", "day-of-week 8", trigger("schedule", "0 0 * * 8")),
    ("spec.schedule", "words", trigger("schedule", "a b c d e")),
    ("spec.schedule", "step 0", trigger("schedule", "*/0 * * * *")),
    ("spec.schedule", "a snowman", trigger("schedule", "☃ * * * *")),
    ("spec.schedule", "second 60", trigger("schedule", "60 0 0 1 1 *")),
    ("spec.schedule", "L-40", trigger("schedule", "0 0 L-40 * *")),
    ("spec.schedule", "fifth-and-more Monday", trigger("schedule", "0 0 * * 1#6")),
    ("spec.schedule", "a NUL", trigger("schedule", "0 0 1 1 \x00")),
    ("spec.schedules[1].cron", "second entry 30 February", trigger("schedules", [{"every": "1h"}, {"cron": "0 0 30 2 *"}])),
    ("spec.schedules[0].every", "every 1500ms", trigger("schedules", [{"every": "1500ms"}])),
    ("spec.schedules[0].every", "every over 100 years", trigger("schedules", [{"every": "1000000h"}])),
    ("spec.schedules[0].offset", "offset 500ms", trigger("schedules", [{"every": "1h", "offset": "500ms"}])),
    ("spec.timeZone", "Mars/Base", put("timeZone", "Mars/Base")),
    ("spec.timeZone", "Europe/Atlantis", put("timeZone", "Europe/Atlantis")),
    ("spec.timeZone", "Etc/GMT+15", put("timeZone", "Etc/GMT+15")),
    ("spec.exclude[0].cron", "exclusion minute 61", both(EXCLUDE_BASE, put("exclude", [{"cron": "61 * * * *"}]))),
    ("spec.exclude", "an exclusion of every tick", both(EXCLUDE_BASE, UNSUSPENDED, put("exclude", [{"cron": "* * 1 1 *"}]))),
    ("spec.workloadTemplate.kind", "a Workflow, not served", template({"workloadTemplate": {"apiVersion": "argoproj.io/v1alpha1", "kind": "Workflow", "spec": {}}})),
    ("spec.workloadTemplate.kind", "a Pod, not served", template({"workloadTemplate": {"apiVersion": "v1", "kind": "Pod", "spec": {}}})),
    ("spec.completion.succeeded", "a completion that is no CEL", both(template(JOB_WORKLOAD), put("completion", {"succeeded": "self.status. =="}))),
    ("spec.completion.failed", "a completion of spaces", both(template(JOB_WORKLOAD), put("completion", {"failed": "   "}))),
    ("spec.runAt", "runAt past year 9999 in UTC", trigger("runAt", "9999-12-31T23:59:59-01:00")),
    ("spec.startTime", "startTime before year 1 in UTC", both(EXCLUDE_BASE, put("startTime", "0001-01-01T00:00:00+01:00"))),
    ("spec.endTime", "endTime past year 9999 in UTC", both(EXCLUDE_BASE, put("endTime", "9999-12-31T23:30:00-01:00"))),
    ("spec.suspendUntil", "suspendUntil past year 9999 in UTC", put("suspendUntil", "9999-12-31T23:30:00-01:00")),
    ("spec.runAt", "runAt on the last day, with jitter", both(trigger("runAt", "9999-12-31T23:59:59Z"), put("jitterSeconds", 3600))),
    ("spec.startTime", "startTime on the first day", both(EXCLUDE_BASE, put("startTime", "0001-01-01T00:00:00Z"))),
    ("spec.exclude[0].dates[1]", "an excluded date on the last day", both(EXCLUDE_BASE, put("exclude", [{"dates": ["2027-01-01", "9999-12-31"]}]))),
    ("spec.exclude[0].from", "an exclusion before year 1 in UTC", both(EXCLUDE_BASE, put("exclude", [{"from": "0001-01-01T00:00:00+01:00", "to": "2027-01-01T00:00:00Z"}]))),
]  # fmt: skip


# -- junk --------------------------------------------------------------------------------

NASTY = [
    "",
    " ",
    "\x00",
    "\u202e0 0 1 1 *",
    "0\u20030 1 1 *",  # an em space: not whitespace to the CRD's pattern
    "0 0 1 1 *\v",
    "0 0 1 1 * *\u2003*",
    "\u0663 \u0663 \u0661 \u0661 *",  # Arabic-Indic digits
    "\uff10 \uff10 \uff11 \uff11 \uff0a",  # full-width
    "H(5-1) * * * *",
    "0 0 LW-1 * *",
    "0 0 ? * *",
    "1- * * * *",
    "*/ * * * *",
    "0x10 * * * *",
    "9999999999999999999999 * * * *",
    "0 0 1 1 * 2027",
    "2027-01-01 00:00:00",
    "2027-01-01T00:00Z",
    "2027-01-01t00:00:00z",
    "2027-01-01T00:00:00+0100",
    "2027-01-01T00:00:00",
    "2027-01-01T24:00:00Z",
    "2027-02-29T00:00:00Z",
    "2028-02-29T00:00:00Z",
    "9999-12-31T23:59:59-01:00",
    "0001-01-01T00:00:00+01:00",
    "0000-01-01T00:00:00Z",
    "2027-01-01T00:00:00.123456789Z",
    "2027-02-30",
    "0000-01-01",
    "1h-5m",
    "1e3s",
    "99999999999999999999h",
    "Etc/Unknown",
    "../../etc/passwd",
    "posixrules",
    "Factory",
    "${jndi:ldap://x}",
    "🙂" * 70,
    "a" * 300,
]
JUNK: st.SearchStrategy[Any] = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**70), 2**70),
    st.sampled_from([0, -1, 2**31, 2**53 + 1, 2**63, 1e308, -0.0, 0.5]),
    st.floats(allow_nan=False, allow_infinity=False, width=32),
    st.text(max_size=40),
    st.text(min_size=200, max_size=3000),
    st.sampled_from(NASTY),
    st.lists(st.one_of(st.integers(), st.text(max_size=5)), max_size=3),
    st.dictionaries(st.text(max_size=8), st.one_of(st.integers(), st.text(max_size=8)), max_size=3),
)
# Where junk goes: every field of the spec, and nested ones (created when missing).
PATHS: list[tuple[str | int, ...]] = [
    ("schedule",),
    ("schedules",),
    ("schedules", 0),
    ("schedules", 0, "cron"),
    ("schedules", 0, "every"),
    ("schedules", 0, "offset"),
    ("runAt",),
    ("exclude",),
    ("exclude", 0),
    ("exclude", 0, "cron"),
    ("exclude", 0, "dates"),
    ("exclude", 0, "dates", 0),
    ("exclude", 0, "from"),
    ("exclude", 0, "to"),
    ("startTime",),
    ("endTime",),
    ("maxRuns",),
    ("timeZone",),
    ("startingDeadlineSeconds",),
    ("missedRunPolicy",),
    ("maxMissedRuns",),
    ("concurrencyPolicy",),
    ("maxBuffered",),
    ("maxConcurrent",),
    ("suspend",),
    ("suspendUntil",),
    ("pauseOnFailure",),
    ("pauseOnFailure", "consecutiveFailures"),
    ("successDeadlineSeconds",),
    ("pendingTimeoutSeconds",),
    ("jitterSeconds",),
    ("className",),
    ("successfulJobsHistoryLimit",),
    ("failedJobsHistoryLimit",),
    ("jobTemplate",),
    ("jobTemplate", "metadata"),
    ("jobTemplate", "metadata", "labels"),
    ("jobTemplate", "spec"),
    ("jobTemplate", "spec", "template"),
    ("workloadTemplate",),
    ("workloadTemplate", "apiVersion"),
    ("workloadTemplate", "kind"),
    ("completion",),
    ("completion", "succeeded"),
    ("unknownField",),
]
DELETE = object()


def place(spec: Spec, path: tuple[str | int, ...], value: Any) -> None:
    """Set (or, for DELETE, remove) `path` in `spec`, making the containers it needs."""
    node: Any = spec
    for key, nxt in pairwise(path):
        if isinstance(key, int):
            if not isinstance(node, list):
                return
            while len(node) <= key:
                node.append({} if isinstance(nxt, str) else [])
            node = node[key]
        else:
            if not isinstance(node, dict):
                return
            child = node.get(key)
            want: type = dict if isinstance(nxt, str) else list
            if not isinstance(child, want):
                node[key] = child = want()
            node = child
    last = path[-1]
    if isinstance(last, int):
        if isinstance(node, list):
            while len(node) <= last:
                node.append(None)
            if value is DELETE:
                node.pop(last)
            else:
                node[last] = value
    elif isinstance(node, dict):
        if value is DELETE:
            node.pop(last, None)
        else:
            node[last] = value


@st.composite
def cases(draw: Draw) -> Case:
    intent = draw(st.sampled_from(["valid"] * 7 + ["refused"] * 5 + ["invalid"] * 4 + ["any"] * 4))
    spec = draw(valid_specs())
    if intent == "valid":
        return Case("valid", spec)
    if intent in ("refused", "invalid"):
        table = REFUSED if intent == "refused" else INVALID
        named, note, mutate = draw(st.sampled_from(table))
        mutate(spec)
        return Case(intent, spec, named, note)
    touched = []
    for _ in range(draw(st.integers(1, 3))):
        path = draw(st.sampled_from(PATHS))
        value = DELETE if draw(st.integers(0, 5)) == 0 else draw(JUNK)
        place(spec, path, value)
        touched.append(".".join(map(str, path)) + (" removed" if value is DELETE else ""))
    return Case("any", spec, note=", ".join(touched))


@contextlib.contextmanager
def without_local_constants() -> Iterator[None]:
    """Hypothesis (6.13x on) mixes into its draws constants it reads from every local
    module loaded: the same seed would draw other cases in `make test` than alone, or
    after any edit elsewhere. Its provider's pool of them is emptied while drawing (an
    internal of the pinned version; without it, the printed sha256 still tells)."""
    if providers is None or not hasattr(providers, "_get_local_constants"):
        yield
        return
    empty = providers.Constants()  # type: ignore[attr-defined]
    saved = providers._get_local_constants
    providers.CONSTANTS_CACHE.cache.clear()
    providers._get_local_constants = lambda: empty
    try:
        yield
    finally:
        providers._get_local_constants = saved
        providers.CONSTANTS_CACHE.cache.clear()


def generate(fuzz_seed: int, count: int) -> list[Case]:
    """`count` cases, the same ones for the same seed (see the module docstring)."""
    drawn: list[Case] = []

    @seed(fuzz_seed)
    @settings(
        max_examples=count,
        database=None,
        phases=[Phase.generate],
        deadline=None,
        suppress_health_check=list(HealthCheck),
    )
    @given(cases())
    def collect(case: Case) -> None:
        drawn.append(case)

    with without_local_constants():
        collect()
    return drawn[:count]


# -- the test ----------------------------------------------------------------------------


@dataclass
class Outcome:
    case: Case
    name: str
    refused: ApiError | None = None
    stored: dict[str, Any] = field(default_factory=dict)


def body(name: str, spec: Spec) -> dict[str, Any]:
    return {
        "apiVersion": "punctual.dev/v1",
        "kind": "CronSchedule",
        "metadata": {"name": name},
        "spec": spec,
    }


async def create_all(
    api: KubeClient, path: str, objects: list[tuple[str, dict[str, Any]]], *, at_once: int = 16
) -> dict[str, tuple[dict[str, Any] | None, ApiError | None]]:
    """Create every object, `at_once` at a time (429 and 5xx retried): name -> (the
    stored object, or the API server's refusal)."""
    queue: asyncio.Queue[tuple[str, dict[str, Any]]] = asyncio.Queue()
    for item in objects:
        queue.put_nowait(item)
    results: dict[str, tuple[dict[str, Any] | None, ApiError | None]] = {}

    async def worker() -> None:
        while not queue.empty():
            name, obj = queue.get_nowait()
            for attempt in range(30):
                try:
                    results[name] = (await api.create(path, obj), None)
                    break
                except Unavailable:
                    await asyncio.sleep(min(2.0, 0.2 * (attempt + 1)))
                except ApiError as error:
                    results[name] = (None, error)
                    break

    await asyncio.gather(*(worker() for _ in range(at_once)))
    return results


def ready_of(obj: dict[str, Any]) -> dict[str, Any] | None:
    for cond in (obj.get("status") or {}).get("conditions") or []:
        if cond.get("type") == "Ready":
            return dict(cond)
    return None


def settled(obj: dict[str, Any]) -> bool:
    """The operator wrote a status for this generation, with a Ready that has a reason."""
    ready = ready_of(obj)
    status = obj.get("status") or {}
    return (
        ready is not None
        and ready.get("status") in ("True", "False")
        and bool(ready.get("reason"))
        and status.get("observedGeneration") == obj["metadata"].get("generation")
    )


def other_class(obj: dict[str, Any]) -> bool:
    """Whether another installation's class fires it (this operator writes no status)."""
    name = (obj.get("spec") or {}).get("className")
    return isinstance(name, str) and bool(name)


def fields_named(error: ApiError) -> str:
    """The refusal's message and its causes' fields, where the field names appear."""
    causes = (error.body.get("details") or {}).get("causes") or []
    return " ".join([error.message, *(str(c.get("field", "")) for c in causes)])


def judge(outcome: Outcome) -> str | None:
    """What is wrong with one outcome, or None."""
    case, stored, refused = outcome.case, outcome.stored, outcome.refused
    where = f"{outcome.name} ({case.intent}: {case.note or 'valid'})"
    if refused is not None:
        said = fields_named(refused)
        if refused.status != 422:
            return f"{where}: refused with {refused.status}, not 422: {refused.message[:300]}"
        if case.intent == "valid":
            return f"{where}: a valid spec refused: {refused.message[:300]}"
        if case.intent == "invalid":
            return f"{where}: refused by the API server, Punctual alone refuses it: {said[:300]}"
        wanted = case.field if case.intent == "refused" else "spec."
        if wanted not in said:
            return f"{where}: the refusal does not name {wanted}: {said[:300]}"
        return None
    if case.intent == "refused":
        return f"{where}: accepted by the API server, expected a 422 naming {case.field}"
    if other_class(stored):
        return None if not stored.get("status") else f"{where}: another class, given a status"
    ready = ready_of(stored)
    if ready is None or not settled(stored):
        return f"{where}: no status for its generation: {stored.get('status')}"
    reason, message = ready.get("reason"), str(ready.get("message") or "")
    if reason == "InvalidSpec" and not message.startswith("spec."):
        return f"{where}: InvalidSpec naming no field: {message[:300]}"
    if case.intent == "valid" and reason == "InvalidSpec":
        return f"{where}: a valid spec called invalid: {message[:300]}"
    if case.intent == "invalid" and not (
        reason == "InvalidSpec" and message.startswith(case.field)
    ):
        return f"{where}: expected InvalidSpec naming {case.field}, got {reason}: {message[:300]}"
    return None


def percentiles(values: list[float]) -> tuple[float, float]:
    """p50 and p99 of sorted `values` (0, 0 for none)."""
    if not values:
        return 0.0, 0.0
    return statistics.median(values), values[min(len(values) - 1, int(len(values) * 0.99))]


async def test_random_specs_are_refused_or_reported_and_never_slow_the_good_ones(
    crd: Cluster, api: KubeClient, namespace: str, tmp_path: Path
) -> None:
    if crd.audit_log is None:
        pytest.skip("needs the local control plane's audit log")
    began = time.monotonic()
    generated = generate(FUZZ_SEED, COUNT)
    digest = hashlib.sha256(
        json.dumps([(c.intent, c.spec) for c in generated], sort_keys=True).encode()
    ).hexdigest()[:16]
    print(
        f"\nFUZZ_SEED={FUZZ_SEED}: {len(generated)} cases "
        f"{dict(Counter(c.intent for c in generated))}, sha256 {digest}, "
        f"drawn in {time.monotonic() - began:.1f}s"
    )
    assert len(generated) == COUNT, "hypothesis drew fewer cases than asked"
    path = f"/apis/punctual.dev/v1/namespaces/{namespace}/cronschedules"
    with operators(crd, namespace, tmp_path) as ops:
        op = ops.start("solo")
        wait_until(lambda: leader_of(crd, namespace) == "solo", 20, what="leadership")
        # RunAll: a late tick still fires, late (RunLatest would drop it, hiding the lag).
        good = [
            schedule(
                f"good-{i:02d}",
                "* * * * * *",
                run_ms=200,
                missedRunPolicy="RunAll",
                maxMissedRuns=60,
            )
            for i in range(GOOD)
        ]
        made = await create_all(api, path, [(g["metadata"]["name"], g) for g in good])
        assert all(error is None for _, error in made.values()), made
        await asyncio.sleep(3)  # their first passes out of the measured window
        quiet = now()
        await asyncio.sleep(6)  # a baseline: their lag before the random ones come
        started = now()
        objects = [
            (f"r-{i:03d}", body(f"r-{i:03d}", copy.deepcopy(c.spec)))
            for i, c in enumerate(generated)
        ]
        t0 = time.monotonic()
        results = await create_all(api, path, objects)
        created_in = time.monotonic() - t0
        burst_end = now()
        outcomes = [
            Outcome(case, name, results[name][1], results[name][0] or {})
            for case, (name, _) in zip(generated, objects, strict=True)
        ]
        accepted = {o.name for o in outcomes if o.refused is None}
        waited = {o.name for o in outcomes if o.refused is None and not other_class(o.stored)}

        # Every accepted schedule (but another class's) gets a status for its generation.
        t1 = time.monotonic()
        stored: dict[str, dict[str, Any]] = {}
        while True:
            try:  # a list of every object: the API server is slow to answer it under load
                listed = await api.get(path)
            except Unavailable:
                if time.monotonic() - t1 > STATUS_DEADLINE:
                    break
                continue
            stored = {i["metadata"]["name"]: i for i in listed.get("items") or []}
            missing = [n for n in sorted(waited) if not settled(stored.get(n, {}))]
            assert op.proc.poll() is None, "the operator exited"
            if not missing or time.monotonic() - t1 > STATUS_DEADLINE:
                break
            await asyncio.sleep(2)
        statuses_in = time.monotonic() - t1
        await asyncio.sleep(5)  # the good ones fire on past the last status write
        finished = now()
        for outcome in outcomes:
            if outcome.name in accepted:
                outcome.stored = stored.get(outcome.name, outcome.stored)
        assert op.proc.poll() is None, "the operator exited"
        log = op.output()

    # The figures.
    refused = [o for o in outcomes if o.refused is not None]
    readies = Counter(
        (ready_of(o.stored) or {}).get("reason", "none") for o in outcomes if o.name in waited
    )
    print(
        f"{len(outcomes)} created in {created_in:.1f}s: {len(refused)} refused by the API "
        f"server, {len(accepted)} accepted ({len(accepted) - len(waited)} of another class); "
        f"statuses written within {statuses_in:.1f}s; Ready reasons {dict(readies)}"
    )
    creates = [
        c for c in job_creates(crd, namespace) if c.code == 201 and c.name.startswith("good-")
    ]
    window = [
        c
        for c in creates
        if started + timedelta(seconds=1) < tick_of(c.name) < finished - timedelta(seconds=2)
    ]
    lags = sorted((c.at - tick_of(c.name)).total_seconds() for c in window)
    assert lags, "no good firing in the window"
    p50, p99 = percentiles(lags)
    burst = sorted((c.at - tick_of(c.name)).total_seconds() for c in window if c.at < burst_end)
    baseline = sorted(
        (c.at - tick_of(c.name)).total_seconds()
        for c in creates
        if quiet < tick_of(c.name) < started - timedelta(seconds=1)
    )
    print(
        f"good schedules: {len(lags)} firings over {(finished - started).total_seconds():.0f}s, "
        f"lag p50 {p50 * 1000:.0f} ms, p99 {p99 * 1000:.0f} ms, max {lags[-1] * 1000:.0f} ms "
        f"(during the creates: p50/p99 {'/'.join(f'{x * 1000:.0f}' for x in percentiles(burst))} "
        f"ms over {len(burst)}; before them: "
        f"{'/'.join(f'{x * 1000:.0f}' for x in percentiles(baseline))} ms); other Job creates "
        f"{len(job_creates(crd, namespace)) - len(creates)}; wall {time.monotonic() - began:.0f}s; "
        f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs"
    )

    # The operator never crashed nor logged a traceback.
    assert "Traceback" not in log, log[log.index("Traceback") - 2000 :][:6000]
    # Each spec ended as its intent says.
    problems = [p for o in outcomes if (p := judge(o)) is not None]
    assert not problems, f"{len(problems)} specs misjudged:\n" + "\n".join(problems[:40])
    # The good ones fired every tick, once, on time.
    counts = Counter(c.name for c in creates)
    assert not [n for n, k in counts.items() if k > 1], "a good tick fired twice"
    for i in range(GOOD):
        ticks = sorted(tick_of(c.name) for c in window if c.name.startswith(f"good-{i:02d}-"))
        gaps = [(a, b) for a, b in pairwise(ticks) if b - a != timedelta(seconds=1)]
        assert ticks and not gaps, f"good-{i:02d} lost ticks: {gaps[:5]}"
    # Kept: under the bound, or, on a machine already slow before the creates (others'
    # clusters on the same cores), within twice the p99 it had then.
    bound = max(LAG_P99_BOUND, 2 * percentiles(baseline)[1])
    assert p99 < bound, f"good schedules' lag p99 {p99:.2f}s (bound {bound:.2f}s)"
