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
    """Is a 1 % difference of medians with overlapping ranges called no winner, a separated pair
    called by name, and a run that put both ranks on one CPU counted?"""
    rates = pd.DataFrame([
        {"label": "none", "run_id": "a", "job_mb_s": 190.0, "shared_cpu": False},
        {"label": "none", "run_id": "b", "job_mb_s": 192.0, "shared_cpu": False},
        {"label": "none", "run_id": "c", "job_mb_s": 1.0, "shared_cpu": True},
        {"label": "cores", "run_id": "d", "job_mb_s": 191.0, "shared_cpu": False},
        {"label": "cores", "run_id": "e", "job_mb_s": 193.0, "shared_cpu": False},
    ])
    c = placement.compare_cases(rates, "none", "cores")
    assert c["median_a"] == 190.0 and c["median_b"] == 192.0
    assert c["overlap"] and c["verdict"].startswith("no winner")
    assert c["shared_runs_a"] == 1 and c["shared_runs_b"] == 0
    far = rates.assign(job_mb_s=[1.0, 2.0, 3.0, 100.0, 101.0])
    assert placement.compare_cases(far, "none", "cores")["verdict"].startswith("cores is faster in every run (but only 2")


def test_pitfall_split_adds_up():
    """Do the shared-core part and the polling part add up to the pitfall's whole loss?"""
    s = pd.DataFrame({"job_mb_s_median": {"p": 1.0, "f": 100.0, "py": 45.0, "fy": 100.0}})
    sp = placement.pitfall_split(s, "p", "f", "py", "fy")
    assert sp["lost"] == pytest.approx(0.99) and sp["lost_sharing"] == pytest.approx(0.55)
    assert sp["lost_polling"] == pytest.approx(0.44) and sp["polling_factor"] == pytest.approx(45.0)


def test_pitfall_fidelity_row_is_computed_from_the_medians():
    """Does the hybrid-pitfall fidelity row carry the measured split and name both factors?"""
    s = pd.DataFrame({"job_mb_s_median": {
        lesson_placement.PITFALL_CASES[0].label: 2.0, lesson_placement.PITFALL_CASES[1].label: 200.0,
        lesson_placement.YIELD_CASES[0].label: 90.0, lesson_placement.YIELD_CASES[1].label: 180.0}})
    row = placement.pitfall_fidelity(s)
    assert row["reproduced"] == "yes" and row["lost"] == pytest.approx(0.99)
    assert row["lost_sharing"] == pytest.approx(0.5) and row["polling_factor"] == pytest.approx(45.0)
    assert "2.0x slower" in row["why"] and "45x more" in row["why"]
