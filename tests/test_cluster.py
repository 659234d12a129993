"""The local Slurm cluster: real jobs, real accounting, idempotent up and down."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

from tests.slurmjob import submit, wait

pytestmark = pytest.mark.cluster

HELLO_C = r"""
#define _GNU_SOURCE
#include <mpi.h>
#include <sched.h>
#include <stdio.h>
int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    cpu_set_t mask;
    sched_getaffinity(0, sizeof mask, &mask);
    printf("hello rank=%d size=%d cpu=%d allowed=%d\n", rank, size, sched_getcpu(), CPU_COUNT(&mask));
    MPI_Finalize();
    return 0;
}
"""


def test_mpi_hello_runs_on_two_cores(cluster, tmp_path):
    """Does a 2-task MPI job launched with srun --mpi=pmix --cpu-bind=cores complete, bound to two different cores?"""
    (tmp_path / "hello.c").write_text(HELLO_C)
    subprocess.run(["mpicc", "-o", str(tmp_path / "hello"), str(tmp_path / "hello.c")], check=True)
    job = submit("#!/bin/bash\nsrun --mpi=pmix --cpu-bind=verbose,cores ./hello\n", tmp_path,
                 "--ntasks=2", "--output=out.txt", "--error=err.txt")
    assert wait(job) == ("COMPLETED", "0:0")
    out = (tmp_path / "out.txt").read_text()
    ranks = re.findall(r"hello rank=(\d) size=2 cpu=(\d+) allowed=(\d+)", out)
    assert sorted(r for r, _, _ in ranks) == ["0", "1"]
    assert all(allowed == "1" for _, _, allowed in ranks), "each rank bound to one core"
    assert len({cpu for _, cpu, _ in ranks}) == 2, "the two ranks run on different cores"
    masks = re.findall(r"cpu-bind=MASK - \S+, task\s+(\d+)\s+\d+ \[\d+\]: mask (0x[0-9a-f]+) set",
                       (tmp_path / "err.txt").read_text())
    assert len({m for _, m in masks}) == 2, "srun's binding report shows two different masks"


def test_failing_job_is_failed_with_its_exit_code(cluster, tmp_path):
    """Does a job that exits 3 show up in sacct as FAILED with exit code 3?"""
    job = submit("#!/bin/bash\nexit 3\n", tmp_path)
    assert wait(job) == ("FAILED", "3:0")


def test_cancelled_job_is_cancelled(cluster, tmp_path):
    """Does scancel leave a job CANCELLED in the accounting?"""
    job = submit("#!/bin/bash\nsleep 120\n", tmp_path)
    subprocess.run(["scancel", job], check=True)
    assert wait(job)[0] == "CANCELLED"


@pytest.mark.slow
def test_job_past_its_time_limit_times_out(cluster, tmp_path):
    """Does a job that outlives --time end as TIMEOUT? (Slurm checks limits about once a minute.)"""
    job = submit("#!/bin/bash\nsleep 300\n", tmp_path, "--time=1")
    assert wait(job, timeout=180)[0] == "TIMEOUT"


def test_up_and_down_twice_leave_no_stray_daemon(cluster):
    """Are `up` and `down` idempotent, and does `down` stop every daemon it started?"""
    from hpclab import cluster as cl
    from hpclab.cluster import config, local

    lay = config.layout()
    started = {d.name: d.pid() for d in local.daemons(lay, config.load_nodes(lay))}
    assert all(started.values()), started
    assert cl.up().already_running
    cl.down()
    assert cl.down() == []
    for name, pid in started.items():
        assert not Path(f"/proc/{pid}").exists() or b"Z" in Path(f"/proc/{pid}/stat").read_bytes().split(b")")[-1][:3], name
    assert not cl.status().running
    first = cl.up()
    assert not first.already_running
    assert cl.up().already_running
    assert cl.status().running


def test_stale_pid_file_is_not_trusted(cluster, tmp_path):
    """Is a pid file naming a process that is not the daemon treated as stale (and never signalled)?"""
    from hpclab.cluster.daemons import Daemon

    pidfile = tmp_path / "x.pid"
    pidfile.write_text("1\n")  # pid 1 is alive but is not slurmctld
    d = Daemon("slurmctld", "slurmctld", ["slurmctld"], pidfile, tmp_path / "x.log")
    assert d.pid() is None
    assert not pidfile.exists()
    assert d.stop() is False
