"""Windows of an event timeline: the time span of the n-th occurrence of a user region.

The timeline figure itself is hpclab.plots.trace.timeline_figure.
"""

from __future__ import annotations

from hpclab.core.errors import HpclabError
from hpclab.trace.events import Trace
from hpclab.trace.profile import regions


def iteration_window(trace: Trace, region: str, n: int) -> tuple[int, int]:
    """(t0, t1) in ns spanning the n-th (0-based) occurrence of `region` on every rank."""
    inst = regions(trace).instances
    inst = inst[inst["name"] == region]
    if inst.empty:
        names = sorted(set(regions(trace).instances["name"]))
        raise HpclabError(f"no region named {region!r} in this trace", f"regions present: {names}")
    k = inst.groupby("rank").cumcount()
    sel = inst[k == n]
    if sel.empty:
        raise HpclabError(f"region {region!r} occurs only {int(k.max()) + 1} time(s); "
                          f"occurrence {n} does not exist", "occurrences count from 0")
    return int(sel["t0"].min()), int(sel["t1"].max())
