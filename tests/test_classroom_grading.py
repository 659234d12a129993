"""nbgrader for a room, acted out by its users: the grader's account releases a lab, student01
fetches and submits it as student01, student02 tries to see it, files a submission under
student01's name and submits a notebook that looks around from inside the autograder; the
grader collects and autogrades in the sandbox, releases feedback, exports the grades.

Every nbgrader command runs as the user who would type it (setpriv: their uid and groups), from
the classroom's venv. The run data of the submissions are real pingpong runs of the local
cluster. Each test run fetches into a new folder of the students' homes and submits anew, so
the round can be repeated on the same room (the newest submission is the one graded).
"""

from __future__ import annotations

import csv
import json
import os
import re
import secrets
import shutil
import signal
import subprocess
import time
import urllib.error
import urllib.request
from datetime import datetime, timezone
from pathlib import Path

import nbformat
import pytest

from hpclab.classroom import accounts, grading_room, record, roster
from hpclab.classroom.layout import layout
from hpclab.grading import demo, labdata

pytestmark = [pytest.mark.cluster, pytest.mark.classroom]

LAB = grading_room.LABS[0]          # lab-transports: 7 points
NB = f"{LAB}.ipynb"
PROBE = '''
import json as _json, os as _os, socket as _socket
_seen = {"host": _socket.gethostname()}
for _path in ("@COURSE@/gradebook.db", "@COURSE@", "@INBOUND@", "@HOME1@"):
    try:
        _seen[_path] = sorted(_os.listdir(_path)) if _os.path.isdir(_path) else "read"
        open(_path, "rb").read(1) if not _os.path.isdir(_path) else None
    except OSError as _e:
        _seen[_path] = type(_e).__name__
print("PROBE", _json.dumps(_seen))
'''


def as_user(user: str, argv: list[str], timeout: float = 60) -> subprocess.CompletedProcess:
    # from the user's home, as a login would start: the checkout the tests run from may be closed
    # to students (classroom up closes a checkout whose lab sources they could read)
    return subprocess.run([*accounts.as_user(user), *argv], capture_output=True, text=True, timeout=timeout,
                          cwd=accounts.home(user))


def _notebook(lay, probe: dict | None = None):
    """The student's notebook: the release answered from the source, with PROBE at the top of
    the fit cell when probe (its @NAME@s) is given."""
    source = nbformat.read(lay.nbgrader_course / "source" / LAB / NB, as_version=4)
    released = nbformat.read(lay.nbgrader_course / "release" / LAB / NB, as_version=4)
    nb = demo.answered(released, source)
    if probe:
        code = PROBE
        for key, value in probe.items():
            code = code.replace(f"@{key}@", str(value))
        fit = next(c for c in nb.cells if c.metadata.get("nbgrader", {}).get("grade_id") == "fit")
        fit.source = code + "\n" + fit.source
    return nb


def _hand_over(lay, user: str, lab_dir: Path, nb, runs: dict | None) -> None:
    """What the student's own work would leave in the fetched folder: the notebook and, when
    runs are given, their packed run data. Written by root, then made the student's."""
    nbformat.write(nb, lab_dir / NB)
    if runs:
        labdata.pack(runs, lab_dir)
    uid, gid = accounts.uid(user), accounts.gid(user)
    for p in [lab_dir, *lab_dir.rglob("*")]:
        os.lchown(p, uid, gid)


def _after_submission_time(submission: Path, limit: float = 5.0) -> None:
    """Return once the clock is past the time nbgrader recorded for `submission` (its timestamp.txt,
    e.g. '2026-11-26 12:44:03.123456 UTC'), so that a submission made now is the newer one."""
    from nbgrader.utils import parse_utc

    stamp = (submission / "timestamp.txt").read_text().strip()
    then = parse_utc(stamp)   # naive UTC
    end = time.monotonic() + limit
    while datetime.now(timezone.utc).replace(tzinfo=None) <= then:
        assert time.monotonic() < end, f"the clock did not pass the submission time {stamp} within {limit:g} s"
        time.sleep(0.01)


@pytest.fixture(scope="module")
def room(cluster, request):
    """The classroom (the session's, or the one already up) with nbgrader prepared."""
    lay = layout()
    rec = record.load(lay.record)
    if rec.empty or not lay.python.exists():
        request.getfixturevalue("classroom")
        rec = record.load(lay.record)
    for user in ("student01", "student02", "student03"):
        if not accounts.exists(user):
            pytest.fail(f"the classroom has no {user}: bring it up with at least 3 students")
    students = [u for u in rec.users if u.startswith("student")]
    grading_room.prepare(lay, rec, students, grading_room.instructors())
    return lay


@pytest.fixture(scope="module")
def runs(cluster, tmp_path_factory):
    return demo.demo_runs(tmp_path_factory.mktemp("runs"))


@pytest.fixture(scope="module")
def round_(room, runs):
    """One round of the lab, as each user would take it; returns what the tests look at."""
    lay = room
    nonce = secrets.token_hex(4)
    out = {"lay": lay, "released": grading_room.release(lay, LAB)}
    home1, home2 = accounts.home("student01"), accounts.home("student02")
    folder1, folder2 = home1 / f"grading-test-{nonce}", home2 / f"grading-test-{nonce}"
    inbound = lay.exchange / grading_room.COURSE_ID / "inbound"

    lab1 = grading_room.fetch(lay, "student01", LAB, folder1)
    out["fetched_owner"] = lab1.stat().st_uid
    _hand_over(lay, "student01", lab1, _notebook(lay), runs)
    mine = set(os.listdir(inbound))
    grading_room.submit(lay, "student01", LAB, folder1)
    out["submission1"] = inbound / (set(os.listdir(inbound)) - mine).pop()

    # student02: their own submission looks around from inside the autograder, then a second
    # one (the release, unanswered) filed under student01's name
    lab2 = grading_room.fetch(lay, "student02", LAB, folder2)
    probe = {"COURSE": lay.nbgrader_course, "INBOUND": inbound, "HOME1": home1}
    _hand_over(lay, "student02", lab2, _notebook(lay, probe), runs)
    grading_room.submit(lay, "student02", LAB, folder2)
    forged_dir = folder2 / "forged"
    lab2f = grading_room.fetch(lay, "student02", LAB, forged_dir)
    before = set(os.listdir(inbound))
    _after_submission_time(out["submission1"])   # the forged one must be the newer under student01's name
    grading_room.submit(lay, "student02", LAB, forged_dir, as_student="student01")
    out["forged_name"] = (set(os.listdir(inbound)) - before).pop()

    # student03 makes a submission folder by hand, with links to the instructors' sources
    course = lay.nbgrader_course
    stamp = time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime())
    hand = inbound / f"student03+{LAB}+{stamp}.000000 UTC+{secrets.token_hex(6)}"
    made = as_user("student03", ["sh", "-c", f"mkdir '{hand}' && cp '{out['released']}/{NB}' '{hand}/' && "
                                 f"echo '{stamp}.000000 UTC' > '{hand}/timestamp.txt' && "
                                 f"echo {secrets.token_hex(32)} > '{hand}/submission_secret.txt' && "
                                 f"ln -s '{course}/source/{LAB}/{NB}' '{hand}/leak.json' && "
                                 f"ln -s '{course}/source' '{hand}/sources'"])
    assert made.returncode == 0, made.stderr

    out["graded"] = grading_room.collect_and_autograde(lay, LAB)
    out["feedback"] = grading_room.release_feedback(lay, LAB)
    out["feedback1"] = grading_room.fetch_feedback(lay, "student01", LAB, folder1)
    out["feedback2"] = grading_room.fetch_feedback(lay, "student02", LAB, folder2)
    out["csv"] = grading_room.export_grades(lay)
    out["folders"] = (folder1, folder2, lab2f)
    print(f"\nautograde: {out['graded'].autograde_s:.1f} s for {len(out['graded'].graded)} submissions "
          f"({out['graded'].s_per_submission:.1f} s each); collect {out['graded'].collect_s:.1f} s")
    yield out
    for folder in (folder1, folder2):     # the round's folders in the homes (submissions stay)
        shutil.rmtree(folder, ignore_errors=True)


def test_the_exchange_has_nbgrader_s_modes(room):
    """Does the exchange have nbgrader's group-shared modes and owners (sticky root, inbound
    writable but not listable, feedback not listable)?"""
    for path, mode, owner in grading_room.exchange_tree(room):
        st = path.stat()
        assert oct(st.st_mode & 0o7777) == oct(mode), path
        assert st.st_uid == accounts.uid(owner), path
    course = room.nbgrader_course.stat()
    assert course.st_mode & 0o7777 == 0o2770 and course.st_gid == accounts.gid("hpclab-instructors")


def test_a_student_fetches_and_submits_as_themselves(round_):
    """Are the fetched lab and the submission in the exchange the student's own (their uid)?"""
    uid = accounts.uid("student01")
    assert round_["fetched_owner"] == uid
    sub = round_["submission1"]
    assert sub.name.startswith(f"student01+{LAB}+") and sub.stat().st_uid == uid
    assert (sub / NB).is_file() and (sub / "data").is_dir()
    # nbgrader ends the name in 12 random characters: the only thing keeping it from others
    assert re.fullmatch(r"[A-Za-z0-9_-]{12}", sub.name.rsplit("+", 1)[1])


def test_another_student_can_neither_list_nor_find_a_submission(round_):
    """Can student02 list the inbound folder, or find student01's submission by its name's
    known part? (Both must fail: the rest of the name is random.)"""
    inbound = round_["submission1"].parent
    listing = as_user("student02", ["ls", str(inbound)])
    assert listing.returncode != 0 and "Permission denied" in listing.stderr
    found = as_user("student02", ["sh", "-c", f"ls -d '{inbound}'/student01+* 2>/dev/null || true"])
    assert found.stdout.strip() == ""
    released = as_user("student02", ["ls", str(round_["released"])])
    assert released.returncode == 0 and NB in released.stdout


def test_students_cannot_replace_the_course_s_exchange_or_a_released_lab(round_):
    """Can a student rename the course's folder in the world-writable exchange (the sticky bit
    forbids it), or write into outbound/ or a released lab?"""
    lay = round_["lay"]
    course = lay.exchange / grading_room.COURSE_ID
    moved = as_user("student02", ["mv", str(course), str(lay.exchange / "planted")])
    assert moved.returncode != 0 and course.is_dir(), moved.stderr
    for target in (course / "outbound" / "planted", round_["released"] / NB, course / "feedback" / "x.html"):
        r = as_user("student02", ["sh", "-c", f"echo x >> '{target}'"])
        assert r.returncode != 0 and "Permission denied" in r.stderr, target
    assert not (course / "outbound" / "planted").exists() and not (course / "feedback" / "x.html").exists()


def test_students_cannot_read_the_course_or_the_gradebook(round_):
    """Can a student read the instructors' course folder, the gradebook, the source notebooks
    (solutions, hidden tests) or the collected submissions? Can the grader's account?"""
    course = round_["lay"].nbgrader_course
    targets = [course / "gradebook.db", course / "source" / LAB / NB,
               course / "submitted" / "student01" / LAB / NB, course / "nbgrader_config.py"]
    for user in ("student01", "student02"):
        for path in targets:
            r = as_user(user, ["cat", str(path)])
            assert r.returncode != 0 and "Permission denied" in r.stderr, (user, path)
        assert as_user(user, ["ls", str(course)]).returncode != 0
    assert as_user(grading_room.GRADER, ["head", "-c", "15", str(course / "gradebook.db")]).stdout == "SQLite format 3"


def test_autograde_in_the_sandbox_scores_the_student(round_):
    """Does student01's answered lab with real runs get full marks, graded in the sandbox (the
    student's code sees neither the course, the gradebook, the exchange nor other homes)?"""
    graded = round_["graded"]
    assert graded.scores["student01"] == (7.0, 7.0)
    assert {"student01", "student02"} <= set(graded.graded)
    assert graded.s_per_submission > 0
    nb = nbformat.read(round_["lay"].nbgrader_course / "autograded" / "student02" / LAB / NB, as_version=4)
    fit = next(c for c in nb.cells if c.metadata.get("nbgrader", {}).get("grade_id") == "fit")
    text = "".join(o.get("text", "") for o in fit.outputs if o.get("output_type") == "stream")
    seen = json.loads(text.split("PROBE ", 1)[1].splitlines()[0])
    assert seen.pop("host") == "grader"            # bubblewrap's host name: inside the sandbox
    course = str(round_["lay"].nbgrader_course)
    # of the course, only the way to the submission's own copy exists in there
    assert seen.pop(course) == ["autograded"], seen
    assert seen and all(v in ("FileNotFoundError", "PermissionError") for v in seen.values()), seen
    assert graded.scores["student02"] == (7.0, 7.0)  # looking around costs nothing, finds nothing
    assert "student01" not in graded.tampered


def test_a_submission_under_another_student_s_name_is_not_collected(round_):
    """Is the submission student02 filed as student01 (newer than student01's) left out, and
    student01 graded on their own?"""
    graded = round_["graded"]
    assert (round_["forged_name"], "it was submitted by student02") in graded.refused
    secret = (round_["submission1"] / "submission_secret.txt").read_text()
    collected = round_["lay"].nbgrader_course / "submitted" / "student01" / LAB / "submission_secret.txt"
    assert collected.read_text() == secret
    assert graded.scores["student01"] == (7.0, 7.0)


def test_links_in_a_hand_made_submission_are_not_followed(round_):
    """Does a submission folder made by hand in inbound/ with links to the instructors' sources
    get collected without the links and without any file they point to?"""
    sub = round_["lay"].nbgrader_course / "submitted" / "student03" / LAB
    assert (sub / NB).is_file()
    assert not any(p.is_symlink() for p in sub.rglob("*"))
    assert not (sub / "leak.json").exists() and not (sub / "sources").exists()
    assert not any("BEGIN HIDDEN TESTS" in p.read_text(errors="replace") for p in sub.rglob("*") if p.is_file())
    assert {("student03", "leak.json"), ("student03", "sources")} <= set(round_["graded"].links)


def test_feedback_reaches_its_student_only(round_):
    """Does student01 fetch their feedback, while student02 can neither list the feedback
    folder nor receive student01's?"""
    lay = round_["lay"]
    (fb1,) = round_["feedback1"][-1:]
    assert fb1.stat().st_uid == accounts.uid("student01")
    text = fb1.read_text()
    assert "Score: 7.0 / 7.0" in text
    feedback = lay.exchange / grading_room.COURSE_ID / "feedback"
    r = as_user("student02", ["ls", str(feedback)])
    assert r.returncode != 0 and "Permission denied" in r.stderr
    mine2 = {p.read_bytes() for p in round_["feedback2"]}
    assert fb1.read_bytes() not in mine2


def test_the_grade_export_has_the_student_s_score(round_):
    """Does the exported CSV hold student01's score and the maximum for the lab?"""
    path = round_["csv"]
    assert path.is_relative_to(round_["lay"].nbgrader_course)
    with open(path, newline="") as fh:
        rows = [r for r in csv.DictReader(fh) if r["student_id"] == "student01" and r["assignment"] == LAB]
    assert len(rows) == 1 and float(rows[0]["score"]) == 7.0 and float(rows[0]["max_score"]) == 7.0
    # named from the room's record (its roster, or the account), never nbgrader's "None, None"
    lay = round_["lay"]
    name = record.load(lay.record).settings.get("names", {}).get("student01") or \
        roster.default_names(["student01"])["student01"]
    assert (rows[0]["last_name"], rows[0]["first_name"]) == (name["last_name"], name["first_name"])


def test_an_instructor_works_on_the_course_from_their_home(round_):
    """Does an instructor's nbgrader, run from their own home, find the room's course (its
    gradebook lists the lab), while a student's finds none?"""
    lay = round_["lay"]
    nbgrader = str(lay.venv / "bin" / "nbgrader")
    instructor = grading_room.instructors()[0]
    for user, expect in ((instructor, True), ("student03", False)):
        home = accounts.home(user)
        r = subprocess.run([*accounts.as_user(user), f"PATH={lay.venv / 'bin'}:/usr/bin:/bin",
                            nbgrader, "db", "assignment", "list"],
                           cwd=home, capture_output=True, text=True, timeout=120)
        assert r.returncode == 0, r.stderr[-500:]
        assert (LAB in r.stdout) is expect, (user, r.stdout)
    (accounts.home("student03") / "gradebook.db").unlink(missing_ok=True)   # nbgrader db made it


def _get(url: str, token: str | None = None, timeout: float = 10) -> tuple[int, str]:
    req = urllib.request.Request(url, headers={"Authorization": f"token {token}"} if token else {})
    try:
        with urllib.request.urlopen(req, timeout=timeout) as resp:
            return resp.status, resp.read().decode(errors="replace")
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode(errors="replace")
    except (urllib.error.URLError, OSError) as e:   # not listening yet
        return 0, str(e)


def test_a_student_s_server_has_the_assignments_tab_and_no_formgrader(round_):
    """Does a Jupyter server of the classroom's venv, run as student03, list the lab
    in the Assignments tab's API, while the formgrader is neither served nor shown?"""
    lay = round_["lay"]
    port, token = grading_room.FORMGRADER_PORT + 101, secrets.token_hex(8)
    home = accounts.home("student03")
    cmd = [*accounts.as_user("student03"), f"PATH={lay.venv / 'bin'}:/usr/bin:/bin", f"JUPYTER_TOKEN={token}",
           str(lay.venv / "bin" / "jupyter"), "lab", "--no-browser", f"--port={port}", "--ip=127.0.0.1",
           f"--ServerApp.root_dir={home}"]
    proc = subprocess.Popen(cmd, cwd=home, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            start_new_session=True)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and _get(f"{base}/api/status", token)[0] != 200:
            assert proc.poll() is None, "the student's server exited"
            time.sleep(0.5)
        status, body = _get(f"{base}/assignments?course_id={grading_room.COURSE_ID}", token)
        assert status == 200, body
        listed = {a["assignment_id"]: a["status"] for a in json.loads(body)["value"]}
        # released, or further along if student03 already fetched or submitted it (the browser test)
        assert listed.get(LAB) in ("released", "fetched", "submitted"), listed
        assert _get(f"{base}/formgrader", token)[0] == 404
        status, page = _get(f"{base}/lab", token)
        config = json.loads(re.search(r'id="jupyter-config-data"[^>]*>(.*?)</script>', page, re.S).group(1))
        disabled = config.get("disabledExtensions", [])
        assert {"@jupyter/nbgrader:formgrader", "@jupyter/nbgrader:course-list"} <= set(disabled), disabled
        assert "@jupyter/nbgrader:assignment-list" not in disabled
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(15)


def _hub_url(lay) -> str:
    state = lay.hub / "hub.json"
    if not state.is_file():
        pytest.fail(f"the classroom's hub is not running ({state} is missing): 'hpclab classroom up'")
    return json.loads(state.read_text())["url"].rstrip("/")


def _login(url: str, user: str, password: str):
    import requests

    s = requests.Session()
    kw = {"timeout": 30, "verify": False}   # the hub's certificate may be a self-signed one
    s.get(f"{url}/hub/login", **kw)
    r = s.post(f"{url}/hub/login", data={"username": user, "password": password,
                                         "_xsrf": s.cookies.get("_xsrf", path="/hub/")},
               allow_redirects=False, **kw)
    assert r.status_code == 302 and "login" not in r.headers.get("location", ""), (user, r.status_code)
    return s, kw


def test_only_instructors_reach_the_formgrader_and_it_grades_in_the_sandbox(round_):
    """Through the hub: is the formgrader service refused to a logged-in student, open to an
    instructor, and does its Autograde button grade in the sandbox (the answers checked by the
    grader outside the kernel)?"""
    import urllib3

    urllib3.disable_warnings()
    lay = round_["lay"]
    url = _hub_url(lay)
    passwords = dict(line.split() for line in lay.passwords.read_text().splitlines()
                     if line.strip() and not line.startswith("#"))
    page = f"{url}/services/{grading_room.COURSE_ID}/formgrader"
    s, kw = _login(url, "student02", passwords["student02"])
    assert s.get(page, **kw).status_code == 403
    assert s.get(f"{page}/api/assignments", **kw).status_code == 403
    instructor = grading_room.instructors()[0]
    s, kw = _login(url, instructor, passwords[instructor])
    r = s.get(page, **kw)
    assert r.status_code == 200 and "formgrade" in r.text
    assert LAB in {a["name"] for a in s.get(f"{page}/api/assignments", **kw).json()}
    xsrf = s.cookies.get("_xsrf", path=f"/services/{grading_room.COURSE_ID}/")
    r = s.post(f"{page}/api/submission/{LAB}/student01/autograde", headers={"X-XSRFToken": xsrf}, **kw)
    assert r.status_code == 200 and r.json()["success"], r.text[-2000:]
    assert "@@hpclab-answers@@" in r.json()["log"]      # cells ran through hpclab.grading.answers


def test_remove_takes_away_what_prepare_recorded_and_nothing_else(tmp_path):
    """Does remove() delete the exchange, the course folder and the config files the record
    names, and leave alone what others made (the hub's folder, the venv's own files)?"""
    from hpclab.classroom.layout import ClassroomLayout

    lay = ClassroomLayout(tmp_path / "room")
    rec = record.Record(tmp_path / "record.json")
    files = grading_room.room_files(lay)
    for path in (lay.exchange / grading_room.COURSE_ID / "inbound", lay.nbgrader_course / "source",
                 lay.hub, lay.venv / "etc" / "jupyter" / "jupyter_server_config.d"):
        path.mkdir(parents=True)
    for path in files.values():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("x")
    other = lay.venv / "etc" / "jupyter" / "jupyter_server_config.d" / "nbgrader.json"
    other.write_text("{}")
    for path in (lay.exchange, lay.exchange / grading_room.COURSE_ID, lay.nbgrader_course,
                 grading_room.formgrader_config_dir(lay), *files.values(), lay.hub):
        rec.note("folders", str(path))
    grading_room.remove(lay, rec)
    assert not lay.exchange.exists() and not lay.nbgrader_course.exists()
    assert not any(p.exists() for p in files.values())
    assert lay.hub.is_dir() and other.is_file()
    assert rec.folders == [str(lay.hub)]
