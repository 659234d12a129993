"""Run folders -> tables: the results of a run joined with where its launcher bound each rank.

    parse_run(run_dir, kernel)       one run folder -> tidy DataFrame (the one entry point runs use)
    run_provenance, run_topology     where and when a run happened; its host's hwloc topology
    parse_bindings, read_bindings    srun --cpu-bind=verbose and mpirun --report-bindings lines
    run_bindings                     those lines of a run folder, in OS CPU numbers

A kernel's own report is read by its module in hpclab.kernels (found through
hpclab.kernels.registry); the contract every kernel shares is hpclab.kernels.contract.
Every parser raises HpclabError naming the file and line (or JSON key) it could not read.
"""

from hpclab.runs.parse.bindings import parse_bindings, read_bindings
from hpclab.runs.parse.run import parse_run, run_bindings, run_provenance, run_topology

__all__ = ["parse_bindings", "parse_run", "read_bindings", "run_bindings", "run_provenance",
           "run_topology"]
