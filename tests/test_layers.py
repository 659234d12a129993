"""The package's floors (docs/architecture.md): the import contract in pyproject.toml holds
(import-linter), and no two hpclab modules import each other, directly or round a longer loop,
counting imports inside functions too."""

from __future__ import annotations

import ast
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from hpclab.core import paths

PACKAGE = paths.package_dir()


def _module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def import_graph() -> dict[str, set[str]]:
    """hpclab module -> the hpclab modules it imports anywhere in its file (top level or inside a
    function); `from hpclab.x import name` counts as importing hpclab.x.name when that is a module."""
    files = {_module_name(f): f for f in PACKAGE.rglob("*.py") if "__pycache__" not in f.parts}
    graph: dict[str, set[str]] = {m: set() for m in files}
    for mod, f in files.items():
        is_pkg = f.name == "__init__.py"
        for node in ast.walk(ast.parse(f.read_text(), str(f))):
            targets = []
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    here = mod.split(".") if is_pkg else mod.split(".")[:-1]
                    here = here[:len(here) - (node.level - 1)]
                    base = ".".join(here + ([base] if base else []))
                targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in files else base for a in node.names]
            for t in targets:
                while t and t not in files and "." in t:
                    t = t.rsplit(".", 1)[0]
                if t in files and t != mod:
                    graph[mod].add(t)
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Groups of modules that reach each other through imports (Tarjan's strongly connected
    components of more than one module)."""
    index, low, stack, on, out, counter = {}, {}, [], set(), [], [0]
    sys.setrecursionlimit(max(10_000, sys.getrecursionlimit()))

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = []
            while True:
                w = stack.pop()
                on.discard(w)
                group.append(w)
                if w == v:
                    break
            if len(group) > 1:
                out.append(sorted(group))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def test_the_cycle_finder_finds_a_cycle():
    """Does the finder report a loop a -> b -> c -> a, and nothing for a chain?"""
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": set()}) == [["a", "b", "c"]]
    assert cycles({"a": {"b"}, "b": {"c"}, "c": set()}) == []


def test_no_import_cycle_among_hpclab_modules():
    """Is there no group of hpclab modules that import each other, function-level imports
    included?"""
    found = cycles(import_graph())
    assert not found, "import cycles: " + "; ".join(" <-> ".join(g) for g in found)


def test_the_floors_contract_holds():
    """Does `lint-imports` (import-linter, contract in pyproject.toml) find every import going
    down the floors?"""
    exe = shutil.which("lint-imports", path=str(Path(sys.executable).parent))
    if exe is None:
        pytest.fail("lint-imports is not installed: run `make setup` (import-linter is a test dependency)")
    res = subprocess.run([exe, "--no-cache"], capture_output=True, text=True, cwd=paths.repo(), timeout=300)
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-1000:]


def test_architecture_doc_names_every_module_on_its_floor():
    """Does docs/architecture.md list each module in its floor's row, so a newcomer can find the
    module of every step from the document alone?"""
    doc = (paths.repo() / "docs" / "architecture.md").read_text()
    rows = {line.split("`")[1].rstrip("/"): line for line in doc.splitlines() if line.startswith("| `")}
    missing = []
    for f in sorted(PACKAGE.rglob("*.py")):
        rel = f.relative_to(PACKAGE)
        if "__pycache__" in rel.parts or f.name in ("__init__.py", "__main__.py") or len(rel.parts) < 2:
            continue
        floor, inner = rel.parts[0], "/".join(rel.parts[1:])
        if floor not in rows:
            missing.append(f"floor {floor}/ has no row")
        elif f"`{inner}`" not in rows[floor]:
            missing.append(f"{floor}/{inner}")
    assert not missing, "docs/architecture.md does not name: " + ", ".join(missing)
