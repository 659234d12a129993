"""A checkout anywhere: the cluster starts and runs jobs from a clone under a 0700 home.

Debian's /root is 0700, and munged runs as the munge user: a cluster whose munge folder sat in the
checkout stopped there. These tests start a second copy of the repository from such a folder.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from hpclab.core import paths

pytestmark = pytest.mark.cluster


@pytest.fixture
def open_tmp():
    """A folder every user can enter (pytest's own tmp_path sits below a 0700 folder)."""
    import tempfile

    d = Path(tempfile.mkdtemp(prefix="hpclab-checkout-", dir="/var/tmp"))
    d.chmod(0o755)
    yield d
    shutil.rmtree(d, ignore_errors=True)


def test_unreachable_ancestor_names_the_first_closed_folder(open_tmp):
    """Is the 0700 folder on the way named, and a fully traversable path accepted?"""
    home = open_tmp / "home"
    (home / "clone" / "build").mkdir(parents=True)
    home.chmod(0o700)
    assert paths.unreachable_ancestor(home / "clone" / "build") == home
    home.chmod(0o755)
    assert paths.unreachable_ancestor(home / "clone" / "build") is None


def test_daemon_state_dir_is_per_checkout_and_outside_it(tmp_path):
    """Do two checkouts get two daemon folders under /var/lib/hpclab, named after the checkout?"""
    a = paths.daemon_state_dir(tmp_path / "a" / "build" / "cluster")
    b = paths.daemon_state_dir(tmp_path / "b" / "build" / "cluster")
    assert a != b
    assert a.parent == b.parent == paths.SYSTEM_STATE_ROOT
    assert a.name.startswith(tmp_path.name.replace("_", "-")) or "a-build-cluster" in a.name
    assert paths.daemon_state_dir(tmp_path / "a" / "build" / "cluster") == a  # stable


def test_setup_says_where_the_checkout_is_and_who_can_reach_it():
    """Does `make setup`'s first step name the checkout and the folder munged will use?"""
    out = subprocess.run([sys.executable, "-c", "from hpclab.core.paths import checkout_access_report as r; "
                          "print('\\n'.join(r()))"], capture_output=True, text=True, check=True).stdout
    assert f"checkout: {paths.repo()}" in out
    assert str(paths.daemon_state_dir()) in out


def _copy_checkout(dest: Path) -> None:
    """The tracked files of this repository, as a fresh clone would have them."""
    files = subprocess.run(["git", "ls-files", "-z"], cwd=paths.repo(), capture_output=True, check=True).stdout
    for rel in filter(None, files.decode().split("\0")):
        src = paths.repo() / rel
        if src.is_file():
            (dest / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dest / rel)


def test_cluster_runs_a_job_from_a_checkout_under_a_0700_home(cluster, open_tmp):
    """Does a clone under a 0700 folder start munged and the rest, and run a job that uses munge?"""
    from hpclab import cluster as cl

    home = open_tmp / "root"
    clone = home / "course"
    clone.mkdir(parents=True)
    home.chmod(0o700)
    _copy_checkout(clone)
    assert paths.unreachable_ancestor(clone) == home

    env = {**os.environ, "HPCLAB_HOME": str(clone), "PYTHONPATH": str(clone)}
    for key in ("HPCLAB_STATE", "HPCLAB_RUNS", "SLURM_CONF"):
        env.pop(key, None)
    hpclab = [sys.executable, "-m", "hpclab.cli.main"]
    daemon_dir = paths.daemon_state_dir(clone / "build" / "cluster")
    env["SLURM_CONF"] = str(daemon_dir / "etc" / "slurm.conf")

    cl.down()  # one cluster at a time: the copy uses the same ports
    try:
        where = subprocess.run([sys.executable, "-c", "import hpclab; print(hpclab.__file__)"], env=env, cwd=clone,
                               capture_output=True, text=True, check=True).stdout
        assert where.startswith(str(clone)), "the copy's own code runs"
        up = subprocess.run([*hpclab, "cluster", "up"], env=env, cwd=clone, capture_output=True, text=True, timeout=180)
        assert up.returncode == 0, up.stdout + up.stderr
        status = subprocess.run([*hpclab, "cluster", "status"], env=env, cwd=clone, capture_output=True, text=True).stdout
        assert str(daemon_dir) in status and "stopped" not in status, status
        key = daemon_dir / "munge" / "munge.key"
        assert key.stat().st_mode & 0o777 == 0o400
        job = subprocess.run(["srun", "--ntasks=1", "sh", "-c", "echo ran as $(id -un) on $SLURMD_NODENAME"],
                             env=env, capture_output=True, text=True, timeout=60, cwd=clone)
        assert job.returncode == 0 and job.stdout.startswith("ran as root on "), job.stdout + job.stderr
        sock = daemon_dir / "munge" / "munge.socket"
        batch = subprocess.run(["sbatch", "--parsable", "--wait", f"--chdir={clone}", "--output=out.txt",
                                "--wrap", f"munge -n --socket={sock} | unmunge --socket={sock} | grep STATUS"],
                               env=env, capture_output=True, text=True, timeout=120)
        assert batch.returncode == 0, batch.stderr
        assert "Success" in (clone / "out.txt").read_text()
        # A user who cannot enter the checkout still reads the configuration and runs a batch
        # job, whose script slurmd executes from its spool as that user.
        nobody = ["setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups"]
        out = open_tmp / "nobody.txt"
        open_tmp.chmod(0o1777)
        batch = subprocess.run([*nobody, "sbatch", "--parsable", "--wait", f"--output={out}", "--chdir=/tmp",
                                "--wrap", "id -un"], env=env, capture_output=True, text=True, timeout=120)
        assert batch.returncode == 0, batch.stderr
        assert out.read_text().strip() == "nobody"
    finally:
        subprocess.run([*hpclab, "cluster", "down"], env=env, cwd=clone, capture_output=True, timeout=120)
        shutil.rmtree(daemon_dir, ignore_errors=True)
        cl.up()
