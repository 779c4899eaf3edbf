"""Which part of a Punctual Job costs the API server more than a plain Job: one part at a time.

    python bench/jobcost.py [--jobs 500] [--rounds 3]   # writes bench/results-jobcost/

Why it exists: the herd's raw client took 1.5-1.8x as long to create Punctual's Jobs as
plain ones (bench/results-herd: raw-same against raw-same-punctual-jobs). A Punctual Job
differs from a plain one in five parts: the fence (its punctual.dev/schedule-uid label
brings it under the fencing admission policy, whose CEL reads the Fence), the finalizer,
the owner reference to its CronSchedule, the stamped pod template (the firing's
environment), and its other labels and annotations. Each variant below is Punctual's
own Job (built by `core.jobs.build_job`, as the herd's raw client builds it) less one
part, beside the plain Job and the whole Punctual Job; every variant is created as a
batch of `--jobs` by one client (200 requests in flight, as the raw limit's), created
suspended so that the Job controller's pods do not share the two cores with the creates
(`--running` lets them run), in
`--rounds` rounds on one cluster, the order rotated each round so that a growing etcd
weighs on every variant alike, each batch started once the API server and etcd are
quiet again (under 0.15 of a core). Per variant: the client's time for the batch, the API
server's own time on a create (audit: received to answered, p50 and p90), and the API
server's and etcd's CPU per create, over the batch and over the Jobs' whole life (the Job
controller's pods and status, until every Job of the batch has finished, at most 60 s).

What it must never do: run a controller of Punctual's (nothing here fires: the owners'
one tick is years away), or leave the cluster running (Trial tears it down).
"""

from __future__ import annotations

import argparse
import asyncio
import copy
import json
import statistics
import subprocess
import sys
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from clock import log, wall
from punctualjob import punctual_job
from settings import FENCE, NAMESPACE, PROFILES, Scenario, rel

if TYPE_CHECKING:
    from trial import Trial

AGENT = "punctual-bench-jobcost"
LEADER, EPOCH = "bench-jobcost", 1
LIFE_CAP = 60.0  # seconds: how long to wait for a batch's Jobs to finish

Body = dict[str, Any]


def _without_fence(body: Body) -> Body:
    body["metadata"]["labels"].pop("punctual.dev/schedule-uid")  # out of the policy's selector
    return body


def _without_finalizer(body: Body) -> Body:
    body["metadata"].pop("finalizers", None)
    return body


def _without_owner(body: Body) -> Body:
    body["metadata"].pop("ownerReferences", None)
    return body


def _without_stamp(body: Body, plain: Body) -> Body:
    body["spec"]["template"] = copy.deepcopy(plain["spec"]["template"])
    return body


def _without_metadata(body: Body) -> Body:
    """Only what the fence judges: the schedule-uid label, the leader and epoch."""
    meta = body["metadata"]
    meta["labels"] = {"punctual.dev/schedule-uid": meta["labels"]["punctual.dev/schedule-uid"]}
    keep = ("punctual.dev/leader", "punctual.dev/epoch")
    meta["annotations"] = {k: v for k, v in meta["annotations"].items() if k in keep}
    return body


def variants(plain: Body) -> dict[str, Callable[[Body], Body]]:
    """Each variant: Punctual's Job -> the body created."""
    return {
        "plain Job": lambda _body: copy.deepcopy(plain),
        "Punctual's Job": lambda body: body,
        "without the fence": _without_fence,
        "without the finalizer": _without_finalizer,
        "without the owner": _without_owner,
        "without the stamped template": lambda body: _without_stamp(body, plain),
        "without other labels, annotations": _without_metadata,
    }


async def _owners(trial: Trial, n: int) -> list[Body]:
    from kubeapi import create_all
    from scenarios import _cronschedules

    return await create_all(
        trial.api,
        f"/apis/punctual.dev/v1/namespaces/{NAMESPACE}/cronschedules",
        _cronschedules(n, "0 0 1 1 *"),
        64,
    )


def _plain_job(name: str) -> Body:
    from scenarios import JOB_TEMPLATE

    meta = {"name": name, "namespace": NAMESPACE}
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": meta,
        **copy.deepcopy(JOB_TEMPLATE),
    }


PROFILE_SECONDS = 3


def _profile(trial: Trial, path: Path) -> subprocess.Popen[bytes]:
    """The API server's CPU profile (its /debug/pprof, `go tool pprof -top` reads it)
    over the next PROFILE_SECONDS, written to `path`."""
    from settings import BIN_DIR

    path.parent.mkdir(parents=True, exist_ok=True)
    kubectl = [str(BIN_DIR / "kubectl"), f"--kubeconfig={trial.cluster.kubeconfig}"]
    raw = f"/debug/pprof/profile?seconds={PROFILE_SECONDS}"
    with path.open("wb") as out:
        return subprocess.Popen([*kubectl, "get", "--raw", raw], stdout=out)


async def _quiet(pids: dict[str, int], cores: float = 0.15, cap: float = 60.0) -> None:
    """Wait until the API server and etcd together use less than `cores` for two half
    seconds in a row (the last batch's pods and Job status done), at most `cap` s."""
    from procfs import cpu_seconds

    calm, started = 0, wall()
    before = sum(cpu_seconds(p) for p in pids.values())
    while calm < 2 and wall() - started < cap:
        await asyncio.sleep(0.5)
        now = sum(cpu_seconds(p) for p in pids.values())
        calm = calm + 1 if (now - before) / 0.5 < cores else 0
        before = now


async def _batch(
    trial: Trial,
    bodies: list[Body],
    concurrency: int,
    *,
    suspended: bool,
    profile: Path | None = None,
) -> dict[str, Any]:
    from kubeapi import create_as_client_go, is_complete, list_all
    from procfs import cpu_seconds

    from punctual.kube.client import KubeClient
    from punctual.kube.credentials import load_kubeconfig

    pids = {k: trial.cluster.pids[k] for k in ("kube-apiserver", "etcd")}
    await _quiet(pids)
    names = {b["metadata"]["name"] for b in bodies}
    credentials = load_kubeconfig(trial.cluster.kubeconfig)
    async with KubeClient(credentials, user_agent=AGENT, timeout=120) as client:
        await client.get("/version")
        sampling = None if profile is None else _profile(trial, profile)
        cpu0 = {k: cpu_seconds(p) for k, p in pids.items()}
        started = wall()
        await create_as_client_go(
            client, f"/apis/batch/v1/namespaces/{NAMESPACE}/jobs", bodies, concurrency
        )
        created = wall()
        cpu1 = {k: cpu_seconds(p) for k, p in pids.items()}
        if sampling is not None:
            await asyncio.to_thread(sampling.wait)
    finished = suspended  # a suspended Job has no pods to finish: its life is its create
    if suspended:
        await _quiet(pids)
    while not finished and wall() - created < LIFE_CAP:
        await asyncio.sleep(1.0)
        jobs = await list_all(trial.api, f"/apis/batch/v1/namespaces/{NAMESPACE}/jobs")
        done = sum(1 for j in jobs if j["metadata"]["name"] in names and is_complete(j))
        if done == len(names):
            finished = True
            break
    lived = wall()
    cpu2 = {k: cpu_seconds(p) for k, p in pids.items()}
    await asyncio.sleep(0.5)
    trial.tail.poll()
    answered = [
        r.completed - r.received
        for r in trial.tail.requests
        if r.agent == AGENT and r.verb == "create" and r.code == 201 and r.name in names
    ]
    n = len(bodies)
    return {
        "jobs": n,
        "created": len(answered),
        "client_seconds": round(created - started, 3),
        "answered_p50_ms": round(statistics.median(answered) * 1e3, 2) if answered else None,
        "answered_p90_ms": round(statistics.quantiles(answered, n=10)[-1] * 1e3, 2)
        if len(answered) > 1
        else None,
        "create_cpu_ms": {k: round((cpu1[k] - cpu0[k]) / n * 1e3, 3) for k in pids},
        "life_cpu_ms": {k: round((cpu2[k] - cpu0[k]) / n * 1e3, 3) for k in pids},
        "life_seconds": round(lived - started, 1),
        "all_finished": finished,
        "bytes": round(statistics.mean(len(json.dumps(b)) for b in bodies)),
    }


async def measure(
    trial: Trial,
    jobs: int,
    rounds: int,
    concurrency: int,
    *,
    suspended: bool,
    profiled: tuple[str, ...] = (),
    only: tuple[str, ...] = (),
) -> None:
    from cluster import install_punctual

    from punctual.kube.fencing import raise_fence

    if not install_punctual(trial.cluster, trial.settings.source, fencing=True):
        raise RuntimeError("the fencing policy could not be installed")
    if not await raise_fence(trial.api, NAMESPACE, FENCE, LEADER, EPOCH):
        raise RuntimeError("the Fence could not be raised")
    owners = await _owners(trial, jobs)
    await asyncio.sleep(
        5.0
    )  # the policy's binding takes effect (no test create: it would be audited)
    shapes = variants(_plain_job("plain"))
    order = [v for v in shapes if not only or v in only]
    results: dict[str, list[dict[str, Any]]] = {name: [] for name in order}
    for r in range(rounds):
        for i, variant in enumerate(order[r % len(order) :] + order[: r % len(order)]):
            tick = datetime(2040 + r, 1 + i, 1, tzinfo=UTC)
            bodies = []
            for owner in owners:
                body = shapes[variant](punctual_job(owner, tick, leader=LEADER, epoch=EPOCH))
                if variant == "plain Job":
                    body["metadata"]["name"] = f"plain-{r}-{owner['metadata']['name']}"
                if suspended:
                    body["spec"]["suspend"] = True
                bodies.append(body)
            slug = variant.lower().replace(" ", "-").replace(",", "").replace("'", "")
            profile = None
            if variant in profiled:
                profile = trial.settings.results / "pprof" / f"{slug}-round{r + 1}.pb.gz"
            figures = await _batch(trial, bodies, concurrency, suspended=suspended, profile=profile)
            results[variant].append(figures)
            api_ms = figures["create_cpu_ms"]["kube-apiserver"]
            log(
                f"round {r + 1} {variant}: {figures['client_seconds']:.2f} s, answered p50 "
                f"{figures['answered_p50_ms']} ms, API server {api_ms} ms CPU a create"
            )
    trial.result["variants"] = results
    trial.result["settings"] = {
        "jobs": jobs,
        "rounds": rounds,
        "concurrency": concurrency,
        "suspended": suspended,
    }


def render(result: dict[str, Any]) -> str:
    """results.md: medians over the rounds, each variant against the plain Job."""
    variants_ = result["variants"]

    def med(rows: list[dict[str, Any]], get: Callable[[dict[str, Any]], float]) -> float:
        return statistics.median(get(row) for row in rows)

    plain = variants_["plain Job"]
    base = {
        "client": med(plain, lambda r: r["client_seconds"]),
        "p50": med(plain, lambda r: r["answered_p50_ms"]),
        "api": med(plain, lambda r: r["create_cpu_ms"]["kube-apiserver"]),
        "life": med(plain, lambda r: r["life_cpu_ms"]["kube-apiserver"] + r["life_cpu_ms"]["etcd"]),
    }
    s = result["settings"]
    lines = [
        "# What a Punctual Job costs the API server, part by part",
        "",
        f"Generated by `bench/jobcost.py` at commit {result.get('commit', '?')}: "
        f"{s['jobs']} Jobs a batch, {s['concurrency']} creates in flight, {s['rounds']} rounds "
        "on one cluster (order rotated each round); medians over the rounds, and each "
        "against the plain Job. "
        + (
            "Every Job is created suspended (`spec.suspend: true`): no pods, so the figures "
            "are the create's own, not the Job controller's beside it (`--running` for that)."
            if s.get("suspended")
            else "The Job controller runs every Job (kwok's pods), beside the creates."
        ),
        "",
        "| variant | bytes | client s a batch | x plain | answered p50 ms | p90 ms "
        "| API server CPU ms a create | x plain "
        "| API server + etcd CPU ms over the Job's life | x plain |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for name, rows in variants_.items():
        client = med(rows, lambda r: r["client_seconds"])
        p50 = med(rows, lambda r: r["answered_p50_ms"])
        p90 = med(rows, lambda r: r["answered_p90_ms"])
        api = med(rows, lambda r: r["create_cpu_ms"]["kube-apiserver"])
        life = med(rows, lambda r: r["life_cpu_ms"]["kube-apiserver"] + r["life_cpu_ms"]["etcd"])
        lines.append(
            f"| {name} | {rows[0]['bytes']} | {client:.2f} | {client / base['client']:.2f} | "
            f"{p50:.1f} | {p90:.1f} | {api:.2f} | {api / base['api']:.2f} | {life:.2f} | "
            f"{life / base['life']:.2f} |"
        )
    unfinished = [n for n, rows in variants_.items() if not all(r["all_finished"] for r in rows)]
    if unfinished:
        lines += [
            "",
            f"Not every Job finished within {LIFE_CAP:.0f} s in: {', '.join(unfinished)}.",
        ]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    import source

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else "")
    parser.add_argument("--jobs", type=int, default=500)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--concurrency", type=int, default=200)
    parser.add_argument(
        "--running",
        action="store_true",
        help="let the Job controller run the Jobs (pods and all), not created suspended",
    )
    parser.add_argument(
        "--pprof",
        default="",
        help="variants (comma-separated) whose batches the API server's CPU profile covers",
    )
    parser.add_argument(
        "--variants", default="", help="only these variants (comma-separated; the plain Job always)"
    )
    args = parser.parse_args(argv)
    profiled = tuple(v.strip() for v in args.pprof.split(",") if v.strip())
    only = tuple(v.strip() for v in args.variants.split(",") if v.strip())
    if only:
        only = ("plain Job", *only)
    settings = source.prepare("results-jobcost" + ("-running" if args.running else ""))
    (settings.results / "raw").mkdir(parents=True, exist_ok=True)
    from campaign import clean
    from machine import machine
    from trial import Trial

    trial = Trial(Scenario("raw", "burst", PROFILES["same"]), args.jobs, settings)

    async def body(t: Trial) -> None:
        await measure(
            t,
            args.jobs,
            args.rounds,
            args.concurrency,
            suspended=not args.running,
            profiled=profiled,
            only=only,
        )

    asyncio.run(trial.execute(body))
    result = dict(trial.result)
    result["machine"] = machine(settings.rev)
    result["commit"] = result["machine"]["commit"]
    (settings.results / "raw" / "jobcost.json").write_text(
        json.dumps(clean(result), indent=1) + "\n"
    )
    report = settings.results / "results.md"
    report.write_text(render(result))
    log(f"report: {rel(report)}")
    return 0


if __name__ == "__main__":
    from scale import reexec_in_venv

    reexec_in_venv()
    sys.exit(main())
