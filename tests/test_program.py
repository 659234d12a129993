"""Any program as an experiment (kernel: program, command: [...], hpclab/kernels/program.py).

A C program built with mpicc here and an mpi4py script run through the local Slurm cluster,
traced with the course's tracer, and analysed by what notebook 05 calls (hpclab.analysis.imbalance,
hpclab.trace.waitstates and matrix, hpclab.plots.trace): the message counts, sizes and ranks
each program sends are known exactly, so the analysis must find exactly them. The command is
resolved when the spec is made and checked before anything is submitted; a program that fails
is reported as such and its folder kept, next to the earlier runs.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from hpclab.analysis import imbalance as imb
from hpclab.core import paths
from hpclab.core.errors import HpclabError
from hpclab.jobs import experiment, templates
from hpclab.kernels import registry
from hpclab.plots import trace as trace_plots
from hpclab.runs import folder as runs
from hpclab.site import ompi
from hpclab.site.profile import Partition, Site, load_site
from hpclab.spec import checks as spec_checks
from hpclab.spec.model import make_spec
from hpclab.trace import matrix, waitstates

# What the test programs send: rank 0 -> rank 1, COUNT messages of SIZE bytes (tag 7), then one
# reply rank 1 -> rank 0 of REPLY bytes (tag 8), then a barrier.
COUNT, SIZE, REPLY = 6, 1200, 16

C_PROGRAM = r"""
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    int count = atoi(argv[1]), bytes = atoi(argv[2]), reply = atoi(argv[3]);
    char *buf = calloc(bytes > reply ? bytes : reply, 1);
    for (int i = 0; i < count; i++) {
        if (rank == 0) MPI_Send(buf, bytes, MPI_BYTE, 1, 7, MPI_COMM_WORLD);
        if (rank == 1) MPI_Recv(buf, bytes, MPI_BYTE, 0, 7, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    }
    if (rank == 1) MPI_Send(buf, reply, MPI_BYTE, 0, 8, MPI_COMM_WORLD);
    if (rank == 0) MPI_Recv(buf, reply, MPI_BYTE, 1, 8, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    MPI_Barrier(MPI_COMM_WORLD);
    printf("rank %d of %d: %s\n", rank, size, argv[4]);
    free(buf);
    MPI_Finalize();
    return 0;
}
"""

PY_PROGRAM = """
import sys
import numpy as np
from mpi4py import MPI

comm = MPI.COMM_WORLD
count, size = int(sys.argv[1]), int(sys.argv[2])
buf = np.zeros(size, dtype=np.uint8)
for _ in range(count):
    if comm.rank == 0:
        comm.Send(buf, dest=1, tag=7)
    elif comm.rank == 1:
        comm.Recv(buf, source=0, tag=7)
# one pickled message back (mpi4py's lower-case recv: traced because the job turns off mprobe)
if comm.rank == 1:
    comm.send({"got": count}, dest=0, tag=8)
elif comm.rank == 0:
    print("reply", comm.recv(source=1, tag=8))
comm.Barrier()
print(f"rank {comm.rank} of {comm.size}: {sys.argv[3]}")
"""


def _write(path: Path, text: str, mode: int = 0o644) -> Path:
    path.write_text(textwrap.dedent(text).lstrip())
    path.chmod(mode)
    return path


# --- the spec: resolution and checks (no cluster) -------------------------------------------------


def test_command_paths_are_made_absolute_when_the_spec_is_made(tmp_path, monkeypatch):
    """Does a relative program path become absolute (from the current folder), a bare name the
    file PATH finds, `python` this Python with its script absolute, and stay so when the spec is
    made again (spec.json read back)?"""
    monkeypatch.chdir(tmp_path)
    spec = make_spec(kernel="program", command=["./bin/prog", "--n", "3", "rel/data"], ntasks=2)
    assert spec.command == [str(tmp_path / "bin/prog"), "--n", "3", "rel/data"]
    assert make_spec(kernel="program", command=["sh", "-c", "true"]).command == [shutil.which("sh"), "-c", "true"]
    py = make_spec(kernel="program", command=["python", "ring.py", "4"]).command
    assert py == [sys.executable, str(tmp_path / "ring.py"), "4"]
    assert make_spec(kernel="program", command=["ring.py"]).command == py[:2]
    again = make_spec(json.loads(json.dumps(make_spec(kernel="program", command=["python", "ring.py"]).to_dict())))
    assert again.command == py[:2]


@pytest.mark.parametrize("fields, words", [
    ({"kernel": "program"}, ["kernel: program needs command"]),
    ({"kernel": "program", "command": []}, ["command:", "non-empty"]),
    ({"kernel": "program", "command": ["prog", "a\nb"]}, ["command:", "single-line"]),
    ({"kernel": "program", "command": ["true"], "args": {"extra_args": ["-v"]}}, ["args.extra_args", "command:"]),
    ({"kernel": "stream", "command": ["true"]}, ["command:", "kernel stream runs its own binary", "program"]),
])
def test_bad_commands_are_rejected_with_the_field(fields, words):
    """Is a program spec without a command, with an empty one or a multi-line word, and a
    command given to a C kernel, rejected naming the field?"""
    with pytest.raises(HpclabError) as exc:
        make_spec(fields)
    for w in words:
        assert w in exc.value.what


SITE = Site(name="testsite", description="", partitions=(Partition("work", 1, 4, 1, "01:00:00"),),
            default_partition="work", launcher="srun")


def _problems(command):
    facts = spec_checks.Facts(partition=SITE.partitions[0], components={}, params=frozenset(),
                              numa_nodes=frozenset({0}), trace_lib=True)
    spec = make_spec(kernel="program", command=command, ntasks=2)
    with pytest.raises(HpclabError) as exc:
        spec_checks.check(spec, SITE, facts)
    return exc.value


def test_a_missing_or_unusable_program_is_a_site_problem(tmp_path, monkeypatch):
    """Is each way a command cannot start (missing file, not executable, a folder, a name not on
    PATH, a missing Python script) one clear problem with what to do, and a usable one none?"""
    monkeypatch.chdir(tmp_path)
    _write(tmp_path / "data.txt", "not a program\n")
    _write(tmp_path / "ok.sh", "#!/bin/sh\ntrue\n", 0o755)
    (tmp_path / "dir").mkdir()
    where = str(tmp_path)
    cases = {("./missing",): ([where + "/missing", "does not exist"], "build it first"),
             ("./data.txt",): ([where + "/data.txt", "is not executable"], "chmod +x"),
             ("./dir",): ([where + "/dir", "is a folder"], "executable inside"),
             ("no-such-program-hpclab",): (["'no-such-program-hpclab' is not on PATH"], "give its path"),
             ("python", "gone.py"): ([f"Python script {where}/gone.py does not exist"], "correct the path")}
    for command, (words, hint) in cases.items():
        err = _problems(list(command))
        assert all(w in err.what for w in words) and hint in err.hint, err
    facts = spec_checks.Facts(partition=SITE.partitions[0], components={}, params=frozenset(),
                              numa_nodes=frozenset({0}), trace_lib=True)
    for command in (["./ok.sh"], ["python", "data.txt"], ["sh", "-c", "true"]):
        spec_checks.check(make_spec(kernel="program", command=command, ntasks=2), SITE, facts)


def test_program_job_runs_the_command_under_the_tracer_without_json(tmp_path):
    """Does the job script launch the command's words (quoted, absolute) where a kernel's binary
    goes, with the tracer preloaded, no --json, and record how the program ended in result.json?"""
    spec = make_spec(kernel="program", command=["/opt/my prog", "--label", "a b"], ntasks=2, trace=True)
    text = templates.render(spec, load_site("local"), Path("/r/program/1"))
    launch = text[text.index("# run"):text.index("status=$?")].rstrip()
    assert "LD_PRELOAD=" in launch and "libmpitrace.so" in launch
    assert launch.endswith("'/opt/my prog' --label 'a b'")
    assert "--json" not in text
    assert '"exit_code": %d' in text and "result.json" in text
    assert "export MPI4PY_RC_RECV_MPROBE=false" in text
    assert subprocess.run(["bash", "-n"], input=text, text=True).returncode == 0
    assert "MPI4PY_RC_RECV_MPROBE" not in templates.render(
        make_spec(kernel="program", command=["/bin/true"]), load_site("local"), Path("/r/program/2"))


def test_program_is_a_kernel_without_source_binary_or_contract():
    """Is program one registered kernel whose results are not a parsed table: no src/ folder, no
    build/bin binary, no output contract, and a clear error (naming the trace) for its table?"""
    unit = registry.get("program")
    assert not unit.contract and unit.source == "" and unit.binary == ""
    assert (paths.templates_dir() / unit.template).is_file()
    assert all(k.contract for k in registry.kernels() if k.name != "program")
    with pytest.raises(HpclabError, match="no kernel table") as exc:
        unit.table({}, "result.json")
    assert "load_run" in exc.value.hint


# --- on the cluster --------------------------------------------------------------------------------


@pytest.fixture
def runs_root(tmp_path, monkeypatch, cluster):
    root = tmp_path / "runs"
    monkeypatch.setenv("HPCLAB_RUNS", str(root))
    monkeypatch.chdir(tmp_path)
    if not (paths.lib_dir() / "libmpitrace.so").is_file():
        pytest.skip("build/lib/libmpitrace.so not built (make -C src)")
    return root


def _analyse_like_notebook_05(run, label):
    """What notebook 05 does with traced runs, on one run: its split, the table and summary,
    the median run, wait states per call site, message matrices and the timelines."""
    eager = ompi.eager_limit()
    analysed = imb.analyse([run], eager=eager)
    table = imb.split_table(analysed)
    summary = imb.summary(table)
    first = imb.median_runs(analysed)[label]
    waits = waitstates.by_callsite(waitstates.wait_states(first.trace, eager_limit=eager))
    mm = matrix.message_matrix(first.trace)
    per_host = matrix.aggregate(mm, first.trace.hosts).frame("count")
    figures = [trace_plots.timeline_figure(first.trace, title="measured"),
               trace_plots.timeline_figure(first.ideal, title="ideal")]
    return first, table, summary, waits, mm, per_host, figures


def _check_exact(run, label):
    first, table, summary, waits, mm, per_host, figures = _analyse_like_notebook_05(run, label)
    assert list(table["ranks"]) == [2] and list(summary.index) == [label]
    s = first.split
    parts = s.T_comp + s.T_transfer + s.T_load + s.T_depend + s.T_rest
    assert parts == pytest.approx(s.T_real, abs=1)  # ns: the five parts add up to the run
    assert sorted(first.trace.hosts) == [0, 1]
    count, volume = mm.frame("count"), mm.frame("volume")
    assert count.loc[0, 1] == COUNT and volume.loc[0, 1] == COUNT * SIZE
    assert count.loc[1, 0] == 1 and count.loc[0, 0] == 0 and count.loc[1, 1] == 0
    assert int(per_host.to_numpy().sum()) == COUNT + 1
    sends = first.trace.events[first.trace.events["call"].isin(["MPI_Send", "MPI_Isend"])]
    assert sorted(sends.groupby("rank").size().items()) == [(0, COUNT), (1, 1)]
    assert set(sends.loc[sends["rank"] == 0, "bytes"]) == {SIZE}
    assert set(waits.reset_index()["callsite"]) <= {"MPI_Recv", "MPI_Barrier", "MPI_Send", "MPI_Finalize"}
    assert all(f is not None for f in figures)
    return first, volume


@pytest.mark.cluster
def test_traced_c_program_is_analysed_like_a_kernel(runs_root, tmp_path):
    """Does a C program built here with mpicc run as `kernel: program` on 2 traced ranks, keep
    its output and a hash of its binary in the run folder, and does notebook 05's analysis find
    exactly the messages it sends (6 x 1200 B from rank 0 to 1, one of 16 B back)?"""
    if not shutil.which("mpicc"):
        pytest.skip("mpicc not installed")
    _write(tmp_path / "ring.c", C_PROGRAM)
    subprocess.run(["mpicc", "-O1", "-o", "ring", "ring.c"], cwd=tmp_path, check=True)
    spec = make_spec(kernel="program", command=["./ring", str(COUNT), str(SIZE), str(REPLY), "hello world"],
                     ntasks=2, trace=True, label="c-ring", time="00:02:00")
    (run,) = experiment.run(spec, progress=False, timeout=300)
    assert run.state == "completed" and run.result() == {"kernel": "program", "exit_code": 0}
    out = run.folder.stdout.read_text()
    assert "rank 0 of 2: hello world" in out and "rank 1 of 2: hello world" in out
    digest = hashlib.sha256((tmp_path / "ring").read_bytes()).hexdigest()
    assert f"{digest}  {tmp_path / 'ring'}" in (run.path / "provenance/program.txt").read_text()
    assert (run.path / "provenance/binding.txt").read_text().count("cpu-bind") >= 2
    _check_exact(run, "c-ring")
    with pytest.raises(HpclabError, match="no kernel table"):
        run.table()


@pytest.mark.cluster
def test_traced_mpi4py_program_is_analysed_like_a_kernel(runs_root, tmp_path):
    """Does an mpi4py script run by the venv's Python as `kernel: program` on 2 traced ranks,
    and does notebook 05's analysis find exactly its messages, the pickled reply included?"""
    pytest.importorskip("mpi4py")
    _write(tmp_path / "ring.py", PY_PROGRAM)
    spec = make_spec(kernel="program", command=["python", "ring.py", str(COUNT), str(SIZE), "from python"],
                     ntasks=2, trace=True, label="py-ring", time="00:02:00")
    (run,) = experiment.run(spec, progress=False, timeout=300)
    assert run.state == "completed"
    out = run.folder.stdout.read_text()
    assert f"reply {{'got': {COUNT}}}" in out and "rank 1 of 2: from python" in out
    first, volume = _check_exact(run, "py-ring")
    assert volume.loc[1, 0] > 0  # the pickled dict: its size is pickle's, not ours
    assert first.trace.meta["calls_recorded"]["MPI_Recv"] == COUNT + 1


@pytest.mark.cluster
def test_missing_or_non_executable_program_submits_nothing(runs_root, tmp_path):
    """Do a missing executable and a file that is not executable give an HpclabError (what, and
    what to do) before any job is submitted: no run folder appears?"""
    _write(tmp_path / "notes.txt", "just text\n")
    for command, what in ((["./no-such-program"], "does not exist"), (["./notes.txt"], "is not executable")):
        with pytest.raises(HpclabError) as exc:
            experiment.run(make_spec(kernel="program", command=command, ntasks=1), progress=False, timeout=60)
        assert what in exc.value.what and str(tmp_path) in exc.value.what and exc.value.hint
    assert runs.run_folders(runs_root) == []


@pytest.mark.cluster
def test_program_exiting_3_is_a_failed_run_naming_the_exit_code(runs_root, tmp_path):
    """Is a program that exits 3 a failed run whose error names the program, the exit code and
    its stderr's last lines, with its folder kept marked failed next to the earlier run?"""
    script = _write(tmp_path / "step.sh", '#!/bin/sh\necho "step: input deck $1 is missing" >&2\nexit "$1"\n', 0o755)
    (good,) = experiment.run(make_spec(kernel="program", command=["./step.sh", "0"], ntasks=1),
                             progress=False, timeout=300)
    assert good.state == "completed"
    with pytest.raises(HpclabError) as exc:
        experiment.run(make_spec(kernel="program", command=["./step.sh", "3"], ntasks=1),
                       progress=False, timeout=300)
    text = str(exc.value)
    assert f"the program exited with code 3: {script} 3" in text
    assert "exit code 3" in text and "step: input deck 3 is missing" in text
    folders = runs.run_folders(runs_root)
    assert [f.status()["state"] for f in folders] == ["completed", "failed"]
    assert folders[0].path == good.path and json.loads(folders[1].result_json.read_text())["exit_code"] == 3
    assert {e["state"] for e in runs.index(runs_root)} == {"completed", "failed"}
