#!/bin/bash
# hpclab job: kernel program, experiment my-ring, run 20260101-000000-000000
# Rendered from slurm-templates/program.sh.j2; the full spec is spec.json next to this file.
# Submitting it again by hand (sbatch job.sh) repeats the run; the first run's results are kept
# and the new ones go to rerun-<jobid>/ inside the run folder.
# Your own program (kernel: program): the spec's command, run under the same launcher, binding
# and tracing as the course's kernels. No output contract: the results are its trace, stdout and
# stderr; result.json records how it ended.


# resources
#SBATCH --cpus-per-task=1
#SBATCH --error=/hpclab/runs/my-ring/20260101-000000-000000/stderr
#SBATCH --job-name=hpclab-my-ring
#SBATCH --nodes=1
#SBATCH --ntasks=2
#SBATCH --open-mode=append
#SBATCH --output=/hpclab/runs/my-ring/20260101-000000-000000/stdout
#SBATCH --partition=debug
#SBATCH --time=00:05:00

set -uo pipefail

# environment
export OMPI_ALLOW_RUN_AS_ROOT=1
export OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMPI_MCA_btl_tcp_disable_family=6
export OMPI_MCA_btl_tcp_if_include=lo
RUN_DIR=/hpclab/runs/my-ring/20260101-000000-000000
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
  echo "kernel: $(ls -l /hpclab/programs/ring)"
  echo "uname: $(uname -srvm)"
} > provenance/versions.txt 2>&1

# the program's files as they were when the job ran (absolute paths of the command)
for word in /hpclab/programs/ring --count 6 'hello world'; do
  if [[ "$word" == /* && -f "$word" ]]; then sha256sum "$word"; fi
done > provenance/program.txt 2>&1
# mpi4py's pickled recv() uses MPI_Mprobe/MPI_Mrecv, which the tracer does not wrap: receive
# with MPI_Recv instead, so that every message of an mpi4py program has both ends in the trace
export MPI4PY_RC_RECV_MPROBE=false

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
srun --mpi=pmix --kill-on-bad-exit=1 --cpus-per-task=1 --cpu-bind=verbose,cores \
    --export=ALL,LD_PRELOAD=/hpclab/build/lib/libmpitrace.so,MPITRACE_DIR="$OUT_DIR"/trace \
    /hpclab/programs/ring --count 6 'hello world'
status=$?
cat /proc/net/dev > provenance/net-after.txt 2>/dev/null
{
  grep '^cpu' /proc/stat; echo "clock ${EPOCHREALTIME:-$(date +%s.%N)}"
  times; job_cpu
  echo "jobs $(squeue -h -w "${SLURMD_NODENAME:-$(hostname)}" -t R -o %i | tr '\n' ' ')"
} > provenance/noise-after.txt 2>/dev/null

# how the program ended; its existence marks the run done, as a kernel's report does
printf '{"kernel": "program", "exit_code": %d}\n' "$status" > result.json.tmp && mv result.json.tmp result.json

# binding report: what srun said about each rank's CPUs (it writes to stderr)
grep -E 'cpu-bind' "$RUN_DIR/stderr" > provenance/binding.txt || true
echo "hpclab: kernel exit code $status"
exit $status
