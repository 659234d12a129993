"""How big the lessons are on this node: rank counts, grids and problem sizes from its topology.

One function, `plan(topology)`, reads hwloc's view of a node (hpclab.site.topology: cores, PUs,
NUMA nodes, caches) and returns a LessonPlan: how many ranks each lesson runs, whether they get a
core each, how large the STREAM arrays must be to measure memory rather than cache, and whether
local against remote NUMA memory can be measured. Notebooks and labs take their sizes from the
plan instead of writing numbers of their own, so the same course is honest on a 2-core VM and on
a two-socket node: on the VM it says which case it is in and what it measures instead.

Ranks are counted on cores, never on PUs: two hardware threads of one core share its load and
store units, so an SMT sibling is not a dedicated core for a bandwidth- or latency-bound rank.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field

from hpclab.analysis import effective_cache, roofline
from hpclab.core.errors import HpclabError
from hpclab.site import topology as hwloc

# Notebook 05 traces at least this many ranks when they fit on dedicated cores, and never more
# than IMBALANCE_MAX_RANKS (a trace grows with ranks x iterations; 16 ranks show every part of
# the split without making the trace slow to replay on a small login node).
IMBALANCE_MIN_RANKS = 8
IMBALANCE_MAX_RANKS = 16
# The seed's imbalance lesson runs 4 ranks; on a node with fewer than IMBALANCE_MIN_RANKS cores it
# stays at 4, oversubscribed (the lesson on ranks sharing cores), and its split on dedicated cores
# is measured on VNODES one-core virtual nodes instead.
OVERSUBSCRIBED_RANKS = 4
VNODES = 2
# Notebook 04's scaling series stops here (a 2D grid per power of two up to this many ranks).
SCALING_MAX_RANKS = 64
# The placement lesson's ranks: two are enough for ranks to collide on one core; a node with at
# least PLACEMENT_WIDE_CORES cores runs four, so that 'one core each' and 'all on one core' differ
# by more than a factor of two.
PLACEMENT_WIDE_CORES = 8
# STREAM arrays of all ranks together take at most this share of the node's memory (synthetic
# topologies and small VMs report little memory; the rest is for the OS and other jobs).
MEMORY_SHARE = 0.5
STREAM_ARRAYS = 3  # a, b, c
# The quick parameter set sizes the lessons as if the last-level cache held at most this much
# (the 2-core VMs of earlier sessions had 32 MB): its runs only check that the notebooks run.
QUICK_LLC_CAP = 32 * 2**20
# The in-cache regime's arrays for the whole node: at most a quarter of the last-level cache, and
# at most this many doubles per array (24 MB for three), so repetitions stay short and the jobs
# cheap even where hwloc reports a last-level cache of hundreds of MB.
CACHE_MAX_ELEMENTS = 1_000_000


@dataclass(frozen=True)
class LessonPlan:
    """What the lessons run on one node (plan() builds it; every field is a count or bytes).

    cores, pus, packages, numa_nodes: as hwloc reports them; smt: PUs per core.
    llc_bytes: the last-level cache of the node, all instances together (0 when hwloc lists no
    cache). memory_bytes: the node's memory (0 when unknown).
    case: one sentence naming the case this node is in and what the lessons do about it.
    stream_elements: doubles per STREAM array for the whole node, each array >= 4x the last-level
    cache (roofline.stream_elements, STREAM's rule); stream_per_rank() splits it over ranks.
    stream_memory_resident: False when memory is too small to hold such arrays (then
    stream_elements is capped and the rates are partly cache).
    cache_elements: doubles per array for the whole node whose three arrays fill at most a
    quarter of the last-level cache, capped at CACHE_MAX_ELEMENTS (the in-cache regime, named
    as such wherever it is shown).
    placement_ranks: ranks of the placement lesson (notebook 03 and its lab).
    scaling_ranks: rank counts of notebook 04's series (1, then powers of two up to the cores).
    imbalance_ranks: ranks notebook 05 traces; imbalance_dedicated: True when each gets its own
    core on this node; vnodes: one-core virtual nodes for the split on dedicated cores when not
    (0 when the node's own cores suffice, or when it has a single core and nothing helps).
    numa_measurable: True with >= 2 NUMA nodes; numa_local, numa_remote: the NUMA node whose
    cores run the rank and the one that holds the remote memory (None when not measurable).
    """

    cores: int
    pus: int
    packages: int
    numa_nodes: int
    smt: int
    llc_bytes: int
    memory_bytes: int
    case: str
    stream_elements: int
    stream_memory_resident: bool
    cache_elements: int
    placement_ranks: int
    scaling_ranks: list[int] = field(default_factory=list)
    imbalance_ranks: int = OVERSUBSCRIBED_RANKS
    imbalance_dedicated: bool = False
    vnodes: int = 0
    numa_measurable: bool = False
    numa_local: int | None = None
    numa_remote: int | None = None

    def stream_per_rank(self, ranks: int, memory: bool = True) -> int:
        """Doubles per array of each of `ranks` ranks: the node's stream_elements (memory=True) or
        cache_elements (memory=False) split evenly, rounded up to a thousand. The cache is shared
        by the ranks of the node, so the rule is about the node's arrays, not one rank's."""
        if ranks < 1:
            raise HpclabError(f"ranks must be at least 1 (got {ranks})", "pass the job's number of ranks")
        total = self.stream_elements if memory else self.cache_elements
        return max(1000, -(-total // ranks // 1000) * 1000)

    def stream_bytes(self, ranks: int, memory: bool = True) -> int:
        """Bytes of the three arrays of one rank at stream_per_rank(ranks, memory)."""
        return STREAM_ARRAYS * roofline.WORD * self.stream_per_rank(ranks, memory)


def _powers_of_two(limit: int) -> list[int]:
    out, p = [], 1
    while p <= limit:
        out.append(p)
        p *= 2
    return out


def _plural(n: int, word: str) -> str:
    return f"{n} {word}" if n == 1 else f"{n} {word}s"


def quick_set() -> bool:
    """The quick parameter set (tests, CI smoke runs): the same rule as hpclab.course.runner.quick,
    which imports this module through the fidelity table and so cannot be imported here."""
    return os.environ.get("HPCLAB_QUICK", "") not in ("", "0", "false", "no")


def plan(topology: hwloc.Topology, llc_cap: int | None = None,
         probe: effective_cache.Probe | None = None) -> LessonPlan:
    """The lessons' sizes on the node `topology` describes (hpclab.site.topology.Topology, from
    from_lstopo(), read_xml() or synthetic()). Returns a LessonPlan; see its fields.

    llc_cap: size the lessons as if the last-level cache held at most this many bytes (default:
    QUICK_LLC_CAP with the quick parameter set, else no cap). A node whose last-level cache is
    large (a VM reporting a 480 MB L3) gets gigabyte arrays from the 4x rule; the tests only need
    the notebooks to run, so they cap it, and the case sentence says the runs may stay in cache.
    probe: notebook 00's measurement of the cache a rank really gets (effective_cache.Probe of this
    node's hwloc size): the lessons size from its effective_llc when that is smaller."""
    cores, pus = topology.n_cores, topology.n_pus
    if cores < 1:
        raise HpclabError(f"{topology.source or 'the topology'} has no cores", "read it again with lstopo")
    caches = topology.caches
    llc = roofline.last_level_cache(caches) if len(caches) else 0
    hwloc_llc = llc
    measured = bool(probe and probe.hwloc_llc == llc and 0 < probe.effective_llc < llc)
    if measured:
        llc = probe.effective_llc
    cap = llc_cap if llc_cap is not None else (QUICK_LLC_CAP if quick_set() else 0)
    capped = bool(cap and llc > cap)
    if capped:
        llc = cap
    numa_ids = sorted(int(n) for n in topology.numa_nodes["numa"])
    memory = int(topology.numa_nodes["memory_bytes"].sum())

    # STREAM: each array of the node >= 4x the last-level cache, unless memory cannot hold it.
    # Without cache sizes (some VMs hide them) assume 64 MiB per package, and say so in the case.
    assumed_llc = llc or 64 * 2**20 * topology.n_packages
    elements = roofline.stream_elements(assumed_llc)
    resident = True
    if memory and STREAM_ARRAYS * roofline.WORD * elements > MEMORY_SHARE * memory:
        elements = int(MEMORY_SHARE * memory / (STREAM_ARRAYS * roofline.WORD)) // 1_000_000 * 1_000_000
        resident = elements * roofline.WORD >= roofline.MEMORY_FACTOR * assumed_llc
    cache_elements = max(10_000, min(CACHE_MAX_ELEMENTS,
                                     int(assumed_llc / 4 / (STREAM_ARRAYS * roofline.WORD)) // 10_000 * 10_000))

    placement_ranks = 4 if cores >= PLACEMENT_WIDE_CORES else 2
    scaling = _powers_of_two(min(cores, SCALING_MAX_RANKS))
    if cores >= IMBALANCE_MIN_RANKS:
        imbalance = _powers_of_two(min(cores, IMBALANCE_MAX_RANKS))[-1]
        dedicated, vnodes = True, 0
    else:
        imbalance = OVERSUBSCRIBED_RANKS
        dedicated = cores >= imbalance
        vnodes = VNODES if (not dedicated and cores >= VNODES) else 0

    numa_ok = len(numa_ids) >= 2
    local = remote = None
    if numa_ok:
        with_cores = sorted(int(n) for n in topology.pus["numa"].unique() if int(n) >= 0)
        local = with_cores[0] if with_cores else numa_ids[0]
        remote = next(n for n in numa_ids if n != local)

    # The sentence: the node, then what each lesson does on it.
    smt = max(1, pus // cores)
    node = _plural(cores, "core") + (f" ({pus} PUs, {smt} per core)" if smt > 1 else "")
    node += f", {_plural(len(numa_ids), 'NUMA node')}"
    if dedicated:
        split = f"{imbalance} ranks on dedicated cores"
    elif vnodes:
        split = (f"{imbalance} ranks share {_plural(cores, 'core')}; the split is measured on "
                 f"{'two' if vnodes == 2 else vnodes} one-core virtual nodes")
    else:
        split = f"{imbalance} ranks share {_plural(cores, 'core')}; no split on dedicated cores is possible here"
    numa_text = (f"local vs remote memory measured with numactl --membind (NUMA {local} vs {remote})"
                 if numa_ok else "local vs remote memory cannot be measured (one NUMA node)")
    stream_text = "STREAM arrays >= 4x the last-level cache" if resident else "STREAM arrays capped by memory, partly cached"
    if not llc:
        stream_text = f"no cache sizes from hwloc: {stream_text}, assumed 64 MiB per package"
    if measured:
        stream_text += (f" (sized from the {llc / 1e6:.0f} MB a rank was measured to use, not hwloc's "
                        f"{hwloc_llc / 1e6:.0f} MB: notebook 00, section 7)")
    if capped:
        stream_text += (f" (sized as if it held {cap // 2**20} MiB, the quick parameter set: 'memory-resident' "
                        "runs may partly stay in cache)")
    case = f"{node}: {split}; {numa_text}; {stream_text}."
    return LessonPlan(cores=cores, pus=pus, packages=topology.n_packages, numa_nodes=len(numa_ids), smt=smt,
                      llc_bytes=llc, memory_bytes=memory, case=case, stream_elements=elements,
                      stream_memory_resident=resident, cache_elements=cache_elements,
                      placement_ranks=placement_ranks, scaling_ranks=scaling, imbalance_ranks=imbalance,
                      imbalance_dedicated=dedicated, vnodes=vnodes, numa_measurable=numa_ok,
                      numa_local=local, numa_remote=remote)


def this_node(llc_cap: int | None = None) -> LessonPlan:
    """plan() of the machine this runs on (lstopo run now); llc_cap as for plan(). The roofline
    lessons pass llc_cap=0: they judge residency against the real cache (roofline.cache_sizes),
    so their grids must be sized from it in every parameter set. Where notebook 00 probed the
    cache (build/cache-probe.json), its measured size counts as the real one."""
    return measured_plan(hwloc.from_lstopo(), llc_cap=llc_cap)


def measured_plan(topology: hwloc.Topology, llc_cap: int | None = None) -> LessonPlan:
    """plan() of `topology` with the cache probe recorded for a node of its last-level cache
    (notebook 00, section 7; build/cache-probe.json), if any."""
    caches = topology.caches
    llc = roofline.last_level_cache(caches) if len(caches) else 0
    return plan(topology, llc_cap=llc_cap, probe=effective_cache.load(llc) if llc else None)
