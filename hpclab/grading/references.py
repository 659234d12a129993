"""The reference answers hidden tests compare with: each lab's expected values recomputed from
the runs a student packed (only runs that pass `labdata.verify`), with hpclab's own analysis.

Which labs there are, and how each one's answers are computed, is written once, in its lesson's
module (hpclab.course.lessons: a lesson's `lab` and `reference`); this module only runs that
computation where nothing a notebook did can touch it. `reference(lab, lab_dir)` runs it in a
fresh Python process (`python -I -m hpclab.grading.references LAB LAB_DIR`, which prints the
answers as JSON), so nothing a notebook patched in its own process changes them; once per lab
folder and state of its packed data. The grader's check, a fresh process no notebook ran in,
computes them itself (COMPUTE_HERE). The labs' test
cells call it (`from hpclab.grading import references`); an interpretation question accepts
the options hpclab.course.quiz.accepted gives on a student's own numbers.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

from hpclab.core import commands
from hpclab.core.errors import HpclabError
from hpclab.course import lessons
from hpclab.grading import labdata

# The lessons (numpy, pandas, the analysis) are found only when a lab is named: a lab's test cell
# and the grader's check import this module, and only the fresh process computes.


def _known(lab: str) -> None:
    """Raise HpclabError unless a lesson names `lab` and computes its answers."""
    if lab not in lessons.labs():
        raise HpclabError(f"no reference analysis for {lab!r}", f"labs: {', '.join(lessons.labs())}")


def reference(lab: str, lab_dir: str | Path = ".") -> dict:
    """Expected answers of a lab, recomputed from its packed runs by hpclab's analysis in a fresh
    Python process (the grader's check, itself one, computes them in place). Returns a dict (keys
    per lab; times in us, rates in MB/s, sizes in bytes).
    Raises HpclabError (AssertionError-free) when the data are missing or not a real run's."""
    _known(lab)
    folder = Path(lab_dir).resolve()
    key = (lab, str(folder), _data_state(folder))
    if REFERENCE_CACHE is not None and key in REFERENCE_CACHE:
        return json.loads(REFERENCE_CACHE[key])
    answer = _compute_here(lab, folder) if COMPUTE_HERE else _compute_apart(lab, folder)
    if REFERENCE_CACHE is not None:
        REFERENCE_CACHE[key] = answer
    return json.loads(answer)


def _compute_here(lab: str, folder: Path) -> str:
    """The answers as JSON, computed in this process (the grader's check: see COMPUTE_HERE)."""
    try:
        return json.dumps(compute(lab, folder))
    except Exception as exc:   # noqa: BLE001 - as the fresh process's last line would say it
        msg = exc.one_line() if isinstance(exc, HpclabError) else f"{type(exc).__name__}: {exc}"
        raise HpclabError(f"reference analysis of {lab} failed: {msg}",
                          "the packed run data must be complete and unmodified") from None


def _compute_apart(lab: str, folder: Path) -> str:
    """The answers as JSON, computed by `main` in a fresh Python process."""
    proc = commands.run([sys.executable, "-I", "-m", "hpclab.grading.references", lab, str(folder)],
                        f"run the reference analysis of {lab}", timeout=300,
                        env={k: v for k, v in os.environ.items() if not k.startswith("PYTHON")})
    if proc is None or proc.returncode != 0:
        msg = (proc.stderr.strip().splitlines() or ["no output"])[-1] if proc else "no answer within 300 s"
        raise HpclabError(f"reference analysis of {lab} failed: {msg}",
                          "the packed run data must be complete and unmodified")
    return proc.stdout


# One analysis per lab folder and state of its packed data: a lab's test cells ask for the same
# answers five to eight times (1.2 s of a fresh process each, measured in make test), and the
# grader's check of a submission (hpclab.grading.answers) starts from an empty cache. None: none.
REFERENCE_CACHE: dict | None = {}

# True in the grader's check (hpclab.grading.answers.check_cells): a fresh, sandboxed process in
# which no notebook ran, only the lab's own test cells on plain values, so the analysis may run
# in it. A second process there cost 0.8 CPU-s per submission (bench/autograde.py, acct, 2026-12-08),
# a fifth of its grading. Everywhere else (a student's kernel) the fresh process stays.
COMPUTE_HERE = False


def _data_state(folder: Path) -> tuple:
    """What changes when a run is packed, replaced or edited: every file under the lab's data
    folder with its size and modification time (a re-measured lab gets new answers)."""
    data = labdata.data_dir(folder)
    if not data.is_dir():
        return ()
    return tuple(sorted((str(p.relative_to(data)), st.st_size, st.st_mtime_ns)
                        for p in data.rglob("*") if p.is_file() for st in [p.stat()]))


def compute(lab: str, lab_dir: str | Path) -> dict:
    """The lab's expected answers computed in this process: its lesson's reference function on
    the lab folder's packed runs, verified first (labdata.Packed.verified). What the fresh
    process of `reference` runs. Raises HpclabError for an unknown lab or bad data."""
    _known(lab)
    return lessons.lab(lab).reference(labdata.Packed.verified(lab_dir))


def main(argv: list[str] | None = None) -> int:
    """`python -I -m hpclab.grading.references LAB LAB_DIR`: print the lab's expected answers as
    JSON (what `reference` reads). Errors print one line and exit 2."""
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) != 2:
        print("usage: python -m hpclab.grading.references LAB LAB_DIR", file=sys.stderr)
        return 2
    lab, lab_dir = argv
    try:
        print(json.dumps(compute(lab, Path(lab_dir))))
    except HpclabError as exc:
        print(f"ERROR: {exc.one_line()}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
