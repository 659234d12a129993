"""Every notebook and lab of the course runs top to bottom, headless, with the quick parameter set,
against the local cluster, shows no error output (the same runner as `make course`), and stays
within the words a learner reads (hpclab/course/reading.py: BUDGET per notebook, LAB_BUDGET per
lab, SECTION_BUDGET per section, typed and generated prose together)."""

from __future__ import annotations

import pytest

from hpclab.course import reading
from hpclab.course import runner as course

BOOKS = course.course_notebooks()


@pytest.mark.cluster
@pytest.mark.slow
@pytest.mark.parametrize("notebook", BOOKS, ids=[str(b.relative_to(course.paths.repo())) for b in BOOKS])
def test_notebook_runs_clean(cluster, notebook, tmp_path, monkeypatch):
    """Does the notebook run in a fresh kernel without an error or anything on stderr?"""
    monkeypatch.setenv("HPCLAB_QUICK", "1")
    report = course.run_course([notebook], tmp_path / "report")
    [result] = report.notebooks
    assert result.ok, f"{result.path} failed:\n{result.error}"
    problems = course.error_outputs(tmp_path / "report" / result.executed)
    assert not problems, "\n".join(problems)
    # pages a learner reads: typed and generated prose within the course's budgets (course/reading.py)
    executed = tmp_path / "report" / result.executed
    too_long = reading.over_budget(notebook, reading.count_file(executed))
    assert not too_long, "\n".join(too_long)


@pytest.mark.parametrize("notebook", BOOKS, ids=[str(b.relative_to(course.paths.repo())) for b in BOOKS])
def test_notebook_is_committed_without_outputs(notebook):
    """Is the notebook free of outputs and execution counts, so every figure a student sees comes
    from a run on their machine and none from git?"""
    import nbformat

    nb = nbformat.read(notebook, as_version=4)
    dirty = [i for i, c in enumerate(nb.cells)
             if c.cell_type == "code" and (c.get("outputs") or c.get("execution_count"))]
    assert not dirty, f"{notebook.name}: cells {dirty} carry outputs; clear them before committing"


@pytest.mark.parametrize("notebook", BOOKS, ids=[str(b.relative_to(course.paths.repo())) for b in BOOKS])
def test_every_cell_has_an_id(notebook):
    """nbformat 4.5 asks every cell for an id (without one, nbformat warns on every run and will
    refuse the notebook in a later version): does each cell carry one, unique in its notebook?"""
    import json

    cells = json.loads(notebook.read_text())["cells"]
    ids = [c.get("id") for c in cells]
    assert None not in ids, f"{notebook.name}: cells {[k for k, i in enumerate(ids) if i is None]} have no id"
    assert len(set(ids)) == len(ids), f"{notebook.name}: two cells share an id"
