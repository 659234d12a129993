"""Wait states (Scalasca's definitions): how long ranks sat in MPI waiting for someone.

- Late Sender: a receive (blocking Recv, the receive half of a Sendrecv, or a Wait/Waitall/Test
  that completed receive requests) entered before the matching send was entered:
  wait = min(send enter, receive-side exit) - receive-side enter, if positive. For a call that
  completes several receives only the latest sender counts.
- Late Receiver: a send (blocking Send, the send half of a Sendrecv, or a Wait that completed
  send requests) that waits until the receive is posted: min(recv post, send-side exit) - enter.
  Only a send that really waits for its receiver counts: a rendezvous message (above the eager
  limit). An eager send completes without its receiver; when one took long, its rank was
  switched out or the transport was slow, which is not a wait state. A synchronous send
  (MPI_Ssend, MPI_Issend: the events' sync column) waits for its receiver at any size.
- Wait at NxN (Allreduce) and Wait at Barrier: latest entry of the instance - own entry.
  Not counted: one-rank communicators and zero-byte Allreduces.
A call's waits are capped at its duration. The call site is the innermost enclosing user region
plus the call name. Wait states use the trace's own clocks: on a real trace they depend on the
clock-offset correction; on a replayed trace they do not.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from hpclab.trace.events import Trace
from hpclab.trace.matching import completions, match
from hpclab.trace.profile import regions

PATTERNS = ("Late Sender", "Late Receiver", "Wait at NxN", "Wait at Barrier")
# Open MPI's smallest default eager limit (btl_vader_eager_limit / btl_sm_eager_limit, 4 KiB;
# the tcp BTL's is 64 KiB): a message this small is eager on every transport it picks by default.
DEFAULT_EAGER_LIMIT = 4096


def eager_limit_of(trace: Trace, eager_limit: int | None = None) -> int:
    """The eager limit (bytes) to judge `trace` by: the one given, else the one of the network
    model it was replayed on (meta['eager_limit']), else DEFAULT_EAGER_LIMIT."""
    if eager_limit is not None:
        return int(eager_limit)
    return int(trace.meta.get("eager_limit", DEFAULT_EAGER_LIMIT))


def wait_states(trace: Trace, eager_limit: int | None = None) -> pd.DataFrame:
    """One row per (event, pattern) with a positive wait: rank, seq, call, region, callsite,
    pattern, wait_ns.

    eager_limit: messages up to this many bytes are eager and never make a Late Receiver
    (default: eager_limit_of(trace); pass this machine's, e.g. hpclab.site.ompi.eager_limit())."""
    limit = eager_limit_of(trace, eager_limit)
    ev = trace.events
    te = ev["t_enter"].to_numpy()
    tx = ev["t_exit"].to_numpy()
    call = ev["call"].to_numpy()
    n = len(ev)
    mt = match(trace)
    msg = mt.messages
    s_idx = msg["send_idx"].to_numpy()
    r_idx = msg["recv_idx"].to_numpy()
    # the event where each side actually waits: blocking call itself, or the Wait completing it
    s_at = s_idx.copy()
    r_at = r_idx.copy()
    s_pos = np.full(n, -1, dtype=np.int64)
    r_pos = np.full(n, -1, dtype=np.int64)
    s_pos[s_idx] = np.arange(len(s_idx))
    r_pos[r_idx] = np.arange(len(r_idx))
    for w, reqs in completions(trace).items():
        for j in reqs:
            if call[j] == "MPI_Isend" and s_pos[j] >= 0:
                s_at[s_pos[j]] = w
            elif call[j] == "MPI_Irecv" and r_pos[j] >= 0:
                r_at[r_pos[j]] = w
    never = np.iinfo(np.int64).min
    ls_send = np.full(n, never, dtype=np.int64)   # latest matching send entry
    lr_post = np.full(n, never, dtype=np.int64)   # latest matching recv post
    ok_r = np.isin(call[r_at], ("MPI_Recv", "MPI_Sendrecv", "MPI_Wait", "MPI_Waitall",
                                "MPI_Test", "MPI_Testall"))
    np.maximum.at(ls_send, r_at[ok_r], te[s_idx[ok_r]])
    ok_s = np.isin(call[s_at], ("MPI_Send", "MPI_Sendrecv", "MPI_Wait", "MPI_Waitall",
                                "MPI_Test", "MPI_Testall"))
    # rendezvous or synchronous: the sender waits for its receiver
    sync = ev["sync"].to_numpy()[s_idx] != 0 if "sync" in ev.columns else False
    ok_s &= (msg["bytes"].to_numpy() > limit) | sync
    np.maximum.at(lr_post, s_at[ok_s], te[r_idx[ok_s]])
    dur = tx - te
    ls = np.where(ls_send == never, 0, np.clip(np.minimum(ls_send, tx) - te, 0, None))
    ls = np.minimum(ls, dur)
    lr = np.where(lr_post == never, 0, np.clip(np.minimum(lr_post, tx) - te, 0, None))
    lr = np.minimum(lr, dur - ls)

    nxn = np.zeros(n, dtype=np.int64)
    coll = mt.coll
    inst = mt.instances
    if len(coll):
        good = inst[inst["complete"] & (inst["size"] > 1)].index
        c = coll[coll["instance"].isin(good) & coll["call"].isin(("MPI_Allreduce", "MPI_Barrier"))]
        c = c[(c["call"] == "MPI_Barrier") | (c["bytes"] > 0)]
        idx = c["idx"].to_numpy()
        latest = pd.Series(te[idx]).groupby(c["instance"].to_numpy()).transform("max").to_numpy()
        nxn[idx] = np.minimum(latest - te[idx], dur[idx])

    site = regions(trace).callsite(ev)
    rows = []
    for pattern, values, mask in (
            ("Late Sender", ls, ls > 0), ("Late Receiver", lr, lr > 0),
            ("Wait at NxN", nxn, (nxn > 0) & (call == "MPI_Allreduce")),
            ("Wait at Barrier", nxn, (nxn > 0) & (call == "MPI_Barrier"))):
        i = np.flatnonzero(mask)
        rows.append(pd.DataFrame({"rank": ev["rank"].to_numpy()[i], "seq": ev["seq"].to_numpy()[i],
                                  "call": call[i], "region": site[i], "pattern": pattern,
                                  "wait_ns": values[i]}))
    out = pd.concat(rows, ignore_index=True)
    out["callsite"] = np.where(out["region"] == "", "", out["region"] + " / ") + out["call"]
    return out.sort_values(["rank", "seq", "pattern"], kind="stable").reset_index(drop=True)


def by_rank(ws: pd.DataFrame, nranks: int | None = None) -> pd.DataFrame:
    """Rank x pattern table of total waiting (ns); every pattern is a column."""
    t = ws.pivot_table(index="rank", columns="pattern", values="wait_ns", aggfunc="sum", fill_value=0)
    t = t.reindex(columns=list(PATTERNS), fill_value=0)
    if nranks is not None:
        t = t.reindex(range(nranks), fill_value=0)
    t.columns.name = None
    return t


def by_callsite(ws: pd.DataFrame) -> pd.DataFrame:
    """Per (call site, pattern): total_ns, count, max_ns; sorted by total."""
    g = ws.groupby(["callsite", "pattern"])["wait_ns"]
    return (pd.DataFrame({"total_ns": g.sum(), "count": g.size(), "max_ns": g.max()})
            .sort_values("total_ns", ascending=False))
