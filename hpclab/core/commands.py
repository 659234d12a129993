"""The one way hpclab runs a Slurm client command (sbatch, squeue, sacct, sinfo, scontrol,
scancel, sacctmgr): captured text output, a time limit, and a clear error when the program is
missing. site.slurm builds the job queries on it (with the site's SLURM_CONF); cluster.local
uses it directly for the embedded cluster's own administration, since that floor lies below
the site."""

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
                          "install the Slurm client (apt-get install slurm-client) or load its module")
    try:
        return subprocess.run(argv, capture_output=True, text=True, env=env, timeout=timeout,
                              stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired:
        return None
