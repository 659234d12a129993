"""program: any MPI program of yours as an experiment (`kernel: program`, `command: [...]`).

`command:` is the program and its arguments: an executable (a C program built with mpicc, a
binary on PATH) or an mpi4py script run by the Python hpclab runs in (the course's venv, which
has mpi4py). It runs under the same job template, launcher, binding, tracing (`trace: true`
preloads build/lib/libmpitrace.so) and run folder as the C kernels, but writes no output
contract: its results are its trace (`<run>/trace/`, hpclab.trace.load.load_run) and its stdout
and stderr in the run folder. The job adds `result.json`, a record of how the program ended
(`{"kernel": "program", "exit_code": N}`), which marks the run done like a kernel's report.

The words are resolved when the spec is made, so the job finds the same files whatever folder
it starts in: a word with a '/' is a path (relative ones from the current folder), a bare name is
looked up on PATH, and `python`/`python3`, or a first word ending in `.py`, is this Python with
the script after it as a path. Arguments after that are passed as written; the program starts
in its run folder (files it writes land there), so give input files as absolute paths.
Before submission `problems` checks that the executable exists and may be executed and that a
Python script exists and may be read.
"""

from __future__ import annotations

import os
import re
import shutil
import sys
from pathlib import Path
from typing import Literal

from pydantic import field_validator

from hpclab.core.errors import HpclabError
from hpclab.kernels.registry import Kernel, KernelArgs, register

_PYTHON = re.compile(r"^python(\d+(\.\d+)?)?$")


class ProgramArgs(KernelArgs):
    """program: no arguments of its own; the program's arguments are the words of `command:`
    after the program."""

    kernel: Literal["program"] = "program"

    @field_validator("extra_args")
    @classmethod
    def _no_extra(cls, v):
        if v:
            raise ValueError("a program takes its arguments in command: [program, arg, ...], not extra_args")
        return v


def is_python(word: str) -> bool:
    """Is `word` (a name or a path) a Python interpreter (python, python3, python3.11)?"""
    return bool(_PYTHON.match(Path(word).name))


def _path(word: str) -> str:
    # absolute without resolving symlinks: .venv/bin/python is a symlink that must stay one
    return os.path.abspath(os.path.expanduser(word))


def resolve(words: list[str]) -> list[str]:
    """The words of `command:` as the job runs them: the program as an absolute path (a path
    from the current folder, a bare name from PATH, python as sys.executable) and a Python
    script as an absolute path; the other arguments unchanged. A bare name not on PATH is left
    as it is (problems() reports it). Raises ValueError for an empty command or a word that is
    empty or holds a newline or NUL."""
    if not isinstance(words, list) or not words:
        raise ValueError("command must be a non-empty list: [program, arg, ...]")
    for w in words:
        if not isinstance(w, str) or not w or "\n" in w or "\0" in w:
            raise ValueError(f"command words must be non-empty single-line strings, got {w!r}")
    first, rest = words[0], list(words[1:])
    if "/" not in first and is_python(first):
        first = sys.executable  # the course's Python, with mpi4py
    elif first.endswith(".py"):
        first, rest = sys.executable, [first, *rest]
    elif "/" in first:
        first = _path(first)
    else:
        first = shutil.which(first) or first
    if is_python(first) and rest and not rest[0].startswith("-"):
        rest[0] = _path(rest[0])
    return [first, *rest]


def problems(spec) -> list[tuple[str, str]]:
    """What this machine says against spec.command (resolved), as (what, what to do) pairs:
    a program not on PATH, missing, a folder or not executable; a Python script missing or
    unreadable. [] when the program can be started."""
    words = spec.command or []
    if not words:
        return [("kernel: program has no command", "add command: [program, arg, ...]")]
    exe, out = words[0], []
    if "/" not in exe:
        out.append((f"command: program {exe!r} is not on PATH",
                    f"give its path (./{exe} is taken from the folder you run hpclab in), or install it"))
    elif not os.path.exists(exe):
        out.append((f"command: program {exe} does not exist",
                    "build it first (e.g. mpicc -o prog prog.c) or correct the path; relative paths are "
                    "taken from the folder where the spec was made"))
    elif os.path.isdir(exe):
        out.append((f"command: program {exe} is a folder", "give the path of the executable inside it"))
    elif not os.access(exe, os.X_OK):
        out.append((f"command: program {exe} is not executable",
                    f"make it executable (chmod +x {exe}); a Python script runs as command: [python, script.py]"))
    if is_python(exe) and len(words) > 1 and not words[1].startswith("-"):
        script = words[1]
        if not os.path.isfile(script):
            out.append((f"command: Python script {script} does not exist",
                        "correct the path; relative paths are taken from the folder where the spec was made"))
        elif not os.access(script, os.R_OK):
            out.append((f"command: Python script {script} cannot be read", f"chmod a+r {script}"))
    return out


def check_spec(spec) -> None:
    """A program run needs its command. spec: an hpclab.spec.model.Spec. Raises ValueError."""
    if not spec.command:
        raise ValueError("kernel: program needs command: [program, arg, ...] (an executable or a "
                         "Python script, and its arguments)")


def no_table(doc: dict, source: str):
    """A program has no kernel table: its results are its trace and its output."""
    raise HpclabError(f"{source}: a kernel: program run has no kernel table (no output contract)",
                      "read its trace with hpclab.trace.load.load_run(run.path) (or `hpclab trace RUN`) "
                      "and its output in the run folder's stdout and stderr")


KERNEL = register(Kernel(name="program", args=ProgramArgs, table=no_table, check=check_spec,
                         command=resolve, problems=problems))
