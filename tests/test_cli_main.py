"""The `hpclab` command line as one tool: subcommands with their own options and usage, help by
default, a version, defaults in the help texts, grading under `hpclab grade` (with
`python -m hpclab.grading` as its alias, in the same error format), every invocation the
Makefile, README, notebooks and docs use still reaching its command, and bad input answered in
one line. Nothing here needs the cluster (Slurm's commands, where one could be reached, are the
fake's of tests/fake_slurm/).
"""

from __future__ import annotations

import importlib
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


CLUSTER, RUN, TRACE, COURSE = "hpclab.cli.cluster", "hpclab.cli.run", "hpclab.cli.trace", "hpclab.cli.course"
ROOM, GRADE = "hpclab.cli.classroom", "hpclab.grading.commands"


@pytest.mark.parametrize("argv, function, parsed", [
    # Makefile
    (["cluster", "up"], f"{CLUSTER}:_up", {"nodes": None, "link": None}),
    (["cluster", "down"], f"{CLUSTER}:_down", {}), (["cluster", "status"], f"{CLUSTER}:_status", {}),
    (["course", "run"], f"{COURSE}:_run", {"notebooks": [], "quick": False}),
    (["course", "lab"], f"{COURSE}:_lab", {"port": 8888}),
    (["course", "grade-demo"], f"{COURSE}:_grade_demo", {}),
    (["classroom", "up", "--students", "30", "--instructors", "1"], f"{ROOM}:_up", {"students": 30, "instructors": 1}),
    (["classroom", "down"], f"{ROOM}:_down", {}),
    # README, notebooks, docs
    (["cluster", "up", "--nodes", "2", "--link", "1g"], f"{CLUSTER}:_up", {"nodes": 2, "link": "1g"}),
    (["cluster", "up", "--nodes", "2", "--cpus-per-node", "1"], f"{CLUSTER}:_up", {"nodes": 2, "cpus_per_node": 1}),
    (["cluster", "env"], f"{CLUSTER}:_env", {}),
    (["run", "SPEC.yaml", "--sweep", "omp.num_threads=1,2"], f"{RUN}:_run",
     {"spec": "SPEC.yaml", "sweep": ["omp.num_threads=1,2"], "no_wait": False}),
    (["run", "SPEC.yaml", "--no-wait"], f"{RUN}:_run", {"no_wait": True}),
    (["runs"], f"{RUN}:_runs", {"experiment": None, "last": 0}),
    (["runs", "stream", "--last", "3"], f"{RUN}:_runs", {"experiment": "stream", "last": 3}),
    (["show", "RUN"], f"{RUN}:_show", {"run": "RUN", "spec": False}),
    (["show", "RUN", "--spec"], f"{RUN}:_show", {"spec": True}),
    (["trace", "RUN"], f"{TRACE}:run_trace", {"run": "RUN"}),
    (["trace", "RUN", "--otf2", "DIR"], f"{TRACE}:run_trace", {"otf2": "DIR"}),
    (["trace", "RUN", "--model", "ideal", "--compare", "OTHER"], f"{TRACE}:run_trace",
     {"model": "ideal", "compare": "OTHER"}),
    (["course", "run", "--quick", "00-getting-started"], f"{COURSE}:_run",
     {"quick": True, "notebooks": ["00-getting-started"]}),
    (["classroom", "status"], f"{ROOM}:_status", {}),
    (["classroom", "up", "--spawner", "slurm", "--bind", "10.0.0.5", "--ssl-cert", "c.pem", "--ssl-key", "k.pem"],
     f"{ROOM}:_up", {"spawner": "slurm", "bind": "10.0.0.5"}),
    (["classroom", "remove", "--yes-delete-student-data", "--purge"], f"{ROOM}:_remove",
     {"yes_delete_student_data": True, "purge": True}),
    (["classroom", "release", "lab-transports"], f"{ROOM}:_round_step",
     {"classroom_command": "release", "lab": "lab-transports"}),
    (["classroom", "collect", "lab-transports"], f"{ROOM}:_round_step", {"classroom_command": "collect"}),
    (["classroom", "feedback", "lab-transports"], f"{ROOM}:_round_step", {"classroom_command": "feedback"}),
    (["classroom", "export", "lab-transports"], f"{ROOM}:_round_step", {"classroom_command": "export"}),
    (["classroom", "export"], f"{ROOM}:_round_step", {"classroom_command": "export", "lab": None}),
    # grader/README.md, as `hpclab grade` (and the alias below)
    (["grade", "init", "C", "lab-transports"], f"{GRADE}:run_step", {"step": "init", "labs": ["lab-transports"]}),
    (["grade", "release", "C", "lab-transports"], f"{GRADE}:run_step", {"step": "release", "lab": "lab-transports"}),
    (["grade", "collect", "C", "lab-transports", "DOWNLOADS"], f"{GRADE}:run_step",
     {"step": "collect", "downloads": "DOWNLOADS"}),
    (["grade", "autograde", "C", "lab-transports", "--timeout", "60", "--unconfined"], f"{GRADE}:run_step",
     {"step": "autograde", "timeout": 60, "unconfined": True}),
    (["grade", "feedback", "C", "lab-transports"], f"{GRADE}:run_step", {"step": "feedback"}),
    (["grade", "export", "C", "grades.csv"], f"{GRADE}:run_step", {"step": "export", "csv": "grades.csv"}),
    (["grade", "demo"], f"{GRADE}:run_step", {"step": "demo"}),
])
def test_every_documented_invocation_reaches_its_command(argv, function, parsed):
    """Does every command line the Makefile, README, notebooks and docs give still parse to the
    function its subcommand's module defines for it, with the options read as given (nothing is
    run here)?"""
    args = cli.build_parser().parse_args(argv)
    module, name = function.split(":")
    assert args.func is getattr(importlib.import_module(module), name), (argv, args.func)
    assert {key: getattr(args, key) for key in parsed} == parsed


@pytest.mark.parametrize("argv, words", [
    (["show", "no-such-run"], "no run folder 'no-such-run'"),
    (["trace", "no-such-run"], "no run folder 'no-such-run'"),
    (["run", "{tmp}/missing.yaml"], "spec file {tmp}/missing.yaml not found"),
    (["run", "{tmp}/bogus.yaml"], "unknown field 'bogus_field'"),
    (["run", "{tmp}/huge.yaml"], "more tasks than cores: ntasks=4096"),
], ids=["show", "trace", "missing-spec", "unknown-field", "too-many-tasks"])
def test_a_command_given_bad_input_answers_in_one_line(argv, words, tmp_path, fake_slurm, capsys):
    """Does a command given a run that does not exist or a spec it cannot run answer with exit
    code 2, one line `hpclab: what` naming the bad input and at most one `  what to do:` line,
    and no traceback? (Slurm's commands are the fake's: nothing can reach a cluster.)"""
    (tmp_path / "bogus.yaml").write_text("kernel: program\ncommand: ['true']\nbogus_field: 3\n")
    (tmp_path / "huge.yaml").write_text("kernel: program\ncommand: ['true']\nntasks: 4096\n")
    code = cli.main([a.format(tmp=tmp_path) for a in argv])
    out, err = capsys.readouterr()
    lines = err.splitlines()
    assert code == 2 and out == "" and "Traceback" not in err
    assert lines[0].startswith("hpclab: ") and words.format(tmp=tmp_path) in lines[0], err
    assert len(lines) == 1 or (len(lines) == 2 and lines[1].startswith("  what to do: ")), err
    assert not fake_slurm.calls("sbatch")


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
