"""Replay on network models: exact reproduction, clock-offset independence, deadlocks, waits."""

import pytest

from hpclab.core.errors import HpclabError
from hpclab.trace.builder import TraceBuilder
from hpclab.trace.model import IDEAL, hockney
from hpclab.trace.replay import replay
from hpclab.trace.waitstates import wait_states

MODEL = hockney(1.5, 800.0, inter_latency_us=4.0, inter_bandwidth_MBps=200.0, eager_limit=8192)


def halo_program(p=6, hosts=None):
    b = TraceBuilder(p, hosts=hosts or {r: f"n{r // 3}" for r in range(p)})
    for r in range(p):
        for it in range(3):
            with b[r].region("iter"):
                b[r].compute(1000 + 300 * r + 50 * it)
                reqs = [b[r].irecv((r - 1) % p, 20_000, 7), b[r].isend((r + 1) % p, 20_000, 7)]
                b[r].compute(200).waitall(reqs)
                b[r].send((r + 1) % p if r % 2 == 0 else (r - 1) % p, 512, 3)
                b[r].recv((r + 1) % p if r % 2 == 0 else (r - 1) % p, 512, 3)
                b[r].allreduce(8)
        b[r].bcast(0, 4096).reduce(1, 64).barrier()
    return b


def test_replay_reproduces_a_trace_built_on_the_same_model():
    """Does replaying under Hockney a trace made with that Hockney model give its times exactly?"""
    t = halo_program().build(MODEL)
    again = replay(t, MODEL)
    assert (again.events["t_enter"] == t.events["t_enter"]).all()
    assert (again.events["t_exit"] == t.events["t_exit"]).all()


def test_replay_does_not_depend_on_clock_offsets():
    """If one rank's clock is shifted, is the replay unchanged?"""
    t = halo_program().build(MODEL)
    shifted = t.events.copy()
    on = shifted["rank"] == 4
    shifted.loc[on, ["t_enter", "t_exit"]] += 123_456_789
    a = replay(t, IDEAL).events
    b = replay(t.with_events(shifted), IDEAL).events
    assert a[["t_enter", "t_exit"]].equals(b[["t_enter", "t_exit"]])


def test_ideal_replay_is_never_slower_than_a_real_network():
    """Does every rank finish no later on the ideal network than on a slower one?"""
    b = halo_program()
    ideal = b.build().events.groupby("rank")["t_exit"].max()
    slow = b.build(MODEL).events.groupby("rank")["t_exit"].max()
    assert (ideal <= slow).all()


@pytest.mark.parametrize("nbytes, deadlock", [(100, False), (100_000, True)])
def test_blocking_send_ring_deadlocks_only_above_eager_limit(nbytes, deadlock):
    """Is a ring of blocking Send-then-Recv reported as a deadlock above the eager limit,
    and does it complete below it?"""
    p = 4
    b = TraceBuilder(p)
    for r in range(p):
        b[r].compute(10).send((r + 1) % p, nbytes, 0).recv((r - 1) % p, nbytes, 0)
    if deadlock:
        with pytest.raises(HpclabError, match="deadlock") as err:
            b.build(MODEL)
        assert sorted(x["rank"] for x in err.value.blocked) == list(range(p))
        assert all(x["call"] == "MPI_Send" for x in err.value.blocked)
    else:
        t = b.build(MODEL)
        assert t.events.groupby("rank")["call"].last().eq("MPI_Finalize").all()


def test_rendezvous_send_waits_for_the_receive():
    """Does a rendezvous send start its transfer only when the receive is posted?"""
    b = TraceBuilder(2)
    b[0].send(1, 80_000, 0)
    b[1].compute(5000).recv(0, 80_000, 0)
    ev = b.build(MODEL).events.set_index(["rank", "call"])
    xfer = round(1500 + 80_000 / 0.8)
    assert ev.loc[(0, "MPI_Send"), "t_exit"] == 5000 + xfer
    assert ev.loc[(1, "MPI_Recv"), "t_exit"] == 5000 + xfer


def test_waitall_over_two_late_senders_counts_the_later_one():
    """Does a Waitall on two late senders count only the later sender as Late Sender time?"""
    b = TraceBuilder(3)
    q = [b[0].irecv(1, 8, 0), b[0].irecv(2, 8, 0)]
    b[0].waitall(q)
    b[1].compute(500).send(0, 8, 0)
    b[2].compute(800).send(0, 8, 0)
    ws = wait_states(b.build())
    late = ws[(ws["rank"] == 0) & (ws["pattern"] == "Late Sender")]
    assert late["wait_ns"].tolist() == [800]


def test_wait_at_barrier_and_nxn_measure_the_latest_arrival():
    """Are Wait at Barrier and Wait at NxN the time from own entry to the last entry?"""
    b = TraceBuilder(3)
    for r in range(3):
        b[r].compute(100 * r).barrier().compute(50 * (2 - r)).allreduce(16)
    ws = wait_states(b.build())
    bar = ws[ws["pattern"] == "Wait at Barrier"].set_index("rank")["wait_ns"].to_dict()
    nxn = ws[ws["pattern"] == "Wait at NxN"].set_index("rank")["wait_ns"].to_dict()
    assert bar == {0: 200, 1: 100}
    assert nxn == {1: 50, 2: 100}


def test_sendrecv_replays_as_irecv_isend_waitall():
    """Does a Sendrecv pair take the same time as the equivalent Irecv + Isend + Waitall?"""
    a = TraceBuilder(2)
    for r in range(2):
        a[r].compute(100 * (r + 1)).sendrecv(1 - r, 50_000, 0, 1 - r, 50_000, 0)
    c = TraceBuilder(2)
    for r in range(2):
        c[r].compute(100 * (r + 1))
        q = [c[r].irecv(1 - r, 50_000, 0), c[r].isend(1 - r, 50_000, 0)]
        c[r].waitall(q)
    ea = a.build(MODEL).events.groupby("rank")["t_exit"].max()
    ec = c.build(MODEL).events.groupby("rank")["t_exit"].max()
    assert ea.equals(ec)
