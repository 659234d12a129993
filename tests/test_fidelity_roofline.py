"""The roofline's verdict and what notebook 06 says about its roof experiment: decided by the
course's statistics from the runs' numbers.

Recorded runs (tests/data/roof, three runs a side: too few to decide) and hand-made ones whose
answer is known: the solver at its roof with a drop from the cache, below it, above it, and runs
that cannot decide; then the comparisons' table, the sentence on what limits the solver, the
fusion takeaway and quiz, each following the decisions.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pandas as pd
import pytest

from hpclab.analysis import phrases, roofline
from hpclab.course import quiz
from hpclab.course.lessons import scaling as lesson

sys.path.insert(0, str(Path(__file__).parent))
from test_hotspots import _roof_data  # noqa: E402  (the recorded roof runs)

COUNTED = {"Copy": 16, "Scale": 16, "Add": 24, "Triad": 24, "Update": 16, "Sum": 8}


def _stream(ns: dict) -> dict:
    """A STREAM result.json whose kernels take `ns` ns per element (the others 1 ns)."""
    kernels = {k: {"best_mb_s": c / ns.get(k, 1.0) * 1e3} for k, c in COUNTED.items()}
    return {"results": {"kernels": kernels, "bytes_per_array": 8 * 10**8}}


def _rates(by_n: dict, variant: str = "separate") -> pd.DataFrame:
    rows = [{"run_id": f"r{n}-{variant}-{i}", "n": n, "variant": variant, "lups": v * 1e6}
            for n, values in by_n.items() for i, v in enumerate(values)]
    return pd.DataFrame(rows)


def _caches():
    return _roof_data()[2]   # 32 MiB L3: n = 1024 in L3, n = 3072 from memory


# Triad at 1.25 ns per element: 19.2 GB/s counted, 25.6 GB/s moved, a roof of 400 M updates/s.
ROOF_RUNS = [_stream({"Triad": t}) for t in (1.25, 1.26, 1.27, 1.255)]
IN_CACHE = [700, 720, 710, 705]


def test_recorded_runs_of_three_a_side_decide_nothing():
    """The recorded runs have three runs a side, fewer than the 4 + 4 a decision needs: the
    verdict is 'not shown', and `why` says the runs cannot decide, with the run counts."""
    stream, runs, caches = _roof_data()
    judged = roofline.against_roof(roofline.poisson_rates(runs), stream, caches)
    assert judged["verdict"] == "not shown" and not judged["beyond_spread"]
    assert "cannot decide" in judged["why"] and "with so few runs (3 runs each)" in judged["why"]
    assert judged["text"].startswith("From memory (n=") and "235" in judged["text"]
    row = lesson.roofline(roofline.poisson_rates(runs), stream, caches, ["r1"])
    assert row.reproduced == "not shown" and row.evidence == "measured"


def test_at_the_roof_after_a_drop_from_the_cache_is_yes():
    """In-cache runs decided faster than the memory-resident ones, which differ from the roof by
    no more than the margin: 'yes', a measured effect decided by the statistics."""
    rates = _rates({1024: IN_CACHE, 3072: [399, 400, 401, 400.5]})
    judged = roofline.against_roof(rates, ROOF_RUNS, _caches())
    assert judged["at_roof"].outcome == "equivalent" and judged["drop"].outcome == "different"
    assert judged["verdict"] == "yes" and judged["beyond_spread"]
    assert lesson.roofline(rates, ROOF_RUNS, _caches()).reproduced == "yes"


def test_below_the_roof_decided_is_partly_and_says_the_share():
    judged = roofline.against_roof(_rates({1024: IN_CACHE, 3072: [290, 280, 300, 295]}), ROOF_RUNS, _caches())
    assert judged["verdict"] == "partly" and phrases.pct(judged["share"]) in judged["why"]
    assert judged["at_roof"].sentence().startswith("the solver (n=3072) is 26 % lower than the STREAM runs'")


def test_above_the_roof_decided_is_no():
    judged = roofline.against_roof(_rates({1024: IN_CACHE, 3072: [500, 510, 520, 505]}), ROOF_RUNS, _caches())
    assert judged["verdict"] == "no" and "above" in judged["why"]


def test_a_cache_grid_no_faster_is_no_and_noisy_runs_are_not_shown():
    """The grid in cache no faster than the one from memory (no difference beyond the margin):
    memory does not slow it, 'no'. Runs whose CIs straddle 1: 'not shown', saying why."""
    same = roofline.against_roof(_rates({1024: [290, 291, 292, 290.5], 3072: [290, 291, 290.5, 291.5]}),
                                 ROOF_RUNS, _caches())
    assert same["drop"].outcome == "equivalent" and same["verdict"] == "no"
    noisy = roofline.against_roof(_rates({1024: [700, 300, 720, 710], 3072: [290, 420, 300, 295]}),
                                  ROOF_RUNS, _caches())
    assert noisy["verdict"] == "not shown" and "cannot decide" in noisy["why"]


def test_write_allocate_needs_a_decided_difference():
    """Copy decided slower than Update (4 runs each): shown. Copy as fast as Update: not shown, and
    the conclusion says the roof assumes it. The recorded runs (3 a side) cannot decide."""
    slow_copy = [_stream({"Copy": c, "Update": u, "Sum": 0.2})
                 for c, u in ((0.52, 0.26), (0.53, 0.27), (0.54, 0.26), (0.52, 0.265))]
    ev = roofline.write_allocate_evidence(slow_copy)
    assert ev["shown"] and "Copy is 2.0x slower than Update" in ev["text"]
    assert ev["conclusion"].startswith("Copy reads one line and stores one")
    same = [_stream({"Copy": c, "Update": u, "Sum": 0.2})
            for c, u in ((0.26, 0.27), (0.27, 0.26), (0.265, 0.265), (0.262, 0.268))]
    ev2 = roofline.write_allocate_evidence(same)
    assert not ev2["shown"] and "assumption" in ev2["conclusion"]
    assert not roofline.write_allocate_evidence(_roof_data()[0])["shown"]


def _experiment(solver, fused=None, no_prefetch=None) -> pd.DataFrame:
    parts = [_rates({1024: IN_CACHE, 3072: solver})]
    if fused is not None:
        parts.append(_rates({3072: fused}, "fused"))
    if no_prefetch is not None:
        parts.append(_rates({3072: no_prefetch}, lesson.NO_PREFETCH))
    return pd.concat(parts, ignore_index=True)


def test_what_limits_the_solver_follows_the_decisions():
    """Below the roof and slower from memory, with prefetch decided faster: the sentence says
    memory latency, not bandwidth, and the row's `why` names the prefetch gain. Without a
    decided prefetch gain it says so and names no cause."""
    rates = _experiment([280, 285, 290, 282], fused=[281, 284, 289, 283], no_prefetch=[200, 205, 198, 202])
    report = lesson.roof_report(rates, ROOF_RUNS, _caches())
    t = report["table"]
    assert list(t.index) == ["from memory: the solver / its roof", "in cache / from memory",
                             "software prefetch / none (from memory)", "fused / separate (from memory)"]
    assert list(t["outcome"]) == ["different", "different", "different", "equivalent"]
    assert "decided below it" in report["limit"] and "memory latency" in report["limit"]
    assert "prefetching, which moves no fewer bytes, makes it 41 % higher" in report["limit"]
    row = lesson.roofline(rates, ROOF_RUNS, _caches())
    assert row.reproduced == "partly" and "software prefetch" in row.why
    flat = lesson.roof_report(_experiment([280, 285, 290, 282], no_prefetch=[281, 200, 289, 300]), ROOF_RUNS, _caches())
    assert "do not decide what software prefetch buys" in flat["limit"] and "latency" not in flat["limit"]


def _fusion(fused):
    rates = _experiment([280, 285, 290, 282], fused=fused)
    report = lesson.roof_report(rates, ROOF_RUNS, _caches())
    return report, lesson.fusion_quiz(report["cmps"], report["judged"])


@pytest.mark.parametrize("fused, option, words", [
    ([281, 284, 289, 283], 2, "gained nothing measurable"),    # no difference larger than 5 %
    ([320, 325, 330, 322], 1, "14 % higher"),                   # a decided gain, its CI below 33 %
    ([370, 375, 380, 372], 0, "32 % higher"),                   # a gain whose CI reaches 33 %
    ([240, 244, 238, 241], 3, "lower"),                         # a decided loss
    ([200, 330, 280, 380], 4, "cannot tell"),                   # undecided
])
def test_fusion_takeaway_and_quiz_follow_the_decision(fused, option, words):
    """The fusion sentence and the quiz's answer come from the decision on fused against separate
    from memory (no fixed '33 %'); the quiz accepts only its options."""
    report, q = _fusion(fused)
    assert q["answer"] == lesson.FUSION_OPTIONS[option]
    assert words in report["fusion"]
    quiz.ask(**q)


def test_a_run_set_without_a_grid_from_memory_says_so():
    rates = pd.concat([_rates({64: [500, 510, 505, 507], 512: [450, 455, 452, 451]}),
                       _rates({512: [460, 462, 458, 461]}, "fused")], ignore_index=True)
    report = lesson.roof_report(rates, ROOF_RUNS, _caches())
    assert report["judged"] is None and "No grid from memory" in report["limit"]
    assert list(report["table"].index) == ["fused / separate"]
    quiz.ask(**lesson.fusion_quiz(report["cmps"], report["judged"]))
    assert lesson.roofline(rates, ROOF_RUNS, _caches()).reproduced == "not shown"


def test_roof_specs_alternate_stream_and_solver_in_one_experiment(tmp_path):
    """One experiment.run call holds STREAM, the solver from memory (separate, fused, and the
    build without prefetch as a program run writing its own report), then the grids in cache,
    each `rounds` times and alone on the node."""
    exe = tmp_path / "poisson"
    exe.write_text("#!/bin/sh\n")
    exe.chmod(0o755)
    specs = lesson.roof_specs(1_000_000, [192, 3072], 1.3e8, 4, 2, no_prefetch=exe)
    assert [(s.kernel, s.label) for s in specs] == [("stream", "triad"), ("poisson", "separate"),
                                                   ("poisson", "fused"), ("program", lesson.NO_PREFETCH),
                                                   ("poisson", "separate")]
    assert all(s.repetitions == 4 and s.cpus_per_task == 2 for s in specs)
    assert specs[3].command[-2:] == ["--json", roofline.PROGRAM_REPORT]
    assert specs[1].args.n == 3072 and specs[4].args.n == 192


def test_not_the_bandwidth_only_when_decided_below_the_roof():
    """A decided prefetch gain says memory latency limits the solver; 'not the bandwidth' only
    when the solver is also decided below its roof."""
    rates = _experiment([280, 420, 290, 282], no_prefetch=[200, 205, 198, 202])
    limit = lesson.roof_report(rates, ROOF_RUNS, _caches())["limit"]
    assert "cannot decide whether it is at it" in limit
    assert "(memory latency)." in limit and "not the bandwidth" not in limit


def test_a_decided_drop_with_the_roof_undecided_is_partly():
    """Leaving the caches decided slower, but the memory-resident runs too noisy to place against
    the roof: the memory part of the claim is shown, the cap is not: 'partly', saying which."""
    rates = _rates({1024: IN_CACHE, 3072: [280, 420, 290, 282]})
    judged = roofline.against_roof(rates, ROOF_RUNS, _caches())
    assert judged["drop"].outcome == "different" and judged["at_roof"].outcome == "undecided"
    assert judged["verdict"] == "partly" and "cannot decide whether it reaches" in judged["why"]


def test_a_stricter_level_leaves_undecided_what_95_percent_decides():
    """The same 4 + 4 runs: decided at 95 %, undecided at the level of one look among the adaptive
    roof experiment's (stats.looks), which needs a fifth round."""
    from hpclab.analysis import stats

    rates = _rates({1024: IN_CACHE, 3072: [520, 600, 480, 650]})
    _, look = stats.looks(paired=False, min_rounds=lesson.ROOF_MIN_ROUNDS, max_rounds=lesson.ROOF_MAX_ROUNDS)
    assert roofline.against_roof(rates, ROOF_RUNS, _caches())["drop"].outcome == "different"
    assert roofline.against_roof(rates, ROOF_RUNS, _caches(), level=look)["drop"].outcome == "undecided"


class _Run:
    def __init__(self, kernel, result=None):
        self.spec, self._result, self.path = type("S", (), {"kernel": kernel})(), result, Path("/nonexistent")

    def result(self):
        return self._result


@pytest.mark.parametrize("memory, stop", [([400, 401, 399, 402, 400], True), ([450, 600, 380, 650, 520], False)])
def test_the_roof_experiment_stops_once_both_comparisons_are_decided(monkeypatch, memory, stop):
    """Does the stop rule end the rounds when the grid in cache and the roof are both decided
    against the memory grid, and ask for another round when the memory grid's noise leaves them
    undecided? With no grid from memory (the quick set) there is nothing to decide: it stops."""
    rates, caches = _rates({1024: IN_CACHE + [712], 3072: memory}), _caches()
    monkeypatch.setattr(roofline, "poisson_rates", lambda runs: rates)
    monkeypatch.setattr(roofline, "cache_sizes", lambda path: caches)
    groups = [[_Run("stream", r) for r in ROOF_RUNS + ROOF_RUNS[:1]], [_Run("poisson")]]
    assert lesson.roof_decided(groups) is stop
    monkeypatch.setattr(roofline, "poisson_rates", lambda runs: _rates({1024: IN_CACHE}))
    assert lesson.roof_decided(groups) is True
