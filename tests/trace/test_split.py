"""The four-way split and POP efficiencies on traces with known answers (ANALYSIS-NOTES.md)."""

import pytest
from hypothesis import given, settings, strategies as st

from hpclab.trace.builder import TraceBuilder
from hpclab.trace.model import hockney
from hpclab.trace.split import split
from hpclab.trace.waitstates import by_rank, wait_states

W = 1000


def test_balanced_ring_on_ideal_network_has_no_waiting():
    """Does a balanced ring exchange show zero waiting time on the ideal network?"""
    p = 5
    b = TraceBuilder(p)
    for r in range(p):
        for _ in range(3):
            b[r].compute(W).sendrecv((r + 1) % p, 64, 0, (r - 1) % p, 64, 0)
    s = split(b.build())
    assert s.T_wait == 0 and s.T_load == 0 and s.T_depend == 0
    assert s.T_real == s.T_comp == 3 * W


@pytest.mark.parametrize("p, expected", [(2, 2 / 3), (4, 4 / 7)])
def test_linear_imbalance_gives_known_load_balance(p, expected):
    """Do ranks computing W(1 + 2r) without communication give load balance 2/3 (p=2), 4/7 (p=4)?"""
    b = TraceBuilder(p)
    for r in range(p):
        b[r].compute(W * (1 + 2 * r))
    assert split(b.build()).load_balance == pytest.approx(expected, rel=1e-12)


def test_one_slow_rank_is_pure_load_imbalance():
    """Is one rank slower by d among p seen as T_load = d (p-1)/p and no dependency?"""
    p, d = 4, 400
    b = TraceBuilder(p)
    for r in range(p):
        b[r].compute(W + (d if r == 2 else 0)).allreduce(8)
    s = split(b.build())
    assert s.T_load == pytest.approx(d * (p - 1) / p)
    assert s.T_depend == 0


def test_chain_is_pure_dependency():
    """Does a chain (recv from r-1, compute d, send to r+1) give T_depend = (p-1) d,
    serialisation 1/p and Late Sender waits growing linearly with the rank?"""
    p, d = 6, 250
    b = TraceBuilder(p)
    for r in range(p):
        if r > 0:
            b[r].recv(r - 1, 8)
        b[r].compute(d)
        if r < p - 1:
            b[r].send(r + 1, 8)
    t = b.build()
    s = split(t)
    assert s.T_depend == (p - 1) * d
    assert s.serialisation == pytest.approx(1 / p)
    late = by_rank(wait_states(t), p)["Late Sender"].tolist()
    assert late == [r * d for r in range(p)]


def test_transfer_time_is_real_minus_ideal():
    """Is T_transfer the extra time the network model adds over the ideal one?"""
    p = 4
    b = TraceBuilder(p)
    for r in range(p):
        b[r].compute(W).sendrecv((r + 1) % p, 10_000, 0, (r - 1) % p, 10_000, 0)
    real = b.build(hockney(1.0, 1000.0))
    s = split(real)
    assert s.T_ideal == W
    assert s.T_transfer == s.T_real - W > 0
    assert s.transfer == pytest.approx(W / s.T_real)


programs = st.lists(st.lists(st.tuples(st.integers(0, 5000), st.sampled_from(["ring", "allreduce", "shift"])),
                             min_size=1, max_size=6), min_size=1, max_size=1).map(lambda x: x[0])


@settings(max_examples=40, deadline=None)
@given(p=st.integers(1, 6), steps=programs, seed=st.integers(0, 10**6),
       model=st.sampled_from(["ideal", "slow"]))
def test_split_sums_to_total_on_random_traces(p, steps, seed, model):
    """For random consistent traces, do compute + transfer + load + dependency add up to T_real?"""
    import random
    rng = random.Random(seed)
    b = TraceBuilder(p, hosts={r: f"n{r % 2}" for r in range(p)})
    for work, kind in steps:
        for r in range(p):
            b[r].compute(rng.randint(0, work))
            if kind == "ring":
                b[r].sendrecv((r + 1) % p, 100, 1, (r - 1) % p, 100, 1)
            elif kind == "allreduce":
                b[r].allreduce(8)
            else:
                reqs = [b[r].irecv((r - 1) % p, 50_000, 2), b[r].isend((r + 1) % p, 50_000, 2)]
                b[r].compute(rng.randint(0, work)).waitall(reqs)
    m = None if model == "ideal" else hockney(2.0, 500.0, inter_latency_us=5.0, inter_bandwidth_MBps=100.0,
                                              eager_limit=4096)
    s = split(b.build(m))
    assert s.T_comp + s.T_transfer + s.T_load + s.T_depend == pytest.approx(s.T_real, abs=1e-6)
    assert s.T_load >= 0 and s.T_depend >= 0 and s.T_transfer >= 0
    if s.comp_max > 0:  # with no compute at all the efficiencies are 0/0
        assert 0 < s.parallel <= 1 + 1e-12
