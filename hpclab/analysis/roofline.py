"""The memory roofline of the Poisson solver: its bytes per update against STREAM's bandwidth.

The bytes one lattice update must move (`traffic_model`), the bandwidth of the STREAM kernel
whose real traffic (write-allocate counted) has the same read:write mix (`memory_roof`), the best
rate that bandwidth allows (`roofline`), the cache sizes of the node a run used (`cache_sizes`)
and the one size rule for "from memory": a working set of at least 4x the last-level cache
(`stream_elements`, `memory_resident_n`, `residency`). `roof_table` and `against_roof` put the
solver's measured rates (`poisson_rates`) against the roof; the verdict on the seed's claim is the
scaling lesson's (hpclab.course.lessons). The figure is hpclab.plots.roofline.plot_roofline; the
profilers are hpclab.tools.profilers.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path

import pandas as pd

from hpclab.analysis import effective_cache, phrases, stats
from hpclab.core import commands
from hpclab.core.errors import HpclabError
from hpclab.kernels import contract, poisson as poisson_report, stream
from hpclab.site import topology

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
        kernels = stream.kernel_rates(result)
    except HpclabError:
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
            "array_bytes": stream.bytes_per_array(stream_results[best])}


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
    text = commands.output([topology._lstopo(), "--of", "xml", "-"], "read the caches with lstopo",
                           "install hwloc (apt-get install hwloc)", timeout=60.0)
    return effective_cache.apply(_caches_from_xml(text, "lstopo --of xml"))


def cache_sizes(run_path: str | Path) -> pd.DataFrame:
    """Data and unified cache sizes of the node a run used, from its provenance/lstopo-*.xml.

    Returns level (1, 2, 3), bytes (per cache), count (caches of that level on the node),
    one row per level; the last level's bytes are the measured effective size where notebook 00
    probed it (hpclab.analysis.effective_cache; hwloc_bytes keeps hwloc's). HpclabError when the
    run has no lstopo XML."""
    files = sorted(Path(run_path).glob("provenance/lstopo-*.xml"))
    if not files:
        raise HpclabError(f"no provenance/lstopo-*.xml in {run_path}", "use a run folder written by experiment.run")
    return effective_cache.apply(_caches_from_xml(files[0].read_text(), str(files[0])))


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
# The solver's measured rates against the roof
# --------------------------------------------------------------------------------------------

# Quoted from the seed (not measured here): Intel, 'MPI Analysis' ITAC/VTune training, 2014 (seed
# 001_9a6db99896575e26): "the bandwidth that is delivered by the STREAM benchmark (~80GB/s on IVB
# dual Socket)"
SEED_STREAM_GB_S = 80.0


MIN_ITERATIONS = 3


def iters_for(n: int, updates: float) -> int:
    """Iterations giving about `updates` lattice updates on an n x n grid, so runs of every size
    do the same work and last about as long; at least MIN_ITERATIONS (a grid larger than the
    caches sweeps for a second per iteration on a node whose last-level cache is hundreds of MB:
    three such sweeps time it well and keep notebook 06 within its minutes)."""
    return max(MIN_ITERATIONS, int(round(updates / (n * n))))


def spread(table: pd.DataFrame, by, value: str) -> pd.DataFrame:
    """min, median, max and count of `value` per group `by` (repetitions of one measurement)."""
    g = table.groupby(by)[value]
    return pd.DataFrame({"min": g.min(), "median": g.median(), "max": g.max(), "runs": g.size()})


# A build of the solver other than the course's runs as `kernel: program` (hpclab.kernels.program),
# which keeps its own result.json; the solver's report goes beside it under this name.
PROGRAM_REPORT = "poisson.json"


def poisson_rates(runs) -> pd.DataFrame:
    """One row per completed poisson run (hpclab.jobs.experiment.Run): run_id, n, iterations,
    variant ("fused" when run with --fuse, "separate" without; a `kernel: program` run of another
    build of the solver, whose report is PROGRAM_REPORT in its folder, is named by its spec's
    label), lups (lattice updates per second), wall_time [s], host, and the residual history (a
    tuple, for exact comparisons)."""
    rows = []
    for r in runs:
        other_build = getattr(getattr(r, "spec", None), "kernel", "poisson") == "program"
        doc = (contract.load_result(Path(r.path) / PROGRAM_REPORT, kernel="poisson")
               if other_build else r.result())
        res = poisson_report.measures(doc)
        variant = r.spec.label if other_build else ("fused" if res.get("fuse") else "separate")
        rows.append({"run_id": r.run_id, "n": res["n"], "iterations": res["iterations"],
                     "variant": variant, "lups": res["lattice_updates_per_sec"], "wall_time": res["wall_time"],
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
        fused = v == "fused"   # every other build moves the separate solver's bytes
        bound = roofline(row["median"], roofs["fused" if fused else "separate"]["moved_mb_s"], fused=fused)
        rows.append({"n": n, "variant": v, **row.to_dict(), "working_set": ws,
                     "residency": residency(ws, caches), "roof_lups": bound["bound_lups"],
                     "share": bound["fraction"]})
    return pd.DataFrame(rows).set_index(["n", "variant"])


def roof_rates(stream_results: list[dict], fused: bool = False) -> list[float]:
    """The roof of each STREAM run: the lattice updates per second its bandwidth allows (the moved
    bandwidth of ROOF_KERNEL / bytes per update), one value per run, for comparisons with spread."""
    kernel = ROOF_KERNEL["fused" if fused else "separate"]
    return [float(stream_traffic(r).set_index("function").loc[kernel, "moved_mb_s"]) * 1e6 / bytes_per_update(fused)
            for r in stream_results]


def kernel_times(stream_results: list[dict]) -> dict[str, list[float]]:
    """ns_per_element of each STREAM kernel, one value per run (the best repetition of each run)."""
    out: dict[str, list[float]] = {}
    for r in stream_results:
        for _, row in stream_traffic(r).iterrows():
            out.setdefault(row["function"], []).append(float(row["ns_per_element"]))
    return out


def write_allocate_evidence(stream_results: list[dict]) -> dict:
    """What the STREAM runs say about write-allocate, from their own times per element.

    Update (c = s*c) and Copy (c = a) both read one line and store one line per 8 elements; the
    difference is where the store goes: Update stores into the line it just read, Copy into a line
    of another array, which ordinary stores must read first (write-allocate). If the course's
    statistics decide Copy slower than Update (unpaired), that extra read is there; Sum (read-only,
    one line) gives the time of one line read, the unit to count it in. Update against Sum shows
    what storing a line back costs. Returns shown (True when Copy is decided slower than Update),
    copy_vs_update and update_vs_sum (hpclab.analysis.phrases.Comparison), copy_over_sum (ratio
    of the medians), text (sentences built from the numbers) and conclusion (its last sentence:
    what the comparisons show, for a page that shows them in a table)."""
    t = kernel_times(stream_results)
    missing = [k for k in ("Copy", "Update", "Sum") if k not in t]
    if missing:
        raise HpclabError(f"the STREAM runs have no {', '.join(missing)} kernel",
                          "run the course's stream (it reports Update and Sum beside STREAM's four)")
    kw = dict(quantity="time per element", unit="ns", lower_is_better=True)
    upd = phrases.compare(t["Update"], t["Sum"], a_name="Update", b_name="Sum", **kw)
    cpy = phrases.compare(t["Copy"], t["Update"], a_name="Copy", b_name="Update", **kw)
    shown = cpy.outcome == "different" and cpy.winner == "Update"
    over_sum = cpy.a.median / upd.b.median
    lines = [_capital(upd.sentence()), _capital(cpy.sentence()),
             f"Copy takes {over_sum:.2f}x Sum's time per element (medians); Sum reads one array and stores nothing."]
    if shown:
        lines.append("Copy reads one line and stores one, as Update does; that it takes longer, decided, "
                     "is the write-allocate read of the line it stores into.")
    else:
        lines.append("These runs do not decide Copy slower than Update, so they do not show the write-allocate "
                     "read; the roof below still counts it, as an assumption about ordinary stores.")
    return {"shown": bool(shown), "copy_vs_update": cpy, "update_vs_sum": upd, "copy_over_sum": float(over_sum),
            "text": " ".join(lines), "conclusion": lines[-1]}


def against_roof(rates: pd.DataFrame, stream_results: list[dict], caches: pd.DataFrame,
                 variant: str = "separate", level: float = stats.LEVEL) -> dict:
    """The solver's memory-resident rate against bandwidth / bytes per update, decided by the
    course's statistics.

    rates: poisson_rates() rows (one row per run, at least 4 per grid for a decision); stream_results:
    result.json of the STREAM runs, taken in the same experiment (their runs alternate with the
    solver's, so a drift of the machine falls on both sides); caches: cache_sizes(). Takes the
    largest memory-resident grid of `variant` and compares its runs with the roof of each STREAM
    run (roof_rates) and with the runs of the largest grid that fits in a cache (L1-L3), if any;
    unpaired. Returns n, share (median / best roof), solver and roof (phrases.Spread, M updates/s),
    at_roof (phrases.Comparison solver vs roof), drop (Comparison cached grid vs memory grid, or
    None), verdict, why, beyond_spread (True for 'yes') and text (one short sentence of the share).
    The verdict:
    - "no" when the statistics decide the solver above the roof (then bandwidth is not its cap),
      or the in-cache grid no faster than the memory-resident one (memory does not slow it);
    - "yes" when leaving the caches slows it (decided) and it is at the roof (no difference larger
      than the margin);
    - "partly" when leaving the caches slows it (decided) and it stays below the roof (decided:
      something besides the bandwidth holds it lower) or the runs cannot decide where it sits
      against the roof (the memory part of the claim is shown, the cap is not);
    - "not shown" when the runs cannot decide whether leaving the caches slows it, or no grid
      fits a cache.
    level: the confidence of both comparisons (an adaptive experiment looks at a stricter one)."""
    fused = variant == "fused"
    t = roof_table(rates, stream_results, caches).reset_index()
    t = t[t["variant"] == variant]
    mem = t[t["residency"] == "memory"]
    if mem.empty:
        raise HpclabError("no memory-resident grid among the runs",
                          f"run a grid of at least memory_resident_n(LLC) = "
                          f"{memory_resident_n(last_level_cache(caches))}")
    n = int(mem["n"].max())
    solver = [v / 1e6 for v in rates.loc[(rates["n"] == n) & (rates["variant"] == variant), "lups"]]
    roofs = [v / 1e6 for v in roof_rates(stream_results, fused)]
    limit = f"bandwidth / {bytes_per_update(fused)} B"
    solver_name = f"the solver (n={n})"
    at_roof = phrases.compare(solver, roofs, a_name=solver_name, b_name=f"the STREAM runs' {limit}",
                              quantity="updates per second", unit="M/s", lower_is_better=False, level=level)
    cached = t[t["residency"].isin(["L1", "L2", "L3"])]
    drop = None
    if not cached.empty:
        nc = int(cached["n"].max())
        in_cache = [v / 1e6 for v in rates.loc[(rates["n"] == nc) & (rates["variant"] == variant), "lups"]]
        drop = phrases.compare(in_cache, solver,
                               a_name=f"the grid n={nc} (in {cached.set_index('n').loc[nc, 'residency']})",
                               b_name=f"the grid n={n} (from memory)", quantity="updates per second", unit="M/s",
                               lower_is_better=False, level=level)
    share = phrases.Spread.of(solver).median / max(roofs)
    if at_roof.outcome == "different" and at_roof.winner == solver_name:
        verdict, why = "no", (f"the statistics decide the memory-resident runs above {limit}: it is not their cap, "
                              "or the STREAM runs were disturbed (a roof measured on a busy machine comes out low)")
    elif drop is not None and drop.outcome != "undecided" and drop.winner != drop.a_name:
        verdict, why = "no", f"the grid in cache is not faster than the one from memory ({drop.sentence()})"
    elif drop is None:
        verdict, why = "not shown", "no grid in cache to set the memory-resident rate against"
    elif drop.outcome == "undecided":
        verdict, why = "not shown", f"these runs cannot decide whether leaving the caches slows it: {drop.sentence()}"
    elif at_roof.outcome == "equivalent":
        verdict, why = "yes", (f"leaving the caches slows the solver, decided, down to {limit}: its runs and the "
                               "roof's differ by no more than the margin")
    elif at_roof.outcome == "different":
        verdict, why = "partly", (f"leaving the caches slows the solver and it stays below {limit}, both decided: it "
                                  f"reaches {phrases.pct(share)} of the roof, so memory access slows it but the "
                                  "bandwidth is not what holds it")
    else:
        verdict, why = "partly", ("leaving the caches slows the solver, decided, but these runs cannot decide whether "
                                  f"it reaches {limit}: {at_roof.sentence()}")
    text = (f"From memory (n={n}) the solver's median rate is {phrases.pct(share)} of the best STREAM run's {limit} "
            f"({phrases.Spread.of(solver).median:.0f} of {max(roofs):.0f} M updates/s).")
    return {"n": n, "variant": variant, "share": float(share), "solver": at_roof.a, "roof": at_roof.b,
            "at_roof": at_roof, "drop": drop, "verdict": verdict, "why": why,
            "beyond_spread": verdict == "yes", "text": text}


def _capital(sentence: str) -> str:
    return sentence[:1].upper() + sentence[1:]


def variant_comparison(rates: pd.DataFrame, a: str, b: str, n: int, *, a_name: str | None = None,
                       b_name: str | None = None) -> phrases.Comparison:
    """Variant a's update rates against variant b's on grid n (poisson_rates() rows, variant
    names as that column has them: 'separate', 'fused', a program build's label), unpaired,
    higher is better, in M updates/s."""
    side = {}
    for v in (a, b):
        vals = rates.loc[(rates["n"] == n) & (rates["variant"] == v), "lups"]
        if vals.empty:
            raise HpclabError(f"no runs of variant {v!r} on n={n}",
                              f"variants present: {sorted(set(rates['variant']))}, grids {sorted(set(rates['n']))}")
        side[v] = list(vals / 1e6)
    return phrases.compare(side[a], side[b], a_name=a_name or a, b_name=b_name or b, quantity="updates per second",
                           unit="M/s", lower_is_better=False)
