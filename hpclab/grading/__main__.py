"""`python -m hpclab.grading STEP ...`: the instructor's pipeline on the command line (init, release,
collect, autograde, feedback, export; demo grades the simulated class), and the two entry points
the grader starts itself: `kernel CONNECTION_FILE` (ipykernel in the sandbox, the kernel spec
init_course installs) and `check` (test cells run on a submission's answers, JSON on stdin).
See grader/README.md.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from hpclab.core.errors import HpclabError
from hpclab.grading import answers, demo, pipeline, references, sandbox


def sandbox_kernel(connection_file: str) -> None:
    """Start ipykernel for nbgrader inside hpclab.grading.sandbox (the dedicated user, no network, only
    the submission's copy writable, resource limits); exits with the kernel's status."""
    try:
        code = sandbox.run_kernel(connection_file)
    except HpclabError as exc:
        print(f"ERROR: {exc.one_line()}", file=sys.stderr)
        code = 2
    sys.exit(code)


def main(argv: list[str] | None = None) -> int:
    """`python -m hpclab.grading STEP ...`: the instructor pipeline, one command per step
    (init, release, collect, autograde, feedback, export, demo), plus the internal `reference`,
    `kernel` and `check` entry points. Errors print one line and exit 2."""
    import argparse

    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["kernel"] and len(argv) == 2:
        sandbox_kernel(argv[1])
    if argv == ["check"]:
        return answers.check_main()
    p = argparse.ArgumentParser(prog="python -m hpclab.grading",
                                description="grade hpclab labs with nbgrader (see grader/README.md)")
    sub = p.add_subparsers(dest="step", required=True)
    i = sub.add_parser("init", help="new course folder with the labs as nbgrader sources")
    i.add_argument("course")
    i.add_argument("labs", nargs="*", default=list(pipeline.LABS))  # argparse: empty list -> default
    for name, helptext in (("release", "generate the student version of a lab"),
                           ("autograde", "execute and grade every collected submission"),
                           ("feedback", "HTML feedback per student")):
        q = sub.add_parser(name, help=helptext)
        q.add_argument("course")
        q.add_argument("lab")
        if name == "autograde":
            q.add_argument("--timeout", type=int, help="seconds per cell (default: config's)")
            q.add_argument("--unconfined", action="store_true",
                           help="no sandbox: only for your own test notebooks, never students'")
    c = sub.add_parser("collect", help="collect <student-id>.zip files (LMS download)")
    c.add_argument("course")
    c.add_argument("lab")
    c.add_argument("downloads", help="folder of <student-id>.zip")
    e = sub.add_parser("export", help="all grades as CSV (file must not exist)")
    e.add_argument("course")
    e.add_argument("csv")
    r = sub.add_parser("reference", help="expected answers of a lab from its packed data (JSON)")
    r.add_argument("lab")
    r.add_argument("lab_dir")
    sub.add_parser("demo", help="grade the simulated class, one line per student")
    a = p.parse_args(argv)
    try:
        if a.step == "reference":
            if a.lab not in references.REFERENCES:
                raise HpclabError(f"no reference analysis for {a.lab!r}",
                                  f"labs: {', '.join(references.REFERENCES)}")
            print(json.dumps(references.REFERENCES[a.lab](Path(a.lab_dir))))
        elif a.step == "init":
            print(pipeline.init_course(a.course, a.labs))
        elif a.step == "release":
            print(pipeline.release(a.course, a.lab))
        elif a.step == "collect":
            print("collected:", " ".join(pipeline.collect(a.course, a.lab, a.downloads)))
        elif a.step == "autograde":
            pipeline.autograde(a.course, a.lab, a.timeout, a.unconfined)
            for student, cells in sorted(pipeline.cell_scores(a.course, a.lab).items()):
                got, mx = sum(v[0] for v in cells.values()), sum(v[1] for v in cells.values())
                print(f"{student:16s} {got:g} / {mx:g}")
            for student, flags in sorted(pipeline.tampered_cells(a.course, a.lab).items()):
                print(f"{student}: changed locked cells: {flags}")
        elif a.step == "feedback":
            for f in pipeline.feedback(a.course, a.lab):
                print(f)
        elif a.step == "export":
            print(f"{len(pipeline.export(a.course, a.csv))} rows -> {a.csv}")
        elif a.step == "demo":
            return demo.grade_demo()
    except HpclabError as exc:
        print(f"ERROR: {exc.one_line()}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
