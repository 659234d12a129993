"""Parsers: one per output contract, each turning a kernel's or launcher's output into a table.

    parse_run(run_dir, kernel)       one run folder -> tidy DataFrame (the one entry point runs use)
    load_result / parse_result_json  kernel JSON report, checked against docs/kernel-contract.md
    parse_report_text                the shared text part (arguments, banner, key = value, validation)
    parse_pingpong_text, pingpong_table       pingpong text table / JSON rows + transport selection
    parse_stream_text, stream_tables          STREAM text table / JSON per-rank rates + placement
    parse_poisson_text, poisson_table         Poisson per-rank timers (rank, phase, kind, seconds)
    parse_bindings                            srun --cpu-bind=verbose and mpirun --report-bindings

Every parser raises HpclabError naming the file and line (or JSON key) it could not read.
"""

from hpclab.runs.parse.bindings import parse_bindings, read_bindings
from hpclab.runs.parse.pingpong import (
    parse_pingpong_text,
    pingpong_table,
    transport_label,
    transport_of_report,
)
from hpclab.runs.parse.poisson import parse_poisson_text, poisson_table
from hpclab.runs.parse.report import (
    Report,
    load_result,
    parse_report_text,
    parse_result_json,
    placement_table,
)
from hpclab.runs.parse.run import parse_run, run_bindings, run_provenance, run_topology
from hpclab.runs.parse.stream import parse_stream_text, stream_tables

__all__ = [
    "Report", "load_result", "parse_bindings", "parse_pingpong_text", "parse_poisson_text",
    "parse_report_text",
    "parse_result_json", "parse_run", "parse_stream_text", "pingpong_table", "placement_table",
    "poisson_table", "read_bindings", "run_bindings", "run_provenance", "run_topology",
    "stream_tables",
    "transport_label", "transport_of_report",
]
