"""Interactive MPI: ipyparallel engines as the ranks of one Slurm job, their end, the deadlock cell,
and the measurement helpers the notebook uses.

The cluster tests start real engines through the local Slurm cluster (2 cores: one engines job
at a time). The others check what needs no cluster: the engines' batch script for another site,
the mpi4py ping-pong under mpirun, and the tables and figures built from measurements.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pandas as pd
import pytest
from matplotlib.figure import Figure

from hpclab.analysis import python_overhead
from hpclab.plots import interactive as interactive_plots
from hpclab.tools import interactive
from hpclab.site import profile as site_mod
from hpclab.core.errors import HpclabError
from hpclab.tools.interactive import MPIEngines
from hpclab.site import ompi, slurm
from hpclab.core import paths
from hpclab.runs.folder import KINDS


# --- no cluster needed ---------------------------------------------------------------------------


@pytest.mark.parametrize("ranks", [0, -1, 1.5, True, "2"])
def test_bad_rank_counts_are_refused(ranks):
    """Is a rank count that is not a whole number >= 1 refused with a clear message?"""
    with pytest.raises(HpclabError, match="ranks must be a whole number"):
        MPIEngines(ranks=ranks, site="example-cluster")


def test_a_queued_engines_job_is_news_on_stdout_not_an_error(tmp_path, monkeypatch, capsys):
    """While the engines' job waits in the queue, is the learner told once, on stdout (a notebook
    shows stderr as a failure; make test's other workers held the cores once), and do the
    engines still start once it runs?"""
    engines = MPIEngines(ranks=2, site="example-cluster")
    engines.session_dir, engines.job_id, engines.jobs = tmp_path, "78", ["78"]
    clock = iter(float(t) for t in range(100))
    monkeypatch.setattr(interactive.time, "monotonic", lambda: next(clock))
    monkeypatch.setattr(interactive.time, "sleep", lambda s: None)
    states, now = iter(["pending"] * 8 + ["running"] * 3), {}

    def job_states(ids):
        now["state"] = next(states)
        return {"78": slurm.JobInfo("78", now["state"], now["state"].upper(), reason="Resources")}
    monkeypatch.setattr(interactive.slurm, "job_states", job_states)

    class Client:   # the controller's view of the engines: both registered once the job runs
        @property
        def ids(self):
            return [0, 1] if now.get("state") == "running" else []
    engines.client = Client()
    engines._wait_for_engines()
    out = capsys.readouterr()
    assert out.err == ""
    assert out.out.count("engines job 78 is waiting in the queue (Resources)") == 1


def test_more_ranks_than_cores_are_refused():
    """Is a request larger than the partition refused before anything is submitted?"""
    site = site_mod.load_site("example-cluster")
    part = site.partition()
    with pytest.raises(HpclabError, match="do not fit"):
        MPIEngines(ranks=part.nodes * part.cores_per_node + 1, site="example-cluster")


def test_engine_script_for_a_real_site_is_readable_and_complete(tmp_path):
    """Does the engines' job script carry the site's account, QoS, modules and PMI, in sorted
    #SBATCH lines under the fixed section comments, and launch `ipengine --mpi` with srun?"""
    eng = MPIEngines(ranks=4, site="example-cluster", mca={"btl": "self,vader"})
    eng.session_dir = tmp_path
    text = eng.render_job(1)
    site = site_mod.load_site("example-cluster")
    sbatch = [line for line in text.splitlines() if line.startswith("#SBATCH")]
    assert sbatch == sorted(sbatch)
    assert f"#SBATCH --account={site.account}" in sbatch
    assert f"#SBATCH --qos={site.qos}" in sbatch
    assert "#SBATCH --ntasks=4" in sbatch
    assert f"#SBATCH --partition={site.default_partition}" in sbatch
    assert "#SBATCH --export=ALL" in sbatch
    for module in site.modules:
        assert f"module load {module}" in text
    assert "export OMPI_MCA_btl=self,vader" in text
    run = text.split("# run", 1)[1]
    assert f"srun --mpi={site.srun_mpi}" in run and "ipyparallel.engine --mpi" in run
    assert text.index("# resources") < text.index("# environment") < text.index("# run")


def test_mpi4py_pingpong_reports_half_round_trips(mpi_env, tmp_path):
    """Does the mpi4py ping-pong return one row per size from rank 0, with positive times and a
    bandwidth equal to bytes / time, for both the buffer and the pickle style?"""
    script = tmp_path / "pp.py"
    script.write_text(textwrap.dedent("""
        import json
        from hpclab.course.lessons.interactive import pingpong_mpi4py
        sizes = [0, 1, 1024, 65536]
        out = {api: pingpong_mpi4py(sizes, reps=20, api=api, trials=2) for api in ("buffer", "pickle")}
        from mpi4py import MPI
        if MPI.COMM_WORLD.rank == 0:
            print(json.dumps(out))
        else:
            assert all(v is None for v in out.values())
    """))
    res = subprocess.run(["mpirun", "-n", "2", "--oversubscribe", sys.executable, str(script)],
                         capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stderr[-2000:]
    import json

    out = json.loads(res.stdout.strip().splitlines()[-1])
    for api, rows in out.items():
        assert [r["bytes"] for r in rows] == [0, 1, 1024, 65536]
        for r in rows:
            assert r["t_usec"] > 0 and len(r["t_usec_trials"]) == 2
            assert r["t_usec"] == pytest.approx(sorted(r["t_usec_trials"])[0] / 2 + sorted(r["t_usec_trials"])[1] / 2)
            assert r["mbytes_per_sec"] == pytest.approx(r["bytes"] / r["t_usec"])


def test_overhead_is_python_minus_c_on_shared_sizes():
    """Is the overhead table exactly Python time - C time (and the ratio) on the sizes both measured?"""
    c = pd.DataFrame({"bytes": [0, 8, 64], "t_usec": [0.5, 0.6, 1.0]})
    py = {"buf": pd.DataFrame({"bytes": [8, 64, 512], "t_usec": [1.1, 2.0, 9.0]})}
    out = python_overhead.overhead(c, py)
    assert out["bytes"].tolist() == [8, 64]
    assert out["buf_extra_us"].tolist() == pytest.approx([0.5, 1.0])
    assert out["buf_x_C"].tolist() == pytest.approx([1.1 / 0.6, 2.0])
    assert isinstance(interactive_plots.overhead_figure(out), Figure)
    with pytest.raises(HpclabError, match="share no message size"):
        python_overhead.overhead(c, {"x": pd.DataFrame({"bytes": [3], "t_usec": [1.0]})})


def test_each_size_is_decided_by_the_statistics():
    """Five C jobs against five Python loops per size: a Python time 50 % above every C run is
    'slower', one within 2 % 'same', one spread across C's is 'undecided', one well below 'faster'
    (a negative extra, never taken as a cost); pickling against buffers is decided the same way."""
    c = [[1.0, 1.02, 0.98, 1.01, 0.99], [2.0, 2.04, 1.96, 2.02, 1.98], [3.0, 3.5, 2.6, 3.2, 2.8], [300.0, 305, 295, 302, 298]]
    py = [[1.5, 1.53, 1.47, 1.52, 1.48], [2.01, 2.03, 1.99, 2.0, 2.02], [3.1, 2.5, 3.6, 2.7, 3.3], [250.0, 252, 248, 251, 249]]
    sizes = [8, 64, 512, 4096]
    tables = [pd.DataFrame({"bytes": sizes, "repetitions": [10] * 4, "t_usec": [c[k][i] for k in range(4)],
                            "mbytes_per_sec": [1.0] * 4}) for i in range(5)]
    ctab = python_overhead.median_by_size(tables, "C")

    def table(trials):
        return pd.DataFrame({"bytes": sizes, "t_usec": [sorted(t)[2] for t in trials], "t_usec_trials": trials})

    pickled = [[3 * v for v in t] for t in py]
    out = python_overhead.overhead(ctab, {"buf": table(py), "pick": table(pickled)},
                                   c_runs=python_overhead.runs_by_size(tables))
    assert out["buf_vs_C"].tolist() == ["slower", "same", "undecided", "faster"]
    assert out["buf_extra_us"].iloc[3] < 0
    assert out["pick_vs_buf"].tolist() == ["slower"] * 4
    assert python_overhead.runs_by_size(tables)[8] == c[0]
    assert isinstance(interactive_plots.overhead_figure(out), Figure)
    assert "Filled points: decided slower than C (1 of 4 sizes with buffers" in python_overhead.overhead_takeaway(
        out, buffer="buf", pickle="pick")


def test_median_by_size_takes_the_middle_run():
    """Does combining three runs keep, per size, the median time?"""
    runs = [pd.DataFrame({"bytes": [1, 2], "repetitions": [10, 10], "t_usec": [t, 2 * t],
                          "mbytes_per_sec": [1 / t, 1 / t]}) for t in (1.0, 5.0, 2.0)]
    out = python_overhead.median_by_size(runs, "C")
    assert out["t_usec"].tolist() == [2.0, 4.0]
    assert out["runs"].tolist() == [3, 3] and set(out["transport"]) == {"C"}


def test_halo_figure_draws_one_panel_per_rank():
    """Does the halo figure draw one panel per rank (plus the colour bar)?"""
    import numpy as np

    fig = interactive_plots.halo_figure({0: np.zeros((4, 3)), 1: np.ones((4, 3))})
    assert len([a for a in fig.axes if a.get_title().startswith("rank")]) == 2
    with pytest.raises(HpclabError):
        interactive_plots.halo_figure({})


def test_eager_limit_is_read_from_open_mpi():
    """Is the vader eager limit a positive number of bytes read from ompi_info, and an unknown BTL an error?"""
    assert ompi.eager_limit("vader") > 0
    with pytest.raises(HpclabError, match="no btl_nosuchbtl_eager_limit"):
        ompi.eager_limit("nosuchbtl")


# --- real engines on the local cluster ----------------------------------------------------------


@pytest.mark.cluster
def test_engines_are_mpi_ranks_and_their_job_ends(cluster):
    """Do engines started through Slurm share one MPI_COMM_WORLD with engine id = rank, and does
    their job leave the queue when the with-block ends?"""
    with MPIEngines(ranks=2, queue_timeout=600) as eng:
        job = eng.job_id
        assert interactive.job_in_queue(job)
        assert sorted(eng.client.ids) == [0, 1]
        assert sorted(eng.hosts()) == [0, 1]  # asked of MPI on each engine, keyed by rank
        out = eng.execute("from mpi4py import MPI; c = MPI.COMM_WORLD; print(c.rank, c.size)", timeout=30)
        assert {k: v.split() for k, v in out.stdout.items()} == {0: ["0", "2"], 1: ["1", "2"]}
        assert "ipyparallel.engine --mpi" in eng.job_script.read_text()
        assert "Rendered from slurm-templates/engines.sh.j2" in eng.job_script.read_text()
        assert eng.session_dir.parent == paths.runs_dir().resolve() / KINDS["session"]  # a RunFolder of kind session
    assert not interactive.job_in_queue(job)
    assert eng.client is None and eng.view is None


@pytest.mark.cluster
def test_deadlock_times_out_and_engines_recover(cluster):
    """Do two blocking sends above the eager limit hang (while small ones pass), and after the
    timeout are the engines replaced by a working set and the stuck job gone?"""
    code = """
        import numpy as np
        from mpi4py import MPI
        comm = MPI.COMM_WORLD
        msg = np.zeros({n}, dtype=np.uint8)
        print("sending", flush=True)
        comm.Send(msg, dest=1 - comm.rank)
        comm.Recv(msg, source=1 - comm.rank)
        print("done", flush=True)
    """
    eng = MPIEngines(ranks=2, mca={"pml": "ob1"}, queue_timeout=600).start()
    try:
        # ob1 between the two ranks: vader on one node, tcp between nodes
        limit = ompi.eager_limit("vader" if len(set(eng.hosts().values())) == 1 else "tcp")
        small = eng.execute(code.format(n=limit // 4), timeout=30)
        assert small.finished and not small.restarted
        assert all("done" in out for out in small.stdout.values())
        first = eng.job_id
        big = eng.execute(code.format(n=64 * limit), timeout=5)
        assert not big.finished and big.restarted
        assert big.old_job == first and big.new_job == eng.job_id != first
        assert all("sending" in out and "done" not in out for out in big.stdout.values())
        assert not interactive.job_in_queue(first)
        assert "NOT finished" in str(big)
        again = eng.execute("from mpi4py import MPI; print(MPI.COMM_WORLD.rank)", timeout=30)
        assert again.finished and {k: v.strip() for k, v in again.stdout.items()} == {0: "0", 1: "1"}
    finally:
        eng.stop()
    assert not interactive.job_in_queue(eng.job_id)


@pytest.mark.cluster
def test_engines_job_ends_when_the_python_process_exits(cluster, tmp_path):
    """When the kernel exits without stopping the engines (a restart), does their job still end?"""
    script = tmp_path / "leave.py"
    script.write_text("from hpclab.tools.interactive import MPIEngines\n"
                      "e = MPIEngines(ranks=1, queue_timeout=600).start()\n"
                      "print('JOB', e.job_id, flush=True)\n")
    res = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=900,
                         env=dict(os.environ))
    assert res.returncode == 0, res.stderr[-2000:]
    job = res.stdout.split("JOB", 1)[1].split()[0]
    assert not interactive.job_in_queue(job)


def test_overhead_answers_follow_from_the_decisions():
    """Are notebook 90's three questions answered from the per-size decisions: a constant
    small-message cost, the sizes where pickling is decided slower than buffers, and the size from
    which the buffer path is no longer decided slower than C (only sizes decided 'slower' count)?"""
    import pandas as pd

    t = pd.DataFrame({"bytes": [0, 1, 64, 1024, 65536, 1048576], "C_us": [1, 1, 1.1, 1.5, 20, 300],
                      "mpi4py buffer_extra_us": [2, 2, 2.1, 2.2, 2.5, 3],
                      "mpi4py buffer_x_C": [3, 3, 2.9, 2.5, 1.12, 0.87],
                      "mpi4py buffer_vs_C": ["slower", "slower", "slower", "slower", "same", "faster"],
                      "mpi4py pickle_extra_us": [2, 2, 2.1, 6, 40, 900], "mpi4py pickle_x_C": [3, 3, 3, 5, 3, 4],
                      "mpi4py pickle_vs_C": ["slower"] * 6,
                      "mpi4py pickle_vs_mpi4py buffer": ["same", "same", "undecided", "slower", "slower", "slower"]})
    small, pickling, cheap = python_overhead.overhead_answers(t)
    assert "about constant per message" in small
    assert "at 3 of 5 sizes" in pickling and "6.0 us at 1024 B to 900.0 us at 1048576 B" in pickling
    assert "From 65536 B on the buffer path is no longer decided slower than C (1 same, 1 faster)" in cheap
    t2 = t.assign(**{"mpi4py buffer_extra_us": [2, 2, 20, 200, 250, 300]})
    assert "grows with size" in python_overhead.overhead_answers(t2)[0]
    slow = t.assign(**{"mpi4py buffer_vs_C": ["slower"] * 6})
    assert "decided slower than C at the largest sizes too" in python_overhead.overhead_answers(slow)[2]
    takeaway = python_overhead.latency_takeaway(t.assign(**{"mpi4py buffer_us": t["C_us"] + t["mpi4py buffer_extra_us"],
                                                             "mpi4py pickle_us": t["C_us"] + t["mpi4py pickle_extra_us"]}))
    assert "at 1 B" in takeaway and "at 1048576 B" in takeaway and "fades" in takeaway and len(takeaway.split()) <= 40
