"""Replay rules checked against times worked out by hand (no trace built on the model it is
replayed on, so nothing here can agree with the replay merely by construction).

The programs are laid out with TraceBuilder.skeleton() (compute gaps, zero-time calls) and
replayed explicitly. The model used throughout:
  intra-node: L = 2 us, BW = 500 MB/s = 0.5 B/ns  ->  1000 B cost 2000 + 2000 = 4000 ns
  inter-node: L = 10 us, BW = 100 MB/s = 0.1 B/ns ->  1000 B cost 10000 + 10000 = 20000 ns
"""

import pytest

from hpclab.trace.builder import TraceBuilder
from hpclab.trace.model import IDEAL, hockney
from hpclab.trace.replay import replay

MODEL = hockney(2.0, 500.0, inter_latency_us=10.0, inter_bandwidth_MBps=100.0)
INTRA_1000 = 4000
INTER_1000 = 20000


def times(trace, rank, call):
    """[(t_enter, t_exit), ...] of one rank's calls of one kind, in order."""
    ev = trace.events
    sel = ev[(ev["rank"] == rank) & (ev["call"] == call)]
    return list(zip(sel["t_enter"].tolist(), sel["t_exit"].tolist()))


def test_eager_send_returns_at_once_and_arrives_latency_plus_size_over_bandwidth_later():
    """Does an eager send leave at once and its message arrive at t + m/BW + L, so that an early
    receive ends on arrival and a late one ends where it starts?"""
    b = TraceBuilder(3)
    b[0].compute(1000).send(1, 1000, 0).send(2, 1000, 0)
    b[1].recv(0, 1000, 0)                 # posted at 0: waits for the arrival
    b[2].compute(9000).recv(0, 1000, 0)   # posted at 9000: the message is already there
    t = replay(b.skeleton(), MODEL)
    assert times(t, 0, "MPI_Send") == [(1000, 1000), (1000, 1000)]
    assert times(t, 1, "MPI_Recv") == [(0, 1000 + INTRA_1000)]
    assert times(t, 2, "MPI_Recv") == [(9000, 9000)]


@pytest.mark.parametrize("call, nbytes, cost", [
    ("allreduce", 1000, 2 * 3 * INTRA_1000),  # P = 5: ceil(log2 5) = 3 levels, in and out
    ("barrier", 0, 2 * 3 * 2000),             # no payload: latency only
])
def test_allreduce_and_barrier_end_for_all_at_last_arrival_plus_log_tree_cost(call, nbytes, cost):
    """Do Allreduce and Barrier end on every rank at the last arrival plus 2 ceil(log2 P)(L + m/BW)?"""
    p = 5
    b = TraceBuilder(p)
    for r in range(p):
        b[r].compute(100 * r)
        b[r].allreduce(nbytes) if call == "allreduce" else b[r].barrier()
    t = replay(b.skeleton(), MODEL)
    name = "MPI_Allreduce" if call == "allreduce" else "MPI_Barrier"
    for r in range(p):
        assert times(t, r, name) == [(100 * r, 400 + cost)]


def test_collective_on_a_one_rank_communicator_costs_nothing():
    """Is an Allreduce on a communicator of one rank free, whatever the network?"""
    b = TraceBuilder(2, comms={1: [0], 2: [1]})
    b[0].compute(10).allreduce(1000, comm=1)
    b[1].compute(20).allreduce(1000, comm=2)
    t = replay(b.skeleton(), MODEL)
    assert times(t, 0, "MPI_Allreduce") == [(10, 10)]
    assert times(t, 1, "MPI_Allreduce") == [(20, 20)]


def test_bcast_leaves_from_the_root():
    """Does a Bcast end at the root's entry plus ceil(log2 P)(L + m/BW) on every rank that was
    already waiting, and at its own entry on a rank that arrives after the data?"""
    b = TraceBuilder(4)
    b[0].bcast(2, 1000)
    b[1].compute(500).bcast(2, 1000)
    b[2].compute(3000).bcast(2, 1000)     # the root
    b[3].compute(20000).bcast(2, 1000)    # arrives late
    t = replay(b.skeleton(), MODEL)
    done = 3000 + 2 * INTRA_1000         # ceil(log2 4) = 2 levels, fan-out only
    assert times(t, 2, "MPI_Bcast") == [(3000, done)]
    assert times(t, 0, "MPI_Bcast") == [(0, done)]
    assert times(t, 1, "MPI_Bcast") == [(500, done)]
    assert times(t, 3, "MPI_Bcast") == [(20000, 20000)]


def test_bcast_on_the_ideal_network_waits_only_for_the_root():
    """On the ideal network, does a non-root rank leave a Bcast exactly when the root enters it
    (not when the last rank arrives)?"""
    b = TraceBuilder(3)
    b[0].compute(700).bcast(0, 64)
    b[1].bcast(0, 64)
    b[2].compute(5000).bcast(0, 64)
    t = replay(b.skeleton(), IDEAL)
    assert times(t, 0, "MPI_Bcast") == [(700, 700)]
    assert times(t, 1, "MPI_Bcast") == [(0, 700)]
    assert times(t, 2, "MPI_Bcast") == [(5000, 5000)]


@pytest.mark.parametrize("hosts, to1, to2", [
    ({0: "a", 1: "a", 2: "b"}, INTRA_1000, INTER_1000),
    ({0: "a", 1: "b", 2: "a"}, INTER_1000, INTRA_1000),
])
def test_link_is_chosen_from_the_rank_to_node_map(hosts, to1, to2):
    """Does a message between ranks on one node cost the intra-node (L, BW) and one between
    nodes the inter-node one, as the host map says (not the rank numbers)?"""
    b = TraceBuilder(3, hosts=hosts)
    b[0].send(1, 1000, 0).send(2, 1000, 0)
    b[1].recv(0, 1000, 0)
    b[2].recv(0, 1000, 0)
    t = replay(b.skeleton(), MODEL)
    assert times(t, 1, "MPI_Recv") == [(0, to1)]
    assert times(t, 2, "MPI_Recv") == [(0, to2)]


def test_collective_spanning_nodes_uses_the_inter_node_link():
    """Is the collective cost of an Allreduce over two nodes computed with the inter-node link?"""
    b = TraceBuilder(2, hosts={0: "a", 1: "b"})
    for r in range(2):
        b[r].allreduce(1000)
    t = replay(b.skeleton(), MODEL)
    assert times(t, 1, "MPI_Allreduce") == [(0, 2 * 1 * INTER_1000)]


def test_same_key_messages_match_in_order_even_when_the_later_one_would_arrive_first():
    """Do two messages on one (communicator, source, tag) match the receives in posting order,
    a large first message holding back a small second one (MPI's non-overtaking rule)?"""
    b = TraceBuilder(2)
    b[0].send(1, 10_000, 1).send(1, 10, 1)
    b[1].recv(0, 10_000, 1).recv(0, 10, 1)
    t = replay(b.skeleton(), MODEL)
    big = 2000 + 10_000 * 2               # L + m/BW at 0.5 B/ns
    assert times(t, 1, "MPI_Recv") == [(0, big), (big, big)]


def test_receives_match_by_tag_and_by_source_not_by_order_of_arrival():
    """Does a receive for tag 2 take the tag-2 message even though a tag-1 message came first,
    and a receive from rank 2 wait for rank 2 even though rank 1's message is already there?"""
    b = TraceBuilder(3)
    b[1].compute(1000).send(0, 8, 1).compute(1000).send(0, 8, 2)   # tag 1 at 1000, tag 2 at 2000
    b[2].compute(3000).send(0, 8, 9)                               # from rank 2 at 3000
    b[0].recv(1, 8, 2).recv(1, 8, 1).recv(2, 8, 9)
    t = replay(b.skeleton(), IDEAL)
    assert times(t, 0, "MPI_Recv") == [(0, 2000), (2000, 2000), (2000, 3000)]


def test_two_communicators_with_the_same_tag_do_not_match_each_other():
    """With the same source and tag on two communicators, does each receive take its own
    communicator's message, whatever the order the messages were sent in?"""
    b = TraceBuilder(2, comms={1: [0, 1]})
    b[0].compute(1000).send(1, 8, 5, comm=1).compute(2000).send(1, 8, 5, comm=0)
    b[1].recv(0, 8, 5, comm=0).recv(0, 8, 5, comm=1)
    t = replay(b.skeleton(), IDEAL)
    # comm 0's message is sent at 3000: the first receive waits for it although comm 1's
    # message (sent at 1000, same source and tag) is already there
    assert times(t, 1, "MPI_Recv") == [(0, 3000), (3000, 3000)]
