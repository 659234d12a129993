"""Experiments on the real local cluster: every kernel from spec to DataFrame, a failing job
script's exit code and stderr reaching the run folder through Slurm, a spec's time limit
reaching Slurm, and a saved job.sh that repeats the run when submitted by hand.

How hpclab reads and names what Slurm does (submission order, each way a job ends, requeues,
giving up waiting, Ctrl-C) is tested against the fake Slurm in tests/test_experiment_logic.py,
in make test-fast; the tests here keep what only a real Slurm shows."""

import json
import time

import pytest

from hpclab.jobs import experiment
from hpclab.core import paths
from hpclab.runs import folder as runs
from hpclab.site import slurm
from hpclab.core.errors import HpclabError
from hpclab.spec.model import make_spec, sweep

pytestmark = pytest.mark.cluster


@pytest.fixture
def runs_root(tmp_path, monkeypatch, cluster):
    root = tmp_path / "runs"
    monkeypatch.setenv("HPCLAB_RUNS", str(root))
    return root


def need(kernel):
    if not (paths.bin_dir() / kernel).is_file():
        pytest.skip(f"build/bin/{kernel} not built (make -C src)")


SMALL = {
    "pingpong": dict(kernel="pingpong", ntasks=2, args={"max_bytes": 1024, "reps": 20},
                     binding={"cpu_bind": "cores"}, mca={"btl": "self,vader"}),
    "stream": dict(kernel="stream", ntasks=1, cpus_per_task=2, args={"size": 200000, "reps": 3},
                   omp={"num_threads": 2, "proc_bind": "spread", "places": "cores"}),
    "poisson": dict(kernel="poisson", ntasks=2, args={"n": 64, "grid": "1x2", "iters": 10}),
}


@pytest.mark.parametrize("kernel", sorted(SMALL))
def test_kernel_runs_to_a_table_with_provenance(runs_root, kernel):
    """Does each kernel go spec -> job -> run folder -> DataFrame, with provenance recorded?"""
    need(kernel)
    (run,) = experiment.run(make_spec(SMALL[kernel]), progress=False, timeout=300)
    assert run.state == "completed"
    table = run.table()
    assert len(table) > 0 and set(table["run_id"]) == {run.run_id}
    prov = run.folder.provenance
    assert (prov / "nodes.txt").read_text().strip()
    assert list(prov.glob("lstopo-*.xml")) and "<topology" in next(prov.glob("lstopo-*.xml")).read_text()
    assert "SLURM_JOB_ID" in (prov / "env.txt").read_text()
    assert (prov / "binding.txt").read_text().count("cpu-bind") >= SMALL[kernel]["ntasks"]
    assert json.loads((prov / "sacct.json").read_text())[0]["State"] == "COMPLETED"
    site_info = json.loads((prov / "site.json").read_text())
    assert (runs_root / site_info["ompi_info"]).is_file()
    assert "commit" in (prov / "git.txt").read_text()
    assert runs.load(kernel)["run_id"].nunique() == 1


def _failing_template(tmp_path, monkeypatch, body):
    d = tmp_path / "tpl"
    d.mkdir()
    (d / "pingpong.sh.j2").write_text('{% extends "preamble.sh.j2" %}\n{% block before_run %}\n' + body +
                                      "\n{% endblock %}\n")
    monkeypatch.setenv("HPCLAB_TEMPLATES", str(d))


def test_failed_job_raises_with_state_exit_code_and_stderr(runs_root, tmp_path, monkeypatch):
    """Does a job script exiting with code 3 raise an HpclabError naming state, exit code, stderr and
    folder, and stay on disk marked failed? (Real Slurm: the script's exit code reaches sacct and
    its stderr the run folder through the job's #SBATCH --error, which the fake writes itself.)"""
    need("pingpong")
    _failing_template(tmp_path, monkeypatch, "echo 'boom: the input deck is missing' >&2\nexit 3")
    with pytest.raises(HpclabError) as exc:
        experiment.run(make_spec(SMALL["pingpong"]), progress=False, timeout=120)
    text = str(exc.value)
    assert "state failed" in text and "exit code 3" in text and "boom: the input deck" in text
    (folder,) = runs.run_folders(runs_root)
    assert str(folder.path) in text
    assert folder.status()["state"] == "failed" and folder.status()["exit_code"] == 3
    assert [e["state"] for e in runs.index(runs_root)] == ["failed"]


def test_the_spec_s_time_limit_reaches_slurm_which_enforces_it(runs_root, tmp_path, monkeypatch):
    """Does a spec's time (1 minute) become the job's TimeLimit in Slurm, with no grace beyond it
    (OverTimeLimit 0)? That a job past its limit then reads as state timeout (TimedOut) is tested
    against the fake Slurm (test_experiment_logic); waiting out a real limit here took 72 s,
    since slurmctld checks limits about once a minute, and only shows Slurm's own enforcement."""
    need("pingpong")
    _failing_template(tmp_path, monkeypatch, "sleep 600")
    (run,) = experiment.run(make_spec({**SMALL["pingpong"], "time": 1}), wait=False, progress=False)
    try:
        shown = slurm.run_slurm(["scontrol", "show", "job", "--oneliner", run.job_id], what="ask scontrol")
    finally:
        experiment.cancel([run])
    assert "TimeLimit=00:01:00" in shown.split(), shown
    config = slurm.run_slurm(["scontrol", "show", "config"], what="ask scontrol for the configuration")
    over = next(line.split("=", 1)[1].strip() for line in config.splitlines() if line.startswith("OverTimeLimit"))
    assert over == "0 min", over


def test_stream_sweep_to_dataframe_and_job_sh_reruns_by_hand(runs_root):
    """Done criterion: a STREAM sweep over two bindings and 1-2 threads gives one DataFrame, and
    the saved job.sh repeats a run when submitted by hand with sbatch."""
    need("stream")
    base = make_spec(kernel="stream", ntasks=1, cpus_per_task=2, args={"size": 200000, "reps": 3},
                     omp={"places": "cores", "proc_bind": "close"})
    specs = sweep(base, {"binding.cpu_bind": ["cores", "none"], "omp.num_threads": [1, 2]})
    done = experiment.run(specs, progress=False, timeout=600)
    df = runs.load("stream")
    assert df["run_id"].nunique() == 4
    combos = set(zip(df["binding.cpu_bind"], df["omp.num_threads"]))
    assert combos == {("cores", 1), ("cores", 2), ("none", 1), ("none", 2)}
    # by hand: sbatch job.sh; the first result is kept, the repeat lands in rerun-<jobid>/
    first = done[0].folder
    before = first.result_json.read_text()
    job = slurm.sbatch(first.job_sh)
    deadline = time.monotonic() + 300
    while not slurm.job_states([job])[job].done and time.monotonic() < deadline:
        time.sleep(0.5)
    assert slurm.job_states([job])[job].state == "completed"
    rerun = first.path / f"rerun-{job}"
    again = json.loads((rerun / "result.json").read_text())
    assert again["kernel"] == "stream" and again["validation"]["ok"]
    assert first.result_json.read_text() == before
    assert (rerun / "provenance" / "nodes.txt").is_file()


def test_mpirun_launcher_reports_bindings(runs_root):
    """Does the mpirun launcher run inside the allocation and leave its --report-bindings lines?"""
    need("pingpong")
    (run,) = experiment.run(make_spec(kernel="pingpong", ntasks=2, launcher="mpirun",
                                      args={"max_bytes": 64, "reps": 5},
                                      binding={"map_by": "core", "bind_to": "core"}),
                            progress=False, timeout=300)
    assert (run.folder.provenance / "binding.txt").read_text().count("MCW rank") == 2
    assert len(run.table()) > 0


def test_trace_writes_one_file_per_rank(runs_root):
    """Does trace: true preload the tracer for the kernel only and fill <run>/trace/?"""
    need("poisson")
    if not (paths.lib_dir() / "libmpitrace.so").is_file():
        pytest.skip("build/lib/libmpitrace.so not built (make -C src)")
    (run,) = experiment.run(make_spec(kernel="poisson", ntasks=2, args={"n": 64, "iters": 5}, trace=True),
                            progress=False, timeout=300)
    assert len(list(run.folder.trace_dir.iterdir())) == 2
    assert "LD_PRELOAD" not in (run.folder.provenance / "env.txt").read_text()
