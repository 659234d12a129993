"""Build traces by hand, for tests, lessons and simulations (the Poisson generator uses it).

Write each rank's program as a list of calls and compute durations; `build(model)` turns it
into a Trace whose times are those of running that program on the network model (it lays the
calls out with their compute gaps and replays them):

    b = TraceBuilder(4)
    for r in range(4):
        b[r].compute(1000).sendrecv(to=(r + 1) % 4, bytes=8, tag=0,
                                    frm=(r - 1) % 4, recv_bytes=8, recv_tag=0)
    trace = b.build()          # ideal network; b.build(HOCKNEY) for another

Durations are in ns. MPI_Init and MPI_Finalize are added around every rank's program unless
build(finalize=False) (a crashed run). Request ids returned by isend/irecv go to wait/waitall.
"""

from __future__ import annotations

from contextlib import contextmanager

import pandas as pd

from hpclab.errors import HpclabError
from hpclab.trace.events import COLUMNS, PROC_NULL, Trace, normalise

# op tuple: (compute_before_ns, call, peer, tag, comm, bytes, req, completes, root, name,
#            recv_peer, recv_tag, recv_bytes)


class RankBuilder:
    """The program of one rank; every method returns self except isend/irecv (a request id)."""

    def __init__(self, parent: "TraceBuilder", rank: int):
        self._p = parent
        self.rank = rank
        self.ops: list[tuple] = []
        self._gap = 0
        self._next_req = 0
        self._open: list[str] = []

    def _peer(self, r, what):
        if r is None:
            return PROC_NULL
        if not (isinstance(r, int) and 0 <= r < self._p.nranks):
            raise HpclabError(f"rank {self.rank}: {what} rank {r!r} is not in 0..{self._p.nranks - 1}",
                              "pass None for MPI_PROC_NULL")
        return r

    def _op(self, call, peer=-1, tag=-1, comm=0, nbytes=0, req=-1, completes=(), root=-1, name="",
            recv_peer=-1, recv_tag=-1, recv_bytes=0):
        self.ops.append((self._gap, call, peer, tag, comm, nbytes, req, tuple(completes), root, name,
                         recv_peer, recv_tag, recv_bytes))
        self._gap = 0
        return self

    def compute(self, ns: int) -> "RankBuilder":
        """Compute for `ns` nanoseconds before the next call."""
        if ns < 0:
            raise HpclabError(f"rank {self.rank}: compute({ns}) is negative")
        self._gap += int(ns)
        return self

    def send(self, to, bytes: int, tag: int = 0, comm: int = 0):
        """Blocking MPI_Send of `bytes` to rank `to` (None = MPI_PROC_NULL)."""
        return self._op("MPI_Send", self._peer(to, "send to"), tag, comm, bytes)

    def recv(self, frm, bytes: int, tag: int = 0, comm: int = 0):
        """Blocking MPI_Recv from rank `frm` (the matched source; None = MPI_PROC_NULL)."""
        return self._op("MPI_Recv", self._peer(frm, "receive from"), tag, comm, bytes)

    def isend(self, to, bytes: int, tag: int = 0, comm: int = 0) -> int:
        """MPI_Isend; returns the request id to wait for."""
        q = self._next_req
        self._next_req += 1
        self._op("MPI_Isend", self._peer(to, "isend to"), tag, comm, bytes, req=q)
        return q

    def irecv(self, frm, bytes: int, tag: int = 0, comm: int = 0) -> int:
        """MPI_Irecv; returns the request id to wait for."""
        q = self._next_req
        self._next_req += 1
        self._op("MPI_Irecv", self._peer(frm, "irecv from"), tag, comm, bytes, req=q)
        return q

    def wait(self, req: int):
        return self._op("MPI_Wait", completes=(req,))

    def waitall(self, reqs):
        return self._op("MPI_Waitall", completes=tuple(reqs))

    def test(self, reqs, completed=True):
        """MPI_Testall that completed `reqs` (completed=False: a Test that found nothing done)."""
        return self._op("MPI_Testall", completes=tuple(reqs) if completed else ())

    def sendrecv(self, to, bytes: int, tag: int, frm, recv_bytes: int, recv_tag: int, comm: int = 0):
        return self._op("MPI_Sendrecv", self._peer(to, "sendrecv to"), tag, comm, bytes,
                        recv_peer=self._peer(frm, "sendrecv from"), recv_tag=recv_tag,
                        recv_bytes=recv_bytes)

    def barrier(self, comm: int = 0):
        return self._op("MPI_Barrier", comm=comm)

    def allreduce(self, bytes: int = 8, comm: int = 0):
        return self._op("MPI_Allreduce", comm=comm, nbytes=bytes)

    def bcast(self, root: int, bytes: int = 8, comm: int = 0):
        return self._op("MPI_Bcast", comm=comm, nbytes=bytes, root=self._peer(root, "bcast root"))

    def reduce(self, root: int, bytes: int = 8, comm: int = 0):
        return self._op("MPI_Reduce", comm=comm, nbytes=bytes, root=self._peer(root, "reduce root"))

    def region_begin(self, name: str):
        self._open.append(name)
        return self._op("region_begin", name=name)

    def region_end(self, name: str):
        if not self._open or self._open[-1] != name:
            raise HpclabError(f"rank {self.rank}: region_end({name!r}) but the open region is "
                              f"{self._open[-1] if self._open else None!r}")
        self._open.pop()
        return self._op("region_end", name=name)

    @contextmanager
    def region(self, name: str):
        """with b[r].region("red"): ... brackets the calls in region_begin/region_end."""
        self.region_begin(name)
        yield self
        self.region_end(name)


class TraceBuilder:
    """Programs for `nranks` ranks; hosts: rank -> hostname (default: all on 'node0')."""

    def __init__(self, nranks: int, hosts: dict | None = None, comms: dict | None = None):
        if not (isinstance(nranks, int) and nranks >= 1):
            raise HpclabError(f"TraceBuilder needs nranks >= 1, got {nranks!r}")
        self.nranks = nranks
        self.hosts = dict(hosts) if hosts else {r: "node0" for r in range(nranks)}
        self.comms = {0: list(range(nranks)), **(comms or {})}
        self.ranks = [RankBuilder(self, r) for r in range(nranks)]

    def __getitem__(self, r: int) -> RankBuilder:
        return self.ranks[r]

    def skeleton(self, finalize: bool = True) -> Trace:
        """The programs laid out with their compute gaps and zero-time calls (not yet replayed)."""
        cols: dict[str, list] = {c: [] for c in COLUMNS}
        for rb in self.ranks:
            ops = [(0, "MPI_Init", -1, -1, 0, 0, -1, (), -1, "", -1, -1, 0)] + rb.ops
            if finalize:
                ops.append((rb._gap, "MPI_Finalize", -1, -1, 0, 0, -1, (), -1, "", -1, -1, 0))
            t = 0
            for s, op in enumerate(ops):
                t += op[0]
                cols["rank"].append(rb.rank)
                cols["seq"].append(s)
                cols["t_enter"].append(t)
                cols["t_exit"].append(t)
                for c, v in zip(COLUMNS[4:], op[1:]):
                    cols[c].append(v)
        return Trace(normalise(pd.DataFrame(cols)), dict(self.comms), dict(self.hosts),
                     {"source": "TraceBuilder"})

    def build(self, model=None, *, finalize: bool = True, strict: bool = True) -> Trace:
        """The Trace of running the programs on `model` (default: ideal network)."""
        from hpclab.trace.model import IDEAL
        from hpclab.trace.replay import replay
        for rb in self.ranks:
            if rb._open and finalize:
                raise HpclabError(f"rank {rb.rank}: region {rb._open[-1]!r} is still open at the end")
        model = model or IDEAL
        out = replay(self.skeleton(finalize), model, strict=strict)
        out.meta["source"] = "TraceBuilder"
        return out
