"""The end of a room loses nothing: `down` stops the hub and keeps every account, home and the
instructors' course, so that `up` finds them unchanged; `remove` deletes the room only when told
to, and only after exporting the grades and archiving the course and every home.

These tests stop, bring back and remove the session's classroom: they run only on a room the
session made (the `disposable_classroom` fixture), never on a real class's. The removal comes
last and brings the room back up for any test that follows.
"""

from __future__ import annotations

import hashlib
import os
import secrets
import shutil
import sqlite3
import stat
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

from hpclab.classroom import accounting, accounts, grading_room, hub, record, room
from tests.conftest import REMOVES_THE_CLASSROOM

pytestmark = [pytest.mark.cluster, pytest.mark.classroom]

STUDENTS = ("student01", "student02", "student03")
SKIP_IN_COURSE = ("logs", "gradebook.db")   # nbgrader's logs grow at every command; the gradebook is compared by content
# what a running server writes and removes by itself (runtime files, workspaces, caches)
RUNTIME = (".local", ".cache", ".ipython", ".jupyter", ".config")


def _hpclab(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "hpclab.cli.main", "classroom", *args],
                          capture_output=True, text=True, timeout=600)


def _tree(root: Path, skip: tuple[str, ...] = ()) -> dict[str, tuple[str, int, int]]:
    """{relative path: (sha256 or link target, mode, owner)} of every file and link below root."""
    out = {}
    for folder, dirs, names in os.walk(root):
        dirs[:] = [d for d in dirs if d not in skip and not d.startswith(".ipynb")]
        for name in names:
            if name in skip or name.startswith(".nbgrader"):
                continue
            path = Path(folder) / name
            st = path.lstat()
            if stat.S_ISLNK(st.st_mode):
                what = "-> " + os.readlink(path)
            elif stat.S_ISREG(st.st_mode):
                what = hashlib.sha256(path.read_bytes()).hexdigest()
            else:
                continue
            out[str(path.relative_to(root))] = (what, stat.S_IMODE(st.st_mode), st.st_uid)
    return out


def _gradebook(path: Path) -> list[str]:
    """The gradebook's content as SQL statements (the file's bytes may change when it is opened)."""
    with sqlite3.connect(f"file:{path}?mode=ro", uri=True) as con:
        return list(con.iterdump())


def _leave_work(lay, nonce: str) -> dict[str, str]:
    """Each student writes a file of their own into their home (as themselves) and a lab is
    released (so the gradebook holds something); returns {student: the file's text}."""
    grading_room.release(lay, grading_room.LABS[0])
    texts = {}
    for user in STUDENTS:
        texts[user] = f"{user}'s work {nonce}\n"
        r = subprocess.run([*accounts.as_user(user), "sh", "-c",
                            'mkdir -p ~/hpclab/mine && printf %s "$1" > ~/hpclab/mine/notes-"$2".txt',
                            "sh", texts[user], nonce], capture_output=True, text=True, timeout=30)
        assert r.returncode == 0, r.stderr
    return texts


def test_remove_without_confirmation_says_what_it_would_delete_and_deletes_nothing(classroom):
    """Does `hpclab classroom remove` without --yes-delete-student-data refuse, in hpclab's error
    format, naming the accounts, homes and the instructors' folder it would delete, and leave
    them all in place?"""
    r = _hpclab("remove")
    assert r.returncode == 2, r.stdout + r.stderr
    assert r.stderr.startswith("hpclab: 'remove' deletes") and "Traceback" not in r.stderr
    assert "student01" in r.stderr and str(classroom.instructors) in r.stderr
    assert "what to do:" in r.stderr and "--yes-delete-student-data" in r.stderr and "classroom down" in r.stderr
    assert all(accounts.exists(u) for u in STUDENTS)
    assert (classroom.nbgrader_course / "nbgrader_config.py").is_file()


def test_down_then_up_finds_every_students_files_and_the_gradebook_unchanged(disposable_classroom):
    """After `hpclab classroom down` (hub stopped, accounts kept) and `up` again, is every
    student's home byte for byte as before, the instructors' course, gradebook and passwords too,
    and were no accounts made anew?"""
    lay = disposable_classroom
    texts = _leave_work(lay, secrets.token_hex(4))
    homes = {u: _tree(accounts.home(u), RUNTIME) for u in STUDENTS}
    course = _tree(lay.nbgrader_course, SKIP_IN_COURSE)
    gradebook = _gradebook(lay.nbgrader_course / "gradebook.db")
    passwords = lay.passwords.read_bytes()
    rec_before = record.load(lay.record)

    r = _hpclab("down")
    assert r.returncode == 0, r.stdout + r.stderr
    assert r.stdout.startswith("classroom down: stopped the hub") and "kept: " in r.stdout
    assert hub.running_pid(lay) is None
    assert all(accounts.exists(u) for u in STUDENTS)
    assert {u for u, _, _ in accounting.associations()} >= set(STUDENTS)   # Slurm objects kept
    stopped = {u: _tree(accounts.home(u)) for u in STUDENTS}

    report = room.up(students=rec_before.settings["students"], instructors=rec_before.settings["instructors"])
    assert report.new_accounts == []
    assert hub.running_pid(lay) is not None
    for user in STUDENTS:
        assert _tree(accounts.home(user)) == stopped[user], f"up changed {user}'s home"
        assert _tree(accounts.home(user), RUNTIME) == homes[user], f"{user}'s work changed"
        notes = next((accounts.home(user) / "hpclab" / "mine").glob("notes-*.txt"))
        assert notes.read_text() in texts.values()
    assert _tree(lay.nbgrader_course, SKIP_IN_COURSE) == course
    assert _gradebook(lay.nbgrader_course / "gradebook.db") == gradebook
    assert lay.passwords.read_bytes() == passwords
    assert record.load(lay.record).users == rec_before.users


def test_down_purge_points_to_remove(classroom):
    """Is the old `down --purge` refused with a pointer to remove, before anything stops?"""
    r = _hpclab("down", "--purge")
    assert r.returncode == 2
    assert "hpclab: 'down --purge' is gone" in r.stderr and "classroom remove --yes-delete-student-data --purge" in r.stderr


def test_remove_leaves_an_archive_that_holds_the_course_and_every_home(disposable_classroom, tmp_path):
    """Does `remove --yes-delete-student-data` export the grades, write a 0600 root tarball whose
    path it prints, holding the gradebook, the course and every student's files (but no
    passwords), and only then delete the accounts, homes and the instructors' folder?"""
    lay = disposable_classroom
    nonce = secrets.token_hex(4)
    texts = _leave_work(lay, nonce)
    gradebook = _gradebook(lay.nbgrader_course / "gradebook.db")
    archive_dir = tmp_path / "archives"

    r = _hpclab("remove", "--yes-delete-student-data", "--archive-dir", str(archive_dir))
    try:
        assert r.returncode == 0, r.stdout + r.stderr
        printed = Path(next(line.split()[1] for line in r.stdout.splitlines() if line.strip().startswith("archive:")))
        assert printed.parent == archive_dir and printed.is_file()
        st = printed.stat()
        assert (st.st_uid, stat.S_IMODE(st.st_mode)) == (0, 0o600)
        assert stat.S_IMODE(archive_dir.stat().st_mode) == 0o700
        grades = next(archive_dir.glob("grades-*.csv"))
        assert stat.S_IMODE(grades.stat().st_mode) == 0o600 and "student_id" in grades.read_text()

        with tarfile.open(printed) as tar:
            names = set(tar.getnames())
            for user in STUDENTS:
                member = f"homes/{user}/hpclab/mine/notes-{nonce}.txt"
                assert member in names, f"{user}'s file is not in the archive"
                assert tar.extractfile(member).read().decode() == texts[user]
            assert f"classroom/instructors/course/source/{grading_room.LABS[0]}/{grading_room.LABS[0]}.ipynb" in names
            assert any(n.startswith("classroom/instructors/course/exports/grades-") for n in names)
            assert "classroom/instructors/passwords.txt" not in names
            (tmp_path / "gradebook.db").write_bytes(tar.extractfile("classroom/instructors/course/gradebook.db").read())
        assert _gradebook(tmp_path / "gradebook.db") == gradebook

        assert not any(accounts.exists(u) for u in STUDENTS)
        assert not any(Path("/home", u).exists() for u in STUDENTS)
        assert not lay.instructors.exists() and record.load(lay.record).empty
        assert lay.python.exists()   # the venv (nobody's data) stays without --purge
    finally:
        shutil.rmtree(archive_dir, ignore_errors=True)   # the students' files: not left in /tmp
        # no test comes after this one (tests/conftest.py runs it last), so the room stays removed;
        # should the removal have stopped half-way, the session's fixture removes what is left


def test_the_test_that_removes_the_classroom_runs_last(request):
    """Nothing that needs the room may run after the test that removes it."""
    names = [i.nodeid for i in request.session.items]
    removing = [k for k, n in enumerate(names) if n.endswith(REMOVES_THE_CLASSROOM)]
    assert removing in ([], [len(names) - 1])
