"""Generate the communication trace of the course's 2D Poisson solver at any scale.

The solver (src/poisson, after Gropp, Lusk and Skjellum's "Using MPI", ch. 4; seed 001) splits an
n x n grid over a P x Q process grid. Each iteration, as in the seed's code: halo exchange, red
update, halo exchange, black update, halo exchange, copy and residuum, then an Allreduce of the
residual (one 8-byte double). A halo message carries one row or column of doubles.

Compute times come from a measured run: pass per-point rates in ns (see `rates_from_poisson`),
so a small real run on this machine predicts the seed's 384-rank, 16-node case under any network
model. Nothing here is measured; the result is a simulation and says so in trace.meta.
"""

from __future__ import annotations

from hpclab.core.errors import HpclabError
from hpclab.trace.builder import TraceBuilder
from hpclab.trace.mapping import hosts_of, linear_mapping
from hpclab.trace.model import IDEAL

PHASES = ("red", "black", "copy", "residuum")
EXCHANGES = ("naive", "blocking", "sendrecv", "nonblocking")
# seed 001: 24 x 16 process grid, 16 nodes x 24 cores, 3600 x 3600 grid
SEED_SCALE = {"px": 24, "py": 16, "n": 3600, "cores": 24}


def split_sizes(n: int, parts: int) -> list[int]:
    """Sizes of `parts` near-equal pieces of n points (the first n % parts get one more)."""
    return [n // parts + (1 if i < n % parts else 0) for i in range(parts)]


def rates_from_poisson(results: dict) -> dict[str, float]:
    """Per-point compute rates (ns per grid point per iteration) from a poisson kernel JSON
    report's `results` (docs/kernel-contract.md), averaged over ranks."""
    try:
        it = results["iterations"]
        per = results["per_rank"]
        out = {}
        for ph in PHASES:
            out[ph] = sum(r["compute"][ph] / (r["local"][0] * r["local"][1] * it) for r in per) / len(per) * 1e9
    except (KeyError, TypeError, ZeroDivisionError) as err:
        raise HpclabError(f"not a poisson results block ({err!r})",
                          "pass report['results'] of a poisson run's JSON (--json FILE)") from None
    return out


def poisson_trace(px: int, py: int, *, n: int, iterations: int, ns_per_point, nodes: list[int] | None = None,
                  cores: int | None = None, node_names: list[str] | None = None,
                  exchange: str = "blocking", exchanges_per_iteration: int = 3, model=IDEAL):
    """The trace of `iterations` solver iterations on a px x py grid, replayed on `model`.

    ns_per_point: float or {phase: ns} for PHASES; nodes: rank -> node index (default: linear
    mapping with `cores` per node, or one node). Regions: 'iteration' around each iteration and
    one per compute phase. Returns a Trace (hosts from the mapping)."""
    if exchange not in EXCHANGES:
        raise HpclabError(f"exchange = {exchange!r}; allowed: {', '.join(EXCHANGES)}")
    if not 1 <= exchanges_per_iteration <= 3:
        raise HpclabError("exchanges_per_iteration must be 1, 2 or 3")
    if px * py > n * n or min(px, py) < 1:
        raise HpclabError(f"a {px} x {py} process grid does not fit an {n} x {n} grid")
    rates = ns_per_point if isinstance(ns_per_point, dict) else {ph: float(ns_per_point) for ph in PHASES}
    if set(rates) != set(PHASES) or any(v < 0 for v in rates.values()):
        raise HpclabError(f"ns_per_point needs non-negative rates for {PHASES}, got {rates}")
    p = px * py
    if nodes is None:
        nodes = linear_mapping(px, py, cores) if cores else [0] * p
    hosts = hosts_of(nodes, node_names)
    rows, cols = split_sizes(n, px), split_sizes(n, py)
    b = TraceBuilder(p, hosts=hosts)
    for r in range(p):
        i, j = divmod(r, py)
        nx, ny = rows[i], cols[j]
        up = r - py if i > 0 else None
        down = r + py if i < px - 1 else None
        left = r - 1 if j > 0 else None
        right = r + 1 if j < py - 1 else None
        # (send to, receive from, doubles, tag, position along that direction): one tag per direction
        dirs = ((up, down, ny, 0, i), (down, up, ny, 1, i), (left, right, nx, 2, j), (right, left, nx, 3, j))
        cost = {ph: round(rates[ph] * nx * ny) for ph in PHASES}
        rb = b[r]
        for _ in range(iterations):
            rb.region_begin("iteration")
            for phase_no, phase in enumerate(("red", "black", "copy")):
                if phase_no < exchanges_per_iteration:
                    _exchange(rb, dirs, exchange)
                with rb.region(phase):
                    rb.compute(cost[phase] + (cost["residuum"] if phase == "copy" else 0))
            rb.allreduce(8)
            rb.region_end("iteration")
    trace = b.build(model)
    trace.meta.update(simulated=True, program="poisson", grid=[px, py], n=n, iterations=iterations,
                      exchange=exchange, exchanges_per_iteration=exchanges_per_iteration)
    return trace


def _exchange(rb, dirs, how):
    """One halo exchange in the kernel's styles (src/poisson): 'naive' sends first, then receives,
    in every direction (the 2014 code's order: a chain above the eager limit); 'blocking' orders
    the same calls by the rank's parity along the direction (even ranks send first, odd ranks
    receive first), so pairs exchange side by side; 'sendrecv' and 'nonblocking' as named."""
    if how in ("naive", "blocking"):
        for to, frm, m, tag, pos in dirs:
            if how == "naive" or pos % 2 == 0:
                rb.send(to, 8 * m, tag).recv(frm, 8 * m, tag)
            else:
                rb.recv(frm, 8 * m, tag).send(to, 8 * m, tag)
    elif how == "sendrecv":
        for to, frm, m, tag, _ in dirs:
            rb.sendrecv(to, 8 * m, tag, frm, 8 * m, tag)
    else:
        reqs = [rb.irecv(frm, 8 * m, tag) for to, frm, m, tag, _ in dirs if frm is not None]
        reqs += [rb.isend(to, 8 * m, tag) for to, frm, m, tag, _ in dirs if to is not None]
        rb.waitall(reqs)
