"""The one job-script builder: every batch script and every srun job step hpclab submits.

A Spec becomes a readable Slurm batch script from the Jinja2 templates in slurm-templates/
(`render`); the ipyparallel engines' job comes from slurm-templates/engines.sh.j2
(`render_engines`); a one-task job step of its own (a profiler run, a kernel variant) gets its
srun words from `step_argv`. The site's part of every submission (partition, account, QoS,
constraint) is decided in one place, `site_options`; the lines that load the site's modules (Lmod,
hpclab.site.modules) in one place too, `module_lines`, for batch scripts and job steps alike.
A render looks the spec's MPI library up once and hands its record, with the launcher, the
kernel's folders and the environment decided from it, to every part of the script (`_Job`).

The template search path is $HPCLAB_TEMPLATES (a ':'-separated list of folders, searched first,
so an instructor can override any template) followed by the repository's slurm-templates/. Each
kernel has `<kernel>.sh.j2` extending the shared `preamble.sh.j2`. Python computes everything
that depends on the spec (the sorted #SBATCH lines, the environment, the launch command) and the
templates lay it out under fixed section comments (# resources, # environment, # run). Required
directives (job name, output and error paths, ntasks, time) are added after rendering only when
an overriding template left them out.
"""

from __future__ import annotations

import os
import re
import shlex
from dataclasses import dataclass
from pathlib import Path

import jinja2

from hpclab.core import paths
from hpclab.core.errors import HpclabError
from hpclab.kernels import registry
from hpclab.site import modules as site_modules
from hpclab.site import mpi_libraries
from hpclab.site.profile import Site
from hpclab.site.slurm import slurm_env
from hpclab.spec.model import Spec

REQUIRED = ("job-name", "output", "error", "ntasks", "time")
# The mpirun on the job's PATH (no mpi: in the spec): Open MPI's, as the default site has it.
_SYSTEM_MPIRUN = mpi_libraries.Launcher(("mpirun", "-np", '"$SLURM_NTASKS"'), env_flag="-x",
                                        bindings=("--report-bindings",), binding_pattern="MCW rank")


def template_dirs() -> list[Path]:
    """Folders searched for templates, first match wins: $HPCLAB_TEMPLATES entries, then
    the repository's slurm-templates/."""
    extra = [Path(p) for p in os.environ.get("HPCLAB_TEMPLATES", "").split(os.pathsep) if p]
    return extra + [paths.templates_dir()]


def _environment(dirs: list[Path]) -> jinja2.Environment:
    env = jinja2.Environment(loader=jinja2.FileSystemLoader([str(d) for d in dirs]),
                             undefined=jinja2.StrictUndefined, keep_trailing_newline=True,
                             trim_blocks=False, autoescape=False)
    env.filters["q"] = lambda v: shlex.quote(str(v))
    return env


def sbatch_options(spec: Spec, site: Site, run_dir: Path) -> dict[str, str]:
    """#SBATCH options as {long option name: value} ('' for a bare flag)."""
    opts = {
        "job-name": f"hpclab-{spec.experiment}",
        "output": str(run_dir / "stdout"),
        "error": str(run_dir / "stderr"),
        "open-mode": "append",  # a hand-submitted rerun adds to stdout/stderr instead of erasing them
        "nodes": str(spec.nodes),
        "ntasks": str(spec.ntasks),
        "cpus-per-task": str(spec.cpus_per_task),
        "time": spec.time,
    }
    if spec.ntasks_per_node:
        opts["ntasks-per-node"] = str(spec.ntasks_per_node)
    if spec.oversubscribe:
        opts["overcommit"] = ""
        if spec.cpus_per_task == 1:
            # Slurm 24.11 never starts a job that asks for more tasks than CPUs with --overcommit
            # when --cpus-per-task is given, even =1 (PENDING, Resources; 22.05 ran it): 1 is the
            # default, so leave it out and the job gets one CPU per node on every version.
            del opts["cpus-per-task"]
    if getattr(spec, "mem", None):  # MB per node; Slurm's default per CPU applies otherwise
        opts["mem"] = f"{spec.mem}M"
    if getattr(spec, "mem_per_cpu", None):
        opts["mem-per-cpu"] = f"{spec.mem_per_cpu}M"
    opts.update(site_options(site, spec.partition))
    opts.update({k: str(v) for k, v in site.extra_sbatch.items()})
    return opts


def site_options(site: Site, partition: str | None = None) -> dict[str, str]:
    """The site's part of every submission, batch job and job step alike: partition (the site's
    default when None), and account, qos and constraint when the site sets them.
    Returns {long option name: value}."""
    opts = {"partition": partition or site.default_partition}
    for key in ("account", "qos", "constraint"):
        if getattr(site, key):
            opts[key] = str(getattr(site, key))
    return opts


def module_lines(site: Site, lib: mpi_libraries.MpiLibrary | None = None) -> list[str]:
    """The bash lines that load the site's modules (after `module use` of its modulepath) and,
    with MPI library `lib` (the record of a spec's mpi:), the site's module for it last, each
    failure stopping the job with a message naming the module (hpclab.site.modules.load_lines);
    [] for a site without modules and no `lib`."""
    mods, path = list(site.modules), list(site.modulepath)
    if lib is not None:
        entry = site.mpi(lib.name)
        mods.append((entry and entry.module) or lib.module_name)
        folder = (entry and entry.modulepath) or str(mpi_libraries.modulefiles_dir())
        if folder not in path:
            path.append(folder)
    return site_modules.load_lines(mods, path)


def _library(spec: Spec) -> mpi_libraries.MpiLibrary | None:
    """The record of the spec's MPI library (mpi:), None without one; a render looks it up once
    (_resolve) and passes the record on."""
    return mpi_libraries.get(spec.mpi) if spec.mpi is not None else None


@dataclass(frozen=True)
class _Job:
    """What rendering a spec decides once and every part of the script reads: the spec's MPI
    library record (None: the system Open MPI), the launcher that starts the ranks, the folders
    of the kernel binaries and of the tracer, and the exported environment."""

    spec: Spec
    site: Site
    lib: mpi_libraries.MpiLibrary | None
    launcher: str
    bin_dir: Path
    lib_dir: Path
    env: dict[str, str]


def _resolve(spec: Spec, site: Site, bin_dir: Path | None = None, lib_dir: Path | None = None) -> _Job:
    """The _Job of `spec` on `site`; bin_dir/lib_dir default to the build of the spec's library."""
    lib = _library(spec)
    launcher = spec.launcher or (lib.launcher.kind if lib is not None else site.launcher)
    default_bin, default_lib = mpi_libraries.build_dirs(spec.mpi)
    return _Job(spec, site, lib, launcher, bin_dir or default_bin, lib_dir or default_lib,
                _environment_of(spec, site, lib))


def _sbatch_line(key: str, value: str) -> str:
    return f"#SBATCH --{key}" if value == "" else f"#SBATCH --{key}={shlex.quote(value)}"


def job_environment(spec: Spec, site: Site | None = None) -> dict[str, str]:
    """Variables exported in the job script: the site's env, the variables that keep the MPI
    library's TCP on the interface the site names for the job's place (one node: the loopback;
    several: the network joining them), those that keep ranks of different nodes off shared
    memory where the nodes share one kernel (the embedded cluster's virtual nodes), OpenMP
    settings, OMPI_MCA_<name> for each MCA selection (read by Open MPI under srun and mpirun
    alike), the variables that make the spec's MPI library (mpi:) report what carried the
    messages, the spec's env (last: a spec may override)."""
    return _environment_of(spec, site, _library(spec))


def _environment_of(spec: Spec, site: Site | None, lib: mpi_libraries.MpiLibrary | None) -> dict[str, str]:
    """job_environment with the spec's library record `lib` already looked up."""
    env = dict(site.env) if site is not None else {}
    if site is not None:  # a job without mpi: runs the system Open MPI (or the site's module of it)
        pinned = lib or mpi_libraries.get(mpi_libraries.SYSTEM)
        env.update(pinned.tcp_environment(spec.nodes, site.tcp_interface(spec.nodes)))
        if spec.nodes > 1 and site.nodes_share_a_kernel:
            env.update(pinned.apart_env)
    if lib is not None:
        env.update(lib.report_env)
    if spec.oversubscribe:
        env["OMPI_MCA_mpi_yield_when_idle"] = "1"  # ranks sharing a core must not busy-poll
    env.update(spec.omp.env())
    env.update({f"OMPI_MCA_{k}": v for k, v in spec.mca.items()})
    env.update(spec.env)
    return dict(sorted(env.items()))


def launch_argv(spec: Spec, site: Site, out_dir: str = '"$OUT_DIR"', bin_dir: Path | None = None,
                lib_dir: Path | None = None) -> list[str]:
    """The launch command as shell words (already quoted where needed): launcher and binding
    options, the numactl prefix, the kernel and its arguments, --json into the run folder (a
    kernel that runs the spec's command: that command, without --json)."""
    return _launch_words(_resolve(spec, site, bin_dir, lib_dir), out_dir)


def _launch_words(job: _Job, out_dir: str = '"$OUT_DIR"') -> list[str]:
    """launch_argv of a resolved job."""
    spec = job.spec
    trace_env = [f"LD_PRELOAD={shlex.quote(str(job.lib_dir / 'libmpitrace.so'))}",
                 f"MPITRACE_DIR={out_dir}/trace"] if spec.trace else []
    words = _srun_words(job, trace_env) if job.launcher == "srun" else _mpirun_words(job, trace_env)
    if spec.numactl is not None and spec.numactl.argv():
        words.append(" ".join(spec.numactl.argv()))  # one word: the wrapper stays on one line
    unit = registry.get(spec.kernel)
    if not unit.contract:  # the spec's own program, its paths made absolute with the spec
        return words + [shlex.quote(w) for w in spec.command]
    words.append(shlex.quote(str(job.bin_dir / unit.binary)))
    words += [shlex.quote(a) for a in spec.args.to_argv()]
    words.append(f"--json {out_dir}/result.json")
    return words


def _srun_words(job: _Job, trace_env: list[str]) -> list[str]:
    """srun (the library's own srun launcher, or the site's PMI) and its binding options."""
    spec, lib, b = job.spec, job.lib, job.spec.binding
    start = ((lib.launcher_for("srun") or lib.launcher).words(lib.bindir) if lib is not None
             else ["srun", f"--mpi={job.site.srun_mpi}"])
    # --kill-on-bad-exit: a rank that crashes or exits non-zero ends the step at once. Without it
    # the other ranks wait for it (in MPI_Init, or a collective) until the job's time limit, and a
    # segfault is reported as a timeout (seen: a rank dying inside Open MPI 4.1's MPI_Init on
    # virtual nodes held its 7 partners for 5 minutes). mpirun does the same by default.
    words = [*start, "--kill-on-bad-exit=1", f"--cpus-per-task={spec.cpus_per_task}",
             "--cpu-bind=" + ("verbose," + b.cpu_bind if b.cpu_bind else "verbose")]
    if spec.oversubscribe:
        words.append("--overcommit")
    if b.distribution:
        words.append(f"--distribution={shlex.quote(b.distribution)}")
    if b.hint:
        words.append(f"--hint={b.hint}")
    if trace_env:  # only the kernel gets the tracer, not the script's own commands
        words.append("--export=ALL," + ",".join(trace_env))
    return words


def _mpirun_words(job: _Job, trace_env: list[str]) -> list[str]:
    """mpirun (the library's, or the system Open MPI's), its binding options and the variables
    it must pass on."""
    spec, lib, b = job.spec, job.lib, job.spec.binding
    own = (lib.launcher_for("mpirun") or lib.launcher) if lib is not None else _SYSTEM_MPIRUN
    words = own.words(lib.bindir if lib is not None else Path())
    words += ["--oversubscribe"] if spec.oversubscribe else []
    for flag, value in (("--map-by", b.map_by), ("--rank-by", b.rank_by), ("--bind-to", b.bind_to)):
        if value:
            words += [flag, shlex.quote(value)]
    if b.report_bindings:
        words += list(own.bindings)
    # mpirun forwards OMPI_MCA_* by itself; everything else must be named with -x (a launcher
    # without env_flag passes the whole environment)
    for name in job.env if own.env_flag else ():
        if not name.startswith("OMPI_MCA_"):
            words += [own.env_flag, name]
    for item in trace_env:
        words += [own.env_flag, item] if own.env_flag else [f"env {item}"]
    return words


def _wrap(words: list[str], width: int = 96) -> str:
    """Join shell words into lines of at most ~width characters with ' \\' continuations."""
    lines, cur = [], ""
    for w in words:
        if cur and len(cur) + 1 + len(w) > width:
            lines.append(cur + " \\")
            cur = "    " + w
        else:
            cur = f"{cur} {w}" if cur else w
    return "\n".join(lines + [cur])


def _ensure_required(text: str, options: dict[str, str]) -> str:
    """Add REQUIRED #SBATCH directives a template left out, then keep the block sorted."""
    present = set(re.findall(r"^#SBATCH\s+--([a-z-]+)", text, flags=re.M))
    missing = [_sbatch_line(k, options[k]) for k in REQUIRED if k not in present and k in options]
    if not missing:
        return text
    lines = text.splitlines(keepends=True)
    sb = [i for i, line in enumerate(lines) if line.startswith("#SBATCH")]
    if sb:  # merge into the first contiguous block of #SBATCH lines, sorted
        start = end = sb[0]
        while end + 1 < len(lines) and lines[end + 1].startswith("#SBATCH"):
            end += 1
        block = sorted([ln.rstrip("\n") for ln in lines[start:end + 1]] + missing)
        lines[start:end + 1] = [ln + "\n" for ln in block]
    else:  # after the shebang (Slurm reads #SBATCH lines only before the first command)
        at = 1 if lines and lines[0].startswith("#!") else 0
        lines[at:at] = ["# resources\n"] + [ln + "\n" for ln in sorted(missing)]
    return "".join(lines)


def render(spec: Spec, site: Site, run_dir: Path, bin_dir: Path | None = None,
           lib_dir: Path | None = None, dirs: list[Path] | None = None) -> str:
    """The batch script for `spec` on `site`, writing into `run_dir` (absolute path).
    bin_dir/lib_dir default to build/bin and build/lib; dirs to template_dirs(). Returns the
    script text; raises HpclabError when no template exists for the kernel or one is broken."""
    dirs = dirs or template_dirs()
    job = _resolve(spec, site, bin_dir, lib_dir)
    lib, unit = job.lib, registry.get(spec.kernel)
    options = sbatch_options(spec, site, Path(run_dir))
    if lib is not None:
        pattern = (lib.launcher_for(job.launcher) or lib.launcher).binding_pattern
    else:
        pattern = "cpu-bind" if job.launcher == "srun" else _SYSTEM_MPIRUN.binding_pattern
    context = {
        "kernel": spec.kernel, "experiment": spec.experiment, "run_id": Path(run_dir).name,
        "template": unit.template, "run_dir": str(run_dir), "trace": spec.trace,
        "sbatch_lines": sorted(_sbatch_line(k, v) for k, v in options.items()),
        "sbatch": options, "modules": list(site.modules), "module_lines": module_lines(site, lib),
        "env": list(job.env.items()),
        "launcher": job.launcher, "launch": _wrap(_launch_words(job)),
        "kernel_exe": str(job.bin_dir / unit.binary) if unit.contract else spec.command[0],
        "binding_pattern": pattern, "mpi": lib,
        "mpi_report": " ".join(shlex.quote(w.replace("{bin}", str(lib.bindir))) for w in lib.report_command)
        if lib is not None else "",
        "spec": spec,
    }
    text = _render_template(unit.template, context, dirs,
                            "every kernel needs slurm-templates/<kernel>.sh.j2 (and preamble.sh.j2)")
    return _ensure_required(text, options)


def _render_template(name: str, context: dict, dirs: list[Path], missing_hint: str) -> str:
    try:
        return _environment(dirs).get_template(name).render(**context)
    except jinja2.TemplateNotFound as exc:
        raise HpclabError(f"no job template {exc.name!r} in {', '.join(map(str, dirs))}", missing_hint) from None
    except jinja2.TemplateError as exc:
        where = f" (line {exc.lineno})" if getattr(exc, "lineno", None) else ""
        raise HpclabError(f"job template {name} is broken{where}: {exc}",
                          f"fix the template; search path: {', '.join(map(str, dirs))}") from None


def render_engines(site: Site, *, ranks: int, folder: Path, log: Path, time: str,
                   engine_argv: list[str], partition: str | None = None,
                   mca: dict[str, str] | None = None, dirs: list[Path] | None = None) -> str:
    """The batch script of an ipyparallel engines' job (slurm-templates/engines.sh.j2): `ranks`
    tasks under one `srun --mpi=<site's PMI>`, each running `engine_argv`, so the engines are
    the ranks of one MPI_COMM_WORLD. folder: the session's folder (the job's working directory,
    its name names the job); log: Slurm's output file; time: the job's limit (HH:MM:SS);
    mca: Open MPI selections, exported as OMPI_MCA_<name>. Returns the script text."""
    dirs = dirs or template_dirs()
    options = {
        "chdir": str(folder),
        "export": "ALL",  # the engines read the controller's address from the environment
        "job-name": f"hpclab-engines-{Path(folder).name}",
        "ntasks": str(ranks),
        "output": str(log),
        "time": time,
        **site_options(site, partition),
        **{k: str(v) for k, v in site.extra_sbatch.items()},
    }
    env = dict(site.env)
    env.update({f"OMPI_MCA_{k}": v for k, v in (mca or {}).items()})
    context = {
        "ranks": ranks, "template": "engines.sh.j2",
        "sbatch_lines": sorted(_sbatch_line(k, v) for k, v in options.items()),
        "modules": list(site.modules), "module_lines": module_lines(site),
        "env": sorted((k, str(v)) for k, v in env.items()),
        "srun_mpi": site.srun_mpi, "engine": " ".join(shlex.quote(str(w)) for w in engine_argv),
    }
    text = _render_template("engines.sh.j2", context, dirs,
                            "the engines' job needs slurm-templates/engines.sh.j2")
    return _ensure_required(text, options)


def step_argv(site: Site, *, job_name: str, time: str, partition: str | None = None,
              ntasks: int = 1, cpus_per_task: int = 1, cpu_bind: str = "cores") -> list[str]:
    """srun words that run one command as a job step with an allocation of its own (a profiler
    run, a kernel variant): `ntasks` tasks of `cpus_per_task` cores bound with `cpu_bind`, the
    site's PMI, partition, account, QoS and constraint (site_options), the time limit `time`
    (HH:MM:SS) and the job name `job_name`; on a site with modules, a `bash -c` that loads them
    (module_lines) and then runs the command. Append the command's words to them."""
    if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}", job_name):
        raise HpclabError(f"job name {job_name!r} is not a plain word", "use letters, digits, '.', '_', '-'")
    words = ["srun", f"--ntasks={ntasks}", f"--cpus-per-task={cpus_per_task}", f"--cpu-bind={cpu_bind}",
             f"--mpi={site.srun_mpi}", f"--time={time}", f"--job-name={job_name}", "--quiet"]
    words += [f"--{k}={v}" for k, v in site_options(site, partition).items()]
    lines = module_lines(site)
    if lines:  # the command's words become "$@" of this little script
        words += ["bash", "-c", "\n".join([*lines, 'exec "$@"']), "hpclab-step"]
    return words


def step_env(site: Site, threads: int = 1) -> dict[str, str]:
    """The environment of a job step from step_argv: this process's environment, the embedded
    cluster's Slurm variables (SLURM_CONF), the site's env and OMP_NUM_THREADS = threads."""
    return {**slurm_env(), **{k: str(v) for k, v in site.env.items()}, "OMP_NUM_THREADS": str(threads)}
