"""Rendered job scripts: compared with golden files, syntax-checked by bash, and overridable by
instructors through HPCLAB_TEMPLATES.

Regenerate the golden files after an intended change with:
    HPCLAB_UPDATE_GOLDEN=1 .venv/bin/python -m pytest tests/test_templates.py
and review the diff before committing.
"""

import os
import re
import subprocess
from pathlib import Path

import pytest

from hpclab.jobs import templates
from hpclab.core.errors import HpclabError
from hpclab.site.profile import load_site
from hpclab.spec.model import make_spec

GOLDEN = Path(__file__).parent / "golden"
BIN, LIB = Path("/hpclab/build/bin"), Path("/hpclab/build/lib")

CASES = {
    "stream_srun": ("local", dict(
        kernel="stream", ntasks=2, args={"size": 2000000, "reps": 10},
        omp={"num_threads": 2, "proc_bind": "close", "places": "cores"},
        binding={"cpu_bind": "cores", "distribution": "block:block"}, mca={"btl": "self,vader"})),
    "pingpong_mpirun": ("example-cluster", dict(
        kernel="pingpong", nodes=2, ntasks=2, ntasks_per_node=1, launcher="mpirun",
        args={"max_bytes": 4194304, "no_check": True},
        binding={"map_by": "ppr:1:node", "bind_to": "core"}, numactl={"membind": "0"},
        mca={"pml": "ob1", "btl": "^openib"}, env={"UCX_LOG_LEVEL": "error"}, time="00:10:00")),
    "poisson_trace": ("local", dict(
        kernel="poisson", ntasks=4, args={"n": 512, "grid": "2x2", "exchange": "nonblocking", "iters": 100},
        binding={"hint": "nomultithread"}, trace=True, experiment="halo")),
    "program_trace": ("local", dict(
        kernel="program", command=["/hpclab/programs/ring", "--count", "6", "hello world"], ntasks=2,
        binding={"cpu_bind": "cores"}, trace=True, experiment="my-ring")),
}


def render_case(name):
    site_name, fields = CASES[name]
    spec = make_spec(fields)
    run_dir = Path("/hpclab/runs") / spec.experiment / "20260101-000000-000000"
    return templates.render(spec, load_site(site_name), run_dir, bin_dir=BIN, lib_dir=LIB)


@pytest.mark.parametrize("name", sorted(CASES))
def test_rendered_script_matches_golden(name):
    """Does the rendered script equal the reviewed golden file, line for line?"""
    text = render_case(name)
    golden = GOLDEN / f"{name}.sh"
    if os.environ.get("HPCLAB_UPDATE_GOLDEN"):
        golden.write_text(text)
    assert golden.exists(), f"no golden file {golden}; run with HPCLAB_UPDATE_GOLDEN=1"
    assert text == golden.read_text()


@pytest.mark.parametrize("name", sorted(CASES))
def test_rendered_script_is_valid_bash(name):
    """Does bash accept the script's syntax?"""
    res = subprocess.run(["bash", "-n"], input=render_case(name), text=True, capture_output=True)
    assert res.returncode == 0, res.stderr


@pytest.mark.parametrize("name", sorted(CASES))
def test_sbatch_lines_are_sorted_under_resources(name):
    """Are all #SBATCH lines one sorted block right after '# resources', before any command?"""
    lines = render_case(name).splitlines()
    first = next(i for i, ln in enumerate(lines) if ln.startswith("#SBATCH"))
    block = [ln for ln in lines if ln.startswith("#SBATCH")]
    assert lines[first - 1] == "# resources"
    assert lines[first:first + len(block)] == sorted(block)
    before = [ln for ln in lines[:first] if ln and not ln.startswith("#")]
    assert before == []  # sbatch ignores #SBATCH lines after the first command
    for section in ("# environment", "# run"):
        assert section in lines


def test_srun_binding_is_always_reported():
    """Does srun get --cpu-bind=verbose even when the spec sets no binding?"""
    spec = make_spec(kernel="stream")
    text = templates.render(spec, load_site("local"), Path("/r/x"), bin_dir=BIN, lib_dir=LIB)
    assert "--cpu-bind=verbose " in text


@pytest.mark.parametrize("launcher", ["srun", "mpirun"])
def test_a_render_looks_its_mpi_library_up_once(launcher, monkeypatch):
    """Does rendering a job with mpi: look the library up by name once and hand the record to
    every part of the script (module lines, environment, launch command, transport report)?"""
    from hpclab.site import mpi_libraries

    name = next(n for n in mpi_libraries.names() if n != mpi_libraries.SYSTEM)
    looked_up, real = [], templates._library
    monkeypatch.setattr(templates, "_library", lambda spec: looked_up.append(spec.mpi) or real(spec))
    spec = make_spec(kernel="pingpong", ntasks=2, mpi=name, launcher=launcher)
    text = templates.render(spec, load_site("local"), Path("/r/x"), bin_dir=BIN, lib_dir=LIB)
    assert looked_up == [name]
    assert mpi_libraries.get(name).module_name in text

def _override(tmp_path, body):
    d = tmp_path / "tpl"
    d.mkdir()
    (d / "stream.sh.j2").write_text(body)
    return d


def test_instructor_template_overrides_and_gets_required_directives(tmp_path, monkeypatch):
    """Does a template in HPCLAB_TEMPLATES win, and get job name, output, error, ntasks and time
    added when it leaves them out (and only those it leaves out)?"""
    d = _override(tmp_path, "#!/bin/bash\n#SBATCH --job-name=mine\n#SBATCH --exclusive\n{{ launch }}\n")
    monkeypatch.setenv("HPCLAB_TEMPLATES", str(d))
    text = templates.render(make_spec(kernel="stream", ntasks=2), load_site("local"), Path("/r/x"),
                            bin_dir=BIN, lib_dir=LIB)
    keys = re.findall(r"^#SBATCH --([a-z-]+)", text, flags=re.M)
    assert keys == sorted(keys)
    assert keys.count("job-name") == 1 and "#SBATCH --job-name=mine" in text
    for key in ("output", "error", "ntasks", "time"):
        assert key in keys
    assert "exclusive" in keys


def test_template_without_sbatch_lines_gets_them_after_shebang(tmp_path, monkeypatch):
    """Does a template with no #SBATCH lines get the required ones right after the shebang?"""
    d = _override(tmp_path, "#!/bin/bash\necho hi\n")
    monkeypatch.setenv("HPCLAB_TEMPLATES", str(d))
    lines = templates.render(make_spec(kernel="stream"), load_site("local"), Path("/r/x")).splitlines()
    assert lines[0] == "#!/bin/bash" and lines[1] == "# resources"
    assert [ln.split("=")[0] for ln in lines[2:7]] == sorted(
        ["#SBATCH --error", "#SBATCH --job-name", "#SBATCH --ntasks", "#SBATCH --output", "#SBATCH --time"])


def test_broken_template_is_a_clear_error(tmp_path, monkeypatch):
    """Is a template with a Jinja error reported with its name, not a Jinja traceback?"""
    monkeypatch.setenv("HPCLAB_TEMPLATES", str(_override(tmp_path, "{% if %}\n")))
    with pytest.raises(HpclabError, match="stream.sh.j2 is broken"):
        templates.render(make_spec(kernel="stream"), load_site("local"), Path("/r/x"))


def test_missing_template_is_a_clear_error(tmp_path):
    """Is a kernel without a template reported with the folders searched?"""
    with pytest.raises(HpclabError, match="no job template"):
        templates.render(make_spec(kernel="stream"), load_site("local"), Path("/r/x"), dirs=[tmp_path])


def test_oversubscribed_job_overcommits_and_yields():
    """Does an oversubscribed spec ask Slurm to overcommit and tell Open MPI to yield idle cores?"""
    site = load_site("local")
    spec = make_spec(kernel="poisson", ntasks=4, oversubscribe=True, args={"grid": "2x2"}, experiment="t")
    opts = templates.sbatch_options(spec, site, Path("/tmp/run"))
    assert opts["overcommit"] == ""
    # Slurm 24.11 leaves "--overcommit --cpus-per-task=1" with more tasks than CPUs pending for ever
    assert "cpus-per-task" not in opts
    assert templates.job_environment(spec, site)["OMPI_MCA_mpi_yield_when_idle"] == "1"
    assert "--overcommit" in templates.launch_argv(spec, site)
    mpirun = make_spec(kernel="poisson", ntasks=4, oversubscribe=True, launcher="mpirun", experiment="t")
    assert "--oversubscribe" in templates.launch_argv(mpirun, site)
    plain = make_spec(kernel="poisson", ntasks=2, experiment="t")
    assert "overcommit" not in templates.sbatch_options(plain, site, Path("/tmp/run"))


def test_site_part_of_every_submission_comes_from_one_place():
    """Do a batch job, the engines' job and a job step ask for the same partition, account and
    QoS, all taken from site_options?"""
    site = load_site("example-cluster")
    want = templates.site_options(site)
    assert want["partition"] == site.default_partition
    assert want["account"] == site.account and want["qos"] == site.qos
    spec = make_spec(kernel="stream", ntasks=2, experiment="t")
    batch = templates.sbatch_options(spec, site, Path("/tmp/run"))
    engines = templates.render_engines(site, ranks=2, folder=Path("/tmp/s/20260101-000000-abcdef"),
                                       log=Path("/tmp/s/x.log"), time="00:05:00", engine_argv=["true"])
    step = templates.step_argv(site, job_name="hpclab-profile", time="00:10:00")
    for key, value in want.items():
        assert batch[key] == value
        assert templates._sbatch_line(key, value) in engines.splitlines()
        assert f"--{key}={value}" in step


def test_job_step_is_one_task_on_one_core_with_the_sites_pmi():
    """Does step_argv start srun with one task on one bound core, the site's PMI, a time limit and
    a job name, and refuse a job name that is not one plain word?"""
    site = load_site("local")
    words = templates.step_argv(site, job_name="hpclab-variants", time="00:10:00")
    assert words[0] == "srun"
    for w in ("--ntasks=1", "--cpus-per-task=1", "--cpu-bind=cores", f"--mpi={site.srun_mpi}",
              "--time=00:10:00", "--job-name=hpclab-variants"):
        assert w in words
    env = templates.step_env(site)
    assert env["OMP_NUM_THREADS"] == "1" and all(env[k] == str(v) for k, v in site.env.items())
    with pytest.raises(HpclabError, match="job name"):
        templates.step_argv(site, job_name="a b; rm", time="00:01:00")


def test_engines_script_is_sorted_valid_bash_from_its_template(tmp_path):
    """Is the engines' job script rendered from engines.sh.j2: sorted #SBATCH lines under the
    section comments, valid bash, the engines under one srun with the site's PMI?"""
    site = load_site("example-cluster")
    text = templates.render_engines(site, ranks=3, folder=tmp_path, log=tmp_path / "e.log", time="00:30:00",
                                    engine_argv=["/usr/bin/python3", "-m", "ipyparallel.engine", "--mpi"],
                                    mca={"btl": "self,vader"})
    assert "Rendered from slurm-templates/engines.sh.j2" in text
    sbatch = [line for line in text.splitlines() if line.startswith("#SBATCH")]
    assert sbatch == sorted(sbatch) and "#SBATCH --ntasks=3" in sbatch
    assert f"#SBATCH --chdir={tmp_path}" in sbatch and f"#SBATCH --output={tmp_path / 'e.log'}" in sbatch
    assert text.index("# resources") < text.index("# environment") < text.index("# run")
    assert f"srun --mpi={site.srun_mpi} --kill-on-bad-exit=1 /usr/bin/python3 -m ipyparallel.engine --mpi" in text
    assert subprocess.run(["bash", "-n"], input=text, text=True).returncode == 0


def render_engines_case():
    session = Path("/hpclab/runs/_interactive/20260101-000000-000000")
    return templates.render_engines(load_site("example-cluster"), ranks=4, folder=session,
                                    log=session / "engines-1.log", time="00:30:00",
                                    engine_argv=["/hpclab/.venv/bin/python", "-m", "ipyparallel.engine", "--mpi"],
                                    mca={"btl": "self,vader"})


def test_engines_script_matches_golden():
    """Does the engines' job script equal the reviewed golden file, line for line?"""
    text = render_engines_case()
    golden = GOLDEN / "engines_example.sh"
    if os.environ.get("HPCLAB_UPDATE_GOLDEN"):
        golden.write_text(text)
    assert golden.exists(), f"no golden file {golden}; run with HPCLAB_UPDATE_GOLDEN=1"
    assert text == golden.read_text()
