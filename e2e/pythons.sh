#!/usr/bin/env bash
# The Pythons Punctual supports beside the image's 3.11: their venvs and the package check.
#
#   e2e/pythons.sh venv VERSION INTERPRETER DIR
#       A venv in DIR on INTERPRETER (which must be Python VERSION) with requirements.lock
#       installed, hashes checked, and Punctual editable: what `make unit-pythons` runs in.
#   e2e/pythons.sh package DIST PYTHON...
#       `python -m build` (the first PYTHON's) into DIST, then for each PYTHON (a venv's
#       python, one per supported version): a clean venv in a temp dir with only the
#       run-time part of requirements.lock (hashes checked, as in the image), the wheel
#       with --no-deps, `pip check` and `punctual --version`. The sdist is then built and
#       installed over the first one's wheel, and asked its version too.
#
# Wheels come from a wheelhouse (WHEELS, default ~/.cache/punctual/wheels) filled by
# `pip download --require-hashes` from the lock, so a fresh clone installs offline once
# the lock's wheels for its Python are there. Every install names the lock's hashes, so a
# file in the wheelhouse that is not the locked one is refused.
set -euo pipefail
cd "$(dirname "$0")/.."
WHEELS=${WHEELS:-$HOME/.cache/punctual/wheels}
PIP=(-m pip --disable-pip-version-check)

# locked_install PYTHON TARGET REQUIREMENTS [PIP-OPTION...]: install REQUIREMENTS (hashed)
# into the env of TARGET with PYTHON's pip, from the wheelhouse; download the missing
# wheels first.
locked_install() {
  local python=$1 target=$2 requirements=$3
  shift 3
  local install=("$python" "${PIP[@]}" --python "$target" install --quiet --no-index
    --find-links "$WHEELS" --require-hashes -r "$requirements" "$@")
  if ! "${install[@]}" 2>/dev/null; then
    mkdir -p "$WHEELS"
    "$python" "${PIP[@]}" download --quiet --only-binary=:all: --require-hashes \
      -r "$requirements" -d "$WHEELS"
    "${install[@]}"
  fi
}

make_venv() {
  local version=$1 interpreter=$2 dir=$3 found
  if [[ -z $interpreter ]]; then
    echo "no Python $version found (looked in ~/.pyenv/versions/$version.*/bin, then for python$version on PATH): install it or set PYTHON${version/./}=/path/to/python$version" >&2
    exit 1
  fi
  found=$("$interpreter" -c 'import sys; print("%d.%d" % sys.version_info[:2])' 2>/dev/null) || true
  if [[ $found != "$version" ]]; then
    echo "$interpreter is not Python $version (it says '${found:-nothing}'): set PYTHON${version/./}=/path/to/python$version" >&2
    exit 1
  fi
  if ! "$dir/bin/python" -c "" 2>/dev/null; then
    rm -rf "$dir"
    "$interpreter" -m venv "$dir"
  fi
  locked_install "$dir/bin/python" "$dir/bin/python" requirements.lock
  # setuptools is in the lock: the editable install needs no index.
  "$dir/bin/python" "${PIP[@]}" install --quiet --no-deps --no-build-isolation -e .
}

check_package() {
  local dist=$1 given pythons=()
  shift
  for given in "$@"; do pythons+=("$(cd "$(dirname "$given")" && pwd)/${given##*/}"); done
  set -- "${pythons[@]}"
  local wheel sdist version log
  # Built once, by the first Python, with the build backend from the lock (no index).
  rm -rf "$dist"
  log=$("$1" -m build --quiet --no-isolation --outdir "$dist" . 2>&1) || { echo "$log" >&2; exit 1; }
  wheel=$(echo "$dist"/punctual-*-py3-none-any.whl)
  sdist=$(echo "$dist"/punctual-*.tar.gz)
  [[ -f $wheel && -f $sdist ]] || { echo "python -m build made no wheel and sdist in $dist" >&2; exit 1; }
  version=${wheel##*/punctual-}
  version=${version%%-*}
  tmp=$(mktemp -d)
  trap 'rm -rf "$tmp"' EXIT
  # The image's way: the run-time blocks of the lock, hashes and all.
  cp pyproject.toml requirements.lock operator/image/runtime_lock.py "$tmp/"
  (cd "$tmp" && "$1" runtime_lock.py 2>/dev/null)
  local first=1 python venv said
  for python in "$@"; do
    venv=$tmp/venv-$("$python" -c 'import sys; print("%d.%d" % sys.version_info[:2])')
    "$python" -m venv --without-pip "$venv"
    locked_install "$python" "$venv/bin/python" "$tmp/runtime.lock" --no-compile
    local install=("$python" "${PIP[@]}" --python "$venv/bin/python" install --quiet
      --no-compile --no-index --find-links "$WHEELS" --no-deps)
    "${install[@]}" "$wheel"
    "$python" "${PIP[@]}" --python "$venv/bin/python" check >/dev/null
    said=$("$venv/bin/punctual" --version)
    [[ $said == "punctual $version" ]] || { echo "$venv: punctual --version said '$said'" >&2; exit 1; }
    echo "${venv##*/venv-}: ${wheel##*/} installed, $said"
    if ((first)); then
      # setuptools for the sdist's build comes from the wheelhouse (it is in the lock).
      "${install[@]}" --force-reinstall "$sdist"
      said=$("$venv/bin/punctual" --version)
      [[ $said == "punctual $version" ]] || { echo "sdist: punctual --version said '$said'" >&2; exit 1; }
      echo "${venv##*/venv-}: ${sdist##*/} installed, $said"
      first=0
    fi
  done
}

case ${1:-} in
  venv) make_venv "$2" "$3" "$4" ;;
  package) shift; check_package "$@" ;;
  *) echo "usage: $0 venv VERSION INTERPRETER DIR | package DIST PYTHON..." >&2; exit 2 ;;
esac
