"""How much of the last-level cache a rank really gets, from repeated STREAM runs at growing sizes.

hwloc reports the caches the processor has. Inside a virtual machine that can be the host's whole
last-level cache, shared with every other guest, or one spread over several dies of which a core
reaches only part: a 2-vCPU VM here reports a 300 MiB L3, yet its triad rate falls to the memory
level once the three arrays pass about 100 MB. Sizing "from memory" by hwloc's number (arrays of
4x the cache) then costs gigabytes and minutes without measuring anything different.

The probe: STREAM's triad at a sixteenth of, at, and at twice the cache hwloc reports (SIZE_FACTORS),
in rounds (one run per size each round, so the sizes alternate and pair by round). Twice the
reported cache is the reference: no cache of the reported size holds it, so it runs at memory
speed. Each smaller size is compared with it by the course's statistics (hpclab.analysis.stats,
paired runs): `faster` when decided different and above it, else no gain is shown.

The rule (memory_speed_from): the size just above the largest size decided faster is where memory
speed starts; when no size is decided faster, the probe cannot tell the cache from the noise and
the lessons keep hwloc's size (arrays larger than needed, never in cache). The lessons then size
as if the last-level cache were half of the memory-speed size, so that STREAM's 4x rule lands on
twice a size measured at memory speed, and never more than hwloc reports. The record
(build/cache-probe.json) keeps every run, the decisions and the run ids; hpclab.course.cache_probe
runs the jobs.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path

from hpclab.analysis import phrases, stats
from hpclab.core import paths
from hpclab.core.errors import HpclabError
from hpclab.core.io import write_atomic
from hpclab.runs import recorded

# The probe's working sets (three arrays together) are hwloc's last-level cache times these; the
# largest is the memory-speed reference. A sixteenth stays in any cache worth the name, so its gain
# over memory is large enough to stand beyond a shared VM's noise (a quarter, 1.3x here, did not).
SIZE_FACTORS = (1 / 16, 1, 2)
# Rounds of the probe: two more than the fewest paired runs that can reach 95 % (stats.min_runs):
# with 8 the CI leaves out the 3 most extreme round averages on each side, so one round disturbed
# by other work (a core busy elsewhere) cannot undo the decision; with 6 every round must agree.
ROUNDS = stats.min_runs(paired=True) + 2
RECORD = "cache-probe.json"


@dataclass
class Probe:
    """One probe: hwloc_llc (bytes, as hwloc reports it), host, rows (one per run: bytes = the
    working set of the three arrays, triad_mb_s = STREAM's best triad rate, run_id, round), what
    the rule made of them: memory_from (bytes, where memory speed starts; 0 when no size was
    decided faster than the reference) and effective_llc (bytes the lessons size from), and
    decisions (one per smaller size against the reference: bytes, outcome, faster, ratio, lo, hi,
    runs, sentence)."""

    hwloc_llc: int
    host: str
    rows: list[dict] = field(default_factory=list)
    memory_from: int = 0
    effective_llc: int = 0
    decisions: list[dict] = field(default_factory=list)

    def frame(self):
        """One row per size: working set [MB], runs, triad median [MB/s], against the largest
        (the ratio estimate and its 95 % CI) and what the statistics decided."""
        import pandas as pd

        if not self.rows:
            return pd.DataFrame()
        by = _by_size(self.rows)
        said = {d["bytes"]: d for d in self.decisions}
        out = []
        for size, runs in by.items():
            d = said.get(size)
            rates = [r["triad_mb_s"] for r in runs]
            out.append({"working set [MB]": round(size / 1e6, 1), "runs": len(rates),
                        "triad, median [MB/s]": round(phrases.Spread.of(rates).median),
                        "vs largest": round(d["ratio"], 2) if d else 1.0,
                        "95 % CI": f"{d['lo']:.2f}-{d['hi']:.2f}" if d else "-",
                        "decided": (("faster: from cache" if d["faster"] else _OUTCOME_WORDS[d["outcome"]])
                                    if d else "the reference (memory)")})
        return pd.DataFrame(out)

    def sentence(self) -> str:
        """What the probe found, outcome first (for notebook 00 and the plan's case sentence)."""
        mb = 1e6
        if not self.rows:
            return f"hwloc reports a {self.hwloc_llc / mb:.0f} MB last-level cache; no probe was run"
        largest = max(_by_size(self.rows))
        faster = [d for d in self.decisions if d["faster"]]
        if not faster:
            return (f"No working set ran measurably faster than {largest / mb:.0f} MB (the reference), so this "
                    f"probe cannot tell the cache from the noise: the lessons keep hwloc's "
                    f"{self.hwloc_llc / mb:.0f} MB.")
        top = max(faster, key=lambda d: d["bytes"])
        head = (f"{top['bytes'] / mb:.0f} MB of arrays ran {top['ratio']:.2f}x as fast as {largest / mb:.0f} MB "
                f"(95 % CI {top['lo']:.2f}-{top['hi']:.2f}, {top['runs']} paired runs): cache")
        if self.effective_llc >= self.hwloc_llc:
            return (f"{head}, up to the size hwloc reports: the lessons size from hwloc's "
                    f"{self.hwloc_llc / mb:.0f} MB.")
        return (f"{head}; from {self.memory_from / mb:.0f} MB no gain was shown, so the lessons size as if a "
                f"rank had {self.effective_llc / mb:.0f} MB of cache, not hwloc's {self.hwloc_llc / mb:.0f} MB.")


_OUTCOME_WORDS = {"different": "slower than the largest", "equivalent": "no gain (within 5 %)",
                  "undecided": "no gain shown (cannot tell)"}


def probe_sizes(hwloc_llc: int) -> list[int]:
    """Working sets (bytes, three arrays together) the probe runs for a cache of hwloc_llc bytes."""
    if hwloc_llc <= 0:
        raise HpclabError("hwloc reports no last-level cache", "nothing to probe: the lessons assume 64 MiB")
    return [int(hwloc_llc * f) for f in SIZE_FACTORS]


def _by_size(rows: list[dict]) -> dict[int, list[dict]]:
    """Runs grouped by working set, smallest first, each group in round order."""
    out: dict[int, list[dict]] = {}
    for r in sorted(rows, key=lambda r: (r["bytes"], r.get("round", 0))):
        out.setdefault(int(r["bytes"]), []).append(r)
    return out


def decisions(rows: list[dict]) -> list[dict]:
    """Each size below the largest against the largest (rows: bytes, triad_mb_s, round): paired
    by round where both sizes ran in it (the probe's runs alternate), else unpaired. Returns one
    dict per smaller size: bytes, outcome (stats.OUTCOMES), faster (decided different and above
    the reference), ratio with its CI lo..hi, runs, and the comparison's sentence."""
    by = _by_size(rows)
    if len(by) < 2:
        return []
    largest = max(by)
    ref = {r.get("round"): r["triad_mb_s"] for r in by[largest]}
    out = []
    for size, runs in by.items():
        if size == largest:
            continue
        mine = {r.get("round"): r["triad_mb_s"] for r in runs}
        shared = [k for k in mine if k in ref and k is not None]
        paired = len(shared) == len(mine) == len(ref)
        a = [mine[k] for k in shared] if paired else list(mine.values())
        b = [ref[k] for k in shared] if paired else list(ref.values())
        c = phrases.compare(a, b, a_name=f"{size / 1e6:.0f} MB", b_name=f"{largest / 1e6:.0f} MB",
                            quantity="triad rate", unit="MB/s", lower_is_better=False, paired=paired)
        d = c.decision
        ratio = d.ratio if d is not None else None
        out.append({"bytes": size, "outcome": c.outcome, "faster": c.outcome == "different" and c.word() == "higher",
                    "ratio": ratio.estimate if ratio else c.ratio, "lo": ratio.lo if ratio else float("nan"),
                    "hi": ratio.hi if ratio else float("nan"), "runs": c.a.n, "sentence": c.sentence()})
    return out


def memory_speed_from(rows: list[dict], decided: list[dict] | None = None) -> int:
    """Where memory speed starts (bytes): the probed size just above the largest size decided
    faster than the reference (the largest size); 0 when no size was decided faster (rows: bytes,
    triad_mb_s, round; decided: decisions(rows), computed when not given)."""
    decided = decisions(rows) if decided is None else decided
    faster = [d["bytes"] for d in decided if d["faster"]]
    if not faster:
        return 0
    sizes = sorted(_by_size(rows))
    return next(s for s in sizes if s > max(faster))


# effective_llc = memory_from / MARGIN_DIVISOR: STREAM's 4x rule then gives 4 / MARGIN_DIVISOR
# times the smallest size measured at memory speed.
MARGIN_DIVISOR = 2


def judge(hwloc_llc: int, host: str, rows: list[dict]) -> Probe:
    """A Probe from the measured runs: effective_llc = memory_from / MARGIN_DIVISOR, at most
    hwloc_llc (hwloc's size when no size was decided faster than the reference)."""
    decided = decisions(rows)
    start = memory_speed_from(rows, decided)
    effective = min(hwloc_llc, start // MARGIN_DIVISOR) if start else hwloc_llc
    return Probe(hwloc_llc, host, sorted(rows, key=lambda r: (r["bytes"], r.get("round", 0))), start, effective,
                 decided)


def record_path() -> Path:
    return paths.output_dir() / RECORD


def save(probe: Probe, path: Path | None = None) -> Path:
    path = path or record_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    write_atomic(path, json.dumps(asdict(probe), indent=2) + "\n")
    return path


def load(hwloc_llc: int, path: Path | None = None) -> Probe | None:
    """The recorded probe of a node whose hwloc last-level cache is hwloc_llc bytes; None when
    there is none (or it was taken on a node with another cache, or is unreadable). In room mode
    the recording's probe comes first: the recorded runs were sized with it."""
    path = path or recorded.probe_path() or record_path()
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
