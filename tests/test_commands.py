"""hpclab.core.commands: the one runner of short external commands, and the modules that may
still start processes their own way (each for a reason the runner does not cover)."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

from hpclab.core import commands, paths
from hpclab.core.errors import HpclabError

# Modules that start processes without the runner, and why.
OWN_WAY = {
    "hpclab/core/commands.py": "the runner itself",
    "hpclab/cluster/daemons.py": "starts long-running daemons (Popen, pid files)",
    "hpclab/classroom/hub.py": "starts the hub, a long-running daemon",
    "hpclab/classroom/spawn.py": "the spawner awaits a student's server (asyncio)",
    "hpclab/classroom/grading_room.py": "runs nbgrader as a student or the grader with their umask",
    "hpclab/jobs/steps.py": "a job step writes stdout and stderr to files of the run folder",
    "hpclab/grading/sandbox.py": "untrusted code, confined (bubblewrap, limits, kill of the process group)",
    "hpclab/grading/jupyter.py": "a student's kernel and server, confined",
    "hpclab/grading/demo.py": "a process outside the sandbox for the hostile notebooks to look for",
}


def test_a_missing_program_is_named_with_what_we_wanted():
    with pytest.raises(HpclabError) as exc:
        commands.run(["hpclab-no-such-program"], "ask the oracle")
    assert "cannot ask the oracle: hpclab-no-such-program is not installed here" in str(exc.value)


def test_a_command_past_its_time_limit_gives_none():
    assert commands.run(["sleep", "5"], "wait", timeout=0.2) is None


def test_input_cwd_and_the_answer(tmp_path):
    done = commands.run([sys.executable, "-c", "import os, sys; print(os.getcwd(), sys.stdin.read())"],
                        "echo", input="hello", cwd=tmp_path)
    assert done.returncode == 0 and done.stdout.split() == [str(tmp_path), "hello"]


def test_a_log_gets_both_streams_appended_and_the_answer_only_the_code(tmp_path):
    log = tmp_path / "logs" / "step.log"
    for word in ("first", "second"):
        done = commands.run(["bash", "-c", f"echo {word}; echo {word}-err >&2; exit 3"], "log", log=log)
        assert done.returncode == 3 and done.stdout == done.stderr == ""
    assert log.read_text().split() == ["first", "first-err", "second", "second-err"]


def test_output_raises_with_the_programs_last_words():
    with pytest.raises(HpclabError) as exc:
        commands.output(["bash", "-c", "echo no such node >&2; exit 1"], "ask Slurm", "check the node name")
    assert "said: no such node" in str(exc.value) and exc.value.hint == "check the node name"


def test_only_the_listed_modules_start_processes_their_own_way():
    """Does every other module run its commands through hpclab.core.commands?"""
    own = set()
    for path in sorted((paths.repo() / "hpclab").rglob("*.py")):
        text = path.read_text()
        if re.search(r"^\s*import subprocess|create_subprocess_exec|os\.system\(|os\.popen\(", text, re.M):
            own.add(str(path.relative_to(paths.repo())))
    assert own <= set(OWN_WAY), sorted(own - set(OWN_WAY))
    assert all(Path(paths.repo() / p).is_file() for p in OWN_WAY)
