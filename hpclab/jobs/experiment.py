"""Run experiments: validate specs, write run folders, submit to Slurm, wait, read results.

This is what notebooks call:

    from hpclab.jobs import experiment
    from hpclab.spec import model as spec
    specs = spec.sweep(spec.make_spec(kernel="stream", ntasks=1, args={"size": 2_000_000}),
                       {"binding.cpu_bind": ["cores", "none"], "omp.num_threads": [1, 2]})
    runs = experiment.run(specs)          # progress bar; raises HpclabError if a job fails
    df = hpclab.runs.folder.load("stream")       # or runs[0].table()

Every spec is checked against its site before the first job is submitted, so a bad sweep
submits nothing. A spec with repetitions R becomes R jobs (R run folders), submitted round by round
across the specs (submission_order) so that repetitions of different specs alternate. Ctrl-C while waiting
cancels the jobs still queued or running (scancel) and marks their folders cancelled.

With `until=` the number of repetitions is not fixed: rounds (one job per spec, in spec order) are
submitted and waited for one after the other until the caller's rule says the comparison is
decided, or a cap of rounds or seconds is reached (run_until). Every completed run records what
else used its node while it ran (hpclab.runs.parse.noise); with rerun_disturbed=True a run taken
beside other work is submitted once more, its folder kept and marked.

In a room in room mode (HPCLAB_RECORDED; hpclab.runs.recorded) the calls of the notebooks that do
not fit the room submit nothing: they get the instructor's recorded runs of the same content
(from_recording), and Runs.recorded says whose they are.
"""

from __future__ import annotations

import calendar
import json
import os
import re
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from hpclab.core import commands, paths
from hpclab.site import slurm
from hpclab.spec import checks as spec_checks
from hpclab.jobs import templates
from hpclab.site import profile as site_mod
from hpclab.core.errors import (Cancelled, GaveUpWaiting, HpclabError, JobFailed, JobLost, NodeDrained,
                                OutOfMemory, SubmissionRefused, TcpUnpaired, TimedOut)
from hpclab.jobs.progress import JobProgress
from hpclab.kernels import registry
from hpclab.runs import recorded
from hpclab.runs.folder import RunFolder, run_table
from hpclab.runs.parse import noise as noise_mod
from hpclab.spec.model import Spec, make_spec

STDERR_LINES = 12


@dataclass
class Run:
    """One submitted job and its run folder."""

    folder: RunFolder
    spec: Spec

    @property
    def path(self) -> Path:
        return self.folder.path

    @property
    def run_id(self) -> str:
        return self.folder.run_id

    @property
    def job_id(self) -> str | None:
        return self.folder.status().get("job_id")

    @property
    def state(self) -> str:
        """pending, running, completed, failed, timeout or cancelled (as last recorded)."""
        return self.folder.status()["state"]

    @property
    def repetition(self) -> int | None:
        """Which repetition (round) of its spec the run is: runs of one round pair up."""
        return self.folder.status().get("repetition")

    @property
    def noise(self) -> str:
        """Why the run counts as taken beside other work, in words; '' when it does not."""
        return self.folder.status().get("noise", "")

    def __repr__(self) -> str:
        st = self.folder.status()
        return f"<Run {self.folder.experiment}/{self.run_id} job {st.get('job_id')} {st['state']}>"

    def result(self) -> dict:
        """The kernel's JSON report (docs/kernel-contract.md) of a completed run; for a
        kernel: program run, the job's record of how the program ended {kernel, exit_code}."""
        if self.state != "completed":
            raise_for_failures([self])
        return self.folder.result()

    def table(self):
        """This run's tidy rows (hpclab.runs.parse.parse_run) with run and spec columns."""
        if self.state != "completed":
            raise_for_failures([self])
        return run_table(self.folder)

    def wait(self, timeout: float | None = None, progress: bool = False) -> "Run":
        wait_for([self], timeout=timeout, progress=progress)
        return self

    @classmethod
    def open(cls, ref: str | Path) -> "Run":
        """A Run from a run folder path or id (see RunFolder.open)."""
        folder = RunFolder.open(ref)
        return cls(folder, make_spec(folder.spec(), source=f"spec.json of {folder.path}"))


# --- preparing and submitting -------------------------------------------------------------------


def _git_describe() -> str:
    try:
        head = commands.run(["git", "-C", str(paths.repo()), "rev-parse", "HEAD"], "ask git for the commit", timeout=10)
        dirty = commands.run(["git", "-C", str(paths.repo()), "status", "--porcelain", "--untracked-files=no"],
                             "ask git for local changes", timeout=10)
    except HpclabError:  # git not installed
        head = dirty = None
    if head is None or dirty is None:
        return "unknown (git not available)\n"
    return f"commit {head.stdout.strip() or 'unknown'}\nlocal changes: {'yes' if dirty.stdout.strip() else 'no'}\n"


def _provenance_files(spec: Spec, site: site_mod.Site, repetition: int) -> dict[str, str]:
    ompi = site_mod.store_ompi_info()
    site_info = {
        "site": site.name, "site_file": str(site.source), "repetition": repetition,
        "launcher": spec.launcher or site.launcher,
        "ompi_info": os.path.relpath(ompi, paths.runs_dir()),  # relative to the runs folder
    }
    return {"provenance/git.txt": _git_describe(),
            "provenance/site.json": json.dumps(site_info, indent=2) + "\n",
            "provenance/site.yaml": Path(site.source).read_text() if site.source else ""}


def prepare(spec: Spec, site: site_mod.Site, repetition: int = 1, root: Path | None = None) -> Run:
    """Create the run folder of one repetition of `spec`: spec.json, job.sh, status.json
    (pending) and the provenance known before submission. Nothing is submitted."""
    files = _provenance_files(spec, site, repetition)
    folder = RunFolder.create(
        spec.experiment, spec.to_dict(), root=root, extra=files,
        job_script=lambda f: templates.render(spec, site, f.path))
    folder.set_status("pending", repetition=repetition, site=site.name)
    return Run(folder, spec)


def submit(run: Run) -> Run:
    """sbatch the run's job.sh; record the job id (or mark the run failed and raise
    SubmissionRefused with sbatch's message)."""
    try:
        job_id = slurm.sbatch(run.folder.job_sh)
    except HpclabError as exc:
        run.folder.set_status("failed", reason=f"sbatch failed: {exc.what}", failure="submission_refused")
        if isinstance(exc, SubmissionRefused):
            raise
        raise SubmissionRefused(exc.what, exc.hint) from exc
    run.folder.set_status("pending", job_id=job_id)
    return run


def validate(specs: list[Spec]) -> list[tuple[Spec, site_mod.Site]]:
    """Check every spec against its site; raise one HpclabError for the first bad one.
    Returns (spec, site) pairs. Facts (sinfo, ompi_info) are gathered once per combination."""
    sites: dict[str | None, site_mod.Site] = {}
    facts_cache: dict[tuple, spec_checks.Facts] = {}
    out = []
    for i, sp in enumerate(specs):
        if sp.site not in sites:
            sites[sp.site] = site_mod.load_site(sp.site)
        st = sites[sp.site]
        key = (st.name, sp.partition, sp.kernel, sp.mpi)  # each MPI library has its own components
        if key not in facts_cache:
            facts_cache[key] = spec_checks.gather_facts(sp, st)
        try:
            spec_checks.check(sp, st, facts_cache[key])
        except HpclabError as exc:
            label = f"spec {i + 1} of {len(specs)}" if len(specs) > 1 else "the spec"
            raise HpclabError(f"{label}: {exc.what}", exc.hint) from None
        out.append((sp, st))
    return out


def submission_order(repetitions: list[int]) -> list[tuple[int, int]]:
    """(spec index, repetition) in the order jobs are submitted: round by round, every spec's first
    repetition, then every spec's second, and so on. The jobs of a comparison then alternate in
    time (A B A B, as farm-bench pairs its runs), so a drift of the machine during the experiment
    falls on every side alike instead of on whichever spec ran last."""
    rounds = max(repetitions, default=0)
    return [(i, rep) for rep in range(1, rounds + 1) for i, n in enumerate(repetitions) if rep <= n]


class Runs(list):
    """The runs of one call of run(): a list of Run grouped by spec as the specs were listed
    (each spec's runs in the order of their repetitions), and how the call went.

    groups: one list of runs per spec (what `until` is given). rounds: how many rounds of
    repetitions were submitted. stopped: why no more rounds were submitted, in words ("decided
    after 6 rounds", "cap of 10 rounds reached", "time cap of 60 s reached after 4 rounds"; ''
    when the specs' own repetitions were run). replaced: (disturbed run, the run that repeated
    it) pairs of rerun_disturbed; the lists hold the second in place of the first. recorded:
    'recorded by <instructor> on <date>' when the runs were read from a room's recording (nothing
    was submitted), else ''."""

    recorded = ""

    def __init__(self, groups: list[list[Run]], rounds: int = 0, stopped: str = "",
                 replaced: list[tuple[Run, Run]] | None = None):
        super().__init__(r for group in groups for r in group)
        self.groups, self.rounds, self.stopped = groups, rounds, stopped
        self.replaced = list(replaced or [])


def _submit_batch(keys: list[tuple[int, int]], checked: list[tuple[Spec, site_mod.Site]],
                  root: Path | None) -> dict[tuple[int, int], Run]:
    """Prepare and submit one job per (spec index, repetition), in the order given; Ctrl-C
    cancels the jobs already submitted."""
    submitted: dict[tuple[int, int], Run] = {}
    try:
        for i, rep in keys:
            sp, st = checked[i]
            submitted[(i, rep)] = submit(prepare(sp, st, rep, root=root))
    except KeyboardInterrupt:
        cancel(list(submitted.values()), reason="interrupted (Ctrl-C) while submitting")
        raise HpclabError(f"interrupted: cancelled the {len(submitted)} job(s) already submitted",
                          "their run folders are kept, marked cancelled") from None
    return submitted


def run(specs: Spec | dict | list, wait: bool = True, progress: bool = True,
        timeout: float | None = None, root: Path | None = None, *, until=None,
        min_repetitions: int = 3, max_repetitions: int = 10, max_seconds: float | None = None,
        rerun_disturbed: bool = False) -> Runs:
    """Validate, prepare and submit specs; by default wait for them.

    specs: a Spec, a spec dict, or a list of them. wait: block until every job ends (then raise
    HpclabError if any failed, timed out or was cancelled). progress: show a progress bar.
    timeout: seconds to wait before cancelling what is left (None: no limit; with until, for each
    round). root: runs folder (default runs/). Returns Runs, a list with one Run per job (a spec
    with repetitions R gives R runs), grouped by spec.

    until: a rule that ends an experiment of adaptive length, until(runs_by_spec) -> bool, given
    the completed runs of each spec (one list per spec, in round order) after every round from
    min_repetitions on; the specs' own repetitions are then not used: see run_until for the
    rounds, max_repetitions and max_seconds.

    rerun_disturbed: submit once more every run whose noise watch says it was taken beside other
    work (status.json noise; hpclab.runs.parse.noise), after its batch ended; the disturbed
    run's folder stays, marked replaced_by, and the returned runs hold its repetition in its
    place (Runs.replaced lists the pairs). Off by default: on a shared machine it can double an
    experiment's time and the second run may be disturbed too (it is kept then, marked; it is
    not repeated again), its run no longer alternates with the other specs' runs of its round,
    and whether a disturbed run is worth its time is the caller's call (the flag is recorded
    either way)."""
    if os.environ.get("NBGRADER_EXECUTION"):
        raise HpclabError("jobs are not submitted while nbgrader executes a notebook",
                          "grade from the run data that travels with the submission (hpclab.runs.folder.load)")
    items = specs if isinstance(specs, list) else [specs]
    specs_v = [s if isinstance(s, Spec) else make_spec(s) for s in items]
    if not specs_v:
        raise HpclabError("no specs to run", "pass a Spec or a list of Specs")
    if (until is not None or rerun_disturbed) and not wait:
        raise HpclabError(f"{'until' if until is not None else 'rerun_disturbed'} needs wait=True: "
                          "what comes next depends on the runs that ended", "leave wait at its default")
    room = recorded.active()
    if room is not None and room.answers([sp.to_dict() for sp in specs_v]):
        return from_recording(room, specs_v, wait=wait, until=until, min_repetitions=min_repetitions,
                              max_repetitions=max_repetitions)
    checked = validate(specs_v)
    if until is not None:
        return run_until(checked, until, min_repetitions=min_repetitions, max_repetitions=max_repetitions,
                         max_seconds=max_seconds, progress=progress, timeout=timeout, root=root,
                         rerun_disturbed=rerun_disturbed)
    submitted = _submit_batch(submission_order([sp.repetitions for sp, _ in checked]), checked, root)
    groups = [[submitted[key] for key in sorted(submitted) if key[0] == i] for i in range(len(checked))]
    runs = Runs(groups, rounds=max((sp.repetitions for sp, _ in checked), default=0))
    if wait:
        wait_for(runs, timeout=timeout, progress=progress)
        if rerun_disturbed:
            pairs = rerun_disturbed_runs(groups, checked, root=root, timeout=timeout, progress=progress)
            runs = Runs(groups, runs.rounds, replaced=pairs)
    return runs


def run_until(checked: list[tuple[Spec, site_mod.Site]], until, min_repetitions: int = 3,
              max_repetitions: int = 10, max_seconds: float | None = None, progress: bool = True,
              timeout: float | None = None, root: Path | None = None, rerun_disturbed: bool = False) -> Runs:
    """Rounds of repetitions until a rule says the comparison is decided (run(..., until=...)).

    checked: (spec, site) pairs from validate. Each round submits one job per spec, in spec order,
    as one batch, and waits for it, so job ids alternate A1 < B1 < A2 < B2 ...; each run's
    status.json repetition is its round. From round min_repetitions on, until(runs_by_spec)
    (one list of completed runs per spec) is called after every round; True stops. No more
    rounds after max_repetitions, and none is started once max_seconds (counted from the first
    submission) have passed or the next round, at the pace of the slowest so far, would end
    after them. A failed run raises as wait_for does (raise_for_failures), the rounds before
    it kept. Returns Runs; its stopped says why the rounds ended."""
    if not 1 <= min_repetitions <= max_repetitions:
        raise HpclabError(f"min_repetitions={min_repetitions}, max_repetitions={max_repetitions}: need "
                          "1 <= min_repetitions <= max_repetitions", "e.g. min_repetitions=3, max_repetitions=10")
    groups: list[list[Run]] = [[] for _ in checked]
    replaced: list[tuple[Run, Run]] = []
    start, slowest = time.monotonic(), 0.0
    stopped, rnd = "", 0
    while not stopped:
        rnd += 1
        began = time.monotonic()
        batch = _submit_batch([(i, rnd) for i in range(len(checked))], checked, root)
        for i in range(len(checked)):
            groups[i].append(batch[(i, rnd)])
        wait_for(list(batch.values()), timeout=timeout, progress=progress)
        if rerun_disturbed:
            replaced += rerun_disturbed_runs(groups, checked, among=list(batch.values()), root=root,
                                             timeout=timeout, progress=progress)
        slowest = max(slowest, time.monotonic() - began)
        elapsed = time.monotonic() - start
        if rnd >= min_repetitions and until([list(g) for g in groups]):
            stopped = f"decided after {rnd} round{'s' if rnd > 1 else ''}"
        elif rnd >= max_repetitions:
            stopped = f"cap of {max_repetitions} round{'s' if max_repetitions > 1 else ''} reached"
        elif max_seconds is not None and elapsed + slowest > max_seconds:
            stopped = f"time cap of {max_seconds:g} s reached after {rnd} round{'s' if rnd > 1 else ''}"
    return Runs(groups, rounds=rnd, stopped=stopped, replaced=replaced)


def from_recording(room: recorded.Recording, specs: list[Spec], wait: bool = True, *, until=None,
                   min_repetitions: int = 3, max_repetitions: int = 10) -> Runs:
    """run() in room mode: the runs the instructor recorded for specs of the same content
    (hpclab.runs.recorded), read-only; nothing is validated against the room's Slurm or submitted.

    Each spec gets at most its repetitions of the recorded rounds; with until, the recorded rounds
    are handed to the rule one by one as run_until would (from min_repetitions on, at most
    max_repetitions), and the call ends where the rule decides or the recording does. A run that
    failed when it was recorded raises as it did (wait=True). Raises HpclabError naming what to
    record when a spec has no recorded run. Returns Runs with .recorded set."""
    served = room.serve([sp.to_dict() for sp in specs],
                        None if until is not None else [sp.repetitions for sp in specs])

    def opened(path: Path) -> Run:
        folder = RunFolder(path)
        return Run(folder, make_spec(folder.spec(), source=f"spec.json of {path}"))

    groups = [[opened(p) for p in group] for group in served.groups]
    stopped = ""
    if until is not None:
        recorded_rounds, rnd = min(len(g) for g in groups), 0
        while not stopped:
            rnd += 1
            raise_for_failures([g[rnd - 1] for g in groups])  # a failed round ends the call, as it did
            if rnd >= min_repetitions and until([g[:rnd] for g in groups]):
                stopped = f"decided after {rnd} round{'s' if rnd > 1 else ''}"
            elif rnd >= max_repetitions:
                stopped = f"cap of {max_repetitions} round{'s' if max_repetitions > 1 else ''} reached"
            elif rnd >= recorded_rounds:
                stopped = f"the recording ends after {rnd} round{'s' if rnd > 1 else ''}"
        groups = [g[:rnd] for g in groups]
    kept = {r.path: r for g in groups for r in g}
    replaced = [(opened(old), kept[new]) for old, new in served.replaced if new in kept and old.is_dir()]
    runs = Runs(groups, rounds=max(len(g) for g in groups), stopped=stopped, replaced=replaced)
    runs.recorded = f"recorded by {served.by} on {served.date}"
    notice(f"recorded-{room.folder}", f"room mode: this notebook shows {served.by}'s runs, recorded on "
           f"{served.date} before the session; nothing is submitted for it (the labs run your own jobs)")
    if wait:
        raise_for_failures(runs)
    return runs


def rerun_disturbed_runs(groups: list[list[Run]], checked: list[tuple[Spec, site_mod.Site]],
                         among: list[Run] | None = None, root: Path | None = None,
                         timeout: float | None = None, progress: bool = True) -> list[tuple[Run, Run]]:
    """Submit once more, as one batch, every completed run whose status says it was taken beside
    other work (noise), and wait for them. groups: one list of runs per spec of `checked`; the
    repetition takes the disturbed run's place there, with its repetition number. among: the
    runs to look at (default: all of groups). Both folders are kept: the old one marked
    replaced_by, the new one replaces. Returns the (disturbed, repetition) pairs."""
    looked_at = {r.path for r in (among if among is not None else [r for g in groups for r in g])}
    pairs = []
    for i, group in enumerate(groups):
        for k, old in enumerate(group):
            if old.path not in looked_at or old.state != "completed" or not old.noise:
                continue
            sp, st = checked[i]
            new = prepare(sp, st, old.repetition or 1, root=root)
            new.folder.set_status("pending", replaces=old.run_id)
            submit(new)
            old.folder.set_status(old.state, replaced_by=new.run_id)
            group[k] = new
            pairs.append((old, new))
    if pairs:
        notice(f"rerun-{pairs[0][0].run_id}",
               f"{len(pairs)} run(s) taken beside other work submitted once more: "
               + "; ".join(f"{old.run_id} ({old.noise})" for old, _ in pairs))
        wait_for([new for _, new in pairs], timeout=timeout, progress=progress)
    return pairs


# --- waiting ---------------------------------------------------------------------------------------


_said: set[str] = set()


def notice(key: str, text: str) -> None:
    """Say `text` on stderr once per process and key: a fact worth knowing (accounting is down,
    Slurm requeued a job), not a failure."""
    if key not in _said:
        _said.add(key)
        print(f"hpclab: {text}", file=sys.stderr, flush=True)


def _finish(run: Run, info: slurm.JobInfo) -> None:
    """Record a job's end: sacct record into provenance (or a note that accounting was
    unavailable), state/exit code/reason into status."""
    state, reason = info.state, ("" if info.state == "completed" else info.reason)  # no stale "BeginTime"
    if state == "completed" and not run.folder.result_json.is_file():
        state, reason = "failed", "the job ended with exit code 0 but the kernel wrote no result.json"
    extra: dict = {}
    try:
        records = slurm.sacct_records([info.job_id])
        if records and not (run.folder.provenance / "sacct.json").exists():
            run.folder.write("provenance/sacct.json", json.dumps(records, indent=2) + "\n")
    except slurm.AccountingUnavailable as exc:
        # Jobs run without accounting; the state came from squeue/scontrol. Say so once.
        extra["accounting"] = "unavailable"
        if not (run.folder.provenance / "accounting.txt").exists():
            run.folder.write("provenance/accounting.txt",
                             f"accounting unavailable when the job ended: {exc.what}\n"
                             f"state, exit code and nodes were taken from {info.source}\n")
        notice("accounting", f"{exc.what}; job states come from squeue/scontrol and each run's "
                             "provenance/accounting.txt says so (`hpclab cluster up` restarts accounting)")
    if info.nodes:  # a job cancelled while pending has none
        extra["nodes"] = info.nodes
    failure = ""  # a FAILURES key once the cause is known
    if state == "failed" and (info.slurm_state == "OUT_OF_MEMORY" or memory_killed(run)):
        reason = oom_reason(run, info)
        failure = "out_of_memory"
    elif state == "failed" and tcp_unpaired(run):
        reason, failure = TCP_UNPAIRED, "tcp_unpaired"
    elif state in ("failed", "cancelled") or info.slurm_state == "NODE_FAIL":
        trouble = _node_failures(info.nodes, run.folder.status())
        if trouble:  # the job died with a node: say which, and what brings it back
            extra["failed_nodes"] = sorted(trouble)
            failure = "job_lost"
            reason = ("node failure: " + ", ".join(f"{n} is {st}" for n, st in sorted(trouble.items()))
                      + f"; the job ended {info.slurm_state}"
                      + (f" ({reason})" if reason else "")
                      + ". `hpclab cluster up` returns the node to service (elsewhere: tell the admins); "
                        "then run again")
    if state == "failed" and not registry.get(run.spec.kernel).contract and info.exit_code and not failure:
        # a program of the user's (kernel: program) ended badly on its own: say so in its words
        reason = (f"the program exited with code {info.exit_code}: {' '.join(run.spec.command)}"
                  + (f" (Slurm: {reason})" if reason else ""))
    if state != "completed":
        extra["failure"] = failure or {"timeout": "timed_out", "cancelled": "cancelled"}.get(state, "failed")
    else:
        extra.update(_noise(run))
    run.folder.set_status(state, slurm_state=info.slurm_state, exit_code=info.exit_code,
                          reason=reason, elapsed=info.elapsed, **extra)


def _noise(run: Run) -> dict:
    """What else used the run's node while it ran (hpclab.runs.parse.noise): the numbers into
    provenance/noise.json; for a run taken beside other work, {"noise": the reason in words}
    for its status. {} when the job did not record it."""
    found = noise_mod.run_noise(run.path)
    if found is None:
        return {}
    if not run.folder.noise_json.exists():
        run.folder.write("provenance/noise.json", json.dumps({**found.to_dict(), "text": found.text()}, indent=2) + "\n")
    return {"noise": found.text()} if found.disturbed else {}


# Open MPI's TCP BTL when it pairs no local interface with a remote one (btl_tcp_proc.c)
_UNPAIRED = "Unable to find reachable pairing between local and remote interfaces"
TCP_UNPAIRED = ("Open MPI's TCP transport found no pair of interfaces to connect the ranks ('Unable to find "
                "reachable pairing'): on a host with IPv6 beside IPv4, Open MPI 5.0.7 pairs none "
                "(open-mpi/ompi#14079, fixed later in 5.0). Name the interface and leave IPv6 out: "
                "OMPI_MCA_btl_tcp_if_include=lo (one node) or the nodes' interface, and "
                "OMPI_MCA_btl_tcp_disable_family=6; the site profile's tcp_interfaces sets both for every job")


def tcp_unpaired(run: Run) -> bool:
    """Did the run's Open MPI fail to pair TCP interfaces? (its words in the run's stderr or stdout)"""
    return any(f.is_file() and _UNPAIRED in f.read_text(errors="replace")
               for f in (run.folder.stderr, run.folder.stdout))


def memory_use(job_id: str) -> tuple[float | None, float | None]:
    """(asked, used) memory of a job in MB: what Slurm granted it (ReqMem) and the largest
    resident size any of its steps reached (MaxRSS, sampled by Slurm's accounting, so a peak
    between two samples may be missed). None where accounting does not say."""
    try:
        records = slurm.sacct_records([job_id])
    except slurm.AccountingUnavailable:
        return None, None
    asked = next((slurm.mem_mb(r["ReqMem"]) for r in records if r["JobIDRaw"] == str(job_id)), None)
    used = [m for m in (slurm.mem_mb(r["MaxRSS"]) for r in records) if m is not None]
    return asked, (max(used) if used else None)


# slurmstepd's words when a step goes over its job's memory: the accounting-based kill
# (JobAcctGatherParams=OverMemoryKill) prints used and allowed bytes, the cgroup OOM killer a count.
_OVER_MEMORY = re.compile(r"exceeded memory limit \((\d+) > (\d+)\)")
_OOM_WORDS = ("Exceeded job memory limit", "oom-kill event", "Out Of Memory")


def memory_killed(run: Run) -> tuple[float, float] | bool:
    """Did Slurm kill the run's job for its memory? (used MB, limit MB) when slurmstepd said how
    much (the largest report), True when it only said that it did, False otherwise. A job
    script that goes on after its step was killed ends FAILED, not OUT_OF_MEMORY, so the
    stderr Slurm writes into the run folder is the record."""
    err = run.folder.stderr.read_text(errors="replace") if run.folder.stderr.is_file() else ""
    found = [(int(u) / 2 ** 20, int(lim) / 2 ** 20) for u, lim in _OVER_MEMORY.findall(err)]
    if found:
        return max(found)
    return any(w in err for w in _OOM_WORDS)


def oom_reason(run: Run, info: slurm.JobInfo) -> str:
    """The reason of a run Slurm ended for its memory: 'ran out of memory: asked N MB, used about
    M MB' and what to do."""
    asked, used = memory_use(info.job_id)
    killed = memory_killed(run)
    if isinstance(killed, tuple):  # slurmstepd's own numbers: the sample that crossed the limit
        used, asked = killed[0], asked or killed[1]
    elif killed and used is None and asked is None:
        asked = None  # filled from the spec below
    sp = run.spec
    if asked is None and getattr(sp, "mem", None):
        asked = float(sp.mem)
    elif asked is None and getattr(sp, "mem_per_cpu", None):
        asked = float(sp.mem_per_cpu) * sp.ntasks * sp.cpus_per_task
    a = f"{asked:.0f} MB" if asked is not None else "the site's default"
    if used is not None and (asked is None or used >= asked * 0.9):
        u = f"used about {used:.0f} MB"
    elif asked is not None:  # the memory cgroup stopped it at the limit, before a sample saw more
        u = f"used about {asked:.0f} MB, all of it (the kernel's out-of-memory killer stopped it at the limit)"
    else:
        u = "Slurm recorded no usage sample"
    return (f"ran out of memory: asked {a}, {u}; Slurm stopped its step at the job's limit. Ask for more "
            f"with mem: or mem_per_cpu: in the spec, or make the problem smaller")


def _slurm_local_time(utc: str) -> str:
    """A status history time ('2026-11-26T05:27:40Z', UTC) in the local time Slurm's commands
    read and print ('2026-11-26T05:27:40' where the clock is UTC)."""
    epoch = calendar.timegm(time.strptime(utc, "%Y-%m-%dT%H:%M:%SZ"))
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime(epoch))


def _node_failures(nodes: str, st: dict) -> dict[str, str]:
    """Nodes of a job's node list that failed during its last attempt, {name: Slurm's state and
    reason}: those sinfo calls down or failing now, else those the accounting recorded as such
    since the attempt started (a node can fail and come back, its slurmd registering again,
    between two looks at the queue: the CI once saw the requeue only after node2 was back)."""
    if not nodes:
        return {}
    try:
        trouble = slurm.node_trouble(nodes)
        if trouble:
            return trouble
        started = next((h["time"] for h in reversed(st.get("history", [])) if h["state"] == "running"), "")
        return slurm.node_events(nodes, _slurm_local_time(started)) if started else {}
    except HpclabError:
        return {}


def _requeued(run: Run, info: slurm.JobInfo, st: dict) -> None:
    """Slurm took a started job back to the queue (node failure, controller restart, failed
    launch): record it in the status history with Slurm's Restarts count and say so once."""
    full = slurm.scontrol_job(info.job_id)
    restarts = full.restarts if full and full.restarts is not None else None
    reason = (full.reason if full else "") or info.reason
    trouble = _node_failures(st.get("nodes", ""), st)
    extra = {"failed_nodes": sorted(trouble)} if trouble else {}
    if trouble:  # Slurm requeued the job because a node of it failed (JobRequeue)
        restarts = restarts if restarts is not None else (st.get("restarts") or 0) + 1
        text = ("Slurm requeued job " + info.job_id + " after a node failure: "
                + ", ".join(f"{n} is {s}" for n, s in sorted(trouble.items()))
                + f" (reason: {reason or 'none given'}, restarts: {restarts}); it waits until enough nodes are "
                  "up: `hpclab cluster up` returns the node to service (elsewhere: tell the admins)")
    elif restarts is not None and restarts <= (st.get("restarts") or 0):
        # Not a requeue Slurm counted: the controller lost the job's start (restarted from a
        # state saved before the job started) and killed the instance the node still ran.
        text = (f"Slurm put job {info.job_id} back in the queue and will start it again: the controller "
                f"no longer knew it had started (a slurmctld restart from a state saved before the start; "
                f"reason: {reason or 'none given'}, restarts: {restarts})")
    else:
        restarts = restarts if restarts is not None else (st.get("restarts") or 0) + 1
        text = f"Slurm requeued job {info.job_id} (reason: {reason or 'none given'}, restarts: {restarts})"
    if reason == slurm.HELD_AFTER_FAILED_LAUNCH:
        text += ("; it stays held until released: `hpclab cluster up` resumes the node and releases it "
                 "(elsewhere: `scontrol release " + info.job_id + "` once the node is back)")
    run.folder.set_status("pending", reason=text, restarts=restarts, requeued=True, **extra)
    notice(f"requeue-{info.job_id}-{restarts}", text + "; hpclab keeps waiting")


LOST_RESUBMIT_DELAY_S = 5.0


def _lost(run: Run, st: dict) -> None:
    """Slurm no longer knows a job it had started: squeue, scontrol and the accounting have no
    record of it. The controller was restarted from a state saved before it recorded the job
    (slurmctld saves at most every 5 s) and had the node kill the orphan; its job id may even be
    given to the next job. Submit the run's job script again, keep what the lost attempt wrote
    (stdout/stderr renamed, never overwritten) and say so."""
    old = run.job_id
    for f in (run.folder.stdout, run.folder.stderr):
        if f.exists():
            f.rename(f.with_name(f"{f.name}.lost-job-{old}"))
    text = (f"Slurm lost job {old}: slurmctld restarted from a state saved before it recorded the job "
            "(it saves its state at most every 5 s) and the node killed the orphan")
    run.folder.set_status("pending", reason=text + "; hpclab submits the job script again",
                          lost_jobs=[*st.get("lost_jobs", []), old], requeued=True)
    # The restarted controller hands out job ids from its saved counter, so the new job may get the
    # lost one's id; were the node still running the orphan then, slurmd would refuse the launch
    # and Slurm drain the node ("Duplicate jobid", seen once in make test). The node kills the
    # orphan when it registers with the restarted controller: give it that moment first.
    time.sleep(LOST_RESUBMIT_DELAY_S)
    submit(run)
    notice(f"lost-{old}", f"{text}; submitted again as job {run.job_id}, hpclab keeps waiting")


def refresh(runs: list[Run]) -> list[Run]:
    """Ask Slurm once about every run that has not ended and record what changed: a new state,
    nodes, a requeue (running -> pending, with Slurm's Restarts count) or the end."""
    live = [r for r in runs if r.state not in slurm.TERMINAL and r.job_id]
    if live:
        infos = slurm.job_states([r.job_id for r in live])
        for r in live:
            info = infos.get(r.job_id)
            if info is None:
                continue
            st = r.folder.status()
            if info.done:
                _finish(r, info)
            elif info.slurm_state == "UNKNOWN" and st["state"] == "running":
                _lost(r, st)  # a running job is always visible: Slurm forgot it
            elif info.state == "pending" and st["state"] == "running":
                _requeued(r, info, st)
            elif info.state != st["state"] or (info.nodes and not st.get("nodes")) or (
                    info.state == "pending" and info.reason != st.get("reason") and not st.get("requeued")):
                # the nodes of an attempt are the ones it started on: a job whose node died shows
                # only the live ones while it completes, and the failed node must stay named
                extra = {"nodes": info.nodes} if info.nodes and (info.state != st["state"] or not st.get("nodes")) else {}
                r.folder.set_status(info.state, reason=info.reason, **extra)
    return runs


def _last_words(run: Run, info: slurm.JobInfo | None) -> str:
    """What Slurm last said about a run's job, in words, for a message that stops waiting."""
    if info is None:
        return f"{run.state} (Slurm did not answer)"
    text = info.describe()
    if info.state == "pending" and info.reason == slurm.HELD_AFTER_FAILED_LAUNCH:
        text += ": Slurm holds it after a failed launch; `hpclab cluster up` resumes the node and releases it"
    elif run.folder.status().get("failed_nodes"):
        text += (f", after Slurm requeued it when node(s) {', '.join(run.folder.status()['failed_nodes'])} failed; "
                 "`hpclab cluster up` returns them to service")
    elif run.folder.status().get("requeued"):
        text += ", after Slurm requeued it"
    return text


def cancel(runs: list[Run], reason: str = "cancelled by hpclab") -> None:
    """scancel every run that has not ended and mark it cancelled."""
    live = [r for r in runs if r.state not in slurm.TERMINAL]
    slurm.scancel([r.job_id for r in live if r.job_id])
    for r in live:
        r.folder.set_status("cancelled", reason=reason, failure="cancelled")


class _DrainWatch:
    """On the embedded cluster, stops the wait when no node can ever start the pending jobs: every
    node of their partition drained (Slurm drains a node after a failed launch, and only a person
    resumes it); on a site's cluster it says so once and keeps waiting. Asks
    Slurm every CHECK seconds and gives up once it has seen that for GRACE seconds, so a node
    an admin or `hpclab cluster up` is resuming right now is not mistaken for a lost one."""

    CHECK, GRACE = 10.0, 30.0

    def __init__(self):
        self.next_check = time.monotonic() + self.CHECK
        self.since: float | None = None

    def cancel_if_no_node_can_start(self, runs: list[Run]) -> bool:
        now = time.monotonic()
        if now < self.next_check:
            return False
        self.next_check = now + self.CHECK
        pending = [r for r in runs if r.state == "pending" and r.job_id]
        try:
            drained = slurm.drained_partition(pending[0].job_id) if pending else {}
        except HpclabError:
            drained = {}
        if not drained:
            self.since = None
            return False
        self.since = self.since or now
        if now - self.since < self.GRACE:
            return False
        nodes = ", ".join(f"{n} is {s}" for n, s in sorted(drained.items()))
        if os.environ.get("HPCLAB_SITE", "local") != "local":
            # A site's admins drain nodes on purpose (maintenance) and resume them: say so and
            # keep the job in the queue; only the embedded cluster has no one to resume them.
            notice(f"drained-{nodes}", f"no node of the job's partition can start it now: {nodes}; "
                   "it waits until the admins resume one (hpclab keeps waiting)")
            return False
        live = [r for r in runs if r.state not in slurm.TERMINAL]
        slurm.scancel([r.job_id for r in live if r.job_id])
        for r in live:
            r.folder.set_status(
                "cancelled", failure="node_drained",
                reason=f"no node can start the job: every node of its partition is drained ({nodes}); "
                "Slurm drains a node after a failed launch and keeps it so until someone resumes it: "
                "`hpclab cluster up` does on the embedded cluster (the node's slurmd log says what failed), "
                "elsewhere ask the admins; hpclab cancelled the job")
        return True


def wait_for(runs: list[Run], timeout: float | None = None, progress: bool = True,
             poll: float = 0.5) -> list[Run]:
    """Wait until every run's job has ended, updating status.json and a progress bar.

    timeout: seconds (None: no limit); when it passes, the remaining jobs are cancelled and
    marked cancelled, the reason saying what Slurm last reported (pending and why, running,
    requeued); "timeout" is kept for Slurm's own time limit. A job Slurm requeues is followed,
    not given up (see refresh). Ctrl-C cancels the remaining jobs. Raises JobFailed (or the subclass
    naming the cause all failed runs share, see raise_for_failures) naming every run that did not
    complete (state, exit code, reason, last stderr lines, folder)."""
    start = time.monotonic()
    stuck = _DrainWatch()
    bar = JobProgress(len(runs), desc=runs[0].spec.experiment if runs else "jobs", enabled=progress)
    try:
        while True:
            refresh(runs)
            statuses = [r.folder.status() for r in runs]
            bar.update([st["state"] for st in statuses], [st.get("nodes", "") for st in statuses])
            if all(r.state in slurm.TERMINAL for r in runs):
                break
            if stuck.cancel_if_no_node_can_start(runs):
                break
            if timeout is not None and time.monotonic() - start > timeout:
                # Not a Slurm timeout: say what the job was doing when hpclab gave up on it.
                live = [r for r in runs if r.state not in slurm.TERMINAL]
                try:
                    last = slurm.job_states([r.job_id for r in live if r.job_id])
                except HpclabError:
                    last = {}
                slurm.scancel([r.job_id for r in live if r.job_id])
                for r in live:
                    r.folder.set_status(
                        "cancelled", stopped_waiting=timeout, failure="gave_up_waiting",
                        reason=f"hpclab stopped waiting after {timeout:g} s and cancelled the job; it was "
                               f"{_last_words(r, last.get(r.job_id or ''))}")
                break
            time.sleep(poll)
            # every second for the first minute (a course's experiment ends within it, and each
            # round of an adaptive one is waited for: a 3 s poll left a core idle up to 3 s per
            # round), then every 3 s (a room of students waiting in the queue, each polling squeue)
            poll = min(poll * 1.3, 1.0 if time.monotonic() - start < 60 else 3.0)
    except KeyboardInterrupt:
        cancel(runs, reason="interrupted (Ctrl-C) while waiting")
        bar.close()
        raise HpclabError(f"interrupted: cancelled the jobs that had not finished ({len(runs)} run(s) in total)",
                          "their run folders are kept, marked cancelled; run again when ready") from None
    bar.close()
    raise_for_failures(runs)
    return runs


wait = wait_for  # the name notebooks use: experiment.wait(runs)


def run_and_explain(specs: Spec | dict | list, timeout: float | None = None) -> list[Run]:
    """run(specs) for a run that is meant to fail (a notebook cell that lets the learner meet a
    failure on purpose): print hpclab's message for every run that did not complete instead of
    raising, and return the runs."""
    runs = run(specs, wait=False, progress=False)
    try:
        wait_for(runs, timeout=timeout, progress=False)
    except HpclabError as exc:
        print(exc)
    else:
        print(f"all {len(runs)} run(s) completed")
    return runs


def run_again_if_startup_crashed(specs: list, timeout: float | None = None, progress: bool = True) -> list[Run]:
    """run(specs), and submit once more exactly the runs that died inside MPI_Init (see
    died_in_mpi_startup); their failed folders stay as they are. Any other failure raises as run
    does. Returns the completed runs, one per job."""
    runs = run(specs, wait=False, progress=progress)
    try:
        wait_for(runs, timeout=timeout, progress=progress)
    except HpclabError:
        failed = [r for r in runs if r.state != "completed"]
        if not all(died_in_mpi_startup(r) for r in failed):
            raise
        runs = [r for r in runs if r.state == "completed"] + run(
            [r.spec for r in failed], progress=progress, timeout=timeout)
    return runs


def died_in_mpi_startup(run: Run) -> bool:
    """Did the run's program die from a signal before the kernel printed its first line
    (`arguments = ...`, written right after MPI_Init)? Then the crash is in the MPI library's
    start-up, not in the kernel: with Open MPI 4.1.4 on oversubscribed virtual nodes a rank
    now and then segfaults inside MPI_Init (core dump: a TCP BTL fragment handed to a NULL
    callback), in about 1 traced 8-rank run in 25 here."""
    if run.state != "failed" or not registry.get(run.spec.kernel).contract:
        return False  # a program of the user's prints no first line to tell its start-up by
    out = run.folder.stdout.read_text(errors="replace") if run.folder.stdout.is_file() else ""
    err = run.folder.stderr.read_text(errors="replace") if run.folder.stderr.is_file() else ""
    started = any(line.startswith("arguments =") for line in out.splitlines())
    return not started and ("Segmentation fault" in err or "Signal: " in err)


# A run's cause of failure as recorded in its status.json ("failure"), and the error class that names it.
FAILURES: dict[str, type[JobFailed]] = {
    "failed": JobFailed, "out_of_memory": OutOfMemory, "timed_out": TimedOut, "gave_up_waiting": GaveUpWaiting,
    "cancelled": Cancelled, "node_drained": NodeDrained, "job_lost": JobLost, "tcp_unpaired": TcpUnpaired,
}


def _failure_class(st: dict) -> type[JobFailed]:
    if st.get("failure") in FAILURES:
        return FAILURES[st["failure"]]
    # a status written before causes were recorded: what its fields still say
    if st.get("stopped_waiting"):
        return GaveUpWaiting
    if st.get("failed_nodes"):
        return JobLost
    return {"timeout": TimedOut, "cancelled": Cancelled}.get(st.get("state"), JobFailed)


def failure_of(run: Run) -> JobFailed | None:
    """Why `run` did not complete, as an error of the class that names the cause (OutOfMemory,
    TimedOut, GaveUpWaiting, Cancelled, NodeDrained, JobLost, or JobFailed for the rest) whose
    message is the run's part of raise_for_failures' message; None if it completed."""
    if run.state == "completed":
        return None
    st = run.folder.status()
    tail = run.folder.tail("stderr", STDERR_LINES)
    what = (
        f"run {run.folder.experiment}/{run.run_id} (job {st.get('job_id')}): state {st['state']}"
        f"{' (Slurm ' + st['slurm_state'] + ')' if st.get('slurm_state') else ''}, "
        f"exit code {st.get('exit_code')}, reason: {st.get('reason') or 'none given'}"
        + (f"\n  last lines of stderr:\n    " + tail.replace("\n", "\n    ") if tail else "")
        + ("\n  diagnosis: the program died inside MPI_Init, before the kernel printed anything: "
           "a crash in Open MPI's start-up (rare, seen on oversubscribed virtual nodes), "
           "not in your spec or the kernel; submit the same spec again"
           if died_in_mpi_startup(run) else "")
        + f"\n  run folder: {run.path}")
    return _failure_class(st)(what, runs=[run])


def raise_for_failures(runs: list[Run]) -> None:
    """Raise a JobFailed describing every run not completed; return None if all completed. When
    every run failed the same way the error is of that cause's class (OutOfMemory, NodeDrained,
    GaveUpWaiting, ...), otherwise of the closest class they share."""
    bad = [r for r in runs if r.state != "completed"]
    if not bad:
        return
    failures = [failure_of(r) for r in bad]
    what = f"{len(bad)} of {len(runs)} run(s) did not complete:\n" + "\n".join(f.what for f in failures)
    if all(isinstance(f, GaveUpWaiting) for f in failures):
        hint = ("hpclab gave up waiting, Slurm did not fail the job: give it more time (timeout=...), or "
                "look at `squeue`/`hpclab cluster status` if it was pending for a reason that will not pass")
    elif all(isinstance(f, NodeDrained) for f in failures):
        hint = ("resume the drained node (`hpclab cluster up` on the embedded cluster), then run again: "
                "runs that completed are kept")
    elif all(isinstance(f, OutOfMemory) for f in failures):
        hint = "ask for more memory (spec field mem or mem_per_cpu) or make the problem smaller"
    elif all(isinstance(f, TcpUnpaired) for f in failures):
        hint = ("name the TCP interface: tcp_interfaces in the site profile (sites/local.yaml has it), or "
                "env: {OMPI_MCA_btl_tcp_if_include: lo, OMPI_MCA_btl_tcp_disable_family: '6'} in the spec")
    else:
        hint = "read stderr and job.sh in the run folder; fix the spec and run again"
    cls = next(c for c in type(failures[0]).__mro__ if all(isinstance(f, c) for f in failures))
    raise cls(what, hint, runs=bad, failures=failures)


def states_text(run: Run) -> str:
    """The Slurm states of a run's job and of each of its steps, read from sacct, in words.

    A job's state is its batch script's; each step the script starts (srun) has a state of its
    own. When the memory limit stops a step, sacct marks that step OUT_OF_MEMORY; a script that
    goes on after it and exits non-zero ends the job FAILED. Which of these happened is read from
    the record, not assumed. Returns '' when accounting is unavailable or has no record."""
    try:
        records = slurm.sacct_records([str(run.job_id)])
    except slurm.AccountingUnavailable:
        return ""
    job = next((r for r in records if r["JobIDRaw"] == str(run.job_id)), None)
    if job is None:
        return ""
    steps = [r for r in records if r["JobIDRaw"].startswith(f"{run.job_id}.")]
    listed = "; ".join(f"step {r['JobIDRaw']} ({r['JobName']}) {r['State']}, exit code {r['ExitCode']}"
                       for r in steps)
    text = (f"sacct: job {run.job_id} ended {job['State']}, exit code {job['ExitCode']}"
            + (f"; {listed}." if listed else "."))
    oom = [r["JobIDRaw"] for r in steps if r["State"].startswith("OUT_OF_MEMORY")]
    if job["State"].startswith("OUT_OF_MEMORY"):
        return text + " The job itself is marked OUT_OF_MEMORY: the limit stopped the batch script's own processes."
    if oom:
        return (text + f" The memory limit stopped step {', '.join(oom)}, which is why that step is OUT_OF_MEMORY; "
                f"the job's state follows its batch script (step {run.job_id}.batch), which went on after "
                f"that step and exited non-zero: {job['State']}.")
    if memory_killed(run):
        return (text + " No step is marked OUT_OF_MEMORY, although slurmstepd reported the kill in stderr: "
                "a step killed by Slurm's own memory sampling ends by a signal (FAILED or CANCELLED).")
    return text
