"""Pair sends with receives and group collective calls into instances, as MPI does.

Point-to-point matching follows MPI's rule: on one (communicator, source, destination, tag) the
k-th send matches the k-th receive (non-overtaking, FIFO). The trace records the matched source
and tag of every receive, so wildcard receives match as they did in the run. Sends and receives
to MPI_PROC_NULL are no-ops and never match. A Sendrecv has a send endpoint and a receive
endpoint. Collectives: the k-th collective call on a communicator of each member belongs to
instance k of that communicator; all members must make the same call with the same root.

Matching does not depend on times, so it is done once, vectorised, and shared by the replay,
the wait-state analysis and the message matrix.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from hpclab.trace.events import CALLS, COLLECTIVES, COMM_CREATE, Problem, Trace, call_codes, calls_in

KEY = ["comm", "src", "dst", "tag"]


@dataclass
class Matching:
    """messages: one row per matched message: send_idx, recv_idx (event row numbers), comm, src,
    dst, tag, bytes. coll: one row per collective event: idx, instance, comm, call, root, rank,
    bytes. instances: per instance: comm, call, root, size, complete (all members present).
    problems: unmatched sends/receives and inconsistent collectives, each naming rank and event."""

    messages: pd.DataFrame
    coll: pd.DataFrame
    instances: pd.DataFrame
    problems: list[Problem]


def _endpoint_arrays(ev: pd.DataFrame, codes: np.ndarray) -> tuple[dict, dict]:
    """Send and receive endpoints as dicts of arrays (idx, comm, src, dst, tag, bytes), each in
    event order. Only the endpoint rows are gathered: cheaper than masking whole columns."""
    peer = ev["peer"].to_numpy()
    rank = ev["rank"].to_numpy()
    comm = ev["comm"].to_numpy()
    tag = ev["tag"].to_numpy()
    nbytes = ev["bytes"].to_numpy()
    rp = ev["recv_peer"].to_numpy()
    s = np.flatnonzero(calls_in(codes, ("MPI_Send", "MPI_Isend", "MPI_Sendrecv")) & (peer >= 0))
    sends = {"idx": s, "comm": comm[s], "src": rank[s], "dst": peer[s], "tag": tag[s], "bytes": nbytes[s]}
    r = np.flatnonzero((calls_in(codes, ("MPI_Recv", "MPI_Irecv")) & (peer >= 0))
                       | (calls_in(codes, ("MPI_Sendrecv",)) & (rp >= 0)))
    sr = calls_in(codes[r], ("MPI_Sendrecv",))  # a Sendrecv's receive part has its own columns
    recvs = {"idx": r, "comm": comm[r], "src": np.where(sr, rp[r], peer[r]), "dst": rank[r],
             "tag": np.where(sr, ev["recv_tag"].to_numpy()[r], tag[r]),
             "bytes": np.where(sr, ev["recv_bytes"].to_numpy()[r], nbytes[r])}
    return sends, recvs


def endpoints(ev: pd.DataFrame, codes: np.ndarray | None = None) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Send and receive endpoints of the events table: idx, comm, src, dst, tag, bytes."""
    sends, recvs = _endpoint_arrays(ev, call_codes(ev) if codes is None else codes)
    return pd.DataFrame(sends), pd.DataFrame(recvs)


def _key_codes(sends: dict, recvs: dict) -> np.ndarray:
    """One int64 per endpoint (sends, then receives) ordered as its (comm, src, dst, tag) key
    is in lexicographic order: the key packed in mixed radix, or its rank among all keys if
    the packed number could overflow."""
    cols = [np.concatenate([sends[c], recvs[c]]) for c in KEY]
    if len(cols[0]) == 0:
        return cols[0]
    lo = [c.min() for c in cols]
    span = [int(c.max()) - int(m) + 1 for c, m in zip(cols, lo)]
    if np.prod([float(x) for x in span]) < 2.0**62:
        code = np.zeros(len(cols[0]), dtype=np.int64)
        for c, m, w in zip(cols, lo, span):
            code = code * w + (c - m)
        return code
    return np.unique(np.stack(cols, axis=1), axis=0, return_inverse=True)[1].reshape(-1).astype(np.int64)


def _pair(sends: dict, recvs: dict):
    """MPI's FIFO rule, vectorised: on each key, the k-th send (in event order) with the k-th
    receive. Returns (send rows, receive rows) of the matched pairs and the rows of the lone
    sends and lone receives, each ordered by (key, k) as a sorted merge on KEY + [k] would be."""
    S = len(sends["idx"])
    code = _key_codes(sends, recvs)
    # stable: within one key the sends come first, each side in event order
    order = np.argsort(code, kind="stable")
    sc = code[order]
    n = len(sc)
    new = np.r_[True, sc[1:] != sc[:-1]] if n else np.zeros(0, dtype=bool)
    start = np.flatnonzero(new)
    size = np.diff(np.r_[start, n])
    is_send = order < S
    ns = np.add.reduceat(is_send.astype(np.int64), start) if n else np.zeros(0, dtype=np.int64)
    nr = size - ns
    both = np.minimum(ns, nr)

    def runs(first, count):
        """Positions first[g] .. first[g] + count[g] - 1 for every group g, in group order."""
        total = int(count.sum())
        base = np.repeat(first - (np.cumsum(count) - count), count)
        return base + np.arange(total)

    ps = order[runs(start, both)]                       # k-th send of each key ...
    pr = order[runs(start + ns, both)] - S              # ... with the k-th receive
    lone_s = order[runs(start + both, ns - both)]
    lone_r = order[runs(start + ns + both, nr - both)] - S
    return ps, pr, lone_s, lone_r


def match(trace: Trace, max_problems: int = 20) -> Matching:
    """Match the point-to-point messages and collective instances of a trace (see module doc)."""
    ev = trace.events
    rank = ev["rank"].to_numpy()
    seq = ev["seq"].to_numpy()
    codes = call_codes(ev)
    call = ev["call"]
    problems: list[Problem] = []

    def prob(i, what, fatal=False):
        if len(problems) < max_problems:
            problems.append(Problem(fatal, int(rank[i]), int(seq[i]), str(call.iat[i]), what))

    sends, recvs = _endpoint_arrays(ev, codes)
    ps, pr, lone_s, lone_r = _pair(sends, recvs)
    for j in lone_s[:max_problems].tolist():
        prob(int(sends["idx"][j]), f"send to rank {sends['dst'][j]} (comm {sends['comm'][j]}, "
             f"tag {sends['tag'][j]}, {int(sends['bytes'][j])} B) is never received")
    for j in lone_r[:max_problems].tolist():
        prob(int(recvs["idx"][j]), f"receive from rank {recvs['src'][j]} (comm {recvs['comm'][j]}, "
             f"tag {recvs['tag'][j]}) has no matching send")
    cut = np.flatnonzero(sends["bytes"][ps] > recvs["bytes"][pr])[:5]
    for j in cut.tolist():
        prob(int(recvs["idx"][pr[j]]), f"receives fewer bytes than rank {sends['src'][ps[j]]} sent "
             "(message truncated)")
    bysend = np.argsort(sends["idx"][ps], kind="stable")
    ps, pr = ps[bysend], pr[bysend]
    messages = pd.DataFrame({
        "send_idx": sends["idx"][ps].astype(np.int64), "recv_idx": recvs["idx"][pr].astype(np.int64),
        "comm": sends["comm"][ps].astype(np.int64), "src": sends["src"][ps].astype(np.int64),
        "dst": sends["dst"][ps].astype(np.int64), "tag": sends["tag"][ps].astype(np.int64),
        "bytes": sends["bytes"][ps].astype(np.int64)})

    c = calls_in(codes, COLLECTIVES + COMM_CREATE)
    coll = pd.DataFrame({"idx": np.flatnonzero(c), "comm": ev["comm"].to_numpy()[c], "rank": rank[c],
                         "call": np.asarray(CALLS, dtype=object)[codes[c]], "root": ev["root"].to_numpy()[c],
                         "bytes": ev["bytes"].to_numpy()[c]})
    coll["k"] = coll.groupby(["comm", "rank"], sort=False).cumcount()
    coll["instance"] = coll.groupby(["comm", "k"], sort=True).ngroup()
    g = coll.groupby("instance", sort=True)
    inst = pd.DataFrame({"comm": g["comm"].first(), "call": g["call"].first(), "root": g["root"].first(),
                         "present": g["rank"].size(), "calls": g["call"].nunique(),
                         "roots": g["root"].nunique(), "first": g["idx"].first()})
    members = {cid: len(rs) for cid, rs in trace.comms.items()}
    seen = coll.groupby("comm")["rank"].nunique().to_dict()
    inst["size"] = [members.get(cm, seen.get(cm, 0)) for cm in inst["comm"]]
    inst["complete"] = (inst["present"] == inst["size"]) & (inst["calls"] == 1) & (inst["roots"] == 1)
    for iid, row in inst[~inst["complete"]].head(max_problems).iterrows():
        sub = coll[coll["instance"] == iid]
        if row["calls"] > 1 or row["roots"] > 1:
            kinds = ", ".join(f"rank {r}: {cl} root {ro}" for r, cl, ro in
                              zip(sub["rank"].head(4), sub["call"].head(4), sub["root"].head(4)))
            prob(int(row["first"]), f"collective #{iid} on comm {row['comm']} mixes calls or roots ({kinds})")
        else:
            absent = sorted(set(trace.comms.get(row["comm"], [])) - set(sub["rank"]))[:8]
            prob(int(row["first"]), f"collective on comm {row['comm']} reached by {row['present']} of "
                 f"{row['size']} ranks" + (f"; missing ranks {absent}" if absent else ""))
    return Matching(messages, coll, inst.drop(columns=["calls", "roots"]), problems)


def completions(trace: Trace) -> dict[int, list[int]]:
    """Wait/Waitall/Test* event row -> the Isend/Irecv event rows whose requests it completed.

    Request ids are per rank; an id names the latest Isend/Irecv that used it and is consumed
    by the call that completes it. Ids completed without a matching Isend/Irecv are skipped."""
    ev = trace.events
    call = ev["call"].to_numpy()
    sel = np.flatnonzero(np.isin(call, ("MPI_Isend", "MPI_Irecv", "MPI_Wait", "MPI_Waitall",
                                        "MPI_Test", "MPI_Testall")))
    rank = ev["rank"].to_numpy()
    req = ev["req"].to_numpy()
    comp = ev["completes"].to_numpy()
    live: dict = {}
    out: dict[int, list[int]] = {}
    for i in sel.tolist():
        c = call[i]
        if c == "MPI_Isend" or c == "MPI_Irecv":
            live[(rank[i], req[i])] = i
        elif comp[i]:
            got = [j for j in (live.pop((rank[i], q), None) for q in comp[i]) if j is not None]
            if got:
                out[i] = got
    return out
