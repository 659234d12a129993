"""Profilers on the Poisson solver: perf and valgrind's callgrind, run as Slurm job steps and parsed.

Where do the solver's instructions and its time go? Two profilers, whichever the machine offers:

- perf (Debian package linux-perf): `perf stat` counts events, `perf record` samples where the
  program is. Virtual machines often hide the hardware counters (`perf stat -e instructions`
  prints "<not supported>"); the software clock (`cpu-clock`) still samples, which gives a time
  profile like VTune's basic "hotspots" analysis.
- valgrind's callgrind: counts every instruction executed, per function. Exact and repeatable
  (no sampling noise), but the program takes many times longer (native_seconds and slowdown
  measure how many). The valgrind of Debian 12
  (3.19) cannot decode AVX-512, so callgrind runs a copy of the solver compiled for x86-64-v3
  (AVX2) with debug information: build/profile/bin/poisson (`profiling_binary()`).

Each profile runs the solver on one rank as a one-task Slurm job step (srun words from the one
builder, hpclab.jobs.templates.step_argv), so it waits for a free core like any other job, and
keeps everything in a RunFolder of kind "profile", runs/_profiles/<experiment>/<id>/: the
command, stdout, stderr, the profiler's raw file and its text report, the solver's result.json.
Nothing is overwritten. (`slurm=False` runs the same command directly, for tests without a
cluster.) The parsers turn the profilers' text into tidy tables, and `phase_of` maps functions to
the solver's phases. The memory roofline is hpclab.analysis.roofline; its figure
hpclab.plots.roofline.
"""

from __future__ import annotations

import csv
import functools
import io
import json
import os
import re
import shutil
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from hpclab.analysis import phrases
from hpclab.core import commands, paths
from hpclab.core.errors import HpclabError
from hpclab.jobs import steps, templates
from hpclab.kernels import poisson as poisson_report
from hpclab.runs.folder import KINDS, RunFolder
from hpclab.site import profile as site_mod

PROFILE_ROOT = KINDS["profile"]  # under runs/: '_' keeps these folders out of the run index

# Flags of the profiling build: AVX2 at most (valgrind 3.19 cannot run AVX-512), -g for
# source-line attribution. Same -O3 as the production build, so the loops look alike.
PROFILE_OPTFLAGS = "-O3 -march=x86-64-v3 -g"

PERF_STAT_EVENTS = ("task-clock", "page-faults", "context-switches", "cpu-migrations",
                    "instructions", "cycles", "cache-misses")


# --------------------------------------------------------------------------------------------
# What the machine offers
# --------------------------------------------------------------------------------------------


@functools.lru_cache(maxsize=1)
def perf_status() -> dict:
    """Can perf run here? Returns {"installed", "version", "hardware_counters", "sampling",
    "detail"}: hardware_counters is True when `perf stat -e instructions true` counts
    instructions; sampling when `perf record -e cpu-clock true` writes samples."""
    out = {"installed": False, "version": None, "hardware_counters": False, "sampling": False,
           "detail": "perf is not installed (Debian: apt-get install linux-perf)"}
    if not shutil.which("perf"):
        return out
    res = commands.run(["perf", "--version"], "ask perf its version", timeout=30)
    if res is None or res.returncode != 0:
        # Debian's /usr/bin/perf is a wrapper that fails when no perf matches the kernel
        out["detail"] = "perf is installed but does not run: " + ((res.stderr or res.stdout).strip()[:200] if res else "no answer")
        return out
    out.update(installed=True, version=res.stdout.strip().removeprefix("perf version "))
    res = commands.run(["perf", "stat", "-x", ",", "-e", "instructions", "true"], "probe perf stat", timeout=30)
    text = (res.stderr if res else "") or ""
    out["hardware_counters"] = bool(res and res.returncode == 0 and re.search(r"^\d+,", text, re.M))
    tmp = paths.state_dir() / f"perf-probe-{os.getpid()}.data"
    res = commands.run(["perf", "record", "-q", "-e", "cpu-clock", "-o", str(tmp), "true"], "probe perf record",
                       timeout=30)
    out["sampling"] = bool(res and res.returncode == 0 and tmp.is_file())
    tmp.unlink(missing_ok=True)
    if out["hardware_counters"]:
        out["detail"] = "hardware counters available"
    elif out["sampling"]:
        out["detail"] = "no hardware counters (typical in a VM); software clock sampling works"
    else:
        out["detail"] = ("perf cannot sample here (check /proc/sys/kernel/perf_event_paranoid: "
                         + (Path("/proc/sys/kernel/perf_event_paranoid").read_text().strip()
                            if Path("/proc/sys/kernel/perf_event_paranoid").exists() else "?") + ")")
    return out


@functools.lru_cache(maxsize=1)
def valgrind_status() -> dict:
    """Can callgrind run here? Returns {"installed", "version", "annotate"} (annotate: the
    callgrind_annotate script is there too)."""
    out = {"installed": False, "version": None, "annotate": bool(shutil.which("callgrind_annotate"))}
    if shutil.which("valgrind"):
        res = commands.run(["valgrind", "--version"], "ask valgrind its version", timeout=30)
        if res and res.returncode == 0:
            out.update(installed=True, version=res.stdout.strip().removeprefix("valgrind-"))
    return out


def tools() -> pd.DataFrame:
    """One row per profiler: tool, available (bool), version, what it can do here."""
    p, v = perf_status(), valgrind_status()
    return pd.DataFrame([
        {"tool": "perf stat (hardware counters)", "available": p["hardware_counters"], "version": p["version"],
         "note": p["detail"]},
        {"tool": "perf record (cpu-clock sampling)", "available": p["sampling"], "version": p["version"],
         "note": "time profile: where the program is, sampled at a fixed frequency"},
        {"tool": "valgrind --tool=callgrind", "available": v["installed"] and v["annotate"],
         "version": v["version"], "note": "exact instruction counts per function; many times slower (notebook 06 measures it)"},
    ])


def profiling_binary(rebuild: bool = False) -> Path:
    """The solver built for callgrind: <output>/profile/bin/poisson (PROFILE_OPTFLAGS; output is
    build/, or a room student's own: paths.output_dir), made from src/poisson with the ordinary
    Makefile into its own folders. Built when missing, when `rebuild`, or when the sources are
    newer. Returns its path; HpclabError if make fails."""
    root, out = paths.repo(), paths.output_dir() / "profile"
    exe = out / "bin" / "poisson"
    sources = [*(root / "src" / "poisson").glob("*.[ch]"), *(root / "src" / "common").glob("*.[ch]")]
    fresh = exe.is_file() and all(s.stat().st_mtime <= exe.stat().st_mtime for s in sources)
    if fresh and not rebuild:
        return exe
    argv = ["make", "-s", "-C", str(root / "src" / "poisson"), f"BINDIR={exe.parent}",
            f"OBJDIR={out / 'obj' / 'poisson'}", f"OPTFLAGS={PROFILE_OPTFLAGS}"]
    res = commands.run(argv, "build the profiling copy of poisson", timeout=300)
    if res is None or res.returncode != 0 or not exe.is_file():
        msg = (res.stderr.strip().splitlines()[-1] if res and res.stderr.strip() else "make did not finish")
        raise HpclabError(f"could not build the profiling copy of poisson: {msg}",
                          f"run by hand to see the error: {' '.join(argv)}")
    return exe


# --------------------------------------------------------------------------------------------
# Running a profile
# --------------------------------------------------------------------------------------------


@dataclass
class Profile:
    """One profiled run of the solver.

    tool: "callgrind" or "perf record"; unit: what `functions` counts ("instructions" or
    "samples"); path: its folder; functions: one row per function (function, object, self,
    share of the total, and for callgrind inclusive); result: the solver's JSON report;
    seconds_per_sample: sampling period of perf [s] (None for callgrind)."""

    tool: str
    unit: str
    path: Path
    command: list[str]
    functions: pd.DataFrame
    result: dict
    seconds_per_sample: float | None = None
    meta: dict = field(default_factory=dict)

    @property
    def total(self) -> float:
        return float(self.functions["self"].sum())

    def top(self, k: int = 10) -> pd.DataFrame:
        """The k functions with the largest self count, with their solver phase."""
        t = self.functions.sort_values("self", ascending=False).head(k).copy()
        t["phase"] = [phase_of(f, o, fl) for f, o, fl in zip(t["function"], t["object"], _files(t))]
        t["object"] = t["object"].fillna("-")  # callgrind names no object for some inlined code
        cols = ["function", "object", "phase", "self", "share"] + (["inclusive"] if "inclusive" in t else [])
        return t[cols].reset_index(drop=True)

    def phases(self) -> pd.DataFrame:
        """Self counts summed per solver phase (see phase_of): phase, self, share (0..1)."""
        return solver_phases(self.functions)


def _new_folder(experiment: str) -> Path:
    return RunFolder.create_kind("profile", experiment).path


def _launch_prefix(slurm: bool, time_limit: str) -> tuple[list[str], dict]:
    """srun words for a one-task, one-core job step on the site, and the environment to use."""
    if not slurm:
        return [], dict(os.environ, OMP_NUM_THREADS="1")
    site = site_mod.load_site()
    if not shutil.which("srun"):
        raise HpclabError("srun is not installed here, so the profile cannot run as a Slurm job",
                          "install the Slurm client, or call with slurm=False to run on this machine")
    return (templates.step_argv(site, job_name="hpclab-profile", time=time_limit),
            templates.step_env(site))


def _solver_args(n: int, iters: int, extra_args) -> list[str]:
    if not isinstance(n, int) or isinstance(n, bool) or n < 2:
        raise HpclabError(f"grid size n={n!r} is not an integer >= 2", "e.g. n=256")
    if not isinstance(iters, int) or isinstance(iters, bool) or iters < 1:
        raise HpclabError(f"iters={iters!r} is not an integer >= 1", "e.g. iters=30")
    extra = [str(a) for a in (extra_args or [])]
    return ["--n", str(n), "--iters", str(iters), *extra, "--json", "result.json"]


def _run(folder: Path, argv: list[str], env: dict, timeout: float, tool: str) -> None:
    (folder / "command.txt").write_text(" ".join(argv) + "\n")
    try:
        code = steps.run_step(argv, folder, env, timeout, what=f"{tool} of poisson")
    except HpclabError as exc:
        raise HpclabError(exc.what, "profile a smaller grid (n) or fewer iterations (iters)") from None
    if code != 0:
        tail = (folder / "stderr").read_text(errors="replace").strip().splitlines()[-4:]
        hint = "read the stderr file in the folder"
        if argv[0] == "srun" and any("Unable to allocate" in line or "CANCELLED" in line or "Terminated" in line
                                     for line in tail):
            hint = ("Slurm ended or refused the job step (cancelled, or the cluster restarted): "
                    "check `hpclab cluster status` and run it again")
        elif any("Illegal instruction" in line or "unhandled instruction" in line for line in tail):
            hint = ("valgrind met an instruction it cannot decode (AVX-512?): profile the "
                    "binary from profiling_binary(), which is built for x86-64-v3")
        raise HpclabError(f"{tool} of poisson failed with exit code {code} (folder {folder}): "
                          + " | ".join(tail), hint)
    if not (folder / "result.json").is_file():
        raise HpclabError(f"{tool} of poisson wrote no result.json (folder {folder})",
                          "read the stdout and stderr files in the folder")


def _result(folder: Path) -> dict:
    doc = json.loads((folder / "result.json").read_text())
    if not doc.get("validation", {}).get("ok"):
        raise HpclabError(f"the profiled solver run did not validate: {doc.get('validation')}",
                          f"see {folder / 'stdout'}")
    return doc


def callgrind(n: int = 256, iters: int = 30, experiment: str = "06-hotspots", slurm: bool = True,
              extra_args=(), binary: str | Path | None = None, timeout: float = 600.0) -> Profile:
    """Count the instructions of one single-rank, single-thread solver run per function.

    n: grid points per side; iters: sweeps (fixed, so runs compare); extra_args: more solver
    flags (e.g. ["--exchange", "nonblocking"]); binary: default profiling_binary().
    Returns a Profile with unit "instructions" and self and inclusive counts per function.
    Raises HpclabError when valgrind is missing or the run fails."""
    st = valgrind_status()
    if not (st["installed"] and st["annotate"]):
        raise HpclabError("valgrind (with callgrind_annotate) is not installed",
                          "Debian: apt-get install valgrind (scripts/setup.sh does this)")
    exe = Path(binary) if binary else profiling_binary()
    folder = _new_folder(experiment)
    prefix, env = _launch_prefix(slurm, "00:15:00")
    argv = [*prefix, "valgrind", "--tool=callgrind", "--callgrind-out-file=callgrind.out",
            str(exe), *_solver_args(n, iters, extra_args)]
    _run(folder, argv, env, timeout, "callgrind")
    texts = {}
    for mode in ("no", "yes"):
        res = commands.run(["callgrind_annotate", "--threshold=100", f"--inclusive={mode}",
                            str(folder / "callgrind.out")], "annotate the callgrind profile", timeout=120)
        if res is None or res.returncode != 0:
            raise HpclabError(f"callgrind_annotate could not read {folder / 'callgrind.out'}",
                              "is the file complete? run the profile again")
        texts[mode] = res.stdout
        (folder / f"annotate-{'inclusive' if mode == 'yes' else 'self'}.txt").write_text(res.stdout)
    funcs = merge_self_inclusive(parse_callgrind_annotate(texts["no"]), parse_callgrind_annotate(texts["yes"]))
    return Profile("callgrind", "instructions", folder, argv, funcs, _result(folder),
                   meta={"n": n, "iters": iters, "binary": str(exe), "extra_args": [str(a) for a in extra_args]})


def native_seconds(profile: Profile, repetitions: int = 3, experiment: str = "06-hotspots", slurm: bool = True,
                   timeout: float = 600.0) -> list[float]:
    """The profiled run again without the profiler: the same binary and arguments as a plain
    one-task job step, `repetitions` times (one step each: an MPI program initialises once per
    step). Returns the solver's own solve time (result.json's wall_time, seconds) of each run;
    each run keeps its folder beside the profiles. timeout covers the wait in the queue."""
    exe = profile.meta.get("binary")
    if not exe:
        raise HpclabError("the profile does not name the binary it ran", "profile with callgrind() or perf_record()")
    if not isinstance(repetitions, int) or repetitions < 1:
        raise HpclabError(f"repetitions={repetitions!r}", "run the plain solver at least once")
    out = []
    for _ in range(repetitions):
        folder = _new_folder(experiment)
        prefix, env = _launch_prefix(slurm, "00:05:00")
        argv = [*prefix, str(exe), *_solver_args(profile.meta["n"], profile.meta["iters"],
                                                  profile.meta.get("extra_args"))]
        _run(folder, argv, env, timeout, "plain run")
        out.append(poisson_report.wall_time(_result(folder)))
    return out


def slowdown(profile: Profile, native: list[float]) -> str:
    """A sentence: how many times longer the profiled solve took than the same solve without the
    profiler (native: native_seconds()): one profiled run against the median of the plain runs,
    with their spread, as a factor and its order of magnitude (hpclab.analysis.phrases.ratio).
    A factor of this size needs no test: the plain runs' spread is a sliver of it."""
    profiled = poisson_report.wall_time(profile.result)
    plain = phrases.Spread.of(native)
    in_ms = phrases.Spread.of([v * 1e3 for v in native])
    return (f"Under {profile.tool} the solve took {profiled:.3g} s, without it {in_ms.text('ms')}: "
            f"{phrases.ratio(profiled, plain.median)}.")


def perf_record(n: int = 1024, iters: int = 40, frequency: int = 4000, experiment: str = "06-hotspots",
                slurm: bool = True, extra_args=(), binary: str | Path | None = None,
                timeout: float = 600.0) -> Profile:
    """Sample where one single-rank, single-thread solver run spends its time.

    Uses the cpu-clock software event (works without hardware counters) at `frequency` samples
    per second. binary: default build/bin/poisson (the production build). Returns a Profile with
    unit "samples"; seconds_per_sample = 1/frequency. HpclabError when perf cannot sample."""
    st = perf_status()
    if not st["sampling"]:
        raise HpclabError(f"perf cannot sample on this machine: {st['detail']}",
                          "use callgrind() instead (instruction counts instead of time)")
    if not isinstance(frequency, int) or not 1 <= frequency <= 20000:
        raise HpclabError(f"frequency={frequency!r} is not a sampling rate in 1..20000 Hz", "e.g. 4000")
    exe = Path(binary) if binary else paths.bin_dir() / "poisson"
    if not exe.is_file():
        raise HpclabError(f"{exe} does not exist", "build the kernels first: make -C src")
    folder = _new_folder(experiment)
    prefix, env = _launch_prefix(slurm, "00:10:00")
    argv = [*prefix, "perf", "record", "-q", "-e", "cpu-clock", "-F", str(frequency), "-o", "perf.data",
            "--", str(exe), *_solver_args(n, iters, extra_args)]
    _run(folder, argv, env, timeout, "perf record")
    res = commands.run(["perf", "report", "-i", str(folder / "perf.data"), "--stdio", "--no-children",
                        "--sort", "dso,sym", "-F", "overhead,sample,dso,sym", "-t", "\t"],
                       "read the perf profile", timeout=120)
    if res is None or res.returncode != 0:
        raise HpclabError(f"perf report could not read {folder / 'perf.data'}", "run the profile again")
    (folder / "perf-report.txt").write_text(res.stdout)
    funcs = parse_perf_report(res.stdout)
    return Profile("perf record", "samples", folder, argv, funcs, _result(folder),
                   seconds_per_sample=1.0 / frequency,
                   meta={"n": n, "iters": iters, "binary": str(exe), "frequency": frequency})


def perf_stat(n: int = 1024, iters: int = 40, events=PERF_STAT_EVENTS, experiment: str = "06-hotspots",
              slurm: bool = True, extra_args=(), timeout: float = 600.0) -> pd.DataFrame:
    """Count `events` over one single-rank solver run (`perf stat -x,`).

    Returns a DataFrame: event, value (None when not counted), unit, supported (False for
    "<not supported>": the hardware counter is hidden, e.g. in a VM), folder."""
    if not perf_status()["installed"]:
        raise HpclabError(perf_status()["detail"], "skip perf stat; callgrind() still counts instructions")
    exe = paths.bin_dir() / "poisson"
    folder = _new_folder(experiment)
    prefix, env = _launch_prefix(slurm, "00:10:00")
    argv = [*prefix, "perf", "stat", "-x", ",", "-o", "perf-stat.csv", "-e", ",".join(events),
            "--", str(exe), *_solver_args(n, iters, extra_args)]
    _run(folder, argv, env, timeout, "perf stat")
    table = parse_perf_stat(folder.joinpath("perf-stat.csv").read_text())
    table["folder"] = str(folder)
    return table


# --------------------------------------------------------------------------------------------
# Parsers (text in, tidy table out)
# --------------------------------------------------------------------------------------------

_ANNOTATE_ROW = re.compile(r"^\s*([\d,]+)\s+\(\s*[\d.]+%\)\s+(.+?)\s*$")


def parse_callgrind_annotate(text: str) -> pd.DataFrame:
    """Function rows of `callgrind_annotate` output (either --inclusive mode).

    Returns columns function, object (shared object or binary, None when not shown), file,
    count (instructions). A function listed under several files (inlined code) is summed.
    Raises HpclabError when the text holds no function rows."""
    rows = []
    in_functions = False
    for line in text.splitlines():
        if re.match(r"^Ir\s+file:function", line.strip()):
            in_functions = True
            continue
        if not in_functions:
            continue
        if line.startswith("-- ") or line.startswith("-- Auto-annotated"):
            break
        m = _ANNOTATE_ROW.match(line)
        if not m:
            continue
        count, rest = int(m.group(1).replace(",", "")), m.group(2)
        obj = None
        mo = re.match(r"^(.*) \[(.+)\]$", rest)
        if mo:
            rest, obj = mo.group(1), mo.group(2)
        file, sep, func = rest.partition(":")
        if not sep:
            file, func = "???", rest
        rows.append({"function": func, "object": obj, "file": file, "count": count})
    if not rows:
        raise HpclabError("no function rows found in the callgrind_annotate output",
                          "is this the output of callgrind_annotate on a complete callgrind.out?")
    df = pd.DataFrame(rows)
    agg = df.groupby("function", sort=False).agg(
        count=("count", "sum"), object=("object", lambda s: next((x for x in s if x), None)),
        file=("file", "first")).reset_index()
    return agg[["function", "object", "file", "count"]]


def merge_self_inclusive(self_rows: pd.DataFrame, incl_rows: pd.DataFrame) -> pd.DataFrame:
    """Join callgrind's self and inclusive tables: function, object, file, self, inclusive,
    share (self / total self)."""
    s = self_rows.rename(columns={"count": "self"})
    i = incl_rows[["function", "count"]].rename(columns={"count": "inclusive"})
    # an inlined function listed under two files sums its self counts; inclusive keeps the larger
    i = i.groupby("function", as_index=False)["inclusive"].max()
    out = s.merge(i, on="function", how="left")
    out["inclusive"] = out["inclusive"].fillna(out["self"]).astype("int64")
    out["share"] = out["self"] / out["self"].sum()
    return out.sort_values("self", ascending=False).reset_index(drop=True)


def parse_perf_report(text: str) -> pd.DataFrame:
    """Rows of `perf report --stdio -F overhead,sample,dso,sym -t '\\t'`.

    Returns function, object, kind ("kernel" or "user"), self (samples), share (0..1).
    Raises HpclabError when no sample rows are found."""
    rows = []
    for line in text.splitlines():
        if not line.strip() or line.startswith("#"):
            continue
        cols = [c.strip() for c in line.split("\t")]
        if len(cols) < 4 or not cols[0].endswith("%"):
            continue
        try:
            samples = int(cols[1])
        except ValueError:
            continue
        sym = cols[3]
        kind = "kernel" if sym.startswith("[k]") else "user"
        func = re.sub(r"^\[[k.gu]\]\s*", "", sym)
        rows.append({"function": func, "object": cols[2], "kind": kind, "self": samples})
    if not rows:
        raise HpclabError("no samples found in the perf report output",
                          "did perf record capture the program? look at perf-report.txt")
    df = pd.DataFrame(rows).groupby(["function", "object", "kind"], as_index=False)["self"].sum()
    df["share"] = df["self"] / df["self"].sum()
    return df.sort_values("self", ascending=False).reset_index(drop=True)


def parse_perf_stat(text: str) -> pd.DataFrame:
    """`perf stat -x,` output -> event, value (float, None if not counted), unit, supported."""
    rows = []
    for rec in csv.reader(io.StringIO(text)):
        if not rec or rec[0].startswith("#") or len(rec) < 3:
            continue
        value, unit, event = rec[0].strip(), rec[1].strip(), rec[2].strip()
        supported = not value.startswith("<")
        try:
            num = float(value) if supported else None
        except ValueError:
            continue
        rows.append({"event": event, "value": num, "unit": unit or None, "supported": supported})
    if not rows:
        raise HpclabError("no counter rows in the perf stat output", "look at perf-stat.csv in the folder")
    return pd.DataFrame(rows)


# --------------------------------------------------------------------------------------------
# From functions to the solver's phases
# --------------------------------------------------------------------------------------------

PHASES = ("red/black sweeps", "residuum", "halo copy", "MPI library", "set-up", "dynamic loader",
          "operating system", "other")

_MPI_OBJECTS = re.compile(r"lib(mpi|open-pal|open-rte|pmix|ucp|uct|ucs|ucm|hwloc|event|fabric|psm)|mca_")


def phase_of(function: str, obj: str | None, file: str | None = None) -> str:
    """Which part of the solver a function belongs to (one of PHASES).

    The OpenMP bodies sweep._omp_fn.* and residuum._omp_fn.* are the two compute loops; exchange
    packs and unpacks the halo; main._omp_fn.* and the sine of libm build the grid; the MPI
    and Open MPI libraries, the loader (ld-linux) and the kernel are named by their object."""
    f = function if isinstance(function, str) else ""
    o = obj if isinstance(obj, str) else ""  # pandas gives NaN for a missing object
    if f.startswith("sweep"):
        return "red/black sweeps"
    if f.startswith("residuum"):
        return "residuum"
    if f in ("exchange", "pack", "unpack"):
        return "halo copy"
    if f.startswith("main._omp_fn") or "libm." in o or f.startswith("__sin"):
        return "set-up"
    if _MPI_OBJECTS.search(o):
        return "MPI library"
    if "ld-linux" in o or (isinstance(file, str) and "/elf/" in file):  # loader code inlined elsewhere
        return "dynamic loader"
    if o.startswith("[kernel") or o == "[unknown]" and f.startswith("0xffff"):
        return "operating system"
    return "other"


def _files(table: pd.DataFrame) -> list:
    return list(table["file"]) if "file" in table else [None] * len(table)


def solver_phases(functions: pd.DataFrame) -> pd.DataFrame:
    """Sum a profile's self counts per phase: phase, self, share (0..1), in PHASES order."""
    if functions.empty:
        raise HpclabError("the profile has no functions", "profile a run that does some work")
    ph = functions.assign(phase=[phase_of(f, o, fl) for f, o, fl in
                                 zip(functions["function"], functions["object"], _files(functions))])
    out = ph.groupby("phase")["self"].sum().reindex(PHASES, fill_value=0).reset_index()
    out["share"] = out["self"] / out["self"].sum()
    return out


def per_update(profile: Profile) -> pd.DataFrame:
    """Instructions (callgrind) or seconds (perf) per lattice update for the two compute loops.

    A lattice update is one grid point in one iteration (the red and black sweeps together
    update each point once). Returns phase, per_update, unit."""
    n, it = profile.meta["n"], profile.meta["iters"]
    updates = float(n) * n * it
    ph = profile.phases().set_index("phase")["self"]
    scale = profile.seconds_per_sample or 1.0
    unit = "seconds" if profile.seconds_per_sample else profile.unit
    return pd.DataFrame([{"phase": p, "per_update": ph[p] * scale / updates, "unit": unit}
                         for p in ("red/black sweeps", "residuum")])


LOOP_PHASES = ("red/black sweeps", "residuum", "halo copy")


def loop_shares(profile: Profile) -> pd.Series:
    """Shares (0..1) of the solve loop's compute phases in a profile, LOOP_PHASES only, so
    start-up costs (MPI_Init, the loader, building the grid) do not dilute them."""
    ph = profile.phases().set_index("phase")["self"].reindex(LOOP_PHASES)
    if ph.sum() <= 0:
        raise HpclabError(f"the {profile.tool} profile has no samples in the solve loop",
                          "profile a larger grid or more iterations")
    return ph / ph.sum()


def timer_shares(result: dict) -> pd.Series:
    """The same shares from the solver's own timers (rank 0 of result.json): red + black,
    residuum, copy (halo packing) in seconds, normalised to 1."""
    try:
        comp = poisson_report.rank_compute(result, 0)
    except HpclabError:
        raise HpclabError("the result has no per-rank compute timers", "pass a poisson result.json") from None
    s = pd.Series({"red/black sweeps": comp["red"] + comp["black"], "residuum": comp["residuum"],
                   "halo copy": comp["copy"]}).reindex(LOOP_PHASES)
    return s / s.sum()


def annotated_source(profile: Profile, start: str, end: str, counted_only: bool = False) -> str:
    """callgrind's per-line instruction counts for a piece of the solver's source: the lines of
    annotate-self.txt from the first one containing `start` to the next one containing `end`
    (e.g. start="static double residuum(", end="MPI_Allreduce"); counted_only keeps only the lines
    that executed instructions (callgrind marks the others '.'). HpclabError if not found."""
    if profile.tool != "callgrind":
        raise HpclabError("source lines come from callgrind profiles only", "use profilers.callgrind()")
    lines = (profile.path / "annotate-self.txt").read_text(errors="replace").splitlines()
    first = next((i for i, line in enumerate(lines) if start in line), None)
    if first is None:
        raise HpclabError(f"no source line containing {start!r} in the annotation",
                          "was the profiled binary built with -g? (profiling_binary() is)")
    last = next((i for i in range(first + 1, len(lines)) if end in lines[i]), None)
    if last is None:
        raise HpclabError(f"no line containing {end!r} after {start!r}", "pick an end text further down")
    shown = lines[first:last + 1]
    if counted_only:
        shown = [line for line in shown if line.strip() and not line.lstrip().startswith(".")]
    return "\n".join(shown)


# --------------------------------------------------------------------------------------------
# Quoted from the seed (not measured here)
# --------------------------------------------------------------------------------------------

ITAC_2014 = "Intel, 'MPI Analysis' ITAC/VTune training, 2014 (seed 001_9a6db99896575e26)"


# VTune Amplifier XE 2015 "advanced hotspots", bottom-up view, MPI rank 0 of the 2D Poisson
# solver (3600 x 3600 grid, 384 ranks on 16 nodes of 2 x 12-core Xeon E5-2697 v2, Intel MPI 5.0).
# CPU time per function in milliseconds, as printed on the slide.
_SEED_HOTSPOTS = [("residuum", 57.917), ("MPIDI_CH3I_Progress", 54.947), ("red", 53.462),
                  ("__intel_ssse3_rep_memcpy", 47.522), ("black", 46.779)]


def seed_hotspots() -> pd.DataFrame:
    """The seed's top five hotspots of rank 0 (quoted, 2014): function, cpu_time_ms, source."""
    return pd.DataFrame([{"function": f, "cpu_time_ms": t, "source": ITAC_2014} for f, t in _SEED_HOTSPOTS])

