"""Replay a trace on a network model: keep the measured compute, recompute every MPI call.

Compute bursts (the gaps between consecutive events of a rank) keep their measured durations;
the time spent inside MPI comes from the model. As Dimemas does, a burst lasts its CPU time
where the trace recorded one (bursts="cpu", the default): the time the rank actually ran, so a
trace recorded with more ranks than cores replays as the run on dedicated cores; bursts="wall"
replays the wall-time gaps (which include time the rank was switched out). Traces without CPU
times (an old tracer, built traces) replay on wall time either way. All ranks start at time 0,
so the result does not depend on clock offsets between ranks. Rules (those of Dimemas-like
replayers):

- eager send (bytes <= eager limit): completes at once; the message arrives at t_send + xfer;
- rendezvous send (above the eager limit, or synchronous: MPI_Ssend/Issend): the transfer
  starts at max(t_send, t_recv_posted) and ends xfer later, which is when both the send and
  the receive complete;
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
There are two loops, `_run` (no contention) and `_run_links` (shared links, in time order);
both end a Wait with `_wait_end` and a collective with `_Collectives`.
"""

from __future__ import annotations

import heapq
from array import array

import numpy as np
import pandas as pd

from hpclab.core.errors import HpclabError
from hpclab.trace.events import CALLS, CPU_COLUMNS, Trace, bursts as event_bursts, call_codes, validate
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

# What the loop dispatches on, per step (eager or rendezvous decided beforehand): NOW posts one
# side of a message and completes at once (eager Send, Isend, Irecv); RSEND/RRECV post and wait
# for the other side; ERECV waits for the send; a collective arrives, then leaves.
NOW, RSEND, ERECV, RRECV, XWAIT, XSENDRECV, ARRIVE, LEAVE = range(8)
# step code by [kind][eager message][first step of its event]; LOCAL never becomes a step
_STEP_CODE = np.full((8, 2, 2), XWAIT, dtype=np.int64)
_STEP_CODE[[ISEND, IRECV]] = NOW
_STEP_CODE[SEND] = [[RSEND, RSEND], [NOW, NOW]]
_STEP_CODE[RECV] = [[RRECV, RRECV], [ERECV, ERECV]]
_STEP_CODE[SENDRECV] = XSENDRECV
_STEP_CODE[COLL] = [[LEAVE, ARRIVE], [LEAVE, ARRIVE]]
# How a Wait/Sendrecv part completes: own eager send (at its post), eager message, rendezvous
OWN, EAGER, RDV = range(3)


class _Plan:
    """Everything the replay loop needs, as plain Python lists (fast to index in a loop).

    The loop only sees the events that interact with other ranks ("active"): a local event
    (region marker, Init, no-op) just adds its burst, so it is folded into the burst of the next
    active event and its times are filled in afterwards with numpy (see expand()). Each message
    has two slots in one list: 2m (send side posted) and 2m + 1 (receive side posted), so a
    rendezvous call's partner slot is its own slot ^ 1.

    Built in steps, each a function below: the messages' costs (_messages), the requests each
    Wait completes (_requests), the collectives' costs (_collectives), the steps and their
    operands (_steps, _operands), the parts each Wait and Sendrecv waits for (_wait_parts). A
    call those steps find nothing for (unmatched, a Wait that completes nothing, an incomplete
    collective) becomes LOCAL: a no-op."""

    def __init__(self, trace: Trace, model: NetworkModel, strict: bool, bursts: str = "cpu"):
        ev = trace.events
        validate(trace)
        mt = match(trace)
        self.problems = mt.problems
        if strict and mt.problems:
            p = mt.problems[0]
            raise HpclabError(f"cannot replay: {p}" + (f" (and {len(mt.problems) - 1} more)"
                                                       if len(mt.problems) > 1 else ""),
                              "replay with strict=False to treat unmatched calls as no-ops")
        rank = ev["rank"].to_numpy()
        # CPU bursts where recorded; negative gaps (clock glitches) must not run time backwards
        burst, on_cpu = event_bursts(ev, bursts)
        self.cpu_bursts = int(on_cpu.sum())
        kind = _KIND_OF_CODE[call_codes(ev)]

        msgs = mt.messages
        M = len(msgs)
        src_node, dst_node, xfer, eager = _messages(trace, msgs, model)
        ms = np.full(len(ev), -1, dtype=np.int64)  # event -> the message it sends (-1: none)
        mr = np.full(len(ev), -1, dtype=np.int64)  # event -> the message it receives
        ms[msgs["send_idx"].to_numpy()] = np.arange(M)
        mr[msgs["recv_idx"].to_numpy()] = np.arange(M)
        # unmatched blocking/immediate p2p calls become no-ops (reported in self.problems)
        p2p = np.isin(kind, (SEND, ISEND, RECV, IRECV))
        kind[p2p & (ms < 0) & (mr < 0)] = LOCAL
        kind[(kind == SENDRECV) & (ms < 0) & (mr < 0)] = LOCAL
        deps = _requests(ev, kind, rank, ms, mr)
        cid, self.csize, self.ccost, self.cleaf, self.ckind = _collectives(trace, mt, model, kind)

        act = np.flatnonzero(kind != LOCAL)
        cum = _rank_cumsum(burst, rank)
        se, first, start, sburst = _steps(kind[act], act, rank, cum)
        ks, msa, mra = kind[se], ms[se], mr[se]  # per step: its event's kind and messages
        code, slot, xf = _operands(ks, first, msa, mra, eager, xfer, cid[se],
                                   ev["root"].to_numpy()[se] == rank[se])
        self.slot = slot.tolist()
        self.xf = xf.tolist()
        self.kind = code.tolist()
        self.burst = sburst.tolist()
        self.posts, self.parts = _wait_parts(ks, se, msa, mra, deps, eager, xfer)
        self.M = M
        # per message, for the shared-link engine (_run_links): eager, transfer time, the
        # nodes it leaves and enters (-1 -1: it stays on its node and uses no link)
        if model.links:
            self.m_eager = eager.tolist()
            self.m_cost = xfer.tolist()
            inter = src_node != dst_node
            self.m_out = np.where(inter, src_node, -1).tolist()
            self.m_in = np.where(inter, dst_node, -1).tolist()
            self.nnodes = int(max(src_node.max(initial=-1), dst_node.max(initial=-1))) + 1
        starts = np.flatnonzero(start)
        self.starts = starts.tolist()
        self.ends = np.r_[starts[1:], len(se)].tolist()
        # for expand() and the deadlock report
        self.n, self.rank, self.cum, self.act = len(ev), rank, cum, act
        self.step_event, self.step_start, self.step_first, self.step_burst = se, start, first, sburst

    def expand(self, exit_: array) -> tuple[np.ndarray, np.ndarray]:
        """Enter and exit times of every event from the exit times of the steps.

        An event enters after its burst, counted from the exit of the previous step of its rank
        (0 at the start), and exits when its last step does. A local event enters and exits at
        the exit of the last active event before it on its rank plus the bursts since. Integer
        arithmetic, so exactly what stepping through the events one by one would give."""
        n, act, rank, cum = self.n, self.act, self.rank, self.cum
        xs = np.frombuffer(exit_, dtype=np.int64) if len(exit_) else np.zeros(0, dtype=np.int64)
        before = np.where(self.step_start, 0, np.r_[0, xs[:-1]] if len(xs) else xs)
        first = self.step_first
        last = np.r_[first[1:], True] if len(xs) else first
        t_in = np.zeros(n, dtype=np.int64)
        t_out = np.zeros(n, dtype=np.int64)
        t_in[act] = (before + self.step_burst)[first]
        t_out[act] = xs[last]
        # local events: from the last active event at or before them on the same rank
        la = np.full(n, -1, dtype=np.int64)
        la[act] = act
        la = np.maximum.accumulate(la)
        lp = np.maximum(la, 0)
        t = np.where((la >= 0) & (rank[lp] == rank), t_out[lp] - cum[lp], 0) + cum
        local = np.ones(n, dtype=bool)
        local[act] = False
        t_in[local] = t[local]
        t_out[local] = t[local]
        return t_in, t_out


def _messages(trace: Trace, msgs: pd.DataFrame, model: NetworkModel):
    """Per matched message: the node it leaves and the node it enters (its ranks when the trace
    names no hosts; a rank without a host is a node of its own), its transfer time on `model`
    (ns) and whether it goes eager (at most the eager limit of its transport, inside a node or
    between nodes, and not a synchronous send). Returns four arrays."""
    host = trace.hosts
    src = msgs["src"].to_numpy()
    dst = msgs["dst"].to_numpy()
    if host:  # a node number per rank
        top = int(max(src.max(initial=0), dst.max(initial=0), max(host, default=0))) + 1
        names: dict = {}
        node = np.array([names.setdefault(host.get(r, ("rank", r)), len(names))
                         for r in range(top)], dtype=np.int64)
        src_node, dst_node = node[src], node[dst]
    else:
        src_node, dst_node = src, dst
    same_node = src_node == dst_node
    nbytes = msgs["bytes"].to_numpy()
    xfer = model.p2p_ns(nbytes, same_node)
    eager = nbytes <= np.where(same_node, model.eager_limit, model.inter_eager)
    ev = trace.events
    if "sync" in ev.columns:  # a synchronous send waits for its receive at any size
        eager &= ev["sync"].to_numpy()[msgs["send_idx"].to_numpy()] == 0
    return src_node, dst_node, xfer, eager


def _requests(ev: pd.DataFrame, kind: np.ndarray, rank: np.ndarray, ms: np.ndarray,
              mr: np.ndarray) -> dict[int, list]:
    """Which message, and which side of it (0 send, 1 receive), each Wait/Test completes:
    {event row: [(message, side), ...]}, following each rank's requests from its Isend/Irecv
    to the Wait that names them. A Wait that completes none becomes LOCAL in `kind`."""
    deps: dict[int, list] = {}
    sel = np.flatnonzero(np.isin(kind, (ISEND, IRECV, WAIT)))
    if not len(sel):
        return deps
    k_sel = kind[sel].tolist()
    r_sel = rank[sel].tolist()
    q_sel = ev["req"].to_numpy()[sel].tolist()
    c_sel = ev["completes"].to_numpy()[sel].tolist()
    ms_sel = ms[sel].tolist()
    mr_sel = mr[sel].tolist()
    live: dict = {}
    for i, k, r, q, done, s, m in zip(sel.tolist(), k_sel, r_sel, q_sel, c_sel, ms_sel, mr_sel):
        if k == WAIT:
            d = []
            for c in done:
                hit = live.pop((r, c), None)
                if hit is not None:
                    d.append(hit)
            if d:
                deps[i] = d
            else:
                kind[i] = LOCAL
        elif k == ISEND:
            live[(r, q)] = (s, 0)
        else:
            live[(r, q)] = (m, 1)
    return deps


def _collectives(trace: Trace, mt, model: NetworkModel, kind: np.ndarray):
    """The collective instances: per event its instance (-1: none), and per instance its size,
    its cost (ns: from the last arrival for Allreduce and the like, from the root's for Bcast
    and Reduce's root), the cost of one transfer to the root (Reduce's others) and its kind
    (ALL, BCAST, REDUCE). The calls of an incomplete instance become LOCAL in `kind`."""
    coll = mt.coll
    inst = mt.instances
    cid = np.full(len(kind), -1, dtype=np.int64)
    cid[coll["idx"].to_numpy()] = coll["instance"].to_numpy()
    incomplete = ~inst["complete"].to_numpy(bool)
    if incomplete.any():
        bad = np.isin(cid, np.flatnonzero(incomplete))
        kind[bad] = LOCAL
    comms, host = trace.comms, trace.hosts
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
    return cid, csize, ccost, cleaf, ckind


def _steps(ka: np.ndarray, act: np.ndarray, rank: np.ndarray, cum: np.ndarray):
    """The steps the loop walks: one per active event (rows `act`, kinds `ka`), two per
    collective (arrive, then leave), so that every step can simply be run again when its rank
    resumes after parking on it: posting a side of a message again posts the same time,
    arriving twice would not. Returns per step its event row, whether it is the first step of
    its event and of its rank, and its burst: that of its event plus those of the local events
    since the previous active event of its rank (none for a collective's leave step)."""
    reps = np.where(ka == COLL, 2, 1)
    step = np.repeat(np.arange(len(act)), reps)  # step -> its active event
    first = np.ones(len(step), dtype=bool)  # first step of its event
    first[1:] = step[1:] != step[:-1]
    se = act[step]  # step -> event row
    sr = rank[se]
    start = np.ones(len(step), dtype=bool)  # first step of its rank
    start[1:] = sr[1:] != sr[:-1]
    prev_ev = np.r_[0, se[:-1]] if len(se) else se  # the previous step's event
    sburst = np.where(first, cum[se] - np.where(start, 0, cum[prev_ev]), 0)
    return se, first, start, sburst


def _operands(ks: np.ndarray, first: np.ndarray, msa: np.ndarray, mra: np.ndarray, eager: np.ndarray,
              xfer: np.ndarray, cids: np.ndarray, is_root: np.ndarray):
    """Per step (its event's kind `ks`, message sent `msa` and received `mra`, collective
    instance `cids`, whether its rank is that collective's root): what the loop dispatches on
    (code) and two operands. slot: the message slot it posts or reads; ERECV reads the send slot
    and posts nothing (only rendezvous senders and an Irecv's own Wait ever read a receive slot,
    and neither can wait on a blocking eager Recv); for a collective step, its instance. xf: the
    message's transfer time; for a collective step, 1 if its rank is the root."""
    send_side = (ks == SEND) | (ks == ISEND)
    m = np.where(send_side, msa, mra)
    m_safe = np.maximum(m, 0)
    M = len(eager)
    eag = eager[m_safe] if M else np.zeros(len(ks), dtype=bool)
    own = np.where(send_side, 2 * m, 2 * m + 1)
    code = _STEP_CODE[ks, eag.astype(np.int64), first.astype(np.int64)]
    coll_step = ks == COLL
    slot = np.where(code == ERECV, own - 1, own)
    slot[coll_step] = cids[coll_step]
    xf = xfer[m_safe] if M else np.zeros(len(ks), dtype=np.int64)
    xf[coll_step] = is_root[coll_step]
    return code, slot, xf


def _wait_parts(ks: np.ndarray, se: np.ndarray, msa: np.ndarray, mra: np.ndarray, deps: dict,
                eager: np.ndarray, xfer: np.ndarray) -> tuple[dict, dict]:
    """For the Wait and Sendrecv steps: the slots a Sendrecv posts ({step: (slot, ...)}) and the
    parts each waits for ({step: [part, ...]}), a part being (send slot, receive slot, how it
    completes: OWN, EAGER or RDV, transfer time) as _wait_end reads it."""
    def part(msg, side):
        how = OWN if side == 0 and eager[msg] else (EAGER if eager[msg] else RDV)
        return (2 * msg, 2 * msg + 1, how, int(xfer[msg]))

    posts: dict[int, tuple] = {}
    parts: dict[int, list] = {}
    for j in np.flatnonzero((ks == WAIT) | (ks == SENDRECV)).tolist():
        if ks[j] == WAIT:
            parts[j] = [part(m, side) for m, side in deps[int(se[j])]]
        else:
            s, r = int(msa[j]), int(mra[j])
            posts[j] = tuple(([2 * s] if s >= 0 else []) + ([2 * r + 1] if r >= 0 else []))
            parts[j] = ([part(s, 0)] if s >= 0 else []) + ([part(r, 1)] if r >= 0 else [])
    return posts, parts


def _rank_cumsum(burst: np.ndarray, rank: np.ndarray) -> np.ndarray:
    """Per event, the sum of the bursts of its rank up to and including it (a rank's first
    event has burst 0). int64 wrap-around cancels in the differences taken from it."""
    cum = np.cumsum(burst)
    if len(cum):
        first = np.r_[True, rank[1:] != rank[:-1]]
        start = np.maximum.accumulate(np.where(first, np.arange(len(cum)), 0))
        cum -= cum[start] - burst[start]
    return cum


def replay(trace: Trace, model: NetworkModel = IDEAL, *, strict: bool = False,
           bursts: str = "cpu") -> Trace:
    """Replay `trace` on `model` (default: the ideal network).

    bursts: "cpu" (default) lasts each compute burst its recorded CPU time (wall time where the
    trace has none); "wall" its wall-time gap. Returns a new Trace with the same events and side
    tables, t_enter/t_exit replaced by the replayed times (ns, every rank starting at 0), no CPU
    times (cpu_enter/cpu_exit = -1: a replayed rank runs whenever it computes), meta['model'],
    meta['eager_limit'] (bytes), meta['bursts'] ("cpu", "wall", or "cpu where recorded (k of n)")
    and meta['replay_problems'] listing calls that were treated as no-ops because they had no
    partner (strict=True raises HpclabError instead). Raises HpclabError naming the blocked
    ranks if the model deadlocks."""
    plan = _Plan(trace, model, strict, bursts)
    enter, exit_ = plan.expand(_run_links(plan, trace, model) if model.links else _run(plan, trace))
    # a shallow copy: with pandas' copy-on-write the input trace keeps its columns, and the
    # unchanged ones (strings, tuples) are shared instead of copied
    ev = trace.events.copy(deep=False)
    ev["t_enter"] = enter
    ev["t_exit"] = exit_
    for c in CPU_COLUMNS:
        ev[c] = np.full(len(ev), -1, dtype=np.int64)
    n_bursts = max(len(ev) - ev["rank"].nunique(), 0) if len(ev) else 0
    if bursts == "wall" or plan.cpu_bursts == 0:
        used = "wall"
    elif plan.cpu_bursts >= n_bursts:
        used = "cpu"
    else:
        used = f"cpu where recorded ({plan.cpu_bursts} of {n_bursts})"
    return trace.with_events(ev, model=model.name, eager_limit=int(model.eager_limit),
                             bursts=used, replay_problems=[str(p) for p in plan.problems])


def _wait_end(parts: list, post: list, arrive: list | None, t: int) -> tuple[int, int]:
    """When a Wait (or a Sendrecv's wait) entered at t ends, and the slot it must park on.

    Each part (send slot, receive slot, how, transfer time) completes: an own eager send at its
    post; any other once both sides are posted, when its data are at the receiver (arrive[m]
    of the shared-link engine, or with arrive None, without contention: the send's post plus
    the transfer if eager, the later post plus the transfer if rendezvous), an eager message
    not before its receive was posted. Returns (the later of t and every part's completion, -1),
    or (t, the slot of the first side not yet posted)."""
    x = t
    for ss, rs, how, xm in parts:
        sp = post[ss]
        if how == OWN:
            d = sp
        else:
            if sp < 0:
                return t, ss
            rp = post[rs]
            if rp < 0:
                return t, rs
            if arrive is not None:
                d = arrive[ss >> 1]
            elif how == EAGER:
                d = sp + xm
            else:
                d = (sp if sp > rp else rp) + xm
            if how == EAGER and d < rp:
                d = rp
        if d > x:
            x = d
    return x, -1


class _Collectives:
    """The collective instances while a loop runs: how many members arrived, the latest
    arrival, the root's arrival and the ranks parked on each, with the plan's size, cost,
    cost of one transfer to the root and kind (ALL, BCAST, REDUCE) of each."""

    def __init__(self, P: _Plan):
        n = len(P.csize)
        self.size, self.cost, self.leaf, self.kind = P.csize, P.ccost, P.cleaf, P.ckind
        self.arrived = [0] * n
        self.last = [-1] * n
        self.root = [-1] * n
        self.parked: list = [[] for _ in range(n)]

    def arrive(self, c: int, t: int, is_root: int) -> list:
        """A member of instance c arrives at t; returns the parked ranks that can leave now
        (all arrived, or the root of a Bcast) and forgets them."""
        a = self.arrived[c] = self.arrived[c] + 1
        if t > self.last[c]:
            self.last[c] = t
        if is_root:
            self.root[c] = t
        parked = self.parked[c]
        if parked and (a == self.size[c] or (is_root and self.kind[c] == BCAST)):
            self.parked[c] = []
            return parked
        return []

    def leave(self, c: int, t: int, is_root: int) -> int | None:
        """When a member of instance c that arrived at t leaves, or None while it must wait:
        Allreduce and the like at the last arrival plus the cost; Bcast's root at once plus the
        cost, the others at the root's arrival plus the cost, not before their own; Reduce's
        root at the last arrival plus the cost, the others after one transfer to it."""
        ck = self.kind[c]
        if ck == ALL or (ck == REDUCE and is_root):
            return self.last[c] + self.cost[c] if self.arrived[c] >= self.size[c] else None
        if ck == REDUCE:
            return t + self.leaf[c]
        if is_root:  # BCAST
            return t + self.cost[c]
        rt = self.root[c]
        if rt < 0:
            return None
        x = rt + self.cost[c]
        return x if x > t else t


def _run(P: _Plan, trace: Trace):
    """The event loop over the steps; returns their exit times.

    Each rank runs until a step needs something not yet there, then parks on it (a message slot
    or a collective) and is run again from that step when it is posted. A step's entry is the
    previous exit plus its burst, so it comes out the same when the step is run again."""
    kind, burst, slot, xf = P.kind, P.burst, P.slot, P.xf
    posts, parts = P.posts, P.parts
    coll = _Collectives(P)
    # int64 storage: the times go to numpy without a per-element conversion, and are not kept
    # as a million scattered int objects
    exit_ = array("q", bytes(8 * len(kind)))
    post = [-1] * (2 * P.M)  # slot -> time its side was posted (-1: not yet)
    # slot -> the rank parked until it is posted (-1: none). One is enough: only the receiver
    # of a message ever waits for its send side, only the sender for its receive side.
    mwait = [-1] * (2 * P.M)
    R = len(P.starts)
    pos = list(P.starts)
    ends = P.ends
    tcur = [0] * R
    ready = list(range(R))
    pop, wake, extend = ready.pop, ready.append, ready.extend
    # Posting a side of a message (post[s] = te, then wake the rank parked on s) is written out
    # where it happens, not called: it is the commonest step of every trace.
    while ready:
        r = pop()
        j = pos[r]
        end = ends[r]
        t = tcur[r]
        blocked = -1  # slot to park on; -2 - c: collective instance c
        while j < end:
            k = kind[j]
            te = t + burst[j]
            if k == NOW or k == RSEND or k == RRECV:  # post one side, wake whoever waits for it
                s = slot[j]
                post[s] = te
                w = mwait[s]
                if w >= 0:
                    wake(w)
                    mwait[s] = -1
                if k == NOW:  # done
                    x = te
                else:  # rendezvous: both sides posted, then one transfer
                    p = post[s ^ 1]
                    if p < 0:
                        blocked = s ^ 1
                        break
                    x = (te if te > p else p) + xf[j]
            elif k == ERECV:  # eager message: ends on arrival, or at once if already there
                s = slot[j]
                sp = post[s]
                if sp < 0:
                    blocked = s
                    break
                x = sp + xf[j]
                if x < te:
                    x = te
            elif k == ARRIVE:
                extend(coll.arrive(slot[j], te, xf[j]))
                x = te
            elif k == LEAVE:  # te: the arrival (a leave step has no burst)
                x = coll.leave(slot[j], te, xf[j])
                if x is None:
                    blocked = -2 - slot[j]
                    break
            else:  # XWAIT, XSENDRECV: the latest completion of the parts
                if k == XSENDRECV:
                    for s in posts[j]:
                        post[s] = te
                        w = mwait[s]
                        if w >= 0:
                            wake(w)
                            mwait[s] = -1
                x, blocked = _wait_end(parts[j], post, None, te)
                if blocked != -1:
                    break
            exit_[j] = t = x
            j += 1
        pos[r] = j
        tcur[r] = t
        if blocked >= 0:
            mwait[blocked] = r
        elif blocked != -1:
            coll.parked[-2 - blocked].append(r)
    _raise_if_stuck(P, trace, pos)
    return exit_


def _run_links(P: _Plan, trace: Trace, model: NetworkModel):
    """The replay with shared links, in time order; returns the exit times of the steps.

    Every node has `model.links` output and as many input links (Dimemas' links). A message
    between two nodes holds one output link of its source node and one input link of its
    destination node for its whole transfer time (latency + bytes / bandwidth, so the link is
    shared in bandwidth and in per-message cost); it starts when its data are ready (at the
    send's post if eager, when both sides are posted if rendezvous) and both links are free,
    first come first served. Messages within a node and collectives use no link (collectives
    keep their cost formula). Because a link goes to whichever message is ready first, steps
    run in the order of their entry times (a heap of ranks keyed by the entry time of their
    next step), not rank by rank as in _run; a rank parked on a step runs it again when woken,
    as in _run. With enough links for every message in flight the times are _run's."""
    kind, burst, slot, xf = P.kind, P.burst, P.slot, P.xf
    posts, parts = P.posts, P.parts
    coll = _Collectives(P)
    m_eager = P.m_eager
    transfer = _Links(P, int(model.links)).transfer
    exit_ = array("q", bytes(8 * len(kind)))
    post = [-1] * (2 * P.M)
    arrive = [-1] * P.M  # when the message's data are at the receiver (-1: not scheduled yet)
    mwait = [-1] * (2 * P.M)
    R = len(P.starts)
    pos = list(P.starts)
    ends = P.ends
    tcur = [0] * R
    heap = [(burst[pos[r]], r) for r in range(R) if pos[r] < ends[r]]
    heapq.heapify(heap)
    push, pop = heapq.heappush, heapq.heappop

    def wake(w):
        """Rank w goes on at the entry of the step it was parked on."""
        push(heap, (tcur[w] + burst[pos[w]], w))

    def put(s, t):
        """Post side s of a message at t; wake its waiter; schedule the transfer once ready."""
        post[s] = t
        w = mwait[s]
        if w >= 0:
            mwait[s] = -1
            wake(w)
        m = s >> 1
        if arrive[m] < 0:
            if m_eager[m]:
                if not s & 1:
                    arrive[m] = transfer(m, t)
            elif post[s ^ 1] >= 0:
                p = post[s ^ 1]
                arrive[m] = transfer(m, t if t > p else p)

    while heap:
        te, r = pop(heap)
        j = pos[r]
        end = ends[r]
        while True:  # run rank r while its next step is still the earliest of all
            k = kind[j]
            blocked = -1
            if k == NOW:
                put(slot[j], te)
                x = te
            elif k == ERECV:  # slot: the send side
                s = slot[j]
                if post[s] < 0:
                    blocked = s
                else:
                    a = arrive[s >> 1]
                    x = a if a > te else te
            elif k == RSEND or k == RRECV:
                s = slot[j]
                put(s, te)
                a = arrive[s >> 1]
                if a < 0:
                    blocked = s ^ 1
                else:
                    x = a
            elif k == ARRIVE:
                for w in coll.arrive(slot[j], te, xf[j]):
                    wake(w)
                x = te
            elif k == LEAVE:
                x = coll.leave(slot[j], te, xf[j])
                if x is None:
                    blocked = -2 - slot[j]
            else:  # XWAIT, XSENDRECV
                if k == XSENDRECV:
                    for s in posts[j]:
                        put(s, te)
                x, blocked = _wait_end(parts[j], post, arrive, te)
            if blocked >= 0:
                mwait[blocked] = r
                break
            if blocked != -1:
                coll.parked[-2 - blocked].append(r)
                break
            exit_[j] = x
            tcur[r] = x
            pos[r] = j = j + 1
            if j >= end:
                break
            te = x + burst[j]
            if heap and (te, r) > heap[0]:
                push(heap, (te, r))
                break
    _raise_if_stuck(P, trace, pos)
    return exit_


class _Links:
    """The shared links of _run_links: per node, when each of its output and input links is
    free next (ns), and each message's cost and the nodes it leaves and enters."""

    def __init__(self, P: _Plan, links: int):
        self.n = links
        self.out_free = [[0] * links for _ in range(P.nnodes)]
        self.in_free = [[0] * links for _ in range(P.nnodes)]
        self.cost, self.out, self.into = P.m_cost, P.m_out, P.m_in

    def transfer(self, m: int, t: int) -> int:
        """Schedule message m, ready at t, on the output and input links free first (a message
        within a node on none); returns its arrival."""
        a, b = self.out[m], self.into[m]
        if a < 0:
            return t + self.cost[m]
        fo, fi = self.out_free[a], self.in_free[b]
        lo = min(range(self.n), key=fo.__getitem__)
        li = min(range(self.n), key=fi.__getitem__)
        start = max(t, fo[lo], fi[li])
        end = start + self.cost[m]
        fo[lo] = fi[li] = end
        return end


def _raise_if_stuck(P: _Plan, trace: Trace, pos: list) -> None:
    """Raise the deadlock error when a rank's cursor `pos` stopped before its last step."""
    stuck = [r for r in range(len(pos)) if pos[r] < P.ends[r]]
    if stuck:
        _deadlock(trace, [int(P.step_event[pos[r]]) for r in stuck])


def _deadlock(trace: Trace, at: list):
    """Raise the deadlock error; at: the event row each blocked rank is stuck on."""
    ev = trace.events
    blocked = []
    for i in at:
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
