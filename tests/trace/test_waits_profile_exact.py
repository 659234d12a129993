"""Wait states and profiles on small hand-built traces whose answers are worked out by hand."""

import pytest

from hpclab.trace.builder import TraceBuilder
from hpclab.trace.model import IDEAL, NetworkModel
from hpclab.trace.profile import flat_profile, profile
from hpclab.trace.waitstates import by_callsite, by_rank, wait_states

# The ideal network, but messages above 4 KiB wait for their receive (rendezvous).
RENDEZVOUS = NetworkModel("ideal, eager limit 4096 B", IDEAL.intra, IDEAL.inter, 4096)


def test_blocking_send_to_a_late_receiver_waits_until_the_receive_is_posted():
    """Is a rendezvous Send entered at 0 whose Recv is posted at 7000 a Late Receiver of 7000 ns,
    with no Late Sender on the receiving side?"""
    b = TraceBuilder(2)
    b[0].send(1, 100_000, 0)
    b[1].compute(7000).recv(0, 100_000, 0)
    ws = wait_states(b.build(RENDEZVOUS))
    assert ws[["rank", "call", "pattern", "wait_ns"]].values.tolist() == [
        [0, "MPI_Send", "Late Receiver", 7000]]


def test_wait_on_an_isend_counts_late_receiver_from_its_own_entry():
    """Is a Wait on a rendezvous Isend, entered at 1000, a Late Receiver of 7000 - 1000 ns?"""
    b = TraceBuilder(2)
    q = b[0].isend(1, 100_000, 0)
    b[0].compute(1000).wait(q)
    b[1].compute(7000).recv(0, 100_000, 0)
    ws = wait_states(b.build(RENDEZVOUS))
    assert ws[["rank", "call", "pattern", "wait_ns"]].values.tolist() == [
        [0, "MPI_Wait", "Late Receiver", 6000]]


def test_eager_send_is_never_a_late_receiver():
    """Does a small (eager) Send to a late receiver wait for nothing?"""
    b = TraceBuilder(2)
    b[0].send(1, 64, 0)
    b[1].compute(7000).recv(0, 64, 0)
    assert wait_states(b.build(RENDEZVOUS)).empty


def callsite_program():
    """Two iterations on 3 ideal ranks. Rank 0 receives from rank 1 inside region 'exchange',
    then from rank 2 outside any region, then all meet at a barrier. Rank 1 computes 500 then
    100 before sending; rank 2 800 then 900.
    Iteration 0: Late Sender 500 (exchange) and 800 - 500 = 300 (top level); rank 1 waits at
    the barrier 800 - 500 = 300. Iteration 1: 100, 900 - 100 = 800; barrier 900 - 100 = 800."""
    b = TraceBuilder(3)
    for d1, d2 in ((500, 800), (100, 900)):
        with b[0].region("exchange"):
            b[0].recv(1, 8, 0)
        b[0].recv(2, 8, 0).barrier()
        b[1].compute(d1).send(0, 8, 0).barrier()
        b[2].compute(d2).send(0, 8, 0).barrier()
    return b


def test_wait_states_by_call_site_sum_count_and_max_per_region_and_call():
    """Are waits grouped by (enclosing region / call, pattern) with the right total, count and max?"""
    ws = wait_states(callsite_program().build())
    got = {k: v for k, v in by_callsite(ws).to_dict("index").items()}
    assert got == {
        ("exchange / MPI_Recv", "Late Sender"): {"total_ns": 600, "count": 2, "max_ns": 500},
        ("MPI_Recv", "Late Sender"): {"total_ns": 1100, "count": 2, "max_ns": 800},
        ("MPI_Barrier", "Wait at Barrier"): {"total_ns": 1100, "count": 2, "max_ns": 800},
    }
    totals = by_callsite(ws)["total_ns"].tolist()
    assert totals == sorted(totals, reverse=True)


def test_wait_states_by_rank_put_each_wait_on_the_rank_that_waited():
    """Does the rank view of the same program give rank 0 all Late Sender time and rank 1 all
    barrier waiting, with rank 2 (the latest) waiting for nothing?"""
    table = by_rank(wait_states(callsite_program().build()), 3)
    assert table["Late Sender"].tolist() == [1700, 0, 0]
    assert table["Wait at Barrier"].tolist() == [0, 1100, 0]
    assert table["Late Receiver"].tolist() == [0, 0, 0]


def profile_program():
    """Rank 0: 100 compute | solve[ 50 | Recv 150..250 | 100 | inner[20] inner[20] | 10 ] | 100.
    Rank 1: 250 compute | Send (eager, zero time) | 50. Times in ns on the ideal network."""
    b = TraceBuilder(2)
    b[0].compute(100).region_begin("solve")
    b[0].compute(50).recv(1, 8, 0)
    b[0].compute(100)
    for _ in range(2):
        b[0].region_begin("inner").compute(20).region_end("inner")
    b[0].compute(10).region_end("solve").compute(100)
    b[1].compute(250).send(0, 8, 0).compute(50)
    return b.build()


def test_profile_self_total_and_calls_per_rank():
    """Are self time, total (inclusive) time and calls per rank and function the hand-computed ones?
    solve spans 100..400 (total 300) and contains the 100 ns Recv and two 20 ns inner regions,
    so its self time is 300 - 100 - 40 = 160; Application is the rest of each rank's span."""
    prof = profile(profile_program()).set_index(["rank", "function"])
    cols = ["calls", "total_ns", "self_ns"]
    expect = {
        (0, "MPI_Recv"): [1, 100, 100], (0, "solve"): [1, 300, 160], (0, "inner"): [2, 40, 40],
        (0, "Application"): [1, 200, 200], (0, "MPI_Init"): [1, 0, 0], (0, "MPI_Finalize"): [1, 0, 0],
        (1, "MPI_Send"): [1, 0, 0], (1, "Application"): [1, 300, 300],
        (1, "MPI_Init"): [1, 0, 0], (1, "MPI_Finalize"): [1, 0, 0],
    }
    assert {k: prof.loc[k, cols].tolist() for k in prof.index} == expect
    # self times add up to each rank's span (first entry to last exit)
    assert prof.groupby(level="rank")["self_ns"].sum().tolist() == [500, 300]


def test_flat_profile_sums_over_ranks_with_min_mean_max():
    """Does the flat profile sum calls and times over ranks, with per-rank min, mean and max of
    self time (a function a rank never calls counts 0 for that rank)?"""
    fp = flat_profile(profile_program())
    app = fp.loc["Application"]
    assert (app["calls"], app["total_ns"], app["self_ns"]) == (2, 500, 500)
    assert (app["self_min_ns"], app["self_mean_ns"], app["self_max_ns"]) == (200, 250, 300)
    recv = fp.loc["MPI_Recv"]
    assert (recv["calls"], recv["self_min_ns"], recv["self_mean_ns"], recv["self_max_ns"]) == (1, 0, 50, 100)
    assert fp["self_pct"].sum() == pytest.approx(100.0)
    assert fp.loc["solve", "self_pct"] == pytest.approx(100.0 * 160 / 800)
    assert fp.index[0] == "Application"  # sorted by self time


def slow_send_trace(nbytes: int):
    """As recorded: rank 0's Send is entered at 0 and left at 7000 (its rank was switched out,
    or it waited); rank 1 posts the matching Recv at 7000 and gets the message at once."""
    b = TraceBuilder(2)
    b[0].send(1, nbytes, 0)
    b[1].compute(7000).recv(0, nbytes, 0)
    t = b.skeleton()
    ev = t.events
    ev.loc[(ev["rank"] == 0) & (ev["call"] == "MPI_Send"), "t_exit"] = 7000
    ev.loc[(ev["rank"] == 0) & (ev["call"] == "MPI_Finalize"), ["t_enter", "t_exit"]] = 7000
    return t


def test_a_slow_eager_send_is_not_a_late_receiver():
    """Is a 1200-byte Send that took 7000 ns while its receiver came late NOT booked as Late
    Receiver (eager: it never waited for the receive), by default and with a 4 KiB limit?"""
    t = slow_send_trace(1200)
    assert "eager_limit" not in t.meta
    assert wait_states(t).empty
    assert wait_states(t, eager_limit=4096).empty


def test_a_rendezvous_send_to_a_late_receiver_is_one():
    """Is the same Send a Late Receiver of 7000 ns when its message is above the eager limit
    (100 kB by default, or 1200 B under a 1000-byte limit)?"""
    for nbytes, limit in ((100_000, None), (1200, 1000)):
        ws = wait_states(slow_send_trace(nbytes), eager_limit=limit)
        assert ws[["rank", "call", "pattern", "wait_ns"]].values.tolist() == [
            [0, "MPI_Send", "Late Receiver", 7000]]


def test_late_receiver_on_a_replayed_trace_follows_the_models_eager_limit():
    """Does a replayed trace judge by its model's eager limit: a 4 kB Sendrecv send half waits
    for a late receiver under a 1 kB limit (Late Receiver), but not on the all-eager ideal
    network?"""
    def prog():
        b = TraceBuilder(2)
        b[0].sendrecv(1, 4000, 0, 1, 8, 1)
        b[1].send(0, 8, 1).compute(3000).recv(0, 4000, 0)
        return b
    low = NetworkModel("ideal, eager limit 1000 B", IDEAL.intra, IDEAL.inter, 1000)
    ws = wait_states(prog().build(low))
    assert ws[["rank", "pattern", "wait_ns"]].values.tolist() == [[0, "Late Receiver", 3000]]
    assert wait_states(prog().build()).empty


def test_a_synchronous_send_waits_for_its_receiver_at_any_size():
    """Is an 8-byte Ssend (and an Issend + Wait) to a receiver 7000 ns late a Late Receiver of
    7000 ns, on the ideal network where every standard send is eager?"""
    b = TraceBuilder(2)
    b[0].send(1, 8, 0, sync=True)
    q = b[0].isend(1, 8, 1, sync=True)
    b[0].wait(q)
    b[1].compute(7000).recv(0, 8, 0).compute(7000).recv(0, 8, 1)
    t = b.build()
    assert t.events.loc[t.events["call"] == "MPI_Send", "t_exit"].tolist() == [7000]
    ws = wait_states(t)
    assert ws[["rank", "call", "pattern", "wait_ns"]].values.tolist() == [
        [0, "MPI_Send", "Late Receiver", 7000], [0, "MPI_Wait", "Late Receiver", 7000]]
