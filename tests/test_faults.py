"""Faults on the real local cluster (docs/faults.md): the controller killed or restarted under a
running job, accounting down, a job over its memory limit, a node left drained, and what hpclab
says when it stops waiting. These tests stop and start the cluster's own daemons by their pid
files, so they run one at a time (make test does) and each leaves the cluster up.

How hpclab reads each of these from Slurm's answers (requeue, node failure, drain, out of
memory, a forgotten job, giving up waiting) is tested against the fake Slurm in
tests/test_experiment_logic.py, in make test-fast. A test here proves what the fake cannot: that
the real daemons behave and word it so, and that `hpclab cluster up` repairs what broke."""

import json
import os
import re
import signal
import subprocess
import time
from pathlib import Path

import pytest

from hpclab.jobs import experiment
from hpclab.core import commands, paths
from hpclab.site import slurm
from hpclab.cluster import config, local
from hpclab.core.errors import HpclabError
from hpclab.spec.model import make_spec

pytestmark = pytest.mark.cluster

POISSON = dict(kernel="poisson", ntasks=2, args={"n": 64, "grid": "1x2", "iters": 10})


@pytest.fixture
def runs_root(tmp_path, monkeypatch, cluster):
    root = tmp_path / "runs"
    monkeypatch.setenv("HPCLAB_RUNS", str(root))
    yield root
    local.up()  # whatever a test broke, the next one finds the cluster running


def need(kernel):
    if not (paths.bin_dir() / kernel).is_file():
        pytest.skip(f"build/bin/{kernel} not built (make -C src)")


def _template_before_run(tmp_path, monkeypatch, shell: str) -> None:
    """Kernel templates whose job runs `shell` before the kernel."""
    d = tmp_path / "tpl"
    d.mkdir(exist_ok=True)
    (d / "poisson.sh.j2").write_text('{% extends "preamble.sh.j2" %}\n{% block before_run %}\n'
                                     f"{shell}\n{{% endblock %}}\n")
    monkeypatch.setenv("HPCLAB_TEMPLATES", str(d))


def _slow_template(tmp_path, monkeypatch, seconds):
    """Kernel templates whose job sleeps `seconds` before the kernel runs, so a fault can strike
    while the job is running."""
    _template_before_run(tmp_path, monkeypatch, f"sleep {seconds}")


def _gated_template(tmp_path, monkeypatch) -> Path:
    """Kernel templates whose job waits for a file before the kernel runs; returns the file. The
    test creates it once the cluster is whole again: a job step (srun) started while the
    controller is down waits about two minutes before it asks again (139-149 s against 22 s
    for the same test when a fixed sleep let srun start during the restart)."""
    gate = tmp_path / "go"
    _template_before_run(tmp_path, monkeypatch, f"while [ ! -e {gate} ]; do sleep 0.2; done")
    return gate


def _await(done, limit: float, what: str) -> None:
    """Poll done() every 0.1 s until it is true; fail saying what was awaited after `limit` s."""
    end = time.monotonic() + limit
    while not done():
        if time.monotonic() > end:
            pytest.fail(f"waited {limit:g} s for {what}")
        time.sleep(0.1)


def _wait_running(run, limit=120):
    end = time.monotonic() + limit
    while time.monotonic() < end:
        experiment.refresh([run])
        if run.state == "running":
            return
        time.sleep(0.2)
    pytest.fail(f"job {run.job_id} did not start within {limit} s: {run.folder.status()}")


def _slurmctld_pid() -> int:
    pid = local.slurmctld_daemon(config.layout()).pid()
    assert pid, "slurmctld is not running"
    return pid


@pytest.mark.parametrize("after", [1.0, 6.0])
def test_controller_kill9_mid_job_then_up_job_completes(runs_root, tmp_path, monkeypatch, after):
    """slurmctld killed (-9) `after` s into a running job, `hpclab cluster up`: does the job end
    completed and validated, its run folder complete, and is a requeue recorded, not a timeout?"""
    need("poisson")
    gate = _gated_template(tmp_path, monkeypatch)
    (run,) = experiment.run(make_spec(POISSON), wait=False, progress=False)
    _wait_running(run)
    time.sleep(after)
    os.kill(_slurmctld_pid(), signal.SIGKILL)
    t0 = time.monotonic()
    try:
        local.up()
    finally:
        gate.touch()  # also when up failed: the job then ends instead of waiting out its time limit
    print(f"up after kill -9: {time.monotonic() - t0:.1f} s")
    experiment.wait_for([run], timeout=300, progress=False)
    print(f"kill -9 at {after} s: job ended {time.monotonic() - t0:.1f} s after the kill")
    st = run.folder.status()
    assert st["state"] == "completed" and st["slurm_state"] == "COMPLETED"
    assert run.table() is not None and len(run.table()) > 0
    states = [h["state"] for h in st["history"]]
    assert "timeout" not in states and states[-1] == "completed"
    print("history:", json.dumps(st["history"]), "restarts:", st.get("restarts"))
    assert local.node_states() and all(s.rstrip("*") in ("idle", "mixed") for s in local.node_states().values())


def test_graceful_controller_restart_keeps_the_job_running(runs_root, tmp_path, monkeypatch):
    """slurmctld stopped with SIGTERM (it saves its state) and started again: does the job keep
    running, once, and complete?"""
    need("poisson")
    _slow_template(tmp_path, monkeypatch, 8)
    (run,) = experiment.run(make_spec(POISSON), wait=False, progress=False)
    _wait_running(run)
    t0 = time.monotonic()
    assert local.slurmctld_daemon(config.layout()).stop()
    local.up()
    print(f"graceful restart: up in {time.monotonic() - t0:.1f} s")
    experiment.wait_for([run], timeout=300, progress=False)
    st = run.folder.status()
    assert st["state"] == "completed"
    assert [h["state"] for h in st["history"]] == ["running", "completed"]  # never back to pending
    assert not st.get("requeued")
    assert run.folder.stdout.read_text().count("arguments =") == 1  # ran once, not again


def test_accounting_down_jobs_still_run_and_provenance_says_so(runs_root, capfd):
    """slurmdbd stopped: does a job still run and complete, with its state from squeue/scontrol,
    provenance saying accounting was unavailable, hpclab saying so once, and `up` bringing
    accounting back? (Real: jobs run with slurmdbd stopped and slurmctld sends their records once
    it is back; the fake's test covers hpclab's side.)"""
    need("poisson")
    lay = config.layout()
    assert local.slurmdbd_daemon(lay).stop()
    experiment._said.discard("accounting")
    (run,) = experiment.run(make_spec(POISSON), progress=False, timeout=300)
    st = run.folder.status()
    assert st["state"] == "completed" and st["accounting"] == "unavailable"
    assert "accounting unavailable" in (run.folder.provenance / "accounting.txt").read_text()
    assert not (run.folder.provenance / "sacct.json").exists()
    assert capfd.readouterr().err.count("accounting (sacct) is unavailable") == 1
    t0 = time.monotonic()
    local.up()
    deadline = time.monotonic() + 120
    while not slurm.sacct_records([run.job_id]) and time.monotonic() < deadline:
        time.sleep(1)
    # slurmctld kept the job's records and sends them once slurmdbd is back
    assert slurm.sacct([run.job_id])[run.job_id].slurm_state == "COMPLETED"
    print(f"accounting back after up, job record in the database: {time.monotonic() - t0:.1f} s")


def test_up_survives_a_hung_slurmdbd_with_a_clear_error(cluster, monkeypatch):
    """sacctmgr not answering (slurmdbd hung) gives False / an HpclabError naming the log, never
    subprocess.TimeoutExpired."""
    lay = config.layout()

    def hang(*a, **k):
        raise subprocess.TimeoutExpired("sacctmgr", 20)

    monkeypatch.setattr(commands.subprocess, "run", hang)  # what core.commands.run meets when sacctmgr hangs
    assert local._sacctmgr_ok(lay) is False
    with pytest.raises(HpclabError, match="sacctmgr did not answer") as exc:
        local._register_cluster(lay)
    assert str(lay.logfile("slurmdbd")) in exc.value.hint


def test_out_of_memory_says_asked_and_used(runs_root):
    """A job over its memory limit: is it stopped by Slurm (the memory cgroup, or the accounting
    kill) and does hpclab say 'ran out of memory: asked N MB, used about M MB' (M at least N) and
    what to do? (Real: this machine's enforcement stops the job and its accounting has the numbers;
    the fake's test words both enforcements.)"""
    need("stream")
    spec = make_spec(kernel="stream", ntasks=1, mem=40, args={"size": 4_000_000, "reps": 50})  # 3 x 32 MB arrays
    with pytest.raises(HpclabError) as exc:
        experiment.run(spec, progress=False, timeout=300)
    text = str(exc.value)
    m = re.search(r"ran out of memory: asked 40 MB, used about (\d+) MB", text)
    assert m and int(m.group(1)) >= 40, text
    assert "mem" in exc.value.hint
    st = json.loads(next(runs_root.glob("stream/*/status.json")).read_text())
    assert st["state"] == "failed" and st["reason"].startswith("ran out of memory")
    print(f"out of memory: Slurm state {st['slurm_state']}, {st['reason']}")


def test_memory_is_scheduled(cluster):
    """Does the local cluster schedule memory (CR_Core_Memory) with a default per CPU?"""
    out = subprocess.run(["scontrol", "show", "config"], capture_output=True, text=True, env={**os.environ, **cluster}).stdout
    assert "CR_CORE_MEMORY" in out.upper().replace(" ", "")
    fields = dict(line.split("=", 1) for line in (l.replace(" ", "") for l in out.splitlines()) if "=" in line)
    assert int(fields["DefMemPerCPU"]) > 0


@pytest.mark.skipif(not config.memory_cgroup(), reason="task/cgroup runs only on a cgroup v1 memory hierarchy")
def test_a_stale_cgroup_of_an_earlier_job_with_the_same_id_does_not_drain_the_node(cluster):
    """Job ids start at 1 in every cluster state, and Slurm 22.05 leaves a cancelled job's memory
    cgroup behind. A later job with the same id once met the old limits there, failed to launch
    ("Slurmd could not execve job") and drained the node (a CI run stopped on it). Does the
    Prolog tidy the stale cgroup, the job run, the node stay up, and a cancelled job leave
    nothing behind?"""
    env = {**os.environ, **cluster}
    node = next(iter(local.node_states()))

    def sbatch(*words):
        return subprocess.run(["sbatch", "--parsable", "-o", "/dev/null", *words], check=True,
                              env=env, capture_output=True, text=True).stdout.strip().split(";")[0]

    def ended(job):
        for _ in range(150):
            if not subprocess.run(["squeue", "-h", "-j", job], env=env, capture_output=True,
                                  text=True).stdout.strip():
                return
            time.sleep(0.2)
        raise AssertionError(f"job {job} did not end in 30 s")

    memory = config.MEMORY_CGROUP / f"slurm_{node}" / "uid_0"
    last = sbatch("-w", node, "-n", "1", "--wrap", "true")
    ended(last)
    stale = memory / f"job_{int(last) + 1}" / "step_batch"   # what an earlier cluster left
    stale.mkdir(parents=True, exist_ok=True)
    (stale / "memory.limit_in_bytes").write_text(str(64 << 20))
    if (stale / "memory.memsw.limit_in_bytes").exists():
        (stale / "memory.memsw.limit_in_bytes").write_text(str(64 << 20))
    job = sbatch("-w", node, "-n", "1", "--wrap", "srun -n 1 true")
    ended(job)
    if job != str(int(last) + 1):
        pytest.skip(f"another job took id {int(last) + 1}; the stale cgroup was not met")
    assert "drain" not in local.node_states()[node], "the stale cgroup drained the node"
    # the accounting hears of the end a moment after squeue forgets the job (a full run once read
    # PENDING here): wait for slurmdbd's record to leave the states before the end
    end = time.monotonic() + 30
    while True:
        state = subprocess.run(["sacct", "-n", "-X", "-P", "-j", job, "-o", "State"], env=env,
                               capture_output=True, text=True).stdout.strip()
        if state not in ("PENDING", "RUNNING", "COMPLETING") or time.monotonic() > end:
            break
        time.sleep(0.5)
    assert state in ("COMPLETED", ""), state
    assert not (memory / f"job_{job}").exists()
    cancelled = sbatch("-w", node, "-n", "1", "--wrap", "srun -n 1 sleep 60")
    step = memory / f"job_{cancelled}" / "step_0"  # cancelled while its srun step runs
    _await(step.is_dir, 60, f"job {cancelled}'s srun step to start (its memory cgroup {step})")
    subprocess.run(["scancel", cancelled], env=env, check=True)
    ended(cancelled)
    for _ in range(50):   # the Epilog runs a moment after the job left the queue
        if not (memory / f"job_{cancelled}").exists():
            break
        time.sleep(0.2)
    assert not (memory / f"job_{cancelled}").exists(), "the cancelled job left its cgroup"


def test_up_resumes_a_drained_node(cluster):
    """A node drained as after a failed launch ('Duplicate jobid'): does `up` return it?"""
    name = next(iter(local.node_states()))
    env = {**os.environ, **cluster}
    subprocess.run(["scontrol", "update", f"nodename={name}", "state=drain", "reason=Duplicate jobid"],
                   check=True, env=env, capture_output=True)
    assert "drain" in local.node_states()[name]
    local.up()
    assert local.node_states()[name].rstrip("*") in ("idle", "mixed", "allocated")


def test_stopped_waiting_names_the_real_state(runs_root, tmp_path, monkeypatch):
    """hpclab giving up on a running job: is it cancelled with Slurm's last state in the reason
    (running, on which node), never called a timeout? (Real: the words a real squeue gives a running
    job; the fake's test also covers a held job and Ctrl-C.) Beside make test's other workers the
    job may still wait for a core when hpclab gives up (make test, 2026-12-08: pending after 4 s):
    then Slurm's words for a waiting job are the real state, and are what the reason must say."""
    need("poisson")
    _slow_template(tmp_path, monkeypatch, 300)
    with pytest.raises(HpclabError) as exc:
        experiment.run(make_spec(POISSON), progress=False, timeout=15)
    text = str(exc.value)
    assert "state cancelled" in text and "hpclab stopped waiting after 15 s" in text
    assert "running on" in text or "pending (" in text, text
    assert "timeout" not in text.replace("timeout=", "")
    assert "more time" in exc.value.hint


def test_requeue_is_followed_and_recorded(runs_root, tmp_path, monkeypatch):
    """A running job requeued by Slurm (scontrol requeue): does hpclab follow it to the end,
    record the requeue and the Restarts count in the status history, and not call it a timeout?
    (Real: that Slurm shows a requeue as running -> pending with BeginTime and scontrol's Restarts,
    the answers the fake's requeue tests give; it waits out cred_expire, about 31 s.)"""
    need("poisson")
    _slow_template(tmp_path, monkeypatch, 4)
    (run,) = experiment.run(make_spec(POISSON), wait=False, progress=False)
    _wait_running(run)
    slurm.run_slurm(["scontrol", "requeue", run.job_id], what="requeue")
    experiment.wait_for([run], timeout=400, progress=False)
    st = run.folder.status()
    assert st["state"] == "completed" and st["requeued"] and st["restarts"] >= 1
    assert any("requeued" in h.get("reason", "") for h in st["history"] if h["state"] == "pending")


def _node_commands(cg) -> dict[int, str]:
    """pid -> command name of every process in a virtual node's cpuset cgroup."""
    names = {}
    for pid in (cg / "tasks").read_text().split():
        try:
            names[int(pid)] = (Path("/proc") / pid / "comm").read_text().strip()
        except OSError:
            pass  # ended between the two reads
    return names


def _why_no_step(run, node2) -> str:
    """What a job whose step never reached node2 was doing: its status, each node's processes,
    Slurm's view of its steps, the end of what it printed and what node2's slurmd logged of it."""
    from hpclab.cluster import vnodes

    node1 = vnodes.cgroup_dir(vnodes.netns_name(1))
    steps = subprocess.run(["squeue", "-s", "-j", str(run.job_id)], capture_output=True, text=True)
    said = "\n".join(f.read_text(errors="replace")[-1500:] for f in (run.folder.stdout, run.folder.stderr)
                     if f.exists())
    log = config.layout().logfile("slurmd-node2")
    logged = [line for line in (log.read_text(errors="replace").splitlines() if log.exists() else [])
              if f"[{run.job_id}." in line or f"JobId={run.job_id} " in line or "error" in line.lower()]
    return (f"the sleep step never ran on node2: {run.folder.status()}; node1 ran {_node_commands(node1)}; "
            f"node2 ran {_node_commands(node2)}; steps:\n{steps.stdout}{steps.stderr}\nthe job said:\n{said}\n"
            f"{log} (the job's lines and errors, last 40):\n" + "\n".join(logged[-40:]))


def _launch_failed(run) -> bool:
    """Did a step of the job fail to launch (srun says so in the job's error output)?"""
    return run.folder.stderr.exists() and "launch failed" in run.folder.stderr.read_text(errors="replace")


def _sleep_step_on_node2(spec, node2):
    """Submit the job and wait until its sleep step runs on node2; returns the run.

    A step that fails to launch there fails the test at once, with what node2's slurmd logged
    (it was how a stale PMIx socket of an earlier run's killed step was found: see
    local.clear_stale_step_sockets)."""
    (run,) = experiment.run(spec, wait=False, progress=False)
    _wait_running(run)
    # kill while the sleep step runs there, not during the preamble (which a loaded machine
    # stretched past 120 s once: a bound, not a timing)
    end = time.monotonic() + 300
    while "sleep" not in _node_commands(node2).values():
        if _launch_failed(run) or time.monotonic() > end:
            why = _why_no_step(run, node2)
            experiment.cancel([run], "the sleep step did not reach node2")
            pytest.fail(why)
        time.sleep(0.2)
    return run


def _dead(pid: int) -> bool:
    """Has process `pid` ended (gone, or a zombie its parent has not reaped yet)?"""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z"
    except (OSError, IndexError):
        return True


def _kill_node(cg) -> dict[int, str]:
    """SIGKILL every process of a virtual node (its cpuset cgroup holds exactly what its slurmd
    started), as a node that loses power; the cgroup itself stays. Returns what was killed."""
    killed = {}
    end = time.monotonic() + 10
    while time.monotonic() < end:
        found = _node_commands(cg)
        if not found:
            return killed
        killed.update(found)
        for pid in found:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        time.sleep(0.1)
    pytest.fail(f"processes of {cg} survived SIGKILL")


@pytest.mark.slow
def test_node_failure_on_virtual_nodes_names_the_node_and_up_returns_it(cluster, monkeypatch):
    """Two virtual nodes, a job on both; node2's slurmd and its job processes are killed: does
    hpclab follow what Slurm does (requeue, with JobRequeue's default) with a message naming node2
    and what to do, does the next plain `hpclab cluster up` return node2 to service (the same two
    nodes, not a new cluster), and does the requeued job then complete? (Real: the killed node, the
    requeue of its job, and `up` bringing the node back; the node is marked down with scontrol as
    slurmctld does after SlurmdTimeout, instead of waiting 160 s for it. Naming the node from
    sinfo or the accounting's events is the fake's test, in a second.)"""
    from hpclab.cluster import vnodes

    need("poisson")
    root = paths.build_dir() / "test-faults"  # every node sees build/, none sees another's /tmp
    root.mkdir(parents=True, exist_ok=True)
    monkeypatch.setenv("HPCLAB_RUNS", str(root / f"runs-{os.getpid()}"))
    tpl = root / f"tpl-{os.getpid()}"
    tpl.mkdir(exist_ok=True)
    (tpl / "poisson.sh.j2").write_text('{% extends "preamble.sh.j2" %}\n{% block before_run %}\n'
                                      "srun --ntasks-per-node=1 sleep 60\n{% endblock %}\n")
    monkeypatch.setenv("HPCLAB_TEMPLATES", str(tpl))
    vnodes.down()
    try:
        vnodes.up(nodes=2, cpus_per_node=1)
        spec = make_spec({**POISSON, "nodes": 2, "ntasks_per_node": 1})
        node2 = vnodes.cgroup_dir(vnodes.netns_name(2))
        run = _sleep_step_on_node2(spec, node2)
        t0 = time.monotonic()
        slurmd = int((config.layout().run / "slurmd-node2.pid").read_text().split()[0])
        os.kill(slurmd, signal.SIGKILL)  # by its pid file too, should it ever not be in its cgroup
        killed = _kill_node(node2)  # node2's slurmd and its job steps
        assert _dead(slurmd) and "sleep" in killed.values(), killed
        # slurmctld would mark node2 DOWN itself after SlurmdTimeout (120 s) and its next ping, about
        # 160 s of this test's 210 (measured); it is told now, as its own timeout would, with the
        # reason it gives. What follows (the requeue, hpclab naming node2, `up`) is Slurm's and hpclab's own.
        slurm.run_slurm(["scontrol", "update", "nodename=node2", "state=down", "reason=Not responding"],
                        what="mark the killed node2 down")
        end = time.monotonic() + 400
        while time.monotonic() < end and run.state not in slurm.TERMINAL and not run.folder.status().get("requeued"):
            experiment.refresh([run])
            time.sleep(2)
        st = run.folder.status()
        print(f"node failure: {time.monotonic() - t0:.0f} s after the kill: state {st['state']}: {st['reason']}")
        job_said = "\n".join(f.read_text(errors="replace")[-1500:] for f in (run.folder.stdout, run.folder.stderr)
                              if f.exists())
        assert st.get("failed_nodes") == ["node2"] and "node2 is down" in st["reason"], \
            f"killed on node2: {sorted(set(killed.values()))}; status {st}; the job said:\n{job_said}"
        assert "hpclab cluster up" in st["reason"]
        if run.state in slurm.TERMINAL:
            return  # ended (NODE_FAIL) rather than requeued: named and explained, nothing to wait for
        t1 = time.monotonic()
        report = local.up()
        print(f"node2 back after up: {time.monotonic() - t1:.1f} s")
        assert report.nodes == ["node1", "node2"]
        assert not local.node_states()["node2"].endswith("*")
        experiment.wait_for([run], timeout=400, progress=False)  # Slurm runs the requeued job again
        st = run.folder.status()
        print(f"requeued job completed {time.monotonic() - t1:.0f} s after up; restarts {st.get('restarts')}")
        assert st["state"] == "completed" and st["restarts"] >= 1
    finally:
        vnodes.down()
        local.up()


def test_a_job_slurm_forgot_is_submitted_again_and_its_output_kept(runs_root, tmp_path, monkeypatch):
    """A running job that squeue, scontrol and sacct no longer know (a controller restarted from a
    state saved before it recorded the job; seen in make test once): is it submitted again, the
    lost attempt's output kept under another name, and does the run complete?

    Slurm's answer for the forgotten job is simulated once (the real case needs a kill -9 inside
    the controller's 5 s save window); the second submission and the rest are real: the run's own
    job script run again in its folder completes the run (the fake's test runs no job script)."""
    need("poisson")
    _slow_template(tmp_path, monkeypatch, 3)
    (run,) = experiment.run(make_spec(POISSON), wait=False, progress=False)
    _wait_running(run)
    end = time.monotonic() + 60   # running in squeue comes a moment before the script opens its output
    while not run.folder.stdout.exists() and time.monotonic() < end:
        time.sleep(0.2)
    first = run.job_id
    real = slurm.job_states
    monkeypatch.setattr(slurm, "job_states", lambda ids: {
        j: slurm.JobInfo(j, "pending", "UNKNOWN", reason="not yet visible") for j in ids})
    experiment.refresh([run])
    monkeypatch.setattr(slurm, "job_states", real)
    assert run.job_id != first
    st = run.folder.status()
    assert st["lost_jobs"] == [first] and "Slurm lost job" in st["history"][-1]["reason"]
    subprocess.run(["scancel", first], capture_output=True)  # the node would have killed the orphan
    experiment.wait_for([run], timeout=300, progress=False)
    assert run.folder.status()["state"] == "completed"
    assert (run.folder.path / f"stdout.lost-job-{first}").exists() and run.folder.stdout.exists()


def test_a_job_no_drained_node_can_start_is_named_not_waited_for(runs_root, monkeypatch):
    """Every node of the partition drained (as after a failed launch): does the wait stop within
    a minute, naming the node, its reason and how to resume it, instead of waiting until the
    timeout (a CI run waited an hour on one), and does `up` then return the node? (Real: a real
    sinfo's words for a drained node, and `up` resuming it; the fake's test also shows one drained
    node of two is waited for.)"""
    need("stream")
    monkeypatch.setattr(experiment._DrainWatch, "CHECK", 1.0)
    monkeypatch.setattr(experiment._DrainWatch, "GRACE", 3.0)
    node = next(iter(local.node_states()))
    env = {**os.environ, **slurm.slurm_env()}
    subprocess.run(["scontrol", "update", f"nodename={node}", "state=drain", "reason=test drain"],
                   check=True, env=env, capture_output=True)
    try:
        spec = make_spec(kernel="stream", ntasks=1, args={"size": 100_000, "reps": 2})
        t0 = time.monotonic()
        with pytest.raises(HpclabError) as exc:
            experiment.run(spec, progress=False, timeout=300)
        waited = time.monotonic() - t0
    finally:
        local.up()
    text = str(exc.value)
    assert "no node can start the job" in text and node in text and "test drain" in text, text
    assert "hpclab cluster up" in exc.value.hint
    assert waited < 60, f"waited {waited:.0f} s"
    assert "drain" not in local.node_states()[node]
