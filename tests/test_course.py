"""The headless course runner: executes notebooks, reports failures, never loses an earlier report."""

from __future__ import annotations

import json
import os

import nbformat
from nbformat.v4 import new_code_cell, new_notebook

from hpclab.course import runner as course


def _notebook(path, *sources):
    nb = new_notebook(cells=[new_code_cell(s) for s in sources])
    nbformat.write(nb, path)
    return path


def test_runner_reports_failures_and_keeps_earlier_reports(tmp_path, monkeypatch):
    """Does a failing notebook show up as a failure with its error, while a good one runs, and is the previous report kept?"""
    good = _notebook(tmp_path / "01-good.ipynb", "x = 6 * 7\nprint(x)")
    bad = _notebook(tmp_path / "02-bad.ipynb", "raise ValueError('the measured bandwidth is missing')")
    monkeypatch.setattr(course.paths, "repo", lambda: tmp_path)
    out = tmp_path / "report"
    first = course.run_course([good, bad], out)
    assert [n.ok for n in first.notebooks] == [True, False]
    assert "the measured bandwidth is missing" in first.notebooks[1].error
    executed = nbformat.read(out / first.notebooks[0].executed, as_version=4)
    assert executed.cells[0].outputs[0]["text"].strip() == "42"
    assert "02-bad" in (out / "index.html").read_text()

    second = course.run_course([good], out)
    assert len(second.notebooks) == 1
    history = list((out / "history").glob("*/report.json"))
    assert len(history) == 1 and len(json.loads(history[0].read_text())["notebooks"]) == 2


def test_the_kernels_run_headless_and_the_runner_leaves_the_environment_as_it_found_it(tmp_path, monkeypatch):
    """Do the notebooks' kernels see HPCLAB_HEADLESS and the run's fidelity ledger, and is this
    process's environment as before afterwards, even when a notebook fails? (A JupyterLab started
    later by the same process showed no progress bars while HPCLAB_HEADLESS stayed set.)"""
    from hpclab.course import fidelity

    monkeypatch.delenv("HPCLAB_HEADLESS", raising=False)
    monkeypatch.setenv(fidelity.LEDGER_ENV, str(tmp_path / "earlier-ledger"))
    seen = _notebook(tmp_path / "01-seen.ipynb",
                     f"import os\nprint(os.environ.get('HPCLAB_HEADLESS'), os.environ['{fidelity.LEDGER_ENV}'])")
    bad = _notebook(tmp_path / "02-bad.ipynb", "raise RuntimeError('stop')")
    monkeypatch.setattr(course.paths, "repo", lambda: tmp_path)
    out = tmp_path / "report"
    report = course.run_course([seen, bad], out)
    executed = nbformat.read(out / report.notebooks[0].executed, as_version=4)
    assert executed.cells[0].outputs[0]["text"].split() == ["1", str(out / "fidelity")]
    assert "HPCLAB_HEADLESS" not in os.environ
    assert os.environ[fidelity.LEDGER_ENV] == str(tmp_path / "earlier-ledger")

def test_params_switch_with_quick(monkeypatch):
    """Does HPCLAB_QUICK select the quick parameter set?"""
    monkeypatch.setenv("HPCLAB_QUICK", "1")
    assert course.params({"n": 1000}, {"n": 10}) == {"n": 10}
    monkeypatch.setenv("HPCLAB_QUICK", "0")
    assert course.params({"n": 1000}, {"n": 10}) == {"n": 1000}


def test_notebooks_are_found_by_number_or_name_and_unknown_ones_are_refused():
    """`hpclab course run 05` runs notebook 05, not 05b; a name that fits none says which exist."""
    import pytest

    from hpclab.core.errors import HpclabError
    from hpclab.course import runner

    assert [b.stem for b in runner.resolve_notebooks(["05", "05b-mapping-and-scale", "lab-imbalance"])] == \
        ["05-imbalance", "05b-mapping-and-scale", "lab-imbalance"]
    with pytest.raises(HpclabError, match="no course notebook '99'") as err:
        runner.resolve_notebooks(["99"])
    assert "00-getting-started" in err.value.hint
