"""Compare the course's kernels with the reference benchmarks the kernels issue names.

    HPCLAB_STREAM_REF=/path/to/stream.c HPCLAB_IMB_SRC=/path/to/mpi-benchmarks \
        .venv/bin/python bench/references.py [--runs 5]

Neither reference is packaged by Debian or PyPI, and none is shipped with the course (their
licences and our rule: the course's code is its own). Point these variables at copies you have:
- HPCLAB_STREAM_REF: McCalpin's stream.c (5.10). It is compiled with exactly the compile line
  baked into build/bin/stream (its `build_flags`), the same array size and repetitions, and run
  with the same threads and binding. Goal: our Triad >= 0.98x the reference's.
- HPCLAB_IMB_SRC: a checkout of the Intel MPI Benchmarks (github.com/intel/mpi-benchmarks, BSD
  licence). IMB-MPI1 is built from it with every MPI library installed here (its own mpicc and
  mpicxx, into build/bench/imb/<library>/), and each library's ping-pong (build/<library>/bin) runs
  beside the IMB built with the same library: 2 ranks bound to cores, started by the library's own
  launcher, under each transport the library's record selects (hpclab.site.mpi_libraries,
  `transports`). Goal: latency <= 1.05x and bandwidth >= 0.95x of IMB's. Bandwidth is recomputed
  from bytes / t for both (IMB versions disagree on whether a Mbyte is 10^6 or 2^20 bytes); the
  table gives the 4 MiB message's and the peak over all sizes.
  The same IMB-MPI1 times MPI_Allreduce, MPI_Bcast and MPI_Alltoall beside the course's
  collectives kernel (build/<library>/bin/collectives; IMB's repetition rule, 2 ranks, the
  library's default algorithms) at COLL_SIZES: goal, the slowest rank's time (IMB's t_max) within
  5 % of IMB's either way (hpclab.analysis.stats.decide: "no difference larger than 5 %"). IMB's
  Bcast moves its root from call to call, the kernel's stays at rank 0.
Every comparison is paired: ours and the reference alternate, `runs` times each (6 at least: the
fewest paired runs that can reach 95 %), so a noisy neighbour hits both. The table shows min /
median / max of each side and the ratio ours / reference with its 95 % CI (Hodges-Lehmann with the
exact Wilcoxon signed-rank CI, hpclab.analysis.stats.ratio_ci): a goal is met when the whole CI
lies on its good side, missed when the whole CI lies on its bad side; otherwise these runs cannot
tell.
Writes build/bench/references.{md,json} (an earlier report is kept, renamed).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from bench.kernels import env as run_env, fmt, keep_earlier, run_kernel, stats  # noqa: E402
from hpclab.analysis.stats import LEVEL, decide, min_runs, ratio_ci  # noqa: E402
from hpclab.core import paths  # noqa: E402
from hpclab.core.errors import HpclabError  # noqa: E402

STREAM_SIZE = 20_000_000   # doubles per array: 160 MB, far above any last-level cache here
STREAM_REPS = 10           # STREAM 5.10's NTIMES default
STREAM_CONFIGS = [("1 thread", 1, {}),
                  ("2 threads, OMP_PROC_BIND=close OMP_PLACES=cores", 2,
                   {"OMP_PROC_BIND": "close", "OMP_PLACES": "cores"})]
GOALS = {"stream_triad": 0.98, "latency": 1.05, "bandwidth": 0.95}


def checked(cmd: list[str], env: dict, what: str) -> str:
    p = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=900)
    if p.returncode != 0:
        tail = (p.stderr or p.stdout).strip().splitlines()[-1:] or [""]
        raise HpclabError(f"{what} failed (exit {p.returncode}): {tail[0]}",
                          f"run it by hand: {shlex.join(cmd)}")
    return p.stdout


# --- STREAM ------------------------------------------------------------------------------

def parse_stream_reference(text: str) -> float:
    """Best Triad rate in MB/s from STREAM 5.10's output; its validation must have passed."""
    if "Solution Validates" not in text:
        raise HpclabError("the STREAM reference did not validate its arrays",
                          "check the copy of stream.c and the array size")
    m = re.search(r"^Triad:\s+([0-9.]+)", text, re.M)
    if not m:
        raise HpclabError("no 'Triad:' line in the STREAM reference's output",
                          "is HPCLAB_STREAM_REF really McCalpin's stream.c?")
    return float(m.group(1))


def build_stream_reference(src: Path, out_dir: Path, build_flags: str) -> Path:
    exe = out_dir / "stream-reference"
    cmd = [*shlex.split(build_flags), f"-DSTREAM_ARRAY_SIZE={STREAM_SIZE}",
           f"-DNTIMES={STREAM_REPS}", "-mcmodel=medium", "-o", str(exe), str(src)]
    checked(cmd, run_env(1), "compiling the STREAM reference")
    return exe


def compare_stream(src: Path, out_dir: Path, runs: int) -> list[dict]:
    probe = run_kernel("stream", ["--size", "1000000", "--reps", "2"], out_dir / "probe.json")
    flags = probe["config"]["build_flags"]
    exe = build_stream_reference(src, out_dir, flags)
    rows = []
    for label, threads, omp in STREAM_CONFIGS:
        ours, ref = [], []
        for i in range(runs):
            doc = run_kernel("stream", ["--size", str(STREAM_SIZE), "--reps", str(STREAM_REPS)],
                             out_dir / f"stream-{threads}-{i}.json", threads=threads, omp=omp)
            ours.append(doc["results"]["kernels"]["Triad"]["best_mb_s"])
            text = checked([str(exe)], run_env(threads, omp), "the STREAM reference")
            (out_dir / f"stream-reference-{threads}-{i}.txt").write_text(text)
            ref.append(parse_stream_reference(text))
        rows.append({"config": label, "build_flags": flags, "array_elements": STREAM_SIZE,
                     "ours_triad_mb_s": stats(ours), "reference_triad_mb_s": stats(ref),
                     "ratio": judge(ours, ref, GOALS["stream_triad"], higher_is_better=True)})
        print(f"  stream {label}: done", flush=True)
    return rows


# --- IMB PingPong --------------------------------------------------------------------------

def parse_imb_pingpong(text: str) -> list[dict]:
    """Rows (bytes, repetitions, t_usec) of the PingPong table in IMB-MPI1's output."""
    rows, inside = [], False
    for line in text.splitlines():
        if "Benchmarking PingPong" in line:
            inside = True
            continue
        if not inside:
            continue
        fields = line.split()
        if fields and fields[0].isdigit() and len(fields) >= 3:
            rows.append({"bytes": int(fields[0]), "repetitions": int(fields[1]),
                         "t_usec": float(fields[2])})
        elif rows and (not fields or line.startswith("#")):
            break
    if not rows:
        raise HpclabError("no PingPong table in IMB's output",
                          "run it by hand: mpirun -np 2 IMB-MPI1 PingPong")
    return rows


def latency_and_bandwidth(rows: list[dict]) -> tuple[float, float]:
    """t(0 B) in usec, or of the smallest size, and the peak of bytes / t in MB/s (10^6)."""
    first = min(rows, key=lambda r: r["bytes"])
    return first["t_usec"], max(r["bytes"] / r["t_usec"] for r in rows if r["t_usec"] > 0)


def build_imb(source: Path, lib, out_dir: Path) -> Path:
    """IMB-MPI1 built from `source` with library `lib`'s wrappers in out_dir/<library>/ (kept:
    built once). Their C++ bindings are skipped: IMB does not use them, and Debian's Open MPI 4.1
    headers fail IMB's -Werror."""
    tree = out_dir / lib.name
    exe = tree / "IMB-MPI1"
    if exe.is_file():
        return exe
    if not (source / "src_cpp" / "Makefile").is_file():
        raise HpclabError(f"{source} is no Intel MPI Benchmarks checkout (no src_cpp/Makefile)",
                          "git clone https://github.com/intel/mpi-benchmarks and point HPCLAB_IMB_SRC at it")
    if tree.exists():
        shutil.rmtree(tree)
    shutil.copytree(source, tree, ignore=shutil.ignore_patterns(".git"))
    checked(["make", "-C", str(tree), "-j2", "IMB-MPI1", f"CC={lib.bindir / 'mpicc'}", f"CXX={lib.bindir / 'mpicxx'}",
             "CPPFLAGS=-DOMPI_SKIP_MPICXX=1 -DMPICH_SKIP_MPICXX=1"], {**run_env(1), **lib.environment()},
            f"building IMB-MPI1 with {lib.name}")
    return exe


def latency_and_4mib(rows: list[dict]) -> tuple[float, float, float]:
    """t(0 B) in usec (or of the smallest size), bytes / t of the 4 MiB message and the peak over
    all sizes, in MB/s (10^6)."""
    latency, peak = latency_and_bandwidth(rows)
    four = next((r for r in rows if r["bytes"] == 4 << 20), None)
    if four is None:
        raise HpclabError("no 4 MiB message in the ping-pong's rows", "run it with --max-bytes 4194304")
    return latency, four["bytes"] / four["t_usec"], peak


def _libraries_with_imb(imb_src: Path, only: list[str] | None, binary: str, rows: list[dict], key: str):
    """(library, our binary, IMB-MPI1 built with it) for each installed MPI library (or each of
    `only`); a library without our binary, or whose IMB does not build, gets a row saying so in
    `rows` (`key`: the row's other column, "-") instead."""
    from hpclab.site import mpi_libraries

    for lib in [mpi_libraries.get(name) for name in only] if only else mpi_libraries.LIBRARIES:
        ours_exe = mpi_libraries.build_dirs(None if lib.requirement is None else lib.name)[0] / binary
        if not lib.installed() or not ours_exe.is_file():
            rows.append({"library": lib.name, key: "-", "error": f"not installed ({lib.mpicc} or {ours_exe} "
                         "missing): make setup installs it"})
            continue
        try:
            imb = build_imb(imb_src, lib, paths.build_dir() / "bench" / "imb")
        except HpclabError as e:
            rows.append({"library": lib.name, key: "-", "error": e.what})
            continue
        yield lib, ours_exe, imb


def compare_pingpong(imb_src: Path, out_dir: Path, runs: int, only: list[str] | None = None) -> list[dict]:
    """One row per installed MPI library (or each of `only`) and transport: our ping-pong built
    with it against IMB built with it, alternating run by run."""
    from hpclab.kernels import pingpong

    rows = []
    for lib, ours_exe, imb in _libraries_with_imb(imb_src, only, "pingpong", rows, "transport"):
        for sel in lib.transports:
            env = {**run_env(1, dict(sel.env)), **lib.environment()}
            launch = lib.standalone_argv(2)
            got = {"ours": [], "imb": []}
            try:
                for i in range(runs):
                    tag = f"{lib.name}-{len(rows)}-{i}"
                    out = out_dir / f"pingpong-{tag}.json"
                    checked([*launch, str(ours_exe), "--max-bytes", str(4 << 20), "--no-check", "--json", str(out)],
                            env, f"the ping-pong of {lib.name} ({sel.label})")
                    got["ours"].append(latency_and_4mib(pingpong.message_rows(json.loads(out.read_text()), str(out))))
                    text = checked([*launch, str(imb), "PingPong", "-msglog", "22"], env,
                                   f"IMB-MPI1 PingPong of {lib.name} ({sel.label})")
                    (out_dir / f"imb-{tag}.txt").write_text(text)
                    got["imb"].append(latency_and_4mib(parse_imb_pingpong(text)))
            except HpclabError as e:
                rows.append({"library": lib.name, "transport": sel.label, "error": e.what})
                continue
            col = lambda who, k: [m[k] for m in got[who]]  # noqa: E731
            ratio = lambda k, goal, higher: judge(col("ours", k), col("imb", k), goal, higher)  # noqa: E731
            rows.append({"library": lib.name, "transport": sel.label, "disables": sel.disables,
                         "env": " ".join(f"{k}={v}" for k, v in sel.env) or "(none)",
                         "ours_latency_usec": stats(col("ours", 0)), "imb_latency_usec": stats(col("imb", 0)),
                         "latency_ratio": ratio(0, GOALS["latency"], False),
                         "ours_4mib_mb_s": stats(col("ours", 1)), "imb_4mib_mb_s": stats(col("imb", 1)),
                         "bandwidth_ratio": ratio(1, GOALS["bandwidth"], True),
                         "ours_peak_mb_s": stats(col("ours", 2)), "imb_peak_mb_s": stats(col("imb", 2)),
                         "peak_ratio": ratio(2, GOALS["bandwidth"], True)})
            print(f"  pingpong {lib.name} {sel.label}: done", flush=True)
    return rows


# --- IMB Allreduce, Bcast, Alltoall ---------------------------------------------------------

COLL_OPS = {"allreduce": "Allreduce", "bcast": "Bcast", "alltoall": "Alltoall"}
COLL_SIZES = (8, 1024, 65536, 1 << 20, 4 << 20)   # bytes per rank (Alltoall: per destination)
COLL_MARGIN = 0.05


def parse_imb_collective(text: str, name: str) -> dict[int, float]:
    """{bytes: t_max in usec} of IMB-MPI1's table for collective `name` (Allreduce, Bcast, ...):
    the rows after 'Benchmarking <name>' (#bytes #repetitions t_min t_max t_avg)."""
    rows, inside = {}, False
    for line in text.splitlines():
        if re.match(rf"#\s*Benchmarking {name}\s*$", line.strip()):
            inside = True
            continue
        if not inside:
            continue
        fields = line.split()
        if fields and fields[0].isdigit() and len(fields) >= 5:
            rows[int(fields[0])] = float(fields[3])
        elif rows and (not fields or line.startswith("#")):
            break
    if not rows:
        raise HpclabError(f"no {name} table in IMB's output", f"run it by hand: mpirun -np 2 IMB-MPI1 {name}")
    return rows


def judge_within(ours: list[float], ref: list[float], margin: float = COLL_MARGIN, level: float = LEVEL) -> dict:
    """Our runs against the reference's, paired run by run, judged on "within margin either way":
    "meets" when stats.decide calls them equivalent (the ratio's CI inside 1/(1+margin)..1+margin),
    "misses" when it decides them different, "cannot tell with N runs" otherwise."""
    d = decide(ours, ref, paired=True, margin=margin, level=level)
    said = {"equivalent": "meets", "different": "misses"}.get(d.outcome, f"cannot tell with {d.ratio.n_a} runs")
    r = d.ratio
    return {"estimate": r.estimate, "lo": r.lo, "hi": r.hi, "coverage": r.coverage, "runs": r.n_a,
            "goal": f"{1 / (1 + margin):.3f}-{1 + margin:.2f}", "higher_is_better": None, "verdict": said}


def compare_collectives(imb_src: Path, out_dir: Path, runs: int, only: list[str] | None = None) -> list[dict]:
    """One row per installed MPI library (or each of `only`), operation and size: the
    collectives kernel built with it against IMB-MPI1 built with it, 2 ranks each, alternating
    run by run; t_max (the slowest rank's mean time per call) in usec."""
    from hpclab.kernels import collectives as kernel

    lengths = out_dir / "coll-lengths.txt"
    lengths.write_text("".join(f"{n}\n" for n in COLL_SIZES))
    rows = []
    for lib, ours_exe, imb in _libraries_with_imb(imb_src, only, "collectives", rows, "op"):
        env = {**run_env(1), **lib.environment()}
        launch = lib.standalone_argv(2)
        got = {"ours": [], "imb": []}
        try:
            for i in range(runs):
                out = out_dir / f"collectives-{lib.name}-{i}.json"
                checked([*launch, str(ours_exe), "--ops", ",".join(COLL_OPS), "--sizes", ",".join(map(str, COLL_SIZES)),
                         "--json", str(out)], env, f"the collectives kernel of {lib.name}")
                table = kernel.collectives_table(json.loads(out.read_text()), str(out))
                got["ours"].append({(op, int(b)): t for op, b, t in zip(table["op"], table["bytes"], table["t_max_usec"])})
                text = checked([*launch, str(imb), *COLL_OPS.values(), "-msglen", str(lengths), "-npmin", "2"], env,
                               f"IMB-MPI1 collectives of {lib.name}")
                (out_dir / f"imb-coll-{lib.name}-{i}.txt").write_text(text)
                got["imb"].append({(op, n): t for op, name in COLL_OPS.items()
                                   for n, t in parse_imb_collective(text, name).items()})
        except HpclabError as e:
            rows.append({"library": lib.name, "op": "-", "error": e.what})
            continue
        for op in COLL_OPS:
            for n in COLL_SIZES:
                ours = [g[(op, n)] for g in got["ours"]]
                ref = [g[(op, n)] for g in got["imb"]]
                rows.append({"library": lib.name, "op": op, "bytes": n, "ours_t_max_usec": stats(ours),
                             "imb_t_max_usec": stats(ref), "ratio": judge_within(ours, ref)})
        print(f"  collectives {lib.name}: done", flush=True)
    return rows


# --- report --------------------------------------------------------------------------------

def judge(ours: list[float], ref: list[float], goal: float, higher_is_better: bool,
          level: float = LEVEL) -> dict:
    """Our runs against the reference's, paired run by run (same unit, > 0), judged against a goal
    for ours / reference: "meets" when the ratio's CI at `level` lies on the goal's good side
    (>= goal when higher is better, else <= goal), "misses" when it lies wholly on the bad side,
    "cannot tell with N runs" otherwise or when N paired runs cannot reach `level` at all. Returns
    the ratio's estimate, lo, hi, coverage (0..1), runs, goal, direction and verdict."""
    r = ratio_ci(ours, ref, paired=True, level=level)
    good_lo, good_hi = (r.lo >= goal, r.hi < goal) if higher_is_better else (r.hi <= goal, r.lo > goal)
    if r.coverage < level:
        said = f"cannot tell with {r.n_a} runs ({min_runs(paired=True, level=level)} needed)"
    elif good_lo:
        said = "meets"
    elif good_hi:
        said = "misses"
    else:
        said = f"cannot tell with {r.n_a} runs"
    return {"estimate": r.estimate, "lo": r.lo, "hi": r.hi, "coverage": r.coverage, "runs": r.n_a,
            "goal": goal, "higher_is_better": higher_is_better, "verdict": said}


def verdict(j: dict) -> str:
    """A table cell from judge(): '0.991, CI 0.985-0.998: meets, goal >= 0.98'."""
    if j["higher_is_better"] is None:   # judge_within: a band either side of 1
        return f"{j['estimate']:.3f}, CI {j['lo']:.3f}-{j['hi']:.3f}: {j['verdict']}, goal {j['goal']}"
    sign = ">=" if j["higher_is_better"] else "<="
    return f"{j['estimate']:.3f}, CI {j['lo']:.3f}-{j['hi']:.3f}: {j['verdict']}, goal {sign} {j['goal']}"


def write_markdown(path: Path, meta: dict, stream: list | str, pingpong: list | str,
                   collectives: list | str = "Not compared.") -> None:
    L = ["# Kernels against the reference benchmarks", "",
         f"Measured {meta['date']} on {meta['host']}, {meta['runs']} paired runs per row "
         "(ours and the reference alternate); values are min / median / max. A ratio is ours / "
         f"reference (Hodges-Lehmann estimate of the paired runs) with its {LEVEL * 100:g} % confidence "
         "interval: a goal is met when the whole interval lies on its good side, missed when it "
         "lies wholly on the bad side, and otherwise these runs cannot tell. "
         f"Raw outputs: `{meta['raw']}`.", "", "## STREAM 5.10 Triad", ""]
    if isinstance(stream, str):
        L.append(stream)
    else:
        L += [f"Both built with `{stream[0]['build_flags']}`, {STREAM_SIZE} doubles per array, "
              f"{STREAM_REPS} repetitions (the first untimed), same threads and binding.", "",
              "| threads | ours [MB/s] | STREAM 5.10 [MB/s] | ours / reference |", "|---|---|---|---|"]
        L += [f"| {r['config']} | {fmt(r['ours_triad_mb_s'])} | {fmt(r['reference_triad_mb_s'])} | "
              f"{verdict(r['ratio'])} |" for r in stream]
    L += ["", "## IMB-MPI1 PingPong, per MPI library and transport (2 ranks bound to cores)", ""]
    if isinstance(pingpong, str):
        L.append(pingpong)
    else:
        L += ["Each library's ping-pong (build/<library>/bin/pingpong) and IMB-MPI1 built with the same "
              "library's wrappers, started by its own launcher with the transport's variables; "
              "bandwidth = bytes / t.", "",
              "| library | transport (turns off) | ours t(0 B) [us] | IMB t(0 B) [us] | latency ratio | "
              "ours 4 MiB [MB/s] | IMB 4 MiB [MB/s] | 4 MiB ratio | peak ratio |",
              "|---|---|---|---|---|---|---|---|---|"]
        for r in pingpong:
            if r.get("error"):
                L.append(f"| {r['library']} | {r['transport']} | not measured: {r['error']} | | | | | | |")
                continue
            off = f" ({r['disables']})" if r["disables"] and not r["disables"].startswith("nothing") else ""
            L.append(f"| {r['library']} | {r['transport']}{off} | {fmt(r['ours_latency_usec'], 2)} | "
                     f"{fmt(r['imb_latency_usec'], 2)} | {verdict(r['latency_ratio'])} | "
                     f"{fmt(r['ours_4mib_mb_s'], 0)} | {fmt(r['imb_4mib_mb_s'], 0)} | "
                     f"{verdict(r['bandwidth_ratio'])} | {verdict(r['peak_ratio'])} |")
    L += ["", "## IMB-MPI1 Allreduce, Bcast, Alltoall, per MPI library (2 ranks, default algorithms)", ""]
    if isinstance(collectives, str):
        L.append(collectives)
    else:
        L += ["The collectives kernel (build/<library>/bin/collectives) and IMB-MPI1 built with the same library, "
              "started by its own launcher; t_max is the slowest rank's mean time per call, IMB's repetition "
              "rule in both. Alltoall's size is the block for each rank.", "",
              "| library | operation | bytes | ours t_max [us] | IMB t_max [us] | ours / IMB |", "|---|---|---|---|---|---|"]
        for r in collectives:
            if r.get("error"):
                L.append(f"| {r['library']} | {r['op']} | not measured: {r['error']} | | | |")
                continue
            L.append(f"| {r['library']} | {r['op']} | {r['bytes']} | {fmt(r['ours_t_max_usec'], 2)} | "
                     f"{fmt(r['imb_t_max_usec'], 2)} | {verdict(r['ratio'])} |")
    L.append("")
    path.write_text("\n".join(L))


def main(argv=None) -> int:
    import datetime as dt
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    fewest = min_runs(paired=True)
    ap.add_argument("--runs", type=int, default=fewest,
                    help=f"paired repetitions per row (default {fewest}: the fewest that can reach "
                         f"{LEVEL * 100:g} %%; more narrow the ratio's interval)")
    ap.add_argument("--library", action="append", metavar="NAME",
                    help="compare the ping-pong and collectives of this MPI library only (repeatable; default: every one)")
    a = ap.parse_args(argv)
    if a.runs < 1:
        print("error: --runs must be at least 1", file=sys.stderr)
        return 2
    out_dir = paths.build_dir() / "bench"
    stamp = dt.datetime.now().strftime("%Y%m%d-%H%M%S")
    raw = out_dir / "raw" / f"references-{stamp}"
    raw.mkdir(parents=True, exist_ok=False)
    meta = {"host": os.uname().nodename, "date": dt.datetime.now().isoformat(timespec="seconds"),
            "runs": a.runs, "raw": str(raw.relative_to(paths.repo()))}
    results = {}
    for key, var, fn, hint in [
            ("stream", "HPCLAB_STREAM_REF", compare_stream, "McCalpin's stream.c"),
            ("pingpong", "HPCLAB_IMB_SRC", compare_pingpong, "a checkout of the Intel MPI Benchmarks"),
            ("collectives", "HPCLAB_IMB_SRC", compare_collectives, "a checkout of the Intel MPI Benchmarks")]:
        given = os.environ.get(var)
        if not given:
            results[key] = f"Not compared: set {var} to {hint} to compare (see bench/references.py)."
        elif not Path(given).exists():
            results[key] = f"Not compared: {var}={given} does not exist."
        else:
            try:
                results[key] = fn(Path(given).resolve(), raw, a.runs,
                                  **({"only": a.library} if key != "stream" and a.library else {}))
            except HpclabError as e:
                results[key] = f"Not compared: {e}"
        print(f"  {key}: {results[key] if isinstance(results[key], str) else 'compared'}", flush=True)
    md, js = out_dir / "references.md", out_dir / "references.json"
    keep_earlier(md)
    keep_earlier(js)
    js.write_text(json.dumps({"meta": meta, **results}, indent=2) + "\n")
    write_markdown(md, meta, results["stream"], results["pingpong"], results["collectives"])
    print(f"wrote {md}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
