"""What else used a run's node while it ran: the noise watch.

A timing taken beside other work measures the other work too. The job script samples the node
just before and just after the run (slurm-templates/preamble.sh.j2, provenance/noise-before.txt
and noise-after.txt): the node's CPU time from /proc/stat (busy, idle, steal), the job's own CPU
time, the other Slurm jobs running on the node, and the clock. The job's own CPU time comes from
its cgroup where that counts CPU (cgroup v2 cpu.stat, or a v1 cpuacct group of the job's own);
otherwise, as on the course VM (cgroup v1, Slurm puts jobs in memory groups only), from what the
batch shell and the programs it waited for used (bash's `times`: mpirun and the ranks it forked)
plus the CPU time Slurm's accounting gives each step (srun) started during the run (read from the
record hpclab keeps when the job ends, provenance/sacct.json; an older job asked sacct itself).

    other work  = CPU seconds the node was busy - the job's own
    steal       = CPU seconds the hypervisor gave the node's CPUs to other guests
    elsewhere   = (other work + steal) / wall time                       (cores busy elsewhere)
    free        = CPUs of the node - the job's (asked for, or used if more)  (cores it left free)
    disturbed   = elsewhere > DISTURBED_SHARE * max(free, 1)  and  other work + steal > MIN_OTHER_S

The floor of one core: a job that holds every core has none free, and whatever runs beside it
takes its time from the job's own ranks. Free cores count from what the job asked for (Slurm's
SLURM_CPUS_ON_NODE), not only from what it used: work that shares the job's core slows the job
down, which would otherwise leave more cores "free" and hide itself.

Runs of one comparison queued together by design (notebook 05b's one-rank subdomain runs, two at
a time on the VM's two cores, paired by round) see each other: for them, a comparison's sentence
takes each run's company off its other work, as far as it fits in the cores the run left free
(apart_from_company; beside_other_work(company=True)).
In six quiet course runs here on 2026-12-07, 5 to 14 of those 17 runs were flagged each time; apart
from their company, 0 to 3 (what is left is Slurm starting the next jobs: up to 0.7 of a core in
runs of 0.5-0.8 s). Beside `stress-ng --cpu 1`, 17 of 17 either way (two runs).

The count is of the node the batch script ran on (the first one): a multi-node job's steps count
there with the share of their nodes that run on its kernel (boot-id-<node>.txt; virtual nodes
share one). What Slurm spends launching the run's step (slurmstepd, the PMIx server) and what
hpclab spends asking Slurm about the job while it runs are not the job's in this count and show as
other work: up to 0.3 CPU s in a run of under a second here, which MIN_OTHER_S leaves unflagged.

Measured on the course VM (2 cores, KVM, Slurm 22.05, cgroup v1) on 2026-11-27, 75 jobs through
experiment.run(make_spec(...)), each started after a second with under 0.15 cores busy on the VM
(others share it); a run alone counts as alone only with under 0.3 cores busy in the 2 s after
it too. Specs:
STREAM ntasks=1 args {size: 2000000, reps: 20} and {size: 4000000, reps: 100}; pingpong ntasks=2
(both cores) cpu_bind=cores btl=self,vader args {max_bytes: 1024, reps: 20} and {max_bytes:
1048576, reps: 200}. Loads, started 0.5 s before the job and stopped after it: `stress-ng --cpu 1
--quiet`, and `taskset -c 0 bash -c 'while :; do :; done'` (CPU 0 is the one Slurm gives a
one-task job here). Share of the free cores busy elsewhere, lowest to highest (runs):

                                  alone             stress-ng --cpu 1    taskset busy loop
    STREAM 2e6 (0.6 s)            0.06-0.26 (5)     1.02-1.58 (7)        0.70-1.70 (7)
    STREAM 4e6 (2.4-7 s)          0.03-0.10 (5)     1.02-1.29 (6)        0.54-1.45 (6)
    pingpong 1 KiB (0.7 s)        0.09-0.29 (4)     0.96-1.70 (6)        0.96-1.57 (6)
    pingpong 1 MiB (0.8 s)        0.11-0.36 (2)     0.89-1.55 (6)        0.89-1.11 (6)
    other work, CPU s             0.03-0.30         0.67-5.97            0.66-9.83

Alone, none of 16 is flagged; beside a load, all 50 are. The lowest beside a load, 0.54, is the
long STREAM sharing its core with the loop: a busy process takes half of a core it shares, so work
that slows a job that way comes out at 0.5 of a core or more. The highest alone, 0.36 (0.30 CPU s
in 0.84 s), is launching, asking and the VM's housekeeping. DISTURBED_SHARE = 0.45 lies between
the two; MIN_OTHER_S = 0.4 CPU s between the 0.30 alone and the 0.66 beside a load. Of 9 runs that
started quiet but had others' work on the VM in the 2 s after, 4 were flagged (0.79 to 1.07).
Steal stayed under 0.1 CPU s a run.
"""

from __future__ import annotations

import json
import re
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

BEFORE, AFTER = "provenance/noise-before.txt", "provenance/noise-after.txt"
DISTURBED_SHARE = 0.45  # of the cores the job left free (at least one): see the measurements above
MIN_OTHER_S = 0.4       # CPU seconds: below this much other work in all a run is never flagged


@dataclass
class Sample:
    """One of the two samples the job script takes (noise-before.txt or noise-after.txt)."""

    clock: float | None = None          # seconds since the epoch
    cpu: list[int] = field(default_factory=list)   # the /proc/stat "cpu" line, in clock ticks
    cpus: int = 0                       # cpuN lines: the node's online CPUs
    clk_tck: int = 100                  # /proc/stat's tick (USER_HZ: 100 on every Linux the course runs on)
    node: str = ""
    jobs: list[str] = field(default_factory=list)  # Slurm jobs running on the node
    shell_s: float | None = None        # `times`: the batch shell's own user+system seconds
    children_s: float | None = None     # `times`: the programs it waited for
    cgroup_s: float | None = None       # the job's cgroup CPU time, where it counts it
    steps: dict[str, tuple[float, str, float]] = field(default_factory=dict)  # id: (start, nodes, cpu s)
    steps_user: dict[str, float] = field(default_factory=dict)  # id: user seconds, where the record has them
    shell_user: float | None = None     # `times`: the user part of shell_s and children_s
    children_user: float | None = None


_TIMES = re.compile(r"^(\d+)m([\d.,]+)s (\d+)m([\d.,]+)s$")


def _seconds(m: str, s: str) -> float:
    return int(m) * 60 + float(s.replace(",", "."))


def cpu_time(text: str) -> float | None:
    """Seconds from Slurm's TotalCPU text: '00:00.276', '01:02:03', '1-02:03:04'; None if unreadable."""
    days, _, rest = text.strip().rpartition("-")
    try:
        parts = [float(p) for p in rest.split(":")]
        total = sum(p * 60 ** i for i, p in enumerate(reversed(parts)))
        return total + (int(days) * 86400 if days else 0)
    except ValueError:
        return None


def parse_sample(text: str) -> Sample:
    """A sample's text -> Sample. Lines it does not know are skipped; a missing piece stays None."""
    s = Sample()
    times: list[float] = []
    for line in text.splitlines():
        key, _, value = line.partition(" ")
        value = value.strip()
        if key == "cpu":
            s.cpu = [int(v) for v in value.split() if v.isdigit()]
        elif re.fullmatch(r"cpu\d+", key):
            s.cpus += 1
        elif key == "clock":
            try:
                s.clock = float(value.replace(",", "."))
            except ValueError:
                pass
        elif key == "clk_tck" and value.isdigit():
            s.clk_tck = int(value)
        elif key == "node":
            s.node = value
        elif key == "jobs":
            s.jobs = value.split()
        elif key == "cgroup_ns" and value.isdigit():
            s.cgroup_s = int(value) / 1e9
        elif key == "cgroup_usec" and value.isdigit():
            s.cgroup_s = int(value) / 1e6
        elif key == "step":
            fields = value.split("|")
            if len(fields) == 4 and fields[1].isdigit() and cpu_time(fields[3]) is not None:
                s.steps[fields[0]] = (float(fields[1]), fields[2], cpu_time(fields[3]))
        elif m := _TIMES.match(line.strip()):
            times.append((_seconds(m[1], m[2]) + _seconds(m[3], m[4]), _seconds(m[1], m[2])))
    if len(times) == 2:
        (s.shell_s, s.shell_user), (s.children_s, s.children_user) = times
    return s


def expand_nodes(nodelist: str) -> list[str]:
    """Slurm's compressed node list ('vm', 'node[1-3,5]', 'a1,b[2-3]') as names."""
    out = []
    for m in re.finditer(r"([^,\[]+)(?:\[([^\]]*)\])?", nodelist):
        prefix, ranges = m[1], m[2]
        if ranges is None:
            out.append(prefix)
            continue
        for part in ranges.split(","):
            lo, _, hi = part.partition("-")
            for i in range(int(lo), int(hi or lo) + 1):
                out.append(f"{prefix}{i:0{len(lo)}d}")
    return out


@dataclass
class Noise:
    """A run's noise: what the node did besides the job while the job's program ran."""

    node: str
    wall_s: float            # the run's wall time: from the sample before to the sample after
    node_cpus: int           # the node's CPUs (online, as /proc/stat lists them)
    job_cpus: int | None     # the CPUs Slurm gave the job on the node (SLURM_CPUS_ON_NODE)
    busy_s: float            # CPU seconds the node was busy (everyone's user, system, irq)
    own_s: float             # CPU seconds of the job's own processes on the node
    own_from: str            # where own_s comes from: "cgroup" or "accounting" (shell + steps)
    other_s: float           # busy - own: CPU seconds of other work on the node
    steal_s: float           # CPU seconds the hypervisor took from the node's CPUs
    other_jobs: list[str]    # other Slurm jobs seen running on the node (before or after)
    elsewhere: float         # (other + steal) / wall: cores busy elsewhere
    free: float              # node CPUs - the job's (asked for, or used if more): cores it left free
    share: float             # elsewhere / max(free, 1)
    disturbed: bool
    threshold: float
    job: str | None = None   # the run's own Slurm job
    start: float | None = None   # clock of the sample before (seconds since the epoch)

    def text(self) -> str:
        """The noise in words: 'while it ran, other processes used 0.9 of a core and 1 other job
        ran on node1'."""
        return noise_text(self)

    def to_dict(self) -> dict:
        return {k: (round(v, 3) if isinstance(v, float) else v) for k, v in asdict(self).items()}


def _cores(x: float) -> str:
    return f"{x:.1f} of a core" if round(x, 1) < 1 else f"{x:.1f} cores"


def noise_text(n: Noise) -> str:
    """What else ran beside the job, in words (for status.json and a run's footnote)."""
    parts = [f"other processes used {_cores(n.other_s / n.wall_s)}"]
    if n.steal_s / n.wall_s >= 0.05:
        parts.append(f"the hypervisor took {_cores(n.steal_s / n.wall_s)} (steal)")
    if n.other_jobs:
        k = len(n.other_jobs)
        parts.append(f"{k} other job{'s' if k > 1 else ''} ran on {n.node}")
        return "while it ran, " + ", ".join(parts[:-1]) + " and " + parts[-1]
    return "while it ran, " + " and ".join(parts) + f" on {n.node}"


@dataclass
class _Own:
    """The job's own CPU seconds on the sampled node between the samples (total), where they were
    read from, their user part where known, and whether a step ran on several virtual nodes of
    this one machine (across)."""

    total: float
    source: str
    user: float | None = None
    across: bool = False


def _own_here(before: Sample, after: Sample, run_dir: Path) -> _Own | None:
    """The job's own CPU seconds on the sampled node between the samples; None without them."""
    if before.cgroup_s is not None and after.cgroup_s is not None:
        return _Own(after.cgroup_s - before.cgroup_s, "cgroup")
    if None in (before.shell_s, before.children_s, after.shell_s, after.children_s) or before.clock is None:
        return None
    own = (after.shell_s + after.children_s) - (before.shell_s + before.children_s)
    user = None
    if None not in (before.shell_user, before.children_user, after.shell_user, after.children_user):
        user = (after.shell_user + after.children_user) - (before.shell_user + before.children_user)
    node = after.node or before.node
    here = {node}
    boot = run_dir / "provenance" / f"boot-id-{node}.txt"
    if boot.is_file():  # virtual nodes of this machine share its kernel, and so its /proc/stat
        mine = boot.read_text().strip()
        here |= {p.name[len("boot-id-"):-len(".txt")] for p in boot.parent.glob("boot-id-*.txt")
                 if p.read_text().strip() == mine}
    across = False
    for step, (start, nodes, cpu) in after.steps.items():
        _, _, number = step.partition(".")
        if not number.isdigit() or start < int(before.clock):
            continue  # the job itself, its batch and extern steps, and steps before the run
        names = expand_nodes(nodes) or [node]
        share = sum(n in here for n in names) / len(names)
        own += cpu * share
        across = across or sum(n in here for n in names) > 1
        if user is not None:
            user = user + after.steps_user[step] * share if step in after.steps_user else None
    return _Own(own, "accounting", user, across)


def measure(before: Sample, after: Sample, run_dir: Path | str = ".", own_job: str | None = None,
            job_cpus: int | None = None, threshold: float | None = None) -> Noise | None:
    """The noise between two samples; None when they lack what it needs (an older job script,
    a sample cut short). own_job: the job's id, left out of the other jobs. job_cpus: the CPUs
    the job has on the node (None: count what it used). threshold: DISTURBED_SHARE if None."""
    threshold = DISTURBED_SHARE if threshold is None else threshold
    if before.clock is None or after.clock is None or len(before.cpu) < 8 or len(after.cpu) < 8:
        return None
    wall = after.clock - before.clock
    if wall <= 0:
        return None
    d = [a - b for a, b in zip(after.cpu, before.cpu)]
    tick = float(after.clk_tck or 100)
    busy = (d[0] + d[1] + d[2] + d[5] + d[6]) / tick  # user nice system irq softirq (guest is in user)
    steal = d[7] / tick
    mine = _own_here(before, after, Path(run_dir))
    if mine is None:
        return None
    own, source = mine.total, mine.source
    if mine.across and mine.user is not None:
        # A run across virtual nodes of this one machine: the kernel's work for its messages (the
        # bridge, the veths, the link's shaper: system and softirq time no step is charged with)
        # is the run's own, so only user time tells other work apart (measured: a quiet 2-node
        # ping-pong at 1 Gb/s left 0.4-0.5 of a core of unattributed system time)
        busy, own, source = (d[0] + d[1]) / tick, mine.user, "accounting, user time"
    cpus = after.cpus or before.cpus or 1
    other = max(0.0, busy - own)
    elsewhere = (other + steal) / wall
    free = max(0.0, float(cpus - max(job_cpus or 0, own / wall)))
    share = elsewhere / max(free, 1.0)
    jobs = sorted({*before.jobs, *after.jobs} - {own_job or ""}, key=lambda j: (len(j), j))
    return Noise(node=after.node or before.node, wall_s=wall, node_cpus=cpus, job_cpus=job_cpus,
                 busy_s=busy, own_s=own,
                 own_from=source, other_s=other, steal_s=steal, other_jobs=jobs, elsewhere=elsewhere,
                 free=free, share=share, threshold=threshold,
                 disturbed=share > threshold and other + steal > MIN_OTHER_S, job=own_job, start=before.clock)


def apart_from_company(n: Noise, company: list[Noise]) -> Noise:
    """`n` judged without the work of its company: runs of the same comparison (queued together,
    as notebook 05b's rounds are) on its node whose run overlapped n's (by the clocks of their
    samples: a short one may start and end between n's two), their own CPU seconds in the overlap
    taken off n's other work, as far as they fit in the cores n left free. Company on a free core
    is the comparison's design, shared alike by both sides of it; company on n's own cores slows
    n down and still counts, as other work does."""
    if n.start is None:
        return n
    end = n.start + n.wall_s
    mine = [c for c in company if c is not n and c.node == n.node and c.start is not None and c.wall_s > 0
            and c.start < end and n.start < c.start + c.wall_s]
    if not mine:
        return n
    cpu = sum(c.own_s * max(0.0, min(end, c.start + c.wall_s) - max(n.start, c.start)) / c.wall_s for c in mine)
    taken = min(cpu, n.free * n.wall_s)
    other = max(0.0, n.other_s - taken)
    elsewhere = (other + n.steal_s) / n.wall_s
    free = max(0.0, n.free - taken / n.wall_s)
    share = elsewhere / max(free, 1.0)
    return replace(n, other_s=other, elsewhere=elsewhere, free=free, share=share,
                   other_jobs=[j for j in n.other_jobs if j not in {c.job for c in mine}],
                   disturbed=share > n.threshold and other + n.steal_s > MIN_OTHER_S)


def run_noise(run_dir: str | Path, threshold: float | None = None) -> Noise | None:
    """The noise of one run folder (its provenance/noise-*.txt), or None when the job did not
    record it (a job script from before the watch, a job that ended before its run)."""
    run_dir = Path(run_dir)
    before, after = run_dir / BEFORE, run_dir / AFTER
    if not (before.is_file() and after.is_file()):
        return None
    job = None
    status = run_dir / "status.json"
    if status.is_file():
        try:
            job = json.loads(status.read_text()).get("job_id")
        except ValueError:
            job = None
    b, a = parse_sample(before.read_text(errors="replace")), parse_sample(after.read_text(errors="replace"))
    if not a.steps:  # the job's steps as hpclab recorded them when the job ended (provenance/sacct.json)
        a.steps = steps_of_record(run_dir / "provenance" / "sacct.json")
        a.steps_user = user_of_record(run_dir / "provenance" / "sacct.json")
    if job is None:  # the job's own id is the one whose steps the after-sample lists
        job = next((s for s in a.steps if "." not in s), None)
    return measure(b, a, run_dir, own_job=job, job_cpus=_cpus_on_node(run_dir), threshold=threshold)


def steps_of_record(sacct_json: Path) -> dict:
    """{step id: (start, epoch seconds; node list; CPU seconds)} from the accounting record hpclab
    keeps of a finished job (hpclab.site.slurm.sacct_records: Start in the machine's local time,
    TotalCPU); {} without it or for a record from before TotalCPU was kept."""
    import time

    try:
        records = json.loads(sacct_json.read_text())
    except (OSError, ValueError):
        return {}
    steps = {}
    for r in records:
        cpu = cpu_time(r.get("TotalCPU", "")) if r.get("TotalCPU") else None
        try:
            start = time.mktime(time.strptime(r.get("Start", ""), "%Y-%m-%dT%H:%M:%S"))
        except ValueError:
            continue
        if cpu is not None and r.get("JobIDRaw"):
            steps[r["JobIDRaw"]] = (start, r.get("NodeList", ""), cpu)
    return steps


def user_of_record(sacct_json: Path) -> dict:
    """{step id: user CPU seconds} from the same record (UserCPU); {} where it has none."""
    try:
        records = json.loads(sacct_json.read_text())
    except (OSError, ValueError):
        return {}
    found = {r.get("JobIDRaw"): cpu_time(r["UserCPU"]) for r in records if r.get("UserCPU") and r.get("JobIDRaw")}
    return {k: v for k, v in found.items() if v is not None}


def _cpus_on_node(run_dir: Path) -> int | None:
    """SLURM_CPUS_ON_NODE from the job's provenance/env.txt: the CPUs the job has on its first node."""
    env = run_dir / "provenance" / "env.txt"
    text = env.read_text(errors="replace") if env.is_file() else ""
    m = re.search(r"^SLURM_CPUS_ON_NODE=(\d+)$", text, re.M)
    return int(m[1]) if m else None


def beside_other_work(runs, company: bool = False) -> str:
    """The part of a comparison's sentence that says which runs were taken beside other work:
    '2 of 6 runs were taken beside other work (node1: 0.9 of a core busy elsewhere)'.

    runs: run folders (paths, or objects with .path such as experiment.Run). A node of several
    disturbed runs gets the largest of their numbers ('up to'). Returns '' when no run was
    disturbed (runs without a noise record count as not disturbed). company=True: the runs were
    queued together by design, and each is the others' company, not other work, where they ran
    on cores the other left free (apart_from_company). Off by default: where runs overlap by
    chance, a memory-bound run beside its sibling is disturbed as by any other work."""
    found = [run_noise(getattr(r, "path", r)) for r in runs]
    known = [n for n in found if n is not None]
    bad = [n for n in (apart_from_company(n, known) if company else n for n in known) if n.disturbed]
    if not bad:
        return ""
    by_node: dict[str, list[float]] = {}
    for n in bad:
        by_node.setdefault(n.node, []).append(n.elsewhere)
    where = "; ".join(f"{node}: {'up to ' if len(v) > 1 else ''}{_cores(max(v))} busy elsewhere"
                      for node, v in sorted(by_node.items()))
    verb = "was" if len(bad) == 1 else "were"
    return f"{len(bad)} of {len(found)} run{'s' if len(found) > 1 else ''} {verb} taken beside other work ({where})"
