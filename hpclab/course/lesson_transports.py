"""The transports lesson (notebook 02, lab-transports): the Open MPI transport selections the course
compares, and the pingpong specs that measure them.

The selections are named after this machine's components, read from ompi_info (hpclab.site.ompi):
the shared-memory BTL is `vader` up to Open MPI 4.1 and `sm` from 5.0, and its single-copy
mechanism is a BTL parameter up to 4.1 and the `smsc` framework from 5.0. So "ob1+vader" on a
Debian 12 machine is "ob1+sm" on Debian 13.

The runs' analysis is hpclab.analysis.transports, their figure hpclab.plots.figures.latency_bandwidth.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

from hpclab.core.errors import HpclabError
from hpclab.site import ompi
from hpclab.spec import model as spec


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
                              f"use one of: {', '.join(known)} (lesson_transports.SELECTIONS)")
        sel = known[name]
        out.append(spec.make_spec(kernel="pingpong", ntasks=ntasks, args={"max_bytes": max_bytes},
                                  binding={"cpu_bind": "cores"}, mca=dict(sel.mca), label=name,
                                  repetitions=repetitions, experiment=experiment, **extra))
    return out


def node_specs(max_bytes: int = 1 << 20, repetitions: int = 2, experiment: str = "transports-nodes",
               label_suffix: str = "") -> list:
    """Two pingpong specs: both ranks inside one node, and one rank on each of two nodes."""
    common = dict(kernel="pingpong", ntasks=2, args={"max_bytes": max_bytes}, repetitions=repetitions,
                  experiment=experiment)
    return [spec.make_spec(nodes=1, label=f"intra-node{label_suffix}", **common),
            spec.make_spec(nodes=2, ntasks_per_node=1, label=f"inter-node{label_suffix}", **common)]


# --- the same ping-pong under every MPI library here (hpclab.site.mpi_libraries) -----------------

LIBRARIES_EXPERIMENT = "02-libraries"


def library_specs(max_bytes: int = 4 << 20, repetitions: int = 3,
                  experiment: str = LIBRARIES_EXPERIMENT) -> tuple[list, dict[str, str]]:
    """Pingpong specs, one per MPI library installed here (each with its default transport, 2
    ranks on one node bound to cores), and {library: why it is not run} for the others (not
    installed: `make mpi-libraries` installs them)."""
    from hpclab.site import mpi_libraries

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


def library_table(runs) -> tuple["pd.DataFrame", "pd.DataFrame"]:
    """From completed runs of library_specs (and library_transport_specs): (the pingpong rows of
    every run, labelled; one row per label with the version MPI_Get_library_version gave, what the library said
    carried the messages in each run, t(0 B) and the largest message's bandwidth as spreads)."""
    import pandas as pd

    from hpclab.analysis import phrases
    from hpclab.analysis import transports as tr
    from hpclab.site import mpi_libraries

    tables, said = [], {}
    for r in runs:
        tables.append(r.table())
        output = "".join(f.read_text(errors="replace") for f in (r.folder.stdout, r.folder.stderr) if f.exists())
        said.setdefault(r.spec.label, []).append(mpi_libraries.transport_said(r.spec.mpi, output) or "(said nothing)")
    table = pd.concat(tables, ignore_index=True)
    runs_per = tr.per_run(table, size_range=None)
    rows = []
    for label, group in runs_per.groupby("label", sort=False):
        version = str(next(r for r in runs if r.spec.label == label).result()["config"].get("mpi_library") or "")
        largest = int(group["largest_bytes"].max())
        rows.append({"run": label, "MPI_Get_library_version": version.split(",")[0],
                     "carried by (as it said)": ", ".join(sorted(set(said[label]))),
                     "t(0 B) [us]": phrases.Spread.of(group["latency_us"]).text(),
                     f"bandwidth at {largest >> 20} MiB [MB/s]": phrases.Spread.of(group["largest_mb_s"]).text()})
    return table, pd.DataFrame(rows).set_index("run")


def library_sentences(table: "pd.DataFrame", reference: str = "openmpi-system") -> list[str]:
    """Each other library against the reference (the system Open MPI), in latency and bandwidth,
    built from the runs' spreads (hpclab.analysis.transports.compare)."""
    from hpclab.analysis import transports as tr

    labels = list(dict.fromkeys(table["label"]))
    if reference not in labels:
        return [f"no run of {reference} to compare with"]
    out = []
    for other in labels:
        if other == reference:
            continue
        c = tr.compare(table, reference, other)
        out.append(f"{c.latency.sentence()} {c.bandwidth.sentence()}")
    return out


def library_transport_specs(max_bytes: int = 4 << 20, repetitions: int = 3,
                            experiment: str = LIBRARIES_EXPERIMENT) -> list:
    """Pingpong specs for every installed library's other transports (its record's `transports`
    after the default: the variables that turn its fast path off), labelled '<library>: <transport>'."""
    from hpclab.site import mpi_libraries

    def fields(env):  # a spec takes Open MPI's variables as mca: (its checks name them), the rest as env:
        mca = {k.removeprefix("OMPI_MCA_"): v for k, v in env if k.startswith("OMPI_MCA_")}
        return {"mca": mca, "env": {k: v for k, v in env if not k.startswith("OMPI_MCA_")}}

    return [spec.make_spec(kernel="pingpong", ntasks=2, mpi=lib.name, args={"max_bytes": max_bytes},
                           binding={"cpu_bind": "cores"}, label=transport_label(lib.name, sel.label),
                           repetitions=repetitions, experiment=experiment, **fields(sel.env))
            for lib in mpi_libraries.LIBRARIES if lib.installed() for sel in lib.transports[1:]]


def transport_label(library: str, transport: str) -> str:
    return f"{library}: {transport}"


def library_transport_sentences(table: "pd.DataFrame", libraries: "pd.DataFrame", alternated: bool = True) -> list[str]:
    """For each library and each of its other transports in `table` (library_table of the default
    runs and library_transport_specs' runs): what it turned off, what the library said carried the
    messages, and the latency and bandwidth against the library's default, from the runs' spreads
    (a loss named only beyond them: the seed's "performance disappears if disabling X").
    alternated: the default's and the selections' runs went to Slurm in one experiment.run, so
    their repetitions alternated in time (False: two separate batches)."""
    from hpclab.analysis import phrases
    from hpclab.analysis import transports as tr
    from hpclab.site import mpi_libraries

    present = set(table["label"])
    out = []
    for lib in mpi_libraries.LIBRARIES:
        for sel in lib.transports[1:]:
            label = transport_label(lib.name, sel.label)
            if lib.name not in present or label not in present:
                continue
            c = tr.compare(table, lib.name, label)
            before, after = (libraries.loc[x, "carried by (as it said)"] for x in (lib.name, label))
            chosen = f"{lib.name} with {' '.join(f'{k}={v}' for k, v in sel.env)}"
            if sel.disables.startswith("nothing"):   # the default's own path, named explicitly
                head = f"{chosen} names the path its default takes on one node: it said {after}, the default {before}"
            elif after != before:
                head = f"{chosen} turns off {sel.disables}: it said {after} carried the messages, the default {before}"
            else:
                head = (f"{chosen} turns off {sel.disables}: it said {after} both times (what it reports does not "
                        "show this switch; the numbers do)")
            text = f"{head}. {c.latency.sentence()} {c.bandwidth.sentence()}"
            apart = [x for x in (c.latency, c.bandwidth) if x.beyond_spread]
            if sel.disables.startswith("nothing") and after == before and apart:
                # one path measured twice: a gap here is between jobs, and the rule's own odds say how often
                n = min(min(x.a.n, x.b.n) for x in apart)
                chance = phrases.chance_apart(n, n)
                when = ("their runs alternated in time, so a drift of the machine fell on both" if alternated else
                        "the default's runs and these ran as separate batches, so a drift of the machine between "
                        "them shows here")
                verdict = ("a gap this clear points at something the selection changed besides the path it reports"
                           if chance <= 0.05 else "chance alone explains such a gap often enough")
                text += (f" Both reported the same path ({after}), and {when}. By chance alone, the ranges of {n} "
                         f"runs a side of one distribution fail to overlap {chance:.1%} of the time (2 of the "
                         f"{round(2 / chance)} equally likely orderings): {verdict}.")
            out.append(text)
    return out
