"""Which algorithm an MPI library picks for a collective, read from the library itself.

MPICH (3.4 and later) decides with selection trees written in JSON and compiled into libmpi as
strings: one for the device layer (ch4: a node-aware "composition" or a flat call) and one for the
generic algorithms (MPIR_<Coll>_intra_<algorithm>). Each level of a tree tests one property of the
call (communicator size, message size, commutative op, ...) and the first key that holds is
followed, in the order the file gives them. This module reads both trees out of the installed
library file and walks them for a call the learner describes, so the course can draw the
library's own switch points over a cost model's predictions without copying a table.

Open MPI's coll/tuned fixed rules are C code (coll_tuned_decision_fixed.c) and Intel MPI's tuning
files are binary: neither library gives its decisions as data, so `reader_for` says so for them.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path

from hpclab.core.errors import HpclabError
from hpclab.site.mpi_libraries import MpiLibrary

# a JSON object that starts a selection tree, as a run of printable bytes inside the library
_TREE = re.compile(rb'\{"collective=[\x20-\x7e]+')


@dataclass(frozen=True)
class Call:
    """One collective call as a selection tree sees it: `op` (allreduce, bcast, alltoall), `ranks`
    in the communicator, `nodes` they span, `nbytes` per rank (Alltoall: per destination) of
    `type_size`-byte elements, a commutative built-in op, not in place."""

    op: str
    ranks: int
    nodes: int
    nbytes: int
    type_size: int = 8
    commutative: bool = True
    builtin_op: bool = True
    in_place: bool = False

    @property
    def count(self) -> int:
        return max(1, self.nbytes // self.type_size)

    @property
    def parent(self) -> bool:
        """MPICH gives a communicator a node hierarchy ("parent") when it spans several nodes."""
        return self.nodes > 1 and self.ranks > self.nodes


@dataclass(frozen=True)
class Choice:
    """What the library picks: its layer's `composition` (None where the tree has none) and the
    generic `algorithm` (MPICH's name without its MPIR_<Coll>_intra_ prefix), with `ranks` the
    size of the communicator the generic algorithm runs on (the node leaders' for a node-aware
    composition) and `node_aware`."""

    composition: str | None
    algorithm: str
    ranks: int
    node_aware: bool


def pof2(n: int) -> int:
    """The largest power of two not above n (MPICH's "pof2": its count<pow2 tests read it)."""
    return 1 << (n.bit_length() - 1)


def _holds(key: str, call: Call, ranks: int, parent: bool) -> bool:
    """Does one tree key (e.g. 'avg_msg_size<=12288', 'comm_size=pow2') hold for the call?"""
    parsed = re.match(r"^([a-z_]+)(<=|<|=)(.*)$", key)
    if parsed is None:
        raise HpclabError(f"the library's selection tree has a key hpclab cannot read: '{key}'",
                          "the MPICH version is newer than the course: see hpclab/site/coll_selection.py")
    name, op, value = parsed.groups()
    if value == "any":
        return True
    numbers = {"comm_size": ranks, "avg_msg_size": call.nbytes, "count": call.count,
               "total_msg_size": call.nbytes * ranks}
    if name in numbers:
        have = numbers[name]
        if value == "pow2":
            target = pof2(ranks)
            return have < target if op == "<" else (have & (have - 1)) == 0 and op == "="
        if value == "node_comm_size":
            return call.nodes == 1 and op == "="
        limit = int(value)
        return {"<": have < limit, "<=": have <= limit, "=": have == limit}[op]
    flags = {"is_commutative": call.commutative, "is_op_built_in": call.builtin_op,
             "is_sendbuf_inplace": call.in_place, "is_multi_threaded": False, "is_node_consecutive": True}
    if name in flags:
        return flags[name] == (value == "yes")
    if name == "comm_hierarchy":
        return (value == "parent") == parent
    if name == "comm_type":
        return value == "intra"
    raise HpclabError(f"the library's selection tree tests '{key}', which hpclab does not know",
                      "the MPICH version is newer than the course: see hpclab/site/coll_selection.py")


def walk(tree: dict, call: Call, ranks: int | None = None, parent: bool | None = None) -> str:
    """Follow the first key that holds at each level until a leaf ('algorithm=...' or
    'composition=...'); returns that leaf's value."""
    ranks = call.ranks if ranks is None else ranks
    parent = call.parent if parent is None else parent
    node = tree
    while True:
        for key, sub in node.items():
            if key.startswith(("algorithm=", "composition=")):
                return key.split("=", 1)[1]
            if _holds(key, call, ranks, parent):
                node = sub
                break
        else:
            raise HpclabError(f"no branch of the library's selection tree holds for {call}",
                              "the tree has a case hpclab does not model; see hpclab/site/coll_selection.py")


@dataclass(frozen=True)
class MpichTrees:
    """MPICH's two trees: `device` (ch4's compositions) and `generic` (MPIR algorithms), each
    {"collective=<op>": tree}; `source` the library file they were read from."""

    device: dict
    generic: dict
    source: Path

    def choice(self, call: Call) -> Choice:
        key = f"collective={call.op}"
        if key not in self.generic:
            raise HpclabError(f"{self.source} has no selection tree for {call.op}", "use allreduce, bcast or alltoall")
        composition = walk(self.device[key], call) if key in self.device else None
        # the node-aware compositions run the generic algorithm between one leader a node
        node_aware = _node_aware(call.op, composition) and call.parent
        ranks, parent = (call.nodes, False) if node_aware else (call.ranks, call.parent)
        algorithm = walk(self.generic[key], call, ranks, parent)
        prefix = f"MPIR_{call.op.capitalize()}_intra_"
        return Choice(composition, algorithm.removeprefix(prefix), ranks, node_aware)


def limits(trees: MpichTrees, op: str) -> list[int]:
    """Every message-size limit (bytes) written in the trees for `op`: where a pick may change."""
    found = []

    def visit(node):
        for key, sub in node.items():
            m = re.match(r"^(?:avg_msg_size|total_msg_size)(?:<=|<)(\d+)$", key)
            if m:
                found.append(int(m.group(1)))
            if isinstance(sub, dict):
                visit(sub)

    for tree in (trees.device, trees.generic):
        visit(tree.get(f"collective={op}", {}))
    return sorted(set(found))


def _node_aware(op: str, composition: str | None) -> bool:
    """MPICH ch4's compositions (ch4_coll_impl.h): Allreduce alpha reduces inside each node, runs
    the algorithm between the node leaders, then broadcasts inside each node; Bcast alpha and beta
    go between the leaders first, then inside the nodes; the others call the generic algorithm on
    the whole communicator."""
    if composition is None:
        return False
    kind = composition.rsplit("_", 1)[-1]
    return (op == "allreduce" and kind == "alpha") or (op == "bcast" and kind in ("alpha", "beta"))


def _library_file(lib: MpiLibrary) -> Path:
    for name in ("libmpi.so.12", "libmpi.so"):
        for d in ("lib", "lib64"):
            f = lib.prefix / d / name
            if f.exists():
                return f.resolve()
    raise HpclabError(f"no libmpi.so under {lib.prefix} for {lib.name}",
                      f"install it first (make mpi-libraries), or pick an installed library")


def mpich_trees(lib: MpiLibrary) -> MpichTrees:
    """Both selection trees of an installed MPICH, read out of its libmpi."""
    path = _library_file(lib)
    trees = []
    for m in _TREE.finditer(path.read_bytes()):
        try:
            trees.append(json.loads(m.group(0)))
        except json.JSONDecodeError:
            continue
    generic = [t for t in trees if "MPIR_" in json.dumps(t)]
    device = [t for t in trees if "composition=" in json.dumps(t)]
    if not generic or not device:
        raise HpclabError(f"{path} holds no collective selection trees hpclab can read",
                          "an MPICH older than 3.4 decides in C code; the course reads 3.4 and later")
    return MpichTrees(device[0], generic[0], path)


def reader_for(lib: MpiLibrary) -> MpichTrees | str:
    """The library's trees, or in words why its decisions cannot be read as data."""
    if lib.family.lower().startswith("mpich"):
        return mpich_trees(lib)
    if lib.family.lower().startswith("open"):
        return (f"{lib.name}: Open MPI's coll/tuned decides in C code (its fixed decision rules), not from a "
                "table the library gives as data")
    return f"{lib.name}: its tuning files are binary; the library gives no table to read"
