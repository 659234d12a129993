"""The words a learner reads (hpclab/course/reading.py): typed prose and the prose a notebook's
code prints, counted the same way everywhere, and checked against the course's budgets."""

from __future__ import annotations

from hpclab.course import reading


def _nb(*cells) -> dict:
    return {"cells": list(cells)}


def _md(text: str) -> dict:
    return {"cell_type": "markdown", "source": text}


def _code(*outputs) -> dict:
    return {"cell_type": "code", "source": "x = 1", "outputs": list(outputs)}


def test_prose_counts_and_code_tables_and_figures_do_not():
    """Are markdown words and printed sentences counted, while code fences, link targets, HTML
    tables, images and stderr are not?"""
    nb = _nb(_md("## 1. Start\nFive words in this line. [the glossary](../docs/glossary.md#ci)\n```\nnot = counted\n```"),
             _code({"output_type": "stream", "name": "stdout", "text": "two runs\n"},
                   {"output_type": "stream", "name": "stderr", "text": "warning: ignored words here"},
                   {"output_type": "display_data", "data": {"text/markdown": "**A** is 1.8x faster",
                                                            "text/plain": "<Markdown>"}},
                   {"output_type": "execute_result", "data": {"text/html": "<table><td>9 9 9</td></table>",
                                                              "text/plain": "9 9 9"}},
                   {"output_type": "display_data", "data": {"image/png": "AAAA"}}))
    r = reading.count(nb)
    assert r.typed == 2 + 5 + 2  # "1. Start", the five words, "the glossary" (its link target is not read)
    assert r.generated == 2 + 4  # "two runs", "A is 1.8x faster"
    assert r.sections == {"1. Start": 9 + 6}


def test_a_page_over_its_budget_is_named_with_its_count():
    """Does a notebook over its budget, and a section over the section budget, come back as one
    line each that names the count and the budget, while a short page gives none?"""
    long = " ".join(["word"] * (reading.SECTION_BUDGET + 1))
    nb = _nb(_md("## A\n" + long), _md("## B\nshort"))
    found = reading.over_budget("notebooks/09-x.ipynb", reading.count(nb))
    assert found == [f"09-x.ipynb, section 'A': {reading.SECTION_BUDGET + 2} words over the section budget "
                     f"of {reading.SECTION_BUDGET}"]
    assert reading.over_budget("labs/lab-x/lab-x.ipynb", reading.count(_nb(_md("short page")))) == []
    assert reading.budget_for("labs/lab-x/lab-x.ipynb") == reading.LAB_BUDGET < reading.BUDGET
