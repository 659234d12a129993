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
    eager_limit,
    facts,
    parse_ompi_info,
    read_ompi_info,
    run_ompi_info,
    shm_btl,
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


# --- one lesson, two Open MPIs ------------------------------------------------------------------
# ompi_info_5.0.7_parsable.txt: `ompi_info --parsable` and `--parsable --param btl sm --level 9`
# of Debian 13's Open MPI 5.0.7, captured in the root of scripts/distro-check.sh (2026-11-26).

@pytest.fixture(scope="module")
def info5():
    return read_ompi_info(DATA / "ompi_info_5.0.7_parsable.txt")


def test_shared_memory_btl_is_named_as_installed(info, info5):
    """Is the shared-memory BTL 'vader' where 4.1 installed it and 'sm' where 5.0 did, and an error
    naming the installed BTLs where there is neither?"""
    assert shm_btl(info) == "vader"
    assert shm_btl(info5) == "sm"
    bare = parse_ompi_info('ompi:version:full:5.0.7\nmca:btl:tcp:version:"component:5.0.7"\n')
    with pytest.raises(HpclabError, match="tcp"):
        shm_btl(bare)


def test_version_facts_come_from_ompi_info(info, info5):
    """Does 4.1 report ORTE and the single-copy BTL parameter, and 5.0 PRRTE and the smsc framework?"""
    f4, f5 = facts(info), facts(info5)
    assert (f4.major, f4.runtime, f4.runtime_version) == (4, "ORTE", info.records["orte:version:full"])
    assert (f5.major, f5.shm_btl, f5.runtime, f5.single_copy) == (5, "sm", "PRRTE", "smsc")
    assert "`sm`" in f5.sentence() and "PRRTE" in f5.sentence() and "5.0.7" in f5.sentence()


def test_ucx_log_lines_on_stdout_are_not_records(info5):
    """Does a UCX error line that ompi_info prints on stdout (no /proc) leave the parse intact?"""
    text = (DATA / "ompi_info_5.0.7_parsable.txt").read_text()
    noisy = "[1795659139.366082] [vm:9152 :0]             sys.c:306  UCX  ERROR failed to get boot id\n" + text
    assert parse_ompi_info(noisy).available("btl") == info5.available("btl")


def test_lesson_selections_use_this_open_mpis_names(info, info5):
    """Are notebook 02's selections named and parameterised after each Open MPI's own components:
    btl_vader_single_copy_mechanism on 4.1, the smsc framework on 5.0, never 'vader' on 5.0?"""
    from hpclab.course.lessons import transports as lesson_transports

    # the saved 4.1 output has no parameters: without btl_vader_single_copy_mechanism there is no
    # single-copy choice to offer; with it (one --param record added), there is
    assert list(lesson_transports.selections(info)) == ["default", "ob1+vader", "ob1+tcp", "no vader", "ucx",
                                                        "cm+ofi (tcp)"]
    text4 = (DATA / "ompi_info_parsable.txt").read_text()
    s4 = lesson_transports.selections(parse_ompi_info(
        text4 + "mca:btl:vader:param:btl_vader_single_copy_mechanism:value:cma\n"))
    s5 = lesson_transports.selections(info5)
    assert list(s4) == ["default", "ob1+vader", "ob1+tcp", "no vader", "ob1+vader, no single copy",
                        "ob1+vader, CMA", "ucx", "cm+ofi (tcp)"]
    assert s4["ob1+vader, CMA"].mca["btl_vader_single_copy_mechanism"] == "cma"
    assert list(s5) == ["default", "ob1+sm", "ob1+tcp", "no sm", "ob1+sm, no single copy", "ob1+sm, CMA", "ucx",
                        "cm+ofi (tcp)"]
    assert s5["cm+ofi (tcp)"].mca == {"pml": "cm", "mtl": "ofi", "mtl_ofi_provider_include": "tcp"}
    assert s5["no sm"].mca == {"btl": "^sm"}
    assert s5["ob1+sm, no single copy"].mca["smsc"] == "^cma" and s5["ob1+sm, CMA"].mca["smsc"] == "cma"
    assert not any("vader" in str(sel.mca) for sel in s5.values())
    for sel in s5.values():   # every component a 5.0 selection names is installed there
        for key, value in sel.mca.items():
            if key in info5.frameworks():
                info5.check_component(key, value)


def test_this_machines_shared_memory_btl_has_an_eager_limit():
    """Does eager_limit() without arguments read the installed shared-memory BTL's parameter?"""
    if not shutil.which("ompi_info"):
        pytest.skip("ompi_info not installed")
    assert eager_limit() == eager_limit(shm_btl()) > 0


def test_the_mtl_selection_needs_pml_cm_and_mtl_ofi():
    """Is notebook 02's cm/MTL selection offered only where ompi_info lists both the cm PML and the
    ofi MTL?"""
    from hpclab.course.lessons import transports as lesson_transports

    text4 = (DATA / "ompi_info_parsable.txt").read_text()
    no_ofi = "\n".join(line for line in text4.splitlines() if not line.startswith("mca:mtl:ofi:")) + "\n"
    assert "cm+ofi (tcp)" in lesson_transports.selections(parse_ompi_info(text4))
    assert "cm+ofi (tcp)" not in lesson_transports.selections(parse_ompi_info(no_ofi))
