"""The PMPI tracer end to end: a real MPI program under LD_PRELOAD, loaded back with the loader.

tests/trace/trace_prog.c makes calls whose answers are known in advance (peers, tags, sizes,
roots), so the loaded trace is compared with exact values. Runs use 2 and 3 ranks with
--oversubscribe (the course VM has 2 cores).
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from hpclab.core import paths
from hpclab.core.errors import HpclabError
from hpclab.trace.events import check
from hpclab.trace.load import load_dir
from hpclab.trace.matching import match

HERE = Path(__file__).resolve().parent
LIB = paths.lib_dir() / "libmpitrace.so"

pytestmark = pytest.mark.skipif(not shutil.which("mpicc") or not shutil.which("mpirun"),
                                reason="needs mpicc and mpirun (Open MPI)")


@pytest.fixture(scope="module")
def prog(tmp_path_factory) -> Path:
    """The tracer library (built with make) and the test program (built here with mpicc)."""
    subprocess.run(["make", "-s", "-C", str(paths.repo() / "src" / "mpitrace")], check=True,
                   capture_output=True)
    out = tmp_path_factory.mktemp("prog") / "trace_prog"
    subprocess.run(["mpicc", "-O1", "-o", str(out), str(HERE / "trace_prog.c")], check=True)
    return out


def run_traced(cmd: list[str], ranks: int, trace_dir: Path, check_rc: bool = True,
               **env) -> subprocess.CompletedProcess:
    full_env = {**os.environ, "OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1",
                "OMPI_MCA_rmaps_base_oversubscribe": "1"}
    exports = {"LD_PRELOAD": str(LIB), "MPITRACE_DIR": str(trace_dir), **env}
    args = ["mpirun", "-np", str(ranks), "--oversubscribe"]
    for k, v in exports.items():
        args += ["-x", f"{k}={v}"]
    res = subprocess.run(args + cmd, env=full_env, capture_output=True, text=True, timeout=120)
    if check_rc:
        assert res.returncode == 0, res.stderr
    return res


@pytest.fixture(scope="module", params=[2, 3])
def traced(request, prog, tmp_path_factory):
    p = request.param
    d = tmp_path_factory.mktemp(f"trace{p}") / "trace"
    run_traced([str(prog)], p, d)
    return p, load_dir(d)


def rows(trace, rank, call):
    ev = trace.events
    return ev[(ev["rank"] == rank) & (ev["call"] == call)]


def test_every_rank_records_the_calls_it_made(traced):
    """Does each rank's trace hold exactly the calls the program made, no more, no fewer?"""
    p, t = traced
    expected = {"MPI_Init": 1, "MPI_Send": 2, "MPI_Recv": 3, "MPI_Isend": 3, "MPI_Irecv": 2,
                "MPI_Waitall": 1, "MPI_Sendrecv": 1, "MPI_Wait": 1, "MPI_Comm_split": 1,
                "MPI_Cart_create": 1, "MPI_Allreduce": 1, "MPI_Bcast": 1, "MPI_Reduce": 1,
                "MPI_Barrier": 1, "MPI_Finalize": 1, "region_begin": 3, "region_end": 3}
    for r in range(p):
        got = t.events[t.events["rank"] == r]["call"].value_counts().to_dict()
        got = {call: n for call, n in got.items() if n}  # the column is categorical: drop zero counts
        assert got.pop("MPI_Test") >= 1  # polled until the send completed
        assert got == expected, f"rank {r}"
    assert t.meta["calls_mapped"] == {"MPI_Comm_free -> dropped": 2 * p}
    assert [str(x) for x in check(t) if x.fatal] == []
    assert t.meta["problems"] == []


def test_peers_are_world_ranks_and_receives_carry_what_matched(traced):
    """Are peers world ranks, and do receives (also wildcard ones) carry the matched source, tag and size?"""
    p, t = traced
    for r in range(p):
        right, left = (r + 1) % p, (r - 1) % p
        send = rows(t, r, "MPI_Send")
        assert send[["peer", "tag", "bytes", "comm"]].values.tolist() == [[right, 1, 400, 0],
                                                                          [-2, 5, 0, 0]]
        recv = rows(t, r, "MPI_Recv")
        # ring, PROC_NULL (matched tag MPI_ANY_TAG = -1, no data), Cartesian ring
        assert recv[["peer", "bytes"]].values.tolist() == [[left, 400], [-2, 0], [right, 8]]
        assert recv["tag"].tolist()[0] == 1 and recv["tag"].tolist()[2] == 6
        irecv = rows(t, r, "MPI_Irecv")
        # the second was posted for MPI_ANY_SOURCE with room for 160 B; 40 B came from the right
        assert irecv[["peer", "tag", "bytes"]].values.tolist() == [[left, 2, 80], [right, 3, 40]]
        sr = rows(t, r, "MPI_Sendrecv").iloc[0]
        assert (sr.peer, sr.tag, sr.bytes) == (right, 4, 12)
        assert (sr.recv_peer, sr.recv_tag, sr.recv_bytes) == (left, 4, 12)


def test_cartesian_communicator_is_translated_and_named_alike_on_all_ranks(traced):
    """On a communicator with reversed ranks, are peers and roots world ranks and the comm id shared?"""
    p, t = traced
    split = t.events[t.events["call"] == "MPI_Comm_split"]
    assert set(split["comm"]) == {0}
    carts = {int(rows(t, r, "MPI_Isend")["comm"].iloc[-1]) for r in range(p)}
    assert len(carts) == 1
    cart = carts.pop()
    assert t.comms[cart] == list(range(p - 1, -1, -1))
    assert t.comms[0] == list(range(p))
    for r in range(p):
        # cart rank c = p-1-r; the shift sends to c+1, which is world rank r-1
        assert rows(t, r, "MPI_Isend")["peer"].iloc[-1] == (r - 1) % p
        assert rows(t, r, "MPI_Bcast")["root"].iloc[0] == p - 1
        assert rows(t, r, "MPI_Reduce")["root"].iloc[0] == p - 2
        assert rows(t, r, "MPI_Reduce")["comm"].iloc[0] == cart


def test_wait_and_test_name_the_requests_they_completed(traced):
    """Does every request id complete exactly once, with REQUEST_NULL simply absent?"""
    p, t = traced
    for r in range(p):
        ev = t.events[t.events["rank"] == r]
        ids = sorted(ev.loc[ev["req"] >= 0, "req"])
        done = [i for c in ev["completes"] for i in c]
        assert sorted(done) == ids == list(range(5))
        assert rows(t, r, "MPI_Waitall")["completes"].iloc[0] == (0, 1, 2, 3)
        assert rows(t, r, "MPI_Wait")["completes"].iloc[0] == ()


def test_bytes_sent_equal_bytes_received_and_every_message_matches(traced):
    """Do all sends find their receive, with total bytes sent equal to total bytes received?"""
    p, t = traced
    m = match(t)
    assert m.problems == []
    ev = t.events
    sent = ev.loc[ev["call"].isin(["MPI_Send", "MPI_Isend", "MPI_Sendrecv"]) & (ev["peer"] >= 0), "bytes"].sum()
    recvd = (ev.loc[ev["call"].isin(["MPI_Recv", "MPI_Irecv"]) & (ev["peer"] >= 0), "bytes"].sum()
             + ev.loc[ev["call"] == "MPI_Sendrecv", "recv_bytes"].sum())
    assert sent == recvd == p * (400 + 80 + 40 + 12 + 8)
    assert len(m.messages) == 5 * p
    assert t.meta["clock_violations"] == 0


def test_regions_carry_their_names_and_nest(traced):
    """Are user regions recorded by name, in order, and properly nested?"""
    p, t = traced
    for r in range(p):
        reg = t.events[(t.events["rank"] == r) & t.events["call"].str.startswith("region")]
        assert list(zip(reg["call"], reg["name"])) == [
            ("region_begin", "setup"), ("region_end", "setup"), ("region_begin", "exchange"),
            ("region_begin", "inner"), ("region_end", "inner"), ("region_end", "exchange")]


def test_times_are_ordered_and_hosts_known(traced):
    """Do events on a rank follow each other in time, and does every rank name its host?"""
    p, t = traced
    ev = t.events
    assert (ev["t_exit"] >= ev["t_enter"]).all()
    for r in range(p):
        e = ev[ev["rank"] == r]
        assert (e["t_enter"].to_numpy()[1:] >= e["t_exit"].to_numpy()[:-1]).all()
        assert (e["seq"].diff().dropna() > 0).all()
    assert sorted(t.hosts) == list(range(p)) and all(t.hosts.values())
    assert t.meta["finalized"] == {r: True for r in range(p)}


def test_run_without_finalize_loads_what_was_flushed(prog, tmp_path):
    """Does a run that exits without MPI_Finalize give a clear error, and with strict=False the flushed events?"""
    d = tmp_path / "trace"
    run_traced([str(prog), "crash"], 2, d, check_rc=False)
    # _exit skips atexit handlers, as a crash does: the file says it was never closed.
    with pytest.raises(HpclabError, match=r"rank-000000\.mpit \(rank 0\) was not closed"):
        load_dir(d)
    t = load_dir(d, strict=False)
    assert len(t.meta["problems"]) == 2
    assert all("rank-00000" in x for x in t.meta["problems"])
    for r in range(2):
        calls = rows(t, r, "MPI_Sendrecv")
        assert len(calls) == 1  # flushed before the crash
        ev = t.events[t.events["rank"] == r]
        assert "MPI_Finalize" not in set(ev["call"])
    # The barrier after the flush was still in the buffer: lost, as in a crash.
    assert "MPI_Barrier" not in set(t.events["call"])
    assert any("MPI_Finalize was never reached" in str(x) for x in check(t))


def test_existing_trace_is_never_overwritten(prog, tmp_path):
    """Does a second run into the same folder leave the first trace alone and trace nothing?"""
    d = tmp_path / "trace"
    run_traced([str(prog)], 2, d)
    before = {p.name: p.read_bytes() for p in d.iterdir()}
    res = run_traced([str(prog)], 2, d)
    assert "tracing is off" in res.stderr
    assert {p.name: p.read_bytes() for p in d.iterdir()} == before


def test_poisson_traced_has_its_regions():
    """Does build/bin/poisson, traced at 2 ranks, record the exchange/red/black regions?"""
    exe = paths.bin_dir() / "poisson"
    if not exe.exists():
        pytest.skip("build/bin/poisson is not built (make -C src)")
    import tempfile
    with tempfile.TemporaryDirectory() as tmp:
        d = Path(tmp) / "trace"
        run_traced([str(exe), "--n", "64", "--iters", "20", "--exchange", "nonblocking"], 2, d)
        t = load_dir(d)
    names = set(t.events.loc[t.events["call"] == "region_begin", "name"])
    assert {"exchange", "red", "black"} <= names
    assert [str(x) for x in check(t) if x.fatal] == []


@pytest.fixture(scope="module")
def traced_more(prog, tmp_path_factory):
    """`trace_prog more` on 3 ranks with a 64-record buffer (the smallest the tracer takes), so
    every rank's buffer fills and is flushed several times while the program runs."""
    d = tmp_path_factory.mktemp("more") / "trace"
    res = run_traced([str(prog), "more"], 3, d, MPITRACE_BUFFER_RECORDS="64")
    provided = int(res.stdout.split("provided=")[1].split()[0])
    return 3, load_dir(d), provided


def test_small_buffer_is_flushed_when_full_and_loses_nothing(traced_more):
    """With a buffer of 64 records, is it flushed several times per rank, with every event still
    there, in order, and every message matched?"""
    p, t, _ = traced_more
    assert t.meta["tracer_flushes"] >= 3 * p  # 200+ records per rank
    assert t.meta["problems"] == []
    assert [str(x) for x in check(t) if x.fatal] == []
    ev = t.events
    for r in range(p):
        e = ev[ev["rank"] == r]
        assert (e["seq"].diff().dropna() > 0).all()
        loop = e[(e["call"] == "MPI_Sendrecv") & (e["tag"] == 16)]
        assert len(loop) == 100
        assert set(loop["peer"]) == {(r + 1) % p} and set(loop["recv_peer"]) == {(r - 1) % p}
        assert e["call"].iloc[0] == "MPI_Init" and e["call"].iloc[-1] == "MPI_Finalize"
    assert match(t).problems == []
    assert "flush" not in set(ev["call"])  # the tracer's own flushes are not events


def test_init_thread_is_recorded_as_init_with_the_thread_level(traced_more):
    """Is MPI_Init_thread loaded as MPI_Init, with the thread level MPI provided?"""
    p, t, provided = traced_more
    assert t.meta["calls_recorded"]["MPI_Init_thread"] == p
    assert t.meta["calls_mapped"]["MPI_Init_thread -> MPI_Init"] == p
    assert t.meta["thread_levels"] == {r: provided for r in range(p)}


def test_comm_dup_gets_its_own_id_with_all_world_ranks(traced_more):
    """Does a Comm_dup of COMM_WORLD name its parent, get a new id shared by all ranks, list all
    world ranks, and keep its messages apart from COMM_WORLD's?"""
    p, t, _ = traced_more
    ev = t.events
    dup = ev[ev["call"] == "MPI_Comm_dup"]
    assert len(dup) == p and set(dup["comm"]) == {0}
    on_dup = {int(c) for c in ev.loc[(ev["call"] == "MPI_Isend") & ev["tag"].isin([10, 12, 14]), "comm"]}
    assert len(on_dup) == 1
    cid = on_dup.pop()
    assert cid != 0 and t.comms[cid] == list(range(p))
    assert set(ev.loc[(ev["call"] == "MPI_Isend") & ev["tag"].isin([11, 13]), "comm"]) == {0}


def test_any_some_and_testall_calls_name_exactly_the_requests_they_completed(traced_more):
    """Do Testall, Waitany, Testany, Waitsome and Testsome each complete their two requests
    exactly once, with unfinished polls completing nothing, and the receives carry what matched?"""
    p, t, _ = traced_more
    ev = t.events
    rec = t.meta["calls_recorded"]
    assert rec["MPI_Waitany"] == 2 * p
    for call in ("MPI_Testall", "MPI_Testany", "MPI_Waitsome", "MPI_Testsome"):
        assert rec[call] >= p, call
    for r in range(p):
        e = ev[ev["rank"] == r]
        irecv = e[e["call"] == "MPI_Irecv"]
        assert irecv[["peer", "tag", "bytes"]].values.tolist() == [[(r - 1) % p, tag, 32] for tag in range(10, 15)]
        assert e.loc[e["req"] >= 0, "req"].tolist() == list(range(10))
        done = [c for c in e["completes"] if c]
        assert sorted(i for c in done for i in c) == list(range(10))
        # request ids come in pairs (Irecv, Isend), one pair per completion style, in program order
        waits = e[e["completes"].map(len) > 0]
        pairs = [tuple(sorted(c)) for c in waits["completes"]]
        assert pairs[0] == (0, 1) and waits["call"].iloc[0] == "MPI_Testall"  # Testall: all at once
        assert sorted(pairs[1:3]) == [(2,), (3,)]                              # Waitany: one each
        assert set(waits.loc[waits["completes"].map(lambda c: set(c) <= {2, 3}), "call"]) == {"MPI_Wait"}


def test_sendrecv_replace_is_recorded_as_a_sendrecv(traced_more):
    """Is MPI_Sendrecv_replace loaded as a Sendrecv with both halves (peer, tag, bytes)?"""
    p, t, _ = traced_more
    assert t.meta["calls_mapped"]["MPI_Sendrecv_replace -> MPI_Sendrecv"] == p
    ev = t.events
    for r in range(p):
        sr = ev[(ev["rank"] == r) & (ev["call"] == "MPI_Sendrecv") & (ev["tag"] == 15)]
        assert sr[["peer", "bytes", "recv_peer", "recv_tag", "recv_bytes"]].values.tolist() == [
            [(r + 1) % p, 40, (r - 1) % p, 15, 40]]


def test_every_event_carries_cpu_times_that_never_exceed_wall_time(traced):
    """Does every event carry the rank's CPU time at entry and exit, increasing along the rank,
    with no compute burst showing more CPU time than wall time?"""
    p, t = traced
    assert t.meta["cpu_time"] and t.meta["format_version"] == 2 and t.meta["cpu_time_note"] == ""
    ev = t.events
    for r in range(p):
        e = ev[ev["rank"] == r]
        ce, cx = e["cpu_enter"].to_numpy(), e["cpu_exit"].to_numpy()
        te, tx = e["t_enter"].to_numpy(), e["t_exit"].to_numpy()
        assert (ce > 0).all() and (cx >= ce).all()
        assert (ce[1:] >= cx[:-1]).all()
        # the reads are ordered so that a burst's CPU interval lies inside its wall interval
        assert (ce[1:] - cx[:-1] <= te[1:] - tx[:-1]).all()


def test_a_sleeping_rank_shows_wall_time_without_cpu_time(prog, tmp_path):
    """Between barriers each rank sleeps 40 ms, then spins 40 ms: is the sleep a burst of wall
    time with almost no CPU time, the spin one mostly on the CPU, and does the replay on CPU
    bursts leave the sleep out (the split's rest holds it)?"""
    from hpclab.trace.model import IDEAL
    from hpclab.trace.replay import replay
    from hpclab.trace.split import rank_times, split
    ms = 40
    run_traced([str(prog), "cpu", str(ms)], 2, tmp_path / "trace")
    t = load_dir(tmp_path / "trace")
    ev = t.events
    for r in range(2):
        e = ev[ev["rank"] == r].reset_index(drop=True)
        assert list(e["call"]) == ["MPI_Init"] + ["MPI_Barrier"] * 3 + ["MPI_Finalize"]
        wall = e["t_enter"].to_numpy()[1:] - e["t_exit"].to_numpy()[:-1]
        cpu = e["cpu_enter"].to_numpy()[1:] - e["cpu_exit"].to_numpy()[:-1]
        assert wall[1] >= ms * 1e6 and cpu[1] < 0.05 * ms * 1e6  # asleep: not running
        # spinning: running, except while the (shared) machine runs something else
        assert wall[2] >= ms * 1e6 and cpu[2] >= 0.1 * ms * 1e6 and cpu[2] > 5 * cpu[1]
    rt = rank_times(t)
    assert (rt["off_cpu_ns"] >= 0.9 * ms * 1e6).all()
    s = split(t, model=IDEAL)
    assert s.cpu_bursts and s.T_comp < s.T_comp_wall
    assert s.T_rest >= 0.9 * ms * 1e6  # the sleep, which no network explains
    assert s.T_real == pytest.approx(sum(s.parts().values()), abs=1e-6)
    assert replay(t, bursts="wall").events["t_exit"].max() >= 2 * ms * 1e6


def test_synchronous_sends_are_recorded_and_wait_for_their_receiver(prog, tmp_path):
    """Rank 0 sends 8 B with MPI_Ssend, then MPI_Issend + Wait, each to a receiver that sleeps
    100 ms first: are they loaded as MPI_Send / MPI_Isend marked sync, and booked as Late
    Receiver (the sender really waited, small as the message is), for exactly the time from the
    sender's call to its receiver's receive?"""
    from hpclab.trace.waitstates import wait_states
    run_traced([str(prog), "sync", "100"], 2, tmp_path / "trace")
    t = load_dir(tmp_path / "trace")
    assert t.meta["calls_recorded"]["MPI_Ssend"] == 1 and t.meta["calls_recorded"]["MPI_Issend"] == 1
    ev = t.events
    sends = ev[(ev["rank"] == 0) & ev["call"].isin(["MPI_Send", "MPI_Isend"])]
    assert sends[["call", "bytes", "sync"]].values.tolist() == [["MPI_Send", 8, 1], ["MPI_Isend", 8, 1]]
    assert (ev.loc[ev["call"] == "MPI_Recv", "sync"] == 0).all()
    lr = wait_states(t)
    lr = lr[lr["pattern"] == "Late Receiver"].sort_values("seq")
    assert lr["call"].tolist() == ["MPI_Send", "MPI_Wait"] and (lr["rank"] == 0).all()
    # not "at least the sleep": a busy machine may hold rank 0 back for part of it (17 ms of 30
    # once, in make test), which shortens its wait; the wait is what the two clocks say
    recvs = ev[(ev["rank"] == 1) & (ev["call"] == "MPI_Recv")].sort_values("seq")
    calls = ev[(ev["rank"] == 0) & ev["call"].isin(["MPI_Send", "MPI_Wait"])].sort_values("seq")
    expected = recvs["t_enter"].to_numpy() - calls["t_enter"].to_numpy()
    assert (expected > 0).all() and lr["wait_ns"].tolist() == expected.tolist()
    # and the receiver was late by its sleep: from its first receive's end to its second's start
    assert recvs["t_enter"].iat[1] - recvs["t_exit"].iat[0] >= 100e6
