"""The benchmark's figures, from the API server's own data.

Why it exists: "how late was each Job" and "how many writes did a firing cost" must
not be taken from the word of the process under test. The API server's audit log has
the microsecond instant it received every create of a Job and every write to a
CronSchedule, a CronJob or a Lease (the audit policy, e2e/manifests/audit-policy.yaml
widened by bench/cluster.py, logs only those), with the user agent that sent it. The
Job name carries the tick it fires for: `<schedule>-<unix seconds>` for Punctual,
`<cronjob>-<unix minutes>` for CronJob.

Nothing here talks to the API server; `run.py` feeds it audit lines and Job lists.
"""

from __future__ import annotations

import json
import math
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

# The resources a firing creates: Jobs, and the workloads scenario's Exports (a CRD kind
# of e2e/manifests/workloads/, fired through spec.workloadTemplate). Nothing else in the
# bench namespace is called exports.
FIRED = frozenset({"jobs", "exports"})


@dataclass(frozen=True, slots=True)
class Request:
    """One audited request (stage ResponseComplete)."""

    verb: str
    resource: str  # "jobs", "cronschedules/status", "leases", ...
    namespace: str
    name: str
    code: int
    reason: str
    received: float  # requestReceivedTimestamp, Unix seconds
    agent: str
    completed: float = math.nan  # stageTimestamp: when it was answered (a 429: refused)


def parse_instant(text: str) -> float:
    """An RFC 3339 timestamp (audit or metadata) as Unix seconds."""
    return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()


def parse_line(line: bytes | str) -> Request | None:
    try:
        event = json.loads(line)
    except ValueError:
        return None
    if event.get("stage") != "ResponseComplete":
        return None
    ref = event.get("objectRef") or {}
    resource = ref.get("resource", "")
    if ref.get("subresource"):
        resource += "/" + ref["subresource"]
    status = event.get("responseStatus") or {}
    return Request(
        verb=event.get("verb", ""),
        resource=resource,
        namespace=ref.get("namespace", ""),
        name=ref.get("name", ""),
        code=int(status.get("code") or 0),
        reason=str(status.get("reason") or ""),
        received=parse_instant(event["requestReceivedTimestamp"]),
        agent=event.get("userAgent", ""),
        completed=parse_instant(event.get("stageTimestamp") or event["requestReceivedTimestamp"]),
    )


class AuditTail:
    """Reads an audit log incrementally (it only grows while the API server runs)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.offset = 0
        self._partial = b""
        self.requests: list[Request] = []

    def poll(self) -> list[Request]:
        """The requests logged since the last poll (also appended to `requests`)."""
        try:
            with self.path.open("rb") as f:
                f.seek(self.offset)
                data = f.read()
        except FileNotFoundError:
            return []
        self.offset += len(data)
        data = self._partial + data
        lines = data.split(b"\n")
        self._partial = lines.pop()
        new = [r for r in map(parse_line, lines) if r is not None]
        self.requests.extend(new)
        return new


# -- statistics -------------------------------------------------------------------------


def percentile(sorted_values: Sequence[float], q: float) -> float:
    """Linear interpolation between closest ranks (numpy's default), q in [0, 100]."""
    if not sorted_values:
        return math.nan
    position = (len(sorted_values) - 1) * q / 100.0
    low = math.floor(position)
    high = min(low + 1, len(sorted_values) - 1)
    fraction = position - low
    return sorted_values[low] + (sorted_values[high] - sorted_values[low]) * fraction


def summary(values: Iterable[float]) -> dict[str, float]:
    ordered = sorted(values)
    if not ordered:
        return {"count": 0, "min": math.nan, "p50": math.nan, "p99": math.nan, "max": math.nan}
    return {
        "count": len(ordered),
        "min": ordered[0],
        "p50": percentile(ordered, 50),
        "p90": percentile(ordered, 90),
        "p99": percentile(ordered, 99),
        "max": ordered[-1],
        "mean": sum(ordered) / len(ordered),
    }


# -- firings ----------------------------------------------------------------------------


@dataclass
class Firings:
    """What the audit log says about the Job creates of one scenario."""

    expected: int
    attempts: Counter[int] = field(default_factory=Counter)  # response code -> creates
    skews: list[float] = field(default_factory=list)  # received - tick, one per 201
    by_tick: dict[float, list[float]] = field(default_factory=dict)
    missing: list[str] = field(default_factory=list)  # schedules without a Job
    duplicates: list[str] = field(default_factory=list)  # schedules with more than one Job
    wrong_tick: list[str] = field(default_factory=list)  # Jobs for a tick not expected
    first_create: float = math.nan
    last_create: float = math.nan
    created: dict[str, float] = field(default_factory=dict)  # job name -> received
    # The API server's own time on each create answered 201: stageTimestamp minus
    # requestReceivedTimestamp (whether the server or its client set the pace).
    answered_in: list[float] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        ticks = sorted(self.by_tick)
        per_tick = [summary(self.by_tick[t]) for t in ticks]
        return {
            "expected": self.expected,
            "created": sum(1 for _ in self.created),
            "attempts": {str(k): v for k, v in sorted(self.attempts.items())},
            "missing": len(self.missing),
            "missing_examples": self.missing[:5],
            "duplicates": len(self.duplicates),
            "duplicate_examples": self.duplicates[:5],
            "wrong_tick": len(self.wrong_tick),
            "wrong_tick_examples": self.wrong_tick[:5],
            "skew": summary(self.skews),
            "ticks": len(ticks),
            "worst_tick_p99": max((s["p99"] for s in per_tick), default=math.nan),
            "first_create": self.first_create,
            "last_create": self.last_create,
            "answered_in": summary(self.answered_in),
        }


def split_job_name(job: str) -> tuple[str, int] | None:
    schedule, _, suffix = job.rpartition("-")
    if not schedule or not suffix.isdigit():
        return None
    return schedule, int(suffix)


def firings(
    requests: Iterable[Request],
    *,
    namespace: str,
    expected_ticks: dict[str, float],
    tick_of: Callable[[int], float],
    agent: Callable[[str], bool],
) -> Firings:
    """Skew of every created Job against its tick; missing and duplicate firings.

    `expected_ticks` maps each schedule (or CronJob) name to the one tick that should
    fire in the scenario; `tick_of` turns a Job name's numeric suffix into a tick
    (seconds for Punctual, minutes for CronJob).
    """
    result = Firings(expected=len(expected_ticks))
    jobs_of: dict[str, list[str]] = defaultdict(list)
    for r in requests:
        if r.verb != "create" or r.resource not in FIRED or r.namespace != namespace:
            continue
        if not agent(r.agent):
            continue
        result.attempts[r.code] += 1
        if r.code != 201:
            continue
        parsed = split_job_name(r.name)
        if parsed is None or parsed[0] not in expected_ticks:
            result.wrong_tick.append(r.name)
            continue
        schedule, suffix = parsed
        tick = tick_of(suffix)
        jobs_of[schedule].append(r.name)
        result.created[r.name] = r.received
        if not math.isnan(r.completed):
            result.answered_in.append(r.completed - r.received)
        if abs(tick - expected_ticks[schedule]) > 1e-6:
            result.wrong_tick.append(r.name)
        skew = r.received - tick
        result.skews.append(skew)
        result.by_tick.setdefault(tick, []).append(skew)
    for schedule in expected_ticks:
        names = jobs_of.get(schedule, [])
        if not names:
            result.missing.append(schedule)
        elif len(set(names)) > 1 or len(names) > 1:
            result.duplicates.append(schedule)
    if result.created:
        result.first_create = min(result.created.values())
        result.last_create = max(result.created.values())
    return result


def writes(
    requests: Iterable[Request],
    *,
    agent: Callable[[str], bool],
    start: float,
    end: float,
    split: float | None = None,
) -> dict[str, Any]:
    """Writes by `agent` in [start, end], by verb and resource (and before/after `split`)."""
    total: Counter[str] = Counter()
    before: Counter[str] = Counter()
    for r in requests:
        if not agent(r.agent) or not start <= r.received <= end:
            continue
        key = f"{r.verb} {r.resource}"
        total[key] += 1
        if split is not None and r.received <= split:
            before[key] += 1
    leases = sum(v for k, v in total.items() if k.endswith(" leases"))
    return {
        "by_kind": dict(sorted(total.items())),
        "total": sum(total.values()),
        "without_leases": sum(total.values()) - leases,
        "leases": leases,
        "until_last_create": sum(v for k, v in before.items() if not k.endswith(" leases")),
    }


# A request already past the client's gate when a 429 comes back still goes out: a burst
# of Punctual's 128 workers took up to 0.4 s to leave its one event loop (and its pool of
# 100 connections) in the overload runs.
IN_FLIGHT = 0.5


def refusals(
    requests: Iterable[Request], *, agent: Callable[[str], bool], start: float, end: float
) -> dict[str, Any]:
    """The Job creates `agent` sent in [start, end], second by second: how many, how many
    the server refused (429), and the rate sent in the seconds it was refusing (is a
    refusal answered by a storm of retries?). `per_second` is [second from `start`,
    sent, refused]. Also the Retry-After each 429 carried (APF's rule replayed) and how
    many creates were sent while one ran (more than IN_FLIGHT after its 429)."""
    sent: Counter[int] = Counter()
    refused: Counter[int] = Counter()
    codes: Counter[int] = Counter()
    instants: list[float] = []
    refusals_at: list[float] = []
    for r in requests:
        if r.verb != "create" or r.resource not in FIRED or not agent(r.agent):
            continue
        if not start <= r.received <= end:
            continue
        second = int(r.received - start)
        sent[second] += 1
        codes[r.code] += 1
        instants.append(r.received)
        if r.code == 429:
            refused[second] += 1
            refusals_at.append(r.completed)
    refusals_at.sort()
    waits = apf_retry_after(refusals_at)
    pauses = [(at + IN_FLIGHT, at + wait) for at, wait in zip(refusals_at, waits, strict=True)]
    while_refused = [sent[s] for s in refused]
    return {
        "creates": sum(sent.values()),
        "codes": {str(k): v for k, v in sorted(codes.items())},
        "refused": sum(refused.values()),
        "seconds_refused": len(refused),
        "peak_rate": max(sent.values(), default=0),
        "peak_rate_refused": max(while_refused, default=0),
        "mean_rate_refused": sum(while_refused) / len(while_refused) if while_refused else 0.0,
        "per_second": [[s, sent[s], refused[s]] for s in sorted(sent)],
        "retry_after": {str(k): v for k, v in sorted(Counter(waits).items())},
        "sent_during_retry_after": sum(
            1 for t in instants if any(begin < t < end for begin, end in pauses)
        ),
    }


def apf_retry_after(refused: Sequence[float]) -> list[int]:
    """The Retry-After API Priority and Fairness gave each 429 refused at these sorted
    instants (the audit's stageTimestamp: a request received late in one second may be
    refused in the next), replayed from its rule (Kubernetes 1.28+, flowcontrol's
    dropped_requests_tracker.go); exact when the priority level refuses no one else, as
    on the overloaded bench server.

    Per priority level, from 1 s: at the first refusal of each second, doubled (at most
    32 s) if the level refused at least 3 x its value in the last value seconds and has
    not grown for value seconds; else lowered by 1 s if it refused fewer than its value.
    """
    history: list[tuple[int, int]] = []  # (second, refusals) before the current second
    current, count, value, grown = -1, 0, 1, 0
    out = []
    for instant in refused:
        second = int(instant)
        if second != current:
            if current >= 0:
                history.append((current, count))
                history = [h for h in history if current - h[0] <= min(2 * value, 32)]
            current, count = second, 0
            dropped = sum(n for s, n in history if second - s <= value)
            if second - grown >= value and dropped >= 3 * value:
                value, grown = min(2 * value, 32), second
            elif dropped < value and value > 1:
                value -= 1
        count += 1
        out.append(value)
    return out


def creation_check(
    jobs: Sequence[dict[str, Any]], created: dict[str, float], tick_of_job: Callable[[str], float]
) -> dict[str, Any]:
    """Cross-check: each Job's creationTimestamp (whole seconds) against the audit instant.

    The API server stamps creationTimestamp while serving the create it received at the
    audited instant, so creationTimestamp - floor(received) is 0 (or 1 when the request
    straddled a second boundary). Skews computed from creationTimestamp agree with the
    audit's to within that second.
    """
    listed = {j["metadata"]["name"]: j for j in jobs}
    differences: Counter[int] = Counter()
    skews: list[float] = []
    not_listed = 0
    for name, received in created.items():
        job = listed.get(name)
        if job is None:
            not_listed += 1
            continue
        stamp = parse_instant(job["metadata"]["creationTimestamp"])
        differences[int(stamp - math.floor(received))] += 1
        skews.append(stamp - tick_of_job(name))
    extra = sorted(set(listed) - set(created))
    return {
        "listed": len(listed),
        "created_not_listed": not_listed,
        "listed_not_audited": len(extra),
        "listed_not_audited_examples": extra[:5],
        "creation_minus_received_floor": {str(k): v for k, v in sorted(differences.items())},
        "skew_from_creation_timestamp": summary(skews),
    }


def lease_takeovers(requests: Iterable[Request], *, lease: str) -> list[tuple[float, str]]:
    """(instant, agent) of each successful Lease write whose writer differs from the last."""
    out: list[tuple[float, str]] = []
    last = None
    for r in sorted(requests, key=lambda r: r.received):
        if r.resource != "leases" or r.name != lease or r.code not in (200, 201):
            continue
        if r.verb not in ("create", "update", "patch"):
            continue
        if r.agent != last:
            out.append((r.received, r.agent))
            last = r.agent
    return out
