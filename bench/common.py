"""Shared helpers of the benchmark scripts: repeat, summarise (min/median/max), write tables.

This machine is a noisy 2-vCPU VM: every number is the median of several runs, shown with its
min and max, never a single sample.
"""

from __future__ import annotations

import json
import statistics
from pathlib import Path

BENCH_DIR = Path(__file__).resolve().parent.parent / "build" / "bench"


def summary(samples: list[float]) -> dict:
    return {"n": len(samples), "min": min(samples), "median": statistics.median(samples), "max": max(samples)}


def write_table(name: str, title: str, rows: list[dict], notes: list[str] = (), with_json: bool = True) -> Path:
    """Write build/bench/<name>.md and (with_json) .json; rows are dicts with the same keys (first = label)."""
    BENCH_DIR.mkdir(parents=True, exist_ok=True)
    if with_json:
        (BENCH_DIR / f"{name}.json").write_text(json.dumps({"title": title, "rows": rows, "notes": list(notes)}, indent=1))
    keys = list(rows[0]) if rows else []
    fmt = lambda v: f"{v:.4g}" if isinstance(v, float) else str(v)  # noqa: E731
    lines = [f"# {title}", "", "| " + " | ".join(keys) + " |", "|" + "---|" * len(keys)]
    lines += ["| " + " | ".join(fmt(r.get(k, "")) for k in keys) + " |" for r in rows]
    lines += [""] + [f"- {n}" for n in notes]
    path = BENCH_DIR / f"{name}.md"
    path.write_text("\n".join(lines) + "\n")
    return path
