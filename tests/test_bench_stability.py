"""make bench-stability's bookkeeping (bench/stability.py): which claims kept their verdict across
the quiet runs, and an earlier report kept, not overwritten. No course is run here."""

from __future__ import annotations

import json

from bench import stability


def _run(loaded: bool, seconds: float, **verdicts) -> dict:
    return {"loaded": loaded, "started": "2026-11-27T21:00:00", "exit_code": 0, "notebook_seconds": seconds,
            "failures": 0, "jobs": 100, "verdicts": verdicts, "disturbed": {}}


def test_a_claim_is_stable_only_when_every_quiet_run_gave_the_same_verdict():
    """Does a verdict that changed between quiet runs count as unstable, while the loaded run's own
    verdict does not count, and is the slowest quiet run's time the one reported?"""
    runs = [_run(False, 550.0, a="yes", b="no"), _run(False, 590.0, a="yes", b="partly"),
            _run(True, 800.0, a="partly", b="no")]
    result = stability.summarise(runs)
    assert result["stable"] == {"a": True, "b": False}
    assert result["unloaded_max_seconds"] == 590.0


def test_an_earlier_report_is_kept(tmp_path, monkeypatch):
    """Does a second report leave the first one beside it, renamed, instead of overwriting it?"""
    monkeypatch.setattr(stability, "BENCH_DIR", tmp_path)
    monkeypatch.setattr("bench.common.BENCH_DIR", tmp_path)
    first = stability.summarise([_run(False, 500.0, a="yes")])
    stability.write(first)
    stability.write(stability.summarise([_run(False, 510.0, a="no")]))
    kept = sorted(p.name for p in tmp_path.glob("verdict-stability-*.json"))
    assert len(kept) == 1 and json.loads((tmp_path / kept[0]).read_text())["runs"][0]["verdicts"] == {"a": "yes"}
    assert json.loads((tmp_path / "verdict-stability.json").read_text())["runs"][0]["verdicts"] == {"a": "no"}
    assert "| a |" in (tmp_path / "verdict-stability.md").read_text()


def test_the_table_splits_the_seconds_into_notebooks_and_labs(tmp_path, monkeypatch):
    """Does the table give the lessons' notebooks and the labs their own lines of seconds?"""
    monkeypatch.setattr(stability, "BENCH_DIR", tmp_path)
    monkeypatch.setattr("bench.common.BENCH_DIR", tmp_path)
    run = dict(_run(False, 30.0, a="yes"), seconds={"notebooks/02-transports.ipynb": 20.0,
                                                   "labs/lab-transports/lab-transports.ipynb": 10.0})
    stability.write(stability.summarise([run]))
    text = (tmp_path / "verdict-stability.md").read_text()
    assert "of which notebooks/ | 20 |" in text and "of which labs/ | 10 |" in text
