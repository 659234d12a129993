"""OTF2 export and import (issue 21): the course's traces written with the OTF2 library, checked
with otf2-print (Debian's otf2-tools), and read back into the same event table.

Traces: a hand-built one (every call kind, two nodes), tests/trace/trace_prog.c and a small
Poisson run under the tracer with mpirun (as tests/trace/test_tracer.py and test_rest_real.py run
them), one traced Poisson job through the cluster, and an archive written here with the OTF2
library the way Score-P writes one (Score-P itself is not packaged for Debian: its conventions
are taken from its documentation and its collective byte-count tests, see hpclab/trace/otf2_format.py).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from collections import Counter
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from hpclab.analysis import imbalance as imb
from hpclab.cli import main as cli
from hpclab.core import paths
from hpclab.core.errors import HpclabError
from hpclab.trace import otf2_format
from hpclab.trace.builder import TraceBuilder
from hpclab.trace.events import check
from hpclab.trace.load import load_dir, load_run
from hpclab.trace.matching import match
from hpclab.trace.matrix import message_matrix
from hpclab.trace.otf2_read import load_archive
from hpclab.trace.otf2_write import export_trace
from hpclab.trace.profile import flat_profile
from hpclab.trace.replay import replay
from hpclab.trace.split import split
from hpclab.trace.waitstates import wait_states

otf2 = pytest.importorskip("otf2", reason="needs Debian's python3-otf2 linked into .venv (make setup)")
OTF2_PRINT = shutil.which("otf2-print")
LIB = paths.lib_dir() / "libmpitrace.so"
POISSON = paths.bin_dir() / "poisson"
TRACE_PROG = Path(__file__).resolve().parent / "trace" / "trace_prog.c"
HAVE_MPI = bool(shutil.which("mpicc") and shutil.which("mpirun")) and LIB.exists()
needs_mpi = pytest.mark.skipif(not HAVE_MPI, reason="needs mpicc, mpirun and build/lib/libmpitrace.so")
needs_print = pytest.mark.skipif(OTF2_PRINT is None, reason="needs otf2-print (Debian's otf2-tools)")


def mpirun(ranks: int, cmd: list[str], trace_dir: Path) -> None:
    env = {**os.environ, "OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1"}
    args = ["mpirun", "-np", str(ranks), "--oversubscribe", "--bind-to", "none",
            "-x", f"LD_PRELOAD={LIB}", "-x", f"MPITRACE_DIR={trace_dir}"]
    res = subprocess.run(args + cmd, env=env, capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr[-2000:]


def built_trace():
    """Every call kind of the event table, on two nodes, with a sub-communicator whose ranks are
    in reverse order (so peers and roots must be turned into communicator ranks and back)."""
    b = TraceBuilder(3, hosts={0: "nodeA", 1: "nodeA", 2: "nodeB"},
                     comms={0: [0, 1, 2], 7: [2, 1, 0]})
    for r in range(3):
        rb = b[r]
        right, left = (r + 1) % 3, (r - 1) % 3
        rb.compute(1000 * (r + 1))
        with rb.region("exchange"):
            q1 = rb.irecv(left, 800, 1)
            q2 = rb.isend(right, 800, 1, sync=(r == 0))
            rb.compute(300)
            rb.test([q1], completed=False)
            rb.waitall([q1, q2])
            rb.send(right, 16, 2, comm=7, sync=(r == 1)).recv(left, 16, 2, comm=7)
        rb.sendrecv(right, 24, 3, left, 24, 3)
        rb.compute(500 + 200 * r)
        rb.allreduce(8).bcast(2, 64, comm=7).reduce(1, 32).barrier()
    return b.build()


@pytest.fixture(scope="module")
def prog_trace(tmp_path_factory):
    """tests/trace/trace_prog.c on 3 ranks: Waitany/Testsome/Sendrecv_replace, MPI_PROC_NULL,
    Comm_split and Cart_create, wildcard receives, regions."""
    if not HAVE_MPI:
        pytest.skip("needs mpicc, mpirun and build/lib/libmpitrace.so")
    d = tmp_path_factory.mktemp("prog")
    subprocess.run(["mpicc", "-O1", "-o", str(d / "trace_prog"), str(TRACE_PROG)], check=True)
    mpirun(3, [str(d / "trace_prog")], d / "run" / "trace")
    return d / "run"


@pytest.fixture(scope="module", params=["sendrecv", "nonblocking"])
def poisson_run(request, tmp_path_factory):
    """The course's Poisson kernel on 4 ranks (a 2 x 2 grid, MPI_PROC_NULL at its edges), traced,
    with its default exchange (Sendrecv) and the non-blocking one (Irecv/Isend/Waitall, where one
    Waitall completes requests on MPI_PROC_NULL and real ones)."""
    if not HAVE_MPI or not POISSON.exists():
        pytest.skip("needs mpirun, build/bin/poisson and build/lib/libmpitrace.so (make -C src)")
    d = tmp_path_factory.mktemp(f"poisson-{request.param}") / "run"
    mpirun(4, [str(POISSON), "--n", "64", "--iters", "20", "--exchange", request.param], d / "trace")
    return d


def print_counts(anchor: Path) -> tuple[Counter, str]:
    """otf2-print's records counted by (record kind, location), and its definitions (-G)."""
    out = subprocess.run([OTF2_PRINT, "-Werror", str(anchor)], capture_output=True, text=True,
                         check=True).stdout
    counts = Counter()
    for line in out.splitlines():
        m = re.match(r"^([A-Z_]+)\s+(\d+)\s+\d+\s", line)
        if m:
            counts[(m.group(1), int(m.group(2)))] += 1
    defs = subprocess.run([OTF2_PRINT, "-G", str(anchor)], capture_output=True, text=True,
                          check=True).stdout
    return counts, defs


def assert_same_events(a, b) -> None:
    """Every column of the event table equal, row by row."""
    assert list(a.columns) == list(b.columns)
    assert len(a) == len(b)
    for c in a.columns:
        x, y = a[c].to_numpy(), b[c].to_numpy()
        if c == "call":
            x, y = x.astype(str), y.astype(str)
        same = np.array([u == v for u, v in zip(x, y)], dtype=bool)
        assert same.all(), f"column {c}: first difference at row {np.flatnonzero(~same)[0]}"


def analyses(trace) -> dict:
    """What the course computes from a trace: split on the ideal network, wait states, message
    matrix, flat profile."""
    ideal = replay(trace, imb.ideal_model(4096))
    return {"split": split(trace, ideal).as_series(), "waits": wait_states(trace, eager_limit=4096),
            "matrix": message_matrix(trace), "profile": flat_profile(trace)}


def assert_same_analyses(a: dict, b: dict) -> None:
    pd.testing.assert_series_equal(a["split"], b["split"], check_exact=True)
    pd.testing.assert_frame_equal(a["waits"], b["waits"], check_exact=True)
    for what in ("volume", "count", "time"):
        pd.testing.assert_frame_equal(a["matrix"].frame(what), b["matrix"].frame(what), check_exact=True)
    pd.testing.assert_frame_equal(a["profile"], b["profile"], check_exact=True)


# --- export, checked with otf2-print -----------------------------------------------------------


def check_against_otf2_print(trace, anchor: Path) -> None:
    counts, defs = print_counts(anchor)
    ev = trace.events
    msgs = match(trace).messages
    for r in range(trace.nranks):
        mine = ev[ev["rank"] == r]["call"].astype(str)
        calls = int((~mine.isin(["region_begin", "region_end"])).sum())
        assert counts[("ENTER", r)] == calls + int((mine == "region_begin").sum()), f"rank {r}"
        assert counts[("LEAVE", r)] == calls + int((mine == "region_end").sum()), f"rank {r}"
        sent = counts[("MPI_SEND", r)] + counts[("MPI_ISEND", r)]
        received = counts[("MPI_RECV", r)] + counts[("MPI_IRECV", r)]
        assert sent == int((msgs["src"] == r).sum()), f"rank {r} sends"
        assert received == int((msgs["dst"] == r).sum()), f"rank {r} receives"
        coll = int(mine.isin(["MPI_Barrier", "MPI_Bcast", "MPI_Reduce", "MPI_Allreduce",
                              "MPI_Cart_create", "MPI_Comm_split", "MPI_Comm_dup"]).sum())
        assert counts[("MPI_COLLECTIVE_BEGIN", r)] == counts[("MPI_COLLECTIVE_END", r)] == coll
    assert max(loc for _, loc in counts) == trace.nranks - 1
    t0, t1 = int(ev["t_enter"].min()), int(ev["t_exit"].max())
    assert f"Ticks per Seconds: 1000000000, Global Offset: {t0}, Length: {t1 - t0}" in defs
    assert defs.count("LOCATION_GROUP ") == trace.nranks
    for host in set(trace.hosts.values()):
        assert f'Name: "{host}"' in defs
    assert '"MPI_COMM_WORLD"' in defs


@needs_print
def test_built_trace_exports_every_call_and_message(tmp_path):
    """Does otf2-print read the archive of a hand-built trace without a warning, with each rank's
    Enter/Leave and message records matching the event table, its nodes and its clock?"""
    trace = built_trace()
    anchor = export_trace(trace, tmp_path / "otf2")
    assert anchor == tmp_path / "otf2" / "traces.otf2"
    check_against_otf2_print(trace, anchor)


@needs_print
def test_traced_program_exports_every_call_and_message(prog_trace, tmp_path):
    """Does a real traced program's archive (3 ranks, every call the tracer records) list every
    call and message in otf2-print?"""
    trace = load_run(prog_trace)
    check_against_otf2_print(trace, export_trace(trace, tmp_path / "otf2"))


@needs_print
def test_traced_poisson_run_exports_every_call_and_message(poisson_run, tmp_path):
    """Does a traced Poisson run of the course give an archive whose per-rank event and message
    counts in otf2-print are the course's own?"""
    trace = load_run(poisson_run)
    assert len(match(trace).messages) > 0
    check_against_otf2_print(trace, export_trace(trace, tmp_path / "otf2"))


# --- round trip ------------------------------------------------------------------------------


def test_round_trip_of_a_built_trace_is_exact(tmp_path):
    """Export then import: the same event table, communicators and hosts, and the same split,
    wait states, message matrix and profile to the ns?"""
    trace = built_trace()
    back = load_archive(export_trace(trace, tmp_path / "otf2"))
    assert_same_events(trace.events, back.events)
    assert back.comms == trace.comms and back.hosts == trace.hosts
    assert_same_analyses(analyses(trace), analyses(back))


def test_the_archive_is_as_readable_as_a_folder_made_beside_it(tmp_path):
    """A room's students read the archives in the instructor's recording: is the exported folder
    made with the process's umask, as mkdir would make it, not mkdtemp's 0700?"""
    old = os.umask(0o022)
    try:
        anchor = export_trace(built_trace(), tmp_path / "otf2")
    finally:
        os.umask(old)
    assert anchor.parent.stat().st_mode & 0o777 == 0o755


def test_round_trip_of_a_traced_program_is_exact(prog_trace, tmp_path):
    """The same for a real trace with MPI_PROC_NULL calls, wildcard receives, Test polls,
    sub-communicators and CPU times: nothing lost on the way through OTF2?"""
    trace = load_run(prog_trace)
    back = load_run(export_trace(trace, tmp_path / "otf2").parent)  # the loader takes the folder
    assert back.meta["format"] == "OTF2" and back.meta["cpu_time"]
    assert_same_events(trace.events, back.events)
    assert back.comms == trace.comms and back.hosts == trace.hosts
    assert_same_analyses(analyses(trace), analyses(back))


def test_round_trip_of_a_traced_poisson_run_is_exact(poisson_run, tmp_path):
    """And for the course's Poisson kernel: split, wait states and matrix equal to the ns?"""
    trace = load_run(poisson_run)
    back = load_archive(export_trace(trace, tmp_path / "otf2"))
    assert_same_events(trace.events, back.events)
    assert_same_analyses(analyses(trace), analyses(back))


# --- an archive written the way Score-P writes one ---------------------------------------------

RES = 2_500_000_000  # a TSC-like timer: 2.5 ticks per ns
OFFSET = 10**12


def scorep_like_archive(folder: Path) -> Path:
    """Two MPI ranks and an OpenMP thread, Score-P's way: timer of 2.5 GHz, a compiler-instrumented
    'main', MPI_Comm_rank (no communication), MPI_Ssend/Recv on a communicator whose ranks are
    reversed, Irecv + Waitany, Isend + Waitall, Send to MPI_PROC_NULL (no record), a Test that
    completes nothing (MpiRequestTest), Gather (as Reduce), Allreduce, a Barrier on
    MPI_COMM_SELF, a user region inside MPI_Finalize and Score-P's own metric (ignored)."""
    with otf2.writer.open(str(folder), timer_resolution=RES) as w:
        d = w.definitions
        d.paradigm(otf2.Paradigm.MPI, "MPI", otf2.ParadigmClass.PROCESS)
        root = d.system_tree_node("machine Linux", class_name="machine")
        node = d.system_tree_node("hostX", class_name="node", parent=root)
        groups = [d.location_group(f"MPI Rank {r}", location_group_type=otf2.LocationGroupType.PROCESS,
                                   system_tree_parent=node) for r in range(2)]
        locs = [d.location("Master thread", type=otf2.LocationType.CPU_THREAD, group=g) for g in groups]
        omp = d.location("OMP thread 1", type=otf2.LocationType.CPU_THREAD, group=groups[0])
        d.group("", group_type=otf2.GroupType.COMM_LOCATIONS, paradigm=otf2.Paradigm.MPI, members=locs)
        world = d.comm("MPI_COMM_WORLD", group=d.group("", group_type=otf2.GroupType.COMM_GROUP,
                                                       paradigm=otf2.Paradigm.MPI, members=[0, 1]))
        rev = d.comm("Comm 1", group=d.group("rev", group_type=otf2.GroupType.COMM_GROUP,
                                             paradigm=otf2.Paradigm.MPI, members=[1, 0]))
        self_comm = d.comm("MPI_COMM_SELF", group=d.group("self", group_type=otf2.GroupType.COMM_SELF,
                                                          paradigm=otf2.Paradigm.MPI, members=[]))
        member = d.metric_member("PAPI_TOT_CYC", value_type=otf2.Type.UINT64)
        cyc = d.metric_class([member])

        def reg(name, role=otf2.RegionRole.POINT2POINT, par=otf2.Paradigm.MPI):
            return d.region(name, region_role=role, paradigm=par)
        main = reg("main", otf2.RegionRole.FUNCTION, otf2.Paradigm.COMPILER)
        coll = otf2.CollectiveOp

        def t(ns):  # ns since the offset -> ticks
            return OFFSET + ns * RES // 10**9

        for r, loc in enumerate(locs):
            e = w.event_writer_from_location(loc)
            other = 1 - r

            def call(name, t0, t1, *recs, role=otf2.RegionRole.POINT2POINT):
                rg = reg(name, role)
                e.enter(t(t0), rg)
                for when, fn, args in recs:
                    fn(t(when), *args)
                e.leave(t(t1), rg)
            e.metric(t(0), cyc, 5)
            e.enter(t(0), main)
            call("MPI_Init", 10, 100, role=otf2.RegionRole.FUNCTION)
            call("MPI_Comm_rank", 110, 120, role=otf2.RegionRole.FUNCTION)
            # rank 0 sends synchronously on `rev` (rank 1 of rev is world rank 0)
            if r == 0:
                call("MPI_Ssend", 200, 400, (200, e.mpi_send, (0, rev, 5, 64)))
            else:
                call("MPI_Recv", 300, 400, (400, e.mpi_recv, (1, rev, 5, 64)))
            call("MPI_Irecv", 500, 510, (500, e.mpi_irecv_request, (7,)))
            call("MPI_Isend", 520, 530, (520, e.mpi_isend, (other, world, 9, 128, 8)))
            call("MPI_Test", 540, 550, (545, e.mpi_request_test, (7,)))
            call("MPI_Waitany", 600, 700, (700, e.mpi_irecv, (other, world, 9, 128, 7)))
            call("MPI_Waitall", 710, 720, (720, e.mpi_isend_complete, (8,)))
            call("MPI_Send", 730, 740)  # to MPI_PROC_NULL: Score-P writes no MpiSend
            call("MPI_Gather", 800, 900 + 100 * r, (800, e.mpi_collective_begin, ()),
                 (900 + 100 * r, e.mpi_collective_end, (coll.GATHER, world, 0, 16, 32 if r == 0 else 0)),
                 role=otf2.RegionRole.COLL_ALL2ONE)
            call("MPI_Allreduce", 1100, 1200, (1100, e.mpi_collective_begin, ()),
                 (1200, e.mpi_collective_end, (coll.ALLREDUCE, world, otf2.Undefined.UINT32.value, 16, 16)),
                 role=otf2.RegionRole.COLL_ALL2ALL)
            call("MPI_Barrier", 1210, 1220, (1210, e.mpi_collective_begin, ()),
                 (1220, e.mpi_collective_end, (coll.BARRIER, self_comm, otf2.Undefined.UINT32.value, 0, 0)),
                 role=otf2.RegionRole.BARRIER)
            callback = reg("atexit handler", otf2.RegionRole.FUNCTION, otf2.Paradigm.USER)
            call("MPI_Finalize", 1300, 1400, (1310, e.enter, (callback,)), (1320, e.leave, (callback,)),
                 role=otf2.RegionRole.FUNCTION)
            e.leave(t(1500), main)
        eo = w.event_writer_from_location(omp)
        eo.enter(t(50), main)
        eo.leave(t(60), main)
    return folder / "traces.otf2"


def test_scorep_style_archive_reads_into_the_event_table(tmp_path):
    """Are a Score-P-style archive's calls, peers (world ranks), sizes and times (ns) read as the
    course's tracer would record them, with mapped and ignored records counted?"""
    trace = load_archive(scorep_like_archive(tmp_path / "scorep"))
    ev = trace.events
    assert [p for p in check(trace) if p.fatal] == []
    r0 = ev[ev["rank"] == 0].set_index("call", drop=False)
    assert list(ev[ev["rank"] == 0]["call"].astype(str)) == [
        "region_begin", "MPI_Init", "MPI_Send", "MPI_Irecv", "MPI_Isend", "MPI_Test", "MPI_Wait",
        "MPI_Waitall", "MPI_Send", "MPI_Reduce", "MPI_Allreduce", "MPI_Finalize", "region_end"]
    first_send = ev[(ev["rank"] == 0) & (ev["call"] == "MPI_Send")].iloc[0]
    assert (first_send["peer"], first_send["tag"], first_send["bytes"], first_send["sync"]) == (1, 5, 64, 1)
    assert (first_send["t_enter"], first_send["t_exit"]) == (200, 400)  # ns since the offset
    proc_null = ev[(ev["rank"] == 0) & (ev["call"] == "MPI_Send")].iloc[1]
    assert proc_null["peer"] == -2
    irecv = r0.loc["MPI_Irecv"]
    assert (irecv["peer"], irecv["tag"], irecv["bytes"], irecv["req"]) == (1, 9, 128, 7)
    assert r0.loc["MPI_Wait", "completes"] == (7,) and r0.loc["MPI_Test", "completes"] == ()
    assert (r0.loc["MPI_Reduce", "root"], r0.loc["MPI_Reduce", "bytes"]) == (0, 16)
    assert r0.loc["MPI_Allreduce", "bytes"] == 8  # Score-P's N * s both ways, N = 2
    assert trace.hosts == {0: "hostX", 1: "hostX"}
    assert trace.comms[0] == [0, 1] and [1, 0] in trace.comms.values()
    assert trace.meta["calls_mapped"] == {"MPI_Ssend -> MPI_Send": 1, "MPI_Waitany -> MPI_Wait": 2,
                                          "MPI_Gather -> MPI_Reduce": 2}
    ignored = trace.meta["otf2_ignored"]
    assert ignored["collectives on MPI_COMM_SELF"] == 2
    assert ignored["MpiRequestTest"] == 2
    assert ignored["user regions inside MPI calls"] == 4  # its Enter and Leave on both ranks
    assert ignored["events of other locations (threads, devices, metrics)"] == 2
    assert any(k.startswith("MPI calls without communication (MPI_Comm_rank") for k in ignored)
    # the course's analysis runs on it: the Ssend and the two Isends match their receives
    assert len(match(trace).messages) == 3 and match(trace).problems == []
    a = analyses(trace)
    assert a["split"]["T_real"] == 1300 - 100  # from the end of MPI_Init to the start of MPI_Finalize
    assert a["matrix"].volume.sum() == 64 + 2 * 128  # one 64 B message, two of 128 B


# --- the command and bad input -----------------------------------------------------------------


def test_cli_writes_the_archive_says_how_to_open_it_and_reads_it_back(tmp_path, capsys, monkeypatch):
    """Does `hpclab trace RUN --otf2 DIR` write the archive and name otf2-print, Vampir and
    Scalasca, and does `hpclab trace DIR` analyse the archive as it would the run?"""
    monkeypatch.setattr("hpclab.site.ompi.eager_limit", lambda: 4096)
    export_trace(built_trace(), tmp_path / "built")  # an archive is a RUN too
    assert cli.main(["trace", str(tmp_path / "built"), "--otf2", str(tmp_path / "again")]) == 0
    out = capsys.readouterr().out
    anchor = (tmp_path / "again" / "traces.otf2").resolve()
    assert f"otf2-print {anchor}" in out and f"vampir {anchor}" in out and "scout.mpi" in out
    assert "3 ranks" in out and "messages" in out
    assert cli.main(["trace", str(anchor), "--model", "ideal"]) == 0
    out = capsys.readouterr().out
    assert "trace of" in out and "T_real" in out
    assert (tmp_path / "again" / "trace-timeline.png").stat().st_size > 0


def test_export_refuses_a_folder_that_holds_files(tmp_path, capsys):
    """Is an existing non-empty DIR refused with a clear error, its files untouched; is an empty
    one used?"""
    trace = built_trace()
    keep = tmp_path / "busy" / "notes.txt"
    keep.parent.mkdir()
    keep.write_text("mine")
    with pytest.raises(HpclabError, match="not an empty folder"):
        export_trace(trace, keep.parent)
    assert keep.read_text() == "mine" and sorted(keep.parent.iterdir()) == [keep]
    assert not list(tmp_path.glob(".busy.*"))  # no partial archive left behind
    (tmp_path / "empty").mkdir()
    assert export_trace(trace, tmp_path / "empty").is_file()
    export_trace(trace, tmp_path / "built")
    assert cli.main(["trace", str(tmp_path / "built"), "--otf2", str(keep.parent)]) == 2
    assert "overwrites nothing" in capsys.readouterr().err


def test_what_is_not_an_archive_is_refused(tmp_path):
    """A folder without an anchor file, a file that is not OTF2 and a folder with two archives
    give an HpclabError that says what to pass."""
    with pytest.raises(HpclabError, match="not an OTF2 archive"):
        load_archive(tmp_path)
    fake = tmp_path / "traces.otf2"
    fake.write_text("not an anchor file\n")
    with pytest.raises(HpclabError, match="cannot be read as an OTF2 archive"):
        load_archive(fake)
    (tmp_path / "other.otf2").write_text("")
    with pytest.raises(HpclabError, match="holds 2 OTF2 archives"):
        load_archive(tmp_path)
    with pytest.raises(HpclabError, match="no trace/ folder"):
        load_run(tmp_path / "nowhere")


def test_missing_bindings_name_the_debian_package(monkeypatch):
    """Without the bindings, is the error a clear one naming python3-otf2?"""
    monkeypatch.setitem(sys.modules, "otf2", None)
    with pytest.raises(HpclabError, match="python3-otf2"):
        otf2_format.bindings()


def test_negative_times_are_refused(tmp_path):
    """OTF2 timestamps are unsigned: is a trace with negative times refused, not wrapped?"""
    trace = built_trace()
    ev = trace.events.copy()
    ev["t_enter"] -= 10**6
    ev["t_exit"] -= 10**6
    with pytest.raises(HpclabError, match="negative times"):
        export_trace(trace.with_events(ev), tmp_path / "neg")
    assert not (tmp_path / "neg").exists()


# --- through the cluster -------------------------------------------------------------------------


@pytest.mark.cluster
@needs_print
def test_traced_poisson_job_through_the_cluster_exports_completely(cluster, tmp_path, monkeypatch, capsys):
    """A traced Poisson job of notebook 05's recipe, submitted to the cluster: does
    `hpclab trace RUN --otf2 DIR` give an archive that otf2-print lists completely, and does it
    read back to the same analysis?"""
    from hpclab.course.lessons import imbalance as lesson
    from hpclab.jobs import experiment
    if not POISSON.is_file() or not LIB.is_file():
        pytest.skip("build/bin/poisson or build/lib/libmpitrace.so not built (make -C src)")
    monkeypatch.setenv("HPCLAB_RUNS", str(tmp_path / "runs"))
    cfg = lesson.configurations(2)[0]
    [run] = experiment.run(lesson.poisson_specs([cfg], n=60, iters=5, repetitions=1, experiment="t21"),
                           progress=False, timeout=300)
    assert cli.main(["trace", str(run.path), "--otf2", str(tmp_path / "otf2")]) == 0
    assert "otf2-print" in capsys.readouterr().out
    trace = load_run(run.path)
    check_against_otf2_print(trace, tmp_path / "otf2" / "traces.otf2")
    back = load_run(tmp_path / "otf2")
    assert_same_events(trace.events, back.events)
    assert_same_analyses(analyses(trace), analyses(back))
