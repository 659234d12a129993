"""lab-pop: is a student's POP table graded on their own traced runs (full marks for the solution,
nothing for the unchanged release, fewer points for a wrong table)?"""

from __future__ import annotations

import copy
import zipfile

import nbformat
import pytest

from hpclab.grading import demo, labdata, pipeline, references

LAB = "lab-pop"


@pytest.fixture(scope="module")
def pop_runs(cluster, tmp_path_factory):
    """{np1, np2: run folder}: the lab's two traced runs, made as its Measure cell makes them
    (smaller, so the test is quick)."""
    from hpclab.jobs import experiment

    specs = [{"experiment": LAB, "kernel": "poisson", "ntasks": 1, "label": "np1", "trace": True,
              "args": {"n": 200, "grid": "1x1", "iters": 60}},
             {"experiment": LAB, "kernel": "poisson", "ntasks": 2, "label": "np2", "trace": True,
              "args": {"n": 200, "grid": "2x1", "heavy": 1.5, "iters": 60}}]
    done = experiment.run(specs, progress=False, timeout=600, root=tmp_path_factory.mktemp("runs"))
    return {"np1": done[0].path, "np2": done[1].path}


def _wrong(nb):
    """The answered notebook with the load balance inverted (max over mean): a wrong table."""
    bad = copy.deepcopy(nb)
    for cell in bad.cells:
        if cell.metadata.get("nbgrader", {}).get("grade_id") == "balance":
            cell.source = cell.source.replace("comp2.mean() / comp2.max()", "comp2.max() / comp2.mean()")
    return bad


@pytest.mark.cluster
def test_lab_pop_grades_the_students_own_table(pop_runs, tmp_path):
    course = pipeline.init_course(tmp_path / "course", [LAB])
    pipeline.release(course, LAB)
    src = nbformat.read(course / "source" / LAB / f"{LAB}.ipynb", as_version=4)
    rel = nbformat.read(course / "release" / LAB / f"{LAB}.ipynb", as_version=4)
    downloads = tmp_path / "downloads"
    downloads.mkdir()
    full = demo.answered(rel, src)
    for student, nb in (("full", full), ("unchanged", rel), ("wrong", _wrong(full))):
        folder = tmp_path / student
        folder.mkdir()
        nbformat.write(nb, folder / f"{LAB}.ipynb")
        labdata.pack(pop_runs, folder)
        with zipfile.ZipFile(downloads / f"{student}.zip", "w") as z:
            for p in sorted(folder.rglob("*")):
                if p.is_file():
                    z.write(p, p.relative_to(folder))
    assert sorted(pipeline.collect(course, LAB, downloads)) == ["full", "unchanged", "wrong"]
    pipeline.autograde(course, LAB, timeout=120)
    cells = pipeline.cell_scores(course, LAB)
    total = {s: sum(score for score, _ in c.values()) for s, c in cells.items()}
    most = sum(mx for _, mx in cells["full"].values())
    assert all(score == mx > 0 for score, mx in cells["full"].values()), cells["full"]
    assert total["unchanged"] == 0
    assert total["wrong"] < most
    assert cells["wrong"]["test-balance"][0] == 0
    # The inverted balance (max over mean, at least 1) carries into the parallel and the global
    # efficiency, so those cells fail too. The factor to look at first is then the smallest of
    # the other three: its cell gets its points exactly when the reference accepts that factor
    # (on these runs the load balance may or may not be the smallest: a property, not a number).
    ref = references.reference(LAB, tmp_path / "full")
    others = {k: v for k, v in ref["factors"].items() if k != "load balance"}
    picked = min(others, key=others.get)
    score, most_look = cells["wrong"]["test-look"]
    assert (score == most_look) == (picked in ref["look_first"]), (picked, ref["look_first"], ref["factors"])
    assert total["wrong"] == score


@pytest.mark.cluster
def test_reference_table_is_pops_table_of_the_packed_runs(pop_runs, tmp_path):
    from hpclab.trace import load, pop, split

    labdata.pack(pop_runs, tmp_path)
    ref = references.reference(LAB, tmp_path)
    splits = {}
    for role in ("np1", "np2"):
        t = load.load_run(pop_runs[role], cache=False)
        splits[t.nranks] = split.split(t)
    table = pop.pop_table(splits)
    assert ref["load_balance"] == pytest.approx(table.loc["load balance", 2])
    assert ref["global_efficiency"] == pytest.approx(table.loc["global efficiency", 2])
    assert ref["look_first"][0] == min(ref["factors"], key=ref["factors"].get)
    # the heavy first rank shows: its load balance is below one
    assert ref["load_balance"] < 1
