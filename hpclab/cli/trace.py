"""`hpclab trace RUN [--model ideal|hockney|FILE] [--compare OTHER_RUN] [--critical-path] [--pop [RUNS]] [--otf2 DIR]`: analyse the
MPI trace of a run folder (or of an OTF2 archive: its anchor file, or the folder holding it).

Prints the clock-condition violations the loader counted, the flat profile, the four-way split
(compute / transfer / load imbalance / dependency) with POP efficiencies and the top wait states,
and writes the imbalance diagram, message matrix (node-aggregated when ranks share nodes) and
timelines (real and replayed) as PNGs into the run folder. Existing files are never overwritten:
a numbered suffix is added instead. With --compare, also the per-function ratios and the two
splits side by side (OTHER_RUN / RUN).

With --otf2 DIR, the trace is written as an OTF2 archive into DIR (a new or empty folder) instead,
for otf2-print, Vampir, Scalasca and Cube (hpclab/trace/otf2_write.py; docs/otf2.md).

T_ideal comes from the same ideal network as notebook 05 and tests/test_replay_fidelity.py:
hpclab.analysis.imbalance.ideal_model with this machine's Open MPI eager limit (rendezvous kept), or
every message eager when ompi_info cannot say.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from hpclab.core.errors import HpclabError
from hpclab.runs.folder import RunFolder
from hpclab.trace.otf2_format import anchor_file


def add_commands(subparsers) -> None:
    """Register the `trace` subcommand on an argparse subparsers object."""
    p = subparsers.add_parser("trace", help="profile, split and plots of a traced run",
                              description=__doc__.split("\n\n")[0])
    p.add_argument("run", help="run folder (or its name under the runs directory), or an OTF2 "
                               "archive (anchor file *.otf2 or its folder, e.g. Score-P's scorep-*/)")
    p.add_argument("--model", default="hockney",
                   help="network model to replay on besides the ideal one: ideal, hockney "
                        "(illustrative preset) or a YAML/JSON file (see hpclab/trace/model.py)")
    p.add_argument("--compare", metavar="OTHER_RUN",
                   help="a second traced run folder: print per-function ratios (OTHER_RUN / RUN) "
                        "and both splits side by side")
    p.add_argument("--pop", nargs="*", metavar="MORE_RUNS",
                   help="POP's efficiency table over RUN and MORE_RUNS (traced runs of one problem at "
                        "several rank counts; none: RUN alone) instead of the full analysis")
    p.add_argument("--critical-path", action="store_true",
                   help="the critical path: its share per rank and region, and what 10 %% less compute "
                        "on its leading ranks would save (replayed), drawn on the timeline")
    p.add_argument("--otf2", metavar="DIR",
                   help="write the trace as an OTF2 archive into DIR (new or empty folder) and say "
                        "how to open it; nothing is analysed")
    p.set_defaults(func=run_trace)


def _run_dir(ref: str) -> Path:
    # Any folder with a trace/ in it, whatever wrote it: the one opener, RunFolder.open. An OTF2
    # archive is a path as given: load_run reads it, the figures go next to its anchor file.
    if not (Path(ref) / "trace").is_dir():
        anchor = anchor_file(ref)
        if anchor is not None:
            return anchor
    return RunFolder.open(ref, marker="trace").path


def _figure_dir(run: Path) -> Path:
    return run.parent if run.is_file() else run


def fresh_path(folder: Path, name: str) -> Path:
    """folder/name, or folder/stem-1.ext, -2, ... if that exists (never overwrite)."""
    path = folder / name
    stem, suffix = path.stem, path.suffix
    k = 1
    while path.exists():
        path = folder / f"{stem}-{k}{suffix}"
        k += 1
    return path


def ideal_network():
    """The ideal network of notebook 05 (hpclab.analysis.imbalance.ideal_model): zero latency, infinite
    bandwidth, messages above Open MPI's eager limit on this machine still rendezvous. Returns
    (model, note); note says why every message is eager when the limit cannot be read."""
    # imported when the command runs (pandas, the trace stack): other commands start without it
    from hpclab.analysis import imbalance as imb
    from hpclab.site import ompi
    try:
        eager = ompi.eager_limit()
    except HpclabError as err:
        return imb.ideal_model(None), f"eager limit unknown ({err.what}): every message is eager"
    return imb.ideal_model(eager), ""


def _label(run: Path, other: Path) -> tuple[str, str]:
    a, b = run.name or str(run), other.name or str(other)
    return (a, b) if a != b else (str(run), str(other))


def _seconds(ns) -> str:
    return f"{ns * 1e-9:.6f}"


def run_trace(args: argparse.Namespace) -> int:
    """The `hpclab trace` command; returns the exit code."""
    run = _run_dir(args.run)
    try:
        # imported when the command runs (pandas, the trace stack): other commands start without it
        from hpclab.trace.load import load_run
    except ImportError:
        raise HpclabError("the trace loader (hpclab/trace/load.py) is not available in this checkout",
                          "update the repository; the loader comes with the tracer (src/mpitrace)") from None
    # imported when the command runs (pandas, the trace stack): other commands start without it
    from hpclab.trace.events import check
    from hpclab.trace.matching import match
    from hpclab.trace.matrix import aggregate, message_matrix
    from hpclab.trace.model import load_model
    from hpclab.trace.profile import flat_profile
    from hpclab.trace.replay import replay
    from hpclab.trace.split import split
    from hpclab.plots.trace import heatmap_figure, imbalance_figure, timeline_figure  # matplotlib: only when drawing
    from hpclab.trace.waitstates import by_callsite, wait_states

    if args.otf2:
        return _export(run, load_run(run, strict=False), Path(args.otf2))
    ideal_net, note = ideal_network()
    if args.pop is not None:
        from hpclab.cli import trace_pop
        figure = trace_pop.print_pop([run, *(_run_dir(r) for r in args.pop)], ideal_net,
                                     lambda fig, name: _save(fig, _figure_dir(run), name))
        print(f"\nwrote {figure}")
        return 0
    model = ideal_net if args.model == "ideal" else load_model(args.model)
    other = _run_dir(args.compare) if args.compare else None
    trace = load_run(run, strict=False)
    warnings = [p for p in check(trace) if not p.fatal] + match(trace).problems
    for p in warnings[:10]:
        print(f"warning: {p}")
    print(f"trace of {run}: {trace.nranks} ranks, {len(trace.events)} events, "
          f"{len(set(trace.hosts.values())) or 1} node(s)")
    _print_clock(trace)
    print(f"ideal network: {ideal_net.name}" + (f" ({note})" if note else ""))
    fp = flat_profile(trace)
    show = fp[["kind", "calls", "self_ns", "self_pct", "self_min_ns", "self_max_ns"]].head(15).copy()
    for c in ("self_ns", "self_min_ns", "self_max_ns"):
        show[c] = show[c].map(_seconds)
    show.columns = ["kind", "calls", "self s", "self %", "min/rank s", "max/rank s"]
    print("\nflat profile (self time summed over ranks)")
    print(show.to_string(float_format=lambda v: f"{v:.1f}"))

    ideal = replay(trace, ideal_net)
    modelled = None
    if model is not ideal_net:
        try:
            modelled = replay(trace, model)
        except HpclabError as err:
            print(f"\nreplay on {model.name}: {err.what}")
    s = split(trace, ideal, modelled=modelled)
    if modelled is not None:
        print(f"\nsplit of the run time on CPU bursts, transfer from the model '{model.name}' "
              "(T_real = T_comp + T_load + T_depend + T_transfer + T_rest; T_rest: time the ranks did not "
              "run or that the model does not explain)")
    else:
        print("\nsplit of the run time (T_real = T_comp + T_load + T_depend + T_transfer; no model: "
              "transfer holds everything the ideal replay does not, time switched out included)")
    print(s.table().to_string(float_format=lambda v: f"{v:.6g}"))
    splits = {"measured": s, "ideal": split(ideal, ideal)}
    if modelled is not None:
        splits[model.name] = split(modelled, ideal)
    ws = wait_states(trace)
    if len(ws):
        top = by_callsite(ws).head(8).copy()
        top["total_ns"] = top["total_ns"].map(_seconds)
        top["max_ns"] = top["max_ns"].map(_seconds)
        top.columns = ["total s", "count", "max s"]
        print("\nwait states by call site (measured clocks)")
        print(top.to_string())

    if other is not None:
        _print_comparison(run, trace, s, other, ideal_net)
    if args.critical_path:
        from hpclab.cli import trace_pop
        written_path = trace_pop.print_critical_path(trace, ideal_net,
                                                     lambda fig, name: _save(fig, _figure_dir(run), name))

    written = []
    run = _figure_dir(run)
    fig = imbalance_figure(splits)
    written.append(_save(fig, run, "trace-imbalance.png"))
    mm = message_matrix(trace)
    if len(set(trace.hosts.values())) > 1:
        written.append(_save(heatmap_figure(aggregate(mm, trace.hosts), title="Message volume by node"),
                             run, "trace-matrix-nodes.png"))
    written.append(_save(heatmap_figure(mm), run, "trace-matrix.png"))
    written.append(_save(timeline_figure(trace, title="Timeline (measured)"), run, "trace-timeline.png"))
    written.append(_save(timeline_figure(ideal, title="Timeline (ideal network)"), run,
                         "trace-timeline-ideal.png"))
    if modelled is not None:
        written.append(_save(timeline_figure(modelled, title=f"Timeline ({model.name})"), run,
                             f"trace-timeline-{model.name}.png"))
    if args.critical_path:
        written.append(written_path)
    print("\nwrote " + ", ".join(str(w) for w in written))
    return 0


def _export(run: Path, trace, folder: Path) -> int:
    """--otf2: write the archive and say where it is and what reads it."""
    # imported when the command runs (pandas, the trace stack): other commands start without it
    from hpclab.trace.matching import match
    from hpclab.trace.otf2_write import export_trace
    anchor = export_trace(trace, folder).resolve()
    messages = len(match(trace).messages)
    print(f"wrote the OTF2 archive {anchor.parent} from {run}: {trace.nranks} ranks, "
          f"{len(trace.events)} calls and region markers, {messages} messages; timestamps in ns "
          "(timer resolution 10^9 ticks/s)")
    tools = [(f"otf2-print {anchor}", "every record as text (Debian/Ubuntu package otf2-tools)"),
             (f"vampir {anchor}", "timeline, message lines, the CPU-time counter (Vampir)"),
             (f"mpirun -np {trace.nranks} scout.mpi {anchor}",
              "Scalasca's wait states; open the scout.cubex it writes with Cube"),
             (f"hpclab trace {anchor}", "this course's split, wait states, matrix and timelines")]
    width = max(len(cmd) for cmd, _ in tools)
    print(f"open it (to take it home, copy the whole folder {anchor.parent.name}/):")
    for cmd, what in tools:
        print(f"  {cmd.ljust(width)}  {what}")
    return 0


def _print_clock(trace) -> None:
    """The clock-condition violations the loader counted (receives ending before their send began
    on the corrected clocks): they make the measured timeline and wait states doubtful."""
    n = trace.meta.get("clock_violations")
    if n is None:
        return
    unc = trace.meta.get("clock_uncertainty_ns", 0)
    print(f"clock-condition violations: {n} (clock offsets known to +-{unc} ns)")
    for ex in trace.meta.get("clock_violation_examples", [])[:5]:
        print(f"  {ex}")
    if n:
        print("  measured message times and wait states are doubtful; the replays use local "
              "durations only and are not affected")


def _print_comparison(run: Path, trace, s, other: Path, ideal_net) -> None:
    """Per-function ratios and both splits, OTHER / RUN."""
    # imported when the command runs (pandas, the trace stack): other commands start without it
    from hpclab.trace.compare import compare_profiles, compare_splits
    from hpclab.trace.load import load_run
    from hpclab.trace.replay import replay
    from hpclab.trace.split import split
    la, lb = _label(run, other)
    tb = load_run(other, strict=False)
    sb = split(tb, replay(tb, ideal_net))
    prof = compare_profiles(trace, tb, (la, lb)).head(15).copy()
    for c in (f"self_ns {la}", f"self_ns {lb}"):
        prof[c] = prof[c].map(_seconds)
    prof.columns = [c.replace("self_ns", "self s") for c in prof.columns]
    print(f"\ncomparison with {other} (ratio = {lb} / {la})")
    print(prof.to_string(float_format=lambda v: f"{v:.3g}"))
    both = compare_splits(s, sb, (la, lb))
    times = [q for q in both.index if q.startswith("T_") or q == "comp_max"]
    both.loc[times, [la, lb]] *= 1e-9
    print("\nsplits side by side (times in seconds)")
    print(both.to_string(float_format=lambda v: f"{v:.6g}"))


def _save(fig, folder: Path, name: str) -> Path:
    path = fresh_path(folder, name)
    fig.savefig(path, dpi=110)
    return path
