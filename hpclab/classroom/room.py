"""`hpclab classroom up | down | status`: a summer school on one machine.

`up` (idempotent) makes, in this order, writing each thing into the record before it exists:
the groups and accounts (private homes, random passwords in one file for the instructors), the
local cluster with the room's accounting (account, QOS, fair share, privacy), the course copy
and the students' venv, the module files, nbgrader's exchange and course folder, and the hub.
`down` removes exactly what the record names, in the reverse order; the cluster itself stays up
(it was there for the course before the room came).
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import shutil
import time
from dataclasses import dataclass, field

from hpclab.cluster import local
from hpclab.site import modules
from hpclab.core.errors import HpclabError
from hpclab.core.io import write_atomic
from hpclab.classroom import accounting, accounts, grading_room, hub, install, record
from hpclab.classroom.layout import (INSTRUCTORS_GROUP, MAX_STUDENTS, STUDENTS_GROUP, ClassroomLayout,
                                     instructor_name, layout, student_name)


@dataclass
class UpReport:
    url: str
    students: list[str]
    instructors: list[str]
    new_accounts: list[str] = field(default_factory=list)
    passwords: str = ""
    seconds: float = 0.0
    venv_built: bool = False

    def render(self) -> str:
        lines = [f"classroom up in {self.seconds:.1f} s: {len(self.students)} students, "
                 f"{len(self.instructors)} instructors",
                 f"  hub: {self.url}",
                 f"  passwords: {self.passwords} (readable by {self.instructors[0]} only: hand them out)"]
        if self.new_accounts:
            lines.append(f"  new accounts: {', '.join(self.new_accounts)}")
        lines.append("  tear down with 'hpclab classroom down' (removes the accounts and their homes)")
        return "\n".join(lines)


def _check_root() -> None:
    if os.geteuid() != 0:
        raise HpclabError("the classroom creates Unix accounts and Slurm associations: it needs root",
                          "run 'sudo make classroom' (or 'sudo .venv/bin/hpclab classroom up')")


def _check_counts(students: int, instructors: int) -> None:
    if not 1 <= students <= MAX_STUDENTS:
        raise HpclabError(f"--students {students}: a room has 1 to {MAX_STUDENTS} students", "choose a number in that range")
    if not 1 <= instructors <= 9:
        raise HpclabError(f"--instructors {instructors}: a room has 1 to 9 instructors", "choose a number in that range")


@contextlib.contextmanager
def _lock(lay: ClassroomLayout):
    """One `up` or `down` at a time (two would create the same accounts and build one venv twice)."""
    lay.root.mkdir(parents=True, exist_ok=True)
    with open(lay.root.parent / f".{lay.root.name}.lock", "w") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        yield


def up(students: int = 30, instructors: int = 1, settings: hub.HubSettings | None = None,
       limits: accounting.StudentLimits | None = None, lay: ClassroomLayout | None = None) -> UpReport:
    _check_root()
    _check_counts(students, instructors)
    lay = lay or layout()
    with _lock(lay):
        return _up(students, instructors, settings, limits, lay)


def _up(students: int, instructors: int, settings: hub.HubSettings | None, limits: accounting.StudentLimits | None,
        lay: ClassroomLayout) -> UpReport:
    t0 = time.monotonic()
    settings = settings or hub.HubSettings()
    limits = limits or accounting.StudentLimits()
    lay.root.mkdir(parents=True, exist_ok=True)
    lay.root.chmod(0o755)
    rec = record.load(lay.record)
    old = rec.settings.get("students", 0)
    if old > students:
        raise HpclabError(f"the classroom has {old} students; up with --students {students} would not remove any",
                          "tear it down first ('hpclab classroom down'), or ask for at least as many")
    rec.settings.update(students=students, instructors=instructors, spawner=settings.spawner,
                        bind=f"{settings.bind_ip}:{settings.port}")
    rec.save()
    student_names = [student_name(i) for i in range(1, students + 1)]
    instructor_names = [instructor_name(i) for i in range(1, instructors + 1)]

    for group in (STUDENTS_GROUP, INSTRUCTORS_GROUP):
        accounts.ensure_group(rec, group)
    new = [u for u in student_names if accounts.ensure_user(rec, u, STUDENTS_GROUP)]
    new += [u for u in instructor_names if accounts.ensure_user(rec, u, INSTRUCTORS_GROUP)]
    _instructors_folder(lay, instructor_names[0])
    _write_passwords(lay, new, instructor_names[0])

    local.up()
    accounting.create(rec, student_names, instructor_names, limits)

    install.copy_course(lay)
    built = install.ensure_venv(lay, lay.root / "install.log")
    install.link_course(lay)
    install.write_lab_settings(lay)
    # Module files for the system compiler and Open MPI (sites/classroom.yaml loads them in every job).
    modules.write_modulefiles(lay.modulefiles)
    grading_room.prepare(lay, rec, student_names, instructor_names)
    url = hub.start(lay, rec, settings)
    return UpReport(url, student_names, instructor_names, new, str(lay.passwords), time.monotonic() - t0, built)


def _instructors_folder(lay: ClassroomLayout, owner: str) -> None:
    """Group hpclab-instructors only; setgid, so what one instructor writes the others may read."""
    lay.instructors.mkdir(parents=True, exist_ok=True)
    os.chown(lay.instructors, 0, accounts.gid(INSTRUCTORS_GROUP))
    lay.instructors.chmod(0o2770)


def _write_passwords(lay: ClassroomLayout, new: list[str], owner: str) -> None:
    """Give every new account a password and add it to the instructors' list (0600, the first
    instructor's). Accounts that existed keep theirs: a second `up` never locks a student out."""
    lines = lay.passwords.read_text().splitlines() if lay.passwords.exists() else ["# account password"]
    known = {line.split()[0] for line in lines if line and not line.startswith("#")}
    for user in new:
        password = accounts.set_password(user)
        lines = [line for line in lines if not line.startswith(f"{user} ")] + [f"{user} {password}"]
        known.add(user)
    write_atomic(lay.passwords, "\n".join(lines) + "\n", mode=0o600,
                 owner=(accounts.uid(owner), accounts.gid(INSTRUCTORS_GROUP)))


def down(lay: ClassroomLayout | None = None, purge: bool = False) -> list[str]:
    """Remove what the record names, newest first; return what was removed. The students' venv
    (packages only, nobody's data) is kept for the next `up` unless `purge`."""
    _check_root()
    lay = lay or layout()
    with _lock(lay):
        return _down(lay, purge)


def _down(lay: ClassroomLayout, purge: bool) -> list[str]:
    rec = record.load(lay.record)
    removed = []
    if hub.stop(lay, rec):
        removed.append("hub")
    grading_room.remove(lay, rec)
    if rec.slurm:
        accounting.remove(rec)
        removed.append("Slurm account, QOS and associations")
    for user in list(rec.users):
        accounts.remove_user(rec, user)
        removed.append(user)
    for group in list(rec.groups):
        accounts.remove_group(rec, group)
    for item in sorted(lay.root.iterdir()) if lay.root.exists() else []:
        if item == lay.venv and not purge:
            continue
        shutil.rmtree(item) if item.is_dir() and not item.is_symlink() else item.unlink()
        removed.append(str(item))
    if purge and lay.root.exists():
        lay.root.rmdir()
    return removed


def status(lay: ClassroomLayout | None = None) -> str:
    lay = lay or layout()
    rec = record.load(lay.record)
    if rec.empty:
        return f"no classroom here ({lay.record} does not exist): 'hpclab classroom up' makes one"
    s = rec.settings
    lines = [f"classroom in {lay.root}: {s.get('students')} students, {s.get('instructors')} instructors, "
             f"spawner {s.get('spawner')}, hub on {s.get('bind')}",
             f"  accounts: {len(rec.users)} ({', '.join(rec.users[:3])}{', ...' if len(rec.users) > 3 else ''})",
             f"  Slurm: {', '.join(rec.slurm) or 'nothing'}"]
    lines += ["  " + line for line in hub.status(lay)]
    return "\n".join(lines)
