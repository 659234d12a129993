#!/bin/bash
# hpclab job: kernel poisson, experiment halo, run 20260101-000000-000000
# Rendered from slurm-templates/poisson.sh.j2; the full spec is spec.json next to this file.
# Submitting it again by hand (sbatch job.sh) repeats the run; the first run's results are kept
# and the new ones go to rerun-<jobid>/ inside the run folder.
# 2D Poisson solver (red-black Gauss-Seidel) on a process grid with halo exchange: compute versus
# MPI time per rank, for comparing rank placements and exchange styles.


# resources
#SBATCH --cpus-per-task=1
#SBATCH --error=/hpclab/runs/halo/20260101-000000-000000/stderr
#SBATCH --job-name=hpclab-halo
#SBATCH --nodes=1
#SBATCH --ntasks=4
#SBATCH --open-mode=append
#SBATCH --output=/hpclab/runs/halo/20260101-000000-000000/stdout
#SBATCH --partition=debug
#SBATCH --time=00:05:00

set -uo pipefail

# environment
export OMPI_ALLOW_RUN_AS_ROOT=1
export OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
RUN_DIR=/hpclab/runs/halo/20260101-000000-000000
OUT_DIR="$RUN_DIR"
if [[ -e "$RUN_DIR/result.json" ]]; then
  OUT_DIR="$RUN_DIR/rerun-$SLURM_JOB_ID"
fi
mkdir -p "$OUT_DIR/provenance" "$OUT_DIR/trace"
cd "$OUT_DIR" || exit 1

# provenance: where the job ran, the hardware of each node, the environment, the versions
scontrol show hostnames "$SLURM_JOB_NODELIST" > provenance/nodes.txt
srun --mpi=none --ntasks-per-node=1 --ntasks="$SLURM_JOB_NUM_NODES" --cpu-bind=none \
    bash -c 'lstopo --of xml > "provenance/lstopo-${SLURMD_NODENAME:-$(hostname)}.xml"'
env | grep -E '^(OMP|SLURM|OMPI)_' | sort > provenance/env.txt
{
  echo "srun: $(srun --version)"
  echo "mpirun: $(mpirun --version 2>&1 | head -n 1)"
  echo "kernel: $(ls -l /hpclab/build/bin/poisson)"
  echo "uname: $(uname -srvm)"
} > provenance/versions.txt 2>&1


# run
srun --mpi=pmix --cpus-per-task=1 --cpu-bind=verbose --hint=nomultithread \
    --export=ALL,LD_PRELOAD=/hpclab/build/lib/libmpitrace.so,MPITRACE_DIR="$OUT_DIR"/trace \
    /hpclab/build/bin/poisson --n 512 --grid 2x2 --exchange nonblocking --iters 100 \
    --json "$OUT_DIR"/result.json
status=$?

# binding report: what srun said about each rank's CPUs (it writes to stderr)
grep -E 'cpu-bind' "$RUN_DIR/stderr" > provenance/binding.txt || true
echo "hpclab: kernel exit code $status"
exit $status
