"""Do the POP metrics of a scaling study come out as POP defines them, on traces with known answers?"""

from __future__ import annotations

import math

import pytest

from hpclab.core.errors import HpclabError
from hpclab.trace import pop
from hpclab.trace.builder import TraceBuilder
from hpclab.trace.split import split


def run(computes):
    """One rank per entry: compute that long (ns), then a barrier, on the ideal network."""
    b = TraceBuilder(len(computes))
    for r, ns in enumerate(computes):
        b[r].compute(ns).barrier()
    return split(b.build())


STUDY = {1: run([1000]), 2: run([500, 600]), 4: run([250, 250, 250, 400])}


def test_the_parallel_half_comes_from_each_split():
    t = pop.pop_table(STUDY)
    assert t.loc["load balance", 2] == pytest.approx(550 / 600)
    assert t.loc["load balance", 4] == pytest.approx(287.5 / 400)
    assert t.loc["serialisation", 4] == pytest.approx(1.0) and t.loc["transfer", 4] == pytest.approx(1.0)
    assert t.loc["parallel efficiency", 4] == pytest.approx(287.5 / 400)
    assert t.attrs["reference"] == 1 and list(t.columns) == [1, 2, 4]


def test_computation_scalability_compares_the_useful_computation_with_the_reference():
    t = pop.pop_table(STUDY)
    assert t.loc["computation scalability", 2] == pytest.approx(1000 / 1100)
    assert t.loc["computation scalability", 4] == pytest.approx(1000 / 1150)
    assert t.loc["global efficiency", 4] == pytest.approx(287.5 / 400 * 1000 / 1150)
    ref = t[1].dropna()
    assert len(ref) >= 7 and all(v == pytest.approx(1.0) for v in ref)


def test_instruction_scalability_from_counts_and_missing_factors_say_why():
    t = pop.pop_table(STUDY, instructions={1: 1e6, 2: 1.1e6, 4: 1.25e6}, counter_source="callgrind",
                      no_counters_reason="perf stat: cycles not supported on this VM")
    assert t.loc["instruction scalability", 4] == pytest.approx(1 / 1.25)
    assert math.isnan(t.loc["IPC scalability", 4])
    assert t.attrs["not available"]["IPC scalability"].startswith("perf stat")
    assert "instruction scalability" not in t.attrs["not available"]


def test_ipc_and_frequency_from_cycles():
    ins = {1: 1000.0, 2: 1000.0, 4: 1000.0}
    cyc = {1: 1000.0, 2: 1250.0, 4: 1000.0}
    t = pop.pop_table(STUDY, instructions=ins, cycles=cyc)
    assert t.loc["IPC scalability", 2] == pytest.approx(0.8)
    # frequency: cycles per ns of useful compute, against the reference's
    assert t.loc["frequency scalability", 2] == pytest.approx((1250 / 1100) / (1000 / 1000))


def test_worst_names_the_factor_to_look_at_first():
    t = pop.pop_table(STUDY)
    name, value = pop.worst(t)
    assert name == "load balance" and value == pytest.approx(287.5 / 400)


def test_labelled_rows_follow_pops_hierarchy():
    rows = list(pop.labelled(pop.pop_table(STUDY)).index)
    assert rows[0] == "global efficiency" and rows[4] == "      serialisation"


def test_an_empty_study_is_refused():
    with pytest.raises(HpclabError, match="no traced runs"):
        pop.pop_table({})
