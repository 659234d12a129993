"""Are a rank's instructions split into the solver's phases, and only the solve loop counted as useful?"""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from hpclab.core.errors import HpclabError
from hpclab.tools import counters

# callgrind_annotate --inclusive=no of one rank of `poisson --n 512 --iters 10` (this VM, 2026-11-26;
# the function list cut to its 45 largest rows)
ANNOTATE = Path(__file__).parent / "data" / "counters" / "poisson-n512-iters10-rank0.annotate.txt"


def test_phase_counts_from_a_recorded_annotation():
    t = counters.phase_counts(ANNOTATE.read_text()).set_index("phase")["instructions"]
    assert t["red/black sweeps"] > t["residuum"] > t["halo copy"] >= 0
    # 10 sweeps of 512 x 512 points: a few instructions per point and sweep
    per_update = t["red/black sweeps"] / (512 * 512 * 10)
    assert 2 < per_update < 50


def test_useful_instructions_are_the_solve_loops_compute_phases():
    table = pd.DataFrame([{"rank": r, "phase": p, "instructions": v} for r in (0, 1)
                          for p, v in (("red/black sweeps", 100.0), ("residuum", 20.0), ("halo copy", 5.0),
                                       ("MPI library", 1000.0), ("set-up", 50.0))])
    c = counters.InstructionCounts(2, 64, 1, Path("."), table)
    assert c.useful == 250.0
    assert c.per_rank().to_dict() == {0: 125.0, 1: 125.0}


def test_a_bad_rank_count_is_refused_before_anything_runs():
    with pytest.raises(HpclabError, match="ranks=0 is not a positive integer"):
        counters.count(64, 1, 0)


def test_cycles_status_says_why_cycles_are_missing():
    assert counters.cycles_status()  # never empty: the course does not read cycles per region yet
