"""`hpclab run SPEC.yaml` end to end on the local cluster, then `hpclab runs` and `hpclab show`.

The command line is run as a student runs it (the installed `hpclab` script, a fresh process), with
HPCLAB_RUNS pointing at a temporary folder so the test sees only its own run.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from hpclab.core import paths

pytestmark = pytest.mark.cluster

TINY = """\
# One STREAM rank on small arrays: seconds on any machine.
kernel: stream
experiment: cli-e2e
label: tiny
ntasks: 1
args: {size: 20000, reps: 3}
time: 2
"""


def hpclab(*args: str, env: dict, timeout: float = 300) -> subprocess.CompletedProcess:
    script = Path(sys.executable).with_name("hpclab")
    cmd = [str(script)] if script.is_file() else [sys.executable, "-m", "hpclab.cli.main"]
    return subprocess.run([*cmd, *args], capture_output=True, text=True, timeout=timeout, env=env)


def test_run_spec_file_then_list_and_show_the_completed_run(cluster, tmp_path):
    """Does `hpclab run tiny.yaml` submit the spec, wait for the job and print its run, and do
    `hpclab runs` and `hpclab show` then find that run folder completed, with its job script,
    spec and a validated kernel report?"""
    if not (paths.bin_dir() / "stream").is_file():
        pytest.skip("build/bin/stream not built (make -C src)")
    root = tmp_path / "runs"
    env = {**os.environ, **cluster, "HPCLAB_RUNS": str(root)}
    spec = tmp_path / "tiny.yaml"
    spec.write_text(TINY)

    p = hpclab("run", str(spec), "--quiet", "--timeout", "240", env=env)
    assert p.returncode == 0, p.stdout + p.stderr
    assert "Traceback" not in p.stderr
    (line,) = [ln for ln in p.stdout.splitlines() if ln.startswith("cli-e2e/")]
    m = re.fullmatch(r"cli-e2e/(\S+)\s+job (\d+)\s+completed\s+(\S+)", line)
    assert m, line
    run_id, job_id, folder = m.group(1), m.group(2), Path(m.group(3))
    assert folder == root / "cli-e2e" / run_id and folder.is_dir()

    p = hpclab("runs", "cli-e2e", env=env)
    assert p.returncode == 0, p.stderr
    (listed,) = [ln for ln in p.stdout.splitlines() if ln.startswith(f"cli-e2e/{run_id}")]
    assert listed.split()[1:] == [job_id, "completed", "tiny"]

    p = hpclab("show", run_id, "--spec", env=env)
    assert p.returncode == 0, p.stderr
    shown = dict(re.findall(r"^(\w+) +(.+)$", p.stdout, flags=re.M))
    assert shown["run"] == f"cli-e2e/{run_id}" and Path(shown["folder"]) == folder
    assert shown["state"] == "completed" and shown["job_id"] == job_id
    files = set(shown["files"].split(", "))
    assert {"job.sh", "spec.json", "stdout", "stderr", "status.json"} <= files
    assert '"kernel": "stream"' in p.stdout and '"size": 20000' in p.stdout

    # The folder holds what the show command described: the script that ran and its output.
    assert "#SBATCH" in (folder / "job.sh").read_text()
    assert json.loads((folder / "spec.json").read_text())["args"]["size"] == 20000
    assert "Solution validates" in (folder / "stdout").read_text().splitlines()
