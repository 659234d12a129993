"""How much a learner reads in a notebook: the words of its prose, typed and generated.

A notebook a learner does not read teaches nothing, so the course keeps a budget of words per
page (Software Carpentry's lesson style: one takeaway per figure, numbers in small tables, terms in
the glossary). Counted here, from an executed notebook:

- `typed`: the words of its markdown cells;
- `generated`: the words of the prose its code prints (stdout text and Markdown outputs), the
  sentences hpclab.analysis.phrases builds from the runs. Tables (a DataFrame's HTML), figures and
  stderr are not prose and are not counted; a number counts as a word, as a reader reads it.

BUDGET is the limit per notebook (typed + generated), LAB_BUDGET the one for a lab's page, and
SECTION_BUDGET the prose of one `##` section; tests/test_notebooks.py checks every executed
notebook against them, and the course report shows each notebook's count.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

BUDGET = 1800          # words per notebook, typed and generated: about 8 minutes of reading
LAB_BUDGET = 1100      # a lab's page: the task, its questions and the feedback
SECTION_BUDGET = 450   # one `##` section's prose, typed and generated

_WORD = re.compile(r"[A-Za-z0-9][\w'.,%/+-]*")
_FENCE = re.compile(r"```.*?```", re.S)
_HTML_TAG = re.compile(r"<[^>]+>")
_LINK = re.compile(r"\]\([^)]*\)")  # a Markdown link's target is not read


def words(text: str) -> int:
    """Words a reader reads in `text` (Markdown): code fences, HTML tags and link targets left out."""
    text = _LINK.sub("]", _HTML_TAG.sub(" ", _FENCE.sub(" ", text)))
    return len(_WORD.findall(text))


def _prose_outputs(cell: dict) -> str:
    """The prose a code cell printed: its stdout and its Markdown outputs (not tables or figures)."""
    parts = []
    for out in cell.get("outputs", []):
        kind = out.get("output_type")
        if kind == "stream" and out.get("name") == "stdout":
            parts.append(_text(out.get("text", "")))
        elif kind in ("display_data", "execute_result"):
            data = out.get("data", {})
            if "text/markdown" in data:
                parts.append(_text(data["text/markdown"]))
    return "\n".join(parts)


def _text(value) -> str:
    return "".join(value) if isinstance(value, list) else str(value)


@dataclass
class Reading:
    """Words of one notebook: typed (markdown) and generated (printed prose), in all and per `##`
    section (the text before the first `##` counts as section "(top)")."""

    typed: int = 0
    generated: int = 0
    sections: dict[str, int] = field(default_factory=dict)

    @property
    def total(self) -> int:
        return self.typed + self.generated


def count(nb: dict) -> Reading:
    """The words of a notebook given as a dict (nbformat or json.load)."""
    reading, section = Reading(), "(top)"
    for cell in nb.get("cells", []):
        if cell.get("cell_type") == "markdown":
            source = _text(cell.get("source", ""))
            heading = re.search(r"^##\s+(.+)$", source, flags=re.M)
            if heading:
                section = heading.group(1).strip()
            n = words(source)
            reading.typed += n
        elif cell.get("cell_type") == "code":
            n = words(_prose_outputs(cell))
            reading.generated += n
        else:
            continue
        reading.sections[section] = reading.sections.get(section, 0) + n
    return reading


def count_file(path: str | Path) -> Reading:
    import json

    return count(json.loads(Path(path).read_text()))


def budget_for(path: str | Path) -> int:
    """The budget of a notebook (BUDGET) or of a lab's page (LAB_BUDGET), by where it lives."""
    return LAB_BUDGET if Path(path).name.startswith("lab-") else BUDGET


def over_budget(path: str | Path, reading: Reading) -> list[str]:
    """What in a notebook's reading is over its budgets, one line each (empty when within)."""
    limit, name = budget_for(path), Path(path).name
    found = [f"{name}: {reading.total} words (typed {reading.typed}, generated {reading.generated}) "
             f"over its budget of {limit}"] if reading.total > limit else []
    found += [f"{name}, section '{s}': {n} words over the section budget of {SECTION_BUDGET}"
              for s, n in reading.sections.items() if n > SECTION_BUDGET]
    return found
