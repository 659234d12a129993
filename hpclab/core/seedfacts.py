"""Figures quoted from the course's source talks, each with its citation.

These are the only numbers in the course that were not measured on the student's machine. They
are shown beside our own measurements, always labelled as quoted, so a student can compare a
2019 OmniPath cluster or a 2014 InfiniBand cluster with what their own machine does.

Sources (files in the course's shared/seeds/ folder):
  GOGLIN_2019 = "MPI behind the scene", B. Goglin, Inria, HPC school 2019-11-08 (000_91f3735821325e6f.txt)
  ITAC_2014   = "MPI Analysis", Intel ITAC/VTune training, 2014 (001_9a6db99896575e26.txt)
  PLACEMENT_2018 = task placement study, Sandia, 2018-11-08 (002_435cac2a7967b5a7.txt)
"""

from __future__ import annotations

import pandas as pd

GOGLIN_2019 = "Goglin, 'MPI behind the scene', 2019 (seed 000_91f3735821325e6f)"
ITAC_2014 = "Intel, 'MPI Analysis' ITAC training, 2014 (seed 001_9a6db99896575e26)"
PLACEMENT_2018 = "Task placement study (KNL/Haswell/Broadwell), 2018 (seed 002_435cac2a7967b5a7)"

# IMB PingPong, one process per node, as printed in the talk: (bytes, t[usec], MB/s).
# Each run is labelled with the network, the Open MPI component that carried it and the MCA
# option that selected it.
_PINGPONG_2019 = {
    ("100G Omni-Path", "mtl/psm2", "default"): [(0, 1.45, 0.0), (1, 1.62, 0.62), (2097152, 215.75, 9720.19), (4194304, 439.37, 9546.20)],
    ("40G TrueScale", "mtl/psm", "--mca mtl ^psm2"): [(0, 1.56, 0.0), (1, 1.68, 0.59), (2097152, 689.57, 3041.23), (4194304, 1325.47, 3164.39)],
    ("10G Ethernet", "btl/tcp", "--mca mtl ^psm2,psm"): [(0, 16.39, 0.0), (1, 18.08, 0.06), (2097152, 2314.69, 906.02), (4194304, 5323.38, 787.90)],
    ("40G InfiniBand (Mellanox)", "pml/ucx", "default"): [(0, 1.64, 0.0), (1, 1.66, 0.60), (2097152, 567.42, 3695.97), (4194304, 1126.84, 3722.18)],
    ("40G InfiniBand (Mellanox)", "btl/openib", "--mca pml ^ucx --mca btl_openib_allow_ib 1"): [(0, 1.48, 0.0), (1, 1.54, 0.65), (2097152, 576.53, 3637.52), (4194304, 1128.36, 3717.16)],
}


def pingpong_2019() -> pd.DataFrame:
    """The talk's IMB PingPong rows: network, component, selection, bytes, t_usec, mbytes_per_sec."""
    rows = [
        {"network": net, "component": comp, "selection": sel, "bytes": b, "t_usec": t, "mbytes_per_sec": bw,
         "source": GOGLIN_2019}
        for (net, comp, sel), data in _PINGPONG_2019.items()
        for b, t, bw in data
    ]
    return pd.DataFrame(rows)


# The "Transports" block of Open MPI 4.0.2's configure summary on PlaFRIM, as shown in the talk.
CONFIGURE_SUMMARY_2019 = {
    "Cisco usNIC": False, "Cray uGNI (Gemini/Aries)": False, "Intel Omnipath (PSM2)": True,
    "Intel TrueScale (PSM)": True, "Mellanox MXM": False, "Open UCX": True,
    "OpenFabrics OFI Libfabric": False, "OpenFabrics Verbs": False, "Portals4": False,
    "Shared memory/copy in+copy out": True, "Shared memory/Linux CMA": True,
    "Shared memory/Linux KNEM": False, "Shared memory/XPMEM": False, "TCP": True,
}

# Imbalance diagram of the 2D Poisson solver, 3600 x 3600 grid, 384 ranks on 16 nodes of
# 2 x 12-core Ivy Bridge (E5-2697 v2), Mellanox QDR InfiniBand, Intel MPI 5.0.
# Seconds summed over the 384 ranks (100 iterations), as the tool shows them.
_IMBALANCE_2014 = {
    "2D 24x16": {"compute": 4.464806, "interconnect": 3.88589, "load imbalance": 0.121536, "dependency": 0.593085},
    "1D 384x1": {"compute": 4.88214, "interconnect": 4.05001, "load imbalance": 0.564641, "dependency": 0.226214},
    "1D 1x384": {"compute": 11.452, "interconnect": 3.97209, "load imbalance": 0.724298, "dependency": 0.963462},
}


def imbalance_2014() -> pd.DataFrame:
    """The talk's refined imbalance diagram: one row per process grid, seconds per component,
    summed over the 384 ranks (see imbalance_2014_per_rank_iteration for the per-rank time)."""
    df = pd.DataFrame(_IMBALANCE_2014).T
    df.index.name = "process grid"
    df["source"] = ITAC_2014
    return df


# How the diagram's seconds add up. ITAC's profile "provides accumulated timings" (summed over all
# processes) and the training divides by p for per-rank times (T_comp[p] = T_comp,acc[p] / p; the
# wait time "= Imbalance / p"). Read that way, the 2D run's four parts, 9.065 s, are 23.6 ms per
# rank for 100 iterations, 0.236 ms per iteration, and the seed's event timeline of one 2D
# iteration spans 0.243 ms (0.045289 to 0.045532 s). Read as per-rank seconds they would give 90.6
# ms per iteration, 370 times that timeline, and 1.3 us of compute per grid point on a 2.7 GHz core.
ITERATION_2D_TIMELINE_MS_2014 = 0.243


def imbalance_2014_per_rank_iteration() -> pd.DataFrame:
    """The same diagram in ms per rank and iteration: seconds summed over 384 ranks, divided by
    the ranks and the 100 iterations (POISSON_2014), so it shares a unit with our simulation."""
    df = imbalance_2014().drop(columns="source")
    df = df * 1e3 / (POISSON_2014["ranks"] * POISSON_2014["iterations"])
    df["source"] = ITAC_2014
    return df


# Intel MPI's default eager threshold (I_MPI_EAGER_THRESHOLD, bytes; Intel MPI Library Developer
# Reference): inside a node the 2014 runs' halos (a row of 3600 doubles, 28.8 kB, at most) went
# eagerly under it. Between nodes Intel MPI 5.0 ran DAPL (the study's profile shows
# MPID_nem_dapl_rc_poll_dyn_opt), whose own switch, I_MPI_DAPL_DIRECT_COPY_THRESHOLD, the training
# does not quote (Intel MPI 5.1's manual gives 16,456 bytes on DAPL's UD path), so the 2D halos (at
# most 1.8 kB) went eagerly and the 28.8 kB rows may not have: notebook 05b shows both cases. DAPL
# was removed from Intel MPI in 2019; Intel MPI 2021 runs I_MPI_FABRICS=shm:ofi over libfabric.
INTEL_MPI_EAGER_THRESHOLD = 262144

POISSON_2014 = {
    "grid": (3600, 3600), "ranks": 384, "nodes": 16, "cores_per_node": 24,
    "cpu": "Intel Xeon E5-2697 v2 (Ivy Bridge), 12 cores, 2.7 GHz, 2 sockets per node",
    "network": "Mellanox MT4099 QDR InfiniBand", "mpi": "Intel MPI 5.0.0.028",
    "iterations": 100, "exchanges_per_iteration": 3, "source": ITAC_2014,
}

PLACEMENT_FINDINGS_2018 = [
    ("KNL, Intel OpenMP, several ranks per node, default srun binding",
     "every rank's OpenMP threads bound to the same hardware threads: a massive load imbalance; "
     "fix with --cpu-bind=cores, one rank per node, or a different OpenMP runtime; "
     "OMP_NUM_THREADS=1 alone is not enough"),
    ("Haswell, MPI everywhere, Cray default placement", "poor; use --cpu-bind=cores"),
    ("Haswell, OpenMP everywhere", "all placements poor; use at least 2 ranks per node with --cpu-bind=sockets"),
    ("Broadwell, OpenMP", "do not use OMP_PROC_BIND=spread"),
    ("Broadwell, two NUMA domains", "local memory is about 60 % faster than remote"),
]

# Names in the 2019 configure summary -> names in hpclab.site.ompi.transports().
_SUMMARY_NAMES = {
    "Cray uGNI (Gemini/Aries)": "Cray uGNI",
    "Intel Omnipath (PSM2)": "Intel Omni-Path (PSM2)",
    "Shared memory/copy in+copy out": "Shared memory (vader)",
}


def configure_summary_comparison(transports: pd.DataFrame) -> pd.DataFrame:
    """This machine's built-in transports (hpclab.site.ompi.transports) beside the talk's 2019 build.

    Returns one row per transport with columns 'this machine' and 'PlaFRIM 2019 (quoted)';
    a transport one side does not report is shown as '-'.
    """
    ours = transports.set_index("transport")["built"].map({True: "yes", False: "no"})
    theirs = pd.Series({_SUMMARY_NAMES.get(k, k): ("yes" if v else "no") for k, v in CONFIGURE_SUMMARY_2019.items()})
    table = pd.DataFrame({"this machine": ours, "PlaFRIM 2019 (quoted)": theirs}).fillna("-")
    table.index.name = "transport"
    return table
