"""The instructors' grading steps as command-line subcommands, defined once for both entries:
`hpclab grade STEP ...` (hpclab/cli/grade.py) and its alias `python -m hpclab.grading STEP ...`
(hpclab/grading/__main__.py). A class of zip files: init, release, collect, autograde, feedback,
export; demo grades the simulated class. See grader/README.md.

The steps' modules are imported when a step runs: `hpclab --help` starts without nbgrader. The
labs a step takes are the lesson registry's (hpclab.course.lessons), read when help is shown.
"""

from __future__ import annotations

import argparse

COURSE_HELP = "the course folder (made by init)"
STEPS = ("init", "release", "collect", "autograde", "feedback", "export", "names", "demo")


class LabArgument(argparse.Action):
    """A step's LAB argument, stored as given. Its help lists the labs of the lesson registry,
    read only when help is shown: finding the lessons imports them (pandas, the analysis), which
    every start of `hpclab` would otherwise pay."""

    def __call__(self, parser, namespace, values, option_string=None):
        setattr(namespace, self.dest, values)

    @property
    def help(self) -> str:
        from hpclab.course import lessons   # costly: only when help is shown

        return f"the lab ({', '.join(lessons.labs())})"

    @help.setter
    def help(self, _text) -> None:
        pass   # argparse sets a help in __init__; this one is always the registry's


def add_steps(subparsers) -> None:
    """Register init, release, collect, autograde, feedback, export, names and demo on `subparsers`
    (an argparse subparsers object); each sets `func` to run_step."""
    i = subparsers.add_parser("init", help="new course folder with the labs as nbgrader sources")
    i.add_argument("course", help="a new or empty folder")
    i.add_argument("labs", nargs="*", metavar="LAB", help="labs to add (default: every lab with a grading pipeline)")
    q = subparsers.add_parser("release", help="generate the student version of a lab (release/LAB/)")
    q.add_argument("course", help=COURSE_HELP)
    q.add_argument("lab", action=LabArgument)
    c = subparsers.add_parser("collect", help="collect STUDENT-ID.zip files (an LMS's download)")
    c.add_argument("course", help=COURSE_HELP)
    c.add_argument("lab", action=LabArgument)
    c.add_argument("downloads", help="folder of STUDENT-ID.zip files, each holding the lab folder's content")
    a = subparsers.add_parser("autograde", help="execute and grade every collected submission in the sandbox")
    a.add_argument("course", help=COURSE_HELP)
    a.add_argument("lab", action=LabArgument)
    a.add_argument("--timeout", type=int, help="seconds per cell (default: the course's Execute.timeout)")
    a.add_argument("--unconfined", action="store_true",
                   help="no sandbox: only for your own test notebooks, never students'")
    a.add_argument("--jobs", type=int, default=None,
                   help="submissions graded at once, each in its own sandbox (default: one per core; 1: one after another)")
    f = subparsers.add_parser("feedback", help="HTML feedback per student (feedback/STUDENT/LAB/)")
    f.add_argument("course", help=COURSE_HELP)
    f.add_argument("lab", action=LabArgument)
    e = subparsers.add_parser("export", help="every grade as CSV, one row per student and lab")
    e.add_argument("course", help=COURSE_HELP)
    e.add_argument("csv", help="the CSV to write (must not exist: grades are never overwritten)")
    n = subparsers.add_parser("names", help="give the students their names in the gradebook (formgrader, export)")
    n.add_argument("course", help=COURSE_HELP)
    n.add_argument("names", help="JSON {student_id: {first_name, last_name, email}}")
    subparsers.add_parser("demo", help="grade the simulated class, one line per student (= make grade-demo)")
    for name in STEPS:
        subparsers.choices[name].set_defaults(func=run_step)


def run_step(args: argparse.Namespace) -> int:
    """Run the step args.step (one of STEPS) names; print what it did; return the exit code. Raises HpclabError."""
    # imported when a step runs: nbgrader and the grading stack are slow to import
    from hpclab.grading import demo, pipeline

    if args.step == "init":
        print(pipeline.init_course(args.course, args.labs or pipeline.LABS))
    elif args.step == "release":
        print(pipeline.release(args.course, args.lab))
    elif args.step == "collect":
        print("collected:", " ".join(pipeline.collect(args.course, args.lab, args.downloads)))
    elif args.step == "autograde":
        pipeline.autograde(args.course, args.lab, args.timeout, args.unconfined, jobs=args.jobs)
        for student, cells in sorted(pipeline.cell_scores(args.course, args.lab).items()):
            got, mx = sum(v[0] for v in cells.values()), sum(v[1] for v in cells.values())
            print(f"{student:16s} {got:g} / {mx:g}")
        for student, flags in sorted(pipeline.tampered_cells(args.course, args.lab).items()):
            print(f"{student}: changed locked cells: {flags}")
    elif args.step == "feedback":
        for f in pipeline.feedback(args.course, args.lab):
            print(f)
    elif args.step == "export":
        print(f"{len(pipeline.export(args.course, args.csv))} rows -> {args.csv}")
    elif args.step == "names":
        print(f"{pipeline.name_students(args.course, args.names)} students named in the gradebook")
    elif args.step == "demo":
        return demo.grade_demo()
    else:
        raise AssertionError(args.step)
    return 0
