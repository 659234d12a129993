"""Shared fixtures: the local Slurm cluster, started once per test session.

The cluster is a real one (munged, MariaDB, slurmdbd, slurmctld, slurmd). Tests that submit jobs
take the `cluster` fixture; it starts the cluster if needed and points Slurm commands at it.
"""

from __future__ import annotations

import os
import shutil

import pytest

from hpclab.core.errors import HpclabError


@pytest.fixture(scope="session")
def cluster():
    """The running local cluster; returns the env dict Slurm commands need (SLURM_CONF)."""
    from hpclab import cluster as cl

    if os.geteuid() != 0 or not shutil.which("slurmctld"):
        pytest.fail("the local cluster needs root and the Slurm packages: run 'make test' as root")
    try:
        cl.up()
    except HpclabError as e:
        pytest.fail(f"could not start the local cluster: {e}")
    env = cl.slurm_env()
    os.environ.update(env)
    return env


CLASSROOM_MADE = pytest.StashKey[bool]()


@pytest.fixture(scope="session")
def classroom(cluster, request, tmp_path_factory):
    """A small classroom (3 students, 1 instructor) for the tests that act as its users; an
    existing one is used as it is. One this fixture made is removed at the end of the session
    (accounts, homes, hub, Slurm objects; the archive remove writes first goes to a temporary
    folder, deleted afterwards; the students' venv stays for the next run)."""
    from hpclab.classroom import layout, record, room

    lay = layout.layout()
    existed = not record.load(lay.record).empty
    request.config.stash[CLASSROOM_MADE] = not existed
    try:
        room.up(students=max(3, record.load(lay.record).settings.get("students", 0)), instructors=1)
    except HpclabError as e:
        pytest.fail(f"could not bring the classroom up: {e}")
    yield lay
    if not existed and not record.load(lay.record).empty:
        archive = tmp_path_factory.mktemp("classroom-archive")
        room.remove(yes=True, archive_dir=archive)
        shutil.rmtree(archive)


@pytest.fixture(scope="session")
def disposable_classroom(classroom, request):
    """The session's classroom when this session made it (tests that stop, bring back or remove
    it); a room that was here before is a real class's and is skipped."""
    if not request.config.stash.get(CLASSROOM_MADE, False):
        pytest.skip("the classroom was here before the tests: they do not stop or remove a real room")
    return classroom


@pytest.fixture
def mpi_env(monkeypatch):
    """Let mpirun run as root (CI and the course VM run as root)."""
    monkeypatch.setenv("OMPI_ALLOW_RUN_AS_ROOT", "1")
    monkeypatch.setenv("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")
