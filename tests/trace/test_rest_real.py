"""The five-part split of real traced Poisson runs on this machine: with more ranks than cores the
rest (time the ranks did not run) dominates; with one rank per core the rest is only the time
other programs took the cores away (on an idle machine: none), and what the model does not
explain beyond that is small.

The runs use mpirun directly (as tests/trace/test_tracer.py does), with the network model fitted
to a pingpong run of this machine, as the split asks for.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from hpclab.core import paths
from hpclab.kernels.pingpong import parse_pingpong_text
from hpclab.trace.load import load_dir
from hpclab.trace.model import model_from_pingpong
from hpclab.trace.split import rank_times, split
from hpclab.trace.waitstates import DEFAULT_EAGER_LIMIT

LIB = paths.lib_dir() / "libmpitrace.so"
POISSON = paths.bin_dir() / "poisson"
PINGPONG = paths.bin_dir() / "pingpong"
CORES = os.cpu_count() or 1

pytestmark = pytest.mark.skipif(
    not shutil.which("mpirun") or not POISSON.exists() or not PINGPONG.exists(),
    reason="needs mpirun and build/bin/poisson, build/bin/pingpong (make -C src)")


def mpirun(ranks: int, cmd: list[str], trace_dir: Path | None = None) -> str:
    env = {**os.environ, "OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1"}
    args = ["mpirun", "-np", str(ranks), "--oversubscribe",
            "--bind-to", "core" if ranks <= CORES else "none"]
    if trace_dir is not None:
        args += ["-x", f"LD_PRELOAD={LIB}", "-x", f"MPITRACE_DIR={trace_dir}"]
    res = subprocess.run(args + cmd, env=env, capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr[-2000:]
    return res.stdout


@pytest.fixture(scope="module")
def model():
    """Hockney fitted to a pingpong between two ranks bound to two cores, with the eager limit
    of Open MPI's shared-memory transport."""
    subprocess.run(["make", "-s", "-C", str(paths.repo() / "src" / "mpitrace")], check=True,
                   capture_output=True)
    table = parse_pingpong_text(mpirun(2, [str(PINGPONG), "--max-bytes", "65536"]))
    return model_from_pingpong(table[["bytes", "t_usec"]].to_dict("records"),
                               eager_limit=DEFAULT_EAGER_LIMIT, name="fitted here")


def traced_split(model, ranks: int, n: int, iters: int, tmp: Path):
    d = tmp / f"trace-{ranks}"
    mpirun(ranks, [str(POISSON), "--n", str(n), "--iters", str(iters), "--exchange", "blocking"], d)
    t = load_dir(d)
    assert t.meta["cpu_time"]
    return t, split(t, model=model)


@pytest.mark.skipif(CORES > 2, reason="oversubscribes a 2-core machine; here 4 ranks would fit")
def test_more_ranks_than_cores_leave_most_of_the_time_as_the_rest(model, tmp_path):
    """4 ranks on 2 cores: is the rest (time not running) more than half of T_real, the replay on
    CPU bursts (dedicated cores) less than half of it, and do the five parts add up?"""
    t, s = traced_split(model, 4, 256, 20, tmp_path)
    assert s.cpu_bursts and s.T_rest > 0.5 * s.T_real
    assert s.T_model < 0.5 * s.T_real
    assert sum(s.parts().values()) == pytest.approx(s.T_real, rel=0.01)
    rt = rank_times(t)
    assert (rt["off_cpu_ns"] > 0).all()  # every rank was switched out while computing
    # the rest is the time the ranks did not run (4 ranks on 2 cores: about half of each run)
    assert abs(s.T_rest - rt["not_running_ns"].max()) <= 0.25 * s.T_real


def test_one_rank_per_core_leaves_little_the_model_does_not_explain(model, tmp_path):
    """2 ranks bound to 2 cores: once the time the rest of the (shared) machine took the cores
    away is set aside, is the rest small (within a quarter of T_real either way), and do the five
    parts add up?"""
    t, s = traced_split(model, 2, 512, 20, tmp_path)
    assert sum(s.parts().values()) == pytest.approx(s.T_real, rel=0.01)
    off = float(rank_times(t)["not_running_ns"].max())  # switched out by other programs
    assert abs(s.T_rest - off) <= 0.25 * s.T_real, (s.T_rest, off, s.T_real)
