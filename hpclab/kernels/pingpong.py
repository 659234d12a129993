"""pingpong: its arguments, and its reports -> one row per message size, with the transport.

The text table follows Intel MPI Benchmarks' PingPong (`#bytes #repetitions t[usec]
Mbytes/sec`, t = half the round trip), but MB here is 10^6 bytes. The transport-selection
report is the `pml`, `btl`, `mtl`, `transport_source` keys of the key = value block (JSON:
results.transport): Open MPI's PML, the BTLs reaching the peer (ob1 only) and the MTL (cm only).
"""

from __future__ import annotations

from typing import Literal

import pandas as pd
from pydantic import Field

from hpclab.kernels.contract import Report, fail, need, parse_report_text, report_attrs, results_of, table_lines
from hpclab.kernels.registry import Kernel, KernelArgs, register


class PingpongArgs(KernelArgs):
    """pingpong: max_bytes = largest message (bytes); reps = round trips per size; warmup =
    untimed round trips before each size; no_check skips payload verification; pairs makes every rank pair exchange at once."""

    kernel: Literal["pingpong"] = "pingpong"
    max_bytes: int | None = Field(None, ge=0)
    reps: int | None = Field(None, ge=1)
    warmup: int | None = Field(None, ge=0)
    no_check: bool = False
    pairs: bool = False


def check_spec(spec) -> None:
    """A pingpong needs a pair of ranks, and with pairs=True every rank needs a partner.
    spec: an hpclab.spec.model.Spec (reads ntasks, args). Raises ValueError."""
    if spec.ntasks < 2:
        raise ValueError(f"pingpong needs at least ntasks=2 (one pair), got ntasks={spec.ntasks}")
    if isinstance(spec.args, PingpongArgs) and spec.args.pairs and spec.ntasks % 2:
        raise ValueError(f"pingpong with pairs needs an even ntasks, got {spec.ntasks}")


COLUMNS = ["bytes", "repetitions", "t_usec", "mbytes_per_sec", "pml", "btl", "mtl",
           "transport", "transport_source"]
HEADER = ["#bytes", "#repetitions", "t[usec]", "Mbytes/sec"]


def transport_label(pml: str | None, btl, mtl: str | None) -> str:
    """A short name for the path messages took: "ob1/vader", "ob1/tcp", "cm/psm2", "ucx".

    pml: selected PML; btl: BTL names (list or comma string) reaching the peer; mtl: selected
    MTL. `self` is dropped unless it is the only BTL (it only carries messages to oneself).
    """
    if isinstance(btl, str):
        btl = [b for b in btl.split(",") if b]
    btl = list(btl or [])
    if not pml:
        return "unknown"
    if pml == "ob1":
        peers = [b for b in btl if b != "self"] or btl
        return "ob1/" + "+".join(peers) if peers else "ob1"
    if pml == "cm":
        return f"cm/{mtl}" if mtl else "cm"
    return pml


def transport_of_report(report: Report) -> dict:
    """The transport-selection lines of a text report as {pml, btl (list), mtl, source, label}."""
    cfg = report.config
    missing = [k for k in ("pml", "btl", "mtl") if k not in cfg]
    if missing:
        raise fail(report.source, None, f"no transport lines ({', '.join(missing)} = ...) in the "
                   "key = value block", "is this a pingpong report from this hpclab version?")
    btl = [b for b in str(cfg["btl"] or "").split(",") if b]
    return {"pml": cfg["pml"], "btl": btl, "mtl": cfg["mtl"],
            "source": cfg.get("transport_source"),
            "label": transport_label(cfg["pml"], btl, cfg["mtl"])}


def _frame(rows: list[dict], transport: dict) -> pd.DataFrame:
    table = pd.DataFrame(rows, columns=COLUMNS[:4])
    table["pml"] = transport["pml"]
    table["btl"] = ",".join(transport["btl"])
    table["mtl"] = transport["mtl"]
    table["transport"] = transport["label"]
    table["transport_source"] = transport.get("source")
    return table.astype({"bytes": "int64", "repetitions": "int64", "t_usec": "float64",
                         "mbytes_per_sec": "float64"})


def parse_pingpong_text(text: str, source: str = "stdout") -> pd.DataFrame:
    """Parse pingpong's stdout alone (no JSON needed).

    Returns a DataFrame with COLUMNS (bytes, repetitions, t_usec [us, half round trip],
    mbytes_per_sec [10^6 B/s], pml, btl, mtl, transport, transport_source); .attrs holds
    the report's kernel, version, arguments, config, validation, placement (list of dicts:
    pd.DataFrame(table.attrs["placement"]) gives the table) and source.
    Raises HpclabError naming file and line for a missing/garbled table or too few rows.
    """
    report = parse_report_text(text, source=source, kernel="pingpong")
    transport = transport_of_report(report)
    rows = []
    for lineno, fields, line in table_lines(report, HEADER, source, "pingpong"):
        try:
            if len(fields) != 4:
                raise ValueError
            rows.append({"bytes": int(fields[0]), "repetitions": int(fields[1]),
                         "t_usec": float(fields[2]), "mbytes_per_sec": float(fields[3])})
        except ValueError:
            raise fail(source, lineno, f"not a table row (bytes reps t[usec] Mbytes/sec): "
                       f"{line.strip()[:80]!r}", "the report may be damaged; re-run") from None
    end = report.last_line
    expected = report.config.get("sizes")
    if isinstance(expected, int) and len(rows) != expected:
        raise fail(source, end, f"table has {len(rows)} rows but the report announced "
                   f"sizes = {expected} (truncated?)", "re-run the kernel")
    table = _frame(rows, transport)
    table.attrs.update(report_attrs(report))
    return table


def pingpong_table(doc: dict, source: str = "result.json") -> pd.DataFrame:
    """The rows of a checked pingpong JSON report (from load_result) as a table with COLUMNS."""
    res = doc["results"]
    tr = need(res, "transport", "dict", "results", source)
    pml = need(tr, "pml", "str", "results.transport", source, nullable=True)
    btl = need(tr, "btl", "list", "results.transport", source)
    mtl = need(tr, "mtl", "str", "results.transport", source, nullable=True)
    transport = {"pml": pml, "btl": btl, "mtl": mtl, "source": tr.get("source"),
                 "label": transport_label(pml, btl, mtl)}
    rows = []
    for k, row in enumerate(need(res, "rows", "list", "results", source)):
        where = f"results.rows[{k}]"
        rows.append({"bytes": need(row, "bytes", "int", where, source),
                     "repetitions": need(row, "repetitions", "int", where, source),
                     "t_usec": need(row, "t_usec", "number", where, source),
                     "mbytes_per_sec": need(row, "mbytes_per_sec", "number", where, source)})
    if not rows:
        raise fail(source, None, "results.rows is empty", "re-run the kernel")
    return _frame(rows, transport)


# ----------------------------------------------------------------------------------------------
# Accessors: the one way code above this floor reads a pingpong report's numbers
# ----------------------------------------------------------------------------------------------

def message_rows(doc: dict, source: str = "result.json") -> list[dict]:
    """The rows of a pingpong report, one per message size: {bytes, repetitions, t_usec [us,
    half the round trip], mbytes_per_sec [10^6 B/s]}. The report's own dicts, not copies (a
    demo that forges numbers edits them in place).
    Raises HpclabError when doc is no pingpong report or has no results.rows list."""
    return need(results_of(doc, "pingpong", source), "rows", "list", "results", source)


def requested_transport(doc: dict, source: str = "result.json") -> dict:
    """What the job asked Open MPI for (results.transport.requested: {pml, btl, mtl}, the MCA
    settings the kernel saw); {} when the report does not say (older reports).
    Raises HpclabError when doc is no pingpong report."""
    transport = results_of(doc, "pingpong", source).get("transport") or {}
    return transport.get("requested") or {}


def run_table(doc: dict, source: str) -> tuple[pd.DataFrame, dict]:
    """A checked JSON report as (table with COLUMNS, no extra attrs), for parse_run."""
    return pingpong_table(doc, source=source), {}


# Without result.json (runs of kernel builds before the JSON report), parse_run reads stdout.
KERNEL = register(Kernel(name="pingpong", args=PingpongArgs, table=run_table,
                         text=parse_pingpong_text, check=check_spec))
