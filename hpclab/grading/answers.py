"""Points are decided outside the student's kernel.

nbgrader runs a lab's cells in the sandboxed kernel (hpclab.grading.sandbox), except its graded test
cells: for each of those the kernel is only asked for the values of the names the test reads
(its answers, as JSON: numbers, strings, booleans, lists, dicts). After the notebook ran, the
grader runs every test cell's code, visible and hidden asserts as written in the lab, in a fresh
Python process of its own (sandboxed too, no student code in it) on those values and on the
submission as it was collected (`submitted/<student>/<lab>/`), and writes the outcome into the
cell's outputs; nbgrader's own grading (an error scores 0, otherwise full points), feedback and
gradebook then follow as usual. Whatever the notebook patches in its kernel (builtins, math,
numpy, hpclab) or returns (an object equal to everything) changes nothing but its own answers.

Inside nbgrader, hpclab.grading.preprocessors.SandboxExecute does this with the functions below;
this module, imported by every student's kernel and by the grader's check, does without nbgrader.
"""

from __future__ import annotations

import ast
import builtins
import contextlib
import io
import json
import os
import sys
import traceback
from pathlib import Path

from hpclab.grading import references, sandbox

MARK = "@@hpclab-answers@@ "
FIXED = {"LAB": "."}          # names the grader sets itself: the lab folder is the submission
MAX_RECORD = 1 << 20          # bytes of answers read from a kernel per cell


def test_cell(cell) -> bool:
    """A graded test cell: nbgrader grade, not a solution, code."""
    nbg = cell.get("metadata", {}).get("nbgrader", {})
    return cell.get("cell_type") == "code" and bool(nbg.get("grade")) and not nbg.get("solution")


def free_names(source: str) -> list[str]:
    """Names a cell reads but never binds itself (its answers), builtins and FIXED left out."""
    tree = ast.parse(source)
    loaded, bound = set(), set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Name):
            (loaded if isinstance(node.ctx, ast.Load) else bound).add(node.id)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            bound.update((a.asname or a.name).split(".")[0] for a in node.names)
        elif isinstance(node, (ast.FunctionDef, ast.ClassDef, ast.AsyncFunctionDef)):
            bound.add(node.name)
        elif isinstance(node, ast.arg):
            bound.add(node.arg)
    return sorted(n for n in loaded - bound if not hasattr(builtins, n) and n not in FIXED)


# --- inside the kernel ------------------------------------------------------------------------

def _plain(value, depth=0):
    """value as JSON-able plain data, or TypeError."""
    if depth > 32:
        raise TypeError("nested too deeply")
    if type(value).__module__ == "numpy" and hasattr(value, "item") and getattr(value, "ndim", 1) == 0:
        value = value.item()
    if value is None or type(value) in (bool, int, float, str):
        return value
    if type(value) in (list, tuple):
        return [_plain(v, depth + 1) for v in value]
    if type(value) is dict:
        out = {}
        for k, v in value.items():
            if type(k) not in (str, int, float, bool):
                raise TypeError(f"a key of type {type(k).__name__}")
            out[str(k) if type(k) is not str else k] = _plain(v, depth + 1)
        return out
    raise TypeError(f"a {type(value).__name__}")


def emit(names, namespace) -> None:
    """Print one record of the answers `names` from `namespace` (run in the student's kernel)."""
    values, skipped = {}, {}
    for name in names:
        if name not in namespace:
            skipped[name] = "not defined in your notebook"
            continue
        try:
            values[name] = _plain(namespace[name])
        except TypeError as exc:
            skipped[name] = f"not a plain value ({exc}): answers are numbers, strings, booleans, lists or dicts"
    sys.stdout.write(MARK + json.dumps({"values": values, "skipped": skipped}) + "\n")
    sys.stdout.flush()


def probe_code(names) -> str:
    """The code the grader runs in the kernel in place of a test cell."""
    return f"__import__('hpclab.grading.answers', fromlist=['emit']).emit({list(names)!r}, globals())"


def read_record(outputs) -> dict:
    """The answers in a probe's outputs: {"values", "skipped"}; a missing, repeated or malformed
    record gives no values and says why."""
    text = "".join(o.get("text", "") for o in outputs
                   if o.get("output_type") == "stream" and o.get("name") == "stdout")
    lines = [l for l in text.splitlines() if l.startswith(MARK)]
    if len(lines) != 1 or len(lines[0]) > MAX_RECORD:
        return {"values": {}, "skipped": {}, "problem": "no answers could be read from your kernel"}
    try:
        doc = json.loads(lines[0][len(MARK):])
        values, skipped = doc["values"], doc["skipped"]
        assert isinstance(values, dict) and isinstance(skipped, dict)
        return {"values": values, "skipped": {str(k): str(v)[:300] for k, v in skipped.items()}}
    except (ValueError, KeyError, TypeError, AssertionError, RecursionError):
        return {"values": {}, "skipped": {}, "problem": "the answers your kernel gave were malformed"}


# --- outside: the check ---------------------------------------------------------------------------

def check_cells(cells: list[dict]) -> list[dict]:
    """Run each test cell's code on its answers, in this process (meant to be a fresh one):
    cells [{"id", "source", "values", "skipped", "problem"?}] -> [{"id", "passed", "stdout",
    "ename", "evalue", "traceback"}]. The current folder is the submission."""
    references.REFERENCE_CACHE = {}  # one reference analysis per submission, not one per cell
    references.COMPUTE_HERE = True   # this process is fresh and runs no student code
    out = []
    for cell in cells:
        gid = cell["id"]
        ns = {"__name__": "__main__", **cell.get("values", {}), **FIXED}
        buf = io.StringIO()
        res = {"id": gid, "passed": True, "stdout": "", "ename": "", "evalue": "", "traceback": []}
        try:
            code = compile(cell["source"], f"<test cell {gid}>", "exec")
            with contextlib.redirect_stdout(buf):
                exec(code, ns)
        except BaseException as exc:     # an assertion, a NameError for a missing answer, ...
            res.update(passed=False, ename=type(exc).__name__, evalue=str(exc))
            if isinstance(exc, NameError):
                name = getattr(exc, "name", None)
                why = cell.get("skipped", {}).get(name) or cell.get("problem")
                if why:
                    res["evalue"] += f" ({why})"
            frames = [f for f in traceback.extract_tb(exc.__traceback__)
                      if f.filename == f"<test cell {gid}>"]
            lines = cell["source"].splitlines()
            res["traceback"] = (["Checked by the grader, outside your kernel:"]
                                + [f"  line {f.lineno}: {lines[f.lineno - 1].strip()}"
                                   for f in frames if 0 < f.lineno <= len(lines)]
                                + [f"{res['ename']}: {res['evalue']}"])
        res["stdout"] = buf.getvalue()[-5000:]
        out.append(res)
    return out


def check_main() -> int:
    """`python -I -m hpclab.grading check`: JSON cells on stdin, JSON results on stdout."""
    cells = json.loads(sys.stdin.read())
    # the results alone on stdout: whatever a test or a process it starts prints goes to stderr
    out = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)
    results = check_cells(cells)
    out.write(json.dumps(results))
    out.flush()
    return 0


def apply(cell, result: dict) -> None:
    """Write the grader's outcome into a test cell's outputs (what nbgrader scores and shows)."""
    from nbformat.v4 import new_output

    outputs = []
    if result["stdout"]:
        outputs.append(new_output("stream", name="stdout", text=result["stdout"]))
    if not result["passed"]:
        outputs.append(new_output("error", ename=result["ename"], evalue=result["evalue"],
                                  traceback=result["traceback"]))
    cell.outputs = outputs
    cell.execution_count = None


def check(cells: list[dict], lab_dir: Path, limits, unconfined: bool = False) -> list[dict]:
    """Run `check_cells` in a fresh Python process: in a sandbox that sees the submission
    read-only (or, unconfined, directly in lab_dir). Raises RuntimeError when the check itself
    fails (the grader's problem, not the student's)."""
    from hpclab.core import commands

    command = [sys.executable, "-I", "-m", "hpclab.grading", "check"]
    stdin = json.dumps(cells)
    if unconfined:
        env = {k: v for k, v in os.environ.items() if not k.startswith("PYTHON")}
        proc = commands.run(command, f"check the answers in {lab_dir}", env=env, timeout=limits.wall_seconds,
                            input=stdin, cwd=lab_dir)
        if proc is None:
            raise RuntimeError(f"the grader's check of {lab_dir} did not finish within {limits.wall_seconds} s")
    else:
        # a copy of the submission as collected, read-only (readable by the sandbox's user
        # whatever the modes in the zip were)
        with sandbox.Sandbox(limits, workdir=lab_dir, writable=False) as box:
            proc = box.run(command, stdin=stdin)
    if proc.returncode != 0:
        raise RuntimeError(f"the grader's check of {lab_dir} failed (exit {proc.returncode}): "
                           + "\n".join(proc.stderr.strip().splitlines()[-8:]))
    return json.loads(proc.stdout)

