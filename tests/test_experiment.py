"""Experiments on the real local cluster: every kernel from spec to DataFrame, failures and
time-outs reported with their run folders kept and marked, Ctrl-C cancelling jobs, and a saved
job.sh that repeats the run when submitted by hand."""

import _thread
import json
import threading
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
    """Does a job exiting with code 3 raise an HpclabError naming state, exit code, stderr and
    folder, and stay on disk marked failed?"""
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


def test_wait_timeout_cancels_and_says_what_the_job_was_doing(runs_root, tmp_path, monkeypatch):
    """When waiting runs out of time, is the job cancelled in Slurm, its folder marked cancelled
    (not timeout: Slurm's limit was not reached) with Slurm's last state in the reason?"""
    need("pingpong")
    _failing_template(tmp_path, monkeypatch, "sleep 300")
    with pytest.raises(HpclabError, match="state cancelled") as exc:
        experiment.run(make_spec(SMALL["pingpong"]), progress=False, timeout=3)
    assert "hpclab stopped waiting after 3 s" in str(exc.value)
    assert "Slurm: RUNNING" in str(exc.value) or "Slurm: PENDING" in str(exc.value)
    (folder,) = runs.run_folders(runs_root)
    assert folder.status()["state"] == "cancelled" and folder.status()["stopped_waiting"] == 3
    job = folder.status()["job_id"]
    deadline = time.monotonic() + 300
    while not slurm.job_states([job])[job].done and time.monotonic() < deadline:
        time.sleep(0.5)
    assert slurm.job_states([job])[job].state == "cancelled"


@pytest.mark.slow
def test_slurm_time_limit_is_reported_as_timeout(runs_root, tmp_path, monkeypatch):
    """Does a job killed by its Slurm time limit (1 minute) end as state timeout? (It also shows
    that the embedded Slurm enforces --time: it checks limits about once a minute, so a job with
    --time=0:10 ends after about 65 s too, and one such wait in make test is enough.)"""
    need("pingpong")
    _failing_template(tmp_path, monkeypatch, "sleep 600")
    with pytest.raises(HpclabError, match="state timeout") as exc:
        experiment.run(make_spec({**SMALL["pingpong"], "time": 1}), progress=False, timeout=240)
    assert "TIMEOUT" in str(exc.value)


def test_ctrl_c_cancels_the_jobs(runs_root, tmp_path, monkeypatch):
    """Does a KeyboardInterrupt while waiting cancel the job and mark its folder cancelled?"""
    need("pingpong")
    _failing_template(tmp_path, monkeypatch, "sleep 300")
    timer = threading.Timer(3.0, _thread.interrupt_main)
    timer.start()
    try:
        with pytest.raises(HpclabError, match="interrupted"):
            experiment.run(make_spec(SMALL["pingpong"]), progress=False, timeout=120)
    finally:
        timer.cancel()
    (folder,) = runs.run_folders(runs_root)
    assert folder.status()["state"] == "cancelled"
    job = folder.status()["job_id"]
    deadline = time.monotonic() + 300
    while not slurm.job_states([job])[job].done and time.monotonic() < deadline:
        time.sleep(0.5)
    assert slurm.job_states([job])[job].state == "cancelled"


def test_bad_spec_in_a_sweep_submits_nothing(runs_root):
    """If one spec of a sweep cannot run here, is nothing submitted at all?"""
    need("stream")
    specs = sweep(make_spec(kernel="stream", args={"size": 1000}), {"ntasks": [1, 4096]})
    with pytest.raises(HpclabError, match="spec 2 of 2: .*more tasks than cores"):
        experiment.run(specs, progress=False)
    assert runs.run_folders(runs_root) == []


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


def test_a_drained_partition_on_a_site_cluster_is_reported_not_cancelled(monkeypatch, capsys):
    """On a site's cluster (admins drain nodes for maintenance and resume them), does the wait say
    once that no node can start the job, and keep it queued instead of cancelling it?"""
    from hpclab.jobs import experiment as ex

    monkeypatch.setenv("HPCLAB_SITE", "example-cluster")
    monkeypatch.setattr(ex._DrainWatch, "CHECK", 0.0)
    monkeypatch.setattr(ex._DrainWatch, "GRACE", 0.0)
    monkeypatch.setattr(ex.slurm, "drained_partition", lambda job: {"n1": "drained (maintenance)"})

    class Pending:
        state, job_id = "pending", "42"

    watch = ex._DrainWatch()
    watch.next_check = 0.0
    assert watch.cancel_if_no_node_can_start([Pending()]) is False
    assert "n1 is drained (maintenance)" in capsys.readouterr().err


def test_repetitions_are_submitted_round_by_round_across_specs():
    """Are jobs submitted every spec's first repetition first, then every second, ...?"""
    assert experiment.submission_order([2, 3, 1]) == [(0, 1), (1, 1), (2, 1), (0, 2), (1, 2), (1, 3)]
    assert experiment.submission_order([1]) == [(0, 1)] and experiment.submission_order([]) == []


def test_two_specs_alternate_in_slurm_and_come_back_grouped(runs_root):
    """Two specs of two repetitions each: do their jobs alternate in Slurm (job ids A B A B), while
    run() still returns them grouped by spec, as listed?"""
    need("stream")
    a = make_spec({**SMALL["stream"], "label": "a", "repetitions": 2})
    b = make_spec({**SMALL["stream"], "args": {"size": 300000, "reps": 3}, "label": "b", "repetitions": 2})
    runs = experiment.run([a, b], progress=False, timeout=300)
    assert [r.spec.label for r in runs] == ["a", "a", "b", "b"]
    ids = [int(r.job_id) for r in runs]
    assert ids[0] < ids[2] < ids[1] < ids[3], ids
