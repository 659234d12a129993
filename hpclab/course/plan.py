"""A summer-school day from the last course run: the agenda, and the notes an instructor reads.

`hpclab course plan [--students N] [--days 1|2]` reads what `make course` last wrote in
build/course/ (report.json: each notebook's run time, jobs and words; the executed notebooks; the
fidelity table) and writes build/course/plan.md:

- the agenda: the notebooks and labs in course order (each lesson's notebooks, then its lab),
  grouped into sessions of SESSION_MINUTES; for each, the time it took this machine to run
  (measured, with the run's date), and the time a student needs (estimated: reading at
  READING_WPM words a minute, QUESTION_MINUTES per self-check question or graded task, plus the
  measured run time);
- whether a room of N students can run it on this machine within its slot: every student's run
  keeps the node's cores busy about as one run did alone, so the room needs N times the measured
  run time (computed, not guessed); where that does not fit, the students read the instructor's
  recorded runs instead (room mode) and say so;
- the instructor's notes per notebook: the verdicts this machine gave (the fidelity rows its
  lesson recorded), the effects it could not show with their reason, the numbers the notebook
  printed as its takeaways, and the self-check questions to ask the room.

Everything measured comes from the run and says so; every estimate is named an estimate.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path

from hpclab.core import paths
from hpclab.core.errors import HpclabError

READING_WPM = 150        # estimated: technical prose with tables, read with care
QUESTION_MINUTES = 3     # estimated: one self-check question, or one graded task of a lab
SESSION_MINUTES = 90     # a teaching block between two breaks
SESSIONS_PER_DAY = 4


@dataclass
class Item:
    """One notebook or lab of the agenda: its path, the lesson it belongs to, what the run
    measured (run_seconds, jobs, words) and how many questions it asks."""

    path: str
    lesson: str
    run_seconds: float
    jobs: int
    words: int
    questions: int
    is_lab: bool = False
    work_minutes: float | None = None  # a code lab's own estimate of the coding (CodeLab.minutes)

    @property
    def student_minutes(self) -> float:
        """Estimated minutes a student spends: reading, the questions, and waiting for its runs; a
        code lab's work is in its C file, not in its notebook's words, so its own estimate counts."""
        reading = self.words / READING_WPM + self.questions * QUESTION_MINUTES
        return max(reading, self.work_minutes or 0.0) + self.run_seconds / 60

    def room_minutes(self, students: int) -> float:
        """Minutes the machine needs for every student's runs (each run keeps the cores busy)."""
        return students * self.run_seconds / 60

    def fits(self, students: int) -> bool:
        return self.room_minutes(students) <= self.student_minutes


@dataclass
class Plan:
    started: str
    students: int
    days: int
    items: list[Item]
    sessions: list[list[Item]] = field(default_factory=list)


def course_dir() -> Path:
    return paths.build_dir() / "course"


def _questions(executed: dict, is_lab: bool) -> list[str]:
    """The self-check questions a notebook asked (as its headless run printed them), or a lab's
    graded tasks (its solution blocks)."""
    found = []
    for cell in executed.get("cells", []):
        if is_lab and cell.get("cell_type") == "code" and "### BEGIN SOLUTION" in "".join(cell.get("source", "")):
            found.append("graded task")
        for out in cell.get("outputs", []):
            page = out.get("data", {}).get("text/html", "")
            page = "".join(page) if isinstance(page, list) else page
            hit = re.search(r"<b>Self-check\.</b>\s*(.*?)<ul>", page, flags=re.S)
            if hit:
                found.append(_unescape(hit.group(1).strip()))
    return found


def _unescape(text: str) -> str:
    import html

    return html.unescape(text)


def _lesson_of(path: str) -> str:
    """The lesson a notebook or lab belongs to; a code lab (a lesson without notebooks of its own)
    belongs, for the agenda, to the lesson of the first notebook it goes with, so that it is done
    beside it (the deadlock lab beside the transports lesson), not after the whole course."""
    from hpclab.course import lessons

    lab_id = Path(path).stem
    if path.startswith("labs/") and lab_id in lessons.labs():
        lesson = lessons.lab(lab_id)
        if lesson.notebooks:
            return lesson.id
        path = lesson.goes_with[0]
    lesson = lessons.notebook_lesson(path)
    return lesson.id if lesson else "introduction"


def _work_minutes(path: str) -> float | None:
    """A code lab's own estimate of the time its coding takes (CodeLab.minutes); None otherwise."""
    from hpclab.course import lessons

    lab_id = Path(path).stem
    code = lessons.lab(lab_id).code if lab_id in lessons.code_labs() else None
    return float(code.minutes) if code else None


def read_run(folder: Path | None = None) -> tuple[dict, list[Item]]:
    """The last course run's report (report.json) and one Item per notebook and lab it ran, in
    the course's order. HpclabError when there is no run to read."""
    folder = folder or course_dir()
    report_file = folder / "report.json"
    if not report_file.is_file():
        raise HpclabError(f"no course run to plan from: {report_file} does not exist",
                          "run the course once first (make course), then hpclab course plan")
    report = json.loads(report_file.read_text())
    items = []
    for nb in report["notebooks"]:
        executed = folder / nb.get("executed", "")
        doc = json.loads(executed.read_text()) if nb.get("executed") and executed.is_file() else {}
        is_lab = nb["path"].startswith("labs/")
        words = nb.get("words")
        if words is None and doc:
            from hpclab.course import reading

            words = reading.count(doc).total
        items.append(Item(nb["path"], _lesson_of(nb["path"]), float(nb["seconds"]), int(nb.get("jobs", 0)),
                          int(words or 0), len(_questions(doc, is_lab)) if doc else 0, is_lab,
                          _work_minutes(nb["path"]) if is_lab else None))
    return report, _in_course_order(items)


def _in_course_order(items: list[Item]) -> list[Item]:
    """Each lesson's notebooks, then its labs right after them (a lab is done beside its notebook):
    the lesson's own lab first, then the code labs that go with it, in the order they came."""
    notebooks = [i for i in items if not i.is_lab]
    labs: dict[str, list[Item]] = {}
    for item in items:
        if item.is_lab:
            labs.setdefault(item.lesson, []).append(item)
    for group in labs.values():
        group.sort(key=lambda lab: lab.work_minutes is not None)  # stable: the lesson's own lab first
    out = []
    for i, item in enumerate(notebooks):
        out.append(item)
        last_of_lesson = i + 1 == len(notebooks) or notebooks[i + 1].lesson != item.lesson
        if last_of_lesson and item.lesson in labs:
            out.extend(labs.pop(item.lesson))
    return out + [lab for group in labs.values() for lab in group]


def make(students: int = 30, days: int = 1, folder: Path | None = None) -> Plan:
    """The agenda for `students` over `days` days from the last run (sessions filled in course
    order, SESSION_MINUTES each; what does not fit the days is listed after them)."""
    if students < 1 or days < 1:
        raise HpclabError(f"a plan needs at least one student and one day (got {students} and {days})",
                          "hpclab course plan --students 30 --days 1")
    report, items = read_run(folder)
    plan = Plan(report.get("started", "unknown"), students, days, items)
    session: list[Item] = []
    used = 0.0
    for item in items:
        if session and used + item.student_minutes > SESSION_MINUTES:
            plan.sessions.append(session)
            session, used = [], 0.0
        session.append(item)
        used += item.student_minutes
    if session:
        plan.sessions.append(session)
    return plan


def in_room_mode(item: Item, students: int) -> bool:
    """Is this notebook done in room mode by a room of `students`: it submits jobs, it is not a
    lab (a lab grades the student's own runs), and the room's runs would not fit its time?"""
    return item.jobs > 0 and not item.is_lab and not item.fits(students)


def room_mode_notebooks(students: int = 30, folder: Path | None = None) -> list[str]:
    """The notebooks (paths in the course, e.g. notebooks/02-transports.ipynb) that a room of
    `students` reads from the instructor's recording, from the last course run in `folder`
    (default build/course/). HpclabError when there is no run to read."""
    _, items = read_run(folder)
    return [i.path for i in items if in_room_mode(i, students)]


def agenda_markdown(plan: Plan) -> str:
    """The agenda as a Markdown page: sessions, items, times measured and estimated, room fit."""
    per_day = SESSIONS_PER_DAY
    lines = [f"# A course day for {plan.students} students, from the run of {plan.started}",
             "",
             f"Run times and jobs are **measured** (that run, on this machine); student times are **estimated** "
             f"(reading at {READING_WPM} words a minute, {QUESTION_MINUTES} minutes per question or graded task, "
             f"plus the run). Sessions of {SESSION_MINUTES} minutes, {per_day} a day. \"Room\" is the machine "
             f"time {plan.students} students' own runs need, one after another on this machine's cores; "
             "where it exceeds the student's time the notebook is done in room mode: students read the "
             "instructor's recorded runs.", ""]
    for k, session in enumerate(plan.sessions):
        day = k // per_day + 1
        if k % per_day == 0:
            lines += [f"## Day {day}" + (" (beyond the days asked for)" if day > plan.days else ""), ""]
        lines += [f"### Session {k % per_day + 1}: {sum(i.student_minutes for i in session):.0f} minutes (estimated)", "",
                  "| notebook or lab | student (est.) | run (measured) | jobs | words | room of "
                  f"{plan.students} | mode |", "|---|---|---|---|---|---|---|"]
        for i in session:
            mode = "room mode" if in_room_mode(i, plan.students) else "own runs"
            lines.append(f"| {i.path} | {i.student_minutes:.0f} min | {i.run_seconds:.0f} s | {i.jobs} | {i.words} | "
                         f"{i.room_minutes(plan.students):.0f} min | {mode} |")
        lines.append("")
    total = sum(i.student_minutes for i in plan.items)
    lines.append(f"In all {total:.0f} minutes of student time (estimated) in {len(plan.sessions)} sessions; "
                 f"{sum(i.jobs for i in plan.items)} Slurm jobs per student (measured).")
    return "\n".join(lines) + "\n"


def notes_markdown(folder: Path | None = None) -> str:
    """The instructor's notes from the last run: per notebook, its fidelity verdicts and the
    effects not shown with their reason, its printed takeaways, and its questions."""
    folder = folder or course_dir()
    report, items = read_run(folder)
    rows_file = folder / "fidelity.json"
    rows = json.loads(rows_file.read_text()) if rows_file.is_file() else []
    from hpclab.course import lessons

    claims_of = {lesson.id: set(lesson.claim_ids) for lesson in lessons.lessons()}
    shown: set[str] = set()
    out = [f"# Instructor notes, from the run of {report.get('started', 'unknown')}", "",
           "What this machine gave when the course last ran here: read it before the session instead of "
           "the notebooks. Verdicts are the fidelity table's; sentences are quoted from the notebooks' "
           "own output.", ""]
    for item in items:
        executed = folder / next((n.get("executed", "") for n in report["notebooks"] if n["path"] == item.path), "")
        doc = json.loads(executed.read_text()) if executed.is_file() else {}
        out += [f"## {item.path}", "",
                f"Ran in {item.run_seconds:.0f} s with {item.jobs} jobs; {item.words} words to read."]
        # a lesson's rows under the notebook that showed them (its fidelity table names the claim)
        printed = json.dumps([c.get("outputs", []) for c in doc.get("cells", [])])
        mine = [r for r in rows if r["id"] in claims_of.get(item.lesson, set()) and r["id"] not in shown
                and (r["id"] in printed or item is _last_of(items, item.lesson))]
        for r in mine:
            shown.add(r["id"])
            out.append(f"- **{r['id']}: {r['reproduced']}** ({r.get('evidence', 'measured')}). {r['why']}")
        takeaways = _takeaways(doc)
        if takeaways:
            out += ["", "What the runs said:"] + [f"- {t}" for t in takeaways[:4]]
        asked = _questions(doc, item.is_lab) if doc else []
        asked = [q for q in asked if q != "graded task"]
        if asked:
            out += ["", "Ask the room:"] + [f"- {q}" for q in asked[:3]]
        out.append("")
    return "\n".join(out)


def _last_of(items: list[Item], lesson: str) -> Item | None:
    return next((i for i in reversed(items) if i.lesson == lesson and not i.is_lab), None)


_NOT_A_TAKEAWAY = re.compile(r"job\(s\) done|^site:|\bpid\b|log:|[{}]|^\S+\s{2,}")


def _takeaways(doc: dict) -> list[str]:
    """The sentences a notebook printed (stdout lines and Markdown outputs that read as sentences:
    six words or more, ending a sentence; not tables, status lines or printed values)."""
    found = []
    for cell in doc.get("cells", []):
        for out in cell.get("outputs", []):
            text = ""
            if out.get("output_type") == "stream" and out.get("name") == "stdout":
                text = out.get("text", "")
            elif "text/markdown" in out.get("data", {}):
                text = out["data"]["text/markdown"]
            text = "".join(text) if isinstance(text, list) else text
            for line in text.splitlines():
                line = line.strip(" -*")
                if (len(line.split()) >= 6 and len(line) <= 400 and line[-1] in ".)" and line[0].isupper()
                        and not _NOT_A_TAKEAWAY.search(line)):
                    found.append(line)
    return found


def write(students: int = 30, days: int = 1, folder: Path | None = None) -> Path:
    """Write build/course/plan.md (the agenda) and build/course/instructor-notes.md; returns the
    agenda's path."""
    folder = folder or course_dir()
    plan = make(students, days, folder)
    page = folder / "plan.md"
    page.write_text(agenda_markdown(plan))
    (folder / "instructor-notes.md").write_text(notes_markdown(folder))
    return page
