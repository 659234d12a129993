"""The collectives lesson (notebook 02b): which algorithm an MPI library runs for MPI_Allreduce,
MPI_Bcast and MPI_Alltoall, what forcing another one costs on two nodes joined by a shaped link,
and whether a cost model picks the winner.

Its runs: on two one-core virtual nodes joined by the `1g` link, four ranks (two a node, so the
two ranks of a node share its core), the collectives kernel under every installed MPI library,
its default against three forced algorithms per operation, each in the block and the cyclic
numbering of the ranks over the nodes. Libraries whose MPI_T can switch the algorithm while the
job runs (Open MPI's coll_tuned, MPICH's CVARs) do it in one job, round by round, so the
algorithms' rounds pair; Intel MPI takes its choice from the environment only, so it runs one job
per algorithm and its comparisons are unpaired. Two ping-pongs on the same nodes (one rank a node;
two ranks on one node, under each library) give the model its paths, through hpclab.analysis.fits.

Its words: what each library said it ran, which algorithm the statistics decide fastest per
size and placement, the model's winner beside it and how often the two agree, all built from
the runs (hpclab.analysis.collectives, hpclab.analysis.phrases). It tests no claim of the seed
talks (none measured a collective's algorithm), so it has no fidelity row.

Its lab (labs/lab-collectives): the student measures one Allreduce size under the default and
the three forced algorithms, decides the fastest with the statistics, prices each with the
textbook formulas from the link's own alpha and beta, and says whether the model picks the
winner and which term decides; graded on the student's runs (lab_reference).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import pandas as pd

from hpclab.analysis import collectives as model
from hpclab.analysis import fits, phrases, stats, transports
from hpclab.core import seedfacts
from hpclab.core.errors import HpclabError
from hpclab.course.lessons import Lesson, register
from hpclab.kernels import collectives as kernel
from hpclab.site import coll_selection, mpi_libraries
from hpclab.spec import model as spec

EXPERIMENT = "02b-collectives"
LINK = "1g"                 # hpclab/cluster/links.yaml: 125 MB/s, the link the algorithms' bytes cross
NODES, PER_NODE = 2, 2      # two one-core virtual nodes, two ranks each: the smallest case where
RANKS = NODES * PER_NODE    # block and cyclic numbering put different pairs on the link
CPUS_PER_NODE = 1
ORDERS = ("block", "cyclic")
OPS = kernel.OPS
# Paired rounds (MPI_T switches the algorithm inside one job) and unpaired runs per side (one job
# per algorithm): the fewest that can reach a 95 % decision (hpclab.analysis.stats).
ROUNDS = stats.min_runs(paired=True)
UNPAIRED_ROUNDS = stats.min_runs(paired=False)
# The forced algorithms, by the model's names, in the order of the variants: each library's own
# number for each comes from its record (hpclab.site.mpi_libraries).
FORCED = {"allreduce": ("recursive_doubling", "ring", "rabenseifner"),
          "bcast": ("binomial", "scatter_allgather", "scatter_ring_allgather"),
          "alltoall": ("pairwise", "bruck", "linear_alltoall")}
DEFAULT = "default"
# Bytes per rank (Alltoall: per destination). Up to 1 MiB: the model puts the last change of winner
# below 300 KiB on this link, and one job of the four variants to 4 MiB would take about 70 s
# (the model's own sum of the calls), against 17 s to 1 MiB.
SIZES = (8, 1024, 16384, 262144, 1 << 20)
FAST_SIZES = (8, 16384, 262144)


# --- the runs ----------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Variant:
    """One setting of a library's algorithms: `name` (DEFAULT, or the variant's index 1..3), the
    model's name and the library's number for each operation ({} for the default)."""

    name: str
    models: dict
    numbers: dict


def libraries() -> list[mpi_libraries.MpiLibrary]:
    """The installed libraries whose record says how to force a collective's algorithm."""
    return [lib for lib in mpi_libraries.LIBRARIES if lib.installed() and lib.collectives is not None]


def variants(lib: mpi_libraries.MpiLibrary) -> list[Variant]:
    """The default, then one variant per row of FORCED: for each operation the library's algorithm
    of that name (its own name or the model's), with the model's name for it in `models`."""
    choice = lib.collectives
    out = [Variant(DEFAULT, {}, {})]
    for k in range(len(FORCED["allreduce"])):
        algs = {op: choice.algorithm(op, FORCED[op][k]) for op in OPS}
        out.append(Variant(str(k + 1), {op: a.model for op, a in algs.items()}, {op: a.number for op, a in algs.items()}))
    return out


def forced_models(lib: mpi_libraries.MpiLibrary) -> dict[str, list[str]]:
    """{op: the model's names of the library's forced algorithms}: FORCED, but in the library's own
    words where its algorithm differs (Open MPI's binomial tree sends to the nearest child first)."""
    vs = variants(lib)[1:]
    return {op: [v.models[op] for v in vs] for op in OPS}


def _mpi_t_text(lib: mpi_libraries.MpiLibrary, v: Variant) -> str:
    """The kernel's --variant for v: every operation's control variable, and a node-aware
    component switched off where MPI_T may do it (else it, not the forced algorithm, would serve)."""
    if v.name == DEFAULT:
        return "default"
    choice = lib.collectives
    writes = [f"{choice.control(op)}={n}" for op, n in v.numbers.items()]
    if choice.hierarchical is not None and choice.hierarchical[3]:
        writes.append(f"{choice.hierarchical[0]}={choice.hierarchical[2]}")
    return ",".join(writes)


def _environment(lib: mpi_libraries.MpiLibrary, v: Variant | None) -> dict[str, str]:
    """The job's environment: what keeps ranks sharing a core from spinning, the gate of forced
    choices, and (v given) every operation forced to v's algorithm through the environment."""
    choice = lib.collectives
    env = {**dict(choice.oversubscribed_env), **dict(choice.gate)}
    if v is not None and v.name != DEFAULT:
        for op, n in v.numbers.items():
            env.update(choice.forced(op, n))
    return env


def _fields(env: dict[str, str]) -> dict:
    # a spec takes Open MPI's variables as mca: (its checks name them), the rest as env:
    return {"mca": {k.removeprefix("OMPI_MCA_"): v for k, v in env.items() if k.startswith("OMPI_MCA_")},
            "env": {k: v for k, v in env.items() if not k.startswith("OMPI_MCA_")}}


def forcing_table() -> pd.DataFrame:
    """How each installed library is told which algorithm to run, from its record: the variable
    (for Allreduce; the other operations alike), what else must be set, whether MPI_T may switch it
    while the job runs, and how a run says which one ran."""
    rows = []
    for lib in libraries():
        c = lib.collectives
        rows.append({"library": lib.name, "forcing variable": c.variable("allreduce"),
                     "also needs": ", ".join(f"{k}={v}" for k, v in c.gate) or "-",
                     "switched by MPI_T in a job": "yes" if c.runtime else "no",
                     "algorithms (Allreduce)": len([a for a in c.algorithms["allreduce"] if a.number != c.default]),
                     "how a run says which ran": "MPI_T, read back by the kernel" if c.cvar else
                     "its debug output (I_MPI_DEBUG) names the variable it took"})
    return pd.DataFrame(rows).set_index("library")


def collective_specs(sizes=SIZES, rounds: int = ROUNDS, unpaired_rounds: int = UNPAIRED_ROUNDS,
                     reps: int = 3, experiment: str = EXPERIMENT) -> list:
    """The collectives kernel's specs on the virtual nodes, for every library of libraries(): one
    job with every variant switched through MPI_T, `rounds` rounds, where the library allows it;
    else one job per variant with `unpaired_rounds` rounds. Each runs every size (bytes) of every
    operation, `reps` timed calls (one warm-up) per size, in both ORDERS."""
    out = []
    # no ntasks_per_node: with --overcommit on one-CPU nodes Slurm refuses --ntasks-per-node=2
    # ("Requested node configuration is not available") and spreads 4 tasks 2 a node by itself
    common = dict(kernel="collectives", nodes=NODES, ntasks=RANKS, oversubscribe=True,
                  experiment=experiment, time="00:05:00")
    args = {"ops": ",".join(OPS), "sizes": ",".join(str(int(s)) for s in sizes), "reps": reps, "warmup": 1,
            "order": ",".join(ORDERS)}
    for lib in libraries():
        mpi = None if lib.name == mpi_libraries.SYSTEM else lib.name
        if lib.collectives.runtime:
            texts = [_mpi_t_text(lib, v) for v in variants(lib)]
            out.append(spec.make_spec(mpi=mpi, label=lib.name, args={**args, "variant": texts, "rounds": rounds},
                                      **_fields(_environment(lib, None)), **common))
        else:
            for v in variants(lib):
                out.append(spec.make_spec(mpi=mpi, label=f"{lib.name}: {v.name}", args={**args, "rounds": unpaired_rounds},
                                          **_fields(_environment(lib, v)), **common))
    return out


PINGPONG_LABELS = {"inter": "between nodes (one rank a node)", "intra": "inside a node (two ranks, one core)"}
INTER = "inter"


def intra_label(library: str) -> str:
    return f"intra: {library}"


def pingpong_specs(max_bytes: int = 4 << 20, intra_max_bytes: int = 1 << 20, intra_reps: int = 20,
                   experiment: str = EXPERIMENT) -> list:
    """The model's paths, measured with ping-pongs on the same nodes: between the nodes (one rank
    each, the system Open MPI: every library crosses the link by TCP), and inside one node, two
    ranks sharing its core as the collectives' ranks do, under each library of libraries() (how
    a library waits on a shared core differs by orders of magnitude), `intra_reps` round trips
    per size."""
    out = [spec.make_spec(kernel="pingpong", nodes=2, ntasks=2, ntasks_per_node=1, args={"max_bytes": max_bytes},
                          label=INTER, experiment=experiment)]
    for lib in libraries():
        out.append(spec.make_spec(kernel="pingpong", nodes=1, ntasks=2, oversubscribe=True, label=intra_label(lib.name),
                                  mpi=None if lib.name == mpi_libraries.SYSTEM else lib.name,
                                  args={"max_bytes": intra_max_bytes, "reps": intra_reps}, experiment=experiment,
                                  **_fields(dict(lib.collectives.oversubscribed_env))))
    return out


# --- what the runs measured ----------------------------------------------------------------------

def _library_of(run) -> mpi_libraries.MpiLibrary:
    return mpi_libraries.get(run.spec.mpi or mpi_libraries.SYSTEM)


def _output(run) -> str:
    return "".join(f.read_text(errors="replace") for f in (run.folder.stdout, run.folder.stderr) if f.exists())


def measured(runs) -> tuple[pd.DataFrame, pd.DataFrame]:
    """From the completed collectives runs: (the timings, what each library said it ran).

    Timings: library, variant (DEFAULT or '1'..'3'), algorithm (the model's name of the forced
    algorithm, DEFAULT for the library's own choice), paired (the library's variants ran round by
    round in one job), op, order, bytes, round, t_max_usec (the slowest rank's mean time per
    call, IMB's headline), run_id. Said: library, variant, op, forced (the model's name), said
    (the library's name for what it says ran, or '(did not say)'), as forced (True/False), source."""
    times, said = [], []
    for r in runs:
        lib = _library_of(r)
        table = r.table()
        doc = r.result()
        output = _output(r)
        all_variants = variants(lib)
        if lib.collectives.runtime:
            by_index = {k: v for k, v in enumerate(all_variants)}
        else:
            name = r.spec.label.split(": ", 1)[1]
            by_index = {0: next(v for v in all_variants if v.name == name)}
        for k, v in by_index.items():
            rows = table[table["variant"] == k]
            times.append(pd.DataFrame({
                "library": lib.name, "variant": v.name, "paired": lib.collectives.runtime,
                "algorithm": [v.models.get(op, DEFAULT) for op in rows["op"]], "op": rows["op"].to_numpy(),
                "order": rows["order"].to_numpy(), "bytes": rows["bytes"].to_numpy(),
                "round": rows["round"].to_numpy(),
                "t_max_usec": rows["t_max_usec"].to_numpy(), "run_id": r.run_id}))
            for op in [o for o in OPS if o in set(rows["op"])]:   # the operations the run measured
                got = mpi_libraries.collective_said(lib.name, op, kernel.variants(doc)[k]["said"].get(op, {}),
                                                    kernel.gate(doc), output)
                said.append({"library": lib.name, "variant": v.name, "op": op, "forced": v.models.get(op, DEFAULT),
                             "said": got["algorithm"] or "(did not say)", "as forced": got["forced"],
                             "source": got["source"]})
    if not times:
        raise HpclabError("no collectives run completed", "read the runs' stderr (run.folder.tail())")
    return pd.concat(times, ignore_index=True), pd.DataFrame(said)


def said_table(said: pd.DataFrame) -> pd.DataFrame:
    """What each library said it ran, one row per (library, variant), one column per operation:
    the library's name for it, '(forced)' where it said the choice was forced, '(own choice)' for
    the default's value that leaves the choice to the library (Open MPI's 'ignore', MPICH's 'auto')."""
    cells = said.assign(text=[f"{s} (forced)" if f else (f"{s} (own choice)" if v == DEFAULT and s != "(did not say)" else s)
                              for s, f, v in zip(said["said"], said["as forced"], said["variant"])])
    table = cells.pivot_table(index=["library", "variant"], columns="op", values="text", aggfunc="first", sort=False)
    return table[[op for op in OPS if op in table.columns]]   # the operations the runs measured


def unforced(said: pd.DataFrame) -> list[str]:
    """'library variant op' for every forced variant its run did not report as forced (it ran
    something else, or could not say): such cells are left out of the comparison."""
    bad = said[(said["variant"] != DEFAULT) & ~said["as forced"]]
    return [f"{a} variant {b} {c}" for a, b, c in zip(bad["library"], bad["variant"], bad["op"])]


# --- the model's two paths --------------------------------------------------------------------------

@dataclass(frozen=True)
class Paths:
    """One library's model network, fitted from the ping-pongs: `network` (hpclab.analysis.collectives),
    and the fits behind it with the measured small-message times that stand for alpha (an intra
    fit of None: no line fits its times, and beta inside a node is taken as 0)."""

    network: model.Network
    inter_fit: fits.HockneyFit
    intra_fit: fits.HockneyFit | None
    inter_alpha_us: float
    intra_alpha_us: float
    small_bytes: int
    intra_problem: str = ""
    algorithms: dict | None = None    # {op: model names}: the library's forced ones (default FORCED)


def _small(table: pd.DataFrame, small_bytes: int, what: str) -> float:
    small = table.loc[table["bytes"] == small_bytes, "t_usec"]
    if small.empty:
        raise HpclabError(f"the {what} ping-pong has no {small_bytes}-byte message", "run it from 0 bytes up")
    return float(small.median())


def fitted_paths(pingpong_runs, small_bytes: int = 8) -> dict[str, Paths]:
    """{library: Paths} from pingpong_specs' runs. alpha: the one-way time of a `small_bytes`
    message; beta: 1/BW of a Hockney fit from the link's bucket-free size up between nodes
    (transports.bucket_free_size) and from 64 KiB up inside a node (hpclab.analysis.fits.hockney_fit,
    L >= 0)."""
    tables = {r.spec.label: r.table() for r in pingpong_runs}
    if INTER not in tables:
        raise HpclabError("the model needs the ping-pong between the nodes", "run pingpong_specs() on the virtual nodes")
    t = tables[INTER]
    inter_fit = fits.hockney_fit(t["bytes"], t["t_usec"], size_range=(transports.bucket_free_size(LINK), t["bytes"].max()))
    inter = model.Hockney.from_fit(inter_fit, _small(t, small_bytes, INTER))
    out = {}
    for lib in libraries():
        t = tables.get(intra_label(lib.name))
        if t is None:
            continue
        alpha = _small(t, small_bytes, intra_label(lib.name))
        try:
            fit, problem = fits.hockney_fit(t["bytes"], t["t_usec"], size_range=(64 << 10, t["bytes"].max())), ""
            intra = model.Hockney.from_fit(fit, alpha)
        except HpclabError as e:   # a shared core's scheduling can hide the bytes' cost entirely
            fit, problem, intra = None, e.what, model.Hockney(alpha, 0.0)
        out[lib.name] = Paths(model.Network(inter, intra), inter_fit, fit, inter.alpha_us, alpha, small_bytes, problem,
                              forced_models(lib))
    return out


def paths_table(paths: dict[str, Paths]) -> pd.DataFrame:
    """The model's paths as a small table: alpha (us), BW (MB/s) and the sizes fitted; the link
    once, then each library's path inside a node."""
    first = next(iter(paths.values()))
    size = f"alpha = t({first.small_bytes} B) [us]"

    def row(name, fit, alpha, problem=""):
        return {"path": name, size: round(alpha, 1), "BW [MB/s]": round(fit.bandwidth_mb_s) if fit else "-",
                "fitted over": f"{transports._size(fit.size_range[0])} .. {transports._size(fit.size_range[1])}"
                if fit else f"no line fits: {problem}"}

    rows = [row(f"{PINGPONG_LABELS['inter']}, {mpi_libraries.SYSTEM}", first.inter_fit, first.inter_alpha_us)]
    rows += [row(f"{PINGPONG_LABELS['intra']}, {lib}", p.intra_fit, p.intra_alpha_us, p.intra_problem)
             for lib, p in paths.items()]
    return pd.DataFrame(rows).set_index("path")


def predictions(paths: Paths, sizes) -> pd.DataFrame:
    """Each forced algorithm's predicted time per operation, placement and size (model.predict)."""
    return model.predict(paths.network, RANKS, NODES, sizes, _algorithms(paths), ORDERS)


def _algorithms(paths: Paths) -> dict[str, list[str]]:
    return paths.algorithms or {op: list(FORCED[op]) for op in OPS}


# --- measured against predicted --------------------------------------------------------------------

def versus(times: pd.DataFrame, paths, skip: list[str] = ()) -> pd.DataFrame:
    """Per library, operation, placement and size: the forced algorithm the statistics decide
    fastest (model.measured_winners: paired where the library's variants ran round by round) and
    the model's winner (model.winners over predictions on the library's own Paths; paths: one
    Paths for all, or {library: Paths}) beside it (model.against_model), with the library column
    first. skip: unforced()'s list; those variants' cells are left out."""
    forced = times[times["algorithm"] != DEFAULT]
    if skip:
        key = forced["library"] + " variant " + forced["variant"] + " " + forced["op"]
        forced = forced[~key.isin(set(skip))]
    sizes = sorted(forced["bytes"].unique())
    parts = []
    for lib, rows in forced.groupby("library", sort=False):
        mine = paths[lib] if isinstance(paths, dict) else paths
        found = model.measured_winners(rows, paired=bool(rows["paired"].iloc[0]))
        parts.append(model.against_model(found, model.winners(predictions(mine, sizes))).assign(library=lib))
    out = pd.concat(parts, ignore_index=True)
    return out[["library", *[c for c in out.columns if c != "library"]]]


def versus_table(table: pd.DataFrame) -> pd.DataFrame:
    """versus() for people: one row per (op, order, size); per library the measured winner
    (with '?' when the statistics cannot decide it, '=' joining a tie), then the model's."""
    def cell(row):
        if row["outcome"] == "decided":
            return _short(row["measured"])
        if row["outcome"] == "tie":
            return " = ".join(_short(a) for a in [row["measured"], *row["tied"].split(", ")])
        return f"{_short(row['measured'])}?"

    shown = table.assign(size=[transports._size(int(b)) for b in table["bytes"]], text=table.apply(cell, axis=1))
    wide = shown.pivot_table(index=["op", "order", "bytes", "size"], columns="library", values="text", aggfunc="first",
                             sort=False)
    model_col = shown.groupby(["op", "order", "bytes", "size"], sort=False)["predicted"].first().map(_short)
    wide["model"] = model_col
    wide = wide.reset_index().sort_values(["op", "order", "bytes"], key=lambda c: c.map(_op_rank) if c.name == "op" else c)
    return wide.drop(columns="bytes").set_index(["op", "order", "size"])


SHORT = {"recursive_doubling": "rec. doubling", "rabenseifner": "Rabenseifner", "ring": "ring",
         "binomial": "binomial", "binomial_near_first": "binomial (near first)", "scatter_allgather": "scatter+rd", "scatter_ring_allgather": "scatter+ring",
         "pairwise": "pairwise", "bruck": "Bruck", "linear_alltoall": "linear",
         "hierarchical": "node-aware", "hierarchical_rabenseifner": "node-aware (Rabenseifner)"}


def _short(name) -> str:
    return SHORT.get(name, str(name))


def _bytes(n: float) -> str:
    """A size that need not be a power of two, in words: '8.8 KiB', '290 KiB', '600 B'."""
    for unit, scale in (("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= scale:
            return f"{phrases._num(n / scale, 2)} {unit}"
    return f"{phrases._num(n, 2)} B"


def _op_rank(op: str) -> int:
    return list(OPS).index(op) if op in OPS else len(OPS)


def times_takeaway(table: pd.DataFrame, paths: Paths, library: str, order: str = "block") -> str:
    """The first figure's takeaway, from versus()'s rows for one library and placement: per
    operation, the decided winner at the smallest and the largest size, and where the model puts
    the change of winner."""
    rows = table[(table["library"] == library) & (table["order"] == order)]
    parts = []
    for op in OPS:
        mine = rows[rows["op"] == op].sort_values("bytes")
        decided = mine[mine["outcome"] == "decided"]
        if decided.empty:
            parts.append(f"MPI_{op.capitalize()}: no size decided")
            continue
        lo, hi = decided.iloc[0], decided.iloc[-1]
        said = (f"{_short(lo['measured'])} at {transports._size(int(lo['bytes']))}" if lo["bytes"] == hi["bytes"] else
                f"{_short(lo['measured'])} at {transports._size(int(lo['bytes']))}, "
                f"{_short(hi['measured'])} at {transports._size(int(hi['bytes']))}")
        changes = model.winner_changes(paths.network, RANKS, NODES, op, _algorithms(paths)[op], order, 8,
                                       float(mine["bytes"].max()))
        where = "; the model: " + (", ".join(f"{_short(b)} from {_bytes(at)}" for _, b, at in changes)
                                   if changes else f"{_short(model.winners(predictions(paths, [8])).query('op == @op and order == @order')['algorithm'].iloc[0])} throughout")
        parts.append(f"MPI_{op.capitalize()}: {said} measured fastest{where}")
    return f"{library}, {order} numbering. " + ". ".join(parts) + "."


def agreement_text(table: pd.DataFrame, goal: float = 0.8) -> str:
    """How often the model named the measured winner, built from versus()'s rows: among the
    cells the statistics decide, in all, per library, against the issue's goal."""
    a = model.agreement(table)
    if not a.counted:
        return (f"The statistics decided no winner in any of the {a.cells} cells, so the runs cannot "
                "say whether the model picks it.")
    per = "; ".join(f"{lib} {x.right} of {x.counted}" for lib, rows in table.groupby("library", sort=False)
                    if (x := model.agreement(rows)).counted)
    met = "meets" if a.fraction >= goal else "misses"
    return (f"The model named the measured winner in {a.right} of the {a.counted} cells the statistics decide "
            f"({phrases.pct(a.fraction)}; {per}); {a.cells - a.counted} of {a.cells} cells could not be decided. "
            f"That {met} the goal of {phrases.pct(goal)}.")


def misses(table: pd.DataFrame) -> pd.DataFrame:
    """The decided cells where the model named another algorithm: library, op, order, size,
    measured, predicted and the measured ratio of the runner-up (closest) to the winner."""
    wrong = table[table["counted"] & ~table["agree"]]
    return pd.DataFrame({"library": wrong["library"], "op": wrong["op"], "order": wrong["order"],
                         "size": [transports._size(int(b)) for b in wrong["bytes"]],
                         "measured": wrong["measured"].map(_short), "model": wrong["predicted"].map(_short),
                         "closest rival / winner": wrong["ratio"].round(2)}).reset_index(drop=True)


def crossovers(paths: Paths, lo: float = 8, hi: float = float(4 << 20)) -> pd.DataFrame:
    """Where the model's winner changes between lo and hi bytes, per operation and placement:
    op, order, below, above, at (the size, bytes and in words)."""
    rows = []
    for op in OPS:
        for order in ORDERS:
            for below, above, at in model.winner_changes(paths.network, RANKS, NODES, op, _algorithms(paths)[op], order,
                                                         lo, hi):
                rows.append({"op": op, "order": order, "below": _short(below), "above": _short(above),
                             "at": _bytes(at)})
    return pd.DataFrame(rows, columns=["op", "order", "below", "above", "at"])


# --- the library's default against the best forced algorithm -------------------------------------

def default_decisions(times: pd.DataFrame) -> pd.DataFrame:
    """Per library, operation, placement and size: the library's default against the fastest
    forced algorithm (by median), decided by the statistics (paired where the variants ran round
    by round). Returns library, op, order, bytes, best, outcome, said (phrases.said: '1.6x slower',
    'no difference > 5 %', ...)."""
    rows = []
    for (lib, op, order, n), cell in times.groupby(["library", "op", "order", "bytes"], sort=False):
        own = cell[cell["algorithm"] == DEFAULT].sort_values("round")
        forced = cell[cell["algorithm"] != DEFAULT]
        if own.empty or forced.empty:
            continue
        best = forced.groupby("algorithm")["t_max_usec"].median().idxmin()
        theirs = forced[forced["algorithm"] == best].sort_values("round")
        paired = bool(cell["paired"].iloc[0])
        if paired:
            common = sorted(set(own["round"]) & set(theirs["round"]))
            own, theirs = own[own["round"].isin(common)], theirs[theirs["round"].isin(common)]
        c = phrases.compare(own["t_max_usec"].to_numpy(), theirs["t_max_usec"].to_numpy(), a_name="default",
                            b_name=_short(best), unit="us", paired=paired)
        rows.append({"library": lib, "op": op, "order": order, "bytes": int(n), "best": _short(best),
                     "outcome": c.outcome, "said": phrases.said(c)})
    return pd.DataFrame(rows)


def default_text(decisions: pd.DataFrame) -> str:
    """One sentence per library from default_decisions: in how many cells its default was decided
    slower than its fastest forced algorithm, and by how much at most."""
    out = []
    for lib, rows in decisions.groupby("library", sort=False):
        slower = rows[(rows["outcome"] == "different") & rows["said"].str.endswith("slower")]
        faster = rows[(rows["outcome"] == "different") & rows["said"].str.endswith("faster")]
        same = rows[rows["outcome"] == "equivalent"]
        worst = ""
        if len(slower):
            k = max(slower.itertuples(), key=lambda r: _factor(r.said))
            worst = f" (at most {k.said}, {k.op} {transports._size(k.bytes)} {k.order}, against {k.best})"
        out.append(f"{lib}: its default was decided slower than the fastest forced algorithm in {len(slower)} "
                   f"of {len(rows)} cells{worst}, faster in {len(faster)}, within 5 % in {len(same)}; "
                   f"the rest undecided.")
    return "\n".join(out)


def _factor(said: str) -> float:
    word = said.split()[0]
    if word.endswith("x"):
        return float(word[:-1])
    return 1 + float(word) / 100 if said.split()[1] == "%" else 1.0


# --- the placement ---------------------------------------------------------------------------------

def placement_decisions(times: pd.DataFrame, nbytes: int) -> pd.DataFrame:
    """Cyclic against block numbering for each forced algorithm at `nbytes`, per library and
    operation (paired where the variants ran round by round: both orders run in every round),
    beside the model's ratio. Returns library, op, algorithm, outcome, said, measured ratio, model ratio."""
    rows = []
    cells = times[(times["bytes"] == nbytes) & (times["algorithm"] != DEFAULT)]
    for (lib, op, alg), g in cells.groupby(["library", "op", "algorithm"], sort=False):
        cyc = g[g["order"] == "cyclic"].sort_values("round")
        blk = g[g["order"] == "block"].sort_values("round")
        c = phrases.compare(cyc["t_max_usec"].to_numpy(), blk["t_max_usec"].to_numpy(), a_name="cyclic",
                            b_name="block", unit="us", paired=bool(g["paired"].iloc[0]))
        rows.append({"library": lib, "op": op, "algorithm": alg, "outcome": c.outcome, "cyclic vs block": phrases.said(c),
                     "ratio": float(f"{c._estimate():.3g}")})
    out = pd.DataFrame(rows)
    out.attrs["provenance"] = [{"run_id": r} for r in pd.unique(cells["run_id"])]
    return out


def model_placement_ratio(paths: Paths, nbytes: int) -> dict[tuple[str, str], float]:
    """{(op, algorithm): predicted cyclic time / block time} at nbytes, for every algorithm the
    model prices but the node-aware ones (any library's forced algorithm is among them)."""
    algs = {op: [a for a in model.ALGORITHMS[op] if a not in model.SCHEDULE_ONLY] for op in OPS}
    pred = model.predict(paths.network, RANKS, NODES, [nbytes], algs, ORDERS).set_index(["op", "algorithm", "order"])
    t = pred["t_pred_usec"]
    return {(op, alg): float(t[(op, alg, "cyclic")] / t[(op, alg, "block")]) for op in OPS for alg in algs[op]}


def placement_text(decisions: pd.DataFrame, paths: Paths, nbytes: int) -> str:
    """The placement figure's takeaway: how many (library, algorithm) pairs the statistics decide
    slower, or faster, in the cyclic numbering at nbytes, and for which algorithms the model
    predicts more time, less, or the same (within the margin)."""
    shown = set(zip(decisions["op"], decisions["algorithm"]))
    ratios = {k: r for k, r in model_placement_ratio(paths, nbytes).items() if k in shown}
    more = sorted({_short(a) for (op, a), r in ratios.items() if r > 1 + stats.MARGIN})
    less = sorted({_short(a) for (op, a), r in ratios.items() if r < 1 / (1 + stats.MARGIN)})
    same = sorted({_short(a) for (op, a), r in ratios.items() if 1 / (1 + stats.MARGIN) <= r <= 1 + stats.MARGIN})
    decided = decisions[decisions["outcome"] == "different"]
    slower = decided["cyclic vs block"].str.endswith("slower").sum()
    faster = decided["cyclic vs block"].str.endswith("faster").sum()
    groups = [f"more for {', '.join(more)} (more of their bytes cross the link)" if more else "",
              f"less for {', '.join(less)}" if less else "", f"the same for {', '.join(same)}" if same else ""]
    return (f"At {transports._size(nbytes)}, the cyclic numbering was decided slower than the block one in {slower} "
            f"of {len(decisions)} (library, operation, algorithm) cases and faster in {faster}. The model predicts "
            f"cyclic costs {'; '.join(g for g in groups if g)}.")


def cannot_show() -> str:
    """What this machine cannot show, said once, with the run's own numbers: four ranks on two
    one-core nodes."""
    return (f"This machine runs {RANKS} ranks on {NODES} one-core nodes: the two ranks of a node share "
            f"its core, so a message inside a node waits for the other rank to be scheduled, and "
            f"with {RANKS} ranks the algorithms differ by at most {int(math.log2(RANKS))} steps. Where the "
            "default switches at hundreds of ranks needs a larger machine (or a simulation).")


# --- at the seed's scale: 384 ranks, the library's own tables over the model (a prediction) -------

SCALE_NODES = seedfacts.POISSON_2014["nodes"]                  # 16 nodes of 24 cores: the 2014
SCALE_PER_NODE = seedfacts.POISSON_2014["cores_per_node"]      # talk's Poisson runs (seed 001)
SCALE_SIZES = (8, 64, 1024, 16384, 262144, 1 << 20)
# what the model prices at that scale, per operation: the flat algorithms and the node-aware ones
SCALE_ALGORITHMS = {"allreduce": ("recursive_doubling", "ring", "rabenseifner", "hierarchical",
                                  "hierarchical_rabenseifner"),
                    "bcast": ("binomial", "scatter_ring_allgather", "hierarchical"),
                    "alltoall": ("pairwise", "bruck", "linear_alltoall")}
SEED_LINK = ("40G InfiniBand (Mellanox)", "pml/ucx")            # 40 Gb/s, the QDR rate of the 2014 cluster


def seed_network(intra: model.Hockney | None = None) -> model.Network:
    """The link between the nodes from the 2019 talk's IMB PingPong on 40G InfiniBand (the 2014
    cluster's QDR rate): alpha its 0-byte time, beta the slope between its 2 MiB and 4 MiB rows;
    inside a node `intra` (the learner's own shared-memory path, from fitted_paths), or the same
    link where None. Quoted numbers: what it predicts is a prediction."""
    rows = seedfacts.pingpong_2019()
    rows = rows[(rows["network"] == SEED_LINK[0]) & (rows["component"] == SEED_LINK[1])].set_index("bytes")["t_usec"]
    beta = (rows[4194304] - rows[2097152]) / 2097152
    return model.Network(model.Hockney(float(rows[0]), float(beta)), intra)


def _model_of(lib: mpi_libraries.MpiLibrary, op: str, choice: coll_selection.Choice) -> str | None:
    """The model's name for what the library picked (None: the course has no model of it)."""
    if choice.node_aware:
        between = {"recursive_doubling": "hierarchical", "reduce_scatter_allgather": "hierarchical_rabenseifner",
                   "binomial": "hierarchical"}
        return between.get(choice.algorithm)
    names = {a.name: a.model for a in lib.collectives.algorithms.get(op, ())} if lib.collectives else {}
    return names.get(choice.algorithm)


def _picked_words(choice: coll_selection.Choice) -> str:
    if choice.node_aware:
        return f"{choice.algorithm} (node-aware: {choice.ranks} leaders)"
    return f"{choice.algorithm} (flat: {choice.ranks} ranks)"


def at_scale(lib: mpi_libraries.MpiLibrary, network: model.Network, sizes=SCALE_SIZES,
             nodes: int = SCALE_NODES, per_node: int = SCALE_PER_NODE) -> pd.DataFrame:
    """The model's time for each algorithm it prices (SCALE_ALGORITHMS) per operation and size at
    nodes x per_node ranks (block numbering), and which of them the library's own selection trees
    pick (hpclab.site.coll_selection). One row per (op, bytes, algorithm): t_pred_usec, picked
    (bool), `library picks` (the library's own words for its pick, on every row of the cell).
    A prediction: no run at this scale. Raises HpclabError for a library whose tables cannot be read."""
    trees = coll_selection.reader_for(lib)
    if isinstance(trees, str):
        raise HpclabError(trees, "the MPICH libraries' tables can be read: pick one of them")
    p = nodes * per_node
    node_of = model.placement(p, nodes, "block")
    rows = []
    for op in OPS:
        for n in sizes:
            choice = trees.choice(coll_selection.Call(op, p, nodes, int(n)))
            picked = _model_of(lib, op, choice)
            for alg in SCALE_ALGORITHMS[op]:
                t = model.schedule_time(model.schedule(op, alg, p, n, node_of=node_of), network, node_of)
                rows.append({"op": op, "bytes": int(n), "algorithm": alg, "t_pred_usec": t, "picked": alg == picked,
                             "library picks": _picked_words(choice)})
    return pd.DataFrame(rows)


SCALE_WORDS = f"{SCALE_NODES * SCALE_PER_NODE} ranks, {SCALE_NODES} nodes x {SCALE_PER_NODE}"
SEED_SOURCE = "the 2019 talk's 40G InfiniBand ping-pong (seed 000), between and inside nodes"


def scale_library() -> mpi_libraries.MpiLibrary | None:
    """The first installed library whose selection tables can be read (an MPICH), or None."""
    return next((lib for lib in libraries() if not isinstance(coll_selection.reader_for(lib), str)), None)


def unreadable_text() -> str:
    """Which installed libraries' decisions cannot be drawn, each with why (their own words)."""
    said = [coll_selection.reader_for(lib) for lib in libraries()]
    return "\n".join(s for s in said if isinstance(s, str))


def switch_text(lib: mpi_libraries.MpiLibrary) -> str:
    """Where the library's own tables change their pick at the seed's scale, one line per operation."""
    lines = []
    for op in OPS:
        changes = switch_points(lib, op)
        said = "; ".join(f"{below} up to {last:,} B, then {above} from {first:,} B"
                         for below, above, last, first in changes) or "one pick at every size"
        lines.append(f"MPI_{op.capitalize()} at {SCALE_WORDS}: {said}.")
    return "\n".join(lines)


def scale_summary(table: pd.DataFrame) -> pd.DataFrame:
    """Per (op, bytes) of at_scale's table: the library's pick and its time, the model's best and
    its time, and the pick's time over the best's (NaN where the pick is not priced)."""
    rows = []
    for (op, n), cell in table.groupby(["op", "bytes"], sort=False):
        best = cell.loc[cell["t_pred_usec"].idxmin()]
        pick = cell[cell["picked"]]
        t_pick = float(pick["t_pred_usec"].iloc[0]) if len(pick) else math.nan
        rows.append({"op": op, "bytes": int(n), "library picks": cell["library picks"].iloc[0],
                     "model name": pick["algorithm"].iloc[0] if len(pick) else None, "t_pick_usec": t_pick,
                     "best": best["algorithm"], "t_best_usec": float(best["t_pred_usec"]),
                     "pick / best": t_pick / best["t_pred_usec"] if best["t_pred_usec"] > 0 else math.nan})
    return pd.DataFrame(rows)


def switch_points(lib: mpi_libraries.MpiLibrary, op: str, nodes: int = SCALE_NODES, per_node: int = SCALE_PER_NODE,
                  hi: int = 4 << 20) -> list[tuple[str, str, int, int]]:
    """Where the library's own trees change their pick for `op` between 8 bytes and `hi`: [(pick
    below, pick above, the last size of the first, the first size of the second)]. The sizes
    tried are the powers of two and every limit written in the trees (and one element past it)."""
    trees = coll_selection.reader_for(lib)
    if isinstance(trees, str):
        raise HpclabError(trees, "the MPICH libraries' tables can be read: pick one of them")
    p = nodes * per_node
    limits = {int(x) for x in coll_selection.limits(trees, op)}
    # count<pow2 (an Allreduce between the node leaders) switches at 8-byte elements x pof2(nodes)
    switch_at = {x + d for x in limits for d in (-8, 0, 8)} | {8 * coll_selection.pof2(nodes) + d for d in (-8, 0)}
    sizes = sorted({8 << k for k in range(int(math.log2(hi // 8)) + 1)} | {x for x in switch_at if 8 <= x <= hi})
    out, prev, last = [], None, None
    for n in sizes:
        now = _picked_words(trees.choice(coll_selection.Call(op, p, nodes, n)))
        if prev is not None and now != prev:
            out.append((prev, now, last, n))
        prev, last = now, n
    return out


def scale_table(summary: pd.DataFrame) -> pd.DataFrame:
    """scale_summary's table for reading: sizes in words, times in microseconds, the cost as a factor."""
    table = summary
    out = table.assign(size=table["bytes"].map(_bytes), pick_us=table["t_pick_usec"].round(1),
                       best_us=table["t_best_usec"].round(1), best_name=table["best"].map(_short),
                       cost=table["pick / best"].map(lambda r: "-" if math.isnan(r) else f"{r:.2f}x"))
    return out[["op", "size", "library picks", "pick_us", "best_name", "best_us", "cost"]].rename(
        columns={"pick_us": "its pick [us]", "best_name": "model's best", "best_us": "best [us]",
                 "cost": "pick / best"}).set_index(["op", "size"])


def scale_takeaway(table: pd.DataFrame, library: str, nodes: int = SCALE_NODES, per_node: int = SCALE_PER_NODE) -> str:
    """One sentence from scale_summary's table: in how many cells the library's pick is within 10 %
    of the model's best, and the costliest pick, labelled a prediction."""
    priced = table.dropna(subset=["pick / best"])
    close = priced[priced["pick / best"] <= 1.10]
    text = (f"Predicted, not measured: at {nodes * per_node} ranks ({nodes} nodes x {per_node}), {library}'s own "
            f"tables pick an algorithm the model prices within 10 % of its best in {len(close)} of {len(priced)} "
            f"cells")
    if len(close) < len(priced):
        worst = priced.loc[priced["pick / best"].idxmax()]
        text += (f"; the costliest pick is {worst['op']} at {_bytes(worst['bytes'])}: "
                 f"{_short(worst['model name'])} takes {worst['pick / best']:.1f}x the time of {_short(worst['best'])}")
    unpriced = len(table) - len(priced)
    return text + (f" ({unpriced} cells pick an algorithm the model does not price)." if unpriced else ".")


# --- the lab (labs/lab-collectives) ----------------------------------------------------------------

# The student's application reduces one vector of LAB_BYTES on the lesson's four ranks (block
# numbering): the system library's Allreduce, its default and the three forced algorithms round by
# round in one job, and the ping-pong between the nodes for the textbook model. 256 KiB: the model
# on this link puts the winner's change below it (crossovers()), so the bandwidth terms decide.
LAB = "lab-collectives"
LAB_OP = "allreduce"
LAB_ORDER = "block"
LAB_BYTES = 256 << 10
LAB_ROLES = ("collectives", INTER)
SMALL_BYTES = 8                         # alpha: the one-way time of this message between the nodes
LAB_FIT_FROM = transports.bucket_free_size(LINK)   # beta: the link's fit starts here, as in 02b
MODEL_TIE = 0.05                        # predicted times this close (5 %) are the model's tie
# A round of the four settings at one size takes milliseconds, the job's start seconds: rounds are
# nearly free, and four ranks sharing two cores vary by tens of percent from call to call.
LAB_ROUNDS = 30
TERM_TIE = 1.25                         # an alpha or beta part this many times the other dominates


def lab_specs(nbytes: int = LAB_BYTES, rounds: int = LAB_ROUNDS, experiment: str = LAB) -> list:
    """The lab's two jobs on the virtual nodes: the system library's Allreduce of `nbytes` per rank
    (default and forced, `rounds` paired rounds, block order), and the ping-pong between the nodes."""
    if nbytes < 8 or nbytes > 4 << 20:
        raise HpclabError(f"the lab's message size must be 8 B to 4 MiB, not {nbytes}",
                          "set MESSAGE_BYTES to a size in that range and measure again")
    lib = mpi_libraries.get(mpi_libraries.SYSTEM)
    args = {"ops": LAB_OP, "sizes": str(int(nbytes)), "reps": 3, "warmup": 1, "order": LAB_ORDER,
            "variant": [_mpi_t_text(lib, v) for v in variants(lib)], "rounds": rounds}
    coll = spec.make_spec(kernel="collectives", nodes=NODES, ntasks=RANKS, oversubscribe=True, experiment=experiment,
                          time="00:05:00", label=LAB_ROLES[0], args=args, **_fields(_environment(lib, None)))
    ping = spec.make_spec(kernel="pingpong", nodes=2, ntasks=2, ntasks_per_node=1, args={"max_bytes": 4 << 20},
                          label=INTER, experiment=experiment)
    return [coll, ping]


def lab_roles(runs) -> dict:
    """{role: run folder} of lab_specs' completed runs, for labdata.pack."""
    return {r.spec.label: r.folder for r in runs}


def link_model(inter: pd.DataFrame) -> tuple[float, float]:
    """(alpha in us, beta in us per byte) of the link from the ping-pong between the nodes: alpha
    the one-way time of SMALL_BYTES, beta 1/BW of the Hockney fit from LAB_FIT_FROM up."""
    fit = fits.hockney_fit(inter["bytes"], inter["t_usec"], size_range=(LAB_FIT_FROM, inter["bytes"].max()))
    return _small(inter, SMALL_BYTES, INTER), 1.0 / fit.bandwidth_mb_s


def _terms(algorithm: str, nbytes: int, alpha: float, beta: float) -> dict[str, float]:
    return {"alpha": model.textbook(LAB_OP, algorithm, RANKS, nbytes, alpha, 0.0),
            "beta": model.textbook(LAB_OP, algorithm, RANKS, nbytes, 0.0, beta)}


def lab_answers(times: pd.DataFrame, inter: pd.DataFrame) -> dict:
    """The lab's expected answers from its runs. times: measured()'s timings of the collectives
    run (one op, order and size; paired rounds); inter: the ping-pong table between the nodes.

    median_us: each algorithm's median of t_max_usec (the default too); fastest: the forced
    algorithms the statistics do not decide slower than the lowest median (paired by round),
    with fastest_sentences, each comparison in words; alpha_us, beta_us_per_byte: link_model;
    predicted_us: the textbook time of each forced algorithm on RANKS ranks (every message
    priced as crossing the link); model_pick: the predicted fastest and every one within
    MODEL_TIE of it; model_agrees: the answers [True/False] that follow from a pick in model_pick;
    dominant_term: 'alpha' or 'beta', the larger part of a picked algorithm's predicted time
    (both when neither is TERM_TIE times the other)."""
    nbytes = int(times["bytes"].iloc[0])
    median_us = {a: float(g["t_max_usec"].median()) for a, g in times.groupby("algorithm", sort=False)}
    forced = {a: g.sort_values("round") for a, g in times[times["algorithm"] != DEFAULT].groupby("algorithm", sort=False)}
    best = min(forced, key=lambda a: median_us[a])
    fastest, sentences = [best], {}
    for other, g in forced.items():
        if other == best:
            continue
        common = sorted(set(g["round"]) & set(forced[best]["round"]))
        c = phrases.compare(g[g["round"].isin(common)]["t_max_usec"].to_numpy(),
                            forced[best][forced[best]["round"].isin(common)]["t_max_usec"].to_numpy(),
                            a_name=_short(other), b_name=_short(best), unit="us", paired=True)
        sentences[other] = c.sentence()
        if not (c.outcome == "different" and c.winner == _short(best)):
            fastest.append(other)
    alpha, beta = link_model(inter)
    predicted = {a: model.textbook(LAB_OP, a, RANKS, nbytes, alpha, beta) for a in forced}
    low = min(predicted.values())
    picks = sorted((a for a, t in predicted.items() if t <= low * (1 + MODEL_TIE)), key=predicted.get)
    dominant = set()
    for a in picks:
        t = _terms(a, nbytes, alpha, beta)
        if t["alpha"] > TERM_TIE * t["beta"]:
            dominant.add("alpha")
        elif t["beta"] > TERM_TIE * t["alpha"]:
            dominant.add("beta")
        else:
            dominant.update(("alpha", "beta"))
    return {"bytes": nbytes, "median_us": median_us, "fastest": fastest, "fastest_sentences": sentences,
            "alpha_us": alpha, "beta_us_per_byte": beta, "predicted_us": predicted, "model_pick": picks,
            "model_agrees": sorted({p in fastest for p in picks}), "dominant_term": sorted(dominant)}


def lab_reference(packed) -> dict:
    """lab_answers from the runs a student packed (hpclab.grading.labdata.Packed, roles LAB_ROLES)."""
    times, _ = measured(packed.runs([LAB_ROLES[0]]))
    return lab_answers(times[(times["op"] == LAB_OP) & (times["order"] == LAB_ORDER)], packed.table(INTER))


LESSON = register(Lesson("collectives", "Collectives: which algorithm a library runs, what forcing another "
                         "costs on a link, and a model that predicts the winner", ("02b-collectives.ipynb",),
                         lab=LAB, reference=lab_reference))
