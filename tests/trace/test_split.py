"""The four-way split and POP efficiencies on traces with known answers (ANALYSIS-NOTES.md)."""

import pytest
from hypothesis import given, settings, strategies as st

from hpclab.trace.builder import TraceBuilder
from hpclab.trace.model import IDEAL, hockney
from hpclab.trace.replay import replay
from hpclab.trace.split import rank_times, split
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


# ---- the five-part split: replays on CPU bursts, and the rest -------------------------------

NET = hockney(1.0, 1000.0)  # 1 us + 1 ns per byte: 8 B cost 1008 ns


def test_descheduled_rank_leaves_exactly_its_switched_out_time_as_the_rest():
    """Rank 0 computes 1000 ns of CPU in 3000 ns of wall time (switched out 2000 ns), then sends
    8 B to rank 1, which computed 1000 ns: is the split compute 1000, load 0, dependency 0,
    transfer 1008 (the model's), and the rest exactly the 2000 ns rank 0 did not run?"""
    b = TraceBuilder(2)
    b[0].compute(3000, cpu=1000).send(1, 8)
    b[1].compute(1000).recv(0, 8)
    real = b.build(NET)
    s = split(real, model=NET)
    assert s.cpu_bursts and s.model == NET.name
    assert (s.T_real, s.T_ideal, s.T_model) == (4008, 1000, 2008)
    assert (s.T_comp, s.T_load, s.T_depend, s.T_transfer, s.T_rest) == (1000, 0, 0, 1008, 2000)
    assert s.T_off_cpu == 1000  # mean over the ranks of wall - CPU in compute
    assert rank_times(real)["not_running_ns"].tolist() == [2000, 0]
    assert sum(s.parts().values()) == s.T_real


def test_two_ranks_sharing_a_core_leave_half_the_time_as_the_rest():
    """Two ranks, each computing d CPU ns between exchanges while sharing one core (2d of wall
    time): does the replay on CPU bursts give the dedicated-core time k d, and the rest half of
    T_real (ANALYSIS-NOTES' test case)?"""
    d, k = 5000, 4
    b = TraceBuilder(2)
    for _ in range(k):
        for r in range(2):
            b[r].compute(2 * d, cpu=d).sendrecv(1 - r, 64, 0, 1 - r, 64, 0)
    s = split(b.build(), model=IDEAL)
    assert s.T_real == 2 * k * d and s.T_ideal == s.T_model == k * d
    assert s.T_rest == s.T_real / 2 and s.T_comp == k * d and s.T_comp_wall == 2 * k * d
    # without CPU times the same run looks like compute, with no rest
    old = split(b.build(), model=IDEAL, ideal=replay(b.build(), bursts="wall"),
                modelled=replay(b.build(), bursts="wall"))
    assert old.T_ideal == 2 * k * d


def test_without_a_model_the_split_is_the_four_way_one():
    """Without a model, is T_model = T_real, the rest 0 and T_transfer = T_real - T_ideal?"""
    b = TraceBuilder(2)
    b[0].compute(3000, cpu=1000).send(1, 8)
    b[1].compute(1000).recv(0, 8)
    s = split(b.build(NET))
    assert (s.T_model, s.T_rest, s.T_transfer, s.model) == (4008, 0, 3008, "")


@settings(max_examples=30, deadline=None)
@given(p=st.integers(1, 5), steps=programs, seed=st.integers(0, 10**6),
       links=st.sampled_from([0, 1]), off=st.booleans())
def test_five_parts_sum_to_the_real_time_and_the_rest_is_the_switched_out_time(p, steps, seed, links, off):
    """For random programs recorded on a model (ranks sometimes switched out in their bursts),
    do the five parts add up to T_real exactly, and is the rest 0 when no rank was switched out
    (the replay on the recording model reproduces the run)?"""
    import random
    rng = random.Random(seed)
    b = TraceBuilder(p, hosts={r: f"n{r % 2}" for r in range(p)})
    for work, kind in steps:
        for r in range(p):
            w = rng.randint(0, work)
            b[r].compute(w, cpu=rng.randint(0, w) if off else w)
            if kind == "ring":
                b[r].sendrecv((r + 1) % p, 100, 1, (r - 1) % p, 100, 1)
            elif kind == "allreduce":
                b[r].allreduce(8)
            else:
                reqs = [b[r].irecv((r - 1) % p, 50_000, 2), b[r].isend((r + 1) % p, 50_000, 2)]
                b[r].compute(rng.randint(0, work)).waitall(reqs)
    m = hockney(2.0, 500.0, inter_latency_us=5.0, inter_bandwidth_MBps=100.0, eager_limit=4096,
                links=links)
    s = split(b.build(m), model=m)
    assert sum(s.parts().values()) == pytest.approx(s.T_real, abs=1e-6)
    if not off:
        assert s.T_rest == 0 and s.T_off_cpu == 0
