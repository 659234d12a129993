"""Machine topology from hwloc (its figures are in hpclab.plots.machine).

`lstopo --of xml` describes a node as packages (sockets), NUMA nodes, caches, cores and PUs
(hardware threads). This module reads that XML (written for hwloc 2.x, tested with 2.9; hwloc
1.x files, with "Socket" objects and NUMA nodes as parents, follow the same rules but are
untested) into a flat table of PUs, runs lstopo for pictures and for synthetic
topologies ("pack:2 numa:1 core:4 pu:2": a two-socket node to teach NUMA on a laptop), and draws
its own diagram in which each PU box is coloured by the ranks bound to it. Drawing two binding
tables side by side (the launcher's mask and the CPU each rank actually ran on) is what makes
requested versus actual placement visible.

CPU numbers: `pu` is the operating-system index (what taskset, Slurm masks and sched_getcpu
use); `pu_logical` is hwloc's logical index (what Open MPI's --report-bindings diagram counts).
"""

from __future__ import annotations

import shutil
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from hpclab.core import commands
from hpclab.core.errors import HpclabError

PU_COLUMNS = ["pu", "pu_logical", "core", "core_os", "package", "package_os", "numa"]
CACHE_COLUMNS = ["level", "bytes", "count"]
_CACHE_TYPES = ("L1Cache", "L2Cache", "L3Cache", "L4Cache", "L5Cache")


# ----------------------------------------------------------------------------------------------
# CPU set notations
# ----------------------------------------------------------------------------------------------

def mask_to_cpus(mask: str) -> list[int]:
    """CPU numbers set in a hexadecimal mask.

    mask: "0x3", "0x00000003", or hwloc's comma-separated 32-bit words "0x00000001,0xffffffff"
    (most significant word first). Returns sorted CPU numbers ([0, 1] for "0x3").
    Raises HpclabError for anything else (including hwloc's infinite "0xf...f" sets).
    """
    text = mask.strip().lower()
    words = text.split(",")
    bits = ""
    for word in words:
        digits = word[2:] if word.startswith("0x") else word
        if not digits or any(c not in "0123456789abcdef" for c in digits):
            raise HpclabError(f"not a hexadecimal CPU mask: {mask!r}", "expected e.g. 0x3")
        # each hwloc word is 32 bits; a single word may be any length
        bits += digits.rjust(8, "0") if len(words) > 1 else digits
    value = int(bits, 16)
    return [i for i in range(value.bit_length()) if value >> i & 1]


def cpulist_to_cpus(text: str) -> list[int]:
    """CPU numbers in a Linux CPU list such as "0-3,8,10-11" (as in /proc/self/status).

    Returns sorted unique CPU numbers. Raises HpclabError when the list is malformed.
    """
    cpus: set[int] = set()
    for part in text.strip().split(","):
        part = part.strip()
        if not part:
            continue
        lo, sep, hi = part.partition("-")
        if not lo.isdigit() or (sep and not hi.isdigit()):
            raise HpclabError(f"not a CPU list: {text!r}", "expected e.g. 0-3,8")
        first, last = int(lo), int(hi) if sep else int(lo)
        if last < first:
            raise HpclabError(f"CPU range {part!r} runs backwards", "write low-high")
        cpus.update(range(first, last + 1))
    return sorted(cpus)


def cpus_to_cpulist(cpus) -> str:
    """The short Linux list form of CPU numbers: [0, 1, 2, 5] -> "0-2,5"."""
    out, run = [], []
    for c in sorted(set(int(c) for c in cpus)):
        if run and c == run[-1] + 1:
            run.append(c)
            continue
        if run:
            out.append(f"{run[0]}-{run[-1]}" if len(run) > 1 else str(run[0]))
        run = [c]
    if run:
        out.append(f"{run[0]}-{run[-1]}" if len(run) > 1 else str(run[0]))
    return ",".join(out)


# ----------------------------------------------------------------------------------------------
# The topology table
# ----------------------------------------------------------------------------------------------

@dataclass
class Topology:
    """One node's hardware as hwloc reports it.

    pus: one row per PU (hardware thread): pu (OS index), pu_logical, core (logical core index),
    core_os, package (logical), package_os, numa (OS index of the local NUMA node, -1 unknown).
    numa_nodes: one row per NUMA node: numa (OS index), memory_bytes.
    caches: data and unified caches, one row per level: level (1, 2, 3...), bytes (per cache),
    count (caches of that level on the node); empty when hwloc lists none.
    host: the HostName info attribute when present; source: file or command it came from.
    """

    pus: pd.DataFrame
    numa_nodes: pd.DataFrame
    caches: pd.DataFrame = field(default_factory=lambda: pd.DataFrame(columns=CACHE_COLUMNS))
    host: str | None = None
    source: str = ""
    attrs: dict = field(default_factory=dict)

    @property
    def n_packages(self) -> int:
        return int(self.pus["package"].nunique())

    @property
    def n_cores(self) -> int:
        return int(self.pus["core"].nunique())

    @property
    def n_pus(self) -> int:
        return len(self.pus)

    def summary(self) -> str:
        """One line: "2 packages, 2 NUMA nodes, 8 cores, 16 PUs"."""
        return (f"{self.n_packages} package(s), {len(self.numa_nodes)} NUMA node(s), "
                f"{self.n_cores} core(s), {self.n_pus} PU(s)")

    def logical_to_os(self, logical) -> list[int]:
        """OS PU numbers for hwloc logical PU indices (as counted by --report-bindings)."""
        table = dict(zip(self.pus["pu_logical"], self.pus["pu"]))
        try:
            return sorted(int(table[int(i)]) for i in logical)
        except KeyError as exc:
            raise HpclabError(f"logical PU {exc.args[0]} does not exist on this topology "
                              f"({self.summary()})", "check that the topology matches the run's host"
                              ) from exc


def _bits(attr: str | None) -> list[int]:
    if not attr:
        return []
    try:
        return mask_to_cpus(attr)
    except HpclabError:
        return []


def parse_xml(text: str, source: str = "lstopo XML") -> Topology:
    """Parse the XML written by `lstopo --of xml` (hwloc 1.x or 2.x).

    text: the XML document; source: file name for messages. Returns a Topology.
    Raises HpclabError naming source and line for malformed XML, and when no PU is found.
    """
    try:
        root = ET.fromstring(text)
    except ET.ParseError as exc:
        line, col = exc.position
        raise HpclabError(f"{source}:{line}: not well-formed XML (column {col})",
                          "regenerate it with `lstopo --of xml FILE`") from exc
    if root.tag != "topology":
        raise HpclabError(f"{source}:1: root element is <{root.tag}>, not <topology>",
                          "give the XML written by `lstopo --of xml`")
    rows: list[dict] = []
    numa: dict[int, int] = {}
    caches: list[tuple[int, int]] = []  # (level, bytes) of each data or unified cache
    counters = {"Core": 0, "Package": 0}
    host = None

    def walk(node: ET.Element, package: tuple[int, int] | None, core: tuple[int, int] | None):
        nonlocal host
        for child in node:
            if child.tag == "info" and child.get("name") == "HostName" and host is None:
                host = child.get("value")
            if child.tag != "object":
                continue
            kind = child.get("type")
            os_index = int(child.get("os_index", "-1"))
            pkg, cor = package, core
            if kind in ("Package", "Socket"):
                pkg = (counters["Package"], os_index)
                counters["Package"] += 1
            elif kind == "Core":
                cor = (counters["Core"], os_index)
                counters["Core"] += 1
            elif kind == "NUMANode":
                numa[os_index] = int(child.get("local_memory", "0"))
            elif (kind in _CACHE_TYPES or kind == "Cache") and child.get("cache_type", "0") in ("0", "1"):
                # cache_type 0 unified, 1 data (2 is an instruction cache: not where data lives)
                size, depth = int(child.get("cache_size", "0")), child.get("depth")
                if size and (depth or kind != "Cache"):
                    caches.append((int(depth or kind[1]), size))
            elif kind == "PU":
                nodes = _bits(child.get("nodeset"))
                if cor is None:
                    # no Core objects (some VMs): each PU is its own core
                    cor = (counters["Core"], os_index)
                    counters["Core"] += 1
                rows.append({
                    "pu": os_index,
                    "pu_logical": len(rows),
                    "core": cor[0],
                    "core_os": cor[1],
                    "package": pkg[0] if pkg else 0,
                    "package_os": pkg[1] if pkg else 0,
                    "numa": nodes[0] if nodes else -1,
                })
            walk(child, pkg, cor)

    walk(root, None, None)
    if not rows:
        raise HpclabError(f"{source}: no PU objects in the topology (truncated file?)",
                          "regenerate it with `lstopo --of xml FILE`")
    pus = pd.DataFrame(rows, columns=PU_COLUMNS)
    if not numa:  # hwloc without NUMA information: one node holding everything
        numa = {0: 0}
        pus["numa"] = pus["numa"].where(pus["numa"] >= 0, 0)
    nodes = pd.DataFrame(sorted(numa.items()), columns=["numa", "memory_bytes"])
    cache_table = pd.DataFrame(caches, columns=["level", "bytes"])
    cache_table = (cache_table.groupby("level").agg(bytes=("bytes", "max"), count=("bytes", "size"))
                   .reset_index()[CACHE_COLUMNS] if caches else pd.DataFrame(columns=CACHE_COLUMNS))
    return Topology(pus=pus, numa_nodes=nodes, caches=cache_table, host=host, source=source)


def read_xml(path: str | Path) -> Topology:
    """Read a topology XML file (as written by `lstopo --of xml FILE`). Returns a Topology."""
    path = Path(path)
    try:
        text = path.read_text(errors="replace")
    except OSError as exc:
        raise HpclabError(f"cannot read {path}: {exc.strerror}", "check the path") from exc
    return parse_xml(text, source=str(path))


def _lstopo() -> str:
    exe = shutil.which("lstopo") or shutil.which("lstopo-no-graphics")
    if exe is None:
        raise HpclabError("lstopo is not on PATH", "install hwloc (apt-get install hwloc)")
    return exe


def from_lstopo(input: str | Path | None = None, timeout: float = 60.0) -> Topology:
    """Run `lstopo --of xml` and parse it.

    input: None for this machine, a topology XML file (e.g. saved in a run folder), or a
    synthetic description such as "pack:2 numa:1 core:4 pu:2". Returns a Topology.
    """
    cmd = [_lstopo(), "--of", "xml"]
    if input is not None:
        cmd += ["--input", str(input)]
    cmd.append("-")
    text = commands.output(cmd, "read the topology with lstopo",
                           "check the --input value (a synthetic description, XML file or /)", timeout=timeout)
    return parse_xml(text, source=" ".join(cmd))


def synthetic(description: str) -> Topology:
    """A made-up topology from an hwloc synthetic description ("pack:2 numa:1 core:4 pu:2").

    Useful for teaching NUMA and sockets on a machine that has one of each. Returns a Topology.
    """
    topo = from_lstopo(input=description)
    topo.host = f"synthetic '{description}'"
    return topo


def lstopo_image(out: str | Path, input: str | Path | None = None, fmt: str | None = None,
                 timeout: float = 60.0) -> Path:
    """Draw the topology with lstopo itself (`lstopo --of png|svg|pdf OUT`).

    out: image path to create (refused if it exists: nothing is overwritten);
    input: as for from_lstopo; fmt: "png", "svg" or "pdf" (default: out's suffix).
    Returns the image path.
    """
    out = Path(out)
    fmt = (fmt or out.suffix.lstrip(".")).lower()
    if fmt not in ("png", "svg", "pdf"):
        raise HpclabError(f"lstopo image format {fmt!r} not supported here", "use png, svg or pdf")
    if out.exists():
        raise HpclabError(f"{out} already exists", "choose a new file name")
    cmd = [_lstopo(), "--of", fmt]
    if input is not None:
        cmd += ["--input", str(input)]
    cmd.append(str(out))
    commands.output(cmd, f"draw {out.name} with lstopo",
                    "check the --input value (a synthetic description, XML file or /)", timeout=timeout)
    return out
