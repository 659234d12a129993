"""The one way hpclab runs a short external command and reads its answer: Slurm's clients
(sbatch, squeue, sacct, sinfo, scontrol, scancel, sacctmgr), ompi_info, lstopo, ip. Captured text
output, a time limit, and a clear error when the program is missing. site.slurm builds the job
queries on it (with the site's SLURM_CONF); cluster.local uses it directly for the embedded
cluster's own administration, since that floor lies below the site. (Daemons and jobs are
started elsewhere: cluster.daemons, sbatch.) A command whose output belongs in a log (a set-up
step's, mariadb's initialisation) writes it there with `log=`."""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
from pathlib import Path

from hpclab.core.errors import HpclabError

# What `run` returns (argv, returncode, stdout, stderr), named here so callers need not import subprocess.
Completed = subprocess.CompletedProcess


def run(argv: list[str], what: str, env: dict[str, str] | None = None, timeout: float | None = 60.0,
        input: str | None = None, cwd: str | Path | None = None,
        log: Path | None = None) -> subprocess.CompletedProcess | None:
    """Run `argv` (text in and out; stdin is `input`, or nothing) and return the completed process,
    or None when it did not answer within `timeout` seconds (a hung slurmctld or slurmdbd; None:
    no limit). With `log`, stdout and stderr are appended to that file instead of captured (the
    returned process has them empty). Raises HpclabError saying we could not `what` when the
    program is not installed."""
    if not shutil.which(argv[0]):
        raise HpclabError(f"cannot {what}: {argv[0]} is not installed here",
                          f"install the package that provides {argv[0]} (`make setup` installs the "
                          "course's), or load its module")
    stdin = subprocess.DEVNULL if input is None else None
    try:
        if log is None:
            return subprocess.run(argv, capture_output=True, text=True, env=env, timeout=timeout,
                                  stdin=stdin, input=input, cwd=cwd)
        log.parent.mkdir(parents=True, exist_ok=True)
        with open(log, "ab") as out:
            done = subprocess.run(argv, stdout=out, stderr=subprocess.STDOUT, env=env, timeout=timeout,
                                  stdin=stdin, input=None if input is None else input.encode(), cwd=cwd)
        return subprocess.CompletedProcess(done.args, done.returncode, "", "")
    except subprocess.TimeoutExpired:
        return None


def output(argv: list[str], what: str, hint: str, env: dict[str, str] | None = None,
           timeout: float = 60.0) -> str:
    """Run `argv` and return its stdout; raise HpclabError saying we could not `what` (with the
    command's last stderr lines and `hint`) when it is missing, exits non-zero or times out."""
    res = run(argv, what, env=env, timeout=timeout)
    if res is None:
        raise HpclabError(f"cannot {what}: `{' '.join(argv)}` did not answer within {timeout:g} s", hint)
    if res.returncode != 0:
        msg = " ".join(res.stderr.strip().splitlines()[-2:])[:300] or f"exit code {res.returncode}"
        raise HpclabError(f"cannot {what}: `{' '.join(argv)}` said: {msg}", hint)
    return res.stdout


@contextlib.contextmanager
def inherited_environment(values: dict[str, str]):
    """This process's environment with `values` set inside the block (the kernels and commands it
    starts there inherit them), and as it was before once the block is left, also on an error."""
    earlier = {k: os.environ.get(k) for k in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for k, v in earlier.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
