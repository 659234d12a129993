"""Run the whole course headless and write the report: what `make course` does after set-up.

Every notebook in notebooks/ and every lab in labs/ is executed top to bottom in a fresh kernel
(nbclient), against the local cluster. Executed notebooks and one HTML page each land in
build/course/; build/course/index.html lists them with their status, time and jobs. An earlier
report is moved to build/course/history/<time>/ first, never overwritten.

Notebooks read their size from `hpclab.course.runner.params()`: HPCLAB_QUICK=1 (used by the tests)
selects the quick parameter set.
"""

from __future__ import annotations

import html
import json
import os
import re
import shutil
import tempfile
import time
import traceback
from dataclasses import asdict, dataclass, field
from datetime import datetime, timezone
from pathlib import Path

from hpclab.course import fidelity, reading
from hpclab.core import commands, paths
from hpclab.core.errors import HpclabError
from hpclab.site import profile as site_mod
from hpclab import cluster


def quick() -> bool:
    """True when the quick parameter set is asked for (tests, CI smoke runs)."""
    return os.environ.get("HPCLAB_QUICK", "") not in ("", "0", "false", "no")


def params(full: dict, fast: dict) -> dict:
    """The parameters a notebook uses: `full` for the course, `fast` when HPCLAB_QUICK is set."""
    return dict(fast if quick() else full)


def resolve_notebooks(names: list[str]) -> list[Path]:
    """Course notebooks named by path, file name, stem or its number ('07', '07-pop-method',
    'notebooks/07-pop-method.ipynb', or a lab's folder name); HpclabError naming the known ones otherwise."""
    known = course_notebooks()
    out = []
    for name in names:
        path = Path(name)
        if path.is_file():
            out.append(path.resolve())
            continue
        stem = path.name.removesuffix(".ipynb")
        hits = [b for b in known if b.stem == stem] or [b for b in known if b.stem.split("-")[0] == stem]
        if len(hits) != 1:
            raise HpclabError(f"no course notebook {name!r}" if not hits else f"{name!r} names {len(hits)} notebooks",
                              "give one of: " + ", ".join(b.stem for b in known))
        out.append(hits[0])
    return out


def course_notebooks() -> list[Path]:
    """The course notebooks in reading order, then the labs' source notebooks."""
    root = paths.repo()
    books = sorted((root / "notebooks").glob("[0-9][0-9]*.ipynb"))
    labs = sorted((root / "labs").glob("*/*.ipynb"))
    return books + labs


@dataclass
class NotebookResult:
    path: str
    ok: bool
    seconds: float
    jobs: int
    error: str = ""
    html: str = ""
    executed: str = ""
    words: int = 0  # prose a learner reads, typed and generated (hpclab.course.reading)


@dataclass
class CourseReport:
    started: str
    seconds: float = 0.0
    quick: bool = False
    notebooks: list[NotebookResult] = field(default_factory=list)

    @property
    def failures(self) -> list[NotebookResult]:
        return [n for n in self.notebooks if not n.ok]

    @property
    def jobs(self) -> int:
        return sum(n.jobs for n in self.notebooks)

    def summary(self, out_dir: Path) -> str:
        lines = [f"hpclab course: {len(self.notebooks)} notebook(s) run in {self.seconds:.0f} s, "
                 f"{self.jobs} Slurm job(s) submitted, {len(self.failures)} failure(s)"]
        for n in self.notebooks:
            mark = "ok  " if n.ok else "FAIL"
            lines.append(f"  {mark} {n.path:<45} {n.seconds:6.1f} s  {n.jobs:3d} job(s)  {n.words:5d} words")
            if not n.ok:
                # The end of a cell error is what happened (the exception and its hint).
                tail = [l for l in n.error.splitlines() if l.strip() and not set(l.strip()) <= {"-"}][-2:]
                lines += [f"       {l.strip()}" for l in tail]
        lines.append(f"report: {out_dir / 'index.html'}")
        return "\n".join(lines)


def _count_jobs() -> int:
    """How many run folders exist (each is one submitted job): the difference counts a notebook's jobs."""
    root = paths.runs_dir()
    return sum(1 for _ in root.glob("*/*/spec.json")) if root.exists() else 0


def _error_summary(exc: BaseException) -> str:
    # nbclient's CellExecutionError carries the cell's own traceback as text: keep its last lines.
    text = re.sub(r"\x1b\[[0-9;]*m", "", str(exc)).strip()  # tracebacks arrive coloured
    lines = [line for line in text.splitlines() if line.strip()]
    return "\n".join(lines[-12:]) if lines else repr(exc)


def execute_notebook(src: Path, out_dir: Path, timeout: int = 900) -> NotebookResult:
    """Execute one notebook in a fresh kernel; write the executed copy and its HTML into out_dir."""
    import nbformat
    from traitlets.config import Config
    from nbclient import NotebookClient
    from nbconvert import HTMLExporter

    rel = str(src.relative_to(paths.repo()))
    nb = nbformat.read(src, as_version=4)
    jobs_before = _count_jobs()
    t0 = time.monotonic()
    error = ""
    try:
        # Kernel sockets as files in a private folder (ipc) rather than TCP on loopback: nothing
        # listens on a port, and the kernel has no reason to warn about unencrypted TCP.
        with tempfile.TemporaryDirectory(prefix="hpclab-kernel-") as sockets:
            config = Config()
            config.KernelManager.transport = "ipc"
            config.KernelManager.ip = str(Path(sockets) / "kernel")
            client = NotebookClient(nb, config=config, timeout=timeout, kernel_name="python3",
                                    resources={"metadata": {"path": str(src.parent)}})
            client.execute()
    except Exception as exc:  # noqa: BLE001 - any failure of a notebook is reported, not raised
        error = _error_summary(exc)
    seconds = time.monotonic() - t0
    stem = rel.replace("/", "__").removesuffix(".ipynb")
    executed = out_dir / "notebooks" / f"{stem}.ipynb"
    executed.parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(nb, executed)
    body, _ = HTMLExporter(template_name="lab").from_notebook_node(nb)
    page = out_dir / f"{stem}.html"
    page.write_text(body)
    return NotebookResult(rel, not error, seconds, _count_jobs() - jobs_before, error,
                          html=page.name, executed=str(executed.relative_to(out_dir)),
                          words=reading.count(nb).total)


def _keep_previous(out_dir: Path) -> None:
    """Move an earlier report into history/ so that nothing is overwritten."""
    old = out_dir / "report.json"
    if not old.exists():
        return
    stamp = json.loads(old.read_text()).get("started", "unknown").replace(":", "")
    dest = out_dir / "history" / stamp
    n = 1
    while dest.exists():  # two runs in the same second: never merge them
        n += 1
        dest = out_dir / "history" / f"{stamp}-{n}"
    dest.mkdir(parents=True)
    for item in list(out_dir.iterdir()):
        if item.name != "history":
            shutil.move(str(item), dest / item.name)


def write_index(report: CourseReport, out_dir: Path, fidelity_html: str = "") -> Path:
    rows = []
    for n in report.notebooks:
        status = "ok" if n.ok else "failed"
        err = f"<pre>{html.escape(n.error)}</pre>" if n.error else ""
        rows.append(
            f"<tr class='{status}'><td><a href='{html.escape(n.html)}'>{html.escape(n.path)}</a></td>"
            f"<td>{status}</td><td>{n.seconds:.1f}</td><td>{n.jobs}</td><td>{n.words}</td><td>{err}</td></tr>"
        )
    history = sorted((out_dir / "history").glob("*/index.html"), reverse=True) if (out_dir / "history").exists() else []
    plan_html = ("<p>For instructors, from this run: <a href='plan.md'>a course day for 30 students</a> (the agenda; "
                 "<code>hpclab course plan --students N --days 2</code> for another room) and "
                 "<a href='instructor-notes.md'>the notes per notebook</a>.</p>"
                 if (out_dir / "plan.md").exists() else "")
    hist = "".join(f"<li><a href='{h.relative_to(out_dir)}'>{h.parent.name}</a></li>" for h in history)
    page = f"""<!doctype html><html><head><meta charset="utf-8"><title>hpclab course report</title>
<style>body{{font-family:sans-serif;max-width:1000px;margin:2em auto;line-height:1.4}}
table{{border-collapse:collapse;width:100%}}td,th{{border-bottom:1px solid #ddd;padding:.4em;text-align:left;vertical-align:top}}
tr.failed td{{background:#fde8e8}}pre{{white-space:pre-wrap;font-size:.8em;margin:0}}</style></head><body>
<h1>hpclab course report</h1>
<p>Run started {html.escape(report.started)} on <b>{html.escape(os.uname().nodename)}</b>;
{len(report.notebooks)} notebook(s), {report.jobs} Slurm job(s), {len(report.failures)} failure(s),
{report.seconds:.0f} s{' (quick parameter set)' if report.quick else ''}.
Every figure in these pages was measured during this run.</p>
<table><tr><th>notebook</th><th>status</th><th>seconds</th><th>jobs</th><th>words to read</th><th>error</th></tr>
{''.join(rows)}</table>
{plan_html}
{fidelity_html}
{'<h2>Earlier reports</h2><ul>' + hist + '</ul>' if hist else ''}
</body></html>"""
    index = out_dir / "index.html"
    index.write_text(page)
    return index


def run_course(notebooks: list[Path] | None = None, out_dir: Path | None = None, each=None) -> CourseReport:
    """Execute the course and write the report; returns the report (failures included, not raised).
    each: called as each(notebook, its NotebookResult) after every notebook (a recording notes
    which runs each notebook made)."""
    out_dir = out_dir or paths.build_dir() / "course"
    notebooks = course_notebooks() if notebooks is None else notebooks
    out_dir.mkdir(parents=True, exist_ok=True)
    _keep_previous(out_dir)
    report = CourseReport(started=datetime.now(timezone.utc).isoformat(timespec="seconds"), quick=quick())
    t0 = time.monotonic()
    # Inherited by the kernels: interactive widgets render statically, and notebooks record their
    # fidelity rows in a fresh folder (_keep_previous moved the old one). Both are undone afterwards:
    # a JupyterLab started later by this process would show no progress bars.
    with commands.inherited_environment({"HPCLAB_HEADLESS": "1", fidelity.LEDGER_ENV: str(out_dir / "fidelity")}):
        _run_each(notebooks, out_dir, report, each)
    report.seconds = time.monotonic() - t0
    (out_dir / "report.json").write_text(json.dumps(asdict(report), indent=1))
    rows = fidelity.collect(out_dir / "fidelity")
    fidelity.write_json(rows, out_dir / "fidelity.json")
    if not notebooks_subset(notebooks):  # the whole course: the day's agenda and the instructor's notes
        from hpclab.course import plan
        try:
            plan.write(folder=out_dir)
        except HpclabError as exc:  # a plan is a by-product: the run's report stands without it
            print(f"[course] no agenda written: {exc.one_line()}", flush=True)
    write_index(report, out_dir, fidelity.html_table(rows))
    return report


def _run_each(notebooks: list[Path], out_dir: Path, report: CourseReport, each) -> None:
    for nb in notebooks:
        print(f"[course] running {nb.relative_to(paths.repo())} ...", flush=True)
        try:
            result = execute_notebook(nb, out_dir)
        except Exception as exc:  # noqa: BLE001 - e.g. an unreadable notebook file
            result = NotebookResult(str(nb.relative_to(paths.repo())), False, 0.0, 0,
                                    f"could not run: {exc}\n{traceback.format_exc(limit=2)}")
        report.notebooks.append(result)
        if each is not None:
            each(nb, result)
        print(f"[course]   {'ok' if result.ok else 'FAILED'} in {result.seconds:.1f} s", flush=True)


def notebooks_subset(notebooks: list[Path]) -> bool:
    """True when only some of the course's notebooks ran (their times would make a partial plan)."""
    return set(notebooks) != set(course_notebooks())


def require_notebooks() -> list[Path]:
    books = course_notebooks()
    if not books:
        raise HpclabError("no notebooks found in notebooks/ or labs/", "check out the full repository")
    return books


def start():
    """The first cell of every notebook: check the site is reachable and point Slurm commands at it.

    For the local site, this makes `!sinfo` and friends in the notebook talk to the embedded
    cluster and fails with a clear message if it is not running. Returns the site profile.
    """

    site = site_mod.load_site()
    if site.name == "local":

        if not cluster.status().running:
            raise HpclabError("the local Slurm cluster is not running",
                              "start it with 'make cluster-up' (or '.venv/bin/hpclab cluster up'), then run this cell again")
        os.environ.update(cluster.slurm_env())
    import matplotlib

    matplotlib.rcParams.update({"figure.dpi": 100, "savefig.dpi": 120})
    _inline_figures()
    mode = "quick parameter set" if quick() else "full parameter set"
    print(f"site: {site.name} ({site.description}); {mode}")
    return site


def _inline_figures() -> None:
    """Show the package's Figure objects as images when a cell returns one (as pyplot figures are)."""
    try:
        from IPython import get_ipython
    except ImportError:
        return
    shell = get_ipython()
    if shell is not None and hasattr(shell, "kernel"):
        shell.run_line_magic("matplotlib", "inline")


def error_outputs(executed_notebook: Path) -> list[str]:
    """Error outputs and stderr text in an executed notebook, as 'cell N: ...' lines (empty if clean)."""
    import nbformat

    nb = nbformat.read(executed_notebook, as_version=4)
    found = []
    for i, cell in enumerate(nb.cells):
        for out in cell.get("outputs", []):
            if out.get("output_type") == "error":
                found.append(f"cell {i}: {out.get('ename')}: {out.get('evalue')}")
            elif out.get("output_type") == "stream" and out.get("name") == "stderr" and out.get("text", "").strip():
                found.append(f"cell {i}: stderr: {out['text'].strip().splitlines()[-1][:200]}")
    return found
