"""Benchmark the trace replay on the seed's scale: 384 ranks (24 x 16 grid, 16 nodes of 24 cores),
100 Poisson iterations, under the ideal and an intra/inter-node Hockney model, and under that
model with one shared link per node (the time-ordered replay, hpclab.trace.replay._run_links).

Writes build/bench/replay.md (events, seconds, events per second for each model). Goal from the
issue: >= 1 M events/s and < 5 s for this trace. Run: .venv/bin/python bench/replay.py [iterations]
"""

import statistics
import sys
import time

from hpclab.core.paths import build_dir
from hpclab.trace.mapping import blocked_mapping
from hpclab.trace.model import HOCKNEY, IDEAL
from hpclab.trace.poisson import SEED_SCALE, poisson_trace
from hpclab.trace.replay import replay


RUNS = 5


def main(iterations: int = 100) -> None:
    s = SEED_SCALE
    t0 = time.perf_counter()
    nodes = blocked_mapping(s["px"], s["py"], s["cores"])
    trace = poisson_trace(s["px"], s["py"], n=s["n"], iterations=iterations, ns_per_point=1.0,
                          nodes=nodes, exchange="blocking")
    t_gen = time.perf_counter() - t0
    n = len(trace.events)
    rows = []
    for model in (IDEAL, HOCKNEY, HOCKNEY.with_links(1)):
        times = []
        for _ in range(RUNS):  # several runs: the machine is shared and noisy
            t0 = time.perf_counter()
            replay(trace, model)
            times.append(time.perf_counter() - t0)
        rows.append((model.name, n, min(times), statistics.median(times), max(times)))
    out = build_dir() / "bench" / "replay.md"
    out.parent.mkdir(parents=True, exist_ok=True)
    lines = ["# Replay benchmark", "",
             f"Trace: Poisson solver, {s['px']} x {s['py']} ranks on 16 nodes of {s['cores']} "
             f"(blocked mapping), {iterations} iterations, {n} events; generated in {t_gen:.2f} s.",
             f"Times: {RUNS} runs of the whole replay() call including validation and matching; "
             "events/s from the median. Goals from the issue: >= 1 M events/s, < 5 s (for the "
             "contention-free replay; shared links need the slower time-ordered one).", "",
             "| model | events | seconds min / median / max | events/s (median) | x goal 1 M/s |",
             "|---|---:|---:|---:|---:|"]
    lines += [f"| {m} | {e} | {lo:.3f} / {med:.3f} / {hi:.3f} | {e / med:,.0f} | {e / med / 1e6:.2f} |"
              for m, e, lo, med, hi in rows]
    out.write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    print(f"wrote {out}")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 100)
