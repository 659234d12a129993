#!/usr/bin/env bash
# make uninstall: remove what `make setup` and the local cluster put on this machine for this
# checkout. It keeps runs/ (your measurements) unless RUNS=delete, never touches a classroom's
# people's data (`hpclab classroom remove --yes-delete-student-data` archives, then deletes it), and
# only prints the apt command for the system packages set-up installed unless APT=remove.
# DRY=1 says what it would do and does nothing.
set -euo pipefail
cd "$(dirname "$0")/.."

say() { printf '[uninstall] %s\n' "$*"; }
DRY=${DRY:-0}
gone() {  # remove a path (file, folder or link), or say that it would
  local path=$1 what=$2
  [[ -e $path || -L $path ]] || return 0
  if ((DRY)); then say "would remove $what: $path"; else rm -rf -- "$path"; say "removed $what: $path"; fi
}

# Where this checkout's cluster keeps what its daemons read (hpclab/core/paths.py decides; it
# needs nothing but the standard library, so this works without .venv too).
read -r STATE SPOOL < <(PYTHONPATH=. python3 -c \
  'from hpclab.core import paths; print(paths.daemon_state_dir(), paths.short_spool_dir())')
CLASSROOM=/opt/hpclab/classroom/classroom.json
MPI_ROOT=${HPCLAB_MPI_ROOT:-/opt/hpclab/mpi}
PACKAGES_RECORD=/var/lib/hpclab/apt-installed.txt

if [[ -e $CLASSROOM ]]; then
  say "a classroom is set up on this machine ($CLASSROOM): its accounts, homes and gradebook are people's data."
  say "first: sudo .venv/bin/hpclab classroom remove --yes-delete-student-data  (it archives them, then removes them)"
  exit 1
fi

# 1. Stop the daemons this checkout started (and its virtual nodes).
if [[ -x .venv/bin/hpclab ]]; then
  if ((DRY)); then say "would stop the local cluster: .venv/bin/hpclab cluster down"
  else .venv/bin/hpclab cluster down || say "cluster down reported a problem (above); removing the files anyway"; fi
fi

# 2. The files outside the checkout: generated configuration, munge key, slurmd's spool.
if [[ -L /etc/slurm/slurm.conf && $(readlink /etc/slurm/slurm.conf) == "$STATE"/* ]]; then
  gone /etc/slurm/slurm.conf "the link to this checkout's slurm.conf"
fi
gone "$STATE" "this checkout's cluster configuration and munge key"
gone "$SPOOL" "this checkout's slurmd spool"

# The MPI libraries under /opt are shared by every checkout on the machine: removed with the last one.
others=$(find /var/lib/hpclab -mindepth 1 -maxdepth 1 -type d 2>/dev/null | grep -v -x -F "$STATE" || true)
if [[ -d $MPI_ROOT ]]; then
  if [[ -z $others ]]; then gone "$MPI_ROOT" "the MPI libraries and their module files (make mpi-libraries)"
  else say "keeps $MPI_ROOT: other checkouts' clusters use it ($(echo "$others" | wc -l) under /var/lib/hpclab)"; fi
fi

# 3. Inside the checkout: the Python environment and everything generated.
gone .venv "the Python environment"
gone build "binaries, cluster logs, reports, the cache probe (build/)"
if [[ ${RUNS:-keep} == delete ]]; then gone runs "your run folders"
elif [[ -d runs ]]; then say "keeps runs/ (your measurements): RUNS=delete removes it too"; fi

# 4. System packages: only those set-up itself installed, and only when asked.
if [[ -s $PACKAGES_RECORD ]]; then
  mapfile -t pkgs < <(sort -u "$PACKAGES_RECORD")
  if [[ ${APT:-keep} == remove ]] && ((!DRY)); then
    apt-get purge -y -q "${pkgs[@]}" && apt-get autoremove -y -q && rm -f "$PACKAGES_RECORD"
    say "removed the system packages set-up installed: ${pkgs[*]}"
  else
    say "system packages set-up installed (kept; other software may use them). To remove them:"
    echo "    sudo apt-get purge ${pkgs[*]} && sudo apt-get autoremove"
    say "or: make uninstall APT=remove"
  fi
else
  say "no record of system packages installed by set-up ($PACKAGES_RECORD): nothing to remove there"
fi
