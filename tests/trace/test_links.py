"""Shared links (Dimemas' per-node input/output links) in the replay: exact answers on hand-built
traces, and the same times as the contention-free replay when links are plentiful."""

import pytest

from hpclab.core.errors import HpclabError
from hpclab.trace.builder import TraceBuilder
from hpclab.trace.model import IDEAL, hockney, model_from_dict
from hpclab.trace.replay import replay
from hpclab.trace.split import run_time

# intra-node: 1 us + 1 ns/B; inter-node: 2 us + 10 ns/B. 1000 B: 2000 ns within, 12000 between.
NET = hockney(1.0, 1000.0, inter_latency_us=2.0, inter_bandwidth_MBps=100.0)
RDV = hockney(1.0, 1000.0, inter_latency_us=2.0, inter_bandwidth_MBps=100.0, eager_limit=100)


def ends(trace):
    return trace.events.groupby("rank")["t_exit"].max().tolist()


def two_leave_one_node():
    """Ranks 0 and 1 (node a) each send 1000 B at time 0, to ranks 2 and 3 (node b)."""
    b = TraceBuilder(4, hosts={0: "a", 1: "a", 2: "b", 3: "b"})
    b[0].send(2, 1000)
    b[1].send(3, 1000)
    b[2].recv(0, 1000)
    b[3].recv(1, 1000)
    return b.build()


@pytest.mark.parametrize("model", [NET, RDV], ids=["eager", "rendezvous"])
def test_two_messages_leaving_a_one_link_node_take_twice_as_long(model):
    """Do two 1000-byte messages leaving one node at once arrive after 12000 and 24000 ns with one
    link per node, both after 12000 with two links, and after 12000 without shared links?"""
    t = two_leave_one_node()
    rdv = model.eager_limit < 1000  # rendezvous: the senders wait for the transfer too
    one = ends(replay(t, model.with_links(1)))
    assert one == ([12000, 24000] if rdv else [0, 0]) + [12000, 24000]
    assert ends(replay(t, model.with_links(2))) == ([12000] * 2 if rdv else [0, 0]) + [12000] * 2
    assert ends(replay(t, model)) == ends(replay(t, model.with_links(2)))


def test_two_messages_entering_one_node_share_its_input_link():
    """Do messages from two different nodes into one one-link node queue at its input link
    (12000 and 24000 ns), while each sender's output link is free?"""
    b = TraceBuilder(3, hosts={0: "a", 1: "b", 2: "c"})
    b[0].send(2, 1000)
    b[1].send(2, 1000)
    b[2].recv(0, 1000).recv(1, 1000)
    r = replay(b.build(), NET.with_links(1))
    recv = r.events[r.events["call"] == "MPI_Recv"]["t_exit"].tolist()
    assert recv == [12000, 24000]


def test_messages_within_a_node_use_no_link():
    """Do two messages between ranks of one node travel at once (2000 ns each) on one link?"""
    b = TraceBuilder(4, hosts={r: "a" for r in range(4)})
    b[0].send(2, 1000)
    b[1].send(3, 1000)
    b[2].recv(0, 1000)
    b[3].recv(1, 1000)
    assert ends(replay(b.build(), NET.with_links(1))) == [0, 0, 2000, 2000]


def pairs(hosts):
    """Ranks 0-2 and 1-3 exchange 1000 B each way with Irecv + Isend + Waitall."""
    b = TraceBuilder(4, hosts=hosts)
    for r, peer in ((0, 2), (1, 3), (2, 0), (3, 1)):
        q = [b[r].irecv(peer, 1000), b[r].isend(peer, 1000)]
        b[r].waitall(q)
    return b.build()


def test_a_mapping_that_moves_traffic_off_the_links_changes_the_time():
    """With one link per node, do the pairs take 2000 ns when each pair shares a node, 24000 ns
    when both pairs cross between two nodes (two messages each way through one link), and
    12000 ns crossing without shared links?"""
    together = pairs({0: "a", 2: "a", 1: "b", 3: "b"})
    apart = pairs({0: "a", 1: "a", 2: "b", 3: "b"})
    one = NET.with_links(1)
    assert run_time(replay(together, one)) == 2000
    assert run_time(replay(apart, one)) == 24000
    assert run_time(replay(apart, NET)) == 12000


def test_links_come_from_the_model_file_and_bad_values_are_refused():
    """Does links_per_node in a model file set the links, and is a negative count an error?"""
    m = model_from_dict({"intra": {"latency_us": 1, "bandwidth_MBps": 1000}, "links_per_node": 2})
    assert m.links == 2 and "2 links/node" in m.name
    with pytest.raises(HpclabError, match="links_per_node"):
        model_from_dict({"intra": {"latency_us": 1, "bandwidth_MBps": 1000}, "links_per_node": -1})
    with pytest.raises(HpclabError, match="links"):
        NET.with_links(-1)


def test_plenty_of_links_give_the_contention_free_times():
    """With more links than messages in flight, is the time-ordered replay with links exactly
    the contention-free replay (every ns, problems, deadlocks) on random programs and Poisson
    traces, on each model?"""
    from test_replay_reference import MODELS, poisson_cases, random_program
    cases = [(f"random{s}", random_program(s).skeleton(finalize=s % 7 != 3)) for s in range(20)]
    cases += list(poisson_cases())
    for model in MODELS + [IDEAL]:
        for name, tr in cases:
            try:
                want = replay(tr, model)
            except HpclabError as err:
                with pytest.raises(HpclabError, match="deadlock") as got:
                    replay(tr, model.with_links(64))
                assert got.value.blocked == err.blocked, name
                continue
            got = replay(tr, model.with_links(64))
            assert got.events["t_enter"].tolist() == want.events["t_enter"].tolist(), name
            assert got.events["t_exit"].tolist() == want.events["t_exit"].tolist(), name
            assert got.meta["replay_problems"] == want.meta["replay_problems"]


def test_messages_between_nodes_use_the_inter_node_eager_limit():
    """With 100 B eager inside a node and 10 kB between nodes, is a 1000-byte send to another node
    eager (the sender returns at once) while the same send inside the node waits for its receive?"""
    model = RDV.with_inter_eager(10_000)
    b = TraceBuilder(4, hosts={0: "a", 1: "a", 2: "b", 3: "b"})
    b[0].send(1, 1000).recv(2, 1000)   # inside node a: rendezvous, waits for the late receive
    b[2].send(0, 1000)                 # b -> a: eager between nodes, returns at once
    b[1].compute(50_000).recv(0, 1000)
    b[3].compute(0)
    t = b.build()
    r = replay(t, model)
    sends = r.events[r.events["call"] == "MPI_Send"].set_index("rank")["t_exit"]
    assert sends[0] >= 50_000, "the intra-node send above 100 B waited for its receive"
    assert sends[2] == 0, "the inter-node send below 10 kB was eager"
    assert replay(t, RDV).events.query("call == 'MPI_Send' and rank == 2")["t_exit"].iloc[0] > 0
    assert model.inter_eager == 10_000 and RDV.inter_eager == RDV.eager_limit
    assert model.with_links(1).inter_eager == 10_000, "with_links keeps the inter-node limit"
