#!/usr/bin/env bash
# make e2e-kind: the e2e suite on a kind cluster, with Punctual built as an image and
# installed from the Helm chart. Needs Docker and kind (https://kind.sigs.k8s.io); kubectl
# and helm from PATH or from .cluster/bin (make binaries). Extra arguments go to pytest.
#
#   KIND_CLUSTER=punctual-e2e   the cluster's name
#   KIND_NODE_IMAGE=            a kindest/node image (default: kind's own)
#   KEEP_CLUSTER=0              1: keep the cluster afterwards (run again to reuse it)
set -euo pipefail
cd "$(dirname "$0")/../.."

cluster=${KIND_CLUSTER:-punctual-e2e}
image=punctual:dev
state=.cluster-kind                      # git-ignored, like every .cluster-*/
export KUBECONFIG=$PWD/$state/kubeconfig
export PATH=$PWD/.cluster/bin:$PATH

for tool in docker kind kubectl helm; do
  command -v "$tool" >/dev/null || { echo "e2e-kind: $tool not found" >&2; exit 2; }
done
docker info >/dev/null 2>&1 || { echo "e2e-kind: no Docker engine reachable" >&2; exit 2; }
[ -x .venv/bin/pytest ] || { echo "e2e-kind: run 'make venv' first" >&2; exit 2; }

mkdir -p "$state"
if ! kind get clusters | grep -qx "$cluster"; then
  kind create cluster --name "$cluster" --config e2e/kind/kind-config.yaml \
    --kubeconfig "$KUBECONFIG" ${KIND_NODE_IMAGE:+--image "$KIND_NODE_IMAGE"} --wait 120s
fi
if [ "${KEEP_CLUSTER:-0}" != 1 ]; then
  trap 'kind delete cluster --name "$cluster"' EXIT
fi
kind export kubeconfig --name "$cluster" --kubeconfig "$KUBECONFIG"

echo "--- image"
docker build -f operator/Dockerfile -t "$image" .
kind load docker-image "$image" --name "$cluster"

echo "--- helm install"
# The installed operator watches only punctual-demo: each e2e test runs its own operators
# in its own namespace, and another one firing their schedules would break them.
kubectl create namespace punctual-demo --dry-run=client -o yaml | kubectl apply -f -
helm upgrade --install punctual charts/punctual --namespace punctual-system --create-namespace \
  --set image.repository=punctual --set image.tag=dev --set image.pullPolicy=Never \
  --set 'watchNamespaces={punctual-demo}' --wait --timeout 3m
kubectl -n punctual-system rollout status deployment/punctual --timeout=120s

echo "--- the installed operator fires a sample schedule"
kubectl -n punctual-demo apply -f crds/samples/hello-every-minute.yaml
for _ in $(seq 90); do
  if [ -n "$(kubectl -n punctual-demo get jobs -l punctual.dev/schedule=hello -o name)" ]; then
    break
  fi
  sleep 2
done
kubectl -n punctual-demo get cronschedules,jobs
[ -n "$(kubectl -n punctual-demo get jobs -l punctual.dev/schedule=hello -o name)" ] || {
  echo "e2e-kind: no Job within 3 minutes; the operator's log:" >&2
  kubectl -n punctual-system logs deployment/punctual --tail=50 >&2
  exit 1
}

echo "--- e2e suite"
.venv/bin/pytest tests/e2e -q "$@"
