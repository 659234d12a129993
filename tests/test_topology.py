"""Tests for hpclab.site.topology: lstopo XML, CPU set notations, synthetic topologies, drawings.

tests/data/lstopo_*.xml were written by lstopo on the course machine (tests/data/capture.sh).
"""

import re
import shutil
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from hpclab.core.errors import HpclabError
from hpclab.plots.machine import draw, figure
from hpclab.site.topology import (
    cpulist_to_cpus,
    cpus_to_cpulist,
    lstopo_image,
    mask_to_cpus,
    parse_xml,
    read_xml,
    synthetic,
)

DATA = Path(__file__).parent / "data"
needs_lstopo = pytest.mark.skipif(shutil.which("lstopo") is None, reason="hwloc not installed")


def test_machine_xml_has_every_pu_once():
    """Does the table hold each PU of the machine's XML exactly once, numbered logically 0..n-1?"""
    text = (DATA / "lstopo_machine.xml").read_text()
    topo = read_xml(DATA / "lstopo_machine.xml")
    pu_indices = sorted(int(i) for i in re.findall(r'type="PU" os_index="(\d+)"', text))
    assert sorted(topo.pus["pu"]) == pu_indices
    assert list(topo.pus["pu_logical"]) == list(range(len(pu_indices)))
    assert topo.n_cores == len(re.findall(r'type="Core"', text)) or topo.n_cores == len(pu_indices)
    assert len(topo.numa_nodes) == max(1, len(re.findall(r'type="NUMANode"', text)))


def test_synthetic_two_socket_xml_is_read_exactly():
    """Is "pack:2 numa:1 core:4 pu:2" read as 2 packages, 2 NUMA nodes, 8 cores, 16 PUs?"""
    topo = read_xml(DATA / "lstopo_synthetic_2pack.xml")
    assert (topo.n_packages, len(topo.numa_nodes), topo.n_cores, topo.n_pus) == (2, 2, 8, 16)
    # each package holds one NUMA node and the second half of the PUs is on package 1
    assert topo.pus.groupby("package")["numa"].nunique().tolist() == [1, 1]
    assert set(topo.pus[topo.pus["pu"] >= 8]["package"]) == {1}
    assert topo.pus.groupby("core").size().tolist() == [2] * 8


@needs_lstopo
def test_synthetic_numbering_maps_logical_to_os():
    """With hyperthread siblings numbered 0,2 / 1,3 (as on many Intel nodes), does logical PU 1
    map to OS CPU 2?"""
    topo = synthetic("pack:1 core:2 pu:2(indexes=0,2,1,3)")
    assert topo.logical_to_os([0, 1]) == [0, 2]
    assert topo.logical_to_os([2, 3]) == [1, 3]
    with pytest.raises(HpclabError, match="logical PU 9 does not exist"):
        topo.logical_to_os([9])


@needs_lstopo
def test_synthetic_numa_inside_packages():
    """Does "pack:2 numa:2 core:2 pu:1" give two NUMA nodes per package?"""
    topo = synthetic("pack:2 numa:2 core:2 pu:1")
    assert topo.pus.groupby("package")["numa"].nunique().tolist() == [2, 2]
    assert topo.host.startswith("synthetic")


@needs_lstopo
def test_bad_synthetic_description_is_an_error():
    """Does a description lstopo rejects give an HpclabError with lstopo's message?"""
    with pytest.raises(HpclabError, match="lstopo.*Invalid argument|cannot read the topology"):
        synthetic("pack:two")


@pytest.mark.parametrize("mask,cpus", [
    ("0x1", [0]), ("0x3", [0, 1]), ("0x00000005", [0, 2]), ("0xA", [1, 3]),
    ("0x00000001,0x00000000", [32]), ("0x0", []),
])
def test_masks(mask, cpus):
    """Are Slurm masks and hwloc multi-word cpusets read as the CPU numbers they set?"""
    assert mask_to_cpus(mask) == cpus


@given(st.sets(st.integers(0, 300), max_size=40))
def test_cpulist_round_trip(cpus):
    """Does writing CPUs in the Linux list form and reading them back give the same set?"""
    text = cpus_to_cpulist(cpus)
    assert cpulist_to_cpus(text) == sorted(cpus)
    mask = hex(sum(1 << c for c in cpus))
    assert mask_to_cpus(mask) == sorted(cpus)


@pytest.mark.parametrize("bad", ["0xg1", "zz", "", "0x"])
def test_bad_masks_are_errors(bad):
    """Is a string that is not a hex mask refused with a message?"""
    with pytest.raises(HpclabError, match="not a hexadecimal CPU mask"):
        mask_to_cpus(bad)


@pytest.mark.parametrize("bad", ["0-", "a", "3-1", "1,,x"])
def test_bad_cpulists_are_errors(bad):
    """Is a malformed CPU list refused with a message?"""
    with pytest.raises(HpclabError):
        cpulist_to_cpus(bad)


def test_truncated_xml_names_the_line():
    """Does an XML file cut in the middle fail with the file and a line number?"""
    text = (DATA / "lstopo_synthetic_2pack.xml").read_text()
    cut = text[: len(text) // 2]
    with pytest.raises(HpclabError, match=r"^half.xml:\d+: not well-formed XML"):
        parse_xml(cut, source="half.xml")


def test_other_xml_is_refused():
    """Is an XML document that is not a topology refused, as is one without PUs?"""
    with pytest.raises(HpclabError, match="root element is <html>"):
        parse_xml("<html><body/></html>", source="page.xml")
    with pytest.raises(HpclabError, match="no PU objects"):
        parse_xml('<topology version="2.0"><object type="Machine"/></topology>', source="t.xml")


def test_missing_file_is_an_error(tmp_path):
    """Does a wrong path give an HpclabError?"""
    with pytest.raises(HpclabError, match="cannot read"):
        read_xml(tmp_path / "none.xml")


def _png_size(fig, path):
    fig.savefig(path)
    return path.stat().st_size


def test_drawing_colours_bound_pus(tmp_path):
    """Does a drawing with bindings have one coloured patch per (rank, PU) pair plus the boxes?"""
    topo = read_xml(DATA / "lstopo_synthetic_2pack.xml")
    plain = draw(topo)
    bound = draw(topo, {0: [0, 1], 1: [8]})
    # three extra coloured stripes: rank 0 on PUs 0 and 1, rank 1 on PU 8
    assert len(bound.patches) == len(plain.patches) + 3
    assert bound.get_legend() is not None
    assert _png_size(bound.figure, tmp_path / "t.png") > 10_000


def test_drawing_accepts_logical_binding_tables(tmp_path):
    """Is a bindings table in logical numbering converted before colouring?"""
    import pandas as pd

    topo = read_xml(DATA / "lstopo_synthetic_2pack.xml")
    table = pd.DataFrame({"rank": [0, 1], "cpus": [[0], [15]], "numbering": ["logical"] * 2})
    fig = figure(topo, {"mpirun": table, "none": None}, provenance={"run_id": "x"})
    assert len(fig.axes) == 2
    assert _png_size(fig, tmp_path / "f.png") > 10_000
    texts = " ".join(t.get_text() for t in fig.texts)
    assert "run x" in texts


def test_drawing_refuses_cpus_the_node_lacks():
    """Does binding a rank to a CPU the topology does not have fail with advice?"""
    topo = read_xml(DATA / "lstopo_machine.xml")
    with pytest.raises(HpclabError, match="rank 3 is bound to CPU"):
        draw(topo, {3: [topo.n_pus + 5]})


@needs_lstopo
def test_lstopo_image_is_written_and_never_overwritten(tmp_path):
    """Does lstopo draw a PNG of a synthetic node, and refuse to replace an existing file?"""
    out = lstopo_image(tmp_path / "node.png", input="pack:2 core:2 pu:1")
    assert out.stat().st_size > 1000
    with pytest.raises(HpclabError, match="already exists"):
        lstopo_image(out, input="pack:2 core:2 pu:1")
    with pytest.raises(HpclabError, match="not supported"):
        lstopo_image(tmp_path / "node.bmp")
