"""The MPI libraries beside the system Open MPI (issue 28): each one's module file loads in Lmod,
a spec's mpi: is checked against the site (did you mean, in one line), the job script loads the
library and starts it the way measured to work under this Slurm, and a ping-pong and a traced
Poisson run through Slurm with every installed library, each naming its library in its report.

Runs on the local cluster; a library that `make mpi-libraries` did not install is skipped with
its name. The ping-pong's t(0 B) and 4 MiB bandwidth per library are written to
build/mpi-libraries/pingpong.json for the record.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from hpclab.core import paths
from hpclab.core.errors import HpclabError
from hpclab.jobs import experiment, templates
from hpclab.site import modules, mpi_libraries
from hpclab.site.profile import load_site
from hpclab.spec import checks
from hpclab.spec.model import make_spec
from hpclab.trace.load import load_run
from hpclab.trace.split import split

NAMES = mpi_libraries.names()
# How each family names itself in MPI_Get_library_version (the kernels' mpi_library line).
SAYS = {"openmpi": "Open MPI", "mpich": "MPICH", "intel-mpi": "Intel(R) MPI Library"}
needs_lmod = pytest.mark.skipif(not modules.LMOD_INIT.is_file(), reason="Debian's lmod is not installed")


def _installed(name: str) -> mpi_libraries.MpiLibrary:
    lib = mpi_libraries.get(name)
    if not lib.installed():
        pytest.skip(f"{name} is not installed (make mpi-libraries)")
    if not (lib.build_dir / "bin" / "pingpong").is_file():
        pytest.skip(f"the kernels are not built with {name} (make mpi-libraries)")
    return lib


# --- the records and the site ------------------------------------------------------------------


def test_every_library_the_local_site_offers_has_a_record_and_one_way_to_start():
    """Does every mpi: name of sites/local.yaml have a record whose default launcher is not also
    among the ways it refuses, with a reason for each refused way?"""
    site = load_site("local")
    assert site.mpi_names() and set(site.mpi_names()) <= set(NAMES)
    for lib in mpi_libraries.LIBRARIES:
        started = {" ".join(la.argv[:2]) for la in lib.launchers}
        assert lib.launchers and not started & set(lib.refused), lib.name
        assert all(reason.strip() for reason in lib.refused.values())


def test_each_library_selects_its_transports_with_its_own_variables():
    """Is each library's first transport its default (no variables), does every other one set only
    variables the library's record lists as selecting a transport and say what it turns off, and
    does every library say how to start ranks outside Slurm?"""
    for lib in mpi_libraries.LIBRARIES:
        first, *others = lib.transports
        assert first.env == () and others, lib.name
        for sel in others:
            assert {k for k, _ in sel.env} <= set(lib.selection) and sel.disables, (lib.name, sel.label)
        argv = lib.standalone_argv(2)
        assert argv[0].startswith(str(lib.bindir)) and "2" in argv, lib.name


def test_each_open_mpi_selects_the_shared_memory_btl_its_ompi_info_lists():
    """vader up to Open MPI 4.1, sm from 5.0: is the ob1 selection of each installed Open MPI named
    after the BTL its own ompi_info lists (Debian 13's system library has sm, Debian 12's vader)?"""
    for lib in mpi_libraries.LIBRARIES:
        if lib.components_command is None or not lib.installed():
            continue
        btls = mpi_libraries.mca_components(lib.name)["btl"]
        shm = [v for sel in lib.transports for k, v in sel.env if k == "OMPI_MCA_btl" and v != "self,tcp"]
        assert shm and all(v.split(",")[1] in btls for v in shm), (lib.name, shm, btls)
        assert not any("{shm}" in repr(sel) for sel in lib.transports)


def test_a_misspelt_mpi_is_refused_in_one_line_with_the_right_name(cluster):
    """Does mpi: mpch-5.0.2 stop before submission with one line that suggests mpich-5.0.2?"""
    with pytest.raises(HpclabError) as err:
        checks.check(make_spec(kernel="pingpong", ntasks=2, mpi="mpch-5.0.2"), load_site("local"))
    line = err.value.one_line()
    assert "\n" not in line and "did you mean 'mpich-5.0.2'" in line


def test_mca_and_a_refused_launcher_are_named_for_mpich(cluster):
    """Does an MPICH spec with mca: or launcher: mpirun stop, saying what selects its transport and
    why its mpiexec does not start here?"""
    site = load_site("local")
    _installed("mpich-5.0.2")
    with pytest.raises(HpclabError, match="MPIR_CVAR_CH4_NETMOD"):
        checks.check(make_spec(kernel="pingpong", ntasks=2, mpi="mpich-5.0.2", mca={"btl": "self"}), site)
    with pytest.raises(HpclabError, match="Auto-detection of PMI version failed"):
        checks.check(make_spec(kernel="pingpong", ntasks=2, mpi="mpich-5.0.2", launcher="mpirun"), site)


def test_open_mpi_5_components_come_from_its_own_ompi_info(cluster):
    """Is btl vader (Open MPI 4's name) refused for Open MPI 5, with sm among the choices?"""
    _installed("openmpi-5.0.11")
    with pytest.raises(HpclabError) as err:
        checks.check(make_spec(kernel="pingpong", ntasks=2, mpi="openmpi-5.0.11", mca={"btl": "self,vader"}),
                     load_site("local"))
    assert "'vader'" in err.value.what and "sm" in err.value.what


@pytest.mark.parametrize("name", NAMES)
def test_the_job_script_loads_the_library_and_starts_its_build(name, tmp_path):
    """Does the job script of mpi: <name> load its module, start the ranks with its launcher and
    run the kernel built with it (build/<name>/bin)?"""
    lib = mpi_libraries.get(name)
    text = templates.render(make_spec(kernel="pingpong", ntasks=2, mpi=name), load_site("local"), tmp_path / "run")
    assert f"module load {lib.module_name} " in text
    assert " ".join(lib.launcher.words(lib.bindir)) in text
    assert str(lib.build_dir / "bin" / "pingpong") in text
    assert "provenance/mpi-library.txt" in text


# --- Lmod ------------------------------------------------------------------------------------------


@needs_lmod
@pytest.mark.parametrize("name", NAMES)
def test_each_module_file_loads_in_lmod_and_picks_its_mpicc(name):
    """Does `module load <its module>` in a login shell put the library's own mpicc first?"""
    lib = mpi_libraries.get(name)
    if lib.requirement is not None:
        _installed(name)
    folder = mpi_libraries.modulefiles_dir()
    if not (folder / f"{lib.module_name}.lua").is_file():
        pytest.skip(f"no module file {lib.module_name} in {folder} (make mpi-libraries)")
    env = {k: v for k, v in os.environ.items() if not k.startswith("BASH_FUNC_")}
    shown = "; ".join(f'echo "{k}=${{{k}:-}}"' for k in lib.environment())
    res = subprocess.run(["bash", "-lc", f"module use {folder}; module load {lib.module_name}; {shown + '; ' if shown else ''}"
                          "which mpicc; mpicc -show"], capture_output=True, text=True, env=env, timeout=60)
    assert res.returncode == 0, res.stderr
    lines = res.stdout.splitlines()
    assert Path(lines[-2]).resolve() == lib.mpicc.resolve()
    assert [f"{k}={v}" for k, v in lib.environment().items()] == lines[:len(lib.environment())]
    assert str(lib.prefix) in lines[-1] and "SUBSTITUTE" not in lines[-1]  # the wrapper found its prefix


def test_the_install_plan_names_every_wheel_and_the_variables_each_library_needs():
    """Does `python -m hpclab.site.mpi_libraries plan` give the install script, per wheel library,
    its name, its requirements (comma-separated), prefix, build folder and NAME=value variables?"""
    res = subprocess.run([sys.executable, "-m", "hpclab.site.mpi_libraries", "plan"], capture_output=True,
                         text=True, timeout=60, cwd=paths.repo())
    assert res.returncode == 0, res.stderr
    lines = res.stdout.splitlines()
    assert lines[0] == f"root {mpi_libraries.root()}"
    rows = {line.split()[0]: line.split() for line in lines[1:]}
    assert set(rows) == {lib.name for lib in mpi_libraries.to_install()}
    for lib in mpi_libraries.to_install():
        name, requirement, prefix, build, env = rows[lib.name]
        assert requirement.split(",") == lib.requirements and all("==" in r for r in lib.requirements)
        assert (prefix, build) == (str(lib.prefix), str(lib.build_dir))
        assert env == (",".join(f"{k}={v}" for k, v in lib.environment().items()) or "-")
    intel = mpi_libraries.get("intel-mpi-2021.19")
    assert rows[intel.name][4] == f"I_MPI_ROOT={intel.prefix}" and len(intel.requirements) == 2


# --- through Slurm ---------------------------------------------------------------------------------


@pytest.fixture
def runs_root(tmp_path, monkeypatch, cluster):
    monkeypatch.delenv("HPCLAB_SITE", raising=False)
    monkeypatch.setenv("HPCLAB_RUNS", str(tmp_path / "runs"))
    return tmp_path / "runs"


def _record(name: str, table, carried: str) -> None:
    """Keep t(0 B) and the 4 MiB bandwidth of this library's run in build/mpi-libraries/pingpong.json."""
    out = paths.build_dir() / "mpi-libraries" / "pingpong.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    seen = json.loads(out.read_text()) if out.is_file() else {}
    row0, big = table[table["bytes"] == 0].iloc[0], table[table["bytes"] == 4 << 20].iloc[0]
    seen[name] = {"t0_usec": float(row0["t_usec"]), "mbytes_per_sec_4MiB": float(big["mbytes_per_sec"]),
                  "transport": carried}
    out.write_text(json.dumps(seen, indent=1, sort_keys=True) + "\n")


@pytest.mark.cluster
@pytest.mark.parametrize("name", NAMES)
def test_a_pingpong_runs_with_each_library_and_names_it(name, runs_root):
    """Does a 2-rank ping-pong up to 4 MiB, built with and started for library <name>, complete
    through Slurm, report that library's MPI_Get_library_version, say what carried the messages
    and leave its own description in the provenance?"""
    lib = _installed(name)
    spec = make_spec(kernel="pingpong", ntasks=2, mpi=name, args={"reps": 100}, experiment="mpi-libraries",
                     time="00:05:00")
    (run,) = experiment.run(spec, progress=False, timeout=900)
    assert run.state == "completed", run.folder.tail()
    result = run.folder.result()
    said = json.dumps(result)
    assert SAYS[lib.family] in said and (lib.version in said or lib.requirement is None)
    assert (run.folder.provenance / "mpi-library.txt").stat().st_size > 0
    recorded = "\n" + (run.folder.provenance / "env.txt").read_text()
    # what made it say so, and (from a wheel library's module) its name, in the provenance
    for var in [*lib.report_env, *lib.environment(), *(["HPCLAB_MPI"] if lib.requirement else [])]:
        assert f"\n{var}=" in recorded, var
    table = run.table()
    assert {0, 4 << 20} <= set(table["bytes"])
    carried = mpi_libraries.transport_said(name, (run.path / "stdout").read_text() + (run.path / "stderr").read_text())
    assert carried, f"{name} did not say what carried the messages ({lib.report_env})"
    _record(name, table, carried)


@pytest.mark.cluster
@pytest.mark.parametrize("name", NAMES)
def test_a_traced_poisson_runs_with_each_library_and_splits(name, runs_root):
    """Does the tracer built with library <name> record a 2-rank Poisson run whose trace loads and
    splits into five parts that add up to the run's time?"""
    lib = _installed(name)
    if not (lib.build_dir / "lib" / "libmpitrace.so").is_file():
        pytest.skip(f"the tracer did not build with {name}")
    spec = make_spec(kernel="poisson", ntasks=2, mpi=name, trace=True, args={"n": 64, "iters": 5},
                     experiment="mpi-libraries-trace")
    (run,) = experiment.run(spec, progress=False, timeout=900)
    assert run.state == "completed", run.folder.tail()
    assert len(list(run.folder.trace_dir.iterdir())) == 2
    five = split(load_run(run.path))
    parts = five.T_comp + five.T_transfer + five.T_load + five.T_depend + five.T_rest
    assert parts == pytest.approx(five.T_real, rel=0.01)


# --- the MPI 5.0 ABI -----------------------------------------------------------------------------

ABI_HELLO = r"""
#include <mpi.h>
#include <stdio.h>
int main(int argc, char **argv) {
    char v[MPI_MAX_LIBRARY_VERSION_STRING]; int n, r, len;
    MPI_Init(&argc, &argv);
    MPI_Comm_size(MPI_COMM_WORLD, &n); MPI_Comm_rank(MPI_COMM_WORLD, &r);
    MPI_Get_library_version(v, &len);
    if (r == 0) printf("abi ranks=%d library=%.40s\n", n, v);
    MPI_Finalize();
    return 0;
}
"""


@pytest.mark.cluster
def test_one_abi_binary_runs_under_every_library_that_ships_the_abi(runs_root, tmp_path):
    """Does a program built once with MPICH's mpicc_abi link libmpi_abi.so.1 and run on 2 ranks
    through Slurm under every library whose prefix has libmpi_abi.so.1, and do the others lack it?"""
    builder = _installed("mpich-5.0.2")
    src, exe = tmp_path / "hello.c", tmp_path / "hello-abi"
    src.write_text(ABI_HELLO)
    subprocess.run([str(builder.bindir / "mpicc_abi"), str(src), "-o", str(exe)], check=True, timeout=120)
    needed = subprocess.run(["readelf", "-d", str(exe)], capture_output=True, text=True).stdout
    assert "libmpi_abi.so.1" in needed and "libmpi.so" not in needed.replace("libmpi_abi.so", "")
    for lib in mpi_libraries.LIBRARIES:
        has_abi = (lib.prefix / "lib" / "libmpi_abi.so.1").exists()
        assert has_abi == lib.abi, f"{lib.name}: record says abi={lib.abi}, its prefix says {has_abi}"
        if not has_abi or not lib.installed():
            continue
        spec = make_spec(kernel="program", command=[str(exe)], ntasks=2, mpi=lib.name, experiment="abi",
                         env={"LD_LIBRARY_PATH": str(lib.prefix / "lib")})
        (run,) = experiment.run(spec, progress=False, timeout=900)
        assert run.state == "completed", run.folder.tail()
        assert "abi ranks=2" in (run.path / "stdout").read_text()


# --- notebook 02's section 7 ---------------------------------------------------------------------

def test_the_lesson_runs_every_installed_library_and_says_why_not_the_others():
    """Does notebook 02's library comparison get one ping-pong spec per installed library (its
    mpi: set, its name as the label) and a reason naming `make mpi-libraries` for each other?"""
    from hpclab.course.lessons import transports as lesson_transports

    specs, skipped = lesson_transports.library_specs(repetitions=3)
    assert [s.label for s in specs] + sorted(skipped) and set(s.label for s in specs) | set(skipped) == set(NAMES)
    for s in specs:
        assert s.mpi == s.label and s.kernel == "pingpong" and s.ntasks == 2 and s.repetitions == 3
        assert mpi_libraries.get(s.label).installed()
    assert all("make mpi-libraries" in why for why in skipped.values())


def test_identical_copies_in_a_prefix_become_hard_links_and_nothing_else_changes(tmp_path):
    """Do a wheel's identical copies (libx.so, libx.so.1) become one file with two names, while a
    different file, an empty one and an identical copy with other permissions stay apart?"""
    lib = tmp_path / "lib"
    lib.mkdir()
    (lib / "libx.so.1").write_bytes(b"\x7fELF same")
    (lib / "libx.so").write_bytes(b"\x7fELF same")
    (lib / "liby.so").write_bytes(b"\x7fELF other")
    (lib / "empty").write_bytes(b"")
    (lib / "empty2").write_bytes(b"")
    (tmp_path / "run").write_bytes(b"\x7fELF same")
    (tmp_path / "run").chmod(0o755)
    assert mpi_libraries.link_copies(tmp_path) == (1, len(b"\x7fELF same"))
    assert (lib / "libx.so").stat().st_ino == (lib / "libx.so.1").stat().st_ino
    assert (lib / "libx.so").read_bytes() == b"\x7fELF same" and (lib / "liby.so").read_bytes() == b"\x7fELF other"
    assert (tmp_path / "run").stat().st_ino != (lib / "libx.so").stat().st_ino
    assert (lib / "empty").stat().st_ino != (lib / "empty2").stat().st_ino
    assert mpi_libraries.link_copies(tmp_path) == (0, 0)  # again: nothing left to link
