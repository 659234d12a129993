"""On four virtual nodes (oversubscribed on a 2-core machine), the traced message matrix of a 2D
Poisson run, aggregated per node, holds exactly the inter-node messages the mapping predicts, for
the linear and the blocked mapping: in total and for every pair of nodes."""

from __future__ import annotations

import uuid
from collections import Counter

import pytest

from hpclab.jobs import experiment
from hpclab.core import paths
from hpclab.analysis import imbalance as imb
from hpclab.course.lessons import imbalance as lesson
from hpclab.trace import mapping
from hpclab.trace.load import load_run
from hpclab.trace.matrix import aggregate, message_matrix

NODES, PX, PY, K = 4, 2, 4, 2  # a 2 x 4 grid, 2 ranks on each of 4 nodes
NAMES = [f"node{n + 1}" for n in range(NODES)]


def _mappings() -> dict[str, list[int]]:
    """The linear mapping, and the blocked one that differs from it (hpclab.analysis.imbalance picks the
    2 x 1 tile here: a 1 x 2 tile on a 2 x 4 grid is the linear mapping itself)."""
    return imb.mapping_layouts(PX, PY, K)


def _pairs(nodes: list[int], exchanges: int) -> Counter:
    """Messages each (sender node, receiver node) pair should carry: every grid edge between two
    nodes carries one message each way per halo exchange."""
    out: Counter = Counter()
    for r, s in mapping.neighbour_pairs(PX, PY):
        a, b = NAMES[nodes[r]], NAMES[nodes[s]]
        if a != b:
            out[(a, b)] += exchanges
            out[(b, a)] += exchanges
    return out


def test_mappings_differ_node_by_node():
    """Do the two mappings put ranks on different nodes and join different node pairs? (On this grid
    both cut 6 grid edges, so the per-pair check below is what tells them apart.)"""
    m = _mappings()
    assert m["linear"] != m["blocked"]
    assert set(_pairs(m["linear"], 1)) != set(_pairs(m["blocked"], 1))
    assert sum(_pairs(m["blocked"], 1).values()) == mapping.internode_messages(PX, PY, m["blocked"])


@pytest.mark.cluster
@pytest.mark.slow
def test_traced_internode_messages_match_the_mapping(cluster, monkeypatch):
    """Does the per-node message matrix of a real 8-rank run on 4 nodes count 2 x exchanges x cut
    edges in total, and the predicted count for each pair of nodes, for both mappings?"""
    from hpclab.site import multinode

    # Not under /tmp: every virtual node has a private /tmp, so job files must live elsewhere.
    work = paths.build_dir() / "test-runs" / uuid.uuid4().hex[:8]
    monkeypatch.setenv("HPCLAB_RUNS", str(work / "runs"))
    # 2 CPUs per node: both of the machine's, so each node holds its 2 ranks; 8 CPUs on 2 cores.
    with multinode.virtual_nodes(NODES, link="unshaped", cpus_per_node=2) as report:
        assert "OVERSUBSCRIBED" in report.client_config
        assert report.nodes == NAMES
        mappings, specs = lesson.mapping_specs(PX, PY, NAMES, n=64, iters=4, experiment="vnodes-mapping")
        runs = experiment.run_again_if_startup_crashed(specs, timeout=900, progress=False)
    assert sorted(r.spec.label for r in runs) == sorted(mappings)
    for run in runs:
        nodes = mappings[run.spec.label]
        trace = load_run(run.path)
        assert [trace.hosts[r] for r in range(PX * PY)] == [NAMES[n] for n in nodes], "ranks ran where mapped"
        exchanges = imb.exchanges_of(trace)
        assert exchanges > 0
        per_node = aggregate(message_matrix(trace), trace.hosts)
        assert per_node.off_diagonal("count") == mapping.internode_messages(PX, PY, nodes, exchanges=exchanges)
        counts = per_node.frame("count")
        seen = Counter({(a, b): int(counts.loc[a, b]) for a in counts.index for b in counts.columns
                        if a != b and counts.loc[a, b]})
        assert seen == _pairs(nodes, exchanges), run.spec.label
