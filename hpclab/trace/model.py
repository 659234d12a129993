"""Network models for replaying a trace: ideal, Hockney, and intra/inter-node Hockney.

A message of m bytes between ranks on the same node costs L_intra + m / BW_intra, between nodes
L_inter + m / BW_inter (Hockney). The ideal network (ITAC's "idealized trace", Dimemas' ideal
machine) has zero latency and infinite bandwidth. Messages up to `eager_limit` bytes are sent
eagerly; larger ones use rendezvous (the send waits for the receive to be posted), as Open MPI
and SimGrid SMPI do.

Shared links (`links`, Dimemas' input and output links per node): with links = k > 0 every
node has k output and k input links; a message between nodes holds one output link of its
source node and one input link of its destination for its whole cost L_inter + m / BW_inter,
so messages leaving or entering one node at once queue (two equal messages leaving a one-link
node at once: the second arrives after twice the cost). A mapping that moves traffic between
nodes then changes the time. Messages within a node and collectives (whose cost stays the
formula below) use no link. links = 0 (default): no contention, every message travels alone.

Model files (YAML or JSON) use people's units:

    name: my-cluster               # optional
    intra: {latency_us: 0.4, bandwidth_MBps: 6000}
    inter: {latency_us: 1.8, bandwidth_MBps: 3000}   # optional; defaults to intra
    eager_limit_bytes: 4096        # optional; default: no rendezvous
    links_per_node: 1              # optional; default 0: no shared links (no contention)

MB = 10^6 bytes. The "hockney" preset's numbers are illustrative assumptions, not measurements:
fit your own from a pingpong run with `model_from_pingpong`.
"""

from __future__ import annotations

import dataclasses
import json
import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from hpclab.core.errors import HpclabError

NO_LIMIT = 2**62


@dataclass(frozen=True)
class Link:
    """One Hockney link: latency in ns, bandwidth in bytes per ns (= GB/s); inf = instantaneous."""

    latency_ns: float
    bandwidth_bpns: float

    def cost_ns(self, nbytes):
        """Transfer time in ns (float or array) of nbytes: L + m / BW."""
        return self.latency_ns + np.asarray(nbytes, dtype=np.float64) / self.bandwidth_bpns


@dataclass(frozen=True)
class NetworkModel:
    """A machine to replay on. intra/inter: Links; eager_limit: largest eager message in bytes."""

    name: str
    intra: Link
    inter: Link
    eager_limit: int = NO_LIMIT
    links: int = 0  # links per node and direction that inter-node messages share; 0: no contention
    # Eager limit of messages between nodes when it differs from the one inside a node (another
    # transport: Open MPI's TCP BTL, or Intel MPI's 256 KiB on InfiniBand); None: the same.
    inter_eager_limit: int | None = None

    @property
    def inter_eager(self) -> int:
        """The eager limit (bytes) of messages between nodes."""
        return self.eager_limit if self.inter_eager_limit is None else self.inter_eager_limit

    def with_inter_eager(self, limit: int | None) -> "NetworkModel":
        """The same model whose messages between nodes have their own eager limit (bytes)."""
        if limit is not None and not (isinstance(limit, int) and limit >= 0):
            raise HpclabError(f"inter-node eager limit = {limit!r} must be an integer >= 0 (or None: as inside a node)")
        return dataclasses.replace(self, inter_eager_limit=limit)

    def with_links(self, links: int) -> "NetworkModel":
        """The same model with `links` shared input/output links per node (0: no contention)."""
        if not (isinstance(links, int) and links >= 0):
            raise HpclabError(f"links = {links!r} must be an integer >= 0 (0: no contention)")
        name = self.name if links == 0 else f"{self.name}, {links} link{'s' if links > 1 else ''}/node"
        return dataclasses.replace(self, name=name, links=links)

    @property
    def is_ideal(self) -> bool:
        return all(k.latency_ns == 0 and math.isinf(k.bandwidth_bpns) for k in (self.intra, self.inter))

    def p2p_ns(self, nbytes: np.ndarray, same_node: np.ndarray) -> np.ndarray:
        """Integer ns transfer times for arrays of message sizes and same-node flags."""
        if self.is_ideal:
            return np.zeros(len(nbytes), dtype=np.int64)
        t = np.where(same_node, self.intra.cost_ns(nbytes), self.inter.cost_ns(nbytes))
        return np.rint(t).astype(np.int64)

    def collective_ns(self, nbytes: int, size: int, one_node: bool, rounds_per_level: int) -> int:
        """Cost in ns of a collective over `size` ranks: rounds_per_level * ceil(log2 P) * (L + m/BW).

        rounds_per_level is 2 for Allreduce/Barrier (fan-in + fan-out), 1 for Bcast/Reduce.
        Zero on the ideal network and on one-rank communicators."""
        if self.is_ideal or size <= 1:
            return 0
        link = self.intra if one_node else self.inter
        return int(round(rounds_per_level * math.ceil(math.log2(size)) * float(link.cost_ns(nbytes))))


IDEAL = NetworkModel("ideal", Link(0.0, math.inf), Link(0.0, math.inf))


def hockney(latency_us: float, bandwidth_MBps: float, *, inter_latency_us: float | None = None,
            inter_bandwidth_MBps: float | None = None, eager_limit: int = NO_LIMIT,
            name: str = "hockney", links: int = 0) -> NetworkModel:
    """A Hockney model from latency (us) and bandwidth (MB/s, MB = 1e6 B); inter defaults to intra."""
    for what, v in (("latency_us", latency_us), ("bandwidth_MBps", bandwidth_MBps)):
        if not (isinstance(v, (int, float)) and v >= 0):
            raise HpclabError(f"network model {what} = {v!r} must be a number >= 0")
    if bandwidth_MBps == 0:
        raise HpclabError("network model bandwidth_MBps = 0: no data would ever arrive",
                          "give a positive bandwidth (or use the ideal model)")
    intra = Link(latency_us * 1e3, bandwidth_MBps * 1e-3)
    inter = Link((inter_latency_us if inter_latency_us is not None else latency_us) * 1e3,
                 (inter_bandwidth_MBps if inter_bandwidth_MBps is not None else bandwidth_MBps) * 1e-3)
    if inter.bandwidth_bpns <= 0:
        raise HpclabError("network model inter bandwidth must be > 0")
    return NetworkModel(name, intra, inter, int(eager_limit)).with_links(links) if links else \
        NetworkModel(name, intra, inter, int(eager_limit))


# Illustrative numbers of the order of shared memory and a 2010s InfiniBand link; not measured.
HOCKNEY = hockney(0.5, 5000.0, inter_latency_us=1.5, inter_bandwidth_MBps=3000.0,
                  eager_limit=65536, name="hockney")


def model_from_dict(d: dict, source: str = "model") -> NetworkModel:
    """A NetworkModel from the model-file dictionary described in the module docstring."""
    if not isinstance(d, dict):
        raise HpclabError(f"{source}: a network model must be a mapping, got {type(d).__name__}")
    allowed = {"name", "intra", "inter", "eager_limit_bytes", "links_per_node"}
    unknown = set(d) - allowed
    if unknown:
        raise HpclabError(f"{source}: unknown key(s) {sorted(unknown)}; allowed: {sorted(allowed)}")
    if "intra" not in d:
        raise HpclabError(f"{source}: missing 'intra: {{latency_us: ..., bandwidth_MBps: ...}}'")

    def link(key):
        v = d[key]
        if not isinstance(v, dict) or set(v) != {"latency_us", "bandwidth_MBps"}:
            raise HpclabError(f"{source}: {key} must have exactly latency_us and bandwidth_MBps, got {v!r}")
        return v["latency_us"], v["bandwidth_MBps"]

    lat, bw = link("intra")
    ilat, ibw = link("inter") if "inter" in d else (lat, bw)
    eager = d.get("eager_limit_bytes", NO_LIMIT)
    if not isinstance(eager, int) or eager < 0:
        raise HpclabError(f"{source}: eager_limit_bytes = {eager!r} must be an integer >= 0")
    links = d.get("links_per_node", 0)
    if not isinstance(links, int) or isinstance(links, bool) or links < 0:
        raise HpclabError(f"{source}: links_per_node = {links!r} must be an integer >= 0 "
                          "(0: no shared links)")
    return hockney(lat, bw, inter_latency_us=ilat, inter_bandwidth_MBps=ibw, eager_limit=eager,
                   name=str(d.get("name", Path(source).stem)), links=links)


def load_model(spec: str) -> NetworkModel:
    """'ideal', 'hockney' (the illustrative preset) or a path to a YAML/JSON model file."""
    if spec == "ideal":
        return IDEAL
    if spec == "hockney":
        return HOCKNEY
    path = Path(spec)
    if not path.is_file():
        raise HpclabError(f"network model {spec!r} is neither 'ideal', 'hockney' nor a file",
                          "write a YAML file as described in hpclab/trace/model.py")
    text = path.read_text()
    try:
        if path.suffix == ".json":
            d = json.loads(text)
        else:
            import yaml
            d = yaml.safe_load(text)
    except Exception as err:  # both parsers raise their own types
        raise HpclabError(f"{path}: cannot parse the model file ({err})") from None
    return model_from_dict(d, str(path))


def model_from_pingpong(rows: list[dict], *, inter_rows: list[dict] | None = None,
                        eager_limit: int = NO_LIMIT, name: str = "pingpong") -> NetworkModel:
    """Fit L (us) and BW (MB/s) by least squares to pingpong rows ({'bytes', 't_usec'}, see
    docs/kernel-contract.md); inter_rows (optional) fit the inter-node link the same way."""

    def fit(rs):
        m = np.array([r["bytes"] for r in rs], dtype=float)
        t = np.array([r["t_usec"] for r in rs], dtype=float)
        if len(m) < 2 or np.ptp(m) == 0:
            raise HpclabError("a pingpong fit needs rows with at least two different message sizes")
        slope, lat = np.polyfit(m, t, 1)  # t_usec = L + m * slope, slope in us per byte
        if slope <= 0:
            raise HpclabError("the pingpong times do not grow with message size; cannot fit a bandwidth")
        return max(lat, 0.0), 1.0 / slope  # bytes per us = MB/s
    lat, bw = fit(rows)
    ilat, ibw = fit(inter_rows) if inter_rows else (lat, bw)
    return hockney(lat, bw, inter_latency_us=ilat, inter_bandwidth_MBps=ibw,
                   eager_limit=eager_limit, name=name)
