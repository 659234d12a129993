"""Read the tracer's files (src/mpitrace, format in src/mpitrace/FORMAT.md) into a Trace.

`load_dir(path)` reads every `rank-NNNNNN.mpit` in a folder, `load_run(run_dir)` the folder
`<run_dir>/trace/`. Records are read with numpy (np.fromfile on a structured dtype) and turned
into the event table of hpclab/trace/events.py: times corrected to rank 0's clock, Irecv rows
filled with the source, tag and size that matched, Wait/Test rows with the request ids they
completed. Calls the event table does not name are mapped onto the nearest one it does
(MPI_Init_thread -> MPI_Init, MPI_Waitany -> MPI_Wait, ...) or dropped (MPI_Comm_free, the
tracer's own buffer flushes); meta says which and how many.

Bad files raise HpclabError naming the file, rank and record; with strict=False whatever can be
read is returned and each problem is listed in trace.meta["problems"].
"""

from __future__ import annotations

import json
import os
import re
from collections import Counter
from pathlib import Path

import numpy as np
import pandas as pd

from hpclab.core.errors import HpclabError
from hpclab.core.io import write_atomic
from hpclab.trace.events import Trace, empty_events, normalise
from hpclab.trace.matching import match
from hpclab.trace.otf2_read import is_archive, load_archive

MAGIC = b"MPITRACE"
VERSION = 2
VERSIONS = (1, 2)  # version 1: no CPU times (traces recorded before the tracer had them)
HEADER_SIZE = 512
RECORD_SIZE = 72
RECORD_SIZES = {1: 56, 2: 72}
FILE_RE = re.compile(r"^rank-(\d{6,})\.mpit$")
FLAG_FINALIZED = 1
FLAG_ATEXIT = 2

SYNC = np.dtype([("t_local", "<i8"), ("offset", "<i8"), ("rtt", "<i8"), ("valid", "<i4"),
                 ("rounds", "<i4")])
HEADER = np.dtype([("magic", "S8"), ("version", "<u4"), ("header_size", "<u4"),
                   ("record_size", "<u4"), ("rank", "<i4"), ("size", "<i4"), ("flags", "<u4"),
                   ("clock_id", "<i4"), ("thread_level", "<i4"), ("nrecords", "<i8"),
                   ("pid", "<i8"), ("sync_init", SYNC), ("sync_final", SYNC), ("host", "S256"),
                   ("cpu_clock_id", "<i4"), ("pad0", "<i4"), ("cpu_interval", "<i8"),
                   ("pad", "V120")])
RECORD_V1 = np.dtype([("call", "<u2"), ("nextra", "<u2"), ("seq", "<u4"), ("t_enter", "<i8"),
                      ("t_exit", "<i8"), ("bytes", "<i8"), ("peer", "<i4"), ("tag", "<i4"),
                      ("comm", "<i4"), ("req", "<i4"), ("aux", "<i4"), ("pad", "<i4")])
RECORD = np.dtype(RECORD_V1.descr + [("cpu_enter", "<i8"), ("cpu_exit", "<i8")])
RECORDS = {1: RECORD_V1, 2: RECORD}
assert HEADER.itemsize == HEADER_SIZE and RECORD.itemsize == RECORD_SIZE
assert all(RECORDS[v].itemsize == RECORD_SIZES[v] for v in VERSIONS)

# Call codes of src/mpitrace/format.h (tests/trace/test_load.py checks they agree).
CALLS = {
    1: "MPI_Init", 2: "MPI_Init_thread", 3: "MPI_Finalize",
    4: "MPI_Send", 5: "MPI_Recv", 6: "MPI_Isend", 7: "MPI_Irecv", 8: "MPI_Sendrecv",
    9: "MPI_Sendrecv_replace",
    10: "MPI_Wait", 11: "MPI_Waitall", 12: "MPI_Waitany", 13: "MPI_Waitsome",
    14: "MPI_Test", 15: "MPI_Testall", 16: "MPI_Testany", 17: "MPI_Testsome",
    18: "MPI_Barrier", 19: "MPI_Bcast", 20: "MPI_Reduce", 21: "MPI_Allreduce",
    22: "MPI_Cart_create", 23: "MPI_Cart_sub", 24: "MPI_Comm_split", 25: "MPI_Comm_split_type",
    26: "MPI_Comm_dup", 27: "MPI_Comm_create", 28: "MPI_Comm_free", 29: "MPI_Request_free",
    30: "MPI_Ssend", 31: "MPI_Issend",
    100: "region_begin", 101: "region_end", 110: "flush",
}
X_COMPLETE, X_RECV, DEF_STRING, DEF_COMM, CHUNK = 200, 201, 300, 301, 302
KIND_RECV = 1
PEER_ANY = -3

# Recorded calls the event table has no name for: what they count as. Waitany completes one
# request (a Wait on it); Waitsome/Testsome the set they returned; a Cart_sub, Comm_create or
# Comm_split_type is a communicator-making collective like Comm_split. None: not an event.
AS_CONTRACT = {
    "MPI_Init_thread": "MPI_Init", "MPI_Sendrecv_replace": "MPI_Sendrecv",
    "MPI_Ssend": "MPI_Send", "MPI_Issend": "MPI_Isend",  # with sync = 1
    "MPI_Waitany": "MPI_Wait", "MPI_Waitsome": "MPI_Waitall",
    "MPI_Testany": "MPI_Test", "MPI_Testsome": "MPI_Testall",
    "MPI_Cart_sub": "MPI_Comm_split", "MPI_Comm_split_type": "MPI_Comm_split",
    "MPI_Comm_create": "MPI_Comm_split",
    "MPI_Comm_free": None, "MPI_Request_free": None, "flush": None,
}
ROOTED = ("MPI_Bcast", "MPI_Reduce")
SYNC_SENDS = ("MPI_Ssend", "MPI_Issend")

# Above this many records the loaded table is cached as Parquet next to the rank files.
CACHE_RECORDS = 2_000_000
CACHE_NAME = "events.parquet"


def rank_files(path: str | os.PathLike) -> dict[int, Path]:
    """The trace files in a folder: {world rank: path}. Raises HpclabError if there are none."""
    folder = Path(path)
    if not folder.is_dir():
        raise HpclabError(f"trace folder {folder} does not exist",
                          "pass the folder MPITRACE_DIR pointed at (default ./mpitrace), or a "
                          "run folder to load_run")
    files = {}
    for p in folder.iterdir():
        m = FILE_RE.match(p.name)
        if m:
            files[int(m.group(1))] = p
    if not files:
        raise HpclabError(f"no trace files (rank-NNNNNN.mpit) in {folder}",
                          "run the program with LD_PRELOAD=build/lib/libmpitrace.so and "
                          f"MPITRACE_DIR={folder}")
    return dict(sorted(files.items()))


def read_header(path: Path) -> dict:
    """The header of one rank file as a dict (fields of FORMAT.md). Raises HpclabError when the
    file is not an mpitrace file of a version this loader reads."""
    with open(path, "rb") as f:
        raw = f.read(HEADER_SIZE)
    if len(raw) < HEADER_SIZE or raw[:8] != MAGIC:
        what = "is too short to hold a header" if len(raw) < HEADER_SIZE else \
            f"does not start with {MAGIC.decode()} (starts with {raw[:8]!r})"
        raise HpclabError(f"{path} {what}: not an mpitrace file",
                          "remove foreign files named rank-*.mpit from the trace folder")
    h = np.frombuffer(raw, dtype=HEADER)[0]
    version = int(h["version"])
    if version not in VERSIONS or h["record_size"] != RECORD_SIZES[version] \
            or h["header_size"] != HEADER_SIZE:
        raise HpclabError(f"{path} is mpitrace format version {h['version']} (record size "
                          f"{h['record_size']}); this loader reads versions "
                          f"{', '.join(map(str, VERSIONS))}",
                          "load it with the hpclab version that recorded it, or re-run the program")
    out = {k: h[k].item() for k in ("version", "rank", "size", "flags", "clock_id",
                                    "thread_level", "nrecords", "pid")}
    # version 1 has padding (zeros) where version 2 keeps the CPU clock's id
    out["cpu_clock_id"] = int(h["cpu_clock_id"]) if version >= 2 else None
    out["cpu_interval"] = int(h["cpu_interval"]) if version >= 2 else None
    out["record_size"] = RECORD_SIZES[version]
    out["host"] = h["host"].split(b"\0")[0].decode(errors="replace")
    for s in ("sync_init", "sync_final"):
        out[s] = {k: h[s][k].item() for k in SYNC.names}
    return out


def _read_records(path: Path, head: dict, problems: list[str]) -> np.ndarray:
    size = path.stat().st_size
    rsize = head.get("record_size", RECORD_SIZE)
    whole, tail = divmod(size - HEADER_SIZE, rsize)
    rank = head["rank"]
    rec = np.fromfile(path, dtype=RECORDS[head.get("version", VERSION)], count=whole,
                      offset=HEADER_SIZE)
    if tail:
        problems.append(f"{path} (rank {rank}) is truncated: record {whole} is cut off after "
                        f"{tail} of {rsize} bytes")
    if head["nrecords"] > whole:
        problems.append(f"{path} (rank {rank}) is truncated: the header counts "
                        f"{head['nrecords']} records, the file holds {whole}")
    if not head["flags"] & (FLAG_FINALIZED | FLAG_ATEXIT):
        problems.append(f"{path} (rank {rank}) was not closed: the process was killed or "
                        "crashed; events after its last buffer flush are lost")
    elif not head["flags"] & FLAG_FINALIZED:
        problems.append(f"{path} (rank {rank}) never reached MPI_Finalize (the program exited "
                        "without it); events after its last flush are lost")
    # Keep only whole records; an event whose extra records were cut off goes too.
    if len(rec):
        seq_last = rec["seq"][-1]
        ev_idx = np.flatnonzero(rec["call"] < X_COMPLETE)
        if len(ev_idx):
            last = ev_idx[-1]
            have = len(rec) - last - 1
            if rec["call"][last] < X_COMPLETE and rec["nextra"][last] > have:
                problems.append(f"{path} (rank {rank}): event seq {seq_last} "
                                f"({CALLS.get(int(rec['call'][last]), '?')}) lost "
                                f"{rec['nextra'][last] - have} of its completion records; dropped")
                rec = rec[:last]
    return rec


def _definitions(rec: np.ndarray, path: Path) -> tuple[dict, dict, np.ndarray]:
    """Strings and communicators defined in a rank's records, and the mask of chunk records."""
    strings, comms = {}, {}
    raw = rec.view(np.uint8).reshape(-1, rec.dtype.itemsize)
    is_chunk = np.zeros(len(rec), dtype=bool)
    for i in np.flatnonzero((rec["call"] == DEF_STRING) | (rec["call"] == DEF_COMM)):
        k, n = int(rec["nextra"][i]), int(rec["bytes"][i])
        chunks = raw[i + 1:i + 1 + k]
        if len(chunks) < k or not np.all(rec["call"][i + 1:i + 1 + k] == CHUNK):
            raise HpclabError(f"{path}: definition record {i} is followed by {len(chunks)} "
                              f"payload records instead of {k}; the file is damaged",
                              "re-run the program to record a new trace")
        is_chunk[i + 1:i + 1 + k] = True
        payload = chunks[:, 2:].tobytes()[:n]
        if rec["call"][i] == DEF_STRING:
            strings[int(rec["aux"][i])] = payload.decode(errors="replace")
        else:
            comms[int(rec["comm"][i])] = np.frombuffer(payload, dtype="<i4").tolist()
    return strings, comms, is_chunk


def least_offset(offset: int, rtt: int) -> int:
    """The smallest clock correction one ping-pong allows.

    The tracer sent at local t1, rank 0 read its clock (t0) before the reply came back at t2,
    and the estimate is offset = t0 - (t1 + rtt // 2). Causality (t1 <= t0 <= t2 on a common
    clock) bounds the true offset to [offset - (rtt - rtt // 2), offset + rtt // 2]; of those
    values the one nearest zero is taken. Ranks that share a clock (one machine, or the
    virtual nodes, which share a kernel) then get no correction at all, exactly, instead of a
    few hundred ns of noise from a slow round trip that could make a receive end before its send."""
    lo, hi = -(rtt // 2), rtt - rtt // 2  # where the estimate of a zero offset can fall
    if lo <= offset <= hi:
        return 0
    return offset - hi if offset > hi else offset - lo


def _offset_fn(head: dict):
    """Local ns -> rank 0 ns, linear between the two sync points, constant outside."""
    a, b = head["sync_init"], head["sync_final"]
    if not a["valid"]:
        return lambda t: t
    o0, t0 = least_offset(int(a["offset"]), int(a["rtt"])), a["t_local"]
    if not b["valid"] or b["t_local"] <= t0:
        return lambda t: t + o0
    o1, t1 = least_offset(int(b["offset"]), int(b["rtt"])), b["t_local"]

    def fix(t):
        frac = np.clip((t - t0).astype(np.float64) / (t1 - t0), 0.0, 1.0)
        return t + o0 + np.rint((o1 - o0) * frac).astype(np.int64)
    return fix


def _rank_events(rec: np.ndarray, head: dict, path: Path, counts: Counter) -> tuple[pd.DataFrame, dict]:
    """One rank's records -> its rows of the event table (plus helper columns) and its comms."""
    strings, comms, is_chunk = _definitions(rec, path)
    call = rec["call"]
    events = rec[(call < X_COMPLETE) & ~is_chunk]
    comp = rec[(call == X_COMPLETE) & ~is_chunk]
    xrecv = rec[(call == X_RECV) & ~is_chunk]

    raw_names = np.array([CALLS.get(int(c), f"unknown code {c}") for c in events["call"]], dtype=object)
    counts.update(raw_names.tolist())
    names = np.array([AS_CONTRACT.get(n, n) if n in AS_CONTRACT else n for n in raw_names], dtype=object)
    fix = _offset_fn(head)
    n = len(events)
    df = pd.DataFrame({
        "rank": np.full(n, head["rank"], dtype=np.int64),
        "seq": events["seq"].astype(np.int64),
        "t_enter": fix(events["t_enter"].astype(np.int64)),
        "t_exit": fix(events["t_exit"].astype(np.int64)),
        "call": names,
        "peer": events["peer"].astype(np.int64),
        "tag": events["tag"].astype(np.int64),
        "comm": events["comm"].astype(np.int64),
        "bytes": events["bytes"].astype(np.int64),
        "req": events["req"].astype(np.int64),
        "aux": events["aux"].astype(np.int64),
        # CPU time of the rank's calling thread (own clock, no offset: only differences within
        # the rank mean something); -1: not recorded (a version 1 trace)
        "cpu_enter": events["cpu_enter"].astype(np.int64) if "cpu_enter" in events.dtype.names
        else np.full(n, -1, dtype=np.int64),
        "cpu_exit": events["cpu_exit"].astype(np.int64) if "cpu_exit" in events.dtype.names
        else np.full(n, -1, dtype=np.int64),
        "sync": np.isin(raw_names, SYNC_SENDS).astype(np.int64),
    })
    df["root"] = np.where(np.isin(names, ROOTED), df["aux"], -1)
    is_region = np.isin(names, ("region_begin", "region_end"))
    df["name"] = [strings.get(int(a), f"#{a}") if r else "" for a, r in zip(df["aux"], is_region)]

    # Wait/Test rows: the ids they completed, in handle order.
    completes = pd.Series([()] * n, index=df.index, dtype=object)
    if len(comp):
        by_seq = pd.Series(comp["req"].astype(np.int64)).groupby(comp["seq"].astype(np.int64)).agg(tuple)
        pos = pd.Series(df.index, index=df["seq"])
        hit = by_seq.index.intersection(pos.index)
        completes.iloc[pos[hit].to_numpy()] = by_seq[hit].to_numpy()
    df["completes"] = completes

    # Irecv rows: what matched, from the completion record of their request.
    df["done_seq"] = -1
    if len(comp):
        cr = pd.DataFrame({"req": comp["req"].astype(np.int64), "done_seq": comp["seq"].astype(np.int64),
                           "kind": comp["aux"], "m_peer": comp["peer"].astype(np.int64),
                           "m_tag": comp["tag"].astype(np.int64), "m_bytes": comp["bytes"].astype(np.int64)})
        cr = cr.drop_duplicates("req", keep="first").set_index("req")
        has_req = df["req"] >= 0
        j = cr.reindex(df.loc[has_req, "req"])
        df.loc[has_req, "done_seq"] = j["done_seq"].fillna(-1).astype(np.int64).to_numpy()
        irecv = (df["call"] == "MPI_Irecv") & has_req
        jr = cr.reindex(df.loc[irecv, "req"])
        got = jr["m_peer"].notna().to_numpy()
        idx = df.index[irecv][got]
        df.loc[idx, "peer"] = jr["m_peer"].to_numpy()[got].astype(np.int64)
        df.loc[idx, "tag"] = jr["m_tag"].to_numpy()[got].astype(np.int64)
        df.loc[idx, "bytes"] = jr["m_bytes"].to_numpy()[got].astype(np.int64)
    # A receive posted for any source that never completed has no known peer.
    df.loc[df["peer"] == PEER_ANY, "peer"] = -1

    # Sendrecv rows: the receive side.
    df["recv_peer"], df["recv_tag"], df["recv_bytes"] = -1, -1, 0
    if len(xrecv):
        xs = pd.DataFrame({"peer": xrecv["peer"].astype(np.int64), "tag": xrecv["tag"].astype(np.int64),
                           "bytes": xrecv["bytes"].astype(np.int64)}, index=xrecv["seq"].astype(np.int64))
        pos = pd.Series(df.index, index=df["seq"])
        hit = xs.index.intersection(pos.index)
        rows = pos[hit].to_numpy()
        df.loc[rows, "recv_peer"] = xs.loc[hit, "peer"].to_numpy()
        df.loc[rows, "recv_tag"] = xs.loc[hit, "tag"].to_numpy()
        df.loc[rows, "recv_bytes"] = xs.loc[hit, "bytes"].to_numpy()

    df = df[df["call"].notna()]
    return df, comms


def _clock_violations(trace: Trace, done_seq: np.ndarray, limit: int = 5) -> tuple[int, list[str]]:
    """Messages whose receive ended before their send began (on the corrected clocks)."""

    ev = trace.events
    if len(ev) == 0:
        return 0, []
    msgs = match(trace).messages
    if len(msgs) == 0:
        return 0, []
    rank = ev["rank"].to_numpy()
    seq = ev["seq"].to_numpy()
    t_exit = ev["t_exit"].to_numpy()
    # The end of a non-blocking receive is the exit of the Wait/Test that completed it.
    key = pd.Series(np.arange(len(ev)), index=pd.MultiIndex.from_arrays([rank, seq]))
    end = t_exit.copy()
    nb = done_seq >= 0
    where = key.reindex(pd.MultiIndex.from_arrays([rank[nb], done_seq[nb]]))
    ok = where.notna().to_numpy()
    end_nb = np.full(nb.sum(), np.iinfo(np.int64).max)
    end_nb[ok] = t_exit[where.to_numpy()[ok].astype(np.int64)]
    end[nb] = end_nb
    is_irecv = ev["call"].to_numpy() == "MPI_Irecv"
    end[is_irecv & ~nb] = np.iinfo(np.int64).max  # never completed: nothing to check
    s, r = msgs["send_idx"].to_numpy(), msgs["recv_idx"].to_numpy()
    bad = np.flatnonzero(end[r] < ev["t_enter"].to_numpy()[s])
    examples = [f"rank {rank[r[i]]} seq {seq[r[i]]} ({ev['call'].iat[r[i]]}) ends "
                f"{ev['t_enter'].iat[s[i]] - end[r[i]]} ns before rank {rank[s[i]]} seq {seq[s[i]]} "
                f"({ev['call'].iat[s[i]]}) begins" for i in bad[:limit]]
    return len(bad), examples


def load_dir(path: str | os.PathLike, strict: bool = True, cache: bool | None = None) -> Trace:
    """Load the trace in folder `path` (one rank-NNNNNN.mpit per rank) as a Trace.

    Times are int64 ns on rank 0's clock. strict=True raises HpclabError on the first problem
    (foreign or truncated file, missing rank, run without MPI_Finalize); strict=False loads what
    is readable and lists the problems in trace.meta["problems"]. cache: keep a Parquet copy of
    the table next to the files (None: only above CACHE_RECORDS records) and reuse it while it
    is newer than every rank file."""
    folder = Path(path)
    files = rank_files(folder)
    problems: list[str] = []

    def trouble(msg: str, hint: str):
        if strict:
            raise HpclabError(msg, hint)
        problems.append(msg)

    heads, recs = {}, {}
    for rank, p in files.items():
        try:
            h = read_header(p)
        except HpclabError as err:
            trouble(err.what, err.hint)
            continue
        if h["rank"] != rank:
            trouble(f"{p} holds rank {h['rank']}, its name says rank {rank}",
                    "do not rename trace files; re-run the program")
            continue
        heads[rank] = h
    if not heads:
        raise HpclabError(f"no readable trace file in {folder}", "; ".join(problems[:3]))
    sizes = {h["size"] for h in heads.values()}
    if len(sizes) > 1:
        trouble(f"the files in {folder} come from runs of different sizes {sorted(sizes)}",
                "keep one run per trace folder")
    size = max(sizes)
    for r in range(size):
        if r not in heads and r not in files:
            trouble(f"{folder}: the file of rank {r} (rank-{r:06d}.mpit) is missing; the run had "
                    f"{size} ranks", "copy all rank files, or load with strict=False")

    cached = _read_cache(folder, files) if cache is not False else None
    if cached is not None and not problems:
        return cached

    counts: Counter = Counter()
    frames, comms, hosts, sync = [], {}, {}, {}
    flush_ns, flushes = 0, 0
    total = 0
    for rank, h in heads.items():
        rp: list[str] = []
        rec = _read_records(files[rank], h, rp)
        for msg in rp:
            trouble(msg, "load with strict=False to analyse what was recorded")
        total += len(rec)
        fl = rec[rec["call"] == 110]
        flushes += len(fl)
        flush_ns += int((fl["t_exit"] - fl["t_enter"]).sum())
        try:
            df, cm = _rank_events(rec, h, files[rank], counts)
        except HpclabError as err:
            trouble(err.what, err.hint)
            continue
        frames.append(df)
        for cid, ranks in cm.items():
            if cid in comms and comms[cid] != ranks:
                trouble(f"communicator {cid} has members {comms[cid]} in one file and {ranks} in "
                        f"rank {rank}'s", "the files come from different runs: keep one per folder")
            comms.setdefault(cid, ranks)
        hosts[rank] = h["host"]
        sync[rank] = {"offset_init_ns": h["sync_init"]["offset"], "rtt_init_ns": h["sync_init"]["rtt"],
                      "offset_final_ns": h["sync_final"]["offset"] if h["sync_final"]["valid"] else None,
                      "rtt_final_ns": h["sync_final"]["rtt"] if h["sync_final"]["valid"] else None}

    if frames:
        all_ev = pd.concat(frames, ignore_index=True)
        all_ev = all_ev.sort_values(["rank", "seq"], kind="stable").reset_index(drop=True)
        done_seq = all_ev["done_seq"].to_numpy()
        events = normalise(all_ev)
    else:
        done_seq, events = np.zeros(0, dtype=np.int64), empty_events()
    mapped = {f"{k} -> {AS_CONTRACT[k] or 'dropped'}": v for k, v in counts.items() if k in AS_CONTRACT}
    versions = sorted({h["version"] for h in heads.values()})
    no_cpu = sorted(r for r, h in heads.items() if h["version"] < 2)
    if no_cpu:
        # not a problem: the trace loads and analyses as before, on wall-time bursts
        note = (f"ranks {no_cpu[:8]}{' ...' if len(no_cpu) > 8 else ''} were recorded by a tracer "
                "without CPU times (format version 1): their compute bursts are wall time, which "
                "includes any time the rank was switched out; re-record to separate the two")
    else:
        note = ""
    rtts = [v for s in sync.values() for v in (s["rtt_init_ns"], s["rtt_final_ns"]) if v]
    meta = {
        "source": str(folder), "format_version": versions[-1] if versions else VERSION,
        "format_versions": versions, "nranks": size, "records": total,
        "cpu_time": not no_cpu,
        "cpu_clock": "CLOCK_THREAD_CPUTIME_ID of the thread that made the call" if not no_cpu else None,
        # ns between reads of the CPU clock: shorter switch-outs count as running
        "cpu_interval_ns": max((h["cpu_interval"] or 0) for h in heads.values()) if not no_cpu else None,
        "cpu_time_note": note,
        "clock": "CLOCK_MONOTONIC, corrected to rank 0 by the smallest offsets the ping-pongs at Init "
                 "and Finalize allow",
        "clock_sync": sync,
        "clock_uncertainty_ns": (max(rtts) // 2) if rtts else 0,
        "calls_recorded": dict(counts), "calls_mapped": mapped,
        "tracer_flushes": flushes, "tracer_flush_ns": flush_ns,
        "thread_levels": {r: h["thread_level"] for r, h in heads.items()},
        "finalized": {r: bool(h["flags"] & FLAG_FINALIZED) for r, h in heads.items()},
        "problems": problems,
    }
    trace = Trace(events, comms, hosts, meta)
    n_bad, examples = _clock_violations(trace, done_seq)
    meta["clock_violations"] = n_bad
    meta["clock_violation_examples"] = examples
    if cache or (cache is None and total > CACHE_RECORDS and not problems):
        _write_cache(folder, trace)
    return trace


def load_run(run_dir: str | os.PathLike, strict: bool = True, cache: bool | None = None) -> Trace:
    """Load the trace of a run folder (it lives in <run_dir>/trace/). See load_dir.

    An OTF2 archive (its anchor file, or the folder holding it, and no trace/ in that folder) is
    read by hpclab.trace.otf2_read.load_archive into the same event table."""
    if not (Path(run_dir) / "trace").is_dir() and is_archive(run_dir):
        return load_archive(run_dir)
    folder = Path(run_dir) / "trace"
    if not folder.is_dir():
        raise HpclabError(f"run folder {run_dir} has no trace/ folder",
                          "submit the run with tracing on (LD_PRELOAD=build/lib/libmpitrace.so, "
                          "MPITRACE_DIR=<run_dir>/trace)")
    trace = load_dir(folder, strict=strict, cache=cache)
    trace.meta["run_dir"] = str(run_dir)
    return trace


def _read_cache(folder: Path, files: dict[int, Path]) -> Trace | None:
    pq, js = folder / CACHE_NAME, folder / (CACHE_NAME + ".json")
    if not (pq.exists() and js.exists()):
        return None
    newest = max(p.stat().st_mtime for p in files.values())
    if pq.stat().st_mtime < newest or js.stat().st_mtime < newest:
        return None
    try:
        side = json.loads(js.read_text())
        events = normalise(pd.read_parquet(pq))
    except Exception:  # a damaged cache is rebuilt from the rank files
        return None
    return Trace(events, {int(k): v for k, v in side["comms"].items()},
                 {int(k): v for k, v in side["hosts"].items()}, {**side["meta"], "cached": True})


def _write_cache(folder: Path, trace: Trace) -> None:
    ev = trace.events.copy()
    ev["completes"] = [list(c) for c in ev["completes"]]
    try:
        side = {"comms": trace.comms, "hosts": trace.hosts, "meta": trace.meta}
        write_atomic(folder / CACHE_NAME, ev.to_parquet(index=False))
        write_atomic(folder / (CACHE_NAME + ".json"), json.dumps(side, default=str))
    except OSError:
        pass  # a read-only trace folder simply has no cache
