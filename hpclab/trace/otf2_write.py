"""Export a course trace (the event table of hpclab/trace/events.py) as an OTF2 archive, with the
OTF2 library itself (Debian's python3-otf2), so that otf2-print, Vampir, Scalasca and Cube read it.

`export_trace(trace, folder)` writes `<folder>/traces.otf2` (the anchor file), `traces.def` and
`traces/` (one event file per rank). What goes where is in hpclab/trace/otf2_format.py; the
reader (otf2_read.py) turns an exported archive back into the same event table, to the ns.

The archive is written into a temporary folder next to `folder` and renamed into place at the
end, so a failed export leaves no half-written archive; an existing non-empty folder is refused.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

import numpy as np

from hpclab.core.errors import HpclabError
from hpclab.trace import otf2_format as fmt
from hpclab.trace.events import COLLECTIVES, COMM_CREATE, Trace, validate

DEFAULTS = {"peer": -1, "tag": -1, "comm": -1, "bytes": 0, "req": -1, "root": -1,
            "recv_peer": -1, "recv_tag": -1, "recv_bytes": 0}
SEND_RECV = ("MPI_Send", "MPI_Isend", "MPI_Recv", "MPI_Irecv")


def export_trace(trace: Trace, folder: str | os.PathLike) -> Path:
    """Write `trace` as an OTF2 archive into `folder` (created; must not exist or be empty) and
    return the anchor file's path. Times stay ns (timer resolution 10**9 ticks per second).

    Raises HpclabError when the folder holds files, the trace has fatal problems (see
    events.validate) or negative times, or the OTF2 bindings are missing."""
    otf2 = fmt.bindings()
    dest = Path(folder)
    if dest.exists() and (not dest.is_dir() or any(dest.iterdir())):
        raise HpclabError(f"{dest} exists and is not an empty folder; the OTF2 export writes a "
                          "new archive and overwrites nothing",
                          "pass a new folder name to --otf2 (or remove the old archive yourself)")
    validate(trace)
    ev = trace.events
    if int(ev["t_enter"].min()) < 0:
        raise HpclabError("the trace has negative times; OTF2 timestamps are unsigned",
                          "shift the trace's times (events t_enter/t_exit) to start at 0 or later")
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{dest.name}.", suffix=".partial", dir=dest.parent))
    try:
        _write(otf2, trace, tmp)
        # mkdtemp makes it 0700: the archive is as readable as the run folder it sits in (a room's
        # recording, read by every student's kernel), as a folder made with mkdir would be
        umask = os.umask(0)
        os.umask(umask)
        tmp.chmod(0o777 & ~umask)
        if dest.exists():
            dest.rmdir()  # empty (checked above)
        os.rename(tmp, dest)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return dest / f"{fmt.ARCHIVE_NAME}.otf2"


def _comm_members(trace: Trace) -> dict[int, list[int]]:
    """Every communicator the events use, with its world ranks; one the tracer did not describe
    is taken as COMM_WORLD's shape (its peers are then world ranks, as the event table has them)."""
    world = list(trace.comms.get(0, range(trace.nranks)))
    comms = {0: world, **{int(k): list(v) for k, v in trace.comms.items()}}
    for cid in np.unique(trace.events["comm"].to_numpy()):
        if cid >= 0 and int(cid) not in comms:
            comms[int(cid)] = world
    return dict(sorted(comms.items()))


def _completed_ids(ev) -> set[tuple[int, int]]:
    """(rank, request id) of every request some Wait/Test completed."""
    out = set()
    for r, comp in zip(ev["rank"].to_numpy(), ev["completes"].to_numpy()):
        for q in comp:
            out.add((int(r), int(q)))
    return out


def _write(otf2, trace: Trace, folder: Path) -> None:
    ev = trace.events
    t_first = int(ev["t_enter"].min())
    t_last = int(ev["t_exit"].max())

    class Writer(otf2.writer.Writer):
        # The library would write the first and last event times it saw and the wall-clock time
        # of the export as the trace's start; the trace's own span is known, its wall-clock start
        # is not (CLOCK_MONOTONIC), so that stays undefined.
        def _write_global_definitions(self):
            with otf2.definition_writer.DefinitionWriter(self) as w:
                w.write_clock_properties(fmt.TIMER_RESOLUTION, t_first, t_last - t_first,
                                         otf2.Undefined.TIMESTAMP.value)
                self.definitions.write(w)

    comms = _comm_members(trace)
    done = _completed_ids(ev)
    base = Writer(str(folder), archive_name=fmt.ARCHIVE_NAME, timer_resolution=fmt.TIMER_RESOLUTION)
    try:
        base.creator = fmt.CREATOR
        base.description = f"{trace.nranks}-rank MPI trace exported by hpclab from {trace.meta.get('source', 'memory')}"
        d = _Definitions(otf2, base, trace, comms)
        cols = ["rank", "seq", "t_enter", "t_exit", "call", "peer", "tag", "comm", "bytes", "req",
                "completes", "root", "name", "recv_peer", "recv_tag", "recv_bytes",
                "cpu_enter", "cpu_exit", "sync"]
        for rank, grp in ev[cols].groupby("rank", sort=True):
            w = base.event_writer_from_location(d.locations[int(rank)])
            _write_rank(otf2, w, d, comms, done, int(rank), grp.itertuples(index=False))
    finally:
        base.close()


class _Definitions:
    """The archive's definitions: system tree, processes, locations, communicators, regions,
    attributes and the CPU-time metric."""

    def __init__(self, otf2, writer, trace: Trace, comms: dict[int, list[int]]):
        defs = writer.definitions
        self.otf2 = otf2
        self.defs = defs
        defs.paradigm(otf2.Paradigm.MPI, "MPI", otf2.ParadigmClass.PROCESS)
        machine = defs.system_tree_node("machine", class_name="machine")
        nodes = {}
        self.locations = {}
        for r in range(trace.nranks):
            host = trace.hosts.get(r, "unknown host")
            if host not in nodes:
                nodes[host] = defs.system_tree_node(host, class_name="node", parent=machine)
            group = defs.location_group(f"MPI Rank {r}",
                                        location_group_type=otf2.LocationGroupType.PROCESS,
                                        system_tree_parent=nodes[host])
            self.locations[r] = defs.location("Master thread", type=otf2.LocationType.CPU_THREAD,
                                              group=group)
        defs.group("MPI locations", group_type=otf2.GroupType.COMM_LOCATIONS,
                   paradigm=otf2.Paradigm.MPI, members=[self.locations[r] for r in range(trace.nranks)])
        self.comms = {}
        for cid, members in comms.items():
            name = fmt.WORLD_NAME if cid == 0 else fmt.COMM_NAME.format(id=cid)
            g = defs.group(f"{name} group", group_type=otf2.GroupType.COMM_GROUP,
                           paradigm=otf2.Paradigm.MPI, members=list(members))
            self.comms[cid] = defs.comm(name, group=g, parent=None)
        self.attrs = {c: defs.attribute(fmt.ATTR_PREFIX + c, what, type=otf2.Type.STRING
                                        if c in fmt.STRING_ATTRS else otf2.Type.INT64)
                      for c, what in fmt.ATTRS.items()}
        member = defs.metric_member(fmt.CPU_METRIC, fmt.CPU_METRIC_DESCRIPTION,
                                    metric_type=otf2.MetricType.OTHER,
                                    metric_mode=otf2.MetricMode.ACCUMULATED_START,
                                    value_type=otf2.Type.INT64, base=otf2.Base.DECIMAL,
                                    exponent=-9, unit="s")
        self.cpu = defs.metric_class([member], occurrence=otf2.MetricOccurrence.SYNCHRONOUS,
                                     recorder_kind=otf2.RecorderKind.ABSTRACT)
        self._regions = {}

    def region(self, name: str, user: bool, call: str = ""):
        """The region of a user region `name`, or of an MPI call named `name` that the event table
        calls `call` (MPI_Ssend is an MPI_Send with sync = 1)."""
        key = (name, user)
        if key not in self._regions:
            otf2 = self.otf2
            if user:
                reg = self.defs.region(name, canonical_name=name, description="user region",
                                       region_role=otf2.RegionRole.FUNCTION, paradigm=otf2.Paradigm.USER)
            else:
                role = getattr(otf2.RegionRole, fmt.ROLE.get(call, "FUNCTION"))
                reg = self.defs.region(name, canonical_name=name, description="MPI call",
                                       region_role=role, paradigm=otf2.Paradigm.MPI)
            self._regions[key] = reg
        return self._regions[key]


def _write_rank(otf2, w, d: _Definitions, comms, done, rank: int, rows) -> None:
    """One rank's rows as Enter/Leave pairs with their MPI records (see otf2_format)."""
    live: set[int] = set()  # requests issued with an OTF2 record and not yet completed
    kinds: dict[int, str] = {}
    ops = otf2.CollectiveOp
    undefined_root = otf2.Undefined.UINT32.value

    def crank(cid: int, world: int) -> int:
        return comms[cid].index(world)

    for row in rows:
        call = str(row.call)
        vals = {c: int(getattr(row, c)) for c in DEFAULTS}
        native: set[str] = set()
        attrs = {d.attrs["seq"]: int(row.seq)}
        te, tx = int(row.t_enter), int(row.t_exit)
        if call in ("region_begin", "region_end"):
            if tx != te:
                attrs[d.attrs["marker_ns"]] = tx - te
            if row.cpu_exit != row.cpu_enter:
                attrs[d.attrs["marker_cpu_ns"]] = int(row.cpu_exit) - int(row.cpu_enter)
            _extra(d, attrs, vals, native, call)
            if row.cpu_enter >= 0:
                w.metric(te, d.cpu, int(row.cpu_enter))
            region = d.region(row.name, user=True)
            (w.enter if call == "region_begin" else w.leave)(te, region, attributes=attrs)
            continue

        name = {"MPI_Send": "MPI_Ssend", "MPI_Isend": "MPI_Issend"}.get(call, call) if row.sync else call
        records = []  # (time, method, args) written between Enter and Leave
        peer, cid = vals["peer"], vals["comm"]
        if call in SEND_RECV and peer >= 0:
            if call == "MPI_Send":
                records.append((te, w.mpi_send, (crank(cid, peer), d.comms[cid], vals["tag"], vals["bytes"])))
                native |= {"peer", "tag", "comm", "bytes"}
            elif call == "MPI_Isend":
                records.append((te, w.mpi_isend, (crank(cid, peer), d.comms[cid], vals["tag"],
                                                  vals["bytes"], vals["req"])))
                native |= {"peer", "tag", "comm", "bytes", "req"}
                live.add(vals["req"])
                kinds[vals["req"]] = "send"
            elif call == "MPI_Recv":
                records.append((tx, w.mpi_recv, (crank(cid, peer), d.comms[cid], vals["tag"], vals["bytes"])))
                native |= {"peer", "tag", "comm", "bytes"}
            elif vals["req"] >= 0:  # MPI_Irecv: what matched is written where it completes
                records.append((te, w.mpi_irecv_request, (vals["req"],)))
                native.add("req")
                if (rank, vals["req"]) in done:
                    native |= {"peer", "tag", "comm", "bytes"}
                    live.add(vals["req"])
                    kinds[vals["req"]] = ("recv", crank(cid, peer), d.comms[cid], vals["tag"], vals["bytes"])
        elif call == "MPI_Sendrecv":
            if peer >= 0:
                records.append((te, w.mpi_send, (crank(cid, peer), d.comms[cid], vals["tag"], vals["bytes"])))
                native |= {"peer", "tag", "comm", "bytes"}
            rp = vals["recv_peer"]
            if rp >= 0:
                records.append((tx, w.mpi_recv, (crank(cid, rp), d.comms[cid], vals["recv_tag"],
                                                 vals["recv_bytes"])))
                native |= {"recv_peer", "recv_tag", "recv_bytes", "comm"}
        elif call in COLLECTIVES + COMM_CREATE and cid in d.comms:
            members = comms[cid]
            root = vals["root"]
            rooted = call in ("MPI_Bcast", "MPI_Reduce") and root in members
            sent, got = fmt.collective_sizes(call, vals["bytes"], len(members), rooted and root == rank)
            records.append((te, w.mpi_collective_begin, ()))
            records.append((tx, w.mpi_collective_end, (getattr(ops, fmt.COLLECTIVE_OP[call]), d.comms[cid],
                                                       crank(cid, root) if rooted else undefined_root,
                                                       sent, got)))
            native.add("comm")
            if fmt.contribution(call, sent, got, len(members)) == vals["bytes"]:
                native.add("bytes")
            if rooted or root == -1:
                native.add("root")
        comp = tuple(int(q) for q in row.completes)
        if comp:
            for q in comp:
                if q not in live:
                    continue
                k = kinds[q]
                if k == "send":
                    records.append((tx, w.mpi_isend_complete, (q,)))
                else:
                    records.append((tx, w.mpi_irecv, (k[1], k[2], k[3], k[4], q)))
            if not all(q in live for q in comp):
                # requests without a message (MPI_PROC_NULL) among them have no record: the list
                # as it is, in handle order
                attrs[d.attrs["completes"]] = ",".join(map(str, comp))
            live.difference_update(comp)
        if call in SEND_RECV and "peer" not in native:
            native.discard("peer")
            attrs[d.attrs["peer"]] = peer  # always explicit: no record means MPI_PROC_NULL to a reader
        _extra(d, attrs, vals, native, call)
        if row.cpu_enter >= 0:
            w.metric(te, d.cpu, int(row.cpu_enter))
        region = d.region(name, user=False, call=call)
        w.enter(te, region, attributes=attrs)
        for t, method, args in records:
            method(t, *args)
        if row.cpu_exit >= 0:
            w.metric(tx, d.cpu, int(row.cpu_exit))
        w.leave(tx, region)


def _extra(d: _Definitions, attrs: dict, vals: dict, native: set, call: str) -> None:
    """Attributes for the columns no record carries and that differ from the reader's default."""
    for c, default in DEFAULTS.items():
        if c not in native and vals[c] != default and d.attrs[c] not in attrs:
            attrs[d.attrs[c]] = vals[c]
