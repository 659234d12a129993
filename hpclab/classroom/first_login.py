"""A student's course copy, made at each server start *as the student*: the course's notebooks
are copied into their home (labs come from the Assignments tab, in their release version: the
labs' sources hold the solutions and hidden tests), and a file the student already has is never overwritten
(their edits survive every later start, and a course update reaches only new files).

Run as the student (the hub starts `python -m hpclab.classroom.first_login SRC DST` through
setpriv), so every file is theirs from its creation and nothing a student placed in their home
(a symbolic link to someone else's folder, say) can make root write anywhere.
Standard library only: it starts in a fraction of a second.
"""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

ITEMS = ("notebooks",)  # what of the course a student works on
SKIPPED = {"__pycache__", ".ipynb_checkpoints"}


def copy_missing(src: Path, dst: Path, items=ITEMS) -> list[Path]:
    """Copy every file of src/<item> to dst/<item> that dst does not have yet (a path that exists
    in any form, a link included, is left alone); return the files copied."""
    copied = []
    dst.mkdir(mode=0o755, exist_ok=True)
    (dst / "runs").mkdir(mode=0o755, exist_ok=True)
    for item in items:
        top = src / item
        if not top.is_dir():
            continue
        for folder, dirs, files in os.walk(top):
            dirs[:] = sorted(d for d in dirs if d not in SKIPPED)
            rel = Path(folder).relative_to(src)
            target = dst / rel
            if os.path.lexists(target) and not (target.is_dir() and not target.is_symlink()):
                dirs[:] = []  # the student put something else there: theirs
                continue
            target.mkdir(mode=0o755, exist_ok=True)
            for name in sorted(files):
                out = target / name
                if os.path.lexists(out):
                    continue
                shutil.copyfile(Path(folder) / name, out, follow_symlinks=False)
                copied.append(out)
    return copied


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print("usage: python -m hpclab.classroom.first_login COURSE_FOLDER STUDENT_COPY", file=sys.stderr)
        return 2
    os.umask(0o022)
    copied = copy_missing(Path(argv[0]), Path(argv[1]))
    print(f"copied {len(copied)} course files into {argv[1]}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
