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
module load gcc/12
module load openmpi/4.1
module load hwloc
export OMPI_MCA_btl=self,vader

# run
srun --mpi=pmix --kill-on-bad-exit=1 /hpclab/.venv/bin/python -m ipyparallel.engine --mpi
