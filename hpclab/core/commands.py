"""The one way hpclab runs a short external command and reads its answer: Slurm's clients
(sbatch, squeue, sacct, sinfo, scontrol, scancel, sacctmgr), ompi_info, lstopo, ip. Captured text
output, a time limit, and a clear error when the program is missing. site.slurm builds the job
queries on it (with the site's SLURM_CONF); cluster.local uses it directly for the embedded
cluster's own administration, since that floor lies below the site. (Daemons and jobs are
started elsewhere: cluster.daemons, sbatch.)"""

from __future__ import annotations

import shutil
import subprocess

from hpclab.core.errors import HpclabError


def run(argv: list[str], what: str, env: dict[str, str] | None = None,
        timeout: float = 60.0) -> subprocess.CompletedProcess | None:
    """Run `argv` (text in and out, nothing from stdin) and return the completed process, or None
    when it did not answer within `timeout` seconds (a hung slurmctld or slurmdbd). Raises
    HpclabError saying we could not `what` when the program is not installed."""
    if not shutil.which(argv[0]):
        raise HpclabError(f"cannot {what}: {argv[0]} is not installed here",
                          f"install the package that provides {argv[0]} (`make setup` installs the "
                          "course's), or load its module")
    try:
        return subprocess.run(argv, capture_output=True, text=True, env=env, timeout=timeout,
                              stdin=subprocess.DEVNULL)
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
