"""`hpclab course ...`: run the course headless, serve it in JupyterLab, grade a demo class."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from hpclab.core import paths


def _run(args: argparse.Namespace) -> int:
    # imported when the command runs: `hpclab --help` and other commands start without it
    from hpclab.course import runner as course

    if args.quick:
        os.environ["HPCLAB_QUICK"] = "1"
    books = course.resolve_notebooks(args.notebooks) if args.notebooks else course.course_notebooks()
    report = course.run_course(books)
    print(report.summary(paths.build_dir() / "course"))
    return 1 if report.failures else 0


def _lab(args: argparse.Namespace) -> int:
    # imported when the command runs: `hpclab --help` and other commands start without it
    from hpclab.grading import jupyter

    return jupyter.serve_lab(port=args.port)


def _grade_demo(args: argparse.Namespace) -> int:
    # imported when the command runs: `hpclab --help` and other commands start without it
    from hpclab.grading import demo

    return demo.grade_demo()


def _plan(args: argparse.Namespace) -> int:
    # imported when the command runs: `hpclab --help` and other commands start without it
    from hpclab.course import plan

    page = plan.write(students=args.students, days=args.days)
    print(page.read_text())
    print(f"agenda: {page}; instructor notes: {page.with_name('instructor-notes.md')}")
    return 0


def add_commands(subparsers) -> None:
    p = subparsers.add_parser("course", help="run the course headless, serve it, or grade a demo class")
    sub = p.add_subparsers(dest="course_command", required=True)
    r = sub.add_parser("run", help="execute every notebook and lab; write build/course/index.html")
    r.add_argument("notebooks", nargs="*", help="only these notebooks: a path, a name or its number, e.g. 05 or 05b-mapping-and-scale (default: all)")
    r.add_argument("--quick", action="store_true", help="the quick parameter set (as in the tests)")
    r.set_defaults(func=_run)
    lab = sub.add_parser("lab", help="JupyterLab on localhost with the course open")
    lab.add_argument("--port", type=int, default=8888, help="JupyterLab's port on 127.0.0.1")
    lab.set_defaults(func=_lab)
    pl = sub.add_parser("plan", help="a course day from the last run: agenda, room fit, instructor notes")
    pl.add_argument("--students", type=int, default=30, help="students in the room (default 30)")
    pl.add_argument("--days", type=int, default=1, choices=(1, 2), help="days of the session (1 or 2)")
    pl.set_defaults(func=_plan)
    g = sub.add_parser("grade-demo", help="grade a simulated class with nbgrader, one line per student")
    g.set_defaults(func=_grade_demo)
