"""One run folder -> one tidy table: the kernel's results plus where each rank was bound.

A run folder holds the kernel's JSON report (`result.json`), the job's `stdout` and `stderr`
(launcher binding lines: mpirun --report-bindings and srun --cpu-bind=verbose write to stderr)
and provenance files written by hpclab.runs.folder. parse_run reads them and returns the kernel's tidy
table with the run id and, per rank, the CPUs the launcher bound it to.
"""

from __future__ import annotations

import datetime as dt
import json
import socket
from pathlib import Path

import pandas as pd

from hpclab.core.errors import HpclabError
from hpclab.kernels import registry
from hpclab.kernels.contract import doc_attrs, load_result, read_text, records
from hpclab.runs.parse import network
from hpclab.runs.parse.bindings import parse_bindings
from hpclab.site import topology

RESULT = "result.json"
# Files other parts of hpclab may leave in a run folder, read for provenance only if present.
PROVENANCE_FILES = ("provenance.json", "status.json", "spec.json")
# The job preamble saves each node's topology as provenance/lstopo-<host>.xml.
TOPOLOGY_GLOB = "provenance/lstopo-*.xml"


def run_provenance(run_dir: str | Path, doc: dict | None = None) -> dict:
    """Where and when a run happened, for figure footnotes.

    run_dir: the run folder; doc: its decoded result.json if already read.
    Returns {"run_id", "host", "date"}: run_id is the folder name; host and date come from the
    folder's provenance/status/spec JSON when they say so, else the hosts of the report's
    placement and the report file's modification time (ISO date and time, local zone).
    """
    run_dir = Path(run_dir)
    found: dict = {}
    for name in PROVENANCE_FILES:
        path = run_dir / name
        if not path.is_file():
            continue
        try:
            data = json.loads(path.read_text())
        except (OSError, ValueError):
            continue
        if not isinstance(data, dict):
            continue
        for key in ("host", "hostname", "nodes", "nodelist"):
            if data.get(key) and "host" not in found:
                value = data[key]
                found["host"] = ",".join(value) if isinstance(value, list) else str(value)
        for key in ("date", "started", "start", "submitted", "created"):
            if data.get(key) and "date" not in found:
                found["date"] = str(data[key])
        if data.get("run_id") and "run_id" not in found:
            found["run_id"] = str(data["run_id"])
    if "host" not in found and doc is not None:
        hosts = sorted({p.get("host") for p in doc.get("placement", []) if p.get("host")})
        if hosts:
            found["host"] = ",".join(hosts)
    if "date" not in found:
        source = run_dir / RESULT if (run_dir / RESULT).exists() else run_dir
        if source.exists():
            stamp = dt.datetime.fromtimestamp(source.stat().st_mtime)
            found["date"] = stamp.isoformat(timespec="seconds")
    return {"run_id": found.get("run_id", run_dir.name), "host": found.get("host"),
            "date": found.get("date")}


def run_topology(run_dir: str | Path, host: str | None = None):
    """The topology of a host used by a run, from the run folder's provenance/lstopo-<host>.xml.

    host: which node (default: the only one saved). Returns an hpclab.site.topology.Topology.
    Raises HpclabError when the folder has no (or no unique) topology file for that host.
    """
    run_dir = Path(run_dir)
    files = sorted(run_dir.glob(TOPOLOGY_GLOB))
    if host is not None:
        files = [f for f in files if f.name == f"lstopo-{host}.xml"]
    if len(files) != 1:
        names = ", ".join(f.name for f in sorted(run_dir.glob(TOPOLOGY_GLOB))) or "none"
        raise HpclabError(f"{run_dir}: {'no' if not files else 'more than one'} topology file"
                          f"{' for host ' + host if host else ''} (found: {names})",
                          "pass host=..., or draw this machine with hpclab.site.topology.from_lstopo()")
    topo = topology.read_xml(files[0])
    topo.host = topo.host or files[0].stem.removeprefix("lstopo-")
    return topo


def run_bindings(run_dir: str | Path) -> pd.DataFrame:
    """Launcher binding lines found in a run folder's stderr and stdout (see parse.bindings).

    Logical CPU numbers from mpirun are converted to OS numbers with the host's topology from
    provenance/lstopo-<host>.xml, or this machine's when the run's host is this machine
    (otherwise they stay logical, numbering = "logical"). Returns the bindings table.
    """
    run_dir = Path(run_dir)
    tables = [parse_bindings(read_text(run_dir / name), source=str(run_dir / name))
              for name in ("stderr", "stdout") if (run_dir / name).is_file()]
    tables = [t for t in tables if not t.empty]
    if not tables:
        return parse_bindings("")
    table = pd.concat(tables, ignore_index=True).drop_duplicates(["source", "rank"])
    table = table.reset_index(drop=True)
    for host in sorted(set(table.loc[table["numbering"] == "logical", "host"])):
        rows = (table["numbering"] == "logical") & (table["host"] == host)
        try:
            topo = run_topology(run_dir, host)
        except HpclabError:
            topo = None
            if host == socket.gethostname():
                try:
                    topo = topology.from_lstopo()
                except HpclabError:
                    topo = None
        if topo is None:
            continue
        table.loc[rows, "cpus"] = pd.Series(
            [topo.logical_to_os(c) if c is not None else None for c in table.loc[rows, "cpus"]],
            index=table.index[rows], dtype=object)
        table.loc[rows, "numbering"] = "os"
    return table


def _add_bindings(table: pd.DataFrame, bindings: pd.DataFrame) -> pd.DataFrame:
    """Per-rank launcher binding columns: bind_source, bound_cpus, bound_numbering."""
    if "rank" not in table:
        return table
    # srun lines win over mpirun lines if a job has both (srun binds, mpirun then re-binds
    # inside the allocation only when asked; the kernel's own placement shows the outcome)
    first = bindings.sort_values("source", key=lambda s: s.map({"srun": 0, "mpirun": 1}))
    first = first.drop_duplicates("rank").set_index("rank")
    table = table.copy()
    table["bind_source"] = table["rank"].map(first["source"]) if not first.empty else None
    table["bound_cpus"] = table["rank"].map(first["cpus"]) if not first.empty else None
    table["bound_numbering"] = table["rank"].map(first["numbering"]) if not first.empty else None
    return table


def parse_run(run_dir: str | Path, kernel: str) -> pd.DataFrame:
    """The tidy results of one run folder.

    run_dir: folder with result.json (kernel JSON report) and stdout/stderr; kernel: a name from
    hpclab.kernels.registry.names(). Returns that kernel's table (registry.get(kernel).table;
    the columns are listed in hpclab/kernels/<kernel>.py):
    - pingpong: one row per message size (bytes, repetitions, t_usec, mbytes_per_sec, pml, btl,
      mtl, transport, transport_source, interface: the network interface that carried the bytes,
      "none", or None when the job did not count them; hpclab.runs.parse.network);
    - stream: one row per (rank, function) (mb_s [MB/s], host, cpu, allowed, threads,
      thread_cpus);
    - poisson: one row per (rank, phase) (kind compute|mpi, seconds, rank_total, coords, ...);
    each with run_id and, where a table has ranks, the launcher's binding per rank (bind_source,
    bound_cpus, bound_numbering). .attrs (plain values, so tables of several runs concatenate):
    provenance {run_id, host, date}, kernel, version, arguments, config, validation, placement
    and bindings (lists of dicts; pd.DataFrame(...) gives tables), and the kernel's own extras
    (stream: "kernels", aggregate rates as records; poisson: "summary").
    A kernel: program run has no table (no output contract): HpclabError naming its trace.
    Without result.json, a kernel with a text parser (pingpong) falls back to its stdout
    (attrs["from"] says which).
    Raises HpclabError naming the file for a missing, truncated or malformed report.
    """
    run_dir = Path(run_dir)
    unit = registry.get(kernel)
    if not run_dir.is_dir():
        raise HpclabError(f"{run_dir} is not a run folder", "list runs with `ls runs/`")
    if not unit.contract:  # kernel: program: no report to parse; its table function raises
        unit.table({}, str(run_dir))  # the HpclabError that says where its results are
    result = run_dir / RESULT
    attrs: dict = {}
    if result.is_file():
        doc = load_result(result, kernel=kernel)
        src = str(result)
        table, extra = unit.table(doc, src)
        attrs.update(extra)
        attrs.update(doc_attrs(doc, src))
        attrs["from"] = "result.json"
    elif unit.text is not None and (run_dir / "stdout").is_file():
        doc = None
        table = unit.text(read_text(run_dir / "stdout"), str(run_dir / "stdout"))
        attrs.update(table.attrs)
        attrs["from"] = "stdout"
    else:
        state = ""
        status = run_dir / "status.json"
        if status.is_file():
            try:
                state = f" (status: {json.loads(status.read_text()).get('state', '?')})"
            except (OSError, ValueError):
                state = ""
        raise HpclabError(f"{result}: no such file{state}",
                          f"the job did not write its report; read {run_dir / 'stderr'}")
    table = table.copy()
    table.insert(0, "run_id", run_dir.name)
    bindings = run_bindings(run_dir)
    table = _add_bindings(table, bindings)
    attrs["bindings"] = records(bindings)
    attrs["provenance"] = run_provenance(run_dir, doc)
    sent = network.bytes_sent(run_dir)
    attrs["bytes_sent"] = sent
    if "transport" in table:  # beside what the library said, the interface the bytes went through
        table["interface"] = network.carried_by(sent)
    table.attrs.clear()
    table.attrs.update(attrs)
    return table
