"""collectives: its arguments, and its reports -> one row per (op, order, variant, round, size).

The kernel (src/collectives/) times MPI_Allreduce (floats, sum), MPI_Bcast (root 0) and
MPI_Alltoall (size = the block for each destination) as IMB-MPI1 does: a warm-up, every
repetition timed on its own with a barrier after it, and per rank the mean; t_max_usec is the
slowest rank's mean, IMB's headline column, t_min_usec the fastest rank's, t_avg_usec their mean.

Variants (--variant NAME=V,...) are settings of the library's MPI_T control variables that the
kernel writes before it duplicates a communicator, so one job measures several algorithms, round
by round (--rounds). Orders (--order block,cyclic) number the ranks over the nodes as
srun --distribution does. For every variant the report holds what the library said: the control
variable that picks each operation's algorithm and its value as the library holds it (with the
library's own name for the value where MPI_T gives one), and, for an Open MPI built with its
internal headers, the function that serves the operation (`function`). Which library calls a
value what (MPICH gives numbers only) is hpclab.site.mpi_libraries' business, not the parser's.
"""

from __future__ import annotations

import re
from typing import Literal

import pandas as pd
from pydantic import Field, field_validator

from hpclab.kernels.contract import fail, need, parse_report_text, report_attrs, results_of, table_lines
from hpclab.kernels.registry import Kernel, KernelArgs, register

OPS = ("allreduce", "bcast", "alltoall")
ORDERS = ("world", "block", "cyclic")
COLUMNS = ["op", "order", "variant", "variant_label", "round", "bytes", "repetitions", "warmup",
           "t_min_usec", "t_max_usec", "t_avg_usec", "cvar", "cvar_value", "cvar_name", "function"]
HEADER = ["#op", "#order", "#variant", "#round", "#bytes", "#repetitions", "#warmup", "t_min[usec]",
          "t_max[usec]", "t_avg[usec]"]
_VARIANT = re.compile(r"^(default|[A-Za-z_][A-Za-z0-9_]*=-?\d+(,[A-Za-z_][A-Za-z0-9_]*=-?\d+){0,3})$")


def _words(value: str | None, known: tuple[str, ...], what: str) -> str | None:
    if value is None:
        return value
    items = value.split(",")
    bad = [w for w in items if w not in known]
    if bad or len(set(items)) != len(items) or not items:
        raise ValueError(f"{what} {value!r}: each of {', '.join(known)} at most once, comma-separated")
    return value


class CollectivesArgs(KernelArgs):
    """collectives: ops = comma list of allreduce, bcast, alltoall; sizes = comma list of bytes
    (or min_bytes..max_bytes in powers of two); reps = timed repetitions per size; warmup =
    untimed calls before each size; off_cache = MiB of last-level cache to step over (-1: IMB's
    default); no_sync drops the barrier between repetitions; order = comma list of world, block,
    cyclic; variant = MPI_T settings, one 'NAME=V[,NAME=V]' (or 'default') per variant; rounds =
    how often the sweep over orders and variants repeats; no_check skips result verification."""

    kernel: Literal["collectives"] = "collectives"
    ops: str | None = None
    sizes: str | None = Field(None, pattern=r"^[1-9][0-9]*(,[1-9][0-9]*){0,31}$")
    min_bytes: int | None = Field(None, ge=1, le=1 << 30)
    max_bytes: int | None = Field(None, ge=1, le=1 << 30)
    reps: int | None = Field(None, ge=1, le=10_000_000)
    warmup: int | None = Field(None, ge=0, le=1_000_000)
    off_cache: float | None = Field(None, ge=-1, le=65536)
    no_sync: bool = False
    order: str | None = None
    variant: list[str] = Field(default_factory=list, max_length=8)
    rounds: int | None = Field(None, ge=1, le=1000)
    no_check: bool = False

    _ops = field_validator("ops")(lambda v: _words(v, OPS, "ops"))
    _order = field_validator("order")(lambda v: _words(v, ORDERS, "order"))

    @field_validator("variant")
    @classmethod
    def _variants(cls, v):
        for text in v:
            if not _VARIANT.match(text):
                raise ValueError(f"variant {text!r}: give NAME=INTEGER[,NAME=INTEGER] (at most 4) or 'default'")
        return v

    def to_argv(self) -> list[str]:
        """As KernelArgs.to_argv, with one --variant per variant."""
        argv = []
        for name in type(self).model_fields:
            value = getattr(self, name)
            if name in ("extra_args", "kernel") or value is None or value is False or value == []:
                continue
            flag = "--" + name.replace("_", "-")
            if name == "variant":
                for text in value:
                    argv += [flag, text]
            else:
                argv += [flag] if value is True else [flag, str(value)]
        return argv + list(self.extra_args)


def check_spec(spec) -> None:
    """A collective needs at least two ranks; Allreduce sizes are whole floats (4 bytes).
    spec: an hpclab.spec.model.Spec. Raises ValueError."""
    if spec.ntasks < 2:
        raise ValueError(f"collectives needs at least ntasks=2, got ntasks={spec.ntasks}")
    args = spec.args
    if isinstance(args, CollectivesArgs) and args.sizes and "allreduce" in (args.ops or "allreduce"):
        odd = [s for s in args.sizes.split(",") if int(s) % 4]
        if odd:
            raise ValueError(f"collectives: Allreduce sums floats, so sizes must be multiples of 4 bytes "
                             f"(got {', '.join(odd)})")


def _frame(rows: list[dict]) -> pd.DataFrame:
    table = pd.DataFrame(rows, columns=COLUMNS)
    return table.astype({"variant": "int64", "round": "int64", "bytes": "int64", "repetitions": "int64",
                         "warmup": "int64", "t_min_usec": "float64", "t_max_usec": "float64",
                         "t_avg_usec": "float64"})


def _said_columns(said: dict) -> dict:
    return {"cvar": said.get("cvar"), "cvar_value": said.get("value"), "cvar_name": said.get("name"),
            "function": said.get("function")}


def collectives_table(doc: dict, source: str = "result.json") -> pd.DataFrame:
    """The rows of a checked collectives JSON report as a table with COLUMNS: op, order (world,
    block, cyclic), variant (index) and variant_label (the MPI_T settings, 'default' for none),
    round, bytes, repetitions, warmup, t_min_usec / t_max_usec / t_avg_usec (the fastest rank's,
    the slowest rank's and the mean of the ranks' mean time per call, microseconds), and what the
    library said for that op under that variant: cvar (the control variable), cvar_value, cvar_name
    (the library's name for the value, None where MPI_T gives none) and function (Open MPI built
    with its internal headers)."""
    res = results_of(doc, "collectives", source)
    variants = need(res, "variants", "list", "results", source)
    rows = []
    for k, row in enumerate(need(res, "rows", "list", "results", source)):
        where = f"results.rows[{k}]"
        v = need(row, "variant", "int", where, source)
        op = need(row, "op", "str", where, source)
        if not 0 <= v < len(variants):
            raise fail(source, None, f"{where}.variant = {v}, but the report lists {len(variants)} variant(s)",
                       "the report is damaged; re-run the kernel")
        said = (variants[v].get("said") or {}).get(op) or {}
        rows.append({"op": op, "order": need(row, "order", "str", where, source), "variant": v,
                     "variant_label": variants[v].get("label"), "round": need(row, "round", "int", where, source),
                     "bytes": need(row, "bytes", "int", where, source),
                     "repetitions": need(row, "repetitions", "int", where, source),
                     "warmup": need(row, "warmup", "int", where, source),
                     "t_min_usec": need(row, "t_min_usec", "number", where, source),
                     "t_max_usec": need(row, "t_max_usec", "number", where, source),
                     "t_avg_usec": need(row, "t_avg_usec", "number", where, source), **_said_columns(said)})
    if not rows:
        raise fail(source, None, "results.rows is empty", "re-run the kernel")
    return _frame(rows)


_SAID = re.compile(r"^(?:(?P<cvar>\S+?)=(?P<value>-?\d+)(?: \((?P<name>[^)]*)\))?)?(?:;? ?function (?P<fn>\S+))?$")


def parse_collectives_text(text: str, source: str = "stdout") -> pd.DataFrame:
    """Parse the kernel's stdout alone (no JSON needed): the same table as collectives_table,
    with the variants and what the library said taken from the key = value block
    (variant[k], algorithm[k.op]). .attrs holds the report's shared facts (report_attrs).
    Raises HpclabError naming file and line for a missing or garbled table."""
    report = parse_report_text(text, source=source, kernel="collectives")
    cfg = report.config
    labels = {int(m.group(1)): str(v) for k, v in cfg.items() if (m := re.fullmatch(r"variant\[(\d+)\]", k))}
    said: dict[tuple[int, str], dict] = {}
    for key, value in cfg.items():
        m = re.fullmatch(r"algorithm\[(\d+)\.(\w+)\]", key)
        if not m or value is None:
            continue
        found = _SAID.match(str(value))
        if not found:
            raise fail(source, None, f"{key} = {value!r} is not 'NAME=VALUE (name); function F'",
                       "the report may be damaged; re-run")
        said[(int(m.group(1)), m.group(2))] = {
            "cvar": found["cvar"], "value": int(found["value"]) if found["value"] else None,
            "name": found["name"], "function": found["fn"]}
    rows = []
    for lineno, fields, line in table_lines(report, HEADER, source, "collectives"):
        try:
            op, order, v, rnd, b, reps, warm, lo, hi, avg = fields
            v = int(v)
            rows.append({"op": op, "order": order, "variant": v, "variant_label": labels.get(v),
                         "round": int(rnd), "bytes": int(b), "repetitions": int(reps), "warmup": int(warm),
                         "t_min_usec": float(lo), "t_max_usec": float(hi), "t_avg_usec": float(avg),
                         **_said_columns(said.get((v, op), {}))})
        except ValueError:
            raise fail(source, lineno, f"not a table row (op order variant round bytes reps warmup t_min t_max "
                       f"t_avg): {line.strip()[:80]!r}", "the report may be damaged; re-run") from None
    if not rows:
        raise fail(source, report.last_line, "no row in the collectives table (truncated?)",
                   "the job probably died after validating; read its stderr")
    table = _frame(rows)
    table.attrs.update(report_attrs(report))
    return table


def run_table(doc: dict, source: str) -> tuple[pd.DataFrame, dict]:
    return collectives_table(doc, source), {}


# ----------------------------------------------------------------------------------------------
# Accessors: the one way code above this floor reads a collectives report
# ----------------------------------------------------------------------------------------------

def variants(doc: dict, source: str = "result.json") -> list[dict]:
    """The variants of a collectives report, in order: {label, writes {name: value}, said {op:
    {cvar, value, name, function}}}."""
    return need(results_of(doc, "collectives", source), "variants", "list", "results", source)


def gate(doc: dict, source: str = "result.json") -> dict:
    """The switch that gates per-operation algorithm choices, as the library held it ({cvar,
    value, name}; cvar None where the library has none)."""
    return results_of(doc, "collectives", source).get("gate") or {"cvar": None, "value": None, "name": None}


KERNEL = register(Kernel(name="collectives", args=CollectivesArgs, table=run_table, text=parse_collectives_text,
                         check=check_spec))
