"""Grading: packed run data and their provenance checks, the reference answers, the instructor
commands, and a simulated class graded for real with nbgrader (release, zip collect, autograde
in the sandboxed kernel, feedback, export).

The run data are real: pingpong jobs submitted to the local cluster through hpclab.jobs.experiment
(once per session, into a temporary runs folder).
"""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest

from hpclab.analysis import fits
from hpclab.course import quiz
from hpclab.course.lessons import collectives as collectives_lesson
from hpclab.course.lessons import placement as placement_lesson
from hpclab.course.lessons import scaling as scaling_lesson
from hpclab.grading import __main__ as command, demo, labdata, pipeline, references
from hpclab.core.errors import HpclabError


@pytest.fixture(scope="module")
def real_runs(cluster, tmp_path_factory):
    """{role: run folder} of three real pingpong runs (shm, tcp, unlabelled)."""
    return demo.demo_runs(tmp_path_factory.mktemp("runs"))


@pytest.fixture
def lab(real_runs, tmp_path):
    """A lab folder with the real runs packed into data/."""
    labdata.pack(real_runs, tmp_path)
    return tmp_path


@pytest.mark.cluster
def test_packed_real_runs_pass_the_provenance_check(lab):
    """Do unmodified runs from the cluster pass every provenance check, under their roles?"""
    assert set(labdata.verify(lab)) == {"shm", "tcp", "unlabelled"}
    assert labdata.table("shm", lab)["transport"].iloc[0] == "ob1/vader"
    assert labdata.table("tcp", lab)["transport"].iloc[0] == "ob1/tcp"


@pytest.mark.cluster
def test_unlabelled_timings_do_not_name_the_transport(lab):
    """Does the table the lab shows for the unlabelled run keep its timings but hide the columns
    that would give the answer away?"""
    full, blind = labdata.table("unlabelled", lab), labdata.timings("unlabelled", lab)
    assert not set(labdata.TRANSPORT_COLUMNS) & set(blind.columns)
    assert blind["t_usec"].tolist() == full["t_usec"].tolist()
    assert "bytes" in blind.columns


@pytest.mark.cluster
@pytest.mark.parametrize("damage, expect", [
    ("typed", "result.json changed after packing"),
    ("no-sacct", "provenance/sacct.json is missing"),
    ("other-job", "no Slurm accounting record"),
])
def test_altered_run_data_are_refused(lab, damage, expect):
    """Are numbers typed into result.json, a missing Slurm record, or a record of another job
    each reported by name, instead of being graded?"""
    folder = labdata.run_dir("tcp", lab)
    if damage == "typed":
        doc = json.loads((folder / "result.json").read_text())
        doc["results"]["rows"][-1]["t_usec"] /= 2
        (folder / "result.json").write_text(json.dumps(doc))
    elif damage == "no-sacct":
        (folder / "provenance" / "sacct.json").unlink()
    else:
        status = json.loads((folder / "status.json").read_text())
        status["job_id"] = "999999"
        (folder / "status.json").write_text(json.dumps(status))
    with pytest.raises(HpclabError, match=expect):
        labdata.verify(lab)


@pytest.mark.cluster
def test_packing_never_overwrites(lab, real_runs):
    """Does packing a role a second time fail instead of replacing the first run?"""
    before = (lab / "data" / labdata.MANIFEST).read_text()
    with pytest.raises(HpclabError, match="already packed"):
        labdata.pack({"shm": real_runs["tcp"]}, lab)
    assert (lab / "data" / labdata.MANIFEST).read_text() == before


@pytest.mark.cluster
def test_reference_is_the_package_fit_of_the_packed_runs(lab):
    """Are the expected answers exactly hpclab.analysis.fits' Hockney fit of the packed runs over the
    sizes notebook 02 fits (from 8 KiB, above the eager limit; not all sizes), and the unlabelled
    transport the one Open MPI reported?"""
    from hpclab.course.lessons import transports as lesson

    ref = references.reference("lab-transports", lab)
    assert lesson.FIT_FROM == 8 << 10
    for role in ("shm", "tcp"):
        table = labdata.table(role, lab)
        fit = fits.hockney_fit(table["bytes"], table["t_usec"], size_range=(lesson.FIT_FROM, table["bytes"].max()))
        assert fit.bytes.min() == lesson.FIT_FROM   # the small, eager messages are left out
        assert ref["latency_us"][role] == pytest.approx(fit.latency_us, rel=1e-12)
        assert ref["bandwidth_mb_s"][role] == pytest.approx(fit.bandwidth_mb_s, rel=1e-12)
    label = labdata.table("unlabelled", lab)["transport"].iloc[0]
    assert ref["label"][ref["unlabelled_transport"][0]] == label


def test_interpretation_accepts_every_option_too_close_to_call():
    """Does an interpretation question accept the best option, plus exactly those within the two
    options' spreads of it, whether the best is the largest or the smallest value?"""
    assert quiz.accepted({"a": 10.0, "b": 5.0}, {"a": 1.0, "b": 1.0}) == ["a"]
    assert quiz.accepted({"a": 10.0, "b": 8.0}, {"a": 1.0, "b": 1.0}) == ["a", "b"]
    assert quiz.accepted({"a": 10.0, "b": 8.0}, {"a": 1.0, "b": 0.9}) == ["a"]
    assert quiz.accepted({"a": 10.0, "b": 8.0}, {}, best=min) == ["b"]
    three = {"load imbalance": 4.0, "dependency": 1.0, "transfer": 4.5}
    assert quiz.accepted(three, {k: 0.3 for k in three}) == ["transfer", "load imbalance"]


@pytest.mark.cluster
def test_the_checks_own_reference_is_the_fresh_processes(lab, monkeypatch):
    """Does the grader's check, computing the answers in its own process (COMPUTE_HERE), give
    exactly what the fresh process gives on the same packed runs?"""
    monkeypatch.setattr(references, "REFERENCE_CACHE", None)
    apart = references.reference("lab-transports", lab)
    monkeypatch.setattr(references, "COMPUTE_HERE", True)
    assert references.reference("lab-transports", lab) == apart


@pytest.mark.cluster
def test_large_message_choice_follows_the_fitted_models(lab):
    """Is lab-transports' interpretation answer the transport whose Hockney fit predicts the
    shorter time for 1 MiB, the other one accepted only when the predictions are within the
    fits' typical errors?"""
    import numpy as np

    from hpclab.course.lessons import transports as lesson

    ref = references.reference("lab-transports", lab)
    t, err = {}, {}
    for role in ("shm", "tcp"):
        table = labdata.table(role, lab)
        fit = fits.hockney_fit(table["bytes"], table["t_usec"], size_range=(lesson.FIT_FROM, table["bytes"].max()))
        t[role] = float(fit.predict(2**20))
        err[role] = float(np.median(np.abs(fit.relative_residuals))) * t[role]
        assert ref["large_message_us"][role] == pytest.approx(t[role], rel=1e-12)
    assert ref["large_message_transport"][0] == min(t, key=t.get)
    close = abs(t["shm"] - t["tcp"]) <= err["shm"] + err["tcp"]
    assert len(ref["large_message_transport"]) == (2 if close else 1)


def test_reference_without_data_is_a_clear_error(tmp_path):
    """Does a lab folder without packed runs give an HpclabError that says so?"""
    with pytest.raises(HpclabError, match="reference analysis of lab-transports failed"):
        references.reference("lab-transports", tmp_path)


def test_reference_entry_points_answer_in_one_line(tmp_path):
    """Do the fresh-process reference entry (`python -m hpclab.grading.references LAB DIR`) and the
    pipeline's `reference` step answer an unknown lab and a folder without data with one ERROR
    line and exit code 2, and is the lab named in reference()'s own error?"""
    import subprocess
    import sys

    for argv in (["-m", "hpclab.grading.references", "no-such-lab", str(tmp_path)],
                 ["-m", "hpclab.grading.references", "lab-transports", str(tmp_path)],
                 ["-m", "hpclab.grading", "reference", "no-such-lab", str(tmp_path)]):
        proc = subprocess.run([sys.executable, "-I", *argv], capture_output=True, text=True, timeout=120)
        err = proc.stderr.strip().splitlines()
        assert proc.returncode == 2 and proc.stdout == "", (argv, proc.stdout)
        assert len(err) == 1 and err[0].startswith("ERROR: "), (argv, err)
    with pytest.raises(HpclabError, match="no reference analysis for 'no-such-lab'"):
        references.reference("no-such-lab", tmp_path)


def test_course_kernel_starts_the_grading_entry(tmp_path):
    """Does a new course's kernel spec start `python -m hpclab.grading kernel`, the entry that
    puts the kernel in the sandbox?"""
    import sys

    course = pipeline.init_course(tmp_path / "class", labs=("lab-transports",))
    spec = json.loads((course / "jupyter" / "kernels" / pipeline.KERNEL_NAME / "kernel.json").read_text())
    assert spec["argv"] == [sys.executable, "-m", "hpclab.grading", "kernel", "{connection_file}"]


def test_nothing_is_packed_while_nbgrader_executes(tmp_path, monkeypatch):
    """With NBGRADER_EXECUTION set, is packing (like submitting) refused?"""
    monkeypatch.setenv("NBGRADER_EXECUTION", "autograde")
    with pytest.raises(HpclabError, match="nbgrader"):
        labdata.pack({"shm": tmp_path}, tmp_path)


def test_steps_on_a_missing_course_end_in_hpclabs_error_format(tmp_path, capsys):
    """Do the instructor commands answer a wrong folder as every hpclab command does (`hpclab:
    what`, `  what to do: hint`, no traceback) with exit code 2?"""
    for argv in (["release", str(tmp_path / "nope"), "lab-transports"],
                 ["collect", str(tmp_path), "lab-transports", str(tmp_path)],
                 ["init", str(tmp_path / "c"), "no-such-lab"]):
        assert command.main(argv) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 2 and err[0].startswith("hpclab: ") and err[1].startswith("  what to do: ")


def test_new_course_has_an_exchange_nbgrader_accepts(tmp_path, monkeypatch):
    """Is the default exchange made next to a new course folder, so that nbgrader's own exchange
    commands (and the formgrader's release and collect) work without a system-wide folder?"""
    monkeypatch.delenv("NBGRADER_EXCHANGE", raising=False)
    course = pipeline.init_course(tmp_path / "class", labs=("lab-transports",))
    assert (tmp_path / "nbgrader-exchange").is_dir()
    pipeline._sh(course, "list")  # raises when nbgrader finds no usable exchange


def test_a_release_warms_code_labs_under_the_libraries_the_course_names(tmp_path):
    """Does release read the libraries a course grades code labs under from its own
    nbgrader_config.py: every installed one by default, the named ones when it names some?"""
    course = pipeline.init_course(tmp_path / "class", labs=("lab-transports",))
    assert pipeline._graded_libraries(course) is None
    with open(course / "nbgrader_config.py", "a") as fh:
        fh.write('c.BuildAndRun.libraries = ["openmpi-system"]\n')
    assert pipeline._graded_libraries(course) == ["openmpi-system"]
    (course / "nbgrader_config.py").unlink()
    assert pipeline._graded_libraries(course) is None


def test_shared_exchange_is_left_to_its_administrator(tmp_path, monkeypatch):
    """With NBGRADER_EXCHANGE set (a JupyterHub's shared folder), is nothing made next to the course?"""
    monkeypatch.setenv("NBGRADER_EXCHANGE", str(tmp_path / "shared"))
    pipeline.init_course(tmp_path / "class", labs=("lab-transports",))
    assert not (tmp_path / "nbgrader-exchange").exists() and not (tmp_path / "shared").exists()


def test_the_guard_sees_a_labs_sources_change_but_not_the_runs_its_notebook_packs(tmp_path):
    """The simulated class checks that autograde left every lab's sources as they were, while a
    lab notebook run meanwhile (make test runs two tests at a time) packs its runs into
    labs/<lab>/data/: is an edit of a source, of a file at labs/ top level or a new file seen,
    and a new run in data/ not?"""
    labs = tmp_path / "labs"
    (labs / "lab-x" / "data").mkdir(parents=True)
    (labs / "lab-x" / "lab-x.ipynb").write_text("{}")
    (labs / "README.md").write_text("labs")
    guarded = {"labs": labs, "lab:lab-x": labs / "lab-x"}
    before = demo._snapshot(guarded)
    (labs / "lab-x" / "data" / "runs.json").write_text("[]")
    assert demo._snapshot(guarded) == before
    for edit in (lambda: (labs / "lab-x" / "lab-x.ipynb").write_text("{ }"),
                 lambda: (labs / "README.md").write_text("changed"),
                 lambda: (labs / "lab-x" / "SNOOP").write_text("")):
        edit()
        assert demo._snapshot(guarded) != before
        before = demo._snapshot(guarded)


@pytest.mark.cluster
def test_simulated_class_gets_the_expected_grades(real_runs, tmp_path):
    """Graded for real by nbgrader in one run, does every simulated student, the hostile wing
    included, get exactly the expected score, losing points on exactly the expected cells, with
    feedback for each, the grades in the CSV, tampered cells named; is every escape attempt
    blocked (no Slurm job in sacct over the window, the sleeper outside alive, nothing written),
    and are the course tree, the runs and the cluster's configuration byte-identical? Graded two
    at a time (each submission its own nbgrader in its own sandbox), and the expected cells are
    exact, so this is also the proof that parallel grading gives what one grader would."""
    root = next(iter(real_runs.values())).parent.parent
    # 20 s a cell: the memory bomb must meet the sandbox's memory limit before the time limit, and
    # beside make test's other workers it once took more than 10 s (2026-12-07)
    result = demo.run_demo(tmp_path / "course", timeout=20, runs_root=root, jobs=2)
    print("\n".join(result["lines"]))
    assert result["changed"] == [] and result["untouched"]
    assert result["jobs"] == []
    assert set(result["hostile"]) == set(demo.HOSTILE_KINDS)
    assert all(v == "" for v in result["hostile"].values()), result["hostile"]
    for student, lost in demo.EXPECTED_LOST.items():
        cells = result["cells"][student]
        assert {g for g, (score, mx) in cells.items() if score < mx} == lost, student
    assert result["ok"]
    with open(result["csv"], newline="") as fh:
        rows = {r["student_id"]: float(r["score"]) for r in csv.DictReader(fh)}
    assert rows == {s: float(v) for s, v in result["expected"].items()}
    assert len(result["feedback"]) == len(demo.EXPECTED_LOST)
    assert result["flags"] == {"tamper": {"test-latency": "edited", "test-unknown": "deleted"}}
    # the hostile notebook could neither read the hidden tests nor write outside its folder's
    # private copy (thrown away: no SNOOP file anywhere in the course)
    snoop = (tmp_path / "course" / "autograded" / "snoop" / "lab-transports" /
             "lab-transports.ipynb").read_text()
    assert "read: [] written: ['SNOOP']" in snoop
    assert not list((tmp_path / "course").rglob("SNOOP"))


@pytest.fixture(scope="module")
def every_lab_course(tmp_path_factory):
    """One nbgrader course holding every lab (made once: nbgrader's init costs seconds a lab)."""
    return pipeline.init_course(tmp_path_factory.mktemp("every-lab") / "course", pipeline.LABS)


@pytest.mark.parametrize("lab", pipeline.LABS)
def test_release_removes_solutions_and_hidden_tests(lab, every_lab_course):
    """Does nbgrader's release of each lab keep the visible tests and stubs but no solution and
    no hidden test, and does every graded cell carry points and open with a docstring?"""
    import nbformat

    course = every_lab_course
    released = pipeline.release(course, lab) / f"{lab}.ipynb"
    text = released.read_text()
    assert "BEGIN SOLUTION" not in text and "HIDDEN TESTS" not in text
    assert "references.reference" not in text     # the reference call lives in hidden tests only
    source = nbformat.read(course / "source" / lab / f"{lab}.ipynb", as_version=4)
    # a Python answer becomes nbgrader's stub; a code lab whose answers are all in its C file has none
    if any("BEGIN SOLUTION" in c.source for c in source.cells if c.cell_type == "code"):
        assert "raise NotImplementedError()" in text
    graded = [c for c in source.cells if c.metadata.get("nbgrader", {}).get("grade")]
    assert graded and all(c.metadata["nbgrader"]["points"] > 0 for c in graded)
    assert all(c.source.lstrip().startswith('"""') for c in graded)
    assert all(not c.outputs for c in source.cells if c.cell_type == "code")


@pytest.fixture(scope="module")
def poisson_runs(cluster, tmp_path_factory):
    """{np1-1 ... np2-4: run folder}: real Poisson runs on one and two ranks, LAB_ROUNDS each,
    alternating in one experiment (as the lab's Measure cell makes them)."""
    import subprocess

    from hpclab.jobs import experiment

    # distinct names: sinfo -N lists a node once per partition (a classroom adds 'servers')
    nodes = len(set(subprocess.run(["sinfo", "-h", "-N", "-o", "%N"], capture_output=True,
                                   text=True).stdout.split()))
    specs = [{"experiment": "lab-scaling", "kernel": "poisson", "ntasks": p, "label": f"np{p}",
              "nodes": 1 if p == 1 else max(1, min(nodes, 2)), "repetitions": scaling_lesson.LAB_ROUNDS,
              "args": {"n": 256, "grid": f"{p}x1", "iters": 100}} for p in (1, 2)]
    done = experiment.run(specs, progress=False, timeout=600, root=tmp_path_factory.mktemp("runs"))
    out = {f"{r.spec.label}-{r.repetition}": r.path for r in done}
    assert set(out) == {role for roles in scaling_lesson.LAB_ROLES.values() for role in roles}
    return out


@pytest.mark.cluster
def test_scaling_reference_decides_the_loss_before_naming_a_kind(poisson_runs, tmp_path):
    """Is the speedup the ratio of the median solve times, and 'where to look first' 'neither'
    unless the statistics decide that two ranks spent more rank-seconds than one (then the kind
    with more extra seconds, both within the timers' noise)?"""
    import statistics

    from hpclab.analysis import phrases

    labdata.pack(poisson_runs, tmp_path)
    ref = references.reference("lab-scaling", tmp_path)
    t = {k: [labdata.table(r, tmp_path).attrs["summary"]["wall_time"] for r in roles]
         for k, roles in scaling_lesson.LAB_ROLES.items()}
    assert ref["speedup"] == pytest.approx(statistics.median(t["np1"]) / statistics.median(t["np2"]))
    lost = phrases.compare(ref["rank_seconds"]["np2"], ref["rank_seconds"]["np1"], lower_is_better=True)
    if lost.outcome == "different" and lost.winner == "B":
        assert set(ref["look_first"]) <= {"compute", "MPI"}
        assert ref["look_first"][0] == max(ref["extra_seconds"], key=ref["extra_seconds"].get)
    else:
        assert ref["look_first"] == ["neither"]


def _grade_full_and_unchanged(lab, runs, tmp_path):
    """Release `lab`, submit its full solution and its unchanged release (both with `runs`
    packed) as zips, collect, autograde, export. Returns (cell scores, CSV rows)."""
    import zipfile

    import nbformat

    course = pipeline.init_course(tmp_path / "course", [lab])
    pipeline.release(course, lab)
    src = nbformat.read(course / "source" / lab / f"{lab}.ipynb", as_version=4)
    rel = nbformat.read(course / "release" / lab / f"{lab}.ipynb", as_version=4)
    downloads = tmp_path / "downloads"
    downloads.mkdir()
    for student, nb in (("full", demo.answered(rel, src)), ("unchanged", rel)):
        folder = tmp_path / student
        folder.mkdir()
        nbformat.write(nb, folder / f"{lab}.ipynb")
        labdata.pack(runs, folder)
        with zipfile.ZipFile(downloads / f"{student}.zip", "w") as z:
            for p in sorted(folder.rglob("*")):
                if p.is_file():
                    z.write(p, p.relative_to(folder))
    assert pipeline.collect(course, lab, downloads) == ["full", "unchanged"]
    pipeline.autograde(course, lab, timeout=60)
    return pipeline.cell_scores(course, lab), pipeline.export(course, tmp_path / "grades.csv")


@pytest.fixture(scope="module")
def traced_run(cluster, tmp_path_factory):
    """{traced: run folder, pingpong: run folder}: a real traced two-rank Poisson run, the first
    rank twice as heavy, and the ping-pong of the network model (as lab-imbalance's Measure cell)."""
    from hpclab.jobs import experiment

    traced = {"experiment": "lab-imbalance", "kernel": "poisson", "ntasks": 2, "label": "traced",
              "trace": True, "args": {"n": 300, "grid": "2x1", "heavy": 2, "iters": 100}}
    pingpong = {"experiment": "lab-imbalance", "kernel": "pingpong", "ntasks": 2, "label": "pingpong",
                "args": {"max_bytes": 65536}}
    done = experiment.run([traced, pingpong], progress=False, timeout=600, root=tmp_path_factory.mktemp("runs"))
    return {"traced": done[0].path, "pingpong": done[1].path}


@pytest.fixture(scope="module")
def collective_runs(cluster, tmp_path_factory):
    """{role: run folder}: lab-collectives' two real runs on the two virtual nodes (as its Measure
    cell makes them), at 16 KiB so that the jobs stay short."""
    from hpclab.jobs import experiment
    from hpclab.site import multinode

    import tempfile

    from hpclab.core import paths

    lesson = collectives_lesson
    # under build/: every virtual node sees it, none sees the host's /tmp
    (paths.build_dir() / "test-grading").mkdir(parents=True, exist_ok=True)
    root = Path(tempfile.mkdtemp(prefix="collectives-", dir=paths.build_dir() / "test-grading"))
    with multinode.virtual_nodes(lesson.NODES, link=lesson.LINK, cpus_per_node=lesson.CPUS_PER_NODE):
        runs = experiment.run(lesson.lab_specs(16 << 10), progress=False, timeout=600, root=root)
    return {role: folder.path for role, folder in lesson.lab_roles(runs).items()}


@pytest.mark.cluster
def test_collectives_reference_reads_the_packed_rounds(collective_runs, tmp_path):
    """Does lab-collectives' reference take the packed Allreduce's four settings, paired rounds of
    one size, and price the three forced ones with the link fitted from the packed ping-pong?"""
    labdata.pack(collective_runs, tmp_path)
    ref = references.reference("lab-collectives", tmp_path)
    assert ref["bytes"] == 16 << 10
    assert set(ref["median_us"]) == {"default", *collectives_lesson.FORCED["allreduce"]}
    assert set(ref["fastest"]) <= set(collectives_lesson.FORCED["allreduce"]) and ref["fastest"]
    assert 0 < ref["alpha_us"] and 0 < ref["beta_us_per_byte"]
    assert set(ref["model_pick"]) <= set(ref["predicted_us"]) and ref["model_agrees"]


@pytest.mark.cluster
@pytest.mark.parametrize("lab, runs", [("lab-scaling", "poisson_runs"), ("lab-imbalance", "traced_run"),
                                       ("lab-collectives", "collective_runs")])
def test_lab_full_solution_gets_full_marks(lab, runs, request, tmp_path):
    """Graded by nbgrader on real runs, does each lab's solution get every point, the unchanged
    release none, and the CSV say so?"""
    cells, rows = _grade_full_and_unchanged(lab, request.getfixturevalue(runs), tmp_path)
    assert all(score == mx > 0 for score, mx in cells["full"].values()), cells["full"]
    assert all(score == 0 for score, _ in cells["unchanged"].values())
    assert {r["student_id"]: float(r["score"]) for r in rows} == {
        "full": sum(mx for _, mx in cells["full"].values()), "unchanged": 0.0}


@pytest.fixture(scope="module")
def placement_runs(cluster, tmp_path_factory):
    """{role: run folder}: the real STREAM runs lab-placement packs (as its cells make them): the
    srun and mpirun placements of its solution once each, then (c)'s srun bound and unbound runs
    and the pitfall and fix-1 cases, LAB_ROUNDS rounds each, every pair of cases in one experiment."""
    from hpclab.jobs import experiment

    root = tmp_path_factory.mktemp("runs")
    stream = {"experiment": "lab-placement", "kernel": "stream", "ntasks": 2,
              "omp": {"num_threads": 1}, "args": {"size": 100_000, "reps": 10}}
    rounds = placement_lesson.LAB_ROUNDS
    placed = experiment.run([dict(stream, label="distinct", launcher="srun", binding={"cpu_bind": "cores"}),
                             dict(stream, label="unbound", launcher="mpirun",
                                  binding={"map_by": "core", "bind_to": "none"})],
                            progress=False, timeout=600, root=root)
    out = {run.spec.label: run.path for run in placed}
    compared = experiment.run([dict(stream, label="bound", launcher="srun", binding={"cpu_bind": "cores"},
                                    repetitions=rounds),
                               dict(stream, label="unbound", launcher="srun", binding={"cpu_bind": "none"},
                                    repetitions=rounds)], progress=False, timeout=600, root=root)
    out.update({f"{run.spec.label}-{run.repetition}": run.path for run in compared})
    cases = placement_lesson.PITFALL_CASES[:2]
    name = {cases[0].label: "pitfall", cases[1].label: "fix"}
    pitfall = experiment.run(placement_lesson.specs(cases, size=100_000, reps=10, repetitions=rounds,
                                                    experiment="lab-placement"), progress=False, timeout=600, root=root)
    out.update({f"{name[run.spec.label]}-{run.repetition}": run.path for run in pitfall})
    assert {*placement_lesson.COMPARED["bound"], *placement_lesson.ROLES["fix"]} <= set(out)
    return out


@pytest.mark.cluster
def test_placement_reference_grades_only_the_packed_sections(placement_runs, tmp_path):
    """With only the srun placement packed, does the reference give its binding and allowed
    sets (one CPU per rank, as srun --cpu-bind=cores made them) and leave (c) and the pitfall out?"""
    labdata.pack({"distinct": placement_runs["distinct"]}, tmp_path)
    ref = references.reference("lab-placement", tmp_path)
    assert ref["binding"] == {"distinct": {"cpu_bind": "cores"}}
    assert all(len(s) == 1 for s in ref["allowed"]["distinct"].values())
    assert "lost" not in ref and "job_mb_s" not in ref and "faster_placement" not in ref


@pytest.mark.cluster
def test_placement_reference_answers_c_with_the_statistics_on_one_launcher(placement_runs, tmp_path):
    """With (c)'s runs packed, is its answer the course's statistics' decision on them (the winner
    only when the ratio's CI excludes 1, else the outcome), do the compared runs differ in the
    binding only (one launcher), and do one run a side leave it 'undecided'?"""
    from hpclab.analysis import phrases

    roles = (*placement_lesson.COMPARED["bound"], *placement_lesson.COMPARED["unbound"])
    labdata.pack({r: placement_runs[r] for r in roles}, tmp_path)
    ref = references.reference("lab-placement", tmp_path)
    rounds = placement_lesson.LAB_ROUNDS
    assert len(ref["triad_mb_s"]["bound"]) == len(ref["triad_mb_s"]["unbound"]) == rounds
    assert ref["compared_launchers"] == ["srun"]
    cmp = phrases.compare(ref["triad_mb_s"]["bound"], ref["triad_mb_s"]["unbound"], lower_is_better=False,
                          a_name="bound", b_name="unbound")
    assert cmp.enough_runs
    assert ref["faster_placement"] == [cmp.winner if cmp.outcome == "different" else cmp.outcome]
    assert ref["faster_placement"][0] in placement_lesson.BINDING_ANSWERS
    one = tmp_path / "one"
    one.mkdir()
    labdata.pack({r: placement_runs[r] for r in ("bound-1", "unbound-1")}, one)
    assert references.reference("lab-placement", one)["faster_placement"] == ["undecided"]


@pytest.mark.cluster
def test_placement_lab_full_solution_gets_full_marks(placement_runs, tmp_path):
    """Graded by nbgrader on real STREAM runs, does the lab-placement solution get every point,
    the unchanged release none, and the CSV say so?"""
    cells, rows = _grade_full_and_unchanged("lab-placement", placement_runs, tmp_path)
    assert all(score == mx > 0 for score, mx in cells["full"].values()), cells["full"]
    assert sum(mx for _, mx in cells["full"].values()) == 8
    assert all(score == 0 for score, _ in cells["unchanged"].values())
    assert {r["student_id"]: float(r["score"]) for r in rows} == {"full": 8.0, "unchanged": 0.0}


@pytest.mark.cluster
def test_unconfined_flag_grades_the_instructors_own_notebook(real_runs, tmp_path, capsys):
    """With --unconfined (no sandbox: the instructor's own test notebooks only), does autograde
    still grade the solution fully, with the checks outside the kernel?"""
    import zipfile

    import nbformat

    lab = demo.DEMO_LAB
    course = pipeline.init_course(tmp_path / "course", [lab])
    pipeline.release(course, lab)
    src = nbformat.read(course / "source" / lab / f"{lab}.ipynb", as_version=4)
    rel = nbformat.read(course / "release" / lab / f"{lab}.ipynb", as_version=4)
    folder, downloads = tmp_path / "mine", tmp_path / "downloads"
    folder.mkdir()
    downloads.mkdir()
    nbformat.write(demo.answered(rel, src), folder / f"{lab}.ipynb")
    labdata.pack(real_runs, folder)
    with zipfile.ZipFile(downloads / "instructor.zip", "w") as z:
        for p in sorted(folder.rglob("*")):
            if p.is_file():
                z.write(p, p.relative_to(folder))
    pipeline.collect(course, lab, downloads)
    assert command.main(["autograde", str(course), lab, "--unconfined", "--timeout", "60"]) == 0
    assert "instructor       7 / 7" in capsys.readouterr().out
