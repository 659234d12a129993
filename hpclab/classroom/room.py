"""`hpclab classroom up | down | remove | status` and the room's grading round: a summer school on
one machine.

`up` (idempotent) makes, in this order, writing each thing into the record before it exists:
the groups and accounts (private homes, random passwords in one file for the instructors), the
local cluster with the room's accounting (account, QOS, fair share, privacy), the course copy
and the students' venv, the module files, nbgrader's exchange and course folder, and the hub.
`down` stops the hub and every student's server and keeps everything else (accounts, homes, the
instructors' course and gradebook, the Slurm account and QOS): the next `up` finds the room as it
was. `remove` (only with an explicit confirmation) deletes what the record names, in the reverse
order, after exporting the grades and archiving the instructors' folder, the exchange and every
account's home into one tarball (root's, 0600) in a folder outside the room. The cluster itself
stays up (it was there for the course before the room came).

`release`, `collect`, `feedback` and `export` run one step of a lab's round on the room's
exchange (hpclab.classroom.grading_room, as the grader's account) and report per student.
"""

from __future__ import annotations

import contextlib
import csv
import fcntl
import os
import shutil
import tarfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from hpclab.cluster import local
from hpclab.site import modules
from hpclab.core import commands
from hpclab.core.errors import HpclabError
from hpclab.core.io import write_atomic
from hpclab.classroom import (accounting, accounts, exposure, grading_room, hub, hub_config, install, record,
                              recording)
from hpclab.classroom.roster import default_names, read_roster
from hpclab.classroom.layout import (INSTRUCTORS_GROUP, MAX_STUDENTS, SLURM_ACCOUNT, STUDENTS_GROUP, ClassroomLayout,
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
    notes: list[str] = field(default_factory=list)

    def render(self) -> str:
        lines = [f"classroom up in {self.seconds:.1f} s: {len(self.students)} students, "
                 f"{len(self.instructors)} instructors",
                 f"  hub: {self.url}",
                 f"  passwords: {self.passwords} (readable by {self.instructors[0]} only: hand them out)"]
        if self.new_accounts:
            lines.append(f"  new accounts: {', '.join(self.new_accounts)}")
        lines += [f"  {note}" for note in self.notes]
        lines.append("  stop it with 'hpclab classroom down' (keeps accounts, homes and the course; "
                     "'up' brings it back)")
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
       limits: accounting.StudentLimits | None = None, lay: ClassroomLayout | None = None,
       roster: Path | None = None, own: list[str] = ()) -> UpReport:
    """Make or complete the room. roster: the students' names (hpclab.classroom.roster); without
    one a room keeps the names an earlier roster gave, the other accounts are named by themselves.
    settings.recording: open the room in room mode on that recording (hpclab.classroom.recording);
    own: the experiments (or experiment/label) its students still run themselves."""
    _check_root()
    _check_counts(students, instructors)
    # read before anything changes: a wrong roster stops here
    names = read_roster(roster, [student_name(i) for i in range(1, students + 1)]) if roster else None
    lay = lay or layout()
    with _lock(lay):
        return _up(students, instructors, settings, limits, lay, names, own)


def _up(students: int, instructors: int, settings: hub.HubSettings | None, limits: accounting.StudentLimits | None,
        lay: ClassroomLayout, names: dict | None = None, own: list[str] = ()) -> UpReport:
    t0 = time.monotonic()
    settings = settings or hub.HubSettings()
    if settings.recording:  # before anything changes: a folder with no recording stops here
        recording.open_room(settings.recording, students, own)
    limits = limits or accounting.StudentLimits()
    # before anything changes: a cluster others share refuses the room's policy (its restart)
    local.refuse_policy_change_if_shared(accounting.render_policy(limits))
    lay.root.mkdir(parents=True, exist_ok=True)
    lay.root.chmod(0o755)
    rec = record.load(lay.record)
    old = rec.settings.get("students", 0)
    if old > students:
        raise HpclabError(f"the classroom has {old} students; up with --students {students} would not remove any",
                          "ask for at least as many, or remove the room first ('hpclab classroom remove "
                          "--yes-delete-student-data' archives it, then deletes it)")
    rec.settings.update(students=students, instructors=instructors, spawner=settings.spawner,
                        bind=f"{settings.bind_ip}:{settings.port}")
    rec.save()
    # Before any student account exists: the checkout's lab sources must be out of their reach.
    closed = exposure.close_checkout(rec.settings)
    rec.save()
    student_names = [student_name(i) for i in range(1, students + 1)]
    instructor_names = [instructor_name(i) for i in range(1, instructors + 1)]
    rec.settings["names"] = {**default_names(student_names), **rec.settings.get("names", {}), **(names or {})}
    rec.save()

    for group in (STUDENTS_GROUP, INSTRUCTORS_GROUP):
        accounts.ensure_group(rec, group)
    new = [u for u in student_names if accounts.ensure_user(rec, u, STUDENTS_GROUP)]
    new += [u for u in instructor_names if accounts.ensure_user(rec, u, INSTRUCTORS_GROUP)]
    _instructors_folder(lay, instructor_names[0])
    _write_passwords(lay, new, instructor_names[0])

    local.up()
    accounting.create(rec, student_names, instructor_names, limits)

    install.copy_course(lay)
    install.copy_lab_solutions(lay)
    built = install.ensure_venv(lay, lay.root / "install.log")
    install.link_course(lay)
    install.write_lab_settings(lay)
    # Module files for the system compiler and Open MPI (sites/classroom.yaml loads them in every job).
    modules.write_modulefiles(lay.modulefiles)
    grading_room.prepare(lay, rec, student_names, instructor_names)
    url = hub.start(lay, rec, settings)
    if settings.recording:
        closed = [*closed, recording.room_note(settings.recording)]
    return UpReport(url, student_names, instructor_names, new, str(lay.passwords), time.monotonic() - t0, built,
                    closed)


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


# --- down: stop the room, keep everything ----------------------------------------------------

@dataclass
class DownReport:
    """What `down` stopped and what it kept (present: False when there is no classroom)."""

    present: bool
    hub_was_running: bool = False
    accounts: list[str] = field(default_factory=list)
    kept: list[str] = field(default_factory=list)

    def render(self) -> str:
        if not self.present:
            return "classroom down: no classroom here, nothing to stop"
        head = ("stopped the hub and every student's server" if self.hub_was_running
                else "the hub was not running")
        return "\n".join([f"classroom down: {head}",
                          f"  kept: {len(self.accounts)} accounts with their homes, " + ", ".join(self.kept),
                          "  'hpclab classroom up' brings the room back as it was; 'hpclab classroom remove "
                          "--yes-delete-student-data' archives it, then deletes it"])


def down(lay: ClassroomLayout | None = None, purge: bool = False) -> DownReport:
    """Stop the hub and every student's server (their processes and cgroups; server jobs with the
    Slurm spawner). Everything else stays: accounts, passwords, homes, the instructors' folder
    (course, gradebook, exports), the exchange, the Slurm account and QOS, the course copy and the
    venv, so that the next `up` finds the room as it was. purge: refused, it belongs to remove."""
    if purge:
        raise HpclabError("'down --purge' is gone: down keeps every account, home and the course",
                          "to delete the room and its Python environment, 'hpclab classroom remove "
                          "--yes-delete-student-data --purge' (it exports the grades and archives the room first)")
    _check_root()
    lay = lay or layout()
    with _lock(lay):
        rec = record.load(lay.record)
        if rec.empty:
            return DownReport(False)
        ran = hub.stop(lay, rec)
        kept = [f"the instructors' folder {lay.instructors} (course, gradebook, exports, passwords)",
                f"the exchange {lay.exchange}"]
        if rec.slurm:
            kept.append("the Slurm account and QOS")
        kept.append(f"the course copy and venv in {lay.root}")
        return DownReport(True, ran, list(rec.users), kept)


# --- remove: export, archive, then delete ----------------------------------------------------

def archive_root() -> Path:
    """Where `remove` leaves its archives and grade exports: a folder outside the room that
    outlives it (root's, 0700). HPCLAB_CLASSROOM_ARCHIVES overrides /var/backups/hpclab-classroom."""
    return Path(os.environ.get("HPCLAB_CLASSROOM_ARCHIVES", "/var/backups/hpclab-classroom"))


@dataclass
class RemoveReport:
    """What `remove` did: the archive (its path, bytes, and files per part: 'instructors',
    'exchange', 'homes/<user>', ...), the grades exported first (or why not), what was removed."""

    archive: Path
    archive_bytes: int
    archived: dict[str, int]
    grades: Path | None
    grades_note: str
    removed: list[str]
    seconds: float

    def render(self) -> str:
        if not self.archived:   # no room, only the venv a removal without --purge had kept
            return f"classroom: no room here, nothing to archive; removed {', '.join(self.removed)}"
        homes = [k for k in self.archived if k.startswith("homes/")]
        lines = [f"classroom removed in {self.seconds:.1f} s"]
        if self.grades:
            lines.append(f"  grades exported first: {self.grades}")
        else:
            lines.append(f"  grades not exported ({self.grades_note}); the gradebook itself is in the archive")
        lines.append(f"  archive: {self.archive} ({self.archive_bytes / 1e6:.1f} MB, root's, 0600)")
        lines.append(f"    the instructors' folder ({self.archived.get('classroom/instructors', 0)} files: course, "
                     f"gradebook, exports; no passwords), the exchange "
                     f"({self.archived.get('classroom/exchange', 0)} files), {len(homes)} homes")
        for key in homes:
            lines.append(f"    {key}: {self.archived[key]} files")
        lines.append(f"  removed: {len(self.removed)} things ({', '.join(self.removed[:8])}"
                     f"{', ...' if len(self.removed) > 8 else ''})")
        lines.append(f"  list it with 'tar -tzf {self.archive}'; restore one home with "
                     f"'tar -xzf {self.archive} -C /tmp homes/student01'")
        return "\n".join(lines)


def _homes(rec: record.Record) -> list[tuple[str, Path]]:
    """(user, home) of every account of the room that exists, in the record's order."""
    return [(user, accounts.home(user)) for user in rec.users if accounts.exists(user)]


def _bytes(path: Path) -> int:
    total = 0
    for folder, _, names in os.walk(path):
        for name in names:
            with contextlib.suppress(OSError):
                total += os.lstat(os.path.join(folder, name)).st_size
    return total


def what_remove_deletes(lay: ClassroomLayout, rec: record.Record) -> list[str]:
    """What `remove` would delete, one line per kind (for the refusal without confirmation)."""
    homes = _homes(rec)
    students = [u for u, _ in homes if u.startswith("student")]
    lines = [f"{len(homes)} accounts with their homes ({len(students)} students: "
             f"{', '.join(students[:3])}{', ...' if len(students) > 3 else ''}; "
             f"{sum(_bytes(h) for _, h in homes) / 1e6:.1f} MB of notebooks, runs and files)"]
    if lay.instructors.exists():
        lines.append(f"the instructors' folder {lay.instructors}: the course, the gradebook, the exports, "
                     "the passwords")
    if lay.exchange.exists():
        lines.append(f"the exchange {lay.exchange} (released labs, submissions, feedback)")
    if rec.slurm:
        lines.append("the Slurm account, QOS and associations (the students' job history stays in sacct)")
    lines.append(f"the hub's state, the course copy and the module files in {lay.root}")
    return lines


def remove(lay: ClassroomLayout | None = None, yes: bool = False, purge: bool = False,
           archive_dir: Path | None = None) -> RemoveReport:
    """Delete the room, after keeping a copy of its people's work. Refused unless `yes` (the
    message lists what would go). In this order: stop the hub; export every grade (nbgrader
    export as the grader) into the course's exports/ and next to the archive; write one tarball
    (classroom/classroom.json, classroom/instructors/ without the passwords, classroom/exchange/,
    homes/<account>/ of every account) into archive_dir (default archive_root(); root's 0700,
    the tarball 0600) and read it back; then remove the Slurm objects, the accounts with their
    homes, the groups and the room's folder. The students' venv (packages, nobody's data) stays
    unless purge. Returns the report; raises HpclabError before deleting anything if the archive
    cannot be written."""
    _check_root()
    lay = lay or layout()
    with _lock(lay):
        rec = record.load(lay.record)
        if rec.empty:
            if purge and lay.venv.exists():
                shutil.rmtree(lay.venv)
                return RemoveReport(Path(), 0, {}, None, "no classroom", [str(lay.venv)], 0.0)
            raise HpclabError(f"no classroom here ({lay.record} does not exist)", "nothing to remove")
        if not yes:
            raise HpclabError("'remove' deletes the classroom's people's data: " + "; ".join(what_remove_deletes(lay, rec)),
                              "run 'hpclab classroom remove --yes-delete-student-data' to export the grades, archive "
                              f"all of it into {archive_dir or archive_root()}/ and then delete it; to only stop the "
                              "room for now, 'hpclab classroom down'")
        archive_dir = Path(archive_dir).resolve() if archive_dir else archive_root()
        doomed = [lay.root.resolve(), *(home.resolve() for _, home in _homes(rec))]
        if any(archive_dir.is_relative_to(d) for d in doomed):
            raise HpclabError(f"--archive-dir {archive_dir} is inside what remove deletes",
                              f"choose a folder outside {lay.root} and the accounts' homes, e.g. {archive_root()}")
        return _remove(lay, rec, purge, archive_dir)


def _remove(lay: ClassroomLayout, rec: record.Record, purge: bool, archive_dir: Path) -> RemoveReport:
    t0 = time.monotonic()
    hub.stop(lay, rec)
    if rec.slurm:   # Slurm refuses to delete a user with jobs, and a job may still write into a home
        commands.run(["scancel", f"--account={SLURM_ACCOUNT}"], "cancel the room's jobs",
                     env={**os.environ, **local.slurm_env()}, timeout=30)
    stamp = time.strftime("%Y%m%d-%H%M%S")
    archive_dir.mkdir(parents=True, exist_ok=True)
    os.chown(archive_dir, 0, 0)
    archive_dir.chmod(0o700)
    grades, note = _export_before_removal(lay, archive_dir, stamp)
    archive, counts = _archive(lay, rec, archive_dir, stamp)

    removed = []
    grading_room.remove(lay, rec)
    reopened = exposure.reopen_checkout(rec.settings)
    if reopened:
        removed.append(reopened)
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
    return RemoveReport(archive, archive.stat().st_size, counts, grades, note, removed, time.monotonic() - t0)


def _export_before_removal(lay: ClassroomLayout, archive_dir: Path, stamp: str) -> tuple[Path | None, str]:
    """Every grade as CSV (grading_room.export_grades, into the course's exports/), copied next to
    the archive (0600). Returns (the copy, "") or (None, why not): a room whose course was never
    made has no grades, and a failing export must not keep the room from going (its gradebook is
    in the archive either way)."""
    if not (lay.nbgrader_course / "nbgrader_config.py").is_file() or not lay.python.exists():
        return None, "the room has no nbgrader course"
    try:
        csv_path = grading_room.export_grades(lay)
    except HpclabError as e:
        return None, e.what
    copy = archive_dir / f"grades-{stamp}.csv"
    write_atomic(copy, csv_path.read_text(), mode=0o600)
    return copy, ""


def _archive(lay: ClassroomLayout, rec: record.Record, archive_dir: Path, stamp: str) -> tuple[Path, dict[str, int]]:
    """One gzip tarball of the room's people's work: owners, modes and links kept as they are (no
    link is followed). Written under a temporary name created 0600, synced, read back (every
    part must be in it), then renamed. Returns (path, {part: files})."""
    parts = [("classroom/classroom.json", lay.record), ("classroom/instructors", lay.instructors),
             ("classroom/exchange", lay.exchange), *((f"homes/{user}", home) for user, home in _homes(rec))]
    parts = [(name, path) for name, path in parts if path.exists()]
    counts = {name: 0 for name, _ in parts}
    secret = f"classroom/instructors/{lay.passwords.name}"
    path = archive_dir / f"classroom-{stamp}.tar.gz"
    n = 1
    while path.exists():
        n += 1
        path = archive_dir / f"classroom-{stamp}-{n}.tar.gz"
    partial = path.with_name(f".{path.name}.partial")
    try:
        fd = os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "wb") as fh:
            with tarfile.open(fileobj=fh, mode="w:gz") as tar:
                for name, src in parts:
                    def keep(info: tarfile.TarInfo, part: str = name) -> tarfile.TarInfo | None:
                        if info.name == secret:   # the accounts are gone: their passwords stay out
                            return None
                        if not info.isdir():
                            counts[part] += 1
                        return info
                    tar.add(src, arcname=name, recursive=True, filter=keep)
            fh.flush()
            os.fsync(fh.fileno())
        with tarfile.open(partial, "r:gz") as tar:
            names = set(tar.getnames())
        missing = [name for name, _ in parts if name not in names]
        if missing:
            raise HpclabError(f"the archive {partial} lacks {', '.join(missing)}", "nothing was removed; try again")
        os.replace(partial, path)
    except OSError as e:
        partial.unlink(missing_ok=True)
        raise HpclabError(f"cannot write the classroom's archive into {archive_dir}: {e}",
                          "nothing was removed; free space there or choose another folder with --archive-dir") from None
    except BaseException:
        partial.unlink(missing_ok=True)
        raise
    return path, counts


# --- the room's grading round ------------------------------------------------------------------

@dataclass
class RoundReport:
    """One step of a lab's round: a headline, one line per student, notes (refusals, links)."""

    head: str
    per_student: list[tuple[str, str]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def render(self) -> str:
        width = max((len(s) for s, _ in self.per_student), default=0)
        return "\n".join([self.head, *(f"  {s:{width}}  {what}" for s, what in self.per_student),
                          *(f"  {note}" for note in self.notes)])


def _room_course(lay: ClassroomLayout | None) -> tuple[ClassroomLayout, list[str]]:
    """The room (root only) and its students, once its nbgrader course exists."""
    _check_root()
    lay = lay or layout()
    rec = record.load(lay.record)
    if rec.empty or not (lay.nbgrader_course / "nbgrader_config.py").is_file():
        raise HpclabError(f"no classroom course here ({lay.nbgrader_course} does not exist)",
                          "make the room first: 'sudo .venv/bin/hpclab classroom up'")
    if not lay.python.exists():
        raise HpclabError(f"the classroom's venv is missing ({lay.python})", "run 'hpclab classroom up' (it builds it)")
    return lay, [student_name(i) for i in range(1, int(rec.settings.get("students", 0)) + 1)]


def release(lab: str, lay: ClassroomLayout | None = None) -> RoundReport:
    """Release `lab` to the room's exchange (student version generated first); idempotent. Per
    student: whether their course copy holds the lab already (fetched)."""
    lay, students = _room_course(lay)
    outbound = lay.exchange / grading_room.COURSE_ID / "outbound" / lab
    was = outbound.is_dir()
    out = grading_room.release(lay, lab)
    head = (f"{lab}: already released ({out}); nothing changed" if was else
            f"{lab}: released to the exchange ({out}), without solutions and hidden tests")
    rows = []
    for s in students:
        fetched = accounts.exists(s) and (lay.student_course(accounts.home(s)) / lab).is_dir()
        rows.append((s, "has fetched it" if fetched else "may fetch it now (Assignments tab)"))
    return RoundReport(head, rows)


def collect(lab: str, lay: ClassroomLayout | None = None, jobs: int | None = None) -> RoundReport:
    """Collect every student's newest own submission of `lab` and autograde what is new in the
    sandbox, as the grader's account (grading_room.collect_and_autograde), `jobs` submissions at
    once (default: one per core). Per student: collected now and graded (score), graded earlier,
    or no submission."""
    lay, students = _room_course(lay)
    a = grading_room.collect_and_autograde(lay, lab, jobs=jobs)
    head = (f"{lab}: collected {len(a.collected)} new submissions in {a.collect_s:.1f} s, autograded "
            f"{len(a.graded)} in the sandbox as {grading_room.GRADER} in {a.autograde_s:.1f} s")
    rows = []
    for s in sorted(set(students) | set(a.scores)):
        stamp = lay.nbgrader_course / "submitted" / s / lab / "timestamp.txt"
        score = f"{a.scores[s][0]:g} / {a.scores[s][1]:g}" if s in a.scores else ""
        if s in a.collected:
            what = f"collected (submitted {stamp.read_text().strip()}), " + (
                f"autograded: {score}" if s in a.graded else "not graded")
        elif s in a.scores:
            what = f"nothing new; graded earlier: {score}"
        else:
            what = "no submission"
        if s in a.tampered:
            what += " (changed locked cells, restored before grading: " + ", ".join(
                f"{cell} {how}" for cell, how in sorted(a.tampered[s].items())) + ")"
        rows.append((s, what))
    notes = [f"refused: {name}: {why}" for name, why in a.refused]
    notes += [f"left out of {student}'s copy: the link {link}" for student, link in a.links]
    return RoundReport(head, rows, notes)


def feedback(lab: str, lay: ClassroomLayout | None = None) -> RoundReport:
    """HTML feedback of every autograded submission of `lab`, released to the exchange (students
    fetch it in the Assignments tab). Per student: the feedback released, or why none."""
    lay, students = _room_course(lay)
    files = grading_room.release_feedback(lay, lab)
    by_student: dict[str, list[str]] = {}
    for f in files:
        by_student.setdefault(f.parent.parent.name, []).append(f.name)
    rows = [(s, f"feedback released ({', '.join(by_student[s])}): fetch it in the Assignments tab"
             if s in by_student else "no autograded submission: no feedback")
            for s in sorted(set(students) | set(by_student))]
    return RoundReport(f"{lab}: feedback for {len(by_student)} students released to the exchange", rows)


def export(lab: str | None = None, lay: ClassroomLayout | None = None) -> RoundReport:
    """Every grade of every lab as a new CSV in the course's exports/ (nbgrader export, as the
    grader). Per student: their score in `lab` (every lab when None)."""
    lay, students = _room_course(lay)
    if lab is not None and lab not in grading_room.LABS:
        raise HpclabError(f"no lab {lab!r} in the room's course", f"labs: {', '.join(grading_room.LABS)}")
    path = grading_room.export_grades(lay)
    with open(path, newline="") as fh:
        rows = [r for r in csv.DictReader(fh) if lab is None or r.get("assignment") == lab]
    got: dict[str, list[str]] = {}
    for r in rows:
        score = f"{float(r['score']):g} / {float(r['max_score']):g}" if r.get("max_score") else r.get("score", "?")
        got.setdefault(r["student_id"], []).append(score if lab else f"{r['assignment']} {score}")
    lines = [(s, ", ".join(got[s]) if s in got else "no grade") for s in sorted(set(students) | set(got))]
    return RoundReport(f"grades of every student and lab -> {path} ({len(rows)} rows"
                       f"{' for ' + lab if lab else ''})", lines)


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


# --- prestart: servers running before the students arrive ---------------------------------------

def prestart(over_s: float = 300.0, lay: ClassroomLayout | None = None, timeout_s: float = 900.0,
             students: list[str] | None = None) -> RoundReport:
    """Start every student's server before class, one every over_s / N seconds (a start costs
    about 2 CPU-seconds: 30 at once on 2 cores take half a minute each), and wait until each is
    ready; a student who then logs in finds a running server. Uses the hub's prestart service
    (its token is root's); a server already running is left as it is. The idle culler stops a
    server nobody used for --idle-minutes: prestart within that time of the session's start.
    students: a subset (default: the whole room). Per student: ready after how long, or why not."""
    import requests

    lay, room_students = _room_course(lay)
    students = students or room_students
    files = hub_config.HubFiles(lay.hub)
    if hub.running_pid(lay) is None:
        raise HpclabError("the room's hub is not running", "start it: 'sudo .venv/bin/hpclab classroom up ...'")
    api = f"http://127.0.0.1:{hub_config.HUB_API_PORT}/hub/api"
    headers = {"Authorization": f"token {files.prestart_token.read_text().strip()}"}
    t0, step = time.monotonic(), over_s / max(1, len(students))
    asked, rows = {}, {}

    def call(method: str, url: str):
        try:
            return requests.request(method, url, headers=headers, timeout=30)
        except requests.RequestException as exc:
            raise HpclabError(f"the hub's API did not answer ({type(exc).__name__}: {exc})",
                              f"check the hub: 'sudo .venv/bin/hpclab classroom status' (log: {files.log})") from None

    for i, user in enumerate(students):
        time.sleep(max(0.0, t0 + i * step - time.monotonic()))
        r = call("POST", f"{api}/users/{user}/server")
        if r.status_code == 400 and "already running" in r.text:
            rows[user] = "was running already"
        elif r.status_code in (201, 202):
            asked[user] = time.monotonic()
        else:
            rows[user] = f"not started: the hub said HTTP {r.status_code} ({r.text[:120]})"
    deadline = time.monotonic() + timeout_s
    while asked and time.monotonic() < deadline:
        for user in list(asked):
            r = call("GET", f"{api}/users/{user}")
            server = ((r.json() if r.status_code == 200 else {}).get("servers") or {}).get("", {})
            if server.get("ready"):
                rows[user] = f"ready {time.monotonic() - asked.pop(user):.1f} s after it was asked for"
        time.sleep(0.5)
    for user in asked:
        rows[user] = f"not ready after {timeout_s:.0f} s: read the hub's log ({files.log})"
    ready = sum(r.startswith(("ready", "was running")) for r in rows.values())
    head = (f"prestart: {ready} of {len(students)} students' servers running, started over {over_s:g} s "
            f"({time.monotonic() - t0:.0f} s in all); the idle culler stops one unused for the room's idle time")
    return RoundReport(head, [(u, rows[u]) for u in students])
