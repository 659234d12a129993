"""`hpclab trace RUN --pop [RUNS]` and `--critical-path` on the hand-written run of test_cli_trace."""

from __future__ import annotations

import re

import pytest

from hpclab.cli import main as cli
from tests.trace.test_cli_trace import eager4096, write_run  # noqa: F401  (fixture)


def test_pop_of_one_run_prints_the_parallel_half_and_says_why_counts_are_missing(tmp_path, capsys, eager4096):
    run = write_run(tmp_path / "run")
    assert cli.main(["trace", str(run), "--pop"]) == 0
    out = capsys.readouterr().out
    assert "POP efficiencies (reference: 2 rank(s)" in out
    assert re.search(r"^\s*load balance\s+\d\.\d\d", out, re.M)
    assert "n/a instruction scalability: a trace holds no instruction or cycle counts" in out
    assert (run / "trace-pop.png").is_file()


def test_pop_names_a_second_run_of_the_same_count(tmp_path, capsys, eager4096):
    a, b = write_run(tmp_path / "a"), write_run(tmp_path / "b", fin0=9500)
    assert cli.main(["trace", str(a), "--pop", str(b)]) == 0
    assert f"note: {b} also has 2 ranks; the table uses {a}" in capsys.readouterr().out


def test_critical_path_is_printed_and_drawn(tmp_path, capsys, eager4096):
    run = write_run(tmp_path / "run")
    assert cli.main(["trace", str(run), "--critical-path"]) == 0
    out = capsys.readouterr().out
    m = re.search(r"critical path: (\S+) s of T_real (\S+) s, ending on rank (\d)", out)
    assert m and float(m.group(1)) == pytest.approx(float(m.group(2)), rel=0.05)
    assert "replayed on the ideal network: a prediction" in out
    assert list(run.glob("trace-critical-path*.png"))
