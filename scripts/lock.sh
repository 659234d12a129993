#!/usr/bin/env bash
# make lock: write requirements.lock from pyproject.toml, and requirements-build.lock from it.
#
# requirements.lock pins every Python package the project's .venv and the classroom's venv install
# (the dependencies, the extras test and classroom, the build tools of scripts/lock-build.in) at one
# version, with the sha256 of every file PyPI serves for it (wheels and sdist: mpi4py is built from
# its sdist). One resolution holds for CPython 3.11 and newer on any platform (uv's universal
# resolution adds a marker where versions differ): Debian 12 runs 3.11, Debian 13 runs 3.13.
# requirements-build.lock holds the same entries for the build tools only, installed first.
#
# uv runs from a throw-away venv, never from .venv. Run this after changing a pin in pyproject.toml;
# tests/test_lock.py fails until the lock agrees with pyproject.toml.
set -euo pipefail
cd "$(dirname "$0")/.."

UV_VERSION=0.13.9
PYTHON=${PYTHON:-python3}
tool=$(mktemp -d /tmp/hpclab-lock.XXXXXX)
trap 'rm -rf "$tool"' EXIT

"$PYTHON" -m venv "$tool/venv"
"$tool/venv/bin/pip" install -q --disable-pip-version-check "uv==$UV_VERSION"
uv=("$tool/venv/bin/uv" pip compile --universal --python-version 3.11 --generate-hashes --quiet
    --custom-compile-command "make lock")

"${uv[@]}" pyproject.toml scripts/lock-build.in --extra test --extra classroom -o requirements.lock
# The build tools at exactly the versions of requirements.lock (its pins, without hashes, as
# constraints), resolved on their own so their dependencies come along.
grep -E '^[A-Za-z0-9]' requirements.lock | sed 's/ *\\$//' > "$tool/constraints.txt"
"${uv[@]}" scripts/lock-build.in -c "$tool/constraints.txt" -o requirements-build.lock
echo "[lock] requirements.lock: $(grep -cE '^[A-Za-z0-9]' requirements.lock) entries;" \
     "requirements-build.lock: $(grep -cE '^[A-Za-z0-9]' requirements-build.lock)"
# Every pinned package must install from a wheel on Debian 12 (3.11) and Debian 13 (3.13), x86_64
# and aarch64 (mpi4py, built from its sdist, has wheels too): a resolution of the lock's pins that
# may use wheels only, for each, fails here rather than in a room's set-up.
for py in 3.11 3.13; do
  for platform in x86_64-manylinux_2_28 aarch64-manylinux_2_28; do
    "$tool/venv/bin/uv" pip compile --quiet --no-header --python-version "$py" --python-platform "$platform" \
      --only-binary :all: requirements.lock -o "$tool/check.txt" ||
      { echo "[lock] requirements.lock does not install from wheels on CPython $py, $platform" >&2; exit 1; }
  done
done
echo "[lock] every pin has wheels for CPython 3.11 and 3.13 on x86_64 and aarch64 Linux"
