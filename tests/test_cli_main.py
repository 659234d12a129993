"""The `hpclab` command line as one tool: subcommands with their own options and usage, help by
default, a version, defaults in the help texts, grading under `hpclab grade` (with
`python -m hpclab.grading` as its alias, in the same error format), and every invocation the
Makefile, README, notebooks and docs use still accepted. Nothing here needs the cluster.
"""

from __future__ import annotations

import subprocess
import sys
from importlib import metadata

import pytest

from hpclab.cli import main as cli
from hpclab.runs.folder import RunFolder


def hpclab(*args: str, module: str = "hpclab.cli.main") -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", module, *args], capture_output=True, text=True, timeout=120)


def test_bare_hpclab_prints_help_and_succeeds():
    """Does `hpclab` alone print the help with every command group, and exit 0?"""
    r = hpclab()
    assert r.returncode == 0 and r.stderr == ""
    assert r.stdout.startswith("usage: hpclab")
    for group in ("cluster", "run", "runs", "show", "trace", "course", "grade", "classroom"):
        assert f"\n    {group}" in r.stdout, group


def test_version_is_the_packages():
    """Does `hpclab --version` print the installed package's version?"""
    r = hpclab("--version")
    assert r.returncode == 0 and r.stdout.strip() == f"hpclab {metadata.version('hpclab')}"


@pytest.mark.parametrize("argv, usage", [
    (["runs", "--bogus"], "usage: hpclab runs "),
    (["show", "x", "--bogus"], "usage: hpclab show "),
    (["cluster", "status", "--nodes", "2"], "usage: hpclab cluster status "),
    (["classroom", "down", "--students", "3"], "usage: hpclab classroom down "),
    (["grade", "export", "course", "a.csv", "--bogus"], "usage: hpclab grade export "),
])
def test_a_bad_option_prints_the_usage_of_the_command_it_was_given_to(argv, usage):
    """Is an unknown option answered with the usage of the (sub)command it was given to, not
    the top-level usage, and exit code 2?"""
    r = hpclab(*argv)
    assert r.returncode == 2
    assert r.stderr.startswith(usage), r.stderr
    assert "unrecognized arguments" in r.stderr and "Traceback" not in r.stderr


def test_cluster_down_takes_no_up_options_and_touches_nothing(monkeypatch, capsys):
    """Is `cluster down --nodes 2` refused by down's own parser before any daemon is touched?"""
    from hpclab.cluster import local, vnodes

    def must_not_run(*a, **k):
        raise AssertionError("the cluster was touched")

    for module in (local, vnodes):
        monkeypatch.setattr(module, "down", must_not_run)
    assert cli.main(["cluster", "down", "--nodes", "2"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("usage: hpclab cluster down [-h]") and "--nodes 2" in err


@pytest.mark.parametrize("argv, shown", [
    (["classroom", "up"], ["--students STUDENTS", "(default: 30)", "(default: 8000)", "(default: local)"]),
    (["show", "x"], ["(default: 15)"]),
    (["course", "lab"], ["(default: 8888)"]),
    (["runs"], ["(default: 0)"]),
])
def test_help_shows_the_defaults(argv, shown):
    """Does each command's help give the default of every option that has one?"""
    r = hpclab(*argv[:-1] if argv[-1] == "x" else argv, "--help")
    assert r.returncode == 0
    text = " ".join(r.stdout.split())   # argparse wraps lines
    for words in shown:
        assert words in text, (argv, words)
    assert "(default: None)" not in text and "(default: False)" not in text


@pytest.mark.parametrize("argv", [
    # Makefile
    ["cluster", "up"], ["cluster", "down"], ["cluster", "status"], ["course", "run"], ["course", "lab"],
    ["course", "grade-demo"], ["classroom", "up", "--students", "30", "--instructors", "1"], ["classroom", "down"],
    # README, notebooks, docs
    ["cluster", "up", "--nodes", "2", "--link", "1g"], ["cluster", "up", "--nodes", "2", "--cpus-per-node", "1"],
    ["cluster", "env"], ["run", "SPEC.yaml", "--sweep", "omp.num_threads=1,2"], ["run", "SPEC.yaml", "--no-wait"],
    ["runs"], ["runs", "stream", "--last", "3"], ["show", "RUN"], ["show", "RUN", "--spec"], ["trace", "RUN"],
    ["trace", "RUN", "--otf2", "DIR"], ["trace", "RUN", "--model", "ideal", "--compare", "OTHER"],
    ["course", "run", "--quick", "00-getting-started"], ["classroom", "status"],
    ["classroom", "up", "--spawner", "slurm", "--bind", "10.0.0.5", "--ssl-cert", "c.pem", "--ssl-key", "k.pem"],
    ["classroom", "remove", "--yes-delete-student-data", "--purge"],
    ["classroom", "release", "lab-transports"], ["classroom", "collect", "lab-transports"],
    ["classroom", "feedback", "lab-transports"], ["classroom", "export", "lab-transports"], ["classroom", "export"],
    # grader/README.md, as `hpclab grade` (and the alias below)
    ["grade", "init", "C", "lab-transports"], ["grade", "release", "C", "lab-transports"],
    ["grade", "collect", "C", "lab-transports", "DOWNLOADS"],
    ["grade", "autograde", "C", "lab-transports", "--timeout", "60", "--unconfined"],
    ["grade", "feedback", "C", "lab-transports"], ["grade", "export", "C", "grades.csv"], ["grade", "demo"],
])
def test_every_documented_invocation_parses(argv):
    """Does every command line the Makefile, README, notebooks and docs give still parse to a
    command (nothing run here)?"""
    args = cli.build_parser().parse_args(argv)
    assert callable(args.func)


def test_grading_alias_and_hpclab_grade_say_the_same_in_the_same_format(tmp_path):
    """Do `hpclab grade release` and `python -m hpclab.grading release` on a folder that is no
    course answer with the same two lines, `hpclab: what` and `  what to do: ...`, exit 2?"""
    a = hpclab("grade", "release", str(tmp_path / "nope"), "lab-transports")
    b = hpclab("release", str(tmp_path / "nope"), "lab-transports", module="hpclab.grading")
    assert a.returncode == b.returncode == 2
    assert a.stderr == b.stderr
    lines = a.stderr.splitlines()
    assert len(lines) == 2 and lines[0].startswith("hpclab: ") and "not a course folder" in lines[0]
    assert lines[1].startswith("  what to do: ")


def test_show_prints_the_spec_only_when_asked(tmp_path, monkeypatch, capsys):
    """Does `hpclab show RUN` give status and files without the spec, and `--spec` add it?"""
    monkeypatch.setenv("HPCLAB_RUNS", str(tmp_path))
    run = RunFolder.create("cli-show", {"kernel": "stream", "ntasks": 1, "args": {"size": 1000}},
                           job_script="#!/bin/sh\n", root=tmp_path)
    assert cli.main(["show", str(run.path)]) == 0
    plain = capsys.readouterr().out
    assert plain.startswith(f"run       cli-show/{run.run_id}") and "files     " in plain
    assert "spec" not in plain.split() and '"kernel"' not in plain
    assert cli.main(["show", str(run.path), "--spec"]) == 0
    full = capsys.readouterr().out
    assert full.startswith(plain.splitlines()[0]) and '"kernel": "stream"' in full
