"""Environment modules (Lmod) for a site profile: module files for this machine's own compiler and
Open MPI, and the shell lines a job script runs to load a profile's `modules`.

A site's cluster loads its compiler and MPI with `module load`; the classroom on this machine does
the same, with module files that wrap Debian's gcc and openmpi packages (versions read from the
machine: `gcc -dumpfullversion`, `ompi_info`). `write_modulefiles(folder)` writes them as
<folder>/gcc/<version>.lua and <folder>/openmpi/<version>.lua, world-readable, for the classroom to
install (in /opt/hpclab/classroom/modulefiles, which sites/classroom.yaml names as its modulepath).
`write_library_modulefiles(folder)` writes one module file per MPI library of
hpclab.site.mpi_libraries that is installed (the system Open MPI included), so that
`module load openmpi/5.0.11` or `module load mpich/5.0.2` picks a library as on a site's cluster.
`load_lines(modules, modulepath)` gives the lines every job script and job step runs (through
hpclab.jobs.templates): the job's own `module` command if it has one (a site's Lmod), else Debian's
Lmod init for bash; `module use` for each folder; one `module load` per module. A missing Lmod, a
missing folder or a module Lmod cannot load stops the job with a line naming it, and saying
whether the module is unknown (`module is-avail`) or known but refused (Lmod itself prints its
reason to stderr and returns 1, but the job scripts do not stop on errors by themselves). `loaded_environment` runs the same lines here and returns the environment they give.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
from pathlib import Path

from hpclab.core import commands
from hpclab.core.errors import HpclabError
from hpclab.core.io import readable_folders, write_atomic
from hpclab.site import mpi_libraries, ompi

# Debian's lmod package: the init file that defines the `module` shell function for bash.
LMOD_INIT = Path("/usr/share/lmod/lmod/init/bash")
# The first line of every module file written here: files with it are ours to replace.
MARKER = "-- hpclab module file"

_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.+-]*(/[A-Za-z0-9][A-Za-z0-9_.+-]*)*")


def _lua(value: str) -> str:
    """A Lua string literal for `value`."""
    return '"' + str(value).replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'


def _tool(name: str) -> str | None:
    """The absolute path of program `name` on PATH, or None."""
    return shutil.which(name)


def gcc_facts() -> dict[str, str]:
    """This machine's GCC: {"version": "12.2.0", "CC": "/usr/bin/gcc", "CXX": ..., "FC": ...}
    (CXX and FC only when g++ and gfortran are installed). Raises HpclabError without gcc."""
    version = commands.output(["gcc", "-dumpfullversion"], "ask gcc for its version",
                              "install the compiler (apt-get install gcc)").strip()
    facts = {"version": version, "CC": _tool("gcc")}
    for var, prog in (("CXX", "g++"), ("FC", "gfortran")):
        if _tool(prog):
            facts[var] = _tool(prog)
    return facts


def _paths(text: str) -> dict[str, str]:
    # `ompi_info --parsable --path all`: lines "path:<name>:<folder>"
    out = {}
    for line in text.splitlines():
        parts = line.split(":", 2)
        if len(parts) == 3 and parts[0] == "path":
            out.setdefault(parts[1], parts[2])
    return out


def openmpi_facts() -> dict[str, str]:
    """This machine's Open MPI: {"version": "4.1.4", "package": "Debian OpenMPI", "prefix": "/usr",
    "bindir", "libdir", "incdir", "MPICC", "MPICXX", "MPIFC"} (a wrapper compiler only when it is
    installed), from `ompi_info --parsable` and `ompi_info --parsable --path all`. Raises
    HpclabError without Open MPI."""
    info = ompi.run_ompi_info()
    where = _paths(commands.output(["ompi_info", "--parsable", "--path", "all"], "ask ompi_info for its folders",
                                   "install Open MPI (apt-get install openmpi-bin libopenmpi-dev)"))
    if not info.version or not info.prefix:
        raise HpclabError("ompi_info does not say which Open MPI version or prefix this is",
                          "check `ompi_info --parsable | grep -E 'version:full|path:prefix'`")
    facts = {"version": info.version, "package": info.package or "Open MPI", "prefix": info.prefix,
             **{k: where[k] for k in ("bindir", "libdir", "incdir") if k in where}}
    bindir = Path(where.get("bindir", Path(info.prefix) / "bin"))
    for var, prog in (("MPICC", "mpicc"), ("MPICXX", "mpicxx"), ("MPIFC", "mpifort")):
        if (bindir / prog).exists():
            facts[var] = str(bindir / prog)
    return facts


def gcc_modulefile(facts: dict[str, str]) -> str:
    """The Lua module file of the system GCC described by `facts` (see gcc_facts)."""
    v = facts["version"]
    lines = [
        f"{MARKER}: the system GCC {v} (Debian's gcc package), written by hpclab.site.modules.",
        "-- It changes no search path: the compiler is on the system PATH already. It names the",
        "-- compilers, as a site's compiler module does, so builds pick them the same way.",
        f"help([[GCC {v} as Debian installed it ({facts['CC']}). This module wraps the system package",
        "for the hpclab course: PATH is left as it is; CC, CXX and FC name the compilers.]])",
        'whatis("Name: gcc")',
        f"whatis({_lua('Version: ' + v)})",
        f"whatis({_lua('Description: the system GCC ' + v + ' (Debian package gcc), wrapped as a module by hpclab')})",
        'family("compiler")',
    ]
    lines += [f"setenv({_lua(var)}, {_lua(facts[var])})" for var in ("CC", "CXX", "FC") if facts.get(var)]
    return "\n".join(lines) + "\n"


def openmpi_modulefile(facts: dict[str, str]) -> str:
    """The Lua module file of the system Open MPI described by `facts` (see openmpi_facts)."""
    v, prefix = facts["version"], facts["prefix"]
    lines = [
        f"{MARKER}: the system Open MPI {v} ({facts['package']}), written by hpclab.site.modules.",
        "-- It changes no search path: mpicc and mpirun are on the system PATH already. It sets what",
        "-- a site's MPI module sets (MPI_HOME, the wrapper compilers) so builds and launches agree.",
        f"help([[Open MPI {v} as Debian installed it (prefix {prefix}, libraries in {facts.get('libdir', '?')}).",
        "This module wraps the system package for the hpclab course: PATH is left as it is; MPI_HOME",
        "and OMPI_HOME name the prefix, MPICC, MPICXX and MPIFC the wrapper compilers.]])",
        'whatis("Name: openmpi")',
        f"whatis({_lua('Version: ' + v)})",
        f"whatis({_lua('Description: the system Open MPI ' + v + ' (' + facts['package'] + '), wrapped as a module by hpclab')})",
        'family("mpi")',
        f"setenv(\"MPI_HOME\", {_lua(prefix)})",
        f"setenv(\"OMPI_HOME\", {_lua(prefix)})",
    ]
    lines += [f"setenv({_lua(var)}, {_lua(facts[var])})" for var in ("MPICC", "MPICXX", "MPIFC") if facts.get(var)]
    return "\n".join(lines) + "\n"


def write_modulefiles(folder: str | os.PathLike) -> dict[str, Path]:
    """Write the module files of this machine's GCC and Open MPI into `folder` (created if needed):
    <folder>/gcc/<version>.lua and <folder>/openmpi/<version>.lua, folders 0755 and files 0644 so
    every user's job can read them. Module files of ours for other versions (an upgraded package)
    are removed; other files are left alone. Returns {"gcc": path, "openmpi": path}."""
    folder = Path(folder)
    if not folder.is_absolute():
        raise HpclabError(f"module folder {folder} is not an absolute path",
                          "give an absolute folder: jobs run `module use` on it from anywhere")
    made = {}
    for name, facts, render in (("gcc", gcc_facts(), gcc_modulefile),
                                ("openmpi", openmpi_facts(), openmpi_modulefile)):
        text = render(facts)
        sub = readable_folders(folder, name, what="the module folder",
                               fix="run as root for a system folder, or pick a folder you can write")
        target = sub / f"{facts['version']}.lua"
        for old in sub.glob("*.lua"):
            if old != target and old.read_text(errors="replace").startswith(MARKER):
                old.unlink()
        made[name] = write_atomic(target, text, mode=0o644)
    return made


def library_modulefile(lib: mpi_libraries.MpiLibrary) -> str:
    """The Lua module file of an MPI library installed from its wheel under its own prefix (see
    hpclab.site.mpi_libraries): PATH and MANPATH first, MPI_HOME and the wrapper compilers. No
    LD_LIBRARY_PATH: the wrappers link with an rpath into the prefix, and the libraries find their
    own dependencies ($ORIGIN). family("mpi"): loading another MPI swaps this one out."""
    prefix, v = str(lib.prefix), lib.version
    lines = [
        f"{MARKER}: {lib.family} {v} from the wheel {lib.requirement}, written by hpclab.site.modules.",
        f"help([[{lib.family} {v} installed from PyPI ({lib.requirement}) into {prefix}.",
        f"Loading it puts its mpicc and launchers first on PATH; jobs start it with: {' '.join(lib.launcher.argv)}.",
        "What carried the messages: " + (" ".join(f"{k}={val}" for k, val in lib.report_env.items()) or "-") + "]])",
        f"whatis({_lua('Name: ' + lib.family)})",
        f"whatis({_lua('Version: ' + v)})",
        f"whatis({_lua('Description: ' + lib.family + ' ' + v + ' from PyPI, in its own prefix ' + prefix)})",
        'family("mpi")',
        f"prepend_path(\"PATH\", {_lua(prefix + '/bin')})",
        f"prepend_path(\"MANPATH\", {_lua(prefix + '/share/man')})",
        f"setenv(\"MPI_HOME\", {_lua(prefix)})",
        f"setenv(\"HPCLAB_MPI\", {_lua(lib.name)})",
    ]
    lines += [f"setenv({_lua(var)}, {_lua(value)})" for var, value in lib.environment().items()]
    lines += [f"setenv({_lua(var)}, {_lua(prefix + '/bin/' + prog)})"
              for var, prog in (("MPICC", "mpicc"), ("MPICXX", "mpicxx"))]
    return "\n".join(lines) + "\n"


def write_library_modulefiles(folder: str | os.PathLike | None = None) -> dict[str, Path]:
    """Write one module file per MPI library into `folder` (default: mpi_libraries.modulefiles_dir()):
    <folder>/<family>/<version>.lua for each library installed from its wheel, and the system
    Open MPI's (openmpi_modulefile, with its own version) beside them. Libraries that are not
    installed get none (and a stale file of ours for them is removed). Folders 0755, files 0644.
    Returns {library name: path}."""
    folder = Path(folder or mpi_libraries.modulefiles_dir())
    wanted: dict[str, tuple[Path, str]] = {}
    for lib in mpi_libraries.LIBRARIES:
        if lib.requirement is None:
            facts = openmpi_facts()
            wanted[lib.name] = (folder / "openmpi" / f"{facts['version']}.lua", openmpi_modulefile(facts))
        elif lib.installed():
            wanted[lib.name] = (folder / lib.family / f"{lib.version}.lua", library_modulefile(lib))
    keep = {path for path, _ in wanted.values()}
    made = {}
    try:
        for sub in {lib.family for lib in mpi_libraries.LIBRARIES}:
            (folder / sub).mkdir(parents=True, exist_ok=True)
            for d in (folder, folder / sub):
                d.chmod(0o755)
            for old in (folder / sub).glob("*.lua"):
                if old not in keep and old.read_text(errors="replace").startswith(MARKER):
                    old.unlink()
    except OSError as exc:
        raise HpclabError(f"cannot create the module folder {folder}: {exc.strerror}",
                          "run as root for a system folder, or set HPCLAB_MPI_ROOT to a folder you can write") from None
    for name, (path, text) in wanted.items():
        made[name] = write_atomic(path, text, mode=0o644)
    return made


def load_lines(modules: list[str] | tuple[str, ...], modulepath: list[str] | tuple[str, ...] = (),
               init: str | os.PathLike = LMOD_INIT) -> list[str]:
    """The bash lines that load `modules` (names as `module load` takes them, in order) after
    `module use` of each folder in `modulepath`; [] when both are empty. The job's own `module`
    command is used when it has one (a site's Lmod or Environment Modules), else Lmod's bash
    init file `init` is sourced. Every failure stops the job (exit 1) with a line on stderr that
    names the missing init file, folder or module. Raises HpclabError for a module name or folder
    that is not a plain word or an absolute path."""
    modules, modulepath = list(modules), [str(p) for p in modulepath]
    for name in modules:
        if not isinstance(name, str) or not _NAME.fullmatch(name):
            raise HpclabError(f"module name {name!r} is not a plain module name",
                              "use names as `module load` takes them, e.g. gcc or openmpi/4.1")
    for folder in modulepath:
        if not folder.startswith("/") or any(c in folder for c in "\n'\"$`\\"):
            raise HpclabError(f"modulepath entry {folder!r} is not a plain absolute folder",
                              "name the folder with the module files, e.g. /opt/hpclab/modulefiles")
    if not modules and not modulepath:
        return []
    init_q = shlex.quote(str(init))
    what = " ".join(modules) or "(none)"

    def fail(message: str) -> str:
        return f"hpclab_stop {shlex.quote(message)}"

    lines = [
        "# modules: the job's own `module` command (a site's), else Lmod's; a failure stops the job",
        'hpclab_stop() { echo "hpclab: $1" >&2; exit 1; }',
        "hpclab_not_loaded() {  # $1: a module `module load` refused; unknown, or known but broken",
        '  module is-avail "$1" 2>/dev/null && hpclab_stop "module $1 did not load (Lmod says why above)"',
        '  hpclab_stop "module $1 is unknown here (MODULEPATH=${MODULEPATH:-}; module avail lists the modules)"',
        "}",
        "if ! type module >/dev/null 2>&1; then",
        f"  [[ -r {init_q} ]] || " + fail(f"no module command and no Lmod ({init}) for modules {what}: "
                                          "install lmod or drop the modules from the site profile"),
        f"  source {init_q}",
        "fi",
    ]
    for folder in modulepath:
        q = shlex.quote(folder)
        lines.append(f"[[ -d {q} ]] && module use {q} || " + fail(f"module folder {folder} is missing"))
    for name in modules:
        lines.append(f"module load {shlex.quote(name)} || hpclab_not_loaded {shlex.quote(name)}")
    return lines


def require_lmod(init: str | os.PathLike = LMOD_INIT) -> Path:
    """The Lmod init file `init` if it exists; raises HpclabError otherwise."""
    init = Path(init)
    if not init.is_file():
        raise HpclabError(f"Lmod is not installed here: no {init}",
                          "install it (apt-get install lmod; scripts/setup.sh lists it) or use a site "
                          "profile without modules")
    return init


def loaded_environment(modules: list[str] | tuple[str, ...], modulepath: list[str] | tuple[str, ...] = (),
                       init: str | os.PathLike = LMOD_INIT, timeout: float = 60.0) -> dict[str, str]:
    """Run load_lines(modules, modulepath, init) in a fresh bash here (without any inherited
    `module` function, so Lmod from `init` is used) and return the environment they leave
    ({name: value}). Raises HpclabError when Lmod is missing or a module does not load, with
    Lmod's and hpclab's messages."""
    require_lmod(init)
    script = "\n".join(["set -uo pipefail", *load_lines(modules, modulepath, init), "env -0"]) + "\n"
    env = {k: v for k, v in os.environ.items() if not k.startswith("BASH_FUNC_")}
    res = commands.run(["bash", "-c", script], f"load modules {' '.join(modules)}", env=env, timeout=timeout)
    if res is None:
        raise HpclabError(f"loading modules {' '.join(modules)} took more than {timeout:g} s",
                          "check Lmod (`module avail`) and the module folders")
    if res.returncode != 0:
        said = [ln.strip() for ln in res.stderr.splitlines() if ln.strip()]
        ours = [ln for ln in said if ln.startswith("hpclab:")]
        lmod = [ln for ln in said if not ln.startswith("hpclab:")][:3]
        raise HpclabError(" ".join(ours or said[-1:]).removeprefix("hpclab: ") +
                          (f" (Lmod: {' '.join(lmod)})" if lmod else ""),
                          "fix the site profile's modules or modulepath (`module avail` lists the modules "
                          "Lmod finds), or install the module files (write_modulefiles)")
    return dict(item.split("=", 1) for item in res.stdout.split("\0") if "=" in item)
