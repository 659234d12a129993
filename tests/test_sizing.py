"""Tests for hpclab.course.sizing: the lessons' sizes chosen from hwloc topologies.

The topologies are hwloc synthetic descriptions (lstopo --input "..."), so the choices are checked
for nodes this machine is not: a 2-core VM like the course's, a 16-core single socket, and a
two-socket node of 2 x 32 cores with SMT and one NUMA domain per socket.
"""

import shutil
from pathlib import Path

import pytest

from hpclab.analysis import roofline
from hpclab.core.errors import HpclabError
from hpclab.course import sizing
from hpclab.site.topology import read_xml, synthetic

DATA = Path(__file__).parent / "data"
needs_lstopo = pytest.mark.skipif(shutil.which("lstopo") is None, reason="hwloc not installed")

VM = "pack:1 numa:1(memory=8GiB) l3:1(size=32MiB) l2:2(size=2MiB) core:1 pu:1"
SOCKET16 = "pack:1 numa:1(memory=64GiB) l3:1(size=32MiB) l2:16(size=1MiB) core:1 pu:1"
TWO_BY_32 = "pack:2 numa:1(memory=256GiB) l3:1(size=256MiB) l2:32(size=2MiB) core:1 pu:2"


@pytest.fixture(scope="module")
def plans():
    if shutil.which("lstopo") is None:
        pytest.skip("hwloc not installed")
    return {name: sizing.plan(synthetic(d)) for name, d in
            (("vm", VM), ("socket16", SOCKET16), ("two_by_32", TWO_BY_32))}


def test_topology_counts_are_read(plans):
    """Does the plan count cores, PUs, NUMA nodes and the whole node's last-level cache?"""
    vm, s16, big = plans["vm"], plans["socket16"], plans["two_by_32"]
    assert (vm.cores, vm.pus, vm.numa_nodes, vm.smt, vm.llc_bytes) == (2, 2, 1, 1, 32 * 2**20)
    assert (s16.cores, s16.pus, s16.numa_nodes, s16.smt) == (16, 16, 1, 1)
    assert (big.cores, big.pus, big.numa_nodes, big.smt, big.packages) == (64, 128, 2, 2, 2)
    assert big.llc_bytes == 2 * 256 * 2**20  # one L3 per package, both counted


def test_two_core_vm_oversubscribes_and_uses_virtual_nodes(plans):
    """On 2 cores: 4 imbalance ranks share the cores, the split goes to two one-core virtual nodes,
    NUMA is not measurable, and the case sentence says so."""
    vm = plans["vm"]
    assert vm.imbalance_ranks == 4 and not vm.imbalance_dedicated and vm.vnodes == 2
    assert vm.scaling_ranks == [1, 2]
    assert vm.placement_ranks == 2
    assert not vm.numa_measurable and vm.numa_local is None
    assert vm.case.startswith("2 cores, 1 NUMA node: 4 ranks share 2 cores; the split is measured on two one-core virtual nodes")
    assert "cannot be measured" in vm.case


def test_sixteen_cores_trace_at_least_eight_dedicated_ranks(plans):
    """On a 16-core socket: >= 8 dedicated imbalance ranks, no virtual nodes, scaling to 16."""
    s16 = plans["socket16"]
    assert s16.imbalance_ranks >= 8 and s16.imbalance_ranks <= s16.cores and s16.imbalance_dedicated
    assert s16.vnodes == 0
    assert s16.scaling_ranks == [1, 2, 4, 8, 16]
    assert s16.placement_ranks == 4
    assert not s16.numa_measurable
    assert "16 ranks on dedicated cores" in s16.case


def test_two_socket_node_measures_numa_and_counts_cores_not_pus(plans):
    """On 2 x 32 cores with SMT: ranks are counted on the 64 cores (not 128 PUs), NUMA local vs
    remote is measurable between the two domains."""
    big = plans["two_by_32"]
    assert max(big.scaling_ranks) == 64
    assert big.imbalance_dedicated and 8 <= big.imbalance_ranks <= 64
    assert big.numa_measurable and (big.numa_local, big.numa_remote) == (0, 1)
    assert "numactl --membind" in big.case and "2 per core" in big.case


def test_stream_arrays_are_four_times_the_last_level_cache(plans):
    """Is each STREAM array of the node at least 4x the last-level cache, split evenly over the
    ranks, and the in-cache regime at most a quarter of it?"""
    for p in plans.values():
        assert p.stream_memory_resident
        assert p.stream_elements == roofline.stream_elements(p.llc_bytes)
        assert p.stream_elements * 8 >= 4 * p.llc_bytes
        for ranks in (1, 2, 3, 4):
            assert p.stream_per_rank(ranks) * ranks >= p.stream_elements
            assert p.stream_bytes(ranks) == 24 * p.stream_per_rank(ranks)
        assert 3 * 8 * p.cache_elements <= p.llc_bytes / 4
        assert p.cache_elements <= sizing.CACHE_MAX_ELEMENTS


@needs_lstopo
def test_small_memory_caps_the_arrays_and_says_partly_cached():
    """When memory cannot hold arrays of 4x the cache, are they capped and called partly cached?"""
    p = sizing.plan(synthetic("pack:1 numa:1(memory=1GiB) l3:1(size=256MiB) core:2 pu:1"))
    assert 3 * 8 * p.stream_elements <= 0.5 * 2**30
    assert not p.stream_memory_resident and "partly cached" in p.case


def test_recorded_two_socket_xml_without_caches():
    """A topology without cache objects (tests/data/lstopo_synthetic_2pack.xml) still gets a plan,
    and the case says its cache size was assumed."""
    p = sizing.plan(read_xml(DATA / "lstopo_synthetic_2pack.xml"))
    assert p.llc_bytes == 0 and "assumed" in p.case
    assert p.numa_measurable and p.cores == 8 and p.imbalance_dedicated and p.imbalance_ranks == 8


def test_bad_rank_count_is_an_error(plans):
    """Does stream_per_rank refuse zero ranks with a message?"""
    with pytest.raises(HpclabError, match="at least 1"):
        plans["vm"].stream_per_rank(0)


def test_the_quick_parameter_set_caps_the_cache_the_lessons_are_sized_for(monkeypatch):
    """A VM reporting a 480 MB L3 gets gigabyte arrays from the 4x rule; with HPCLAB_QUICK the lessons
    are sized as if the cache held 32 MiB, and the case sentence says the runs may stay in cache."""
    from hpclab.course import sizing
    from hpclab.site import topology as hwloc

    big = hwloc.synthetic("pack:1 l3:1(size=480MB) l2:2(size=2MB) core:1 pu:1")
    monkeypatch.delenv("HPCLAB_QUICK", raising=False)
    full = sizing.plan(big)
    monkeypatch.setenv("HPCLAB_QUICK", "1")
    quick = sizing.plan(big)
    assert full.llc_bytes > 400 * 2**20 and quick.llc_bytes == sizing.QUICK_LLC_CAP
    assert quick.stream_elements < full.stream_elements
    assert "quick parameter set" in quick.case and "quick parameter set" not in full.case
    assert sizing.plan(big, llc_cap=0).llc_bytes == full.llc_bytes
