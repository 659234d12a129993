"""`make uninstall` (scripts/uninstall.sh) names everything set-up and the cluster put on the
machine for this checkout, and with DRY=1 removes nothing: run for real on a CI machine it would
take the venv the tests run from."""

from __future__ import annotations

import os
import subprocess

from hpclab.core import paths


def test_a_dry_uninstall_names_what_it_would_remove_and_removes_nothing():
    repo = paths.repo()
    before = {p: p.exists() for p in (repo / ".venv", repo / "build", paths.daemon_state_dir())}
    res = subprocess.run(["bash", "scripts/uninstall.sh"], cwd=repo, env={**os.environ, "DRY": "1"},
                         capture_output=True, text=True, timeout=120)
    out = res.stdout + res.stderr
    assert {p: p.exists() for p in before} == before, out
    if os.path.exists("/opt/hpclab/classroom/classroom.json"):   # a room's people's data comes first
        assert res.returncode == 1 and "classroom remove --yes-delete-student-data" in out
        return
    assert res.returncode == 0, out
    assert "would remove the Python environment: .venv" in out and "would remove binaries" in out
    if before[paths.daemon_state_dir()]:
        assert f"would remove this checkout's cluster configuration and munge key: {paths.daemon_state_dir()}" in out
    assert "RUNS=delete" in out and "removed" not in out
