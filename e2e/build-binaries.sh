#!/usr/bin/env bash
# Builds the pinned upstream binaries the tests need (control plane, the real
# node's kubelet and kube-proxy, etcd, kwok, helm) from the Go module proxy, once
# per version, into a cache outside the repository. A fresh clone on the same
# machine reuses what is there, so only the first run pays the ~20 minutes of
# compiling on two cores.
#
# Usage: e2e/build-binaries.sh [BIN_DIR]
#   Prints nothing but progress; links every binary into BIN_DIR (default
#   .cluster/bin) so that callers need only one path.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
cache=${PUNCTUAL_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/punctual}
bin_dir=${1:-$here/../.cluster/bin}
mkdir -p "$cache" "$bin_dir"
export CGO_ENABLED=0 GOFLAGS=-buildvcs=false

version_of() { # the pinned version of module $2 in tools module $1
  (cd "$here/tools/$1" && go list -m -f '{{.Version}}' "$2")
}

build() { # build TOOLDIR KEY LDFLAGS PKG...: compile PKGs into $cache/KEY unless done
  local tool_dir=$1 key=$2 ldflags=$3; shift 3
  local out=$cache/$key
  local missing=()
  for pkg in "$@"; do [ -x "$out/${pkg##*/}" ] || missing+=("$pkg"); done
  if [ ${#missing[@]} -gt 0 ]; then
    echo "building ${missing[*]##*/} ($key) into $out" >&2
    mkdir -p "$out.tmp"
    (cd "$here/tools/$tool_dir" && go build -trimpath -ldflags "-s -w $ldflags" -o "$out.tmp/" "${missing[@]}")
    mkdir -p "$out" && mv "$out.tmp"/* "$out/" && rmdir "$out.tmp"
  fi
  for pkg in "$@"; do ln -sf "$out/${pkg##*/}" "$bin_dir/${pkg##*/}"; done
}

k8s=$(version_of kubernetes k8s.io/kubernetes)
minor=${k8s#v1.}; minor=${minor%%.*}
stamp=""
for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
  stamp+=" -X $pkg.gitVersion=$k8s -X $pkg.gitMajor=1 -X $pkg.gitMinor=$minor"
  stamp+=" -X $pkg.gitTreeState=clean -X $pkg.buildDate=1970-01-01T00:00:00Z"
done
build kubernetes "kubernetes-$k8s" "$stamp" \
  k8s.io/kubernetes/cmd/kube-apiserver k8s.io/kubernetes/cmd/kube-controller-manager \
  k8s.io/kubernetes/cmd/kube-scheduler k8s.io/kubernetes/cmd/kubectl \
  k8s.io/kubernetes/cmd/kubelet k8s.io/kubernetes/cmd/kube-proxy

build etcd "etcd-$(version_of etcd go.etcd.io/etcd/server/v3)" "" punctual.dev/e2e/tools/etcd/cmd/etcd

kwok=$(version_of kwok sigs.k8s.io/kwok)
build kwok "kwok-$kwok" "" sigs.k8s.io/kwok/cmd/kwok

helm=$(version_of helm helm.sh/helm/v3)
build helm "helm-$helm" "-X helm.sh/helm/v3/internal/version.version=$helm -X helm.sh/helm/v3/internal/version.gitTreeState=clean" \
  helm.sh/helm/v3/cmd/helm
