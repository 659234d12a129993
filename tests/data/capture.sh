#!/usr/bin/env bash
# Re-capture the real outputs the parser, topology and plot tests read.
#
#   tests/data/capture.sh [OUTDIR]      (default OUTDIR: tests/data)
#
# Everything is run small on this machine (2 ranks, small sizes), so it takes well under a
# minute. Existing files are never overwritten: a file that exists is skipped with a note, so
# to refresh one, move it away first (or capture into a new OUTDIR and compare).
# Needs build/bin/{pingpong,stream,poisson} (make -C src); srun captures need the local Slurm
# cluster (hpclab cluster up); each part is skipped with a note when its tool is missing.
set -u
here="$(cd "$(dirname "$0")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
out="${1:-$here}"
bin="$repo/build/bin"
mkdir -p "$out/runs"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
# ranks run on 2 cores; keep OpenMP from spreading unless a capture asks for it
export OMP_NUM_THREADS=1

note() { printf 'capture: %s\n' "$*" >&2; }

# save FILE CMD...: run CMD, keep its stdout and stderr in FILE (unless FILE exists)
save() {
    local file="$out/$1"; shift
    if [ -e "$file" ]; then note "keep $file (exists)"; return 0; fi
    "$@" > "$file.tmp" 2>&1 || note "warning: '$*' exited with $?"
    mv "$file.tmp" "$file" && note "wrote $file"
}

# run_folder NAME LAUNCHER... -- KERNEL ARGS...: a run folder like hpclab's (result.json, stdout,
# stderr), so parse_run can be tested on real folders
run_folder() {
    local name="$1"; shift
    local dir="$out/runs/$name"
    if [ -e "$dir" ]; then note "keep $dir (exists)"; return 0; fi
    mkdir -p "$dir/provenance"
    local cmd=() arg
    for arg in "$@"; do cmd+=("${arg//@JSON@/$dir/result.json}"); done
    # the topology the job saw, named as hpclab's job preamble names it
    lstopo --of xml > "$dir/provenance/lstopo-$(hostname).xml" 2>/dev/null || true
    # a failed run keeps its folder (as hpclab's run folders do): its stderr says why
    "${cmd[@]}" > "$dir/stdout" 2> "$dir/stderr" || note "warning: $name exited with $?"
    note "wrote $dir"
}

if command -v ompi_info > /dev/null; then
    save ompi_info_parsable.txt ompi_info --parsable
    save ompi_info_param_pml.txt ompi_info --parsable --param pml all --level 9
else
    note "skip ompi_info (not installed)"
fi

if command -v lstopo > /dev/null; then
    save lstopo_machine.xml lstopo --of xml -
    save lstopo_synthetic_2pack.xml lstopo --input "pack:2 numa:1 core:4 pu:2" --of xml -
else
    note "skip lstopo (hwloc not installed)"
fi

if command -v mpirun > /dev/null; then
    save mpirun_report_bindings_core.txt mpirun -np 2 --bind-to core --map-by core --report-bindings true
    save mpirun_report_bindings_unbound.txt mpirun -np 1 --bind-to socket --report-bindings true
fi

if command -v sinfo > /dev/null && sinfo -h > /dev/null 2>&1; then
    save srun_cpu_bind_cores.txt srun -n2 --cpu-bind=verbose,cores true
    save srun_cpu_bind_none.txt srun -n2 --cpu-bind=verbose,none true
    save srun_cpu_bind_map.txt srun -n2 --cpu-bind=verbose,map_cpu:1,0 true
else
    note "skip srun captures (no Slurm cluster; run: hpclab cluster up)"
fi

if [ -x "$bin/pingpong" ]; then
    for btl in vader tcp; do
        run_folder "pingpong-$btl" mpirun -np 2 --bind-to core --report-bindings \
            --mca btl "self,$btl" "$bin/pingpong" --max-bytes 1048576 --json @JSON@
    done
else
    note "skip pingpong (build/bin/pingpong missing: make -C src)"
fi

if [ -x "$bin/stream" ]; then
    run_folder stream-bind-core mpirun -np 2 --bind-to core --report-bindings \
        "$bin/stream" --size 2000000 --reps 5 --json @JSON@
    run_folder stream-bind-none mpirun -np 2 --bind-to none --report-bindings \
        "$bin/stream" --size 2000000 --reps 5 --json @JSON@
    run_folder stream-1rank-2threads env OMP_NUM_THREADS=2 OMP_PROC_BIND=close OMP_PLACES=cores \
        mpirun -np 1 --bind-to none -x OMP_NUM_THREADS -x OMP_PROC_BIND -x OMP_PLACES \
        "$bin/stream" --size 2000000 --reps 5 --json @JSON@
    if command -v sinfo > /dev/null && sinfo -h > /dev/null 2>&1; then
        run_folder stream-srun-cores srun -n2 --mpi=pmix --cpu-bind=verbose,cores \
            "$bin/stream" --size 2000000 --reps 5 --json @JSON@
        # OMP_NUM_THREADS unset, ranks unbound: each rank starts one thread per CPU of its mask
        # (4 threads on 2 CPUs); the per-thread shared-CPU detection is tested on this run
        run_folder stream-srun-none-omp-unset env -u OMP_NUM_THREADS srun -n2 --mpi=pmix \
            --cpu-bind=verbose,none "$bin/stream" --size 200000 --reps 5 --json @JSON@
    fi
else
    note "skip stream (build/bin/stream missing: make -C src)"
fi

if [ -x "$bin/poisson" ]; then
    # a fixed, small number of sweeps keeps the residual history (and the file) short
    for np in 1 2; do
        run_folder "poisson-np$np" mpirun -np "$np" --bind-to core --report-bindings \
            "$bin/poisson" --n 256 --iters 300 --json @JSON@
    done
    run_folder poisson-np2-nonblocking mpirun -np 2 --bind-to core --report-bindings \
        "$bin/poisson" --n 256 --iters 300 --exchange nonblocking --json @JSON@
else
    note "skip poisson (build/bin/poisson missing: make -C src)"
fi
