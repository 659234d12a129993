"""The transports lesson (notebook 02, lab-transports): the Open MPI transport selections the course
compares, and the pingpong specs that measure them.

The runs' analysis is hpclab.analysis.transports, their figure hpclab.plots.figures.latency_bandwidth.
"""

from __future__ import annotations

from dataclasses import dataclass

from hpclab.spec import model as spec


@dataclass(frozen=True)
class Selection:
    """A named Open MPI transport selection: the MCA parameters and why one would try it."""

    name: str
    mca: dict
    why: str


SELECTIONS = {
    s.name: s
    for s in [
        Selection("default", {}, "let Open MPI choose by priority and by what it finds"),
        Selection("ob1+vader", {"pml": "ob1", "btl": "self,vader"},
                  "shared memory inside a node (vader, called sm from Open MPI 5)"),
        Selection("ob1+vader, no single copy", {"pml": "ob1", "btl": "self,vader",
                                                "btl_vader_single_copy_mechanism": "none"},
                  "vader with copy-in/copy-out only: every large message is copied twice through a shared buffer"),
        Selection("ob1+vader, CMA", {"pml": "ob1", "btl": "self,vader", "btl_vader_single_copy_mechanism": "cma"},
                  "vader with Linux cross-memory attach: one copy, done by the kernel"),
        Selection("ob1+tcp", {"pml": "ob1", "btl": "self,tcp"},
                  "TCP sockets, as between nodes on Ethernet (here over loopback)"),
        Selection("no vader", {"btl": "^vader"},
                  "the talk's experiment: disable the fast path and see where performance goes"),
        Selection("ucx", {"pml": "ucx", "pml_ucx_tls": "any", "pml_ucx_devices": "any"},
                  "UCX; Open MPI 4.1 uses it only where it finds an InfiniBand/RoCE device unless told 'any'"),
    ]
}


def specs(names: list[str], ntasks: int = 2, max_bytes: int = 4 << 20, repetitions: int = 3,
          experiment: str = "transports", **extra) -> list:
    """Pingpong specs, one per named selection (each repeated `repetitions` times as separate jobs)."""
    out = []
    for name in names:
        sel = SELECTIONS[name]
        out.append(spec.make_spec(kernel="pingpong", ntasks=ntasks, args={"max_bytes": max_bytes},
                                  binding={"cpu_bind": "cores"}, mca=dict(sel.mca), label=name,
                                  repetitions=repetitions, experiment=experiment, **extra))
    return out


def node_specs(max_bytes: int = 1 << 20, repetitions: int = 2, experiment: str = "transports-nodes",
               label_suffix: str = "") -> list:
    """Two pingpong specs: both ranks inside one node, and one rank on each of two nodes."""
    common = dict(kernel="pingpong", ntasks=2, args={"max_bytes": max_bytes}, repetitions=repetitions,
                  experiment=experiment)
    return [spec.make_spec(nodes=1, label=f"intra-node{label_suffix}", **common),
            spec.make_spec(nodes=2, ntasks_per_node=1, label=f"inter-node{label_suffix}", **common)]
