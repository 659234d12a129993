"""`hpclab trace RUN --pop [MORE_RUNS]` and `hpclab trace RUN --critical-path`: POP's table over traced
runs of one problem at several rank counts (or one run alone), and a run's critical path.

Runs may be run folders or OTF2 archives brought from elsewhere. Each run's split uses the same
ideal network as `hpclab trace` (this machine's eager limit, rendezvous kept). Instruction
counts are not read from traces: the computational half shows the computation scalability
(from compute times) and says where its factors come from (notebook 04 counts instructions
with callgrind: hpclab.tools.counters).
"""

from __future__ import annotations

from pathlib import Path


def print_pop(runs: list[Path], ideal_net, save=None) -> Path | None:
    """Print the POP table of `runs` (one column per rank count; several runs of one count: the
    first is used and the others named); save(figure, file name) -> path writes its figure.
    Returns the figure's path (None without `save`)."""
    # imported when the command runs (pandas, the trace stack): other commands start without it
    from hpclab.plots.pop import pop_figure
    from hpclab.trace import pop
    from hpclab.trace.load import load_run
    from hpclab.trace.replay import replay
    from hpclab.trace.split import split

    splits, used = {}, {}
    for run in runs:
        trace = load_run(run, strict=False)
        p = trace.nranks
        if p in splits:
            print(f"note: {run} also has {p} ranks; the table uses {used[p]}")
            continue
        splits[p], used[p] = split(trace, replay(trace, ideal_net)), run
    table = pop.pop_table(splits, no_counters_reason="a trace holds no instruction or cycle counts "
                                                     "(notebook 04 counts instructions with callgrind)")
    print(f"\nPOP efficiencies (reference: {table.attrs['reference']} rank(s); "
          f"below {pop.GOOD} worth fixing)")
    print(pop.labelled(table).to_string(float_format=lambda v: f"{v:.2f}", na_rep="n/a"))
    for metric, reason in table.attrs["not available"].items():
        print(f"  n/a {metric}: {reason}")
    if len(splits) > 1:
        name, value = pop.worst(table)
        print(f"lowest factor at {max(table.columns)} ranks: {name} {value:.2f}")
    return save(pop_figure(table), "trace-pop.png") if save else None


def print_critical_path(trace, ideal_net, save=None) -> Path | None:
    """Print the critical path's share per rank and region and what shortening the leading ranks'
    compute by 10 % would save (replayed on the ideal network: a prediction); draw it with
    save(figure, file name) -> path. Returns the figure's path (None without `save`)."""
    from hpclab.plots.pop import critical_path_figure
    from hpclab.trace import critical_path as cp

    path = cp.critical_path(trace)
    print(f"\ncritical path: {path.length_ns * 1e-9:.6f} s of T_real {path.T_real * 1e-9:.6f} s, "
          f"ending on rank {path.end_rank}")
    by_rank = path.by_rank()
    print(by_rank.to_string(float_format=lambda v: f"{v:.3g}"))
    regions = path.by_region()
    if len(regions) and not (len(regions) == 1 and regions.index[0] == ""):
        print("\ncompute on the path by region")
        print(regions.to_string(float_format=lambda v: f"{v:.3g}"))
    vs = cp.against_imbalance(trace, path)
    print(f"\nload imbalance points at rank {vs['busiest_rank']} (most compute); the path's leading rank is "
          f"{vs['path_leader']}" + (" (the same)" if vs["same"] else
                                    " (another: the run waits for its compute, not for the busiest rank's)"))
    sav = cp.savings(trace, path, ideal_net, fraction=0.1)
    if len(sav):
        print("\n10 % less compute on a rank (replayed on the ideal network: a prediction)")
        print(sav.to_string(float_format=lambda v: f"{v:.4g}"))
    return save(critical_path_figure(trace, path), "trace-critical-path.png") if save else None
