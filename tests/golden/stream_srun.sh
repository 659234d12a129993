#!/bin/bash
# hpclab job: kernel stream, experiment stream, run 20260101-000000-000000
# Rendered from slurm-templates/stream.sh.j2; the full spec is spec.json next to this file.
# Submitting it again by hand (sbatch job.sh) repeats the run; the first run's results are kept
# and the new ones go to rerun-<jobid>/ inside the run folder.
# STREAM-like memory bandwidth (Copy, Scale, Add, Triad): every rank streams its own arrays with
# OMP_NUM_THREADS threads; where ranks and threads sit decides which memory controllers they use.


# resources
#SBATCH --cpus-per-task=1
#SBATCH --error=/hpclab/runs/stream/20260101-000000-000000/stderr
#SBATCH --job-name=hpclab-stream
#SBATCH --nodes=1
#SBATCH --ntasks=2
#SBATCH --open-mode=append
#SBATCH --output=/hpclab/runs/stream/20260101-000000-000000/stdout
#SBATCH --partition=debug
#SBATCH --time=00:05:00

set -uo pipefail

# environment
export OMPI_ALLOW_RUN_AS_ROOT=1
export OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMPI_MCA_btl=self,vader
export OMP_NUM_THREADS=2
export OMP_PLACES=cores
export OMP_PROC_BIND=close
RUN_DIR=/hpclab/runs/stream/20260101-000000-000000
OUT_DIR="$RUN_DIR"
if [[ -e "$RUN_DIR/result.json" ]]; then
  OUT_DIR="$RUN_DIR/rerun-$SLURM_JOB_ID"
fi
mkdir -p "$OUT_DIR/provenance"
cd "$OUT_DIR" || exit 1

# provenance: where the job ran, the hardware of each node, the environment, the versions
scontrol show hostnames "$SLURM_JOB_NODELIST" > provenance/nodes.txt
srun --mpi=none --ntasks-per-node=1 --ntasks="$SLURM_JOB_NUM_NODES" --cpu-bind=none \
    bash -c 'lstopo --of xml > "provenance/lstopo-${SLURMD_NODENAME:-$(hostname)}.xml"'
env | grep -E '^(OMP|SLURM|OMPI)_' | sort > provenance/env.txt
{
  echo "srun: $(srun --version)"
  echo "mpirun: $(mpirun --version 2>&1 | head -n 1)"
  echo "kernel: $(ls -l /hpclab/build/bin/stream)"
  echo "uname: $(uname -srvm)"
} > provenance/versions.txt 2>&1


# run
srun --mpi=pmix --cpus-per-task=1 --cpu-bind=verbose,cores --distribution=block:block \
    /hpclab/build/bin/stream --size 2000000 --reps 10 --json "$OUT_DIR"/result.json
status=$?

# binding report: what srun said about each rank's CPUs (it writes to stderr)
grep -E 'cpu-bind' "$RUN_DIR/stderr" > provenance/binding.txt || true
echo "hpclab: kernel exit code $status"
exit $status
