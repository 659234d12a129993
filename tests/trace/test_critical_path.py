"""Does the critical path name the chain that sets the run time, on traces whose answer is known?"""

from __future__ import annotations

import pytest

from hpclab.core.errors import HpclabError
from hpclab.trace import critical_path as cp
from hpclab.trace.builder import TraceBuilder
from hpclab.trace.model import hockney


def late_sender_chain():
    """0 computes 1000 ns and sends to 1; 1 receives, computes 500, sends to 2; 2 receives, computes 100."""
    b = TraceBuilder(3)
    b[0].compute(1000).send(to=1, bytes=8)
    b[1].recv(frm=0, bytes=8).compute(500).send(to=2, bytes=8)
    b[2].recv(frm=1, bytes=8).compute(100)
    return b.build()


def test_a_late_sender_chain_runs_through_every_sender():
    trace = late_sender_chain()
    path = cp.critical_path(trace)
    assert path.length_ns == pytest.approx(path.T_real) == pytest.approx(1600)
    assert path.compute_by_rank().to_dict() == {0: 1000, 1: 500, 2: 100}
    assert path.end_rank == 2
    assert path.by_rank()["share of path"].sum() == pytest.approx(1.0)


def imbalanced_allreduce():
    b = TraceBuilder(4)
    for r, ns in enumerate((100, 100, 100, 400)):
        b[r].compute(ns).allreduce(8).compute(50 + 10 * r)
    return b.build()


def test_an_imbalanced_allreduce_is_set_by_the_slowest_rank():
    trace = imbalanced_allreduce()
    path = cp.critical_path(trace)
    comp = path.compute_by_rank().to_dict()
    # rank 3's 400 ns before the Allreduce, then the rank that finishes last (3: 80 ns after it)
    assert comp == {3: 480}
    assert path.length_ns == pytest.approx(path.T_real) == pytest.approx(480)
    vs = cp.against_imbalance(trace, path)
    assert vs["busiest_rank"] == 3 and vs["path_leader"] == 3 and vs["same"]


def test_waiting_ranks_are_off_the_path():
    """Ranks 0-2 waited in the Allreduce: none of their compute is on the path."""
    trace = imbalanced_allreduce()
    path = cp.critical_path(trace)
    assert set(path.segments["rank"]) == {3}


def naive_chain(nranks=4, nbytes=1 << 20):
    """Every rank sends up, then receives from below: above the eager limit the sends wait for their
    receives, and only the top rank (which sends to nobody) starts the chain of receives."""
    b = TraceBuilder(nranks)
    for r in range(nranks):
        b[r].compute(1000)
        if r + 1 < nranks:
            b[r].send(to=r + 1, bytes=nbytes)
        if r > 0:
            b[r].recv(frm=r - 1, bytes=nbytes)
    return b.build(hockney(1.0, 1000.0, eager_limit=65536))


def test_a_naive_exchange_chain_crosses_every_rank():
    trace = naive_chain()
    path = cp.critical_path(trace)
    assert set(path.segments["rank"]) == {0, 1, 2, 3}
    assert path.length_ns == pytest.approx(path.T_real, rel=1e-6)
    waited = path.segments[path.segments["kind"] == "communication"]
    # three messages of 1 MiB at 1000 MB/s, one after another, are on the path
    assert waited["ns"].sum() >= 3 * (1 << 20) / 1000.0 * 1000 * 0.99


def test_shortening_the_leading_rank_saves_what_the_replay_says():
    trace = late_sender_chain()
    path = cp.critical_path(trace)
    s = cp.savings(trace, path, fraction=0.5)
    assert s.loc[0, "bound ns"] == pytest.approx(500)
    assert s.loc[0, "replayed saving ns"] == pytest.approx(500)
    assert s.attrs["model"] == "ideal"


def test_regions_share_the_path():
    b = TraceBuilder(2)
    for r in range(2):
        with b[r].region("solve"):
            b[r].compute(100 * (r + 1)).barrier()
        b[r].compute(10)
    path = cp.critical_path(b.build())
    regions = path.by_region()
    assert regions.loc["solve", "ns"] == pytest.approx(200)


def test_bad_input_is_refused_in_one_line():
    trace = late_sender_chain()
    with pytest.raises(HpclabError, match="fraction"):
        cp.shorten_bursts(trace, 0, 1.5)
    with pytest.raises(HpclabError, match="rank 9 is not in the trace"):
        cp.shorten_bursts(trace, 9, 0.1)
