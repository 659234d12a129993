"""The lesson registry (hpclab/course/lessons/): a lesson is one unit, as a kernel is.

A lesson's runs, claims, reference answers and words live in one module of hpclab/course/lessons/;
these tests check that the registry, the notebooks, the labs and the fidelity table agree, and
that no other module of the package names a lab or a claim, so no second list creeps back.
"""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

import pytest

from hpclab.core import paths
from hpclab.core.errors import HpclabError
from hpclab.course import fidelity, lessons
from hpclab.course.lessons import Lesson, register

PACKAGE = paths.package_dir()
LESSONS_DIR = PACKAGE / "course" / "lessons"

# Words that are also names of the machine's things: hwloc's and mpirun's NUMA node object is
# "numa" (a topology column, an mpirun --map-by object), the same word as the claim about remote
# memory. A literal in these modules names the object, not the claim.
MACHINE_WORDS = {"numa": {"site/topology.py", "spec/model.py", "plots/machine.py", "plots/style.py",
                          "course/sizing.py"}}


def _outside_lessons() -> list[Path]:
    """The package's Python sources outside hpclab/course/lessons/."""
    return [f for f in sorted(PACKAGE.rglob("*.py"))
            if "__pycache__" not in f.parts and LESSONS_DIR not in f.parents]


def _string_literals(path: Path) -> list[tuple[int, str]]:
    """(line, value) of every string constant in a module, docstrings included."""
    tree = ast.parse(path.read_text(), str(path))
    return [(node.lineno, node.value) for node in ast.walk(tree)
            if isinstance(node, ast.Constant) and isinstance(node.value, str)]


def test_no_module_outside_the_lessons_names_a_lab_or_a_claim():
    """Does no module outside hpclab/course/lessons/ hold a lab's or a claim's name as a string
    literal (the registry is the one place that knows them), and no lab's name even in a comment?"""
    labs, claims = set(lessons.labs()), {c.id for c in lessons.claims()}
    found = []
    for f in _outside_lessons():
        rel = str(f.relative_to(PACKAGE))
        for line, value in _string_literals(f):
            if value in labs or (value in claims and rel not in MACHINE_WORDS.get(value, ())):
                found.append(f"{rel}:{line}: {value!r}")
        text = f.read_text()
        found += [f"{rel}: mentions {lab}" for lab in labs if lab in text]
    assert not found, "names a lab or a claim outside the lessons: " + "; ".join(found)
    # the exceptions stay few: each module listed still holds the word
    for word, modules in MACHINE_WORDS.items():
        assert all(word in {v for _, v in _string_literals(PACKAGE / m)} for m in modules), (word, modules)


def test_grep_for_the_placement_lab_finds_only_its_lesson():
    """Would `grep -rn "lab-placement" hpclab | grep -v course/lessons` print nothing? (Every file
    under hpclab/ but compiled caches, which Python rebuilds from the sources.)"""
    hits = []
    for f in sorted(PACKAGE.rglob("*")):
        if not f.is_file() or "__pycache__" in f.parts or "course/lessons" in str(f.relative_to(PACKAGE)):
            continue
        if b"lab-placement" in f.read_bytes():
            hits.append(str(f.relative_to(PACKAGE)))
    assert hits == []


def test_every_lab_has_its_folder_and_its_reference_answers():
    """Does every lab the registry names have a folder under labs/ with its notebook, and a
    reference function, and is every folder under labs/ some lesson's lab?"""
    folders = {d.name for d in (paths.repo() / "labs").iterdir() if d.is_dir() and not d.name.startswith(".")}
    assert set(lessons.labs()) == folders
    for lab in lessons.labs():
        lesson = lessons.lab(lab)
        assert (paths.repo() / "labs" / lab / f"{lab}.ipynb").is_file(), lab
        assert callable(lesson.reference) or lesson.code is not None, lab   # a code lab: its CodeLab
    with pytest.raises(HpclabError, match="unknown lab"):
        lessons.lab("lab-nothing")


def test_every_claim_belongs_to_exactly_one_lesson_and_fills_the_table():
    """Is every fidelity claim quoted by exactly one lesson, and does the table list exactly the
    claims of the lessons, in course order?"""
    owners: dict[str, list[str]] = {}
    for lesson in lessons.lessons():
        for cid in lesson.claim_ids:
            owners.setdefault(cid, []).append(lesson.id)
    assert all(len(who) == 1 for who in owners.values()), owners
    assert [c.id for c in lessons.claims()] == [cid for lesson in lessons.lessons() for cid in lesson.claim_ids]
    assert [r.id for r in fidelity.collect(Path("/nonexistent"))] == list(owners)
    assert all(isinstance(c, fidelity.Claim) and c.claim and c.seed for c in lessons.claims())


def test_every_notebook_belongs_to_a_lesson_or_is_an_introduction():
    """Does each notebook under notebooks/ belong to exactly one lesson, or to none when it is
    listed as an introduction, and does every notebook a lesson names exist?"""
    on_disk = {f.name for f in (paths.repo() / "notebooks").glob("*.ipynb")}
    named = [nb for lesson in lessons.lessons() for nb in lesson.notebooks]
    assert len(named) == len(set(named)), named
    assert set(named) | set(lessons.INTRODUCTIONS) == on_disk
    assert not set(named) & set(lessons.INTRODUCTIONS)
    assert lessons.notebook_lesson("notebooks/03-placement.ipynb").id == "placement"
    assert lessons.notebook_lesson("00-getting-started.ipynb") is None


def test_a_lesson_is_its_module_and_the_course_follows_the_notebooks():
    """Is each lesson registered by the module of its name (hpclab/course/lessons/<id>.py, whose
    LESSON it is), and do the lessons and labs come in the order of their first notebooks?"""
    modules = {f.stem for f in LESSONS_DIR.glob("*.py") if not f.name.startswith("_")}
    assert set(lessons.names()) == modules
    for lesson in lessons.lessons():
        assert importlib.import_module(f"hpclab.course.lessons.{lesson.id}").LESSON is lesson
    firsts = [lesson.place for lesson in lessons.lessons()]   # a code lab's: the first it goes with
    assert firsts == sorted(firsts)
    assert lessons.labs() == tuple(lesson.lab for lesson in lessons.lessons() if lesson.lab)
    with pytest.raises(HpclabError, match="unknown lesson"):
        lessons.get("nothing")


def test_the_registry_refuses_a_notebook_lab_or_claim_named_twice():
    """Can a second lesson claim a notebook, a lab or a claim another lesson already has, or a
    lab come without its reference answers? (It must not.)"""
    placement = lessons.get("placement")
    with pytest.raises(HpclabError, match="03-placement.ipynb"):
        register(Lesson("copy", "a copy", ("03-placement.ipynb",)))
    with pytest.raises(HpclabError, match="lab-placement"):
        register(Lesson("copy", "a copy", ("99-x.ipynb",), lab=placement.lab, reference=placement.reference))
    with pytest.raises(HpclabError, match="numa"):
        register(Lesson("copy", "a copy", ("99-x.ipynb",), claims=placement.claims[1:]))
    with pytest.raises(HpclabError, match="reference answers"):
        Lesson("copy", "a copy", ("99-x.ipynb",), lab="lab-copy")
    assert "copy" not in lessons.names()


def test_grading_reads_its_labs_from_the_registry():
    """Do the grading pipeline's labs, the reference analysis and the steps' help all come from
    the registry?"""
    import argparse

    from hpclab.grading import commands, pipeline

    assert pipeline.LABS == lessons.labs()
    sub = argparse.ArgumentParser().add_subparsers(dest="step")
    commands.add_steps(sub)
    help_text = sub.choices["release"].format_help()
    assert all(lab in "".join(help_text.split()) for lab in lessons.labs()), help_text
