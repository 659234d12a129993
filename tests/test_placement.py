"""Placement cases: valid specs, and summaries that say who shared a CPU and what it cost."""

from __future__ import annotations

import pandas as pd
import pytest

from hpclab.analysis import placement
from hpclab.course import lesson_placement


def test_every_case_is_a_valid_stream_spec():
    """Are all binding and pitfall cases accepted by the spec model, with their labels?"""
    cases = lesson_placement.BINDING_CASES + lesson_placement.PITFALL_CASES
    specs = lesson_placement.specs(cases, size=1000, repetitions=1)
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

    cases = [c for c in lesson_placement.PITFALL_CASES if c.label.startswith(("pitfall", "fix 1"))]
    cases.append(lesson_placement.YIELD_CASES[0])
    runs = experiment.run(lesson_placement.specs(cases, size=100_000, reps=20, repetitions=3, experiment="test-placement"),
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
    cases = lesson_placement.numa_cases(two)
    assert [c.fields["numactl"]["membind"] for c in cases] == ["0", "1"]
    assert lesson_placement.numa_cases(one) == []


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
    """Is a 1 % difference of medians with overlapping ranges called within the noise, a separated
    pair with too few runs said to be too few, and a run that put both ranks on one CPU counted?"""
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
    return pd.DataFrame([{"label": label, "run_id": f"{label}-{i}", "job_mb_s": v, "shared_cpu": label in shared,
                          "cpus_used": {}} for label, vs in values.items() for i, v in enumerate(vs)])


def test_binding_text_follows_the_numbers_and_flips_when_swapped():
    """Does the binding sentence say 'within the noise' for overlapping runs, name the winner for
    separated ones, and flip when the sides are swapped?"""
    tie = _rates({"none": [190, 192, 195], "cores": [191, 193, 194]})
    assert "within the noise of 3 runs" in placement.binding_text(tie, "none", "cores")
    apart = _rates({"none": [100, 110, 120], "cores": [190, 193, 194]}, shared=("none",))
    text = placement.binding_text(apart, "none", "cores")
    assert "none is" in text and "lower than cores, beyond the spread of 3 runs" in text
    assert "In 3 of 3 runs of none" in text
    assert "cores is" in placement.binding_text(apart, "cores", "none") and "higher than none" in \
        placement.binding_text(apart, "cores", "none")


def test_pitfall_split_multiplies():
    """Are the shared-core and polling effects factors whose product (with yielding's own effect
    on the fix) is the whole loss, never shares of a sum?"""
    s = pd.DataFrame({"job_mb_s_median": {"p": 1.0, "f": 100.0, "py": 45.0, "fy": 90.0}})
    sp = placement.pitfall_split(s, "p", "f", "py", "fy")
    assert sp["lost"] == pytest.approx(0.99) and sp["lost_sharing"] == pytest.approx(0.5)
    assert sp["sharing_factor"] == pytest.approx(2.0) and sp["polling_factor"] == pytest.approx(45.0)
    assert sp["total_factor"] == pytest.approx(sp["yield_factor"] * sp["sharing_factor"] * sp["polling_factor"])
    assert "lost_polling" not in sp


def test_pitfall_text_states_factors_from_the_runs():
    """Does the pitfall text give each comparison with its spread and the loss as factors?"""
    rates = _rates({placement.PITFALL: [1.0, 1.1, 0.9], placement.FIX: [100, 101, 99],
                    placement.PITFALL_YIELD: [50, 51, 49], placement.FIX_YIELD: [100, 102, 98]})
    text = placement.pitfall_text(rates)
    assert "fix 1 is 100x higher than the pitfall, beyond the spread of 3 runs" in text
    assert "100x between fix 1 and the pitfall = 2.0x (the shared core) x 50x (busy-polling in the barrier)" in text
    assert "on a log scale 15 % and 85 %" in text and "+" not in text


@pytest.mark.parametrize("pitfall, fix, verdict", [
    ([10, 11, 12], [100, 101, 102], "yes"),      # most lost, beyond the spread
    ([70, 71, 72], [100, 101, 102], "partly"),   # a measured loss, less than half
    ([95, 100, 105], [98, 101, 103], "no"),      # within the noise
    ([10, 11], [100, 101], "not shown"),         # too few runs
])
def test_pitfall_fidelity_is_yes_only_beyond_the_spread(pitfall, fix, verdict):
    """Is the hybrid-pitfall row 'yes' only for most of the bandwidth lost beyond the spread of >= 3
    runs per side, and does the fidelity builder accept it?"""
    from hpclab.course import fidelity

    rates = _rates({placement.PITFALL: pitfall, placement.FIX: fix}, shared=(placement.PITFALL,))
    row = placement.pitfall_fidelity(rates, array_mb=400)
    assert row["reproduced"] == verdict
    assert row["beyond_spread"] == (verdict in ("yes", "partly"))
    assert "400 MB of arrays per rank" in row["here"]
    assert fidelity.hybrid_pitfall(rates, ["r1"]).reproduced == verdict


def test_pitfall_fidelity_names_the_cache_factors():
    """With in-cache runs of the four cases, does `here` give their factors (multiplied)?"""
    mem = _rates({placement.PITFALL: [10, 11, 12], placement.FIX: [20, 21, 22]})
    cache = _rates({placement.PITFALL: [1.0, 1.1, 0.9], placement.FIX: [100, 101, 99],
                    placement.PITFALL_YIELD: [50, 51, 49], placement.FIX_YIELD: [100, 102, 98]})
    row = placement.pitfall_fidelity(mem, cache)
    assert row["reproduced"] == "partly" or row["reproduced"] == "yes"
    assert "In cache" in row["here"] and "2.0x (the shared core) x 50x" in row["here"]


def test_numa_row_on_one_and_two_numa_nodes():
    """One NUMA node: 'not shown', saying which case the node is in. Two: the verdict follows the
    local and remote runs ('yes' only beyond the spread)."""
    from hpclab.course import fidelity, sizing
    from hpclab.site import topology

    one = fidelity.numa(topology.synthetic("pack:1 numa:1 core:2 pu:1"))
    assert one.reproduced == "not shown" and "2 cores, 1 NUMA node" in one.here
    two = sizing.plan(topology.synthetic("pack:2 numa:1 core:2 pu:1"))
    local, remote = (c.label for c in lesson_placement.numa_cases(two))
    assert fidelity.numa(two).reproduced == "not shown"
    assert fidelity.numa(two, _rates({local: [160, 162, 165], remote: [100, 101, 103]})).reproduced == "yes"
    assert fidelity.numa(two, _rates({local: [100, 160, 165], remote: [100, 101, 103]})).reproduced == "no"
    assert "60 %" in fidelity.numa(two, _rates({local: [160, 162, 165], remote: [100, 101, 103]})).why


def test_node_size_splits_the_arrays_over_each_case_s_ranks():
    """Do node-sized specs give a one-rank case twice the per-rank arrays of a two-rank case?"""
    cases = lesson_placement.pitfall_cases(2)
    specs = lesson_placement.specs(cases, node_size=2_000_000, repetitions=1)
    sizes = {s.label: s.args["size"] if isinstance(s.args, dict) else s.args.size for s in specs}
    assert sizes[cases[0].label] == 1_000_000 and sizes[cases[2].label] == 2_000_000


def test_four_rank_cases_pin_every_rank_to_cpu_0():
    """On a wider node (4 placement ranks), does the deliberate mistake list CPU 0 four times?"""
    cases = lesson_placement.binding_cases(4)
    assert "map_cpu:0,0,0,0" in [c.label.split("=")[-1] for c in cases]
    assert all(c.ntasks == 4 for c in cases)
