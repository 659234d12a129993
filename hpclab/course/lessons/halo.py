"""The halo exchange code lab (code-halo): the Poisson solver's halo exchange, non-blocking.

It goes with notebook 04 (scaling: the halo exchange variants and what the chain of blocking
sends costs) and notebook 05 (imbalance: the dependency part of the split). The student rewrites
halo_nonblocking() (labs/code-halo/halo_nonblocking.c, in place of src/poisson/halo_nonblocking.c
in the solver) with MPI_Irecv, MPI_Isend and MPI_Waitall, starting from the 2014 code's blocking
order. Graded by residual histories bit-identical to the course's own exchange at 1, 2 and 4
ranks on grids that divide evenly and grids that do not, under every installed library, and by
the calls the ranks made (the request ledger's count): non-blocking ones only, every request
completed.
"""

from __future__ import annotations

from hpclab.course.codelab import Build, Check, CodeLab, Outcome, Trial, calls, residual_check
from hpclab.course.lessons import Lesson, register

LAB = "code-halo"

SOLVER = ("src/poisson/poisson.c", "src/poisson/halo.c", "src/poisson/decompose.c", "src/common/args.c",
          "src/common/json.c", "src/common/report.c", "src/common/placement.c", "src/codelabs/ledger.c")
INCLUDES = ("src/poisson", "src/common", "src/codelabs")
ITERS = "25"


def _solve(*args: str) -> tuple[str, ...]:
    return ("--exchange", "nonblocking", "--iters", ITERS, *args, "--json", "{report}")


def _check(trial: Trial, out: Outcome, reference: Outcome | None) -> list[Check]:
    checks = [residual_check(trial, out, reference, "residuals")]
    if trial.np > 1:
        seen = calls(out)
        blocking = {r: c["send"] + c["recv"] + c["sendrecv"] for r, c in seen.items()}
        nonblocking = {r: c["isend"] + c["irecv"] for r, c in seen.items()}
        ok = len(seen) == out.np and not any(blocking.values()) and all(nonblocking.values())
        measured = "; ".join(f"rank {r}: {seen[r]['isend']} MPI_Isend, {seen[r]['irecv']} MPI_Irecv, "
                             f"{blocking[r]} blocking sends/receives" for r in sorted(seen)) or "no count"
        why = ""
        if not ok:
            why = ("the exchange still uses blocking point-to-point calls (MPI_Send, MPI_Recv or MPI_Sendrecv): "
                   "post every receive with MPI_Irecv and every send with MPI_Isend, then wait once"
                   if any(blocking.values()) else "no rank made non-blocking calls")
        checks.append(Check("nonblocking", f"calls, {trial.name}, under {out.library}", ok, measured,
                            "only MPI_Isend and MPI_Irecv on every rank", "exact", why))
    return checks


CODE = CodeLab(
    lab=LAB,
    files=("halo_nonblocking.c",),
    builds=(Build("student", student=("halo_nonblocking.c",), reference=("src/poisson/halo_nonblocking.c",),
                  course=SOLVER, includes=INCLUDES, output="poisson"),),
    trials=(
        # the full set under the system's library; under the others, the 4-rank uneven grid
        Trial("residuals", "1 rank, 32 x 32 points", 1, _solve("--n", "32"), compare=True, everywhere=False),
        Trial("residuals", "2 ranks (2x1), 32 x 32 points", 2, _solve("--n", "32", "--grid", "2x1"),
              compare=True, everywhere=False),
        Trial("residuals", "2 ranks (1x2), 33 x 29 points (uneven)", 2, _solve("--shape", "33x29", "--grid", "1x2"),
              compare=True, everywhere=False),
        Trial("residuals", "4 ranks (2x2), 32 x 32 points", 4, _solve("--n", "32", "--grid", "2x2"),
              compare=True, everywhere=False),
        Trial("residuals", "4 ranks (2x2), 37 x 31 points (uneven)", 4, _solve("--shape", "37x31", "--grid", "2x2"),
              compare=True),
    ),
    parts={
        "residuals": "the solver with your exchange gives residuals bit-identical to the course's at 1, 2 and "
                     "4 ranks, on grids that divide evenly and grids that do not (under the system's "
                     "library; the 4-rank uneven grid under every installed library), every request "
                     "completed (3 points)",
        "nonblocking": "every rank exchanges with MPI_Isend and MPI_Irecv only: no blocking send or receive "
                       "(1 point)",
    },
    check=_check,
    minutes=45,
)

LESSON = register(Lesson("halo", "The halo exchange, non-blocking: Isend, Irecv, Waitall in the Poisson solver",
                         (), lab=LAB, goes_with=("04-scaling.ipynb", "05-imbalance.ipynb"), code=CODE))
