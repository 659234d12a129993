"""The split measured with a core per rank (notebook 05, issue 26): where it runs on a given node
(hpclab.course.lessons.imbalance.dedicated_setup on hwloc synthetic topologies), its specs, and the
tables and sentences the lesson builds from the numbers (the shares of each run, the exchanges
decided by the course's statistics, the Allreduce wait, eager sends, simulated comparisons), each
checked on hand-made numbers whose answer is known, and with the sides swapped."""

from __future__ import annotations

import pandas as pd
import pytest

from hpclab.analysis import imbalance as imb
from hpclab.core.errors import HpclabError
from hpclab.cluster import links
from hpclab.course.lessons import imbalance as lesson
from hpclab.course import sizing
from hpclab.site import topology
from hpclab.trace.builder import TraceBuilder
from hpclab.trace.replay import replay
from hpclab.trace.split import split


def _plan(desc: str):
    return sizing.plan(topology.synthetic(desc))


def test_two_cores_measure_on_two_one_core_virtual_nodes_above_the_tcp_eager_limit():
    """On a 2-core node: two one-core virtual nodes on a 1g link, a 2x1 chain with the first rank
    twice as heavy, each halo row at least twice TCP's eager limit."""
    d = lesson.dedicated_setup(_plan("pack:1 core:2 pu:1"), eager_shm=4096, eager_tcp=65536)
    assert (d.where, d.ranks, d.grid, d.link, d.heavy) == ("vnodes", 2, "2x1", "1g", 2.0)
    assert d.message_bytes >= 2 * 65536 and "virtual nodes" in d.case
    table = lesson.dedicated_table(d)
    assert table.loc[2, "rows, first rank"] == 8 and table.loc[2, "rows, each other rank"] == 4
    assert table.loc[2, "halo message (bytes)"] == d.message_bytes and d.setting == "2 one-core virtual nodes, 1g link"
    # each halo spans 8 token buckets of the 1g link, so the line rate governs it as it does the pingpong
    assert d.message_bytes >= lesson.BUCKETS_PER_HALO * links.load_profiles()["1g"].burst_bytes()
    rows = int(d.shape.split("x")[0])
    assert rows == 12   # 4 light rows, 8 heavy ones: a few ms of compute against 8 ms per halo message


def test_a_16_core_node_measures_on_its_own_cores_through_shared_memory():
    """On a 16-core node: the plan's ranks (>= 8) on the node itself, halos above vader's limit."""
    plan = _plan("pack:1 core:16 pu:1")
    d = lesson.dedicated_setup(plan, eager_shm=4096, eager_tcp=65536)
    assert d.where == "node" and d.ranks == plan.imbalance_ranks >= 8 and d.grid == f"{d.ranks}x1"
    assert d.message_bytes >= 2 * 4096 and d.link == ""


def test_one_core_cannot_give_two_ranks_a_core_and_says_so():
    d = lesson.dedicated_setup(_plan("pack:1 core:1 pu:1"), eager_shm=4096, eager_tcp=65536)
    assert d.where == "none" and "no configuration" in d.case
    assert lesson.dedicated_table(d)["case"].tolist() == [d.case]
    with pytest.raises(HpclabError):
        lesson.dedicated_specs(d, iters=10, repetitions=3)
    with pytest.raises(HpclabError):
        lesson.dedicated_setup(_plan("pack:1 core:2 pu:1"), eager_shm=1, eager_tcp=1, heavy=0.5)


def test_dedicated_specs_place_one_rank_per_virtual_node_and_trace_both_exchanges():
    d = lesson.dedicated_setup(_plan("pack:1 core:2 pu:1"), eager_shm=4096, eager_tcp=65536)
    pp, naive, nb = lesson.dedicated_specs(d, iters=50, repetitions=3)
    assert pp.kernel == "pingpong" and pp.nodes == 2 and pp.ntasks_per_node == 1
    assert pp.args.max_bytes == 4 * d.message_bytes
    for s, ex in ((naive, "naive"), (nb, "nonblocking")):
        assert s.trace and s.nodes == 2 and s.ntasks_per_node == 1 and s.repetitions == 3
        assert s.args.exchange == ex and s.args.heavy == 2.0 and s.args.shape == d.shape
        assert s.label.endswith(ex)   # dependency_table reads the exchange from the label's last word


def _table(rows):
    out = []
    for label, rep, comp, transfer, load, depend, rest in rows:
        out.append({"label": label, "repetition": rep, "exchange": label.split()[-1], "ranks": 2,
                    "T_real": comp + transfer + load + depend + rest, "T_comp": comp, "T_transfer": transfer,
                    "T_load": load, "T_depend": depend, "T_rest": rest})
    return pd.DataFrame(out)


def test_split_shares_table_gives_each_runs_parts_in_percent_of_its_run_time():
    """Does each run's row hold its five parts as whole % of its T_real, with its exchange and round?"""
    tab = _table([("x naive", i, 4.0, 3.0, 1.0, 0.2, 1.8) for i in (2, 1)] + [("x nonblocking", 1, 5.0, 1.0, 1.0, 0.0, 3.0)])
    out = lesson.split_shares_table(tab)
    assert list(out["run"]) == ["naive", "naive", "nonblocking"] and list(out["round"]) == [1, 2, 1]
    assert out.iloc[0][["compute", "transfer", "load imbalance", "dependency", "rest"]].tolist() == [40, 30, 10, 2, 18]
    assert out.iloc[2]["rest"] == 30


def _rounds(naive, nonblocking, col="T_real"):
    """Rows of dependency_table: one naive and one non-blocking run per round, col in ms per iteration."""
    rows = [("a naive", i + 1, 4.0, t, 1.0, 0.2, 0.1) for i, t in enumerate(naive)]
    rows += [("a nonblocking", i + 1, 4.0, t, 1.0, 0.2, 0.1) for i, t in enumerate(nonblocking)]
    return _table(rows)


def test_exchanges_are_compared_pair_by_pair_and_decided_by_the_statistics():
    """Seven rounds, the naive exchange slower in each (by 10-40 %, noisy): decided different,
    paired, 'slower'; the sides swapped: 'faster'; rounds that do not match: unpaired; one exchange
    missing: an error."""
    naive = [5.2, 5.9, 5.4, 6.3, 5.0, 6.0, 5.6]
    nb = [4.2, 4.3, 4.6, 4.5, 4.4, 4.7, 4.3]
    cmp = lesson.exchange_comparison(_rounds(naive, nb))
    assert cmp.paired and cmp.outcome == "different" and cmp.winner == "the non-blocking one"
    assert "the naive exchange is" in cmp.sentence() and "slower" in cmp.sentence() and "7 paired runs" in cmp.sentence()
    swapped = lesson.exchange_comparison(_rounds(nb, naive))
    assert swapped.outcome == "different" and "faster" in swapped.sentence()
    uneven = _rounds(naive, nb[:5])
    assert not lesson.exchange_comparison(uneven).paired
    with pytest.raises(HpclabError):
        lesson.exchange_comparison(_rounds(naive, []))


def test_exchanges_are_decided_on_the_solvers_own_time_when_the_table_has_it():
    """T_solve (the solve loop, without the set-up) clearly apart while T_real's set-up noise
    hides it: the comparison takes T_solve, and T_real only when asked or when T_solve is missing."""
    tab = _rounds([5.0] * 7, [5.0] * 7)
    tab["T_real"] = [9.0, 14.0, 8.0, 13.0, 9.5, 12.0, 10.0] + [12.0, 8.5, 13.5, 9.0, 11.0, 9.0, 12.5]
    tab["T_solve"] = [6.5, 6.9, 6.4, 7.2, 6.6, 7.0, 6.8] + [4.9, 5.1, 4.8, 5.3, 5.0, 5.2, 4.9]
    assert lesson.exchange_comparison(tab).quantity == "T_solve"
    assert lesson.exchange_comparison(tab).outcome == "different"
    assert lesson.exchange_comparison(tab, "T_real").outcome != "different"
    assert lesson.exchange_comparison(tab.drop(columns="T_solve")).quantity == "T_real"


def test_dedicated_takeaway_names_the_leading_part_and_explains_a_negative_rest():
    """The takeaway names the naive runs' largest part with its share and its ratio to the
    non-blocking runs', and says why a rest below zero appears only when one does."""
    tab = _rounds([9.0] * 7, [6.0] * 7).assign(T_transfer=[4.0] * 7 + [2.0] * 7, T_comp=[3.5] * 14)
    text = lesson.dedicated_takeaway(tab)
    assert text.startswith("Transfer leads the naive runs") and "2.0x the non-blocking" in text and "below zero" not in text
    assert len(text.split()) <= 40
    negative = tab.assign(T_rest=[-0.2] + [0.1] * 13)
    assert "A rest below zero: the model replays that run slightly slower than it ran." in lesson.dedicated_takeaway(negative)


def test_inter_eager_limit_is_tcps_when_measured_and_intel_mpis_when_quoted():
    measured = pd.DataFrame({"source": ["x", "measured: pingpong between two nodes"]}, index=["intra-node", "inter-node"])
    quoted = pd.DataFrame({"source": ["x", "quoted: 40G InfiniBand, pml/ucx"]}, index=["intra-node", "inter-node"])
    assert imb.inter_eager_limit(measured, 65536)[0] == 65536
    limit, why = imb.inter_eager_limit(quoted, 65536)
    assert limit == 256 * 1024 and "UCX_RNDV_THRESH" in why


def _imbalanced(heavy_ns: int, light_ns: int, iterations: int = 4):
    b = TraceBuilder(2)
    for r, c in ((0, heavy_ns), (1, light_ns)):
        for _ in range(iterations):
            with b[r].region("residuum"):
                b[r].compute(c)
                b[r].allreduce(8)
    return b.build()


def test_allreduce_wait_is_called_load_imbalance_only_when_the_load_imbalance_covers_it():
    """Is the Allreduce wait's cause 'load imbalance' when the load imbalance is at least half of
    it, and 'delays passed along' for a balanced run with no rest?"""
    tr = _imbalanced(3000, 1000)
    s = split(tr, replay(tr))
    waits = pd.DataFrame({"run": ["r"], "callsite": ["residuum / MPI_Allreduce"], "pattern": ["Wait at NxN"],
                          "total_ns": [4 * 2000.0]})
    out = lesson.collective_wait_table(waits, {"r": s}, {"r": 4})
    assert out.loc["r", "cause"] == "load imbalance" and out.loc["r", "Allreduce wait"] == pytest.approx(0.001)
    balanced = split(_imbalanced(2000, 2000), replay(_imbalanced(2000, 2000)))
    assert lesson.collective_wait_table(waits, {"r": balanced}, {"r": 4}).loc["r", "cause"] == "delays passed along"


def test_eager_send_report_names_time_switched_out():
    """An eager send of 100 us wall with 2 us of CPU: the rank was switched out for 98 %."""
    b = TraceBuilder(2)
    b[0].send(1, 64, 0)
    b[1].recv(0, 64, 0)
    tr = b.build()
    ev = tr.events
    i = ev.index[ev["call"] == "MPI_Send"][0]
    ev.loc[i, "t_exit"] = ev.loc[i, "t_enter"] + 100_000
    ev["cpu_enter"], ev["cpu_exit"] = 0, 0
    ev.loc[i, "cpu_exit"] = 2_000
    text = lesson.eager_send_report(tr, (int(ev["t_enter"].min()), int(ev["t_exit"].max())), eager=4096)
    assert text.startswith("The eager MPI_Send bar (100.0 us)") and "MPI library (2 %)" in text
    assert "switched out (98 %)" in text and len(text.split()) <= 40
    assert "No eager" in lesson.eager_send_report(tr, (0, 0), eager=4096)


def test_simulated_report_and_ranking_order_by_time_and_say_it_is_a_simulation():
    sim = pd.DataFrame({"T_real": [2.0, 1.5, 1.0]}, index=["a", "b", "c"])
    text = lesson.simulated_report(sim, "a", "b")
    assert text.index("b takes") < text.index("a 2.0") and "33 % slower" in text and "simulat" in text
    assert lesson.simulated_report(sim, "b", "a") == text
    assert lesson.simulated_ranking(sim, ["a", "b", "c"]).startswith("Simulated time per iteration, shortest first: c")


def test_the_machine_plan_is_one_sentence_from_the_node(monkeypatch):
    """Two cores: the 4 traced ranks are oversubscribed and the core per rank comes from virtual
    nodes; sixteen cores: each traced rank has a core and the node's own cores serve."""
    monkeypatch.setattr(lesson, "physical_cores", lambda: 2)
    two = _plan("pack:1 core:2 pu:1")
    text = lesson.machine_plan(two, 4, lesson.dedicated_setup(two, eager_shm=4096, eager_tcp=65536))
    assert text.startswith("This machine: 2 cores, 1 NUMA node;") and "oversubscribed, 2.0 ranks per core" in text
    assert "2 one-core virtual nodes joined by a 1g link" in text
    monkeypatch.setattr(lesson, "physical_cores", lambda: 16)
    big = _plan("pack:1 core:16 pu:1")
    text = lesson.machine_plan(big, 4, lesson.dedicated_setup(big, eager_shm=4096, eager_tcp=65536))
    assert "gives each a core" in text and "this node's 16 cores" in text
    monkeypatch.setattr(lesson, "physical_cores", lambda: 2)
    assert "share them (4.0 per core)" in lesson.mapping_plan(2, 4, nodes=2, cpus_per_node=2)


def test_the_largest_part_takeaway_names_the_rest_as_waiting_for_a_core_only_when_oversubscribed():
    from types import SimpleNamespace as NS

    crowded = NS(T_real=100.0, T_comp=10.0, T_transfer=5.0, T_load=2.0, T_depend=3.0, T_rest=80.0, T_model=20.0)
    text = lesson.largest_part_takeaway(crowded, "2D 2x2 blocking", oversubscribed=True)
    assert "is rest: 80 % of T_real" in text and "waited for a core" in text and "compute at 50 %" in text
    assert len(text.split()) <= 40
    calm = NS(**{**vars(crowded), "T_transfer": 60.0, "T_rest": 25.0})
    assert lesson.largest_part_takeaway(calm, "x", oversubscribed=False).endswith("is transfer: 60 % of T_real.")


def test_the_port_check_text_keeps_what_the_numbers_keep():
    """The sentence names how many cases are kept with their largest ratio, and each dropped one
    with its own; a check that keeps nothing says so."""
    check = pd.DataFrame({"transfer / bound": [1.02, 0.7, 3.55], "kept as prediction": [True, True, False]},
                         index=["2D", "1D", "2D non-blocking"])
    text = lesson.port_check_text(check)
    assert text.startswith("Kept as predictions: 2 cases, their transfer at most 1.02x the bound.")
    assert "Not 2D non-blocking: 3.5x" in text and len(text.split()) <= 40
    assert lesson.port_check_text(check.assign(**{"kept as prediction": False})).startswith("No case is kept.")
