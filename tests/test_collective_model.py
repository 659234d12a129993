"""The collectives' cost model (hpclab.analysis.collectives): the textbook formulas, each
algorithm's messages priced on a network of nodes, and the model's winners against measured ones."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from hpclab.analysis import collectives as model
from hpclab.analysis.fits import hockney_fit
from hpclab.core.errors import HpclabError
from hpclab.site import mpi_libraries

ALPHA, BETA, GAMMA = 30.0, 0.008, 0.001       # us, us per byte (125 MB/s), us per reduced byte
UNIFORM = model.Network(model.Hockney(ALPHA, BETA), gamma_us_per_byte=GAMMA)
SIZES = [8, 1024, 65536, 1 << 20, 4 << 20]
CLOSED = [(op, a) for op, algs in model.ALGORITHMS.items() for a in algs if a not in model.SCHEDULE_ONLY]


@pytest.mark.parametrize("p", [2, 4, 8, 16])
@pytest.mark.parametrize("op,alg", CLOSED)
def test_each_schedule_costs_its_textbook_formula_on_a_uniform_network(op, alg, p):
    """With one rank per node and every pair alike, does each algorithm's step-by-step schedule
    cost exactly Thakur, Rabenseifner and Gropp's (or Chan et al.'s) formula, at every size?"""
    own_node = list(range(p))
    for n in SIZES:
        t = model.schedule_time(model.schedule(op, alg, p, n, segments=4), UNIFORM, own_node)
        assert t == pytest.approx(model.textbook(op, alg, p, n, ALPHA, BETA, GAMMA, segments=4), rel=1e-12)


def test_on_two_ranks_the_algorithms_meet():
    """On p = 2: is ring Allreduce exactly Rabenseifner's (2 alpha + n beta), recursive doubling
    one alpha cheaper with the same bandwidth term, and do binomial, linear and chain Bcast and
    pairwise and Bruck Alltoall all cost alpha + n beta?"""
    n = 1 << 20
    ring = model.textbook("allreduce", "ring", 2, n, ALPHA, BETA)
    assert ring == model.textbook("allreduce", "rabenseifner", 2, n, ALPHA, BETA) == pytest.approx(2 * ALPHA + n * BETA)
    assert model.textbook("allreduce", "recursive_doubling", 2, n, ALPHA, BETA) == pytest.approx(ring - ALPHA)
    one = ALPHA + n * BETA
    for op, alg in [("bcast", "binomial"), ("bcast", "linear"), ("bcast", "chain"), ("alltoall", "pairwise"),
                    ("alltoall", "bruck"), ("alltoall", "linear_alltoall")]:
        assert model.textbook(op, alg, 2, n, ALPHA, BETA) == pytest.approx(one), (op, alg)


@pytest.mark.parametrize("op,alg", CLOSED)
def test_costs_grow_with_the_message(op, alg):
    """Does every algorithm's cost grow with the message size, on a uniform network and on two
    nodes of two ranks in either placement?"""
    sizes = np.geomspace(1, 1 << 24, 40)
    assert np.all(np.diff(model.textbook(op, alg, 8, sizes, ALPHA, BETA, GAMMA)) > 0)
    net = model.Network(model.Hockney(ALPHA, BETA), model.Hockney(2.0, 0.0005))
    for order in ("block", "cyclic"):
        nodes = model.placement(4, 2, order)
        t = [model.schedule_time(model.schedule(op, alg, 4, n, 1, nodes), net, nodes) for n in sizes]
        assert np.all(np.diff(t) > 0), order


def test_recursive_doubling_gives_way_to_rabenseifner_where_the_formulas_cross():
    """Is the predicted switch from recursive doubling to Rabenseifner's Allreduce on 4 ranks at
    n = lg p alpha / ((lg p - 2 (p-1)/p) beta) = 4 alpha / beta, and the switch from binomial
    Bcast to scatter-allgather on 8 ranks at n = 3 alpha / ((3 - 7/4) beta) = 2.4 alpha / beta?"""
    net = model.Network(model.Hockney(ALPHA, BETA))
    [(below, above, at)] = model.winner_changes(net, 4, 4, "allreduce", ["recursive_doubling", "rabenseifner"], "block")
    assert (below, above) == ("recursive_doubling", "rabenseifner")
    assert at == pytest.approx(4 * ALPHA / BETA, rel=1e-6)
    [(below, above, at)] = model.winner_changes(net, 8, 8, "bcast", ["binomial", "scatter_allgather"], "block")
    assert (below, above) == ("binomial", "scatter_allgather")
    assert at == pytest.approx(3 * ALPHA / (1.25 * BETA), rel=1e-6)


def test_placement_moves_the_bytes_that_cross_the_link():
    """On two nodes of two ranks, with a free path inside a node: does a cyclic placement send
    every ring step's bytes over the link (twice block's time for large messages), does recursive
    doubling cross the link once either way (the same time), and does Rabenseifner's send half the
    block placement's bytes over it (its first, largest exchange stays inside a node)?"""
    free = model.Hockney(0.0, 0.0)
    net = model.Network(model.Hockney(0.0, BETA), free)
    n = 4 << 20

    def t(alg, order):
        nodes = model.placement(4, 2, order)
        return model.schedule_time(model.schedule("allreduce", alg, 4, n, 1, nodes), net, nodes)

    assert t("ring", "cyclic") == pytest.approx(2 * t("ring", "block"))
    assert t("recursive_doubling", "cyclic") == pytest.approx(t("recursive_doubling", "block"))
    assert t("rabenseifner", "cyclic") == pytest.approx(2 * t("rabenseifner", "block"))
    # block ring: one of each node's two ranks sends n/4 over the link per step, 6 steps
    assert t("ring", "block") == pytest.approx(6 * n / 4 * BETA)


def test_the_two_binomial_trees_put_their_second_step_on_opposite_links():
    """On two nodes of two ranks: does MPICH's tree (farthest child first) send its first message
    over the link in the block numbering and Open MPI's (nearest first) in the cyclic one, so each
    pays the link twice at once in the other numbering (both of a node's ranks send across)?"""
    net = model.Network(model.Hockney(0.0, BETA), model.Hockney(0.0, 0.0))
    n = 1 << 20

    def t(alg, order):
        nodes = model.placement(4, 2, order)
        return model.schedule_time(model.schedule("bcast", alg, 4, n, 1, nodes), net, nodes)

    assert t("binomial", "block") == pytest.approx(n * BETA) and t("binomial", "cyclic") == pytest.approx(2 * n * BETA)
    assert t("binomial_near_first", "cyclic") == pytest.approx(n * BETA)
    assert t("binomial_near_first", "block") == pytest.approx(2 * n * BETA)


def test_the_hierarchical_algorithm_crosses_the_link_once_per_node():
    """Does the node-aware Allreduce on two nodes of two ranks send one exchange of n over the
    link, whatever the placement, and Bcast one message from the root's node?"""
    free = model.Hockney(0.0, 0.0)
    net = model.Network(model.Hockney(0.0, BETA), free)
    n = 1 << 20
    for order in ("block", "cyclic"):
        nodes = model.placement(4, 2, order)
        assert model.schedule_time(model.schedule("allreduce", "hierarchical", 4, n, 1, nodes), net, nodes) \
            == pytest.approx(n * BETA)
        assert model.schedule_time(model.schedule("bcast", "hierarchical", 4, n, 1, nodes), net, nodes) \
            == pytest.approx(n * BETA)


def test_a_fit_becomes_a_path_and_bad_inputs_are_refused():
    """Does a Hockney fit give alpha (its latency, or the measured one) and beta = 1/BW, and are a
    rank count that is no power of two, an unknown algorithm and an uneven placement refused?"""
    sizes = np.array([1 << k for k in range(10, 23)], dtype=float)
    fit = hockney_fit(sizes, 12.0 + sizes / 125.0)
    path = model.Hockney.from_fit(fit)
    assert path.alpha_us == pytest.approx(12.0) and path.beta_us_per_byte == pytest.approx(1 / 125)
    assert model.Hockney.from_fit(fit, latency_us=40.0).alpha_us == 40.0
    with pytest.raises(HpclabError, match="power of two"):
        model.textbook("allreduce", "ring", 6, 8, ALPHA, BETA)
    with pytest.raises(HpclabError, match="no schedule"):
        model.schedule("allreduce", "knomial", 4, 8)
    with pytest.raises(HpclabError, match="evenly"):
        model.placement(3, 2, "block")
    assert model.placement(4, 2, "block") == [0, 0, 1, 1] and model.placement(4, 2, "cyclic") == [0, 1, 0, 1]


def test_every_model_a_library_names_is_one_the_model_prices():
    """Is every `model` the MPI libraries' records give an algorithm (hpclab.site.mpi_libraries)
    one this module has a schedule for, under the same operation?"""
    for lib in mpi_libraries.LIBRARIES:
        if lib.collectives is None:
            continue
        for op, algs in lib.collectives.algorithms.items():
            for a in algs:
                if a.model:
                    assert a.model in model.ALGORITHMS[op], (lib.name, op, a)
                    model.schedule(op, a.model, 4, 64, 1, [0, 0, 1, 1])


def _measured(values: dict[tuple[str, int], list[float]]) -> pd.DataFrame:
    rows = [{"op": "allreduce", "order": "block", "algorithm": alg, "bytes": n, "round": k, "t_max_usec": t}
            for (alg, n), ts in values.items() for k, t in enumerate(ts)]
    return pd.DataFrame(rows)


def test_the_measured_winner_counts_only_where_the_statistics_decide_it():
    """With six paired rounds: is a clear winner 'decided', two algorithms within 1 % a 'tie'
    (either counts as the model's right answer), overlapping noisy runs 'undecided' (not
    counted), and does agreement count right answers among the counted cells only?"""
    rng = np.random.default_rng(38)
    noisy = lambda m, s: list(m * np.exp(rng.normal(0, s, 6)))    # noqa: E731
    table = _measured({("ring", 8): noisy(100, 0.01), ("recursive_doubling", 8): noisy(50, 0.01),
                       ("ring", 1024): [100, 101, 100.5, 100.2, 100.8, 100.1],
                       ("recursive_doubling", 1024): [100.3, 100.6, 100.1, 100.9, 100.4, 100.2],
                       ("ring", 65536): noisy(100, 0.5), ("recursive_doubling", 65536): noisy(100, 0.5)})
    found = model.measured_winners(table).set_index("bytes")
    assert found.loc[8, "measured"] == "recursive_doubling" and found.loc[8, "outcome"] == "decided"
    assert found.loc[1024, "outcome"] == "tie"
    assert found.loc[65536, "outcome"] == "undecided"
    predicted = pd.DataFrame({"op": "allreduce", "order": "block", "bytes": [8, 1024, 65536],
                              "algorithm": ["recursive_doubling", "ring", "ring"]})
    both = model.against_model(model.measured_winners(table), predicted)
    assert list(both["agree"]) == [True, True, found.loc[65536, "measured"] == "ring"]
    assert model.agreement(both) == model.Agreement(right=2, counted=2, cells=3)
    assert model.agreement(both).fraction == 1.0


def test_predict_and_winners_tabulate_every_cell():
    """Does predict give one row per (order, op, algorithm, size), and winners the cheapest per
    cell with its lead over the runner-up?"""
    net = model.Network(model.Hockney(ALPHA, BETA), model.Hockney(2.0, 0.0005))
    pred = model.predict(net, 4, 2, SIZES, {"allreduce": ["ring", "recursive_doubling"]})
    assert len(pred) == 2 * 2 * len(SIZES)
    best = model.winners(pred)
    assert len(best) == 2 * len(SIZES) and (best["lead"] >= 1).all()
    small = best[(best["bytes"] == 8)]
    assert set(small["algorithm"]) == {"recursive_doubling"}


def _reached(steps, p):
    """Who holds whose contribution after the steps (a message hands on all its sender holds)."""
    holds = [{r} for r in range(p)]
    for s in steps:
        before = [set(h) for h in holds]
        for src, dst, _ in s.messages:
            holds[dst] |= before[src]
    return holds


@pytest.mark.parametrize("p", [3, 6, 24, 384])
@pytest.mark.parametrize("alg", ["recursive_doubling", "rabenseifner", "ring"])
def test_an_allreduce_on_any_rank_count_reaches_every_rank(alg, p):
    """Beyond powers of two (MPICH folds the extra ranks first): does every rank end with every
    rank's contribution?"""
    everyone = set(range(p))
    assert all(h == everyone for h in _reached(model.schedule("allreduce", alg, p, 1024), p))


@pytest.mark.parametrize("p", [3, 6, 24, 384])
def test_the_binomial_scatter_gives_each_rank_one_message_holding_its_block(p):
    n = 384.0 * 64
    steps = model.schedule("bcast", "scatter_ring_allgather", p, n)[: (p - 1).bit_length()]
    got = [m for s in steps for m in s.messages]
    assert sorted(dst for _, dst, _ in got) == list(range(1, p))
    assert all(b >= n / p - 1e-9 for _, _, b in got)
    assert sum(b for src, _, b in got if src == 0) == pytest.approx(n - n / p)


@pytest.mark.parametrize("p", [5, 24, 384])
def test_bruck_on_any_rank_count_sends_each_block_once_per_set_bit(p):
    steps = model.schedule("alltoall", "bruck", p, 1.0)
    assert len(steps) == (p - 1).bit_length()
    per_rank = sum(s.messages[0][2] for s in steps)
    assert per_rank == sum(bin(j).count("1") for j in range(p))


def test_step_time_matches_the_rule_written_out_message_by_message():
    """The step's time in arrays against the rule in words: each rank's sends and receives one
    after another, each node's bytes on its link one after another, on a random step."""
    rng = np.random.default_rng(7)
    p, nodes = 48, 4
    node_of = [r % nodes for r in range(p)]
    msgs = tuple((int(a), int(b), float(c)) for a, b, c in
                 zip(rng.integers(0, p, 200), rng.integers(0, p, 200), rng.integers(0, 1 << 16, 200)) if a != b)
    net = model.Network(model.Hockney(5.0, 0.001), model.Hockney(0.5, 0.0002), gamma_us_per_byte=0.0)
    send, recv, out, into = {}, {}, {}, {}
    for src, dst, b in msgs:
        t = net.path(node_of[src] == node_of[dst]).time(b)
        send[src] = send.get(src, 0) + t
        recv[dst] = recv.get(dst, 0) + t
        if node_of[src] != node_of[dst]:
            out[node_of[src]] = out.get(node_of[src], 0) + b
            into[node_of[dst]] = into.get(node_of[dst], 0) + b
    expected = max([*send.values(), *recv.values(), *(net.inter.time(b) for b in [*out.values(), *into.values()])])
    assert model.step_time(model.Step(msgs), net, node_of) == pytest.approx(float(expected), rel=1e-12)
