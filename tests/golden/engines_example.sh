#!/bin/bash
# hpclab interactive MPI: 4 ipyparallel engines as the ranks of one MPI job.
# srun starts one engine per task through the site's PMI (pmix), so they share
# MPI_COMM_WORLD; '--mpi' makes each engine register with the id equal to its rank. The
# controller's address and key come in the environment (IPP_CONNECTION_INFO), exported by sbatch.
# Rendered from slurm-templates/engines.sh.j2.

# resources
#SBATCH --account=hpc-school-2026
#SBATCH --chdir=/hpclab/runs/_interactive/20260101-000000-000000
#SBATCH --exclusive
#SBATCH --export=ALL
#SBATCH --job-name=hpclab-engines-20260101-000000-000000
#SBATCH --ntasks=4
#SBATCH --output=/hpclab/runs/_interactive/20260101-000000-000000/engines-1.log
#SBATCH --partition=short
#SBATCH --qos=normal
#SBATCH --time=00:30:00
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
export OMPI_MCA_btl=self,vader

# run
srun --mpi=pmix --kill-on-bad-exit=1 /hpclab/.venv/bin/python -m ipyparallel.engine --mpi
