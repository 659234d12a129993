"""The split measured with a core per rank (notebook 05, issue 26): where it runs on a given node
(hpclab.course.lesson_imbalance.dedicated_setup on hwloc synthetic topologies), its specs, and the
sentences hpclab.analysis.imbalance builds from the numbers (split_report, exchange_report, the
Allreduce wait, eager sends, simulated comparisons), each checked on hand-made numbers whose
answer is known, and with the sides swapped."""

from __future__ import annotations

import pandas as pd
import pytest

from hpclab.analysis import imbalance as imb
from hpclab.core.errors import HpclabError
from hpclab.cluster import links
from hpclab.course import lesson_imbalance as lesson
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
    # each halo spans 8 token buckets of the 1g link, so the line rate governs it as it does the pingpong
    assert d.message_bytes >= lesson.BUCKETS_PER_HALO * links.load_profiles()["1g"].burst_bytes()
    rows = int(d.shape.split("x")[0])
    assert rows == 60   # 20 light rows, 40 heavy ones


def test_a_16_core_node_measures_on_its_own_cores_through_shared_memory():
    """On a 16-core node: the plan's ranks (>= 8) on the node itself, halos above vader's limit."""
    plan = _plan("pack:1 core:16 pu:1")
    d = lesson.dedicated_setup(plan, eager_shm=4096, eager_tcp=65536)
    assert d.where == "node" and d.ranks == plan.imbalance_ranks >= 8 and d.grid == f"{d.ranks}x1"
    assert d.message_bytes >= 2 * 4096 and d.link == ""


def test_one_core_cannot_give_two_ranks_a_core_and_says_so():
    d = lesson.dedicated_setup(_plan("pack:1 core:1 pu:1"), eager_shm=4096, eager_tcp=65536)
    assert d.where == "none" and "no configuration" in d.case
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


def test_split_report_says_what_leads_in_each_run_and_the_rest_against_ten_percent():
    tab = _table([("x naive", i, 4.0, 3.0, 1.0, 0.2, 0.3) for i in (1, 2, 3)])
    text = imb.split_report(tab, "x naive")
    assert "all 3 runs" in text and "at most 10 %" in text and text.count("- run") == 3
    noisy = _table([("x naive", 1, 4.0, 3.0, 1.0, 0.2, 0.3), ("x naive", 2, 3.0, 1.0, 1.5, 0.2, 3.0)])
    text = imb.split_report(noisy, "x naive")
    assert "1 of 2 runs" in text and "above 10 %" in text
    with pytest.raises(HpclabError):
        imb.split_report(tab, "nothing")


def test_exchange_report_flips_when_the_sides_swap():
    """Naive clearly slower (3 runs a side, apart): 'slower ... beyond the spread'; the same
    numbers given to the other exchange say 'faster'."""
    rows = [("a naive", i, 4.0, t, 1.0, 0.2, 0.1) for i, t in ((1, 3.0), (2, 3.1), (3, 3.2))]
    rows += [("a nonblocking", i, 4.0, t, 1.0, 0.2, 0.1) for i, t in ((1, 1.5), (2, 1.6), (3, 1.7))]
    tab = _table(rows)
    text = imb.exchange_report(tab)
    assert "the naive exchange is" in text and "slower" in text and "beyond the spread" in text
    swapped = tab.assign(exchange=tab["exchange"].map({"naive": "nonblocking", "nonblocking": "naive"}))
    assert "faster" in imb.exchange_report(swapped).split("\n")[0] and "higher" in imb.exchange_report(tab).split("\n")[1]


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
    tr = _imbalanced(3000, 1000)
    s = split(tr, replay(tr))
    waits = pd.DataFrame({"run": ["r"], "callsite": ["residuum / MPI_Allreduce"], "pattern": ["Wait at NxN"],
                          "total_ns": [4 * 2000.0]})
    text = imb.collective_wait_report(waits, {"r": s}, {"r": 4})
    assert "load imbalance is of the same size or larger" in text
    balanced = split(_imbalanced(2000, 2000), replay(_imbalanced(2000, 2000)))
    text = imb.collective_wait_report(waits, {"r": balanced}, {"r": 4})
    assert "neither the load imbalance nor the rest" in text


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
    text = imb.eager_send_report(tr, (int(ev["t_enter"].min()), int(ev["t_exit"].max())), eager=4096)
    assert "1 eager MPI_Send call" in text and "98 %" in text and "switched out" in text and "2 % it ran inside" in text
    assert "No eager" in imb.eager_send_report(tr, (0, 0), eager=4096)


def test_simulated_report_and_ranking_order_by_time_and_say_it_is_a_simulation():
    sim = pd.DataFrame({"T_real": [2.0, 1.5, 1.0]}, index=["a", "b", "c"])
    text = imb.simulated_report(sim, "a", "b")
    assert text.index("b takes") < text.index("a 2.0") and "33 % slower" in text and "simulat" in text
    assert imb.simulated_report(sim, "b", "a") == text
    assert imb.simulated_ranking(sim, ["a", "b", "c"]).startswith("Simulated time per iteration, shortest first: c")
