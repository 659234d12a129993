"""Notebook 00's out-of-memory lesson: are a job's and its steps' Slurm states worded as sacct
recorded them (the step OUT_OF_MEMORY, the job FAILED), never assumed?"""

from __future__ import annotations

from types import SimpleNamespace

from hpclab.jobs import experiment
from hpclab.site import slurm


def _run(tmp_path, stderr: str = ""):
    (tmp_path / "stderr").write_text(stderr)
    return SimpleNamespace(job_id="7", folder=SimpleNamespace(stderr=tmp_path / "stderr"))


def _records(job_state: str, step_state: str) -> list[dict]:
    rec = lambda jid, name, state, code: {"JobIDRaw": jid, "JobName": name, "State": state, "ExitCode": code}
    return [rec("7", "hpclab-00", job_state, "1:0"), rec("7.batch", "batch", job_state, "1:0"),
            rec("7.1", "stream", step_state, "0:125")]


def test_step_out_of_memory_and_job_failed_are_told_apart(tmp_path, monkeypatch):
    """The cgroup stopped step 7.1 and the script went on: the text names the step OUT_OF_MEMORY
    and the job FAILED, and says why they differ."""
    monkeypatch.setattr(slurm, "sacct_records", lambda ids: _records("FAILED", "OUT_OF_MEMORY"))
    text = experiment.states_text(_run(tmp_path))
    assert "job 7 ended FAILED" in text and "step 7.1 (stream) OUT_OF_MEMORY" in text
    assert "follows its batch script" in text


def test_a_job_marked_out_of_memory_is_said_so(tmp_path, monkeypatch):
    monkeypatch.setattr(slurm, "sacct_records", lambda ids: _records("OUT_OF_MEMORY", "OUT_OF_MEMORY"))
    assert "The job itself is marked OUT_OF_MEMORY" in experiment.states_text(_run(tmp_path))


def test_a_sampled_kill_is_not_called_out_of_memory(tmp_path, monkeypatch):
    """Slurm's sampling kill leaves no OUT_OF_MEMORY state: the text says the kill is in stderr."""
    monkeypatch.setattr(slurm, "sacct_records", lambda ids: _records("FAILED", "FAILED"))
    run = _run(tmp_path, "slurmstepd: error: StepId=7.1 exceeded memory limit (110690304 > 41943040), being killed\n")
    text = experiment.states_text(run)
    assert "No step is marked OUT_OF_MEMORY" in text and "step 7.1 (stream) FAILED" in text


def test_no_accounting_gives_no_text(tmp_path, monkeypatch):
    def down(ids):
        raise slurm.AccountingUnavailable("down", "hint")
    monkeypatch.setattr(slurm, "sacct_records", down)
    assert experiment.states_text(_run(tmp_path)) == ""
