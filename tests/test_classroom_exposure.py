"""A room opened from a checkout others can enter (issue 29): what a student could read of the lab
sources is found by an unprivileged account's own grep, the checkout is closed and the old mode
recorded, and `remove` puts it back. The checkout here is a small tree under /tmp whose modes are
those of a clone under /srv; the reads are real, as the account `nobody`."""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

import pytest

from hpclab.classroom import exposure

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="reads as another account (runuser): needs root")


@pytest.fixture
def checkout():
    # pytest's own folders are 0700; /tmp, like /srv, lets every account in
    top = Path(tempfile.mkdtemp(prefix="hpclab-exposure-", dir="/tmp"))
    top.chmod(0o755)
    root = top / "hpclab"
    (root / "labs" / "lab-x").mkdir(parents=True)
    (root / "labs" / "lab-x" / "lab-x.ipynb").write_text('{"source": "### BEGIN SOLUTION\\nx = 1\\n"}')
    (root / "build" / "grade-demo").mkdir(parents=True)
    (root / "build" / "grade-demo" / "gradebook.db").write_bytes(b"SQLite format 3\0")
    (root / "notebooks").mkdir()
    (root / "notebooks" / "00.ipynb").write_text('{"source": "nothing to hide"}')
    for path in [root, *root.rglob("*")]:
        path.chmod(0o755 if path.is_dir() else 0o644)
    yield root
    shutil.rmtree(top)


def test_a_student_account_finds_the_solutions_and_gradebooks_it_may_read(checkout):
    found = exposure.readable_secrets(checkout)
    assert found == sorted([str(checkout / "build" / "grade-demo" / "gradebook.db"),
                            str(checkout / "labs" / "lab-x" / "lab-x.ipynb")])


def test_closing_the_checkout_leaves_nothing_readable_and_remove_reopens_it(checkout):
    settings: dict = {}
    said = exposure.close_checkout(settings, checkout)
    assert said and "2 file(s)" in said[0] and "0750" in said[0] and "remove" in said[0]
    assert exposure.readable_secrets(checkout) == []
    assert oct(checkout.stat().st_mode & 0o777) == "0o750" and settings["checkout_mode"]["mode"] == 0o755
    assert exposure.close_checkout(settings, checkout) == []   # a second up changes nothing
    assert "0755" in exposure.reopen_checkout(settings)
    assert checkout.stat().st_mode & 0o777 == 0o755 and "checkout_mode" not in settings
    assert exposure.reopen_checkout(settings) == ""
