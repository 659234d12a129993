"""A simulated class graded end to end (`run_demo`, `grade_demo`): every student packs the same
real pingpong runs of the transports lesson's lab (DEMO_LAB) and differs in what their notebook
does: the solution, wrong answers, an infinite loop, an exception, 200 000 printed lines, edited tests, snooping,
forged or missing data, and a hostile wing that tries one way out of the sandbox each (hostile/<kind>.py.in).
Each student's expected lost cells are in EXPECTED_LOST; run_demo also checks from outside that
nothing outside the submissions changed and that Slurm saw no job of theirs. `run_code_demo`
does the same for a class of code submissions (CODE_DEMO_LAB): a right one, a hung one, one that
does not compile and a hostile C program (hostile/code_swap.c.in).
"""

from __future__ import annotations

import json
import subprocess
import zipfile
from pathlib import Path

from hpclab.core import paths
from hpclab.core.errors import HpclabError
from hpclab.course import lessons
from hpclab.grading import labdata, pipeline, sandbox
from hpclab.grading.pipeline import (autograde, cell_scores, collect, export, feedback, init_course,
                                     release, tampered_cells)
from hpclab.runs import folder as runs_folder
from hpclab.site.slurm import run_slurm

DEMO_LAB = lessons.get("transports").lab
DEMO_ROLES = {"shm": "self,vader", "tcp": "self,tcp", "unlabelled": "self,tcp"}
EXPECTED_LOST = {
    "full": set(),                                   # the solution with real data: full marks
    "unchanged": {"test-latency", "test-bandwidth", "test-nhalf", "test-choice", "test-unknown"},
    "wrong": {"test-latency", "test-nhalf"},         # two wrong numbers, nothing else
    "loop": {"test-nhalf"},                          # infinite loop: interrupted at the timeout
    "exception": {"test-unknown"},                   # raises in one answer cell
    "huge": set(),                                   # prints 200 000 lines, answers right
    "tamper": {"test-latency", "test-unknown"},      # wrong latency, test edited to pass, one deleted
    "snoop": set(),                                  # tries to read hidden tests / write gradebook
    "forged": {"test-latency", "test-bandwidth", "test-nhalf", "test-choice", "test-unknown"},  # edited data
    "nodata": {"test-latency", "test-bandwidth", "test-nhalf", "test-choice", "test-unknown"},  # no runs packed
    # the hostile wing: each tries one way out of the sandbox, then answers right (hostile/<kind>.py.in)
    "sbatch": set(),                                 # submits a Slurm job
    "signal": set(),                                 # signals a process outside (and pid 1)
    "network": set(),                                # connects to the cluster's ports, and out
    "secrets": set(),                                # /etc/shadow, Slurm's config, the munge key and socket
    "others": set(),                                 # another student's and the instructor's files
    "write": set(),                                  # writes outside its scratch (venv .pth, course, package)
    "forkbomb": set(),                               # forks up to 1000 processes
    "membomb": {"test-unknown"},                     # 3 GiB in its last answer cell: that cell dies
    "patch": {"test-latency", "test-nhalf", "test-unknown"},  # two wrong numbers, patched builtins/
                                                     # math/numpy/hpclab, an answer equal to anything
}
HOSTILE_KINDS = ("sbatch", "signal", "network", "secrets", "others", "write", "forkbomb",
                 "membomb", "patch")

# Each hostile student's attempt is a file of its own (hostile/<kind>.py.in; snoop.py.in for the
# student who reads and writes around its folder): code a student could paste into a cell, with
# @NAME@ placeholders that run_demo fills in (@STATE@, @DAEMON@, @COURSE@, @REPO@, @VENV_SITE@,
# @SLEEPER@, @NONCE@). Each attempt prints "ATTEMPT <name>: blocked (...)" or "ATTEMPT <name>:
# SUCCEEDED (...)"; run_demo also checks from outside (Slurm accounting, the sleeper's life,
# checksums, files).
ATTEMPTS_DIR = Path(__file__).with_name("hostile")


def attempt(kind: str) -> str:
    """The code of one attempt (a HOSTILE_KINDS kind, or "snoop"), placeholders unfilled."""
    return (ATTEMPTS_DIR / f"{kind}.py.in").read_text()


def demo_runs(root: str | Path | None = None) -> dict[str, Path]:
    """The real pingpong runs the demo class uses: {role: run folder}, the latest completed run
    of experiment DEMO_LAB per role under root (default runs/), made now on the local
    cluster if missing or if its fit answers nothing (transports.measure_lab)."""
    root = Path(root or paths.runs_dir())
    found: dict[str, Path] = {}
    for entry in runs_folder.index(root) if root.exists() else []:
        if (entry.get("experiment") == DEMO_LAB and entry.get("state") == "completed"
                and entry.get("label") in DEMO_ROLES):
            found[entry["label"]] = root / DEMO_LAB / entry["run_id"]
    from hpclab.course.lessons import transports   # the fits (numpy, pandas): only here

    # a run whose fit answers nothing (a busy machine's) is made again
    missing = [r for r in DEMO_ROLES if r not in found or transports.lab_fit_unusable(found[r])]
    if missing:
        from hpclab.site import ompi

        # the shared-memory BTL as this Open MPI names it: vader up to 4.1, sm from 5.0
        roles = {**DEMO_ROLES, "shm": f"self,{ompi.shm_btl()}"}
        try:
            done = transports.measure_lab({role: roles[role] for role in missing}, DEMO_LAB,
                                          progress=False, timeout=600, root=root)
        except HpclabError as exc:
            raise HpclabError(f"the demo class needs real pingpong runs: {exc.what}",
                              "start the cluster with `hpclab cluster up` and retry") from None
        found.update({role: run.path for role, run in done.items()})
    return found


def answered(release_nb, source_nb):
    """The release notebook with every solution cell filled from the source (markers removed)."""
    import copy

    sols = {c.metadata["nbgrader"]["grade_id"]: c.source for c in source_nb.cells
            if c.metadata.get("nbgrader", {}).get("solution")}
    nb = copy.deepcopy(release_nb)
    for cell in nb.cells:
        gid = cell.metadata.get("nbgrader", {}).get("grade_id")
        if gid in sols:
            cell.source = "\n".join(l for l in sols[gid].splitlines()
                                    if l.strip() not in ("### BEGIN SOLUTION", "### END SOLUTION"))
    return nb


def _edit(nb, gid, fn):
    for cell in nb.cells:
        if cell.metadata.get("nbgrader", {}).get("grade_id") == gid:
            cell.source = fn(cell.source)
            return
    raise KeyError(gid)


def _filled(code: str, fill: dict | None) -> str:
    for key, value in (fill or {}).items():
        code = code.replace(f"@{key}@", str(value))
    return code


def _wrong_shm_latency(fit_cell: str) -> str:
    """The fit cell with a wrong shared-memory latency: moved away from tcp's by their own ratio
    (mirrored on a log scale), so it is wrong by far more than 2 % and yet cannot move the
    unlabelled answer, which goes to the nearer latency: a mistake costs exactly one test. (A
    fixed factor such as 1.5 moved shm towards tcp, and on one run took test-unknown too.)"""
    return fit_cell.replace(
        "print(", 'latency_us["shm"] = latency_us["shm"] ** 2 / latency_us["tcp"]\nprint(', 1)


def _student_notebook(kind: str, release_nb, source_nb, fill: dict | None = None):
    import copy

    if kind == "unchanged":
        return copy.deepcopy(release_nb)
    nb = answered(release_nb, source_nb)
    if kind in ("wrong", "tamper"):
        _edit(nb, "fit", _wrong_shm_latency)
    if kind == "wrong":
        _edit(nb, "nhalf", lambda s: s.replace('latency_us["tcp"] * bandwidth_mb_s["tcp"]',
                                                'latency_us["tcp"] / bandwidth_mb_s["tcp"]'))
    if kind == "loop":
        _edit(nb, "nhalf", lambda s: "while True:\n    pass\n" + s)
    if kind == "exception":
        _edit(nb, "unknown", lambda s: 'raise RuntimeError("I give up")\n' + s)
    if kind == "huge":
        _edit(nb, "fit", lambda s: s + '\nfor i in range(200000):\n    print("x" * 80, i)')
    if kind == "tamper":
        _edit(nb, "test-latency", lambda s: '"""Always right."""\npass')
        nb.cells = [c for c in nb.cells
                    if c.metadata.get("nbgrader", {}).get("grade_id") != "test-unknown"]
    if kind == "snoop":
        snoop = _filled(attempt("snoop"), fill)
        _edit(nb, "fit", lambda s: snoop + "\n" + s)
    if kind in HOSTILE_KINDS:
        code = _filled(attempt(kind), fill)
        if kind == "patch":          # two wrong numbers (as "wrong"), then the patches
            _edit(nb, "fit", _wrong_shm_latency)
            _edit(nb, "nhalf", lambda s: s.replace('latency_us["tcp"] * bandwidth_mb_s["tcp"]',
                                                    'latency_us["tcp"] / bandwidth_mb_s["tcp"]'))
            _edit(nb, "unknown", lambda s: s + "\n" + code)
        elif kind == "membomb":      # in the last answer cell, before its answer
            _edit(nb, "unknown", lambda s: code + "\n" + s)
        else:
            _edit(nb, "fit", lambda s: code + "\n" + s)
    return nb


def _forge(lab_dir: Path) -> None:
    """Scale every time of the tcp run by 0.8 after packing: numbers 'typed in'."""
    from hpclab.kernels import pingpong   # pandas: costly, and only the forging demo needs it

    path = labdata.run_dir("tcp", lab_dir) / "result.json"
    doc = json.loads(path.read_text())
    for row in pingpong.message_rows(doc, source=str(path)):
        row["t_usec"] *= 0.8
    path.write_text(json.dumps(doc, indent=1))


def _checksums(root: Path, skip: tuple[str, ...] = ()) -> dict[str, str]:
    """SHA-256 of every file below root (or of root itself), keyed by path; names in skip
    (first level below root) left out. A missing root gives {}."""
    import hashlib

    root = Path(root)
    if root.is_file():
        return {str(root): hashlib.sha256(root.read_bytes()).hexdigest()}
    out = {}
    for p in sorted(root.rglob("*")) if root.is_dir() else []:
        if p.relative_to(root).parts[0] in skip or not p.is_file() or p.is_symlink():
            continue
        try:
            out[str(p)] = hashlib.sha256(p.read_bytes()).hexdigest()
        except OSError as exc:       # e.g. a socket or a file another process just removed
            out[str(p)] = f"unreadable: {exc.strerror}"
    return out


def _guarded(course: Path, runs: dict[str, Path], runs_root: Path | None = None) -> dict[str, Path]:
    """What autograde must leave byte-identical: the course tree apart from what autograde
    writes, the runs the class packed, each lab's sources (not the runs its notebook packs into
    its data/ folder, git-ignored: a lab run meanwhile writes there), the package, the venv's
    site-packages top level (a .pth there would run in the grader), the cluster's configuration."""
    import site

    # the package: the modules the grader itself runs (other modules may be edited meanwhile)
    pkg = paths.package_dir()
    labs = pipeline._labs_dir()
    out = {"course": course, "labs": labs,
           **{f"lab:{d.name}": d for d in sorted(labs.iterdir()) if d.is_dir()},
           **{f"package:{m}": pkg / f"{m}.py" for m in ("__init__", "grading/__init__", "grading/__main__",
                                                         "grading/pipeline", "grading/references",
                                                         "grading/answers", "grading/preprocessors", "grading/sandbox")},
           "cluster-etc": paths.state_dir() / "etc", "etc-slurm": Path("/etc/slurm"),
           "munge": paths.daemon_state_dir() / "munge" / "munge.key"}
    for i, run in enumerate(sorted(runs.values())):
        out[f"run{i}"] = Path(run)
    if runs_root is not None:           # a runs folder of the caller's own (tests): all of it
        out["runs"] = Path(runs_root)
    for sp in site.getsitepackages():
        out[f"site:{sp}"] = Path(sp)
    return out


def _snapshot(guarded: dict[str, Path]) -> dict[str, dict]:
    skip = {"course": ("autograded", "feedback", "gradebook.db", "logs", "grades.csv")}
    out = {}
    for name, root in guarded.items():
        if name.startswith("site:") or name == "labs":
            # top level only: below site-packages lie tens of thousands of files, below labs/ the
            # labs, each an entry of its own
            out[name] = {str(p): _checksums(p).get(str(p), "") for p in sorted(root.glob("*")) if p.is_file()}
        elif name.startswith("lab:"):
            out[name] = _checksums(root, ("data",))
        else:
            out[name] = _checksums(root, skip.get(name, ()))
    return out


def _slurm_jobs_named(name: str, since: str) -> list[str]:
    """Jobs with this name, or of the sandbox's user, in Slurm's accounting since `since`
    (sacct -S), and in the queue. Raises HpclabError when Slurm cannot be asked."""
    found = []
    # the job name in accounting and in the queue must be answered; the sandbox user's jobs
    # only where Slurm knows the user (sacct says "Invalid user" otherwise): check=False
    for cmd, check in (
            (["sacct", "-a", "-X", "-n", "-P", "-S", since, "--name", name, "-o", "JobID,JobName,User"], True),
            (["sacct", "-X", "-n", "-P", "-S", since, "-u", sandbox.GRADER_USER, "-o", "JobID,JobName,User"], False),
            (["squeue", "-h", "-n", name, "-o", "%i %j %u"], True)):
        out = run_slurm(cmd, what=f"list the demo's Slurm jobs ({cmd[0]})", check=check)
        found += [l for l in out.splitlines() if l.strip()]
    return found


def _cell_text(nb_path: Path, gid: str) -> tuple[str, list[str]]:
    """(stdout text, error names) of one cell of an autograded notebook."""
    import nbformat

    if not nb_path.is_file():
        return "", ["missing notebook"]
    for cell in nbformat.read(nb_path, as_version=4).cells:
        if cell.metadata.get("nbgrader", {}).get("grade_id") == gid:
            text = "".join(o.get("text", "") for o in cell.get("outputs", [])
                           if o.get("output_type") == "stream")
            return text, [o.get("ename") for o in cell.get("outputs", []) if o.get("output_type") == "error"]
    return "", ["no such cell"]


def _hostile_verdicts(course: Path, fill: dict, students, sleeper, jobs: list[str]) -> dict[str, str]:
    """{kind: "" when each attempt of the hostile wing was blocked, else what got through}."""
    out = {}
    for kind in [k for k in students if k in HOSTILE_KINDS]:
        nb = course / "autograded" / kind / DEMO_LAB / f"{DEMO_LAB}.ipynb"
        cell = "unknown" if kind == "membomb" else "fit"
        text, errors = _cell_text(nb, cell)
        problems = []
        if kind == "membomb":
            if not set(errors) & {"KernelDied", "MemoryError"} or "SUCCEEDED" in text:
                problems.append(f"the memory bomb was not stopped (errors {errors})")
        elif kind != "patch":
            line = next((l for l in text.splitlines() if l.startswith(f"ATTEMPT {kind}:")), "")
            if not line.startswith(f"ATTEMPT {kind}: blocked"):
                problems.append(line or f"no ATTEMPT line (errors {errors})")
        if kind == "sbatch" and jobs:
            problems.append(f"Slurm saw jobs: {jobs}")
        if kind == "signal" and sleeper.poll() is not None:
            problems.append("the sleeper outside the sandbox died")
        if kind == "write":
            made = [t for t in (course / "HOSTILE", paths.repo() / "hpclab" / "hostile.py",
                                Path(fill["VENV_SITE"]) / "hostile.pth", paths.repo() / "labs" / "HOSTILE",
                                Path("/etc/HOSTILE"), Path("/var/tmp/HOSTILE"), Path("/dev/shm/HOSTILE"),
                                nb.parent / "PLANTED") if t.exists()]
            if made:
                problems.append(f"files written outside the sandbox: {made}")
        if kind == "forkbomb":
            line = next((l for l in text.splitlines() if l.startswith("ATTEMPT forkbomb:")), "")
            try:
                n = int(line.split("(")[1].split()[0])
            except (IndexError, ValueError):
                n = -1
            if not 0 <= n <= sandbox.Limits().processes:
                problems.append(f"forked {n} processes (limit {sandbox.Limits().processes})")
        out[kind] = "; ".join(problems)
    return out


def run_demo(course_dir: str | Path | None = None, students=None, timeout: int = 15,
             runs_root: str | Path | None = None, jobs: int | None = None) -> dict:
    """Run the simulated class through release, zip collect, autograde, feedback and export.

    course_dir: new folder (default build/grade-demo/<time>); students: kinds from EXPECTED_LOST
    (default all, the hostile wing included); timeout: seconds per cell while autograding;
    runs_root: where the class's real runs are found or made (default runs/); jobs: submissions
    autograded at once (pipeline.autograde; default one per core). Returns {"course",
    "csv", "lines" (one per student), "scores" {student: (score, max)}, "expected" {student: score},
    "cells" (cell_scores), "flags" (tampered_cells), "feedback" [html files],
    "hostile" {kind: "" if blocked, else what got through}, "jobs" (Slurm jobs the class made:
    none expected), "changed" [guarded trees whose checksums changed], "autograde_s" (seconds),
    "ok" (every score as expected, every attempt blocked, nothing changed), "untouched"
    (nothing outside the submissions changed)}."""
    import time
    import uuid

    import nbformat

    students = list(students or EXPECTED_LOST)
    unknown = [s for s in students if s not in EXPECTED_LOST]
    if unknown:
        raise HpclabError(f"unknown demo students {unknown}", f"choose from {list(EXPECTED_LOST)}")
    course = Path(course_dir or paths.build_dir() / "grade-demo" / time.strftime("%Y%m%d-%H%M%S")).resolve()
    runs = demo_runs(runs_root)
    init_course(course, [DEMO_LAB])
    release(course, DEMO_LAB)
    nb_name = f"{DEMO_LAB}.ipynb"
    source_nb = nbformat.read(course / "source" / DEMO_LAB / nb_name, as_version=4)
    release_nb = nbformat.read(course / "release" / DEMO_LAB / nb_name, as_version=4)
    points = {c.metadata["nbgrader"]["grade_id"]: c.metadata["nbgrader"]["points"]
              for c in source_nb.cells if c.metadata.get("nbgrader", {}).get("grade")}
    total = sum(points.values())
    work, downloads = course / "students", course / "lms-download"
    downloads.mkdir(parents=True)
    import site

    sleeper = subprocess.Popen(["sleep", "3600"])      # a process outside the sandbox
    fill = {"NONCE": f"hpclab-hostile-{uuid.uuid4().hex[:8]}", "SLEEPER": sleeper.pid,
            "COURSE": course, "REPO": paths.repo(), "STATE": paths.state_dir().resolve(),
            "DAEMON": paths.daemon_state_dir(), "VENV_SITE": site.getsitepackages()[0]}
    try:
        for kind in students:
            lab_dir = work / kind
            lab_dir.mkdir(parents=True)
            nbformat.write(_student_notebook(kind, release_nb, source_nb, fill), lab_dir / nb_name)
            if kind != "nodata":
                labdata.pack(runs, lab_dir)
            if kind == "forged":
                _forge(lab_dir)
            with zipfile.ZipFile(downloads / f"{kind}.zip", "w") as z:
                for p in sorted(lab_dir.rglob("*")):
                    if p.is_file():
                        z.write(p, p.relative_to(lab_dir))
        collect(course, DEMO_LAB, downloads)
        guarded = _guarded(course, runs, runs_root)
        before = _snapshot(guarded)
        since = time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime(time.time() - 1))
        t0 = time.monotonic()
        autograde(course, DEMO_LAB, timeout=timeout, jobs=jobs)
        seconds = time.monotonic() - t0
        after = _snapshot(guarded)
        changed = sorted(k for k in guarded if before[k] != after[k])
        jobs = _slurm_jobs_named(fill["NONCE"], since) if "sbatch" in students else []
        hostile = _hostile_verdicts(course, fill, students, sleeper, jobs)
    finally:
        sleeper.kill()
        sleeper.wait()
    untouched = not changed
    html = feedback(course, DEMO_LAB)
    csv_path = course / "grades.csv"
    rows = export(course, csv_path)
    scores = {r["student_id"]: (float(r["score"]), float(r["max_score"])) for r in rows
              if r["assignment"] == DEMO_LAB}
    expected = {s: total - sum(points[g] for g in EXPECTED_LOST[s]) for s in students}
    cells = cell_scores(course, DEMO_LAB)
    flags = tampered_cells(course, DEMO_LAB)
    lines, ok = [], untouched and not jobs and not any(hostile.values())
    for s in students:
        got, mx = scores.get(s, (float("nan"), float("nan")))
        lost = {g for g, (sc, m) in cells.get(s, {}).items() if sc < m}
        good = got == expected[s] and mx == total and lost == EXPECTED_LOST[s] and not hostile.get(s)
        ok &= good
        flag = ", ".join(f"{g} {how}" for g, how in sorted(flags.get(s, {}).items()))
        note = ("   attempt blocked" if s in hostile and not hostile[s]
                else f"   GOT THROUGH: {hostile[s]}" if s in hostile else "")
        lines.append(f"{s:10s} {got:4g} / {mx:g}   expected {expected[s]:g}   "
                     f"{'ok' if good else 'WRONG'}   lost: {', '.join(sorted(lost)) or '-'}"
                     + (f"   flagged: {flag}" if flag else "") + note)
    if changed:
        lines.append(f"changed during autograde (checksums): {', '.join(changed)}")
    if jobs:
        lines.append(f"Slurm jobs submitted during autograde: {jobs}")
    lines.append(f"autograde: {seconds:.1f} s for {len(students)} submissions "
                 f"({seconds / len(students):.1f} s each)")
    return {"course": str(course), "csv": str(csv_path), "lines": lines, "scores": scores,
            "expected": expected, "cells": cells, "flags": flags, "feedback": html,
            "hostile": hostile, "jobs": jobs, "changed": changed, "autograde_s": seconds,
            "ok": ok, "untouched": untouched}


# --- a class of code submissions ------------------------------------------------------------------

CODE_DEMO_LAB = lessons.get("deadlock").lab
# Each code student's notebook answers every question (the source's solution cells); their swap.c
# differs: the reference, the given code left in (both ranks send first: it hangs at 1 MiB), one
# that does not compile, and a hostile one that tries to get out of the sandbox, then swaps right.
CODE_EXPECTED_LOST = {
    "code-right": set(),
    "code-hung": {"test-large", "test-safe"},
    "code-broken": {"test-large", "test-safe"},
    "code-hostile": set(),
}
# What each one's feedback must say (a regular expression on the feedback page's text).
CODE_FEEDBACK = {
    "code-hung": r"1 MiB, 2 ranks under [\w.-]+: FAILED \(measured no end after \d+ s.*?rank 0: in MPI_Send, "
                 r"MPI_Send\(mine, count = 131072, .*? at swap\.c:\d+ in swap\(\).*?both ranks send first",
    "code-broken": r"the file does not compile: .*swap\.c:\d+:\d+: error",
}


def _code_swap(kind: str, fill: dict) -> str:
    """The swap.c of one code student."""
    from hpclab.course import codelab as model
    from hpclab.grading import codelab

    right = model.reference_text(codelab.course_source(f"labs/{CODE_DEMO_LAB}/swap.c").read_text())
    if kind == "code-right":
        return right
    if kind == "code-hung":
        return codelab.starter_files(CODE_DEMO_LAB)["swap.c"]
    if kind == "code-broken":   # a statement without its semicolon
        return right.replace("MPI_STATUS_IGNORE);", "MPI_STATUS_IGNORE)", 1)
    return _filled((ATTEMPTS_DIR / "code_swap.c.in").read_text(), fill)


def _code_data(folder: Path) -> None:
    """The deadlock lab's own measurements (data/sizes.json, data/libraries.json), made now as the
    notebook makes them: the given swap() at growing sizes until it hangs, and at 1 MiB under
    every installed library."""
    from hpclab.grading import codelab

    starter = codelab.starter_files(CODE_DEMO_LAB)
    sizes = codelab.sweep(CODE_DEMO_LAB, [1024 * 2 ** k for k in range(11)], lambda n: ["--bytes", str(n), "--rounds", "1"],
                          files=starter)
    libs = [codelab.sweep(CODE_DEMO_LAB, [1 << 20], lambda n: ["--bytes", str(n), "--rounds", "1"], library=lib.name,
                          files=starter)[0] for lib in codelab.libraries()]
    (folder / "data").mkdir(parents=True, exist_ok=True)
    (folder / "data" / "sizes.json").write_text(json.dumps(sizes, indent=1))
    (folder / "data" / "libraries.json").write_text(json.dumps(libs, indent=1))


def _page_text(html: Path) -> str:
    import html as html_lib
    import re

    text = re.sub(r"<[^>]+>", " ", html.read_text()) if html.is_file() else ""
    return " ".join(html_lib.unescape(text).split())


def run_code_demo(course_dir: str | Path | None = None, students=None, timeout: int = 60,
                  jobs: int | None = None) -> dict:
    """A class of code submissions (CODE_DEMO_LAB) through init, release, zip collect, autograde,
    feedback and export: the reference, a hung one, one that does not compile and a hostile one
    (hostile/code_swap.c.in), each with the notebook's questions answered and the lab's own
    measurements made now. Checked: each score and the cells that lost points, the words of each
    failed one's feedback (CODE_FEEDBACK), the hostile program's own report (one ATTEMPT line in
    its graded run's output) and, from outside, that none of the files it tried to write exist,
    the sleeper it tried to kill lives, and Slurm saw no job of its name (when Slurm answers).

    Returns {"course", "lines" (one per student, then autograde's time), "scores", "expected",
    "cells", "feedback" {student: page text}, "hostile" ("" when blocked, else what got
    through), "autograde_s", "ok"}."""
    import time
    import uuid

    import nbformat

    students = list(students or CODE_EXPECTED_LOST)
    unknown = [s for s in students if s not in CODE_EXPECTED_LOST]
    if unknown:
        raise HpclabError(f"unknown code demo students {unknown}", f"choose from {list(CODE_EXPECTED_LOST)}")
    lab = CODE_DEMO_LAB
    course = Path(course_dir or paths.build_dir() / "grade-demo" / f"code-{time.strftime('%Y%m%d-%H%M%S')}").resolve()
    init_course(course, [lab])
    release(course, lab)
    nb_name = f"{lab}.ipynb"
    source_nb = nbformat.read(course / "source" / lab / nb_name, as_version=4)
    release_nb = nbformat.read(course / "release" / lab / nb_name, as_version=4)
    points = {c.metadata["nbgrader"]["grade_id"]: c.metadata["nbgrader"]["points"]
              for c in source_nb.cells if c.metadata.get("nbgrader", {}).get("grade")}
    total = sum(points.values())
    work, downloads = course / "students", course / "lms-download"
    downloads.mkdir(parents=True)
    data = course / "measured"
    _code_data(data)
    sleeper = subprocess.Popen(["sleep", "3600"])
    nonce = f"hpclab-hostile-{uuid.uuid4().hex[:8]}"
    fill = {"NONCE": nonce, "SLEEPER": sleeper.pid, "COURSE": course, "REPO": paths.repo(),
            "MUNGE_KEY": paths.daemon_state_dir() / "munge" / "munge.key"}
    targets = [course / f"HOSTILE-{nonce}", paths.repo() / "labs" / f"HOSTILE-{nonce}",
               paths.repo() / "hpclab" / f"HOSTILE_{nonce}.py", Path(f"/var/tmp/HOSTILE-{nonce}"),
               Path(f"/etc/HOSTILE-{nonce}"), Path(f"/dev/shm/HOSTILE-{nonce}")]
    try:
        for kind in students:
            with zipfile.ZipFile(downloads / f"{kind}.zip", "w") as z:
                z.writestr(nb_name, nbformat.writes(answered(release_nb, source_nb)))
                z.writestr("swap.c", _code_swap(kind, fill))
                for p in sorted((data / "data").glob("*.json")):
                    z.write(p, f"data/{p.name}")
        collect(course, lab, downloads)
        since = time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime(time.time() - 1))
        t0 = time.monotonic()
        autograde(course, lab, timeout=timeout, jobs=jobs)
        seconds = time.monotonic() - t0
        hostile = {}
        if "code-hostile" in students:
            problems = []
            rec = course / "submitted" / "code-hostile" / lab / ".codelab" / f"{lab}.json"
            said = ""
            if rec.is_file():
                outs = [r["ranks"].get("0", {}).get("stdout", "") for r in json.loads(rec.read_text())["runs"]]
                said = next((l for o in outs for l in o.splitlines() if l.startswith("ATTEMPT code:")), "")
            if not said.startswith("ATTEMPT code: blocked"):
                problems.append(said or "no ATTEMPT line in the graded runs' output")
            problems += [f"wrote {t}" for t in targets if t.exists()]
            if sleeper.poll() is not None:
                problems.append("the sleeper outside the sandbox died")
            try:
                made = _slurm_jobs_named(nonce, since)
            except HpclabError:
                made = []   # no Slurm here to ask: the sandbox has no munge socket either way
            if made:
                problems.append(f"Slurm saw jobs: {made}")
            hostile["code-hostile"] = "; ".join(problems) or said
    finally:
        sleeper.kill()
        sleeper.wait()
        for t in targets:
            if t.exists() and t.is_file():
                t.unlink()
    feedback(course, lab)
    rows = export(course, course / "grades.csv")
    scores = {r["student_id"]: (float(r["score"]), float(r["max_score"])) for r in rows if r["assignment"] == lab}
    expected = {s: total - sum(points[g] for g in CODE_EXPECTED_LOST[s]) for s in students}
    cells = cell_scores(course, lab)
    pages = {s: _page_text(course / "feedback" / s / lab / f"{lab}.html") for s in students}
    import re

    lines, ok = [], True
    for s in students:
        got, mx = scores.get(s, (float("nan"), float("nan")))
        lost = {g for g, (sc, m) in cells.get(s, {}).items() if sc < m}
        said = CODE_FEEDBACK.get(s)
        words = re.search(said, pages[s]) if said else None
        blocked = s != "code-hostile" or hostile.get(s, "").startswith("ATTEMPT code: blocked")
        good = got == expected[s] and mx == total and lost == CODE_EXPECTED_LOST[s] and (not said or words) and blocked
        ok &= bool(good)
        note = ""
        if words:
            text = words.group(0)
            note = f"   feedback: {text[:90]} ... {text[-60:]}" if len(text) > 160 else f"   feedback: {text}"
        elif said:
            note = "   FEEDBACK MISSING its words"
        if s == "code-hostile":
            note = f"   {hostile.get(s) if blocked else 'GOT THROUGH: ' + hostile.get(s, '')}"
        lines.append(f"{s:13s} {got:4g} / {mx:g}   expected {expected[s]:g}   {'ok' if good else 'WRONG'}   "
                     f"lost: {', '.join(sorted(lost)) or '-'}{note}")
    lines.append(f"autograde: {seconds:.1f} s for {len(students)} code submissions "
                 f"({seconds / len(students):.1f} s each, built and run under {len(_libraries())} MPI libraries)")
    return {"course": str(course), "lines": lines, "scores": scores, "expected": expected, "cells": cells,
            "feedback": pages, "hostile": hostile, "autograde_s": seconds, "ok": ok}


def _libraries() -> list:
    from hpclab.grading import codelab

    return codelab.libraries()


def grade_demo() -> int:
    """Grade a simulated class end to end and print one line per student (score / max, expected),
    then a class of code submissions (run_code_demo). Returns 0 when every score is the expected
    one, 1 otherwise (HpclabError: 2 via the CLI)."""
    result = run_demo()
    for line in result["lines"]:
        print(line)
    print(f"course folder: {result['course']}; grades: {result['csv']}")
    code = run_code_demo()
    print(f"code submissions ({CODE_DEMO_LAB}):")
    for line in code["lines"]:
        print(line)
    print(f"course folder: {code['course']}")
    return 0 if result["ok"] and code["ok"] else 1
