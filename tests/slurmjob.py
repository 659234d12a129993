"""A minimal sbatch-and-wait used by the cluster tests (the course itself uses hpclab.site.slurm)."""

from __future__ import annotations

import subprocess
import time


def submit(script: str, workdir, *sbatch_args: str) -> str:
    path = workdir / "job.sh"
    path.write_text(script)
    out = subprocess.run(["sbatch", "--parsable", f"--chdir={workdir}", *sbatch_args, str(path)],
                         capture_output=True, text=True, check=True).stdout
    return out.strip().split(";")[0]


def accounting(jobid: str) -> tuple[str, str]:
    """(State, ExitCode) of the job allocation from sacct, e.g. ('FAILED', '3:0')."""
    out = subprocess.run(["sacct", "-X", "-n", "-P", "-j", jobid, "-o", "State,ExitCode"],
                         capture_output=True, text=True).stdout.strip()
    if not out:
        return "", ""
    state, code = out.splitlines()[0].split("|")
    return state.split()[0], code


FINAL = {"COMPLETED", "FAILED", "TIMEOUT", "CANCELLED", "OUT_OF_MEMORY", "NODE_FAIL"}


def wait(jobid: str, timeout: float = 60) -> tuple[str, str]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        state, code = accounting(jobid)
        if state in FINAL:
            return state, code
        time.sleep(0.2)
    raise TimeoutError(f"job {jobid} not finished after {timeout} s (last state {state!r})")
