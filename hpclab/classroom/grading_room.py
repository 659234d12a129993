"""nbgrader for a room: the exchange between Unix accounts, the instructors' course folder, the
configs every server reads, the formgrader as a JupyterHub service for the instructors only, and
the steps of a lab's round (release, fetch, submit, collect and autograde in the sandbox,
feedback, export) as the users who take them.

Who is who:
- students fetch, submit and fetch feedback as themselves (`nbgrader fetch_assignment`, `submit`,
  `fetch_feedback` from the classroom's venv; the Assignments tab does the same);
- the account `grader-hpclab` (group hpclab-instructors, no password) owns the course folder and
  runs the formgrader service, as nbgrader's docs recommend for a class with several graders
  ("One Class, Multiple Graders"); instructors reach the formgrader through the hub
  (/services/hpclab/), students cannot (only a role of the instructors grants access to it);
- autograde runs as that account, with the kernel in hpclab.grading.sandbox (the course's
  nbgrader_config.py runs cells through it): bubblewrap's unprivileged mode, a user namespace of
  its own with no network and only the submission's copy writable. No root process ever works in
  the instructors' folder;
- collect takes only what a student submitted themselves and never follows a link in a
  submission (hpclab.classroom.exchange);
- an instructor's own nbgrader (a terminal of their server) works on the course folder from
  anywhere, with the course's settings: the venv's nbgrader_config.py loads them for members of
  hpclab-instructors.

The exchange (lay.exchange), with nbgrader 0.9.6's own modes for a group-shared course:

    exchange/                 root        1777  nbgrader's clients refuse a root they cannot write
                                                (ensure_root); the sticky bit keeps a student from
                                                renaming the course's folder and planting their own
    exchange/hpclab/          grader      2775  group hpclab-instructors, setgid
      outbound/               grader      2775  released labs, readable by all
      inbound/                grader      2773  students may create, not list: a submission's name
                                                ends in a random string nobody else can guess
      feedback/               grader      2771  not listable: a file's name is a hash of the
                                                submission's secret, which only its student holds
"""

from __future__ import annotations

import grp
import json
import os
import re
import shutil
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

from hpclab.core import commands, paths
from hpclab.core.errors import HpclabError
from hpclab.core.io import write_atomic
from hpclab.classroom import accounts, roster
from hpclab.classroom.layout import INSTRUCTORS_GROUP, ClassroomLayout
from hpclab.classroom.record import Record
from hpclab.grading import pipeline

COURSE_ID = "hpclab"              # nbgrader's course id; the formgrader service has the same name
GRADER = "grader-hpclab"          # owns the course folder, runs the formgrader
FORMGRADER_PORT = 8091            # the service's port on 127.0.0.1 (the hub proxies /services/hpclab/)
LABS = pipeline.LABS              # the labs with a grading pipeline
TIMEOUT_S = 1800                  # one nbgrader step of a whole room

# Lab plugins and server extensions of nbgrader that are the instructors' (nbgrader's table for
# a class with a formgrader service: students get the assignment list and validation only).
INSTRUCTOR_PLUGINS = ("@jupyter/nbgrader:formgrader", "@jupyter/nbgrader:course-list",
                      "@jupyter/nbgrader:create-assignment")
INSTRUCTOR_SERVER_EXTENSIONS = ("nbgrader.server_extensions.formgrader",
                                "nbgrader.server_extensions.course_list")
# ... and what the formgrader service turns back on (the same table: formgrader, create assignment)
FORMGRADER_EXTENSION = "nbgrader.server_extensions.formgrader"
FORMGRADER_PLUGINS = ("@jupyter/nbgrader:formgrader", "@jupyter/nbgrader:create-assignment")


# --- where things are ------------------------------------------------------------------------

def exchange_tree(lay: ClassroomLayout) -> list[tuple[Path, int, str]]:
    """(folder, mode, owner) of the exchange, top first (see the module's docstring)."""
    course = lay.exchange / COURSE_ID
    return [(lay.exchange, 0o1777, "root"), (course, 0o2775, GRADER), (course / "outbound", 0o2775, GRADER),
            (course / "inbound", 0o2773, GRADER), (course / "feedback", 0o2771, GRADER)]


def jupyter_etc(lay: ClassroomLayout) -> Path:
    """The classroom venv's etc/jupyter: read by every server and nbgrader command run from it."""
    return lay.venv / "etc" / "jupyter"


def room_files(lay: ClassroomLayout) -> dict[str, Path]:
    """The config files prepare writes, by what they are for."""
    etc = jupyter_etc(lay)
    fg = formgrader_config_dir(lay)
    return {"nbgrader": etc / "nbgrader_config.py",
            "server": etc / "jupyter_server_config.d" / "nbgrader_room.json",
            "page": etc / "labconfig" / "page_config.json",
            "formgrader-server": fg / "jupyter_server_config.py",
            "formgrader-page": fg / "labconfig" / "page_config.json"}


def formgrader_config_dir(lay: ClassroomLayout) -> Path:
    """Jupyter config of the formgrader service only (first on its JUPYTER_CONFIG_PATH)."""
    return lay.instructors / "formgrader-jupyter"


def grades_dir(lay: ClassroomLayout) -> Path:
    return lay.nbgrader_course / "exports"


# --- prepare / remove ------------------------------------------------------------------------

def prepare(lay: ClassroomLayout, rec: Record, students: list[str], instructors: list[str]) -> None:
    """Make (idempotently) the grader's account, the exchange, the course folder with the labs as
    nbgrader sources, and the configs. Each thing is written into the record before it exists.
    students, instructors: the room's accounts. nbgrader keeps no list of them: any account may
    fetch and submit, and a member of hpclab-instructors is an instructor."""
    accounts.ensure_user(rec, GRADER, INSTRUCTORS_GROUP)
    _make_exchange(lay, rec)
    _make_course(lay, rec)
    _write_configs(lay, rec)
    _name_students(lay, rec.settings.get("names") or roster.default_names(students))


def _name_students(lay: ClassroomLayout, names: dict) -> None:
    """The students' names into the gradebook (the formgrader and the export show them), through a
    file only the grader's account and the instructors may read (names and emails are personal)."""
    path = write_atomic(lay.nbgrader_course / "students.json", json.dumps(names, indent=1) + "\n",
                        mode=0o640, owner=_ids(GRADER))
    _grading(lay, "names", str(path))


def remove(lay: ClassroomLayout, rec: Record) -> None:
    """Remove what prepare made and the record names (the grader's account goes with the room's
    other accounts)."""
    mine = [lay.exchange, lay.nbgrader_course, formgrader_config_dir(lay), *room_files(lay).values()]
    for name in [f for f in rec.folders if any(Path(f) == m or Path(f).is_relative_to(m) for m in mine)]:
        path = Path(name)
        if path.is_dir() and not path.is_symlink():
            shutil.rmtree(path)
        elif path.exists() or path.is_symlink():
            path.unlink()
        rec.forget("folders", name)


def _ids(owner: str) -> tuple[int, int]:
    return accounts.uid(owner), (0 if owner == "root" else accounts.gid(INSTRUCTORS_GROUP))


def _make_exchange(lay: ClassroomLayout, rec: Record) -> None:
    for path, mode, owner in exchange_tree(lay):
        if not path.exists():
            rec.note("folders", str(path))
            path.mkdir()
        os.chown(path, *_ids(owner))
        path.chmod(mode)   # after chown, which clears setgid


def _make_course(lay: ClassroomLayout, rec: Record) -> None:
    """The instructors' course folder: hpclab.grading.pipeline's course (its nbgrader_config.py,
    the labs as sources, the sandbox's kernel spec), made with the classroom's Python so that the
    kernel spec names a Python the grader's account can run, then handed to that account."""
    course = lay.nbgrader_course
    if not (course / "nbgrader_config.py").is_file():
        rec.note("folders", str(course))
        if course.exists():        # a course an interrupted prepare left half made
            shutil.rmtree(course)
        env = {"PATH": f"{lay.venv / 'bin'}:/usr/bin:/bin", "HOME": "/root", "LANG": "C.UTF-8",
               # the checkout's grader/ and labs/ (the course copy holds no grader/)
               "HPCLAB_HOME": str(paths.repo()), "NBGRADER_EXCHANGE": str(lay.exchange)}
        r = commands.run([str(lay.python), "-m", "hpclab.grading", "init", str(course), *LABS],
                         f"make the instructors' course folder {course}", env=env, timeout=300)
        if r is None or r.returncode != 0:
            said = (r.stderr or r.stdout).strip().splitlines()[-1:] if r is not None else "no answer within 300 s"
            raise HpclabError(f"cannot make the instructors' course folder {course}: {said}",
                              "is the classroom's venv complete? run 'hpclab classroom up' again")
        with open(course / "nbgrader_config.py", "a") as fh:
            fh.write(_room_block(lay))
        uid, gid = _ids(GRADER)
        for folder, dirs, files in os.walk(course):
            os.lchown(folder, uid, gid)
            os.chmod(folder, 0o2770)
            for name in files:
                os.lchown(os.path.join(folder, name), uid, gid)
                os.chmod(os.path.join(folder, name), 0o660)
    else:
        # a room made before a lab was written: its course gains the lab's source (as init makes
        # it; the course folder is the room's already, and goes with it)
        uid, gid = _ids(GRADER)
        for lab in pipeline.add_labs(course, LABS):
            for folder, dirs, files in os.walk(course / "source" / lab):
                os.lchown(folder, uid, gid)
                os.chmod(folder, 0o2770)
                for name in files:
                    os.lchown(os.path.join(folder, name), uid, gid)
                    os.chmod(os.path.join(folder, name), 0o660)
    course.chmod(0o2770)
    gradebook = course / "gradebook.db"
    if gradebook.exists():   # the formgrader service makes it with the hub's umask (0644)
        gradebook.chmod(0o660)


def _room_block(lay: ClassroomLayout) -> str:
    return f"""
# --- the room (hpclab/classroom/grading_room.py): after the course's own settings, so these win ---
c.CourseDirectory.course_id = {COURSE_ID!r}
c.Exchange.root = {str(lay.exchange)!r}
# the instructors and the formgrader's account share the course and the exchange (group
# {INSTRUCTORS_GROUP}): nbgrader's group-shared modes
c.CourseDirectory.groupshared = True
# only submissions a student made themselves are collected (a submission filed under another
# student's name is left out and logged)
c.ExchangeFactory.collect = "hpclab.classroom.exchange.OwnerCheckedCollect"
"""


def _write_configs(lay: ClassroomLayout, rec: Record) -> None:
    files = room_files(lay)
    course_config = lay.nbgrader_course / "nbgrader_config.py"
    nbgrader_py = f"""# nbgrader for everyone who runs the classroom's venv (hpclab/classroom/grading_room.py):
# the room's course and its exchange.
import grp as _grp
import os as _os

c = get_config()  # noqa: F821
c.CourseDirectory.course_id = {COURSE_ID!r}
c.Exchange.root = {str(lay.exchange)!r}

# A member of {INSTRUCTORS_GROUP} works on the course folder from anywhere, with its settings
# (the sandbox for student code among them). Students cannot read that folder at all.
try:
    _gid = _grp.getgrnam({INSTRUCTORS_GROUP!r}).gr_gid
except KeyError:
    _gid = None
if _gid is not None and _gid in _os.getgroups() and _os.path.isfile({str(course_config)!r}):
    c.CourseDirectory.root = {str(lay.nbgrader_course)!r}
    load_subconfig({str(course_config)!r})  # noqa: F821
"""
    off = {"ServerApp": {"jpserver_extensions": {ext: False for ext in INSTRUCTOR_SERVER_EXTENSIONS}}}
    # a Python config (trait values), which wins over the extension switches of config.d files
    on = ("# the formgrader service's own Jupyter config (hpclab/classroom/grading_room.py): nbgrader's\n"
          "# formgrader, off in the classroom's venv for everyone else, is on here\n"
          "c = get_config()  # noqa: F821\n"
          f"c.ServerApp.jpserver_extensions.update({{{FORMGRADER_EXTENSION!r}: True}})\n")
    contents = {"nbgrader": nbgrader_py,
                "server": json.dumps(off, indent=1) + "\n",
                "page": json.dumps({"disabledExtensions": {p: True for p in INSTRUCTOR_PLUGINS}}, indent=1) + "\n",
                "formgrader-server": on,
                "formgrader-page": json.dumps({"disabledExtensions": {p: False for p in FORMGRADER_PLUGINS}},
                                              indent=1) + "\n"}
    if files["page"].exists() and str(files["page"]) not in rec.folders:
        raise HpclabError(f"{files['page']} exists and this classroom did not write it",
                          "merge its disabledExtensions by hand, or remove it and run up again")
    fg = formgrader_config_dir(lay)
    if not fg.exists():
        rec.note("folders", str(fg))
    for key, path in files.items():
        if not path.is_relative_to(fg):
            rec.note("folders", str(path))
        path.parent.mkdir(parents=True, exist_ok=True)
        write_atomic(path, contents[key], mode=0o644)
    for folder, dirs, names in os.walk(fg):
        os.chown(folder, *_ids(GRADER))
        os.chmod(folder, 0o2750)
        for name in names:
            os.chown(os.path.join(folder, name), *_ids(GRADER))
            os.chmod(os.path.join(folder, name), 0o640)


# --- the hub ---------------------------------------------------------------------------------

def hub_services(lay: ClassroomLayout) -> tuple[list[dict], list[dict]]:
    """The formgrader as a hub-managed service, and the role that lets the instructors (and no
    one else) reach it: (c.JupyterHub.services entries, c.JupyterHub.load_roles entries).

    The service is a Jupyter server of the grader's account in the course folder (the
    formgrader needs the course below its root), at /services/hpclab/ (its page:
    /services/hpclab/formgrader). JupyterHub's default user role ('self') grants no service;
    the role below grants access:services!service=hpclab to the members of hpclab-instructors."""
    course = lay.nbgrader_course
    service = {
        "name": COURSE_ID,   # nbgrader: the service's name is the course id
        "url": f"http://127.0.0.1:{FORMGRADER_PORT}",
        "command": [str(lay.venv / "bin" / "jupyterhub-singleuser"), f"--ServerApp.root_dir={course}",
                    "--ServerApp.default_url=/formgrader"],
        "user": GRADER,
        "cwd": str(course),
        "oauth_no_confirm": True,
        "display": True,
        "info": {"description": "nbgrader's formgrader for the instructors"},
        "environment": {
            # nbgrader runs alembic by name; the course's sandbox kernel spec; the formgrader's
            # plugins and server extension (off for everyone else)
            "PATH": f"{lay.venv / 'bin'}:/usr/local/bin:/usr/bin:/bin",
            "JUPYTER_PATH": str(course / "jupyter"),
            "JUPYTER_CONFIG_PATH": str(formgrader_config_dir(lay)),
        },
    }
    role = {"name": f"formgrader-{COURSE_ID}",
            "description": "the instructors reach the course's formgrader",
            "scopes": [f"access:services!service={COURSE_ID}", f"read:services!service={COURSE_ID}"],
            "users": instructors()}
    return [service], [role]


def instructors() -> list[str]:
    """The room's instructors: the members of hpclab-instructors but the grader's account."""
    try:
        members = grp.getgrnam(INSTRUCTORS_GROUP).gr_mem
    except KeyError:
        return []
    return sorted(m for m in members if m != GRADER)


# --- running nbgrader as someone ---------------------------------------------------------------

def _run_as(lay: ClassroomLayout, user: str, argv: list[str], cwd: Path, what: str,
            timeout: float = TIMEOUT_S, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    """Run a command of the classroom's venv as `user` (setpriv, their groups) in `cwd`; raise
    HpclabError with its last lines when it fails."""
    extra = [f"PATH={lay.venv / 'bin'}:/usr/local/bin:/usr/bin:/bin", "LANG=C.UTF-8",
             *(f"{k}={v}" for k, v in (env or {}).items())]
    # the grader's files are the instructors' group's (group-shared course); a student's their own
    umask = 0o007 if user == GRADER else 0o077
    try:
        r = subprocess.run([*accounts.as_user(user), *extra, *argv], cwd=cwd, capture_output=True,
                           text=True, timeout=timeout, umask=umask, stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired:
        raise HpclabError(f"cannot {what}: no answer within {timeout:g} s", "see the course's logs/") from None
    if r.returncode != 0:
        lines = [l for l in (r.stdout + r.stderr).splitlines() if l.strip()]
        picked = [l for l in lines if "ERROR" in l or "FATAL" in l] or lines
        raise HpclabError(f"cannot {what} (as {user}, exit {r.returncode}): {' | '.join(picked[-3:])[:600]}",
                          "read the message; nbgrader's full output is in the course folder's logs/")
    return r


def _nbgrader(lay: ClassroomLayout) -> str:
    return str(lay.venv / "bin" / "nbgrader")


def _as_grader(lay: ClassroomLayout, argv: list[str], what: str) -> subprocess.CompletedProcess:
    return _run_as(lay, GRADER, argv, lay.nbgrader_course, what)


def _grading(lay: ClassroomLayout, step: str, *args: str, env: dict[str, str] | None = None
             ) -> subprocess.CompletedProcess:
    """One step of hpclab.grading.pipeline (`python -m hpclab.grading STEP COURSE ...`) as the grader."""
    return _run_as(lay, GRADER, [str(lay.python), "-m", "hpclab.grading", step, str(lay.nbgrader_course), *args],
                   lay.nbgrader_course, f"{step} {' '.join(args)}", env=env)


PIDS_DELEGATED = Path("/sys/fs/cgroup/pids/hpclab-grading")


def delegate_pids() -> dict[str, str]:
    """A v1 pids cgroup owned by the grader's account, below which its sandboxes each get a
    process bound of their own (so submissions can be graded side by side: hpclab.grading.sandbox);
    {} where there is no v1 pids hierarchy (v2 machines bound the sandboxes from root's side, or
    grade one at a time)."""
    if not PIDS_DELEGATED.parent.is_dir() or (Path("/sys/fs/cgroup") / "cgroup.controllers").is_file():
        return {}
    uid, gid = _ids(GRADER)
    try:
        PIDS_DELEGATED.mkdir(exist_ok=True)
        for path in (PIDS_DELEGATED, PIDS_DELEGATED / "cgroup.procs", PIDS_DELEGATED / "tasks"):
            os.chown(path, uid, gid)
    except OSError:
        return {}
    from hpclab.grading import sandbox

    return {sandbox.PIDS_BASE_ENV: str(PIDS_DELEGATED)}


def _check_lab(lab: str) -> None:
    if lab not in LABS:
        raise HpclabError(f"no lab {lab!r} in the room's course", f"labs: {', '.join(LABS)}")


# --- the instructors' steps ----------------------------------------------------------------------

def release(lay: ClassroomLayout, lab: str) -> Path:
    """Generate the student version of `lab` (hpclab.grading.pipeline.release) and release it to
    the exchange (nbgrader release_assignment), as the grader. Idempotent. Returns the released
    folder in the exchange."""
    _check_lab(lab)
    if not (lay.nbgrader_course / "release" / lab).is_dir():
        _grading(lay, "release", lab)
    out = lay.exchange / COURSE_ID / "outbound" / lab
    if not out.is_dir():
        _as_grader(lay, [_nbgrader(lay), "release_assignment", lab], f"release {lab} to the exchange")
    return out


@dataclass
class Autograded:
    """What collect_and_autograde did: scores {student: (score, max)} from the gradebook, the
    students whose submission was collected now and graded now, the seconds each step took,
    the submissions refused ((inbound name, why): filed under another student's name, or not
    made by nbgrader submit), the links left out of the collected copies ((student, link)) and
    the locked cells students changed ({student: {grade_id: "edited" | "deleted"}}, which nbgrader
    restored before grading)."""

    lab: str
    scores: dict[str, tuple[float, float]]
    collected: list[str]
    graded: list[str]
    collect_s: float
    autograde_s: float
    refused: list[tuple[str, str]] = field(default_factory=list)
    links: list[tuple[str, str]] = field(default_factory=list)
    tampered: dict[str, dict[str, str]] = field(default_factory=dict)

    @property
    def s_per_submission(self) -> float:
        """Seconds of autograde per submission graded now (0 when none was)."""
        return self.autograde_s / len(self.graded) if self.graded else 0.0


def _stamps(lay: ClassroomLayout, kind: str, lab: str) -> dict[str, str]:
    """{student: timestamp.txt} of every submission of `lab` in the course's `kind` folder."""
    return {p.parent.parent.name: p.read_text().strip()
            for p in (lay.nbgrader_course / kind).glob(f"*/{lab}/timestamp.txt")}


def collect_and_autograde(lay: ClassroomLayout, lab: str, jobs: int | None = None) -> Autograded:
    """Collect every student's newest own submission of `lab` from the exchange (nbgrader
    collect --update, with the owner and link checks of hpclab.classroom.exchange) and autograde what is
    new in the sandbox (hpclab.grading.pipeline's autograde, `jobs` submissions at once; default
    one per core), as the grader."""
    _check_lab(lab)
    before = _stamps(lay, "submitted", lab)
    t0 = time.monotonic()
    r = _as_grader(lay, [_nbgrader(lay), "collect", "--update", lab], f"collect {lab}")
    collect_s = time.monotonic() - t0
    refused = {(name, why) for name, why in
               re.findall(r"not collected: (.+?) names \S+ but (.+)", r.stdout + r.stderr)}
    links = {(student, link) for student, link in
             re.findall(r"not collected from (\S+)'s submission: the link (.+?) -> ", r.stdout + r.stderr)}
    submitted = _stamps(lay, "submitted", lab)
    collected = sorted(s for s, stamp in submitted.items() if before.get(s) != stamp)
    graded_before = _stamps(lay, "autograded", lab)
    t1 = time.monotonic()
    if any(graded_before.get(s) != stamp for s, stamp in submitted.items()):
        _grading(lay, "autograde", lab, *([f"--jobs={jobs}"] if jobs else []), env=delegate_pids())
    autograde_s = time.monotonic() - t1
    graded = sorted(s for s, stamp in _stamps(lay, "autograded", lab).items() if graded_before.get(s) != stamp)
    scores = {s: (sum(v[0] for v in cells.values()), sum(v[1] for v in cells.values()))
              for s, cells in pipeline.cell_scores(lay.nbgrader_course, lab).items()}
    tampered = pipeline.tampered_cells(lay.nbgrader_course, lab)
    return Autograded(lab, scores, collected, graded, collect_s, autograde_s, sorted(refused), sorted(links),
                      tampered)


def release_feedback(lay: ClassroomLayout, lab: str) -> list[Path]:
    """HTML feedback of every autograded submission of `lab` (hpclab.grading.pipeline.feedback),
    released to the exchange (nbgrader release_feedback), as the grader. Returns the feedback
    files in the course folder."""
    _check_lab(lab)
    _grading(lay, "feedback", lab)
    _as_grader(lay, [_nbgrader(lay), "release_feedback", lab], f"release the feedback of {lab}")
    return sorted((lay.nbgrader_course / "feedback").glob(f"*/{lab}/*.html"))


def export_grades(lay: ClassroomLayout) -> Path:
    """Every student's grade of every lab as a new CSV in the course folder's exports/
    (hpclab.grading.pipeline.export, as the grader). Returns its path."""
    folder = grades_dir(lay)
    if not folder.is_dir():
        _as_grader(lay, ["mkdir", "-p", str(folder)], "make the exports folder")
    stamp = time.strftime("%Y%m%d-%H%M%S")
    path, n = folder / f"grades-{stamp}.csv", 1
    while path.exists():
        n += 1
        path = folder / f"grades-{stamp}-{n}.csv"
    _grading(lay, "export", str(path))
    return path


# --- the students' steps (what the Assignments tab does) -----------------------------------------

def _folder(user: str, folder: Path | None) -> Path:
    """Where `user` keeps their labs: their home, or a folder of theirs in it (made as them)."""
    home = accounts.home(user)
    folder = Path(folder) if folder else home
    if not folder.resolve().is_relative_to(home.resolve()):
        raise HpclabError(f"{folder} is not in the home of {user}", f"choose a folder below {home}")
    return folder


def fetch(lay: ClassroomLayout, user: str, lab: str, folder: Path | None = None) -> Path:
    """`nbgrader fetch_assignment LAB` as `user` in `folder` (default: their home; made as
    them if new). Returns FOLDER/LAB (left as it is when it exists: nbgrader never overwrites)."""
    _check_lab(lab)
    folder = _folder(user, folder)
    if not folder.is_dir():
        _run_as(lay, user, ["mkdir", "-p", str(folder)], accounts.home(user), f"make {folder}", timeout=30)
    if not (folder / lab).is_dir():
        _run_as(lay, user, [_nbgrader(lay), "fetch_assignment", lab], folder, f"fetch {lab}", timeout=120)
    return folder / lab


def submit(lay: ClassroomLayout, user: str, lab: str, folder: Path | None = None,
           as_student: str | None = None) -> str:
    """`nbgrader submit LAB` as `user` from `folder` (default: their home). as_student: the id
    the submission claims (`--student`; nbgrader lets anyone claim any id, the room's collect
    refuses it). Returns nbgrader's output."""
    _check_lab(lab)
    extra = [f"--student={as_student}"] if as_student else []
    r = _run_as(lay, user, [_nbgrader(lay), "submit", lab, *extra], _folder(user, folder), f"submit {lab}",
                timeout=120)
    return r.stdout + r.stderr


def fetch_feedback(lay: ClassroomLayout, user: str, lab: str, folder: Path | None = None) -> list[Path]:
    """`nbgrader fetch_feedback LAB` as `user` in `folder` (default: their home). Returns the
    feedback files in FOLDER/LAB/feedback/<submission time>/."""
    _check_lab(lab)
    folder = _folder(user, folder)
    _run_as(lay, user, [_nbgrader(lay), "fetch_feedback", lab], folder, f"fetch the feedback of {lab}",
            timeout=120)
    return sorted((folder / lab / "feedback").glob("*/*.html"))
