"""Self-check questions give the right feedback and refuse a broken question."""

import pytest

from hpclab.core.errors import HpclabError
from hpclab.course.quiz import ask, check


def test_feedback_says_right_or_wrong_and_why():
    """Does the feedback name the right answer when the choice is wrong?"""
    assert check("PML", "PML", "because.").startswith("Right.")
    assert "'PML'" in check("BTL", "PML", "because.")
    assert check(None, "PML", "x") == "Pick an answer first."


def test_question_whose_answer_is_not_an_option_is_refused():
    """Is a question whose answer is not among its options caught with a clear error?"""
    with pytest.raises(HpclabError, match="not one of the options"):
        ask("q?", ["a", "b"], answer="c", why="")


def test_widget_has_a_static_html_view():
    """Does the headless report get the question and the folded answer?"""
    box = ask("Which layer?", ["PML", "BTL"], answer="PML", why="It picks the protocol.")
    text = box._repr_html_()
    assert "Which layer?" in text and "<details>" in text
