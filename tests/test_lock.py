"""requirements.lock (make lock, scripts/lock.sh) agrees with pyproject.toml, and both the project's
.venv (make setup) and the classroom's venv install from it with every hash checked."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

from packaging.requirements import Requirement
from packaging.version import Version

ROOT = Path(__file__).resolve().parent.parent


def _norm(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def parse_lock(path: Path) -> dict[str, list[dict]]:
    """name -> its entries (one per marker): {"version", "marker", "hashes"}."""
    entries: dict[str, list[dict]] = {}
    current = None
    for line in path.read_text().splitlines():
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        if not line[0].isspace():
            m = re.match(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==([^\s;\\]+)\s*(?:;\s*([^\\]*?))?\s*\\?$", line)
            assert m, f"{path.name}: not a pinned line: {line!r}"
            current = {"version": m.group(2), "marker": (m.group(3) or "").strip(), "hashes": []}
            entries.setdefault(_norm(m.group(1)), []).append(current)
        else:
            h = re.match(r"^\s+--hash=sha256:([0-9a-f]{64})\s*\\?$", line)
            assert h and current is not None, f"{path.name}: unexpected line {line!r}"
            current["hashes"].append(h.group(1))
    return entries


def _project() -> dict:
    return tomllib.loads((ROOT / "pyproject.toml").read_text())


def _direct_requirements() -> list[Requirement]:
    project = _project()["project"]
    extras = project["optional-dependencies"]
    return [Requirement(s) for s in project["dependencies"] + extras["test"] + extras["classroom"]]


def test_every_direct_dependency_is_locked_at_its_pin():
    """Does every pin of pyproject.toml (dependencies, test and classroom extras) appear in the
    lock at the same version?"""
    lock = parse_lock(ROOT / "requirements.lock")
    wrong = []
    for req in _direct_requirements():
        (spec,) = req.specifier
        assert spec.operator == "==", f"{req} is not pinned in pyproject.toml"
        versions = {e["version"] for e in lock.get(_norm(req.name), [])}
        if versions != {spec.version}:
            wrong.append(f"{req.name}: pyproject {spec.version}, lock {sorted(versions) or 'missing'}")
    assert not wrong, "requirements.lock is out of date (run 'make lock'): " + "; ".join(wrong)


def test_every_locked_package_is_pinned_with_hashes():
    """Is every entry of both locks one version with at least one sha256 (pip --require-hashes
    refuses anything else)?"""
    for name in ("requirements.lock", "requirements-build.lock"):
        lock = parse_lock(ROOT / name)
        assert lock and all(e["hashes"] for entries in lock.values() for e in entries), name
    # mpi4py is built from its sdist: besides its wheels' hashes, one more (the sdist's) is there
    (mpi4py,) = parse_lock(ROOT / "requirements.lock")["mpi4py"]
    assert len(mpi4py["hashes"]) > 1


def test_the_build_lock_is_part_of_the_lock():
    """Are the build tools installed first (requirements-build.lock) the very entries of
    requirements.lock, and do they build hpclab (its [build-system]) and mpi4py?"""
    lock, build = parse_lock(ROOT / "requirements.lock"), parse_lock(ROOT / "requirements-build.lock")
    for name, entries in build.items():  # markers may be narrower: the build tools need fewer platforms
        pins = {(e["version"], tuple(e["hashes"])) for e in entries}
        assert pins <= {(e["version"], tuple(e["hashes"])) for e in lock[name]}, f"{name} differs between the locks"
    for line in (ROOT / "scripts" / "lock-build.in").read_text().splitlines():
        if line.strip() and not line.startswith("#"):
            req = Requirement(line)
            assert req.specifier.contains(Version(build[_norm(req.name)][0]["version"])), req
    for spec in _project()["build-system"]["requires"]:
        req = Requirement(spec)
        assert req.specifier.contains(Version(build[_norm(req.name)][0]["version"])), req


def test_otf2_wheel_only_where_pypi_has_one():
    """Is otf2 locked only for CPython 3.11 on x86_64 (the wheels PyPI serves), leaving Debian's
    bindings to the other Pythons?"""
    (otf2,) = parse_lock(ROOT / "requirements.lock")["otf2"]
    assert "3.12" in otf2["marker"] and "x86_64" in otf2["marker"]


def test_setup_and_classroom_install_from_the_lock():
    """Do make setup and the classroom's venv install every package from the locks with hashes
    checked, and the project itself without dependencies?"""
    from hpclab.classroom import install

    setup = (ROOT / "scripts" / "setup.sh").read_text()
    assert "--require-hashes --no-deps -r requirements-build.lock" in setup
    assert "--require-hashes --no-build-isolation --no-binary mpi4py -r requirements.lock" in setup
    assert "--no-deps --no-build-isolation -e ." in setup
    assert not re.search(r"pip install[^\n]*-e '?\.\[", setup), "the project is installed with its dependencies"
    steps = install.install_steps(Path("/venv/bin/python"), Path("/course"))
    assert ["--require-hashes", "--no-deps", "-r", "/course/requirements-build.lock"] == steps[0][-4:]
    assert steps[1][-6:] == ["--require-hashes", "--no-build-isolation", "--no-binary", "mpi4py", "-r",
                             "/course/requirements.lock"]
    assert steps[2][-3:] == ["--no-build-isolation", "-e", "/course"] and "--no-deps" in steps[2]
    assert {"requirements.lock", "requirements-build.lock"} <= set(install.COURSE_ITEMS)


def test_the_lock_says_how_to_write_it_again():
    head = (ROOT / "requirements.lock").read_text().splitlines()[:2]
    assert head[1].strip("# ") == "make lock"


def test_a_jupyter_process_starts_without_building_iri_parsers():
    """Is rfc3987-syntax left out of the lock? jsonschema 4.24+ imports it when installed, and it
    builds 38 Earley parsers at import: 1.4 s of CPU in every student's server and every nbgrader
    command (pyproject.toml's jsonschema pin says why)."""
    assert "rfc3987-syntax" not in parse_lock(ROOT / "requirements.lock")
    import subprocess
    import sys

    code = "import sys, nbformat, jupyter_server.serverapp; print('rfc3987_syntax' in sys.modules)"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "False"
