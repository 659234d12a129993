"""The one job-step runner (hpclab.jobs.steps.run_step): output to files, a timeout as hpclab's
error, and srun's garbled allocation reply asked once more with the first attempt kept. The
'srun' here is a small script of the test's on PATH that answers as a garbled srun once."""

from __future__ import annotations

import os
import stat

import pytest

from hpclab.core.errors import HpclabError
from hpclab.jobs import steps


def _fake_srun(tmp_path, body: str):
    bindir = tmp_path / "bin"
    bindir.mkdir()
    srun = bindir / "srun"
    srun.write_text("#!/bin/sh\n" + body)
    srun.chmod(srun.stat().st_mode | stat.S_IXUSR)
    return {**os.environ, "PATH": f"{bindir}:{os.environ['PATH']}"}


def test_a_garbled_reply_is_asked_once_more_and_the_first_attempt_kept(tmp_path):
    env = _fake_srun(tmp_path, 'if [ -e tried ]; then echo ran "$@"; exit 0; fi\n'
                               'touch tried; echo "srun: error: Insane message length" >&2; exit 1\n')
    work = tmp_path / "work"
    work.mkdir()
    code = steps.run_step(["srun", "poisson", "--n", "8"], work, env, timeout=30)
    assert code == 0 and (work / "stdout").read_text() == "ran poisson --n 8\n"
    assert "Insane message length" in (work / "stderr.attempt-1").read_text()


def test_a_real_failure_is_not_retried(tmp_path):
    env = _fake_srun(tmp_path, 'echo "srun: error: Unable to allocate resources" >&2; exit 1\n')
    code = steps.run_step(["srun", "x"], tmp_path, env, timeout=30, stdout="a.out", stderr="a.err")
    assert code == 1 and "Unable to allocate" in (tmp_path / "a.err").read_text()
    assert not (tmp_path / "a.err.attempt-1").exists()


def test_a_step_over_its_time_is_hpclabs_error(tmp_path):
    with pytest.raises(HpclabError, match="did not finish within 1 s"):
        steps.run_step(["sleep", "5"], tmp_path, dict(os.environ), timeout=1, what="the sleeper")
