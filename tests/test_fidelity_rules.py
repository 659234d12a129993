"""Can a fidelity row call a model's support a reproduction? (It must not.)"""

from __future__ import annotations

import json

import pytest

from hpclab.core.errors import HpclabError
from hpclab.course import fidelity


def test_yes_needs_a_measured_effect_beyond_the_spread():
    with pytest.raises(HpclabError, match="beyond the run-to-run spread"):
        fidelity.make_row("numa", "-", "yes", "x")
    with pytest.raises(HpclabError, match="beyond the run-to-run spread"):
        fidelity.make_row("numa", "-", "yes", "x", evidence="replayed", beyond_spread=True)
    row = fidelity.make_row("numa", "-", "yes", "x", evidence="measured", beyond_spread=True)
    assert (row.reproduced, row.evidence) == ("yes", "measured")


def test_predicted_is_for_replays_and_simulations_only():
    with pytest.raises(HpclabError, match="'predicted' is for a replay or a simulation"):
        fidelity.make_row("mapping-time", "-", "predicted", "x")
    row = fidelity.make_row("mapping-time", "-", "predicted", "x", evidence="simulated", prediction="5 % faster")
    assert row.prediction == "5 % faster"


def test_unknown_evidence_is_refused():
    with pytest.raises(HpclabError, match="evidence 'guessed'"):
        fidelity.make_row("numa", "-", "partly", "x", evidence="guessed")


def test_the_report_table_has_evidence_and_prediction_columns(tmp_path):
    rows = [fidelity.make_row("mapping-time", "1.0 vs 1.0 ms", "predicted", "a simulation", evidence="simulated",
                              prediction="blocked 7 % faster")]
    table = fidelity.html_table(rows)
    assert "<th>evidence</th>" in table and "<th>predicted by a model</th>" in table
    assert "blocked 7 % faster" in table and ">simulated<" in table
    written = json.loads(fidelity.write_json(rows, tmp_path / "f.json").read_text())
    assert written[0]["evidence"] == "simulated" and written[0]["prediction"] == "blocked 7 % faster"


def test_rows_recorded_before_evidence_existed_still_load(tmp_path, monkeypatch):
    """A ledger file without the new fields (an older course run) loads as measured, no prediction."""
    monkeypatch.setenv(fidelity.LEDGER_ENV, str(tmp_path))
    old = {"id": "numa", "claim": "c", "seed": "s", "here": "-", "reproduced": "not shown", "why": "w", "runs": []}
    (tmp_path / "numa.json").write_text(json.dumps(old))
    row = {r.id: r for r in fidelity.collect(tmp_path)}["numa"]
    assert row.evidence == "measured" and row.prediction == ""
