"""The message-passing profile: a sender x receiver matrix of volume, count, time and rate.

Element [s, d] sums over the messages rank s sent to rank d (the send half of a Sendrecv
included). A message's time runs from the send's entry to the completion of the receive (the
Recv's exit, or the exit of the Wait that completed the Irecv), as ITAC's message profile does.
Aggregating ranks to nodes sums blocks of the matrix; the diagonal then holds intra-node traffic.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from hpclab.trace.events import Trace
from hpclab.trace.matching import completions, match


@dataclass
class MessageMatrix:
    """labels: row/column names (ranks or hostnames); volume (bytes), count, time (ns): square
    float arrays indexed [sender, receiver]."""

    labels: list
    volume: np.ndarray
    count: np.ndarray
    time: np.ndarray

    @property
    def rate(self) -> np.ndarray:
        """Bytes per second, NaN where no time was spent."""
        with np.errstate(divide="ignore", invalid="ignore"):
            return np.where(self.time > 0, self.volume / (self.time * 1e-9), np.nan)

    def frame(self, what: str = "volume") -> pd.DataFrame:
        """One of volume / count / time / rate as a labelled DataFrame (rows send, columns receive)."""
        return pd.DataFrame(getattr(self, what), index=pd.Index(self.labels, name="sender"),
                            columns=pd.Index(self.labels, name="receiver"))

    def off_diagonal(self, what: str = "count") -> float:
        """Sum of one quantity over pairs with sender != receiver (inter-node once aggregated)."""
        a = getattr(self, what)
        return float(a.sum() - np.trace(a))


def message_matrix(trace: Trace) -> MessageMatrix:
    """The rank x rank message matrix of a trace."""
    ev = trace.events
    p = trace.nranks
    msgs = match(trace).messages
    te = ev["t_enter"].to_numpy()
    tx = ev["t_exit"].to_numpy()
    done = tx.copy()
    for w, reqs in completions(trace).items():
        done[reqs] = tx[w]
    s, d = msgs["src"].to_numpy(), msgs["dst"].to_numpy()
    t = np.maximum(done[msgs["recv_idx"].to_numpy()] - te[msgs["send_idx"].to_numpy()], 0)
    vol = np.zeros((p, p))
    cnt = np.zeros((p, p))
    tim = np.zeros((p, p))
    np.add.at(vol, (s, d), msgs["bytes"].to_numpy())
    np.add.at(cnt, (s, d), 1)
    np.add.at(tim, (s, d), t)
    return MessageMatrix(list(range(p)), vol, cnt, tim)


def node_order(hosts: dict, nranks: int) -> list:
    """Node names in order of their lowest rank (ranks without a host get 'rank<r>')."""
    seen: dict = {}
    for r in range(nranks):
        seen.setdefault(hosts.get(r, f"rank{r}"), r)
    return list(seen)


def aggregate(mm: MessageMatrix, hosts: dict) -> MessageMatrix:
    """Fuse ranks to nodes: every node x node element is the block sum of its ranks."""
    nodes = node_order(hosts, len(mm.labels))
    where = {h: k for k, h in enumerate(nodes)}
    g = np.array([where[hosts.get(r, f"rank{r}")] for r in mm.labels])
    k = len(nodes)
    onehot = np.zeros((len(g), k))
    onehot[np.arange(len(g)), g] = 1.0
    fuse = lambda a: onehot.T @ a @ onehot  # noqa: E731  (block sums)
    return MessageMatrix(nodes, fuse(mm.volume), fuse(mm.count), fuse(mm.time))
