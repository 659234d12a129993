"""The derived datatype code lab (code-datatype): a column halo with MPI_Type_vector, against
packing it by hand.

It goes with notebook 05b (mapping and scale: a 2-D decomposition, whose column faces are not
contiguous) and notebook 04 (scaling: the solver's copy phase packs and unpacks the column faces of
each block by hand, src/poisson/poisson.c's pack() and unpack()). The student writes
make_column() (MPI_Type_vector, MPI_Type_commit), pack_column() and unpack_column() in
labs/code-datatype/column.c; the driver (labs/code-datatype/main.c) swaps a column both ways,
checks every element and times both, rounds in turn after a warm-up. Graded by identical
results (every element of the received column, nothing else changed) under every installed
library, and by the student's comparison of their own timings, decided as the course decides
every comparison (hpclab.analysis.phrases.compare: paired rounds, the ratio's confidence
interval, a 5 % margin), from the timings they measured with the very file they submit.
"""

from __future__ import annotations

import re

from hpclab.course.codelab import Build, Check, CodeLab, Outcome, Trial
from hpclab.course.lessons import Lesson, register

LAB = "code-datatype"
WAYS = (("vector", "vector", "MPI_Type_vector"), ("packed", "packed", "manual packing"))
# what the notebook measures: a 16 KiB column of a 2048 x 2048 array, 41 rounds
MEASURE = ("--rows", "2048", "--cols", "2048", "--reps", "41", "--warmup", "5", "--json", "{report}")
ANSWERS = ("MPI_Type_vector", "manual packing", "no difference", "undecided")


def _check(trial: Trial, out: Outcome, reference: Outcome | None) -> list[Check]:
    doc = out.report or {}
    checks = []
    for part, key, name in WAYS:
        way = doc.get(key)
        what = f"{name}, {trial.name}, under {out.library}"
        if way is None:
            checks.append(Check(part, what, False, "no report", "a report", why="the driver wrote no report"))
            continue
        errors = re.findall(rf"^ERROR: (rank \d+), {re.escape(name)}: (.*)$", out.stdout(), re.M)
        why = "; ".join(f"{r}: {e}" for r, e in errors[:2]) or way.get("error", "")
        checks.append(Check(part, what, bool(way["right"]), "every element right" if way["right"] else "a wrong element",
                            "each rank's last column = its partner's column 0, every other element unchanged",
                            "exact", why))
    return checks


def comparison(report: dict):
    """The course's comparison of the two ways' times in a driver's report (paired rounds):
    hpclab.analysis.phrases.Comparison (its outcome, winner and sentence)."""
    from hpclab.analysis import phrases

    return phrases.compare(report["vector"]["us"], report["packed"]["us"], a_name="MPI_Type_vector",
                           b_name="manual packing", quantity="time", unit="us", paired=True)


def answer(report: dict) -> str:
    """The answer the course's comparison gives: the faster way's name, "no difference" (within
    the margin) or "undecided" (the runs cannot tell)."""
    c = comparison(report)
    return {"equivalent": "no difference", "undecided": "undecided"}.get(c.outcome, c.winner or "undecided")


CODE = CodeLab(
    lab=LAB,
    files=("column.c",),
    builds=(Build("student", student=("column.c",), reference=("labs/code-datatype/column.c",),
                  course=("labs/code-datatype/main.c", "src/codelabs/ledger.c"), includes=("src/codelabs",),
                  output="column"),),
    trials=(
        # rows and columns of different lengths: a stride or count mixed up shows
        Trial("vector", "300 x 512 doubles, 2 ranks", 2, ("--rows", "300", "--cols", "512", "--reps", "3",
                                                          "--warmup", "1", "--json", "{report}"), also=("packed",)),
        Trial("vector", "2048 x 64 doubles, 4 ranks (two pairs)", 4, ("--rows", "2048", "--cols", "64", "--reps", "3",
                                                                      "--warmup", "1", "--json", "{report}"),
              also=("packed",), everywhere=False),
        Trial("vector", "1 x 2 doubles, 2 ranks", 2, ("--rows", "1", "--cols", "2", "--reps", "2", "--warmup", "0",
                                                      "--json", "{report}"), also=("packed",), everywhere=False),
    ),
    parts={
        "vector": "the column swapped with your MPI_Type_vector arrives whole and nothing else changes, "
                  "under every installed library (2 points)",
        "packed": "the column swapped with your packing and unpacking arrives whole and nothing else "
                  "changes, under every installed library (1 point)",
    },
    check=_check,
    minutes=35,
)

LESSON = register(Lesson("datatype", "A column halo as a derived datatype (MPI_Type_vector) against packing by hand",
                         (), lab=LAB, goes_with=("05b-mapping-and-scale.ipynb", "04-scaling.ipynb"), code=CODE))
