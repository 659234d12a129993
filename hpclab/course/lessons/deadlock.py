"""The deadlock code lab (code-deadlock): two ranks that both call MPI_Send first.

It goes with notebook 02 (transports: the eager limit, below which a send returns at once) and
notebook 90 (the live deadlock). The student first finds the size at which the given swap()
hangs on this machine, then fixes it (MPI_Sendrecv, or MPI_Irecv + MPI_Isend + MPI_Waitall).
The fix is graded by running it under every installed MPI library at a size beyond each one's
eager limit (measured below), and once more with every MPI_Send made synchronous (MPI_Ssend:
the standard lets any MPI_Send behave so), which is the only way to see the deadlock under a
library that buffers large messages on this machine.

The lab's files are labs/code-deadlock/: swap.c (the student's), main.c (the driver that checks
the data) and src/codelabs/ledger.c (the request ledger: a request the code never completes is
named with the line that started it).
"""

from __future__ import annotations

import re

from hpclab.course.codelab import Build, Check, CodeLab, Outcome, Trial
from hpclab.course.lessons import Lesson, register

LAB = "code-deadlock"

# Where the given swap() (MPI_Send, then MPI_Recv, on both ranks of a pair) hangs on this
# machine, per library, measured on 2026-11-27 (2 ranks, shared memory, 4 s limit; sizes in
# bytes of the message): {library: (largest size that completed, smallest size that hung)}.
# Open MPI's limit includes its match header, so 4000 B completes and 4096 B does not
# (btl_vader_eager_limit = btl_sm_eager_limit = 4096). Intel MPI completed even 256 MiB: it
# buffers the unexpected message at the receiver, so the deadlock shows only with MPI_Ssend.
HANGS_FROM = {
    "openmpi-system": (4000, 4096),
    "openmpi-5.0.11": (4000, 4096),
    "mpich-5.0.2": (4096, 8192),
    "intel-mpi-2021.19": (268435456, None),
}

# The sizes the fix must complete at: beyond every eager limit above, and zero.
BIG = 1 << 20          # 1 MiB, 256 times Open MPI's limit and 128 times MPICH's
SYNC = 1 << 16         # with MPI_Ssend any size would do: 64 KiB keeps the run short


def _check(trial: Trial, out: Outcome, reference: Outcome | None) -> list[Check]:
    """Every rank printed its 'every value right' line (main.c checked the data it received,
    that mine[] was left alone and that no request was left open)."""
    done = {int(m.group(1)) for m in re.finditer(r"^rank (\d+): swapped .* every value right$", out.stdout(), re.M)}
    missing = sorted(set(range(out.np)) - done)
    return [Check(trial.part, f"{trial.name} under {out.library}", not missing,
                  measured=f"{len(done)} of {out.np} ranks received the right data",
                  expected=f"all {out.np} ranks", tolerance="exact (every value compared)",
                  why=f"rank(s) {', '.join(map(str, missing))} printed no result line" if missing else "")]


CODE = CodeLab(
    lab=LAB,
    files=("swap.c",),
    builds=(
        Build("student", student=("swap.c",), reference=("labs/code-deadlock/swap.c",),
              course=("labs/code-deadlock/main.c", "src/codelabs/ledger.c"), includes=("src/codelabs",),
              output="swap"),
        Build("ssend", student=("swap.c",), reference=("labs/code-deadlock/swap.c",),
              course=("labs/code-deadlock/main.c", "src/codelabs/ledger.c"), includes=("src/codelabs",),
              defines=("-DMPI_Send=MPI_Ssend",), output="swap"),
    ),
    trials=(
        # 1 MiB on 2 ranks and the MPI_Ssend build under every library, the rest under the system's
        Trial("large", "1 MiB, 2 ranks", 2, ("--bytes", str(BIG), "--rounds", "3")),
        Trial("large", "0 bytes, 2 ranks", 2, ("--bytes", "0", "--rounds", "2"), everywhere=False),
        Trial("large", "1 MiB, 4 ranks (two pairs)", 4, ("--bytes", str(BIG), "--rounds", "2"), everywhere=False),
        Trial("safe", "64 KiB, every MPI_Send made MPI_Ssend", 2, ("--bytes", str(SYNC), "--rounds", "2"),
              build="ssend"),
    ),
    parts={
        "large": "swap() completes with the right data at 1 MiB, beyond every installed library's eager "
                 "limit, under every installed library (and at 0 B and with 4 ranks under the system's) "
                 "(2 points)",
        "safe": "swap() also completes when every MPI_Send is synchronous (MPI_Ssend), as the MPI "
                "standard allows: the fix does not rely on buffering (1 point)",
    },
    check=_check,
    minutes=30,
)


def hang_size(library: str) -> int | None:
    """The smallest message (bytes) at which the given swap() hung under `library` here (None:
    it never hung up to the largest size tried; see HANGS_FROM)."""
    return HANGS_FROM.get(library, (None, None))[1]


LESSON = register(Lesson("deadlock", "The deadlock: two ranks that both send first, and the fix",
                         (), lab=LAB, goes_with=("02-transports.ipynb", "90-interactive-mpi.ipynb"),
                         code=CODE))
