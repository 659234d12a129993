"""The fidelity table: rows built from recorded runs, collected by the course run, never typed."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from hpclab.course import fidelity, lessons
from hpclab.course.lessons import scaling
from hpclab.core.errors import HpclabError


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
    assert [r.id for r in rows] == [c.id for c in lessons.claims()]
    numa = next(r for r in rows if r.id == "numa")
    assert numa.runs == ["r1"] and numa.here == "1 NUMA node"
    others = [r for r in rows if r.id != "numa"]
    assert all(r.reproduced == "not shown" and "no notebook recorded" in r.why for r in others)
    out = fidelity.write_json(rows, tmp_path / "fidelity.json")
    data = json.loads(out.read_text())
    assert {tuple(sorted(d)) for d in data} == {("claim", "evidence", "here", "id", "prediction", "reproduced", "runs",
                                                 "seed", "why")}
    assert "<table>" in fidelity.html_table(rows)


def test_the_ledger_goes_where_the_user_may_write(tmp_path, monkeypatch):
    """A room's student cannot write the course copy's build/: with HPCLAB_OUTPUT set (their
    server sets it), does a notebook's row go there, and does the course run's own ledger
    (HPCLAB_FIDELITY_DIR) still come first?"""
    from hpclab.core import paths

    monkeypatch.delenv(fidelity.LEDGER_ENV, raising=False)
    monkeypatch.delenv(paths.OUTPUT_ENV, raising=False)
    assert fidelity.ledger_dir() == paths.build_dir() / "fidelity"
    monkeypatch.setenv(paths.OUTPUT_ENV, str(tmp_path / "mine"))
    assert paths.output_dir() == tmp_path / "mine"
    fidelity.record(fidelity.make_row("numa", "1 NUMA node", "not shown", "single NUMA node", ["r1"]))
    assert (tmp_path / "mine" / "fidelity" / "numa.json").is_file()
    monkeypatch.setenv(fidelity.LEDGER_ENV, str(tmp_path / "course-run"))
    assert fidelity.ledger_dir() == tmp_path / "course-run"


def _captured_callgrind(ranks: int = 1, tool: str = "callgrind"):
    from hpclab.tools import profilers

    data = Path(__file__).parent / "data" / "hotspots"
    functions = profilers.merge_self_inclusive(
        profilers.parse_callgrind_annotate((data / "callgrind-annotate-self.txt").read_text()),
        profilers.parse_callgrind_annotate((data / "callgrind-annotate-inclusive.txt").read_text()))
    result = {"results": {"per_rank": [{}] * ranks}}
    return profilers.Profile(tool, "instructions", Path("runs/06/cg-1"), [], functions, result)


def test_hotspots_row_from_a_captured_one_rank_callgrind_profile_is_partly():
    """Does a one-rank callgrind profile (the solver's loops lead, MPI library 5 %) give 'partly',
    saying that the claim's MPI part is not shown by a one-rank run, and name the leading loop?"""
    profile = _captured_callgrind()
    row = scaling.hotspots(profile)
    shares = profile.phases().set_index("phase")["share"]
    assert row.reproduced == "partly" and "one rank" in row.why and "MPI part is not shown" in row.why
    assert "MPI part (MPIDI_CH3I_Progress in the seed's top five): not shown" in row.here
    assert shares.idxmax() in row.here and row.runs == ["cg-1"] and row.evidence == "measured"


def test_hotspots_yes_only_from_exact_counts_of_a_multi_rank_run():
    """Is 'yes' given for exact counts (callgrind) on one rank of a 2-rank run, and 'partly' for
    one sampled profile (perf) of the same shares?"""
    assert scaling.hotspots(_captured_callgrind(ranks=2)).reproduced == "yes"
    assert scaling.hotspots(_captured_callgrind(ranks=2, tool="perf record")).reproduced == "partly"


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
