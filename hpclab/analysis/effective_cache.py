"""How much of the last-level cache a rank really gets, from STREAM runs at growing sizes.

hwloc reports the caches the processor has. Inside a virtual machine that can be the host's whole
last-level cache, shared with every other guest, or one spread over several dies of which a core
reaches only part: a 2-vCPU VM here reports a 480 MB L3, yet its triad rate falls to the memory
level once the three arrays pass about 100 MB. Sizing "from memory" by hwloc's number (arrays of
4x the cache) then costs gigabytes and minutes without measuring anything different.

The rule (memory_speed_from): the memory rate is the triad rate at the largest size probed (4x
what hwloc reports, memory by any reading); the smallest size from which every larger size runs
within MEMORY_TOLERANCE of it is "at memory speed". The lessons then size as if the last-level
cache were half of that, so that STREAM's 4x rule lands on twice a size measured at memory speed
(the probe's sizes are a factor 4 apart: the knee lies somewhere below the size it names), and
never more than hwloc reports. The record (build/cache-probe.json) keeps every rate and the run
ids it came from; hpclab.course.cache_probe runs the jobs.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path

from hpclab.core import paths
from hpclab.core.errors import HpclabError
from hpclab.core.io import write_atomic

# A size runs "at memory speed" when its triad rate is at most this much above the largest size's.
MEMORY_TOLERANCE = 0.10
# The probe's working sets (three arrays together) are hwloc's last-level cache times these.
SIZE_FACTORS = (1 / 64, 1 / 16, 1 / 4, 1, 4)
RECORD = "cache-probe.json"


@dataclass
class Probe:
    """One probe: hwloc_llc (bytes, as hwloc reports it), host, rows (one per size: bytes = the
    working set of the three arrays, triad_mb_s = STREAM's best triad rate, run_id), and what the
    rule made of them: memory_from (bytes, the smallest working set at memory speed; 0 when no
    size reached it) and effective_llc (bytes the lessons size from)."""

    hwloc_llc: int
    host: str
    rows: list[dict] = field(default_factory=list)
    memory_from: int = 0
    effective_llc: int = 0

    def frame(self):
        """The rows as a table: working set [MB], triad [MB/s], vs_largest (rate / the largest
        size's), at_memory_speed (from memory_from on), run_id."""
        import pandas as pd

        t = pd.DataFrame(self.rows)
        if t.empty:
            return t
        largest = t.loc[t["bytes"].idxmax(), "triad_mb_s"]
        return pd.DataFrame({"working set [MB]": (t["bytes"] / 1e6).round(1), "triad [MB/s]": t["triad_mb_s"].round(0),
                             "vs largest": (t["triad_mb_s"] / largest).round(2),
                             "at memory speed": (t["bytes"] >= self.memory_from) if self.memory_from else False,
                             "run_id": t.get("run_id", "")})

    def sentence(self) -> str:
        """What the probe found, in numbers (for the notebooks and the plan's case sentence)."""
        mb = 1e6
        if not self.rows:
            return f"hwloc reports a {self.hwloc_llc / mb:.0f} MB last-level cache; no probe was run"
        rates = ", ".join(f"{r['bytes'] / mb:.0f} MB: {r['triad_mb_s']:,.0f} MB/s" for r in self.rows)
        if not self.memory_from:
            return (f"hwloc reports a {self.hwloc_llc / mb:.0f} MB last-level cache; triad by working set: {rates}; "
                    f"no size below the largest ran within {MEMORY_TOLERANCE:.0%} of it, so the lessons keep hwloc's size")
        if self.effective_llc >= self.hwloc_llc:
            return (f"hwloc reports a {self.hwloc_llc / mb:.0f} MB last-level cache; triad by working set: {rates}; "
                    f"memory speed (within {MEMORY_TOLERANCE:.0%} of the largest) from {self.memory_from / mb:.0f} MB, "
                    f"as hwloc's size predicts: the lessons size from it")
        return (f"hwloc reports a {self.hwloc_llc / mb:.0f} MB last-level cache, but triad by working set ({rates}) "
                f"reaches memory speed (within {MEMORY_TOLERANCE:.0%} of the largest) from {self.memory_from / mb:.0f} MB: "
                f"a rank here uses far less cache than hwloc's figure, and the lessons size as if it held "
                f"{self.effective_llc / mb:.0f} MB (half that size)")


def probe_sizes(hwloc_llc: int) -> list[int]:
    """Working sets (bytes, three arrays together) the probe runs for a cache of hwloc_llc bytes."""
    if hwloc_llc <= 0:
        raise HpclabError("hwloc reports no last-level cache", "nothing to probe: the lessons assume 64 MiB")
    return [int(hwloc_llc * f) for f in SIZE_FACTORS]


def memory_speed_from(rows: list[dict]) -> int:
    """The smallest working set (bytes) from which every larger one's triad rate is within
    MEMORY_TOLERANCE of the largest one's; 0 when only the largest is (rows: bytes, triad_mb_s)."""
    rows = sorted(rows, key=lambda r: r["bytes"])
    if not rows:
        return 0
    memory_rate = rows[-1]["triad_mb_s"]
    start = rows[-1]["bytes"]
    for r in reversed(rows[:-1]):
        if r["triad_mb_s"] > (1 + MEMORY_TOLERANCE) * memory_rate:
            break
        start = r["bytes"]
    return start if start < rows[-1]["bytes"] else 0


# effective_llc = memory_from / MARGIN_DIVISOR: STREAM's 4x rule then gives 4 / MARGIN_DIVISOR
# times the smallest size measured at memory speed.
MARGIN_DIVISOR = 2


def judge(hwloc_llc: int, host: str, rows: list[dict]) -> Probe:
    """A Probe from the measured rows: effective_llc = memory_from / MARGIN_DIVISOR, at most
    hwloc_llc (hwloc's size when no size below the largest ran at memory speed)."""
    start = memory_speed_from(rows)
    effective = min(hwloc_llc, start // MARGIN_DIVISOR) if start else hwloc_llc
    return Probe(hwloc_llc, host, sorted(rows, key=lambda r: r["bytes"]), start, effective)


def record_path() -> Path:
    return paths.build_dir() / RECORD


def save(probe: Probe, path: Path | None = None) -> Path:
    path = path or record_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    write_atomic(path, json.dumps(asdict(probe), indent=2) + "\n")
    return path


def load(hwloc_llc: int, path: Path | None = None) -> Probe | None:
    """The recorded probe of a node whose hwloc last-level cache is hwloc_llc bytes; None when
    there is none (or it was taken on a node with another cache, or is unreadable)."""
    path = path or record_path()
    try:
        data = json.loads(path.read_text())
        probe = Probe(**data)
    except (OSError, ValueError, TypeError):
        return None
    return probe if probe.hwloc_llc == hwloc_llc and probe.rows else None


def apply(caches, path: Path | None = None):
    """The cache table (level, bytes, count; hpclab.analysis.roofline.cache_sizes) with the last
    level's bytes replaced by the measured effective size when a probe of a node with the same
    hwloc cache was recorded; the column hwloc_bytes keeps what hwloc reported. Unchanged (but
    for that column) without a probe or when the probe found hwloc's size."""
    caches = caches.copy()
    caches["hwloc_bytes"] = caches["bytes"]
    if caches.empty:
        return caches
    top = caches["level"].idxmax()
    llc = int(caches.loc[top, "bytes"]) * int(caches.loc[top, "count"])
    probe = load(llc, path)
    if probe and probe.effective_llc < llc:
        caches.loc[top, "bytes"] = probe.effective_llc // int(caches.loc[top, "count"])
    return caches
