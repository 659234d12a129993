"""`hpclab trace RUN` on a small run folder whose trace files are written here in the tracer's
format (src/mpitrace/FORMAT.md, with the loader's own dtypes), so every printed number is known.

The run (2 ranks, one node, clocks already agreeing):
  rank 0: Init 0-100 | Recv 8 B from 1 (tag 8) 200-300 | Send 100000 B to 1 (tag 7) 1000-6000 | Finalize fin0
  rank 1: Init 0-100 | Send 8 B to 0 (tag 8) 400-450    | Recv 100000 B from 0 (tag 7) 5000-6000 | Finalize 7000
Rank 0's receive ends (300) before rank 1's send begins (400): one clock-condition violation.
T_real = fin0 - 100. On the ideal network with eager limit 4096 B the big send waits for its
receive, posted at 300 + 4550 = 4850, so rank 0 reaches Finalize at 4850 + (fin0 - 6000); with
every message eager it leaves at 1000 and rank 1 ends last, at 4850 + 1000 = 5850.
"""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

from hpclab.cli import main as cli
from hpclab.core.errors import HpclabError
from hpclab.site import ompi
from hpclab.trace import load


def write_run(folder: Path, fin0: int = 9000) -> Path:
    code = {name: c for c, name in load.CALLS.items()}

    def r(call, seq, t0, t1, peer=-1, tag=-1, nbytes=0):
        return (code[call], 0, seq, t0, t1, nbytes, peer, tag, 0, -1, -1, 0)

    ranks = {
        0: [r("MPI_Init", 0, 0, 100), r("MPI_Recv", 1, 200, 300, 1, 8, 8),
            r("MPI_Send", 2, 1000, 6000, 1, 7, 100_000), r("MPI_Finalize", 3, fin0, fin0 + 100)],
        1: [r("MPI_Init", 0, 0, 100), r("MPI_Send", 1, 400, 450, 0, 8, 8),
            r("MPI_Recv", 2, 5000, 6000, 0, 7, 100_000), r("MPI_Finalize", 3, 7000, 7100)],
    }
    tdir = folder / "trace"
    tdir.mkdir(parents=True)
    for rank, recs in ranks.items():
        h = np.zeros(1, dtype=load.HEADER)
        h["magic"], h["version"], h["header_size"], h["record_size"] = load.MAGIC, 1, 512, 56
        h["rank"], h["size"], h["flags"], h["clock_id"] = rank, 2, load.FLAG_FINALIZED, 1
        h["nrecords"], h["host"] = len(recs), b"node0"
        h["sync_init"] = (0, 0, 0, 1, 20)
        with open(tdir / f"rank-{rank:06d}.mpit", "wb") as f:
            f.write(h.tobytes() + np.array(recs, dtype=load.RECORD_V1).tobytes())
    return folder


def value(out: str, row: str) -> float:
    """The first number after `row` at the start of a line of the split table."""
    return float(re.search(rf"^{row}\s+(\S+)", out, re.M).group(1))


@pytest.fixture
def eager4096(monkeypatch):
    monkeypatch.setattr("hpclab.site.ompi.eager_limit", lambda: 4096)


def test_trace_command_prints_violations_profile_split_and_writes_plots(tmp_path, capsys, eager4096):
    """Does `hpclab trace RUN` report the clock violation, the profile and the split (T_ideal on
    the notebook's ideal network, which keeps the rendezvous) and write the PNGs?"""
    run = write_run(tmp_path / "run")
    assert cli.main(["trace", str(run)]) == 0
    out = capsys.readouterr().out
    assert "clock-condition violations: 1" in out
    assert "rank 0 seq 1 (MPI_Recv) ends 100 ns before rank 1 seq 1 (MPI_Send) begins" in out
    assert "ideal network: ideal (eager limit 4096 B)" in out
    assert value(out, "T_real") == pytest.approx(8900e-9)
    assert value(out, "T_ideal") == pytest.approx(7850e-9)
    # compute: rank 0 100 + 700 + 3000, rank 1 300 + 4550 + 1000
    assert value(out, "T_comp") == pytest.approx((3800 + 5850) / 2 * 1e-9)
    assert value(out, "T_load") == pytest.approx((5850 - 4825) * 1e-9)
    # the five parts, transfer and rest from the (default) hockney model's replay
    assert "T_rest: time the ranks did not run" in out
    parts = sum(value(out, k) for k in ("T_comp", "T_load", "T_depend", "T_transfer", "T_rest"))
    assert parts == pytest.approx(value(out, "T_real"))
    for fn in ("Application", "MPI_Send", "MPI_Recv"):
        assert re.search(rf"^{fn}\s", out, re.M), fn
    for png in ("trace-imbalance.png", "trace-matrix.png", "trace-timeline.png",
                "trace-timeline-ideal.png", "trace-timeline-hockney.png"):
        assert (run / png).stat().st_size > 0, png


def test_cli_and_notebook_agree_on_t_ideal(tmp_path, capsys, eager4096):
    """Is the CLI's T_ideal the one the notebook gets from imbalance.analyse's ideal network?"""
    from hpclab.analysis import imbalance as imb
    from hpclab.trace.load import load_run
    from hpclab.trace.replay import replay
    from hpclab.trace.split import split
    run = write_run(tmp_path / "run")
    tr = load_run(run)
    notebook = split(tr, replay(tr, imb.ideal_model(ompi.eager_limit()))).T_ideal
    assert cli.main(["trace", str(run), "--model", "ideal"]) == 0
    out = capsys.readouterr().out
    assert value(out, "T_ideal") == pytest.approx(notebook * 1e-9)
    assert not (run / "trace-timeline-hockney.png").exists()  # --model ideal: no second replay


def test_without_ompi_info_every_message_is_eager_and_the_cli_says_so(tmp_path, capsys, monkeypatch):
    """When the eager limit cannot be read, is the all-eager ideal network used, and named?"""
    def no_ompi_info():
        raise HpclabError("ompi_info is not on PATH")
    monkeypatch.setattr("hpclab.site.ompi.eager_limit", no_ompi_info)
    run = write_run(tmp_path / "run")
    assert cli.main(["trace", str(run), "--model", "ideal"]) == 0
    out = capsys.readouterr().out
    assert "ideal network: ideal (eager limit unknown (ompi_info is not on PATH)" in out
    assert value(out, "T_ideal") == pytest.approx(5850e-9)


def test_compare_prints_function_ratios_and_both_splits(tmp_path, capsys, eager4096):
    """Does --compare print per-function ratios and the two splits side by side (OTHER / RUN)?
    The second run differs only in rank 0 computing 9000 ns more before Finalize."""
    a = write_run(tmp_path / "runA")
    b = write_run(tmp_path / "runB", fin0=18000)
    assert cli.main(["trace", str(a), "--model", "ideal", "--compare", str(b)]) == 0
    out = capsys.readouterr().out
    part = out.split("comparison with", 1)[1]
    assert "ratio = runB / runA" in part
    # Application self time: rank 0 3800 -> 12800, rank 1 5850 both: (12800 + 5850) / (3800 + 5850)
    app = re.search(r"^Application\s.*\s(\S+)$", part, re.M).group(1)
    assert float(app) == pytest.approx(18650 / 9650, rel=5e-3)
    assert re.search(r"^MPI_Send\s.*\s1$", part, re.M)
    # T_ideal of runB: rank 0 leaves the rendezvous at 4850 and computes 12000 more
    assert re.search(r"^T_real\s+8\.9e-06\s+1\.79e-05\s+2\.01124$", part, re.M)
    assert re.search(r"^T_ideal\s+7\.85e-06\s+1\.685e-05\s+2\.1465$", part, re.M)
    assert re.search(r"^nranks\s+2\s+2\s+1$", part, re.M)


def test_missing_run_folder_is_an_error_with_a_hint(tmp_path, capsys):
    """Does a run folder that does not exist give exit code 2 and a message naming it?"""
    assert cli.main(["trace", str(tmp_path / "nope")]) == 2
    assert "no run folder" in capsys.readouterr().err
