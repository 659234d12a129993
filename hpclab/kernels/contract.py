"""The output contract every kernel shares (docs/kernel-contract.md), and the parsers' helpers.

Text (stdout): `arguments = ...`, a banner `hpclab <kernel> <version> - <description>`, an
aligned `key = value` block with `host[r]` (and `thread[r.t]`) lines, one validation line, then
the kernel's own tables (left in `Report.body` for the kernel modules' parsers).
JSON (`--json FILE`): the same report with `contract: 1`; `load_result` checks the common part.
Both give a placement table: one row per rank and per OpenMP thread, with the CPU it ran on and
the CPUs it was allowed to run on.

Every parser error is an HpclabError whose first words are `<file>:<line>:` (or `<file>:` with
a JSON key path when no line applies), so a student can open the file at the right place.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from hpclab.core.errors import HpclabError
from hpclab.kernels import registry
from hpclab.site.topology import cpulist_to_cpus

CONTRACT = 1
PLACEMENT_COLUMNS = ["rank", "thread", "host", "cpu", "allowed"]

# Keys whose values are text even when they look like numbers (version "1.0").
STRING_KEYS = {"kernel", "version", "build_flags", "compiler", "mpi_library"}
_BANNER = re.compile(r"^hpclab (?P<kernel>\w+) (?P<version>\S+) - (?P<description>.+)$")
_KV = re.compile(r"^(?P<key>[A-Za-z_][\w.\[\]]*?)\s* = ?(?P<value>.*)$")
_HOST = re.compile(r"^(?P<host>\S+) cpu=(?P<cpu>-?\d+) allowed=(?P<allowed>[\d,\-]*)$")
_THREAD = re.compile(r"^cpu=(?P<cpu>-?\d+) allowed=(?P<allowed>[\d,\-]*)$")
# launcher lines that may be interleaved when stderr and stdout share a file
_LAUNCHER = re.compile(r"^(cpu[-_]bind|mem[-_]bind|\[[^\]]+:\d+\] MCW rank )")
_JOB_SCRIPT = re.compile(r"^hpclab: ")


def fail(source: str, line: int | None, what: str, hint: str = "") -> HpclabError:
    """Build the HpclabError for a problem in `source` at 1-based `line` (None: whole file)."""
    where = f"{source}:{line}" if line else str(source)
    return HpclabError(f"{where}: {what}", hint)


def read_text(path: str | Path) -> str:
    """The text of a file (undecodable bytes replaced); HpclabError if it cannot be read."""
    path = Path(path)
    try:
        return path.read_text(errors="replace")
    except FileNotFoundError as exc:
        raise HpclabError(f"{path}: no such file", "check the run folder; did the job finish?") from exc
    except OSError as exc:
        raise HpclabError(f"cannot read {path}: {exc.strerror}", "check the path and permissions") from exc


def typed(text: str):
    """A key = value text value as Python: int, float, True/False for yes/no, None for none."""
    value = text.strip()
    if value in ("yes", "true"):
        return True
    if value in ("no", "false"):
        return False
    if value == "none":
        return None
    try:
        return int(value)
    except ValueError:
        pass
    try:
        return float(value)
    except ValueError:
        return value


@dataclass
class Report:
    """The shared part of one kernel's text report.

    kernel, version, description: from the banner; arguments: argv after the program name;
    config: the key = value block, typed (int, float, bool, str; host/thread lines excluded);
    placement: table (rank, thread, host, cpu, allowed), thread <NA> for the rank itself;
    ok, message: the validation line; body: [(line number, text)] after the validation line;
    last_line: the number of lines in the text (where a truncation is reported).
    """

    source: str
    kernel: str
    version: str
    description: str
    arguments: list[str]
    config: dict
    placement: pd.DataFrame
    ok: bool
    message: str
    body: list[tuple[int, str]] = field(default_factory=list)
    last_line: int = 0


def _cpus(text: str, source: str, line: int) -> list[int]:
    try:
        return cpulist_to_cpus(text)
    except HpclabError as exc:
        raise fail(source, line, exc.what, "the report may be damaged; re-run") from None


def parse_report_text(text: str, source: str = "stdout", kernel: str | None = None) -> Report:
    """Parse the shared text part of a kernel report.

    text: the kernel's stdout (launcher lines may be mixed in and are skipped); source: file
    name for messages; kernel: if given, the banner must name this kernel.
    Returns a Report. Raises HpclabError naming source and line when the arguments line, banner,
    key = value block or validation line is missing or malformed.
    """
    lines = text.splitlines()
    start = next((i for i, line in enumerate(lines) if line.startswith("arguments =")), None)
    if start is None:
        raise fail(source, 1 if lines else None,
                   "no 'arguments =' line: this is not the output of an hpclab kernel",
                   "parse the stdout file of a kernel run (build/bin/pingpong, stream, poisson)")
    arguments = lines[start][len("arguments ="):].split()
    i = start + 1
    while i < len(lines) and _LAUNCHER.match(lines[i]):
        i += 1
    if i >= len(lines):
        raise fail(source, start + 1, "output ends after the arguments line (truncated)",
                   "the job probably died early; read its stderr")
    banner = _BANNER.match(lines[i])
    if not banner:
        raise fail(source, i + 1, f"expected the banner 'hpclab <kernel> <version> - ...', "
                   f"found {lines[i][:80]!r}", "is this output from an hpclab kernel?")
    if kernel and banner["kernel"] != kernel:
        raise fail(source, i + 1, f"this is a {banner['kernel']} report, not {kernel}",
                   f"parse it with the {banner['kernel']} parser")
    config: dict = {}
    rows: list[dict] = []
    ok, message, body_start = None, "", None
    for j in range(i + 1, len(lines)):
        line = lines[j]
        if _LAUNCHER.match(line) or not line.strip():
            continue
        if line == "Solution validates":
            ok, message, body_start = True, line, j + 1
            break
        if line.startswith("ERROR: "):
            ok, message, body_start = False, line[len("ERROR: "):], j + 1
            break
        kv = _KV.match(line)
        if not kv:
            raise fail(source, j + 1, f"expected 'key = value' or the validation line, found "
                       f"{line[:80]!r}", "the report may be damaged; re-run the kernel")
        key, value = kv["key"], kv["value"].strip()
        if key.startswith("host["):
            m = _HOST.match(value)
            if not m or not key[5:-1].isdigit():
                raise fail(source, j + 1, f"malformed host line {line[:80]!r}",
                           "expected 'host[<rank>] = <hostname> cpu=<n> allowed=<list>'")
            rows.append({"rank": int(key[5:-1]), "thread": pd.NA, "host": m["host"],
                         "cpu": int(m["cpu"]), "allowed": _cpus(m["allowed"], source, j + 1)})
        elif key.startswith("thread["):
            m = _THREAD.match(value)
            rank, _, thread = key[7:-1].partition(".")
            if not m or not rank.isdigit() or not thread.isdigit():
                raise fail(source, j + 1, f"malformed thread line {line[:80]!r}",
                           "expected 'thread[<rank>.<thread>] = cpu=<n> allowed=<list>'")
            host = next((r["host"] for r in rows if r["rank"] == int(rank)), None)
            rows.append({"rank": int(rank), "thread": int(thread), "host": host,
                         "cpu": int(m["cpu"]), "allowed": _cpus(m["allowed"], source, j + 1)})
        else:
            config[key] = value if key in STRING_KEYS else typed(value)
    if ok is None:
        raise fail(source, len(lines), "no validation line ('Solution validates' or 'ERROR: ...'):"
                   " the output is truncated", "the job probably died or timed out; read its stderr")
    placement = _placement_frame(rows)
    # the job script's own closing line ("hpclab: kernel exit code N", slurm-templates/preamble.sh.j2)
    # follows the kernel's output in the same file: it is not part of the kernel's tables
    body = [(n + 1, lines[n]) for n in range(body_start, len(lines)) if not _JOB_SCRIPT.match(lines[n])]
    return Report(source=source, kernel=banner["kernel"], version=banner["version"],
                  description=banner["description"], arguments=arguments, config=config,
                  placement=placement, ok=ok, message=message, body=body,
                  last_line=len(lines))


def table_lines(report: "Report", header: list[str], source: str, kernel: str) -> list[tuple[int, list[str], str]]:
    """The rows of the table a kernel prints after its validation line: (line number, fields,
    line) of each non-empty line after the header. HpclabError when another line comes before
    the header, or there is no header (a report cut short)."""
    rows, seen = [], False
    for lineno, line in report.body:
        fields = line.split()
        if not fields:
            continue
        if not seen:
            if fields != header:
                raise fail(source, lineno, f"expected the table header {' '.join(header)!r}, found "
                           f"{line.strip()[:80]!r}", "the report may be damaged; re-run")
            seen = True
            continue
        rows.append((lineno, fields, line))
    if not seen:
        raise fail(source, report.last_line, f"no {kernel} table after the validation line (truncated?)",
                   "the job probably died after validating; read its stderr")
    return rows


def records(table: pd.DataFrame) -> list[dict]:
    """A table as a list of plain dicts (<NA> as None), for DataFrame.attrs.

    attrs must hold plain values: pandas compares attrs when concatenating tables, which fails
    for DataFrames. pd.DataFrame(records) turns them back into a table.
    """
    return [{k: (None if v is pd.NA else v) for k, v in row.items()}
            for row in table.astype(object).to_dict("records")]


def report_attrs(report: "Report") -> dict:
    """The shared facts of a text report as plain values for DataFrame.attrs:
    kernel, version, arguments, config, validation {ok, message}, placement (records), source."""
    return {"kernel": report.kernel, "version": report.version, "arguments": report.arguments,
            "config": report.config, "validation": {"ok": report.ok, "message": report.message},
            "placement": records(report.placement), "source": report.source}


def doc_attrs(doc: dict, source: str) -> dict:
    """The same facts as report_attrs, from a checked JSON report."""
    return {"kernel": doc["kernel"], "version": doc["version"], "arguments": doc["arguments"],
            "config": doc["config"], "validation": doc["validation"],
            "placement": records(placement_table(doc)), "source": source}


def _placement_frame(rows: list[dict]) -> pd.DataFrame:
    table = pd.DataFrame(rows, columns=PLACEMENT_COLUMNS)
    table["thread"] = table["thread"].astype("Int64")
    return table.sort_values(["rank", "thread"], na_position="first", ignore_index=True)


# ----------------------------------------------------------------------------------------------
# JSON
# ----------------------------------------------------------------------------------------------

_TYPES = {"int": (int,), "number": (int, float), "str": (str,), "bool": (bool,),
          "list": (list,), "dict": (dict,)}


def need(obj, key: str, kind: str, where: str, source: str, nullable: bool = False):
    """obj[key] checked against kind (int, number, str, bool, list, dict).

    where: the JSON path of obj ("results.rows[3]") for the message. Returns the value.
    Raises HpclabError naming the file and JSON path when the key is missing or mistyped.
    """
    if not isinstance(obj, dict):
        raise fail(source, None, f"{where or 'top level'} is not a JSON object",
                   "the file does not follow docs/kernel-contract.md")
    if key not in obj:
        raise fail(source, None, f"missing key '{key}' in {where or 'the top level'}",
                   "the file does not follow docs/kernel-contract.md (or was cut short)")
    value = obj[key]
    if value is None and nullable:
        return value
    ok = isinstance(value, _TYPES[kind])
    if kind in ("int", "number") and isinstance(value, bool):
        ok = False
    if not ok:
        path = f"{where}.{key}" if where else key
        raise fail(source, None, f"{path} should be {kind}, found {json.dumps(value)[:60]}",
                   "the file does not follow docs/kernel-contract.md")
    return value


def parse_result_json(text: str, source: str = "result.json", kernel: str | None = None) -> dict:
    """Decode a kernel's JSON report and check the common part of the contract.

    text: the JSON document; source: file name for messages; kernel: if given, the report must
    be from this kernel. Returns the decoded dict. Raises HpclabError with file and line for
    invalid JSON, and with file and JSON path for a wrong contract, kernel or structure.
    """
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as exc:
        what = "is empty" if not text.strip() else f"is not valid JSON ({exc.msg}, column {exc.colno})"
        raise fail(source, exc.lineno, f"the file {what}",
                   "the kernel was probably interrupted while writing; re-run it") from exc
    contract = need(doc, "contract", "int", "", source)
    if contract != CONTRACT:
        raise fail(source, None, f"contract {contract} is not supported (this hpclab reads "
                   f"contract {CONTRACT})", "rebuild the kernels and hpclab from the same commit")
    name = need(doc, "kernel", "str", "", source)
    if name not in registry.names():
        raise fail(source, None, f"unknown kernel {name!r}",
                   f"expected one of {', '.join(registry.names())}")
    if kernel and name != kernel:
        raise fail(source, None, f"this is a {name} report, not {kernel}",
                   f"parse it with kernel={name!r}")
    need(doc, "version", "str", "", source)
    need(doc, "arguments", "list", "", source)
    need(doc, "config", "dict", "", source)
    validation = need(doc, "validation", "dict", "", source)
    need(validation, "ok", "bool", "validation", source)
    need(validation, "message", "str", "validation", source)
    placement = need(doc, "placement", "list", "", source)
    for k, entry in enumerate(placement):
        where = f"placement[{k}]"
        need(entry, "rank", "int", where, source)
        need(entry, "host", "str", where, source)
        need(entry, "cpu", "int", where, source)
        need(entry, "allowed", "list", where, source)
        for t, thread in enumerate(entry.get("threads") or []):
            need(thread, "thread", "int", f"{where}.threads[{t}]", source)
            need(thread, "cpu", "int", f"{where}.threads[{t}]", source)
    need(doc, "results", "dict", "", source)
    return doc


def results_of(doc: dict, kernel: str, source: str = "result.json") -> dict:
    """The `results` object of a kernel's JSON report (doc: from load_result or run.result()).

    kernel: the kernel the caller expects; a report naming another kernel is refused (a report
    without a kernel name, as a hand-made one, is taken as it is). The kernel modules' accessors
    start here, so that code above the kernels floor never walks the report's layout itself.
    Raises HpclabError when doc is not a report of that kernel or has no results object."""
    name = doc.get("kernel") if isinstance(doc, dict) else None
    if name is not None and name != kernel:
        raise fail(source, None, f"this is a {name} report, not {kernel}",
                   f"pass run.result() of a {kernel} run")
    return need(doc, "results", "dict", "", source)


def load_result(path: str | Path, kernel: str | None = None) -> dict:
    """Read and check a kernel's JSON report file (path). Returns the decoded dict."""
    return parse_result_json(read_text(path), source=str(path), kernel=kernel)


def placement_table(doc: dict) -> pd.DataFrame:
    """The JSON report's placement as a table (rank, thread, host, cpu, allowed).

    One row per rank (thread <NA>) and one per OpenMP thread; cpu is the CPU the rank or
    thread was running on when asked; allowed its affinity list (OS CPU numbers).
    """
    rows = []
    for entry in doc["placement"]:
        rows.append({"rank": entry["rank"], "thread": pd.NA, "host": entry["host"],
                     "cpu": entry["cpu"], "allowed": list(entry["allowed"])})
        for t in entry.get("threads") or []:
            rows.append({"rank": entry["rank"], "thread": t["thread"], "host": entry["host"],
                         "cpu": t["cpu"], "allowed": list(t.get("allowed", []))})
    return _placement_frame(rows)
