"""Grading the labs with nbgrader: course folder, release, collect, autograde, feedback, export,
the reference answers hidden tests compare with, and a simulated class (`grade_demo`).

A course folder is nbgrader's layout (source/, release/, submitted/, autograded/, feedback/,
gradebook.db) plus our grader/nbgrader_config.py. Each step is one nbgrader command run in that
folder. Steps never overwrite earlier results (no --force): a step already done is an error.

Student code runs in nbgrader's kernel, started through `python -m hpclab.grading.pipeline kernel`, inside
hpclab.grading.sandbox: as the dedicated user hpclab-grader, in a bubblewrap sandbox with no network, only
a copy of its own folder writable, and resource limits. Graded test cells are not run there: the
kernel only reports the answers they read, and the grader runs the tests on them in a process of
its own (hpclab.grading.answers), so nothing the notebook patches counts. Hidden tests take expected
values from `reference(lab, lab_dir)`, computed in a fresh Python process with the package's
analysis, and only from packed runs that pass `labdata.verify`.
"""

from __future__ import annotations

import csv
import json
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

from hpclab.core import paths
from hpclab.core.errors import HpclabError

LABS = ("lab-transports", "lab-scaling", "lab-imbalance", "lab-placement")   # labs with a grading pipeline (reference answers)
KERNEL_NAME = "hpclab-grader"
SANDBOX_EXECUTE = "hpclab.grading.answers.SandboxExecute"   # nbgrader_config.py runs cells through it


def _grader_dir() -> Path:
    return paths.repo() / "grader"


def _labs_dir() -> Path:
    return paths.repo() / "labs"


def _nbgrader() -> str:
    exe = Path(sys.executable).with_name("nbgrader")
    return str(exe) if exe.exists() else "nbgrader"


def _sh(course: Path, *args: str, timeout: float = 1800) -> subprocess.CompletedProcess:
    """Run one nbgrader command in the course folder; raise HpclabError with its last lines."""
    if not (course / "nbgrader_config.py").is_file():
        raise HpclabError(f"{course} is not a course folder (no nbgrader_config.py)",
                          "make one with `python -m hpclab.grading.pipeline init COURSE`")
    # nbgrader calls alembic (gradebook migrations) by name: the venv's bin must be on PATH
    env = dict(os.environ, JUPYTER_PATH=str(course / "jupyter"),
               PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}")
    env.pop("NBGRADER_EXECUTION", None)
    proc = subprocess.run([_nbgrader(), *args], cwd=course, capture_output=True, text=True,
                          env=env, timeout=timeout)
    (course / "logs").mkdir(exist_ok=True)
    log = course / "logs" / f"{args[0]}.log"
    with open(log, "a") as fh:
        fh.write(f"$ nbgrader {' '.join(args)}\n{proc.stdout}{proc.stderr}\n")
    if proc.returncode != 0:
        tail = "\n".join((proc.stdout + proc.stderr).strip().splitlines()[-5:])
        raise HpclabError(f"nbgrader {args[0]} failed (exit {proc.returncode}): {tail}",
                          f"full output in {log}")
    return proc


# --- course folder ---------------------------------------------------------------------------


def init_course(course_dir: str | Path, labs=LABS) -> Path:
    """Make a course folder: nbgrader_config.py from grader/, source/<lab>/ from labs/<lab>/
    (notebooks only: each student brings their own data/), and the sandbox kernel spec.

    course_dir: new or empty folder. labs: lab names under labs/. Returns the folder.
    Raises HpclabError when the folder already holds a course or a lab does not exist."""
    course = Path(course_dir).resolve()
    if (course / "source").exists() or (course / "gradebook.db").exists():
        raise HpclabError(f"{course} already holds a course", "use it as is, or pick a new folder")
    for lab in labs:
        if not (_labs_dir() / lab).is_dir():
            raise HpclabError(f"no lab {lab!r} in {_labs_dir()}", f"labs: {', '.join(LABS)}")
    course.mkdir(parents=True, exist_ok=True)
    shutil.copy(_grader_dir() / "nbgrader_config.py", course / "nbgrader_config.py")
    for lab in labs:
        dest = course / "source" / lab
        dest.mkdir(parents=True)
        for nb in sorted((_labs_dir() / lab).glob("*.ipynb")):
            shutil.copy(nb, dest / nb.name)
    _install_kernel(course)
    ensure_exchange(course)
    return course


def ensure_exchange(course_dir: str | Path) -> Path | None:
    """Make the exchange folder nbgrader_config.py names by default, <course>/../nbgrader-exchange,
    so the formgrader's release and collect work (nbgrader refuses a missing exchange). When
    NBGRADER_EXCHANGE names a shared one (JupyterHub), it is the administrator's: None."""
    if os.environ.get("NBGRADER_EXCHANGE"):
        return None
    exchange = Path(course_dir).resolve().parent / "nbgrader-exchange"
    exchange.mkdir(exist_ok=True)
    return exchange


def _install_kernel(course: Path) -> None:
    """A kernel spec that starts ipykernel through `hpclab.grading.pipeline kernel` (in hpclab.grading.sandbox)."""
    spec = course / "jupyter" / "kernels" / KERNEL_NAME
    spec.mkdir(parents=True, exist_ok=True)
    argv = [sys.executable, "-m", "hpclab.grading.pipeline", "kernel", "{connection_file}"]
    (spec / "kernel.json").write_text(json.dumps(
        {"argv": argv, "display_name": "hpclab grader (sandboxed)", "language": "python"}, indent=1))


def release(course_dir: str | Path, lab: str) -> Path:
    """Generate the student version of a lab (nbgrader generate_assignment): solutions and hidden
    tests removed, checksums recorded in the gradebook. Returns release/<lab>/."""
    course = Path(course_dir).resolve()
    _sh(course, "generate_assignment", lab)
    return course / "release" / lab


def collect(course_dir: str | Path, lab: str, downloads: str | Path) -> list[str]:
    """Collect submissions from a folder of zips (an LMS download), one `<student-id>.zip` per
    student holding the lab folder's content (notebook + data/), with nbgrader zip_collect.

    Returns the student ids now under submitted/. Raises HpclabError when there is no zip."""
    course = Path(course_dir).resolve()
    zips = sorted(Path(downloads).glob("*.zip"))
    if not zips:
        raise HpclabError(f"no .zip files in {downloads}", "download the submissions as zips first")
    archive = course / "downloaded" / lab / "archive"
    archive.mkdir(parents=True, exist_ok=True)
    for z in zips:
        if (archive / z.name).exists():
            raise HpclabError(f"{archive / z.name} was collected already", "remove it to collect again")
        shutil.copy(z, archive / z.name)
    _sh(course, "zip_collect", lab)
    return sorted(p.name for p in (course / "submitted").iterdir()
                  if (p / lab).is_dir())


def autograde(course_dir: str | Path, lab: str, timeout: int | None = None,
              unconfined: bool = False) -> None:
    """Execute and grade every collected submission of a lab: nbgrader autograde with the
    kernel in hpclab.grading.sandbox and test cells checked outside it (hpclab.grading.answers).
    timeout: seconds per cell (default: grader/nbgrader_config.py's). unconfined: no sandbox,
    for the instructor's own test notebooks only.

    Raises HpclabError, before anything runs, when no sandbox can be made here (and unconfined
    is not asked for) or when the course's nbgrader_config.py predates the sandbox."""
    from hpclab.grading import sandbox

    course = Path(course_dir).resolve()
    config = course / "nbgrader_config.py"
    if config.is_file() and SANDBOX_EXECUTE not in config.read_text():
        raise HpclabError(f"{config} does not run cells through {SANDBOX_EXECUTE}",
                          f"copy {_grader_dir() / 'nbgrader_config.py'} over it")
    if not unconfined and sandbox.mode() is None:
        raise HpclabError(f"refusing to autograde untrusted notebooks without a sandbox: "
                          f"{sandbox.why_not()}",
                          "grade your own test notebooks only with --unconfined")
    args = ["autograde", lab, f"--Execute.kernel_name={KERNEL_NAME}",
            f"--ExecutePreprocessor.kernel_name={KERNEL_NAME}"]
    if timeout is not None:
        args.append(f"--Execute.timeout={int(timeout)}")
    if unconfined:
        args.append("--SandboxExecute.unconfined=True")
    try:
        _sh(course, *args)
    finally:
        sandbox.sweep()


def feedback(course_dir: str | Path, lab: str) -> list[Path]:
    """HTML feedback for every graded submission (nbgrader generate_feedback). Returns the files."""
    course = Path(course_dir).resolve()
    _sh(course, "generate_feedback", lab)
    return sorted((course / "feedback").glob(f"*/{lab}/*.html"))


def export(course_dir: str | Path, csv_path: str | Path) -> list[dict]:
    """Grades of every student and lab as CSV (nbgrader export). csv_path must not exist.
    Returns the rows (dicts with student_id, assignment, score, max_score, ...)."""
    course = Path(course_dir).resolve()
    csv_path = Path(csv_path).resolve()
    if csv_path.exists():
        raise HpclabError(f"{csv_path} exists", "export to a new file; grades are never overwritten")
    _sh(course, "export", f"--CsvExportPlugin.to={csv_path}")
    with open(csv_path, newline="") as fh:
        return list(csv.DictReader(fh))


def cell_scores(course_dir: str | Path, lab: str) -> dict[str, dict[str, tuple[float, float]]]:
    """Per-cell grades from the gradebook: {student: {grade_id: (score, max points)}}."""
    from nbgrader.api import Gradebook

    out: dict[str, dict[str, tuple[float, float]]] = {}
    with Gradebook(f"sqlite:///{Path(course_dir).resolve() / 'gradebook.db'}") as gb:
        for sub in gb.assignment_submissions(lab):
            cells = out.setdefault(sub.student_id, {})
            for nb in sub.notebooks:
                for grade in nb.grades:
                    cells[grade.name] = (float(grade.score), float(grade.max_score))
    return out


def tampered_cells(course_dir: str | Path, lab: str) -> dict[str, dict[str, str]]:
    """Test and read-only cells a student changed or deleted, against the released notebook:
    {student: {grade_id: "edited" | "deleted"}} (students with none are left out).

    nbgrader restores those cells from the source before grading; this names them for the
    instructor. (nbgrader's own checksum warning fires for every cell with hidden tests, since
    the released cell differs from the source cell, so it cannot single out a student.)"""
    import nbformat

    course = Path(course_dir).resolve()
    out: dict[str, dict[str, str]] = {}
    for rel in sorted((course / "release" / lab).glob("*.ipynb")):
        locked = {c.metadata["nbgrader"]["grade_id"]: c.source
                  for c in nbformat.read(rel, as_version=4).cells
                  if c.metadata.get("nbgrader", {}).get("locked")}
        for sub in sorted((course / "submitted").glob(f"*/{lab}/{rel.name}")):
            seen = {c.metadata.get("nbgrader", {}).get("grade_id"): c.source
                    for c in nbformat.read(sub, as_version=4).cells}
            flags = {gid: ("deleted" if gid not in seen else "edited")
                     for gid, src in locked.items() if seen.get(gid) != src}
            if flags:
                out.setdefault(sub.parent.parent.name, {}).update(flags)
    return out


# --- reference answers --------------------------------------------------------------------------


def _reference_transports(lab_dir: Path) -> dict:
    from hpclab.analysis import fits
    from hpclab.grading import labdata

    labdata.verify(lab_dir)
    out: dict = {"latency_us": {}, "bandwidth_mb_s": {}, "label": {}}
    for role in ("shm", "tcp", "unlabelled"):
        table = labdata.table(role, lab_dir)
        fit = fits.hockney_fit(table["bytes"], table["t_usec"])
        out["latency_us"][role] = fit.latency_us
        out["bandwidth_mb_s"][role] = fit.bandwidth_mb_s
        out["label"][role] = str(table["transport"].iloc[0])
    out["n_half_tcp"] = fits.hockney_fit(*_cols(labdata.table("tcp", lab_dir))).half_bandwidth_bytes
    # the unlabelled run's transport as Open MPI reported it, named by the run that shares it
    same = [r for r in ("shm", "tcp") if out["label"][r] == out["label"]["unlabelled"]]
    out["unlabelled_transport"] = same[0] if len(same) == 1 else None
    # interpretation: the transport the fitted models make faster for 1 MiB messages; the
    # spread of each prediction is the fit's typical error (median |relative residual|)
    import numpy as np

    t, spread = {}, {}
    for role in ("shm", "tcp"):
        fit = fits.hockney_fit(*_cols(labdata.table(role, lab_dir)))
        t[role] = float(fit.predict(LARGE_MESSAGE))
        spread[role] = float(np.median(np.abs(fit.relative_residuals))) * t[role]
    out["large_message_us"] = t
    out["large_message_transport"] = accepted(t, spread, best=min)
    return out


def _cols(table):
    return table["bytes"], table["t_usec"]


# --- interpretation questions: the options a student's own numbers support ---------------------

LARGE_MESSAGE = 1 << 20          # bytes: lab-transports' "large message" (1 MiB)


def accepted(values: dict, spread: dict, best=max) -> list[str]:
    """The options an interpretation question accepts: the best one by `values` (max or min),
    and every other option whose value is within the two options' spreads of it (too close to
    call on these runs). values, spread: option -> number (spread >= 0, same unit). Returns the
    accepted options, the best first."""
    top = best(values, key=values.get)
    return [top] + [o for o in values if o != top
                    and abs(values[o] - values[top]) <= spread.get(o, 0.0) + spread.get(top, 0.0)]


def _reference_scaling(lab_dir: Path) -> dict:
    import pandas as pd

    from hpclab.analysis import fits
    from hpclab.grading import labdata

    labdata.verify(lab_dir)
    rows = []
    for role in ("np1", "np2"):
        table = labdata.table(role, lab_dir)
        rows.append({"ranks": table["rank"].nunique(), "seconds": table.attrs["summary"]["wall_time"]})
    scaling = fits.scaling_table(pd.DataFrame(rows))
    two = labdata.table("np2", lab_dir)
    mpi = two[two["kind"] == "mpi"]
    one = labdata.table("np1", lab_dir)
    # interpretation: where did the second rank's seconds go? Rank-seconds the two-rank run spent
    # beyond the one-rank run, in compute and in MPI; the noise of the run's timers is the
    # difference between the red and the black half-sweep (the same work), summed over ranks
    # and both runs
    extra = {kind: float(two.loc[two["kind"] == kind, "seconds"].sum()
                         - one.loc[one["kind"] == kind, "seconds"].sum()) for kind in ("compute", "mpi")}
    noise = 0.0
    for table in (one, two):
        sweeps = table[table["phase"].isin(["red", "black"])].pivot_table(
            index="rank", columns="phase", values="seconds", aggfunc="sum").reindex(
            columns=["red", "black"], fill_value=0.0)
        noise += float((sweeps["red"] - sweeps["black"]).abs().sum())
    extra_named = {"compute": extra["compute"], "MPI": extra["mpi"]}
    return {"speedup": float(scaling["speedup"].iloc[-1]),
            "efficiency": float(scaling["efficiency"].iloc[-1]),
            "mpi_fraction": float(mpi["seconds"].sum()
                                  / two.groupby("rank")["rank_total"].first().sum()),
            "dominant_mpi_phase": str(mpi.groupby("phase")["seconds"].sum().idxmax()),
            "extra_seconds": extra_named, "timer_noise": noise,
            "look_first": accepted(extra_named, {"compute": noise / 2, "MPI": noise / 2})}


def _reference_imbalance(lab_dir: Path) -> dict:
    from hpclab.grading import labdata
    from hpclab.trace import load, mapping, split

    labdata.verify(lab_dir)
    parts = split.split(load.load_run(labdata.run_dir("traced", lab_dir), cache=False))
    counts = {name: mapping.internode_messages(8, 8, fn(8, 8, 4))
              for name, fn in (("linear", mapping.linear_mapping),
                               ("blocked", mapping.blocked_mapping))}
    best = min(counts, key=counts.get)
    # interpretation: the largest part after compute; the split cannot place the time the ranks
    # were switched out while computing (T_off_cpu), so parts closer than that are both accepted
    sizes = {"load imbalance": parts.T_load, "dependency": parts.T_depend, "transfer": parts.T_transfer}
    noise = float(parts.T_off_cpu) if parts.T_off_cpu > 0 else 0.0   # NaN or none: 0
    return {"T_load": parts.T_load * 1e-9, "T_depend": parts.T_depend * 1e-9,
            "T_transfer": parts.T_transfer * 1e-9, "ideal_speedup": parts.T_real / parts.T_ideal,
            "best_mapping": best, "best_internode": counts[best],
            "off_cpu": noise * 1e-9,
            "largest_part": accepted(sizes, {k: noise / 2 for k in sizes})}


PLACEMENT_ROLES = {"pitfall": ("pitfall-1", "pitfall-2"), "fix": ("fix-1", "fix-2")}


def _reference_placement(lab_dir: Path) -> dict:
    from hpclab.grading import labdata
    from hpclab.analysis import placement

    # each section of the lab packs its own runs: answers whose runs are not packed are left
    # out (their tests fail), the others are graded
    packed = labdata.verify(lab_dir)
    out: dict = {"binding": {}, "launcher": {}, "allowed": {}}
    for role in ("distinct", "unbound"):
        if role not in packed:
            continue
        run = labdata.runs([role], lab_dir)[0]
        spec = run.folder.spec()
        out["binding"][role] = {k: v for k, v in (spec.get("binding") or {}).items()
                                if v is not None and k != "report_bindings"}
        out["launcher"][role] = spec.get("launcher") or "srun"
        # rank -> allowed CPUs, as the kernel reported them (JSON keys are strings)
        out["allowed"][role] = {str(p["rank"]): sorted(p["allowed"]) for p in run.result()["placement"]}
    if {"distinct", "unbound"} <= set(packed):
        # interpretation: did binding pay off? Each run's whole-job Triad rate (best repetition),
        # and its own spread: from the rate of the average repetition to the best one
        best, spread = {}, {}
        for option, role in (("bound", "distinct"), ("unbound", "unbound")):
            triad = labdata.runs([role], lab_dir)[0].result()["results"]["kernels"]["Triad"]
            best[option] = float(triad["best_mb_s"])
            spread[option] = best[option] * (1 - triad["min_time"] / triad["avg_time"])
        out["triad_mb_s"] = best
        out["faster_placement"] = accepted(best, spread)
    pitfall_roles = [r for case in PLACEMENT_ROLES.values() for r in case]
    if not set(pitfall_roles) <= set(packed):
        return out
    runs = labdata.runs(pitfall_roles, lab_dir)
    table = placement.summary(placement.job_rates(runs))
    bad, good = placement.PITFALL_CASES[0].label, placement.PITFALL_CASES[1].label
    out["job_mb_s"] = {"pitfall": float(table.loc[bad, "job_mb_s_median"]),
                       "fix": float(table.loc[good, "job_mb_s_median"])}
    out["shared_cpu"] = {"pitfall": bool(table.loc[bad, "shared_cpu"]),
                         "fix": bool(table.loc[good, "shared_cpu"])}
    out["lost"] = float(placement.lost_fraction(table, bad, good))
    return out


REFERENCES = {"lab-transports": _reference_transports, "lab-scaling": _reference_scaling,
              "lab-imbalance": _reference_imbalance, "lab-placement": _reference_placement}


def reference(lab: str, lab_dir: str | Path = ".") -> dict:
    """Expected answers of a lab, recomputed from its packed runs by hpclab's analysis in a fresh
    Python process. Returns a dict (keys per lab; times in us, rates in MB/s, sizes in bytes).
    Raises HpclabError (AssertionError-free) when the data are missing or not a real run's."""
    if lab not in REFERENCES:
        raise HpclabError(f"no reference analysis for {lab!r}", f"labs: {', '.join(REFERENCES)}")
    key = (lab, str(Path(lab_dir).resolve()))
    if REFERENCE_CACHE is not None and key in REFERENCE_CACHE:
        return json.loads(REFERENCE_CACHE[key])
    proc = subprocess.run([sys.executable, "-I", "-m", "hpclab.grading.pipeline", "reference", lab,
                           str(Path(lab_dir).resolve())], capture_output=True, text=True,
                          timeout=300, env={k: v for k, v in os.environ.items()
                                            if not k.startswith("PYTHON")})
    if proc.returncode != 0:
        msg = (proc.stderr.strip().splitlines() or ["no output"])[-1]
        raise HpclabError(f"reference analysis of {lab} failed: {msg}",
                          "the packed run data must be complete and unmodified")
    if REFERENCE_CACHE is not None:
        REFERENCE_CACHE[key] = proc.stdout
    return json.loads(proc.stdout)


# The grader's check of a submission (hpclab.grading.answers) sets this to {}: one analysis per lab folder
REFERENCE_CACHE: dict | None = None


# --- the kernel nbgrader starts ------------------------------------------------------------------

def sandbox_kernel(connection_file: str) -> None:
    """Start ipykernel for nbgrader inside hpclab.grading.sandbox (the dedicated user, no network, only
    the submission's copy writable, resource limits); exits with the kernel's status."""
    from hpclab.grading import sandbox

    try:
        code = sandbox.run_kernel(connection_file)
    except HpclabError as exc:
        print(f"ERROR: {exc.what} ({exc.hint})", file=sys.stderr)
        code = 2
    sys.exit(code)


# --- the demo class ---------------------------------------------------------------------------------

def grade_demo() -> int:
    """Grade a simulated class end to end and print one line per student (score / max, expected).
    Returns 0 when every score is the expected one, 1 otherwise (HpclabError: 2 via the CLI)."""
    result = run_demo()
    for line in result["lines"]:
        print(line)
    print(f"course folder: {result['course']}; grades: {result['csv']}")
    return 0 if result["ok"] else 1


def main(argv: list[str] | None = None) -> int:
    """`python -m hpclab.grading.pipeline STEP ...`: the instructor pipeline, one command per step
    (init, release, collect, autograde, feedback, export, demo), plus the internal `reference`
    and `kernel` entry points. Errors print one line and exit 2."""
    import argparse

    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["kernel"] and len(argv) == 2:
        sandbox_kernel(argv[1])
    if argv == ["check"]:
        from hpclab.grading import answers

        return answers.check_main()
    p = argparse.ArgumentParser(prog="python -m hpclab.grading.pipeline",
                                description="grade hpclab labs with nbgrader (see grader/README.md)")
    sub = p.add_subparsers(dest="step", required=True)
    i = sub.add_parser("init", help="new course folder with the labs as nbgrader sources")
    i.add_argument("course")
    i.add_argument("labs", nargs="*", default=list(LABS))  # argparse: empty list -> default
    for name, helptext in (("release", "generate the student version of a lab"),
                           ("autograde", "execute and grade every collected submission"),
                           ("feedback", "HTML feedback per student")):
        q = sub.add_parser(name, help=helptext)
        q.add_argument("course")
        q.add_argument("lab")
        if name == "autograde":
            q.add_argument("--timeout", type=int, help="seconds per cell (default: config's)")
            q.add_argument("--unconfined", action="store_true",
                           help="no sandbox: only for your own test notebooks, never students'")
    c = sub.add_parser("collect", help="collect <student-id>.zip files (LMS download)")
    c.add_argument("course")
    c.add_argument("lab")
    c.add_argument("downloads", help="folder of <student-id>.zip")
    e = sub.add_parser("export", help="all grades as CSV (file must not exist)")
    e.add_argument("course")
    e.add_argument("csv")
    r = sub.add_parser("reference", help="expected answers of a lab from its packed data (JSON)")
    r.add_argument("lab")
    r.add_argument("lab_dir")
    sub.add_parser("demo", help="grade the simulated class, one line per student")
    a = p.parse_args(argv)
    try:
        if a.step == "reference":
            if a.lab not in REFERENCES:
                raise HpclabError(f"no reference analysis for {a.lab!r}", f"labs: {', '.join(REFERENCES)}")
            print(json.dumps(REFERENCES[a.lab](Path(a.lab_dir))))
        elif a.step == "init":
            print(init_course(a.course, a.labs))
        elif a.step == "release":
            print(release(a.course, a.lab))
        elif a.step == "collect":
            print("collected:", " ".join(collect(a.course, a.lab, a.downloads)))
        elif a.step == "autograde":
            autograde(a.course, a.lab, a.timeout, a.unconfined)
            for student, cells in sorted(cell_scores(a.course, a.lab).items()):
                got, mx = sum(v[0] for v in cells.values()), sum(v[1] for v in cells.values())
                print(f"{student:16s} {got:g} / {mx:g}")
            for student, flags in sorted(tampered_cells(a.course, a.lab).items()):
                print(f"{student}: changed locked cells: {flags}")
        elif a.step == "feedback":
            for f in feedback(a.course, a.lab):
                print(f)
        elif a.step == "export":
            print(f"{len(export(a.course, a.csv))} rows -> {a.csv}")
        elif a.step == "demo":
            return grade_demo()
    except HpclabError as exc:
        print(f"ERROR: {exc.what}" + (f" ({exc.hint})" if getattr(exc, "hint", None) else ""),
              file=sys.stderr)
        return 2
    return 0


# --- the simulated class ----------------------------------------------------------------------------
# Every student of the demo class packs the same real runs (made through hpclab.jobs.experiment on the
# cluster); they differ in what their notebook does. EXPECTED: the cells each one must lose.

DEMO_LAB = "lab-transports"
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
    # the hostile wing: each tries one way out of the sandbox, then answers right (HOSTILE)
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

# Each attempt prints "ATTEMPT <name>: blocked (...)" or "ATTEMPT <name>: SUCCEEDED (...)";
# run_demo also checks from outside (Slurm accounting, the sleeper's life, checksums, files).
# @NAME@ placeholders are filled in by run_demo.
HOSTILE = {
    "sbatch": r'''
import subprocess
_out = []
for _env in ({}, {"SLURM_CONF": "@STATE@/etc/slurm.conf"}):   # sbatch's default config, the cluster's
    try:
        _p = subprocess.run(["sbatch", "--job-name=@NONCE@", "--wrap", "id > /tmp/escaped"],
                            capture_output=True, text=True, timeout=4, env={"PATH": "/usr/bin:/bin", **_env})
        _out.append((_p.returncode, (_p.stdout + _p.stderr).strip()[-120:]))
    except Exception as _e:
        _out.append((-1, repr(_e)))
print("ATTEMPT sbatch:", "SUCCEEDED" if any(rc == 0 for rc, _ in _out) else "blocked", _out)
''',
    "signal": r'''
import os, signal
_out = []
for _pid in (@SLEEPER@, 1):
    try:
        os.kill(_pid, signal.SIGTERM)
        _out.append((_pid, "sent"))
    except OSError as _e:
        _out.append((_pid, _e.strerror))
print("ATTEMPT signal:", "SUCCEEDED" if any(r == "sent" for _, r in _out) else "blocked", _out)
''',
    "network": r'''
import socket
_out = []
for _addr in [("127.0.0.1", p) for p in (6917, 6918, 6919, 13306)] + [("10.213.0.1", 6917), ("1.1.1.1", 53)]:
    try:
        socket.create_connection(_addr, timeout=3).close()
        _out.append((_addr, "connected"))
    except OSError as _e:
        _out.append((_addr, _e.strerror or repr(_e)))
print("ATTEMPT network:", "SUCCEEDED" if any(r == "connected" for _, r in _out) else "blocked", _out)
''',
    "secrets": r'''
import glob, socket
_read = []
for _path in ["/etc/shadow", "/etc/slurm/slurm.conf", "@STATE@/etc/slurm.conf", "@STATE@/etc/db.password",
              *glob.glob("@DAEMON@/munge/*"), "/root/.bash_history", "/proc/1/environ"]:
    try:
        with open(_path, "rb") as _fh:
            _fh.read(1)
        _read.append(_path)
    except OSError:
        pass
try:
    _s = socket.socket(socket.AF_UNIX)
    _s.connect("@DAEMON@/munge/munge.socket")
    _read.append("munge.socket (connected)")
except OSError:
    pass
print("ATTEMPT secrets:", "SUCCEEDED" if _read else "blocked", "read:", _read)
''',
    "others": r'''
import glob, os
_read = []
for _pattern in ("@COURSE@/source/*/*.ipynb", "@COURSE@/gradebook.db", "@COURSE@/submitted/*/*/*.ipynb",
                 "@COURSE@/autograded/*/*/*.ipynb", "@COURSE@/students/*/*.ipynb", "@REPO@/labs/*/*.ipynb",
                 "../../*/lab-transports/*.ipynb", "../../../source/*/*.ipynb"):
    for _path in glob.glob(_pattern):
        if os.path.abspath(_path) == os.path.abspath("lab-transports.ipynb"):
            continue
        try:
            with open(_path, "rb") as _fh:
                _fh.read(1)
            _read.append(_path)
        except OSError:
            pass
print("ATTEMPT others:", "SUCCEEDED" if _read else "blocked", "read:", _read)
''',
    "write": r'''
import site, os
_targets = ["@COURSE@/HOSTILE", "@COURSE@/gradebook.db", "@COURSE@/source/lab-transports/lab-transports.ipynb",
            "@REPO@/hpclab/hostile.py", "@VENV_SITE@/hostile.pth", "@REPO@/labs/HOSTILE", "/etc/HOSTILE",
            "/var/tmp/HOSTILE", "/dev/shm/HOSTILE"]
_written = []
for _path in _targets:
    try:
        with open(_path, "a") as _fh:
            _fh.write("import os\n")
        _written.append(_path)
    except OSError:
        pass
with open("PLANTED", "w") as _fh:      # the working copy is writable, but only a copy
    _fh.write("x")
print("ATTEMPT write:", "SUCCEEDED" if _written else "blocked", "written:", _written)
''',
    "forkbomb": r'''
import os, time
_kids, _err = [], None
for _i in range(1000):
    try:
        _pid = os.fork()
    except OSError as _e:
        _err = _e
        break
    if _pid == 0:
        time.sleep(2)
        os._exit(0)
    _kids.append(_pid)
for _pid in _kids:
    os.waitpid(_pid, 0)
print("ATTEMPT forkbomb:", "blocked" if _err else "SUCCEEDED", f"({len(_kids)} processes, then {_err!r})")
''',
    "membomb": r'''
_chunks = []
for _i in range(48):                    # 3 GiB in 64 MiB pieces, every page touched
    _b = bytearray(64 << 20)
    _b[::4096] = b"\1" * len(range(0, 64 << 20, 4096))
    _chunks.append(_b)
print("ATTEMPT membomb: SUCCEEDED", len(_chunks) * 64, "MiB")
''',
    "patch": r'''
import builtins, math, numpy
from hpclab.grading import pipeline as grading
builtins.abs = lambda x: 0
math.isclose = lambda *a, **k: True
numpy.isclose = lambda *a, **k: True
numpy.allclose = lambda *a, **k: True
grading.reference = lambda lab, lab_dir=".": {"latency_us": latency_us, "bandwidth_mb_s": bandwidth_mb_s,
                                               "n_half_tcp": n_half_tcp, "unlabelled_transport": unlabelled_transport}
class _Anything(str):
    def __eq__(self, other):
        return True
    __hash__ = str.__hash__
unlabelled_transport = _Anything("neither")
print("ATTEMPT patch: patched abs, math.isclose, numpy.isclose, grading.reference; answer equal to anything")
''',
}

SNOOP = r'''
import glob, os
stolen, written = [], []
for pattern in ("../../../source/*/*.ipynb", "../../../gradebook.db", "../../../submitted/*/*/*.ipynb",
                "../../*/lab-transports/*.ipynb"):
    for path in glob.glob(pattern):
        try:
            if os.path.abspath(path) != os.path.abspath("lab-transports.ipynb") and open(path, "rb").read():
                stolen.append(path)
        except OSError:
            pass
for path in ("../../../gradebook.db", "../../../source/lab-transports/lab-transports.ipynb",
             "../../../SNOOP", "/work/main/labs/SNOOP", "../SNOOP", "SNOOP"):
    try:
        with open(path, "a") as fh:
            fh.write("owned")
        if "owned" in open(path).read():
            written.append(path)
    except OSError:
        pass
print("read:", stolen, "written:", written)
'''


def demo_runs(root: str | Path | None = None) -> dict[str, Path]:
    """The real pingpong runs the demo class uses: {role: run folder}, the latest completed run
    of experiment lab-transports per role under root (default runs/), made now on the local
    cluster through hpclab.jobs.experiment if missing."""
    from hpclab.runs import folder as runs_mod

    root = Path(root or paths.runs_dir())
    found: dict[str, Path] = {}
    for entry in runs_mod.index(root) if root.exists() else []:
        if (entry.get("experiment") == DEMO_LAB and entry.get("state") == "completed"
                and entry.get("label") in DEMO_ROLES):
            found[entry["label"]] = root / DEMO_LAB / entry["run_id"]
    missing = [r for r in DEMO_ROLES if r not in found]
    if missing:
        from hpclab.jobs import experiment

        specs = [{"experiment": DEMO_LAB, "kernel": "pingpong", "ntasks": 2, "label": role,
                  "mca": {"pml": "ob1", "btl": DEMO_ROLES[role]}, "args": {"max_bytes": 4194304}}
                 for role in missing]
        try:
            done = experiment.run(specs, progress=False, timeout=600, root=root)
        except HpclabError as exc:
            raise HpclabError(f"the demo class needs real pingpong runs: {exc.what}",
                              "start the cluster with `hpclab cluster up` and retry") from None
        for role, run in zip(missing, done):
            found[role] = run.path
    return found


def _answered(release_nb, source_nb):
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


def _student_notebook(kind: str, release_nb, source_nb, fill: dict | None = None):
    import copy

    if kind == "unchanged":
        return copy.deepcopy(release_nb)
    nb = _answered(release_nb, source_nb)
    if kind in ("wrong", "tamper"):
        _edit(nb, "fit", lambda s: s.replace("print(", 'latency_us["shm"] *= 1.5\nprint(', 1))
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
        _edit(nb, "fit", lambda s: SNOOP + "\n" + s)
    if kind in HOSTILE:
        code = HOSTILE[kind]
        for key, value in (fill or {}).items():
            code = code.replace(f"@{key}@", str(value))
        if kind == "patch":          # two wrong numbers (as "wrong"), then the patches
            _edit(nb, "fit", lambda s: s.replace("print(", 'latency_us["shm"] *= 1.5\nprint(', 1))
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
    from hpclab.grading import labdata

    path = labdata.run_dir("tcp", lab_dir) / "result.json"
    doc = json.loads(path.read_text())
    for row in doc["results"]["rows"]:
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
    writes, the runs the class packed, the lab sources, the package, the venv's site-packages
    top level (a .pth there would run in the grader), the cluster's configuration."""
    import site

    # the package: the modules the grader itself runs (other modules may be edited meanwhile)
    pkg = paths.package_dir()
    out = {"course": course, "labs": _labs_dir(),
           **{f"package:{m}": pkg / f"{m}.py" for m in ("__init__", "grading/__init__", "grading/pipeline",
                                                         "grading/answers", "grading/sandbox")},
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
        if name.startswith("site:"):       # top level only (tens of thousands of files below)
            out[name] = {str(p): _checksums(p).get(str(p), "") for p in sorted(root.glob("*"))
                         if p.is_file()}
        else:
            out[name] = _checksums(root, skip.get(name, ()))
    return out


def _slurm_jobs_named(name: str, since: str) -> list[str]:
    """Jobs with this name, or of the sandbox's user, in Slurm's accounting since `since`
    (sacct -S), and in the queue. Raises HpclabError when Slurm cannot be asked."""
    from hpclab.grading import sandbox

    found = []
    for cmd in (["sacct", "-a", "-X", "-n", "-P", "-S", since, "--name", name, "-o", "JobID,JobName,User"],
                ["sacct", "-X", "-n", "-P", "-S", since, "-u", sandbox.GRADER_USER, "-o", "JobID,JobName,User"],
                ["squeue", "-h", "-n", name, "-o", "%i %j %u"]):
        proc = subprocess.run(cmd, capture_output=True, text=True)
        if proc.returncode != 0 and "Invalid user" not in proc.stderr:
            raise HpclabError(f"{' '.join(cmd[:2])} failed: {proc.stderr.strip()}",
                              "the demo needs the local cluster (hpclab cluster up)")
        found += [l for l in proc.stdout.splitlines() if l.strip()]
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
    from hpclab.grading import sandbox

    out = {}
    for kind in [k for k in students if k in HOSTILE]:
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
             runs_root: str | Path | None = None) -> dict:
    """Run the simulated class through release, zip collect, autograde, feedback and export.

    course_dir: new folder (default build/grade-demo/<time>); students: kinds from EXPECTED_LOST
    (default all, the hostile wing included); timeout: seconds per cell while autograding;
    runs_root: where the class's real runs are found or made (default runs/). Returns {"course",
    "csv", "lines" (one per student), "scores" {student: (score, max)}, "expected" {student: score},
    "cells" (cell_scores), "flags" (tampered_cells), "feedback" [html files],
    "hostile" {kind: "" if blocked, else what got through}, "jobs" (Slurm jobs the class made:
    none expected), "changed" [guarded trees whose checksums changed], "autograde_s" (seconds),
    "ok" (every score as expected, every attempt blocked, nothing changed), "untouched"
    (nothing outside the submissions changed)}."""
    import time
    import uuid

    import nbformat

    from hpclab.grading import labdata

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
        autograde(course, DEMO_LAB, timeout=timeout)
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

if __name__ == "__main__":
    sys.exit(main())
