"""Tests for the profilers on the Poisson solver (hpclab.tools.profilers), its memory roofline
(hpclab.analysis.roofline, hpclab.plots.roofline) and poisson --fuse.

Parsers are checked on outputs captured from real runs on the course VM (tests/data/hotspots/);
live tests run callgrind and perf on a tiny grid without Slurm, and one cluster test runs a
profile as a Slurm job step. Exact answers where they exist: callgrind counts are deterministic,
and --fuse must reproduce the residual history bit for bit.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path

import pandas as pd
import pytest

from hpclab.analysis import roofline
from hpclab.course.lessons import scaling as scaling_lesson
from hpclab.core import paths
from hpclab.core.errors import HpclabError
from hpclab.plots import roofline as roofline_plots
from hpclab.tools import profilers

DATA = Path(__file__).parent / "data" / "hotspots"
POISSON = paths.bin_dir() / "poisson"


@pytest.fixture
def runs_root(tmp_path, monkeypatch):
    monkeypatch.setenv("HPCLAB_RUNS", str(tmp_path / "runs"))
    return tmp_path / "runs"


def _needs_callgrind():
    st = profilers.valgrind_status()
    if not (st["installed"] and st["annotate"]):
        pytest.skip("valgrind is not installed")


# --- parsers on captured output -----------------------------------------------------------------


def test_callgrind_annotate_rows_match_the_text():
    """Does the parser read every function row of callgrind_annotate, with its exact count?"""
    text = (DATA / "callgrind-annotate-self.txt").read_text()
    df = profilers.parse_callgrind_annotate(text)
    row = df.set_index("function").loc["residuum._omp_fn.0"]
    # the count printed in the text, read independently here
    m = re.search(r"^\s*([\d,]+) \(.*:residuum\._omp_fn\.0 \[", text, re.M)
    assert row["count"] == int(m.group(1).replace(",", ""))
    assert row["object"].endswith("/poisson")
    total = int(re.search(r"^\s*([\d,]+) \(100\.0%\)\s+PROGRAM TOTALS", text, re.M).group(1).replace(",", ""))
    # the default threshold lists the functions that make up 99% of the total
    assert 0.99 * total <= df["count"].sum() <= total


def test_callgrind_annotate_stops_before_source_annotation():
    """Are the per-line counts of the auto-annotated source kept out of the function table?"""
    text = (DATA / "callgrind-annotate-self.txt").read_text()
    df = profilers.parse_callgrind_annotate(text)
    assert not df["function"].str.contains(r"\(|;|=", regex=True).any()
    assert df["function"].is_unique


def test_inclusive_is_at_least_self():
    """Does every function's inclusive count include its own instructions?"""
    merged = profilers.merge_self_inclusive(
        profilers.parse_callgrind_annotate((DATA / "callgrind-annotate-self.txt").read_text()),
        profilers.parse_callgrind_annotate((DATA / "callgrind-annotate-inclusive.txt").read_text()))
    assert (merged["inclusive"] >= merged["self"]).all()
    assert merged["share"].sum() == pytest.approx(1.0)


def test_perf_report_samples_add_up_to_the_header():
    """Do the parsed perf samples add up to the 'Samples:' count perf printed?"""
    text = (DATA / "perf-report.txt").read_text()
    df = profilers.parse_perf_report(text)
    header = int(re.search(r"^# Samples: (\d+)", text, re.M).group(1))
    assert df["self"].sum() == header
    assert set(df["kind"]) <= {"kernel", "user"}
    assert not df["function"].str.startswith("[").any()


def test_perf_stat_marks_hidden_counters():
    """Is a '<not supported>' hardware counter reported as unsupported rather than zero?"""
    df = profilers.parse_perf_stat((DATA / "perf-stat.csv").read_text()).set_index("event")
    assert not df.loc["instructions", "supported"]
    assert pd.isna(df.loc["instructions", "value"])
    assert df.loc["task-clock", "supported"] and df.loc["task-clock", "value"] > 0


@pytest.mark.parametrize("parser", [profilers.parse_callgrind_annotate, profilers.parse_perf_report,
                                    profilers.parse_perf_stat])
def test_parsers_reject_unrelated_text(parser):
    """Does a parser given the wrong file say so instead of returning an empty table?"""
    with pytest.raises(HpclabError):
        parser("hello\nthis is not a profile\n")


@pytest.mark.parametrize("function,obj,phase", [
    ("sweep._omp_fn.0", "/x/poisson", "red/black sweeps"),
    ("residuum._omp_fn.0", "poisson", "residuum"),
    ("exchange", "poisson", "halo copy"),
    ("main._omp_fn.2", "poisson", "set-up"),
    ("__sin_fma", "/usr/lib/x86_64-linux-gnu/libm.so.6", "set-up"),
    ("PMPI_Allreduce", "/usr/lib/x86_64-linux-gnu/libmpi.so.40.30.4", "MPI library"),
    ("do_lookup_x", "ld-linux-x86-64.so.2", "dynamic loader"),
    ("exc_page_fault", "[kernel.kallsyms]", "operating system"),
    ("malloc", "libc.so.6", "other"),
    ("strange", float("nan"), "other"),
])
def test_functions_map_to_solver_phases(function, obj, phase):
    """Is each kind of function charged to the right part of the solver?"""
    assert profilers.phase_of(function, obj) == phase


# --- roofline arithmetic ------------------------------------------------------------------------


def test_traffic_model_counts_three_passes_or_two():
    """Does one lattice update move 64 bytes, and 48 when the residuum is fused into the sweep?"""
    assert roofline.bytes_per_update() == 64
    assert roofline.bytes_per_update(fused=True) == 48
    assert len(roofline.traffic_model()) == 3 and len(roofline.traffic_model(True)) == 2


def test_roofline_bound_is_bandwidth_over_bytes():
    """Is the roofline rate the bandwidth (bytes really moved) divided by the bytes per update?"""
    r = roofline.roofline(lups=1e8, bandwidth_mb_s=6400.0)
    assert r["bound_lups"] == pytest.approx(6400e6 / 64)
    assert r["fraction"] == pytest.approx(1.0)
    assert r["achieved_gb_s"] == pytest.approx(6.4)
    with pytest.raises(HpclabError):
        roofline.roofline(lups=0, bandwidth_mb_s=1000.0)


def test_working_set_includes_the_halo():
    """Does the working set count both arrays with their halo (2 x (n+2)^2 doubles)?"""
    assert roofline.working_set_bytes(1) == 2 * 9 * 8


def test_cache_sizes_from_lstopo(tmp_path):
    """Are the data cache levels read from a run's lstopo XML, instruction caches left out?"""
    (tmp_path / "provenance").mkdir()
    xml = (Path(__file__).parent / "data" / "lstopo_machine.xml").read_text()
    (tmp_path / "provenance" / "lstopo-vm.xml").write_text(xml)
    df = roofline.cache_sizes(tmp_path)
    assert list(df["level"]) == sorted(df["level"])
    assert (df["bytes"] > 0).all()
    assert df["bytes"].is_monotonic_increasing
    with pytest.raises(HpclabError):
        roofline.cache_sizes(tmp_path / "nothing")


# --- live profiles (no Slurm) -------------------------------------------------------------------


def test_callgrind_counts_are_exact_and_linear_in_iterations(runs_root):
    """Does callgrind count exactly twice the sweep instructions for twice the iterations?"""
    _needs_callgrind()
    a = profilers.callgrind(n=32, iters=4, slurm=False)
    b = profilers.callgrind(n=32, iters=8, slurm=False)
    sa = a.functions.set_index("function")["self"]
    sb = b.functions.set_index("function")["self"]
    # every sweep has the same loop bounds, so each costs the same instructions
    assert sb["sweep._omp_fn.0"] == 2 * sa["sweep._omp_fn.0"]
    assert a.path != b.path and a.path.parent == b.path.parent
    assert a.result["results"]["iterations"] == 4


def test_callgrind_totals_match_valgrind_summary(runs_root):
    """Do the per-function counts add up to the total valgrind prints at exit?"""
    _needs_callgrind()
    p = profilers.callgrind(n=16, iters=2, slurm=False)
    m = re.search(r"I\s+refs:\s+([\d,]+)", (p.path / "stderr").read_text())
    assert p.total == int(m.group(1).replace(",", ""))
    assert set(p.phases()["phase"]) == set(profilers.PHASES)


def test_perf_record_finds_the_compute_loops(runs_root):
    """Does a perf time profile put samples in the solver's sweeps and residuum?"""
    if not profilers.perf_status()["sampling"]:
        pytest.skip("perf cannot sample here: " + profilers.perf_status()["detail"])
    p = profilers.perf_record(n=512, iters=20, slurm=False)
    ph = p.phases().set_index("phase")["self"]
    assert ph["red/black sweeps"] > 0 and ph["residuum"] > 0
    assert p.functions["self"].sum() > 0
    assert (p.path / "perf.data").is_file() and (p.path / "perf-report.txt").is_file()


def test_bad_profile_input_is_refused(runs_root):
    """Are a bad grid size, iteration count or folder name refused with a clear error?"""
    _needs_callgrind()
    with pytest.raises(HpclabError, match="grid size"):
        profilers.callgrind(n=0, slurm=False)
    with pytest.raises(HpclabError, match="iters"):
        profilers.callgrind(n=8, iters=0, slurm=False)
    with pytest.raises(HpclabError, match="folder name"):
        profilers.callgrind(n=8, iters=1, experiment="../up", slurm=False)


def test_failed_profile_keeps_its_folder_and_says_why(runs_root):
    """Does a solver error end in an HpclabError pointing at the kept folder?"""
    _needs_callgrind()
    with pytest.raises(HpclabError) as exc:
        profilers.callgrind(n=8, iters=1, extra_args=["--no-such-flag"], slurm=False)
    assert "exit code" in str(exc.value)
    folders = list((runs_root / profilers.PROFILE_ROOT / "06-hotspots").iterdir())
    assert len(folders) == 1 and (folders[0] / "stderr").is_file()


@pytest.mark.cluster
def test_callgrind_runs_as_a_slurm_job_step(cluster, runs_root):
    """Does a profile run as a one-task Slurm step and record the srun command?"""
    _needs_callgrind()
    p = profilers.callgrind(n=16, iters=2)
    assert p.command[0] == "srun"
    assert (p.path / "command.txt").read_text().startswith("srun ")
    assert p.result["validation"]["ok"]


# --- poisson --fuse -----------------------------------------------------------------------------


def _solve(tmp_path: Path, name: str, args: list[str], np: int = 1, threads: int = 1) -> dict:
    out = tmp_path / f"{name}.json"
    env = dict(os.environ, OMP_NUM_THREADS=str(threads), OMPI_ALLOW_RUN_AS_ROOT="1",
               OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    argv = [str(POISSON), *args, "--json", str(out)]
    if np > 1:
        argv = ["mpirun", "--oversubscribe", "-np", str(np), *argv]
    res = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=120)
    assert res.returncode == 0, res.stderr[-2000:]
    return json.loads(out.read_text())


@pytest.mark.parametrize("n,iters,np,threads,grid", [
    (64, 40, 1, 1, None), (37, 60, 1, 2, None), (3, 5, 1, 3, None), (1, 3, 1, 1, None),
    (41, 30, 2, 1, "2x1"), (41, 30, 2, 1, "1x2"), (29, 20, 3, 2, "3x1"),
])
def test_fused_residuum_gives_identical_results(tmp_path, n, iters, np, threads, grid):
    """Does --fuse reproduce the residual history and the error bit for bit, for any grid and threads?"""
    if not POISSON.is_file():
        pytest.skip("build the kernels first: make -C src")
    args = ["--n", str(n), "--iters", str(iters)] + (["--grid", grid] if grid else [])
    plain = _solve(tmp_path, "plain", args, np, threads)
    fused = _solve(tmp_path, "fused", args + ["--fuse"], np, threads)
    assert fused["validation"]["ok"]
    assert fused["results"]["fuse"] is True and plain["results"]["fuse"] is False
    assert fused["results"]["residual_history"] == plain["results"]["residual_history"]
    assert fused["results"]["error_max"] == plain["results"]["error_max"]
    assert fused["config"]["fuse"] is True


def test_annotated_source_shows_the_residuum_lines(runs_root):
    """Does the source view of a callgrind profile cover the residuum loop with its counts?"""
    _needs_callgrind()
    p = profilers.callgrind(n=16, iters=2, slurm=False)
    text = profilers.annotated_source(p, "static double residuum(", "MPI_Allreduce")
    assert "row_residual_max" in text and text.splitlines()[-1].strip().endswith(";")
    with pytest.raises(HpclabError):
        profilers.annotated_source(p, "no such text anywhere", "x")


def test_repetitions_summarised_as_min_median_max():
    """Are repetitions summarised per group as min, median, max and a run count?"""
    t = pd.DataFrame({"n": [8, 8, 8, 16], "lups": [1.0, 3.0, 2.0, 5.0]})
    s = roofline.spread(t, "n", "lups")
    assert list(s.loc[8]) == [1.0, 2.0, 3.0, 3]
    assert s.loc[16, "runs"] == 1


def test_same_answers_spots_a_different_history():
    """Does one differing residual history mark its grid size as not identical?"""
    rates = pd.DataFrame({"n": [8, 8, 16, 16], "history": [(1.0, 0.5), (1.0, 0.5), (1.0, 0.5), (1.0, 0.25)]})
    out = roofline.same_answers(rates).set_index("n")["identical"]
    assert out[8] and not out[16]


def test_iters_for_keeps_work_constant():
    """Do two grid sizes get iteration counts giving the same number of updates?"""
    assert roofline.iters_for(100, 1e6) == 100 and roofline.iters_for(1000, 1e6) == roofline.MIN_ITERATIONS == 3


def test_roofline_figure_and_bad_table():
    """Does the roofline figure draw from a rates table, and refuse a table without lups?"""
    rates = pd.DataFrame({"n": [64, 64, 512, 512], "variant": ["separate", "fused"] * 2,
                          "lups": [5e8, 6e8, 4e8, 4.5e8]})
    caches = pd.DataFrame({"level": [1, 2], "bytes": [49152, 1048576], "count": [2, 2]})
    fig = roofline_plots.plot_roofline(rates, 40000.0, caches)
    ax = fig.axes[0]
    assert "million" in ax.get_ylabel()
    # the dashed bounds are Triad / bytes per update, in millions
    ys = sorted(line.get_ydata()[0] for line in ax.get_lines() if line.get_linestyle() == "--")
    assert ys == pytest.approx([40000 / 64, 40000 / 48])
    with pytest.raises(HpclabError):
        roofline_plots.plot_roofline(rates.drop(columns="lups"), 40000.0)


def test_seed_hotspots_are_labelled_as_quoted():
    """Does every quoted seed figure carry its citation?"""
    df = profilers.seed_hotspots()
    assert (df["source"] == profilers.ITAC_2014).all()
    assert df["cpu_time_ms"].is_monotonic_decreasing


# --- the memory roof: known traffic, one size rule, no memory-resident run above it ----------------

ROOF = Path(__file__).parent / "data" / "roof"


def _roof_data():
    doc = json.loads((ROOF / "runs.json").read_text())

    class _Run:  # what poisson_rates reads of a Run: run_id and result()
        def __init__(self, d):
            self.run_id, self._d = d["run_id"], d

        def result(self):
            return self._d

    return doc["stream"], [_Run(d) for d in doc["poisson"]], roofline.cache_sizes(ROOF)


def test_roof_kernel_has_the_solvers_read_write_mix():
    """Does the STREAM kernel chosen for each variant read and write, with write-allocate, in the
    same proportion as the solver's traffic model (3:1 separate, 2:1 fused)?"""
    stream, _, _ = _roof_data()
    t = roofline.stream_traffic(stream[0]).set_index("function")
    for fused, variant in ((False, "separate"), (True, "fused")):
        m = roofline.traffic_model(fused)
        k = t.loc[roofline.ROOF_KERNEL[variant]]
        assert m["read_bytes"].sum() * k["write_bytes"] == m["write_bytes"].sum() * k["read_bytes"]


def test_stream_traffic_counts_write_allocate():
    """Is Triad's real bandwidth 32/24 of its reported rate, Update's (in place) and Sum's
    (read-only) equal to it, on a recorded run and on a report older than Update and Sum?"""
    stream, _, _ = _roof_data()
    t = roofline.stream_traffic(stream[0]).set_index("function")
    assert t.loc["Triad", "moved_mb_s"] == pytest.approx(t.loc["Triad", "reported_mb_s"] * 4 / 3)
    assert t.loc["Copy", "moved_mb_s"] == pytest.approx(t.loc["Copy", "reported_mb_s"] * 3 / 2)
    for name in ("Update", "Sum"):
        assert t.loc[name, "moved_mb_s"] == t.loc[name, "reported_mb_s"]
    old = json.loads((Path(__file__).parent / "data" / "runs" / "stream-bind-core" / "result.json").read_text())
    t_old = roofline.stream_traffic(old)
    assert list(t_old["function"]) == ["Copy", "Scale", "Add", "Triad"]
    with pytest.raises(HpclabError):
        roofline.stream_traffic({"results": {}})


def test_one_size_rule_from_the_last_level_cache():
    """Are STREAM's arrays and the memory-resident grid both at least 4x the last-level cache
    (32 MiB L3 on the course VM), and is a working set labelled by where it fits?"""
    caches = roofline.cache_sizes(ROOF)
    llc = roofline.last_level_cache(caches)
    assert llc == 32 * 2**20
    n_el = roofline.stream_elements(llc)
    assert n_el * 8 >= 4 * llc and (n_el - 1_000_000) * 8 < 4 * llc
    n = roofline.memory_resident_n(llc)
    assert roofline.working_set_bytes(n) >= 4 * llc > roofline.working_set_bytes(n - 256)
    assert roofline.residency(roofline.working_set_bytes(192), caches) == "L2"
    assert roofline.residency(roofline.working_set_bytes(1024), caches) == "L3"
    assert roofline.residency(roofline.working_set_bytes(2048), caches) == "partly cached"
    assert roofline.residency(roofline.working_set_bytes(n), caches) == "memory"


def test_no_recorded_memory_resident_run_exceeds_its_roof():
    """On recorded runs, is every memory-resident grid (median and fastest run) at or below its
    roof, while an in-cache grid may exceed it (and is labelled as in cache)?"""
    stream, runs, caches = _roof_data()
    rates = roofline.poisson_rates(runs)
    t = roofline.roof_table(rates, stream, caches)
    mem = t[t["residency"] == "memory"]
    assert len(mem) == 2  # n = 3072, separate and fused
    assert (mem["share"] <= 1.0).all()
    assert (mem["max"] <= mem["roof_lups"]).all()
    assert set(t.loc[t["share"] > 1.0, "residency"]) <= {"L1", "L2", "L3", "partly cached"}
    row = scaling_lesson.roofline_fidelity(rates, stream, caches)
    assert row["share"] == pytest.approx(row["reported_share"] * 3 / 4)  # Triad: 24 B of 32 counted


def test_a_real_memory_resident_run_stays_below_its_roof(tmp_path):
    """Run STREAM (arrays >= 4x the LLC) and the solver (grid >= 4x the LLC) on one core, now: is
    the solver at or below the roof its own traffic allows?"""
    if not POISSON.exists() or not (paths.bin_dir() / "stream").exists():
        pytest.skip("kernels not built (make -C src)")
    caches = roofline.node_caches()
    llc = roofline.last_level_cache(caches)
    env = {**os.environ, "OMP_NUM_THREADS": "1", "OMPI_ALLOW_RUN_AS_ROOT": "1",
           "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1"}
    cpu = str(sorted(os.sched_getaffinity(0))[-1])
    streams = []
    for k in range(2):  # the best of two: a roof is an upper bound, noise only lowers it
        out = tmp_path / f"stream{k}.json"
        subprocess.run(["taskset", "-c", cpu, str(paths.bin_dir() / "stream"), "--size",
                        str(roofline.stream_elements(llc)), "--reps", "4", "--json", str(out)],
                       env=env, check=True, capture_output=True, timeout=120)
        streams.append(json.loads(out.read_text()))
    n = roofline.memory_resident_n(llc)
    out = tmp_path / "poisson.json"
    subprocess.run(["taskset", "-c", cpu, str(POISSON), "--n", str(n), "--iters", "4", "--json", str(out)],
                   env=env, check=True, capture_output=True, timeout=120)
    lups = json.loads(out.read_text())["results"]["lattice_updates_per_sec"]
    roof = roofline.memory_roof(streams)
    assert roofline.residency(roofline.working_set_bytes(n), caches) == "memory"
    assert roofline.roofline(lups, roof["moved_mb_s"])["fraction"] <= 1.0


def test_alone_on_the_node_reserves_every_core_for_one_thread():
    """Do the roof's spec fields make a valid one-rank, one-thread spec that reserves all the
    node's cores (so no job of the same experiment shares its memory bus)?"""
    from hpclab.spec import model as spec

    fields = roofline.alone_on_the_node(2)
    s = spec.make_spec(kernel="stream", ntasks=1, args={"size": 1000}, **fields, experiment="t", label="t")
    assert s.cpus_per_task == 2 and s.omp.num_threads == 1 and s.omp.proc_bind == "true"
    assert roofline.alone_on_the_node(None)["cpus_per_task"] == 1


def test_profile_job_step_comes_from_the_one_builder(runs_root):
    """Does a profile under Slurm start with the builder's srun words (one task, one core, the
    site's partition, account and QoS) and run in a RunFolder of kind profile?"""
    import shutil

    from hpclab.jobs import templates
    from hpclab.runs.folder import KINDS
    from hpclab.site.profile import load_site

    if not shutil.which("srun"):
        pytest.skip("no srun here")
    words, env = profilers._launch_prefix(True, "00:15:00")
    assert words == templates.step_argv(load_site(), job_name="hpclab-profile", time="00:15:00")
    assert env["OMP_NUM_THREADS"] == "1"
    folder = profilers._new_folder("06-hotspots")
    assert folder.parent == runs_root / KINDS["profile"] / "06-hotspots" and not any(folder.iterdir())


def test_the_profiling_binary_is_built_where_the_user_may_write(tmp_path, monkeypatch):
    """A room's student cannot write the course copy's build/: with HPCLAB_OUTPUT set (their
    server sets it), are the profiling binary and its objects made there?"""
    from hpclab.core import commands

    monkeypatch.setenv(paths.OUTPUT_ENV, str(tmp_path / "mine"))
    made = []

    def make(argv, what, **kw):
        made.append(argv)
        exe = Path(next(a.split("=", 1)[1] for a in argv if a.startswith("BINDIR="))) / "poisson"
        exe.parent.mkdir(parents=True)
        exe.write_text("")
        return subprocess.CompletedProcess(argv, 0, "", "")

    monkeypatch.setattr(commands, "run", make)
    exe = profilers.profiling_binary(rebuild=True)
    assert exe == tmp_path / "mine" / "profile" / "bin" / "poisson"
    assert f"OBJDIR={tmp_path / 'mine' / 'profile' / 'obj' / 'poisson'}" in made[0]
