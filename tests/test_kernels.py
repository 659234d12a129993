"""The C kernels (pingpong, stream, poisson) against docs/kernel-contract.md, run for real.

Every test launches the built binaries under Open MPI's mpirun (or as a singleton) with small
sizes, and checks properties that hold on any machine: the report structure, validation,
bit-identical Poisson results for every process grid and OpenMP thread count, payload
integrity, the transport the library reports (forced MCA selections, and the default one checked
against Open MPI's own verbose selection output), the placement a binding request produces, and
the one-line exit(2) for bad input.
"""

from __future__ import annotations

import json
import math
import os
import re
import shutil
import subprocess

import pytest

from hpclab.core import paths
from hpclab.kernels import registry

# every kernel hpclab knows is held to the contract (program runs the user's own command: none)
KERNELS = tuple(n for n in registry.names() if registry.get(n).contract)
COMMON_KEYS = ("kernel", "version", "ranks", "threads", "build_flags", "compiler", "mpi_library")
# Small, fast arguments per kernel (each run well under a second on 2 cores).
SMALL = {
    "pingpong": ["--max-bytes", "1024", "--reps", "50"],
    "stream": ["--size", "20000", "--reps", "3"],
    "poisson": ["--n", "24", "--iters", "20"],
    "collectives": ["--sizes", "8,1024", "--reps", "5"],
}
RESULT_KEYS = {
    "pingpong": ("transport", "pairs", "check_payload", "rows"),
    "stream": ("array_elements", "bytes_per_array", "repetitions", "kernels", "per_rank",
               "aggregate"),
    "poisson": ("n", "grid", "exchange", "iterations", "residual_history", "final_residual",
                "error_max", "wall_time", "lattice_updates_per_sec", "per_rank"),
    "collectives": ("ops", "sizes", "orders", "variants", "gate", "rows"),
}

pytestmark = pytest.mark.skipif(not shutil.which("mpicc") or not shutil.which("mpirun"),
                                reason="Open MPI (mpicc, mpirun) is not installed")


@pytest.fixture(scope="session")
def bins():
    """Build the kernels once per session (incremental: a no-op when up to date)."""
    out = subprocess.run(["make", "-C", str(paths.repo() / "src")], capture_output=True,
                         text=True)
    assert out.returncode == 0, f"make -C src failed:\n{out.stdout}\n{out.stderr}"
    return paths.bin_dir()


def mpi_env(threads: int = 1, extra: dict | None = None) -> dict:
    env = dict(os.environ)
    env.update(OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
               OMP_NUM_THREADS=str(threads))
    env.update(extra or {})
    return env


def run(bins, kernel, args, np=None, mpirun_opts=(), threads=1, timeout=60):
    """Run a kernel; np=None runs it as a singleton (no mpirun)."""
    cmd = [str(bins / registry.get(kernel).binary), *args]
    if np is not None:
        cmd = ["mpirun", "-np", str(np), "--oversubscribe", "-x", "OMP_NUM_THREADS",
               *mpirun_opts, *cmd]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout,
                          env=mpi_env(threads))


def run_json(bins, tmp_path, kernel, args, np=2, **kw):
    """Run with --json into a fresh file; return (completed process, parsed report)."""
    out = tmp_path / f"{kernel}-{len(list(tmp_path.iterdir()))}.json"
    p = run(bins, kernel, [*args, "--json", str(out)], np=np, **kw)
    assert p.returncode == 0, f"{kernel} {args} exited {p.returncode}:\n{p.stdout}\n{p.stderr}"
    return p, json.loads(out.read_text())


def key_block(stdout: str) -> tuple[dict, list[str]]:
    """The key = value lines between the banner and the validation line, and the raw lines."""
    lines = stdout.splitlines()
    block = []
    for line in lines[2:]:
        if line == "Solution validates" or line.startswith("ERROR:"):
            break
        block.append(line)
    return {k.strip(): v for k, v in (b.split(" = ", 1) for b in block)}, block


@pytest.mark.parametrize("kernel", KERNELS)
def test_report_follows_the_contract(bins, tmp_path, kernel):
    """Does every kernel print the contract's text report and write the same report as JSON?"""
    args = SMALL[kernel]
    p, doc = run_json(bins, tmp_path, kernel, args, np=2)
    lines = p.stdout.splitlines()
    assert lines[0].startswith("arguments =") and lines[0].split()[2:] == doc["arguments"]
    assert re.fullmatch(rf"hpclab {kernel} \S+ - .+", lines[1]), lines[1]
    kv, block = key_block(p.stdout)
    # One width for every key: the '=' of every line sits in the same column.
    assert len({line.index(" = ") for line in block}) == 1, block
    for key in COMMON_KEYS:
        assert key in kv, f"missing key {key}"
    assert kv["kernel"] == kernel and kv["ranks"] == "2"
    assert kv["build_flags"].startswith(("mpicc", "gcc", "cc", "clang"))
    for rank in (0, 1):
        assert re.fullmatch(r"\S+ cpu=\d+ allowed=[\d,-]+", kv[f"host[{rank}]"])
    assert lines[2 + len(block)] == "Solution validates"

    assert doc["contract"] == 1 and doc["kernel"] == kernel and doc["arguments"][:len(args)] == args
    assert doc["validation"] == {"ok": True, "message": "Solution validates"}
    for key in COMMON_KEYS:
        assert str(doc["config"][key]) == kv[key] or key in ("ranks", "threads")
    assert [e["rank"] for e in doc["placement"]] == [0, 1]
    for e in doc["placement"]:
        assert set(e) >= {"rank", "host", "cpu", "allowed", "threads"}
        assert e["cpu"] in e["allowed"]
    for key in RESULT_KEYS[kernel]:
        assert key in doc["results"], f"results lacks {key}"


def test_stream_validates_as_a_single_process_without_mpirun(bins, tmp_path):
    """Does stream run as a singleton (no mpirun) and validate, with one thread line per thread?"""
    p, doc = run_json(bins, tmp_path, "stream", SMALL["stream"], np=None, threads=2)
    kv, _ = key_block(p.stdout)
    assert kv["ranks"] == "1" and kv["threads"] == "2"
    assert "thread[0.0]" in kv and "thread[0.1]" in kv
    assert doc["validation"]["ok"]
    res = doc["results"]
    for name in ("Copy", "Scale", "Add", "Triad"):
        k = res["kernels"][name]
        assert 0 < k["min_time"] <= k["avg_time"] <= k["max_time"]
        # The whole-job clock runs until the closing barrier, so it never beats the rank's own.
        assert k["best_mb_s"] <= res["per_rank"][0][name] * (1 + 1e-12)


def test_stream_aggregate_is_the_sum_of_per_rank_rates(bins, tmp_path):
    """With two ranks, is the aggregate the per-rank sum and never below the whole-job rate?"""
    _, doc = run_json(bins, tmp_path, "stream", SMALL["stream"], np=2)
    res = doc["results"]
    for name in ("Copy", "Scale", "Add", "Triad"):
        total = sum(r[name] for r in res["per_rank"])
        assert math.isclose(res["aggregate"][name], total, rel_tol=1e-12)
        assert res["aggregate"][name] >= res["kernels"][name]["best_mb_s"] * (1 - 1e-12)


EXCHANGES = ("blocking", "sendrecv", "nonblocking", "naive")


def poisson_cases():
    yield 1, "1x1", "sendrecv"
    for grid in ("2x1", "1x2"):
        for ex in EXCHANGES:
            yield 2, grid, ex
    for ex in EXCHANGES:
        yield 4, "2x2", ex


def test_poisson_gives_the_same_answer_for_every_grid_and_exchange(bins, tmp_path):
    """Are residual history and error identical (to round-off) at 1, 2 and 4 ranks, for grids
    1x1, 2x1, 1x2, 2x2 and all four exchange variants?"""
    results = {}
    for np, grid, ex in poisson_cases():
        _, doc = run_json(bins, tmp_path, "poisson",
                          ["--n", "24", "--iters", "30", "--grid", grid, "--exchange", ex], np=np)
        assert doc["validation"]["ok"]
        assert doc["results"]["grid"] == [int(g) for g in grid.split("x")]
        results[(np, grid, ex)] = doc["results"]
    ref = results[(1, "1x1", "sendrecv")]
    for case, res in results.items():
        assert res["iterations"] == ref["iterations"] == 30
        assert len(res["residual_history"]) == len(ref["residual_history"])
        for a, b in zip(res["residual_history"], ref["residual_history"]):
            assert math.isclose(a, b, rel_tol=1e-12), case
        assert math.isclose(res["error_max"], ref["error_max"], rel_tol=1e-12), case


def test_naive_exchange_above_the_eager_limit_serialises_but_finishes_with_the_same_answer(bins, tmp_path):
    """With halo messages of at least 1024 doubles (8 kB, twice Open MPI's shared-memory eager
    limit of 4 kB), where every blocking send waits for its receive: does the naive exchange (all ranks send up first)
    on a 4-rank chain finish instead of deadlocking, because the grid is not periodic and the
    last rank's send goes to MPI_PROC_NULL, and give the same residuals and error as the
    non-blocking one, on the 4x1 chain and on 2x2?"""
    results = {}
    for grid in ("4x1", "2x2"):
        for ex in ("naive", "nonblocking"):
            p, doc = run_json(bins, tmp_path, "poisson",
                              ["--n", "2048", "--iters", "2", "--grid", grid, "--exchange", ex],
                              np=4, timeout=120)
            assert doc["validation"]["ok"] and doc["results"]["exchange"] == ex
            assert key_block(p.stdout)[0]["exchange"] == ex
            results[(grid, ex)] = doc["results"]
    ref = results[("4x1", "nonblocking")]
    for case, res in results.items():
        assert res["residual_history"] == pytest.approx(ref["residual_history"], rel=1e-12), case
        assert res["error_max"] == pytest.approx(ref["error_max"], rel=1e-12), case


def test_poisson_rectangle_validates_and_any_grid_gives_the_same_answer(bins, tmp_path):
    """On a 40 x 7 rectangle (--shape; short rows, as a 1x384 subdomain has), and its transpose:
    does the solver meet the rectangle's error bound, and give the same residuals on 1 rank and on
    2x1 and 1x2 grids with the naive exchange?"""
    for shape in ("40x7", "7x40"):
        results = {}
        for np, grid in ((1, "1x1"), (2, "2x1"), (2, "1x2")):
            _, doc = run_json(bins, tmp_path, "poisson", ["--shape", shape, "--iters", "40", "--grid", grid,
                                                          "--exchange", "naive"], np=np)
            assert doc["validation"]["ok"]
            res = doc["results"]
            assert res["shape"] == [int(v) for v in shape.split("x")] and res["n"] == res["shape"][0]
            assert sum(r["local"][0] * r["local"][1] for r in res["per_rank"]) == 40 * 7
            results[grid] = res
        for grid, res in results.items():
            assert res["residual_history"] == pytest.approx(results["1x1"]["residual_history"], rel=1e-12), grid
    # converged, the error is the discretisation error: below the bound, and not far below it
    _, doc = run_json(bins, tmp_path, "poisson", ["--shape", "60x12", "--tol", "1e-10"], np=None)
    res = doc["results"]
    assert res["converged"] and 0.1 * res["error_bound"] < res["error_max"] <= res["error_bound"]


@pytest.mark.parametrize("fuse", [False, True], ids=["residuum-separate", "residuum-fused"])
def test_poisson_two_threads_give_the_same_answer_as_one(bins, tmp_path, fuse):
    """Do 2 OpenMP threads per rank give the residual history and error of 1 thread (to
    round-off), on one rank and on a 2x1 grid, with the residuum separate and fused into the black
    sweep (whose thread-block edges are handled apart)? N = 33 splits unevenly over ranks and
    threads."""
    args = ["--n", "33", "--iters", "30", *(["--fuse"] if fuse else [])]
    results = {}
    for np, grid in ((1, "1x1"), (2, "2x1")):
        for threads in (1, 2):
            _, doc = run_json(bins, tmp_path, "poisson", [*args, "--grid", grid], np=np,
                              threads=threads)
            assert doc["validation"]["ok"]
            assert doc["config"]["threads"] == threads and doc["results"]["fuse"] is fuse
            assert all(len(e["threads"]) == threads for e in doc["placement"])
            results[(grid, threads)] = doc["results"]
    ref = results[("1x1", 1)]
    for case, res in results.items():
        assert res["iterations"] == ref["iterations"] == 30
        assert res["residual_history"] == pytest.approx(ref["residual_history"], rel=1e-12), case
        assert res["error_max"] == pytest.approx(ref["error_max"], rel=1e-12), case


def test_poisson_uneven_split_gives_the_same_answer(bins, tmp_path):
    """Does a grid that does not divide N (25 points over 2 and 3 ranks) match one rank?"""
    args = ["--n", "25", "--iters", "20"]
    _, one = run_json(bins, tmp_path, "poisson", [*args, "--grid", "1x1"], np=1)
    _, three = run_json(bins, tmp_path, "poisson", [*args, "--grid", "3x1"], np=3)
    assert sorted(r["local"][0] for r in three["results"]["per_rank"]) == [8, 8, 9]
    assert three["results"]["residual_history"] == pytest.approx(
        one["results"]["residual_history"], rel=1e-12)


def test_poisson_heavy_first_rank_gets_f_times_the_rows_and_the_same_answer(bins, tmp_path):
    """With --heavy 3 on 40 rows over 2 and 3 ranks, does the first rank along x get 3 shares
    (30 of 40 rows; 24 of 40 with two light ranks of 8), the others the rest evenly, the report
    say heavy = 3, and the residuals stay those of one rank (the decomposition does not change
    the answer)?"""
    args = ["--shape", "40x16", "--iters", "20", "--exchange", "naive"]
    _, one = run_json(bins, tmp_path, "poisson", [*args, "--grid", "1x1"], np=1)
    for np, rows in ((2, [30, 10]), (3, [24, 8, 8])):
        _, doc = run_json(bins, tmp_path, "poisson", [*args, "--grid", f"{np}x1", "--heavy", "3"], np=np)
        res = doc["results"]
        assert doc["validation"]["ok"] and res["heavy"] == 3
        assert [r["local"][0] for r in sorted(res["per_rank"], key=lambda r: r["coords"][0])] == rows
        assert res["residual_history"] == pytest.approx(one["results"]["residual_history"], rel=1e-12)
    assert one["results"]["heavy"] == 1


def test_poisson_converged_error_is_within_the_discretisation_bound(bins, tmp_path):
    """Once converged, is the error against sin(pi x) sin(pi y) below pi^4 h^2 / 48?"""
    _, doc = run_json(bins, tmp_path, "poisson", ["--n", "16", "--tol", "1e-12"], np=1)
    res = doc["results"]
    assert res["converged"] and doc["validation"]["ok"]
    h = 1.0 / 17
    assert res["error_max"] <= math.pi ** 4 * h * h / 48
    assert res["final_residual"] <= 1e-12 * res["residual_history"][0]


def test_pingpong_payload_arrives_intact_at_every_size(bins, tmp_path):
    """Is every message size from 0 B to 64 KiB checked on arrival and found intact?"""
    _, doc = run_json(bins, tmp_path, "pingpong", ["--max-bytes", "65536", "--reps", "20"])
    res = doc["results"]
    assert res["check_payload"] is True and doc["validation"]["ok"]
    assert [r["bytes"] for r in res["rows"]] == [0] + [2 ** k for k in range(17)]
    for row in res["rows"]:
        assert row["t_usec"] > 0
        assert math.isclose(row["mbytes_per_sec"], row["bytes"] / row["t_usec"], rel_tol=1e-9)


def test_pingpong_runs_only_the_listed_sizes_in_their_order(bins, tmp_path):
    """With --sizes, does the ping-pong run those sizes alone, in the order given, checked on
    arrival, with the sweep's repetitions (1000 at 0 B, 10 at 4 MiB: 40 MiB a size), and report
    the smallest and largest?"""
    p, doc = run_json(bins, tmp_path, "pingpong", ["--sizes", "1000,0,4194304"])
    res = doc["results"]
    assert [r["bytes"] for r in res["rows"]] == [1000, 0, 4 << 20]
    assert [r["repetitions"] for r in res["rows"]] == [1000, 1000, 10]
    assert res["check_payload"] is True and doc["validation"]["ok"]
    keys = key_block(p.stdout)[0]
    assert (keys["min_bytes"], keys["max_bytes"], keys["sizes"]) == ("0", str(4 << 20), "3")


def test_pingpong_no_check_is_reported(bins, tmp_path):
    """Does --no-check show up in the report, so unchecked numbers are never mistaken?"""
    p, doc = run_json(bins, tmp_path, "pingpong", ["--max-bytes", "8", "--no-check"])
    assert key_block(p.stdout)[0]["check_payload"] == "no"
    assert doc["results"]["check_payload"] is False


def test_pingpong_pairs_run_every_pair(bins, tmp_path):
    """With --pairs at 4 ranks, does every row carry one time per pair and t the slowest?"""
    _, doc = run_json(bins, tmp_path, "pingpong", ["--pairs", "--max-bytes", "64", "--reps", "20"],
                      np=4)
    for row in doc["results"]["rows"]:
        assert len(row["t_usec_pairs"]) == 2
        assert row["t_usec"] == max(row["t_usec_pairs"])


@pytest.mark.parametrize("btl", ["tcp", "vader"])
def test_pingpong_reports_the_btl_that_mca_selected(bins, tmp_path, btl):
    """Does --mca pml ob1 --mca btl self,<btl> come back from Open MPI as ob1 + <btl>?"""
    _, doc = run_json(bins, tmp_path, "pingpong", ["--max-bytes", "1024", "--reps", "20"],
                      mpirun_opts=["--mca", "pml", "ob1", "--mca", "btl", f"self,{btl}"])
    tr = doc["results"]["transport"]
    assert tr["pml"] == "ob1"
    assert sorted(tr["btl"]) == sorted(["self", btl])
    assert tr["mtl"] is None
    assert tr["source"].startswith("pml:MPI_T")
    assert doc["config"]["btl"] == ",".join(tr["btl"])


# Open MPI's own account of a run, used to check the report against: with these verbosities each
# process prints "select: component <pml> selected" and, from the BML (Open MPI 4.1),
# "mca: bml: Using <btl> btl for send to [[<job>,<n>],<rank>] on node <host>" for every peer.
OMPI_VERBOSE = ["--mca", "pml_base_verbose", "10", "--mca", "btl_base_verbose", "30"]


def ompi_selection(output: str) -> tuple[set[str], set[str]]:
    """From Open MPI's verbose output: (PMLs the processes selected, BTLs rank 0 sends through,
    to itself and to its peers). Rank 0 is the process whose self BTL sends to rank 0."""
    pmls = set(re.findall(r"\] select: component (\S+) selected", output))
    using = re.findall(r"\[([^\]]+)\] mca: bml: Using (\S+) btl for send to \[\[\d+,\d+\],(\d+)\]",
                       output)
    rank0 = {proc for proc, btl, to in using if btl == "self" and to == "0"}
    return pmls, {btl for proc, btl, _ in using if proc in rank0}


def test_pingpong_default_selection_reports_what_open_mpi_chose(bins, tmp_path):
    """With no MCA selection, 2 ranks on one node: does the report name the PML that Open MPI's
    own verbose output says it selected, and exactly the BTLs its BML says rank 0 sends through
    (ob1 with vader, plus self for itself), leaving out BTLs that are open but carry nothing (tcp)?"""
    if any(f"OMPI_MCA_{f}" in os.environ for f in ("pml", "btl", "mtl")):
        pytest.skip("OMPI_MCA_pml/btl/mtl is set: this run would not be Open MPI's default")
    p, doc = run_json(bins, tmp_path, "pingpong", ["--max-bytes", "1024", "--reps", "20"],
                      mpirun_opts=OMPI_VERBOSE)
    pmls, btls = ompi_selection(p.stdout + p.stderr)
    tr = doc["results"]["transport"]
    assert pmls == {tr["pml"]}, pmls
    assert tr["source"].startswith("pml:MPI_T")
    if tr["pml"] != "ob1":  # e.g. ucx where an InfiniBand device exists: no BTLs at all
        assert tr["btl"] == [] and not btls
        return
    assert "self" in btls and set(tr["btl"]) <= set(tr["btl_open"])
    if "bml-endpoint" in tr["source"]:
        assert set(tr["btl"]) == btls
        if "vader" in tr["btl_open"]:  # one node: shared memory outranks the network BTLs
            assert sorted(tr["btl"]) == ["self", "vader"]
    else:  # built without Open MPI's headers: never more than the BML chose
        assert set(tr["btl"]) <= btls
    assert doc["config"]["btl"] == (",".join(tr["btl"]) or None)


@pytest.fixture(scope="session")
def mpit_only_bins(tmp_path_factory):
    """pingpong built without Open MPI's internal headers (transport from MPI_T alone)."""
    d = tmp_path_factory.mktemp("mpit-only")
    out = subprocess.run(["make", "-s", "-C", str(paths.repo() / "src" / "pingpong"),
                          "OMPI_INTERNALS=no", f"BINDIR={d}", f"OBJDIR={d / 'obj'}"],
                         capture_output=True, text=True)
    assert out.returncode == 0, f"make failed:\n{out.stdout}\n{out.stderr}"
    return d


@pytest.mark.parametrize("btl", [None, "self,tcp"], ids=["default", "forced-tcp"])
def test_pingpong_without_ompi_headers_never_reports_an_unused_btl(mpit_only_bins, tmp_path, btl):
    """Built without Open MPI's internal headers, MPI_T only lists the BTLs left open: does the
    report name BTLs only when that list settles it (one BTL besides self) or the BML's rule does
    (a peer on this node, shared memory open with the highest exclusivity), matching what the BML
    says it uses, and otherwise say 'unknown' instead of listing an open BTL that carries nothing
    (tcp beside vader or sm)?"""
    opts = OMPI_VERBOSE + (["--mca", "pml", "ob1", "--mca", "btl", btl] if btl else [])
    p, doc = run_json(mpit_only_bins, tmp_path, "pingpong", ["--max-bytes", "64", "--reps", "20"],
                      mpirun_opts=opts)
    pmls, btls = ompi_selection(p.stdout + p.stderr)
    tr = doc["results"]["transport"]
    assert "bml-endpoint" not in tr["source"]
    if tr["pml"] != "ob1":
        assert tr["btl"] == []
        return
    others = [b for b in tr["btl_open"] if b != "self"]
    if len(others) == 1:
        assert tr["source"] == "pml:MPI_T btl:MPI_T-sole-open mtl:none"
        assert set(tr["btl"]) == btls
    elif tr["source"] == "pml:MPI_T btl:MPI_T-exclusivity mtl:none":
        assert set(tr["btl"]) == btls and set(tr["btl"]) & {"vader", "sm"}
    else:
        assert tr["source"] == "pml:MPI_T btl:unknown mtl:none" and tr["btl"] == []
    if btl:
        assert sorted(tr["btl"]) == ["self", "tcp"]


def test_pingpong_reports_ucx_when_ucx_is_forced(bins, tmp_path):
    """Forcing pml ucx (any transport, any device): does the report say ucx and no BTL?"""
    opts = ["--mca", "pml", "ucx", "--mca", "pml_ucx_tls", "any", "--mca", "pml_ucx_devices",
            "any"]
    out = tmp_path / "ucx.json"
    p = run(bins, "pingpong", ["--max-bytes", "64", "--reps", "20", "--json", str(out)], np=2,
            mpirun_opts=opts)
    if p.returncode != 0 and "cannot be selected" in p.stdout + p.stderr:
        pytest.skip("UCX PML cannot be selected on this machine")
    assert p.returncode == 0, p.stderr
    tr = json.loads(out.read_text())["results"]["transport"]
    assert tr["pml"] == "ucx" and tr["btl"] == [] and tr["ucx"]["pml_ucx_tls"] == "any"


def test_bind_to_core_gives_each_rank_its_own_single_cpu(bins, tmp_path):
    """Under --bind-to core, is each rank allowed exactly one CPU, a different one per rank, and
    do its OpenMP threads share that CPU (the hybrid pitfall)?"""
    _, doc = run_json(bins, tmp_path, "stream", SMALL["stream"], np=2, threads=2,
                      mpirun_opts=["--bind-to", "core"])
    place = doc["placement"]
    assert all(len(e["allowed"]) == 1 for e in place)
    assert place[0]["allowed"] != place[1]["allowed"]
    for e in place:
        assert e["cpu"] == e["allowed"][0]
        assert len(e["threads"]) == 2
        assert all(t["allowed"] == e["allowed"] for t in e["threads"])


# Under mpirun (np=2) for the cases where ranks must agree, or could hang if they did not;
# argument-syntax mistakes every rank sees alike run as singletons (mpirun adds ~1 s per failure).
BAD_INPUT = [
    ("pingpong", ["--bogus"], 2, "--bogus"),
    ("pingpong", ["--max-bytes", "abc"], None, "--max-bytes"),
    ("pingpong", [], None, "-np"),
    ("pingpong", ["--sizes", "0,,8"], None, "--sizes"),
    ("pingpong", ["--sizes", "0,2147483648"], None, "--sizes"),
    ("pingpong", ["--sizes", "8", "--max-bytes", "64"], None, "--sizes"),
    ("stream", ["--size", "0"], None, "--size"),
    ("stream", ["--size", "60000000000"], 2, "--size"),  # ~1.4 TB: more than any course VM
    ("stream", ["--reps", "1"], None, "--reps"),
    ("poisson", ["--grid", "2x2"], 2, "--grid"),
    ("poisson", ["--grid", "2by1"], None, "--grid"),
    ("poisson", ["--exchange", "magic"], None, "--exchange"),
    ("poisson", ["--shape", "10by3"], None, "--shape"),
    ("poisson", ["--n", "8", "--shape", "8x4"], None, "--shape"),
    ("poisson", ["--shape", "1x8", "--grid", "2x1"], 2, "--grid"),
    ("poisson", ["--n", "1", "--grid", "2x1"], 2, "--grid"),
    ("poisson", ["--tol"], None, "--tol"),
    ("poisson", ["--heavy", "0.5"], None, "--heavy"),
]


@pytest.mark.parametrize("kernel,args,np,arg", BAD_INPUT,
                         ids=[f"{k}{' '.join(a) or '-singleton'}" for k, a, _, _ in BAD_INPUT])
def test_bad_input_exits_2_with_one_line_naming_the_argument(bins, kernel, args, np, arg):
    """Does bad input end in exit code 2 and a single ERROR line naming the argument, with no
    report printed and no hang?"""
    p = run(bins, kernel, args, np=np, timeout=60)
    assert p.returncode == 2, (p.stdout, p.stderr)
    errors = [line for line in (p.stdout + p.stderr).splitlines() if line.startswith("ERROR:")]
    assert len(errors) == 1, errors
    assert errors[0].startswith(f"ERROR: {arg}: ") and "; allowed: " in errors[0]
    assert "arguments =" not in p.stdout


def test_json_report_is_never_overwritten(bins, tmp_path):
    """Does --json refuse a file that already exists (exit 2) and leave it untouched?"""
    out = tmp_path / "old.json"
    out.write_text("earlier run\n")
    p = run(bins, "poisson", ["--n", "8", "--iters", "2", "--json", str(out)], np=None)
    assert p.returncode == 2 and p.stderr.startswith("ERROR: --json: ")
    assert out.read_text() == "earlier run\n"


@pytest.mark.cluster
def test_pingpong_runs_under_srun(bins, cluster):
    """Under the local Slurm cluster, does srun -n 2 run pingpong with one host line per rank?"""
    if not shutil.which("srun"):
        pytest.skip("srun not installed")
    p = subprocess.run(["srun", "-n", "2", str(bins / "pingpong"), "--max-bytes", "64"],
                       capture_output=True, text=True, timeout=120, env={**os.environ, **cluster})
    assert p.returncode == 0, p.stderr
    kv, _ = key_block(p.stdout)
    assert kv["ranks"] == "2" and "host[0]" in kv and "host[1]" in kv
    assert "Solution validates" in p.stdout.splitlines()


def test_stream_reports_known_traffic_kernels_and_both_byte_counts(bins, tmp_path):
    """Does stream run Update (in place) and Sum (read-only) beside STREAM's four, validate, and
    report per kernel the bytes its rate counts and the bytes moved with write-allocate?"""
    p, doc = run_json(bins, tmp_path, "stream", SMALL["stream"], np=None)
    assert doc["validation"]["ok"]
    res = doc["results"]
    counted = {n: k["counted_bytes_per_element"] for n, k in res["kernels"].items()}
    moved = {n: k["moved_bytes_per_element"] for n, k in res["kernels"].items()}
    assert counted == {"Copy": 16, "Scale": 16, "Add": 24, "Triad": 24, "Update": 16, "Sum": 8}
    assert moved == {"Copy": 24, "Scale": 24, "Add": 32, "Triad": 32, "Update": 16, "Sum": 8}
    assert set(res["per_rank"][0]) == {"rank", *counted}
    for name, k in res["kernels"].items():
        # the rate counts `counted` bytes per element of one array over the best time
        expect = counted[name] * res["array_elements"] / k["min_time"] / 1e6
        assert k["best_mb_s"] == pytest.approx(expect, rel=1e-9)
    assert "with write-allocate the core moves" in p.stdout
