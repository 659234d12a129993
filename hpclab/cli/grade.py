"""`hpclab grade STEP ...`: a class of zip files graded with nbgrader, one command per step
(init, release, collect, autograde, feedback, export; demo grades the simulated class).
`python -m hpclab.grading STEP ...` is the same command; both take their steps from
hpclab/grading/commands.py. A room's round on its exchange is `hpclab classroom release|collect|
feedback|export LAB`. See grader/README.md.
"""

from __future__ import annotations

from hpclab.grading import commands


def add_commands(subparsers) -> None:
    p = subparsers.add_parser("grade", help="grade the labs with nbgrader: a class of zip files, step by step",
                              description="Grade the labs with nbgrader, one step at a time: init, release, "
                                          "collect (zip files), autograde (in the sandbox), feedback, export "
                                          "(grader/README.md). Alias: python -m hpclab.grading STEP ...")
    sub = p.add_subparsers(dest="step", required=True, metavar="STEP")
    commands.add_steps(sub)
