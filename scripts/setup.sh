#!/usr/bin/env bash
# make setup: system packages, the Python environment, the C kernels. Idempotent: a second run
# checks stamps and returns in seconds. Safe to run as a user: it never calls sudo itself.
set -euo pipefail
cd "$(dirname "$0")/.."

SYSTEM_PACKAGES=(
  openmpi-bin libopenmpi-dev libpmix-dev
  slurm-wlm slurmdbd slurm-client munge mariadb-server
  hwloc libhwloc-dev numactl likwid
  gcc g++ make pkg-config python3-venv python3-dev
  iproute2 util-linux procps valgrind linux-perf chromium bubblewrap
  python3-otf2 otf2-tools
  # the classroom (make classroom): JupyterHub's proxy runs on node; modules come from Lmod;
  # students' servers run on Debian's own python3 (the one every account can execute)
  nodejs lmod python3 passwd
)
# Debian ships npm as its own package; NodeSource's nodejs (CI's image) bundles it.
command -v npm >/dev/null || SYSTEM_PACKAGES+=(npm)

say() { printf '[setup] %s\n' "$*"; }

# 0. Where the checkout is ---------------------------------------------------------------------
# A checkout under a 0700 home (Debian's /root) is out of reach of every daemon and user that is not
# root; say up front what that means and where their files go instead (hpclab/core/paths.py decides).
if command -v python3 >/dev/null; then
  PYTHONPATH=. python3 -c 'from hpclab.core.paths import checkout_access_report as r; print("\n".join(r()))' |
    while IFS= read -r line; do say "$line"; done
fi
if ! getent hosts "$(hostname)" >/dev/null 2>&1; then
  say "WARNING: this machine's host name '$(hostname)' does not resolve (no line for it in /etc/hosts);"
  say "         MariaDB's set-up and Slurm need it: add '127.0.1.1 $(hostname)' to /etc/hosts"
fi

# 1. System packages -------------------------------------------------------------------------
missing=()
for pkg in "${SYSTEM_PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q 'install ok installed' || missing+=("$pkg")
done
if ((${#missing[@]})); then
  if ! command -v apt-get >/dev/null; then
    say "missing system packages: ${missing[*]}"
    say "this set-up knows Debian/Ubuntu (apt-get); install the equivalents with your package manager."
    exit 1
  fi
  if [[ $(id -u) -ne 0 ]]; then
    say "missing system packages: ${missing[*]}"
    say "run this once, then 'make setup' again:"
    echo "    sudo apt-get update && sudo apt-get install -y --no-install-recommends ${missing[*]}"
    exit 1
  fi
  say "installing system packages: ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -q
  # Debian's postinst scripts try to start munge/mariadb/slurm services; the project starts its
  # own daemons, so policy-rc.d tells invoke-rc.d not to start anything during the install.
  policy=/usr/sbin/policy-rc.d; had_policy=0; [[ -e $policy ]] && had_policy=1
  if ((!had_policy)); then printf '#!/bin/sh\nexit 101\n' > "$policy"; chmod +x "$policy"; fi
  apt-get install -y -q --no-install-recommends "${missing[@]}"
  ((had_policy)) || rm -f "$policy"
else
  say "system packages: all present"
fi

# 2. Python environment ----------------------------------------------------------------------
PYTHON=${PYTHON:-python3}
stamp=.venv/.hpclab-stamp
want=$(cat pyproject.toml | sha256sum | cut -c1-16)
if [[ -x .venv/bin/python && -f $stamp && $(cat "$stamp") == "$want" ]]; then
  say "python environment: up to date (.venv)"
else
  say "python environment: creating .venv with $($PYTHON --version 2>&1)"
  [[ -x .venv/bin/python ]] || "$PYTHON" -m venv .venv
  .venv/bin/pip install -q --upgrade pip
  # mpi4py is compiled with the system mpicc so that it uses the same Open MPI as the kernels.
  MPICC=mpicc .venv/bin/pip install -q --no-binary mpi4py -e '.[test]'
  echo "$want" > "$stamp"
  say "python environment: ready"
fi

# 2b. OTF2's Python bindings (issue 21: hpclab trace --otf2, OTF2 import) -------------------------
# Debian's python3-otf2 is built for Debian's python3; the venv does not see dist-packages, and must
# not see all of it (Debian's numpy & co. would shadow the pinned ones). When the venv runs the same
# Python minor version, only the two packages of the bindings (otf2, _otf2) are linked into it;
# hpclab/trace/otf2_format.py names the package when they are missing.
otf2_dist=/usr/lib/python3/dist-packages
if [[ -d $otf2_dist/otf2 && -d $otf2_dist/_otf2 ]] && command -v /usr/bin/python3 >/dev/null; then
  venv_site=$(.venv/bin/python -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
  venv_ver=$(.venv/bin/python -c 'import sys; print("%d.%d" % sys.version_info[:2])')
  deb_ver=$(/usr/bin/python3 -c 'import sys; print("%d.%d" % sys.version_info[:2])')
  if [[ $venv_ver == "$deb_ver" ]]; then
    for pkg in otf2 _otf2; do ln -sfn "$otf2_dist/$pkg" "$venv_site/$pkg"; done
    say "OTF2 bindings: Debian's python3-otf2 linked into .venv"
  else
    say "OTF2 bindings: .venv runs Python $venv_ver, python3-otf2 is built for $deb_ver: OTF2 export/import unavailable"
  fi
fi

# 3. C kernels ---------------------------------------------------------------------------------
if [[ -f src/Makefile ]]; then
  make -s -C src
  say "C kernels: built into build/bin"
fi
bash scripts/mpi-libraries.sh  # 4. Open MPI 5 and MPICH 5 beside the system Open MPI (make mpi-libraries)
