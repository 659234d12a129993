"""Typed failures (issue 27): a caller tells a job that ran out of memory from one that timed out,
was cancelled, found every node drained or was lost with its node by the error's class, not by
the words of its message; the messages and hints are the ones hpclab always gave. The runs here
are run folders on a temporary folder whose status says how their job ended: no Slurm."""

from __future__ import annotations

import pytest

from hpclab.core import errors
from hpclab.core.errors import (Cancelled, GaveUpWaiting, HpclabError, JobFailed, JobLost, NodeDrained,
                                OutOfMemory, SubmissionRefused, TimedOut)
from hpclab.jobs import experiment
from hpclab.runs.folder import RunFolder
from hpclab.site import slurm
from hpclab.spec.model import make_spec

HINT_OTHER = "read stderr and job.sh in the run folder; fix the spec and run again"
HINT_OOM = "ask for more memory (spec field mem or mem_per_cpu) or make the problem smaller"
HINT_DRAINED = ("resume the drained node (`hpclab cluster up` on the embedded cluster), then run again: "
                "runs that completed are kept")
HINT_WAITING = ("hpclab gave up waiting, Slurm did not fail the job: give it more time (timeout=...), or "
                "look at `squeue`/`hpclab cluster status` if it was pending for a reason that will not pass")


def _run(tmp_path, state: str = "failed", **status) -> experiment.Run:
    sp = make_spec(kernel="stream", ntasks=1, experiment="typed")
    folder = RunFolder.create("typed", sp.to_dict(), "#!/bin/bash\n", root=tmp_path)
    folder.set_status(state, job_id="42", **status)
    return experiment.Run(folder, sp)


def _raised(runs) -> JobFailed:
    with pytest.raises(JobFailed) as err:
        experiment.raise_for_failures(runs)
    return err.value


def test_every_failure_is_an_hpclab_error():
    """Does every typed failure stay an HpclabError (what callers catch today), and is hpclab's own
    wait timeout a kind of timeout?"""
    for cls in (SubmissionRefused, JobFailed, OutOfMemory, TimedOut, GaveUpWaiting, Cancelled, NodeDrained,
                JobLost):
        assert issubclass(cls, HpclabError) and cls.__module__ == errors.__name__
    assert issubclass(GaveUpWaiting, TimedOut) and not issubclass(SubmissionRefused, JobFailed)
    e = OutOfMemory("ran out", "ask for more")
    assert e.one_line() == "ran out (ask for more)" and e.runs == [] and e.failures == []


@pytest.mark.parametrize("failure, cls, hint", [
    ("out_of_memory", OutOfMemory, HINT_OOM),
    ("node_drained", NodeDrained, HINT_DRAINED),
    ("gave_up_waiting", GaveUpWaiting, HINT_WAITING),
    ("timed_out", TimedOut, HINT_OTHER),
    ("cancelled", Cancelled, HINT_OTHER),
    ("job_lost", JobLost, HINT_OTHER),
    ("failed", JobFailed, HINT_OTHER),
])
def test_runs_that_failed_the_same_way_raise_that_cause(tmp_path, failure, cls, hint):
    """Do two runs that failed for the same cause raise that cause's class, with today's hint?"""
    runs = [_run(tmp_path, failure=failure, reason=f"why {i}", exit_code=1) for i in range(2)]
    err = _raised(runs)
    assert type(err) is cls and err.hint == hint
    assert err.runs == runs and [type(f) for f in err.failures] == [cls, cls]


def test_the_message_is_todays(tmp_path):
    """Is the message word for word what hpclab said before the failures had types?"""
    ok = _run(tmp_path, "completed")
    bad = _run(tmp_path, failure="out_of_memory", slurm_state="OUT_OF_MEMORY", exit_code=0,
               reason="ran out of memory: asked 100 MB, used about 120 MB")
    bad.folder.write("stderr", "line 1\nslurmstepd: error: Detected 1 oom_kill event\n")
    err = _raised([ok, bad])
    assert err.what == (
        "1 of 2 run(s) did not complete:\n"
        f"run typed/{bad.run_id} (job 42): state failed (Slurm OUT_OF_MEMORY), exit code 0, "
        "reason: ran out of memory: asked 100 MB, used about 120 MB\n"
        "  last lines of stderr:\n    line 1\n    slurmstepd: error: Detected 1 oom_kill event\n"
        f"  run folder: {bad.path}")
    assert str(err) == f"{err.what}\n  what to do: {HINT_OOM}"
    assert experiment.failure_of(ok) is None and err.failures[0].what in err.what


def test_mixed_causes_raise_the_class_they_share(tmp_path):
    """Do runs that failed in different ways raise the closest class they share, with the general hint?"""
    mixed = _raised([_run(tmp_path, failure="out_of_memory"), _run(tmp_path, "timeout", failure="timed_out")])
    assert type(mixed) is JobFailed and mixed.hint == HINT_OTHER
    assert [type(f) for f in mixed.failures] == [OutOfMemory, TimedOut]
    slow = _raised([_run(tmp_path, "cancelled", failure="gave_up_waiting", stopped_waiting=5),
                    _run(tmp_path, "timeout", failure="timed_out")])
    assert type(slow) is TimedOut and slow.hint == HINT_OTHER


def test_statuses_written_before_the_types_are_still_told_apart(tmp_path):
    """Does a status.json without a recorded cause still give the cause its fields say?"""
    assert type(_raised([_run(tmp_path, "cancelled", stopped_waiting=3)])) is GaveUpWaiting
    assert type(_raised([_run(tmp_path, "timeout")])) is TimedOut
    assert type(_raised([_run(tmp_path, "cancelled")])) is Cancelled
    assert type(_raised([_run(tmp_path, failed_nodes=["node2"])])) is JobLost
    assert type(_raised([_run(tmp_path, reason="ran out of memory: asked 1 MB")])) is JobFailed


def _finished(tmp_path, monkeypatch, info: slurm.JobInfo, trouble=None, oom=False) -> dict:
    run = _run(tmp_path, "running")
    monkeypatch.setattr(experiment.slurm, "sacct_records", lambda ids: [])
    monkeypatch.setattr(experiment.slurm, "node_trouble", lambda nodes: dict(trouble or {}))
    monkeypatch.setattr(experiment, "memory_killed", lambda r: oom)
    monkeypatch.setattr(experiment, "memory_use", lambda job: (100.0, 120.0))
    experiment._finish(run, info)
    return run.folder.status()


@pytest.mark.parametrize("state, slurm_state, trouble, oom, failure", [
    ("failed", "OUT_OF_MEMORY", None, False, "out_of_memory"),
    ("failed", "FAILED", None, True, "out_of_memory"),
    ("failed", "NODE_FAIL", {"node2": "down"}, False, "job_lost"),
    ("cancelled", "CANCELLED", {"node2": "down"}, False, "job_lost"),
    ("cancelled", "CANCELLED", None, False, "cancelled"),
    ("timeout", "TIMEOUT", None, False, "timed_out"),
    ("failed", "FAILED", None, False, "failed"),
])
def test_the_end_of_a_job_records_its_cause(tmp_path, monkeypatch, state, slurm_state, trouble, oom, failure):
    """Does the end of a job write the cause into status.json, beside today's reason?"""
    st = _finished(tmp_path, monkeypatch, slurm.JobInfo("42", state, slurm_state, exit_code=1, nodes="node2"),
                   trouble, oom)
    assert st["state"] == state and st["failure"] == failure
    if failure == "out_of_memory":
        assert st["reason"].startswith("ran out of memory: asked 100 MB, used about 120 MB")
    if failure == "job_lost":
        assert st["reason"].startswith("node failure: node2 is down") and st["failed_nodes"] == ["node2"]


def test_a_completed_job_records_no_cause(tmp_path, monkeypatch):
    run = _run(tmp_path, "running")
    run.folder.write("result.json", "{}\n")
    monkeypatch.setattr(experiment.slurm, "sacct_records", lambda ids: [])
    experiment._finish(run, slurm.JobInfo("42", "completed", "COMPLETED", exit_code=0))
    assert run.state == "completed" and "failure" not in run.folder.status()


def test_a_refused_submission_raises_submission_refused_with_sbatchs_words(tmp_path, monkeypatch):
    """Does a job Slurm refuses raise SubmissionRefused with sbatch's message and hint, the run
    marked failed?"""
    def refuse(script):
        raise HpclabError("sbatch: error: QOSMaxSubmitJobPerUserLimit", "wait for your jobs to end")

    monkeypatch.setattr(experiment.slurm, "sbatch", refuse)
    run = _run(tmp_path, "pending")
    with pytest.raises(SubmissionRefused) as err:
        experiment.submit(run)
    assert (err.value.what, err.value.hint) == ("sbatch: error: QOSMaxSubmitJobPerUserLimit",
                                                "wait for your jobs to end")
    st = run.folder.status()
    assert st["state"] == "failed" and st["failure"] == "submission_refused"
    assert st["reason"] == "sbatch failed: sbatch: error: QOSMaxSubmitJobPerUserLimit"


def test_cancel_records_the_cause(tmp_path, monkeypatch):
    monkeypatch.setattr(experiment.slurm, "scancel", lambda ids: None)
    run = _run(tmp_path, "running")
    experiment.cancel([run], reason="interrupted (Ctrl-C) while waiting")
    assert type(_raised([run])) is Cancelled


def test_a_node_that_failed_and_came_back_is_still_named(tmp_path, monkeypatch):
    """A requeue seen only after the failed node returned to service (sinfo shows it idle): is the
    node still named from the accounting's event record, looked up from the attempt's start?"""
    run = _run(tmp_path, "running", nodes="node[1-2]")
    asked = {}
    monkeypatch.setattr(experiment.slurm, "scontrol_job", lambda job: None)
    monkeypatch.setattr(experiment.slurm, "node_trouble", lambda nodes: {})

    def events(nodes, since):
        asked.update(nodes=nodes, since=since)
        return {"node2": "down* (Not responding) from 05:30:22 to 05:30:26"}

    monkeypatch.setattr(experiment.slurm, "node_events", events)
    experiment._requeued(run, slurm.JobInfo("42", "pending", "PENDING", reason="BeginTime"), run.folder.status())
    st = run.folder.status()
    assert st["failed_nodes"] == ["node2"] and "node2 is down* (Not responding)" in st["reason"]
    assert asked["nodes"] == "node[1-2]" and asked["since"].count(":") == 2
    assert "hpclab cluster up" in st["reason"] and st["state"] == "pending"
