"""MPI trace analysis: the event table contract (events), replay under network models (replay,
on CPU bursts, with shared links if the model has them), profiles, the five-part split (compute /
load imbalance / dependency / transfer / rest), wait states, message matrices, timelines,
rank-to-node mappings. The loader for the tracer's files is load.py.

Submodules are imported on demand; importing the package itself is cheap.
"""
