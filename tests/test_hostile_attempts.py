"""The grade demo's hostile students are data (hpclab/grading/hostile/*.py.in): one file per kind,
each printing its verdict line, with only the placeholders run_demo fills in; filled, each is
Python. (The attempts themselves run in the sandbox in test_grading's simulated class.)"""

from __future__ import annotations

import ast
import re

import pytest

from hpclab.grading import demo

PLACEHOLDERS = {"STATE", "DAEMON", "COURSE", "REPO", "VENV_SITE", "SLEEPER", "NONCE"}


@pytest.mark.parametrize("kind", [*demo.HOSTILE_KINDS, "snoop"])
def test_each_attempt_is_a_file_that_fills_into_python(kind):
    code = demo.attempt(kind)
    assert set(re.findall(r"@([A-Z_]+)@", code)) <= PLACEHOLDERS
    filled = demo._filled(code, {name: "1" if name == "SLEEPER" else f"/x/{name.lower()}" for name in PLACEHOLDERS})
    assert not re.search(r"@[A-Z_]+@", filled)
    ast.parse(filled)
    assert kind == "snoop" or f"ATTEMPT {kind}" in code
    assert "/work/main" not in code   # no path of one machine
