"""Compare two traces (before/after a change, real/ideal, two mappings) side by side."""

from __future__ import annotations

import numpy as np
import pandas as pd

from hpclab.trace.events import Trace
from hpclab.trace.profile import flat_profile
from hpclab.trace.split import Split, split, splits_frame


def compare_profiles(a: Trace, b: Trace, labels: tuple[str, str] = ("A", "B")) -> pd.DataFrame:
    """Per function: calls and self time (ns, summed over ranks) of both traces, and
    ratio = B / A of self time (NaN when A spent none). Sorted by the larger self time."""
    fa, fb = flat_profile(a), flat_profile(b)
    la, lb = labels
    out = pd.DataFrame({f"calls {la}": fa["calls"], f"calls {lb}": fb["calls"],
                        f"self_ns {la}": fa["self_ns"], f"self_ns {lb}": fb["self_ns"]}).fillna(0)
    sa, sb = out[f"self_ns {la}"], out[f"self_ns {lb}"]
    out["ratio"] = np.where(sa > 0, sb / sa.where(sa > 0, 1), np.nan)
    return out.loc[np.maximum(sa, sb).sort_values(ascending=False).index]


def compare_splits(a: Trace | Split, b: Trace | Split, labels: tuple[str, str] = ("A", "B")) -> pd.DataFrame:
    """The splits and POP efficiencies of two runs side by side, plus ratio = B / A."""
    sa = a if isinstance(a, Split) else split(a)
    sb = b if isinstance(b, Split) else split(b)
    out = splits_frame({labels[0]: sa, labels[1]: sb})
    with np.errstate(divide="ignore", invalid="ignore"):
        out["ratio"] = out[labels[1]] / out[labels[0]].replace(0, np.nan)
    return out
