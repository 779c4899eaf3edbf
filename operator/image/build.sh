#!/usr/bin/env bash
# Build the operator image with whichever builder is present: Docker (BuildKit), podman,
# or buildah. When the Python base image cannot be pulled (no registry, as in CI here),
# build the same Debian bookworm + Python 3.11 base locally with debootstrap from
# Debian's packages, so the real image is still built from the real Dockerfile.
#
#   operator/image/build.sh IMAGE [PYTHON_IMAGE]
#
# Never pushes anything, never changes the host beyond the builder's image store and
# (when it must, as root) installing Debian's podman and debootstrap.
set -euo pipefail
cd "$(dirname "$0")/../.."

image=${1:?usage: build.sh IMAGE [PYTHON_IMAGE]}
python_image=${2:-python:3.11-slim-bookworm}
local_base=localhost/punctual-python:3.11-bookworm
ca=/etc/ssl/certs/ca-certificates.crt

if [[ -n ${BUILDER:-} ]]; then
  builder=$BUILDER
elif command -v docker >/dev/null && docker info >/dev/null 2>&1; then
  builder=docker
elif command -v podman >/dev/null; then
  builder=podman
elif command -v buildah >/dev/null; then
  builder=buildah
elif [[ $(id -u) == 0 ]] && command -v apt-get >/dev/null; then
  echo "build.sh: no image builder; installing Debian's podman" >&2
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq podman >/dev/null
  builder=podman
else
  echo "build.sh: no image builder: install Docker, or Debian's podman or buildah" >&2
  exit 1
fi

has_image() {
  case $builder in
    docker) docker image inspect "$1" >/dev/null 2>&1 ;;
    podman) podman image exists "$1" ;;
    buildah) buildah inspect --type image "$1" >/dev/null 2>&1 ;;
  esac
}

pull() {
  case $builder in
    docker) timeout 120 docker pull -q "$1" >/dev/null 2>&1 ;;
    podman) timeout 120 podman pull -q "$1" >/dev/null 2>&1 ;;
    buildah) timeout 120 buildah pull -q "$1" >/dev/null 2>&1 ;;
  esac
}

# The base: Debian bookworm, Debian's Python 3.11 with venv and pip, CA certificates, and
# `python` on PATH, as in the registry's python:3.11-slim-bookworm.
build_local_base() {
  command -v debootstrap >/dev/null || {
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq debootstrap >/dev/null
  }
  local root mirror
  root=$(mktemp -d /var/tmp/punctual-base.XXXXXX)
  trap 'rm -rf "$root"' RETURN
  mirror=$(awk '/^URIs:/ {print $2; exit}' /etc/apt/sources.list.d/debian.sources 2>/dev/null || true)
  mirror=${mirror:-http://deb.debian.org/debian}
  echo "build.sh: building the base $local_base with debootstrap from $mirror" >&2
  debootstrap --variant=minbase --include=python3,python3-venv,ca-certificates \
    bookworm "$root" "$mirror" >/dev/null
  ln -sf python3 "$root/usr/bin/python"
  chroot "$root" apt-get clean
  rm -rf "$root"/var/lib/apt/lists/* "$root"/var/cache/apt/*.bin "$root"/var/log/*.log
  case $builder in
    docker) tar -C "$root" -c . | docker import - "$local_base" >/dev/null ;;
    podman) tar -C "$root" -c . | podman import - "$local_base" >/dev/null ;;
    buildah) tar -C "$root" -c . | podman import - "$local_base" >/dev/null ;;
  esac
}

if ! has_image "$python_image" && ! pull "$python_image"; then
  echo "build.sh: cannot pull $python_image; using the local Debian base" >&2
  has_image "$local_base" || build_local_base
  python_image=$local_base
fi

args=(--build-arg "PYTHON_IMAGE=$python_image" -f operator/Dockerfile -t "$image")
# Behind a TLS-intercepting proxy pip must trust the host's CA bundle: lend it to the
# build steps (podman and buildah can mount it; BuildKit users have their own means).
if [[ $builder != docker && -f $ca ]]; then
  args+=(--volume "$ca:$ca:ro")
fi
# RUN steps in a chroot, not under an OCI runtime: Debian's crun refuses a host whose
# cgroups are mixed v1 and v2 ("cgroups in hybrid mode not supported"), as on this
# project's machines, and runc may not be installed yet; the steps only install Python
# packages, which need no namespaces or cgroups of their own.
replaced=$("${builder/buildah/podman}" image inspect --format '{{.Id}}' "$image" 2>/dev/null || true)
case $builder in
  docker) DOCKER_BUILDKIT=1 docker build "${args[@]}" . ;;
  podman) podman build --isolation chroot --ulimit nofile=10000:20000 "${args[@]}" . ;;
  buildah) buildah bud --isolation chroot --ulimit nofile=10000:20000 "${args[@]}" . ;;
esac
built=$("${builder/buildah/podman}" image inspect --format '{{.Id}}' "$image")
# The image this build replaced is untagged now: remove it (not if a container uses it),
# so that repeated builds do not fill the disk with 350 MB each.
if [[ -n $replaced && $replaced != "$built" ]]; then
  "${builder/buildah/podman}" rmi "$replaced" >/dev/null 2>&1 || true
fi
echo "build.sh: built $image with $builder from $python_image" >&2
