"""How the course's event table looks in OTF2, the open trace format of Score-P, Vampir, Scalasca
and Cube: the vocabulary shared by the writer (`otf2_write.py`) and the reader (`otf2_read.py`).

- Time: OTF2 timestamps are ticks of a timer with a stated resolution (ticks per second). The
  course's times are ns on rank 0's corrected clock, so an export has resolution 10**9 and keeps
  every timestamp as it is; a foreign archive's ticks are turned into ns since its global offset.
- One location group (an MPI process) per rank, each with one location (its master thread), under
  a system tree of machine -> node (host name) -> process, as Score-P writes it.
- A call is Enter(region) ... Leave(region), with the MPI records of the call in between: MpiSend,
  MpiIsend, MpiIrecvRequest, MpiRecv, MpiIrecv, MpiIsendComplete, MpiCollectiveBegin/End. Peers and
  roots in those records are ranks in the record's communicator, not world ranks.
- Collective sizes follow Score-P's byte counts (its collective byte-count tests): with N the size
  of the communicator and s the rank's contribution (the course's `bytes`), Bcast: root sends N s,
  every rank receives s; Reduce: every rank sends s, the root receives N s; Allreduce: N s both ways;
  Barrier and communicator creation: nothing.
- CPU times go into a metric (a Metric record just before the Enter or Leave it belongs to), so
  Vampir shows them as a counter; what OTF2 has no record for (calls to MPI_PROC_NULL, a request
  completed without a message, the course's own seq numbers, the width of a region marker) travels
  in attributes named `hpclab::...`, which other tools show and otherwise ignore.

The Python bindings are PyPI's otf2 wheel where one exists (CPython 3.11 on x86_64, pinned in
requirements.lock), elsewhere Debian's python3-otf2, linked into the venv by `make setup`;
`bindings()` imports them or says what to install.
"""

from __future__ import annotations

from pathlib import Path

from hpclab.core.errors import HpclabError

TIMER_RESOLUTION = 10**9  # ticks per second of an exported archive: ns
ARCHIVE_NAME = "traces"  # the anchor file is <dir>/traces.otf2, as Score-P names it
CREATOR = "hpclab (MPI tracer src/mpitrace)"

# The course's CPU-time columns as one OTF2 metric member (a value in ns, exponent -9 of seconds).
CPU_METRIC = "CLOCK_THREAD_CPUTIME_ID"
CPU_METRIC_DESCRIPTION = "CPU time of the calling thread at each MPI call's entry and exit (hpclab tracer)"

# Attributes carrying what OTF2 records cannot (written only where needed, see otf2_write).
ATTR_PREFIX = "hpclab::"
ATTRS = {
    "seq": "the call's number in its rank's hpclab trace",
    "peer": "world rank of the peer (-2: MPI_PROC_NULL, -1: none or unknown)",
    "tag": "message tag (-1: none)", "comm": "hpclab communicator id (0: MPI_COMM_WORLD)",
    "bytes": "message bytes, or the rank's contribution to a collective",
    "req": "hpclab request id", "root": "world rank of the collective's root",
    "recv_peer": "MPI_Sendrecv: world rank the receive came from",
    "recv_tag": "MPI_Sendrecv: tag of the receive", "recv_bytes": "MPI_Sendrecv: bytes received",
    "marker_ns": "duration of the region marker call (ns)",
    "marker_cpu_ns": "CPU time of the region marker call (ns)",
    "completes": "request ids this call completed, in handle order (comma-separated)",
}
STRING_ATTRS = ("completes",)
INT_ATTRS = tuple(a for a in ATTRS if a not in STRING_ATTRS)

# Communicators other than MPI_COMM_WORLD are named with the course's id, so a round trip keeps it.
WORLD_NAME = "MPI_COMM_WORLD"
COMM_NAME = "MPI communicator {id}"

# OTF2 region roles of the course's calls (Vampir and Scalasca group calls by role).
P2P = ("MPI_Send", "MPI_Isend", "MPI_Recv", "MPI_Irecv", "MPI_Sendrecv", "MPI_Wait",
       "MPI_Waitall", "MPI_Test", "MPI_Testall")
ROLE = {"MPI_Barrier": "BARRIER", "MPI_Bcast": "COLL_ONE2ALL", "MPI_Reduce": "COLL_ALL2ONE",
        "MPI_Allreduce": "COLL_ALL2ALL", "MPI_Cart_create": "COLL_OTHER",
        "MPI_Comm_split": "COLL_OTHER", "MPI_Comm_dup": "COLL_OTHER",
        "MPI_Init": "FUNCTION", "MPI_Finalize": "FUNCTION", **{c: "POINT2POINT" for c in P2P}}
# The collective operation of each collective call (and of the communicator-making ones).
COLLECTIVE_OP = {"MPI_Barrier": "BARRIER", "MPI_Bcast": "BCAST", "MPI_Reduce": "REDUCE",
                 "MPI_Allreduce": "ALLREDUCE", "MPI_Cart_create": "CREATE_HANDLE",
                 "MPI_Comm_split": "CREATE_HANDLE", "MPI_Comm_dup": "CREATE_HANDLE"}

# Reading a foreign (Score-P) archive: MPI regions the event table has no name for count as the
# nearest call it names (as the loader maps the tracer's records), by name first ...
AS_CONTRACT = {
    "MPI_Init_thread": "MPI_Init", "MPI_Ssend": "MPI_Send", "MPI_Bsend": "MPI_Send",
    "MPI_Rsend": "MPI_Send", "MPI_Issend": "MPI_Isend", "MPI_Ibsend": "MPI_Isend",
    "MPI_Irsend": "MPI_Isend", "MPI_Sendrecv_replace": "MPI_Sendrecv",
    "MPI_Waitany": "MPI_Wait", "MPI_Waitsome": "MPI_Waitall", "MPI_Testany": "MPI_Test",
    "MPI_Testsome": "MPI_Testall", "MPI_Cart_sub": "MPI_Comm_split",
    "MPI_Comm_split_type": "MPI_Comm_split", "MPI_Comm_create": "MPI_Comm_split",
    "MPI_Graph_create": "MPI_Cart_create", "MPI_Dist_graph_create": "MPI_Cart_create",
    "MPI_Dist_graph_create_adjacent": "MPI_Cart_create",
}
SYNC_SENDS = ("MPI_Ssend", "MPI_Issend")  # the event table's sync = 1
# ... then, for other collectives, by the collective operation their MpiCollectiveEnd names: the
# event table keeps one call per pattern (one-to-all, all-to-one, all-to-all) and its replay and
# wait states treat each pattern alike.
OP_AS_CALL = {"BARRIER": "MPI_Barrier", "BCAST": "MPI_Bcast", "SCATTER": "MPI_Bcast",
              "SCATTERV": "MPI_Bcast", "REDUCE": "MPI_Reduce", "GATHER": "MPI_Reduce",
              "GATHERV": "MPI_Reduce", "ALLREDUCE": "MPI_Allreduce", "ALLGATHER": "MPI_Allreduce",
              "ALLGATHERV": "MPI_Allreduce", "ALLTOALL": "MPI_Allreduce",
              "ALLTOALLV": "MPI_Allreduce", "ALLTOALLW": "MPI_Allreduce",
              "REDUCE_SCATTER": "MPI_Allreduce", "REDUCE_SCATTER_BLOCK": "MPI_Allreduce",
              "SCAN": "MPI_Allreduce", "EXSCAN": "MPI_Allreduce",
              "CREATE_HANDLE": "MPI_Comm_split", "CREATE_HANDLE_AND_ALLOCATE": "MPI_Comm_split"}


def bindings():
    """The `otf2` module (PyPI's otf2 wheel or Debian's python3-otf2). Raises HpclabError naming
    Debian's package when the bindings are not installed or not linked into this Python."""
    try:
        # imported here, not at the top: the bindings may be missing (no wheel for this Python and
        # no system package), and only OTF2 export and import need them
        import otf2
    except (ImportError, OSError) as err:  # OSError: the C library behind the bindings
        raise HpclabError(f"the OTF2 Python bindings cannot be imported ({err})",
                          "install Debian's python3-otf2 (and otf2-tools for otf2-print): "
                          "sudo apt-get install python3-otf2 otf2-tools; then run 'make setup', "
                          "which links them into .venv") from None
    return otf2


def collective_sizes(call: str, nbytes: int, members: int, is_root: bool) -> tuple[int, int]:
    """(size_sent, size_received) of an MpiCollectiveEnd for a rank contributing nbytes to a
    collective on `members` ranks (Score-P's convention, see the module docstring)."""
    if call == "MPI_Bcast":
        return (members * nbytes if is_root else 0), nbytes
    if call == "MPI_Reduce":
        return nbytes, (members * nbytes if is_root else 0)
    if call == "MPI_Allreduce":
        return members * nbytes, members * nbytes
    return 0, 0


def contribution(call: str, sent: int, received: int, members: int) -> int:
    """The rank's contribution (the event table's bytes) from an MpiCollectiveEnd's sizes: the
    inverse of collective_sizes; for calls mapped onto Allreduce, the larger side over N."""
    if call == "MPI_Bcast":
        return received
    if call == "MPI_Reduce":
        return sent
    if call == "MPI_Allreduce":
        return max(sent, received) // max(members, 1)
    return 0


def anchor_file(path: str | Path) -> Path | None:
    """The anchor file (*.otf2) of an OTF2 archive given as the file itself or its folder; None if
    `path` is neither. A folder must hold exactly one anchor file."""
    p = Path(path)
    if p.is_file():
        return p if p.suffix == ".otf2" else None
    if not p.is_dir():
        return None
    anchors = sorted(q for q in p.glob("*.otf2") if q.is_file())
    if len(anchors) > 1:
        raise HpclabError(f"{p} holds {len(anchors)} OTF2 archives "
                          f"({', '.join(a.name for a in anchors[:4])})",
                          "pass the anchor file of the one you mean (e.g. "
                          f"{anchors[0]})")
    return anchors[0] if anchors else None
