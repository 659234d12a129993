"""A student of the classroom, acting as that student (their uid, their groups): what they can
and cannot read, see and cancel. Checks run as the user through setpriv, as a login would."""

from __future__ import annotations

import subprocess
import time

import pytest

from hpclab.classroom import accounting, accounts
from hpclab.classroom.layout import SLURM_ACCOUNT, STUDENT_QOS

pytestmark = [pytest.mark.cluster, pytest.mark.classroom]


def as_user(user: str, argv: list[str], timeout: float = 60) -> subprocess.CompletedProcess:
    # from the user's home, as a login would start: the checkout the tests run from may be closed
    # to students (classroom up closes a checkout whose lab sources they could read)
    return subprocess.run([*accounts.as_user(user), *argv], capture_output=True, text=True, timeout=timeout,
                          cwd=accounts.home(user))


def test_homes_are_private_and_students_cannot_read_each_other(classroom):
    home1 = accounts.home("student01")
    assert home1.stat().st_mode & 0o777 == 0o700 and home1.stat().st_uid == accounts.uid("student01")
    mine = as_user("student01", ["sh", "-c", f"echo secret > {home1}/answer.txt && cat {home1}/answer.txt"])
    assert mine.returncode == 0 and mine.stdout.strip() == "secret", mine.stderr
    theirs = as_user("student02", ["cat", f"{home1}/answer.txt"])
    assert theirs.returncode != 0 and "Permission denied" in theirs.stderr
    listing = as_user("student02", ["ls", str(home1)])
    assert listing.returncode != 0


def test_students_cannot_read_the_instructors_folder_or_the_passwords(classroom):
    for path in (classroom.instructors, classroom.passwords, classroom.record):
        r = as_user("student01", ["cat" if path.suffix else "ls", str(path)])
        assert r.returncode != 0 and "Permission denied" in r.stderr, (path, r.stdout)
    assert classroom.passwords.stat().st_mode & 0o777 == 0o600
    first = as_user("instructor1", ["head", "-2", str(classroom.passwords)])
    assert first.returncode == 0 and "student01 " in first.stdout


def test_no_solution_or_hidden_test_is_readable_by_a_student(classroom):
    """The labs' sources (solutions, hidden tests) stay with the instructors: a student finds
    neither in the course copy, the exchange or their own home."""
    home = accounts.home("student01")
    where = [str(classroom.course) + "/", str(classroom.exchange), str(home)]
    r = as_user("student01", ["grep", "-rlI", "--include=*.ipynb", "-e", "BEGIN HIDDEN TESTS", "-e", "BEGIN SOLUTION", *where])
    assert r.stdout.strip() == "", f"a student can read lab sources: {r.stdout}"
    # grep read something: the course's notebooks are there
    assert as_user("student01", ["ls", f"{classroom.course}/notebooks"]).returncode == 0


def test_each_student_has_the_course_association_and_qos(classroom):
    rows = {user: qos for user, account, qos in accounting.associations()}
    for user in ("student01", "student02", "student03"):
        assert rows.get(user) == STUDENT_QOS, rows
    assert "instructor1" in rows


def _submit(user: str, *args: str) -> subprocess.CompletedProcess:
    return as_user(user, ["sbatch", "--parsable", "--output=/dev/null", *args])


def test_jobs_run_as_the_student_and_others_can_neither_see_nor_cancel_them(classroom):
    home1 = accounts.home("student01")
    out = home1 / "whoami.txt"
    job = _submit("student01", f"--output={out}", "--wrap", "id -un; sleep 20")
    assert job.returncode == 0, job.stderr
    job_id = job.stdout.strip().split(";")[0]
    try:
        # slurmd creates the output file before the job's first line reaches it: wait for the line
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and not (out.exists() and out.read_text().strip()):
            time.sleep(0.5)
        assert out.read_text().split()[:1] == ["student01"], f"job {job_id} wrote {out.read_text()!r} in 30 s"
        assert out.stat().st_uid == accounts.uid("student01")
        seen = as_user("student02", ["squeue", "-h", "-o", "%i %u"]).stdout
        assert job_id not in seen, "PrivateData=jobs hides other students' jobs"
        assert job_id in as_user("student01", ["squeue", "-h", "-o", "%i"]).stdout
        cancel = as_user("student02", ["scancel", job_id])
        state = subprocess.run(["squeue", "-h", "-j", job_id, "-o", "%T"], capture_output=True, text=True).stdout
        assert state.strip() in ("RUNNING", "PENDING", "CONFIGURING"), "student02 could not cancel it"
        assert cancel.returncode != 0 or "not" in cancel.stderr.lower() or "denied" in cancel.stderr.lower()
        # An instructor coordinates the course account: they see every student's job.
        assert job_id in as_user("instructor1", ["squeue", "-h", "-o", "%i"]).stdout
    finally:
        subprocess.run(["scancel", job_id], capture_output=True)


def test_a_job_beyond_the_qos_is_refused_at_submission_with_the_reason(classroom):
    r = _submit("student01", "--time=120", "--wrap", "true")
    assert r.returncode != 0
    assert "QOS" in r.stderr or "time limit" in r.stderr.lower(), r.stderr


def test_a_user_outside_the_course_account_cannot_submit(classroom):
    r = subprocess.run(["setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups",
                        "sbatch", "--output=/dev/null", "--wrap", "true"], capture_output=True, text=True, timeout=60)
    # Slurm 22.05 says "Invalid account or account/partition combination specified".
    assert r.returncode != 0 and "invalid account" in r.stderr.lower(), r.stderr


def test_the_account_is_the_course_account(classroom):
    r = _submit("student02", "--wrap", "true")
    assert r.returncode == 0, r.stderr
    job_id = r.stdout.strip()
    want = f"{SLURM_ACCOUNT}|{STUDENT_QOS}|student02"
    deadline, acct = time.monotonic() + 20, []
    while time.monotonic() < deadline and acct != [want]:
        time.sleep(1)  # slurmdbd records the job a moment after it starts
        acct = subprocess.run(["sacct", "-n", "-X", "-P", "-j", job_id, "-o", "account,qos,user"],
                              capture_output=True, text=True).stdout.split()
    assert acct == [want]
