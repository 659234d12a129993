"""Message matrix, node aggregation, rank-to-node mappings and the Poisson trace generator."""

import numpy as np
import pytest

from hpclab.core.errors import HpclabError
from hpclab.trace.mapping import (blocked_mapping, internode_from_trace, internode_messages,
                                  linear_mapping, rankfile, slurm_hostfile)
from hpclab.trace.matching import match
from hpclab.trace.matrix import aggregate, message_matrix
from hpclab.trace.poisson import poisson_trace, split_sizes


@pytest.fixture(scope="module")
def halo():
    nodes = linear_mapping(4, 4, 4)
    return poisson_trace(4, 4, n=40, iterations=2, ns_per_point=2.0, nodes=nodes, exchange="nonblocking")


def test_bytes_sent_equal_bytes_received(halo):
    """Does the matrix account every byte once: total sent = total received = all send bytes?"""
    mm = message_matrix(halo)
    sends = match(halo).messages
    ev = halo.events
    recv_side = ev.loc[sends["recv_idx"], "bytes"].sum()
    assert mm.volume.sum(axis=1).sum() == mm.volume.sum(axis=0).sum() == sends["bytes"].sum() == recv_side


def test_node_aggregation_is_a_block_sum(halo):
    """Is each node x node element the sum of its ranks' block, diagonal = intra-node traffic?"""
    mm = message_matrix(halo)
    agg = aggregate(mm, halo.hosts)
    for a in range(4):
        for b in range(4):
            block = mm.volume[4 * a:4 * a + 4, 4 * b:4 * b + 4].sum()
            assert agg.volume[a, b] == block
    assert agg.volume.sum() == mm.volume.sum()


@pytest.mark.parametrize("exchange", ["blocking", "sendrecv", "nonblocking"])
def test_analytic_internode_count_matches_the_trace(exchange):
    """Does the analytic inter-node message count equal the one counted in a generated trace,
    for the linear and the blocked mapping?"""
    for nodes in (linear_mapping(4, 4, 4), blocked_mapping(4, 4, 4)):
        t = poisson_trace(4, 4, n=32, iterations=3, ns_per_point=1.0, nodes=nodes, exchange=exchange)
        assert internode_from_trace(t, 3) == internode_messages(4, 4, nodes, exchanges=3)


def test_blocked_mapping_needs_fewer_internode_messages():
    """Does putting 2 x 2 tiles on each node beat the linear mapping for a 4 x 4 grid on 4 nodes?"""
    lin = internode_messages(4, 4, linear_mapping(4, 4, 4))
    blk = internode_messages(4, 4, blocked_mapping(4, 4, 4))
    assert blk < lin


def test_seed_scale_blocked_tiles_are_six_by_four():
    """For the seed's 24 x 16 grid on nodes of 24 cores, is every node a 6 x 4 tile?"""
    nodes = np.array(blocked_mapping(24, 16, 24)).reshape(24, 16)
    assert (nodes[:6, :4] == 0).all() and np.bincount(nodes.ravel()).tolist() == [24] * 16


def test_hostfile_and_rankfile_list_every_rank_on_its_node():
    """Do the Slurm host file and the Open MPI rankfile put rank r on the node the mapping says?"""
    nodes = blocked_mapping(2, 4, 4)
    hf = slurm_hostfile(nodes, ["a", "b"]).splitlines()
    assert hf == ["a", "a", "b", "b", "a", "a", "b", "b"]
    rf = rankfile(nodes, ["a", "b"]).splitlines()
    assert rf[0] == "rank 0=a slot=0" and rf[4] == "rank 4=a slot=2" and rf[7] == "rank 7=b slot=3"


def test_impossible_tile_is_a_clear_error():
    """Does asking for a tile that does not divide the grid fail with a message saying so?"""
    with pytest.raises(HpclabError, match="tile"):
        blocked_mapping(5, 5, 4)


def test_split_sizes_cover_the_grid():
    """Do the local sizes add up to n and differ by at most one (3600 over 384 rows: 9 or 10)?"""
    s = split_sizes(3600, 384)
    assert sum(s) == 3600 and set(s) == {9, 10}
