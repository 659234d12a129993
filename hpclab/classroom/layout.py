"""Where a classroom lives: one folder every account can reach, apart from the hub's secrets.

    /opt/hpclab/classroom/          (HPCLAB_CLASSROOM overrides it; root's, 0755)
      classroom.json                what `up` created, so that `down` removes exactly that (0600)
      course/                       the course as students run it: package, notebooks, labs,
                                    templates, built kernels (root's, read-only for others)
      venv/                         Python for the students' servers and jobs (Debian's python3:
                                    a venv of a Python under /root would be out of their reach)
      modulefiles/                  Lmod module files for the system compiler and Open MPI
      hub/                          JupyterHub's database, cookie secret, proxy token (root, 0700)
      exchange/                     nbgrader's exchange (its own permission model)
      instructors/                  group hpclab-instructors only (2770): the nbgrader course
                                    folder, the gradebook, the accounts' passwords (0600)

Accounts: student01..studentNN in group hpclab-students, instructor1..M in hpclab-instructors,
each with a private home (0700). Each student's course copy and runs live in that home.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from hpclab.core import paths

DEFAULT_ROOT = paths.CLASSROOM_DEFAULT
STUDENTS_GROUP = "hpclab-students"
INSTRUCTORS_GROUP = "hpclab-instructors"
SLURM_ACCOUNT = "hpclab-course"
STUDENT_QOS = "hpclab-student"
MAX_STUDENTS = 99  # two-digit names


def student_name(i: int) -> str:
    return f"student{i:02d}"


def instructor_name(i: int) -> str:
    return f"instructor{i}"


@dataclass(frozen=True)
class ClassroomLayout:
    """Paths of one classroom. One object owns every file name of it."""

    root: Path

    @property
    def record(self) -> Path:
        return self.root / "classroom.json"

    @property
    def course(self) -> Path:
        return self.root / "course"

    @property
    def venv(self) -> Path:
        return self.root / "venv"

    @property
    def python(self) -> Path:
        return self.venv / "bin" / "python"

    @property
    def modulefiles(self) -> Path:
        return self.root / "modulefiles"

    @property
    def hub(self) -> Path:
        return self.root / "hub"

    @property
    def exchange(self) -> Path:
        return self.root / "exchange"

    @property
    def instructors(self) -> Path:
        return self.root / "instructors"

    @property
    def nbgrader_course(self) -> Path:
        return self.instructors / "course"

    @property
    def passwords(self) -> Path:
        return self.instructors / "passwords.txt"

    @staticmethod
    def student_course(home: Path) -> Path:
        """A student's own copy of the notebooks and labs (copied at first login)."""
        return Path(home) / "hpclab"

    @staticmethod
    def student_output(home: Path) -> Path:
        """Where a student's notebooks write what they make besides runs (HPCLAB_OUTPUT in their
        server: hpclab.core.paths.output_dir); the course copy's build/ is read-only to them."""
        return Path(home) / "hpclab" / "build"

    @staticmethod
    def student_runs(home: Path) -> Path:
        """A student's runs root (HPCLAB_RUNS in their server and jobs)."""
        return Path(home) / "hpclab" / "runs"


def layout() -> ClassroomLayout:
    return ClassroomLayout(paths.classroom_root())
