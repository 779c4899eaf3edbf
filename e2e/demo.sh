#!/usr/bin/env bash
# make demo: from nothing to a firing schedule on the local control plane.
# Starts the control plane (if not running), installs the CRD, starts one operator
# replica in the background (pid in .cluster/operator.pid, log in .cluster/operator.log),
# applies a sample that fires every 10 seconds, and shows Jobs appearing.
# `make cluster-down` stops everything, the operator included.
set -euo pipefail
cd "$(dirname "$0")/.."
state=.cluster
kubectl=(.cluster/bin/kubectl --kubeconfig "$state/kubeconfig")

if ! .venv/bin/python - <<'PY'
import sys; sys.path.insert(0, "e2e")
from localcluster import LocalCluster
c = LocalCluster(); c._load_pids()
try:
    c.wait_ready(2)
except Exception:
    sys.exit(1)
PY
then
  .venv/bin/python e2e/localcluster.py up --state-dir "$state"
fi

"${kubectl[@]}" apply -f crds/cronschedules.punctual.dev.yaml -f crds/fences.punctual.dev.yaml >/dev/null
"${kubectl[@]}" wait --for=condition=Established --timeout=60s crd/cronschedules.punctual.dev crd/fences.punctual.dev >/dev/null

if [ -f "$state/operator.pid" ] && kill -0 "$(cat "$state/operator.pid")" 2>/dev/null; then
  echo "operator already running (pid $(cat "$state/operator.pid"))"
else
  KUBECONFIG="$state/kubeconfig" nohup .venv/bin/punctual run --namespace default --lease-namespace default \
    --metrics-port "${PUNCTUAL_METRICS_PORT:-18080}" >"$state/operator.log" 2>&1 &
  echo $! >"$state/operator.pid"
  echo "operator started (pid $!, log $state/operator.log, metrics on :${PUNCTUAL_METRICS_PORT:-18080})"
fi

"${kubectl[@]}" apply -n default -f crds/samples/every-second-catch-up.yaml
echo
for _ in 1 2 3 4; do
  sleep 8
  echo "\$ kubectl get cronschedules,jobs        ($(date +%T))"
  "${kubectl[@]}" get -n default cronschedules,jobs
  echo
done
cat <<MSG
Punctual is firing heartbeat every 10 seconds. Try:
  export KUBECONFIG=$PWD/$state/kubeconfig PATH=$PWD/.cluster/bin:$PWD/.venv/bin:\$PATH
  kubectl punctual history heartbeat        # recent firings and outcomes
  kubectl punctual trigger heartbeat        # fire it now, once
  curl -s localhost:${PUNCTUAL_METRICS_PORT:-18080}/metrics | grep ^punctual_
Stop everything with: make cluster-down
MSG
