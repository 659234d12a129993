"""Room mode (hpclab.runs.recorded): a room's notebook reads the instructor's recorded runs instead
of submitting. The recording is made here through the experiment path against a fake Slurm
(tests/fake_slurm/); the room's calls must then submit nothing, get the runs of the same content
round by round, say what to record when a spec has none, and leave the labs and the students'
own experiments to Slurm. No cluster."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from matplotlib.figure import Figure

from hpclab.classroom import hub, hub_config, recording as making
from hpclab.classroom.layout import ClassroomLayout
from hpclab.core import paths
from hpclab.core.errors import HpclabError, JobFailed
from hpclab.course import plan, runner
from hpclab.jobs import experiment
from hpclab.plots import figures
from hpclab.runs import recorded
from hpclab.runs.folder import RunFolder
from hpclab.spec.model import make_spec
from tests.fake_slurm.fakeslurm import ends
from tests.test_plan import _course

NOTEBOOK = "notebooks/02-transports.ipynb"


def spec(label: str, experiment_name: str = "02-transports", **fields):
    return make_spec({"kernel": "program", "command": ["true"], "ntasks": 1, "experiment": experiment_name,
                      "label": label, **fields})


@pytest.fixture
def recording(fake_slurm, tmp_path, monkeypatch):
    """A recording of one notebook's two calls (a pair of 3 rounds, then the pair once more with 2)
    made by 'instructor1' through experiment.run, and a room that reads that notebook."""
    folder = tmp_path / "recording"
    monkeypatch.setenv("HPCLAB_RUNS", str(folder / "runs"))
    first = experiment.run([spec("a", repetitions=3), spec("b", repetitions=3)], progress=False)
    second = experiment.run([spec("a", repetitions=2), spec("b", repetitions=2)], progress=False)
    recorded.write_recording(folder, "instructor1", {NOTEBOOK: {
        "runs": [r.run_id for r in [*first, *second]], "experiments": ["02-transports"], "ok": True}})
    recorded.write_room_mode(folder, [NOTEBOOK], own=[], students=30)
    monkeypatch.setenv("HPCLAB_RUNS", str(tmp_path / "student-runs"))
    monkeypatch.setenv(recorded.ENV, str(folder))
    monkeypatch.delenv(recorded.SESSION_ENV, raising=False)
    return folder, first, second


def test_a_room_mode_call_submits_nothing_and_gets_the_recorded_rounds(recording, fake_slurm):
    """Does the room's call get the instructor's runs of the same content, grouped by spec in
    round order, with no sbatch and no run folder of the student's?"""
    folder, first, _ = recording
    before = len(fake_slurm.submitted())
    runs = experiment.run([spec("a", repetitions=3), spec("b", repetitions=3)], progress=False)
    assert len(fake_slurm.submitted()) == before
    assert not (Path(folder).parent / "student-runs").exists()
    assert [r.path for r in runs] == [r.path for r in first.groups[0] + first.groups[1]]
    assert [r.repetition for r in runs.groups[0]] == [1, 2, 3] and runs.rounds == 3
    assert {r.state for r in runs} == {"completed"}


def test_the_second_call_of_a_session_gets_the_instructors_second_call(recording):
    """A notebook that asks for the same content twice: does the second call read the recording's
    second call (and a third, the last one again)?"""
    _, first, second = recording
    a = [spec("a", repetitions=3)]
    assert [r.path for r in experiment.run(a, progress=False)] == [r.path for r in first.groups[0]]
    assert [r.path for r in experiment.run(a, progress=False)] == [r.path for r in second.groups[0]]
    assert [r.path for r in experiment.run(a, progress=False)] == [r.path for r in second.groups[0]]


def test_what_only_says_how_a_run_was_made_does_not_keep_it_from_matching(recording, monkeypatch):
    """The room's site, its partition and a longer time limit are not what a run measures: does
    the spec still match? And a path inside the instructor's checkout against the same path
    inside the room's copy?"""
    roots = ["/work/main", "/home/student01/hpclab/.course"]
    mine = {"kernel": "program", "command": ["/work/main/build/abi/which-library"], "time": "00:05:00"}
    theirs = {"kernel": "program", "command": ["/home/student01/hpclab/.course/build/abi/which-library"],
              "time": "00:10:00", "site": "classroom", "partition": "debug"}
    assert recorded.content_key(mine, roots) == recorded.content_key(theirs, roots)
    assert recorded.content_key(mine, roots) != recorded.content_key({**mine, "ntasks": 2}, roots)
    runs = experiment.run([spec("a", repetitions=3, time="00:09:00", site="classroom")], progress=False)
    assert len(runs) == 3


def test_a_spec_the_recording_lacks_says_what_to_record(recording, fake_slurm):
    """A spec of the room-mode notebook's experiment that was never recorded: is the call refused
    before anything is submitted, naming the notebook to record and the way to make it the room's own?"""
    before = len(fake_slurm.submitted())
    with pytest.raises(HpclabError) as err:
        experiment.run([spec("a", repetitions=3), spec("never-recorded")], progress=False)
    assert "1 of the 2 spec(s) of this cell have no run in instructor1's recording" in err.value.what
    assert "classroom record --notebooks 02-transports" in err.value.hint and "--own 02-transports" in err.value.hint
    assert len(fake_slurm.submitted()) == before


def test_the_labs_and_the_students_own_experiments_are_submitted(recording, fake_slurm, monkeypatch):
    """A lab's experiment, and an experiment the instructor marked as the room's own: are they
    submitted as anywhere else? And a call from a room-mode notebook's kernel (its session) whose
    experiment has another name: read from the recording, so refused when it has no run?"""
    folder, _, _ = recording
    before = len(fake_slurm.submitted())
    experiment.run([spec("role", "lab-transports")], progress=False)
    assert len(fake_slurm.submitted()) == before + 1
    recorded.write_room_mode(folder, [NOTEBOOK], own=["02-transports"], students=30)
    experiment.run([spec("a", repetitions=1)], progress=False)
    assert len(fake_slurm.submitted()) == before + 2
    recorded.write_room_mode(folder, [NOTEBOOK], own=[], students=30)
    monkeypatch.setenv(recorded.SESSION_ENV, "notebooks/02-transports.ipynb")
    with pytest.raises(HpclabError, match="room mode"):
        experiment.run([spec("x", "02-other")], progress=False)
    assert len(fake_slurm.submitted()) == before + 2


def test_an_adaptive_call_replays_the_recorded_rounds_through_its_rule(recording):
    """until=: are the recorded rounds handed to the rule one by one, stopping where it decides,
    or where the recording ends?"""
    seen = []

    def decided_at_3(groups):
        seen.append([len(g) for g in groups])
        return len(groups[0]) >= 3

    runs = experiment.run([spec("a"), spec("b")], progress=False, until=decided_at_3, min_repetitions=2)
    assert seen == [[2, 2], [3, 3]] and runs.rounds == 3 and runs.stopped == "decided after 3 rounds"
    runs = experiment.run([spec("a"), spec("b")], progress=False, until=lambda g: False, min_repetitions=2)
    assert runs.rounds == 2 and runs.stopped == "the recording ends after 2 rounds"


def test_a_recorded_failure_fails_as_it_did_for_the_instructor(fake_slurm, tmp_path, monkeypatch):
    """A run that failed when it was recorded: does the room's call raise the same cause, and
    does run_and_explain-style waiting read it back without writing into the recording?"""
    folder = tmp_path / "recording"
    monkeypatch.setenv("HPCLAB_RUNS", str(folder / "runs"))
    fake_slurm.plan(ends("FAILED", exit="3:0"))
    runs = experiment.run([spec("bad")], wait=False, progress=False)
    with pytest.raises(JobFailed):
        experiment.wait_for(runs, progress=False, poll=0.02, timeout=60)
    recorded.write_recording(folder, "instructor1", {NOTEBOOK: {"runs": [runs[0].run_id],
                                                                "experiments": ["02-transports"]}})
    recorded.write_room_mode(folder, [NOTEBOOK], own=[], students=3)
    monkeypatch.setenv(recorded.ENV, str(folder))
    status = (runs[0].path / "status.json").read_text()
    with pytest.raises(JobFailed, match="exit code 3"):
        experiment.run([spec("bad")], progress=False)
    again = experiment.run([spec("bad")], wait=False, progress=False)
    with pytest.raises(JobFailed):
        experiment.wait_for(again, progress=False)
    assert (runs[0].path / "status.json").read_text() == status


def test_a_figure_says_whose_runs_it_shows(recording):
    """Does a figure of recorded runs say they are the instructor's, and from when, and a figure
    of one's own runs say nothing of the kind?"""
    _, first, _ = recording
    fig = Figure()
    figures.footnote(fig, [{"run_id": r.run_id, "host": "node1"} for r in first.groups[0]])
    text = fig.texts[-1].get_text()
    day = json.loads((first[0].path / "status.json").read_text())["created"][:10]
    assert text.startswith(f"data: runs recorded by instructor1 on {day}: run {first[0].run_id}, node1")
    one = Figure()
    figures.footnote(one, {"run_id": first[0].run_id, "host": "node1", "date": "2026-11-28T10:00:00"})
    assert one.texts[-1].get_text() == f"data: run {first[0].run_id} recorded by instructor1 on {day}, node1"
    own = Figure()
    figures.footnote(own, {"run_id": "20261128-101502-3fa9c1", "host": "node1", "date": "2026-11-28"})
    assert own.texts[-1].get_text() == "data: run 20261128-101502-3fa9c1, node1, 2026-11-28"


# --- making a recording and opening a room on it (hpclab.classroom.recording); no Slurm, no Jupyter ---


def test_the_plan_records_the_notebooks_a_room_cannot_run_and_never_a_lab(tmp_path):
    """Which notebooks go to the recording for a room of 30: the long one that submits jobs, not
    the short one, and never a lab (a lab grades the student's own runs, however long)?"""
    _course(tmp_path, {"notebooks/03-placement.ipynb": 60.0, "notebooks/02-transports.ipynb": 1.0,
                       "labs/lab-placement/lab-placement.ipynb": 60.0})
    assert plan.room_mode_notebooks(30, tmp_path) == ["notebooks/03-placement.ipynb"]
    assert plan.room_mode_notebooks(1, tmp_path) == []


def test_record_chooses_from_a_whole_course_run_only(tmp_path):
    """Without --notebooks: the room-mode notebooks of the last course run, and a refusal when
    that run left notebooks out (their fit is not known)?"""
    every = {str(p.relative_to(paths.repo())): 1.0 for p in runner.course_notebooks()}
    _course(tmp_path, {**every, "notebooks/03-placement.ipynb": 60.0})
    assert making.chosen_notebooks(None, 30, tmp_path) == [paths.repo() / "notebooks/03-placement.ipynb"]
    assert making.chosen_notebooks(["02"], 30, tmp_path) == [paths.repo() / NOTEBOOK]
    partial = tmp_path / "partial"
    partial.mkdir()
    _course(partial, {"notebooks/03-placement.ipynb": 60.0})
    with pytest.raises(HpclabError, match="left out") as err:
        making.chosen_notebooks(None, 30, partial)
    assert "--notebooks" in err.value.hint


def _executes_by_making_runs(monkeypatch, experiments: dict[str, str]):
    """Stand in for the notebook executor: each notebook 'runs' by leaving two completed run
    folders of one spec under HPCLAB_RUNS (as experiment.run would), no kernel, no Slurm."""
    monkeypatch.setenv("HPCLAB_HEADLESS", "1")  # run_course sets it for its kernels: undone after the test
    def execute(src: Path, out_dir: Path, timeout: int = 900) -> runner.NotebookResult:
        rel = str(src.relative_to(paths.repo()))
        for rep in (1, 2):
            folder = RunFolder.create(experiments[rel], spec("a", experiments[rel]).to_dict())
            folder.set_status("completed", repetition=rep, job_id=str(100 + rep))
        return runner.NotebookResult(rel, True, 1.5, 2)

    monkeypatch.setattr(runner, "execute_notebook", execute)


def test_a_recording_lists_per_notebook_the_runs_it_made(tmp_path, monkeypatch):
    """Does `classroom record` note, per notebook, the run folders and experiment names it made
    (in the recording's own runs folder, whatever HPCLAB_RUNS was), and who recorded?"""
    monkeypatch.setenv("HPCLAB_RUNS", str(tmp_path / "elsewhere"))
    _executes_by_making_runs(monkeypatch, {NOTEBOOK: "02-transports", "notebooks/03-placement.ipynb": "03-placement"})
    folder = tmp_path / "recording"
    books = [paths.repo() / NOTEBOOK, paths.repo() / "notebooks/03-placement.ipynb"]
    report, made = making.record(folder, books, by="instructor1")
    assert not report.failures and os.environ["HPCLAB_RUNS"] == str(tmp_path / "elsewhere")
    meta = json.loads((folder / recorded.RECORDING).read_text())
    assert meta["by"] == "instructor1" and set(meta["notebooks"]) == {NOTEBOOK, "notebooks/03-placement.ipynb"}
    assert meta["notebooks"][NOTEBOOK]["experiments"] == ["02-transports"]
    on_disk = sorted(p.name for p in (folder / "runs" / "02-transports").iterdir() if p.is_dir())
    assert sorted(meta["notebooks"][NOTEBOOK]["runs"]) == on_disk and len(on_disk) == 2
    assert not (tmp_path / "elsewhere").exists()


def test_a_recording_keeps_the_cache_probe_its_lessons_were_sized_with(tmp_path, monkeypatch):
    """Does the recording copy notebook 00's cache probe (build/cache-probe.json), readable by the
    students, so that their kernels size the lessons as the recorded runs were sized?"""
    from hpclab.analysis import effective_cache

    probe = effective_cache.record_path()   # this test's own (tests/conftest.py)
    probe.write_text('{"hwloc_llc": 1}\n')
    _executes_by_making_runs(monkeypatch, {NOTEBOOK: "02-transports"})
    folder = tmp_path / "recording"
    making.record(folder, [paths.repo() / NOTEBOOK], by="instructor1")
    kept = folder / recorded.PROBE
    assert kept.read_text() == probe.read_text() and kept.stat().st_mode & 0o777 == 0o644


def test_up_on_a_recording_writes_room_mode_and_names_it_in_the_servers_environment(tmp_path, monkeypatch):
    """Does opening a room on a recording write room-mode.json (its notebooks, the students' own),
    put HPCLAB_RECORDED in the spawner's environment, and then answer a student's call from it?"""
    _executes_by_making_runs(monkeypatch, {NOTEBOOK: "02-transports"})
    folder = tmp_path / "recording"
    making.record(folder, [paths.repo() / NOTEBOOK], by="instructor1")
    env = making.open_room(folder, students=3, own=["lab-transports"])
    room = json.loads((folder / recorded.ROOM_MODE).read_text())
    assert room == {"students": 3, "notebooks": [NOTEBOOK], "own": ["lab-transports"]}
    assert env == {"HPCLAB_RECORDED": str(folder.resolve())}
    assert "room mode: the notebooks 02-transports show instructor1's recorded runs" in making.room_note(folder)
    text = hub_config.render(ClassroomLayout(tmp_path / "room"), hub.HubSettings(recording=folder),
                             slurm_conf="/etc/slurm.conf", instructors=["instructor1"], services=[], roles=[])
    assert f"'HPCLAB_RECORDED': '{folder}'" in text
    compile(text, "jupyterhub_config.py", "exec")
    plain = hub_config.render(ClassroomLayout(tmp_path / "room"), hub.HubSettings(), slurm_conf="/etc/slurm.conf",
                              instructors=["instructor1"], services=[], roles=[])
    assert "HPCLAB_RECORDED" not in plain
    monkeypatch.setenv(recorded.ENV, env["HPCLAB_RECORDED"])
    monkeypatch.setenv("HPCLAB_RUNS", str(tmp_path / "student-runs"))
    runs = experiment.run([spec("a", repetitions=2)], progress=False)
    assert runs.recorded.startswith("recorded by instructor1 on ") and [r.repetition for r in runs] == [1, 2]


def test_a_folder_without_a_recording_is_refused_before_the_room_opens(tmp_path):
    """`up --recording` with a folder that holds none: refused, saying how to make one?"""
    with pytest.raises(HpclabError, match="holds no recording") as err:
        making.open_room(tmp_path, students=3)
    assert "classroom record" in err.value.hint


def test_the_two_commands_parse_as_the_runbook_gives_them():
    """Do `classroom record` and `classroom up --recording ... --own ...` reach their commands with
    the folder, the notebooks and the students' own experiments?"""
    from hpclab.cli import classroom as cli
    from hpclab.cli.main import build_parser

    args = build_parser().parse_args(["classroom", "record", "--notebooks", "02", "03", "--to", "/tmp/rec"])
    assert args.func is cli._record and args.notebooks == ["02", "03"] and args.to == Path("/tmp/rec")
    args = build_parser().parse_args(["classroom", "up", "--recording", "/tmp/rec", "--own", "02-transports"])
    assert args.func is cli._up and args.recording == Path("/tmp/rec") and args.own == ["02-transports"]
    assert build_parser().parse_args(["classroom", "up"]).recording is None


def test_a_run_of_the_recording_is_found_by_its_id_in_room_mode(recording, monkeypatch):
    """A lesson that opens a run by its id (notebook 05b's subdomain runs) looks in the student's
    runs: in room mode, is a recorded run found there too, and only in room mode?"""
    folder, first, _ = recording
    run_id = first[0].run_id
    assert RunFolder.open(run_id).path == first[0].folder.path
    monkeypatch.delenv(recorded.ENV)
    with pytest.raises(HpclabError, match="no run folder"):
        RunFolder.open(run_id)
