"""Benchmark of the local cluster: `cluster up` when running, a full down/up cycle, and the
turnaround of a trivial job (submit -> COMPLETED seen by the submitter). Goals from the issue:
up <= 15 s, trivial job <= 0.5 s."""

from __future__ import annotations

import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import summary, write_table  # noqa: E402

from hpclab import cluster  # noqa: E402


def turnaround(workdir: Path) -> float:
    script = workdir / "true.sh"
    script.write_text("#!/bin/bash\ntrue\n")
    t0 = time.monotonic()
    jobid = subprocess.run(["sbatch", "--parsable", f"--chdir={workdir}", "--output=/dev/null", str(script)],
                           capture_output=True, text=True, check=True).stdout.strip()
    while True:
        out = subprocess.run(["scontrol", "show", "job", "-o", jobid], capture_output=True, text=True).stdout
        if "JobState=COMPLETED" in out:
            return time.monotonic() - t0
        if any(f"JobState={s}" in out for s in ("FAILED", "CANCELLED", "TIMEOUT")):
            raise RuntimeError(out)
        time.sleep(0.01)


def interactive_turnaround(workdir: Path) -> float:
    """srun of 'true': an interactive allocation, which slurmctld grants while it handles the request."""
    t0 = time.monotonic()
    subprocess.run(["srun", "-n1", f"--chdir={workdir}", "true"], capture_output=True, text=True, check=True)
    return time.monotonic() - t0


def main(repeats: int = 7) -> None:
    cluster.up()
    running = []
    for _ in range(repeats):
        t0 = time.monotonic()
        cluster.up()
        running.append(time.monotonic() - t0)
    cycles = []
    for _ in range(3):
        cluster.down()
        t0 = time.monotonic()
        cluster.up()
        cycles.append(time.monotonic() - t0)
    turn = []
    with tempfile.TemporaryDirectory() as d:
        for i in range(repeats * 2):
            # slurmctld's scheduler runs on a one-second tick: submitting right after the previous job
            # ends would always land at the same phase of it, so spread the submissions over the tick.
            time.sleep((i * 0.37) % 1.0)
            turn.append(turnaround(Path(d)))
        interactive = [interactive_turnaround(Path(d)) for _ in range(repeats * 2)]
    rows = [
        {"measurement": "cluster up (already running)", **summary(running), "goal": "-"},
        {"measurement": "cluster up (from stopped)", **summary(cycles), "goal": "<= 15 s"},
        {"measurement": "trivial batch job turnaround (sbatch)", **summary(turn), "goal": "<= 0.5 s"},
        {"measurement": "trivial interactive job turnaround (srun)", **summary(interactive), "goal": "<= 0.5 s"},
    ]
    path = write_table("cluster", "Local cluster (seconds)", rows,
                       ["sbatch: --parsable of 'true' until scontrol shows COMPLETED, polled every 10 ms; submissions spread "
                        "over slurmctld's one-second scheduling tick",
                        "Why batch jobs wait: Slurm 22.05 never allocates a batch job while handling its submission; it "
                        "queues it for the scheduler, which slurmctld's background thread runs at the next whole "
                        "second (slurmctld.log: every 'sched: Allocate' at x.99 s). No slurm.conf setting moves that "
                        "tick, so sbatch waits 0-1 s (median about 0.5 s) plus the job's own ~40 ms; "
                        "batch_sched_delay=0 and sched_min_interval=0 already remove every delay on top of it.",
                        "srun: allocated while slurmctld handles the request, then the step runs: the whole "
                        "command, including srun's own start-up"])
    print(path.read_text())


if __name__ == "__main__":
    main()
