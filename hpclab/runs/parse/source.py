"""Shared helpers of the parsers: reading a file and failing with its name and line.

Every parser error is an HpclabError whose first words are `<file>:<line>:` (or `<file>:` with
a JSON key path when no line applies), so a student can open the file at the right place.
"""

from __future__ import annotations

from pathlib import Path

from hpclab.core.errors import HpclabError


def fail(source: str, line: int | None, what: str, hint: str = "") -> HpclabError:
    """Build the HpclabError for a problem in `source` at 1-based `line` (None: whole file)."""
    where = f"{source}:{line}" if line else str(source)
    return HpclabError(f"{where}: {what}", hint)


def read_text(path: str | Path) -> str:
    """The text of a file (undecodable bytes replaced); HpclabError if it cannot be read."""
    path = Path(path)
    try:
        return path.read_text(errors="replace")
    except FileNotFoundError as exc:
        raise HpclabError(f"{path}: no such file", "check the run folder; did the job finish?") from exc
    except OSError as exc:
        raise HpclabError(f"cannot read {path}: {exc.strerror}", "check the path and permissions") from exc


def typed(text: str):
    """A key = value text value as Python: int, float, True/False for yes/no, None for none."""
    value = text.strip()
    if value in ("yes", "true"):
        return True
    if value in ("no", "false"):
        return False
    if value == "none":
        return None
    try:
        return int(value)
    except ValueError:
        pass
    try:
        return float(value)
    except ValueError:
        return value
