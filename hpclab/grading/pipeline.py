"""The instructor's pipeline: grading the labs with nbgrader, one function per step (course folder,
release, collect, autograde, feedback, export) and what the gradebook says afterwards
(cell_scores, tampered_cells). The command line is `python -m hpclab.grading STEP ...`
(hpclab/grading/__main__.py); the simulated class is hpclab.grading.demo.

A course folder is nbgrader's layout (source/, release/, submitted/, autograded/, feedback/,
gradebook.db) plus our grader/nbgrader_config.py. Each step is one nbgrader command run in that
folder. Steps never overwrite earlier results (no --force): a step already done is an error.

Student code runs in nbgrader's kernel, started through `python -m hpclab.grading kernel`, inside
hpclab.grading.sandbox: as the dedicated user hpclab-grader, in a bubblewrap sandbox with no network, only
a copy of its own folder writable, and resource limits. Graded test cells are not run there: the
kernel only reports the answers they read, and the grader runs the tests on them in a process of
its own (hpclab.grading.answers), so nothing the notebook patches counts. Hidden tests take expected
values from hpclab.grading.references, computed in a fresh Python process with the package's
analysis, and only from packed runs that pass `labdata.verify`.
"""

from __future__ import annotations

import csv
import json
import os
import shutil
import sys
import time
from pathlib import Path

from hpclab.core import commands, paths
from hpclab.core.errors import HpclabError
from hpclab.course import lessons
from hpclab.grading import codelab, sandbox

LABS = lessons.labs()   # the labs with a grading pipeline, in course order: each lesson's lab (its reference answers)
KERNEL_NAME = "hpclab-grader"
SANDBOX_EXECUTE = "hpclab.grading.preprocessors.SandboxExecute"   # nbgrader_config.py runs cells through it


def _grader_dir() -> Path:
    return paths.repo() / "grader"


def _labs_dir() -> Path:
    return paths.repo() / "labs"


def _nbgrader() -> str:
    exe = Path(sys.executable).with_name("nbgrader")
    return str(exe) if exe.exists() else "nbgrader"


def _sh(course: Path, *args: str, timeout: float = 1800) -> commands.Completed:
    """Run one nbgrader command in the course folder; raise HpclabError with its last lines."""
    if not (course / "nbgrader_config.py").is_file():
        raise HpclabError(f"{course} is not a course folder (no nbgrader_config.py)",
                          "make one with `python -m hpclab.grading init COURSE`")
    # nbgrader calls alembic (gradebook migrations) by name: the venv's bin must be on PATH
    env = dict(os.environ, JUPYTER_PATH=str(course / "jupyter"),
               PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}")
    env.pop("NBGRADER_EXECUTION", None)
    proc = commands.run([_nbgrader(), *args], f"run nbgrader {args[0]}", env=env, timeout=timeout, cwd=course)
    (course / "logs").mkdir(exist_ok=True)
    log = course / "logs" / f"{args[0]}.log"
    if proc is None:
        raise HpclabError(f"nbgrader {args[0]} did not finish within {timeout:g} s",
                          "a submission may hang (each cell has its own time limit); run it again, or for fewer students")
    with open(log, "a") as fh:
        fh.write(f"$ nbgrader {' '.join(args)}\n{proc.stdout}{proc.stderr}\n")
    if proc.returncode != 0:
        tail = "\n".join((proc.stdout + proc.stderr).strip().splitlines()[-5:])
        raise HpclabError(f"nbgrader {args[0]} failed (exit {proc.returncode}): {tail}",
                          f"full output in {log}")
    return proc


# --- course folder ---------------------------------------------------------------------------


def init_course(course_dir: str | Path, labs=LABS) -> Path:
    """Make a course folder: nbgrader_config.py from grader/, source/<lab>/ from labs/<lab>/
    (notebooks only: each student brings their own data/; a code lab's C files as released,
    without the solution), and the sandbox kernel spec.

    course_dir: new or empty folder. labs: lab names under labs/. Returns the folder.
    Raises HpclabError when the folder already holds a course or a lab does not exist."""
    course = Path(course_dir).resolve()
    if (course / "source").exists() or (course / "gradebook.db").exists():
        raise HpclabError(f"{course} already holds a course", "use it as is, or pick a new folder")
    for lab in labs:
        if not (_labs_dir() / lab).is_dir():
            raise HpclabError(f"no lab {lab!r} in {_labs_dir()}", f"labs: {', '.join(LABS)}")
    course.mkdir(parents=True, exist_ok=True)
    shutil.copy(_grader_dir() / "nbgrader_config.py", course / "nbgrader_config.py")
    add_labs(course, labs)
    _install_kernel(course)
    ensure_exchange(course)
    return course


def add_labs(course_dir: str | Path, labs) -> list[str]:
    """Put labs' sources into a course folder: source/<lab>/ from labs/<lab>/ (notebooks only; a
    code lab's C files as released). A lab whose source/<lab>/ exists is left as it is (a course
    made before the lab was written gains it; nothing an instructor edited is replaced).
    Returns the labs added."""
    course = Path(course_dir).resolve()
    added = []
    for lab in labs:
        dest = course / "source" / lab
        if dest.exists():
            continue
        dest.mkdir(parents=True)
        for nb in sorted((_labs_dir() / lab).glob("*.ipynb")):
            shutil.copy(nb, dest / nb.name)
        if lab in lessons.code_labs():
            # a code lab's C files as the student starts from them (the solution stays in labs/:
            # autograde copies the source's files into each graded folder, where the student's
            # kernel could read them)
            for name, text in codelab.starter_files(lab).items():
                (dest / name).write_text(text)
        added.append(lab)
    return added


def ensure_exchange(course_dir: str | Path) -> Path | None:
    """Make the exchange folder nbgrader_config.py names by default, <course>/../nbgrader-exchange,
    so the formgrader's release and collect work (nbgrader refuses a missing exchange). When
    NBGRADER_EXCHANGE names a shared one (JupyterHub), it is the administrator's: None."""
    if os.environ.get("NBGRADER_EXCHANGE"):
        return None
    exchange = Path(course_dir).resolve().parent / "nbgrader-exchange"
    exchange.mkdir(exist_ok=True)
    return exchange


def _install_kernel(course: Path) -> None:
    """A kernel spec that starts ipykernel through `python -m hpclab.grading kernel` (in hpclab.grading.sandbox)."""
    spec = course / "jupyter" / "kernels" / KERNEL_NAME
    spec.mkdir(parents=True, exist_ok=True)
    argv = [sys.executable, "-m", "hpclab.grading", "kernel", "{connection_file}"]
    (spec / "kernel.json").write_text(json.dumps(
        {"argv": argv, "display_name": "hpclab grader (sandboxed)", "language": "python"}, indent=1))


def release(course_dir: str | Path, lab: str) -> Path:
    """Generate the student version of a lab (nbgrader generate_assignment): solutions and hidden
    tests removed, checksums recorded in the gradebook. A code lab's course objects and
    reference runs are made then too, in this account's cache (hpclab.grading.codelab.warm;
    HpclabError when the reference fails its trials). Returns release/<lab>/."""
    course = Path(course_dir).resolve()
    _sh(course, "generate_assignment", lab)
    if lab in lessons.code_labs() and sandbox.mode() is not None:
        # made now, not by the first submission: the class's autograde starts warm, and a
        # reference that fails its trials is found before any student submits
        t0 = time.monotonic()
        print(f"hpclab: {lab}: the course's objects and the reference's runs, for the grading account's cache ...",
              file=sys.stderr, flush=True)
        runs = codelab.warm(lab, _graded_libraries(course))
        print(f"hpclab: {lab}: {runs} reference run(s) cached ({time.monotonic() - t0:.1f} s)", file=sys.stderr)
    return course / "release" / lab


def _graded_libraries(course: Path) -> list[str] | None:
    """The MPI libraries the course's nbgrader_config.py grades code labs under
    (c.BuildAndRun.libraries), or None for every installed one."""
    from traitlets.config.loader import PyFileConfigLoader

    if not (course / "nbgrader_config.py").is_file():   # nbgrader then runs on its defaults: every library
        return None
    config = PyFileConfigLoader("nbgrader_config.py", path=str(course)).load_config()
    names = config.BuildAndRun.get("libraries") if "BuildAndRun" in config else None
    return list(names) if names else None


def collect(course_dir: str | Path, lab: str, downloads: str | Path) -> list[str]:
    """Collect submissions from a folder of zips (an LMS download), one `<student-id>.zip` per
    student holding the lab folder's content (notebook + data/), with nbgrader zip_collect.

    Returns the student ids now under submitted/. Raises HpclabError when there is no zip."""
    course = Path(course_dir).resolve()
    zips = sorted(Path(downloads).glob("*.zip"))
    if not zips:
        raise HpclabError(f"no .zip files in {downloads}", "download the submissions as zips first")
    archive = course / "downloaded" / lab / "archive"
    archive.mkdir(parents=True, exist_ok=True)
    for z in zips:
        if (archive / z.name).exists():
            raise HpclabError(f"{archive / z.name} was collected already", "remove it to collect again")
        shutil.copy(z, archive / z.name)
    _sh(course, "zip_collect", lab)
    return sorted(p.name for p in (course / "submitted").iterdir()
                  if (p / lab).is_dir())


def autograde(course_dir: str | Path, lab: str, timeout: int | None = None,
              unconfined: bool = False, jobs: int | None = None) -> None:
    """Execute and grade every collected submission of a lab: nbgrader autograde with the
    kernel in hpclab.grading.sandbox and test cells checked outside it (hpclab.grading.answers).
    timeout: seconds per cell (default: grader/nbgrader_config.py's). unconfined: no sandbox,
    for the instructor's own test notebooks only. jobs: submissions graded at once, each by its
    own `nbgrader autograde --student` in its own sandbox (default: one per core; 1 grades them
    all in one nbgrader process, as before). A student's failure does not stop the others; the
    error names every student whose grading failed.

    Raises HpclabError, before anything runs, when no sandbox can be made here (and unconfined
    is not asked for) or when the course's nbgrader_config.py predates the sandbox."""
    course = Path(course_dir).resolve()
    config = course / "nbgrader_config.py"
    if config.is_file() and SANDBOX_EXECUTE not in config.read_text():
        raise HpclabError(f"{config} does not run cells through {SANDBOX_EXECUTE}",
                          f"copy {_grader_dir() / 'nbgrader_config.py'} over it")
    if not unconfined and sandbox.mode() is None:
        raise HpclabError(f"refusing to autograde untrusted notebooks without a sandbox: "
                          f"{sandbox.why_not()}",
                          "grade your own test notebooks only with --unconfined")
    args = ["autograde", lab, f"--Execute.kernel_name={KERNEL_NAME}",
            f"--ExecutePreprocessor.kernel_name={KERNEL_NAME}"]
    if timeout is not None:
        args.append(f"--Execute.timeout={int(timeout)}")
    if unconfined:
        args.append("--SandboxExecute.unconfined=True")
    students = sorted(p.parent.name for p in (course / "submitted").glob(f"*/{lab}"))
    jobs = max(1, int(jobs if jobs is not None else (os.cpu_count() or 1)))
    if jobs > 1 and not unconfined and not sandbox.processes_bounded_per_sandbox():
        # sandboxes would share one process bound (RLIMIT_NPROC of the grader's account): a fork
        # bomb in one would make its neighbours' kernels die (seen in the demo class)
        print(f"hpclab: grading one submission at a time, not {jobs}: this machine cannot give each "
              "sandbox a process bound of its own (no pids cgroup)", file=sys.stderr)
        jobs = 1
    try:
        if jobs == 1 or len(students) <= 1:
            _sh(course, *args)
        else:
            _autograde_each(course, args, students, jobs)
    finally:
        sandbox.sweep()


def _autograde_each(course: Path, args: list[str], students: list[str], jobs: int) -> None:
    """nbgrader autograde in `jobs` processes at once, each grading its share of the students one
    after another (one process per share, not per student: starting nbgrader costs about a
    CPU-second, as much as a small lab's execution), each with its own folder for the kernels'
    sockets. The notebooks run each in its own sandbox; the gradebook is SQLite, whose writers
    wait for each other (nbgrader commits each notebook's grades in a short transaction)."""
    import tempfile
    from concurrent.futures import ThreadPoolExecutor

    shares = [students[i::jobs] for i in range(jobs) if students[i::jobs]]

    def one(share: list[str]) -> list[str]:
        # jupyter's ipc sockets are named <ip>-<port> with ports counted from 1, and ip defaults to
        # a path in the client's folder: two nbgrader processes in one course would pick the same
        # names and the sandbox's links to their kernels would replace each other. Each gets its own.
        ipc = Path(tempfile.mkdtemp(prefix="hpclab-ipc-"))
        others = ",".join(s for s in students if s not in share)
        try:
            _sh(course, *args, "--student=*", f"--CourseDirectory.student_id_exclude={others}",
                f"--KernelManager.ip={ipc / 'kernel'}")
            return []
        except HpclabError as exc:
            return [f"{', '.join(share)}: {exc.what}"]
        finally:
            shutil.rmtree(ipc, ignore_errors=True)

    with ThreadPoolExecutor(max_workers=len(shares)) as pool:
        failed = [f for fs in pool.map(one, shares) for f in fs]
    if failed:
        raise HpclabError(f"autograde failed in {len(failed)} of {len(shares)} share(s) of the {len(students)} "
                          "submission(s): " + "; ".join(failed),
                          f"full output in {course / 'logs' / 'autograde.log'}; the other submissions are graded")


def feedback(course_dir: str | Path, lab: str) -> list[Path]:
    """HTML feedback for every graded submission (nbgrader generate_feedback). Returns the files."""
    course = Path(course_dir).resolve()
    _sh(course, "generate_feedback", lab)
    return sorted((course / "feedback").glob(f"*/{lab}/*.html"))


def export(course_dir: str | Path, csv_path: str | Path) -> list[dict]:
    """Grades of every student and lab as CSV (nbgrader export). csv_path must not exist.
    Returns the rows (dicts with student_id, assignment, score, max_score, ...)."""
    course = Path(course_dir).resolve()
    csv_path = Path(csv_path).resolve()
    if csv_path.exists():
        raise HpclabError(f"{csv_path} exists", "export to a new file; grades are never overwritten")
    _sh(course, "export", f"--CsvExportPlugin.to={csv_path}")
    with open(csv_path, newline="") as fh:
        return list(csv.DictReader(fh))


def name_students(course_dir: str | Path, names_json: str | Path) -> int:
    """Give every student of `names_json` ({student_id: {first_name, last_name, email}}) those names
    in the course's gradebook, made if new (nbgrader's formgrader and export show "None, None" for a
    student it met only through a submission). Returns how many students it named."""
    from nbgrader.api import Gradebook

    try:
        names = json.loads(Path(names_json).read_text())
    except (OSError, ValueError) as e:
        raise HpclabError(f"cannot read the students' names from {names_json}: {e}",
                          "it is written by 'hpclab classroom up'; run that again") from None
    with Gradebook(f"sqlite:///{Path(course_dir).resolve() / 'gradebook.db'}") as gb:
        for student, name in names.items():
            gb.update_or_create_student(student, first_name=name.get("first_name") or "",
                                        last_name=name.get("last_name") or student, email=name.get("email") or None)
    return len(names)


def cell_scores(course_dir: str | Path, lab: str) -> dict[str, dict[str, tuple[float, float]]]:
    """Per-cell grades from the gradebook: {student: {grade_id: (score, max points)}}."""
    from nbgrader.api import Gradebook

    out: dict[str, dict[str, tuple[float, float]]] = {}
    with Gradebook(f"sqlite:///{Path(course_dir).resolve() / 'gradebook.db'}") as gb:
        for sub in gb.assignment_submissions(lab):
            cells = out.setdefault(sub.student_id, {})
            for nb in sub.notebooks:
                for grade in nb.grades:
                    cells[grade.name] = (float(grade.score), float(grade.max_score))
    return out


def tampered_cells(course_dir: str | Path, lab: str) -> dict[str, dict[str, str]]:
    """Test and read-only cells a student changed or deleted, against the released notebook:
    {student: {grade_id: "edited" | "deleted"}} (students with none are left out).

    nbgrader restores those cells from the source before grading; this names them for the
    instructor. (nbgrader's own checksum warning fires for every cell with hidden tests, since
    the released cell differs from the source cell, so it cannot single out a student.)"""
    import nbformat

    course = Path(course_dir).resolve()
    out: dict[str, dict[str, str]] = {}
    for rel in sorted((course / "release" / lab).glob("*.ipynb")):
        locked = {c.metadata["nbgrader"]["grade_id"]: c.source
                  for c in nbformat.read(rel, as_version=4).cells
                  if c.metadata.get("nbgrader", {}).get("locked")}
        for sub in sorted((course / "submitted").glob(f"*/{lab}/{rel.name}")):
            seen = {c.metadata.get("nbgrader", {}).get("grade_id"): c.source
                    for c in nbformat.read(sub, as_version=4).cells}
            flags = {gid: ("deleted" if gid not in seen else "edited")
                     for gid, src in locked.items() if seen.get(gid) != src}
            if flags:
                out.setdefault(sub.parent.parent.name, {}).update(flags)
    return out
