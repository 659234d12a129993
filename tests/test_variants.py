"""Kernel variants: another build of a kernel lives in its own folder and reports how it was built."""

from __future__ import annotations

import json
import subprocess

import pytest

from hpclab.core import paths
from hpclab.tools import variants
from hpclab.core.errors import HpclabError


def test_bad_names_and_macros_are_refused():
    """Are an unknown kernel, a path-like variant name and a non-macro define refused with advice?"""
    with pytest.raises(HpclabError, match="unknown kernel"):
        variants.build("hpl", "x", {})
    with pytest.raises(HpclabError, match="plain folder name"):
        variants.build("poisson", "../bin", {"POISSON_PREFETCH": 0})
    with pytest.raises(HpclabError, match="macro"):
        variants.build("poisson", "x", {"prefetch; rm": 0})


@pytest.mark.slow
def test_variant_is_built_beside_the_course_binary(tmp_path):
    """Does a variant build land in build/variants/<name>/, say its -D setting in its report's
    build flags, and leave build/bin/poisson exactly as it was?"""
    course = paths.bin_dir() / "poisson"
    if not course.exists():
        pytest.skip("build/bin/poisson is not built: run 'make -C src'")
    before = (course.stat().st_mtime_ns, course.read_bytes())
    exe = variants.build("poisson", "test-no-prefetch", {"POISSON_PREFETCH": 0})
    assert exe == paths.build_dir() / "variants" / "test-no-prefetch" / "bin" / "poisson" and exe.is_file()
    assert (course.stat().st_mtime_ns, course.read_bytes()) == before
    out = tmp_path / "r.json"
    subprocess.run([str(exe), "--n", "32", "--iters", "2", "--json", str(out)], check=True,
                   capture_output=True, env={"OMP_NUM_THREADS": "1", "PATH": "/usr/bin:/bin"})
    assert "-DPOISSON_PREFETCH=0" in json.loads(out.read_text())["config"]["build_flags"]


@pytest.mark.cluster
def test_builds_are_compared_as_job_steps_in_a_variants_folder(cluster, tmp_path, monkeypatch):
    """Does compare run each build as a one-task Slurm job step (the builder's srun words) and keep
    its reports in a RunFolder of kind variants, one row per run?"""
    from hpclab.runs.folder import KINDS

    monkeypatch.setenv("HPCLAB_RUNS", str(tmp_path / "runs"))
    exe = paths.bin_dir() / "poisson"
    if not exe.is_file():
        pytest.skip("build the kernels first: make -C src")
    table = variants.compare({"a": exe, "b": exe}, ["--n", 32, "--iters", 2], repetitions=1, experiment="t")
    assert list(table["build"]) == ["a", "b"] and (table["lups"] > 0).all()
    folders = list((tmp_path / "runs" / KINDS["variants"] / "t").iterdir())
    assert len(folders) == 1 and sorted(p.name for p in folders[0].glob("*.json")) == ["0-1.json", "1-1.json"]
