"""The experiment path against a fake Slurm (tests/fake_slurm/): hpclab.jobs.experiment's own code
submits, polls, cancels and reads the accounting through the same commands it uses on a cluster,
and each job ends the way the test planned: completed, failed with an exit code, out of memory,
requeued, lost with a node, pending on a drained partition, past its time limit, or still running
when hpclab stops waiting. What a real Slurm must show (that it enforces the limits, requeues,
cancels, and words it all as the fake does) stays in tests/test_experiment.py and
tests/test_faults.py; here each case takes a second instead of Slurm's minutes, and runs in
`make test-fast`."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path

import pytest

from hpclab.core.errors import (Cancelled, GaveUpWaiting, HpclabError, JobFailed, JobLost, NodeDrained,
                                OutOfMemory, SubmissionRefused, TcpUnpaired, TimedOut)
from hpclab.jobs import experiment
from hpclab.runs import folder as runs_folder
from hpclab.spec.model import make_spec, sweep
from tests.fake_slurm.fakeslurm import completes, ends, fate, phase, refused

TWO_NODES = {"node1": {"state": "idle", "reason": ""}, "node2": {"state": "idle", "reason": ""}}
OOM_KILL = ("slurmstepd: error: Detected 1 oom-kill event(s) in StepId=1001.0. Some of your processes may have "
            "been killed by the cgroup out-of-memory handler.\n")
SAMPLED_KILL = "slurmstepd: error: StepId=1001.0 exceeded memory limit (110690304 > 41943040), being killed\n"
UNPAIRED = ("[vm][[1234,1],1][btl_tcp_proc.c:400:mca_btl_tcp_proc_create_interface_graph] Unable to find "
            "reachable pairing between local and remote interfaces\n")


def spec(label: str = "x", **fields):
    """A spec of the course's `program` kernel (nothing to build; the fake runs nothing anyway)."""
    return make_spec({"kernel": "program", "command": ["true"], "ntasks": 1, "experiment": "logic",
                      "label": label, **fields})


def submit_and_wait(specs, timeout: float = 30.0) -> list[experiment.Run]:
    """experiment.run without its own wait, then experiment.wait_for polling every 20 ms: the fake
    moves on one phase per poll, so the 0.5-3 s polls a cluster needs would only add waiting. A job
    hpclab loses track of ends the test as GaveUpWaiting after `timeout` s, instead of hanging it."""
    runs = experiment.run(specs, wait=False, progress=False)
    experiment.wait_for(runs, timeout=timeout, progress=False, poll=0.02)
    return runs


def raised(specs, timeout: float = 30.0) -> JobFailed:
    with pytest.raises(JobFailed) as err:
        submit_and_wait(specs, timeout)
    return err.value


def only_run() -> runs_folder.RunFolder:
    (folder,) = runs_folder.run_folders()
    return folder


def history(run) -> list[tuple[str, str]]:
    return [(h["state"], h.get("reason", "")) for h in run.folder.status()["history"]]


@pytest.fixture
def quiet_notices(monkeypatch):
    """hpclab says a requeue or a missing accounting once per process; each test starts afresh."""
    monkeypatch.setattr(experiment, "_said", set())


# --- submission ---------------------------------------------------------------------------------


def test_repetitions_alternate_round_by_round_and_come_back_grouped(fake_slurm):
    """Three specs of 2, 3 and 1 repetitions through experiment.run: are their jobs submitted round
    by round (a b c a b b: Slurm's job ids rising in that order), and returned grouped by spec, as
    listed, each completed? (And does no spec submit nothing?)"""
    runs = experiment.run([spec("a", repetitions=2), spec("b", repetitions=3), spec("c")], progress=False)
    labels = [json.loads((Path(f) / "spec.json").read_text())["label"] for f in fake_slurm.submitted()]
    assert labels == ["a", "b", "c", "a", "b", "b"]
    assert [r.spec.label for r in runs] == ["a", "a", "b", "b", "b", "c"]
    by_folder = {str(r.path): int(r.job_id) for r in runs}
    assert [by_folder[f] for f in fake_slurm.submitted()] == list(range(1001, 1007))
    assert {r.state for r in runs} == {"completed"}
    assert experiment.submission_order([1]) == [(0, 1)] and experiment.submission_order([]) == []


def test_a_sweep_with_one_spec_that_cannot_run_submits_nothing(fake_slurm):
    """One spec of a sweep asks for more tasks than the partition has cores: is the whole sweep
    refused, naming that spec, before a single sbatch and a single run folder?"""
    with pytest.raises(HpclabError, match="spec 2 of 2: .*more tasks than cores"):
        experiment.run(sweep(spec(), {"ntasks": [1, 4096]}), progress=False)
    assert fake_slurm.calls("sinfo") and not fake_slurm.calls("sbatch")
    assert runs_folder.run_folders() == []


def test_a_refused_submission_is_submission_refused_with_sbatch_s_words(fake_slurm):
    """sbatch refusing the job (a QOS limit): does hpclab raise SubmissionRefused with Slurm's own
    message and a hint at the user's associations, the run folder kept and marked failed?"""
    fake_slurm.plan(refused("sbatch: error: Batch job submission failed: Job violates accounting/QOS policy "
                            "(job submit limit, user's size and/or time limits)"))
    with pytest.raises(SubmissionRefused) as err:
        submit_and_wait(spec())
    assert "Job violates accounting/QOS policy" in err.value.what
    assert "sacctmgr show assoc" in err.value.hint
    st = only_run().status()
    assert st["state"] == "failed" and st["failure"] == "submission_refused" and st["job_id"] is None


# --- how a job ends: one class per cause -----------------------------------------------------------


@pytest.mark.parametrize("planned, cls, failure, words", [
    (ends("FAILED", exit="3:0", files={"stderr": "boom: the input deck is missing\n"}), JobFailed, "failed",
     "state failed (Slurm FAILED), exit code 3, reason: the program exited with code 3"),
    (ends("OUT_OF_MEMORY", exit="0:125", files={"stderr": OOM_KILL}, req_mem="40M",
          steps=[{"id": "0", "name": "true", "state": "OUT_OF_MEMORY", "exit": "0:125", "max_rss": "20000K"}]),
     OutOfMemory, "out_of_memory", "ran out of memory: asked 40 MB, used about 40 MB, all of it"),
    (ends("FAILED", exit="9:0", files={"stderr": SAMPLED_KILL}, req_mem="40M"), OutOfMemory, "out_of_memory",
     "ran out of memory: asked 40 MB, used about 106 MB"),
    (ends("FAILED", exit="1:0", files={"stderr": UNPAIRED}), TcpUnpaired, "tcp_unpaired",
     "Open MPI's TCP transport found no pair of interfaces"),
    (ends("TIMEOUT"), TimedOut, "timed_out", "state timeout (Slurm TIMEOUT)"),
    (ends("CANCELLED", exit="0:15"), Cancelled, "cancelled", "state cancelled (Slurm CANCELLED)"),
    (ends("NODE_FAIL", nodes="node[1-2]", node_states={"node2": ["down*", "Not responding"]}), JobLost, "job_lost",
     "node failure: node2 is down* (Not responding); the job ended NODE_FAIL. `hpclab cluster up` returns the "
     "node to service"),
], ids=["exit-code", "oom-cgroup", "oom-sampled", "tcp-unpaired", "time-limit", "cancelled", "node-fail"])
def test_each_way_a_job_ends_raises_the_class_of_its_cause(fake_slurm, planned, cls, failure, words):
    """For each way Slurm ends a job, does the wait raise the failure class that names the cause
    (exactly that class: a job Slurm stopped at its time limit is TimedOut, not GaveUpWaiting),
    record the cause in status.json and say it in the message? Memory is enforced by the memory
    cgroup (the job OUT_OF_MEMORY, the kernel's killer counted in stderr) or by Slurm's sampling
    (FAILED, slurmstepd's bytes in stderr): a real cluster runs one of the two, the fake both."""
    fake_slurm.set(nodes={"vm": {"state": "idle", "reason": ""}, **TWO_NODES})
    fake_slurm.plan(planned)
    err = raised(spec(mem=40))
    assert type(err) is cls, err
    (run,) = err.runs
    assert run.folder.status()["failure"] == failure and [type(f) for f in err.failures] == [cls]
    assert words in str(err), err


def test_a_failed_job_says_state_exit_code_stderr_and_folder(fake_slurm):
    """A job whose program exits with code 3: does the error name the state, the exit code, the
    last lines of stderr and the folder, and is the folder kept, marked failed, in the index, with
    the accounting's record in its provenance?"""
    fake_slurm.plan(ends("FAILED", exit="3:0", files={"stderr": "boom: the input deck is missing\n"}))
    err = raised(spec())
    folder = only_run()
    text = str(err)
    assert "state failed (Slurm FAILED), exit code 3" in text and "boom: the input deck is missing" in text
    assert f"run folder: {folder.path}" in text and err.hint.startswith("read stderr and job.sh")
    assert folder.status()["exit_code"] == 3
    assert json.loads((folder.provenance / "sacct.json").read_text())[0]["State"] == "FAILED"
    assert [e["state"] for e in runs_folder.index()] == ["failed"]


def test_runs_failing_for_different_causes_raise_the_class_they_share(fake_slurm):
    """One repetition out of memory, the other past its time limit, one completed: is the error the
    class both failures share (JobFailed), listing each failure with its own class and both runs?"""
    fake_slurm.plan(ends("OUT_OF_MEMORY", files={"stderr": OOM_KILL}), ends("TIMEOUT"), completes())
    err = raised(spec(repetitions=3))
    assert type(err) is JobFailed and [type(f) for f in err.failures] == [OutOfMemory, TimedOut]
    assert str(err).startswith("2 of 3 run(s) did not complete")


# --- following a job Slurm moves ---------------------------------------------------------------------


def test_a_requeue_is_followed_and_recorded(fake_slurm, quiet_notices, capsys):
    """A running job Slurm requeues (pending with BeginTime, Restarts 1) and then runs again: does
    hpclab follow it to completion, recording the requeue and Slurm's count in the history, saying
    so once, and never calling it a timeout?"""
    fake_slurm.plan(fate(phase("RUNNING"), phase("PENDING", looks=2, reason="BeginTime", restarts=1),
                         phase("RUNNING", restarts=1),
                         phase("COMPLETED", restarts=1, files={"result.json": '{"kernel": "program", "exit_code": 0}'})))
    (run,) = submit_and_wait(spec())
    st = run.folder.status()
    assert st["state"] == "completed" and st["requeued"] and st["restarts"] == 1
    assert [s for s, _ in history(run)] == ["running", "pending", "running", "completed"]
    assert history(run)[1][1].startswith("Slurm requeued job 1001 (reason: BeginTime, restarts: 1)")
    assert capsys.readouterr().err.count("Slurm requeued job 1001") == 1


@pytest.mark.parametrize("seen_in", ["sinfo", "accounting"])
def test_a_requeue_after_a_node_failure_names_the_node(fake_slurm, quiet_notices, seen_in):
    """A job on node[1-2] requeued because node2 failed: does the history name node2 with Slurm's
    state and reason, say how to bring it back, record failed_nodes, and follow the job to the
    end? Whether sinfo still shows node2 down, or node2 came back before hpclab looked and only
    the accounting's node events remember it."""
    fake_slurm.set(nodes=TWO_NODES)
    down = ({"node_states": {"node2": ["down*", "Not responding"]}} if seen_in == "sinfo" else
            {"node_event": {"node": "node2", "state": "DOWN*", "reason": "Not responding", "back": True}})
    # while Slurm requeues it, the job completes on the live node only (squeue shows node1, seen on
    # the real cluster): the failed node must stay named
    fake_slurm.plan(fate(phase("RUNNING", looks=2, nodes="node[1-2]"),
                         phase("COMPLETING", looks=1, nodes="node1", **down),
                         phase("PENDING", looks=2, reason="BeginTime", restarts=1, **down),
                         phase("RUNNING", nodes="node[1-2]", restarts=1, node_states={"node2": ["idle", ""]}),
                         phase("COMPLETED", nodes="node[1-2]", restarts=1,
                               files={"result.json": '{"kernel": "program", "exit_code": 0}'})))
    (run,) = submit_and_wait(spec(nodes=2, ntasks=2))
    st = run.folder.status()
    assert st["state"] == "completed" and st["failed_nodes"] == ["node2"] and st["restarts"] == 1
    said = history(run)[1][1]
    assert said.startswith("Slurm requeued job 1001 after a node failure: node2 is down* (Not responding)"), said
    assert "`hpclab cluster up` returns the node to service" in said
    if seen_in == "accounting":
        assert " from " in said and " to " in said  # when node2 was down, from the event record


def test_a_job_slurm_forgot_is_submitted_again_and_its_output_kept(fake_slurm, quiet_notices, monkeypatch):
    """A running job that squeue, scontrol and sacct no longer know (a controller restarted from
    an old state): is the run's job script submitted again, the lost attempt's output kept under
    another name, and does the run complete as the new job?"""
    monkeypatch.setattr(experiment, "LOST_RESUBMIT_DELAY_S", 0.0)
    fake_slurm.plan(fate(phase("RUNNING", files={"stdout": "arguments = first attempt\n"}), phase("FORGOTTEN")),
                    fate(phase("RUNNING"), phase("COMPLETED", files={
                        "stdout": "arguments = second attempt\n",
                        "result.json": '{"kernel": "program", "exit_code": 0}'})))
    (run,) = submit_and_wait(spec())
    st = run.folder.status()
    assert st["state"] == "completed" and st["lost_jobs"] == ["1001"] and run.job_id == "1002"
    assert (run.path / "stdout.lost-job-1001").read_text() == "arguments = first attempt\n"
    assert run.folder.stdout.read_text() == "arguments = second attempt\n"
    assert any(r.startswith("Slurm lost job 1001") for _, r in history(run))
    assert [c[1:] for c in fake_slurm.calls("sbatch")] == [["--parsable", str(run.folder.job_sh)]] * 2


# --- when hpclab stops waiting ------------------------------------------------------------------------


@pytest.mark.parametrize("last, said", [
    (phase("RUNNING"), "it was running on vm (Slurm: RUNNING)"),
    (phase("PENDING", reason="launch failed requeued held"),
     "it was pending (Slurm: PENDING, reason launch failed requeued held): Slurm holds it after a failed launch; "
     "`hpclab cluster up` resumes the node and releases it"),
], ids=["running", "held"])
def test_giving_up_waiting_cancels_and_says_what_the_job_was_doing(fake_slurm, last, said):
    """hpclab's own timeout passing while the job runs (or is held): is the job cancelled in
    Slurm, the folder marked cancelled (not timeout: Slurm's limit was not reached), and does the
    error, GaveUpWaiting, say what Slurm last reported and that more time is the remedy?"""
    fake_slurm.plan(fate(phase("PENDING", reason="Priority"), last))
    err = raised(spec(), timeout=0.3)
    assert type(err) is GaveUpWaiting and "more time" in err.hint
    assert f"hpclab stopped waiting after 0.3 s and cancelled the job; {said}" in str(err), err
    st = err.runs[0].folder.status()
    assert st["state"] == "cancelled" and st["stopped_waiting"] == 0.3 and st["failure"] == "gave_up_waiting"
    assert fake_slurm.calls("scancel") == [["scancel", "1001"]]
    assert fake_slurm.state["jobs"]["1001"]["cancelled"]["state"] == "CANCELLED"


def test_ctrl_c_while_waiting_cancels_the_jobs(fake_slurm, monkeypatch):
    """A KeyboardInterrupt while waiting: are the jobs still running cancelled in Slurm and their
    folders marked cancelled, with an error saying so?

    Ctrl-C lands where the wait spends its time, in its sleep between polls: the third sleep
    raises it here. (A simulated signal, _thread.interrupt_main, was lost in two full
    `make test-fast` runs of three, never in the file alone: Python may raise it inside a
    finaliser, where it is dropped.)"""
    fake_slurm.plan(fate(phase("RUNNING")), fate(phase("RUNNING")))
    runs = experiment.run(spec(repetitions=2), wait=False, progress=False)
    sleeps, waiting, real_sleep = [], threading.current_thread(), time.sleep

    def sleep(seconds):
        # time.sleep is the module's: other threads (pytest-xdist's) sleep here too, and so does
        # this thread after the interrupt (subprocess's wait for scancel polls with sleeps)
        if threading.current_thread() is not waiting or len(sleeps) == 3:
            return real_sleep(seconds)
        sleeps.append(seconds)
        if len(sleeps) == 3:
            raise KeyboardInterrupt

    with monkeypatch.context() as patched, \
            pytest.raises(HpclabError, match="interrupted: cancelled the jobs that had not finished"):
        patched.setattr(experiment.time, "sleep", sleep)
        experiment.wait_for(runs, progress=False, poll=0.02, timeout=60)
    assert len(sleeps) == 3
    assert {r.state for r in runs} == {"cancelled"}
    assert fake_slurm.calls("scancel") == [["scancel", "1001", "1002"]]


@pytest.mark.parametrize("drained", [["vm"], ["vm1"]], ids=["every-node", "one-of-two"])
def test_a_job_only_drained_nodes_could_start_is_named_not_waited_for(fake_slurm, monkeypatch, drained):
    """Every node of the partition drained: does the wait stop (NodeDrained, not at the timeout),
    naming the node, its reason and how to resume it, and cancel the job? With one node of two
    drained, does the job wait for the other instead, and complete?"""
    monkeypatch.setattr(experiment._DrainWatch, "CHECK", 0.0)
    monkeypatch.setattr(experiment._DrainWatch, "GRACE", 0.0)
    names = ["vm"] if drained == ["vm"] else ["vm1", "vm2"]
    fake_slurm.set(nodes={n: {"state": "drained" if n in drained else "allocated",
                              "reason": "test drain" if n in drained else ""} for n in names})
    waiting = phase("PENDING", looks=4, reason="Nodes_required_for_job_are_DOWN,_DRAINED_or_reserved")
    fake_slurm.plan(fate(waiting, phase("RUNNING", nodes="vm2"),
                         phase("COMPLETED", nodes="vm2", files={"result.json": '{"kernel": "program", "exit_code": 0}'})))
    if len(names) == 2:
        (run,) = submit_and_wait(spec(), timeout=60)
        assert run.state == "completed" and not fake_slurm.calls("scancel")
        return
    err = raised(spec(), timeout=60)
    assert type(err) is NodeDrained and "hpclab cluster up" in err.hint
    assert "no node can start the job: every node of its partition is drained (vm is drained (test drain))" in str(err)
    assert fake_slurm.calls("scancel") == [["scancel", "1001"]]


def test_on_a_site_s_cluster_a_drained_partition_is_said_once_and_waited_for(fake_slurm, monkeypatch, quiet_notices,
                                                                              capsys):
    """On a site's cluster, where admins drain nodes for maintenance and resume them: does the wait
    say once that no node can start the job, and keep it queued (until hpclab's own timeout here)
    instead of cancelling it as NodeDrained?"""
    monkeypatch.setattr(experiment._DrainWatch, "CHECK", 0.0)
    monkeypatch.setattr(experiment._DrainWatch, "GRACE", 0.0)
    fake_slurm.set(nodes={"n1": {"state": "drained", "reason": "maintenance"}})
    fake_slurm.plan(fate(phase("PENDING", reason="ReqNodeNotAvail")))
    runs = experiment.run(spec(), wait=False, progress=False)  # the local site's checks, then a site's wait
    monkeypatch.setenv("HPCLAB_SITE", "example-cluster")
    with pytest.raises(GaveUpWaiting):
        experiment.wait_for(runs, timeout=0.5, progress=False, poll=0.02)
    assert capsys.readouterr().err.count("n1 is drained (maintenance); it waits until the admins resume one") == 1


# --- without accounting -----------------------------------------------------------------------------


def test_without_accounting_jobs_complete_with_states_from_scontrol(fake_slurm, quiet_notices, capsys):
    """sacct failing (slurmdbd down): do the jobs still complete, their state read from squeue and
    scontrol, each run's provenance saying so, and hpclab saying it once, not as a failure?"""
    fake_slurm.set(accounting=False)
    runs = submit_and_wait(spec(repetitions=2))
    for run in runs:
        st = run.folder.status()
        assert st["state"] == "completed" and st["accounting"] == "unavailable"
        note = (run.folder.provenance / "accounting.txt").read_text()
        assert "accounting unavailable" in note and "taken from scontrol" in note
        assert not (run.folder.provenance / "sacct.json").exists()
    assert capsys.readouterr().err.count("accounting (sacct) is unavailable") == 1
