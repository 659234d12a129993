"""Tests for hpclab.analysis.imbalance, with the lesson recipes of hpclab.course.lessons.imbalance and
the figures of hpclab.plots.imbalance (notebooks 05 and 05b): configurations, the split table and its
summary, iteration windows, the pingpong-fitted model, the seed-scale simulation, node ports and
mappings of a measured trace. Exact answers where the inputs are built by hand; one cluster test
runs a real traced Poisson job end to end."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from hpclab.analysis import imbalance as imb
from hpclab.plots import imbalance as imb_plots
from hpclab.course.lessons import imbalance as lesson
from hpclab.core.errors import HpclabError
from hpclab.trace.builder import TraceBuilder
from hpclab.trace.mapping import blocked_mapping, internode_messages, linear_mapping
from hpclab.trace.model import IDEAL, hockney
from hpclab.trace.replay import replay
from hpclab.trace.split import split
from hpclab.site import ompi

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
    two = lesson.configurations(2)
    assert all(c.ntasks == 4 and c.oversubscribe for c in two)
    assert {c.grid for c in two} == {"2x2", "4x1", "1x4"}
    assert {c.exchange for c in two} == {"blocking", "nonblocking"}
    four = lesson.configurations(8)
    assert all(c.ntasks == 4 and not c.oversubscribe for c in four)
    assert "2D 2x2 blocking" in [c.label for c in four]
    assert [c.label for c in four if c.grid == "4x1"] == ["1D 4x1 blocking"]


def test_one_cpu_is_refused_with_a_hint():
    """Does a cluster with a single CPU per job get a clear error instead of a useless run?"""
    with pytest.raises(HpclabError, match="needs 2"):
        lesson.configurations(1)


def test_specs_are_traced_and_labelled():
    """Do the specs trace the run, repeat it, and carry the configuration's label?"""
    specs = lesson.poisson_specs(lesson.configurations(2), n=40, iters=3, repetitions=2, experiment="t05")
    assert all(s.trace and s.repetitions == 2 and s.kernel == "poisson" for s in specs)
    assert [s.label for s in specs] == [c.label for c in lesson.configurations(2)]
    assert specs[1].args.grid == "4x1" and specs[1].args.iters == 3
    assert all(s.oversubscribe for s in specs), "4 ranks on 2 CPUs are oversubscribed"


def test_oversubscription_sentence():
    """Does the notebook say when ranks outnumber cores, and only then?"""
    assert "oversubscribed" in lesson.oversubscription(4, cores=2)
    assert "2.0 ranks per core" in lesson.oversubscription(4, cores=2)
    assert "no oversubscription" in lesson.oversubscription(2, cores=2)


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
    assert ompi.eager_limit() > 0


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
    fig = imb_plots.side_by_side_figure(ours, "ours", "ms")
    left, right = fig.axes[:2]
    assert len(left.patches) == 4 * 2 and len(right.patches) == 4 * 3
    assert "Quoted" in right.get_title(loc="left")
    one = imb_plots.diagram_figure(ours, "ours", "ms")
    assert len(one.axes[0].patches) == 8


def test_measured_rates_need_runs():
    """Is asking for compute rates without runs a clear error?"""
    with pytest.raises(HpclabError, match="no runs"):
        imb.measured_rates([])


@pytest.mark.cluster
def test_traced_poisson_run_end_to_end(cluster, tmp_path, monkeypatch):
    """Does a real traced Poisson job give a split whose parts add up, rates, and an iteration window?"""
    from hpclab.jobs import experiment
    from hpclab.core import paths
    if not (paths.bin_dir() / "poisson").is_file() or not (paths.lib_dir() / "libmpitrace.so").is_file():
        pytest.skip("build/bin/poisson or build/lib/libmpitrace.so not built (make -C src)")
    monkeypatch.setenv("HPCLAB_RUNS", str(tmp_path / "runs"))
    cfg = lesson.configurations(2)[0]
    runs = experiment.run(lesson.poisson_specs([cfg], n=60, iters=5, repetitions=1, experiment="t05"),
                          progress=False, timeout=300)
    [a] = imb.analyse(runs, eager=ompi.eager_limit())
    s = a.split
    assert s.T_comp + s.T_transfer + s.T_load + s.T_depend == pytest.approx(s.T_real)
    assert s.T_ideal <= s.T_real * 1.0001 + 1000  # the ideal replay is never (noticeably) slower
    t0, t1 = imb.iteration_window(a.trace, 2)
    assert t0 < t1
    rates = imb.measured_rates([a])
    assert all(v > 0 and math.isfinite(v) for v in rates.values())


# --- the naive exchange's chain (item 3 of issue 15) ---------------------------------------------


def chain_exchange(how: str, nbytes: int, compute: list[list[int]]):
    """A 1D chain of ranks (not periodic); per iteration each rank computes compute[it][rank] ns,
    then exchanges halos: 'naive' as the 2014 code and src/poisson --exchange naive (send up,
    receive from below, send down, receive from above), or 'nonblocking' (Irecv both, Isend
    both, Waitall)."""
    p = len(compute[0])
    b = TraceBuilder(p)
    for r in range(p):
        up, down = (r + 1 if r < p - 1 else None), (r - 1 if r > 0 else None)
        rb = b[r]
        for it in compute:
            rb.compute(it[r])
            with rb.region("exchange"):
                if how == "naive":
                    rb.send(up, nbytes, 1).recv(down, nbytes, 1).send(down, nbytes, 0).recv(up, nbytes, 0)
                else:
                    reqs = [rb.irecv(f, nbytes, t) for f, t in ((down, 1), (up, 0)) if f is not None]
                    reqs += [rb.isend(to, nbytes, t) for to, t in ((up, 1), (down, 0)) if to is not None]
                    rb.waitall(reqs)
    return b.build()


def end_of(trace, rank: int) -> int:
    ev = trace.events
    return int(ev.loc[ev["rank"] == rank, "t_exit"].max())


def test_naive_exchange_above_the_eager_limit_makes_every_rank_wait_for_the_whole_chain():
    """On the ideal network with this machine's protocol (eager limit 4096 B), does one late rank
    at the top of a 4-rank chain hold up rank 0 under the naive order with 8 kB messages (its
    upward send waits for every rank above), but not with 1 kB (eager) messages, and not in the
    non-blocking exchange, where rank 0 waits only for its neighbour? With rank 0 late in one
    iteration and rank 3 in the next, is the naive order's extra time all dependency (9000 ns),
    the load imbalance the same, and the non-blocking exchange free of dependency?"""
    ideal = imb.ideal_model(4096)
    one = [[1000, 1000, 1000, 10_000]]
    for how, nbytes, rank0_end in (("naive", 8192, 10_000), ("naive", 1024, 1000), ("nonblocking", 8192, 1000)):
        got = replay(chain_exchange(how, nbytes, one), ideal)
        assert end_of(got, 0) == rank0_end, (how, nbytes)
        # the chain unwinds: nobody waits past the last arrival (no deadlock on a non-periodic chain)
        assert max(end_of(got, r) for r in range(4)) == 10_000
    two = [[10_000, 1000, 1000, 1000], [1000, 1000, 1000, 10_000]]
    splits = {}
    for how in ("naive", "nonblocking"):
        tr = chain_exchange(how, 8192, two)
        splits[how] = split(tr, replay(tr, ideal))
    naive, nonblocking = splits["naive"], splits["nonblocking"]
    assert naive.T_ideal == 20_000 and nonblocking.T_ideal == 11_000
    assert naive.T_comp == nonblocking.T_comp == 6500 and naive.T_load == nonblocking.T_load == 4500
    assert naive.T_depend == pytest.approx(9000) and nonblocking.T_depend == pytest.approx(0)


@pytest.mark.parametrize("ranks", [2, 4, 8])
def test_naive_chain_costs_two_message_times_per_link_on_a_network_with_latency(ranks):
    """With every rank arriving at once, does the naive exchange of 8 kB (rendezvous) messages on
    a network of latency L and bandwidth BW take 2 (P - 1) message times (L + 8 kB / BW), the
    upward and the downward chain one link after the other, while the non-blocking one takes
    one, whatever P? And does dependency_table report that as T_chain, relative to non-blocking?"""
    model = hockney(1.0, 4000.0, eager_limit=4096)
    message = 1000 + 8192 / 4.0  # ns: 1 us + 8192 B at 4 bytes per ns
    runs = []
    for how in ("naive", "nonblocking"):
        tr = chain_exchange(how, 8192, [[50_000] * ranks] * 3)
        ideal = replay(tr, imb.ideal_model(4096))
        assert imb.split_table([imb.Analysed("x", 1, None, tr, ideal, split(tr, ideal))])["T_depend"].iloc[0] == 0
        runs.append(imb.Analysed(f"1D {ranks}x1 {how}", 1, None, tr, ideal, split(tr, ideal)))
    tab = imb.dependency_table(runs, model=model).set_index("exchange")
    assert tab.loc["naive", "T_chain"] * 1e9 == pytest.approx(3 * 2 * (ranks - 1) * message, abs=3)
    assert tab.loc["nonblocking", "T_chain"] * 1e9 == pytest.approx(3 * message, abs=3)
    assert tab.loc["naive", "chain_vs_nonblocking"] == pytest.approx(2 * (ranks - 1), rel=1e-3)
    assert "T_chain" not in imb.dependency_table(runs).columns


def test_rendezvous_n_puts_every_halo_message_above_the_eager_limit():
    """Is rendezvous_n the smallest multiple of 64 whose smallest halo message is >= 2 x the eager
    limit, on 1D and 2D grids, and a 1x1 grid refused?"""
    assert imb.halo_bytes("4x1", 1024) == 8 * 1024  # 4x1: rows of n doubles along x only
    assert imb.halo_bytes("2x2", 1000) == 8 * 500
    assert imb.halo_bytes("3x1", 100) == 800 and imb.halo_bytes("1x1", 100) == 0
    for grid in ("4x1", "1x4", "2x2", "8x1", "2x4"):
        n = imb.rendezvous_n(grid, 4096)
        assert n % 64 == 0 and imb.halo_bytes(grid, n) >= 8192 > imb.halo_bytes(grid, n - 64)
    assert imb.rendezvous_n("4x1", 4096) == 1024 and imb.rendezvous_n("2x2", 4096) == 2048
    with pytest.raises(HpclabError, match="one rank"):
        imb.rendezvous_n("1x1", 4096)


def test_dependency_configurations_compare_naive_with_nonblocking():
    """Are the naive and non-blocking exchange traced on the same grid, oversubscribed on 2 CPUs?"""
    two = lesson.dependency_configurations(2)
    assert [(c.grid, c.exchange, c.oversubscribe) for c in two] == [("4x1", "naive", True), ("4x1", "nonblocking", True)]
    assert not any(c.oversubscribe for c in lesson.dependency_configurations(4))
    assert [c.label for c in lesson.dependency_configurations(8, "2x2")] == ["2D 2x2 naive", "2D 2x2 nonblocking"]
    specs = lesson.poisson_specs(two, n=1024, iters=3, repetitions=1)
    assert [s.args.exchange for s in specs] == ["naive", "nonblocking"]


def test_dependency_table_gives_the_ratio_to_the_nonblocking_median():
    """Does the dependency table name each run's exchange and divide its T_depend by the median of
    the non-blocking runs (NaN when there are none)?"""
    runs = []
    for how, rep, top in (("naive", 1, 10_000), ("naive", 2, 20_000), ("nonblocking", 1, 10_000),
                          ("nonblocking", 2, 20_000), ("nonblocking", 3, 30_000)):
        # non-blocking: neighbours late one after the other, so it has some dependency too
        late = [[top, 1000, 1000, 1000], [1000, 1000, 1000, top] if how == "naive" else [1000, top, 1000, 1000]]
        tr = chain_exchange(how, 8192, late)
        ideal = replay(tr, imb.ideal_model(4096))
        runs.append(imb.Analysed(f"1D 4x1 {how}", rep, None, tr, ideal, split(tr, ideal)))
    tab = imb.dependency_table(runs)
    assert list(tab["exchange"]) == ["naive"] * 2 + ["nonblocking"] * 3
    ref = tab.loc[tab["exchange"] == "nonblocking", "T_depend"].median()
    assert ref > 0
    assert np.allclose(tab["depend_vs_nonblocking"], tab["T_depend"] / ref)
    assert tab["depend_vs_nonblocking"].iloc[2:].median() == pytest.approx(1.0)
    assert imb.dependency_table(runs[:2])["depend_vs_nonblocking"].isna().all()


# --- compute bursts from single-rank runs of each subdomain shape (item 4 of issue 15) -------------

TWO_CASES = (("tile", 4, 4, "blocking", "linear"), ("strip", 1, 16, "blocking", "linear"))


def test_subdomain_shapes_keep_the_row_length_and_scale_the_points():
    """Does the seed's 1x384 strip (3600 x 9) keep its 9-point rows and get 4x the rows at scale 4,
    the 24x16 tile (150 x 225) 4x its rows, and keep='aspect' double both sides instead?"""
    tab = imb.subdomain_shapes(lesson.SEED_CASES, scale=4.0).set_index("case")
    assert tuple(tab.loc["1D 1x384", ["seed_x", "seed_y", "local_x", "local_y"]]) == (3600, 9, 14400, 9)
    assert tuple(tab.loc["2D 24x16", ["seed_x", "seed_y", "local_x", "local_y"]]) == (150, 225, 600, 225)
    assert tuple(tab.loc["1D 384x1", ["seed_x", "seed_y", "local_x", "local_y"]]) == (9, 3600, 36, 3600)
    assert tab.loc["1D 1x384", "ranks"] == 240  # 3600 = 144 x 10 + 240 x 9: the 9-point strips win
    assert (tab["points"] == 4 * tab["seed_x"] * tab["seed_y"]).all()
    asp = imb.subdomain_shapes(lesson.SEED_CASES, scale=4.0, keep="aspect").set_index("case")
    assert tuple(asp.loc["1D 1x384", ["local_x", "local_y"]]) == (7200, 18)
    assert tuple(asp.loc["2D 24x16", ["local_x", "local_y"]]) == (300, 450)
    one = imb.subdomain_shapes(lesson.SEED_CASES, scale=1.0).set_index("case")
    assert (one["local_x"] == one["seed_x"]).all() and (one["local_y"] == one["seed_y"]).all()
    with pytest.raises(HpclabError, match="keep"):
        imb.subdomain_shapes(lesson.SEED_CASES, keep="square")
    with pytest.raises(HpclabError, match="positive"):
        imb.subdomain_shapes(lesson.SEED_CASES, scale=0)


def test_cache_scale_is_this_machines_l2_over_ivy_bridges():
    """Is the default scale this machine's L2 per core over the seed's 256 KiB?"""
    assert imb.l2_bytes() > 0
    assert imb.cache_scale() == pytest.approx(imb.l2_bytes() / (256 * 1024))


def test_subdomain_specs_run_each_distinct_shape_once_on_one_rank():
    """Is there one single-rank spec per distinct local shape (cases sharing a shape share runs),
    solving that rectangle with --shape?"""
    shapes = imb.subdomain_shapes(lesson.SEED_CASES, scale=1.0)  # the seed's five cases: three distinct shapes
    specs = lesson.subdomain_specs(shapes, repetitions=2)
    assert len(specs) == 3 and all(s.ntasks == 1 and s.repetitions == 2 for s in specs)
    assert sorted(s.args.shape for s in specs) == ["150x225", "3600x9", "9x3600"]
    assert all(s.args.n is None and s.args.grid == "1x1" for s in specs)
    strip = next(s for s in specs if s.args.shape == "3600x9")
    assert strip.args.iters == round(lesson.UPDATES_PER_RUN / (3600 * 9))
    assert strip.args.to_argv()[:2] == ["--shape", "3600x9"]
    from hpclab.spec import model as spec
    with pytest.raises(HpclabError, match="not both"):
        spec.make_spec(kernel="poisson", ntasks=1, args={"n": 8, "shape": "8x4"})
    with pytest.raises(HpclabError, match="shape"):
        spec.make_spec(kernel="poisson", ntasks=1, args={"shape": "8 by 4"})


def hand_table(rates: dict[str, list[float]]) -> pd.DataFrame:
    """A subdomain table by hand: per case, runs with the given ns per point in every phase."""
    rows = []
    for case, values in rates.items():
        for k, v in enumerate(values):
            rows.append({"case": case, "run": f"{case}-{k}", "red": v, "black": v, "copy": v, "residuum": v,
                         "ns_per_point": 4 * v})
    return pd.DataFrame(rows)


@pytest.mark.parametrize("slow", [1.0, 2.5, 3.0])
def test_simulation_takes_each_cases_compute_from_its_single_rank_runs(slow):
    """With hand-made single-rank rates (the strip `slow` x the tile, median of three runs each),
    does the simulated strip compute exactly `slow` x as long as the tile (both have 64 points
    per rank here), and is a case without rates refused?"""
    table = hand_table({"tile": [0.5, 1.0, 9.0], "strip": [slow, slow * 0.5, slow * 7]})
    rates = imb.subdomain_rates(table)
    assert rates == {"tile": dict.fromkeys(("red", "black", "copy", "residuum"), 1.0),
                     "strip": dict.fromkeys(("red", "black", "copy", "residuum"), slow)}
    sims = imb.seed_scale(rates, IDEAL, iterations=3, cases=TWO_CASES, n=32, cores=16)
    assert sims["strip"].split.T_comp == pytest.approx(slow * sims["tile"].split.T_comp)
    assert sims["tile"].split.T_comp == pytest.approx(3 * 4 * 64 * 1.0)  # iterations x phases x points
    with pytest.raises(HpclabError, match="strip"):
        imb.seed_scale({"tile": rates["tile"]}, IDEAL, iterations=1, cases=TWO_CASES, n=32, cores=16)


def test_subdomain_summary_ranks_cases_by_measured_rate():
    """Does the summary give each case's median ns per point, relative to the fastest, with its runs?"""
    table = hand_table({"tile": [1.0, 1.0, 2.0], "strip": [3.0, 2.0, 4.0]})
    for c, g in (("tile", "4x4"), ("strip", "1x16")):
        table.loc[table["case"] == c, ["grid", "seed_x", "seed_y", "local_x", "local_y"]] = [g, 8, 8, 8, 8]
    s = imb.subdomain_summary(table)
    assert s.loc["tile", "vs_fastest"] == 1.0 and s.loc["strip", "vs_fastest"] == pytest.approx(3.0)
    assert s.loc["strip", "runs"] == "strip-0, strip-1, strip-2"


def test_subdomain_figure_has_one_bar_per_distinct_shape():
    """Does the figure draw one bar per distinct subdomain (cases sharing a shape share a bar)?"""
    table = hand_table({"tile": [1.0, 2.0], "tile again": [1.0, 2.0], "strip": [3.0, 4.0]})
    for c, shape in (("tile", 8), ("tile again", 8), ("strip", 2)):
        table.loc[table["case"] == c, ["grid", "seed_x", "seed_y", "local_x", "local_y"]] = ["g", 8, shape, 8, shape]
    fig = imb_plots.subdomain_figure(table)
    assert len(fig.axes[0].patches) == 2


@pytest.mark.cluster
def test_measure_subdomains_on_real_slurm(cluster, tmp_path, monkeypatch):
    """Do single-rank Slurm jobs of each (tiny) subdomain shape give a tidy table with positive
    rates per phase and the run ids of real, completed run folders?"""
    from hpclab.jobs import experiment
    from hpclab.core import paths
    if not (paths.bin_dir() / "poisson").is_file():
        pytest.skip("build/bin/poisson not built (make -C src)")
    monkeypatch.setenv("HPCLAB_RUNS", str(tmp_path / "runs"))
    tab = lesson.measure_subdomains(TWO_CASES, n=32, scale=1.0, iters=20, repetitions=1, progress=False,
                                 timeout=300, experiment="t05-subdomains")
    assert list(tab["case"]) == ["tile", "strip"]
    assert tuple(tab.iloc[1][["local_x", "local_y"]]) == (32, 2)
    assert (tab[["red", "black", "copy", "residuum", "ns_per_point"]] > 0).all().all()
    for run_id in tab["run"]:
        run = experiment.Run.open(tmp_path / "runs" / "t05-subdomains" / run_id)
        assert run.state == "completed" and run.result()["results"]["shape"] in ([8, 8], [32, 2])
    assert set(imb.subdomain_rates(tab)) == {"tile", "strip"}


def _pingpong_run(times: dict):
    """A stand-in for a pingpong Run: result() gives a report with one row per size."""
    from types import SimpleNamespace

    doc = {"kernel": "pingpong", "results": {"rows": [{"bytes": b, "repetitions": 100, "t_usec": t,
                                                         "mbytes_per_sec": b / t} for b, t in times.items()]}}
    return SimpleNamespace(result=lambda: doc)


def test_the_model_is_fitted_to_the_median_of_three_pingpongs():
    """One of three pingpongs disturbed (a rank switched out: 30x the latency, a tenth of the
    bandwidth) moves neither the rows nor the fitted link: the median of each size is one of the
    two undisturbed runs'; a single Run is taken as it is."""
    quiet = {b: 0.8 + b / 9500 for b in (1, 64, 1024, 8192, 65536)}
    slower = {b: 0.85 + b / 9000 for b in quiet}
    disturbed = {b: 24.0 + b / 980 for b in quiet}
    rows = imb.median_rows([_pingpong_run(quiet), _pingpong_run(disturbed), _pingpong_run(slower)])
    assert [r["t_usec"] for r in rows] == [slower[b] for b in sorted(quiet)]
    intra, _, _ = imb.link_rows({"intra": [_pingpong_run(quiet), _pingpong_run(disturbed), _pingpong_run(slower)],
                                 "inter": None})
    model = imb.pingpong_model(intra)
    assert model.intra.latency_ns / 1e3 < 1.5 and model.intra.bandwidth_bpns * 1e3 > 8000
    assert imb.median_rows(_pingpong_run(disturbed))[0]["t_usec"] == disturbed[1]
