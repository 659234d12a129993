"""The classroom make test's room tests share (usage: test_room.py up | remove).

`up` makes the room the `classroom` fixture of tests/conftest.py would make (3 students, 1
instructor) when none is here, before make test's first part: making one restarts the controller
with the room's scheduling policy, which the other worker's jobs must not meet. It prints `made`
when it made one, `kept` when a room was here already (a real class's: the tests use it and
neither stop nor remove it). `remove` removes the room after the last part, when a test has not
removed it already; its archive goes to a temporary folder, deleted afterwards.
"""

from __future__ import annotations

import contextlib
import shutil
import sys
import tempfile
from pathlib import Path

from hpclab.core.errors import HpclabError


def main(argv: list[str]) -> int:
    from hpclab.classroom import layout, record, room

    if argv not in (["up"], ["remove"]):
        print("usage: test_room.py up | remove", file=sys.stderr)
        return 2
    here = not record.load(layout.layout().record).empty
    try:
        if argv == ["up"]:
            if not here:
                with contextlib.redirect_stdout(sys.stderr):  # stdout is the one word make test reads
                    room.up(students=3, instructors=1)
            print("kept" if here else "made")
        elif here:
            archive = Path(tempfile.mkdtemp(prefix="hpclab-test-room-archive-"))
            try:
                room.remove(yes=True, archive_dir=archive)
            finally:
                shutil.rmtree(archive, ignore_errors=True)
    except HpclabError as e:
        print(f"make test: the classroom for the room's tests: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
