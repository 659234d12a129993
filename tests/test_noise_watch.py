"""The noise watch: each job samples its node before and after its run, and a run taken beside
other work is flagged (status.json noise, in words), counted in a comparison's sentence, and with
rerun_disturbed submitted once more. The parser is checked on samples recorded here, the sampling
script on a node without Slurm's commands, and the whole path once on the real cluster."""

import json
import os
import re
import subprocess
from pathlib import Path

import pytest

from hpclab.core import paths
from hpclab.jobs import experiment
from hpclab.runs.folder import run_folders
from hpclab.runs.parse import noise
from hpclab.spec.model import make_spec

# Recorded on the course VM (2 cores): a short STREAM job (1 task) alone, job 26...
QUIET_BEFORE = """node vm
jobs 26 
0m0.007s 0m0.000s
0m0.026s 0m0.011s
clock 1795812120.622024
cpu  150950 0 28436 210496 1249 0 1176 1783 0 0
cpu0 79443 0 14534 101036 700 0 449 823 0 0
cpu1 71507 0 13901 109459 549 0 726 960 0 0
"""
QUIET_AFTER = """cpu  150978 0 28448 210583 1249 0 1177 1783 0 0
cpu0 79468 0 14540 101068 700 0 449 823 0 0
cpu1 71509 0 13907 109514 549 0 727 960 0 0
clock 1795812121.271764
0m0.008s 0m0.000s
0m0.029s 0m0.022s
jobs 26 
step 26|1795812120|vm|00:00.315
step 26.batch|1795812120|vm|00:00:00
step 26.0|1795812120|vm|00:00.019
step 26.1|1795812120|vm|00:00.296
"""
# ... and the same job beside `taskset -c 0 bash -c 'while :; do :; done'` (and whatever else ran), job 28
BUSY_BEFORE = """node vm
jobs 28 
0m0.004s 0m0.004s
0m0.030s 0m0.015s
clock 1795812161.835814
cpu  153002 0 29246 215724 1263 0 1267 1810 0 0
cpu0 80570 0 14975 103521 706 0 496 836 0 0
cpu1 72431 0 14271 112202 556 0 771 974 0 0
"""
BUSY_AFTER = """cpu  153233 0 29267 215724 1263 0 1267 1813 0 0
cpu0 80690 0 14983 103521 706 0 496 836 0 0
cpu1 72543 0 14283 112202 556 0 771 977 0 0
clock 1795812163.120997
0m0.004s 0m0.006s
0m0.039s 0m0.026s
jobs 28 
step 28|1795812161|vm|00:00.452
step 28.batch|1795812161|vm|00:00:00
step 28.0|1795812161|vm|00:00.022
step 28.1|1795812161|vm|00:00.429
"""


def run_dir(tmp_path: Path, before: str, after: str, name: str = "run", cpus_on_node: int | None = 1,
            job_id: str | None = None, boot_ids: dict[str, str] | None = None) -> Path:
    """A run folder holding just what the noise watch reads."""
    d = tmp_path / name
    (d / "provenance").mkdir(parents=True)
    (d / noise.BEFORE).write_text(before)
    (d / noise.AFTER).write_text(after)
    if cpus_on_node is not None:
        (d / "provenance/env.txt").write_text(f"SLURM_CPUS_ON_NODE={cpus_on_node}\nSLURM_JOB_ID=1\n")
    if job_id is not None:
        (d / "status.json").write_text(json.dumps({"state": "completed", "job_id": job_id}))
    for node, boot in (boot_ids or {}).items():
        (d / f"provenance/boot-id-{node}.txt").write_text(boot + "\n")
    return d


def sample(busy: float, idle: float, clock: float, shell: float = 0.0, steal: float = 0.0, jobs: str = "",
           steps: str = "", node: str = "node1", cpus: int = 2) -> str:
    """A sample's text: busy, idle and steal in seconds of the whole node, the shell's and its
    children's time in `shell` seconds (all of it as children)."""
    t = lambda s: int(round(s * 100))  # noqa: E731  clock ticks
    lines = [f"node {node}", f"jobs {jobs}", "0m0.000s 0m0.000s", f"0m{shell:.3f}s 0m0.000s",
             f"clock {clock}", f"cpu  {t(busy)} 0 0 {t(idle)} 0 0 0 {t(steal)} 0 0"]
    lines += [f"cpu{i} 0 0 0 0 0 0 0 0 0 0" for i in range(cpus)]
    lines += [f"step {s}" for s in steps.split(";") if s]
    return "\n".join(lines) + "\n"


def test_a_quiet_run_recorded_here_is_not_disturbed(tmp_path):
    """Is the short STREAM job that ran alone read as quiet: its own CPU time from its step and the
    shell, what is left over (Slurm launching the step) well below the threshold?"""
    n = noise.run_noise(run_dir(tmp_path, QUIET_BEFORE, QUIET_AFTER, job_id="26"))
    assert n.own_from == "accounting" and n.node == "vm" and n.node_cpus == 2 and n.job_cpus == 1
    assert n.wall_s == pytest.approx(0.650, abs=1e-3)
    assert n.busy_s == pytest.approx(0.41) and n.steal_s == 0
    # the run's step and the provenance step that started in the same second (0.019 s), the shell's part
    assert n.own_s == pytest.approx(0.296 + 0.019 + 0.015, abs=1e-3)
    assert n.other_jobs == [] and not n.disturbed and n.share < noise.DISTURBED_SHARE / 2


def test_a_run_beside_a_busy_loop_is_disturbed(tmp_path):
    """Is the same job beside a busy loop flagged, with the cores used elsewhere in its words?"""
    n = noise.run_noise(run_dir(tmp_path, BUSY_BEFORE, BUSY_AFTER, job_id="28"))
    assert n.disturbed and n.elsewhere > 1.0
    assert n.text() == f"while it ran, other processes used {n.other_s / n.wall_s:.1f} cores on vm"


def test_the_threshold_is_a_share_of_the_cores_the_job_left_free(tmp_path):
    """On 4 cores, a job of 1 core: is work of 3 * DISTURBED_SHARE cores beside it the limit? A job
    that holds every core: is work of DISTURBED_SHARE of a core the limit (the floor of one core)?"""
    def share_of(elsewhere, job_cpus):
        before = sample(busy=0, idle=0, clock=100.0, cpus=4)
        after = sample(busy=10 * (job_cpus + elsewhere), idle=1, clock=110.0, shell=10 * job_cpus, cpus=4)
        return noise.measure(noise.parse_sample(before), noise.parse_sample(after), tmp_path, job_cpus=job_cpus)

    limit = noise.DISTURBED_SHARE
    assert not share_of(3 * limit - 0.05, 1).disturbed and share_of(3 * limit + 0.05, 1).disturbed
    assert share_of(3 * limit, 1).share == pytest.approx(limit)
    assert not share_of(limit - 0.05, 4).disturbed and share_of(limit + 0.05, 4).disturbed
    assert share_of(limit + 0.05, 4).free == 0


def test_a_short_run_is_not_flagged_for_slurms_launch_of_its_step(tmp_path):
    """A run of 0.5 s with 0.3 CPU s of other work (Slurm launching its step and hpclab asking
    Slurm about it take up to that here) is 0.6 of a core elsewhere: is it left unflagged, and
    one with more than MIN_OTHER_S flagged?"""
    def run_of(other):
        before = noise.parse_sample(sample(busy=0, idle=0, clock=0.0))
        after = noise.parse_sample(sample(busy=0.5 + other, idle=0.5 - other, clock=0.5, shell=0.5))
        return noise.measure(before, after, tmp_path, job_cpus=1)

    assert run_of(0.3).share > noise.DISTURBED_SHARE and not run_of(0.3).disturbed
    assert run_of(noise.MIN_OTHER_S + 0.05).disturbed


def test_steal_counts_as_work_elsewhere(tmp_path):
    """Is time the hypervisor gave the VM's CPUs to other guests counted against the run, and named?"""
    steal = 10 * (noise.DISTURBED_SHARE + 0.2)  # seconds, in a run of 10 s
    before = noise.parse_sample(sample(busy=0, idle=0, clock=0.0))
    after = noise.parse_sample(sample(busy=10, idle=10 - steal, steal=steal, clock=10.0, shell=10))
    n = noise.measure(before, after, tmp_path, job_cpus=1)
    assert n.other_s == 0 and n.steal_s == pytest.approx(steal) and n.disturbed
    assert n.text() == ("while it ran, other processes used 0.0 of a core and the hypervisor took "
                        f"{noise._cores(steal / 10)} (steal) on node1")


def test_status_text_names_the_cores_and_the_other_jobs(tmp_path):
    """Does the reason read 'while it ran, other processes used 0.9 of a core and 1 other job ran on
    node1', leaving out the run's own job?"""
    before = sample(busy=0, idle=0, clock=0.0, jobs="41 42")
    after = sample(busy=19, idle=1, clock=10.0, shell=10, jobs="42")
    d = run_dir(tmp_path, before, after, job_id="42")
    n = noise.run_noise(d)
    assert n.other_jobs == ["41"] and n.disturbed
    assert n.text() == "while it ran, other processes used 0.9 of a core and 1 other job ran on node1"


def test_the_jobs_cgroup_gives_its_own_time_where_it_counts_cpu(tmp_path):
    """Where the job's cgroup counts CPU (v1 cpuacct in ns, v2 cpu.stat in us), is that its own
    time, whatever the shell and the accounting say?"""
    for key, scale in (("cgroup_ns", 1e9), ("cgroup_usec", 1e6)):
        before = sample(busy=0, idle=0, clock=0.0) + f"{key} {int(5 * scale)}\n"
        after = sample(busy=12, idle=8, clock=10.0, shell=1, steps="7.1|1|node1|00:30.000") + f"{key} {int(15 * scale)}\n"
        n = noise.measure(noise.parse_sample(before), noise.parse_sample(after), tmp_path)
        assert n.own_from == "cgroup" and n.own_s == pytest.approx(10) and n.other_s == pytest.approx(2)


def test_only_steps_started_during_the_run_are_the_jobs_run(tmp_path):
    """Are the job line, its batch and extern steps and a step from before the run's second left
    out of the job's own time, and Slurm's time formats read?"""
    steps = ";".join(["9|50|node1|01:00:00", "9.batch|50|node1|00:00:00", "9.extern|50|node1|00:00:00",
                      "9.0|99|node1|00:00.500", "9.1|100|node1|00:03.250", "9.2|104|node1|1-00:00:00"])
    before = noise.parse_sample(sample(busy=0, idle=0, clock=100.4))
    after = noise.parse_sample(sample(busy=10, idle=10, clock=110.4, shell=0.25, steps=steps))
    assert after.steps["9.2"][2] == 86400
    n = noise.measure(before, after, tmp_path)
    assert n.own_s == pytest.approx(0.25 + 3.25 + 86400)
    assert noise.cpu_time("01:02:03.5") == pytest.approx(3723.5) and noise.cpu_time("n/a") is None


def test_virtual_nodes_of_one_machine_count_the_whole_step(tmp_path):
    """A step on node1 and node2: is all of it the job's here when both nodes run on this kernel
    (virtual nodes, same boot id), and half of it when node2 is another machine?"""
    before = sample(busy=0, idle=0, clock=0.0)
    after = sample(busy=20, idle=0, clock=10.0, steps="5.1|0|node[1-2]|00:20.000")
    same = run_dir(tmp_path, before, after, "same", cpus_on_node=None, boot_ids={"node1": "b1", "node2": "b1"})
    other = run_dir(tmp_path, before, after, "other", cpus_on_node=None, boot_ids={"node1": "b1", "node2": "b2"})
    assert noise.run_noise(same).own_s == pytest.approx(20)
    assert noise.run_noise(other).own_s == pytest.approx(10)
    assert noise.expand_nodes("a1,node[1-3,07-08]") == ["a1", "node1", "node2", "node3", "node07", "node08"]


def test_a_run_across_virtual_nodes_owns_the_kernels_work_for_its_messages(tmp_path):
    """Two virtual nodes of this machine, a quiet ping-pong between them: the kernel's work for its
    messages (bridge, veths, shaper) is system time no step is charged with; is the run judged on
    user time then (not disturbed), while user time of another program still flags it?"""
    import json

    def text(user, system, clock):
        return (f"node node1\njobs \n0m0.000s 0m0.000s\n0m0.000s 0m0.000s\nclock {clock}\n"
                f"cpu  {int(user * 100)} 0 {int(system * 100)} 0 0 0 0 0 0 0\ncpu0 0\ncpu1 0\n")

    record = [{"JobIDRaw": "5.1", "Start": "1970-01-01T00:00:00", "NodeList": "node[1-2]",
               "TotalCPU": "00:10.000", "UserCPU": "00:06.000"}]
    for name, user, disturbed in (("quiet", 6.0, False), ("loaded", 11.0, True)):
        d = run_dir(tmp_path, text(0, 0, 0.0), text(user, 7.0, 10.0), name, cpus_on_node=1,
                    boot_ids={"node1": "b1", "node2": "b1"})
        (d / "provenance" / "sacct.json").write_text(json.dumps(record))
        found = noise.run_noise(d)
        assert found.own_from == "accounting, user time" and found.disturbed is disturbed, (name, found)


def test_runs_without_a_whole_record_have_no_noise(tmp_path):
    """A run from before the watch, or with a sample cut short: None, not a guess."""
    assert noise.run_noise(tmp_path) is None
    assert noise.run_noise(run_dir(tmp_path, QUIET_BEFORE, "cpu  1 2 3\n", "cut")) is None
    no_times = "\n".join(line for line in QUIET_AFTER.splitlines() if "m0." not in line)
    assert noise.run_noise(run_dir(tmp_path, QUIET_BEFORE, no_times, "no-times")) is None


def test_a_comparison_says_how_many_runs_were_taken_beside_other_work(tmp_path):
    """'2 of 6 runs were taken beside other work (node1: up to 0.9 of a core busy elsewhere)'
    and nothing at all when every run was quiet?"""
    quiet = (sample(busy=0, idle=0, clock=0.0), sample(busy=10, idle=10, clock=10.0, shell=10))
    busy = [(sample(busy=0, idle=0, clock=0.0), sample(busy=10 + x, idle=10 - x, clock=10.0, shell=10))
            for x in (6, 9)]
    dirs = [run_dir(tmp_path, *quiet, f"q{i}") for i in range(4)]
    assert noise.beside_other_work(dirs) == ""
    dirs += [run_dir(tmp_path, *b, f"b{i}") for i, b in enumerate(busy)]
    assert noise.beside_other_work(dirs) == ("2 of 6 runs were taken beside other work "
                                             "(node1: up to 0.9 of a core busy elsewhere)")
    assert noise.beside_other_work(dirs[-1:]) == ("1 of 1 run was taken beside other work "
                                                  "(node1: 0.9 of a core busy elsewhere)")


def noise_block(template: str) -> str:
    """The sampling lines of the job script: the job_cpu function and the two samples."""
    text = template.split("job_cpu() {", 1)[1]
    fn, rest = text.split("\n}\n", 1)
    before = rest.split("> provenance/noise-before.txt 2>/dev/null")[0]
    after = "{" + rest.split("status=$?\n", 1)[1].split("{", 1)[1].split("> provenance/noise-after.txt")[0]
    return ("job_cpu() {" + fn + "\n}\n" + before + "> provenance/noise-before.txt 2>/dev/null\n"
            + after + "> provenance/noise-after.txt 2>/dev/null\n")


def test_sampling_goes_on_without_squeue_or_a_job_cgroup(tmp_path):
    """Does the job script's sampling, on a node where squeue is missing and the job has no cgroup
    of its own, still write both samples with the node's CPU time, and go on? (The steps' CPU time
    comes from the accounting record hpclab keeps when the job ends, not from the job.)"""
    template = (Path(paths.repo()) / "slurm-templates/preamble.sh.j2").read_text()
    script = noise_block(template)
    assert "squeue" in script and "sacct" not in script and "/proc/stat" in script
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for tool in ("grep", "sed", "cat", "tr", "date", "timeout", "hostname"):
        found = subprocess.run(["bash", "-c", f"command -v {tool}"], capture_output=True, text=True).stdout.strip()
        if found:
            (bin_dir / tool).symlink_to(found)
    (tmp_path / "provenance").mkdir()
    done = subprocess.run(["/bin/bash", "-c", "set -uo pipefail\n" + script + "echo went on\n"], cwd=tmp_path,
                          env={"PATH": str(bin_dir), "SLURM_JOB_ID": "1"}, capture_output=True, text=True)
    assert done.returncode == 0 and done.stdout == "went on\n", done.stderr
    before = noise.parse_sample((tmp_path / noise.BEFORE).read_text())
    after = noise.parse_sample((tmp_path / noise.AFTER).read_text())
    assert before.clock and after.clock >= before.clock and len(after.cpu) >= 8 and after.cpus == os.cpu_count()
    assert before.jobs == [] and after.steps == {} and after.cgroup_s is None
    assert before.shell_s is not None and after.children_s is not None


def test_the_steps_cpu_time_comes_from_the_record_of_the_finished_job(tmp_path):
    """Are a finished job's steps, with their start (local time), nodes and CPU time, read from
    provenance/sacct.json as the job would have asked sacct, and a record without TotalCPU (from
    before it was kept) read as no steps?"""
    import json
    import time

    record = tmp_path / "sacct.json"
    record.write_text(json.dumps([
        {"JobIDRaw": "7", "Start": "2026-11-27T22:41:05", "NodeList": "vm", "TotalCPU": "00:02.106"},
        {"JobIDRaw": "7.1", "Start": "2026-11-27T22:41:06", "NodeList": "node[1-2]", "TotalCPU": "01:00.500"}]))
    steps = noise.steps_of_record(record)
    start = time.mktime(time.strptime("2026-11-27T22:41:06", "%Y-%m-%dT%H:%M:%S"))
    assert steps["7.1"] == (start, "node[1-2]", 60.5) and steps["7"][2] == 2.106
    record.write_text(json.dumps([{"JobIDRaw": "7.1", "Start": "2026-11-27T22:41:06", "NodeList": "vm"}]))
    assert noise.steps_of_record(record) == {} and noise.steps_of_record(tmp_path / "none.json") == {}


# --- on the real cluster --------------------------------------------------------------------------


@pytest.fixture
def runs_root(tmp_path, monkeypatch, cluster):
    root = tmp_path / "runs"
    monkeypatch.setenv("HPCLAB_RUNS", str(root))
    if not (paths.bin_dir() / "stream").is_file():
        pytest.skip("build/bin/stream not built (make -C src)")
    return root


def test_a_run_beside_a_busy_loop_is_flagged_and_run_once_more(runs_root):
    """A short STREAM job with a busy loop pinned (taskset) to every CPU, so one shares the job's
    CPU whichever Slurm gives it: is the run flagged in words, submitted once more with
    rerun_disturbed, both folders kept and marked, and the repetition not repeated again?"""
    loops = [subprocess.Popen(["taskset", "-c", str(cpu), "bash", "-c", "while :; do :; done"])
             for cpu in sorted(os.sched_getaffinity(0))]
    try:
        runs = experiment.run(make_spec(kernel="stream", ntasks=1, args={"size": 2_000_000, "reps": 10}),
                              progress=False, timeout=120, rerun_disturbed=True)
    finally:
        for loop in loops:
            loop.terminate()
            loop.wait()
    ((old, new),) = runs.replaced
    assert list(runs) == [new] and new.repetition == old.repetition == 1
    assert re.fullmatch(r"while it ran, other processes used \d\.\d (of a core|cores)( and .*)? on \w+", old.noise)
    assert old.folder.status()["replaced_by"] == new.run_id and new.folder.status()["replaces"] == old.run_id
    recorded = json.loads(old.folder.noise_json.read_text())
    assert recorded["disturbed"] and recorded["text"] == old.noise and recorded["elsewhere"] > 1
    assert sorted(f.run_id for f in run_folders(runs_root)) == sorted([old.run_id, new.run_id])
    assert "replaced_by" not in new.folder.status()  # the loops ran through it too: kept, flagged, not repeated
    table = new.table()
    assert bool(table["disturbed"].iloc[0]) == bool(new.noise) and table["replaced_by"].isna().all()


@pytest.mark.parametrize("case, own, busy, cpus_on_node, flagged", [
    ("one core each, side by side", 9.8, 19.8, 1, 0),        # each other's company, on a free core
    ("one core each, beside a load", 6.6, 20.0, 1, 2),       # a third process took a third of it
    ("both cores each, side by side", 10.0, 20.0, 2, 2),     # company on a job's own cores slows it
], ids=["company", "company-and-a-load", "sharing-cores"])
def test_runs_of_one_comparison_side_by_side_are_company_not_other_work(tmp_path, case, own, busy,
                                                                         cpus_on_node, flagged):
    """Two runs of one comparison queued together (notebook 05b's rounds), each seen running beside
    the other: not taken beside other work when each had its own core, still so when something
    else ran too, or when they had to share cores?"""
    dirs = [run_dir(tmp_path, sample(busy=0, idle=0, clock=0.0, jobs="11 12"),
                    sample(busy=busy, idle=20.0 - busy, clock=10.0, shell=own, jobs="11 12"),
                    name, cpus_on_node=cpus_on_node, job_id=job)
            for name, job in (("a", "11"), ("b", "12"))]
    assert all(noise.run_noise(d).disturbed for d in dirs)          # alone, each looks disturbed
    assert noise.beside_other_work(dirs).startswith("2 of 2 runs")  # company by chance: other work
    said = noise.beside_other_work(dirs, company=True)
    assert (said == "") if flagged == 0 else said.startswith(f"{flagged} of 2 runs were taken beside other work"), said
