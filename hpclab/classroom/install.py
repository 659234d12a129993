"""The course as students run it: a world-readable copy of the course and a venv of Debian's
python3, below the classroom's folder.

Why a copy: a checkout may sit under /root (0700), and the project's .venv may be built on a
Python only root can execute (pyenv under /root); a student's server and jobs can use neither.
The copy is refreshed at every `up` (students' own notebooks live in their homes and are never
touched); the venv is rebuilt only when pyproject.toml or the lock changed. It is installed from the
same requirements.lock as the project's .venv (make setup): every package at its pinned version,
checked against its hashes.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import time
from pathlib import Path

from hpclab.core import commands, paths
from hpclab.core.errors import HpclabError
from hpclab.core.io import write_atomic
from hpclab.classroom.layout import ClassroomLayout

# What a student's server and jobs read: the package, the notebooks, the templates and profiles,
# the kernels' sources and builds. Nothing of the instructors': not grader/, and not labs/, whose
# notebooks hold the solutions and hidden tests (students get the labs' release versions from
# the Assignments tab; the instructors' course folder is made from the checkout's labs/).
COURSE_ITEMS = ["hpclab", "notebooks", "slurm-templates", "sites", "jupyter", "src", "docs",
                "pyproject.toml", "requirements.lock", "requirements-build.lock", "README.md", "build/bin",
                "build/lib"]
SYSTEM_PYTHON = Path("/usr/bin/python3")
IGNORED = shutil.ignore_patterns("__pycache__", "*.pyc", ".ipynb_checkpoints", "*.egg-info")


def lab_drivers() -> list[str]:
    """The code labs' own course sources (a driver, labs/<lab>/main.c): a student's
    program is built with them, and they hold no solution (the files a student edits do, and stay
    in the instructors' folder: hpclab.grading.codelab.course_source)."""
    from hpclab.course import lessons

    out = []
    for lab in lessons.code_labs():
        code = lessons.lab(lab).code
        out += [f for b in code.builds for f in b.course if f.startswith("labs/")]
    return list(dict.fromkeys(out))


def copy_course(lay: ClassroomLayout, source: Path | None = None) -> list[str]:
    """Refresh lay.course from the checkout; return what was copied.

    lay.course is a link to one version folder: the new copy is made beside the running one and
    the link is swapped in one rename, so a server importing the package meanwhile never finds it
    half copied. The version before stays (running kernels may still read it); older ones go."""
    source = Path(source or paths.repo())
    missing = [item for item in ("build/bin", "build/lib") if not (source / item).is_dir()]
    if missing:
        raise HpclabError(f"the kernels are not built in {source} ({', '.join(missing)} missing)",
                          "run 'make setup' (it builds them), then 'make classroom' again")
    versions = lay.root / "course-versions"
    versions.mkdir(parents=True, exist_ok=True)
    new = versions / time.strftime("%Y%m%d-%H%M%S")
    if new.exists():
        shutil.rmtree(new)
    copied = []
    for item in COURSE_ITEMS:
        src = source / item
        if not src.exists():
            continue
        dst = new / item
        dst.parent.mkdir(parents=True, exist_ok=True)
        if src.is_dir():
            shutil.copytree(src, dst, ignore=IGNORED, symlinks=False)
        else:
            shutil.copy2(src, dst)
        copied.append(item)
    for driver in lab_drivers():
        (new / driver).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(source / driver, new / driver)
        copied.append(driver)
    _readable_by_all(new)
    if lay.course.is_dir() and not lay.course.is_symlink():
        shutil.rmtree(lay.course)  # a copy made before versions existed
    link = lay.root / ".course.new"
    link.unlink(missing_ok=True)
    link.symlink_to(new.relative_to(lay.root))
    os.replace(link, lay.course)
    for old in sorted(versions.iterdir())[:-2]:
        shutil.rmtree(old, ignore_errors=True)
    versions.chmod(0o755)
    return copied


def copy_lab_solutions(lay: ClassroomLayout, source: Path | None = None) -> list[str]:
    """The code labs' files with their solutions (labs/<lab>/*.c) into the instructors' folder,
    lay.instructors/labs: the room's grader account builds the reference from them
    (hpclab.grading.codelab.course_source); students, outside hpclab-instructors, cannot read
    that folder. Returns what was copied."""
    from hpclab.course import lessons

    source = Path(source or paths.repo())
    target = lay.instructors / "labs"   # paths.instructors_labs() for the room's own layout
    copied = []
    for lab in lessons.code_labs():
        dest = target / lab
        dest.mkdir(parents=True, exist_ok=True)
        for src in sorted((source / "labs" / lab).glob("*.[ch]")):
            shutil.copy2(src, dest / src.name)
            (dest / src.name).chmod(0o640)
            copied.append(f"labs/{lab}/{src.name}")
        dest.chmod(0o750)
    target.chmod(0o750)
    return copied


def _readable_by_all(root: Path) -> None:
    """root's, not writable by others, readable (and, where it was executable, executable) by all."""
    for folder, dirs, files in os.walk(root):
        if Path(folder) in (root / "hub", root / "instructors", root / "exchange"):
            dirs[:] = []
            continue
        os.chmod(folder, 0o755)
        for name in files:
            p = Path(folder) / name
            if p.is_symlink() or p.name == "classroom.json":
                continue
            mode = p.stat().st_mode
            p.chmod(0o755 if mode & 0o100 else 0o644)


def venv_stamp(lay: ClassroomLayout) -> Path:
    return lay.venv / ".hpclab-stamp"


LOCK_FILES = ("pyproject.toml", "requirements.lock", "requirements-build.lock")


def wanted_stamp(lay: ClassroomLayout) -> str:
    """What the venv was built from: pyproject.toml and the locks of the course copy."""
    h = hashlib.sha256()
    for name in LOCK_FILES:
        path = lay.course / name
        h.update(path.read_bytes() if path.exists() else b"")
    return h.hexdigest()[:16]


def install_steps(python: Path, course: Path) -> list[list[str]]:
    """The pip commands that install the course into the venv of `python` from the course's
    locks: the build tools, then every package of requirements.lock checked against its hashes
    (mpi4py from its sdist, compiled against the system Open MPI; nothing built in an isolated
    environment that would fetch unhashed build tools), then the course itself, editable, without
    dependencies."""
    pip = [str(python), "-m", "pip", "install", "-q", "--disable-pip-version-check"]
    return [pip + ["--require-hashes", "--no-deps", "-r", str(course / "requirements-build.lock")],
            pip + ["--require-hashes", "--no-build-isolation", "--no-binary", "mpi4py",
                   "-r", str(course / "requirements.lock")],
            pip + ["--no-deps", "--no-build-isolation", "-e", str(course)]]


def ensure_venv(lay: ClassroomLayout, log: Path) -> bool:
    """Build the students' venv from Debian's python3 with the course installed (editable, so its
    paths are the copy's); True if it was (re)built. pip's output goes to `log`."""
    if lay.python.exists() and venv_stamp(lay).exists() and venv_stamp(lay).read_text().strip() == wanted_stamp(lay):
        return False
    if not SYSTEM_PYTHON.exists():
        raise HpclabError(f"{SYSTEM_PYTHON} is missing: students' servers need a Python every account can run",
                          "install Debian's python3 and python3-venv ('make setup' does), then run up again")
    log.parent.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "MPICC": "mpicc", "PIP_DISABLE_PIP_VERSION_CHECK": "1"}
    env.pop("PYTHONPATH", None)
    with open(log, "a") as out:
        steps = []
        if not lay.python.exists():
            steps.append([str(SYSTEM_PYTHON), "-m", "venv", str(lay.venv)])
        # The first step also brings the lock's pip: Debian's (23.0) does not reuse the wheel it
        # built for mpi4py, a newer one does.
        steps += install_steps(lay.python, lay.course)
        for argv in steps:
            out.write(f"\n$ {' '.join(argv)}\n")
            out.flush()  # the step's own output follows in the same file
            r = commands.run(argv, "build the students' Python environment", env=env, cwd=lay.root,
                             timeout=None, log=log)
            if r.returncode != 0:
                raise HpclabError(f"building the students' Python environment failed (exit {r.returncode})",
                                  f"read {log}; PyPI must be reachable for the first 'up'")
    write_atomic(venv_stamp(lay), wanted_stamp(lay) + "\n")
    _readable_by_all(lay.venv)
    return True


def link_course(lay: ClassroomLayout) -> Path:
    """Put lay.course (the link, not the version it points to) on the venv's sys.path, ahead of
    pip's editable finder (which remembers the path of the copy it was installed from): every
    new process imports the course `up` installed last."""
    site = next(lay.venv.glob("lib/python3*/site-packages"))
    path = site / "hpclab-course.pth"
    write_atomic(path, f"{lay.course}\n", mode=0o644)
    return path


# JupyterLab's settings for every student (the venv's overrides.json): no pop-up asking each
# student of a room whether to fetch news from the internet, which this machine may not reach.
LAB_OVERRIDES = {"@jupyterlab/apputils-extension:notification": {"fetchNews": "false", "checkForUpdates": False}}


def write_lab_settings(lay: ClassroomLayout) -> Path:
    path = lay.venv / "share" / "jupyter" / "lab" / "settings" / "overrides.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    write_atomic(path, json.dumps(LAB_OVERRIDES, indent=1) + "\n", mode=0o644)
    return path
