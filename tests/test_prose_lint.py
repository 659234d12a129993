"""Does any static markdown in a notebook or lab state an outcome the learner's numbers decide?

Sentences that compare or qualify a measurement ("faster", "within the noise", "dominates",
"orders of magnitude") must be built by hpclab.analysis.phrases from the run's numbers, in a code
cell. Static prose explains mechanisms. A comparative word that is about a mechanism, a seed's
quoted figure or a definition (not about this run's numbers) is allowed by an entry of
tests/prose_allowlist/<notebook>.yaml: `match` is a piece of the cell's text that contains the
word, `reason` says why it asserts no outcome of the learner's runs.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
ALLOW = Path(__file__).with_name("prose_allowlist")

COMPARATIVE = re.compile(
    r"\b(faster|slower|quicker|orders? of magnitude|dominat\w*|negligible|"
    r"much (?:more|less|larger|smaller|higher|lower)|"
    r"\d+(?:\.\d+)?\s*(?:%|x)\s+(?:more|less|faster|slower|higher|lower)|"
    r"within the noise|beyond the spread|twice as|half as|outperforms?|beats?|wins?|loses?|"
    r"the (?:best|worst)|above the roof|below the roof)\b", re.I)

NOTEBOOKS = sorted([*ROOT.glob("notebooks/*.ipynb"), *ROOT.glob("labs/*/*.ipynb")])


def allow_list(stem: str) -> list[dict]:
    f = ALLOW / f"{stem}.yaml"
    entries = yaml.safe_load(f.read_text()) if f.exists() else None
    return entries or []


def hits(path: Path):
    """(cell index, matched word, the cell's text, match start) for every comparative word in markdown."""
    for i, cell in enumerate(json.loads(path.read_text())["cells"]):
        if cell["cell_type"] != "markdown":
            continue
        text = "".join(cell["source"])
        for m in COMPARATIVE.finditer(text):
            yield i, m.group(0), text, m.start()


def allowed(entries: list[dict], text: str, start: int, word: str) -> bool:
    for e in entries:
        at = text.find(e["match"])
        while at >= 0:
            if at <= start and start + len(word) <= at + len(e["match"]):
                return True
            at = text.find(e["match"], at + 1)
    return False


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_static_markdown_asserts_no_measured_outcome(path):
    entries = allow_list(path.stem)
    bad = [f"cell {i}: '{word}' in ...{text[max(0, s - 50):s + 40]!r}..."
           for i, word, text, s in hits(path) if not allowed(entries, text, s, word)]
    assert not bad, (f"{path.name}: comparative words in static markdown; build the sentence with "
                     f"hpclab.analysis.phrases from the numbers, or add an entry with its reason to "
                     f"tests/prose_allowlist/{path.stem}.yaml:\n" + "\n".join(bad))


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_every_allow_list_entry_is_used_and_has_a_reason(path):
    entries = allow_list(path.stem)
    texts = ["".join(c["source"]) for c in json.loads(path.read_text())["cells"] if c["cell_type"] == "markdown"]
    for e in entries:
        assert str(e.get("reason", "")).strip(), f"{path.stem}: entry {e['match']!r} gives no reason"
        assert any(e["match"] in t for t in texts), f"{path.stem}: entry {e['match']!r} matches no markdown cell (stale)"
