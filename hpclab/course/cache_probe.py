"""Measure how much last-level cache a rank of this cluster really gets (notebook 00, section 7).

STREAM jobs at the working sets of hpclab.analysis.effective_cache.probe_sizes (a sixteenth of,
at and twice the cache hwloc reports), each alone on a node, in rounds: one experiment whose runs
alternate size by size (A B C A B C ...), so that each smaller size pairs with the reference by
round. The rule and the record are in effective_cache. The lessons (hpclab.course.sizing.this_node)
size from the record once it exists.
"""

from __future__ import annotations

from hpclab.analysis import effective_cache, roofline
from hpclab.jobs import experiment
from hpclab.spec import model as spec

EXPERIMENT = "00-cache-probe"
# STREAM repetitions per job: the first is untimed; arrays of a few MB need more to time well.
SMALL_REPS, LARGE_REPS = 10, 3
LARGE_BYTES = 100 * 10**6
# The quick parameter set's rounds: enough to run the notebook, too few to decide (it is not saved).
QUICK_ROUNDS = 2


def specs(hwloc_llc: int, cores_per_node: int | None, rounds: int = effective_cache.ROUNDS) -> list:
    """The probe's STREAM specs, one per size, smallest first (each alone on a node), each
    repeated `rounds` times."""
    out = []
    for size in effective_cache.probe_sizes(hwloc_llc):
        per_array = max(10_000, size // (3 * roofline.WORD))
        out.append(spec.make_spec(kernel="stream", ntasks=1, experiment=EXPERIMENT,
                                  label=f"{size / 1e6:.0f} MB", repetitions=rounds,
                                  args={"size": per_array, "reps": SMALL_REPS if size < LARGE_BYTES else LARGE_REPS},
                                  **roofline.alone_on_the_node(cores_per_node)))
    return out


def measure(hwloc_llc: int, cores_per_node: int | None, progress: bool = True,
            llc_cap: int | None = None, save: bool = True, rounds: int = effective_cache.ROUNDS) -> effective_cache.Probe:
    """Run the probe, judge it against hwloc_llc, save the record (build/cache-probe.json) and
    return it. llc_cap: probe sizes as if the cache held at most this much (the quick parameter
    set's sizing.QUICK_LLC_CAP). save=False keeps the record as it was (the quick set's small
    probe must not replace a full one). rounds: runs per size (the fewest that can decide by
    default)."""
    probed = min(hwloc_llc, llc_cap) if llc_cap else hwloc_llc
    runs = experiment.run(specs(probed, cores_per_node, rounds), progress=progress)
    rows, host = [], ""
    for r in runs:
        result = r.result()
        traffic = roofline.stream_traffic(result).set_index("function")
        size = int(r.spec.args.size) * 3 * roofline.WORD
        rows.append({"bytes": size, "triad_mb_s": float(traffic.loc["Triad", "reported_mb_s"]),
                     "run_id": r.run_id, "round": int(r.repetition or 1)})
        host = host or str((r.folder.status().get("nodes") or ""))
    probe = effective_cache.judge(hwloc_llc, host, rows)
    if save:
        effective_cache.save(probe)
    return probe


def measure_this_node(cores_per_node: int | None, progress: bool = True) -> effective_cache.Probe:
    """measure() for the last-level cache hwloc reports on this machine (lstopo run now); with the
    quick parameter set capped, in QUICK_ROUNDS rounds and not saved."""
    from hpclab.course import sizing
    from hpclab.site import topology

    caches = topology.from_lstopo().caches
    llc = roofline.last_level_cache(caches) if len(caches) else 0
    if not llc:
        return effective_cache.Probe(0, "")
    quick = sizing.quick_set()
    return measure(llc, cores_per_node, progress=progress, llc_cap=sizing.QUICK_LLC_CAP if quick else None,
                   save=not quick, rounds=QUICK_ROUNDS if quick else effective_cache.ROUNDS)
