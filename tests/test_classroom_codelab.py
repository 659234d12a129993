"""A code lab's round in a room (issue 37.5), as its people act it: `hpclab classroom release`,
student03 fetches the ping-pong lab, writes pingpong_loop.c, makes their own timing runs as
themselves (the sandbox of their own account: the course's kernel and their program in turn),
submits through the exchange; `hpclab classroom collect` builds and runs the submission under
every installed library as the room's grader account and grades the notebook.

A room made before the lab was written gains its source at the next `classroom up` (prepare).
"""

from __future__ import annotations

import os
import re
import secrets
import shutil
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

from hpclab.classroom import accounts, grading_room
from hpclab.core import paths
from hpclab.course import codelab as model
from hpclab.course import lessons
from hpclab.grading import codelab, demo, sandbox

pytestmark = [pytest.mark.cluster, pytest.mark.classroom]

LAB = lessons.get("pingpong_lab").lab
STUDENT = "student03"
MISTAKES = paths.repo() / "tests" / "data" / "codelabs"
# what a student's own runs are, made as the student from their lab folder (the notebook's cell),
# three rounds of them: the adaptive rule's whole course (up to 20 rounds, 90 s in make test) is
# the lab notebook's test; here the runs need only be the student's and graded (the agreement
# parts are then lost: fewer rounds than the rule's end)
MEASURE = (
    "import json, pathlib\n"
    "from hpclab.course.lessons import pingpong_lab as L\n"
    "from hpclab.grading import codelab\n"
    "d = codelab.own_runs(L.LAB, ('kernel', 'student'), L.MEASURE, 3)\n"
    "pathlib.Path('data').mkdir(exist_ok=True)\n"
    "pathlib.Path('data/runs.json').write_text(json.dumps(d))\n"
    "print(len(d['runs']) // 2, 'rounds;', ' '.join(L.said(d, s) for s in L.SIZES))\n"
)


def _classroom(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "hpclab.cli.main", "classroom", *args],
                          capture_output=True, text=True, timeout=1800)


def _line(out: str, student: str) -> str:
    (line,) = [ln for ln in out.splitlines() if re.match(rf"\s+{student}\s", ln)]
    return line.split(None, 1)[1]


def test_a_code_labs_round_in_the_room(classroom):
    """Is the ping-pong lab released with the starter (no solution), do the student's own runs
    work as the student, and does collect grade the submission as the room's grader: the
    payload and loop parts in full (4 points), the agreement parts lost to the runs cut short?"""
    lay = classroom   # `classroom up` (the fixture): the course copy, the labs' solutions, the lab's source
    assert (lay.nbgrader_course / "source" / LAB / "pingpong_loop.c").is_file()
    r = _classroom("release", LAB)
    assert r.returncode == 0, r.stdout + r.stderr
    folder = accounts.home(STUDENT) / f"code-round-{secrets.token_hex(4)}"
    try:
        lab_dir = grading_room.fetch(lay, STUDENT, LAB, folder)
        released = (lab_dir / "pingpong_loop.c").read_text()
        assert "BEGIN SOLUTION" not in released and "MPI_Send(" not in released
        solution = model.reference_text((lay.instructors / "labs" / LAB / "pingpong_loop.c").read_text())
        (lab_dir / "pingpong_loop.c").write_text(solution)
        source = nbformat.read(lay.nbgrader_course / "source" / LAB / f"{LAB}.ipynb", as_version=4)
        nb = nbformat.read(lab_dir / f"{LAB}.ipynb", as_version=4)
        nbformat.write(demo.answered(nb, source), lab_dir / f"{LAB}.ipynb")
        uid, gid = accounts.uid(STUDENT), accounts.gid(STUDENT)
        for p in [lab_dir, *lab_dir.rglob("*")]:
            os.lchown(p, uid, gid)
        done = subprocess.run([*accounts.as_user(STUDENT), str(lay.python), "-c", MEASURE], capture_output=True,
                              text=True, timeout=900, cwd=lab_dir)
        assert done.returncode == 0, done.stdout + done.stderr
        print("student03's own runs:", done.stdout.strip())
        grading_room.submit(lay, STUDENT, LAB, folder)
        r = _classroom("collect", LAB)
        assert r.returncode == 0, r.stdout + r.stderr
        print(r.stdout)
        line = _line(r.stdout, STUDENT)
        assert re.fullmatch(r"collected \(submitted .+\), autograded: 4 / 6", line), line
    finally:
        shutil.rmtree(folder, ignore_errors=True)


# --- the room's grader account -------------------------------------------------------------------

@pytest.mark.skipif(os.geteuid() != 0, reason="hands the files to the room's grader account: needs root")
def test_a_rooms_course_made_before_a_lab_gains_it_as_the_graders(classroom, tmp_path):
    """When a room's course folder exists (made before the lab was written), does preparing the
    room again add the lab's source, owned by the grader's account and private to its group?
    (The session's classroom makes the grader's account.)"""
    import pwd

    from hpclab.classroom import grading_room, record
    from hpclab.classroom.layout import ClassroomLayout
    from hpclab.grading import pipeline

    lay = ClassroomLayout(root=tmp_path)
    pipeline.init_course(lay.nbgrader_course, labs=["code-deadlock"])
    grading_room._make_course(lay, record.load(tmp_path / "record.json"))
    new = lay.nbgrader_course / "source" / "code-pingpong" / "pingpong_loop.c"
    assert pwd.getpwuid(new.stat().st_uid).pw_name == grading_room.GRADER
    assert new.stat().st_mode & 0o777 == 0o660 and new.parent.stat().st_mode & 0o7777 == 0o2770


ROOM_PYTHON = Path("/opt/hpclab/classroom/venv/bin/python")   # Debian's python3 with the course's packages


@pytest.mark.skipif(sandbox.mode() is None, reason="no sandbox here (bwrap, user namespaces)")
@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to become the room's grader account")
def test_an_unprivileged_grader_still_names_where_each_rank_hung(classroom):
    """Graded by the room's grader account, not root (bubblewrap's user namespace), from the
    course copy students read (which holds the labs' drivers, not their solutions: the reference
    comes from the instructors' folder), does a hung submission still name each rank's call and
    line? (gdb reads the program from outside: through /proc/PID/root it may not, there.)"""
    import subprocess
    import tempfile

    from hpclab.classroom.grading_room import GRADER

    folder = Path(tempfile.mkdtemp(dir="/var/tmp", prefix="hpclab-test-"))   # the grader reaches it
    try:
        shutil.copy(MISTAKES / "code-deadlock" / "wrong_tag.c", folder / "swap.c")
        folder.chmod(0o777)
        (folder / "swap.c").chmod(0o666)
        done = subprocess.run(["setpriv", f"--reuid={GRADER}", "--regid=hpclab-instructors", "--init-groups", "env",
                               "HOME=/tmp", "TMPDIR=/tmp", "PATH=/usr/bin:/bin", str(ROOM_PYTHON),
                               "-m", "hpclab.grading.codelab", "grade", "code-deadlock", str(folder), "--library",
                               codelab.libraries()[0].name], capture_output=True, text=True, timeout=300,
                              cwd="/tmp")
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    assert "the tags do not match" in done.stdout, done.stdout + done.stderr
    assert "at swap.c:7 in swap()" in done.stdout
    # the solution the reference is built from is the instructors', not in the students' course copy
    assert (classroom.instructors / "labs" / "code-deadlock" / "swap.c").is_file()
    assert not (classroom.course / "labs" / "code-deadlock" / "swap.c").exists()
    assert (classroom.course / "labs" / "code-deadlock" / "main.c").is_file()
