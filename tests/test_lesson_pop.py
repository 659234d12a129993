"""Do notebook 07's sentences follow the numbers of the study they are given?"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from hpclab.course.lessons import pop as lesson_pop
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
    assert "At **2 ranks** the lowest factor is **load balance** (0.56), below POP's line of 0.8" in text
    balanced = lesson_pop.verdicts(lesson_pop.table(_study(500)), _study(500))
    assert "at or above POP's line of 0.8" in balanced


def _table(**leaves):
    """A POP table at 2 ranks with the given leaf factors (the others 1.0)."""
    rows = [m for m, _ in pop.METRICS]
    col = {m: float("nan") if m in ("instruction scalability", "IPC scalability", "frequency scalability") else 1.0
           for m in rows}
    col.update({k.replace("_", " "): v for k, v in leaves.items()})
    tbl = pd.DataFrame({1: {m: 1.0 for m in rows}, 2: col}).reindex(rows)
    tbl.attrs.update(reference=1, **{"not available": {}})
    return tbl


def test_the_quiz_is_answerable_from_the_numbers_shown():
    """Three factors that all read 0.78 with two decimals: a third decimal tells the lowest, shown
    in the verdicts too; factors equal even then are one option, the answer; a factor shown as
    0.80 (0.7996) is judged as shown, at the line."""
    tbl = _table(load_balance=0.7849, transfer=0.7812, computation_scalability=0.7801)
    assert lesson_pop.shown_digits(tbl) == 3
    options, answer, value = lesson_pop.look_first(tbl)
    assert answer == "computation scalability" and value == "0.780" and answer in options
    assert "the lowest factor is **computation scalability** (0.780)" in lesson_pop.verdicts(tbl, _study(500))
    tied = _table(load_balance=0.7801, transfer=0.78012)
    options, answer, value = lesson_pop.look_first(tied)
    assert answer == "load balance or transfer" and options[0] == answer and "transfer" not in options[1:]
    at_line = _table(load_balance=0.7996, transfer=0.9)
    assert "**load balance** (0.80), at or above POP's line" in lesson_pop.verdicts(at_line, _study(500))


def test_the_table_shows_the_run_with_the_median_parallel_efficiency():
    """Three runs at 2 ranks whose parallel efficiencies are 0.5, 0.9 and 0.7: the table shows the
    0.7 one, the median, whatever their run times."""
    def run(heavy):
        b = TraceBuilder(2)
        b[0].compute(heavy).barrier()
        b[1].compute(500).barrier()
        return split(b.build())
    runs = [run(1000), run(556), run(715)]          # parallel efficiency 0.75, 0.95, 0.85
    study = lesson_pop.Study({1: [run(500)], 2: runs}, {}, "ideal")
    shown = study.table_splits()[2].parallel
    assert shown == sorted(s.parallel for s in runs)[1]
    assert lesson_pop.median_index([0.5, 0.9, 0.7]) == 2 and lesson_pop.median_index([3.0, 1.0]) == 1


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
