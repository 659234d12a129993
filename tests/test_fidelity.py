"""The fidelity table: rows built from recorded runs, collected by the course run, never typed."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from hpclab.course import fidelity
from hpclab.core.errors import HpclabError
from hpclab.runs.parse import parse_run

RUNS = Path(__file__).parent / "data" / "runs"


def _pingpong(label_of: dict[str, str]) -> pd.DataFrame:
    """Recorded ping-pong runs relabelled as the selections notebook 02 would have made."""
    parts = []
    for folder, label in label_of.items():
        t = parse_run(RUNS / folder, "pingpong")
        t["label"] = label
        parts.append(t)
    return pd.concat(parts, ignore_index=True)


def test_fallback_to_tcp_is_reproduced_from_the_runs():
    """Does a vader run beside a run that ended on TCP give 'yes', with both transports and run ids?"""
    row = fidelity.transport_fallback(_pingpong({"pingpong-vader": "default", "pingpong-tcp": "no vader"}))
    assert row.reproduced == "yes"
    assert "ob1/vader" in row.here and "ob1/tcp" in row.here
    assert len(row.runs) == 2


def test_no_fallback_when_the_transport_did_not_change():
    """Two selections that both ran on vader: 'no', and a missing selection: 'not shown'."""
    vader = _pingpong({"pingpong-vader": "default"})
    both = pd.concat([vader, vader.assign(label="no vader")], ignore_index=True)
    row = fidelity.transport_fallback(both)
    assert row.reproduced == "no" and "same transport" in row.why
    assert fidelity.transport_fallback(vader).reproduced == "not shown"


def test_component_selection_checks_each_run_against_what_it_asked():
    """Are honoured selections 'yes', and a run that reports another BTL than asked 'no'?"""
    good = fidelity.component_selection(_pingpong({"pingpong-vader": "ob1+vader", "pingpong-tcp": "ob1+tcp"}))
    assert good.reproduced == "yes", good
    bad = fidelity.component_selection(_pingpong({"pingpong-vader": "ob1+tcp", "pingpong-tcp": "ob1+vader"}))
    assert bad.reproduced == "no"
    assert "not as asked" in bad.here


def test_unknown_claim_and_verdict_are_refused():
    """Can a row only be made for a known claim with a known verdict?"""
    with pytest.raises(HpclabError):
        fidelity.make_row("made-up", "-", "yes", "x")
    with pytest.raises(HpclabError):
        fidelity.make_row("numa", "-", "maybe", "x")


def test_collect_lists_every_claim_and_marks_unrecorded_ones(tmp_path, monkeypatch):
    """Does the collected table hold every claim, the recorded row as recorded and the rest 'not shown'?"""
    monkeypatch.setenv(fidelity.LEDGER_ENV, str(tmp_path / "ledger"))
    fidelity.record(fidelity.make_row("numa", "1 NUMA node", "not shown", "single NUMA node", ["r1"]))
    rows = fidelity.collect()
    assert [r.id for r in rows] == list(fidelity.CLAIMS)
    numa = next(r for r in rows if r.id == "numa")
    assert numa.runs == ["r1"] and numa.here == "1 NUMA node"
    others = [r for r in rows if r.id != "numa"]
    assert all(r.reproduced == "not shown" and "no notebook recorded" in r.why for r in others)
    out = fidelity.write_json(rows, tmp_path / "fidelity.json")
    data = json.loads(out.read_text())
    assert {tuple(sorted(d)) for d in data} == {("claim", "here", "id", "reproduced", "runs", "seed", "why")}
    assert "<table>" in fidelity.html_table(rows)


def test_hotspots_row_from_a_captured_callgrind_profile():
    """Does the captured callgrind profile of the solver give 'yes', naming the leading loop?"""
    from hpclab.tools import profilers

    data = Path(__file__).parent / "data" / "hotspots"
    functions = profilers.merge_self_inclusive(
        profilers.parse_callgrind_annotate((data / "callgrind-annotate-self.txt").read_text()),
        profilers.parse_callgrind_annotate((data / "callgrind-annotate-inclusive.txt").read_text()))
    profile = profilers.Profile("callgrind", "instructions", Path("runs/06/cg-1"), [], functions, {})
    row = fidelity.hotspots(profile)
    shares = profile.phases().set_index("phase")["share"]
    assert row.reproduced == "yes"  # residuum leads, MPI library 5 %
    assert shares.idxmax() in row.here and row.runs == ["cg-1"]


def test_mapping_messages_needs_exact_counts_and_fewer_with_blocks():
    """Exact traced counts, fewer with the blocked mapping: 'yes'; a count off by one: 'partly'."""
    counts = pd.DataFrame({
        "mapping": ["linear", "blocked"], "run": ["r1", "r2"], "ranks where mapped": [True, True],
        "inter-node messages, predicted": [1608, 804], "inter-node messages, traced": [1608, 804]})
    row = fidelity.mapping_messages(counts)
    assert row.reproduced == "yes" and "2.0x" in row.here and row.runs == ["r1", "r2"]
    off = counts.assign(**{"inter-node messages, traced": [1608, 805]})
    assert fidelity.mapping_messages(off).reproduced == "partly"
    assert fidelity.mapping_messages(pd.DataFrame()).reproduced == "not shown"


def _subdomains(strip_ns, tile_ns):
    rows = [{"case": "1D 1x384", "run": f"s{i}", "ns_per_point": v} for i, v in enumerate(strip_ns)]
    rows += [{"case": "2D 24x16", "run": f"t{i}", "ns_per_point": v} for i, v in enumerate(tile_ns)]
    return pd.DataFrame(rows)


def test_grid_row_needs_the_strip_slower_beyond_the_spread():
    """Strip slower than every tile run: 'yes'; overlapping runs: 'partly'; equal: 'no'."""
    yes = fidelity.grid_2d_vs_1d(_subdomains([3.7, 3.8, 3.9], [2.4, 2.5, 2.6]))
    assert yes.reproduced == "yes" and "1.52x" in yes.here and len(yes.runs) == 6
    assert fidelity.grid_2d_vs_1d(_subdomains([2.5, 3.8, 3.9], [2.4, 2.5, 2.6])).reproduced == "partly"
    assert fidelity.grid_2d_vs_1d(_subdomains([2.5, 2.5], [2.5, 2.5])).reproduced == "no"
    assert fidelity.grid_2d_vs_1d(_subdomains([], [2.5])).reproduced == "not shown"


def test_dependency_row_reads_the_chain_cost_and_t_depend():
    """A chain costing 3.7x with T_depend 1.6x is 'yes'; 1.5x is 'partly'; no model column: 'not shown'."""
    dep = pd.DataFrame({"exchange": ["naive", "naive", "nonblocking", "nonblocking"], "ranks": 4,
                        "T_chain": [0.047, 0.047, 0.0127, 0.0127], "T_depend": [0.114, 0.114, 0.069, 0.069]})
    row = fidelity.nonblocking_dependency(dep, ["a", "b"])
    assert row.reproduced == "yes" and "3.7x" in row.here and row.runs == ["a", "b"]
    assert fidelity.nonblocking_dependency(dep.assign(T_chain=[0.015, 0.015, 0.01, 0.01])).reproduced == "partly"
    # T_depend may even be lower for the naive runs: the row still rests on the chain's cost, and says so
    low = fidelity.nonblocking_dependency(dep.assign(T_depend=[0.05, 0.05, 0.069, 0.069]))
    assert low.reproduced == "yes" and "0.7x" in low.why
    assert fidelity.nonblocking_dependency(dep.drop(columns="T_chain")).reproduced == "not shown"


def _split(**parts):
    from hpclab.trace.split import Split

    base = dict(T_real=100.0, T_ideal=0, T_comp=0, comp_max=0, T_mpi=0, T_transfer=0, T_load=0, T_depend=0,
                T_wait=0, load_balance=1, serialisation=1, transfer=1, communication=1, parallel=1, nranks=4,
                T_rest=0.0)
    base.update(parts)
    return Split(**base)


def test_imbalance_split_row_names_what_leads():
    """Compute and transfer leading: 'yes'; the rest leading an oversubscribed run: 'partly'; parts not adding up: 'no'."""
    ok = _split(T_comp=50, T_transfer=40, T_load=5, T_depend=5)
    assert fidelity.imbalance_split(ok, "2x2", False).reproduced == "yes"
    crowded = _split(T_comp=20, T_transfer=5, T_load=5, T_depend=5, T_rest=65)
    row = fidelity.imbalance_split(crowded, "2x2", True)
    assert row.reproduced == "partly" and "rest 65%" in row.here and "switched out" in row.why
    assert fidelity.imbalance_split(_split(T_comp=50), "2x2", False).reproduced == "no"


def test_mapping_time_row_from_two_simulations():
    """A blocked mapping 20 % faster in the simulation is 'yes'; equal times 'no'."""
    from types import SimpleNamespace as NS

    lin = NS(split=NS(T_real=1e6), iterations=10)
    assert fidelity.mapping_time(lin, NS(split=NS(T_real=0.8e6), iterations=10)).reproduced == "yes"
    assert fidelity.mapping_time(lin, NS(split=NS(T_real=1e6), iterations=10)).reproduced == "no"


def test_course_run_writes_fidelity_json_and_the_table(tmp_path, monkeypatch):
    """Does a course run collect what its notebooks recorded into fidelity.json and the report,
    and leave the ledger variable as it found it?"""
    import nbformat
    from nbformat.v4 import new_code_cell, new_notebook

    from hpclab.course import runner as course

    monkeypatch.setenv("HPCLAB_HOME", str(tmp_path))
    monkeypatch.setattr(course.paths, "REPO", tmp_path)
    monkeypatch.delenv(fidelity.LEDGER_ENV, raising=False)
    nb = new_notebook(cells=[new_code_cell(
        "from hpclab.course import fidelity\n"
        "fidelity.record(fidelity.make_row('numa', '1 NUMA node (hwloc)', 'not shown', 'one NUMA node', ['r9']))")])
    (tmp_path / "notebooks").mkdir()
    nbformat.write(nb, tmp_path / "notebooks" / "00-x.ipynb")
    report = course.run_course([tmp_path / "notebooks" / "00-x.ipynb"], tmp_path / "out")
    assert report.notebooks[0].ok, report.notebooks[0].error
    rows = {r["id"]: r for r in json.loads((tmp_path / "out" / "fidelity.json").read_text())}
    assert rows["numa"]["runs"] == ["r9"] and rows["roofline"]["reproduced"] == "not shown"
    assert "Fidelity" in (tmp_path / "out" / "index.html").read_text()
    import os
    assert fidelity.LEDGER_ENV not in os.environ
