"""One way to run a blocking job step: `srun ... program` (or a program alone), its output to files.

Profilers, kernel variants and instruction counts all start their program as one Slurm job step
(the words from hpclab.jobs.templates.step_argv) and wait for it. Slurm's own hiccup lives here,
once: srun's allocation reply can be garbled when a stray connection (a busy machine's MPI jobs
reusing ephemeral ports) reaches srun's listening socket first ("Insane message length"); the
allocation never happened, so asking once more is safe, and the first attempt's output is kept
beside the second's.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

from hpclab.core.errors import HpclabError

SRUN_GARBLED = ("Insane message length", "apparently being written to by something other than Slurm")


def run_step(argv: list[str], folder: Path, env: dict, timeout: float, stdout: str = "stdout",
             stderr: str = "stderr", what: str = "the job step") -> int:
    """Run argv in `folder` with its output in folder/stdout and folder/stderr (names given), at
    most `timeout` seconds; once more when srun's reply was garbled (the first attempt's files
    renamed <name>.attempt-1). Returns the exit code. Raises HpclabError when it times out."""
    folder = Path(folder)
    for attempt in (1, 2):
        try:
            with open(folder / stdout, "w") as out, open(folder / stderr, "w") as err:
                res = subprocess.run(argv, cwd=folder, env=env, stdout=out, stderr=err, timeout=timeout)
        except subprocess.TimeoutExpired:
            raise HpclabError(f"{what} did not finish within {timeout:.0f} s (folder {folder})",
                              "ask for less work (a smaller problem, fewer iterations)") from None
        garbled = argv[0] == "srun" and res.returncode != 0 and any(
            g in (folder / stderr).read_text(errors="replace") for g in SRUN_GARBLED)
        if not (garbled and attempt == 1):
            return res.returncode
        for name in (stdout, stderr):
            (folder / name).rename(folder / f"{name}.attempt-1")
    return res.returncode
