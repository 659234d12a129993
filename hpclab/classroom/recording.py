"""Making a room's recording (`hpclab classroom record`) and opening a room on it (`classroom up
--recording`): the writing side of room mode; hpclab.runs.recorded is the reading side.

Recording runs the chosen notebooks headless (hpclab.course.runner.run_course), on this machine's
cluster, with HPCLAB_RUNS in the recording's runs/ folder, and notes per notebook which run folders
it made and under which experiment names: a student's call is later matched only against the runs
of the notebooks the room reads. The default notebooks are those the plan puts in room mode for
the room's size (hpclab.course.plan.room_mode_notebooks, from the last course run).

    /opt/hpclab/classroom/recording/    (root's, 0755: every student's kernel reads it, none writes)
"""

from __future__ import annotations

import getpass
import os
import shutil
from pathlib import Path

from hpclab.analysis import effective_cache
from hpclab.classroom.layout import ClassroomLayout
from hpclab.core import commands, paths
from hpclab.core.errors import HpclabError
from hpclab.core.io import readable_folders
from hpclab.course import plan, runner
from hpclab.runs import recorded


def default_folder(lay: ClassroomLayout) -> Path:
    """Where a room's recording lives: beside the course copy, readable by every account."""
    return lay.root / "recording"


def recorder() -> str:
    """Who records: the person behind sudo when there is one (their name goes on every figure)."""
    return os.environ.get("SUDO_USER") or getpass.getuser()


def _run_folders(runs_root: Path) -> set[tuple[str, str]]:
    """(experiment, run id) of every run folder under runs_root."""
    return {(f.parent.parent.name, f.parent.name) for f in runs_root.glob("*/*/status.json")}


def record(folder: Path, notebooks: list[Path], by: str | None = None) -> tuple[runner.CourseReport, dict]:
    """Run `notebooks` (paths in the checkout) headless with their runs in folder/runs/ and the
    runner's report in folder/course/, then write folder/recording.json: per notebook (its path
    in the course) {"runs": run ids, "experiments": names, "seconds", "jobs", "ok", "error"}.
    A notebook recorded again replaces its entry (its older runs stay on disk, unlisted).
    Returns the runner's report and the entries written."""
    if not notebooks:
        raise HpclabError("no notebook to record: the plan puts none in room mode for this room",
                          "name them: hpclab classroom record --notebooks 02 03")
    folder = Path(folder)
    runs_root = readable_folders(folder, "runs", what="the recording's folder",
                                 fix="record as root (sudo .venv/bin/hpclab classroom record), or name a folder "
                                     "of yours with --to")
    seen = _run_folders(runs_root)
    made: dict[str, dict] = {}

    def note(notebook: Path, result: runner.NotebookResult) -> None:
        new = _run_folders(runs_root) - seen
        seen.update(new)
        made[result.path] = {"runs": sorted(run_id for _, run_id in new),
                             "experiments": sorted({exp for exp, _ in new}),
                             "seconds": round(result.seconds, 1), "jobs": result.jobs,
                             "ok": result.ok, "error": result.error}

    with commands.inherited_environment({"HPCLAB_RUNS": str(runs_root)}):  # the notebooks' kernels' runs
        report = runner.run_course(notebooks, out_dir=folder / "course", each=note)
    probe = effective_cache.record_path()
    if probe.is_file():   # what the lessons were sized with: the students' kernels size theirs alike
        shutil.copyfile(probe, folder / recorded.PROBE)
        (folder / recorded.PROBE).chmod(0o644)
    recorded.write_recording(folder, by or recorder(), made, course_root=str(paths.repo()))
    return report, made


def chosen_notebooks(names: list[str] | None, students: int, course_run: Path | None = None) -> list[Path]:
    """The notebooks to record: those named (as hpclab course run takes them), else those the
    plan puts in room mode for `students`, from the last course run (course_run: its folder,
    default build/course/). HpclabError when that run did not run the whole course: a notebook
    it left out could not be judged."""
    if names:
        return runner.resolve_notebooks(names)
    report, _ = plan.read_run(course_run)
    left_out = sorted({str(p.relative_to(paths.repo())) for p in runner.course_notebooks()}
                      - {n["path"] for n in report["notebooks"]})
    if left_out:
        raise HpclabError(f"the last course run ({report.get('started', 'unknown')}) left out {len(left_out)} of the "
                          f"course's notebooks (e.g. {left_out[0]}): which ones a room cannot run is not known",
                          "run the whole course first (make course), or name them: "
                          "hpclab classroom record --notebooks 02 03")
    return [paths.repo() / p for p in plan.room_mode_notebooks(students, course_run)]


def open_room(folder: Path, students: int, own: list[str] = ()) -> dict:
    """Write folder/room-mode.json for a room of `students`: it reads every notebook the recording
    holds, except what `own` names (experiments, or experiment/label) as the students' own.
    Returns {"HPCLAB_RECORDED": folder}, the students' servers' environment for it. HpclabError
    when the folder holds no recording."""
    folder = Path(folder).resolve()
    rec = recorded.Recording(folder)
    if not rec.notebooks:
        raise HpclabError(f"{folder} holds no recording ({recorded.RECORDING} is missing or lists no notebook)",
                          "make one first: sudo .venv/bin/hpclab classroom record")
    recorded.write_room_mode(folder, sorted(rec.notebooks), list(own), students)
    return {recorded.ENV: str(folder)}


def room_note(folder: Path) -> str:
    """One line for `classroom up`'s report: which notebooks the room reads from whose recording."""
    rec = recorded.Recording(Path(folder))
    names = ", ".join(Path(nb).stem for nb in rec.room_notebooks) or "none"
    own = f"; the students run {', '.join(rec.own)} themselves" if rec.own else ""
    return (f"room mode: the notebooks {names} show {rec.by}'s recorded runs ({folder}), nothing is "
            f"submitted for them; the labs run the students' own jobs{own}")
