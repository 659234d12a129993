"""The fidelity table: which claims of the source talks this machine reproduced, with the numbers.

Each row is one claim of a seed talk: what the seed says and shows (quoted, with its citation),
what this machine measured (`here`), the verdict, the kind of evidence it rests on, what a model
predicts (where one was used), one sentence on why, and the run ids. Only the claim and the seed's
figure are typed (they are quotes); everything else is computed by a builder below from the runs a
notebook just made. A notebook records its rows (`record`); `hpclab course run` collects them into
build/course/fidelity.json and a table in the report. A claim no notebook recorded in that run is
listed as `not shown`, saying so, rather than kept from an earlier run.

Evidence kinds: `measured` (the effect is in timed runs of this machine), `replayed` (a measured
trace replayed on a network model), `simulated` (a synthetic trace on a model). Verdicts:
`yes` only for a measured effect beyond the run-to-run spread (at least
hpclab.analysis.phrases.MIN_RUNS repetitions per side and non-overlapping ranges, or a stated
exact test such as counted messages); `predicted` for support from a replay or a simulation
only; `partly`, `no` and `not shown` as they say. `make_row` refuses any other combination, so a
model can never be reported as a reproduction.
"""

from __future__ import annotations

import html
import json
import os
from dataclasses import asdict, dataclass, field
from pathlib import Path

from hpclab.core import paths
from hpclab.core.errors import HpclabError
from hpclab.core.io import write_atomic
from hpclab.kernels import poisson as poisson_report
from hpclab.analysis import phrases, transports
from hpclab.course import lesson_transports
from hpclab.course import lesson_placement, sizing
from hpclab.analysis import placement
from hpclab.analysis import roofline as roof
from hpclab.core import seedfacts

VERDICTS = ("yes", "predicted", "partly", "no", "not shown")
EVIDENCE = ("measured", "replayed", "simulated")
LEDGER_ENV = "HPCLAB_FIDELITY_DIR"  # set by the course run: where notebooks record their rows


@dataclass(frozen=True)
class Claim:
    """A claim of a seed talk and the seed's own figure for it (quoted)."""

    id: str
    claim: str
    seed: str


_GOGLIN = "Goglin 2019 (seed 000)"
_ITAC = "ITAC training 2014 (seed 001)"
_PLACEMENT = "placement study 2018 (seed 002)"

CLAIMS: dict[str, Claim] = {c.id: c for c in [
    Claim("transport-fallback",
          "Excluding the fast transport does not fail: Open MPI silently falls back to a slower one, "
          "and only the bandwidth shows it.",
          f"{_GOGLIN}: 4 MiB PingPong 9546 MB/s on Omni-Path (mtl/psm2), 788 MB/s once PSM/PSM2 are "
          "excluded and TCP over 10G Ethernet carries the messages."),
    Claim("component-selection",
          "MCA parameters choose the PML, MTL and BTL; the run itself can tell which one carried the messages.",
          f"{_GOGLIN}: five selections on two clusters (psm2, psm, tcp, ucx, openib), each confirmed by "
          "a PingPong whose performance 'disappears if disabling X'."),
    Claim("hybrid-pitfall",
          "Several ranks per node whose OpenMP threads are all bound to the same cores lose most of their "
          "performance; binding each rank to its own cores fixes it.",
          f"{_PLACEMENT}: on KNL with Intel OpenMP and the default srun binding, every rank's threads land "
          "on the same hardware threads (a massive load imbalance)."),
    Claim("numa",
          "Memory on a remote NUMA node is slower than local memory.",
          f"{_PLACEMENT}: on Broadwell with two NUMA domains, local memory about 60 % faster than remote."),
    Claim("grid-2d-vs-1d",
          "A 1 x P decomposition of the Poisson grid (long thin strips, short rows) computes slower than a "
          "near-square 2D one, because short rows vectorise badly.",
          f"{_ITAC}: 384 ranks, compute 4.46 s for the 24x16 grid vs 11.45 s for 1x384 (accumulated)."),
    Claim("nonblocking-dependency",
          "A naive blocking halo exchange (send up, then receive) serialises into a chain once messages "
          "exceed the eager limit; a non-blocking exchange removes the dependency wait.",
          f"{_ITAC}: the blocking run's wait time on P6 'has vanished' with the non-blocking exchange."),
    Claim("mapping-messages",
          "Placing blocks of the process grid on a node instead of consecutive ranks cuts the messages "
          "that cross the network.",
          f"{_ITAC}: 24x16 grid, 24 ranks per node: the linear mapping leaves '16 or 17 boundary' lines between a "
          "node and the others; with a 6x4 tile per node 'the number of processor boundary lines between nodes are: 4 "
          "(vertical) and 6 (horizontal)'. (Its '16X and 17X more Inter Node message compared to 1D' compares the 2D "
          "decomposition with the 1D one, not the two mappings.)"),
    Claim("mapping-time",
          "The mapping with fewer inter-node messages makes the run faster.",
          f"{_ITAC}: speedup from 96 to 768 ranks, '2D with optimized mapping shows by far the best results!'"),
    Claim("imbalance-split",
          "Replaying a trace on an ideal network splits run time into compute, transfer, load imbalance "
          "and dependency; for the 2D solver on InfiniBand, compute and transfer dominate.",
          f"{_ITAC}: 24x16 grid, compute 4.46 s, interconnect 3.89 s, load imbalance 0.12 s, dependency "
          "0.59 s (accumulated over ranks)."),
    Claim("roofline",
          "The Poisson solver is memory bound: its update rate is capped by the memory bandwidth divided "
          "by the bytes each update moves.",
          f"{_ITAC}: hotspot and bandwidth analysis of the solver's update loop (VTune), bandwidth close "
          "to the machine's."),
    Claim("hotspots",
          "A profiler points at the few loops where the time goes: the solver's compute loops (residuum, "
          "red and black sweeps) lead the hotspot list, ahead of the MPI library.",
          f"{_ITAC}: rank 0's top five in VTune: residuum 57.9 ms, MPIDI_CH3I_Progress 54.9 ms, red 53.5 ms, "
          "__intel_ssse3_rep_memcpy 47.5 ms, black 46.8 ms."),
]}


@dataclass
class Row:
    """One row of the fidelity table; `here`, `reproduced`, `why` and `runs` come from measurements.

    `evidence` is what the verdict rests on (one of EVIDENCE); `prediction`, when not empty, is
    what a replay or a simulation of this machine's measurements predicts, labelled as such."""

    id: str
    claim: str
    seed: str
    here: str
    reproduced: str
    why: str
    runs: list[str] = field(default_factory=list)
    evidence: str = "measured"
    prediction: str = ""


def make_row(claim_id: str, here: str, reproduced: str, why: str, runs=(), *, evidence: str = "measured",
             beyond_spread: bool = False, prediction: str = "") -> Row:
    """A row for a known claim; the verdict must be one of VERDICTS and `why` one sentence.

    `yes` needs evidence='measured' and beyond_spread=True (the caller's statement that the effect
    is beyond the run-to-run spread, from hpclab.analysis.phrases.Comparison.beyond_spread or an
    exact count); `predicted` needs a model's evidence ('replayed' or 'simulated')."""
    if claim_id not in CLAIMS:
        raise HpclabError(f"unknown fidelity claim {claim_id!r}", f"known claims: {', '.join(CLAIMS)}")
    if reproduced not in VERDICTS:
        raise HpclabError(f"fidelity verdict {reproduced!r} for {claim_id}", f"use one of {', '.join(VERDICTS)}")
    if evidence not in EVIDENCE:
        raise HpclabError(f"fidelity evidence {evidence!r} for {claim_id}", f"use one of {', '.join(EVIDENCE)}")
    if reproduced == "yes" and (evidence != "measured" or not beyond_spread):
        raise HpclabError(f"fidelity row {claim_id}: 'yes' needs a measured effect beyond the run-to-run spread "
                          f"(evidence {evidence!r}, beyond_spread={beyond_spread})",
                          "use 'predicted' for support from a replay or a simulation, 'partly' for a measured "
                          "effect within the noise")
    if reproduced == "predicted" and evidence == "measured":
        raise HpclabError(f"fidelity row {claim_id}: 'predicted' is for a replay or a simulation",
                          "give evidence='replayed' or 'simulated'")
    c = CLAIMS[claim_id]
    return Row(c.id, c.claim, c.seed, here, reproduced, why, sorted({str(r) for r in runs}), evidence, prediction)


def ledger_dir() -> Path:
    """Where rows are recorded: the course run's folder, or build/fidelity for interactive use."""
    return Path(os.environ.get(LEDGER_ENV, paths.build_dir() / "fidelity"))


def record(row: Row) -> Row:
    """Write a notebook's row into the ledger (one file per claim, replaced atomically); returns it."""
    folder = ledger_dir()
    folder.mkdir(parents=True, exist_ok=True)
    write_atomic(folder / f"{row.id}.json", json.dumps(asdict(row), indent=1))
    return row


def collect(folder: Path | None = None) -> list[Row]:
    """Every claim's row, in CLAIMS order: the recorded one, or `not shown` when none was recorded."""
    folder = folder or ledger_dir()
    rows = []
    for cid, claim in CLAIMS.items():
        f = folder / f"{cid}.json"
        if f.exists():
            rows.append(Row(**json.loads(f.read_text())))
        else:
            rows.append(Row(cid, claim.claim, claim.seed, "-", "not shown",
                            "no notebook recorded this claim in this run (its notebook failed or was not run)"))
    return rows


def write_json(rows: list[Row], path: Path) -> Path:
    path.write_text(json.dumps([asdict(r) for r in rows], indent=1))
    return path


def html_table(rows: list[Row]) -> str:
    """The fidelity table as an HTML fragment for the course report."""
    colour = {"yes": "#e3f4e1", "predicted": "#e6eefb", "partly": "#fff4d6", "no": "#fde8e8", "not shown": "#eeeeee"}
    body = "".join(
        f"<tr style='background:{colour[r.reproduced]}'><td><b>{html.escape(r.id)}</b><br>{html.escape(r.claim)}</td>"
        f"<td>{html.escape(r.seed)}</td><td>{html.escape(r.here)}</td><td>{r.reproduced}</td>"
        f"<td>{html.escape(r.evidence)}</td><td>{html.escape(r.prediction) or '-'}</td>"
        f"<td>{html.escape(r.why)}</td><td style='font-size:.8em'>{html.escape(', '.join(r.runs[:3]))}"
        f"{f' (+{len(r.runs) - 3} more in fidelity.json)' if len(r.runs) > 3 else ''}</td></tr>"
        for r in rows)
    return ("<h2>Fidelity: the seeds' claims on this machine</h2>"
            "<p><i>yes</i>: measured here, beyond the spread of repeated runs; <i>predicted</i>: supported only by a "
            "replay or a simulation built from this machine's measurements (a model's prediction, not a "
            "reproduction); <i>partly</i>, <i>no</i>, <i>not shown</i>: as they say.</p>"
            "<table><tr><th>claim</th><th>seed (quoted)</th><th>here (measured)</th><th>verdict</th>"
            f"<th>evidence</th><th>predicted by a model</th><th>why</th><th>runs</th></tr>{body}</table>")


# --- builders: one per claim, from the runs a notebook made -----------------------------------

def _run_ids(table, label_col: str = "label", labels=None) -> list[str]:
    sub = table if labels is None else table[table[label_col].isin(labels)]
    return sorted({str(r) for r in sub["run_id"]})


def transport_fallback(table, fast: str = "default", without: str | None = None) -> Row:
    """From notebook 02's ping-pong table (hpclab.analysis.transports): did excluding the default fast path
    change the transport Open MPI reported, and did the runs lose latency (t at 0 B) or bandwidth (the
    largest message) beyond the spread of their repetitions? without: the selection that excludes the
    shared-memory BTL (default: this machine's, lesson_transports.without_shm_label())."""

    without = without or lesson_transports.without_shm_label()
    if not {fast, without} <= set(table["label"]):
        return make_row("transport-fallback", "-", "not shown", f"the runs '{fast}' and '{without}' were not both made")
    c = transports.compare(table, fast, without)
    lat, bw = c.latency.swapped(), c.bandwidth.swapped()   # 'without' first: its loss is the subject
    here = (f"{fast}: {c.transport[fast]}; {without}: {c.transport[without]}; every run completed. "
            f"{lat.sentence()} {bw.sentence()}")
    runs = _run_ids(table, labels=[fast, without])
    if c.transport[fast] == c.transport[without]:
        return make_row("transport-fallback", here, "no",
                        "Open MPI reported the same transport with and without the exclusion", runs)
    lost = [q for q, cmp in (("latency", lat), ("bandwidth", bw)) if cmp.winner == cmp.b_name]   # b: fast
    if c.b_loses:
        return make_row("transport-fallback", here, "yes",
                        f"the run fell back to another transport without an error and lost {' and '.join(lost)} "
                        f"beyond the spread of its repetitions; one machine's loopback stands in for the talk's "
                        f"two nodes", runs, beyond_spread=True)
    if not (lat.enough_runs and bw.enough_runs):
        why = (f"the transport changed silently, but with fewer than {phrases.MIN_RUNS} repetitions per side "
               "a loss cannot be told from the noise")
    else:
        why = "the transport changed silently, but no loss beyond the spread of the repetitions was measured"
    return make_row("transport-fallback", here, "partly", why, runs)


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


def component_selection(table) -> Row:
    """From notebook 02's table: did every MCA selection give the PML, BTL and MTL it asked for, as the
    run itself reported it, did the selections use different transports, and did they include both
    paths the claim names, ob1 with a BTL and cm with an MTL?"""

    used = transports.report(table)
    checked, wrong, mtls = [], [], set()
    for label, row in used.iterrows():
        sel = lesson_transports.SELECTIONS.get(label)
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
    here = (f"{len(checked)} selections, {len(transports_seen)} different transports reported by the runs "
            f"({', '.join(transports_seen)}); MTL path: {'; '.join(sorted(mtls)) if mtls else 'none run'}"
            + (f"; not as asked: {'; '.join(wrong)}" if wrong else ""))
    runs = _run_ids(table, labels=checked)
    if not checked:
        return make_row("component-selection", here, "not shown", "no run with a known selection was made", runs)
    if wrong:
        return make_row("component-selection", here, "no", "a run used another component than asked", runs)
    if len(transports_seen) < 2:
        return make_row("component-selection", here, "partly",
                        "every selection was honoured, but they all ended on the same transport here", runs)
    if not mtls:
        return make_row("component-selection", here, "partly",
                        "each run's own report names the PML and BTL it was told to use, but the MTL path "
                        "(pml cm with an MTL) was not exercised by any run", runs)
    # The exact test: each run's own report (MPI_T for the PML, the BML endpoint for the BTLs, the
    # selected MTL component) names what it was told to use.
    return make_row("component-selection", here, "yes",
                    "each run's own report (PML by MPI_T, BTLs from Open MPI's endpoint, the MTL from "
                    "mtl_base) names the components it was told to use, the cm/MTL path included",
                    runs, beyond_spread=True)


def numa(node, rates=None, runs=()) -> Row:
    """From notebook 03: local against remote memory. node: the node's LessonPlan
    (hpclab.course.sizing.plan) or its hwloc Topology; rates: job_rates() of the runs of
    hpclab.course.lesson_placement.numa_cases (None when not run). With one NUMA node there is
    no remote memory, and the row says which case this node is in; with several, the verdict
    comes from the measured runs (placement.numa_fidelity: 'yes' only beyond the spread)."""
    plan = node if isinstance(node, sizing.LessonPlan) else sizing.plan(node)
    if not plan.numa_measurable:
        return make_row("numa", f"{plan.numa_nodes} NUMA node (hwloc): {plan.case}", "not shown",
                        "this node has a single NUMA node, so there is no remote memory to measure")
    if rates is None or len(rates) == 0:
        return make_row("numa", f"{plan.numa_nodes} NUMA nodes (hwloc)", "not shown",
                        "the local vs remote runs were not made", runs)
    local, remote = (c.label for c in lesson_placement.numa_cases(plan))
    try:
        verdict = placement.numa_fidelity(rates, local, remote)
    except (KeyError, HpclabError) as e:
        return make_row("numa", "-", "not shown", f"the local/remote runs are incomplete ({e})", runs)
    return from_verdict("numa", verdict, runs)


def hotspots(profile) -> Row:
    """From notebook 06's profile (hpclab.tools.profilers.Profile): do the solver's compute loops lead the
    hotspot list, ahead of the MPI library, as in the seed's VTune run? Start-up (loader, MPI_Init,
    grid set-up) is left out: the seed profiled a long run, where it weighs nothing, while the
    course profiles a short one.

    What the profile can test decides the verdict. A one-rank run exchanges no messages, so its MPI
    library share is bookkeeping, not communication: "ahead of the MPI library" is not tested, and
    the row is at most 'partly'. On a profile of one rank of a multi-rank run, callgrind's counts are
    exact and repeatable (a stated exact test: 'yes' when the compute loops lead); perf's samples
    are one sampled profile, not a spread of runs ('partly')."""
    phases = profile.phases().set_index("phase")["self"]
    loop = phases.reindex(["red/black sweeps", "residuum", "halo copy", "MPI library"]).fillna(0)
    if loop.sum() <= 0:
        return make_row("hotspots", "-", "not shown", "the profile has no samples in the solve loop",
                        [profile.path.name])
    shares = loop / loop.sum()
    startup = 1 - loop.sum() / phases.sum()
    compute = shares["red/black sweeps"] + shares["residuum"]
    top = shares.idxmax()
    ranks = len(poisson_report.per_rank(profile.result)) if profile.result else 1
    exact = profile.tool == "callgrind"
    here = (f"{profile.tool} ({profile.unit}{', exact counts' if exact else ', sampled'}), one rank of a "
            f"{ranks}-rank run, solve loop only: {top} leads with {shares[top]:.0%}; red/black "
            f"sweeps and residuum together {compute:.0%}, MPI library {shares['MPI library']:.0%} "
            f"(start-up, left out: {startup:.0%} of the whole profile)")
    lead = top in ("red/black sweeps", "residuum") and compute > shares["MPI library"]
    if lead and ranks == 1:
        verdict, beyond, why = "partly", False, (
            f"{'the exact counts' if exact else 'the samples'} put the solver's loops first, as in the seed; "
            "whether they lead the MPI library is not tested here: the profile runs one rank, which exchanges "
            "no messages, so its MPI library share is set-up and bookkeeping, not communication")
    elif lead and exact:
        verdict, beyond, why = "yes", True, ("exact instruction counts (repeatable, no sampling noise) on one rank of "
                                             "a multi-rank run put the solver's loops ahead of the MPI library")
    elif lead:
        verdict, beyond, why = "partly", False, ("the solver's loops lead this sampled profile, but one sampled "
                                                 "profile is not a spread of runs")
    elif top in ("red/black sweeps", "residuum"):
        verdict, beyond, why = "partly", False, "a compute loop leads, but the MPI library takes more than the compute loops together"
    else:
        verdict, beyond, why = "no", False, f"{top} leads the solve loop in this profile, not the solver's compute loops"
    return make_row("hotspots", here, verdict, why, [profile.path.name], beyond_spread=beyond)


def mapping_messages(counts) -> Row:
    """From notebook 05b's measured mapping (hpclab.course.lesson_imbalance.measure_mapping): did the traced
    inter-node messages match the prediction, and did the blocked mapping send fewer? A message
    count has no run-to-run spread: traced counts equal to the grid's prediction are an exact test."""
    if counts is None or len(counts) == 0:
        return make_row("mapping-messages", "-", "not shown", "the mapping was not measured on virtual nodes here")
    per = counts.groupby("mapping")[["inter-node messages, predicted", "inter-node messages, traced"]].median()
    exact = bool((counts["inter-node messages, predicted"] == counts["inter-node messages, traced"]).all())
    placed = bool(counts["ranks where mapped"].all())
    lo, hi = per["inter-node messages, traced"].min(), per["inter-node messages, traced"].max()
    ratio = hi / lo if lo > 0 else float("inf")
    fewer = "blocked" in per.index and "linear" in per.index and \
        per.loc["blocked", "inter-node messages, traced"] < per.loc["linear", "inter-node messages, traced"]
    here = ("; ".join(f"{m}: {int(r['inter-node messages, traced'])} traced, {int(r['inter-node messages, predicted'])} "
                      f"predicted" for m, r in per.iterrows()) + f" ({ratio:.1f}x, counted in every run)")
    if exact and placed and fewer:
        return make_row("mapping-messages", here, "yes",
                        "an exact count: every trace holds exactly the inter-node messages the grid predicts, fewer with "
                        "the blocked mapping; the seed counts boundary lines between nodes (16 or 17 per node linear, "
                        "4 vertical + 6 horizontal blocked) on 16 nodes, this 2-node grid has fewer to cut",
                        counts["run"], beyond_spread=True)
    if placed and fewer:
        verdict, why = "partly", "the blocked mapping sent fewer inter-node messages, but not exactly the predicted number"
    else:
        verdict, why = "no", "the ranks did not land where mapped, or the blocked mapping did not send fewer messages"
    return make_row("mapping-messages", here, verdict, why, counts["run"])


def from_verdict(claim_id: str, verdict: dict, runs=()) -> Row:
    """A row from an analysis module's own verdict (a dict with here, reproduced and why, and
    optionally evidence, beyond_spread and prediction, as hpclab.analysis.placement.pitfall_fidelity
    and hpclab.analysis.roofline.roofline_fidelity return)."""
    return make_row(claim_id, verdict["here"], verdict["reproduced"], verdict["why"], runs,
                    evidence=verdict.get("evidence", "measured"), beyond_spread=bool(verdict.get("beyond_spread")),
                    prediction=verdict.get("prediction", ""))


def frame(rows) -> "pd.DataFrame":
    """Rows as a table for a notebook cell (one row per claim)."""
    import pandas as pd

    rows = [rows] if isinstance(rows, Row) else list(rows)
    return pd.DataFrame([{"claim": r.id, "seed (quoted)": r.seed, "here (measured)": r.here,
                          "verdict": r.reproduced, "evidence": r.evidence,
                          "predicted by a model": r.prediction or "-", "why": r.why}
                         for r in rows]).set_index("claim")


def hybrid_pitfall(rates, runs=(), cache_rates=None, array_mb=None) -> Row:
    """From notebook 03's pitfall runs: rates, job_rates() of the pitfall and fix 1 on
    memory-resident arrays (>= 3 runs each); cache_rates, optionally job_rates() of the four
    pitfall cases in cache (their factors go into `here`); array_mb: one rank's arrays in MB.
    The verdict is placement.pitfall_fidelity's ('yes' only beyond the spread)."""

    try:
        verdict = placement.pitfall_fidelity(rates, cache_rates, array_mb)
    except (KeyError, HpclabError) as e:
        return make_row("hybrid-pitfall", "-", "not shown", f"the pitfall runs are incomplete ({e})", runs)
    return from_verdict("hybrid-pitfall", verdict, runs)


def roofline(rates, stream_results, caches, runs=()) -> Row:
    """From notebook 06's roof runs (hpclab.analysis.roofline.roofline_fidelity); a run set without a
    memory-resident grid (the quick parameter set) is 'not shown', saying so."""

    try:
        verdict = roof.roofline_fidelity(rates, stream_results, caches)
    except HpclabError as e:
        return make_row("roofline", "-", "not shown", f"{e.what}", runs)
    return from_verdict("roofline", verdict, runs)


def _seed_strip_vs_tile() -> float:
    """ITAC 2014's compute of the 1x384 grid over the 24x16 one, from hpclab.core.seedfacts."""

    compute = seedfacts.imbalance_2014()["compute"]
    return float(compute["1D 1x384"] / compute["2D 24x16"])


def grid_2d_vs_1d(subdomains, runs=(), strip: str = "1D 1x384", tile: str = "2D 24x16") -> Row:
    """From notebook 05b's single-rank runs of each decomposition's subdomain
    (hpclab.course.lesson_imbalance.measure_subdomains): does the 1x384 strip compute slower per point than the
    24x16 tile here, beyond the spread of the runs (hpclab.analysis.phrases.compare: >= 3 runs per
    side, ranges apart)?"""
    from hpclab.analysis import phrases

    g = subdomains.groupby("case")["ns_per_point"] if len(subdomains) else None
    if g is None or not {strip, tile} <= set(g.groups):
        return make_row("grid-2d-vs-1d", "-", "not shown", f"the subdomains {strip} and {tile} were not both measured", runs)
    cmp = phrases.compare(list(g.get_group(strip)), list(g.get_group(tile)), a_name=f"{strip}'s strip",
                          b_name=f"{tile}'s tile", quantity="compute per grid point", unit="ns")
    seed_ratio = _seed_strip_vs_tile()
    here = f"one rank: {cmp.sentence()} Ratio of medians {cmp.ratio:.2f}x (seed {seed_ratio:.2f}x)."
    runs = list(runs) or list(subdomains.loc[subdomains["case"].isin([strip, tile]), "run"])
    if cmp.beyond_spread and cmp.ratio > 1:
        why = ("the strip's short rows compute slower on this machine too, beyond the spread of the runs"
               + ("; the seed's factor was larger (other compiler and vector width)" if cmp.ratio < seed_ratio / 1.25 else ""))
        return make_row("grid-2d-vs-1d", here, "yes", why, runs, beyond_spread=True)
    if cmp.ratio > 1.1:
        verdict, why = "partly", "the strip computes slower at the median, but not beyond the spread of the runs"
    else:
        verdict, why = "no", "this machine computes the strip's short rows about as fast as the tile's, or faster"
    return make_row("grid-2d-vs-1d", here, verdict, why, runs)


def nonblocking_dependency(dependency, runs=(), setting: str = "") -> Row:
    """From notebook 05's naive and non-blocking traced runs (hpclab.analysis.imbalance.dependency_table,
    with a model for T_chain): is the naive exchange slower, measured (T_real, >= 3 runs per side,
    ranges apart: hpclab.analysis.phrases.compare)? If not beyond the spread, the chain is only
    what a replay predicts: T_chain, the replay on the fitted network minus the ideal replay
    (what the messages cost one after another), goes to the prediction column. setting: where
    the runs ran (e.g. '2 one-core virtual nodes, 1 Gb/s'), for the row's text."""
    from hpclab.analysis import phrases

    naive = dependency[dependency["exchange"] == "naive"] if len(dependency) else dependency
    nonblocking = dependency[dependency["exchange"] == "nonblocking"] if len(dependency) else dependency
    if naive.empty or nonblocking.empty:
        return make_row("nonblocking-dependency", "-", "not shown",
                        "the naive and non-blocking runs were not both traced", runs)
    cmp = phrases.compare(list(naive["T_real"]), list(nonblocking["T_real"]), a_name="naive", b_name="non-blocking",
                          quantity="T_real per iteration", unit="ms")
    where = f"{naive['ranks'].iloc[0]} ranks" + (f", {setting}" if setting else "")
    here = f"{where}, messages above the eager limit: {cmp.sentence()}"
    prediction, chain = "", None
    if "T_chain" in dependency and nonblocking["T_chain"].median() > 0:
        chain = naive["T_chain"].median() / nonblocking["T_chain"].median()
        prediction = (f"replayed on the fitted network: the messages cost {chain:.1f}x more with the naive exchange "
                      f"(T_chain {naive['T_chain'].median():.3f} vs {nonblocking['T_chain'].median():.3f} ms per iteration)")
    if cmp.beyond_spread and cmp.winner == "non-blocking":
        return make_row("nonblocking-dependency", here, "yes",
                        "measured: the naive exchange's chain makes every iteration longer, beyond the spread of the "
                        "runs, and the non-blocking exchange removes it", runs, beyond_spread=True, prediction=prediction)
    if cmp.beyond_spread:
        return make_row("nonblocking-dependency", here, "no",
                        "measured: the naive exchange was faster than the non-blocking one here, beyond the spread",
                        runs, prediction=prediction)
    if chain is not None and chain >= 1.5:   # 2 ranks: 2 message times against 1 at most (P ranks: 2 (P - 1))
        return make_row("nonblocking-dependency", here, "predicted",
                        "the measured times are within the noise; only the replay shows the chain (its messages paid "
                        "one after another)", runs, evidence="replayed", prediction=prediction)
    if chain is not None and chain > 1:
        return make_row("nonblocking-dependency", here, "partly",
                        "the measured times are within the noise, and the replay puts the chain at less than 1.5x "
                        "the non-blocking exchange's message cost", runs, evidence="replayed", prediction=prediction)
    return make_row("nonblocking-dependency", here, "no",
                    "neither the measured times nor a replay show the naive exchange costing more", runs,
                    prediction=prediction)


def imbalance_split(table, label: str, oversubscribed: bool, runs=()) -> Row:
    """From notebook 05's traced runs of one configuration (rows of
    hpclab.analysis.imbalance.split_table: T_real, T_model and the five parts, one row per
    repetition): do the five parts add up, and do compute and transfer lead as in the seed's 2D
    run? With a core per rank (oversubscribed=False) this is measured: 'yes' needs compute and
    transfer to be the two largest parts in each of at least hpclab.analysis.phrases.MIN_RUNS
    runs, with the rest at most 10 % of T_real. With more ranks than cores the measured run is
    mostly time switched out; the replay on CPU time (T_model's parts) is then a prediction for
    a core per rank, and the row says so (evidence 'replayed')."""
    from hpclab.analysis import phrases

    if table is None or len(table) == 0:
        return make_row("imbalance-split", "-", "not shown", f"no traced run of {label}", runs)
    names = {"T_comp": "compute", "T_transfer": "transfer", "T_load": "load imbalance", "T_depend": "dependency",
             "T_rest": "rest"}
    shares = table[list(names)].div(table["T_real"], axis=0).rename(columns=names)
    adds = bool((table[list(names)].sum(axis=1).sub(table["T_real"]).abs() <= 0.01 * table["T_real"]).all())
    n = len(table)
    ranks = int(table["ranks"].iloc[0]) if "ranks" in table else 0
    med = shares.median()
    here = (f"{label} ({ranks} ranks, {n} run{'s' if n != 1 else ''}{', oversubscribed' if oversubscribed else ', a core per rank'}), "
            "median shares of T_real: " + ", ".join(f"{k} {v:.0%}" for k, v in med.items())
            + f"; rest {shares['rest'].min():.0%}-{shares['rest'].max():.0%} over the runs")
    if not adds:
        return make_row("imbalance-split", here, "no", "the parts do not add up to the measured time", runs)
    four = ["compute", "transfer", "load imbalance", "dependency"]
    if oversubscribed:
        modelled = shares[four].div(shares[four].sum(axis=1), axis=0)
        lead = all(set(row.nlargest(2).index) == {"compute", "transfer"} for _, row in modelled.iterrows())
        prediction = ("replayed on CPU time (a core per rank, the fitted network): "
                      + ", ".join(f"{k} {v:.0%}" for k, v in modelled.median().items()) + " of T_model")
        if lead:
            return make_row("imbalance-split", here, "predicted",
                            "with more ranks than cores the measured run is mostly time switched out (the rest); only the "
                            "replay on CPU time has compute and transfer lead, a prediction for a core per rank",
                            runs, evidence="replayed", prediction=prediction)
        return make_row("imbalance-split", here, "partly",
                        "with more ranks than cores the measured run is mostly time switched out, and even the replay on "
                        "CPU time does not have compute and transfer lead", runs, evidence="replayed", prediction=prediction)
    lead_each = [set(row[four + ["rest"]].nlargest(2).index) == {"compute", "transfer"} for _, row in shares.iterrows()]
    # the rest is what the model does not explain either way: a negative rest (the model's replay
    # takes longer than the run) means the model over-predicts the transfer, so the split is no
    # cleaner than with a large positive one
    rest_ok = bool((shares["rest"].abs() <= 0.10).all())
    if all(lead_each) and rest_ok and n >= phrases.MIN_RUNS:
        return make_row("imbalance-split", here, "yes",
                        f"measured with a core per rank: compute and transfer are the two largest parts in each of the "
                        f"{n} runs (the stated test), and the rest stays within 10 % of T_real", runs, beyond_spread=True)
    if all(lead_each) and rest_ok:
        why = f"compute and transfer lead in each run, but {n} run(s) are too few to call it (at least {phrases.MIN_RUNS})"
    elif not rest_ok and (shares["rest"] < -0.10).any():
        why = ("the network model over-predicts: its replay takes longer than the measured run (a negative rest "
               "beyond 10 % of T_real), so its transfer part is too large and the split is not clean")
    elif not rest_ok:
        why = "the rest (time the replay does not explain) exceeds 10 % of T_real in some runs, so the split is not clean"
    else:
        top = med[four].nlargest(2).index
        why = f"the split adds up, but {' and '.join(top)} lead here (or the lead changes between runs), not compute and transfer"
    return make_row("imbalance-split", here, "partly", why, runs)


def mapping_time(sims: dict, measured=None, runs=(), linear: str = "2D 24x16",
                 blocked: str = "2D 24x16 blocked mapping") -> Row:
    """Does the mapping with fewer inter-node messages make the run faster? Measured, from
    notebook 05b's mapping runs on virtual nodes (measured: the table of
    hpclab.analysis.imbalance.mapping_counts, 'ms per iteration' per 'mapping' and run; compared
    with hpclab.analysis.phrases.compare), when given; the 384-rank simulation with shared node
    links (sims: {label: hpclab.analysis.imbalance.Simulated}) goes to the prediction column,
    with the fastest simulated case (the seed calls the blocked 2D mapping 'by far the best').
    Without measured runs the row rests on the simulation: 'predicted' at most."""
    from hpclab.analysis import phrases

    prediction, gain = "", None
    if sims and linear in sims and blocked in sims:
        t = {k: s.split.T_real / s.iterations / 1e6 for k, s in sims.items()}
        gain = 1 - t[blocked] / t[linear]
        best = min(t, key=t.get)
        prediction = (f"simulated, 384 ranks on 16 nodes, links shared per node: {t[linear]:.3f} ms per iteration linear "
                      f"vs {t[blocked]:.3f} ms blocked ({gain:+.0%}); fastest simulated case: {best} ({t[best]:.3f} ms)"
                      + ("" if best == blocked else ", not the blocked 2D mapping the seed calls 'by far the best'"))
    if measured is not None and len(measured) and {"linear", "blocked"} <= set(measured["mapping"]):
        ms = measured.groupby("mapping")["ms per iteration"]
        cmp = phrases.compare(list(ms.get_group("blocked")), list(ms.get_group("linear")), a_name="blocked",
                              b_name="linear", quantity="measured time per iteration", unit="ms")
        here = f"2 virtual nodes, 1 Gb/s: {cmp.sentence()}"
        runs = list(runs) + list(measured["run"])
        if cmp.beyond_spread and cmp.winner == "blocked":
            return make_row("mapping-time", here, "yes", "measured: the blocked mapping is faster beyond the spread of the runs",
                            runs, beyond_spread=True, prediction=prediction)
        why = ("measured: the blocked mapping was slower here, beyond the spread" if cmp.beyond_spread else
               "measured: the two mappings cannot be told apart within the spread of the runs on this machine; the "
               "prediction column says what the simulation shows")
        return make_row("mapping-time", here, "no", why, runs, prediction=prediction)
    if gain is None:
        return make_row("mapping-time", "-", "not shown", "neither measured nor simulated here", runs)
    here = "not measured here; simulated only (see the prediction)"
    if gain >= 0.05:
        return make_row("mapping-time", here, "predicted",
                        "in the simulation, with a node's messages sharing its link, fewer inter-node messages make the "
                        "iteration shorter", runs, evidence="simulated", prediction=prediction)
    verdict = "partly" if gain > 0 else "no"
    return make_row("mapping-time", here, verdict, "the simulated link is not busy enough for the mapping to change the time much",
                    runs, evidence="simulated", prediction=prediction)
