"""Reading an MPI library's own collective selection (hpclab.site.coll_selection): the tree walk
on small trees written here (exact), and the trees of the MPICH installed here (properties)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from hpclab.core.errors import HpclabError
from hpclab.site import coll_selection as sel
from hpclab.site import mpi_libraries

TREE = json.loads("""{
  "comm_type=intra": {
    "comm_size<8": {"algorithm=small_comm": {}},
    "comm_size=pow2": {
      "avg_msg_size<=64": {"algorithm=pow2_tiny": {}},
      "avg_msg_size=any": {"algorithm=pow2_big": {}}
    },
    "comm_size=any": {
      "is_commutative=no": {"algorithm=not_commutative": {}},
      "count<pow2": {"algorithm=few_elements": {}},
      "count=any": {"algorithm=the_rest": {}}
    }
  }
}""")


@pytest.mark.parametrize("ranks,nbytes,commutative,expected", [
    (4, 1 << 20, True, "small_comm"),         # the first key that holds wins, in the file's order
    (16, 64, True, "pow2_tiny"), (16, 72, True, "pow2_big"),
    (24, 8, False, "not_commutative"),
    (24, 8 * 15, True, "few_elements"),       # 15 doubles < 16, the largest power of two <= 24
    (24, 8 * 16, True, "the_rest"),
])
def test_the_walk_follows_the_first_key_that_holds(ranks, nbytes, commutative, expected):
    call = sel.Call("allreduce", ranks, 1, nbytes, commutative=commutative)
    assert sel.walk(TREE, call) == expected


def test_a_key_the_course_does_not_know_is_a_clear_error():
    with pytest.raises(HpclabError, match="tests 'gpu_count=2'"):
        sel.walk({"gpu_count=2": {"algorithm=x": {}}}, sel.Call("bcast", 8, 2, 8))
    with pytest.raises(HpclabError, match="cannot read: 'gpu aware'"):
        sel.walk({"gpu aware": {"algorithm=x": {}}}, sel.Call("bcast", 8, 2, 8))


def test_a_communicator_over_several_nodes_with_several_ranks_each_is_a_parent():
    assert sel.Call("bcast", 384, 16, 8).parent
    assert not sel.Call("bcast", 16, 16, 8).parent and not sel.Call("bcast", 24, 1, 8).parent


def _mpich():
    libs = [lib for lib in map(mpi_libraries.get, mpi_libraries.names())
            if lib.family.lower().startswith("mpich") and lib.installed()]
    if not libs:
        pytest.skip("no MPICH installed here (make mpi-libraries)")
    return libs[0]


def test_the_installed_mpich_gives_both_trees_and_every_pick_is_one_of_its_algorithms():
    """Read out of libmpi itself: do the picks at 4 and 384 ranks name algorithms MPICH's own
    record lists for that operation (its forcing variable's values)?"""
    lib = _mpich()
    trees = sel.mpich_trees(lib)
    assert Path(trees.source).is_file()
    for op in ("allreduce", "bcast", "alltoall"):
        known = {a.name for a in lib.collectives.algorithms[op]}
        for ranks, nodes in ((4, 2), (384, 16)):
            for nbytes in (8, 1024, 1 << 20):
                choice = trees.choice(sel.Call(op, ranks, nodes, nbytes))
                assert choice.algorithm in known, (op, ranks, nbytes, choice)
                assert choice.ranks == (nodes if choice.node_aware else ranks)
        assert all(x >= 0 for x in sel.limits(trees, op))
    assert sel.limits(trees, "bcast"), "MPICH's Bcast switches on the message size"


def test_libraries_that_decide_in_code_say_so():
    for name in mpi_libraries.names():
        lib = mpi_libraries.get(name)
        if not lib.family.lower().startswith("mpich"):
            said = sel.reader_for(lib)
            assert isinstance(said, str) and lib.name in said
