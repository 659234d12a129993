"""The fidelity table: which claims of the source talks this machine reproduced, with the numbers.

Each row is one claim of a seed talk: what the seed says and shows (quoted, with its citation),
what this machine measured (`here`), the verdict, the kind of evidence it rests on, what a model
predicts (where one was used), one sentence on why, and the run ids. Only the claim and the seed's
figure are typed (they are quotes); everything else is computed by its lesson's builder from the
runs a notebook just made. A notebook records its rows (`record`); `hpclab course run` collects
them into build/course/fidelity.json and a table in the report. A claim no notebook recorded in that run is
listed as `not shown`, saying so, rather than kept from an earlier run.

The claims and their builders belong to the lessons (hpclab.course.lessons: each lesson module
quotes its claims and builds their rows from its runs); this module only says what a row is and
how rows are made, recorded, collected and shown. The table's claims and their order come from
the lesson registry.

Evidence kinds: `measured` (the effect is in timed runs of this machine), `replayed` (a measured
trace replayed on a network model), `simulated` (a synthetic trace on a model). Verdicts:
`yes` only for a measured effect the course's statistics call a difference (hpclab.analysis.stats:
the 95 % confidence interval of the ratio of the two sides' runs excludes 1 and the no-difference
margin; `beyond_spread` is that decision), or a stated exact test such as counted messages; `predicted` for support from a replay or a simulation
only; `partly`, `no` and `not shown` as they say. `make_row` refuses any other combination, so a
model can never be reported as a reproduction.
"""

from __future__ import annotations

import html
import json
import os
from dataclasses import asdict, dataclass, field
from pathlib import Path

from hpclab.core import paths
from hpclab.core.errors import HpclabError
from hpclab.core.io import write_atomic
from hpclab.course import lessons

VERDICTS = ("yes", "predicted", "partly", "no", "not shown")
EVIDENCE = ("measured", "replayed", "simulated")
LEDGER_ENV = "HPCLAB_FIDELITY_DIR"  # set by the course run: where notebooks record their rows


@dataclass(frozen=True)
class Claim:
    """A claim of a seed talk and the seed's own figure for it (quoted)."""

    id: str
    claim: str
    seed: str


@dataclass
class Row:
    """One row of the fidelity table; `here`, `reproduced`, `why` and `runs` come from measurements.

    `evidence` is what the verdict rests on (one of EVIDENCE); `prediction`, when not empty, is
    what a replay or a simulation of this machine's measurements predicts, labelled as such."""

    id: str
    claim: str
    seed: str
    here: str
    reproduced: str
    why: str
    runs: list[str] = field(default_factory=list)
    evidence: str = "measured"
    prediction: str = ""


def make_row(claim_id: str, here: str, reproduced: str, why: str, runs=(), *, evidence: str = "measured",
             beyond_spread: bool = False, prediction: str = "") -> Row:
    """A row for a known claim; the verdict must be one of VERDICTS and `why` one sentence.

    `yes` needs evidence='measured' and beyond_spread=True (the caller's statement that the effect
    is beyond the run-to-run spread, from hpclab.analysis.phrases.Comparison.beyond_spread or an
    exact count); `predicted` needs a model's evidence ('replayed' or 'simulated')."""
    claims = {c.id: c for c in lessons.claims()}
    if claim_id not in claims:
        raise HpclabError(f"unknown fidelity claim {claim_id!r}", f"known claims: {', '.join(claims)}")
    if reproduced not in VERDICTS:
        raise HpclabError(f"fidelity verdict {reproduced!r} for {claim_id}", f"use one of {', '.join(VERDICTS)}")
    if evidence not in EVIDENCE:
        raise HpclabError(f"fidelity evidence {evidence!r} for {claim_id}", f"use one of {', '.join(EVIDENCE)}")
    if reproduced == "yes" and (evidence != "measured" or not beyond_spread):
        raise HpclabError(f"fidelity row {claim_id}: 'yes' needs a measured effect beyond the run-to-run spread "
                          f"(evidence {evidence!r}, beyond_spread={beyond_spread})",
                          "use 'predicted' for support from a replay or a simulation, 'partly' for a measured "
                          "effect within the noise")
    if reproduced == "predicted" and evidence == "measured":
        raise HpclabError(f"fidelity row {claim_id}: 'predicted' is for a replay or a simulation",
                          "give evidence='replayed' or 'simulated'")
    c = claims[claim_id]
    return Row(c.id, c.claim, c.seed, here, reproduced, why, sorted({str(r) for r in runs}), evidence, prediction)


def ledger_dir() -> Path:
    """Where rows are recorded: the course run's folder, or build/fidelity for interactive use."""
    return Path(os.environ.get(LEDGER_ENV) or paths.output_dir() / "fidelity")


def record(row: Row) -> Row:
    """Write a notebook's row into the ledger (one file per claim, replaced atomically); returns it."""
    folder = ledger_dir()
    folder.mkdir(parents=True, exist_ok=True)
    write_atomic(folder / f"{row.id}.json", json.dumps(asdict(row), indent=1))
    return row


def collect(folder: Path | None = None) -> list[Row]:
    """Every claim's row, in the table's order (hpclab.course.lessons.claims): the recorded one, or
    `not shown` when none was recorded."""
    folder = folder or ledger_dir()
    rows = []
    for claim in lessons.claims():
        f = folder / f"{claim.id}.json"
        if f.exists():
            rows.append(Row(**json.loads(f.read_text())))
        else:
            rows.append(Row(claim.id, claim.claim, claim.seed, "-", "not shown",
                            "no notebook recorded this claim in this run (its notebook failed or was not run)"))
    return rows


def write_json(rows: list[Row], path: Path) -> Path:
    path.write_text(json.dumps([asdict(r) for r in rows], indent=1))
    return path


def html_table(rows: list[Row]) -> str:
    """The fidelity table as an HTML fragment for the course report."""
    colour = {"yes": "#e3f4e1", "predicted": "#e6eefb", "partly": "#fff4d6", "no": "#fde8e8", "not shown": "#eeeeee"}
    body = "".join(
        f"<tr style='background:{colour[r.reproduced]}'><td><b>{html.escape(r.id)}</b><br>{html.escape(r.claim)}</td>"
        f"<td>{html.escape(r.seed)}</td><td>{html.escape(r.here)}</td><td>{r.reproduced}</td>"
        f"<td>{html.escape(r.evidence)}</td><td>{html.escape(r.prediction) or '-'}</td>"
        f"<td>{html.escape(r.why)}</td><td style='font-size:.8em'>{html.escape(', '.join(r.runs[:3]))}"
        f"{f' (+{len(r.runs) - 3} more in fidelity.json)' if len(r.runs) > 3 else ''}</td></tr>"
        for r in rows)
    return ("<h2>Fidelity: the seeds' claims on this machine</h2>"
            "<p><i>yes</i>: measured here, beyond the spread of repeated runs; <i>predicted</i>: supported only by a "
            "replay or a simulation built from this machine's measurements (a model's prediction, not a "
            "reproduction); <i>partly</i>, <i>no</i>, <i>not shown</i>: as they say.</p>"
            "<table><tr><th>claim</th><th>seed (quoted)</th><th>here (measured)</th><th>verdict</th>"
            f"<th>evidence</th><th>predicted by a model</th><th>why</th><th>runs</th></tr>{body}</table>")


# --- helpers the lessons' builders share -------------------------------------------------------

def run_ids(table, label_col: str = "label", labels=None) -> list[str]:
    """The sorted run ids (column run_id) of a table's rows, of every row or of those whose
    `label_col` is one of `labels`."""
    sub = table if labels is None else table[table[label_col].isin(labels)]
    return sorted({str(r) for r in sub["run_id"]})


def from_verdict(claim_id: str, verdict: dict, runs=()) -> Row:
    """A row from a lesson's own verdict (a dict with here, reproduced and why, and
    optionally evidence, beyond_spread and prediction, as the placement lesson's pitfall_fidelity
    and the scaling lesson's roofline_fidelity return)."""
    return make_row(claim_id, verdict["here"], verdict["reproduced"], verdict["why"], runs,
                    evidence=verdict.get("evidence", "measured"), beyond_spread=bool(verdict.get("beyond_spread")),
                    prediction=verdict.get("prediction", ""))


def frame(rows) -> "pd.DataFrame":
    """Rows as a table for a notebook cell (one row per claim)."""
    import pandas as pd

    rows = [rows] if isinstance(rows, Row) else list(rows)
    return pd.DataFrame([{"claim": r.id, "seed (quoted)": r.seed, "here (measured)": r.here,
                          "verdict": r.reproduced, "evidence": r.evidence,
                          "predicted by a model": r.prediction or "-", "why": r.why}
                         for r in rows]).set_index("claim")
