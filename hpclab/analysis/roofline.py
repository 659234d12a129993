"""The memory roofline of the Poisson solver: its bytes per update against STREAM's bandwidth.

The bytes one lattice update must move (`traffic_model`), the bandwidth of the STREAM kernel
whose real traffic (write-allocate counted) has the same read:write mix (`memory_roof`), the best
rate that bandwidth allows (`roofline`), the cache sizes of the node a run used (`cache_sizes`)
and the one size rule for "from memory": a working set of at least 4x the last-level cache
(`stream_elements`, `memory_resident_n`, `residency`). `roof_table` and `roofline_fidelity` put
the solver's measured rates (`poisson_rates`) against the roof. The figure is
hpclab.plots.roofline.plot_roofline; the profilers are hpclab.tools.profilers.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path

import pandas as pd

from hpclab.analysis import effective_cache, phrases
from hpclab.core import commands
from hpclab.core.errors import HpclabError
from hpclab.kernels import poisson as poisson_report, stream
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


def poisson_rates(runs) -> pd.DataFrame:
    """One row per completed poisson run (hpclab.jobs.experiment.Run): run_id, n, iterations,
    variant ("fused" when run with --fuse, else "separate"), lups (lattice updates per second),
    wall_time [s], and the residual history (a tuple, for exact comparisons)."""
    rows = []
    for r in runs:
        doc = r.result()
        res = poisson_report.measures(doc)
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
    of another array, which ordinary stores must read first (write-allocate). If Copy takes longer
    than Update beyond the spread of the runs, that extra read is there; Sum (read-only, one line)
    gives the time of one line read, the unit to count it in. Update against Sum shows what storing
    a line back costs. Returns shown (True when Copy is slower than Update beyond the spread),
    copy_vs_update and update_vs_sum (hpclab.analysis.phrases.Comparison), copy_over_sum (ratio
    of the medians) and text (sentences built from the numbers)."""
    t = kernel_times(stream_results)
    missing = [k for k in ("Copy", "Update", "Sum") if k not in t]
    if missing:
        raise HpclabError(f"the STREAM runs have no {', '.join(missing)} kernel",
                          "run the course's stream (it reports Update and Sum beside STREAM's four)")
    kw = dict(quantity="time per element", unit="ns", lower_is_better=True)
    upd = phrases.compare(t["Update"], t["Sum"], a_name="Update", b_name="Sum", **kw)
    cpy = phrases.compare(t["Copy"], t["Update"], a_name="Copy", b_name="Update", **kw)
    shown = cpy.beyond_spread and cpy.a.median > cpy.b.median
    over_sum = cpy.a.median / upd.b.median
    lines = [_capital(upd.sentence()), _capital(cpy.sentence()),
             f"Copy takes {over_sum:.2f}x Sum's time per element (medians); Sum reads one array and stores nothing."]
    if shown:
        lines.append("Copy reads one line and stores one, as Update does; that it takes longer beyond the spread "
                     "is the write-allocate read of the line it stores into.")
    else:
        lines.append("These runs do not separate Copy from Update, so they do not show the write-allocate read; "
                     "the roof below still counts it, as an assumption about ordinary stores.")
    return {"shown": bool(shown), "copy_vs_update": cpy, "update_vs_sum": upd, "copy_over_sum": float(over_sum),
            "text": " ".join(lines)}


def against_roof(rates: pd.DataFrame, stream_results: list[dict], caches: pd.DataFrame,
                 variant: str = "separate") -> dict:
    """The solver's memory-resident rate against bandwidth / bytes per update, with the spreads.

    rates: poisson_rates() rows (one row per run); stream_results: result.json of the STREAM runs;
    caches: cache_sizes(). Takes the largest memory-resident grid of `variant` and compares its
    runs with the roof of each STREAM run (roof_rates) and with the runs of the largest grid that
    fits in a cache (L1-L3), if any. Returns n, share (median / best roof), solver and roof
    (phrases.Spread, updates/s), at_roof (phrases.Comparison solver vs roof), drop (Comparison
    cached grid vs memory grid, or None), verdict ("yes" | "partly" | "no" | "not shown"),
    beyond_spread (True when the verdict rests on a difference beyond the spread) and text (the
    sentences, built from the numbers). The verdict:
    - "no" when the solver's runs lie above the roof's beyond the spread (bandwidth is not its cap);
    - "yes" when leaving the caches slows it beyond the spread and its runs reach the roof's range
      (at the roof within the noise);
    - "partly" when leaving the caches slows it beyond the spread but it stays below the roof beyond
      the spread (the bandwidth caps it, but something else holds it lower), or when an in-cache
      grid is not faster beyond the spread (nothing shows that memory is what slows it);
    - "not shown" with fewer than phrases.MIN_RUNS runs on a side."""
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
    b = bytes_per_update(fused)
    limit = f"bandwidth / {b} B"
    at_roof = phrases.compare(solver, roofs, a_name=f"the solver (n={n})", b_name=f"the STREAM runs' {limit}",
                              quantity="updates per second", unit="M/s", lower_is_better=False)
    cached = t[t["residency"].isin(["L1", "L2", "L3"])]
    drop = None
    if not cached.empty:
        nc = int(cached["n"].max())
        in_cache = [v / 1e6 for v in rates.loc[(rates["n"] == nc) & (rates["variant"] == variant), "lups"]]
        drop = phrases.compare(in_cache, solver,
                               a_name=f"the grid n={nc} (in {cached.set_index('n').loc[nc, 'residency']})",
                               b_name=f"the grid n={n} (from memory)", quantity="updates per second", unit="M/s",
                               lower_is_better=False)
    best_roof = max(roofs)
    share = phrases.Spread.of(solver).median / best_roof
    text = [f"The roof is the best STREAM run's {limit}.",
            phrases.against_limit(phrases.Spread.of(solver).median, best_roof,
                                  what=f"the solver's median rate (n={n}, {variant})",
                                  limit_name="the roof", unit="M updates/s",
                                  spread=phrases.Spread.of(solver)) + ".",
            at_roof.sentence()]
    if drop is not None:
        text.append(drop.sentence())
    dropped = drop is not None and drop.beyond_spread and drop.a.median > drop.b.median
    if not at_roof.enough_runs or (drop is not None and not drop.enough_runs):
        verdict, why = "not shown", f"fewer than {phrases.MIN_RUNS} runs on a side: no verdict from these runs"
    elif at_roof.beyond_spread and at_roof.a.median > at_roof.b.median:
        verdict, why = "no", (f"the memory-resident runs lie above {limit} beyond the spread: it is not their cap, "
                              "or the STREAM runs were disturbed (a roof measured on a busy machine comes out too low)")
    elif not dropped:
        verdict, why = "partly", (f"no memory-resident run lies above {limit} beyond the spread, but these runs do "
                                  "not show that memory is what slows the solver: "
                                  + ("an in-cache grid is not faster beyond the spread" if drop is not None
                                     else "no grid in cache to set the memory-resident rate against"))
    elif not at_roof.beyond_spread:
        verdict, why = "yes", (f"leaving the caches slows the solver beyond the spread, down to {limit}: "
                               "its runs and the roof's are within the noise of each other")
    else:
        verdict, why = "partly", (f"leaving the caches slows the solver beyond the spread, and no run exceeds "
                                  f"{limit}; but it stays at {share:.0%} of it, below the roof beyond the spread, "
                                  "so the bandwidth is not all that holds it")
    return {"n": n, "variant": variant, "share": float(share), "solver": at_roof.a, "roof": at_roof.b,
            "at_roof": at_roof, "drop": drop, "verdict": verdict, "why": why,
            "beyond_spread": verdict == "yes", "text": " ".join(_capital(x) for x in text)}


def _capital(sentence: str) -> str:
    return sentence[:1].upper() + sentence[1:]


def roofline_fidelity(rates: pd.DataFrame, stream_results: list[dict], caches: pd.DataFrame) -> dict:
    """The fidelity row "roofline": the seed's claim (the solver is bound by STREAM bandwidth,
    about 80 GB/s on its node) against ours, from against_roof (separate residuum): the largest
    memory-resident grid's runs against bandwidth / 64 B with the spread of both, and against the
    largest in-cache grid. Returns seed, here, share, reported_share (what dividing by STREAM's
    reported Triad, blind to write-allocate, would have said), reproduced, why, evidence and
    beyond_spread: the arguments of hpclab.course.fidelity.make_row("roofline", ...)."""
    judged = against_roof(rates, stream_results, caches)
    roof = memory_roof(stream_results)
    reported = judged["solver"].median * 1e6 / (roof["reported_mb_s"] * 1e6 / bytes_per_update())
    return {"seed": f"solver memory-bound; STREAM ~{SEED_STREAM_GB_S:.0f} GB/s on a 2-socket Ivy Bridge (quoted)",
            "here": (judged["text"] + f" (Dividing by STREAM's reported {roof['kernel']} rate, which leaves "
                     f"out the write-allocate read, would have said {reported:.0%}.)"),
            "share": judged["share"], "reported_share": float(reported),
            "reproduced": judged["verdict"], "why": judged["why"], "evidence": "measured",
            "beyond_spread": judged["beyond_spread"]}


def fusion_sentences(rates: pd.DataFrame, caches: pd.DataFrame) -> list[str]:
    """Per grid size, the fused runs' update rate against the separate runs' (phrases.compare,
    higher is better), each sentence opened by the grid and where its working set lives."""
    out = []
    for n, grp in rates.groupby("n"):
        fused = list(grp.loc[grp["variant"] == "fused", "lups"] / 1e6)
        sep = list(grp.loc[grp["variant"] == "separate", "lups"] / 1e6)
        if not fused or not sep:
            continue
        c = phrases.compare(fused, sep, a_name="fused", b_name="separate", quantity="updates per second",
                            unit="M/s", lower_is_better=False)
        out.append(f"n = {int(n)} ({residency(working_set_bytes(int(n)), caches)}): {c.sentence()}")
    return out


def prefetch_sentence(runs: pd.DataFrame, with_label: str = "prefetch (course build)",
                      without_label: str = "no prefetch") -> str:
    """The two builds' update rates compared (hpclab.tools.variants.compare rows: build, lups),
    higher is better, with the spread of their repetitions."""
    a = list(runs.loc[runs["build"] == with_label, "lups"] / 1e6)
    b = list(runs.loc[runs["build"] == without_label, "lups"] / 1e6)
    if not a or not b:
        raise HpclabError(f"no runs of {with_label!r} or {without_label!r}", "pass the rows of variants.compare")
    return _capital(phrases.compare(a, b, a_name="the prefetching build", b_name="the build without", quantity="updates per second",
                                    unit="M/s", lower_is_better=False).sentence())
