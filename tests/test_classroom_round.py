"""A lab's round in a room from the command line, as an instructor types it:
`hpclab classroom release | collect | feedback | export LAB`, each saying what it did per student.

student03 fetches the lab and submits it answered, with real pingpong runs of the local cluster
(as student03, through the exchange); the commands run as root, nbgrader as the grader's account.
"""

from __future__ import annotations

import os
import re
import secrets
import shutil
import subprocess
import sys

import nbformat
import pytest

from hpclab.classroom import accounts, grading_room
from hpclab.grading import demo, labdata

pytestmark = [pytest.mark.cluster, pytest.mark.classroom]

LAB = grading_room.LABS[0]   # lab-transports: 7 points
STUDENT = "student03"


def _classroom(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "hpclab.cli.main", "classroom", *args],
                          capture_output=True, text=True, timeout=1800)


def _line(out: str, student: str) -> str:
    (line,) = [ln for ln in out.splitlines() if re.match(rf"\s+{student}\s", ln)]
    return line.split(None, 1)[1]


def _submit_answered(lay, runs):
    """student03's work: fetch, answer from the source, pack their runs, submit (as student03)."""
    folder = accounts.home(STUDENT) / f"round-test-{secrets.token_hex(4)}"
    lab_dir = grading_room.fetch(lay, STUDENT, LAB, folder)
    source = nbformat.read(lay.nbgrader_course / "source" / LAB / f"{LAB}.ipynb", as_version=4)
    released = nbformat.read(lab_dir / f"{LAB}.ipynb", as_version=4)
    nbformat.write(demo.answered(released, source), lab_dir / f"{LAB}.ipynb")
    labdata.pack(runs, lab_dir)
    uid, gid = accounts.uid(STUDENT), accounts.gid(STUDENT)
    for p in [lab_dir, *lab_dir.rglob("*")]:
        os.lchown(p, uid, gid)
    grading_room.submit(lay, STUDENT, LAB, folder)
    return folder


def test_a_labs_round_from_the_command_line(classroom, tmp_path):
    """Do release, collect (with the sandboxed autograde), feedback and export each exit 0 and
    print one line per student, with student03's fresh submission collected, graded 7 / 7, its
    feedback released and its grade in the exported CSV?"""
    lay = classroom
    r = _classroom("release", LAB)
    assert r.returncode == 0, r.stdout + r.stderr
    assert r.stdout.startswith(f"{LAB}: ") and "released" in r.stdout
    assert _line(r.stdout, "student01") in ("has fetched it", "may fetch it now (Assignments tab)")

    folder = _submit_answered(lay, demo.demo_runs())
    try:
        r = _classroom("collect", LAB)
        assert r.returncode == 0, r.stdout + r.stderr
        assert re.match(rf"{LAB}: collected \d+ new submissions in .+, autograded \d+ in the sandbox as "
                        rf"{grading_room.GRADER}", r.stdout)
        assert re.fullmatch(r"collected \(submitted .+\), autograded: 7 / 7", _line(r.stdout, STUDENT))
        for student in ("student01", "student02"):
            assert _line(r.stdout, student)   # a line for every student, whatever earlier tests left

        r = _classroom("feedback", LAB)
        assert r.returncode == 0, r.stdout + r.stderr
        assert _line(r.stdout, STUDENT).startswith(f"feedback released ({LAB}.html)")
        assert grading_room.fetch_feedback(lay, STUDENT, LAB, folder)

        r = _classroom("export", LAB)
        assert r.returncode == 0, r.stdout + r.stderr
        assert _line(r.stdout, STUDENT) == "7 / 7"
        csv_path = re.search(r"-> (\S+\.csv)", r.stdout).group(1)
        assert csv_path.startswith(str(lay.nbgrader_course / "exports"))
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def test_a_round_step_on_an_unknown_lab_says_which_labs_exist(classroom):
    """Is a lab the room does not have refused in hpclab's error format, naming the labs?"""
    r = _classroom("collect", "lab-nope")
    assert r.returncode == 2
    assert r.stderr.startswith("hpclab: no lab 'lab-nope'") and "what to do: labs: lab-transports" in r.stderr


def test_round_steps_without_a_classroom_say_how_to_make_one(tmp_path):
    """Without a room, does a step say so and how to make one (not a traceback)?"""
    r = subprocess.run([sys.executable, "-m", "hpclab.cli.main", "classroom", "export"], capture_output=True,
                       text=True, timeout=60, env={**os.environ, "HPCLAB_CLASSROOM": str(tmp_path / "none")})
    assert r.returncode == 2 and "no classroom course here" in r.stderr and "classroom up" in r.stderr
