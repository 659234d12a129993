"""The failure path of the kernel output contract (docs/kernel-contract.md), through src/common/.

The real kernels validate, so their `ERROR: <what>` line and exit code 1 never show in a normal
run. src/selftest/report_failure.c is a stand-in kernel built on the same report code whose check
fails on one chosen rank; these tests run it and check the text report, the exit code and the
JSON document. The kernels themselves carry no switch to fail on purpose.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess

import pytest

from hpclab.core import paths

pytestmark = pytest.mark.skipif(not shutil.which("mpicc") or not shutil.which("mpirun"),
                                reason="Open MPI (mpicc, mpirun) is not installed")


@pytest.fixture(scope="module")
def program():
    """build/selftest/report_failure, built with the kernels' flags (make -C src/selftest)."""
    out = subprocess.run(["make", "-s", "-C", str(paths.repo() / "src" / "selftest")],
                         capture_output=True, text=True)
    assert out.returncode == 0, f"make -C src/selftest failed:\n{out.stdout}\n{out.stderr}"
    exe = paths.repo() / "build" / "selftest" / "report_failure"
    assert exe.is_file()
    return exe


def run(program, args, np=None):
    cmd = [str(program), *args]
    if np is not None:
        cmd = ["mpirun", "-np", str(np), "--oversubscribe", *cmd]
    env = {**os.environ, "OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1"}
    return subprocess.run(cmd, capture_output=True, text=True, timeout=60, env=env)


def report_lines(stdout: str) -> tuple[list[str], str]:
    """The key = value lines after the banner and the first line after them."""
    lines = stdout.splitlines()
    block = []
    for line in lines[2:]:
        if " = " not in line:
            return block, line
        block.append(line)
    return block, ""


@pytest.mark.parametrize("np, fail_rank", [(None, 0), (2, 0), (2, 1)],
                         ids=["singleton", "2 ranks, rank 0 fails", "2 ranks, rank 1 fails"])
def test_failed_validation_prints_error_and_exits_1(program, tmp_path, np, fail_rank):
    """When one rank's result is wrong, does rank 0 print the full report with `ERROR: <what>`
    as its validation line (naming the rank when it is not rank 0), does the run exit with code 1,
    and does the JSON report say validation failed with the same message?"""
    out = tmp_path / "report.json"
    p = run(program, ["--fail-rank", str(fail_rank), "--json", str(out)], np=np)
    assert p.returncode == 1, (p.returncode, p.stdout, p.stderr)

    lines = p.stdout.splitlines()
    assert lines[0].startswith("arguments =")
    assert re.fullmatch(r"hpclab report_failure \S+ - .+", lines[1]), lines[1]
    block, validation = report_lines(p.stdout)
    assert len({line.index(" = ") for line in block}) == 1, block
    expected = "sum is 5051, expected 5050" + (f" (rank {fail_rank})" if fail_rank else "")
    assert validation == f"ERROR: {expected}"
    # One verdict for the whole job, printed once, by rank 0.
    assert [line for line in lines if line.startswith("ERROR:")] == [validation]
    assert "Solution validates" not in p.stdout

    doc = json.loads(out.read_text())
    assert doc["validation"] == {"ok": False, "message": expected}
    assert doc["kernel"] == "report_failure" and doc["config"]["fail_rank"] == fail_rank
    assert [e["rank"] for e in doc["placement"]] == list(range(np or 1))


def test_rates_still_follow_a_failed_validation(program):
    """Does a failed run still print the rest of its report after the ERROR line (a student
    needs the numbers to see what went wrong)?"""
    p = run(program, ["--fail-rank", "0"])
    lines = p.stdout.splitlines()
    at = next(i for i, line in enumerate(lines) if line.startswith("ERROR:"))
    assert lines[at + 1:] == ["sum = 5051"]
    assert p.returncode == 1


def test_contract_parser_reads_a_failed_report(program, tmp_path):
    """Does hpclab's shared contract parser (hpclab.kernels.contract) read a failed run's text
    report as not validated, with the kernel's message, its config and one placement row per
    rank, so a failed run is reported rather than misread?"""
    from hpclab.kernels.contract import parse_report_text

    p = run(program, ["--fail-rank", "1"], np=2)
    report = parse_report_text(p.stdout, source="stdout")
    assert report.kernel == "report_failure"
    assert (report.ok, report.message) == (False, "sum is 5051, expected 5050 (rank 1)")
    assert report.config["fail_rank"] == 1
    assert sorted(report.placement["rank"]) == [0, 1]
    # rank 0 prints its own sum (right: rank 1 failed) after the verdict
    assert [text for _, text in report.body] == ["sum = 5050"]
