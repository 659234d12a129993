"""The event table: the one contract between the tracer's loader and every analysis.

A trace is a `Trace`: an events DataFrame plus three side tables. The loader
(`hpclab/trace/load.py`) produces it from the tracer's binary files; `TraceBuilder`
(`hpclab/trace/builder.py`) produces it for tests; `replay` produces it from another trace.
Every analysis (profile, split, wait states, message matrix, timeline) reads only this.

Events table: one row per event, sorted by (rank, seq), index 0..n-1.

| column      | dtype  | meaning |
|-------------|--------|---------|
| rank        | int64  | world rank that recorded the event |
| seq         | int64  | per-rank order, strictly increasing within a rank |
| t_enter     | int64  | ns, entry time, already corrected to rank 0's clock by the loader |
| t_exit      | int64  | ns, exit time (>= t_enter; the next event on the rank enters >= this) |
| call        | category | one of CALLS below (categories: CALLS first, then any unknown names) |
| peer        | int64  | world rank the message goes to (sends) / came from (receives: the MATCHED source, from the status); -1 none; -2 MPI_PROC_NULL |
| tag         | int64  | tag (receives: the matched tag); -1 none |
| comm        | int64  | communicator id (0 = MPI_COMM_WORLD); for Cart_create/Comm_split/Comm_dup the communicator passed in (the parent) |
| bytes       | int64  | payload bytes (sends/receives: message; collectives: per-rank contribution) |
| req         | int64  | tool-assigned request id of an Isend/Irecv (unique within a rank), else -1 |
| completes   | object | tuple of request ids this Wait/Waitall/Test/Testall completed; () otherwise (MPI_REQUEST_NULL is simply absent) |
| root        | int64  | world rank of the root of Bcast/Reduce, else -1 |
| name        | str    | region name for region_begin/region_end, else "" |
| recv_peer   | int64  | Sendrecv only: matched source of the receive part, else -1 |
| recv_tag    | int64  | Sendrecv only: matched tag of the receive part, else -1 |
| recv_bytes  | int64  | Sendrecv only: bytes received, else 0 |
| cpu_enter   | int64  | ns, CPU time of the rank (its calling thread) at entry; -1 not recorded |
| cpu_exit    | int64  | ns, CPU time at exit; -1 not recorded |
| sync        | int64  | 1: a synchronous send (MPI_Ssend/MPI_Issend, loaded as MPI_Send/MPI_Isend), which completes only once its receive has matched, whatever its size; else 0 |

The last three columns are optional on input (`normalise` adds them as -1, -1, 0): traces of a tracer
without CPU times, built traces and replayed traces have none. They are on the rank's own clock
(no offset applies); only differences within a rank mean something. A compute burst's CPU time
(cpu_enter of an event minus cpu_exit of the one before) is how long the rank ran in it; its
wall time minus that is time the rank was switched out (see `bursts`).

For MPI_Sendrecv, peer/tag/bytes describe the send part. The gap between one event's t_exit and
the next event's t_enter on the same rank is compute (a "burst"). Region markers are zero-width
or nearly so; region_begin/region_end must nest properly on each rank.

Side tables:
- comms: dict comm id -> list of world ranks in communicator-rank order (0 -> all ranks).
- hosts: dict rank -> hostname (the rank -> node map).
- meta: dict of free-form facts (program, model name for replayed traces, clock-offset notes...).

`check(trace)` returns every problem found (each names the rank and the event);
`validate(trace)` raises HpclabError on the first fatal one and returns the warnings.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from hpclab.core.errors import HpclabError

P2P_SEND = ("MPI_Send", "MPI_Isend")
P2P_RECV = ("MPI_Recv", "MPI_Irecv")
WAITS = ("MPI_Wait", "MPI_Waitall", "MPI_Test", "MPI_Testall")
COLLECTIVES = ("MPI_Barrier", "MPI_Bcast", "MPI_Reduce", "MPI_Allreduce")
COMM_CREATE = ("MPI_Cart_create", "MPI_Comm_split", "MPI_Comm_dup")
REGIONS = ("region_begin", "region_end")
CALLS = (P2P_SEND + P2P_RECV + ("MPI_Sendrecv",) + WAITS + COLLECTIVES
         + ("MPI_Init", "MPI_Finalize") + COMM_CREATE + REGIONS)

PROC_NULL = -2
NO_PEER = -1
_CALL_INDEX = {c: i for i, c in enumerate(CALLS)}

INT_COLUMNS = ("rank", "seq", "t_enter", "t_exit", "peer", "tag", "comm", "bytes", "req",
               "root", "recv_peer", "recv_tag", "recv_bytes")
COLUMNS = ("rank", "seq", "t_enter", "t_exit", "call", "peer", "tag", "comm", "bytes", "req",
           "completes", "root", "name", "recv_peer", "recv_tag", "recv_bytes")
# optional on input; normalise adds them as -1 (not recorded)
CPU_COLUMNS = ("cpu_enter", "cpu_exit")
# optional on input, default 0: the send is synchronous (MPI_Ssend, MPI_Issend)
SYNC = "sync"


@dataclass
class Trace:
    """One traced (or replayed, or built) run.

    events: DataFrame with COLUMNS (see module docstring), sorted by (rank, seq).
    comms: comm id -> list of world ranks.  hosts: rank -> hostname.  meta: free-form.
    """

    events: pd.DataFrame
    comms: dict = field(default_factory=dict)
    hosts: dict = field(default_factory=dict)
    meta: dict = field(default_factory=dict)

    @property
    def nranks(self) -> int:
        """Number of ranks: the size of COMM_WORLD if known, else 1 + the largest rank seen."""
        if 0 in self.comms:
            return len(self.comms[0])
        return int(self.events["rank"].max()) + 1 if len(self.events) else 0

    def with_events(self, events: pd.DataFrame, **meta) -> "Trace":
        """A new Trace sharing the side tables, with other events and extra meta entries."""
        return Trace(events, dict(self.comms), dict(self.hosts), {**self.meta, **meta})


@dataclass(frozen=True)
class Problem:
    """One thing wrong with a trace. fatal: analysis cannot go on; else a warning."""

    fatal: bool
    rank: int | None
    seq: int | None
    call: str | None
    what: str

    def __str__(self) -> str:
        where = "trace" if self.rank is None else f"rank {self.rank}"
        if self.seq is not None:
            where += f", event seq {self.seq} ({self.call})"
        return f"{where}: {self.what}"


def empty_events() -> pd.DataFrame:
    """An events table with the right columns and dtypes and no rows."""
    return normalise(pd.DataFrame({c: [] for c in COLUMNS}))


def normalise(df: pd.DataFrame) -> pd.DataFrame:
    """Cast the columns to the contract's dtypes, sort by (rank, seq), reset the index.

    Raises HpclabError if a column is missing or cannot be cast (a foreign table)."""
    missing = [c for c in COLUMNS if c not in df.columns]
    if missing:
        raise HpclabError(
            f"the events table lacks the column(s) {', '.join(missing)}; it is not an hpclab trace",
            "load traces with hpclab.trace.load.load_run(run_dir), or build them with TraceBuilder")
    out = pd.DataFrame(index=range(len(df)))
    for c in CPU_COLUMNS + (SYNC,):
        if c not in df.columns:
            out[c] = np.full(len(df), 0 if c == SYNC else -1, dtype=np.int64)
        else:
            try:
                out[c] = df[c].to_numpy().astype(np.int64)
            except (TypeError, ValueError) as err:
                raise HpclabError(f"events column {c!r} is not integer ({err})",
                                  "check the loader output against hpclab/trace/events.py") from None
    for c in INT_COLUMNS:
        try:
            out[c] = df[c].to_numpy().astype(np.int64)
        except (TypeError, ValueError) as err:
            raise HpclabError(f"events column {c!r} is not integer ({err})",
                              "check the loader output against hpclab/trace/events.py") from None
    # A closed vocabulary: as a categorical, "which events are sends" is an integer lookup, not
    # a string comparison per event (this halves the cost of validating and replaying a trace).
    call = df["call"].astype(str).to_numpy(dtype=object)
    unknown = sorted(set(pd.unique(call).tolist()) - set(CALLS))
    out["call"] = pd.Categorical(call, categories=list(CALLS) + unknown)
    out["name"] = df["name"].fillna("").astype(str).to_numpy()
    out["completes"] = pd.Series(
        [tuple(int(x) for x in v) if isinstance(v, (tuple, list, np.ndarray)) else ()
         for v in df["completes"]], index=out.index, dtype=object)
    out = out[list(COLUMNS + CPU_COLUMNS + (SYNC,))]
    return out.sort_values(["rank", "seq"], kind="stable").reset_index(drop=True)


def has_cpu_time(ev: pd.DataFrame) -> bool:
    """Whether the events carry CPU times (every event of the table)."""
    return all(c in ev.columns for c in CPU_COLUMNS) and len(ev) > 0 and \
        bool((ev["cpu_enter"].to_numpy() >= 0).all() and (ev["cpu_exit"].to_numpy() >= 0).all())


def bursts(ev: pd.DataFrame, use: str = "cpu") -> tuple[np.ndarray, np.ndarray]:
    """Per event, the compute burst before it on its rank, in ns (0 for a rank's first event),
    and a mask of the events whose burst is CPU time.

    use="wall": the gap between the previous event's exit and this one's entry. use="cpu":
    where both events carry CPU times, the CPU time the rank ran in that gap (Dimemas' CPU
    burst), capped at the wall gap (a thread cannot run longer than the time that passed;
    only the clocks' own read order could make it look so); elsewhere the wall gap. Negative
    gaps (clock glitches) count as 0."""
    if use not in ("cpu", "wall"):
        raise HpclabError(f"bursts: use={use!r}; allowed: 'cpu', 'wall'")
    rank = ev["rank"].to_numpy()
    te = ev["t_enter"].to_numpy()
    tx = ev["t_exit"].to_numpy()
    n = len(ev)
    wall = np.zeros(n, dtype=np.int64)
    same = rank[1:] == rank[:-1]
    wall[1:] = np.where(same, te[1:] - tx[:-1], 0)
    np.maximum(wall, 0, out=wall)
    is_cpu = np.zeros(n, dtype=bool)
    if use == "wall" or "cpu_enter" not in ev.columns or n == 0:
        return wall, is_cpu
    ce = ev["cpu_enter"].to_numpy()
    cx = ev["cpu_exit"].to_numpy()
    is_cpu[1:] = same & (ce[1:] >= 0) & (cx[:-1] >= 0)
    if not is_cpu.any():
        return wall, is_cpu
    cpu = np.zeros(n, dtype=np.int64)
    cpu[1:] = ce[1:] - cx[:-1]
    out = np.where(is_cpu, np.clip(cpu, 0, wall), wall)
    return out, is_cpu


def call_codes(ev: pd.DataFrame) -> np.ndarray:
    """Per event, the position of its call in CALLS (int64; -1 for a name not in CALLS).

    Free on a normalised table (its categorical codes); any other table is encoded here."""
    col = ev["call"]
    if isinstance(col.dtype, pd.CategoricalDtype) and \
            tuple(col.cat.categories[:len(CALLS)]) == CALLS:
        codes = col.cat.codes.to_numpy().astype(np.int64)
        codes[codes >= len(CALLS)] = -1
        return codes
    return pd.Categorical(col.astype(str), categories=CALLS).codes.astype(np.int64)


def calls_in(codes: np.ndarray, names) -> np.ndarray:
    """Boolean mask: the events (given by call_codes) whose call is one of `names`."""
    table = np.zeros(len(CALLS) + 1, dtype=bool)  # last slot: unknown (-1)
    table[[_CALL_INDEX[n] for n in names]] = True
    return table[codes]


def check(trace: Trace) -> list[Problem]:
    """Every problem in a trace, each naming the rank and event. Fatal problems come first.

    Checks: columns and dtypes, known call names, seq order, t_exit >= t_enter, no overlap of
    consecutive events, peers and roots in range, regions nested, MPI_Finalize present (a missing
    one means the run crashed: a warning), ranks of COMM_WORLD without events. Message matching
    is checked by hpclab.trace.matching.match (it knows the FIFO rules)."""
    ev = trace.events
    missing = [c for c in COLUMNS if c not in ev.columns]
    if missing:
        return [Problem(True, None, None, None,
                        f"the events table lacks the column(s) {', '.join(missing)}; "
                        "it is not an hpclab trace (truncated or foreign file?)")]
    if len(ev) == 0:
        return [Problem(True, None, None, None, "the trace has no events")]
    out: list[Problem] = []
    rank = ev["rank"].to_numpy()
    seq = ev["seq"].to_numpy()
    te = ev["t_enter"].to_numpy()
    tx = ev["t_exit"].to_numpy()
    codes = call_codes(ev)
    call = ev["call"]

    def add(fatal, i, what):
        out.append(Problem(fatal, int(rank[i]), int(seq[i]), str(call.iat[i]), what))

    if not (np.all(np.diff(rank) >= 0)):
        out.append(Problem(True, None, None, None, "events are not sorted by rank; "
                           "pass the table through hpclab.trace.events.normalise"))
        return out
    bad = np.flatnonzero(codes < 0)
    for i in bad[:5]:
        add(True, i, f"unknown call name {call.iat[i]!r}")
    same = rank[1:] == rank[:-1]
    for i in np.flatnonzero(same & (seq[1:] <= seq[:-1]))[:5]:
        add(True, i + 1, f"seq does not increase (previous seq {seq[i]})")
    for i in np.flatnonzero(tx < te)[:5]:
        add(True, i, f"exits before it enters ({tx[i]} < {te[i]} ns)")
    for i in np.flatnonzero(same & (te[1:] < tx[:-1]))[:5]:
        add(True, i + 1, f"enters at {te[i + 1]} ns, before the previous event exits ({tx[i]} ns)")
    n = trace.nranks
    peer = ev["peer"].to_numpy()
    for i in np.flatnonzero((peer >= n) | (peer < PROC_NULL))[:5]:
        add(True, i, f"peer {peer[i]} is not a rank of this {n}-rank run")
    root = ev["root"].to_numpy()
    rooted = calls_in(codes, ("MPI_Bcast", "MPI_Reduce"))
    for i in np.flatnonzero(rooted & ((root < 0) | (root >= n)))[:5]:
        add(True, i, f"root {root[i]} is not a rank of this {n}-rank run")
    out.extend(_check_regions(ev, codes))
    present = set(np.unique(rank).tolist())
    for r in sorted(set(range(n)) - present)[:5]:
        out.append(Problem(False, r, None, None, "has no events (its trace file is missing or empty)"))
    fin = set(np.unique(rank[codes == _CALL_INDEX["MPI_Finalize"]]).tolist())
    for r in sorted(present - fin)[:5]:
        last = np.flatnonzero(rank == r)[-1]
        add(False, last, "is the last event: MPI_Finalize was never reached (crashed or killed run?); "
            "the trace is analysed up to here")
    out.sort(key=lambda p: not p.fatal)
    return out


def _regions_well_nested(rank: np.ndarray, begin: np.ndarray, name: np.ndarray) -> bool:
    """Vectorised check of the common case: on every rank, region markers nest properly and
    every end names the region it closes. Each marker gets its nesting level (the depth after a
    begin, before an end); in a well-nested sequence the markers of one (rank, level) alternate
    begin, end, begin, ..., each end naming the begin just before it, and each rank closes all."""
    if len(rank) == 0:
        return True
    step = np.where(begin, 1, -1)
    first = np.r_[True, rank[1:] != rank[:-1]]
    depth = np.cumsum(step)
    base = np.maximum.accumulate(np.where(first, np.arange(len(rank)), 0))
    start_depth = np.where(base > 0, depth[base - 1], 0)  # depth carried over from earlier ranks
    after = depth - start_depth
    level = np.where(begin, after, after + 1)
    if (after < 0).any():
        return False
    order = np.lexsort((np.arange(len(rank)), level, rank))
    b, nm, rk, lv = begin[order], name[order], rank[order], level[order]
    same = (rk[1:] == rk[:-1]) & (lv[1:] == lv[:-1])
    grp_first = np.r_[True, ~same]
    grp_last = np.r_[~same, True]
    pos = np.arange(len(b)) - np.maximum.accumulate(np.where(grp_first, np.arange(len(b)), 0))
    if not np.array_equal(b, pos % 2 == 0) or b[grp_last].any():
        return False
    ends = np.flatnonzero(~b)
    return bool(np.all(nm[ends] == nm[ends - 1]))


def _check_regions(ev: pd.DataFrame, codes: np.ndarray) -> list[Problem]:
    out = []
    sel = calls_in(codes, REGIONS)
    if _regions_well_nested(ev["rank"].to_numpy()[sel],
                            codes[sel] == _CALL_INDEX["region_begin"],
                            ev["name"].to_numpy(dtype=object)[sel]):
        return out
    reg = ev[sel]
    for r, grp in reg.groupby("rank", sort=True):
        stack: list[str] = []
        for seq, call, name in zip(grp["seq"], grp["call"], grp["name"]):
            if call == "region_begin":
                stack.append(name)
            elif not stack or stack[-1] != name:
                open_ = stack[-1] if stack else "none"
                out.append(Problem(True, int(r), int(seq), call,
                                   f"ends region {name!r} but the open region is {open_!r}"))
                break
            else:
                stack.pop()
        else:
            if stack:
                out.append(Problem(False, int(r), None, None,
                                   f"region {stack[-1]!r} is never closed; it is closed at the "
                                   "rank's last event"))
    return out


def validate(trace: Trace) -> list[Problem]:
    """Raise HpclabError naming the rank and event of the first fatal problem; return warnings."""
    problems = check(trace)
    fatal = [p for p in problems if p.fatal]
    if fatal:
        more = f" (and {len(fatal) - 1} more)" if len(fatal) > 1 else ""
        raise HpclabError(f"bad trace: {fatal[0]}{more}",
                          "re-run with the tracer, or fix the loader; see hpclab/trace/events.py "
                          "for the event table contract")
    return problems
