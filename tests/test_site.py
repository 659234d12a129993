"""Site profiles: the shipped YAML files pass the schema, bad ones fail with a clear message,
HPCLAB_SITE picks the default, and the machine facts (MCA components, NUMA nodes, partition
cores) come from the real tools."""

import json

import jsonschema
import pytest

from hpclab.core import paths
from hpclab.site import ompi, profile as site
from hpclab.core.errors import HpclabError


def test_schema_is_a_valid_json_schema():
    """Is sites/schema.json itself a valid draft 2020-12 schema?"""
    schema = json.loads((paths.sites_dir() / "schema.json").read_text())
    jsonschema.Draft202012Validator.check_schema(schema)


@pytest.mark.parametrize("name", ["local", "example-cluster"])
def test_shipped_sites_load(name):
    """Do the shipped profiles load and name their default partition among their partitions?"""
    s = site.load_site(name)
    assert s.name == name
    assert s.default_partition in s.partition_names()
    assert s.launcher in ("srun", "mpirun")


def test_local_site_has_no_hard_coded_cores():
    """Does the local profile leave cores to the running cluster instead of writing them down?"""
    s = site.load_site("local")
    assert s.discover_cores
    assert all(p.cores_per_node is None and p.nodes is None for p in s.partitions)


def test_hpclab_site_env_picks_the_default(monkeypatch):
    """Does HPCLAB_SITE choose the profile when none is named?"""
    monkeypatch.setenv("HPCLAB_SITE", "example-cluster")
    assert site.load_site().name == "example-cluster"
    monkeypatch.delenv("HPCLAB_SITE")
    assert site.load_site().name == "local"


def _write(tmp_path, text):
    p = tmp_path / "mysite.yaml"
    p.write_text(text)
    return p


BASE = "name: t\ndescription: d\npartitions: [{name: p}]\ndefault_partition: p\nlauncher: srun\n"


def test_unknown_key_is_rejected(tmp_path):
    """Is a misspelt key an error naming the key, rather than silently ignored?"""
    with pytest.raises(HpclabError, match="acount"):
        site.load_site(_write(tmp_path, BASE + "acount: x\n"))


@pytest.mark.parametrize("extra, word", [
    ("", None),
    ("launcher: aprun\n", "launcher"),
    ("modules: gcc\n", "modules"),
])
def test_schema_errors_name_the_field(tmp_path, extra, word):
    """Does a value of the wrong type or outside the allowed set name its field?"""
    text = BASE.replace("launcher: srun\n", "") + (extra or "launcher: srun\n")
    if word is None:
        assert site.load_site(_write(tmp_path, text)).name == "t"
        return
    with pytest.raises(HpclabError) as exc:
        site.load_site(_write(tmp_path, text))
    assert word in str(exc.value)


def test_default_partition_must_exist(tmp_path):
    """Is a default partition that is not listed caught when the file is loaded?"""
    with pytest.raises(HpclabError, match="default_partition"):
        site.load_site(_write(tmp_path, BASE.replace("default_partition: p", "default_partition: q")))


def test_missing_site_lists_known_sites():
    """Does asking for a site that does not exist say which sites do?"""
    with pytest.raises(HpclabError) as exc:
        site.load_site("no-such-site")
    assert "local" in exc.value.hint


def test_not_yaml_is_a_clear_error(tmp_path):
    """Is a broken YAML file reported as such (no yaml traceback)?"""
    with pytest.raises(HpclabError, match="not valid YAML"):
        site.load_site(_write(tmp_path, "name: [unclosed\n"))


def test_unknown_partition_lists_the_valid_ones():
    """Does asking a site for a partition it does not have list the ones it has?"""
    s = site.load_site("example-cluster")
    with pytest.raises(HpclabError) as exc:
        s.partition("gpu")
    assert "short" in exc.value.hint and "compute" in exc.value.hint


def test_mca_components_come_from_ompi_info():
    """Does the component list contain the self BTL and ob1 PML every Open MPI 4 build has?"""
    comps = site.mca_components()
    assert "self" in comps["btl"]
    assert "ob1" in comps["pml"]
    assert "btl_tcp_if_include" in site.mca_params()


def test_ompi_info_is_stored_once_by_content(tmp_path, monkeypatch):
    """Is ompi_info saved under runs/_site/<hash>.txt, and a second call reuses the file?"""
    monkeypatch.setenv("HPCLAB_RUNS", str(tmp_path))
    first = site.store_ompi_info()
    mtime = first.stat().st_mtime_ns
    second = site.store_ompi_info()
    assert first == second and first.parent == tmp_path / "_site"
    assert second.stat().st_mtime_ns == mtime
    assert first.read_text() == ompi.all_text()


def test_numa_nodes_include_node_zero():
    """Does every machine report NUMA node 0?"""
    assert 0 in site.numa_nodes()


@pytest.mark.cluster
def test_local_partition_cores_come_from_sinfo(cluster):
    """Does the local site read nodes and cores of its partition from the running cluster?"""
    p = site.load_site("local").partition()
    assert p.nodes >= 1 and p.cores_per_node >= 1
