"""A run whose program died inside MPI_Init is told apart from a kernel failure (captured from a
real run: Open MPI 4.1.4 segfaulting in its start-up on oversubscribed virtual nodes)."""

from pathlib import Path

import pytest

from hpclab.jobs import experiment
from hpclab.core.errors import HpclabError
from hpclab.runs.folder import RunFolder
from hpclab.spec.model import make_spec

DATA = Path(__file__).parent / "data"


def _failed_run(tmp_path, stdout: str, stderr: str) -> experiment.Run:
    sp = make_spec(kernel="poisson", ntasks=2, experiment="crash")
    folder = RunFolder.create("crash", sp.to_dict(), "#!/bin/bash\n", root=tmp_path)
    folder.write("stdout", stdout)
    folder.write("stderr", stderr)
    folder.set_status("failed", exit_code=139, slurm_state="FAILED")
    return experiment.Run(folder, sp)


def test_segfault_before_the_kernel_started_is_diagnosed(tmp_path):
    crash = DATA / "startup-crash"
    run = _failed_run(tmp_path, (crash / "stdout").read_text(), (crash / "stderr").read_text())
    assert experiment.died_in_mpi_startup(run)
    with pytest.raises(HpclabError, match="died inside MPI_Init"):
        experiment.raise_for_failures([run])


def test_kernel_that_started_and_then_crashed_is_not_blamed_on_mpi(tmp_path):
    started = (DATA / "runs" / "poisson-np2" / "stdout").read_text()
    run = _failed_run(tmp_path, started, (DATA / "startup-crash" / "stderr").read_text())
    assert not experiment.died_in_mpi_startup(run)
    with pytest.raises(HpclabError) as err:
        experiment.raise_for_failures([run])
    assert "MPI_Init" not in str(err.value)
