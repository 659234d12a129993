"""Lmod modules for a site profile: the module files of this machine's gcc and Open MPI load in
Lmod, the classroom profile puts its account, QOS and module lines in every job script and job
step, a real job runs through the local cluster under a Slurm account and QOS with the modules
loaded, and a module that does not exist stops the job with a message naming it."""

import json
import os
import shutil
import subprocess
import time
from pathlib import Path

import pytest
import yaml

from hpclab.classroom.layout import DEFAULT_ROOT, ClassroomLayout
from hpclab.core import paths
from hpclab.core.errors import HpclabError
from hpclab.jobs import experiment, templates
from hpclab.kernels import registry
from hpclab.site import modules, ompi
from hpclab.site.profile import load_site
from hpclab.site.slurm import run_slurm
from hpclab.spec.model import make_spec

needs_lmod = pytest.mark.skipif(not modules.LMOD_INIT.is_file(), reason="Debian's lmod is not installed")


def _clean_env() -> dict:
    """This process's environment without an inherited `module` shell function."""
    return {k: v for k, v in os.environ.items() if not k.startswith("BASH_FUNC_")}


@pytest.fixture(scope="module")
def modulefiles(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("modulefiles")
    modules.write_modulefiles(folder)
    return folder


def _versions() -> tuple[str, str]:
    gcc = subprocess.run(["gcc", "-dumpfullversion"], capture_output=True, text=True).stdout.strip()
    return gcc, ompi.run_ompi_info().version


def test_module_files_are_named_for_the_machines_versions_and_world_readable(modulefiles):
    """Are the module files gcc/<gcc -dumpfullversion>.lua and openmpi/<ompi_info's version>.lua,
    readable by every user, and do they say they wrap Debian's packages?"""
    gcc, mpi = _versions()
    files = {p.relative_to(modulefiles).as_posix() for p in modulefiles.rglob("*.lua")}
    assert files == {f"gcc/{gcc}.lua", f"openmpi/{mpi}.lua"}
    for path in [modulefiles / "gcc", modulefiles / "openmpi"]:
        assert path.stat().st_mode & 0o777 == 0o755
    for name in files:
        text = (modulefiles / name).read_text()
        assert (modulefiles / name).stat().st_mode & 0o777 == 0o644
        assert text.startswith(modules.MARKER) and "Debian" in text and "help([[" in text


@needs_lmod
def test_lmod_loads_the_module_files_with_the_machines_tools(modulefiles):
    """Does Lmod, started from its bash init, load gcc and openmpi from the folder, with CC, MPICC
    and MPI_HOME naming this machine's tools (the compiler and the wrapper of the same versions)?"""
    script = (f"source {modules.LMOD_INIT}; module use {modulefiles}; module load gcc openmpi; "
              'echo "$CC|$MPICC|$MPI_HOME|$LOADEDMODULES"; "$CC" -dumpfullversion; "$MPICC" --showme:version')
    res = subprocess.run(["bash", "-lc", script], capture_output=True, text=True, env=_clean_env())
    assert res.returncode == 0, res.stderr
    first, cc_version, mpicc_version = res.stdout.strip().splitlines()[-3:]
    cc, mpicc, mpi_home, loaded = first.split("|")
    gcc, mpi = _versions()
    info = ompi.run_ompi_info()
    assert Path(cc).resolve() == Path(shutil.which("gcc")).resolve()
    assert Path(mpicc).resolve() == Path(shutil.which("mpicc")).resolve()
    assert mpi_home == info.prefix
    assert loaded.split(":") == [f"gcc/{gcc}", f"openmpi/{mpi}"]
    assert cc_version == gcc and f"Open MPI {mpi}" in mpicc_version


@needs_lmod
def test_whatis_says_the_modules_wrap_debians_packages(modulefiles):
    """Does `module whatis` tell a student that these modules wrap Debian's packages?"""
    res = subprocess.run(["bash", "-c", f"source {modules.LMOD_INIT}; module use {modulefiles}; "
                          "module whatis gcc openmpi"], capture_output=True, text=True, env=_clean_env())
    said = res.stdout + res.stderr
    assert said.count("Debian") >= 2 and "wrapped as a module by hpclab" in said


@needs_lmod
def test_loaded_environment_gives_what_the_job_lines_give(modulefiles):
    """Do the job script's own lines (load_lines), run here, leave the modules loaded?"""
    env = modules.loaded_environment(["gcc", "openmpi"], [str(modulefiles)])
    assert env["MPICC"].endswith("/mpicc") and env["OMPI_HOME"] == ompi.run_ompi_info().prefix
    assert env["LOADEDMODULES"].startswith("gcc/")


@needs_lmod
def test_unknown_module_is_an_error_naming_it_and_the_module_path(modulefiles):
    """Is a module Lmod does not know an HpclabError that names it and where Lmod looked?"""
    with pytest.raises(HpclabError, match="module no-such-mpi is unknown here") as err:
        modules.loaded_environment(["gcc", "no-such-mpi"], [str(modulefiles)])
    assert str(modulefiles) in str(err.value)


@needs_lmod
def test_a_module_that_refuses_to_load_is_told_apart_from_an_unknown_one(modulefiles, tmp_path):
    """Is a module that exists but fails while loading reported as such, with Lmod's reason?"""
    folder = tmp_path / "more"
    (folder / "broken").mkdir(parents=True)
    (folder / "broken" / "1.0.lua").write_text('LmodError("this module is broken on purpose")\n')
    with pytest.raises(HpclabError, match="module broken did not load") as err:
        modules.loaded_environment(["gcc", "broken"], [str(modulefiles), str(folder)])
    assert "broken on purpose" in str(err.value)


def test_missing_lmod_or_folder_is_a_clear_error(modulefiles, tmp_path):
    """Without Lmod's init file, or with a module folder that does not exist, is the answer an
    HpclabError saying which, and does a job's script stop with that message (exit 1)?"""
    with pytest.raises(HpclabError, match="Lmod is not installed"):
        modules.loaded_environment(["gcc"], [str(modulefiles)], init=tmp_path / "no-lmod" / "bash")
    script = "\n".join(modules.load_lines(["gcc"], [str(modulefiles)], init=tmp_path / "no-lmod" / "bash"))
    res = subprocess.run(["bash", "-c", script + "\necho kernel ran"], capture_output=True, text=True,
                         env=_clean_env())
    assert res.returncode == 1 and "kernel ran" not in res.stdout
    assert "hpclab: no module command and no Lmod" in res.stderr and "gcc" in res.stderr
    if modules.LMOD_INIT.is_file():
        with pytest.raises(HpclabError, match="module folder .*nowhere is missing"):
            modules.loaded_environment(["gcc"], [str(tmp_path / "nowhere")])


@pytest.mark.parametrize("bad", ["gcc; rm -rf ~", "$(id)", "", "gcc openmpi"])
def test_a_module_name_that_is_not_a_name_is_refused(bad):
    """Is a module name with shell syntax or spaces refused before any script is written?"""
    with pytest.raises(HpclabError, match="not a plain module name"):
        modules.load_lines([bad])


def test_no_modules_no_lines():
    """Does a site without modules or modulepath get no module lines at all (the local site's
    scripts stay as they were)?"""
    assert modules.load_lines([], []) == [] and templates.module_lines(load_site("local")) == []


def test_modulepath_must_be_absolute(tmp_path):
    """Does the schema refuse a relative module folder in a site profile?"""
    p = tmp_path / "s.yaml"
    p.write_text("name: t\ndescription: d\npartitions: [{name: p}]\ndefault_partition: p\n"
                 "launcher: srun\nmodulepath: [modulefiles]\n")
    with pytest.raises(HpclabError, match="modulepath"):
        load_site(p)


# --- the classroom profile ------------------------------------------------------------------------


def test_classroom_profile_names_the_course_account_qos_and_modules():
    """Does sites/classroom.yaml name the course's account and QOS, gcc and openmpi, and the module
    folder the classroom installs (its layout's modulefiles)?"""
    site = load_site("classroom")
    assert (site.account, site.qos, site.modules) == ("hpclab-course", "hpclab-student", ("gcc", "openmpi"))
    assert site.modulepath == (str(ClassroomLayout(DEFAULT_ROOT).modulefiles),)
    assert site.default_partition in site.partition_names() and site.discover_cores


def _expected_module_lines(site):
    return [f"module use {p}" for p in site.modulepath] + [f"module load {m} ||" for m in site.modules]


@pytest.mark.parametrize("kernel", registry.names())
def test_every_kernel_job_for_the_classroom_has_account_qos_and_modules(kernel):
    """Does every kernel's job script on the classroom site carry --account and --qos among its
    sorted #SBATCH lines, and load the modules (in order, before the run) in valid bash?"""
    site = load_site("classroom")
    fields = {"kernel": kernel, "ntasks": 2}
    if kernel == "program":
        fields["command"] = ["/bin/true"]
    try:
        spec = make_spec(fields)
    except HpclabError:
        pytest.skip(f"kernel {kernel} needs other fields for a minimal spec")
    text = templates.render(spec, site, Path("/hpclab/runs/x/20260101-000000-000000"))
    sbatch = [ln for ln in text.splitlines() if ln.startswith("#SBATCH")]
    assert "#SBATCH --account=hpclab-course" in sbatch and "#SBATCH --qos=hpclab-student" in sbatch
    assert sbatch == sorted(sbatch)
    at = [text.index(s) for s in _expected_module_lines(site)]
    assert at == sorted(at) and text.index("# environment") < at[0] and at[-1] < text.index("# run")
    assert subprocess.run(["bash", "-n"], input=text, text=True).returncode == 0


def test_engines_job_and_job_steps_for_the_classroom_load_the_modules(tmp_path):
    """Do the engines' job script and a profiler's job step also carry account, QOS and the
    module lines?"""
    site = load_site("classroom")
    text = templates.render_engines(site, ranks=2, folder=tmp_path, log=tmp_path / "e.log", time="00:05:00",
                                    engine_argv=["true"])
    for line in ("#SBATCH --account=hpclab-course", "#SBATCH --qos=hpclab-student"):
        assert line in text.splitlines()
    for piece in _expected_module_lines(site):
        assert piece in text
    words = templates.step_argv(site, job_name="hpclab-profile", time="00:05:00")
    assert "--account=hpclab-course" in words and "--qos=hpclab-student" in words
    i = words.index("bash")
    assert words[i + 1] == "-c" and words[i + 3] == "hpclab-step"
    assert all(piece in words[i + 2] for piece in _expected_module_lines(site))
    assert words[i + 2].endswith('exec "$@"')


@needs_lmod
def test_job_step_runs_its_command_after_the_modules(modulefiles, tmp_path):
    """Does the job step's `bash -c` load the modules and then run the command appended to it
    (run here without srun)?"""
    site = load_site(_site_file(tmp_path, "hpclab-course", "hpclab-student", modulefiles))
    words = templates.step_argv(site, job_name="hpclab-profile", time="00:05:00")
    step = words[words.index("bash"):]
    res = subprocess.run(step + ["sh", "-c", 'echo "$MPICC"'], capture_output=True, text=True, env=_clean_env())
    assert res.returncode == 0, res.stderr
    assert res.stdout.strip().endswith("/mpicc")
    bad = load_site(_site_file(tmp_path, "a", "q", modulefiles, mods=["gcc", "no-such-mpi"]))
    words = templates.step_argv(bad, job_name="hpclab-profile", time="00:05:00")
    res = subprocess.run(words[words.index("bash"):] + ["echo", "ran"], capture_output=True, text=True,
                         env=_clean_env())
    assert res.returncode == 1 and "ran" not in res.stdout and "module no-such-mpi is unknown" in res.stderr


# --- a real job on the local cluster, under a throwaway account and QOS -------------------------------


def _site_file(folder: Path, account: str, qos: str, modulefiles: Path, mods=None) -> Path:
    """A copy of sites/classroom.yaml with another account, QOS, module folder (and modules)."""
    data = yaml.safe_load((paths.sites_dir() / "classroom.yaml").read_text())
    data.update(account=account, qos=qos, modulepath=[str(modulefiles)])
    if mods is not None:
        data["modules"] = mods
    path = folder / f"classroom-{account}-{'-'.join(data['modules']).replace('/', '_')}.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


@pytest.fixture(scope="module")
def throwaway_account(cluster):
    """A Slurm account and QOS of this test only, root associated with both; removed afterwards."""
    name = f"hpclab-test-{os.getpid()}"
    user = "root"
    try:
        run_slurm(["sacctmgr", "-i", "add", "qos", name, "MaxWall=00:10:00"], what="create a test QOS")
        run_slurm(["sacctmgr", "-i", "add", "account", name, "Description=hpclab test", "Organization=hpclab"],
                  what="create a test account")
        run_slurm(["sacctmgr", "-i", "add", "user", user, f"account={name}", f"qos={name}"],
                  what="associate root with the test account")
        yield name
    finally:
        run_slurm(["sacctmgr", "-i", "delete", "user", user, f"account={name}"], what="remove the association",
                  check=False)
        run_slurm(["sacctmgr", "-i", "delete", "account", name], what="remove the test account", check=False)
        run_slurm(["sacctmgr", "-i", "delete", "qos", name], what="remove the test QOS", check=False)


@pytest.fixture
def runs_root(tmp_path, monkeypatch, cluster):
    monkeypatch.delenv("HPCLAB_SITE", raising=False)  # Slurm commands go to the embedded cluster
    root = tmp_path / "runs"
    monkeypatch.setenv("HPCLAB_RUNS", str(root))
    return root


def _need(kernel):
    if not (paths.bin_dir() / kernel).is_file():
        pytest.skip(f"build/bin/{kernel} not built (make -C src)")


def _sacct(job_id: str, timeout: float = 90.0) -> dict:
    """The job's accounting record (account, QOS, state) once slurmdbd has it complete: right after
    a job ends, sacct can still show the submission's record (QOS "Unknown", id 0, or the state
    PENDING) for some seconds, so ask again until it settles or `timeout` seconds pass."""
    deadline = time.monotonic() + timeout
    while True:
        out = run_slurm(["sacct", "-X", "-n", "-P", "-j", job_id, "-o", "Account,QOS,State"], what="ask sacct")
        lines = out.strip().splitlines()
        if lines:
            account, qos, state = lines[0].split("|")
            got = {"account": account, "qos": qos, "state": state.split()[0]}
            if qos != "Unknown" and got["state"] not in ("PENDING", "RUNNING") or time.monotonic() > deadline:
                return got
        elif time.monotonic() > deadline:
            return {}
        time.sleep(2)


@needs_lmod
@pytest.mark.cluster
def test_pingpong_runs_under_the_account_and_qos_with_the_modules_loaded(runs_root, throwaway_account,
                                                                         modulefiles, tmp_path):
    """Does a pingpong on 2 ranks, on the classroom profile with a throwaway account and QOS, run
    through the local cluster with gcc and openmpi loaded, and does sacct charge it to that
    account and QOS?"""
    _need("pingpong")
    site = _site_file(tmp_path, throwaway_account, throwaway_account, modulefiles)
    spec = make_spec(kernel="pingpong", ntasks=2, args={"max_bytes": 1024, "reps": 20}, site=str(site),
                     mca={"btl": "self,vader"}, experiment="modules")
    (run,) = experiment.run(spec, progress=False, timeout=300)
    assert run.state == "completed" and len(run.table()) > 0
    job_sh = run.folder.job_sh.read_text()
    assert f"#SBATCH --account={throwaway_account}" in job_sh and f"#SBATCH --qos={throwaway_account}" in job_sh
    env = (run.folder.provenance / "env.txt").read_text()
    assert f"OMPI_HOME={ompi.run_ompi_info().prefix}" in env.splitlines()  # set by the openmpi module
    job_id = str(run.folder.status()["job_id"])
    got = _sacct(job_id)
    assert (got["account"], got["qos"], got["state"]) == (throwaway_account, throwaway_account, "COMPLETED")


@needs_lmod
@pytest.mark.cluster
def test_a_wrong_module_fails_the_job_with_its_name(runs_root, throwaway_account, modulefiles, tmp_path):
    """Does a site profile naming a module that does not exist make the job fail before the kernel
    runs, with an error that names the module?"""
    _need("pingpong")
    site = _site_file(tmp_path, throwaway_account, throwaway_account, modulefiles, mods=["gcc", "openmpi-9.9"])
    spec = make_spec(kernel="pingpong", ntasks=2, args={"max_bytes": 64, "reps": 2}, site=str(site),
                     experiment="modules-wrong")
    with pytest.raises(HpclabError, match="module openmpi-9.9 is unknown here") as err:
        experiment.run(spec, progress=False, timeout=300)
    assert str(modulefiles) in str(err.value)  # where Lmod looked
    (folder,) = [p for p in (runs_root / "modules-wrong").iterdir() if p.is_dir()]
    assert not (folder / "result.json").exists()
    assert "Lmod has detected the following error" in (folder / "stderr").read_text()
    status = json.loads((folder / "status.json").read_text())
    assert status["state"] == "failed"


@needs_lmod
@pytest.mark.cluster
def test_a_job_step_loads_the_modules_under_the_account(runs_root, throwaway_account, modulefiles, tmp_path):
    """Does a profiler's kind of job step (step_argv) run on the cluster under the site's account
    and QOS, with the modules loaded before its command?"""
    site = load_site(_site_file(tmp_path, throwaway_account, throwaway_account, modulefiles))
    words = templates.step_argv(site, job_name="hpclab-modules", time="00:02:00")
    res = subprocess.run(words + ["sh", "-c", 'echo "$SLURM_JOB_ID $MPICC $LOADEDMODULES"'], capture_output=True,
                         text=True, env=templates.step_env(site), timeout=180)
    assert res.returncode == 0, res.stderr
    job_id, mpicc, loaded = res.stdout.split()
    assert mpicc.endswith("/mpicc") and loaded.startswith("gcc/") and ":openmpi/" in loaded
    got = _sacct(job_id)
    assert (got["account"], got["qos"]) == (throwaway_account, throwaway_account)


def test_readable_folders_makes_each_level_0755_and_says_what_it_could_not_make(tmp_path):
    """The one way the course makes a folder others must read (module files, a room's recording):
    every level 0755; a folder that cannot be made is an HpclabError with what and what to do."""
    import stat

    from hpclab.core.errors import HpclabError
    from hpclab.core.io import readable_folders

    top = tmp_path / "top"
    top.mkdir(mode=0o700)
    deepest = readable_folders(top, "a", "b", what="the test folder", fix="do something else")
    assert deepest == top / "a" / "b" and deepest.is_dir()
    assert all(stat.S_IMODE(d.stat().st_mode) == 0o755 for d in (top, top / "a", deepest))
    (tmp_path / "file").write_text("x")
    with pytest.raises(HpclabError, match="cannot make the test folder") as exc:
        readable_folders(tmp_path / "file", "below", what="the test folder", fix="do something else")
    assert exc.value.hint == "do something else"
