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
NOTEBOOK_TEST = "tests/test_notebooks.py::test_notebook_runs_clean"


class FakeItem(SimpleNamespace):
    def add_marker(self, mark):
        self.marks.append(mark.name)

    def iter_markers(self):
        return [SimpleNamespace(name=m) for m in self.marks]


def _marks(nodeid: str, *fixtures: str) -> list[str]:
    item = FakeItem(nodeid=nodeid, fixturenames=["request", *fixtures], marks=[])
    conftest.pytest_collection_modifyitems(None, [item])
    return item.marks


def test_a_test_using_the_cluster_or_classroom_is_marked_so():
    """Is a test that takes the cluster or the classroom fixture (directly or through another
    fixture: pytest lists the whole closure) marked for it, and a test that takes neither not?"""
    assert _marks("tests/test_x.py::test_a", "tmp_path", "cluster") == ["cluster"]
    assert sorted(_marks("tests/test_x.py::test_b", "room", "classroom", "cluster")) == ["alone", "classroom", "cluster"]
    assert _marks("tests/test_x.py::test_c", "tmp_path", "monkeypatch", "mpi_env") == []


def test_listed_slow_tests_are_marked_slow_with_every_parametrisation():
    assert _marks("tests/test_browser.py::test_anything[chromium]") == ["slow"]
    assert _marks("tests/trace/test_split.py::test_split_sums_to_total_on_random_traces[3]") == ["slow"]
    assert _marks("tests/trace/test_split.py::test_split_sums_to_total_on_random_traces_too") == []


def test_alone_tests_are_marked_alone_and_only_the_listed_parametrisation():
    """make test runs the `alone` tests after the others, one at a time: is a whole listed file
    marked, a listed parametrisation only that one, and a classroom test always?"""
    assert "alone" in _marks("tests/test_vnodes.py::test_anything[1.0]", "cluster")
    assert "alone" in _marks("tests/test_faults.py::test_controller_kill9_mid_job_then_up_job_completes[6.0]")
    assert "alone" not in _marks("tests/test_faults.py::test_requeue_is_followed_and_recorded", "cluster")
    nb = "tests/test_notebooks.py::test_notebook_runs_clean"
    assert "alone" in _marks(f"{nb}[notebooks/02-transports.ipynb]", "cluster")
    assert "alone" not in _marks(f"{nb}[notebooks/03-placement.ipynb]", "cluster")
    # a test that takes the room: in the first part from a tests/test_classroom_*.py file (in the
    # room's one worker), alone from any other file, and alone when it stops or removes the room
    assert "alone" in _marks("tests/test_x.py::test_room", "classroom", "cluster")
    assert "alone" not in _marks("tests/test_classroom_hub.py::test_room", "classroom", "cluster")
    assert "alone" in _marks("tests/test_classroom_teardown.py::test_room", "classroom", "cluster")
    room_module = FakeItem(nodeid="tests/test_x.py::test_r", fixturenames=["cluster"], marks=["classroom"])
    conftest.pytest_collection_modifyitems(None, [room_module])
    assert "alone" in room_module.marks


def test_the_first_part_keeps_a_files_tests_together_and_the_rooms_in_one_worker():
    """Does make test's scheduler group by file (as --dist loadfile), except that every
    tests/test_classroom_*.py file's tests form one group, and leave other --dist modes alone?"""
    group = conftest.first_part_group
    assert group("tests/test_grading.py::test_a[x]") == group("tests/test_grading.py::test_b") == "tests/test_grading.py"
    assert group("tests/trace/test_split.py::test_c") == "tests/trace/test_split.py"
    assert group("tests/test_classroom_hub.py::test_a") == group("tests/test_classroom_grading.py::test_b[y]")
    assert group("tests/test_classroom_hub.py::test_a") != group("tests/test_codelab.py::test_b")
    assert conftest.pytest_xdist_make_scheduler(SimpleNamespace(getoption=lambda name: "load"), None) is None


def test_every_alone_notebook_is_one_the_course_runs():
    """Does each notebook parametrisation in ALONE name a notebook of the course (a renamed one
    would run two at a time and reshape the cluster under another test)?"""
    from hpclab.course import runner

    ids = {str(b.relative_to(ROOT)) for b in runner.course_notebooks()}
    listed = [e.split("[", 1)[1].rstrip("]") for e in conftest.ALONE if e.startswith(NOTEBOOK_TEST + "[")]
    assert listed and set(listed) <= ids, set(listed) - ids


def test_every_notebook_on_virtual_nodes_runs_alone():
    """A notebook that brings virtual nodes up (hpclab.site.multinode, directly or through its
    lesson's measure_mapping / measure_dedicated) reshapes the cluster: is each one in ALONE?"""
    from hpclab.course import runner

    on_vnodes = re.compile(r"virtual_nodes\(|measure_mapping\(|measure_dedicated\(")
    alone = {e.split("[", 1)[1].rstrip("]") for e in conftest.ALONE if e.startswith(NOTEBOOK_TEST + "[")}
    found = {str(b.relative_to(ROOT)) for b in runner.course_notebooks() if on_vnodes.search(b.read_text())}
    assert found and found <= alone, found - alone


def test_every_slow_entry_names_a_test():
    """Does every entry of SLOW_WITHOUT_CLUSTER and of ALONE still name a test file, and a test
    function in it (a renamed test would silently join the fast tier, or run two at a time)?"""
    gone = []
    for entry in conftest.SLOW_WITHOUT_CLUSTER + conftest.ALONE:
        path, _, name = entry.split("[", 1)[0].partition("::")
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
    assert {m.split(":")[0] for m in markers} >= {"cluster", "classroom", "slow", "alone"}


def test_make_test_fast_selects_by_marks_and_never_starts_the_cluster():
    """Does the Makefile's test-fast depend on set-up only (not cluster-up) and select by the marks?"""
    make = (ROOT / "Makefile").read_text()
    rule = re.search(r"^test-fast:(.*)\n((?:\t.*\n)+)", make, re.M)
    assert rule, "the Makefile has no test-fast target"
    assert rule.group(1).split() == ["setup"]
    assert f'-m "{FAST}"' in rule.group(2) and "cluster up" not in rule.group(2)
    assert "make test-fast" in (ROOT / "README.md").read_text()


def test_make_test_runs_the_shared_part_two_at_a_time_then_the_alone_part():
    """Does make test run scripts/test.sh, which runs `not alone` with the shared-cluster guard
    on two workers and then `alone` without it?"""
    make = (ROOT / "Makefile").read_text()
    rule = re.search(r"^test:(.*)\n((?:\t.*\n)+)", make, re.M)
    assert rule and "scripts/test.sh" in rule.group(2)
    script = (ROOT / "scripts" / "test.sh").read_text()
    assert 'HPCLAB_CLUSTER_SHARED=1 "$py" -m pytest -m "not alone" -n "${HPCLAB_TEST_WORKERS:-3}"' in script
    assert '"$py" -m pytest -m alone "$@"' in script
    # the room the classroom's tests share is made before the first part, when they are selected
    room = script.index('scripts/test_room.py up')
    assert script.index('-m "classroom and not alone"') < room < script.index('-m "not alone" -n')
    assert script.index('-m alone "$@"') < script.index('scripts/test_room.py remove')


def test_make_test_refuses_a_mark_of_its_own_with_a_message():
    """A `-m` in PYTEST_ARGS would replace each part's mark (and run the alone tests two at a time):
    is it refused before any test runs, saying what to use instead?"""
    import subprocess
    import sys

    res = subprocess.run(["bash", str(ROOT / "scripts" / "test.sh"), sys.executable, "-m", "slow"],
                         capture_output=True, text=True, timeout=30)
    assert res.returncode == 2 and "may not hold -m" in res.stderr and "-k" in res.stderr


def test_the_test_room_script_says_how_to_call_it():
    """scripts/test_room.py takes `up` or `remove`: does anything else get its usage and 2, with
    no room touched?"""
    import subprocess
    import sys

    res = subprocess.run([sys.executable, str(ROOT / "scripts" / "test_room.py"), "down"],
                         capture_output=True, text=True, timeout=60)
    assert res.returncode == 2 and "usage: test_room.py up | remove" in res.stderr and not res.stdout
