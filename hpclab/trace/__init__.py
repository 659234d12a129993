"""MPI trace analysis: the event table contract (events), replay under network models (replay),
profiles, the compute / transfer / load / dependency split, wait states, message matrices,
timelines, rank-to-node mappings. The loader for the tracer's files is load.py.

Submodules are imported on demand; importing the package itself is cheap.
"""
