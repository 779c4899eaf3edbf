#!/usr/bin/env bash
# Installs the two tools that the alert, monitoring and manifest tests need beyond
# build-binaries.sh's, the way CI gets them on a fresh machine:
#   - promtool and prometheus: Debian's `prometheus` package (apt-get, as root), when
#     promtool is not on PATH. Service starts are refused while it installs
#     (policy-rc.d), so no prometheus daemon is left running: the tests start their
#     own on loopback and stop it by pid.
#   - chromium: Debian's package (apt-get, as root), when not on PATH, for the browser
#     tests of `punctual ui` (tests/e2e/test_ui.py), which skip without it.
#   - kube-score, the manifest linter: built from the Go module proxy at the version
#     pinned in e2e/tools/kube-score, once, into ~/.cache/punctual/kube-score-<version>/,
#     and linked into BIN_DIR like the other tools.
#
# Usage: e2e/build-test-tools.sh [BIN_DIR]   (default .cluster/bin)
# Never signals a process (beyond the package's own service, through its init script, if it
# started despite policy-rc.d); never touches a policy-rc.d it did not create.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
cache=${PUNCTUAL_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/punctual}
bin_dir=${1:-$here/../.cluster/bin}
mkdir -p "$cache" "$bin_dir"

# -- promtool and prometheus (Debian) ----------------------------------------------
if ! command -v promtool >/dev/null || ! command -v prometheus >/dev/null; then
  if [ "$(id -u)" -ne 0 ]; then
    echo "promtool/prometheus missing: install Debian's prometheus package (apt-get install prometheus)" >&2
    exit 1
  fi
  echo "installing Debian's prometheus package (promtool)" >&2
  policy=/usr/sbin/policy-rc.d
  made_policy=""
  if [ ! -e "$policy" ]; then
    printf '#!/bin/sh\n# e2e/build-test-tools.sh: no service starts while it installs\nexit 101\n' >"$policy"
    chmod 755 "$policy"
    made_policy=1
  fi
  trap 'if [ -n "$made_policy" ]; then rm -f "$policy"; fi' EXIT
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends prometheus >/dev/null
  # Where a policy-rc.d of the machine's own let the package start its service anyway,
  # stop that service (only it: through its init script and pidfile).
  if [ -x /etc/init.d/prometheus ] && /etc/init.d/prometheus status >/dev/null 2>&1; then
    /etc/init.d/prometheus stop >/dev/null
  fi
fi
promtool --version 2>&1 | head -1 >&2

# -- chromium (Debian), headless, for the page of `punctual ui` -----------------------
if ! command -v chromium >/dev/null && ! command -v chromium-browser >/dev/null; then
  if [ "$(id -u)" -eq 0 ]; then
    echo "installing Debian's chromium package (the browser tests of punctual ui)" >&2
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq --no-install-recommends chromium >/dev/null
  else
    echo "chromium missing: the browser tests of punctual ui will skip (apt-get install chromium)" >&2
  fi
fi

# -- kube-score (Go module proxy) ----------------------------------------------------
export CGO_ENABLED=0 GOFLAGS=-buildvcs=false
version=$(cd "$here/tools/kube-score" && go list -m -f '{{.Version}}' github.com/zegl/kube-score)
out=$cache/kube-score-$version
if [ ! -x "$out/kube-score" ]; then
  echo "building kube-score $version into $out" >&2
  rm -rf "$out.tmp" && mkdir -p "$out.tmp"
  (cd "$here/tools/kube-score" &&
    go build -trimpath -ldflags "-s -w -X main.version=$version" -o "$out.tmp/" github.com/zegl/kube-score/cmd/kube-score)
  mkdir -p "$out" && mv "$out.tmp"/* "$out/" && rmdir "$out.tmp"
fi
ln -sf "$out/kube-score" "$bin_dir/kube-score"
