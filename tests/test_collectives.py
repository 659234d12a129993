"""The collectives kernel under every installed MPI library, and the libraries' records of how an
algorithm is forced (issue 38, items 1 and 2).

Each library builds the kernel with its own mpicc (build/<library>/bin, as scripts/mpi-libraries.sh
does; incremental) and runs it without Slurm, started by its own launcher on this machine's shared
memory, 2 and 4 ranks (4 share the 2 cores: the record's variables for ranks sharing a core are
set). The algorithm lists of the records are compared with what each library lists itself
(Open MPI's ompi_info, MPICH's mpivars), and every algorithm the cost model knows is forced
through the record's variables and must come back as forced, under that name, in the run's report.
"""

from __future__ import annotations

import json
import os
import re
import subprocess

import pytest

from hpclab.core import paths
from hpclab.kernels import collectives as kernel
from hpclab.site import mpi_libraries

NAMES = mpi_libraries.names()
SMALL = ["--sizes", "8,1024", "--reps", "3", "--warmup", "1"]


def _library(name: str) -> mpi_libraries.MpiLibrary:
    lib = mpi_libraries.get(name)
    if not lib.installed():
        pytest.skip(f"{name} is not installed (make mpi-libraries)")
    return lib


def _binary(lib: mpi_libraries.MpiLibrary):
    """build/<library>/bin/collectives, made with the library's own mpicc (a no-op when up to date)."""
    build = lib.build_dir
    env = {**os.environ, **lib.environment(), "PATH": f"{lib.bindir}:{os.environ['PATH']}"}
    out = subprocess.run(["make", "-s", "-C", str(paths.repo() / "src" / "collectives"), f"CC={lib.mpicc}",
                          f"BUILD_DIR={build}"], capture_output=True, text=True, env=env, timeout=300)
    assert out.returncode == 0, f"the kernel does not build with {lib.name}:\n{out.stdout}\n{out.stderr}"
    return build / "bin" / "collectives"


def _run(lib, np: int, args: list[str], tmp_path, env: dict | None = None):
    """Run the kernel on np ranks with the library's sandbox launcher; (report, stdout + stderr)."""
    exe = _binary(lib)
    out = tmp_path / f"{lib.name}-{np}-{len(list(tmp_path.iterdir()))}.json"
    run_env = {**os.environ, "OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1",
               **lib.sandboxed_environment(), **dict(lib.collectives.oversubscribed_env),
               "OMPI_MCA_mpi_yield_when_idle": "1", **(env or {})}
    if lib.family == "intel-mpi":
        run_env["I_MPI_DEBUG"] = "10"  # as its record's report_env makes every job print (I_MPI_ADJUST_* lines)
    p = subprocess.run([*lib.sandboxed_argv(np), str(exe), *args, "--json", str(out)], capture_output=True, text=True,
                       env=run_env, timeout=120)
    assert p.returncode == 0, f"{lib.name} on {np} ranks exited {p.returncode}:\n{p.stdout[-2000:]}\n{p.stderr[-2000:]}"
    return json.loads(out.read_text()), p.stdout + p.stderr


@pytest.mark.parametrize("np", [2, 4])
@pytest.mark.parametrize("name", NAMES)
def test_the_kernel_runs_and_validates_under_every_library(name, np, tmp_path):
    """Does the kernel built with each library run Allreduce, Bcast and Alltoall on 2 and on 4
    ranks, validate every result, name the library, and give one row per op and size?"""
    lib = _library(name)
    doc, _ = _run(lib, np, SMALL, tmp_path)
    assert doc["validation"]["ok"] and doc["config"]["ranks"] == np
    assert {"Open MPI": "openmpi", "MPICH": "mpich", "Intel": "intel-mpi"}[
        next(w for w in ("Open MPI", "MPICH", "Intel") if w in doc["config"]["mpi_library"])] == lib.family
    table = kernel.collectives_table(doc)
    assert sorted(zip(table["op"], table["bytes"])) == sorted((op, b) for op in kernel.OPS for b in (8, 1024))
    assert (table["t_max_usec"] >= table["t_min_usec"]).all() and (table["t_min_usec"] > 0).all()


# --- the records' lists against the libraries' own ---------------------------------------------------

def _ompi_enumerators(lib, op: str) -> dict[int, str]:
    argv = [w.replace("{bin}", str(lib.bindir)) for w in lib.collectives.listed_by.split()]
    text = subprocess.run([*argv, "--parsable"], capture_output=True, text=True, timeout=60).stdout
    pairs = re.findall(rf"^mca:coll:tuned:param:coll_tuned_{op}_algorithm:enumerator:value:(\d+):(\S+)$", text, re.M)
    return {int(n): w for n, w in pairs}


def _mpich_names(lib, op: str) -> list[str]:
    text = subprocess.run([str(lib.bindir / "mpivars")], capture_output=True, text=True, timeout=60).stdout
    block = text.split(f"MPIR_CVAR_{op.upper()}_INTRA_ALGORITHM", 1)[1].split("\n\t", 1)[0]
    return [line.split()[0] for line in block.splitlines()[1:] if line.strip()]


@pytest.mark.parametrize("name", [n for n in NAMES if mpi_libraries.get(n).family in ("openmpi", "mpich")])
def test_each_record_lists_the_algorithms_as_its_library_lists_them(name):
    """Are the numbers and names of each Open MPI's record what its own `ompi_info --param coll
    tuned --level 9` lists, and MPICH's the order `mpivars` lists its algorithm names in?"""
    lib = _library(name)
    for op, algorithms in lib.collectives.algorithms.items():
        mine = {a.number: a.name for a in algorithms}
        if lib.family == "openmpi":
            assert mine == _ompi_enumerators(lib, op), op
        else:
            assert [mine[k] for k in sorted(mine)] == _mpich_names(lib, op), op


# --- forced algorithms come back forced -----------------------------------------------------------------

def _modelled(lib) -> dict[str, list[mpi_libraries.Algorithm]]:
    return {op: [a for a in algs if a.model] for op, algs in lib.collectives.algorithms.items()}


@pytest.mark.parametrize("name", NAMES)
def test_each_forced_algorithm_is_reported_as_forced(name, tmp_path):
    """Forced through the record's environment variables (one run per round of algorithms, every
    operation forced at once), does each run's own report (MPI_T readback, or Intel MPI's debug
    output) say the forced algorithm ran, by the library's name for it, and that it was forced?
    And does a run forcing nothing say nothing was forced?"""
    lib = _library(name)
    choice, modelled = lib.collectives, _modelled(lib)
    for k in range(max(len(v) for v in modelled.values())):
        env, want = {}, {}
        for op, algs in modelled.items():
            alg = algs[k % len(algs)]
            env.update(choice.forced(op, alg.number))
            want[op] = alg.name
        doc, output = _run(lib, 4, SMALL, tmp_path, env)
        for op, name_wanted in want.items():
            said = kernel.variants(doc)[0]["said"][op]
            got = mpi_libraries.collective_said(lib.name, op, said, kernel.gate(doc), output)
            assert got["forced"] and got["algorithm"] == name_wanted, (op, env, got)
    doc, output = _run(lib, 4, SMALL, tmp_path)
    for op in kernel.OPS:
        got = mpi_libraries.collective_said(lib.name, op, kernel.variants(doc)[0]["said"][op], kernel.gate(doc), output)
        assert not got["forced"], (op, got)


@pytest.mark.parametrize("name", [n for n in NAMES if (mpi_libraries.get(n).collectives or None)
                                  and mpi_libraries.get(n).collectives.runtime])
def test_algorithms_switched_through_mpi_t_in_one_run_are_each_reported(name, tmp_path):
    """With the gate in the environment, does one run that writes each modelled Allreduce algorithm
    through MPI_T (--variant) report, variant by variant, the algorithm it wrote as forced, and the
    first, writing nothing, as the library's own choice?"""
    lib = _library(name)
    choice = lib.collectives
    algs = _modelled(lib)["allreduce"]
    variants = ["default"] + [f"{choice.control('allreduce')}={a.number}" for a in algs]
    args = ["--ops", "allreduce", *SMALL[2:], "--sizes", "1024", "--order", "block,cyclic"]
    for v in variants:
        args += ["--variant", v]
    doc, output = _run(lib, 4, args, tmp_path, dict(choice.gate))
    said = [mpi_libraries.collective_said(lib.name, "allreduce", v["said"]["allreduce"], kernel.gate(doc), output)
            for v in kernel.variants(doc)]
    assert not said[0]["forced"]
    assert [(s["forced"], s["algorithm"]) for s in said[1:]] == [(True, a.name) for a in algs]
    assert len(kernel.collectives_table(doc)) == len(variants) * 2
