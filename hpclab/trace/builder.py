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

Built traces carry CPU times as the tracer records them. By default a rank runs all the time
(CPU time = wall time); `compute(ns, cpu=c)` with c < ns is a burst in which the rank ran only
c ns and was switched out for the rest (as when ranks share a core). build() lays the program
out on wall time (the run as it was recorded); replaying the result uses the CPU bursts.
"""

from __future__ import annotations

from contextlib import contextmanager

import numpy as np
import pandas as pd

from hpclab.core.errors import HpclabError
from hpclab.trace.events import COLUMNS, PROC_NULL, Trace, normalise
from hpclab.trace.model import IDEAL
from hpclab.trace.replay import replay

# op tuple: (compute_before_ns, call, peer, tag, comm, bytes, req, completes, root, name,
#            recv_peer, recv_tag, recv_bytes)


class RankBuilder:
    """The program of one rank; every method returns self except isend/irecv (a request id)."""

    def __init__(self, parent: "TraceBuilder", rank: int):
        self._p = parent
        self.rank = rank
        self.ops: list[tuple] = []
        self.cpu: list[int] = []  # CPU time of the burst before each op
        self.sync: list[int] = []  # 1 for a synchronous send
        self._gap = 0
        self._cpu = 0
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
            recv_peer=-1, recv_tag=-1, recv_bytes=0, sync=False):
        self.sync.append(int(sync))
        self.ops.append((self._gap, call, peer, tag, comm, nbytes, req, tuple(completes), root, name,
                         recv_peer, recv_tag, recv_bytes))
        self.cpu.append(self._cpu)
        self._gap = 0
        self._cpu = 0
        return self

    def compute(self, ns: int, cpu: int | None = None) -> "RankBuilder":
        """Compute for `ns` nanoseconds (wall time) before the next call, of which the rank ran
        `cpu` ns (default: all of them; less: it was switched out for ns - cpu)."""
        if ns < 0:
            raise HpclabError(f"rank {self.rank}: compute({ns}) is negative")
        cpu = ns if cpu is None else cpu
        if not 0 <= cpu <= ns:
            raise HpclabError(f"rank {self.rank}: compute({ns}, cpu={cpu}): the CPU time must lie "
                              f"between 0 and the wall time {ns}")
        self._gap += int(ns)
        self._cpu += int(cpu)
        return self

    def send(self, to, bytes: int, tag: int = 0, comm: int = 0, sync: bool = False):
        """Blocking MPI_Send of `bytes` to rank `to` (None = MPI_PROC_NULL); sync=True: an
        MPI_Ssend (waits for its receive at any size)."""
        return self._op("MPI_Send", self._peer(to, "send to"), tag, comm, bytes, sync=sync)

    def recv(self, frm, bytes: int, tag: int = 0, comm: int = 0):
        """Blocking MPI_Recv from rank `frm` (the matched source; None = MPI_PROC_NULL)."""
        return self._op("MPI_Recv", self._peer(frm, "receive from"), tag, comm, bytes)

    def isend(self, to, bytes: int, tag: int = 0, comm: int = 0, sync: bool = False) -> int:
        """MPI_Isend (sync=True: MPI_Issend); returns the request id to wait for."""
        q = self._next_req
        self._next_req += 1
        self._op("MPI_Isend", self._peer(to, "isend to"), tag, comm, bytes, req=q, sync=sync)
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
        cols: dict[str, list] = {c: [] for c in COLUMNS + ("cpu_enter", "cpu_exit", "sync")}
        for rb in self.ranks:
            ops = [(0, "MPI_Init", -1, -1, 0, 0, -1, (), -1, "", -1, -1, 0)] + rb.ops
            cpus = [0] + rb.cpu
            cols["sync"] += [0] + rb.sync + ([0] if finalize else [])
            if finalize:
                ops.append((rb._gap, "MPI_Finalize", -1, -1, 0, 0, -1, (), -1, "", -1, -1, 0))
                cpus.append(rb._cpu)
            t = c = 0
            for s, (op, cpu) in enumerate(zip(ops, cpus)):
                t += op[0]
                c += cpu
                cols["rank"].append(rb.rank)
                cols["seq"].append(s)
                cols["t_enter"].append(t)
                cols["t_exit"].append(t)
                cols["cpu_enter"].append(c)
                cols["cpu_exit"].append(c)
                for name, v in zip(COLUMNS[4:], op[1:]):
                    cols[name].append(v)
        return Trace(normalise(pd.DataFrame(cols)), dict(self.comms), dict(self.hosts),
                     {"source": "TraceBuilder"})

    def build(self, model=None, *, finalize: bool = True, strict: bool = True) -> Trace:
        """The Trace of running the programs on `model` (default: ideal network)."""
        for rb in self.ranks:
            if rb._open and finalize:
                raise HpclabError(f"rank {rb.rank}: region {rb._open[-1]!r} is still open at the end")
        model = model or IDEAL
        skel = self.skeleton(finalize)
        # the recorded run: wall-time bursts (a switched-out rank takes longer, as it did)
        out = replay(skel, model, strict=strict, bursts="wall")
        # CPU times as the tracer records them: the CPU bursts of the program, and a rank runs
        # all the time it spends in MPI (Open MPI busy-polls)
        ev = out.events
        rank = ev["rank"].to_numpy()
        ce = skel.events["cpu_enter"].to_numpy()
        cpu_burst = np.zeros(len(ev), dtype=np.int64)
        cpu_burst[1:] = np.where(rank[1:] == rank[:-1], ce[1:] - ce[:-1], 0)
        dur = ev["t_exit"].to_numpy() - ev["t_enter"].to_numpy()
        prev_dur = np.zeros(len(ev), dtype=np.int64)
        prev_dur[1:] = np.where(rank[1:] == rank[:-1], dur[:-1], 0)
        enter = pd.Series(cpu_burst + prev_dur).groupby(rank).cumsum().to_numpy()
        ev["cpu_enter"] = enter
        ev["cpu_exit"] = enter + dur
        out.meta["source"] = "TraceBuilder"
        for k in ("bursts",):
            out.meta.pop(k, None)
        return out
