"""`make test-fast` (issue 27): every test that needs neither the cluster nor the classroom and is
not slow, selected by marks that tests/conftest.py sets from what a test uses, so it never starts
the cluster."""

from __future__ import annotations

import ast
import re
from pathlib import Path
from types import SimpleNamespace

from tests import conftest

ROOT = Path(__file__).resolve().parent.parent
FAST = "not cluster and not classroom and not slow"


class FakeItem(SimpleNamespace):
    def add_marker(self, mark):
        self.marks.append(mark.name)


def _marks(nodeid: str, *fixtures: str) -> list[str]:
    item = FakeItem(nodeid=nodeid, fixturenames=["request", *fixtures], marks=[])
    conftest.pytest_collection_modifyitems(None, [item])
    return item.marks


def test_a_test_using_the_cluster_or_classroom_is_marked_so():
    """Is a test that takes the cluster or the classroom fixture (directly or through another
    fixture: pytest lists the whole closure) marked for it, and a test that takes neither not?"""
    assert _marks("tests/test_x.py::test_a", "tmp_path", "cluster") == ["cluster"]
    assert sorted(_marks("tests/test_x.py::test_b", "room", "classroom", "cluster")) == ["classroom", "cluster"]
    assert _marks("tests/test_x.py::test_c", "tmp_path", "monkeypatch", "mpi_env") == []


def test_listed_slow_tests_are_marked_slow_with_every_parametrisation():
    assert _marks("tests/test_browser.py::test_anything[chromium]") == ["slow"]
    assert _marks("tests/trace/test_split.py::test_split_sums_to_total_on_random_traces[3]") == ["slow"]
    assert _marks("tests/trace/test_split.py::test_split_sums_to_total_on_random_traces_too") == []


def test_every_slow_entry_names_a_test():
    """Does every entry of SLOW_WITHOUT_CLUSTER still name a test file, and a test function in it
    (a renamed test would silently join the fast tier)?"""
    gone = []
    for entry in conftest.SLOW_WITHOUT_CLUSTER:
        path, _, name = entry.partition("::")
        file = ROOT / path
        if not file.is_file():
            gone.append(entry)
            continue
        if name:
            tree = ast.parse(file.read_text())
            defined = {n.name for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))}
            if name not in defined:
                gone.append(entry)
    assert not gone, "tests/conftest.py lists tests that no longer exist: " + ", ".join(gone)


def test_the_marks_are_declared():
    """Are the marks test-fast selects by declared in pyproject.toml (a typo would select nothing)?"""
    import tomllib

    markers = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["pytest"]["ini_options"]["markers"]
    assert {m.split(":")[0] for m in markers} >= {"cluster", "classroom", "slow"}


def test_make_test_fast_selects_by_marks_and_never_starts_the_cluster():
    """Does the Makefile's test-fast depend on set-up only (not cluster-up) and select by the marks?"""
    make = (ROOT / "Makefile").read_text()
    rule = re.search(r"^test-fast:(.*)\n((?:\t.*\n)+)", make, re.M)
    assert rule, "the Makefile has no test-fast target"
    assert rule.group(1).split() == ["setup"]
    assert f'-m "{FAST}"' in rule.group(2) and "cluster up" not in rule.group(2)
    assert "make test-fast" in (ROOT / "README.md").read_text()
