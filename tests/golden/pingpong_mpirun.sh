#!/bin/bash
# hpclab job: kernel pingpong, experiment pingpong, run 20260101-000000-000000
# Rendered from slurm-templates/pingpong.sh.j2; the full spec is spec.json next to this file.
# Submitting it again by hand (sbatch job.sh) repeats the run; the first run's results are kept
# and the new ones go to rerun-<jobid>/ inside the run folder.
# Ping-pong between rank pairs: half round-trip time and bandwidth per message size. The MCA
# selections in the environment block decide which transport (PML/BTL/MTL) carries the messages.


# resources
#SBATCH --account=hpc-school-2026
#SBATCH --cpus-per-task=1
#SBATCH --error=/hpclab/runs/pingpong/20260101-000000-000000/stderr
#SBATCH --exclusive
#SBATCH --job-name=hpclab-pingpong
#SBATCH --nodes=2
#SBATCH --ntasks-per-node=1
#SBATCH --ntasks=2
#SBATCH --open-mode=append
#SBATCH --output=/hpclab/runs/pingpong/20260101-000000-000000/stdout
#SBATCH --partition=short
#SBATCH --qos=normal
#SBATCH --time=00:10:00

set -uo pipefail

# environment
# modules: the job's own `module` command (a site's), else Lmod's; a failure stops the job
hpclab_stop() { echo "hpclab: $1" >&2; exit 1; }
hpclab_not_loaded() {  # $1: a module `module load` refused; unknown, or known but broken
  module is-avail "$1" 2>/dev/null && hpclab_stop "module $1 did not load (Lmod says why above)"
  hpclab_stop "module $1 is unknown here (MODULEPATH=${MODULEPATH:-}; module avail lists the modules)"
}
if ! type module >/dev/null 2>&1; then
  [[ -r /usr/share/lmod/lmod/init/bash ]] || hpclab_stop 'no module command and no Lmod (/usr/share/lmod/lmod/init/bash) for modules gcc/12 openmpi/4.1 hwloc: install lmod or drop the modules from the site profile'
  source /usr/share/lmod/lmod/init/bash
fi
module load gcc/12 || hpclab_not_loaded gcc/12
module load openmpi/4.1 || hpclab_not_loaded openmpi/4.1
module load hwloc || hpclab_not_loaded hwloc
export FI_TCP_IFACE=eth0
export OMPI_MCA_btl='^openib'
export OMPI_MCA_btl_tcp_disable_family=6
export OMPI_MCA_btl_tcp_if_include=eth0
export OMPI_MCA_pml=ob1
export UCX_LOG_LEVEL=error
RUN_DIR=/hpclab/runs/pingpong/20260101-000000-000000
OUT_DIR="$RUN_DIR"
if [[ -e "$RUN_DIR/result.json" ]]; then
  OUT_DIR="$RUN_DIR/rerun-$SLURM_JOB_ID"
fi
mkdir -p "$OUT_DIR/provenance"
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
  echo "kernel: $(ls -l /hpclab/build/bin/pingpong)"
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
mpirun -np "$SLURM_NTASKS" --map-by ppr:1:node --bind-to core --report-bindings -x FI_TCP_IFACE \
    -x UCX_LOG_LEVEL numactl --membind=0 -- /hpclab/build/bin/pingpong --max-bytes 4194304 \
    --no-check --json "$OUT_DIR"/result.json
status=$?
cat /proc/net/dev > provenance/net-after.txt 2>/dev/null
{
  grep '^cpu' /proc/stat; echo "clock ${EPOCHREALTIME:-$(date +%s.%N)}"
  times; job_cpu
  echo "jobs $(squeue -h -w "${SLURMD_NODENAME:-$(hostname)}" -t R -o %i | tr '\n' ' ')"
} > provenance/noise-after.txt 2>/dev/null

# binding report: what mpirun said about each rank's CPUs (it writes to stderr)
grep -E 'MCW rank' "$RUN_DIR/stderr" > provenance/binding.txt || true
echo "hpclab: kernel exit code $status"
exit $status
