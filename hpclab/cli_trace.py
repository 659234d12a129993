"""`hpclab trace RUN [--model ideal|hockney|FILE]`: analyse the MPI trace of a run folder.

Prints the flat profile, the four-way split (compute / transfer / load imbalance / dependency)
with POP efficiencies and the top wait states, and writes the imbalance diagram, message
matrix (node-aggregated when ranks share nodes) and timelines (real and replayed) as PNGs into
the run folder. Existing files are never overwritten: a numbered suffix is added instead.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from hpclab.errors import HpclabError


def add_commands(subparsers) -> None:
    """Register the `trace` subcommand on an argparse subparsers object."""
    p = subparsers.add_parser("trace", help="profile, split and plots of a traced run",
                              description=__doc__.split("\n\n")[0])
    p.add_argument("run", help="run folder (or its name under the runs directory)")
    p.add_argument("--model", default="hockney",
                   help="network model to replay on besides the ideal one: ideal, hockney "
                        "(illustrative preset) or a YAML/JSON file (see hpclab/trace/model.py)")
    p.set_defaults(func=run_trace)


def _run_dir(spec: str) -> Path:
    from hpclab.paths import runs_dir
    for cand in (Path(spec), runs_dir() / spec):
        if cand.is_dir():
            return cand
    raise HpclabError(f"no run folder {spec!r} (looked in . and {runs_dir()})",
                      "give the path of a run folder that has a trace/ subfolder")


def fresh_path(folder: Path, name: str) -> Path:
    """folder/name, or folder/stem-1.ext, -2, ... if that exists (never overwrite)."""
    path = folder / name
    stem, suffix = path.stem, path.suffix
    k = 1
    while path.exists():
        path = folder / f"{stem}-{k}{suffix}"
        k += 1
    return path


def _seconds(ns) -> str:
    return f"{ns * 1e-9:.6f}"


def run_trace(args: argparse.Namespace) -> int:
    """The `hpclab trace` command; returns the exit code."""
    run = _run_dir(args.run)
    try:
        from hpclab.trace.load import load_run
    except ImportError:
        raise HpclabError("the trace loader (hpclab/trace/load.py) is not available in this checkout",
                          "update the repository; the loader comes with the tracer (src/mpitrace)") from None
    from hpclab.trace.events import check
    from hpclab.trace.matching import match
    from hpclab.trace.matrix import aggregate, heatmap_figure, message_matrix
    from hpclab.trace.model import IDEAL, load_model
    from hpclab.trace.profile import flat_profile
    from hpclab.trace.replay import replay
    from hpclab.trace.split import imbalance_figure, split
    from hpclab.trace.timeline import timeline_figure
    from hpclab.trace.waitstates import by_callsite, wait_states

    model = load_model(args.model)
    trace = load_run(run, strict=False)
    warnings = [p for p in check(trace) if not p.fatal] + match(trace).problems
    for p in warnings[:10]:
        print(f"warning: {p}")
    print(f"trace of {run}: {trace.nranks} ranks, {len(trace.events)} events, "
          f"{len(set(trace.hosts.values())) or 1} node(s)")
    fp = flat_profile(trace)
    show = fp[["kind", "calls", "self_ns", "self_pct", "self_min_ns", "self_max_ns"]].head(15).copy()
    for c in ("self_ns", "self_min_ns", "self_max_ns"):
        show[c] = show[c].map(_seconds)
    show.columns = ["kind", "calls", "self s", "self %", "min/rank s", "max/rank s"]
    print("\nflat profile (self time summed over ranks)")
    print(show.to_string(float_format=lambda v: f"{v:.1f}"))

    ideal = replay(trace, IDEAL)
    s = split(trace, ideal)
    print("\nsplit of the run time (T_real = T_comp + T_transfer + T_load + T_depend)")
    print(s.table().to_string(float_format=lambda v: f"{v:.6g}"))
    splits = {"measured": s, "ideal": split(ideal, ideal)}
    modelled = None
    if model is not IDEAL:
        try:
            modelled = replay(trace, model)
            splits[model.name] = split(modelled, ideal)
        except HpclabError as err:
            print(f"\nreplay on {model.name}: {err.what}")
    ws = wait_states(trace)
    if len(ws):
        top = by_callsite(ws).head(8).copy()
        top["total_ns"] = top["total_ns"].map(_seconds)
        top["max_ns"] = top["max_ns"].map(_seconds)
        top.columns = ["total s", "count", "max s"]
        print("\nwait states by call site (measured clocks)")
        print(top.to_string())

    written = []
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
    print("\nwrote " + ", ".join(str(w) for w in written))
    return 0


def _save(fig, folder: Path, name: str) -> Path:
    path = fresh_path(folder, name)
    fig.savefig(path, dpi=110)
    return path
