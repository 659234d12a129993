"""Room mode in a real room (issue 40): the instructor records a notebook, the room's hub opens
on the recording, and a student who opens that notebook in JupyterLab runs it whole without
submitting a job, on the instructor's runs, which say whose they are.

Notebook 03 (placement: 42 jobs in the course's set) rather than 02: recording 02 brings up the
virtual nodes, which the room's tests, run beside others, may not do.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import time

import pytest

from hpclab.classroom import hub, record, recording
from hpclab.classroom.hub_client import HubClient
from hpclab.core import paths

pytestmark = [pytest.mark.cluster, pytest.mark.classroom]

NOTEBOOK = "notebooks/03-placement.ipynb"
STUDENT = "student02"


def _password(lay, user: str) -> str:
    return dict(line.split() for line in lay.passwords.read_text().splitlines()
                if line.strip() and not line.startswith("#"))[user]


def _jobs_of(user: str, since: str) -> list[str]:
    """The names of the Slurm jobs `user` submitted since `since` (sacct's time format)."""
    out = subprocess.run(["sacct", "-X", "-n", "-P", "-u", user, "-S", since, "--format=JobName"],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    return [line for line in out.stdout.splitlines() if line.strip()]


@pytest.fixture
def recorded_room(classroom, monkeypatch):
    """A recording of NOTEBOOK (the quick set) and the room's hub opened on it; the hub goes back
    to its usual settings afterwards."""
    lay = classroom
    folder = lay.root / "recording-of-the-tests"
    shutil.rmtree(folder, ignore_errors=True)
    monkeypatch.setenv("HPCLAB_QUICK", "1")
    report, made = recording.record(folder, [paths.repo() / NOTEBOOK], by="instructor1")
    assert made[NOTEBOOK]["ok"], made[NOTEBOOK]["error"]
    recording.open_room(folder, students=3)
    rec = record.load(lay.record)
    url = hub.start(lay, rec, hub.HubSettings(recording=folder))
    try:
        yield lay, url, folder, made[NOTEBOOK]
    finally:
        hub.start(lay, rec, hub.HubSettings())
        shutil.rmtree(folder, ignore_errors=True)


def test_a_student_opens_a_room_mode_notebook_and_submits_nothing(recorded_room):
    """Does a student's kernel, opened on the notebook as JupyterLab opens it, know its notebook,
    run every code cell without error on the instructor's runs, submit no job, and say whose runs
    they are?"""
    lay, url, folder, made = recorded_room
    assert made["jobs"] > 0
    client = HubClient(url, STUDENT, _password(lay, STUDENT))
    client.login()
    client.start_server()
    since = time.strftime("%Y-%m-%dT%H:%M:%S")
    kernel = client.open_notebook(NOTEBOOK)
    try:
        setup = client.execute("import os\nos.environ['HPCLAB_QUICK'] = '1'   # the set the recording was made with\n"
                               "print(os.environ.get('JPY_SESSION_NAME', ''))", kernel_id=kernel)
        assert setup.stdout.strip().endswith(NOTEBOOK.rsplit("/", 1)[-1]), setup
        cells = [c for c in json.loads((paths.repo() / NOTEBOOK).read_text())["cells"] if c["cell_type"] == "code"]
        said = ""
        for n, cell in enumerate(cells):
            done = client.execute("".join(cell["source"]), kernel_id=kernel, timeout=300)
            assert done.status == "ok" and not done.kernel_died, (n, "".join(cell["source"])[:200], done.error,
                                                                  done.stderr[-2000:])
            said += done.stdout + done.stderr
        assert "room mode: this notebook shows instructor1's runs" in said
        whose = client.execute("from hpclab.runs import recorded\n"
                               "print(sorted({recorded.whose(r.run_id) for r in cache_runs}))", kernel_id=kernel)
        assert whose.stdout.strip().startswith("['recorded by instructor1 on "), whose
    finally:
        client.delete_kernel(kernel)
        client.stop_server()
    assert _jobs_of(STUDENT, since) == []
