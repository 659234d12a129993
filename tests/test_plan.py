"""The course day from the last run (hpclab/course/plan.py): times said as measured or estimated,
the room's fit computed from the run, the instructor's notes quoting the run. On a report built
here, no course is run."""

from __future__ import annotations

import json

import pytest

from hpclab.core.errors import HpclabError
from hpclab.course import plan


def _course(tmp_path, seconds: dict) -> None:
    """A course folder as the runner writes it: report.json, executed notebooks, fidelity.json."""
    (tmp_path / "notebooks").mkdir()
    books = []
    for path, secs in seconds.items():
        stem = path.replace("/", "__").removesuffix(".ipynb")
        cells = [{"cell_type": "markdown", "source": "word " * 300},
                 {"cell_type": "code", "source": "quiz.ask(...)", "outputs": [
                     {"output_type": "display_data", "data": {"text/html": "<div><b>Self-check.</b> Why is it slow?<ul>"
                                                                           "<li>a</li></ul></div>"}},
                     {"output_type": "stream", "name": "stdout",
                      "text": "Fix 1's rate is 14x higher than the pitfall's, decided on 4 + 4 runs.\n"}]}]
        if path.startswith("labs/"):
            cells.append({"cell_type": "code", "source": "### BEGIN SOLUTION\nx = 1\n### END SOLUTION", "outputs": []})
        (tmp_path / "notebooks" / f"{stem}.ipynb").write_text(json.dumps({"cells": cells}))
        books.append({"path": path, "ok": True, "seconds": secs, "jobs": 10, "error": "",
                      "executed": f"notebooks/{stem}.ipynb", "words": 320})
    (tmp_path / "report.json").write_text(json.dumps({"started": "2026-11-27T20:00:00+00:00", "notebooks": books}))
    (tmp_path / "fidelity.json").write_text(json.dumps([
        {"id": "hybrid-pitfall", "reproduced": "yes", "evidence": "measured", "why": "decided in cache",
         "here": "", "claim": "", "seed": "", "runs": []},
        {"id": "numa", "reproduced": "not shown", "evidence": "measured", "why": "one NUMA node here",
         "here": "", "claim": "", "seed": "", "runs": []}]))


def test_a_room_fits_only_where_its_runs_fit_the_students_time(tmp_path):
    """Does a notebook whose runs, times 30 students, exceed a student's time go to room mode, while
    a short one stays on the students' own runs, with the times said as measured and estimated?"""
    _course(tmp_path, {"notebooks/03-placement.ipynb": 60.0, "labs/lab-placement/lab-placement.ipynb": 5.0})
    p = plan.make(students=30, folder=tmp_path)
    by = {i.path: i for i in p.items}
    nb, lab = by["notebooks/03-placement.ipynb"], by["labs/lab-placement/lab-placement.ipynb"]
    assert [i.path for i in p.items] == [nb.path, lab.path]  # the lab right after its notebook
    assert nb.questions == 1 and lab.questions == 2  # its self-check; the lab's question and graded task
    assert nb.room_minutes(30) == pytest.approx(30.0) and not nb.fits(30) and lab.fits(30)
    page = plan.agenda_markdown(p)
    assert "**measured**" in page and "**estimated**" in page and "2026-11-27T20:00:00" in page
    assert "| notebooks/03-placement.ipynb |" in page and "room mode" in page and "own runs" in page
    assert plan.make(students=1, folder=tmp_path).items[0].fits(1)


def test_the_notes_quote_the_run_its_verdicts_and_its_questions(tmp_path):
    """Do the instructor's notes give each notebook's verdicts, the sentences its runs printed and
    the questions to ask the room?"""
    _course(tmp_path, {"notebooks/03-placement.ipynb": 60.0})
    notes = plan.notes_markdown(tmp_path)
    assert "**hybrid-pitfall: yes** (measured). decided in cache" in notes
    assert "**numa: not shown**" in notes and "one NUMA node here" in notes
    assert "Fix 1's rate is 14x higher than the pitfall's" in notes and "- Why is it slow?" in notes


def test_no_run_no_plan(tmp_path):
    """Without a course run, does the plan say what to run first instead of a traceback?"""
    with pytest.raises(HpclabError, match="run the course once first"):
        plan.make(folder=tmp_path)
    with pytest.raises(HpclabError, match="at least one student"):
        _course(tmp_path, {"notebooks/03-placement.ipynb": 1.0})
        plan.make(students=0, folder=tmp_path)


def test_a_code_lab_is_done_beside_the_notebook_it_goes_with(tmp_path):
    """Does the deadlock code lab come right after the transports lesson's notebook and lab (not
    after the whole course), with its student time its own estimate of the coding (CodeLab.minutes)
    rather than its notebook's few words?"""
    from hpclab.course import lessons

    _course(tmp_path, {"notebooks/02-transports.ipynb": 60.0, "notebooks/03-placement.ipynb": 20.0,
                       "labs/code-deadlock/code-deadlock.ipynb": 5.0,
                       "labs/lab-transports/lab-transports.ipynb": 5.0})
    items = plan.make(students=30, folder=tmp_path).items
    assert [i.path for i in items] == ["notebooks/02-transports.ipynb", "labs/lab-transports/lab-transports.ipynb",
                                       "labs/code-deadlock/code-deadlock.ipynb", "notebooks/03-placement.ipynb"]
    minutes = lessons.get("deadlock").code.minutes
    assert items[2].student_minutes == pytest.approx(minutes + 5.0 / 60)
    assert items[1].work_minutes is None
