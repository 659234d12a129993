"""`hpclab classroom` on bad input: one clear line, nothing created."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest


def _hpclab(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "hpclab.cli.main", "classroom", *args],
                          capture_output=True, text=True, timeout=120)


@pytest.mark.parametrize("args, words", [
    (["--students", "0"], "1 to 99 students"),
    (["--students", "100"], "1 to 99 students"),
    (["--instructors", "0"], "1 to 9 instructors"),
    (["--spawner", "kubernetes"], "invalid choice"),
])
def test_bad_room_sizes_are_refused_before_anything_is_made(args, words):
    r = _hpclab("up", *args)
    assert r.returncode == 2
    assert words in r.stderr
    assert "Traceback" not in r.stderr


def test_status_without_a_classroom_says_how_to_make_one(tmp_path, monkeypatch):
    monkeypatch.setenv("HPCLAB_CLASSROOM", str(tmp_path / "none"))
    r = subprocess.run([sys.executable, "-m", "hpclab.cli.main", "classroom", "status"], capture_output=True,
                       text=True, timeout=60, env={**os.environ})
    assert r.returncode == 0 and "classroom up" in r.stdout



def test_a_record_its_reader_may_not_read_is_named_as_root_s(tmp_path, monkeypatch):
    """A user who is not root asks for the status: one clear message, not a traceback."""
    from pathlib import Path

    from hpclab.classroom import record
    from hpclab.core.errors import HpclabError

    path = tmp_path / "classroom.json"
    record.Record(path, settings={"students": 3}).save()

    def denied(self, *a, **k):
        raise PermissionError(13, "Permission denied", str(self))

    monkeypatch.setattr(Path, "read_text", denied)   # as for a user other than root: the file is 0600
    with pytest.raises(HpclabError, match="root's"):
        record.load(path)
