"""Read an OTF2 archive (one hpclab exported, or one Score-P wrote) into the course's event table,
so replay, split, wait states, message matrix and timeline run on it unchanged.

`load_archive(path)` takes the anchor file (`traces.otf2`) or its folder. What is read:

- ranks: the MPI locations, in rank order (the MPI COMM_LOCATIONS group; without one, the first
  CPU thread of each process); hosts from the system-tree node above each process;
- calls: Enter/Leave of MPI regions, with the MpiSend, MpiIsend, MpiIrecvRequest, MpiRecv,
  MpiIrecv, MpiIsendComplete and MpiCollectiveEnd records inside them (peers and roots turned
  back into world ranks); MPI calls the event table does not name are mapped as in
  otf2_format.AS_CONTRACT / OP_AS_CALL, MPI regions without communication are dropped (their time
  counts as compute, as in the course's own tracer, which does not record them);
- user regions (any non-MPI region): region_begin at Enter, region_end at Leave;
- hpclab's own CPU-time metric and `hpclab::` attributes, which make a round trip exact.

Ignored, and counted in trace.meta["otf2_ignored"]: other threads and locations (OpenMP, CUDA,
metric locations), other metrics, MpiRequestTest/Cancelled, OpenMP, thread, RMA, I/O, calling
context and parameter records, non-blocking collectives, collectives on MPI_COMM_SELF, and user
regions inside MPI calls (docs/otf2.md has the full list).
"""

from __future__ import annotations

import contextlib
import os
import re
import sys
import tempfile
from collections import Counter
from pathlib import Path

import pandas as pd

from hpclab.core.errors import HpclabError
from hpclab.trace import otf2_format as fmt
from hpclab.trace.events import CALLS, COLLECTIVES, COMM_CREATE, PROC_NULL, Trace, normalise

ROOTED = ("MPI_Bcast", "MPI_Reduce")
P2P_CALLS = ("MPI_Send", "MPI_Isend", "MPI_Recv", "MPI_Irecv")
COMM_ID = re.compile("^" + re.escape(fmt.COMM_NAME).replace(r"\{id\}", r"(\d+)") + "$")


def is_archive(path: str | os.PathLike) -> bool:
    """Whether `path` is an OTF2 anchor file or a folder holding one (no bindings needed)."""
    return fmt.anchor_file(path) is not None


def load_archive(path: str | os.PathLike) -> Trace:
    """The Trace of the OTF2 archive at `path` (anchor file or its folder). Times are int64 ns:
    unchanged for an archive with 10**9 ticks per second (hpclab's own), else ns since the
    archive's global offset. Raises HpclabError if `path` is not a readable archive, holds no
    MPI locations, or the bindings are missing."""
    anchor = fmt.anchor_file(path)
    if anchor is None:
        raise HpclabError(f"{path} is not an OTF2 archive (no anchor file *.otf2 in it)",
                          "pass the archive's anchor file (e.g. traces.otf2, as Score-P writes "
                          "it into scorep-*/) or the folder that holds it")
    otf2 = fmt.bindings()
    with _c_stderr() as said:
        try:
            reader_cm = otf2.reader.open(str(anchor))
            reader = reader_cm.__enter__()
            failed = None
        except Exception as err:  # the library raises its own error types (and TraceReaderError)
            failed = err
    if failed is not None:
        lines = [re.sub(r"^\[OTF2\] [^:]*:\d+: (error: )?", "", ln) for ln in said() if ln.strip()]
        why = f"{lines[0]}" if lines else str(failed)
        raise HpclabError(f"{anchor} cannot be read as an OTF2 archive ({why})",
                          "check that the archive is complete (anchor file, .def file and the "
                          "folder of event files); otf2-print names what is wrong")
    try:
        return _read(otf2, reader, anchor)
    finally:
        reader_cm.__exit__(None, None, None)


@contextlib.contextmanager
def _c_stderr():
    """Capture what the OTF2 C library prints on file descriptor 2 (it reports a bad archive
    there, line by line, before the bindings raise); yields a function returning those lines."""
    lines: list[str] = []
    with tempfile.TemporaryFile() as tmp:
        sys.stderr.flush()
        saved = os.dup(2)
        os.dup2(tmp.fileno(), 2)
        try:
            yield lambda: lines
        finally:
            os.dup2(saved, 2)
            os.close(saved)
            tmp.seek(0)
            lines.extend(tmp.read().decode(errors="replace").splitlines())


def _ranks(otf2, defs) -> list:
    """The MPI master-thread locations in rank order."""
    for g in defs.groups:
        if g.group_type == otf2.GroupType.COMM_LOCATIONS and g.paradigm == otf2.Paradigm.MPI:
            return list(g.members)
    out = []
    for lg in defs.location_groups:
        if lg.location_group_type != otf2.LocationGroupType.PROCESS:
            continue
        threads = [loc for loc in defs.locations
                   if loc.group is lg and loc.type == otf2.LocationType.CPU_THREAD]
        if threads:
            out.append(threads[0])
    return out


def _comms(otf2, defs, rank_of: dict) -> tuple[dict, dict, set]:
    """(OTF2 comm -> course id, course id -> world ranks, the COMM_SELF comms)."""
    ids, members, selfs = {}, {}, set()
    foreign = []
    for c in defs.comms:
        g = getattr(c, "group", None)
        if g is None:  # an inter-communicator: not in the course's vocabulary
            continue
        if g.group_type == otf2.GroupType.COMM_SELF:
            selfs.add(c)
            continue
        ranks = [rank_of[loc] for loc in g.members if loc in rank_of]
        m = COMM_ID.match(c.name or "")
        if c.name == fmt.WORLD_NAME:
            ids[c], members[0] = 0, ranks
        elif m:
            ids[c], members[int(m.group(1))] = int(m.group(1)), ranks
        else:
            foreign.append((c, ranks))
    nxt = max(members, default=0) + 1
    for c, ranks in foreign:
        ids[c], members[nxt] = nxt, ranks
        nxt += 1
    return ids, members, selfs


def _read(otf2, reader, anchor: Path) -> Trace:
    defs = reader.definitions
    clock = defs.clock_properties
    res, offset = int(clock.timer_resolution), int(clock.global_offset)
    if res == fmt.TIMER_RESOLUTION:
        def ns(t):
            return int(t)
    else:
        def ns(t):
            return (int(t) - offset) * fmt.TIMER_RESOLUTION // res
    locs = _ranks(otf2, defs)
    if not locs:
        raise HpclabError(f"{anchor} has no MPI processes (no location group of type PROCESS "
                          "with a CPU thread)", "the course analyses MPI traces; record the "
                          "program with Score-P's MPI adapter (scorep mpicc ...)")
    rank_of = {loc: r for r, loc in enumerate(locs)}
    comm_id, comm_members, selfs = _comms(otf2, defs, rank_of)
    hosts = {}
    for loc, r in rank_of.items():
        parent = getattr(loc.group, "system_tree_parent", None)
        hosts[r] = parent.name if parent is not None else "unknown host"
    ours = {m for m in defs.metrics if isinstance(m, otf2.definitions.MetricClass)
            and len(m.members) == 1 and m.members[0].name == fmt.CPU_METRIC}
    ev = otf2.events
    ignored: Counter = Counter()
    mapped: Counter = Counter()
    states = {r: _RankState(r) for r in range(len(locs))}

    def world(cm, r: int, crank: int) -> int:
        if cm in selfs:
            return r
        members = comm_members.get(comm_id.get(cm), [])
        return members[crank] if 0 <= crank < len(members) else -1

    n_other = sum(loc.number_of_events for loc in defs.locations if loc not in rank_of)
    if n_other:
        ignored["events of other locations (threads, devices, metrics)"] += n_other
    for loc, e in reader.events(locs):
        st = states[rank_of[loc]]
        r = st.rank
        kind = type(e)
        if kind is ev.Metric:
            if e.metric in ours:
                st.cpu = (e.time, int(e.values[0]))
            else:
                ignored["Metric (other than hpclab's CPU time)"] += 1
            continue
        if kind is ev.Enter or kind is ev.Leave:
            t = ns(e.time)
            cpu = st.cpu[1] if st.cpu is not None and st.cpu[0] == e.time else -1
            st.cpu = None
            attrs = {a.name[len(fmt.ATTR_PREFIX):]: v for a, v in (e.attributes or {}).items()
                     if a.name.startswith(fmt.ATTR_PREFIX)}
            region = e.region
            is_mpi = region.paradigm == otf2.Paradigm.MPI or (region.name or "").startswith("MPI_")
            if not is_mpi and st.open is not None:
                ignored["user regions inside MPI calls"] += 1
            elif not is_mpi:
                if not st.marker(kind is ev.Enter, region.name, t, cpu, attrs):
                    ignored["user regions left without their entry"] += 1
            elif kind is ev.Enter:
                st.enter(region.name, t, cpu, attrs)
            else:
                st.leave(region.name, t, cpu, mapped, ignored)
            continue
        row = st.open
        if row is None:
            ignored[f"{kind.__name__} outside an MPI call"] += 1
            continue
        if kind is ev.MpiSend or kind is ev.MpiIsend:
            cm = e.communicator
            row.update(peer=world(cm, r, e.receiver), tag=e.msg_tag, bytes=e.msg_length,
                       comm=comm_id.get(cm, -1), _rec=True)
            if kind is ev.MpiIsend:
                row["req"] = e.request_id
        elif kind is ev.MpiRecv:
            cm = e.communicator
            vals = dict(peer=world(cm, r, e.sender), tag=e.msg_tag, bytes=e.msg_length)
            if row["_name"] in ("MPI_Sendrecv", "MPI_Sendrecv_replace"):
                vals = {f"recv_{k}": v for k, v in vals.items()}
            row.update(vals, comm=comm_id.get(cm, -1), _rec=True)
        elif kind is ev.MpiIrecvRequest:
            row.update(req=e.request_id, _rec=True)
            st.irecvs[e.request_id] = row
        elif kind is ev.MpiIrecv:
            row["completes"].append(e.request_id)
            posted = st.irecvs.pop(e.request_id, None)
            if posted is not None:
                cm = e.communicator
                posted.update(peer=world(cm, r, e.sender), tag=e.msg_tag, bytes=e.msg_length,
                              comm=comm_id.get(cm, -1))
        elif kind is ev.MpiIsendComplete:
            row["completes"].append(e.request_id)
        elif kind is ev.MpiCollectiveBegin:
            pass
        elif kind is ev.MpiCollectiveEnd:
            cm = e.communicator
            if cm in selfs:
                row["_self"] = True
                continue
            members = comm_members.get(comm_id.get(cm), [])
            op = str(e.collective_op).split(".")[-1]
            row.update(comm=comm_id.get(cm, -1), _op=op, _rec=True, _sent=e.size_sent,
                       _recv=e.size_received, _n=len(members))
            if e.root != otf2.Undefined.UINT32.value and 0 <= e.root < len(members):
                row["root"] = members[e.root]
        else:
            ignored[kind.__name__] += 1
    rows = [x for st in states.values() for x in st.finish(ignored)]
    if not rows:
        raise HpclabError(f"{anchor} holds no MPI calls on its MPI ranks",
                          "record the program with Score-P's MPI adapter (or hpclab's tracer)")
    events = normalise(pd.DataFrame(rows))
    comms = {k: v for k, v in comm_members.items() if v}
    meta = {"source": str(anchor), "format": "OTF2", "otf2_creator": _creator(reader),
            "timer_resolution": res, "global_offset": offset, "trace_length": int(clock.trace_length),
            "ns_since_global_offset": res != fmt.TIMER_RESOLUTION, "nranks": len(locs),
            "cpu_time": bool((events["cpu_enter"] >= 0).any()),
            "calls_mapped": dict(mapped), "otf2_ignored": dict(ignored), "problems": []}
    return Trace(events, comms, hosts, meta)


def _creator(reader) -> str:
    import _otf2  # the bindings' low level: the high-level reader does not expose the creator
    try:
        return str(_otf2.Reader_GetCreator(reader.handle))
    except Exception:  # an optional field; older archives may lack it
        return ""


class _RankState:
    """One rank's rows as they are read: the open MPI call, requests posted, the last CPU value."""

    def __init__(self, rank: int):
        self.rank = rank
        self.rows: list[dict] = []
        self.open: dict | None = None
        self.depth = 0  # MPI regions entered inside the open one (not recorded by PMPI tools)
        self.irecvs: dict[int, dict] = {}
        self.cpu: tuple[int, int] | None = None
        self.regions: list[str] = []  # user regions entered and not left

    def _row(self, call, name, t, cpu, attrs) -> dict:
        row = {"rank": self.rank, "seq": len(self.rows), "t_enter": t, "t_exit": t, "call": call,
               "peer": -1, "tag": -1, "comm": -1, "bytes": 0, "req": -1, "completes": [],
               "root": -1, "name": name, "recv_peer": -1, "recv_tag": -1, "recv_bytes": 0,
               "cpu_enter": cpu, "cpu_exit": cpu, "sync": 0, "_attrs": attrs, "_rec": False}
        return row

    def marker(self, begin: bool, name, t, cpu, attrs) -> bool:
        """A region_begin or region_end row; False (no row) for a Leave of a region whose Enter
        was not read (the event table needs properly nested regions)."""
        if begin:
            self.regions.append(name)
        elif self.regions and self.regions[-1] == name:
            self.regions.pop()
        else:
            return False
        row = self._row("region_begin" if begin else "region_end", name, t, cpu, attrs)
        row["t_exit"] = t + int(attrs.get("marker_ns", 0))
        if cpu >= 0:
            row["cpu_exit"] = cpu + int(attrs.get("marker_cpu_ns", 0))
        self.rows.append(row)
        return True

    def enter(self, name, t, cpu, attrs) -> None:
        if self.open is not None:
            self.depth += 1
            return
        self.open = self._row(None, "", t, cpu, attrs)
        self.open["_name"] = name

    def leave(self, name, t, cpu, mapped: Counter, ignored: Counter) -> None:
        if self.open is None:
            return
        if self.depth:
            self.depth -= 1
            ignored["MPI calls inside MPI calls"] += 1
            return
        row, self.open = self.open, None
        row["t_exit"], row["cpu_exit"] = t, cpu
        raw = row.pop("_name")
        call = raw if raw in CALLS else fmt.AS_CONTRACT.get(raw)
        if call is None and "_op" in row:
            call = fmt.OP_AS_CALL.get(row["_op"])
        if row.get("_self"):
            ignored["collectives on MPI_COMM_SELF"] += 1
            return
        if call is None:
            ignored[f"MPI calls without communication ({raw} ...)" if not row["_rec"]
                    else f"{raw} (not in the course's calls)"] += 1
            return
        if call != raw:
            mapped[f"{raw} -> {call}"] += 1
        row["call"] = call
        row["sync"] = int(raw in fmt.SYNC_SENDS)
        if call in COLLECTIVES + COMM_CREATE and "_op" in row:
            row["bytes"] = fmt.contribution(call, row["_sent"], row["_recv"], row["_n"])
            if call not in ROOTED:
                row["root"] = -1
        if call in P2P_CALLS and not row["_rec"]:
            row["peer"] = PROC_NULL  # no message record: a call on MPI_PROC_NULL
        self.rows.append(row)

    def finish(self, ignored: Counter) -> list[dict]:
        if self.open is not None:
            ignored["MPI call never left (the trace ends inside it)"] += 1
        out = []
        for row in self.rows:
            attrs = row.pop("_attrs")
            for k, v in attrs.items():
                if k == "completes":
                    row["completes"] = [int(x) for x in v.split(",") if x]
                elif k in row and not k.startswith("_"):
                    row[k] = int(v)
            out.append({k: v for k, v in row.items() if not k.startswith("_")})
        return out
