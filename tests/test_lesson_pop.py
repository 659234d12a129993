"""Do notebook 07's sentences follow the numbers of the study they are given?"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from hpclab.course import lesson_pop
from hpclab.tools.counters import InstructionCounts
from hpclab.trace import pop
from hpclab.trace.builder import TraceBuilder
from hpclab.trace.split import split


def _study(heavy_ns: int, light_ns: int = 500) -> lesson_pop.Study:
    def run(computes):
        b = TraceBuilder(len(computes))
        for r, ns in enumerate(computes):
            b[r].compute(ns).barrier()
        return split(b.build())
    return lesson_pop.Study({1: [run([heavy_ns + light_ns])] * 3, 2: [run([heavy_ns, light_ns])] * 3}, {}, "ideal")


def _counts(p, useful):
    t = pd.DataFrame([{"rank": 0, "phase": "red/black sweeps", "instructions": float(useful)}])
    return InstructionCounts(p, 64, 1, Path("."), t)


def test_verdicts_name_the_lowest_factor_and_the_line():
    study = _study(900, 100)          # the same work, split 900 : 100: load balance 500/900
    tbl = lesson_pop.table(study)
    text = lesson_pop.verdicts(tbl, study)
    assert "load balance **0.56** (below the line: worth fixing)" in text
    assert "*instruction scalability* is not shown: instructions were not counted" in text
    assert "The lowest factor is **load balance**" in text
    balanced = lesson_pop.verdicts(lesson_pop.table(_study(500)), _study(500))
    assert "load balance **1.00** (at or above the line: fine)" in balanced


def test_instruction_sentence_follows_the_counts():
    more = lesson_pop.instruction_sentence({1: _counts(1, 100e6), 2: _counts(2, 110e6)})
    assert "10 % more than on 1 rank(s)" in more and "work the decomposition adds" in more
    same = lesson_pop.instruction_sentence({1: _counts(1, 100e6), 2: _counts(2, 100.2e6)})
    assert "the same as on 1 rank(s) to within 0.5 %" in same and "adds" not in same
    fewer = lesson_pop.instruction_sentence({1: _counts(1, 100e6), 2: _counts(2, 90e6)})
    assert "10 % fewer" in fewer


def test_instruction_counts_fill_the_instruction_factor():
    tbl = lesson_pop.table(_study(900, 100), {1: _counts(1, 100.0), 2: _counts(2, 125.0)})
    assert tbl.loc["instruction scalability", 2] == 0.8
    assert "IPC scalability" in tbl.attrs["not available"]
    assert pop.worst(tbl)[0] in pop.leaves(tbl)


def test_superlinear_computation_with_equal_instructions_is_said_as_such():
    """Two ranks computing the same instructions in less total time: above 1, and the sentence says why
    it can be and what is not measured."""
    def run(computes):
        b = TraceBuilder(len(computes))
        for r, ns in enumerate(computes):
            b[r].compute(ns).barrier()
        return split(b.build())
    study = lesson_pop.Study({1: [run([1000])], 2: [run([420, 420])]}, {}, "ideal")
    tbl = lesson_pop.table(study, {1: _counts(1, 100.0), 2: _counts(2, 100.0)})
    text = lesson_pop.verdicts(tbl, study)
    assert "above 1 (1.19) while the instructions stayed the same (1.00)" in text
    assert "above 1" not in lesson_pop.verdicts(lesson_pop.table(_study(900, 100)), _study(900, 100))
