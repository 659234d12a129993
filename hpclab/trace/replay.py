"""Replay a trace on a network model: keep the measured compute, recompute every MPI call.

Compute bursts (the gaps between consecutive events of a rank) keep their measured durations;
the time spent inside MPI comes from the model. All ranks start at time 0, so the result does
not depend on clock offsets between ranks. Rules (those of Dimemas-like replayers):

- eager send (bytes <= eager limit): completes at once; the message arrives at t_send + xfer;
- rendezvous send: the transfer starts at max(t_send, t_recv_posted) and ends xfer later, which
  is when both the send and the receive complete;
- receive: completes at max(post, arrival); Isend/Irecv return at once; Wait/Waitall/Test*
  (those that completed requests) end at the latest completion of their requests;
- Sendrecv = Irecv + Isend + Waitall;
- Allreduce, Barrier, Comm_split/dup, Cart_create: all members leave at the last arrival plus
  2 ceil(log2 P) (L + m/BW) (zero on the ideal network); Bcast: others leave at
  max(own entry, root entry + ceil(log2 P)(L + m/BW)); Reduce: the root leaves at the last
  arrival plus that cost, the others after one transfer to the root;
- Init, Finalize, region markers and no-ops (MPI_PROC_NULL, a Test that completed nothing) take
  no time.

The engine is event driven: one cursor per rank runs until it needs something that has not
happened yet (a send not yet posted, a collective not yet complete), then parks on it; whoever
posts that wakes it. If nothing is runnable while ranks still have events, the ranks are
deadlocked under the model (e.g. a ring of blocking rendezvous sends) and HpclabError lists
them. Matching is precomputed (hpclab.trace.matching), so the loop only does arithmetic.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from hpclab.errors import HpclabError
from hpclab.trace.events import CALLS, Trace, call_codes, validate
from hpclab.trace.matching import match
from hpclab.trace.model import IDEAL, NetworkModel

LOCAL, SEND, RECV, ISEND, IRECV, WAIT, SENDRECV, COLL = range(8)
ALL, BCAST, REDUCE = range(3)
_KIND = {"MPI_Send": SEND, "MPI_Recv": RECV, "MPI_Isend": ISEND, "MPI_Irecv": IRECV,
         "MPI_Wait": WAIT, "MPI_Waitall": WAIT, "MPI_Test": WAIT, "MPI_Testall": WAIT,
         "MPI_Sendrecv": SENDRECV, "MPI_Barrier": COLL, "MPI_Allreduce": COLL, "MPI_Bcast": COLL,
         "MPI_Reduce": COLL, "MPI_Cart_create": COLL, "MPI_Comm_split": COLL, "MPI_Comm_dup": COLL}
_CKIND = {"MPI_Bcast": BCAST, "MPI_Reduce": REDUCE}
# kind per position in CALLS, plus LOCAL for unknown names (code -1 indexes the last slot)
_KIND_OF_CODE = np.array([_KIND.get(c, LOCAL) for c in CALLS] + [LOCAL], dtype=np.int64)


class _Plan:
    """Everything the replay loop needs, as plain Python lists (fast to index in a loop)."""

    def __init__(self, trace: Trace, model: NetworkModel, strict: bool):
        ev = trace.events
        n = len(ev)
        validate(trace)
        mt = match(trace)
        self.problems = mt.problems
        if strict and mt.problems:
            p = mt.problems[0]
            raise HpclabError(f"cannot replay: {p}" + (f" (and {len(mt.problems) - 1} more)"
                                                       if len(mt.problems) > 1 else ""),
                              "replay with strict=False to treat unmatched calls as no-ops")
        rank = ev["rank"].to_numpy()
        te = ev["t_enter"].to_numpy()
        tx = ev["t_exit"].to_numpy()
        burst = np.zeros(n, dtype=np.int64)
        same = rank[1:] == rank[:-1]
        burst[1:] = np.where(same, te[1:] - tx[:-1], 0)
        np.maximum(burst, 0, out=burst)  # clock glitches inside a rank must not run time backwards
        kind = _KIND_OF_CODE[call_codes(ev)]

        msgs = mt.messages
        M = len(msgs)
        host = trace.hosts
        src = msgs["src"].to_numpy()
        dst = msgs["dst"].to_numpy()
        if host:  # a node number per rank; a rank without a host is a node of its own
            top = int(max(src.max(initial=0), dst.max(initial=0), max(host, default=0))) + 1
            names: dict = {}
            node = np.array([names.setdefault(host.get(r, ("rank", r)), len(names))
                             for r in range(top)], dtype=np.int64)
            same_node = node[src] == node[dst]
        else:
            same_node = src == dst
        nbytes = msgs["bytes"].to_numpy()
        xfer = model.p2p_ns(nbytes, same_node)
        ms = np.full(n, -1, dtype=np.int64)
        mr = np.full(n, -1, dtype=np.int64)
        ms[msgs["send_idx"].to_numpy()] = np.arange(M)
        mr[msgs["recv_idx"].to_numpy()] = np.arange(M)
        # unmatched blocking/immediate p2p calls become no-ops (reported in self.problems)
        p2p = np.isin(kind, (SEND, ISEND, RECV, IRECV))
        kind[p2p & (ms < 0) & (mr < 0)] = LOCAL
        kind[(kind == SENDRECV) & (ms < 0) & (mr < 0)] = LOCAL

        # requests: which message (and which side of it) each Wait/Test completes
        deps: dict[int, list] = {}
        sel = np.flatnonzero(np.isin(kind, (ISEND, IRECV, WAIT)))
        reqs = ev["req"].to_numpy()
        comp = ev["completes"].to_numpy()
        live: dict = {}
        for i in sel.tolist():
            k = kind[i]
            if k == WAIT:
                r = rank[i]
                d = []
                for q in comp[i]:
                    hit = live.pop((r, q), None)
                    if hit is not None:
                        d.append(hit)
                if d:
                    deps[i] = d
                else:
                    kind[i] = LOCAL
            elif k == ISEND:
                live[(rank[i], reqs[i])] = (int(ms[i]), 0)
            else:
                live[(rank[i], reqs[i])] = (int(mr[i]), 1)

        # collectives
        coll = mt.coll
        inst = mt.instances
        cid = np.full(n, -1, dtype=np.int64)
        cid[coll["idx"].to_numpy()] = coll["instance"].to_numpy()
        incomplete = ~inst["complete"].to_numpy(bool)
        if incomplete.any():
            bad = np.isin(cid, np.flatnonzero(incomplete))
            kind[bad] = LOCAL
        comms = trace.comms
        ccost, cleaf, ckind = [], [], []
        csize = inst["size"].tolist()
        for comm, call, size, b in zip(inst["comm"].tolist(), inst["call"].tolist(), csize,
                                       coll.groupby("instance")["bytes"].max().tolist()):
            members = comms.get(comm, [])
            one_node = len({host.get(r, r) for r in members}) <= 1 if host else size <= 1
            ck = _CKIND.get(call, ALL)
            ckind.append(ck)
            ccost.append(model.collective_ns(b, size, one_node, 2 if ck == ALL else 1))
            cleaf.append(int(model.p2p_ns(np.array([b]), np.array([one_node]))[0]))

        self.n = n
        self.kind = kind.tolist()
        self.burst = burst.tolist()
        self.ms = ms.tolist()
        self.mr = mr.tolist()
        self.xfer = xfer.tolist()
        self.eager = (nbytes <= model.eager_limit).tolist()
        self.deps = deps
        self.cid = cid.tolist()
        self.root = ev["root"].tolist()
        self.rank = rank.tolist()
        self.csize, self.ccost, self.cleaf, self.ckind = csize, ccost, cleaf, ckind
        self.M = M
        starts = np.flatnonzero(np.r_[True, ~same]) if n else np.array([], dtype=np.int64)
        self.ranks = rank[starts].tolist()
        self.starts = starts.tolist()
        self.ends = np.r_[starts[1:], n].tolist() if n else []
        self.msgs = msgs


def replay(trace: Trace, model: NetworkModel = IDEAL, *, strict: bool = False) -> Trace:
    """Replay `trace` on `model` (default: the ideal network).

    Returns a new Trace with the same events and side tables, t_enter/t_exit replaced by the
    replayed times (ns, every rank starting at 0), meta['model'] set and meta['replay_problems']
    listing calls that were treated as no-ops because they had no partner (strict=True raises
    HpclabError instead). Raises HpclabError naming the blocked ranks if the model deadlocks."""
    plan = _Plan(trace, model, strict)
    enter, exit_ = _run(plan, trace)
    ev = trace.events.copy()
    ev["t_enter"] = np.asarray(enter, dtype=np.int64)
    ev["t_exit"] = np.asarray(exit_, dtype=np.int64)
    return trace.with_events(ev, model=model.name, replay_problems=[str(p) for p in plan.problems])


def _run(P: _Plan, trace: Trace):
    n = P.n
    kind, burst, ms, mr, xfer, eager = P.kind, P.burst, P.ms, P.mr, P.xfer, P.eager
    deps, cid, root, rank = P.deps, P.cid, P.root, P.rank
    csize, ccost, cleaf, ckind = P.csize, P.ccost, P.cleaf, P.ckind
    enter = [0] * n
    exit_ = [0] * n
    spost = [-1] * P.M
    rpost = [-1] * P.M
    mwait: list = [None] * P.M
    nI = len(csize)
    arrived = [0] * nI
    cmax = [-1] * nI
    croot = [-1] * nI
    cwait: list = [[] for _ in range(nI)]
    R = len(P.starts)
    pos = list(P.starts)
    ends = P.ends
    tcur = [0] * R
    entered = [False] * R
    ready = list(range(R))
    while ready:
        r = ready.pop()
        i = pos[r]
        end = ends[r]
        t = tcur[r]
        resumed = entered[r]
        blocked = -1  # message id to park on; -2 - c: collective instance c
        while i < end:
            k = kind[i]
            if resumed:
                te = enter[i]
                resumed = False
            else:
                te = t + burst[i]
                enter[i] = te
                if k == LOCAL:
                    exit_[i] = t = te
                    i += 1
                    continue
                # post what this call offers to others, and wake whoever waits for it
                if k == SEND or k == ISEND:
                    m = ms[i]
                    spost[m] = te
                    w = mwait[m]
                    if w is not None:
                        ready.extend(w)
                        mwait[m] = None
                elif k == RECV or k == IRECV:
                    m = mr[i]
                    rpost[m] = te
                    w = mwait[m]
                    if w is not None:
                        ready.extend(w)
                        mwait[m] = None
                elif k == SENDRECV:
                    for m, post in ((ms[i], spost), (mr[i], rpost)):
                        if m >= 0:
                            post[m] = te
                            w = mwait[m]
                            if w is not None:
                                ready.extend(w)
                                mwait[m] = None
                elif k == COLL:
                    c = cid[i]
                    a = arrived[c] = arrived[c] + 1
                    if te > cmax[c]:
                        cmax[c] = te
                    isroot = root[i] == rank[i]
                    if isroot:
                        croot[c] = te
                    if cwait[c] and (a == csize[c] or (isroot and ckind[c] == BCAST)):
                        ready.extend(cwait[c])
                        cwait[c] = []
            # completion
            if k == SEND:
                m = ms[i]
                if eager[m]:
                    x = te
                else:
                    rp = rpost[m]
                    if rp < 0:
                        blocked = m
                        break
                    x = (te if te > rp else rp) + xfer[m]
            elif k == RECV:
                m = mr[i]
                sp = spost[m]
                if sp < 0:
                    blocked = m
                    break
                if eager[m]:
                    x = sp + xfer[m]
                    if x < te:
                        x = te
                else:
                    x = (te if te > sp else sp) + xfer[m]
            elif k == ISEND or k == IRECV:
                x = te
            elif k == COLL:
                c = cid[i]
                ck = ckind[c]
                if ck == ALL:
                    if arrived[c] < csize[c]:
                        blocked = -2 - c
                        break
                    x = cmax[c] + ccost[c]
                elif ck == BCAST:
                    if root[i] == rank[i]:
                        x = te + ccost[c]
                    else:
                        rt = croot[c]
                        if rt < 0:
                            blocked = -2 - c
                            break
                        x = rt + ccost[c]
                        if x < te:
                            x = te
                else:  # REDUCE
                    if root[i] == rank[i]:
                        if arrived[c] < csize[c]:
                            blocked = -2 - c
                            break
                        x = cmax[c] + ccost[c]
                    else:
                        x = te + cleaf[c]
            else:  # WAIT, SENDRECV: the latest completion of the parts
                x = te
                parts = deps[i] if k == WAIT else (((ms[i], 0),) if ms[i] >= 0 else ()) + (
                    ((mr[i], 1),) if mr[i] >= 0 else ())
                for m, side in parts:
                    sp = spost[m]
                    rp = rpost[m]
                    if side == 0 and eager[m]:
                        d = sp
                    else:
                        if sp < 0 or rp < 0:
                            blocked = m
                            break
                        if eager[m]:
                            d = sp + xfer[m]
                            if d < rp:
                                d = rp
                        else:
                            d = (sp if sp > rp else rp) + xfer[m]
                    if d > x:
                        x = d
                if blocked != -1:
                    break
            exit_[i] = t = x
            i += 1
        pos[r] = i
        tcur[r] = t
        if blocked != -1:
            entered[r] = True
            if blocked >= 0:
                w = mwait[blocked]
                if w is None:
                    mwait[blocked] = [r]
                else:
                    w.append(r)
            else:
                cwait[-2 - blocked].append(r)
        else:
            entered[r] = False
    stuck = [r for r in range(R) if pos[r] < ends[r]]
    if stuck:
        _deadlock(P, trace, stuck, pos)
    return enter, exit_


def _deadlock(P: _Plan, trace: Trace, stuck: list, pos: list):
    ev = trace.events
    blocked = []
    for r in stuck:
        i = pos[r]
        row = ev.iloc[i]
        what = f"rank {row['rank']} seq {row['seq']} {row['call']}"
        if row["peer"] >= 0:
            what += f" (peer {row['peer']}, tag {row['tag']}, {row['bytes']} B)"
        blocked.append({"rank": int(row["rank"]), "seq": int(row["seq"]), "call": row["call"],
                        "peer": int(row["peer"]), "bytes": int(row["bytes"]), "text": what})
    shown = "; ".join(b["text"] for b in blocked[:8])
    more = f" and {len(blocked) - 8} more" if len(blocked) > 8 else ""
    err = HpclabError(
        f"deadlock under the network model: {len(blocked)} rank(s) blocked forever: {shown}{more}",
        "blocking sends above the eager limit wait for their receive (rendezvous); reorder the "
        "sends and receives, use MPI_Sendrecv or Isend/Irecv, or raise the model's eager limit")
    err.blocked = blocked
    raise err


def replay_times(trace: Trace, model: NetworkModel = IDEAL) -> pd.DataFrame:
    """Per rank: end time of the replayed run (ns). A convenience for quick looks."""
    rt = replay(trace, model)
    return rt.events.groupby("rank")["t_exit"].max().rename("t_end_ns").to_frame()
