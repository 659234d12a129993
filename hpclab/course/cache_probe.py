"""Measure how much last-level cache a rank of this cluster really gets (notebook 00, section 7).

One STREAM job per working set of hpclab.analysis.effective_cache.probe_sizes (1/64 to 4x the
cache hwloc reports), each alone on a node; the rule and the record are in effective_cache. The
lessons (hpclab.course.sizing.this_node) size from the record once it exists.
"""

from __future__ import annotations

from hpclab.analysis import effective_cache, roofline
from hpclab.jobs import experiment
from hpclab.spec import model as spec

EXPERIMENT = "00-cache-probe"
# STREAM repetitions per job: the first is untimed; arrays of a few MB need more to time well.
SMALL_REPS, LARGE_REPS = 10, 4
LARGE_BYTES = 100 * 10**6


def specs(hwloc_llc: int, cores_per_node: int | None) -> list:
    """The probe's STREAM specs, one per size, smallest first (each alone on a node)."""
    out = []
    for size in effective_cache.probe_sizes(hwloc_llc):
        per_array = max(10_000, size // (3 * roofline.WORD))
        out.append(spec.make_spec(kernel="stream", ntasks=1, experiment=EXPERIMENT,
                                  label=f"{size / 1e6:.0f} MB",
                                  args={"size": per_array, "reps": SMALL_REPS if size < LARGE_BYTES else LARGE_REPS},
                                  **roofline.alone_on_the_node(cores_per_node)))
    return out


def measure(hwloc_llc: int, cores_per_node: int | None, progress: bool = True,
            llc_cap: int | None = None, save: bool = True) -> effective_cache.Probe:
    """Run the probe, judge it against hwloc_llc, save the record (build/cache-probe.json) and
    return it. llc_cap: probe sizes as if the cache held at most this much (the quick parameter
    set's sizing.QUICK_LLC_CAP: its probe stays small and, missing memory speed below the largest
    size on a node like this VM, leaves the lessons at hwloc's size). save=False keeps the record
    as it was (the quick set's small probe must not replace a full one)."""
    probed = min(hwloc_llc, llc_cap) if llc_cap else hwloc_llc
    runs = experiment.run(specs(probed, cores_per_node), progress=progress)
    rows, host = [], ""
    for r in runs:
        result = r.result()
        traffic = roofline.stream_traffic(result).set_index("function")
        size = int(r.spec.args.size) * 3 * roofline.WORD
        rows.append({"bytes": size, "triad_mb_s": float(traffic.loc["Triad", "reported_mb_s"]), "run_id": r.run_id})
        host = host or str((r.folder.status().get("nodes") or ""))
    probe = effective_cache.judge(hwloc_llc, host, rows)
    if save:
        effective_cache.save(probe)
    return probe


def measure_this_node(cores_per_node: int | None, progress: bool = True) -> effective_cache.Probe:
    """measure() for the last-level cache hwloc reports on this machine (lstopo run now); with the
    quick parameter set capped and not saved."""
    from hpclab.course import sizing
    from hpclab.site import topology

    caches = topology.from_lstopo().caches
    llc = roofline.last_level_cache(caches) if len(caches) else 0
    if not llc:
        return effective_cache.Probe(0, "")
    quick = sizing.quick_set()
    return measure(llc, cores_per_node, progress=progress, llc_cap=sizing.QUICK_LLC_CAP if quick else None,
                   save=not quick)
