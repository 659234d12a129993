#!/usr/bin/env bash
# make setup: system packages, the Python environment, the C kernels. Idempotent: a second run
# checks stamps and returns in seconds. Safe to run as a user: it never calls sudo itself.
set -euo pipefail
cd "$(dirname "$0")/.."

# "a|b": either package (the first one the distribution offers is installed: Debian's linux-perf is
# Ubuntu's linux-tools-common). "name?": installed where the distribution has it as a package
# (Chromium serves the browser tests only, and Ubuntu ships it as a snap, which a set-up cannot use).
SYSTEM_PACKAGES=(
  openmpi-bin libopenmpi-dev libpmix-dev
  slurm-wlm slurmdbd slurm-client munge mariadb-server
  hwloc libhwloc-dev numactl likwid
  gcc g++ make pkg-config python3-venv python3-dev
  iproute2 util-linux procps valgrind "linux-perf|linux-tools-common" "chromium?" bubblewrap
  # a known background load for make bench-stability (and the noise watch's tests)
  stress-ng
  # where each rank of a hung code-lab submission waits (hpclab.grading.codelab samples its stack)
  gdb
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
installed() { dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q 'install ok installed'; }
# (captured, not piped into grep -q: with pipefail, grep's early exit would fail apt-cache by SIGPIPE)
offered() { local policy; policy=$(apt-cache policy "$1" 2>/dev/null); [[ $policy =~ Candidate:\ [^\(] ]]; }
missing=() required=0
for entry in "${SYSTEM_PACKAGES[@]}"; do
  IFS='|' read -r -a alternatives <<<"${entry%\?}"
  have=0
  for pkg in "${alternatives[@]}"; do installed "$pkg" && have=1 && break; done
  ((have)) || { missing+=("$entry"); [[ $entry == *\? ]] || required=1; }
done
# An optional package alone never starts an install (nor needs the network): it comes with the rest.
if ((required)); then
  if ! command -v apt-get >/dev/null; then
    say "missing system packages: ${missing[*]}"
    say "this set-up knows Debian/Ubuntu (apt-get); install the equivalents with your package manager."
    exit 1
  fi
  if [[ $(id -u) -ne 0 ]]; then
    names=(); for entry in "${missing[@]}"; do [[ $entry == *\? ]] || names+=("${entry%%|*}"); done
    say "missing system packages: ${missing[*]}"
    say "run this once, then 'make setup' again:"
    echo "    sudo apt-get update && sudo apt-get install -y --no-install-recommends ${names[*]}"
    exit 1
  fi
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -q
  # Each entry becomes the first of its packages this distribution offers.
  install=() unavailable=()
  for entry in "${missing[@]}"; do
    IFS='|' read -r -a alternatives <<<"${entry%\?}"
    pick=""
    for pkg in "${alternatives[@]}"; do offered "$pkg" && pick=$pkg && break; done
    if [[ -n $pick ]]; then install+=("$pick")
    elif [[ $entry == *\? ]]; then say "not packaged here, skipped (optional): ${entry%\?}"
    else unavailable+=("$entry"); fi
  done
  if ((${#unavailable[@]})); then
    say "this distribution offers none of: ${unavailable[*]} ($(. /etc/os-release && echo "$PRETTY_NAME"))"
    say "check its package names (apt-cache search) and the README's list of distributions tried"
    exit 1
  fi
  say "installing system packages: ${install[*]}"
  # Debian's postinst scripts try to start munge/mariadb/slurm services; the project starts its
  # own daemons, so policy-rc.d tells invoke-rc.d not to start anything during the install.
  policy=/usr/sbin/policy-rc.d; had_policy=0; [[ -e $policy ]] && had_policy=1
  if ((!had_policy)); then printf '#!/bin/sh\nexit 101\n' > "$policy"; chmod +x "$policy"; fi
  apt-get install -y -q --no-install-recommends "${install[@]}"
  ((had_policy)) || rm -f "$policy"
  # what set-up itself installed, so that `make uninstall` can name (and with APT=remove purge) it
  mkdir -p /var/lib/hpclab && printf '%s\n' "${install[@]}" >> /var/lib/hpclab/apt-installed.txt
else
  say "system packages: all present"
fi

# 2. Python environment ----------------------------------------------------------------------
# Every package comes from requirements.lock (make lock writes it from pyproject.toml) at the
# version and with the hashes it names; the project itself goes on top, editable, without
# dependencies. mpi4py is compiled with the system mpicc so that it uses the same Open MPI as the
# kernels: --no-binary takes its sdist, whose hash the lock holds beside its wheels'. It and hpclab
# are built without build isolation, with the locked build tools (requirements-build.lock, installed
# first), so no package is fetched without a hash.
PYTHON=${PYTHON:-python3}
stamp=.venv/.hpclab-stamp
want=$(cat pyproject.toml requirements.lock requirements-build.lock | sha256sum | cut -c1-16)
if [[ -x .venv/bin/python && -f $stamp && $(cat "$stamp") == "$want" ]]; then
  say "python environment: up to date (.venv)"
else
  say "python environment: installing requirements.lock into .venv with $($PYTHON --version 2>&1)"
  [[ -x .venv/bin/python ]] || "$PYTHON" -m venv .venv
  venv_site=$(.venv/bin/python -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
  # Links to Debian's OTF2 bindings (2b, an earlier set-up) go first: pip would write the otf2
  # wheel's files through them into /usr/lib/python3/dist-packages.
  for pkg in otf2 _otf2; do if [[ -L $venv_site/$pkg ]]; then rm -f "$venv_site/$pkg"; fi; done
  pip=(.venv/bin/pip install --disable-pip-version-check --progress-bar off)
  pip_log=.venv/pip-install.log
  total=$(grep -cE '^[A-Za-z0-9]' requirements.lock)
  t_pip=$SECONDS
  # pip's own lines go to the log; the terminal gets a count every 20 packages and the time, so a
  # set-up that compiles mpi4py for a minute does not look hung (the whole log says what failed)
  progress() {
    local n=0 line
    while IFS= read -r line; do
      printf '%s\n' "$line" >> "$pip_log"
      case $line in
        Collecting\ *|Requirement\ already\ satisfied*)
          n=$((n + 1))
          if ((n % 20 == 0 || n == total)); then say "python environment: $n of $total packages fetched ($((SECONDS - t_pip)) s)"; fi ;;
        Building\ wheel\ for\ *) say "python environment: ${line#Building wheel for } (compiling, $((SECONDS - t_pip)) s)" ;;
        Installing\ collected\ packages*) say "python environment: installing the $n packages ($((SECONDS - t_pip)) s)" ;;
      esac
    done
  }
  : > "$pip_log"
  "${pip[@]}" --require-hashes --no-deps -r requirements-build.lock >> "$pip_log" 2>&1 ||
    { tail -n 20 "$pip_log"; say "pip failed installing the build tools: the whole output is in $pip_log"; exit 1; }
  MPICC=mpicc "${pip[@]}" --require-hashes --no-build-isolation --no-binary mpi4py -r requirements.lock 2>&1 | progress ||
    { tail -n 20 "$pip_log"; say "pip failed installing requirements.lock: the whole output is in $pip_log"; exit 1; }
  # (setuptools warns at every editable install that a folder named like the package may shadow it)
  PYTHONWARNINGS=ignore "${pip[@]}" --no-deps --no-build-isolation -e . >> "$pip_log" 2>&1 ||
    { tail -n 20 "$pip_log"; say "pip failed installing hpclab itself: the whole output is in $pip_log"; exit 1; }
  echo "$want" > "$stamp"
  say "python environment: ready ($total locked packages, $((SECONDS - t_pip)) s; pip's output in $pip_log)"
fi

# 2b. OTF2's Python bindings (issue 21: hpclab trace --otf2, OTF2 import) -------------------------
# The lock's otf2 wheel where PyPI has one (CPython 3.11 on x86_64). Elsewhere Debian's
# python3-otf2, built for Debian's python3: the venv does not see dist-packages, and must not see
# all of it (Debian's numpy & co. would shadow the pinned ones), so when the venv runs the same
# Python minor version only the two packages of the bindings (otf2, _otf2) are linked into it;
# hpclab/trace/otf2_format.py names the package when they are missing.
otf2_dist=/usr/lib/python3/dist-packages
venv_site=$(.venv/bin/python -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
if [[ -d $venv_site/otf2 && ! -L $venv_site/otf2 ]] && .venv/bin/python -c 'import otf2' 2>/dev/null; then
  say "OTF2 bindings: the otf2 wheel of requirements.lock"
elif [[ -d $otf2_dist/otf2 && -d $otf2_dist/_otf2 ]] && command -v /usr/bin/python3 >/dev/null; then
  venv_ver=$(.venv/bin/python -c 'import sys; print("%d.%d" % sys.version_info[:2])')
  deb_ver=$(/usr/bin/python3 -c 'import sys; print("%d.%d" % sys.version_info[:2])')
  if [[ $venv_ver != "$deb_ver" ]]; then
    say "OTF2 bindings: .venv runs Python $venv_ver, python3-otf2 is built for $deb_ver: OTF2 export/import unavailable"
  elif [[ -e $venv_site/otf2 && ! -L $venv_site/otf2 ]]; then
    say "OTF2 bindings: $venv_site/otf2 does not import; remove it and run 'make setup' again for Debian's"
  else
    for pkg in otf2 _otf2; do ln -sfn "$otf2_dist/$pkg" "$venv_site/$pkg"; done
    say "OTF2 bindings: Debian's python3-otf2 linked into .venv"
  fi
fi

# 3. C kernels ---------------------------------------------------------------------------------
if [[ -f src/Makefile ]]; then
  make -s -C src
  say "C kernels: built into build/bin"
fi
bash scripts/mpi-libraries.sh  # 4. Open MPI 5 and MPICH 5 beside the system Open MPI (make mpi-libraries)
