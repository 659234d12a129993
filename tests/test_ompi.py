"""Tests for hpclab.site.ompi: reading `ompi_info --parsable` into component and transport tables.

tests/data/ompi_info_*.txt were captured on the course machine by tests/data/capture.sh.
"""

import shutil
from pathlib import Path

import pytest

from hpclab.core.errors import HpclabError
from hpclab.site.ompi import (
    component_table,
    configure_options,
    parse_ompi_info,
    read_ompi_info,
    run_ompi_info,
    site_settings,
    transports,
)


DATA = Path(__file__).parent / "data"


@pytest.fixture(scope="module")
def info():
    return read_ompi_info(DATA / "ompi_info_parsable.txt")


def test_version_and_configure_line_are_read(info):
    """Are the version and every configure argument recovered from the saved output?"""
    text = (DATA / "ompi_info_parsable.txt").read_text()
    version_line = next(line for line in text.splitlines() if line.startswith("ompi:version:full:"))
    assert info.version == version_line.split(":")[-1]
    assert info.configure, "configure line missing"
    assert all(arg.startswith("--") for arg in info.configure)
    cli_line = next(line for line in text.splitlines() if line.startswith("config:cli:"))
    assert len(info.configure) == cli_line.count("' '") + 1


def test_every_component_record_becomes_one_row(info):
    """Does the table hold exactly the (framework, component) pairs with version records?"""
    text = (DATA / "ompi_info_parsable.txt").read_text()
    pairs = {tuple(line.split(":")[1:3]) for line in text.splitlines()
             if line.startswith("mca:") and ":version:" in line}
    got = set(zip(info.components["framework"], info.components["component"]))
    assert got == pairs
    assert info.components["component_version"].notna().all()


def test_point_to_point_frameworks_are_present(info):
    """Does every Open MPI 4 install show the pml, btl and osc frameworks, with ob1 and self?"""
    assert "ob1" in info.available("pml")
    assert "self" in info.available("btl")
    table = component_table(info)
    assert list(table["framework"][:5]) == ["pml", "mtl", "btl", "osc", "coll"]
    assert (table["count"] == table["components"].str.split(", ").map(len)).all()


def test_transports_follow_components(info):
    """Is a transport reported as built exactly when one of its components is installed?"""
    t = transports(info).set_index("transport")
    assert t.loc["TCP", "built"] == ("tcp" in info.available("btl"))
    assert t.loc["Open UCX", "built"] == ("ucx" in info.available("pml"))
    for _, row in t.iterrows():
        assert row["built"] == bool(row["components"])


def test_configure_options_split_name_and_value(info):
    """Is `--with-pmix=/path` split into option and value, and `--with-ucx` kept valueless?"""
    opts = configure_options(info)
    assert len(opts) == len(info.configure)
    with_value = [a for a in info.configure if "=" in a]
    if with_value:
        name, value = with_value[0][2:].split("=", 1)
        assert value in opts[opts["option"] == name]["value"].tolist()


def test_check_component_names_the_alternatives(info):
    """Does asking for a missing component fail with the installed ones in the message?"""
    info.check_component("btl", "self,vader" if "vader" in info.available("btl") else "self")
    info.check_component("btl", "^tcp")
    with pytest.raises(HpclabError, match="no btl component 'nosuchnet'") as err:
        info.check_component("btl", "self,nosuchnet")
    assert "self" in err.value.hint
    with pytest.raises(HpclabError, match="no 'warp' framework"):
        info.check_component("warp", "x")


def test_param_output_gives_parameters_and_site_settings():
    """Does `--param pml all --level 9` output give one row per parameter with its source?"""
    info = read_ompi_info(DATA / "ompi_info_param_pml.txt")
    assert not info.params.empty
    assert set(info.params["framework"]) == {"pml"}
    assert info.params["param"].is_unique
    prio = info.params[info.params["param"] == "pml_ob1_priority"]
    assert len(prio) == 1 and prio["value"].iloc[0].isdigit()
    site = site_settings(info)
    assert (site["source"] != "default").all()


def test_human_readable_output_is_rejected_with_line():
    """Does the non-parsable `ompi_info` form fail with file and line named?"""
    text = "                 Package: Debian OpenMPI\n                Open MPI: 4.1.4\n"
    with pytest.raises(HpclabError, match=r"saved.txt:1: not an ompi_info --parsable record"):
        parse_ompi_info(text, source="saved.txt")


def test_truncated_output_is_rejected():
    """Does output cut in the middle of an mca record fail with the line number?"""
    lines = (DATA / "ompi_info_parsable.txt").read_text().splitlines()
    first_mca = next(i for i, line in enumerate(lines) if line.startswith("mca:"))
    cut = "\n".join(lines[: first_mca + 3] + ["mca:btl:vad"])
    with pytest.raises(HpclabError, match=rf"x.txt:{first_mca + 4}: truncated mca record"):
        parse_ompi_info(cut, source="x.txt")


def test_output_without_components_is_rejected():
    """Does a header-only output (no mca records) fail instead of giving an empty table?"""
    lines = (DATA / "ompi_info_parsable.txt").read_text().splitlines()
    head = "\n".join(line for line in lines if not line.startswith("mca:"))
    with pytest.raises(HpclabError, match="no MCA component records"):
        parse_ompi_info(head, source="head.txt")


def test_missing_file_is_a_clear_error(tmp_path):
    """Does a wrong path give an HpclabError rather than a traceback?"""
    with pytest.raises(HpclabError, match="cannot read"):
        read_ompi_info(tmp_path / "nope.txt")


@pytest.mark.skipif(shutil.which("ompi_info") is None, reason="Open MPI not installed")
def test_live_ompi_info_matches_this_machine():
    """Does running ompi_info here give the same components as the captured file on this image?"""
    info = run_ompi_info()
    assert info.version and "ob1" in info.available("pml")
