"""Punctual side by side with the built-in CronJob controller, on the same control plane.

    python bench/run.py                      # sizes from BENCH_SIZES (default 100,1000)
    BENCH_SIZES=100,1000,10000 python bench/run.py
    python bench/run.py --sizes 100 --scenarios punctual-herd-defaults,raw-same
    python bench/render.py [folder]          # rebuild results.md and skew.png from raw/

Every scenario runs on a fresh local control plane (e2e/localcluster.py) under
.cluster-bench/ on ports 18443..18448, so it never touches the dev (16443) or test
(17443) clusters, and every scenario starts from an empty etcd and an empty audit log.
The cluster is torn down after each scenario, also on errors and Ctrl-C.

Scenarios, for each N:

* punctual-herd-<profile>: N CronSchedules whose 6-field schedule `S M H * * *` fires
  all of them at one instant T (jitter 0), handled by one `punctual run`.
* cronjob-herd-<profile>: N batch/v1 CronJobs `M H * * *` firing at the minute T,
  handled by kube-controller-manager's CronJob controller.
* punctual-spread / cronjob-spread: the same N spread out: Punctual with `H M H * * *`
  (the second hashed from each schedule's uid: spread over one minute); CronJob, whose
  schedules have minute resolution, over BENCH_CRONJOB_SPREAD_MINUTES distinct minutes.
* raw-<profile>: the physical limit: one asyncio client (punctual.kube.client.KubeClient)
  creating N Jobs at high concurrency, as fast as the API server takes them.
* raw-same-punctual-jobs (optional): the same client creating the very Jobs Punctual
  creates (built by core.jobs, owned by N CronSchedules, admitted by the fencing policy):
  what the API server spends on Punctual's Jobs, apart from the operator.
* failover-defaults: two Punctual replicas; the leader is killed with SIGKILL one
  second before T; the standby takes the Lease when it expires and fires.
* punctual-herd-overload, raw-overload (optional, scale-out): the herd and the raw
  client on an API server whose API Priority and Fairness refuses (429) part of it,
  both as a user it may refuse (cluster.OVERLOAD): 429s, retries, rate while refused.

Profiles (settings.PROFILES): "defaults" runs each controller at its own defaults
(`punctual run`'s, recorded in each result's settings; kube-controller-manager
--kube-api-qps 20 --kube-api-burst 30); "same" runs both at --qps 200 --burst 400, the
client limits e2e/localcluster.py gives the controller-manager. The CronJob controller
runs in a kube-controller-manager of its own (cluster.BenchCluster), so that the Job
controller and the others run with the same limits in every scenario.

Everything measured comes from the API server: the audit log's
requestReceivedTimestamp of every Job create (and Job creationTimestamp as a
cross-check), its record of every write, and Job status. Process CPU and peak RSS come
from /proc. Results go to bench/results/raw/<scenario>-<n>.json, then results.md and
skew.png are rebuilt from all raw files by the renderer (rendering/, the same that
`python bench/render.py` runs): this entry point measures, it does not format.

Environment: BENCH_SIZES, BENCH_SCENARIOS, BENCH_PROFILE (py-spy | cprofile: profile
every Punctual leader; its figures are then kept apart from the main table),
BENCH_POD_RUN_MS (default 1000), BENCH_CRONJOB_SPREAD_MINUTES (default 2),
BENCH_RAW_CONCURRENCY (default 200), BENCH_KEEP (keep audit logs and operator logs in
.cluster-bench-artifacts/, default 1), BENCH_FENCING (install the fencing admission
policy, as the Helm chart does by default; default 1), BENCH_SETTLE_CAP (seconds to wait
for the Jobs to finish and the controller to go quiet after the last create; default
30 + 0.15 per schedule, at most 600), BENCH_PUNCTUAL_REV (benchmark a
commit instead of the work tree), BENCH_RESULTS (results folder, default bench/results).

This file is the entry point only, and must never act at import time: main() (and,
under `__main__`, the re-exec into .venv) does what must come first: PUNCTUAL_*
variables cleared, the benchmarked source extracted and put on sys.path (source.py),
and only then the modules that import `punctual`. What runs where: settings.py
(scenarios, profiles, BENCH_* settings), campaign.py (every scenario at every size),
trial.py (one scenario on one fresh cluster), scenarios.py (what each scenario does),
observing.py (measuring a tick), cluster.py (the control plane), replicas.py (the
operator processes, via e2e/operatorprocess.py), kubeapi.py, procfs.py, clock.py,
machine.py; measure.py turns the audit log into the raw figures, stacks.py py-spy's
stacks into shares; rendering/ turns the raw files into the report.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
from pathlib import Path

import rendering
import source
from clock import log
from settings import VENV, Settings, rel, select


def reexec_in_venv() -> None:
    """`python bench/run.py` from outside the virtualenv: run again inside it."""
    if Path(sys.prefix).resolve() != VENV.resolve() and (VENV / "bin" / "python").exists():
        os.execv(str(VENV / "bin" / "python"), [str(VENV / "bin" / "python"), *sys.argv])


def _interrupt(signum: int, _frame: object) -> None:
    raise KeyboardInterrupt(f"signal {signum}")


def parse_arguments(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description="Punctual vs CronJob benchmark")
    parser.add_argument("--sizes", default=os.environ.get("BENCH_SIZES") or "100,1000")
    parser.add_argument("--scenarios", default=os.environ.get("BENCH_SCENARIOS"))
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    # SIGTERM, and SIGINT even when started in the background (where the shell ignores
    # it), interrupt the run so that the finally blocks stop the operators and the
    # cluster; asyncio.run cancels the scenario's task on KeyboardInterrupt.
    signal.signal(signal.SIGTERM, _interrupt)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    args = parse_arguments(argv)
    source.clear_operator_environment()
    tree = source.extract(os.environ.get("BENCH_PUNCTUAL_REV", ""))
    source.put_on_path(tree)
    settings = Settings.from_environment(os.environ, tree)
    if settings.profiler not in ("", "py-spy", "cprofile"):
        raise SystemExit("BENCH_PROFILE must be py-spy or cprofile")
    (settings.results / "raw").mkdir(parents=True, exist_ok=True)
    # Imported only now: it imports `punctual`, which must come from `tree`, and e2e/'s
    # modules, which put_on_path made importable.
    import campaign

    sizes = [int(s) for s in args.sizes.split(",") if s.strip()]
    if not campaign.run_all(sizes, select(args.scenarios), settings):
        return 130
    for path in rendering.render(settings.results):
        log(f"report: {rel(path)}")
    return 0


if __name__ == "__main__":
    reexec_in_venv()
    sys.exit(main())
