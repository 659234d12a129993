"""nbgrader for a room (being written: see the classroom issue). Interface used by room.py and hub.py:

    prepare(lay, rec, students, instructors)   the exchange, the instructors' course folder, configs
    remove(lay, rec)                           what prepare created
    hub_services(lay) -> (services, roles)     the formgrader as a hub service for instructors only
"""

from __future__ import annotations

from hpclab.classroom.layout import ClassroomLayout
from hpclab.classroom.record import Record


def prepare(lay: ClassroomLayout, rec: Record, students: list[str], instructors: list[str]) -> None:
    pass


def remove(lay: ClassroomLayout, rec: Record) -> None:
    pass


def hub_services(lay: ClassroomLayout) -> tuple[list[dict], list[dict]]:
    return [], []
