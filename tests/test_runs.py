"""Run folders and the run index: complete-or-absent folders, no overwriting, an index that
survives a killed writer and can be rebuilt, and load() turning results into one table."""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from hpclab.core import paths
from hpclab.runs import folder as runs
from hpclab.core.errors import HpclabError
from hpclab.runs.folder import RunFolder
from hpclab.spec.model import make_spec

SPEC = make_spec(kernel="stream", ntasks=1, args={"size": 1000, "reps": 3}).to_dict()


def test_new_folder_holds_spec_script_and_pending_status(tmp_path):
    """Does a new run folder contain spec.json, an executable job.sh naming its own folder, a
    pending status, and appear in the index?"""
    f = RunFolder.create("exp", SPEC, job_script=lambda folder: f"#!/bin/bash\n# {folder.path}\n", root=tmp_path)
    assert f.path.parent == tmp_path / "exp"
    assert json.loads(f.spec_json.read_text()) == SPEC
    assert str(f.path) in f.job_sh.read_text() and os.access(f.job_sh, os.X_OK)
    assert f.status()["state"] == "pending"
    assert f.provenance.is_dir()
    assert [e["run_id"] for e in runs.index(tmp_path)] == [f.run_id]


def test_run_ids_sort_by_time_and_are_unique():
    """Do run ids start with a sortable timestamp and differ between calls?"""
    ids = {runs.new_run_id() for _ in range(200)}
    assert len(ids) == 200
    assert all(len(i.split("-")[0]) == 8 for i in ids)


def test_existing_folder_is_never_overwritten(tmp_path):
    """Is creating a run folder that exists an error that leaves the old one untouched?"""
    f = RunFolder.create("exp", SPEC, job_script="old\n", run_id="20260101-000000-aaaaaa", root=tmp_path)
    with pytest.raises(HpclabError, match="never overwritten"):
        RunFolder.create("exp", SPEC, job_script="new\n", run_id="20260101-000000-aaaaaa", root=tmp_path)
    assert f.job_sh.read_text() == "old\n"
    with pytest.raises(HpclabError, match="never overwritten"):
        f.write("job.sh", "new\n")


def test_status_history_and_index_follow_state_changes(tmp_path):
    """Does set_status keep a history and update the index line of the run?"""
    f = RunFolder.create("exp", SPEC, root=tmp_path)
    f.set_status("running", job_id="17")
    f.set_status("failed", exit_code=3, reason="NonZeroExitCode")
    st = f.status()
    assert [h["state"] for h in st["history"]] == ["running", "failed"]
    assert st["exit_code"] == 3
    (entry,) = runs.index(tmp_path)
    assert entry["state"] == "failed" and entry["job_id"] == "17"


def test_open_by_id_prefix_and_path(tmp_path):
    """Can a run be found by its path, experiment/id, or a unique id prefix?"""
    f = RunFolder.create("exp", SPEC, root=tmp_path)
    assert RunFolder.open(f.path).path == f.path
    assert RunFolder.open(f"exp/{f.run_id}", root=tmp_path).path == f.path
    assert RunFolder.open(f.run_id[:-2], root=tmp_path).path == f.path
    with pytest.raises(HpclabError, match="hpclab runs"):
        RunFolder.open("nothing-like-it", root=tmp_path)


def test_index_is_rebuilt_from_folders(tmp_path):
    """When the index is lost or misses a folder, is it rebuilt to list exactly the folders?"""
    made = {RunFolder.create(e, SPEC, root=tmp_path).run_id for e in ("a", "b", "a")}
    (tmp_path / "index.jsonl").unlink()
    assert {e["run_id"] for e in runs.index(tmp_path)} == made
    (tmp_path / "index.jsonl").write_text("")
    assert {e["run_id"] for e in runs.index(tmp_path)} == made
    assert {e["run_id"] for e in runs.rebuild_index(tmp_path)} == made


WRITER = """
import sys
from pathlib import Path
from hpclab.runs.folder import RunFolder
root = Path(sys.argv[1])
spec = {"kernel": "stream", "experiment": "kill", "label": "x" * 2000}
i = 0
while True:
    f = RunFolder.create("kill", spec, job_script="#!/bin/bash\\n" + "# padding\\n" * 500,
                         extra={"provenance/big.txt": "y" * 200000}, root=root)
    f.set_status("running", job_id=str(i))
    f.set_status("completed", exit_code=0)
    i += 1
"""


def test_killed_writer_leaves_index_consistent(tmp_path):
    """If the process writing run folders is killed at random moments, is every index line
    valid JSON naming a complete folder, and does the index match the folders afterwards?"""
    env = {**os.environ, "PYTHONPATH": str(paths.repo())}
    for delay in (0.3, 0.7, 1.1, 1.6):
        proc = subprocess.Popen([sys.executable, "-c", WRITER, str(tmp_path)], env=env)
        time.sleep(delay)
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        raw = (tmp_path / "index.jsonl").read_text() if (tmp_path / "index.jsonl").exists() else ""
        for line in raw.splitlines():
            entry = json.loads(line)  # a torn line would fail here
            folder = tmp_path / entry["experiment"] / entry["run_id"]
            for name in ("spec.json", "job.sh", "status.json", "provenance/big.txt"):
                assert (folder / name).is_file(), f"{folder}/{name} missing"
            json.loads((folder / "status.json").read_text())
    folders = runs.run_folders(tmp_path)
    assert folders, "the writer never finished a folder; raise the delays"
    for f in folders:  # visible folders are complete
        assert f.spec_json.is_file() and f.job_sh.is_file() and (f.provenance / "big.txt").stat().st_size == 200000
    assert {e["run_id"] for e in runs.index(tmp_path)} == {f.run_id for f in folders}


def _stream_result(folder: RunFolder) -> None:
    """Run the real stream kernel once, outside Slurm, writing the folder's result.json."""
    exe = paths.bin_dir() / "stream"
    if not exe.is_file():
        pytest.skip("build/bin/stream not built (make -C src)")
    env = {**os.environ, "OMP_NUM_THREADS": "1", "OMPI_ALLOW_RUN_AS_ROOT": "1",
           "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1"}
    res = subprocess.run([str(exe), "--size", "1000", "--reps", "3", "--json", str(folder.result_json)],
                         env=env, capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stderr
    folder.write("stdout", res.stdout)


def test_load_builds_one_table_with_spec_columns(tmp_path):
    """Does load() return rows from every completed run with run and spec columns, skipping
    failed runs and filtering on spec fields?"""
    pytest.importorskip("hpclab.runs.parse")
    made = []
    for threads in (1, 2):
        spec = make_spec(kernel="stream", args={"size": 1000, "reps": 3}, omp={"num_threads": threads})
        f = RunFolder.create("stream", spec.to_dict(), root=tmp_path)
        _stream_result(f)
        f.set_status("completed", job_id=str(threads), repetition=1)
        made.append(f.run_id)
    bad = RunFolder.create("stream", SPEC, root=tmp_path)
    bad.set_status("failed", exit_code=3)
    df = runs.load("stream", root=tmp_path)
    assert set(df["run_id"]) == set(made)
    assert {"omp.num_threads", "args.size", "binding.cpu_bind", "experiment", "job_id"} <= set(df.columns)
    assert set(df["omp.num_threads"]) == {1, 2}
    one = runs.load("stream", root=tmp_path, omp__num_threads=2)
    assert set(one["run_id"]) == {made[1]}


def test_load_of_nothing_is_a_clear_error(tmp_path):
    """Does load() of an experiment without results say which experiments exist?"""
    RunFolder.create("other", SPEC, root=tmp_path)
    with pytest.raises(HpclabError) as exc:
        runs.load("stream", root=tmp_path)
    assert "other" in exc.value.hint


# --- the command line (hpclab runs / show / run) -----------------------------------------------------


def test_cli_lists_and_shows_runs(tmp_path, monkeypatch, capsys):
    """Do `hpclab runs` and `hpclab show` print the runs of the runs folder?"""
    from hpclab.cli.main import main

    monkeypatch.setenv("HPCLAB_RUNS", str(tmp_path))
    f = RunFolder.create("exp", SPEC, root=tmp_path)
    f.set_status("failed", exit_code=3, reason="NonZeroExitCode")
    f.write("stderr", "first line\nlast words\n")
    assert main(["runs"]) == 0
    assert f"exp/{f.run_id}" in capsys.readouterr().out
    assert main(["show", f.run_id, "--spec"]) == 0
    out = capsys.readouterr().out
    assert "failed" in out and "last words" in out and '"kernel": "stream"' in out


def test_cli_run_with_bad_spec_prints_one_error(tmp_path, monkeypatch, capsys):
    """Does `hpclab run` with a misspelt field print one hpclab error and exit 2, no traceback?"""
    from hpclab.cli.main import main

    monkeypatch.setenv("HPCLAB_RUNS", str(tmp_path))
    p = tmp_path / "bad.yaml"
    p.write_text("kernel: stream\nbinding: {cpu_bind: core}\n")
    assert main(["run", str(p), "--sweep", "omp.num_threads=1,2"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("hpclab: invalid spec") and "did you mean 'cores'" in err
    assert "Traceback" not in err
    assert not list(tmp_path.glob("*/*"))


def test_rebuild_removes_only_old_abandoned_temporaries(tmp_path):
    """Does rebuilding the index clear temporaries a killed writer left long ago, but not fresh
    ones a live writer may still be filling?"""
    RunFolder.create("exp", SPEC, root=tmp_path)
    old, young = tmp_path / "exp" / ".old.tmp", tmp_path / "exp" / ".young.tmp"
    old.mkdir()
    young.mkdir()
    os.utime(old, (time.time() - 7200, time.time() - 7200))
    runs.rebuild_index(tmp_path)
    assert not old.exists() and young.exists()


def test_profiles_sessions_and_variants_are_run_folders_of_their_kind(tmp_path):
    """Does each kind of job folder get a new folder under its own '_' root (kept out of the
    index), never reused, with the same file names, and are bad kinds and names refused?"""
    a = RunFolder.create_kind("profile", "06-hotspots", root=tmp_path)
    b = RunFolder.create_kind("profile", "06-hotspots", root=tmp_path)
    assert a.path != b.path and a.path.parent == tmp_path / "_profiles" / "06-hotspots"
    s = RunFolder.create_kind("session", root=tmp_path)
    assert s.path.parent == tmp_path / "_interactive"
    v = RunFolder.create_kind("variants", "variants", root=tmp_path)
    assert v.path.parent == tmp_path / "_variants" / "variants"
    assert a.stdout == a.path / "stdout" and a.command_txt == a.path / "command.txt"
    assert s.engines_script(2) == s.path / "engines-2.sh" and s.engines_log(2) == s.path / "engines-2.log"
    assert runs.index(tmp_path) == []  # '_' folders are not experiment runs
    with pytest.raises(HpclabError, match="unknown kind"):
        RunFolder.create_kind("scratch", "x", root=tmp_path)
    with pytest.raises(HpclabError, match="folder name"):
        RunFolder.create_kind("profile", "../up", root=tmp_path)


def test_open_with_a_marker_finds_folders_without_status(tmp_path):
    """Does RunFolder.open(marker='trace') open a traced folder that has no status.json, by path
    and by name under the root, and say so when there is none?"""
    (tmp_path / "exp" / "r1" / "trace").mkdir(parents=True)
    assert RunFolder.open(tmp_path / "exp" / "r1", marker="trace").path == (tmp_path / "exp" / "r1").resolve()
    assert RunFolder.open("exp/r1", root=tmp_path, marker="trace").run_id == "r1"
    with pytest.raises(HpclabError, match="no run folder"):
        RunFolder.open("exp/r1", root=tmp_path)


def test_a_status_change_appends_one_line_and_the_index_stays_small(tmp_path, monkeypatch):
    """Does recording a status append one line instead of rewriting the index (the cost of a
    status must not grow with the runs a learner has kept), a torn last line left by a killed
    writer get cut at the next append, and the file get compacted once it holds twice the lines
    of its runs?"""
    folders = [RunFolder.create("grow", make_spec(kernel="stream", ntasks=1).to_dict(), "#!/bin/bash\n", root=tmp_path)
               for _ in range(3)]
    index_file = tmp_path / "index.jsonl"
    lines = len(index_file.read_text().splitlines())
    folders[0].set_status("running", job_id="1")
    assert len(index_file.read_text().splitlines()) == lines + 1
    with open(index_file, "a") as f:
        f.write('{"experiment": "grow", "run_id": "torn')  # a writer killed mid-line
    folders[1].set_status("running", job_id="2")
    text = index_file.read_text()
    assert "torn" not in text and text.endswith("\n")
    assert {e["run_id"]: e["state"] for e in runs.index(tmp_path)} == {
        folders[0].run_id: "running", folders[1].run_id: "running", folders[2].run_id: "pending"}
    monkeypatch.setattr(runs, "COMPACT_MIN_BYTES", 1)  # compact as soon as the lines double, not at 64 KiB
    for k in range(40):
        folders[2].set_status("running", job_id=str(k))
    assert len(index_file.read_text().splitlines()) <= runs.COMPACT_FACTOR * 3 + 1
    entries = {e["run_id"]: e for e in runs.index(tmp_path)}
    assert len(entries) == 3 and entries[folders[2].run_id]["job_id"] == "39"
