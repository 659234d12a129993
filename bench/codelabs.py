"""Autograde time of a class of code-lab submissions (issue 37.5): `python bench/codelabs.py`.

A class of --students submissions of one code lab goes through the instructor's real chain, as
`hpclab grade` runs it: a course folder, release, zip collect, autograde (nbgrader, each
submission's C file built and run in the sandbox under the installed MPI libraries before its
notebook runs in the sandboxed kernel), feedback. The class mixes the reference solution with
the lab's seeded mistakes (tests/data/codelabs/<lab>/), a hung one among them; each student's
expected outcome is known, so the bench also checks every score. The course's objects and
reference runs are cached per grading user: --cold empties that cache first.

Prints one line per student (score / maximum, expected full or not, the first failed check) and
the times: wall clock of autograde for the class, per submission, and the code grading alone
(from each report). Writes build/bench/codelabs-<lab>.json.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
import zipfile
from pathlib import Path

from hpclab.core import paths
from hpclab.grading import codelab, pipeline

MISTAKES = paths.repo() / "tests" / "data" / "codelabs"
OUT = paths.repo() / "build" / "bench"


def submissions(lab: str, students: int) -> dict[str, tuple[str, bool]]:
    """{student: (C file's text, expected to pass)}: every other one the reference solution,
    the rest the lab's seeded mistakes in turn."""
    from hpclab.course import codelab as model

    name = codelab.code_lab(lab).files[0]
    good = model.reference_text((paths.repo() / "labs" / lab / name).read_text())
    bad = [p.read_text() for p in sorted((MISTAKES / lab).glob("*.c"))]
    out = {}
    for i in range(students):
        out[f"student{i + 1:02d}"] = (good, True) if i % 2 == 0 else (bad[(i // 2) % len(bad)], False)
    return out


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--lab", default="code-halo", help="a code lab whose notebook needs no student answers")
    p.add_argument("--students", type=int, default=30)
    p.add_argument("--jobs", type=int, default=None, help="submissions graded at once (default: one per core)")
    p.add_argument("--cold", action="store_true", help="empty the grading user's cache of course objects first")
    p.add_argument("--keep", action="store_true", help="keep the course folder")
    p.add_argument("--library", action="append", help="grade under this library only (repeatable; default: all)")
    a = p.parse_args(argv)
    lab = a.lab
    if a.cold:
        shutil.rmtree(codelab._cache_root(), ignore_errors=True)
        codelab._CACHE_ROOT = None
    work = Path(tempfile.mkdtemp(prefix="hpclab-bench-codelabs-"))
    course = pipeline.init_course(work / "course", labs=[lab])
    if a.library:
        with open(course / "nbgrader_config.py", "a") as fh:
            fh.write(f"c.BuildAndRun.libraries = {a.library!r}\n")
    released = pipeline.release(course, lab)
    downloads = work / "downloads"
    downloads.mkdir()
    name = codelab.code_lab(lab).files[0]
    plan = submissions(lab, a.students)
    for student, (text, _) in plan.items():
        with zipfile.ZipFile(downloads / f"{student}.zip", "w") as z:
            for f in sorted(released.glob("*")):
                if f.name != name and f.is_file():
                    z.write(f, f.name)
            z.writestr(name, text)
    pipeline.collect(course, lab, downloads)
    load = os.getloadavg()[0]
    t0 = time.monotonic()
    pipeline.autograde(course, lab, jobs=a.jobs)
    wall = time.monotonic() - t0
    scores = pipeline.cell_scores(course, lab)
    rows, wrong = [], []
    for student, (_, good) in plan.items():
        cells = scores.get(student, {})
        got, top = sum(v[0] for v in cells.values()), sum(v[1] for v in cells.values())
        rep = codelab.read_record(course / "submitted" / student / lab, lab)
        first = next((c.message() for c in (rep.checks if rep else []) if not c.passed), "")
        ok = (got == top) == good and top > 0
        wrong += [] if ok else [student]
        rows.append({"student": student, "score": got, "max": top, "expected_full": good, "as_expected": ok,
                     "code_seconds": rep.seconds if rep else None, "first_failure": first[:400]})
        print(f"{student}  {got:g} / {top:g}  {'full expected' if good else 'mistake'}  "
              f"{'ok' if ok else 'UNEXPECTED'}  code {rep.seconds if rep else float('nan'):.1f} s  {first[:160]}")
    code_s = [r["code_seconds"] for r in rows if r["code_seconds"] is not None]
    summary = {"lab": lab, "students": a.students, "jobs": a.jobs or os.cpu_count(), "cores": os.cpu_count(),
               "load_before": round(load, 2), "autograde_seconds": round(wall, 1),
               "seconds_per_submission": round(wall / a.students, 2),
               "code_seconds_total": round(sum(code_s), 1),
               "libraries": a.library or [lib.name for lib in codelab.libraries()],
               "unexpected": wrong, "rows": rows}
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / f"codelabs-{lab}.json").write_text(json.dumps(summary, indent=1))
    print(f"{lab}: {a.students} submissions autograded in {wall:.1f} s ({wall / a.students:.2f} s each, "
          f"{summary['jobs']} at once on {os.cpu_count()} cores, load {load:.1f} before); code grading "
          f"{sum(code_s):.1f} s of it summed over submissions; {len(wrong)} unexpected scores")
    if a.keep:
        print(f"course folder: {course}")
    else:
        shutil.rmtree(work, ignore_errors=True)
    return 1 if wrong else 0


if __name__ == "__main__":
    sys.exit(main())
