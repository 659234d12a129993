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


def endpoints(ev: pd.DataFrame, codes: np.ndarray | None = None) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Send and receive endpoints of the events table: idx, comm, src, dst, tag, bytes."""
    codes = call_codes(ev) if codes is None else codes
    peer = ev["peer"].to_numpy()
    rank = ev["rank"].to_numpy()
    comm = ev["comm"].to_numpy()
    tag = ev["tag"].to_numpy()
    nbytes = ev["bytes"].to_numpy()
    idx = np.arange(len(ev))
    s = calls_in(codes, ("MPI_Send", "MPI_Isend", "MPI_Sendrecv")) & (peer >= 0)
    sends = pd.DataFrame({"idx": idx[s], "comm": comm[s], "src": rank[s], "dst": peer[s],
                          "tag": tag[s], "bytes": nbytes[s]})
    r1 = calls_in(codes, ("MPI_Recv", "MPI_Irecv")) & (peer >= 0)
    rp = ev["recv_peer"].to_numpy()
    r2 = calls_in(codes, ("MPI_Sendrecv",)) & (rp >= 0)
    r = r1 | r2
    recvs = pd.DataFrame({"idx": idx[r], "comm": comm[r],
                          "src": np.where(r2, rp, peer)[r], "dst": rank[r],
                          "tag": np.where(r2, ev["recv_tag"].to_numpy(), tag)[r],
                          "bytes": np.where(r2, ev["recv_bytes"].to_numpy(), nbytes)[r]})
    return sends, recvs


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

    sends, recvs = endpoints(ev, codes)
    sends["k"] = sends.groupby(KEY, sort=False).cumcount()
    recvs["k"] = recvs.groupby(KEY, sort=False).cumcount()
    m = sends.merge(recvs, on=KEY + ["k"], how="outer", suffixes=("_s", "_r"), indicator=True)
    lone_s = m[m["_merge"] == "left_only"]
    lone_r = m[m["_merge"] == "right_only"]
    for row in lone_s.head(max_problems).itertuples():
        prob(int(row.idx_s), f"send to rank {row.dst} (comm {row.comm}, tag {row.tag}, "
             f"{int(row.bytes_s)} B) is never received")
    for row in lone_r.head(max_problems).itertuples():
        prob(int(row.idx_r), f"receive from rank {row.src} (comm {row.comm}, tag {row.tag}) "
             "has no matching send")
    both = m[m["_merge"] == "both"]
    messages = pd.DataFrame({
        "send_idx": both["idx_s"].to_numpy(np.int64), "recv_idx": both["idx_r"].to_numpy(np.int64),
        "comm": both["comm"].to_numpy(np.int64), "src": both["src"].to_numpy(np.int64),
        "dst": both["dst"].to_numpy(np.int64), "tag": both["tag"].to_numpy(np.int64),
        "bytes": both["bytes_s"].to_numpy(np.int64)})
    for row in messages[both["bytes_s"].to_numpy() > both["bytes_r"].to_numpy()].head(5).itertuples():
        prob(row.recv_idx, f"receives fewer bytes than rank {row.src} sent (message truncated)")
    messages = messages.sort_values("send_idx", kind="stable").reset_index(drop=True)

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
