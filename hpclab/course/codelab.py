"""What a code lab is, as data: a lab in which the student writes MPI code in C.

A code lab's lesson module (hpclab/course/lessons/<lesson>.py) builds one CodeLab: the files the
student edits (`files`, in the lab's folder), the programs made from them (`builds`: the
student's files with course sources that are not theirs), the runs that test them (`trials`:
ranks and arguments, grouped into the graded parts) and the lesson's own check of one run
(`check`, on what the run printed and, where the answer is known only by running it, the same
trial of the reference build). hpclab.grading.codelab builds and runs all of this in the
grader's sandbox under every installed MPI library; the checks come back as Check records, each
saying what was measured, what was expected and with which tolerance.

The lab folder's C files hold the reference solution between `/* BEGIN SOLUTION */` and
`/* END SOLUTION */` lines, and the code the student starts from in a comment between
`/* BEGIN STARTER` and `END STARTER */` lines: `released` turns such a file into the student's
copy (the solution removed, the starter code uncommented), as nbgrader does for notebooks.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Callable

from hpclab.core.errors import HpclabError

# The compile flags of the course's own sources in a code lab's program: those of the kernels
# (src/common/flags.mk), so a build with the course's file computes bit-identical numbers. The
# student's files get debug information and no optimisation: the stack of a hung rank then
# names their lines and variables.
COURSE_FLAGS = ("-O3", "-march=native", "-std=gnu11", "-Wall", "-Wextra", "-fopenmp")
STUDENT_FLAGS = ("-g", "-O0", "-std=gnu11", "-Wall", "-fno-omit-frame-pointer")
LINK_FLAGS = ("-fopenmp", "-lm")

SOLUTION_BEGIN, SOLUTION_END = "/* BEGIN SOLUTION */", "/* END SOLUTION */"
STARTER_BEGIN, STARTER_END = "/* BEGIN STARTER", "END STARTER */"


@dataclass(frozen=True)
class Build:
    """One program of a code lab. name: "student" (the student's files), or another build of
    the same sources (e.g. "ssend": every MPI_Send made synchronous); student: the student's
    files (names in the lab folder), each replaced by the course's file of the same role in the
    reference build (`reference`: paths under the repository, in the same order); course: more
    sources under the repository, never the student's (a driver, the solver); includes:
    folders under the repository on the include path; defines: -D flags for the student's
    files (not the course's); output: the program's file name (also its process name)."""

    name: str
    student: tuple[str, ...]
    reference: tuple[str, ...]
    course: tuple[str, ...] = ()
    includes: tuple[str, ...] = ()
    defines: tuple[str, ...] = ()
    output: str = "codelab"


@dataclass(frozen=True)
class Trial:
    """One run of a build: its graded part (a key of CodeLab.parts), a few words for people,
    the ranks (at most 4: the sandbox runs them on this machine's cores), the program's
    arguments ("{report}" stands for the file the program writes its JSON report to), the
    build's name, whether its answer needs the reference build's run of the same trial
    (`compare`), and whether it runs under every library (`everywhere`) or only the first (the
    system's): each library costs a build and a launch, and one trial per part under the others
    shows what differs between libraries (buffering, matching), the rest shows the code right."""

    part: str
    name: str
    np: int
    args: tuple[str, ...] = ()
    build: str = "student"
    compare: bool = False
    everywhere: bool = True
    also: tuple[str, ...] = ()   # other parts its checks grade: a run that fails fails them too


@dataclass(frozen=True)
class Check:
    """One graded check. part: the graded part; what: the check in a few words; passed;
    measured and expected: what the run showed and what it should show (words or numbers, as
    people read them); tolerance: how close is close enough ("exact" when bit for bit); why: on
    failure, what that means and the likely mistake, named."""

    part: str
    what: str
    passed: bool
    measured: str = ""
    expected: str = ""
    tolerance: str = "exact"
    why: str = ""

    def message(self) -> str:
        """One paragraph for the student: the check, measured against expected with the
        tolerance, then why (on failure)."""
        head = f"{self.what}: {'passed' if self.passed else 'FAILED'}"
        if self.measured or self.expected:
            head += f" (measured {self.measured}; expected {self.expected}; tolerance {self.tolerance})"
        return f"{head}. {self.why}".strip() if self.why and not self.passed else head

    def as_dict(self) -> dict:
        return {"part": self.part, "what": self.what, "passed": self.passed, "measured": self.measured,
                "expected": self.expected, "tolerance": self.tolerance, "why": self.why}

    @classmethod
    def from_dict(cls, doc: dict) -> "Check":
        return cls(**{k: doc[k] for k in ("part", "what", "passed", "measured", "expected", "tolerance", "why")})


@dataclass(frozen=True)
class Outcome:
    """What one completed run printed, as a lab's check sees it. ranks: {rank: (stdout, stderr)};
    report: the program's JSON report (a dict) when it wrote one, else None; library: the MPI
    library's name."""

    library: str
    np: int
    returncode: int
    ranks: dict[int, tuple[str, str]]
    report: dict | None = None

    def stdout(self) -> str:
        return "".join(out for _, (out, _) in sorted(self.ranks.items()))

    def stderr(self) -> str:
        return "".join(err for _, (_, err) in sorted(self.ranks.items()))


@dataclass(frozen=True)
class CodeLab:
    """A lab in which the student writes MPI code. lab: its folder under labs/; files: the
    files the student edits there; builds: the programs (by name; "student" first); trials: the
    runs, in the order they are graded; parts: {part: what it checks, in words, with its
    points}; check(trial, outcome, reference) -> [Check]: the lesson's checks of one completed
    run (reference: the reference build's Outcome of the same trial, or None); minutes: how long
    a student takes (estimated, not measured); hang_seconds: how long a run may take before it
    counts as hung (the course's runs take well under a second)."""

    lab: str
    files: tuple[str, ...]
    builds: tuple[Build, ...]
    trials: tuple[Trial, ...]
    parts: dict[str, str]
    check: Callable[[Trial, Outcome, Outcome | None], list[Check]]
    minutes: int
    hang_seconds: float = 5.0
    extra: dict[str, Any] = field(default_factory=dict)

    def build(self, name: str) -> Build:
        for b in self.builds:
            if b.name == name:
                return b
        raise HpclabError(f"{self.lab} has no build {name!r}", f"builds: {', '.join(b.name for b in self.builds)}")

    def __post_init__(self):
        if not self.builds or self.builds[0].name != "student":
            raise HpclabError(f"{self.lab}: the first build must be the student's", "name it 'student'")
        for t in self.trials:
            self.build(t.build)
            if t.part not in self.parts:
                raise HpclabError(f"{self.lab}: trial {t.name!r} belongs to no part", f"parts: {', '.join(self.parts)}")
            if not 1 <= t.np <= 4:
                raise HpclabError(f"{self.lab}: trial {t.name!r} asks for {t.np} ranks", "1 to 4 ranks")


def released(text: str) -> str:
    """A lab's C file as the student gets it: the lines from SOLUTION_BEGIN to SOLUTION_END
    removed, the STARTER_BEGIN and STARTER_END lines removed (the starter code between them
    becomes code). Raises HpclabError when the markers do not pair up."""
    out, mode = [], None
    for n, line in enumerate(text.splitlines(keepends=True), 1):
        mark = line.strip()
        if mark == SOLUTION_BEGIN or mark == STARTER_BEGIN:
            if mode is not None:
                raise HpclabError(f"line {n}: {mark!r} inside another marked block", "close the block first")
            mode = "solution" if mark == SOLUTION_BEGIN else "starter"
        elif mark == SOLUTION_END or mark == STARTER_END:
            if mode != ("solution" if mark == SOLUTION_END else "starter"):
                raise HpclabError(f"line {n}: {mark!r} without its opening line", "pair the markers")
            mode = None
        elif mode != "solution":
            out.append(line)
    if mode is not None:
        raise HpclabError(f"a {mode} block is not closed", "end it with its closing line")
    return "".join(out)


def reference_text(text: str) -> str:
    """A lab's C file with its solution and without the markers (what the reference build
    compiles; the starter stays a comment)."""
    return "".join(l for l in text.splitlines(keepends=True)
                   if l.strip() not in (SOLUTION_BEGIN, SOLUTION_END))


def has_markers(text: str) -> bool:
    return bool(re.search(r"^\s*/\* (BEGIN|END) SOLUTION \*/\s*$", text, re.M))


# --- what the course's programs print, read by the lessons' checks -----------------------------

def calls(out: Outcome) -> dict[int, dict[str, int]]:
    """{rank: {"isend", "irecv", "send", "recv", "sendrecv", "wait": count}}: the point-to-point
    calls each rank made, from the request ledger's line at MPI_Finalize (src/codelabs/ledger.c)."""
    found = {}
    for m in re.finditer(r"^codelab-calls: rank (\d+):((?: \w+=\d+)+)$", out.stderr(), re.M):
        found[int(m.group(1))] = {k: int(v) for k, v in re.findall(r"(\w+)=(\d+)", m.group(2))}
    return found


def _residuals(report: dict | None) -> list | None:
    """A Poisson report's residual history through the kernel's accessor; None when the run wrote
    no report, or one without it (a student's broken build)."""
    from hpclab.kernels import poisson

    try:
        return poisson.measures(report).get("residual_history") if report else None
    except HpclabError:
        return None


def residual_check(trial: Trial, out: Outcome, reference: Outcome | None, part: str) -> Check:
    """The run's residual history against the reference build's (the course's own file) on
    the same trial: bit for bit, as every process grid and exchange gives the same numbers."""
    what = f"residuals, {trial.name}, under {out.library}"
    mine = _residuals(out.report)
    ref = _residuals(reference.report if reference else None)
    if ref is None:
        raise HpclabError(f"the reference run of {trial.name} wrote no residual history", "check the trial's arguments")
    if mine is None:
        return Check(part, what, False, "no report", f"{len(ref)} residuals", why="the solver wrote no JSON report")
    if mine == ref:
        return Check(part, what, True, f"{len(mine)} residuals, last {mine[-1]:.6e}",
                     f"the reference's {len(ref)} residuals", "bit-identical")
    first = next((i for i, (a, b) in enumerate(zip(mine, ref)) if a != b), min(len(mine), len(ref)))
    got = mine[first] if first < len(mine) else None
    want = ref[first] if first < len(ref) else None
    why = (f"the residuals part from the reference's at iteration {first}: the halo received differs from "
           f"the neighbours' points (a wrong neighbour or face, a count, datatype or offset, or data read before it arrived)"
           if first > 0 else
           "the very first residual differs: the first exchange already delivered wrong points")
    return Check(part, what, False, f"iteration {first}: {got!r}", f"{want!r}", "bit-identical", why)
