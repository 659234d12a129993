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
export OMPI_MCA_btl_tcp_disable_family=6
export OMPI_MCA_btl_tcp_if_include=lo
RUN_DIR=/hpclab/runs/halo/20260101-000000-000000
OUT_DIR="$RUN_DIR"
if [[ -e "$RUN_DIR/result.json" ]]; then
  OUT_DIR="$RUN_DIR/rerun-$SLURM_JOB_ID"
fi
mkdir -p "$OUT_DIR/provenance" "$OUT_DIR/trace"
cd "$OUT_DIR" || exit 1

# provenance: where the job ran, the hardware of each node, the environment, the versions
scontrol show hostnames "$SLURM_JOB_NODELIST" > provenance/nodes.txt
# (the kernel each node runs on, boot-id-<node>.txt, tells virtual nodes of one machine apart);
# on one node the batch script is there already (a job step would cost about 0.1 s a job)
hpclab_node() {
  n=${SLURMD_NODENAME:-$(hostname)}; lstopo --of xml > "provenance/lstopo-$n.xml"
  cat /proc/sys/kernel/random/boot_id > "provenance/boot-id-$n.txt"
}
if [[ ${SLURM_JOB_NUM_NODES:-1} == 1 ]]; then
  hpclab_node
else
  srun --mpi=none --ntasks-per-node=1 --ntasks="$SLURM_JOB_NUM_NODES" --cpu-bind=none \
      bash -c "$(declare -f hpclab_node); hpclab_node"
fi
env | grep -E '^(OMP|SLURM|OMPI)_' | sort > provenance/env.txt
{
  echo "srun: $(srun --version)"
  echo "mpirun: $(mpirun --version 2>&1 | head -n 1)"
  echo "kernel: $(ls -l /hpclab/build/bin/poisson)"
  echo "uname: $(uname -srvm)"
} > provenance/versions.txt 2>&1

# what each network interface of this node sends during the run names the one that carried it
cat /proc/net/dev > provenance/net-before.txt 2>/dev/null
# what else used this node during the run (hpclab.runs.parse.noise): the other jobs Slurm runs
# here, the job's own CPU time (its cgroup where that counts CPU; this shell and the programs it
# waited for; each step's, from the accounting record hpclab keeps when the job ends) and the
# node's (/proc/stat), read
# last before the run and first after it, so that taking them is left out
job_cpu() {
  local _ ctl path
  while IFS=: read -r _ ctl path; do
    path=${path%%/step_*}; [[ $path == */job_* ]] || continue
    [[ ,$ctl, == *,cpuacct,* ]] && echo "cgroup_ns $(cat "/sys/fs/cgroup/cpuacct$path/cpuacct.usage")"
    [[ -z $ctl ]] && echo "cgroup_usec $(sed -n 's/^usage_usec //p' "/sys/fs/cgroup$path/cpu.stat")"
  done < /proc/self/cgroup
}
{
  echo "node ${SLURMD_NODENAME:-$(hostname)}"
  echo "jobs $(squeue -h -w "${SLURMD_NODENAME:-$(hostname)}" -t R -o %i | tr '\n' ' ')"
  job_cpu; times
  echo "clock ${EPOCHREALTIME:-$(date +%s.%N)}"; grep '^cpu' /proc/stat
} > provenance/noise-before.txt 2>/dev/null

# run
srun --mpi=pmix --kill-on-bad-exit=1 --cpus-per-task=1 --cpu-bind=verbose --hint=nomultithread \
    --export=ALL,LD_PRELOAD=/hpclab/build/lib/libmpitrace.so,MPITRACE_DIR="$OUT_DIR"/trace \
    /hpclab/build/bin/poisson --n 512 --grid 2x2 --exchange nonblocking --iters 100 \
    --json "$OUT_DIR"/result.json
status=$?
cat /proc/net/dev > provenance/net-after.txt 2>/dev/null
{
  grep '^cpu' /proc/stat; echo "clock ${EPOCHREALTIME:-$(date +%s.%N)}"
  times; job_cpu
  echo "jobs $(squeue -h -w "${SLURMD_NODENAME:-$(hostname)}" -t R -o %i | tr '\n' ' ')"
} > provenance/noise-after.txt 2>/dev/null

# binding report: what srun said about each rank's CPUs (it writes to stderr)
grep -E 'cpu-bind' "$RUN_DIR/stderr" > provenance/binding.txt || true
echo "hpclab: kernel exit code $status"
exit $status
