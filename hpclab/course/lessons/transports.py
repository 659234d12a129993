"""The transports lesson (notebooks 01 and 02, lab-transports): which Open MPI path carries a
message, what each delivers, and the same ping-pong under every MPI library here.

Its runs: the Open MPI transport selections the course compares and the pingpong specs that
measure them; the same ping-pong under every installed MPI library with its default and its
other transports; and notebook 02's last section, one binary built against the MPI 5.0 standard
ABI and run under every library that ships it. Its words: the sentences on what those runs show.
Its claims: the talk's silent fallback and component selection, with their fidelity rows
(`transport_fallback`, `component_selection`). Its lab's expected answers: `reference`, the
Hockney fits of the runs a student packed, by role.

The selections are named after this machine's components, read from ompi_info (hpclab.site.ompi):
the shared-memory BTL is `vader` up to Open MPI 4.1 and `sm` from 5.0, and its single-copy
mechanism is a BTL parameter up to 4.1 and the `smsc` framework from 5.0. So "ob1+vader" on a
Debian 12 machine is "ob1+sm" on Debian 13.

The ABI section: the MPI 5.0 standard (2025) fixes an application binary interface: handles,
constants and the library's name, libmpi_abi.so.1. A program built once against it runs under any
library that provides that file. Here the builder is MPICH 5's mpicc_abi; whether a library ships
the ABI is read from its prefix (its record's `abi` says the same, and tests/test_mpi_libraries.py
checks it). Each usual build names its own libmpi.

The runs' computation is hpclab.analysis.transports and hpclab.analysis.fits, their figure
hpclab.plots.figures.latency_bandwidth.
"""

from __future__ import annotations

import functools
import math
import re
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from hpclab.analysis import fits, phrases, stats, transports
from hpclab.core import commands, paths
from hpclab.core.errors import HpclabError
from hpclab.course.fidelity import Claim, Row, make_row, run_ids
from hpclab.course.lessons import Lesson, register
from hpclab.course.quiz import accepted
from hpclab.site import mpi_libraries, ompi
from hpclab.spec import model as spec

# --- the runs: Open MPI's transport selections and their pingpong specs ---------------------------

@dataclass(frozen=True)
class Selection:
    """A named Open MPI transport selection: the MCA parameters and why one would try it."""

    name: str
    mca: dict
    why: str


def selections(info: ompi.OmpiInfo | None = None) -> dict[str, Selection]:
    """The course's selections for one Open MPI (info: parsed `ompi_info --parsable --all`,
    default this machine's), in the order the notebook shows them: {name: Selection}.
    The two single-copy selections are left out when this Open MPI has no way to choose it."""
    f = ompi.facts(info)
    shm = f.shm_btl
    on_shm = {"pml": "ob1", "btl": f"self,{shm}"}
    renamed = " (called vader up to Open MPI 4.1)" if shm == "sm" else " (called sm from Open MPI 5)"
    out = [
        Selection("default", {}, "let Open MPI choose by priority and by what it finds"),
        Selection(f"ob1+{shm}", dict(on_shm), f"shared memory inside a node: the {shm} BTL{renamed}"),
        Selection("ob1+tcp", {"pml": "ob1", "btl": "self,tcp"},
                  "TCP sockets, as between nodes on Ethernet (here over loopback)"),
        Selection(f"no {shm}", {"btl": f"^{shm}"},
                  "the talk's experiment: disable the fast path and see where performance goes"),
    ]
    none, cma = _single_copy(f, info)
    if none is not None:
        out.append(Selection(f"ob1+{shm}, no single copy", {**on_shm, **none},
                             f"{shm} with copy-in/copy-out only: every large message is copied twice "
                             "through a shared buffer"))
    if cma is not None:
        out.append(Selection(f"ob1+{shm}, CMA", {**on_shm, **cma},
                             f"{shm} with Linux cross-memory attach: one copy, done by the kernel"))
    out.append(Selection("ucx", {"pml": "ucx", "pml_ucx_tls": "any", "pml_ucx_devices": "any"},
                         f"UCX; Open MPI {f.version} uses it only where it finds an InfiniBand/RoCE "
                         "device unless told 'any'"))
    have = info or ompi.this_machine()
    if "cm" in have.available("pml") and "ofi" in have.available("mtl"):
        # The MTL path. Open MPI's OFI MTL skips libfabric's shm, sockets, tcp and udp providers
        # unless told (mtl_ofi_provider_exclude's default); shm cannot serve it at all (the MTL
        # asks for FI_REMOTE_COMM, which shm lacks), so tcp (layered under ofi_rxm) is the one here.
        out.append(Selection("cm+ofi (tcp)", {"pml": "cm", "mtl": "ofi", "mtl_ofi_provider_include": "tcp"},
                             "the MTL path: the cm PML leaves matching to libfabric (OFI), here its tcp "
                             "provider over loopback"))
    return {s.name: s for s in out}


def _single_copy(f: ompi.Facts, info: ompi.OmpiInfo | None) -> tuple[dict | None, dict | None]:
    """The MCA settings for "no single copy" and for "single copy by CMA", (None, None) where this
    Open MPI offers no choice. Up to 4.1 a parameter of the BTL picks the mechanism; from 5.0 the
    smsc framework does, and excluding all its components leaves copy-in/copy-out."""
    if f.single_copy.startswith("btl_"):
        return {f.single_copy: "none"}, {f.single_copy: "cma"}
    if f.single_copy == "smsc":
        have = (info or ompi.this_machine()).available("smsc")
        return {"smsc": "^" + ",".join(have)}, ({"smsc": "cma"} if "cma" in have else None)
    return None, None


@functools.lru_cache(maxsize=1)
def _this_machine() -> dict[str, Selection]:
    return selections()


def shm_label() -> str:
    """The selection that puts ob1 on shared memory here: "ob1+vader" or "ob1+sm"."""
    return f"ob1+{ompi.shm_btl()}"


def without_shm_label() -> str:
    """The selection that excludes the shared-memory BTL here: "no vader" or "no sm"."""
    return f"no {ompi.shm_btl()}"


def __getattr__(name: str):
    # SELECTIONS: this machine's selections, read from ompi_info on first use (not at import: the
    # grader's sandbox and the docs import this module without Open MPI).
    if name == "SELECTIONS":
        return _this_machine()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def specs(names: list[str], ntasks: int = 2, max_bytes: int = 4 << 20, repetitions: int = 3,
          experiment: str = "transports", **extra) -> list:
    """Pingpong specs, one per named selection (each repeated `repetitions` times as separate jobs).
    names: keys of SELECTIONS (this machine's); an unknown name raises HpclabError naming the known ones."""
    known = _this_machine()
    out = []
    for name in names:
        if name not in known:
            raise HpclabError(f"no transport selection {name!r} on this machine's Open MPI {ompi.facts().version}",
                              f"use one of: {', '.join(known)} (SELECTIONS)")
        sel = known[name]
        out.append(spec.make_spec(kernel="pingpong", ntasks=ntasks, args={"max_bytes": max_bytes},
                                  binding={"cpu_bind": "cores"}, mca=dict(sel.mca), label=name,
                                  repetitions=repetitions, experiment=experiment, **extra))
    return out


def node_specs(max_bytes: int = 1 << 20, repetitions: int = 2, experiment: str = "transports-nodes",
               label_suffix: str = "", intra: bool = True) -> list:
    """Pingpong specs: both ranks inside one node (unless intra=False), and one rank on each of
    two nodes."""
    common = dict(kernel="pingpong", ntasks=2, args={"max_bytes": max_bytes}, repetitions=repetitions,
                  experiment=experiment)
    inside = [spec.make_spec(nodes=1, label=f"intra-node{label_suffix}", **common)] if intra else []
    return inside + [spec.make_spec(nodes=2, ntasks_per_node=1, label=f"inter-node{label_suffix}", **common)]


# --- notebook 02's one experiment: the selections and every library, round by round ---------------

# Rounds of every compared spec: the fewest paired runs that can reach 95 % (hpclab.analysis.stats).
ROUNDS = stats.min_runs(paired=True)
# Selections run once: their own reports (the component-selection row) and the figure's curves.
ONCE = ("ob1+tcp", "ucx", "cm+ofi (tcp)")
# Fitted from here: above the shared-memory BTL's eager limit (4 KiB, ompi_info), one protocol.
FIT_FROM = 8 << 10


def compared_selections() -> tuple[str, str]:
    """The two selections the fallback compares, run ROUNDS times: the default and the one
    without the shared-memory BTL."""
    return "default", without_shm_label()


def library_choices() -> list[tuple[mpi_libraries.MpiLibrary, mpi_libraries.Selection | None]]:
    """(library, the transport that turns its shared memory off) for every installed library
    besides the system one. Open MPI libraries share the system's MCA switches (the fallback
    pair, `no vader`/`no sm`), so they run their default only; the others run the first of
    their transports that turns something off."""
    out = []
    for lib in mpi_libraries.LIBRARIES:
        if lib.name == mpi_libraries.SYSTEM or not lib.installed():
            continue
        other = None if lib.family == "openmpi" else next(
            (t for t in lib.transports[1:] if not t.disables.startswith("nothing")), None)
        out.append((lib, other))
    return out


def notebook_specs(max_bytes: int = 4 << 20, rounds: int = ROUNDS, experiment: str = "02-transports") -> list:
    """Notebook 02's one experiment: the fallback pair and every other library's default and its
    turned-off transport, `rounds` times each (submitted round by round, so they pair), and the
    ONCE selections one time each."""
    names = [n for n in compared_selections()]
    out = [s.model_copy(update={"repetitions": rounds}) for s in specs(names, max_bytes=max_bytes, experiment=experiment)]
    once = [n for n in ONCE if n in _this_machine()]
    out += specs(once, max_bytes=max_bytes, repetitions=1, experiment=experiment)

    def fields(env):
        mca = {k.removeprefix("OMPI_MCA_"): v for k, v in env if k.startswith("OMPI_MCA_")}
        return {"mca": mca, "env": {k: v for k, v in env if not k.startswith("OMPI_MCA_")}}

    for lib, other in library_choices():
        common = dict(kernel="pingpong", ntasks=2, mpi=lib.name, args={"max_bytes": max_bytes},
                      binding={"cpu_bind": "cores"}, repetitions=rounds, experiment=experiment)
        out.append(spec.make_spec(label=lib.name, **common))
        if other is not None:
            out.append(spec.make_spec(label=transport_label(lib.name, other.label), **common, **fields(other.env)))
    return out


# --- the same ping-pong under every MPI library here (hpclab.site.mpi_libraries) -----------------

LIBRARIES_EXPERIMENT = "02-libraries"


def library_specs(max_bytes: int = 4 << 20, repetitions: int = 3,
                  experiment: str = LIBRARIES_EXPERIMENT) -> tuple[list, dict[str, str]]:
    """Pingpong specs, one per MPI library installed here (each with its default transport, 2
    ranks on one node bound to cores), and {library: why it is not run} for the others (not
    installed: `make mpi-libraries` installs them)."""
    out, skipped = [], {}
    for lib in mpi_libraries.LIBRARIES:
        if not lib.installed():
            skipped[lib.name] = f"not installed ({lib.mpicc} is missing): `make mpi-libraries` installs it"
            continue
        out.append(spec.make_spec(kernel="pingpong", ntasks=2, mpi=lib.name, args={"max_bytes": max_bytes},
                                  binding={"cpu_bind": "cores"}, label=lib.name, repetitions=repetitions,
                                  experiment=experiment))
    return out, skipped


def split_library_runs(runs, default_specs) -> tuple[list, list]:
    """Runs of one experiment of library_specs + library_transport_specs (submitted together so
    that their repetitions alternate) split back into (the defaults' runs, the other transports')."""
    defaults = {s.label for s in default_specs}
    return [r for r in runs if r.spec.label in defaults], [r for r in runs if r.spec.label not in defaults]


def library_table(runs, names: dict[str, str] | None = None) -> tuple["pd.DataFrame", "pd.DataFrame"]:
    """From completed runs of one pingpong experiment: (the pingpong rows of every run, labelled;
    one row per label with the version MPI_Get_library_version gave, what the library said carried
    the messages, the network interface the bytes went through (counted by the job,
    hpclab.runs.parse.network: `none` when no interface carried them, so shared memory did),
    t(0 B) and the largest message's bandwidth as medians with their runs).
    names: labels to show under another name ({"default": "openmpi-system"}); the table's `label`
    column is renamed the same way."""
    names = names or {}
    tables, said = [], {}
    for r in runs:
        label = names.get(r.spec.label, r.spec.label)
        tables.append(r.table().assign(label=label))
        output = "".join(f.read_text(errors="replace") for f in (r.folder.stdout, r.folder.stderr) if f.exists())
        said.setdefault(label, []).append(
            mpi_libraries.transport_said(r.spec.mpi or mpi_libraries.SYSTEM, output) or "(said nothing)")
    table = pd.concat(tables, ignore_index=True)
    runs_per = transports.per_run(table, size_range=None)
    rows = []
    for label, group in runs_per.groupby("label", sort=False):
        version = str(next(r for r in runs if names.get(r.spec.label, r.spec.label) == label)
                      .result()["config"].get("mpi_library") or "")
        largest = int(group["largest_bytes"].max())
        interfaces = table.loc[table["label"] == label, "interface"] if "interface" in table else []
        rows.append({"run": label, "MPI_Get_library_version": version.split(",")[0].strip(),
                     "carried by (as it said)": ", ".join(sorted(set(said[label]))),
                     "interface (bytes counted)": ", ".join(sorted({str(i) for i in interfaces})) or "not counted",
                     "runs": len(group),
                     "t(0 B) [us], median": round(float(group["latency_us"].median()), 3),
                     f"bandwidth at {largest >> 20} MiB [MB/s], median": round(float(group["largest_mb_s"].median()))})
    return table, pd.DataFrame(rows).set_index("run")


def library_comparisons(table: "pd.DataFrame", reference: str = mpi_libraries.SYSTEM,
                        paired: bool = True) -> list[tuple[str, transports.PathComparison]]:
    """The section's comparisons on a table of library_table (labels: library names, and
    '<library>: <transport>' for a turned-off path): each library's default against its other
    transport, then each library against `reference`. paired: the runs went to Slurm in one
    experiment, round by round, with equal repetitions (notebook_specs), so they pair."""
    labels = list(dict.fromkeys(table["label"]))
    out = []
    for lib in [x for x in labels if ": " not in x]:
        for other in [x for x in labels if x.startswith(f"{lib}: ")]:
            out.append((f"{other} vs its default", transports.compare(table, other, lib, paired=paired)))
    for lib in [x for x in labels if ": " not in x and x != reference]:
        if reference in labels:
            out.append((f"{lib} vs {reference}", transports.compare(table, lib, reference, paired=paired)))
    return out


def library_decisions(comparisons: list[tuple[str, transports.PathComparison]]) -> "pd.DataFrame":
    """The comparisons as a table: two rows each (t(0 B), then the largest message's bandwidth),
    a vs b named in the first column, the outcome decided by the statistics."""
    return transports.decisions_frame([(what, q) for what, c in comparisons for q in (c.latency, c.bandwidth)])


def library_summary(comparisons: list[tuple[str, transports.PathComparison]]) -> str:
    """Two sentences from the decisions: how many libraries lost t(0 B) without their shared
    memory (and by how much), and how each library's t(0 B) compares with the reference's."""
    off = [c for w, c in comparisons if w.endswith("vs its default")]
    lost = [c for c in off if c.latency.outcome == "different" and c.latency.word() == "slower"]
    span = ""
    if lost:
        k = sorted(c.latency.decision.ratio.estimate for c in lost)
        span = f" ({phrases._num(k[0], 2)}-{phrases._num(k[-1], 2)}x)" if len(k) > 1 else f" ({phrases._num(k[0], 2)}x)"
    head = (f"Without shared memory, t(0 B) was decided slower for {len(lost)} of {len(off)} libraries{span}.")
    vs = [(w.split(" vs ")[0], c.latency) for w, c in comparisons if not w.endswith("vs its default")]
    words = {"different": None, "equivalent": "within 5 %", "undecided": "cannot tell"}
    parts = [f"{name} {words[l.outcome] or l.difference()}" for name, l in vs]
    tail = f" Against the system Open MPI, in t(0 B): {'; '.join(parts)}." if parts else ""
    return head + tail


def library_transport_specs(max_bytes: int = 4 << 20, repetitions: int = 3,
                            experiment: str = LIBRARIES_EXPERIMENT) -> list:
    """Pingpong specs for every installed library's other transports (its record's `transports`
    after the default: the variables that turn its fast path off), labelled '<library>: <transport>'."""

    def fields(env):  # a spec takes Open MPI's variables as mca: (its checks name them), the rest as env:
        mca = {k.removeprefix("OMPI_MCA_"): v for k, v in env if k.startswith("OMPI_MCA_")}
        return {"mca": mca, "env": {k: v for k, v in env if not k.startswith("OMPI_MCA_")}}

    return [spec.make_spec(kernel="pingpong", ntasks=2, mpi=lib.name, args={"max_bytes": max_bytes},
                           binding={"cpu_bind": "cores"}, label=transport_label(lib.name, sel.label),
                           repetitions=repetitions, experiment=experiment, **fields(sel.env))
            for lib in mpi_libraries.LIBRARIES if lib.installed() for sel in lib.transports[1:]]


def transport_label(library: str, transport: str) -> str:
    return f"{library}: {transport}"


# --- notebook 02's last section: one binary for every library, the MPI 5.0 ABI --------------------

ABI_SOURCE = Path("src") / "abi" / "which_library.c"
ABI_LIBRARY = "libmpi_abi.so.1"
ABI_EXPERIMENT = "02-abi"


@dataclass(frozen=True)
class AbiBuild:
    """The program built once: with which library's wrapper, the command, the binary and the
    shared libraries its ELF header asks for (NEEDED)."""

    builder: str
    command: list[str]
    exe: Path
    needed: list[str]


def needed(exe: Path) -> list[str]:
    """The NEEDED entries of an ELF binary (readelf -d): the libraries the loader must find."""
    text = commands.output(["readelf", "-d", str(exe)], f"read the dynamic section of {exe}",
                           "install binutils (make setup does)")
    return re.findall(r"\(NEEDED\)\s+Shared library: \[([^\]]+)\]", text)


def ships_abi(lib: mpi_libraries.MpiLibrary) -> bool:
    """Is libmpi_abi.so.1 in the library's lib folder (or, for a distribution's library under
    /usr, its multiarch folder)?"""
    return any(lib.prefix.glob(f"lib/{ABI_LIBRARY}")) or any(lib.prefix.glob(f"lib/*-linux-*/{ABI_LIBRARY}"))


def build_abi(out_dir: Path | None = None) -> AbiBuild:
    """which_library.c built with the first installed library that has an ABI wrapper (mpicc_abi).
    Raises HpclabError when none has, naming what to install."""
    builder = next((lib for lib in mpi_libraries.LIBRARIES if lib.installed() and (lib.bindir / "mpicc_abi").exists()),
                   None)
    if builder is None:
        raise HpclabError("no MPI library here has an MPI 5.0 ABI wrapper (mpicc_abi)",
                          "install MPICH 5 beside the system library: make mpi-libraries")
    out_dir = out_dir or paths.output_dir() / "abi"
    out_dir.mkdir(parents=True, exist_ok=True)
    exe = out_dir / "which-library"
    command = [str(builder.bindir / "mpicc_abi"), str(paths.repo() / ABI_SOURCE), "-o", str(exe)]
    commands.output(command, "build the ABI program", "read the compiler's message above")
    return AbiBuild(builder.name, command, exe, needed(exe))


def usual_builds() -> dict[str, list[str]]:
    """{library: the MPI libraries its own build of the ping-pong asks for}: each names its
    implementation's libmpi (Open MPI's libmpi.so.40, MPICH's libmpi.so.12)."""
    out = {}
    for lib in mpi_libraries.LIBRARIES:
        exe = mpi_libraries.build_dirs(None if lib.requirement is None else lib.name)[0] / "pingpong"
        if exe.is_file():
            out[lib.name] = [n for n in needed(exe) if "mpi" in n]
    return out


def abi_specs(abi: AbiBuild, repetitions: int = 1) -> tuple[list, dict[str, str]]:
    """A 2-rank job of the ABI program under every installed library that ships libmpi_abi.so.1
    (its lib folder first on LD_LIBRARY_PATH: the binary's RUNPATH names the builder's, and
    LD_LIBRARY_PATH comes before a RUNPATH), and {library: why not} for the others."""
    out, not_run = [], {}
    for lib in mpi_libraries.LIBRARIES:
        if not lib.installed():
            not_run[lib.name] = "not installed (make mpi-libraries)"
        elif not ships_abi(lib):
            not_run[lib.name] = f"its prefix has no {ABI_LIBRARY} ({lib.prefix / 'lib'}): it does not ship the MPI 5.0 ABI"
        else:
            out.append(spec.make_spec(kernel="program", command=[str(abi.exe)], ntasks=2, mpi=lib.name,
                                      env={"LD_LIBRARY_PATH": str(lib.prefix / "lib")}, label=lib.name,
                                      repetitions=repetitions, experiment=ABI_EXPERIMENT))
    return out, not_run


def abi_sentences(abi: AbiBuild, runs, not_run: dict[str, str], usual: dict[str, list[str]]) -> list[str]:
    """What the build and the runs showed, from their outputs."""
    usual_text = "; ".join(f"{name}: {', '.join(libs)}" for name, libs in usual.items())
    out = [f"Built once with {abi.builder}'s mpicc_abi, the program asks the loader for {', '.join(abi.needed)}"
           + (f"; the usual builds of the ping-pong ask for {usual_text}." if usual else ".")]
    handed: dict[str, str] = {}  # library -> what its ranks said they were handed
    for r in runs:
        text = r.folder.stdout.read_text(errors="replace") if r.folder.stdout.exists() else ""
        said = sorted(set(re.findall(r"library: (.+)", text)))
        if r.state != "completed" or not said:
            out.append(f"Under {r.spec.label} the job ended {r.state} without the program's lines: {r.folder.tail()[-300:]}")
        else:
            ranks = len(re.findall(r"^rank \d+ of", text, flags=re.M))
            out.append(f"Under {r.spec.label}: {ranks} ranks ran the same binary and each was handed {'; '.join(said)}.")
            handed[r.spec.label] = "; ".join(said)
    out += [f"Not run under {name}: {why}." for name, why in not_run.items()]
    ran = {r.spec.label for r in runs if r.state == "completed"}
    if len(set(handed.values())) >= 2:
        out.append(f"So one file, built once, ran unchanged under {len(handed)} libraries ({', '.join(handed)}), "
                   "each time handed a different implementation: what the MPI 5.0 ABI promises, shown on this machine.")
    elif len(ran) < 2:
        out.append(f"So on this machine the ABI binary runs under {len(ran)} librar{'y' if len(ran) == 1 else 'ies'}: "
                   "one binary for several libraries needs a second library that ships the ABI.")
    return out


# --- what notebook 02's figures and tables say, built from the runs -------------------------------

def _mib(nbytes: int) -> str:
    return transports._size(int(nbytes))


def fallback_decisions(table, fast: str = "default", without: str | None = None) -> "pd.DataFrame":
    """The fallback pair's two decisions (t(0 B), the largest message's bandwidth), paired where
    the runs alternated, as a table (hpclab.analysis.transports.decision_row)."""
    without = without or without_shm_label()
    c = transports.compare(table, without, fast, paired=_pairs(table, fast, without))
    return transports.decisions_frame([(f"{without} vs {fast}", c.latency), (f"{without} vs {fast}", c.bandwidth)])


def _outcome(c: phrases.Comparison) -> str:
    """'28x slower (95 % CI 15-60x)', 'no difference > 5 %' or 'cannot tell (ratio 0.79)'."""
    if c.outcome == "different":
        return f"{c.difference()} (95 % CI {c._effect_ci()})"
    if c.outcome == "equivalent" or c.decision is None:
        return transports.decided(c)
    return f"{transports.decided(c)} (ratio {c.decision.ratio.estimate:.2f})"


def figure_takeaway(table, l2_bytes: int, fast: str = "default", without: str | None = None) -> str:
    """Section 3's figure in one sentence from the runs: the empty message over TCP against shared
    memory (the statistics' outcome) and where the shared-memory bandwidth peaks against a core's L2."""
    without = without or without_shm_label()
    c = transports.compare(table, without, fast, paired=_pairs(table, fast, without))
    peak = transports.cache_peak(table, fast)
    return (f"Over TCP an empty message is {_outcome(c.latency)} than through shared memory, whose bandwidth "
            f"peaks at {_mib(peak['peak_bytes'])} ({phrases._num(peak['peak_mb_s'], 3)} MB/s) while a rank's two "
            f"buffers fit its core's {_mib(l2_bytes)} L2, then falls to {phrases._num(peak['largest_mb_s'], 3)} MB/s.")


def nodes_decisions(nodes_table, table, inter: str, inside: str = "default", tcp: str | None = None,
                    link_mb_s: float | None = None) -> tuple["pd.DataFrame", dict]:
    """Section 5: the inter-node runs' t(0 B) against the runs inside a node (`inside`, section
    3's shared memory) and against TCP over the loopback (`tcp`, default the fallback selection),
    each decided unpaired (two experiments); and the largest message's bandwidth against the
    link's rate. Returns (decisions table, {"inside": Comparison, "tcp": Comparison,
    "largest_mb_s": median, "largest_bytes": size, "link": sentence or ''})."""
    tcp = tcp or without_shm_label()
    far = transports.per_run(nodes_table, size_range=None)
    near = transports.per_run(table, size_range=None)
    f = far[far["label"] == inter]
    out, rows = {}, []
    for key, label in (("inside", inside), ("tcp", tcp)):
        other = near[near["label"] == label]
        c = phrases.compare(f["latency_us"], other["latency_us"], a_name=f"'{inter}'", b_name=f"'{label}'",
                            quantity="t(0 B)", unit="us", lower_is_better=True)
        out[key] = c
        rows.append((f"{inter} vs {label}", c))
    out["largest_mb_s"] = float(f["largest_mb_s"].median())
    out["largest_bytes"] = int(f["largest_bytes"].max())
    out["link"] = (phrases.against_limit(out["largest_mb_s"], link_mb_s, what=f"the {_mib(out['largest_bytes'])} message",
                                         limit_name="the link's rate", unit="MB/s")
                   if link_mb_s else "")
    return transports.decisions_frame(rows), out


def nodes_takeaway(found: dict) -> str:
    """Section 5's figure in one sentence, from nodes_decisions' numbers: each outcome as the
    statistics decided it (a path with two veths and a bridge more than the loopback need not
    measure slower on a shared machine, and the sentence says what was measured)."""
    inside, tcp = found["inside"], found["tcp"]
    text = (f"Between nodes an empty message is {_outcome(inside)} than inside one, and against TCP over "
            f"the loopback: {_outcome(tcp)}")
    return text + (f"; {found['link']}." if found["link"] else ".")


def seed_beside(table, quoted: "pd.DataFrame", size: int = 4 << 20) -> "pd.DataFrame":
    """The seed's PingPong rates at `size` beside this machine's measured rate of the same message
    size (median over runs of bytes / t, not a fitted bandwidth: like with like), one row per
    selection."""
    t = table[table["bytes"] == size]
    ours = (t["bytes"] / t["t_usec"]).groupby(t["label"], sort=False).agg(["median", "count"])
    mine = pd.DataFrame({"where": "this machine (one node)", "path": ours.index,
                         f"MB/s at {_mib(size)}": ours["median"].round(0), "runs": ours["count"]})
    theirs = pd.DataFrame({"where": "PlaFRIM 2019 (two nodes, quoted)",
                           "path": quoted["network"] + " (" + quoted["component"] + ")",
                           f"MB/s at {_mib(size)}": quoted["mbytes_per_sec"].round(0), "runs": 1})
    return pd.concat([theirs, mine], ignore_index=True)


def params_file_text(info: ompi.OmpiInfo | None = None) -> str:
    """What the system's MCA parameter file sets for the transport frameworks, read from it."""
    path = ompi.params_file(info)
    found = ompi.params_file_settings(path)
    chosen = [f"`{k} = {v}`" for k, v in found.items() if k in ("pml", "mtl", "btl", "osc")]
    if not chosen:
        return f"{path} sets no transport framework here: the library's priorities decide alone."
    return f"{path} sets {', '.join(chosen)}."


# --- the claims this lesson tests, and their rows in the fidelity table -----------------------------

_GOGLIN = "Goglin 2019 (seed 000)"

TRANSPORT_FALLBACK = Claim(
    "transport-fallback",
    "Excluding the fast transport does not fail: Open MPI silently falls back to a slower one, "
    "and only the bandwidth shows it.",
    f"{_GOGLIN}: 4 MiB PingPong 9546 MB/s on Omni-Path (mtl/psm2), 788 MB/s once PSM/PSM2 are "
    "excluded and TCP over 10G Ethernet carries the messages.")
COMPONENT_SELECTION = Claim(
    "component-selection",
    "MCA parameters choose the PML, MTL and BTL; the run itself can tell which one carried the messages.",
    f"{_GOGLIN}: five selections on two clusters (psm2, psm, tcp, ucx, openib), each confirmed by "
    "a PingPong whose performance 'disappears if disabling X'.")


def _pairs(table, a: str, b: str) -> bool:
    """Do the runs of a and b pair by round: each run has its repetition and both sides ran the
    same rounds (they were submitted in one experiment, round by round)?"""
    if "repetition" not in table:
        return False
    reps = {x: table.loc[table["label"] == x].groupby("run_id")["repetition"].first() for x in (a, b)}
    if any(r.isna().any() for r in reps.values()):
        return False
    return sorted(reps[a]) == sorted(reps[b]) and reps[a].is_unique


def transport_fallback(table, fast: str = "default", without: str | None = None) -> Row:
    """From notebook 02's ping-pong table (hpclab.analysis.transports): did excluding the default
    fast path change the transport Open MPI reported, and did the runs lose latency (t at 0 B) or
    bandwidth (the largest message), decided by the course's statistics (paired where the runs
    alternated round by round)? 'yes' for a silent change of transport with a loss decided; the row
    says which quantity was lost and which the statistics could not tell. without: the selection
    that excludes the shared-memory BTL (default: this machine's, without_shm_label())."""

    without = without or without_shm_label()
    if not {fast, without} <= set(table["label"]):
        return make_row(TRANSPORT_FALLBACK.id, "-", "not shown", f"the runs '{fast}' and '{without}' were not both made")
    c = transports.compare(table, fast, without, paired=_pairs(table, fast, without))
    lat, bw = c.latency.swapped(), c.bandwidth.swapped()   # 'without' first: its loss is the subject
    here = (f"{fast}: {c.transport[fast]}; {without}: {c.transport[without]}; every run completed. "
            f"{lat.sentence()} {bw.sentence()}")
    runs = run_ids(table, labels=[fast, without])
    if c.transport[fast] == c.transport[without]:
        return make_row(TRANSPORT_FALLBACK.id, here, "no",
                        "Open MPI reported the same transport with and without the exclusion", runs)
    lost = [q for q, cmp in (("latency", lat), ("bandwidth", bw)) if cmp.winner == cmp.b_name]   # b: fast
    if lost:
        kept = [q for q in ("latency", "bandwidth") if q not in lost]
        rest = f"; its {kept[0]} loss was not decided ({(bw if kept[0] == 'bandwidth' else lat).outcome})" if kept else ""
        return make_row(TRANSPORT_FALLBACK.id, here, "yes",
                        f"the run fell back to another transport without an error and lost {' and '.join(lost)}, "
                        f"decided by the statistics{rest}; one machine's loopback stands in for the talk's two nodes",
                        runs, beyond_spread=True)
    if not (lat.enough_runs and bw.enough_runs):
        fewest = phrases.MIN_RUNS_PAIRED if lat.paired else phrases.MIN_RUNS
        why = (f"the transport changed silently, but with fewer than {fewest} {'paired ' if lat.paired else ''}runs "
               "per side a loss cannot be decided")
    else:
        why = "the transport changed silently, but the statistics decided no loss (no difference, or cannot tell)"
    return make_row(TRANSPORT_FALLBACK.id, here, "partly", why, runs)


def _selection_honoured(mca: dict, pml: str, btls: set[str], mtl: str = "") -> bool:
    """Does the transport a run reported agree with the MCA selection it was given (PML, BTLs, MTL)?"""
    want_pml = mca.get("pml", "")
    if want_pml and not want_pml.startswith("^") and pml != want_pml:
        return False
    want_mtl = mca.get("mtl", "")
    if want_mtl and not want_mtl.startswith("^") and mtl not in want_mtl.split(","):
        return False
    want_btl = mca.get("btl", "")
    if want_btl.startswith("^"):
        return not (set(want_btl[1:].split(",")) & btls)
    if want_btl:
        return btls <= set(want_btl.split(","))
    return True


def _reported(value) -> str:
    """A reported component as text, '' for none ('None', 'nan', empty)."""
    text = str(value or "").strip()
    return "" if text in ("None", "nan") else text


def unchanged_reports(libraries: "pd.DataFrame | None") -> list[str]:
    """Libraries whose report of what carried the messages (library_table's 'carried by (as it
    said)') is the same with their shared memory turned off as with their default: 'mpich-5.0.2
    said UCX both times'."""
    if libraries is None or libraries.empty:
        return []
    col = "carried by (as it said)"
    out = []
    for label in libraries.index:
        if ": " not in label:
            continue
        lib = label.split(": ", 1)[0]
        if lib in libraries.index and libraries.loc[label, col] == libraries.loc[lib, col]:
            out.append(f"{lib} said {libraries.loc[lib, col]} both times")
    return out


def component_selection(table, libraries: "pd.DataFrame | None" = None) -> Row:
    """From notebook 02's table: did every MCA selection give the PML, BTL and MTL it asked for, as the
    run itself reported it, did the selections use different transports, and did they include both
    paths the claim names, ob1 with a BTL and cm with an MTL? libraries: library_table's frame of the
    other MPI libraries' runs; a library whose report stays the same when its shared memory is
    turned off makes the claim's second half (the run can tell) only partly true."""

    used = transports.report(table)
    checked, wrong, mtls = [], [], set()
    for label, row in used.iterrows():
        sel = _this_machine().get(label)
        if sel is None:
            continue
        btls = {b.strip() for b in str(row.get("btl", "")).replace("[", "").replace("]", "").replace("'", "")
                .split(",") if b.strip() and b.strip() not in ("None", "nan", "self")}
        pml, mtl = _reported(row.get("pml")), _reported(row.get("mtl"))
        ok = _selection_honoured(sel.mca, pml, btls, mtl)
        checked.append(label)
        if not ok:
            wrong.append(f"{label} reported {row.get('transport')}")
        elif pml == "cm" and mtl:
            mtls.add(f"{label}: cm/{mtl}")
    transports_seen = sorted(set(used.loc[checked, "transport"])) if checked else []
    same = unchanged_reports(libraries)
    here = (f"{len(checked)} selections, {len(transports_seen)} different transports reported by the runs "
            f"({', '.join(transports_seen)}); MTL path: {'; '.join(sorted(mtls)) if mtls else 'none run'}"
            + (f"; not as asked: {'; '.join(wrong)}" if wrong else "")
            + (f"; other libraries with their shared memory off: {'; '.join(same)}" if same else ""))
    runs = run_ids(table, labels=checked)
    if not checked:
        return make_row(COMPONENT_SELECTION.id, here, "not shown", "no run with a known selection was made", runs)
    if wrong:
        return make_row(COMPONENT_SELECTION.id, here, "no", "a run used another component than asked", runs)
    if len(transports_seen) < 2:
        return make_row(COMPONENT_SELECTION.id, here, "partly",
                        "every selection was honoured, but they all ended on the same transport here", runs)
    if not mtls:
        return make_row(COMPONENT_SELECTION.id, here, "partly",
                        "each run's own report names the PML and BTL it was told to use, but the MTL path "
                        "(pml cm with an MTL) was not exercised by any run", runs)
    if same:
        return make_row(COMPONENT_SELECTION.id, here, "partly",
                        "Open MPI's reports name every component it was told to use, the cm/MTL path included, "
                        f"but not every library's does: {'; '.join(same)}, so what a selection reports did not "
                        "change while the path did", runs)
    # The exact test: each run's own report (MPI_T for the PML, the BML endpoint for the BTLs, the
    # selected MTL component) names what it was told to use.
    return make_row(COMPONENT_SELECTION.id, here, "yes",
                    "each run's own report (PML by MPI_T, BTLs from Open MPI's endpoint, the MTL from "
                    "mtl_base) names the components it was told to use, the cm/MTL path included",
                    runs, beyond_spread=True)


# --- the lab's expected answers -------------------------------------------------------------------

LARGE_MESSAGE = 1 << 20          # bytes: the lab's "large message" (1 MiB)


def reference(packed) -> dict:
    """The lab's expected answers from the runs a student packed (packed:
    hpclab.grading.labdata.Packed, verified: roles shm, tcp, unlabelled): each role's Hockney fit
    over the sizes from FIT_FROM up, as notebook 02 fits (latency in us, bandwidth in MB/s) and the transport Open MPI reported, n_half of the TCP run
    (bytes), the transport of the unlabelled run (the other one too when its latency cannot tell
    them apart), and the transport the fits make faster for LARGE_MESSAGE."""
    out: dict = {"latency_us": {}, "bandwidth_mb_s": {}, "label": {}}
    for role in ("shm", "tcp", "unlabelled"):
        table = packed.table(role)
        fit = fits.hockney_fit(*_cols(table))
        out["latency_us"][role] = fit.latency_us
        out["bandwidth_mb_s"][role] = fit.bandwidth_mb_s
        out["label"][role] = str(table["transport"].iloc[0])
    out["n_half_tcp"] = fits.hockney_fit(*_cols(packed.table("tcp"))).half_bandwidth_bytes
    # the unlabelled run's transport as Open MPI reported it, named by the run that shares it;
    # the other one is accepted too when the timings cannot tell them apart (the unlabelled fit's
    # latency is, on a log scale, no nearer to its own transport's than to the other's)
    same = [r for r in ("shm", "tcp") if out["label"][r] == out["label"]["unlabelled"]]
    out["unlabelled_transport"] = same[:1] if len(same) == 1 else []
    if len(same) == 1:
        other = "tcp" if same[0] == "shm" else "shm"
        far = {r: abs(math.log(out["latency_us"]["unlabelled"] / out["latency_us"][r])) for r in ("shm", "tcp")}
        if far[other] <= far[same[0]]:
            out["unlabelled_transport"].append(other)
    # interpretation: the transport the fitted models make faster for 1 MiB messages; the
    # spread of each prediction is the fit's typical error (median |relative residual|)
    t, spread = {}, {}
    for role in ("shm", "tcp"):
        fit = fits.hockney_fit(*_cols(packed.table(role)))
        t[role] = float(fit.predict(LARGE_MESSAGE))
        spread[role] = float(np.median(np.abs(fit.relative_residuals))) * t[role]
    out["large_message_us"] = t
    out["large_message_transport"] = accepted(t, spread, best=min)
    return out


LAB_ATTEMPTS = 3   # runs of a role at most, while its fit answers nothing


def lab_fit_unusable(folder) -> bool:
    """Whether the lab's Hockney fit of a ping-pong run folder answers nothing: it puts the
    latency below zero (the fit then holds it at 0: hpclab.analysis.fits.hockney_fit's bound), or
    its times do not grow with the size at all. A busy machine does both: it slows the largest
    messages most (make test's first part, 2026-12-07: shm's fit at 0.0 us beside STREAM and
    three workers), or it deschedules the two ranks so that every size takes about a time slice."""
    from hpclab.runs import parse

    try:
        return fits.hockney_fit(*_cols(parse.parse_run(Path(folder), "pingpong"))).clamped
    except HpclabError:
        return True


def measure_lab(btls: dict, experiment_name: str = "lab-transports", **run_options) -> dict:
    """The lab's runs, {role: Run}: one ping-pong up to 4 MiB per role, under the BTLs `btls`
    gives ({role: "self,tcp", ...}), through hpclab.jobs.experiment.run(**run_options). A role
    whose fit answers nothing (lab_fit_unusable) is measured again, at most LAB_ATTEMPTS runs in
    all, and the learner is told why."""
    from hpclab.jobs import experiment

    done, todo = {}, dict(btls)
    for attempt in range(LAB_ATTEMPTS):
        specs = [{"experiment": experiment_name, "kernel": "pingpong", "ntasks": 2, "label": role,
                  "mca": {"pml": "ob1", "btl": btl}, "args": {"max_bytes": 4194304}} for role, btl in todo.items()]
        done.update(zip(todo, experiment.run(specs, **run_options)))
        todo = {role: btl for role, btl in todo.items() if lab_fit_unusable(done[role].path)}
        if not todo:
            break
        print(f"the {' and '.join(todo)} run's times give no latency (its fit put the latency below zero, "
              "or the times did not grow with the size: what a busy machine does to a ping-pong)"
              + ("; measuring again" if attempt + 1 < LAB_ATTEMPTS else
                 f"; {LAB_ATTEMPTS} runs did so: measure when it is quieter"))
    return done


def _cols(table):
    """What the lab fits, as notebook 02 teaches: the sizes from FIT_FROM up (above the eager limit)."""
    keep = table["bytes"] >= FIT_FROM
    return table.loc[keep, "bytes"], table.loc[keep, "t_usec"]


LESSON = register(Lesson("transports", "Transports: which path carries a message, and what it delivers",
                         ("01-mpi-landscape.ipynb", "02-transports.ipynb"), lab="lab-transports",
                         claims=(TRANSPORT_FALLBACK, COMPONENT_SELECTION), reference=reference))
