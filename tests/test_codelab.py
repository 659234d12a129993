"""Code labs (issue 37): students' C files built and run in the grader's sandbox under every
installed MPI library, and feedback that says why.

The fast tests check the pieces without MPI runs: the release of a lab's file, the diagnosis of
a hung run from its ranks' stacks, the words of a failed run, the report's record in a
submission, the registry. The slow ones build and run for real: the reference solutions pass
under every installed library, every seeded mistake (tests/data/codelabs/<lab>/*.c, each naming
the feedback it must get) fails with a message naming it, a hung run names where each rank was,
the measured sizes at which the deadlock hangs still hold, and a hostile program finds nothing
to reach from the sandbox.
"""

from __future__ import annotations

import json
import os
import re
import shutil
from pathlib import Path

import pytest

from hpclab.core import paths
from hpclab.core.errors import HpclabError
from hpclab.course import codelab as model
from hpclab.course import lessons
from hpclab.grading import codelab, sandbox

MISTAKES = paths.repo() / "tests" / "data" / "codelabs"
CODE_LABS = ("code-deadlock", "code-halo", "code-cartesian", "code-datatype", "code-pingpong")


def _mistakes():
    return sorted(MISTAKES.glob("*/*.c"))


def _expected(path: Path) -> tuple[str, str]:
    """(what the mistake is, the regular expression its feedback must match), from its comment."""
    text = path.read_text()
    what = re.search(r"mistake: (.+?)\n\s*feedback:", text, re.S).group(1)
    feedback = re.search(r"feedback: (.+?)\s*\*/", text, re.S).group(1).strip()
    return " ".join(what.split()), feedback


# --- without MPI runs ----------------------------------------------------------------------------

def test_the_code_labs_are_lessons_that_go_with_notebooks():
    """Does the registry know the code labs, each with its folder, its notebook, the files
    the student edits and notebooks it goes with that exist, in the course's order?"""
    assert set(CODE_LABS) <= set(lessons.code_labs())
    for lab in CODE_LABS:
        lesson = lessons.lab(lab)
        assert lesson.code.lab == lab and not lesson.notebooks and lesson.goes_with
        assert all((paths.repo() / "notebooks" / nb).is_file() for nb in lesson.goes_with)
        folder = paths.repo() / "labs" / lab
        assert (folder / f"{lab}.ipynb").is_file()
        assert all((folder / f).is_file() for f in lesson.code.files)
        assert lesson.code.minutes > 0
    order = lessons.labs()
    assert order.index("code-deadlock") < order.index("lab-placement") < order.index("code-halo")


def test_a_release_removes_the_solution_and_keeps_the_starter():
    """Does the student's copy of a lab's file lose the solution and gain the starter code, and
    does the reference keep the solution with the starter left a comment?"""
    text = ("int f(void)\n{\n    /* BEGIN SOLUTION */\n    return 1;\n    /* END SOLUTION */\n"
            "    /* BEGIN STARTER\n    return 0;\n    END STARTER */\n}\n")
    assert model.released(text) == "int f(void)\n{\n    return 0;\n}\n"
    assert "return 1;" in model.reference_text(text) and "BEGIN SOLUTION" not in model.reference_text(text)
    assert "/* BEGIN STARTER" in model.reference_text(text)
    for bad in ("/* BEGIN SOLUTION */\nx\n", "x\n/* END SOLUTION */\n",
                "/* BEGIN SOLUTION */\n/* BEGIN STARTER\nEND STARTER */\n/* END SOLUTION */\n"):
        with pytest.raises(HpclabError):
            model.released(bad)


def test_every_lab_file_has_a_solution_and_its_release_has_none():
    """Does each code lab's file hold a marked solution, and its released copy none of it?"""
    for lab in CODE_LABS:
        for name, text in codelab.starter_files(lab).items():
            source = (paths.repo() / "labs" / lab / name).read_text()
            assert model.has_markers(source), name
            assert "BEGIN SOLUTION" not in text and "STARTER" not in text, name


def test_a_check_says_what_was_measured_expected_and_the_tolerance():
    """Does a failed check's message carry the measurement, the expectation, the tolerance and why?"""
    c = model.Check("p", "rank 1's upper neighbour", False, "rank 3", "rank 2", "exact", "a wrong neighbour")
    assert c.message() == ("rank 1's upper neighbour: FAILED (measured rank 3; expected rank 2; tolerance exact). "
                           "a wrong neighbour")
    assert model.Check.from_dict(c.as_dict()) == c


def _stack(fn, args, values, line=7, file="swap.c"):
    return {"frames": [], "call": {"function": fn, "file": file, "line": line, "caller": "swap",
                                   "text": f"{fn}({', '.join(args)})", "args": args, "values": values}}


SEND = ["mine", "count", "MPI_DOUBLE", "partner", "0", "comm"]
RECV = ["theirs", "count", "MPI_DOUBLE", "partner", "0", "comm", "MPI_STATUS_IGNORE"]
SENDRECV = ["mine", "count", "MPI_DOUBLE", "partner", "1", "theirs", "count", "MPI_DOUBLE", "partner", "2", "comm",
            "MPI_STATUS_IGNORE"]


@pytest.mark.parametrize("stacks,words", [
    ({0: _stack("MPI_Send", SEND, [None, 8, None, 1, 0, None]), 1: _stack("MPI_Send", SEND, [None, 8, None, 0, 0, None])},
     "both ranks send first"),
    ({0: _stack("MPI_Ssend", SEND, [None, 8, None, 1, 0, None]), 1: _stack("MPI_Ssend", SEND, [None, 8, None, 0, 0, None])},
     "MPI_Ssend returns only once"),
    ({0: _stack("MPI_Recv", RECV, [None, 8, None, 1, 0, None, None]), 1: _stack("MPI_Recv", RECV, [None, 8, None, 0, 0, None, None])},
     "both ranks receive first"),
    ({0: _stack("MPI_Sendrecv", SENDRECV, [None, 8, None, 1, 1, None, 8, None, 1, 2, None, None]),
      1: _stack("MPI_Sendrecv", SENDRECV, [None, 8, None, 0, 1, None, 8, None, 0, 2, None, None])},
     "waits for tag 2 from rank 1, while rank 1 sends to it with tag 1: the tags do not match"),
    ({0: _stack("MPI_Recv", RECV, [None, 8, None, 0, 0, None, None]), 1: _stack("MPI_Recv", RECV, [None, 8, None, 0, 0, None, None])},
     "receive from itself"),
    ({0: _stack("MPI_Recv", RECV, [None, 8, None, 5, 0, None, None]), 1: _stack("MPI_Barrier", ["comm"], [None])},
     "which does not exist"),
    ({0: _stack("MPI_Waitall", ["8", "req", "MPI_STATUSES_IGNORE"], [8, None, None]),
      1: _stack("MPI_Allreduce", ["a", "b", "1", "MPI_DOUBLE", "MPI_MAX", "c"], [None] * 6)},
     "waits in MPI_Waitall at swap.c:7 in swap\\(\\) for a request that never completes"),
    ({0: {"frames": [{"function": "spin", "file": "swap.c", "line": 3}], "call": None},
      1: {"frames": [{"function": "spin", "file": "swap.c", "line": 3}], "call": None}},
     "no rank was in an MPI call: the program loops"),
])
def test_a_hung_runs_stacks_name_the_mistake(stacks, words):
    """From each hung rank's MPI call and its arguments' values, does the diagnosis name the
    mistake (a deadlock of sends or of receives, tags that do not match, a wrong partner, a wait
    that never completes, an endless loop) and say where each rank was?"""
    text = codelab.diagnose(stacks, len(stacks), 5.0)
    assert re.search(words, text), text
    assert text.startswith("hung: stopped after 5 s. rank 0: ")
    if stacks[0]["call"]:
        assert "swap.c:7 in swap()" in text


def test_a_failed_runs_words_name_the_error_the_call_and_the_ranks():
    """Does a run that ended with an error say what MPI reported, which call failed, and the
    driver's ERROR once for all the ranks that printed it?"""
    run = codelab.Run("openmpi-system", "t", "student", 2, [], 0.2, 15, False,
                      {0: ("ERROR: rank 0, round 0: swap changed mine[], the data it sends\n", ""),
                       1: ("ERROR: rank 1, round 0: swap changed mine[], the data it sends\n",
                           "*** An error occurred in MPI_Recv\n*** MPI_ERR_TRUNCATE: message truncated\n")})
    text = codelab.failure(run, None)
    assert "ERROR (ranks 0, 1): round 0: swap changed mine[]" in text
    assert "MPI_ERR_TRUNCATE" in text and "type or count mismatch" in text
    assert "the call that failed: MPI_Recv" in text


def test_an_error_whose_message_mpirun_lost_is_named_from_the_exit_code():
    """Open MPI 4.1's mpirun sometimes loses the ranks' error message (ORTE_ERROR_LOG in
    show_help.c, the whole of its output, as in one full `make test`): is the error still named,
    from the exit code that Open MPI's handler sets to the error's class, and said to be so?"""
    lost = ("[grader:00003] [[36416,0],0] ORTE_ERROR_LOG: Out of resource in file ../../../orte/util/show_help.c at "
            "line 507\n[grader:00003] [[36416,0],0] ORTE_ERROR_LOG: Data unpack would read past end of buffer in file "
            "../../../orte/util/show_help.c at line 513\n")
    run = codelab.Run("openmpi-system", "t", "student", 2, [], 0.7, 3, False, {0: ("", ""), 1: ("", "")}, lost)
    text = codelab.failure(run, None)
    assert "invalid datatype (MPI_ERR_TYPE)" in text and "from the exit code, 3" in text, text
    other = codelab.Run("openmpi-system", "t", "student", 2, [], 0.7, 3, False, {0: ("", ""), 1: ("", "")}, "")
    assert "MPI_ERR_TYPE" not in codelab.failure(other, None)   # an exit code alone names nothing


def test_a_report_counts_only_for_the_files_it_graded(tmp_path, monkeypatch):
    """Is the grader's record in a submission read back as it was written, refused for other
    sources than the submission's (SHA-256), and missing only an error inside the sandbox?"""
    (tmp_path / "swap.c").write_text("int x;\n")
    sha = codelab.sha256(tmp_path / "swap.c")
    check = model.Check("large", "1 MiB under openmpi-system", False, "hung", "the program ends", "5 s", "deadlock")
    rep = codelab.Report("code-deadlock", {"swap.c": sha}, ["openmpi-system"], [check], [], 1.0)
    codelab.write_record(tmp_path, rep)
    assert codelab.read_record(tmp_path, "code-deadlock").checks == [check]
    with pytest.raises(AssertionError, match="deadlock"):
        codelab.verdict(tmp_path, "code-deadlock", "large")
    (tmp_path / "swap.c").write_text("int y;\n")
    with pytest.raises(AssertionError, match="other sources"):
        codelab.verdict(tmp_path, "code-deadlock", "large")
    shutil.rmtree(tmp_path / codelab.RECORD_DIR)
    monkeypatch.setenv("HPCLAB_IN_SANDBOX", "1")
    with pytest.raises(AssertionError, match="not built by the grader"):
        codelab.verdict(tmp_path, "code-deadlock", "large")


def test_the_cartesian_reference_is_mpis():
    """Do the Cartesian lab's expected grids match MPI_Dims_create for 1-64 processes (asked
    through mpi4py, in a process of its own: MPI started here would leave its launcher's variables
    to every later test), and its neighbours and blocks MPI's row-major, non-periodic definition?"""
    import subprocess
    import sys

    from hpclab.course.lessons import cartesian

    ask = ("import json; from mpi4py import MPI; print(json.dumps([[MPI.Compute_dims(n, 2), "
           "MPI.Compute_dims(n, [0, 1])] for n in range(1, 65)]))")
    done = subprocess.run([sys.executable, "-c", ask], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    for n, (free, fixed) in enumerate(json.loads(done.stdout.strip().splitlines()[-1]), start=1):
        assert cartesian.dims_create(n) == tuple(free), n
        assert cartesian.dims_create(n, (0, 1)) == tuple(fixed)
    assert cartesian.neighbours(1, (2, 2)) == ((0, 1), [None, 3, 0, None])
    assert cartesian.block(11, 3, 0) == (4, 0) and cartesian.block(11, 3, 2) == (3, 8)


def test_a_new_course_gets_the_starter_not_the_solution(tmp_path):
    """Does `hpclab grade init` put a code lab's C file into source/ as the student gets it
    (autograde copies the source's files into each graded folder, where a kernel could read them)?"""
    from hpclab.grading import pipeline

    course = pipeline.init_course(tmp_path / "course", labs=["code-deadlock"])
    text = (course / "source" / "code-deadlock" / "swap.c").read_text()
    assert text == codelab.starter_files("code-deadlock")["swap.c"] and "MPI_Sendrecv(" not in text
    assert "hpclab.grading.codelab.BuildAndRun" in (course / "nbgrader_config.py").read_text()


def _pingpong_record(student_us: dict[int, list[float]], kernel_us: dict[int, list[float]], sha: str,
                     right: bool = True) -> dict:
    """own_runs' record of paired rounds with the given times (us) per size."""
    runs = []
    for k in range(len(student_us[0])):
        runs.append({"build": "kernel", "round": k, "sources": {"src/pingpong/pingpong.c": "x"}, "seconds": 1.0,
                     "report": {"kernel": "pingpong", "results": {"rows": [
                         {"bytes": b, "repetitions": 10, "t_usec": v[k], "mbytes_per_sec": 1.0}
                         for b, v in kernel_us.items()]}}})
        runs.append({"build": "student", "round": k, "sources": {"pingpong_loop.c": sha}, "seconds": 1.0,
                     "report": {"ranks": 2, "payload_right": right, "timing_right": right,
                                "rows": [{"bytes": b, "t_usec": v[k]} for b, v in student_us.items()]}})
    return {"lab": "code-pingpong", "library": "openmpi-system", "args": [], "runs": runs}


def test_a_ping_pong_agrees_with_the_kernel_only_when_the_statistics_say_so(tmp_path):
    """On the student's own paired rounds, does the ping-pong lab call a loop within 2 % of the
    kernel "agrees", one that times the whole round trip (twice the kernel's t) "disagrees" (no
    point), rounds too noisy to tell "cannot tell" (the point stands) only once the adaptive rule
    has run to its end, and refuse runs measured with another pingpong_loop.c or a wrong loop?"""
    from hpclab.course.lessons import pingpong_lab

    (tmp_path / "pingpong_loop.c").write_text("double pingpong;\n")
    sha = codelab.sha256(tmp_path / "pingpong_loop.c")
    small, large = 0, 4 << 20
    kernel = {small: [0.40 + 0.01 * (k % 3) for k in range(12)], large: [500.0 + 7 * (k % 4) for k in range(12)]}
    close = {b: [v * 1.02 for v in vs] for b, vs in kernel.items()}
    whole = {b: [v * 2.0 for v in vs] for b, vs in kernel.items()}
    good = _pingpong_record(close, kernel, sha)
    pingpong_lab.check_record(good)
    codelab.check_own_runs(good, tmp_path, ("pingpong_loop.c",))
    assert pingpong_lab.enough(good) and pingpong_lab.agrees(good, small) and pingpong_lab.agrees(good, large)
    assert pingpong_lab.said(good, small).startswith("At 0 B your ping-pong agrees with the course's kernel within 10%")
    assert pingpong_lab.verdict(good, large) == "agrees" and pingpong_lab.passes(good, large)
    bad = _pingpong_record(whole, kernel, sha)
    assert pingpong_lab.verdict(bad, large) == "disagrees" and not pingpong_lab.passes(bad, large)
    assert "differs from the course's kernel by more than 10%" in pingpong_lab.said(bad, large)
    noisy = {b: [v * (1.02 if k % 2 else 3.0) for k, v in enumerate(vs)] for b, vs in kernel.items()}
    rec = _pingpong_record(noisy, kernel, sha)
    assert pingpong_lab.verdict(rec, small) == "cannot tell" and pingpong_lab.passes(rec, small)
    short = _pingpong_record({b: v[:5] for b, v in close.items()}, {b: v[:5] for b, v in kernel.items()}, sha)
    assert not pingpong_lab.enough(short) and not pingpong_lab.passes(short, small)
    (tmp_path / "pingpong_loop.c").write_text("double pingpong; /* changed */\n")
    with pytest.raises(AssertionError, match="another pingpong_loop.c than the one you submit"):
        codelab.check_own_runs(good, tmp_path, ("pingpong_loop.c",))
    with pytest.raises(AssertionError, match="times of a wrong loop do not count"):
        pingpong_lab.check_record(_pingpong_record(close, kernel, sha, right=False))


def test_a_course_made_before_a_lab_gains_its_source(tmp_path):
    """Does add_labs put a lab that a course folder lacks into source/ (the starter, not the
    solution), and leave a lab already there, edits and all, as it is?"""
    from hpclab.grading import pipeline

    course = pipeline.init_course(tmp_path / "course", labs=["code-deadlock"])
    (course / "source" / "code-deadlock" / "swap.c").write_text("/* the instructor's edit */\n")
    assert pipeline.add_labs(course, ["code-deadlock", "code-pingpong"]) == ["code-pingpong"]
    assert (course / "source" / "code-pingpong" / "code-pingpong.ipynb").is_file()
    assert ((course / "source" / "code-pingpong" / "pingpong_loop.c").read_text()
            == codelab.starter_files("code-pingpong")["pingpong_loop.c"])
    assert (course / "source" / "code-deadlock" / "swap.c").read_text() == "/* the instructor's edit */\n"
    assert pipeline.add_labs(course, ["code-pingpong"]) == []


# --- building and running -------------------------------------------------------------------------

needs_sandbox = pytest.mark.skipif(sandbox.mode() is None, reason="no sandbox here (bwrap, user namespaces)")


@needs_sandbox
@pytest.mark.parametrize("lab", CODE_LABS)
def test_the_reference_solution_passes_under_every_installed_library(lab):
    """Does each lab's reference solution pass every check under every installed MPI library?"""
    rep = codelab.grade(lab, paths.repo() / "labs" / lab)
    assert rep.passed(), rep.feedback()
    assert rep.libraries == [lib.name for lib in codelab.libraries()]
    assert {r.library for r in rep.runs} == set(rep.libraries)


@needs_sandbox
@pytest.mark.parametrize("path", _mistakes(), ids=lambda p: f"{p.parent.name}/{p.stem}")
def test_a_seeded_mistake_fails_with_feedback_that_names_it(path):
    """Does the grader fail each seeded mistake (under the system's library, where every trial
    runs) with a message that names it?"""
    lab = path.parent.name
    what, feedback = _expected(path)
    name = codelab.code_lab(lab).files[0]
    rep = codelab.grade(lab, files={name: path.read_text()}, names=[codelab.libraries()[0].name])
    assert not rep.passed(), f"{what}: passed"
    assert re.search(feedback, rep.feedback()), f"{what}: {feedback!r} not in\n{rep.feedback()}"


@needs_sandbox
def test_at_least_twenty_seeded_mistakes():
    assert len(_mistakes()) >= 20 and {p.parent.name for p in _mistakes()} == set(CODE_LABS)


@needs_sandbox
def test_a_hung_run_says_where_each_rank_was_not_just_timed_out(tmp_path):
    """Is a run that hangs stopped at its limit, with each rank's MPI call, line and argument
    values sampled from its stack, and the sandbox's processes gone afterwards?"""
    starter = codelab.starter_files("code-deadlock")
    run = codelab.try_run("code-deadlock", files=starter, args=["--bytes", str(1 << 20), "--rounds", "1"],
                          hang_seconds=2)
    assert run.hung and 2 <= run.seconds < 4
    assert sorted(run.stacks) == [0, 1]
    for rank, st in run.stacks.items():
        call = st["call"]
        assert call["function"] in ("MPI_Send", "MPI_Ssend") and call["file"] == "swap.c"
        assert call["values"][3] == 1 - rank   # partner = the other rank
    text = codelab.describe(run)
    assert "rank 0: in MPI_Send, MPI_Send(mine, count = 131072, MPI_DOUBLE, partner = 1, 0, comm) at swap.c:" in text
    # this run's ranks, by pid: other tests beside this one (make test's workers) may run their own swap
    left = [st["pid"] for st in run.stacks.values() if _read(Path(f"/proc/{st['pid']}/comm")) == "swap"]
    assert not left, left


def _read(p: Path) -> str:
    try:
        return p.read_text().strip()
    except OSError:
        return ""


@needs_sandbox
def test_the_sizes_at_which_the_deadlock_hangs_still_hold():
    """Does the given swap() still complete at the largest size the lesson says and hang at the
    smallest it says, under each installed library (the deadlock lab's table, measured once)?"""
    from hpclab.course.lessons import deadlock

    starter = codelab.starter_files("code-deadlock")
    for lib in codelab.libraries():
        completed, hangs = deadlock.HANGS_FROM[lib.name]
        # 256 MiB took Intel MPI 8 s to swap: 16 MiB says the same (it buffers) in 1 s
        sizes = [min(completed, 1 << 24)] + ([hangs] if hangs else [1 << 24])
        rows = codelab.sweep("code-deadlock", sizes, lambda n: ["--bytes", str(n), "--rounds", "1"],
                             library=lib.name, files=starter, hang_seconds=4, stop_at_hang=False)
        assert rows[0]["completed"], (lib.name, rows[0])
        assert rows[1]["hung"] == (hangs is not None), (lib.name, rows[1])


HOSTILE = r"""
#include <arpa/inet.h>
#include <fcntl.h>
#include <mpi.h>
#include <netinet/in.h>
#include <stdio.h>
#include <sys/socket.h>
#include <unistd.h>

static int reach(const char *ip, int port)
{
    int s = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(port)};
    inet_pton(AF_INET, ip, &a.sin_addr);
    int ok = connect(s, (struct sockaddr *)&a, sizeof a) == 0;
    close(s);
    return ok;
}

void swap(double *mine, double *theirs, int count, int partner, MPI_Comm comm)
{
    static int done;
    if (!done++) {
        char host[256] = "";
        gethostname(host, sizeof host);
        FILE *f = fopen("/tmp/hostile-verdict", "w");
        fprintf(f ? f : stdout, "shadow=%d munge=%d slurm=%d course=%d write_lab=%d ctld=%d dbd=%d host=%s uid=%d\n",
                open("/etc/shadow", O_RDONLY) >= 0, access("/run/munge/munge.socket.2", F_OK) == 0,
                access("/etc/slurm", F_OK) == 0, access("LABPATH", F_OK) == 0,
                open("LABPATH/pwned", O_WRONLY | O_CREAT, 0644) >= 0, reach("127.0.0.1", 6817),
                reach("127.0.0.1", 6819), host, (int)getuid());
        if (f) { fclose(f); f = fopen("/tmp/hostile-verdict", "r"); char l[512]; fgets(l, sizeof l, f); printf("%s", l); }
    }
    MPI_Sendrecv(mine, count, MPI_DOUBLE, partner, 0, theirs, count, MPI_DOUBLE, partner, 0, comm, MPI_STATUS_IGNORE);
}
"""


@needs_sandbox
def test_a_hostile_submission_reaches_nothing_outside_its_sandbox():
    """Can a submission's program read /etc/shadow, see munge or Slurm, see or write the course's
    lab folder, or connect to slurmctld or slurmdbd on this machine? (It must not; it runs as
    another user on a host called 'grader'.)"""
    lab_dir = paths.repo() / "labs" / "code-deadlock"
    text = HOSTILE.replace("LABPATH", str(lab_dir))
    run = codelab.try_run("code-deadlock", files={"swap.c": text}, args=["--bytes", "8", "--rounds", "1"])
    line = next((l for l in run.ranks[0][0].splitlines() if l.startswith("shadow=")), None)
    assert line is not None, f"the hostile program printed no report: {run}"
    seen = dict(kv.split("=") for kv in line.split())
    assert {k: seen[k] for k in ("shadow", "munge", "slurm", "course", "write_lab", "ctld", "dbd")} == dict.fromkeys(
        ("shadow", "munge", "slurm", "course", "write_lab", "ctld", "dbd"), "0"), line
    assert seen["host"] == "grader" and (seen["uid"] != "0" or os.geteuid() != 0)
    assert not (lab_dir / "pwned").exists()


@needs_sandbox
def test_the_command_line_prints_the_feedback(tmp_path, capsys):
    """Does `python -m hpclab.grading.codelab grade LAB FOLDER` print each part's verdict with
    the failed checks, and write the report as JSON when asked?"""
    (tmp_path / "swap.c").write_text((MISTAKES / "code-deadlock" / "type_mismatch.c").read_text())
    out = tmp_path / "report.json"
    code = codelab.main(["grade", "code-deadlock", str(tmp_path), "--library", codelab.libraries()[0].name,
                         "--json", str(out)])
    text = capsys.readouterr().out
    assert code == 1 and "[FAIL]" in text and "MPI_ERR_TRUNCATE" in text
    assert json.loads(out.read_text())["lab"] == "code-deadlock"


@needs_sandbox
def test_the_command_line_runs_a_program_with_its_own_options(capsys):
    """Does `python -m hpclab.grading.codelab run LAB --folder F -- ARGS` pass ARGS (options of
    the program's own, after "--") to the program and print each rank's output?"""
    code = codelab.main(["run", "code-pingpong", "--folder", str(paths.repo() / "labs" / "code-pingpong"), "--",
                         "--sizes", "0,8", "--reps", "3", "--warmup", "1"])
    text = capsys.readouterr().out
    assert code == 0 and "--sizes 0,8 --reps 3 --warmup 1: exit code 0" in text
    assert "rank 0: payload right at every size" in text and "rank 1: timing right at every size" in text


@needs_sandbox
def test_a_class_of_code_submissions_is_graded_through_nbgrader(tmp_path):
    """Through the instructor's whole chain (init, release, zip collect, autograde, feedback), does
    the reference score full marks, a deadlock and a leaked request lose the code parts with
    feedback that names them, and a report the student packed into the zip count for nothing?"""
    import zipfile

    from hpclab.grading import pipeline

    lab = "code-deadlock"
    course = pipeline.init_course(tmp_path / "course", labs=[lab])
    pipeline.release(course, lab)
    downloads = tmp_path / "downloads"
    downloads.mkdir()
    source = paths.repo() / "labs" / lab
    sizes = [{"value": v, "library": "openmpi-system", "completed": v < 4096, "hung": v >= 4096, "seconds": 0.2,
              "where": "" if v < 4096 else "hung: rank 0: in MPI_Send"} for v in (1024, 2048, 4096)]
    libs = [{"value": 1 << 20, "library": name, "completed": name.startswith("intel"), "hung": not name.startswith("intel"),
             "seconds": 1.0, "where": ""} for name in ("openmpi-system", "intel-mpi-2021.19")]
    plan = {"alice": (model.reference_text((source / "swap.c").read_text()), 6),
            "bob": ((MISTAKES / lab / "send_first.c").read_text(), 3),
            "carol": ((MISTAKES / lab / "isend_never_waited.c").read_text(), 3)}
    for student, (text, _) in plan.items():
        with zipfile.ZipFile(downloads / f"{student}.zip", "w") as z:
            z.write(source / f"{lab}.ipynb", f"{lab}.ipynb")   # the source: its solution cells answer
            z.writestr("data/sizes.json", json.dumps(sizes))
            z.writestr("data/libraries.json", json.dumps(libs))
            z.writestr("swap.c", text)
            if student == "carol":   # a report of her own making, claiming nothing failed
                z.writestr(f"{codelab.RECORD_DIR}/{lab}.json", json.dumps(
                    {"version": codelab.RECORD_VERSION, "lab": lab, "sources": {"swap.c": codelab.sha256_text(text)},
                     "libraries": [], "checks": [], "runs": [], "seconds": 0}))
    pipeline.collect(course, lab, downloads)
    pipeline.autograde(course, lab)
    scores = {s: sum(v[0] for v in cells.values()) for s, cells in pipeline.cell_scores(course, lab).items()}
    assert scores == {s: points for s, (_, points) in plan.items()}
    pipeline.feedback(course, lab)
    bob = (course / "feedback" / "bob" / lab / f"{lab}.html").read_text()
    carol = (course / "feedback" / "carol" / lab / f"{lab}.html").read_text()
    assert "both ranks send first" in bob and "swap.c:7 in swap()" in bob
    assert "1 from MPI_Isend at swap.c:9" in carol


@needs_sandbox
def test_a_release_caches_the_reference_runs_and_finds_a_broken_reference(tmp_path, monkeypatch):
    """Does releasing a code lab fill the grading account's cache (the course's objects under
    the libraries the course grades with, a reference run per compared trial), so that its
    class's autograde starts warm, and does a reference that does not build fail there?"""
    from hpclab.grading import pipeline

    lab = "code-halo"
    cache = tmp_path / "cache"
    cache.mkdir(mode=0o700)
    monkeypatch.setattr(codelab, "_CACHE_ROOT", cache)
    monkeypatch.setattr(codelab, "_REFERENCE_RUNS", {})
    course = pipeline.init_course(tmp_path / "course", labs=[lab])
    with open(course / "nbgrader_config.py", "a") as fh:
        fh.write('c.BuildAndRun.libraries = ["openmpi-system"]\n')
    pipeline.release(course, lab)
    compared = [t for t in codelab.code_lab(lab).trials if t.compare]
    assert compared
    assert len(list(cache.glob("reference-openmpi-system-*.json"))) == len(compared)
    assert {p.name.split("-")[1] for p in cache.glob("objects-*")} == {"openmpi"}
    assert not list(cache.glob("*intel*")) and not list(cache.glob("*mpich*"))
    monkeypatch.setattr(codelab, "_REFERENCE_RUNS", {})
    monkeypatch.setattr(codelab, "_reference_files", lambda build: {n: "not C at all" for n in build.student})
    for old in cache.glob("reference-*.json"):
        old.unlink()
    with pytest.raises(HpclabError, match="reference of code-halo does not build"):
        codelab.warm(lab, ["openmpi-system"])


@needs_sandbox
def test_own_runs_alternate_the_builds_and_keep_each_sources_hash(tmp_path):
    """Do a student's own timing runs of the ping-pong lab run the course's kernel and their
    program in turn (A B, then B A), each kept with the SHA-256 of what built it, their times
    read at 0 B and 4 MiB, and are they refused once pingpong_loop.c changes?"""
    from hpclab.course.lessons import pingpong_lab

    shutil.copy(paths.repo() / "labs" / "code-pingpong" / "pingpong_loop.c", tmp_path / "pingpong_loop.c")
    args = ("--max-bytes", str(4 << 20), "--reps", "4", "--warmup", "1", "--json", "{report}")
    doc = codelab.own_runs("code-pingpong", ("kernel", "student"), args, 3, folder=tmp_path,
                           until=lambda d: len(d["runs"]) >= 4)
    assert [(r["build"], r["round"]) for r in doc["runs"]] == [("kernel", 0), ("student", 0), ("student", 1), ("kernel", 1)]
    sha = codelab.sha256(tmp_path / "pingpong_loop.c")
    assert all(r["sources"]["pingpong_loop.c"] == sha for r in doc["runs"] if r["build"] == "student")
    assert all(pingpong_lab.KERNEL_SOURCE in r["sources"] for r in doc["runs"] if r["build"] == "kernel")
    pingpong_lab.check_record(doc)
    codelab.check_own_runs(doc, tmp_path, ("pingpong_loop.c",))
    assert pingpong_lab.agreement(doc, 0) is not None and not pingpong_lab.enough(doc)
    (tmp_path / "pingpong_loop.c").write_text((MISTAKES / "code-pingpong" / "whole_round_trip.c").read_text())
    with pytest.raises(AssertionError, match="another pingpong_loop.c"):
        codelab.check_own_runs(doc, tmp_path, ("pingpong_loop.c",))


@needs_sandbox
def test_the_demo_class_grades_code_submissions_a_hung_and_a_hostile_one(tmp_path):
    """Does `make grade-demo`'s class of code submissions give the reference full marks, a hung
    one and one that does not compile the points of the questions only, with feedback naming each
    rank's MPI_Send and the compiler's error, and a hostile program its points with every attempt
    to get out blocked (checked from inside and outside)?"""
    from hpclab.grading import demo

    result = demo.run_code_demo(tmp_path / "course")
    assert result["ok"], "\n".join(result["lines"])
    assert result["scores"] == {"code-right": (6, 6), "code-hung": (3, 6), "code-broken": (3, 6), "code-hostile": (6, 6)}
    assert result["hostile"]["code-hostile"].startswith("ATTEMPT code: blocked")


def test_a_sandbox_that_cannot_start_is_not_blamed_on_the_students_code():
    """A build log where bubblewrap refused its namespace (as inside a chroot) says the sandbox
    failed and how to allow it, not 'fix the compiler's first error'; a compiler error still does."""
    lab = codelab.code_lab("code-deadlock")
    b = lab.build("student")
    lib = codelab.libraries()[0]
    refused = codelab._not_built("bwrap: No permissions to create a new namespace, likely because ...", b, lib)
    assert "sandbox could not start" in str(refused) and "user namespaces" in refused.hint
    compiler = codelab._not_built("swap.c:12:5: error: expected ';' before '}' token", b, lib)
    assert "does not compile" in str(compiler) and "compiler" in compiler.hint
