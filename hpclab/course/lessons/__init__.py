"""The lesson registry: one Lesson record per lesson, found by importing every module here.

A lesson module (hpclab/course/lessons/<name>.py) holds what its lesson is: the runs it makes
(spec builders), the seeds' claims it tests with the builders of their fidelity rows, its lab's
reference answers, and its words (case labels, advice, report sentences). It builds a Lesson and
calls register() at import time. names() and the other look-ups import every module of this
package once, so a new lesson is found without a list to edit, the way kernels are
(hpclab/kernels/registry.py). Nothing here imports a lesson module by name: the registry sits
below them, and the rest of the package asks it (fidelity.collect for the claims, the grading
pipeline for the labs and their reference answers).

Finding the lessons imports them, and with them pandas and the analysis: callers that must start
fast (the `hpclab` command's parsers) ask only when the answer is needed.
"""

from __future__ import annotations

import importlib
import pkgutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from hpclab.core.errors import HpclabError

# Notebooks under notebooks/ that belong to no lesson: they introduce the course and its tools.
INTRODUCTIONS = ("00-getting-started.ipynb",)


@dataclass(frozen=True)
class Lesson:
    """One lesson of the course as the package sees it.

    id: the lesson's name, its module's (hpclab/course/lessons/<id>.py); title: one line for
    people; notebooks: its notebooks, file names under notebooks/ (the first one sets its place
    in the course); lab: its lab, the folder name under labs/, or None; claims: the seeds' claims
    its notebooks record in the fidelity table (hpclab.course.fidelity.Claim records, in the
    table's order); reference: reference(packed) -> dict, the lab's expected answers computed
    from the runs a student packed (packed: hpclab.grading.labdata.Packed, the verified runs
    taken by role); None without a lab. A code lab's lesson (the student writes MPI code) may
    have no notebook of its own: goes_with names the notebooks, of other lessons, whose lesson it
    practises (the first sets its place in the course), and code is its lab as a program
    (hpclab.course.codelab.CodeLab: the files the student edits, how they are built, run and
    checked), graded by hpclab.grading.codelab; its reference may then be None.
    """

    id: str
    title: str
    notebooks: tuple[str, ...]
    lab: str | None = None
    claims: tuple[Any, ...] = ()
    reference: Callable[[Any], dict] | None = None
    goes_with: tuple[str, ...] = ()
    code: Any = None

    @property
    def claim_ids(self) -> tuple[str, ...]:
        return tuple(c.id for c in self.claims)

    @property
    def place(self) -> str:
        """The notebook that sets the lesson's place in the course: its first, or the first it goes with."""
        return (self.notebooks or self.goes_with)[0]

    def __post_init__(self):
        # frozen: a lab without its reference answers (or answers without a lab) cannot be graded
        if not self.notebooks and not self.goes_with:
            raise HpclabError(f"lesson {self.id!r} names no notebook", "give the notebooks it teaches with")
        if (self.lab is None) != (self.reference is None and self.code is None):
            raise HpclabError(f"lesson {self.id!r}: a lab needs its reference answers and the answers a lab",
                              "give both lab= and reference= (or code= for a code lab), or neither")


_LESSONS: dict[str, Lesson] = {}
_discovered = False


def register(lesson: Lesson) -> Lesson:
    """Add a lesson (called by its module at import). Returns it. Refuses a second lesson with
    the same id, and two lessons that name the same notebook, lab or claim."""
    for other in _LESSONS.values():
        if other.id == lesson.id:
            if other.notebooks == lesson.notebooks:   # the same module imported again
                continue
            raise HpclabError(f"two lessons are called {lesson.id!r}", "rename one of them")
        shared = (set(other.notebooks) & set(lesson.notebooks)
                  | ({other.lab} & {lesson.lab} - {None}) | (set(other.claim_ids) & set(lesson.claim_ids)))
        if shared:
            raise HpclabError(f"lessons {other.id!r} and {lesson.id!r} both name {', '.join(sorted(shared))}",
                              "a notebook, a lab and a claim belong to one lesson")
    _LESSONS[lesson.id] = lesson
    return lesson


def _discover() -> None:
    # Import every module of this package once; lesson modules register themselves. Done on
    # first use rather than at import so that the lesson modules may import this one.
    global _discovered
    if _discovered:
        return
    _discovered = True
    for info in sorted(pkgutil.iter_modules(__path__), key=lambda m: m.name):
        if not info.name.startswith("_"):
            importlib.import_module(f"{__name__}.{info.name}")


def lessons() -> list[Lesson]:
    """Every lesson, in course order (by the file name of its first notebook)."""
    _discover()
    return sorted(_LESSONS.values(), key=lambda lesson: (lesson.place, not lesson.notebooks, lesson.id))


def names() -> tuple[str, ...]:
    """The lessons' ids, in course order."""
    return tuple(lesson.id for lesson in lessons())


def get(lesson_id: str) -> Lesson:
    """The lesson called `lesson_id`; HpclabError listing the lessons for any other name."""
    known = names()
    if lesson_id not in _LESSONS:
        raise HpclabError(f"unknown lesson {lesson_id!r}: the course has {', '.join(known)}",
                          "use one of these names (a new lesson is a module in hpclab/course/lessons/)")
    return _LESSONS[lesson_id]


def labs() -> tuple[str, ...]:
    """The labs' names (folders under labs/), in course order."""
    return tuple(lesson.lab for lesson in lessons() if lesson.lab)


def lab(lab_id: str) -> Lesson:
    """The lesson whose lab is `lab_id`; HpclabError listing the labs for any other name."""
    for lesson in lessons():
        if lesson.lab is not None and lesson.lab == lab_id:
            return lesson
    raise HpclabError(f"unknown lab {lab_id!r}: the course has {', '.join(labs())}",
                      "use one of these names (a lab is a folder under labs/ that a lesson names)")


def code_labs() -> tuple[str, ...]:
    """The labs in which students write code (a lesson with `code`), in course order."""
    return tuple(lesson.lab for lesson in lessons() if lesson.lab and lesson.code is not None)


def claims() -> list:
    """Every fidelity claim (hpclab.course.fidelity.Claim), in the table's order: the lessons in
    course order, each lesson's claims in its own order."""
    return [claim for lesson in lessons() for claim in lesson.claims]


def notebook_lesson(notebook: str | Path) -> Lesson | None:
    """The lesson a notebook (a path or file name under notebooks/) belongs to; None for an
    introduction or a notebook no lesson names."""
    name = Path(notebook).name
    return next((lesson for lesson in lessons() if name in lesson.notebooks), None)
