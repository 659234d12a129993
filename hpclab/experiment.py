"""Run experiments: validate specs, write run folders, submit to Slurm, wait, read results.

This is what notebooks call:

    from hpclab import experiment, spec
    specs = spec.sweep(spec.make_spec(kernel="stream", ntasks=1, args={"size": 2_000_000}),
                       {"binding.cpu_bind": ["cores", "none"], "omp.num_threads": [1, 2]})
    runs = experiment.run(specs)          # progress bar; raises HpclabError if a job fails
    df = hpclab.runs.load("stream")       # or runs[0].table()

Every spec is checked against its site before the first job is submitted, so a bad sweep
submits nothing. A spec with repetitions R becomes R jobs (R run folders). Ctrl-C while waiting
cancels the jobs still queued or running (scancel) and marks their folders cancelled.
"""

from __future__ import annotations

import json
import os
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

from hpclab import paths, slurm, spec_checks, templates
from hpclab import site as site_mod
from hpclab.errors import HpclabError
from hpclab.progress import JobProgress
from hpclab.runs import RunFolder, run_table
from hpclab.spec import Spec, make_spec

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

    def __repr__(self) -> str:
        st = self.folder.status()
        return f"<Run {self.folder.experiment}/{self.run_id} job {st.get('job_id')} {st['state']}>"

    def result(self) -> dict:
        """The kernel's JSON report (docs/kernel-contract.md) of a completed run."""
        if self.state != "completed":
            raise_for_failures([self])
        return self.folder.result()

    def table(self):
        """This run's tidy rows (hpclab.parse.parse_run) with run and spec columns."""
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
        head = subprocess.run(["git", "-C", str(paths.repo()), "rev-parse", "HEAD"],
                              capture_output=True, text=True, timeout=10).stdout.strip()
        dirty = subprocess.run(["git", "-C", str(paths.repo()), "status", "--porcelain", "--untracked-files=no"],
                               capture_output=True, text=True, timeout=10).stdout.strip()
    except (OSError, subprocess.TimeoutExpired):
        return "unknown (git not available)\n"
    return f"commit {head or 'unknown'}\nlocal changes: {'yes' if dirty else 'no'}\n"


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
    """sbatch the run's job.sh; record the job id (or mark the run failed and raise)."""
    try:
        job_id = slurm.sbatch(run.folder.job_sh)
    except HpclabError as exc:
        run.folder.set_status("failed", reason=f"sbatch failed: {exc.what}")
        raise
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
        key = (st.name, sp.partition, sp.kernel)
        if key not in facts_cache:
            facts_cache[key] = spec_checks.gather_facts(sp, st)
        try:
            spec_checks.check(sp, st, facts_cache[key])
        except HpclabError as exc:
            label = f"spec {i + 1} of {len(specs)}" if len(specs) > 1 else "the spec"
            raise HpclabError(f"{label}: {exc.what}", exc.hint) from None
        out.append((sp, st))
    return out


def run(specs: Spec | dict | list, wait: bool = True, progress: bool = True,
        timeout: float | None = None, root: Path | None = None) -> list[Run]:
    """Validate, prepare and submit specs; by default wait for them.

    specs: a Spec, a spec dict, or a list of them. wait: block until every job ends (then raise
    HpclabError if any failed, timed out or was cancelled). progress: show a progress bar.
    timeout: seconds to wait before cancelling what is left (None: no limit). root: runs folder
    (default runs/). Returns one Run per job (a spec with repetitions R gives R runs)."""
    if os.environ.get("NBGRADER_EXECUTION"):
        raise HpclabError("jobs are not submitted while nbgrader executes a notebook",
                          "grade from the run data that travels with the submission (hpclab.runs.load)")
    items = specs if isinstance(specs, list) else [specs]
    specs_v = [s if isinstance(s, Spec) else make_spec(s) for s in items]
    if not specs_v:
        raise HpclabError("no specs to run", "pass a Spec or a list of Specs")
    checked = validate(specs_v)
    runs: list[Run] = []
    try:
        for sp, st in checked:
            for rep in range(1, sp.repetitions + 1):
                runs.append(submit(prepare(sp, st, rep, root=root)))
    except KeyboardInterrupt:
        cancel(runs, reason="interrupted (Ctrl-C) while submitting")
        raise HpclabError(f"interrupted: cancelled the {len(runs)} job(s) already submitted",
                          "their run folders are kept, marked cancelled") from None
    if wait:
        wait_for(runs, timeout=timeout, progress=progress)
    return runs


# --- waiting ---------------------------------------------------------------------------------------


def _finish(run: Run, info: slurm.JobInfo) -> None:
    """Record a job's end: sacct record into provenance, state/exit code/reason into status."""
    state, reason = info.state, info.reason
    if state == "completed" and not run.folder.result_json.is_file():
        state, reason = "failed", "the job ended with exit code 0 but the kernel wrote no result.json"
    try:
        records = slurm.sacct_records([info.job_id])
        if records and not (run.folder.provenance / "sacct.json").exists():
            run.folder.write("provenance/sacct.json", json.dumps(records, indent=2) + "\n")
    except HpclabError:
        pass  # accounting unavailable: the status still has Slurm's state and exit code
    extra = {"nodes": info.nodes} if info.nodes else {}  # a job cancelled while pending has none
    run.folder.set_status(state, slurm_state=info.slurm_state, exit_code=info.exit_code,
                          reason=reason, elapsed=info.elapsed, **extra)


def refresh(runs: list[Run]) -> list[Run]:
    """Ask Slurm once about every run that has not ended and record what changed."""
    live = [r for r in runs if r.state not in slurm.TERMINAL and r.job_id]
    if live:
        infos = slurm.job_states([r.job_id for r in live])
        for r in live:
            info = infos.get(r.job_id)
            if info is None:
                continue
            if info.done:
                _finish(r, info)
            elif info.state != r.state or (info.nodes and info.nodes != r.folder.status().get("nodes")):
                extra = {"nodes": info.nodes} if info.nodes else {}
                r.folder.set_status(info.state, reason=info.reason, **extra)
    return runs


def cancel(runs: list[Run], reason: str = "cancelled by hpclab") -> None:
    """scancel every run that has not ended and mark it cancelled."""
    live = [r for r in runs if r.state not in slurm.TERMINAL]
    slurm.scancel([r.job_id for r in live if r.job_id])
    for r in live:
        r.folder.set_status("cancelled", reason=reason)


def wait_for(runs: list[Run], timeout: float | None = None, progress: bool = True,
             poll: float = 0.5) -> list[Run]:
    """Wait until every run's job has ended, updating status.json and a progress bar.

    timeout: seconds (None: no limit); when it passes, the remaining jobs are cancelled and
    marked timeout. Ctrl-C cancels the remaining jobs. Raises HpclabError naming every run that
    did not complete (state, exit code, reason, last stderr lines, folder)."""
    start = time.monotonic()
    bar = JobProgress(len(runs), desc=runs[0].spec.experiment if runs else "jobs", enabled=progress)
    try:
        while True:
            refresh(runs)
            statuses = [r.folder.status() for r in runs]
            bar.update([st["state"] for st in statuses], [st.get("nodes", "") for st in statuses])
            if all(r.state in slurm.TERMINAL for r in runs):
                break
            if timeout is not None and time.monotonic() - start > timeout:
                live = [r for r in runs if r.state not in slurm.TERMINAL]
                slurm.scancel([r.job_id for r in live if r.job_id])
                for r in live:
                    r.folder.set_status("timeout", reason=f"hpclab stopped waiting after {timeout:g} s and cancelled the job")
                break
            time.sleep(poll)
            poll = min(poll * 1.3, 3.0)
    except KeyboardInterrupt:
        cancel(runs, reason="interrupted (Ctrl-C) while waiting")
        bar.close()
        raise HpclabError(f"interrupted: cancelled the jobs that had not finished ({len(runs)} run(s) in total)",
                          "their run folders are kept, marked cancelled; run again when ready") from None
    bar.close()
    raise_for_failures(runs)
    return runs


wait = wait_for  # the name notebooks use: experiment.wait(runs)


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
    if run.state != "failed":
        return False
    out = run.folder.stdout.read_text(errors="replace") if run.folder.stdout.is_file() else ""
    err = run.folder.stderr.read_text(errors="replace") if run.folder.stderr.is_file() else ""
    started = any(line.startswith("arguments =") for line in out.splitlines())
    return not started and ("Segmentation fault" in err or "Signal: " in err)


def raise_for_failures(runs: list[Run]) -> None:
    """Raise HpclabError describing every run not completed; return None if all completed."""
    bad = [r for r in runs if r.state != "completed"]
    if not bad:
        return
    parts = []
    for r in bad:
        st = r.folder.status()
        tail = r.folder.tail("stderr", STDERR_LINES)
        parts.append(
            f"run {r.folder.experiment}/{r.run_id} (job {st.get('job_id')}): state {st['state']}"
            f"{' (Slurm ' + st['slurm_state'] + ')' if st.get('slurm_state') else ''}, "
            f"exit code {st.get('exit_code')}, reason: {st.get('reason') or 'none given'}"
            + (f"\n  last lines of stderr:\n    " + tail.replace("\n", "\n    ") if tail else "")
            + ("\n  diagnosis: the program died inside MPI_Init, before the kernel printed anything: "
               "a crash in Open MPI's start-up (rare, seen on oversubscribed virtual nodes), "
               "not in your spec or the kernel; submit the same spec again"
               if died_in_mpi_startup(r) else "")
            + f"\n  run folder: {r.path}")
    what = f"{len(bad)} of {len(runs)} run(s) did not complete:\n" + "\n".join(parts)
    raise HpclabError(what, "read stderr and job.sh in the run folder; fix the spec and run again")
