"""Binding reports of the launchers -> one row per rank: where the launcher pinned it.

Two formats, both written to stderr by the launcher, and both found among other output:
- Slurm's `srun --cpu-bind=verbose,...` (22.05 prints, per task)
  `cpu-bind=MASK - host, task  0  0 [1234]: mask 0x1 set`
  (older releases write `cpu_bind`; the unit appears as `cpu-bind-cores=`; NONE/NULL have no
  "set"). The mask holds operating-system CPU numbers.
- Open MPI's `mpirun --report-bindings` (4.x)
  `[host:1234] MCW rank 0 bound to socket 0[core 0[hwt 0]]: [B/.]`
  The bracket diagram has one [...] per socket, cores separated by '/', one character per
  hardware thread (B bound, . not). Positions count hwloc *logical* PUs, so the rows say
  numbering = "logical"; hpclab.site.topology converts them with the node's topology.
Rows: rank, host, cpus (list of int, None when not bound), numbering, source, pid,
local_rank (srun only), bind (the srun bind type or the mpirun binding text).
"""

from __future__ import annotations

import re

import pandas as pd

from hpclab.kernels.contract import fail, read_text
from hpclab.site.topology import mask_to_cpus

COLUMNS = ["rank", "host", "cpus", "numbering", "source", "pid", "local_rank", "bind"]

_SRUN = re.compile(
    r"^cpu[-_]bind(?P<units>[-_][a-z]+)?=(?P<type>[A-Z]+)\s*- (?P<host>[^,\s]+), "
    r"task\s+(?P<task>\d+)\s+(?P<local>\d+) \[(?P<pid>\d+)\]: "
    r"mask 0x(?P<mask>[0-9a-fA-F]+)(?P<set> set)?(?P<failed> FAILED)?\s*$")
_SRUN_HINT = re.compile(r"^cpu[-_]bind")
_OMPI = re.compile(
    r"^\[(?P<host>[^\]:]+):(?P<pid>\d+)\] MCW rank (?P<rank>\d+) "
    r"(?:bound to (?P<where>.*): (?P<diagram>(?:\[[^\]]*\])+)"
    r"|(?P<unbound>is not bound).*)\s*$")
_OMPI_HINT = re.compile(r"\bMCW rank \d")


def _diagram_cpus(diagram: str) -> list[int]:
    """Logical PU indices marked B in an Open MPI binding diagram such as [B./..][../..]."""
    cpus, index = [], 0
    for socket in re.findall(r"\[([^\]]*)\]", diagram):
        for core in socket.split("/"):
            for mark in core:
                if mark == "B":
                    cpus.append(index)
                index += 1
    return cpus


def parse_bindings(text: str, source: str = "stderr") -> pd.DataFrame:
    """Find srun cpu-bind and mpirun report-bindings lines in launcher output.

    text: stdout/stderr of a job (other lines are ignored); source: file name for messages.
    Returns a DataFrame with COLUMNS, one row per binding line, sorted by rank. A line that
    starts like a binding report but cannot be read raises HpclabError naming file and line
    (e.g. a line cut by a full disk), since silently dropping it would hide a rank.
    """
    rows = []
    for lineno, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if _SRUN_HINT.match(line):
            m = _SRUN.match(line)
            if not m:
                raise fail(source, lineno, f"unreadable srun cpu-bind line: {line[:100]!r}",
                           "expected 'cpu-bind=MASK - host, task  0  0 [pid]: mask 0x1 set'")
            kind = m["type"]
            bound = kind not in ("NONE", "NULL")
            rows.append({"rank": int(m["task"]), "host": m["host"],
                         "cpus": mask_to_cpus("0x" + m["mask"]) if bound else None,
                         "numbering": "os", "source": "srun", "pid": int(m["pid"]),
                         "local_rank": int(m["local"]),
                         "bind": kind + ((m["units"] or "").replace("_", "-")) +
                                 (" FAILED" if m["failed"] else "")})
        elif _OMPI_HINT.search(line):
            m = _OMPI.match(line)
            if not m:
                raise fail(source, lineno, f"unreadable mpirun --report-bindings line: {line[:100]!r}",
                           "expected '[host:pid] MCW rank 0 bound to socket 0[core 0[hwt 0]]: [B/.]'")
            unbound = m["unbound"] is not None
            rows.append({"rank": int(m["rank"]), "host": m["host"],
                         "cpus": None if unbound else _diagram_cpus(m["diagram"]),
                         "numbering": "logical", "source": "mpirun", "pid": int(m["pid"]),
                         "local_rank": None,
                         "bind": "not bound" if unbound else m["where"]})
    table = pd.DataFrame(rows, columns=COLUMNS)
    return table.sort_values(["source", "rank"], kind="stable", ignore_index=True)


def read_bindings(path) -> pd.DataFrame:
    """parse_bindings on a file (path). Returns the same table."""
    return parse_bindings(read_text(path), source=str(path))
