"""The Slurm client: exit-code and state translation, and real sbatch / squeue / sacct / scancel
against the local cluster."""

import time

import pytest

from hpclab.site import slurm
from hpclab.core.errors import HpclabError


@pytest.mark.parametrize("text, code", [("0:0", 0), ("3:0", 3), ("0:9", 137), ("0:15", 143), ("", None), ("x", None)])
def test_exit_codes_follow_shell_convention(text, code):
    """Is sacct's code:signal turned into the number a shell would show (128 + signal)?"""
    assert slurm._exit_code(text) == code


def test_every_terminal_slurm_state_maps_to_a_run_state():
    """Do Slurm's end states map onto completed/failed/timeout/cancelled?"""
    assert slurm.STATE_MAP["COMPLETED"] == "completed"
    assert slurm.STATE_MAP["FAILED"] == "failed"
    assert slurm.STATE_MAP["TIMEOUT"] == "timeout"
    assert slurm.STATE_MAP["CANCELLED"] == "cancelled"
    assert set(slurm.STATE_MAP.values()) <= {"pending", "running"} | slurm.TERMINAL


@pytest.mark.parametrize("text, nodes", [("vn[0-1]", "vn[0-1]"), ("(null)", ""), ("None assigned", ""), (" vm ", "vm")])
def test_node_lists_without_nodes_are_empty(text, nodes):
    """Do squeue's and sacct's ways of saying 'no node yet' all become an empty node list?"""
    assert slurm._node_list(text) == nodes


def test_progress_summary_counts_states_and_names_nodes():
    """Does the progress line say how many jobs are in each state and where they run?"""
    from hpclab.jobs.progress import JobProgress

    bar = JobProgress(3, enabled=False)
    bar.update(["running", "pending", "running"], ["vn0", "", "vn[0-1]"])
    assert bar.summary() == "running 2, pending 1 | nodes: vn0, vn[0-1]"
    bar.update(["pending"] * 3, [""] * 3)
    assert bar.summary() == "pending 3"


def test_missing_command_is_a_clear_error():
    """Does a Slurm command that is not installed give an HpclabError saying what to install?"""
    with pytest.raises(HpclabError, match="not installed"):
        slurm.run_slurm(["no-such-slurm-command"], what="test")


def _script(tmp_path, body, name="job.sh"):
    p = tmp_path / name
    p.write_text(f"#!/bin/bash\n#SBATCH --ntasks=1\n#SBATCH --time=00:02:00\n"
                 f"#SBATCH --output={tmp_path}/out\n{body}\n")
    return p


def _wait_done(job_id, limit=300):  # generous: other tests may hold the cores
    end = time.monotonic() + limit
    while time.monotonic() < end:
        info = slurm.job_states([job_id])[job_id]
        if info.done:
            return info
        time.sleep(0.5)
    raise AssertionError(f"job {job_id} did not end in {limit} s")


@pytest.mark.cluster
def test_submit_and_read_exit_code(cluster, tmp_path):
    """Does a submitted job's exit code (3) come back from accounting with state failed?"""
    job = slurm.sbatch(_script(tmp_path, "exit 3"))
    assert job.isdigit()
    info = _wait_done(job)
    assert (info.state, info.slurm_state, info.exit_code) == ("failed", "FAILED", 3)
    assert info.nodes, "the node list of an ended job (for the progress display and status.json)"
    rec = slurm.sacct_records([job])
    assert any(r["JobIDRaw"] == job for r in rec)


@pytest.mark.cluster
def test_cancel_a_running_job(cluster, tmp_path):
    """Does scancel end a running job, reported as cancelled?"""
    job = slurm.sbatch(_script(tmp_path, "sleep 120"))
    slurm.scancel([job])
    info = _wait_done(job)
    assert info.state == "cancelled"


@pytest.mark.cluster
def test_sbatch_rejection_is_explained(cluster, tmp_path):
    """Does sbatch refusing a script (unknown partition) raise an HpclabError with Slurm's words?"""
    p = _script(tmp_path, "true")
    p.write_text(p.read_text().replace("#SBATCH --ntasks=1", "#SBATCH --ntasks=1\n#SBATCH --partition=nopart"))
    with pytest.raises(HpclabError, match="(?i)partition"):
        slurm.sbatch(p)


@pytest.mark.cluster
def test_scontrol_knows_a_recent_job_without_accounting(cluster, tmp_path):
    """Can the end state and exit code of a recent job be read without sacct (no slurmdbd)?"""
    job = slurm.sbatch(_script(tmp_path, "exit 4"))
    _wait_done(job)
    info = slurm.scontrol_job(job)
    assert (info.state, info.exit_code) == ("failed", 4)
