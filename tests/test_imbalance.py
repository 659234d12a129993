"""Tests for hpclab.imbalance, the helpers of notebook 05: configurations, the split table and its
summary, iteration windows, the pingpong-fitted model, the seed-scale simulation, node ports and
mappings of a measured trace. Exact answers where the inputs are built by hand; one cluster test
runs a real traced Poisson job end to end."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from hpclab import imbalance as imb
from hpclab.errors import HpclabError
from hpclab.trace.builder import TraceBuilder
from hpclab.trace.mapping import blocked_mapping, internode_messages, linear_mapping
from hpclab.trace.model import IDEAL, hockney
from hpclab.trace.replay import replay
from hpclab.trace.split import split

UNIFORM = {"red": 1.0, "black": 1.0, "copy": 1.0, "residuum": 1.0}


def solver_like(nranks: int, iterations: int, compute: list[int]):
    """A ring of ranks with the poisson kernel's regions: residuum, then per iteration
    red / exchange / black / exchange / residuum; rank r computes compute[r] ns per sweep."""
    b = TraceBuilder(nranks)
    for r in range(nranks):
        rb = b[r]
        with rb.region("residuum"):
            rb.allreduce(8)
        for _ in range(iterations):
            for colour in ("red", "black"):
                with rb.region(colour):
                    rb.compute(compute[r])
                with rb.region("exchange"):
                    rb.sendrecv((r + 1) % nranks, 64, 0, (r - 1) % nranks, 64, 0)
            with rb.region("residuum"):
                rb.compute(compute[r])
                rb.allreduce(8)
    return b.build()


def test_configurations_compare_2d_and_1d_grids_oversubscribing_only_when_needed():
    """Are the 2D and both 1D grids traced, oversubscribed on a 2-CPU job and not on an 8-CPU one?"""
    two = imb.configurations(2)
    assert all(c.ntasks == 4 and c.oversubscribe for c in two)
    assert {c.grid for c in two} == {"2x2", "4x1", "1x4"}
    assert {c.exchange for c in two} == {"blocking", "nonblocking"}
    four = imb.configurations(8)
    assert all(c.ntasks == 4 and not c.oversubscribe for c in four)
    assert "2D 2x2 blocking" in [c.label for c in four]
    assert [c.label for c in four if c.grid == "4x1"] == ["1D 4x1 blocking"]


def test_one_cpu_is_refused_with_a_hint():
    """Does a cluster with a single CPU per job get a clear error instead of a useless run?"""
    with pytest.raises(HpclabError, match="needs 2"):
        imb.configurations(1)


def test_specs_are_traced_and_labelled():
    """Do the specs trace the run, repeat it, and carry the configuration's label?"""
    specs = imb.poisson_specs(imb.configurations(2), n=40, iters=3, repetitions=2, experiment="t05")
    assert all(s.trace and s.repetitions == 2 and s.kernel == "poisson" for s in specs)
    assert [s.label for s in specs] == [c.label for c in imb.configurations(2)]
    assert specs[1].args.grid == "4x1" and specs[1].args.iters == 3
    assert all(s.oversubscribe for s in specs), "4 ranks on 2 CPUs are oversubscribed"


def test_oversubscription_sentence():
    """Does the notebook say when ranks outnumber cores, and only then?"""
    assert "oversubscribed" in imb.oversubscription(4, cores=2)
    assert "2.0 ranks per core" in imb.oversubscription(4, cores=2)
    assert "no oversubscription" in imb.oversubscription(2, cores=2)


def test_iteration_window_spans_one_iteration():
    """Does the window of iteration k start at the k-th red sweep and end after its residuum?"""
    tr = solver_like(2, iterations=3, compute=[1000, 1000])
    t0, t1 = imb.iteration_window(tr, 1)
    ev = tr.events
    reds = ev[(ev["name"] == "red") & (ev["call"] == "region_begin") & (ev["rank"] == 0)]["t_enter"].tolist()
    assert t0 == reds[1]
    # one iteration = 2 sweeps + residuum compute, all ranks equal, ideal network
    assert t1 - t0 == 3 * 1000
    with pytest.raises(HpclabError, match="iteration 3"):
        imb.iteration_window(tr, 3)


def test_iteration_window_needs_solver_regions():
    """Is a trace without the solver's regions refused with a hint?"""
    b = TraceBuilder(2)
    for r in range(2):
        b[r].compute(10).allreduce(8)
    with pytest.raises(HpclabError, match="red"):
        imb.iteration_window(b.build(), 0)


def test_ideal_network_keeps_the_rendezvous():
    """Does a large blocking send still wait for its receive on the protocol-keeping ideal network?"""
    b = TraceBuilder(2)
    b[0].compute(5000).recv(1, 100_000, 0)
    b[1].send(0, 100_000, 0)
    tr = b.build()
    send_exit = lambda t: int(t.events.query("rank == 1 and call == 'MPI_Send'")["t_exit"].iloc[0])  # noqa: E731
    assert send_exit(replay(tr, IDEAL)) == send_exit(replay(tr, IDEAL)) and send_exit(replay(tr, IDEAL)) < 5000
    assert send_exit(replay(tr, imb.ideal_model(4096))) == 5000
    assert imb.ideal_model(None) is IDEAL


def test_pingpong_fit_recovers_latency_and_bandwidth():
    """Does a fit to exact Hockney rows return their latency and bandwidth, ignoring big messages?"""
    lat_us, bw = 1.5, 2000.0  # MB/s = bytes per us
    rows = [{"bytes": m, "t_usec": lat_us + m / bw} for m in (0, 1024, 8192, 65536)]
    rows.append({"bytes": 4 << 20, "t_usec": 1e6})  # far off the line: must be left out of the fit
    model = imb.pingpong_model(rows, eager=4096)
    tab = imb.model_table(model)
    assert tab.loc["intra-node", "latency_us"] == pytest.approx(lat_us)
    assert tab.loc["intra-node", "bandwidth_MB_s"] == pytest.approx(bw)
    assert tab.loc["inter-node", "latency_us"] == pytest.approx(lat_us)  # defaults to intra
    assert tab.loc["intra-node", "eager_limit_bytes"] == 4096
    assert imb.model_table(imb.pingpong_model(rows[:4])).loc["intra-node", "eager_limit_bytes"] is None


def test_quoted_inter_rows_come_from_the_seed():
    """Is the inter-node link fitted to the quoted 2019 InfiniBand rows, and a wrong name refused?"""
    rows = imb.quoted_inter_rows()
    assert len(rows) >= 2 and {"bytes", "t_usec"} <= set(rows[0])
    with pytest.raises(HpclabError, match="no quoted pingpong"):
        imb.quoted_inter_rows(network="carrier pigeon")


def test_eager_limit_read_from_ompi_info():
    """Does this machine's Open MPI report a positive shared-memory eager limit?"""
    assert imb.eager_limit() > 0


def _analysed(label, rep, compute):
    tr = solver_like(len(compute), 2, compute)
    ideal = replay(tr)
    return imb.Analysed(label, rep, None, tr, ideal, split(tr, ideal))


def test_split_table_parts_add_up_and_scale_per_iteration():
    """Do compute + transfer + load + dependency equal T_real in every row, in ms per iteration?"""
    runs = [_analysed("a", 1, [1000, 2000]), _analysed("a", 2, [1000, 1000]), _analysed("b", 1, [3000, 1000])]
    tab = imb.split_table(runs, iterations=2)
    total = tab[["T_comp", "T_transfer", "T_load", "T_depend"]].sum(axis=1)
    assert np.allclose(total, tab["T_real"])
    # balanced run, ideal network: T_real = the compute of 2 iterations x 3 phases x 1000 ns
    row = tab[(tab["label"] == "a") & (tab["repetition"] == 2)].iloc[0]
    assert row["T_comp"] == pytest.approx(3 * 1000 * 1e-6)
    assert row["T_load"] == pytest.approx(0.0)


def test_summary_orders_min_median_max():
    """Does the summary keep the configurations' order and give min <= median <= max?"""
    runs = [_analysed("z", i, [1000 * i, 1000]) for i in (1, 2, 3)] + [_analysed("a", 1, [1000, 1000])]
    s = imb.summary(imb.split_table(runs))
    assert list(s.index) == ["z", "a"]
    for col in ("T_real", "T_load"):
        assert (s[(col, "min")] <= s[(col, "median")]).all() and (s[(col, "median")] <= s[(col, "max")]).all()


def test_median_run_is_the_middle_one():
    """Is the run drawn for a configuration the one with the median T_real?"""
    runs = [_analysed("x", i, [1000 * i, 1000]) for i in (3, 1, 2)]
    assert imb.median_runs(runs)["x"].repetition == 2


def test_seed_scale_counts_internode_messages_of_the_mapping():
    """Does the simulation send exactly the inter-node messages the mapping predicts, fewer when blocked?"""
    cases = (("linear", 4, 4, "blocking", "linear"), ("blocked", 4, 4, "blocking", "blocked"))
    model = hockney(1.0, 1000.0, inter_latency_us=5.0, inter_bandwidth_MBps=100.0)
    sims = imb.seed_scale(UNIFORM, model, iterations=2, cases=cases, n=40, cores=4)
    tab = imb.simulated_table(sims)
    assert tab.loc["linear", "internode_msgs"] == internode_messages(4, 4, linear_mapping(4, 4, 4), exchanges=2)
    assert tab.loc["blocked", "internode_msgs"] == internode_messages(4, 4, blocked_mapping(4, 4, 4), exchanges=2)
    assert tab.loc["blocked", "internode_msgs"] < tab.loc["linear", "internode_msgs"]
    parts = tab[["T_comp", "T_transfer", "T_load", "T_depend"]].sum(axis=1)
    assert np.allclose(parts, tab["T_real"])


def test_uneven_rows_give_the_exact_load_balance():
    """Do 10 rows over 3 ranks (4, 3, 3) give load balance mean/max = (10/3)/4 at a uniform rate?"""
    sims = imb.seed_scale(UNIFORM, IDEAL, iterations=3, cases=(("1D", 3, 1, "blocking", "linear"),),
                          n=10, cores=3)
    assert sims["1D"].split.load_balance == pytest.approx((10 / 3) / 4)


def test_unknown_mapping_is_refused():
    """Is a mapping name other than linear/blocked refused with the choices?"""
    with pytest.raises(HpclabError, match="linear"):
        imb.seed_scale(UNIFORM, IDEAL, iterations=1, cases=(("x", 2, 2, "blocking", "round-robin"),), n=8, cores=2)


def test_port_busy_is_messages_times_latency_plus_bytes_over_bandwidth():
    """Does the port bound of a node equal its inter-node messages x L + bytes / BW, and zero on one node?"""
    model = hockney(1.0, 1000.0, inter_latency_us=10.0, inter_bandwidth_MBps=100.0)
    n, iters = 20, 3
    sims = imb.seed_scale(UNIFORM, model, iterations=iters, n=n, cores=1,
                          cases=(("two nodes", 2, 1, "blocking", "linear"),))
    ports = imb.nic_busy(sims["two nodes"].trace, model, iters)
    # each node sends one row of n doubles to the other per exchange, 2 exchanges per iteration
    assert ports["internode_msgs"].tolist() == [2.0, 2.0]
    assert ports["port_busy_us"].iloc[0] == pytest.approx(2 * 10.0 + 2 * 8 * n / 100.0)
    one = imb.seed_scale(UNIFORM, model, iterations=iters, n=n, cores=2,
                         cases=(("one node", 2, 1, "blocking", "linear"),))
    assert imb.nic_busy(one["one node"].trace, model, iters)["port_busy_us"].sum() == 0
    with pytest.raises(HpclabError):
        imb.nic_busy(one["one node"].trace, model, 0)


def test_mapping_replays_of_a_measured_like_trace():
    """Does spreading ranks over nodes add inter-node messages and never speed up the replay?"""
    tr = solver_like(4, 2, [1000, 1000, 1000, 1000])
    model = hockney(1.0, 1000.0, inter_latency_us=50.0, inter_bandwidth_MBps=10.0)
    tab = imb.mapping_replays(tr, model, cores=2, grid="4x1")
    assert list(tab.index) == ["one node", "block (linear)", "cyclic"]
    assert tab.loc["one node", "internode_msgs"] == 0
    assert tab.loc["block (linear)", "internode_msgs"] < tab.loc["cyclic", "internode_msgs"]
    assert tab.loc["block (linear)", "replayed_ms"] >= tab.loc["one node", "replayed_ms"]
    with pytest.raises(HpclabError, match="grid"):
        imb.mapping_replays(tr, model, cores=2, grid="3x1")
    with pytest.raises(HpclabError, match="do not fill"):
        imb.mapping_replays(tr, model, cores=3, grid="4x1")


def test_shares_sum_to_one_and_quoted_parts_are_the_seed():
    """Do shares add to 1 per row, and are the quoted parts the seed's three grids?"""
    q = imb.quoted_parts()
    assert list(q.index) == ["2D 24x16", "1D 384x1", "1D 1x384"]
    assert np.allclose(imb.shares(q).sum(axis=1), 1.0)


def test_figures_draw_both_diagrams():
    """Does the side-by-side figure have our panel and the quoted one, with a bar per part and run?"""
    ours = pd.DataFrame({"compute": [1.0, 2.0], "transfer": [0.5, 0.1], "load imbalance": [0.1, 0.0],
                         "dependency": [0.0, 0.2]}, index=["a", "b"])
    fig = imb.side_by_side_figure(ours, "ours", "ms")
    left, right = fig.axes[:2]
    assert len(left.patches) == 4 * 2 and len(right.patches) == 4 * 3
    assert "Quoted" in right.get_title(loc="left")
    one = imb.diagram_figure(ours, "ours", "ms")
    assert len(one.axes[0].patches) == 8


def test_measured_rates_need_runs():
    """Is asking for compute rates without runs a clear error?"""
    with pytest.raises(HpclabError, match="no runs"):
        imb.measured_rates([])


@pytest.mark.cluster
def test_traced_poisson_run_end_to_end(cluster, tmp_path, monkeypatch):
    """Does a real traced Poisson job give a split whose parts add up, rates, and an iteration window?"""
    from hpclab import experiment, paths
    if not (paths.bin_dir() / "poisson").is_file() or not (paths.lib_dir() / "libmpitrace.so").is_file():
        pytest.skip("build/bin/poisson or build/lib/libmpitrace.so not built (make -C src)")
    monkeypatch.setenv("HPCLAB_RUNS", str(tmp_path / "runs"))
    cfg = imb.configurations(2)[0]
    runs = experiment.run(imb.poisson_specs([cfg], n=60, iters=5, repetitions=1, experiment="t05"),
                          progress=False, timeout=300)
    [a] = imb.analyse(runs, eager=imb.eager_limit())
    s = a.split
    assert s.T_comp + s.T_transfer + s.T_load + s.T_depend == pytest.approx(s.T_real)
    assert s.T_ideal <= s.T_real * 1.0001 + 1000  # the ideal replay is never (noticeably) slower
    t0, t1 = imb.iteration_window(a.trace, 2)
    assert t0 < t1
    rates = imb.measured_rates([a])
    assert all(v > 0 and math.isfinite(v) for v in rates.values())
