"""The replay as it was before it was made faster (commit fc3c895), kept here as a reference:
the faster replay and matching must give bit-identical results (times, problems, deadlocks).

The old code is frozen below unchanged except for names: old_match (pandas merge/groupby), the
plan and the event loop (one cursor per rank over every event). The cases: generated Poisson
traces (three exchanges) and random programs mixing blocking, non-blocking and Sendrecv
exchanges, collectives on two communicators, MPI_PROC_NULL, unmatched sends and deadlocking
rings, each also with recorded call durations and clock glitches, on three network models.
"""

import random

import numpy as np
import pandas as pd
import pytest

from hpclab.core.errors import HpclabError
from hpclab.trace.builder import TraceBuilder
from hpclab.trace.events import CALLS, COLLECTIVES, COMM_CREATE, Problem, Trace, call_codes, calls_in, validate
from hpclab.trace.mapping import blocked_mapping
from hpclab.trace.matching import KEY, Matching, endpoints, match
from hpclab.trace.model import HOCKNEY, IDEAL, NetworkModel, hockney
from hpclab.trace.poisson import poisson_trace
from hpclab.trace.replay import _CKIND, _KIND_OF_CODE, ALL, BCAST, COLL, IRECV, ISEND, LOCAL, RECV, SEND, SENDRECV, WAIT, replay

SMALL_EAGER = hockney(1.0, 1000.0, inter_latency_us=3.0, inter_bandwidth_MBps=300.0, eager_limit=2000,
                      name="small-eager")
MODELS = [IDEAL, HOCKNEY, SMALL_EAGER]


# ---- frozen reference: matching ------------------------------------------------------------

def old_endpoints(ev: pd.DataFrame, codes: np.ndarray | None = None) -> tuple[pd.DataFrame, pd.DataFrame]:
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


def old_match(trace: Trace, max_problems: int = 20) -> Matching:
    """hpclab.trace.matching.match as it was (pandas merge and groupby)."""
    ev = trace.events
    rank = ev["rank"].to_numpy()
    seq = ev["seq"].to_numpy()
    codes = call_codes(ev)
    call = ev["call"]
    problems: list[Problem] = []

    def prob(i, what, fatal=False):
        if len(problems) < max_problems:
            problems.append(Problem(fatal, int(rank[i]), int(seq[i]), str(call.iat[i]), what))

    sends, recvs = old_endpoints(ev, codes)
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



# ---- frozen reference: replay --------------------------------------------------------------

class _OldPlan:
    """Everything the replay loop needs, as plain Python lists (fast to index in a loop)."""

    def __init__(self, trace: Trace, model: NetworkModel):
        ev = trace.events
        n = len(ev)
        validate(trace)
        mt = old_match(trace)
        self.problems = mt.problems
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



def _old_run(P: _OldPlan):
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
    stuck = [pos[r] for r in range(R) if pos[r] < ends[r]]
    return enter, exit_, stuck



def old_replay(trace: Trace, model: NetworkModel):
    """(t_enter, t_exit, problems, stuck event rows) as the old replay computed them."""
    validate(trace)
    plan = _OldPlan(trace, model)
    enter, exit_, stuck = _old_run(plan)
    return enter, exit_, [str(p) for p in plan.problems], stuck


# ---- cases -----------------------------------------------------------------------------------

def random_program(seed: int) -> TraceBuilder:
    """A random SPMD program; some steps leave a send unmatched or deadlock on rendezvous."""
    rnd = random.Random(seed)
    p = rnd.randint(2, 9)
    per_node = rnd.randint(1, 4)
    half = [r for r in range(p) if r % 2 == 0]
    comms = {5: half} if len(half) > 1 else {}
    b = TraceBuilder(p, hosts={r: f"n{r // per_node}" for r in range(p)}, comms=comms)
    for step in range(rnd.randint(3, 12)):
        pat = rnd.choice(["ring", "ringbad", "sendrecv", "nonblock", "coll", "sub", "null", "lone", "test"])
        size = rnd.choice([8, 100, 1500, 3000, 70000])  # around both models' eager limits
        tag = rnd.randint(0, 3)
        sh = rnd.randint(1, p - 1)
        call = random.Random(step).choice(["allreduce", "barrier", "bcast", "reduce"])
        root = random.Random(step + 99).randrange(p)
        for r in range(p):
            rb = b[r]
            rb.compute(rnd.randint(0, 5000))
            to, frm = (r + sh) % p, (r - sh) % p
            if pat == "ring":  # even ranks send first: completes on any model
                if r % 2 == 0:
                    rb.send(to, size, tag).recv(frm, size, tag)
                else:
                    rb.recv(frm, size, tag).send(to, size, tag)
            elif pat == "ringbad":  # everyone sends first: deadlocks above the eager limit
                rb.send(to, size, tag).recv(frm, size, tag)
            elif pat == "sendrecv":
                rb.sendrecv(to, size, tag, frm, size, tag)
            elif pat in ("nonblock", "test"):
                q = [rb.irecv(frm, size, tag), rb.isend(to, size, tag)]
                rnd.shuffle(q)
                rb.compute(rnd.randint(0, 3000))
                if pat == "test":
                    rb.test(q, completed=False).test(q)
                elif rnd.random() < 0.5:
                    rb.waitall(q)
                else:
                    rb.wait(q[0]).compute(rnd.randint(0, 100)).wait(q[1])
            elif pat == "coll":
                getattr(rb, call)(*((root, size) if call in ("bcast", "reduce") else
                                    (size,) if call == "allreduce" else ()))
            elif pat == "sub":
                if r in comms.get(5, []):
                    rb.allreduce(size, comm=5)
            elif pat == "null":
                rb.send(None, size, tag).recv(None, size, tag)
                rb.sendrecv(None, size, tag, None, size, tag)
            elif pat == "lone" and r == 0:
                rb.send(1, size, 9)
            with rb.region("x"):
                rb.compute(rnd.randint(0, 50))
    return b


def recorded(trace: Trace, seed: int) -> Trace:
    """The trace with calls that take time (0-2 us) and a few clock glitches (negative gaps,
    which the replay clips), as a recorded trace has, and a clock offset per rank."""
    rng = np.random.default_rng(seed)
    ev = trace.events.copy()
    rank = ev["rank"].to_numpy()
    dur = rng.integers(0, 2000, len(ev))
    first = np.r_[True, rank[1:] != rank[:-1]]
    before = np.cumsum(dur) - dur  # durations of the earlier calls, counted per rank below
    before -= np.maximum.accumulate(np.where(first, before, 0))
    te = ev["t_enter"].to_numpy() + before + rank * 1000 + rng.integers(0, 3, len(ev))
    tx = te + dur
    te[1:] = np.where(first[1:], te[1:], np.maximum(te[1:], tx[:-1] - rng.integers(0, 2, len(ev) - 1)))
    te[1:] = np.where(first[1:], te[1:], np.maximum(te[1:], tx[:-1]))
    ev["t_enter"] = te
    ev["t_exit"] = np.maximum(tx, te)
    # no CPU times (a tracer of format version 1): the bursts replayed are these wall gaps
    ev["cpu_enter"] = ev["cpu_exit"] = -1
    return trace.with_events(ev)


def random_cases():
    for seed in range(20):
        sk = random_program(seed).skeleton(finalize=seed % 7 != 3)  # some crashed runs
        yield f"random{seed}", sk
        yield f"random{seed}-recorded", recorded(sk, seed)


def poisson_cases():
    nodes = blocked_mapping(6, 4, 8)
    for exchange in ("blocking", "sendrecv", "nonblocking"):
        tr = poisson_trace(6, 4, n=240, iterations=4, ns_per_point=1.0, nodes=nodes, exchange=exchange)
        yield f"poisson-{exchange}", tr
        yield f"poisson-{exchange}-recorded", recorded(tr, 7)


def same_as_old(trace: Trace, model: NetworkModel):
    """Assert that replay() gives what the old replay gave: every time to the ns, the same
    problems, or a deadlock naming the same ranks and events."""
    enter, exit_, problems, stuck = old_replay(trace, model)
    if stuck:
        with pytest.raises(HpclabError, match="deadlock") as err:
            replay(trace, model)
        ev = trace.events
        assert [(b["rank"], b["seq"]) for b in err.value.blocked] == \
            [(int(ev["rank"].iat[i]), int(ev["seq"].iat[i])) for i in stuck]
        return "deadlock"
    out = replay(trace, model)
    assert np.array_equal(out.events["t_enter"].to_numpy(), np.asarray(enter, dtype=np.int64))
    assert np.array_equal(out.events["t_exit"].to_numpy(), np.asarray(exit_, dtype=np.int64))
    assert out.meta["replay_problems"] == problems
    # every other column is kept, except the CPU times: a replayed rank runs whenever it
    # computes, so a replayed trace has none (-1)
    assert out.events.drop(columns=["t_enter", "t_exit", "cpu_enter", "cpu_exit"]).equals(
        trace.events.drop(columns=["t_enter", "t_exit", "cpu_enter", "cpu_exit"]))
    assert (out.events["cpu_enter"] == -1).all() and (out.events["cpu_exit"] == -1).all()
    return "problems" if problems else "clean"


@pytest.mark.parametrize("model", MODELS, ids=lambda m: m.name)
def test_poisson_replay_is_bit_identical_to_the_old_replay(model):
    """Does the replay of generated Poisson traces (each exchange; built and as if recorded)
    give exactly the old per-event times on each model?"""
    for name, tr in poisson_cases():
        assert same_as_old(tr, model) == "clean", name


def test_random_programs_replay_as_before_including_problems_and_deadlocks():
    """Random programs on three models: same times, same unmatched-call problems, same
    deadlocks (ranks and events) as the old replay; each outcome occurs."""
    seen = {}
    for name, tr in random_cases():
        for model in MODELS:
            seen[same_as_old(tr, model)] = name
    assert set(seen) == {"clean", "problems", "deadlock"}


def lonely_messages(seed: int) -> Trace:
    """Random sends and receives, most of them unmatched, on two communicators, some truncated."""
    rnd = random.Random(seed)
    p = rnd.randint(2, 6)
    b = TraceBuilder(p, comms={3: [0, 1]})
    for r in range(p):
        for _ in range(rnd.randint(0, 40)):
            c, peer, tag = rnd.random(), rnd.randrange(p), rnd.randint(0, 4)
            comm = rnd.choice([0, 0, 3]) if r < 2 and peer < 2 else 0
            if c < 0.3:
                b[r].send(peer, rnd.choice([8, 16, 1000]), tag, comm)
            elif c < 0.6:
                b[r].recv(peer, rnd.choice([8, 16, 1000]), tag, comm)
            elif c < 0.7:
                b[r].isend(peer, 8, tag)
            elif c < 0.8:
                b[r].irecv(peer, 8, tag)
            elif c < 0.9:
                b[r].sendrecv(peer, 8, tag, rnd.randrange(p), rnd.choice([4, 8]), tag)
            else:
                b[r].send(None, 8, tag)
    return b.skeleton()


def test_matching_is_the_old_matching():
    """Do match() and endpoints() give exactly the old tables and problems (same order, same
    texts, also when the problem list is cut short)?"""
    for tr in (lonely_messages(s) for s in range(25)):
        for cap in (20, 3):
            a, b = old_match(tr, cap), match(tr, cap)
            assert a.messages.equals(b.messages) and list(a.messages.dtypes) == list(b.messages.dtypes)
            assert a.coll.equals(b.coll) and a.instances.equals(b.instances)
            assert a.problems == b.problems
        for x, y in zip(old_endpoints(tr.events), endpoints(tr.events)):
            assert x.equals(y) and list(x.dtypes) == list(y.dtypes)
