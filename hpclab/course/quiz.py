"""Self-check questions with immediate feedback, for self-paced learners.

    from hpclab.course.quiz import ask
    ask("Which layer picks between ob1 and ucx?", ["PML", "BTL", "MTL"], answer="PML",
        why="The PML (point-to-point management layer) is chosen once per process ...")

In JupyterLab this shows radio buttons and a Check button; the feedback appears below. Run
headless (the course report), it prints the question and, folded below, the answer, so the report
remains a complete document.

`accepted` is the rule of a lab's interpretation questions, graded on a student's own numbers:
every option too close to the best one to call on those runs is accepted too.
"""

from __future__ import annotations

import html
import os

from hpclab.core.errors import HpclabError


def check(choice: str | None, answer: str, why: str) -> str:
    """The feedback text for a choice: right or wrong, and why."""
    if choice is None:
        return "Pick an answer first."
    if choice == answer:
        return f"Right. {why}"
    return f"Not quite: the answer is {answer!r}. {why}"


def accepted(values: dict, spread: dict, best=max) -> list[str]:
    """The options an interpretation question accepts: the best one by `values` (max or min),
    and every other option whose value is within the two options' spreads of it (too close to
    call on these runs). values, spread: option -> number (spread >= 0, same unit). Returns the
    accepted options, the best first."""
    top = best(values, key=values.get)
    return [top] + [o for o in values if o != top
                    and abs(values[o] - values[top]) <= spread.get(o, 0.0) + spread.get(top, 0.0)]


def ask(question: str, options: list[str], answer: str, why: str):
    """Show one multiple-choice question; returns the widget (or an HTML fallback)."""
    if answer not in options:
        raise HpclabError(f"quiz answer {answer!r} is not one of the options {options}", "fix the notebook cell")
    if os.environ.get("HPCLAB_HEADLESS"):
        # Executed for the report (hpclab course run): no one can click, so show the folded answer.
        return _html(question, options, answer, why)
    try:
        import ipywidgets as w
    except ImportError:  # pragma: no cover - ipywidgets is a dependency
        return _html(question, options, answer, why)
    radio = w.RadioButtons(options=options, value=None, layout=w.Layout(width="auto"))
    button = w.Button(description="Check", button_style="info")
    feedback = w.HTML()

    def on_click(_):
        ok = radio.value == answer
        color = "#1a7f37" if ok else "#b42318"
        feedback.value = f"<span style='color:{color}'>{html.escape(check(radio.value, answer, why))}</span>"

    button.on_click(on_click)
    box = w.VBox([w.HTML(f"<b>Self-check.</b> {html.escape(question)}"), radio, button, feedback])
    return _Quiz(box, _html(question, options, answer, why).data)


class _Quiz:
    """The widget for JupyterLab plus a static HTML view that the headless report renders."""

    def __init__(self, widget, static_html: str):
        self.widget = widget
        self.static_html = static_html

    def _repr_mimebundle_(self, **kwargs):
        bundle = self.widget._repr_mimebundle_(**kwargs) or {}
        data = bundle[0] if isinstance(bundle, tuple) else bundle
        data = dict(data)
        data["text/html"] = self.static_html
        data["text/plain"] = "Self-check question (open in JupyterLab to answer)"
        return data

    def _repr_html_(self):
        return self.static_html


def _html(question: str, options: list[str], answer: str, why: str):
    from IPython.display import HTML

    items = "".join(f"<li>{html.escape(o)}</li>" for o in options)
    return HTML(
        f"<div><b>Self-check.</b> {html.escape(question)}<ul>{items}</ul>"
        f"<details><summary>Answer</summary>{html.escape(answer)}: {html.escape(why)}</details></div>"
    )
