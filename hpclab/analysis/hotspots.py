"""Hotspots of the Poisson solver with open tools, and its bandwidth against STREAM.

Where do the solver's instructions and its time go? Two profilers, whichever the machine offers:

- perf (Debian package linux-perf): `perf stat` counts events, `perf record` samples where the
  program is. Virtual machines often hide the hardware counters (`perf stat -e instructions`
  prints "<not supported>"); the software clock (`cpu-clock`) still samples, which gives a time
  profile like VTune's basic "hotspots" analysis.
- valgrind's callgrind: counts every instruction executed, per function. Exact and repeatable
  (no sampling noise), but the program runs about 50 times slower. The valgrind of Debian 12
  (3.19) cannot decode AVX-512, so callgrind runs a copy of the solver compiled for x86-64-v3
  (AVX2) with debug information: build/profile/bin/poisson (`profiling_binary()`).

Each profile runs the solver on one rank as a one-task Slurm job step (srun), so it waits for a
free core like any other job, and keeps everything in runs/_profiles/<experiment>/<id>/: the
command, stdout, stderr, the profiler's raw file and its text report, the solver's result.json.
Nothing is overwritten. (`slurm=False` runs the same command directly, for tests without a
cluster.)

The second half is the memory roofline arithmetic: bytes one lattice update must move
(`traffic_model`), the bandwidth of the STREAM kernel whose real traffic (write-allocate counted)
has the same read:write mix (`memory_roof`), the best rate that bandwidth allows (`roofline`),
the cache sizes of the node a run used (`cache_sizes`) and the one size rule for "from memory":
a working set of at least 4x the last-level cache (`stream_elements`, `memory_resident_n`,
`residency`).
"""

from __future__ import annotations

import csv
import functools
import io
import os
import re
import shutil
import subprocess
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from hpclab.core import paths
from hpclab.core.errors import HpclabError

PROFILE_ROOT = "_profiles"  # under runs/: '_' keeps these folders out of the run index
# Flags of the profiling build: AVX2 at most (valgrind 3.19 cannot run AVX-512), -g for
# source-line attribution. Same -O3 as the production build, so the loops look alike.
PROFILE_OPTFLAGS = "-O3 -march=x86-64-v3 -g"
PERF_STAT_EVENTS = ("task-clock", "page-faults", "context-switches", "cpu-migrations",
                    "instructions", "cycles", "cache-misses")


# --------------------------------------------------------------------------------------------
# What the machine offers
# --------------------------------------------------------------------------------------------

def _quiet(argv: list[str], timeout: float = 30.0) -> subprocess.CompletedProcess | None:
    try:
        return subprocess.run(argv, capture_output=True, text=True, timeout=timeout)
    except (OSError, subprocess.TimeoutExpired):
        return None


@functools.lru_cache(maxsize=1)
def perf_status() -> dict:
    """Can perf run here? Returns {"installed", "version", "hardware_counters", "sampling",
    "detail"}: hardware_counters is True when `perf stat -e instructions true` counts
    instructions; sampling when `perf record -e cpu-clock true` writes samples."""
    out = {"installed": False, "version": None, "hardware_counters": False, "sampling": False,
           "detail": "perf is not installed (Debian: apt-get install linux-perf)"}
    if not shutil.which("perf"):
        return out
    res = _quiet(["perf", "--version"])
    if res is None or res.returncode != 0:
        # Debian's /usr/bin/perf is a wrapper that fails when no perf matches the kernel
        out["detail"] = "perf is installed but does not run: " + ((res.stderr or res.stdout).strip()[:200] if res else "no answer")
        return out
    out.update(installed=True, version=res.stdout.strip().removeprefix("perf version "))
    res = _quiet(["perf", "stat", "-x", ",", "-e", "instructions", "true"])
    text = (res.stderr if res else "") or ""
    out["hardware_counters"] = bool(res and res.returncode == 0 and re.search(r"^\d+,", text, re.M))
    tmp = paths.state_dir() / f"perf-probe-{os.getpid()}.data"
    res = _quiet(["perf", "record", "-q", "-e", "cpu-clock", "-o", str(tmp), "true"])
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
        res = _quiet(["valgrind", "--version"])
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
         "version": v["version"], "note": "exact instruction counts per function, ~50x slower"},
    ])


def profiling_binary(rebuild: bool = False) -> Path:
    """The solver built for callgrind: build/profile/bin/poisson (PROFILE_OPTFLAGS), made from
    src/poisson with the ordinary Makefile into its own folders. Built when missing, when
    `rebuild`, or when the sources are newer. Returns its path; HpclabError if make fails."""
    root = paths.repo()
    exe = root / "build" / "profile" / "bin" / "poisson"
    sources = [*(root / "src" / "poisson").glob("*.[ch]"), *(root / "src" / "common").glob("*.[ch]")]
    fresh = exe.is_file() and all(s.stat().st_mtime <= exe.stat().st_mtime for s in sources)
    if fresh and not rebuild:
        return exe
    argv = ["make", "-s", "-C", str(root / "src" / "poisson"), f"BINDIR={exe.parent}",
            f"OBJDIR={root / 'build' / 'profile' / 'obj' / 'poisson'}", f"OPTFLAGS={PROFILE_OPTFLAGS}"]
    res = _quiet(argv, timeout=300)
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
    from hpclab.runs.folder import new_run_id

    if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}", experiment):
        raise HpclabError(f"experiment name {experiment!r} is not usable as a folder name",
                          "use letters, digits, '.', '_' and '-', e.g. 06-hotspots")
    base = paths.runs_dir() / PROFILE_ROOT / experiment
    base.mkdir(parents=True, exist_ok=True)
    for _ in range(5):
        folder = base / new_run_id()
        try:
            folder.mkdir()  # fails if it exists: a profile folder is never reused
            return folder
        except FileExistsError:
            continue
    raise HpclabError(f"could not create a new profile folder under {base}", "try again")


def _launch_prefix(slurm: bool, time_limit: str) -> tuple[list[str], dict]:
    """srun words for a one-task, one-core job step on the site, and the environment to use."""
    env = dict(os.environ, OMP_NUM_THREADS="1")
    if not slurm:
        return [], env
    from hpclab.site import profile as site_mod
    from hpclab.site import slurm as slurm_mod

    site = site_mod.load_site()
    env = {**slurm_mod.slurm_env(), **{k: str(v) for k, v in site.env.items()}, "OMP_NUM_THREADS": "1"}
    if not shutil.which("srun"):
        raise HpclabError("srun is not installed here, so the profile cannot run as a Slurm job",
                          "install the Slurm client, or call with slurm=False to run on this machine")
    words = ["srun", "--ntasks=1", "--cpus-per-task=1", "--cpu-bind=cores", f"--mpi={site.srun_mpi}",
             f"--partition={site.default_partition}", f"--time={time_limit}",
             "--job-name=hpclab-profile", "--quiet"]
    if site.account:
        words.append(f"--account={site.account}")
    if site.qos:
        words.append(f"--qos={site.qos}")
    return words, env


def _solver_args(n: int, iters: int, extra_args) -> list[str]:
    if not isinstance(n, int) or isinstance(n, bool) or n < 2:
        raise HpclabError(f"grid size n={n!r} is not an integer >= 2", "e.g. n=256")
    if not isinstance(iters, int) or isinstance(iters, bool) or iters < 1:
        raise HpclabError(f"iters={iters!r} is not an integer >= 1", "e.g. iters=30")
    extra = [str(a) for a in (extra_args or [])]
    return ["--n", str(n), "--iters", str(iters), *extra, "--json", "result.json"]


# srun's allocation reply can be garbled when a stray connection (a busy machine's MPI jobs
# reusing ephemeral ports) reaches srun's listening socket first; the allocation never happened,
# so asking once more is safe.
_SRUN_GARBLED = ("Insane message length", "apparently being written to by something other than Slurm")


def _run(folder: Path, argv: list[str], env: dict, timeout: float, tool: str) -> None:
    (folder / "command.txt").write_text(" ".join(argv) + "\n")
    for attempt in (1, 2):
        try:
            with open(folder / "stdout", "w") as out, open(folder / "stderr", "w") as err:
                res = subprocess.run(argv, cwd=folder, env=env, stdout=out, stderr=err, timeout=timeout)
        except subprocess.TimeoutExpired:
            raise HpclabError(f"{tool} of poisson did not finish within {timeout:.0f} s (folder {folder})",
                              "profile a smaller grid (n) or fewer iterations (iters)") from None
        garbled = argv[0] == "srun" and res.returncode != 0 and any(
            g in (folder / "stderr").read_text(errors="replace") for g in _SRUN_GARBLED)
        if not (garbled and attempt == 1):
            break
        for name in ("stdout", "stderr"):  # keep the first attempt's output beside the second
            (folder / name).rename(folder / f"{name}.attempt-1")
    if res.returncode != 0:
        tail = (folder / "stderr").read_text(errors="replace").strip().splitlines()[-4:]
        hint = "read the stderr file in the folder"
        if argv[0] == "srun" and any("Unable to allocate" in line or "CANCELLED" in line or "Terminated" in line
                                     for line in tail):
            hint = ("Slurm ended or refused the job step (cancelled, or the cluster restarted): "
                    "check `hpclab cluster status` and run it again")
        elif any("Illegal instruction" in line or "unhandled instruction" in line for line in tail):
            hint = ("valgrind met an instruction it cannot decode (AVX-512?): profile the "
                    "binary from profiling_binary(), which is built for x86-64-v3")
        raise HpclabError(f"{tool} of poisson failed with exit code {res.returncode} (folder {folder}): "
                          + " | ".join(tail), hint)
    if not (folder / "result.json").is_file():
        raise HpclabError(f"{tool} of poisson wrote no result.json (folder {folder})",
                          "read the stdout and stderr files in the folder")


def _result(folder: Path) -> dict:
    import json

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
        res = _quiet(["callgrind_annotate", "--threshold=100", f"--inclusive={mode}",
                      str(folder / "callgrind.out")], timeout=120)
        if res is None or res.returncode != 0:
            raise HpclabError(f"callgrind_annotate could not read {folder / 'callgrind.out'}",
                              "is the file complete? run the profile again")
        texts[mode] = res.stdout
        (folder / f"annotate-{'inclusive' if mode == 'yes' else 'self'}.txt").write_text(res.stdout)
    funcs = merge_self_inclusive(parse_callgrind_annotate(texts["no"]), parse_callgrind_annotate(texts["yes"]))
    return Profile("callgrind", "instructions", folder, argv, funcs, _result(folder),
                   meta={"n": n, "iters": iters, "binary": str(exe)})


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
    res = _quiet(["perf", "report", "-i", str(folder / "perf.data"), "--stdio", "--no-children",
                  "--sort", "dso,sym", "-F", "overhead,sample,dso,sym", "-t", "\t"], timeout=120)
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


# --------------------------------------------------------------------------------------------
# Memory roofline
# --------------------------------------------------------------------------------------------

WORD = 8  # bytes per double


def traffic_model(fused: bool = False) -> pd.DataFrame:
    """Bytes per lattice update the solver must move between memory and the caches when the
    grid is far larger than the last-level cache, pass by pass.

    Assumes neighbouring rows stay in cache (3 rows of u, a few tens of kB) and counts whole
    arrays: a red (or black) sweep touches every cache line of u and f although it updates only
    every other point. u is read before it is written, so no write-allocate traffic. fused: the
    residuum is computed inside the black sweep (poisson --fuse), so its separate pass is gone.
    Returns pass, read_bytes, write_bytes, bytes (per lattice update)."""
    rows = [{"pass": "red sweep", "read_bytes": 2 * WORD, "write_bytes": WORD},
            {"pass": "black sweep" + (" + residuum" if fused else ""), "read_bytes": 2 * WORD, "write_bytes": WORD}]
    if not fused:
        rows.append({"pass": "residuum", "read_bytes": 2 * WORD, "write_bytes": 0})
    df = pd.DataFrame(rows)
    df["bytes"] = df["read_bytes"] + df["write_bytes"]
    return df


def bytes_per_update(fused: bool = False) -> int:
    """Total of traffic_model(fused): 64 bytes (48 fused) per lattice update."""
    return int(traffic_model(fused)["bytes"].sum())


def working_set_bytes(n: int) -> int:
    """Bytes of the two (n+2) x (n+2) double arrays (u and f) one rank holds for an n x n grid."""
    return 2 * (n + 2) * (n + 2) * WORD


# The roof is measured with a STREAM kernel whose *real* traffic (write-allocate counted) has the
# solver's mix of reads and writes, because one core's time here follows the lines it reads far
# more than the lines it writes back (compare Sum with Update in a STREAM report). Separate:
# 48 B read + 16 B written per update (3:1) = Triad with write-allocate (b, c and the allocated
# line of a read, a written: 24 + 8 B). Fused: 32 + 16 B (2:1) = Copy with write-allocate
# (a and the allocated line of c read, c written: 16 + 8 B).
ROOF_KERNEL = {"separate": "Triad", "fused": "Copy"}
# Bytes per element of each STREAM-like kernel: as its rate counts them (STREAM's convention) and
# as the core moves them with ordinary stores (read, write-allocate read, write).
_KERNEL_TRAFFIC = {  # function: (counted, read, written)
    "Copy": (16, 16, 8), "Scale": (16, 16, 8), "Add": (24, 24, 8), "Triad": (24, 24, 8),
    "Update": (16, 8, 8), "Sum": (8, 8, 0)}
# A working set at least this many times the last-level cache streams from memory (STREAM's rule
# for its arrays, used here for the STREAM arrays and the solver's grids alike).
MEMORY_FACTOR = 4


def stream_traffic(result: dict) -> pd.DataFrame:
    """Bytes per element and bandwidths of each kernel in one STREAM result (result.json).

    Returns function, counted_bytes (what the reported rate counts, STREAM's convention),
    read_bytes and write_bytes (what the core moves with ordinary stores: write-allocate reads
    each stored line first), moved_bytes (their sum), reported_mb_s (the kernel's best_mb_s),
    moved_mb_s = reported x moved / counted [MB/s, 10^6 B/s] and ns_per_element (the best
    repetition's time per element of one array, in ns). Older reports (no Update, Sum, no
    byte counts) give the four STREAM functions with the same byte counts."""
    try:
        kernels = result["results"]["kernels"]
    except (KeyError, TypeError):
        raise HpclabError("not a STREAM result: no results.kernels", "pass run.result() of a stream run") from None
    rows = []
    for name, (counted, read, written) in _KERNEL_TRAFFIC.items():
        if name not in kernels:
            continue
        k = kernels[name]
        counted = k.get("counted_bytes_per_element", counted)
        moved = k.get("moved_bytes_per_element", read + written)
        rows.append({"function": name, "counted_bytes": counted, "read_bytes": moved - written,
                     "write_bytes": written, "moved_bytes": moved, "reported_mb_s": k["best_mb_s"],
                     "moved_mb_s": k["best_mb_s"] * moved / counted,
                     "ns_per_element": counted / k["best_mb_s"] * 1e3})
    return pd.DataFrame(rows)


def memory_roof(stream_results: list[dict], fused: bool = False) -> dict:
    """The memory bandwidth the solver's traffic can get, from STREAM runs (their result.json).

    Uses ROOF_KERNEL (the kernel with the solver's read:write mix) and its moved bytes
    (write-allocate counted); the best run, since a roof is an upper bound and a disturbed run on
    a shared machine only ever lowers a rate. Returns kernel, moved_mb_s (the roof's bandwidth),
    reported_mb_s (the same run's rate as STREAM counts it), median_moved_mb_s, runs and
    array_bytes (bytes of one array, to check it against the caches)."""
    if not stream_results:
        raise HpclabError("no STREAM results for the memory roof", "run STREAM first (memory_roof_specs)")
    kernel = ROOF_KERNEL["fused" if fused else "separate"]
    tables = [stream_traffic(r).set_index("function") for r in stream_results]
    moved = pd.Series([t.loc[kernel, "moved_mb_s"] for t in tables])
    best = int(moved.idxmax())
    return {"kernel": kernel, "moved_mb_s": float(moved.max()),
            "reported_mb_s": float(tables[best].loc[kernel, "reported_mb_s"]),
            "median_moved_mb_s": float(moved.median()), "runs": len(tables),
            "array_bytes": int(stream_results[best]["results"]["bytes_per_array"])}


def alone_on_the_node(cores: int | None) -> dict:
    """Spec fields for one rank, one thread, that has the node to itself: the job asks for every
    core of the node (cpus_per_task), so no other job of the same experiment runs beside it and
    shares the memory bus and the last-level cache, and OpenMP binds the one thread to the first
    core of the rank's mask. cores: the partition's cores per node (None: 1)."""
    return {"cpus_per_task": max(1, int(cores or 1)), "binding": {"cpu_bind": "cores"},
            "omp": {"num_threads": 1, "proc_bind": "true", "places": "cores"}}


def roofline(lups: float, bandwidth_mb_s: float, fused: bool = False) -> dict:
    """Compare a measured rate with the memory roofline.

    lups: lattice updates per second; bandwidth_mb_s: bytes really moved per second [MB/s,
    10^6 B], memory_roof()["moved_mb_s"] (not STREAM's reported Triad, which leaves out the
    write-allocate read and so understates the bandwidth by 1/4).
    Returns bytes_per_update, achieved_gb_s (lups x bytes), bound_lups (bandwidth / bytes: the
    best rate the bandwidth allows) and fraction (lups / bound_lups)."""
    if bandwidth_mb_s <= 0 or lups <= 0:
        raise HpclabError(f"rates must be positive (lups={lups}, bandwidth={bandwidth_mb_s} MB/s)",
                          "pass the measured values from completed runs")
    b = bytes_per_update(fused)
    bound = bandwidth_mb_s * 1e6 / b
    return {"bytes_per_update": b, "achieved_gb_s": lups * b / 1e9, "bound_lups": bound,
            "fraction": lups / bound}


def last_level_cache(caches: pd.DataFrame) -> int:
    """Bytes of the largest cache level in cache_sizes()/node_caches() output (all its instances
    together: a shared L3 counts once, per-core L2s add up only if they are the last level)."""
    top = caches.sort_values("level").iloc[-1]
    return int(top["bytes"]) * int(top["count"])


def stream_elements(llc_bytes: int) -> int:
    """Doubles per STREAM array so that each array is at least MEMORY_FACTOR x the last-level
    cache (STREAM's own rule), rounded up to a whole million."""
    need = MEMORY_FACTOR * llc_bytes / WORD
    return int(-(-need // 1_000_000) * 1_000_000)


def residency(working_set: int, caches: pd.DataFrame) -> str:
    """Where a working set of `working_set` bytes (one rank) lives: "L1", "L2", "L3" (fits in
    that level of one core's share... of the node's caches), "memory" (at least MEMORY_FACTOR x
    the last-level cache: the memory roofline applies) or "partly cached" (between the
    last-level cache and MEMORY_FACTOR times it: part of each sweep still hits the cache)."""
    llc = last_level_cache(caches)
    if working_set >= MEMORY_FACTOR * llc:
        return "memory"
    for _, row in caches.sort_values("level").iterrows():
        if working_set <= row["bytes"]:
            return f"L{int(row['level'])}"
    return "partly cached"


def memory_resident_n(llc_bytes: int, ranks: int = 1) -> int:
    """The smallest square grid N (rounded up to a multiple of 256) whose per-rank working set
    (u and f, working_set_bytes) is at least MEMORY_FACTOR x the last-level cache when split
    over `ranks` ranks. The cache is shared by the ranks of a node, so the rule compares the
    node's working set with it."""
    need = MEMORY_FACTOR * llc_bytes / (2 * WORD)
    n = int(need ** 0.5) + 1
    return -(-n // 256) * 256


def node_caches() -> pd.DataFrame:
    """cache_sizes() of this machine, from `lstopo --of xml` run now."""
    from hpclab.site import topology

    text = topology._run([topology._lstopo(), "--of", "xml", "-"], 60.0)
    return _caches_from_xml(text, "lstopo --of xml")


def cache_sizes(run_path: str | Path) -> pd.DataFrame:
    """Data and unified cache sizes of the node a run used, from its provenance/lstopo-*.xml.

    Returns level (1, 2, 3), bytes (per cache), count (caches of that level on the node),
    one row per level. HpclabError when the run has no lstopo XML."""
    files = sorted(Path(run_path).glob("provenance/lstopo-*.xml"))
    if not files:
        raise HpclabError(f"no provenance/lstopo-*.xml in {run_path}", "use a run folder written by experiment.run")
    return _caches_from_xml(files[0].read_text(), str(files[0]))


def _caches_from_xml(text: str, source: str) -> pd.DataFrame:
    try:
        root = ET.fromstring(text)
    except ET.ParseError as exc:
        raise HpclabError(f"{source} is not valid XML: {exc}", "run the experiment again") from None
    rows = []
    for obj in root.iter("object"):
        t = obj.get("type", "")
        if t in ("L1Cache", "L2Cache", "L3Cache", "L4Cache") or (t == "Cache" and obj.get("cache_type") in ("0", "1")):
            size = int(obj.get("cache_size", "0"))
            level = int(obj.get("depth") or t[1])
            if size:
                rows.append({"level": level, "bytes": size})
    if not rows:
        raise HpclabError(f"{source} lists no caches", "hwloc could not see the caches of this node")
    df = pd.DataFrame(rows)
    return df.groupby("level").agg(bytes=("bytes", "max"), count=("bytes", "size")).reset_index()


# --------------------------------------------------------------------------------------------
# Comparing methods, repetitions, the roofline figure
# --------------------------------------------------------------------------------------------

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
        comp = result["results"]["per_rank"][0]["compute"]
    except (KeyError, IndexError, TypeError):
        raise HpclabError("the result has no per-rank compute timers", "pass a poisson result.json") from None
    s = pd.Series({"red/black sweeps": comp["red"] + comp["black"], "residuum": comp["residuum"],
                   "halo copy": comp["copy"]}).reindex(LOOP_PHASES)
    return s / s.sum()


def iters_for(n: int, updates: float) -> int:
    """Iterations giving about `updates` lattice updates on an n x n grid (at least 5), so runs
    of every size do the same work and last about as long."""
    return max(5, int(round(updates / (n * n))))


def spread(table: pd.DataFrame, by, value: str) -> pd.DataFrame:
    """min, median, max and count of `value` per group `by` (repetitions of one measurement)."""
    g = table.groupby(by)[value]
    return pd.DataFrame({"min": g.min(), "median": g.median(), "max": g.max(), "runs": g.size()})


def plot_roofline(table: pd.DataFrame, bandwidth_mb_s, caches: pd.DataFrame | None = None,
                  provenance=None):
    """Lattice updates per second against working set, with the memory roofline.

    table: one row per run with n, variant ("separate" or "fused"), lups. bandwidth_mb_s: the
    roof's bandwidth [MB/s of bytes really moved], one number or {variant: number} (memory_roof
    per variant). caches: cache_sizes() output, drawn as vertical lines, with the start of the
    memory-resident range (MEMORY_FACTOR x the last-level cache); left of it the roof does not
    apply. Returns a matplotlib Figure: medians as lines, every repetition as a dot, and for each
    variant the rate its byte count allows at that bandwidth (dashed)."""
    from hpclab.plots import figures as plots

    need = {"n", "variant", "lups"}
    if not need <= set(table.columns):
        raise HpclabError(f"plot_roofline needs columns {sorted(need)}, got {sorted(table.columns)}",
                          "build the table with one row per poisson run")
    fig = plots.new_figure(8.0, 4.6)
    ax = plots._styled(fig.add_subplot(1, 1, 1))
    colors = {"separate": "#08519c", "fused": "#d94801"}
    for variant, grp in table.groupby("variant"):
        fused = variant == "fused"
        c = colors.get(variant, "0.3")
        ws = grp["n"].map(working_set_bytes)
        ax.scatter(ws, grp["lups"] / 1e6, s=14, color=c, alpha=0.5)
        med = grp.groupby("n")["lups"].median() / 1e6
        ax.plot([working_set_bytes(n) for n in med.index], med.values, "-o", color=c, ms=4,
                label=f"{variant} residuum (median; dots: every run)")
        bw = bandwidth_mb_s[variant] if isinstance(bandwidth_mb_s, dict) else bandwidth_mb_s
        bound = bw / bytes_per_update(fused)  # MB/s / B = million updates/s
        ax.axhline(bound, color=c, ls="--", lw=1,
                   label=f"{ROOF_KERNEL[variant if fused else 'separate']} bytes moved / "
                         f"{bytes_per_update(fused)} B per update ({variant})")
    ax.set_xscale("log")
    ax.set_xlabel("working set of one rank: u and f with halo [bytes]")
    ax.set_ylabel("million lattice updates per second")
    ax.set_title("Poisson solver, 1 rank, 1 thread: measured rate against the memory roofline", loc="left")
    ax.set_ylim(0, ax.get_ylim()[1] * 1.08)  # room for the cache labels
    if caches is not None:
        for _, row in caches.iterrows():
            ax.axvline(row["bytes"], color="0.6", lw=0.8, ls=":")
            ax.text(row["bytes"], ax.get_ylim()[1], f" L{int(row['level'])}", fontsize=7, color="0.4",
                    va="top", ha="left")
        start = MEMORY_FACTOR * last_level_cache(caches)
        ax.axvspan(start, ax.get_xlim()[1], color="0.92", zorder=0)
        ax.text(start, ax.get_ylim()[1] * 0.93, f" memory-resident\n (>= {MEMORY_FACTOR}x last-level cache)",
                fontsize=7, color="0.3", va="top", ha="left")
    ax.legend(loc="lower left", fontsize=7, framealpha=0.9)
    plots.footnote(fig, provenance)
    return fig


def roof_table(rates: pd.DataFrame, stream_results: list[dict], caches: pd.DataFrame) -> pd.DataFrame:
    """The solver's rates against the memory roof, per grid size and variant.

    rates: poisson_rates() rows; stream_results: result.json of the STREAM runs; caches:
    cache_sizes(). Returns one row per (n, variant): min, median, max, runs (lattice updates/s),
    working_set [B], where it lives (residency: L1/L2/L3, partly cached, memory), roof_lups
    (memory_roof bandwidth / bytes per update) and share (median / roof_lups). The share is a
    fraction of the *memory* roof only where residency is "memory"; elsewhere the bytes partly come
    from cache and the column is labelled as such (share may exceed 1 there)."""
    table = spread(rates, ["n", "variant"], "lups")
    roofs = {v: memory_roof(stream_results, fused=(v == "fused")) for v in ("separate", "fused")}
    rows = []
    for (n, v), row in table.iterrows():
        ws = working_set_bytes(n)
        bound = roofline(row["median"], roofs[v]["moved_mb_s"], fused=(v == "fused"))
        rows.append({"n": n, "variant": v, **row.to_dict(), "working_set": ws,
                     "residency": residency(ws, caches), "roof_lups": bound["bound_lups"],
                     "share": bound["fraction"]})
    return pd.DataFrame(rows).set_index(["n", "variant"])


def roofline_fidelity(rates: pd.DataFrame, stream_results: list[dict], caches: pd.DataFrame) -> dict:
    """The fidelity row "roofline": the seed's claim (the solver is bound by STREAM bandwidth,
    about 80 GB/s on its node) against ours: the largest memory-resident grid's share of the roof
    (separate residuum), with the roof's bandwidth both as STREAM reports it and as moved.
    Returns seed, here (text), share, reported_share (the old, write-allocate-blind figure),
    reproduced ("yes"/"partly"/"no") and why: here, reproduced and why are the arguments of
    hpclab.course.fidelity.make_row("roofline", ...)."""
    t = roof_table(rates, stream_results, caches).reset_index()
    mem = t[(t["residency"] == "memory") & (t["variant"] == "separate")]
    if mem.empty:
        raise HpclabError("no memory-resident grid among the runs",
                          f"run a grid of at least memory_resident_n(LLC) = "
                          f"{memory_resident_n(last_level_cache(caches))}")
    row = mem.sort_values("n").iloc[-1]
    roof = memory_roof(stream_results)
    reported = row["median"] / (roof["reported_mb_s"] * 1e6 / bytes_per_update())
    return {"seed": f"solver memory-bound; STREAM ~{SEED_STREAM_GB_S:.0f} GB/s on a 2-socket Ivy Bridge (quoted)",
            "here": (f"n={int(row['n'])}: {row['median'] / 1e6:.0f} M updates/s = {row['share']:.0%} of "
                     f"{roof['moved_mb_s'] / 1e3:.1f} GB/s moved by {roof['kernel']} "
                     f"({reported:.0%} if divided by STREAM's reported rate)"),
            "share": float(row["share"]), "reported_share": float(reported),
            "reproduced": "partly",
            "why": (("no memory-resident run is above the roof" if (t.loc[t["residency"] == "memory", "max"]
                                                                  <= t.loc[t["residency"] == "memory", "roof_lups"]).all()
                     else "a memory-resident run is above the roof: check the STREAM runs") +
                    f"; the solver stays at "
                    f"{row['share']:.0%} of it; dividing by STREAM's reported rate, which leaves out Triad's "
                    f"write-allocate read, would have said {reported:.0%}")}


# --------------------------------------------------------------------------------------------
# Quoted from the seed (not measured here)
# --------------------------------------------------------------------------------------------

ITAC_2014 = "Intel, 'MPI Analysis' ITAC/VTune training, 2014 (seed 001_9a6db99896575e26)"

# VTune Amplifier XE 2015 "advanced hotspots", bottom-up view, MPI rank 0 of the 2D Poisson
# solver (3600 x 3600 grid, 384 ranks on 16 nodes of 2 x 12-core Xeon E5-2697 v2, Intel MPI 5.0).
# CPU time per function in milliseconds, as printed on the slide.
_SEED_HOTSPOTS = [("residuum", 57.917), ("MPIDI_CH3I_Progress", 54.947), ("red", 53.462),
                  ("__intel_ssse3_rep_memcpy", 47.522), ("black", 46.779)]
# "the bandwidth that is delivered by the STREAM benchmark (~80GB/s on IVB dual Socket)"
SEED_STREAM_GB_S = 80.0


def seed_hotspots() -> pd.DataFrame:
    """The seed's top five hotspots of rank 0 (quoted, 2014): function, cpu_time_ms, source."""
    return pd.DataFrame([{"function": f, "cpu_time_ms": t, "source": ITAC_2014} for f, t in _SEED_HOTSPOTS])


def poisson_rates(runs) -> pd.DataFrame:
    """One row per completed poisson run (hpclab.jobs.experiment.Run): run_id, n, iterations,
    variant ("fused" when run with --fuse, else "separate"), lups (lattice updates per second),
    wall_time [s], and the residual history (a tuple, for exact comparisons)."""
    rows = []
    for r in runs:
        doc = r.result()
        res = doc["results"]
        rows.append({"run_id": r.run_id, "n": res["n"], "iterations": res["iterations"],
                     "variant": "fused" if res.get("fuse") else "separate",
                     "lups": res["lattice_updates_per_sec"], "wall_time": res["wall_time"],
                     "host": (doc.get("placement") or [{}])[0].get("host"),
                     "history": tuple(res["residual_history"])})
    if not rows:
        raise HpclabError("no poisson runs given", "pass the runs returned by experiment.run")
    return pd.DataFrame(rows)


def same_answers(rates: pd.DataFrame) -> pd.DataFrame:
    """Per grid size: do all runs (both variants, all repetitions) have the identical residual
    history? Returns n, runs, identical (bool)."""
    out = rates.groupby("n")["history"].agg(runs="size", identical=lambda h: len(set(h)) == 1)
    return out.reset_index()


def annotated_source(profile: Profile, start: str, end: str) -> str:
    """callgrind's per-line instruction counts for a piece of the solver's source: the lines of
    annotate-self.txt from the first one containing `start` to the next one containing `end`
    (e.g. start="static double residuum(", end="MPI_Allreduce"). HpclabError if not found."""
    if profile.tool != "callgrind":
        raise HpclabError("source lines come from callgrind profiles only", "use hotspots.callgrind()")
    lines = (profile.path / "annotate-self.txt").read_text(errors="replace").splitlines()
    first = next((i for i, line in enumerate(lines) if start in line), None)
    if first is None:
        raise HpclabError(f"no source line containing {start!r} in the annotation",
                          "was the profiled binary built with -g? (profiling_binary() is)")
    last = next((i for i in range(first + 1, len(lines)) if end in lines[i]), None)
    if last is None:
        raise HpclabError(f"no line containing {end!r} after {start!r}", "pick an end text further down")
    return "\n".join(lines[first:last + 1])
