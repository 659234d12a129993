"""Placement cases: valid specs, and summaries that say who shared a CPU and what it cost."""

from __future__ import annotations

import pandas as pd
import pytest

from hpclab.analysis import placement
from hpclab.course.lessons import placement as lesson


def test_every_case_is_a_valid_stream_spec():
    """Are all binding and pitfall cases accepted by the spec model, with their labels?"""
    cases = lesson.BINDING_CASES + lesson.PITFALL_CASES
    specs = lesson.specs(cases, size=1000, repetitions=1)
    assert [s.label for s in specs] == [c.label for c in cases]


def test_summary_and_lost_fraction():
    """Does the summary take medians per case, flag shared CPUs, and compute the fraction of bandwidth lost?"""
    rates = pd.DataFrame([
        {"label": "bad", "run_id": "a", "job_mb_s": 100.0, "cpus_used": {0: [0], 1: [0]}, "shared_cpu": True},
        {"label": "bad", "run_id": "b", "job_mb_s": 300.0, "cpus_used": {0: [0], 1: [0]}, "shared_cpu": True},
        {"label": "good", "run_id": "c", "job_mb_s": 400.0, "cpus_used": {0: [0], 1: [1]}, "shared_cpu": False},
    ])
    s = placement.summary(rates)
    assert s.loc["bad", "job_mb_s_median"] == 200.0 and s.loc["bad", "shared_cpu"]
    assert not s.loc["good", "shared_cpu"]
    assert placement.lost_fraction(s, "bad", "good") == pytest.approx(0.5)


@pytest.mark.cluster
def test_ranks_sharing_a_core_lose_bandwidth(cluster):
    """Does the hybrid pitfall (both ranks' threads bound to one core) lose whole-job bandwidth against disjoint cores?"""
    from hpclab.jobs import experiment

    cases = [c for c in lesson.PITFALL_CASES if c.label.startswith(("pitfall", "fix 1"))]
    cases.append(lesson.YIELD_CASES[0])
    runs = experiment.run(lesson.specs(cases, size=100_000, reps=20, repetitions=3, experiment="test-placement"),
                          progress=False)
    rates = placement.job_rates(runs)
    s = placement.summary(rates)
    bad, good, yielding = cases[0].label, cases[1].label, cases[2].label
    assert s.loc[bad, "shared_cpu"] and not s.loc[good, "shared_cpu"]
    assert s.loc[bad, "job_mb_s_median"] < s.loc[good, "job_mb_s_median"]
    # Does yielding in MPI_Barrier (mpi_yield_when_idle=1) win back part of the loss, but not the
    # shared core? The spinning barrier is one cause of the pitfall's loss, the shared core another.
    assert s.loc[yielding, "shared_cpu"]
    assert s.loc[bad, "job_mb_s_median"] < s.loc[yielding, "job_mb_s_median"] < s.loc[good, "job_mb_s_median"]


def test_numa_cases_need_two_numa_nodes():
    """Are local/remote memory cases produced for a two-NUMA node and none for a single-NUMA one?"""
    from hpclab.site import topology

    two = topology.synthetic("pack:2 numa:1 core:2 pu:1")
    one = topology.synthetic("pack:1 numa:1 core:2 pu:1")
    cases = lesson.numa_cases(two)
    assert [c.fields["numactl"]["membind"] for c in cases] == ["0", "1"]
    assert lesson.numa_cases(one) == []


def _recorded(name: str) -> dict:
    import json
    from pathlib import Path

    return json.loads((Path(__file__).parent / "data" / "runs" / name / "result.json").read_text())


def test_shared_cpu_is_detected_per_thread_on_recorded_runs():
    """Do recorded runs say shared_cpu exactly when two threads (of any ranks) reported one CPU?

    stream-srun-none-omp-unset: srun --cpu-bind=none with OMP_NUM_THREADS unset, 2 ranks x 2
    threads on 2 CPUs; stream-1rank-2threads: one rank's two threads bound to cores 0 and 1."""
    unset = _recorded("stream-srun-none-omp-unset")
    assert unset["config"]["threads"] == 2 and len(unset["placement"]) == 2
    assert sum(placement.threads_per_cpu(unset).values()) == 4
    assert placement.shared_cpu(unset)            # 4 threads on 2 CPUs: pigeonhole
    assert placement.threads_per_cpu(_recorded("stream-1rank-2threads")) == {0: 1, 1: 1}
    assert not placement.shared_cpu(_recorded("stream-1rank-2threads"))
    assert not placement.shared_cpu(_recorded("stream-srun-cores"))
    assert placement.shared_cpu(_recorded("stream-bind-none"))  # both ranks reported CPU 0


def test_two_threads_of_one_rank_on_one_cpu_count_as_shared():
    """Rank 0's two threads on CPU 0, rank 1's on CPU 1: shared, although the ranks' CPU sets
    differ (the old per-rank check de-duplicated the threads and said False)."""
    doc = _recorded("stream-srun-none-omp-unset")
    doc["placement"][0]["threads"] = [{"thread": 0, "cpu": 0, "allowed": [0, 1]},
                                      {"thread": 1, "cpu": 0, "allowed": [0, 1]}]
    doc["placement"][1]["threads"] = [{"thread": 0, "cpu": 1, "allowed": [0, 1]},
                                      {"thread": 1, "cpu": 1, "allowed": [0, 1]}]
    assert placement.threads_per_cpu(doc) == {0: 2, 1: 2}
    assert placement.shared_cpu(doc)


def test_compare_cases_sees_overlapping_spreads_and_stacked_runs():
    """Is a 1 % difference of medians with overlapping runs left undecided, a separated pair with
    too few runs said to be too few, and a run that put both ranks on one CPU counted?"""
    rates = pd.DataFrame([
        {"label": "none", "run_id": "a", "job_mb_s": 190.0, "shared_cpu": False},
        {"label": "none", "run_id": "b", "job_mb_s": 192.0, "shared_cpu": False},
        {"label": "none", "run_id": "c", "job_mb_s": 1.0, "shared_cpu": True},
        {"label": "cores", "run_id": "d", "job_mb_s": 191.0, "shared_cpu": False},
        {"label": "cores", "run_id": "e", "job_mb_s": 193.0, "shared_cpu": False},
    ])
    c = placement.compare_cases(rates, "none", "cores")
    assert c["median_a"] == 190.0 and c["median_b"] == 192.0
    assert c["overlap"] and "cannot be told apart" in c["verdict"]
    assert c["shared_runs_a"] == 1 and c["shared_runs_b"] == 0
    far = rates.assign(job_mb_s=[1.0, 2.0, 3.0, 100.0, 101.0])
    assert "cannot be told apart with so few runs" in placement.compare_cases(far, "none", "cores")["verdict"]


def _rates(values: dict[str, list[float]], shared: tuple = ()) -> pd.DataFrame:
    return pd.DataFrame([{"label": label, "run_id": f"{label}-{i}", "round": i + 1, "job_mb_s": v,
                          "shared_cpu": label in shared, "cpus_used": {}}
                         for label, vs in values.items() for i, v in enumerate(vs)])


def test_comparison_decides_with_the_statistics_and_pairs_by_round():
    """Four runs a side whose values do not overlap are decided different, and the sentence flips
    with the sides; paired=True pairs the runs by round and needs six rounds to decide."""
    apart = _rates({"none": [100, 110, 120, 105], "cores": [190, 193, 194, 196]})
    c = placement.comparison(apart, "cores", "none")
    assert c.outcome == "different" and c.winner == "cores"
    assert c.sentence().startswith("cores is 1.8x higher than none")
    assert placement.comparison(apart, "none", "cores").sentence().startswith("none is 1.8x lower than cores")
    assert not c.paired and placement.comparison(apart, "cores", "none", paired=True).outcome == "undecided"
    # a drift that both sides share: round by round, cores stays 2 % above none
    drift = [100, 130, 90, 120, 110, 95]
    paired = _rates({"none": drift, "cores": [v * 1.02 for v in drift]})
    assert placement.comparison(paired, "cores", "none").outcome == "undecided"
    assert placement.comparison(paired, "cores", "none", paired=True).outcome == "equivalent"


def test_pitfall_split_multiplies():
    """Are the shared-core and polling effects factors whose product (with yielding's own effect
    on the fix) is the whole loss, never shares of a sum? Without fix 1 with yielding, fix 1
    stands for the core of one's own, and the two factors are the whole loss."""
    s = pd.DataFrame({"job_mb_s_median": {"p": 1.0, "f": 100.0, "py": 45.0, "fy": 90.0}})
    sp = placement.pitfall_split(s, "p", "f", "py", "fy")
    assert sp["lost"] == pytest.approx(0.99) and sp["lost_sharing"] == pytest.approx(0.5)
    assert sp["sharing_factor"] == pytest.approx(2.0) and sp["polling_factor"] == pytest.approx(45.0)
    assert sp["total_factor"] == pytest.approx(sp["yield_factor"] * sp["sharing_factor"] * sp["polling_factor"])
    assert "lost_polling" not in sp
    three = placement.pitfall_split(s, "p", "f", "py")
    assert three["yield_factor"] == 1.0 and three["sharing_factor"] == pytest.approx(100 / 45)
    assert three["total_factor"] == pytest.approx(three["sharing_factor"] * three["polling_factor"])


def _cache(pitfall, fix, pitfall_yield=None) -> pd.DataFrame:
    values = {lesson.PITFALL: pitfall, lesson.FIX: fix}
    if pitfall_yield is not None:
        values[lesson.PITFALL_YIELD] = pitfall_yield
    return _rates(values, shared=(lesson.PITFALL, lesson.PITFALL_YIELD))


def test_pitfall_outcomes_are_a_table_and_the_text_gives_factors_only_when_decided():
    """Does the pitfall's table give each comparison's outcome, ratio and CI, and the text the
    loss as factors that multiply when all three are decided, and say what is undecided else?"""
    rates = _cache([1.0, 1.1, 0.9, 1.05], [100, 101, 99, 100.5], [50, 51, 49, 50.5])
    t = lesson.outcomes(lesson.pitfall_comparisons(rates))
    assert list(t["outcome"]) == ["different"] * 3
    assert t.iloc[0]["a vs b"] == "98x higher" and t.iloc[0]["runs"] == "4 + 4"
    assert t.iloc[0]["ratio a/b"] == 97.6 and float(t.iloc[0]["95 % CI"].split("-")[0]) > 80
    text = lesson.pitfall_text(rates)
    assert text.startswith("98x between fix 1 and the pitfall = 2.0x (the shared core) x 49x (busy-polling")
    assert "+" not in text
    noisy = _cache([1.0, 1.1, 0.9, 1.05], [100, 101, 99, 100.5], [50, 51, 49, 101])
    assert "do not decide the shared core" in lesson.pitfall_text(noisy)
    assert "98x higher" in lesson.pitfall_figure_takeaway(rates)


@pytest.mark.parametrize("pitfall, fix, verdict", [
    ([10, 11, 12, 10.5], [100, 101, 102, 100.5], "yes"),     # most lost, decided
    ([70, 71, 72, 70.5], [100, 101, 102, 100.5], "partly"),  # a decided loss, less than half
    ([99, 100, 101, 100], [100, 100.5, 101, 99.5], "no"),    # no difference larger than 5 %
    ([95, 100, 105, 70], [98, 101, 103, 100], "not shown"),  # the runs cannot decide
    ([10, 11, 12], [100, 101, 102], "not shown"),            # too few runs to decide at all
])
def test_pitfall_fidelity_is_yes_only_when_decided(pitfall, fix, verdict):
    """Is the hybrid-pitfall row 'yes' only for most of the bandwidth lost, decided by the
    statistics (4 + 4 runs at least), and does the fidelity builder accept it? Its `here` names
    the regime and cites the bigger node for memory."""
    rates = _cache(pitfall, fix)
    row = lesson.pitfall_fidelity(rates)
    assert row["reproduced"] == verdict
    assert row["beyond_spread"] == (verdict in ("yes", "partly"))
    assert row["here"].startswith("in cache") and "16-core Xeon node" in row["here"]
    assert lesson.hybrid_pitfall(rates, ["r1"]).reproduced == verdict


def test_pitfall_fidelity_names_the_two_factors():
    """With the pitfall with yielding among the runs, does `why` give the two factors?"""
    row = lesson.pitfall_fidelity(_cache([1.0, 1.1, 0.9, 1.05], [100, 101, 99, 100.5], [50, 51, 49, 50.5]))
    # the medians: fix 1 100.25, the pitfall with yielding 50.25, the pitfall 1.025 MB/s
    assert row["reproduced"] == "yes" and "both ranks' work (2.0x) and spun in the barrier (49.0x)" in row["why"]


def test_numa_row_on_one_and_two_numa_nodes():
    """One NUMA node: 'not shown', saying why and what the node measures instead. Two: the
    verdict follows the local and remote runs ('yes' only when decided)."""
    from hpclab.course import sizing
    from hpclab.site import topology

    one = lesson.numa(topology.synthetic("pack:1 numa:1 core:2 pu:1"))
    assert one.reproduced == "not shown" and one.here.startswith("1 NUMA node") and "local memory only" in one.here
    assert "no remote memory" in one.why
    two = sizing.plan(topology.synthetic("pack:2 numa:1 core:2 pu:1"))
    local, remote = (c.label for c in lesson.numa_cases(two))
    assert lesson.numa(two).reproduced == "not shown"
    fast = _rates({local: [160, 162, 165, 161], remote: [100, 101, 103, 102]})
    assert lesson.numa(two, fast).reproduced == "yes" and "60 %" in lesson.numa(two, fast).why
    same = _rates({local: [100, 100.5, 101, 99.5], remote: [100, 101, 99.8, 100.2]})
    assert lesson.numa(two, same).reproduced == "no"
    assert lesson.numa(two, _rates({local: [100, 160, 165], remote: [100, 101, 103]})).reproduced == "not shown"


def test_bigger_node_is_quoted_with_its_source():
    t = lesson.bigger_node()
    assert len(t) == 3 and set(t["source"]) == {lesson.BIGGER_NODE}
    assert t.iloc[1]["Triad GB/s, lowest"] / t.iloc[0]["highest"] > 3


def test_node_size_splits_the_arrays_over_each_case_s_ranks():
    """Do node-sized specs give a one-rank case twice the per-rank arrays of a two-rank case?"""
    cases = lesson.pitfall_cases(2)
    specs = lesson.specs(cases, node_size=2_000_000, repetitions=1)
    sizes = {s.label: s.args["size"] if isinstance(s.args, dict) else s.args.size for s in specs}
    assert sizes[cases[0].label] == 1_000_000 and sizes[cases[2].label] == 2_000_000


def test_four_rank_cases_pin_every_rank_to_cpu_0():
    """On a wider node (4 placement ranks), does the deliberate mistake list CPU 0 four times?"""
    cases = lesson.binding_cases(4)
    assert "map_cpu:0,0,0,0" in [c.label.split("=")[-1] for c in cases]
    assert all(c.ntasks == 4 for c in cases)


def test_binding_takeaway_names_the_bindings_that_shared_a_cpu():
    """Is the bindings figure's takeaway built from the placement reports: the bindings whose
    first run had two threads on one CPU, named, and none when no run shared?"""
    rates = pd.DataFrame([{"label": "cores", "run_id": "a", "shared_cpu": False},
                          {"label": "map_cpu:0,0", "run_id": "b", "shared_cpu": True}])
    said = lesson.binding_takeaway(rates)
    assert "shared a CPU under: map_cpu:0,0." in said and "cores" not in said.split("under:")[1]
    assert "every binding gave each thread a CPU of its own" in lesson.binding_takeaway(rates.assign(shared_cpu=False))


def test_noise_note_is_empty_without_disturbed_runs(tmp_path):
    """Runs without a noise record (or none disturbed) add nothing under a table."""
    assert lesson.noise_note([tmp_path]) == ""
