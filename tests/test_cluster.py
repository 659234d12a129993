"""The local Slurm cluster: real jobs, real accounting, idempotent up and down."""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import stat
import subprocess
import sys
import tempfile
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
def test_up_and_down_twice_leave_no_stray_daemon(cluster):
    """Are `up` and `down` idempotent, and does `down` stop every daemon it started?"""
    from hpclab import cluster as cl
    from hpclab.cluster import config, local

    lay = config.layout()
    started = {d.name: d.pid() for d in local.daemons(lay, config.load_nodes(lay))}
    assert all(started.values()), started
    assert cl.up().already_running
    with _look_alike("slurmctld") as foreign:  # same program name, not started by the project
        cl.down()
        assert foreign.poll() is None, "down stopped a slurmctld it did not start"
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


@contextlib.contextmanager
def _look_alike(program: str):
    """A harmless process whose command line names `program` (a copy of sleep under that name)."""
    with tempfile.TemporaryDirectory() as d:
        exe = Path(d) / program
        shutil.copy(shutil.which("sleep"), exe)
        proc = subprocess.Popen([str(exe), "300"])
        try:
            yield proc
        finally:
            proc.kill()
            proc.wait()


def test_status_names_daemons_nodes_partitions_and_logs(cluster):
    """Does `hpclab cluster status` show every daemon with its pid and log, the nodes and the partition?"""
    from hpclab import cluster as cl
    from hpclab.cluster import config

    text = subprocess.run([sys.executable, "-m", "hpclab.cli.main", "cluster", "status"], capture_output=True,
                          text=True, check=True).stdout
    st = cl.status()
    for d in st.daemons:
        assert re.search(rf"{re.escape(d.name)}\s+running\s+pid {d.pid}\s+log: {re.escape(str(d.log))}", text), d.name
    for node in config.load_nodes(config.layout()):
        assert re.search(rf"{node.name} \((idle|mixed|allocated)", text), node.name
    assert "partitions: " in text and "config:" in text


def test_cluster_env_points_a_new_shell_at_the_cluster(cluster):
    """In a shell that knows nothing of the cluster, does `eval "$(hpclab cluster env)"` make sinfo answer?"""
    clean = {k: v for k, v in os.environ.items() if not k.startswith("SLURM")}
    script = f'eval "$({sys.executable} -m hpclab.cli.main cluster env)" && sinfo -h -o "%P %a"'
    out = subprocess.run(["bash", "-c", script], capture_output=True, text=True, env=clean, timeout=30)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split()[1] == "up"


def test_plain_slurm_commands_work_through_etc_slurm(cluster):
    """With no other Slurm on the machine, do sinfo and sacct work without any variable set?"""
    from hpclab.cluster import config, local

    conf = local.SYSTEM_SLURM_CONF
    if not conf.is_symlink():
        pytest.skip(f"{conf} belongs to another Slurm on this machine; 'cluster env' is the documented way")
    assert Path(os.path.realpath(conf)) == config.layout().slurm_conf.resolve()
    clean = {k: v for k, v in os.environ.items() if not k.startswith("SLURM")}
    for cmd in (["sinfo", "-h", "-o", "%a"], ["sacct", "-n", "-X", "-S", "now-1hour", "-o", "JobID"]):
        r = subprocess.run(cmd, capture_output=True, text=True, env=clean, timeout=30)
        assert r.returncode == 0, f"{cmd[0]}: {r.stderr}"


def test_munge_key_is_private_to_munge(cluster):
    """Is the generated munge key mode 0400 and owned by the munge user, as munged demands?"""
    import pwd

    from hpclab.cluster import config

    st = config.layout().munge_key.stat()
    assert stat.S_IMODE(st.st_mode) == 0o400
    assert st.st_uid == pwd.getpwnam("munge").pw_uid
