"""Run folders, the run index, and loading results into one table.

Every job gets `runs/<experiment>/<run-id>/`, and `RunFolder` is the only code that knows the
file names inside it (spec.json, job.sh, stdout, stderr, result.json, status.json, provenance/,
trace/). A folder is assembled in a hidden temporary folder and renamed into place, so it appears
complete or not at all; it is never overwritten (an existing run id is an error) and failed runs
stay, marked in status.json. Files are written atomically (temporary file + rename).

Jobs that are not experiment runs get a folder of their kind (`RunFolder.create_kind`): a
profiler run `runs/_profiles/<experiment>/<id>/`, an interactive engines' session
`runs/_interactive/<id>/`, a comparison of kernel builds `runs/_variants/<experiment>/<id>/`.
The same file names hold in them (stdout, stderr, result.json, command.txt); the '_' keeps them
out of the index. They too are new folders, never reused.

`runs/index.jsonl` lists every run (one JSON object a line). A new run or a changed status
appends one line under a lock (the last line of a run wins), so recording a status costs the same
with ten runs or ten thousand; the file is rewritten whole, atomically, only to compact it (once
it holds more than twice as many lines as runs) or to rebuild it. A process killed at any moment
leaves at worst one torn last line, which is skipped and cut off at the next append, and the index
can always be rebuilt from the folders (`rebuild_index()`); `index()` does that by itself when the
folders and the index disagree. `load("stream")` turns the results of many runs into one tidy DataFrame.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import re
import secrets
import shutil
import time
from pathlib import Path
from typing import Any, Iterator

from hpclab.core import paths
from hpclab.core.io import write_atomic
from hpclab.core.errors import HpclabError
from hpclab.runs import recorded   # room mode: RunFolder.open finds the instructor's runs too

# Kinds of folders besides experiment runs: {kind: folder under runs/}.
KINDS = {"profile": "_profiles", "session": "_interactive", "variants": "_variants"}
_NAME = r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}"
STATES = ("pending", "running", "completed", "failed", "timeout", "cancelled")
INDEX_FIELDS = ("run_id", "experiment", "kernel", "state", "job_id", "created", "label")


def new_run_id() -> str:
    """Sortable, unique run id: UTC timestamp plus a short random suffix, e.g. 20260122-101502-3fa9c1."""
    return time.strftime("%Y%m%d-%H%M%S", time.gmtime()) + "-" + secrets.token_hex(3)


class RunFolder:
    """One run's folder and every file name in it."""

    def __init__(self, path: str | Path):
        self.path = Path(path).resolve()

    # file names -----------------------------------------------------------------------------
    spec_json = property(lambda self: self.path / "spec.json")
    job_sh = property(lambda self: self.path / "job.sh")
    stdout = property(lambda self: self.path / "stdout")
    stderr = property(lambda self: self.path / "stderr")
    result_json = property(lambda self: self.path / "result.json")
    status_json = property(lambda self: self.path / "status.json")
    provenance = property(lambda self: self.path / "provenance")
    trace_dir = property(lambda self: self.path / "trace")
    noise_json = property(lambda self: self.path / "provenance" / "noise.json")  # what else ran beside it
    command_txt = property(lambda self: self.path / "command.txt")  # a job step's command line
    ipython_profile = property(lambda self: self.path / "profile")  # a session's ipyparallel profile

    def engines_script(self, n: int) -> Path:
        """A session's n-th engines' job script (n = 1, 2, ...: one per start or restart)."""
        return self.path / f"engines-{n}.sh"

    def engines_log(self, n: int) -> Path:
        """Slurm's output file of a session's n-th engines' job."""
        return self.path / f"engines-{n}.log"
    run_id = property(lambda self: self.path.name)
    experiment = property(lambda self: self.path.parent.name)

    def __repr__(self) -> str:
        return f"RunFolder({str(self.path)!r})"

    # creation -------------------------------------------------------------------------------
    @classmethod
    def create(cls, experiment: str, spec: dict, job_script=None, run_id: str | None = None,
               root: Path | None = None, extra: dict[str, str] | None = None) -> "RunFolder":
        """Make runs/<experiment>/<run-id>/ with spec.json, status.json (pending), job.sh and any
        `extra` files ({relative path: text}). job_script is a string or a function
        (RunFolder -> str) for scripts that must name their own folder. The folder appears in
        one rename; an existing folder raises HpclabError. The index gains the run."""
        root = Path(root or paths.runs_dir())
        run_id = run_id or new_run_id()
        final = cls(root / experiment / run_id)
        if final.path.exists():
            raise HpclabError(f"run folder {final.path} already exists; run folders are never overwritten",
                              "pick another run id (leave it out to get a fresh one)")
        final.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = final.path.parent / f".{run_id}.{secrets.token_hex(3)}.tmp"
        tmp.mkdir()
        try:
            staged = cls(tmp)
            (tmp / "provenance").mkdir()
            write_atomic(staged.spec_json, json.dumps(spec, indent=2, sort_keys=True) + "\n")
            text = job_script(final) if callable(job_script) else job_script
            if text is not None:
                write_atomic(staged.job_sh, text)
                staged.job_sh.chmod(0o755)
            for rel, content in (extra or {}).items():
                target = tmp / rel
                target.parent.mkdir(parents=True, exist_ok=True)
                write_atomic(target, content)
            status = {"state": "pending", "run_id": run_id, "experiment": experiment,
                      "kernel": spec.get("kernel"), "label": spec.get("label"), "job_id": None,
                      "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "history": []}
            write_atomic(staged.status_json, json.dumps(status, indent=2) + "\n")
            if final.path.exists():  # lost a race for the same id
                raise HpclabError(f"run folder {final.path} already exists", "retry without run_id")
            os.rename(tmp, final.path)
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise
        update_index(final, root=root)
        return final

    @classmethod
    def create_kind(cls, kind: str, experiment: str | None = None, root: Path | None = None) -> "RunFolder":
        """A new, empty folder for a job that is not an experiment run: runs/<KINDS[kind]>/
        <experiment>/<run-id>/ (runs/<KINDS[kind]>/<run-id>/ when experiment is None). The
        folder is made with one mkdir, so it is never reused. HpclabError for an unknown kind or
        an experiment name that is not a plain folder name."""
        if kind not in KINDS:
            raise HpclabError(f"unknown kind of run folder {kind!r}", f"use one of {', '.join(KINDS)}")
        if experiment is not None and not re.fullmatch(_NAME, str(experiment)):
            raise HpclabError(f"experiment name {experiment!r} is not usable as a folder name",
                              "use letters, digits, '.', '_' and '-', e.g. 06-hotspots")
        base = Path(root or paths.runs_dir()) / KINDS[kind]
        base = base / experiment if experiment is not None else base
        base.mkdir(parents=True, exist_ok=True)
        for _ in range(5):
            path = base / new_run_id()
            try:
                path.mkdir()  # fails if it exists: a folder is never reused
                return cls(path)
            except FileExistsError:
                continue
        raise HpclabError(f"could not create a new {kind} folder under {base}", "try again")

    @classmethod
    def open(cls, ref: str | Path, root: Path | None = None, marker: str = "status.json") -> "RunFolder":
        """A run folder from a path, '<experiment>/<run-id>', or a bare run id (searched under
        root; in room mode, without root, in the recording's runs too). marker: the file or
        folder that makes a folder count ('trace' for a traced run whatever wrote it).
        HpclabError when nothing or more than one folder matches."""
        room = recorded.active() if root is None else None
        root = Path(root or paths.runs_dir())
        roots = [root] + ([room.runs_root] if room is not None else [])
        p = Path(ref)
        for cand in (p, *(r / p for r in roots)):
            if (cand / marker).exists():
                return cls(cand)
        matches = [d for r in roots for d in r.glob(f"*/{ref}*") if (d / marker).exists()]
        if len(matches) == 1:
            return cls(matches[0])
        if len(matches) > 1:
            raise HpclabError(f"run {ref!r} matches {len(matches)} runs", "give more of the run id")
        raise HpclabError(f"no run folder {ref!r} under {root}",
                          "list runs with `hpclab runs`" if marker == "status.json"
                          else f"give the path of a run folder that has {marker} in it")

    # contents -------------------------------------------------------------------------------
    def spec(self) -> dict:
        return json.loads(self.spec_json.read_text())

    def status(self) -> dict:
        return json.loads(self.status_json.read_text())

    def set_status(self, state: str, **fields: Any) -> dict:
        """Record a new state (one of STATES) plus fields such as job_id, exit_code, reason;
        keeps a history of (time, state, reason) with one entry per change of state (and per
        Slurm requeue). Updates the index. Returns the new status."""
        if state not in STATES:
            raise ValueError(f"unknown state {state!r}")
        st = self.status()
        if st.get("state") != state or fields.get("requeued") and fields.get("restarts") != st.get("restarts"):
            entry = {"time": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "state": state}
            if fields.get("reason"):  # why it changed (a requeue, the end), as Slurm or hpclab said
                entry["reason"] = fields["reason"]
            st.setdefault("history", []).append(entry)
        st.update(fields, state=state)
        write_atomic(self.status_json, json.dumps(st, indent=2) + "\n")
        update_index(self, root=self.path.parent.parent)
        return st

    def write(self, rel: str, text: str) -> Path:
        """Add a file (e.g. 'provenance/sacct.txt') atomically. Existing files are kept: a run's
        record is never rewritten, except status.json through set_status."""
        target = self.path / rel
        if target.exists():
            raise HpclabError(f"{target} already exists; run files are never overwritten",
                              "write a new file name")
        target.parent.mkdir(parents=True, exist_ok=True)
        write_atomic(target, text)
        return target

    def result(self) -> dict:
        """The kernel's JSON report (result.json), see docs/kernel-contract.md."""
        if not self.result_json.is_file():
            st = self.status()
            raise HpclabError(f"run {self.run_id} has no result.json (state: {st.get('state')})",
                              f"look at {self.stderr} and {self.stdout}")
        return json.loads(self.result_json.read_text())

    def tail(self, which: str = "stderr", lines: int = 15) -> str:
        p = self.path / which
        if not p.is_file():
            return ""
        return "\n".join(p.read_text(errors="replace").splitlines()[-lines:])


# --- the index -----------------------------------------------------------------------------------


def _index_path(root: Path) -> Path:
    return root / "index.jsonl"


@contextlib.contextmanager
def _locked(root: Path) -> Iterator[None]:
    root.mkdir(parents=True, exist_ok=True)
    with open(root / ".index.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def _entry(folder: RunFolder) -> dict | None:
    try:
        st = folder.status()
    except (OSError, ValueError):
        return None
    e = {k: st.get(k) for k in INDEX_FIELDS}
    e["run_id"], e["experiment"] = folder.run_id, folder.experiment
    return e


def _read(root: Path) -> list[dict]:
    """The index's entries, one per run (a run's last line wins), sorted by run id."""
    return sorted(_read_lines(root)[0].values(), key=lambda e: (str(e.get("run_id")), str(e.get("experiment"))))


def _read_lines(root: Path) -> tuple[dict, int]:
    """({(experiment, run_id): its last entry}, lines in the file)."""
    p = _index_path(root)
    if not p.is_file():
        return {}, 0
    latest: dict = {}
    lines = p.read_text().splitlines()
    for line in lines:
        with contextlib.suppress(ValueError):
            e = json.loads(line)
            latest[(e.get("experiment"), e.get("run_id"))] = e
    return latest, len(lines)


def _write(root: Path, entries: list[dict]) -> None:
    entries = sorted(entries, key=lambda e: (e["run_id"], e["experiment"]))
    text = "".join(json.dumps(e, sort_keys=True) + "\n" for e in entries)
    write_atomic(_index_path(root), text)
    write_atomic(root / ".index.size", f"{len(text.encode())}\n")


COMPACT_FACTOR = 2  # rewrite the index once it holds this many lines per run
COMPACT_MIN_BYTES = 1 << 16  # and not before it is this large: a small index costs nothing to read


def update_index(folder: RunFolder, root: Path | None = None) -> None:
    """Add or refresh one run's entry in runs/index.jsonl: one line appended under the lock (a
    torn last line left by a killed writer is cut first), and the file compacted, atomically,
    once it holds COMPACT_FACTOR times more lines than runs."""
    root = Path(root or paths.runs_dir())
    entry = _entry(folder)
    if entry is None:
        return
    line = (json.dumps(entry, sort_keys=True) + "\n").encode()
    with _locked(root):
        path = _index_path(root)
        with open(path, "ab+") as f:
            f.seek(0, os.SEEK_END)
            size = f.tell()
            if size:
                f.seek(size - 1)
                if f.read(1) != b"\n":  # a writer killed mid-line: drop the torn line
                    f.seek(0)
                    body = f.read()
                    f.truncate(body.rfind(b"\n") + 1)
            f.seek(0, os.SEEK_END)
            f.write(line)
            size = f.tell()
        if size > COMPACT_FACTOR * max(_compacted_size(root), COMPACT_MIN_BYTES):  # no read on every append
            latest, lines = _read_lines(root)
            if lines > COMPACT_FACTOR * len(latest):
                _write(root, list(latest.values()))


def _compacted_size(root: Path) -> int:
    """The index's size when it was last written whole (0 if never)."""
    with contextlib.suppress(OSError, ValueError):
        return int((root / ".index.size").read_text())
    return 0


def run_folders(root: Path | None = None) -> list[RunFolder]:
    """Every complete run folder under root (hidden and '_' folders skipped), oldest first."""
    root = Path(root or paths.runs_dir())
    found = []
    if root.is_dir():
        for exp in root.iterdir():
            if exp.is_dir() and not exp.name.startswith((".", "_")):
                for d in exp.iterdir():
                    if d.is_dir() and not d.name.startswith(".") and (d / "status.json").is_file():
                        found.append(RunFolder(d))
    return sorted(found, key=_creation_order)


def _creation_order(folder: RunFolder) -> tuple:
    """Oldest first: a run id's time has whole seconds, so runs of one second are put in the order
    Slurm numbered their jobs (the id's random suffix would order them by chance)."""
    job = str(folder.status().get("job_id") or "")
    return (folder.run_id[:15], int(job) if job.isdigit() else float("inf"), folder.run_id, folder.experiment)


def _remove_abandoned(root: Path, age: float = 3600.0) -> None:
    # Hidden temporaries (".<id>.tmp" folders, ".<file>.tmp" files) left by a killed writer; only
    # old ones, so a writer that is still busy is not disturbed.
    now = time.time()
    for p in [*root.glob(".*.tmp"), *root.glob("*/.*.tmp")]:
        with contextlib.suppress(OSError):
            if now - p.stat().st_mtime > age:
                shutil.rmtree(p) if p.is_dir() else p.unlink()


def rebuild_index(root: Path | None = None) -> list[dict]:
    """Rewrite runs/index.jsonl from the folders alone (and remove temporaries abandoned by a
    killed writer more than an hour ago); return the entries."""
    root = Path(root or paths.runs_dir())
    with _locked(root):
        _remove_abandoned(root)
        entries = [e for e in (_entry(f) for f in run_folders(root)) if e is not None]
        _write(root, entries)
    return entries


def index(root: Path | None = None) -> list[dict]:
    """The run index (one dict per run, fields INDEX_FIELDS), rebuilt first if it does not list
    exactly the run folders on disk (e.g. after a crash between folder and index update)."""
    root = Path(root or paths.runs_dir())
    entries = _read(root)
    on_disk = {(f.experiment, f.run_id) for f in run_folders(root)}
    if {(e.get("experiment"), e.get("run_id")) for e in entries} != on_disk:
        entries = rebuild_index(root)
    return entries


# --- results as a table ------------------------------------------------------------------------


def run_table(folder: RunFolder):
    """One run's tidy rows (hpclab.runs.parse.parse_run) plus run_id, experiment, job_id, state,
    repetition, disturbed (taken beside other work: status.json noise), replaced_by (the run that
    repeated a disturbed one, else None) and the spec's fields as dotted columns (omp.num_threads,
    binding.cpu_bind, args.size, ...)."""
    # pandas (and the parsers, which use it) only here: writing and listing run folders, as
    # `hpclab run` and the experiment driver do, does not need it
    import pandas as pd

    from hpclab.runs.parse import parse_run
    from hpclab.spec.model import make_spec

    spec = folder.spec()
    st = folder.status()
    df = parse_run(folder.path, spec["kernel"])
    df = df.copy() if isinstance(df, pd.DataFrame) else pd.DataFrame(df)
    run_cols = {"run_id": folder.run_id, "experiment": folder.experiment, "job_id": st.get("job_id"),
                "state": st.get("state"), "repetition": st.get("repetition"),
                "disturbed": bool(st.get("noise")), "replaced_by": st.get("replaced_by")}
    try:
        spec_cols = make_spec(spec).flat()
    except HpclabError:  # a spec written by an older version: show its raw fields
        spec_cols = {k: v for k, v in spec.items() if not isinstance(v, (dict, list))}
    for k, v in run_cols.items():
        df[k] = v
    for k, v in spec_cols.items():
        df[k if k not in df.columns else f"spec.{k}"] = v
    return df


def load(name: str | None = None, root: Path | None = None, states=("completed",), **where):
    """One tidy DataFrame across runs.

    name: an experiment name (runs/<name>/), or a kernel name (all experiments of it), or None
    for all runs. states: which run states to include (default completed only). where: extra
    filters on spec fields with '.' written as '__', e.g. omp__num_threads=2.
    Returns a pandas DataFrame (one row per parse_run row, plus run and spec columns); raises
    HpclabError if nothing matches. Runs of kernel: program have no table and are left out
    (their results are their traces and output)."""
    import pandas as pd

    from hpclab.kernels import registry  # only here, like pandas: the kernel modules use it

    root = Path(root or paths.runs_dir())
    entries = index(root)
    if name is not None:
        by_exp = [e for e in entries if e.get("experiment") == name]
        entries = by_exp or [e for e in entries if e.get("kernel") == name]
    entries = [e for e in entries if e.get("state") in states]
    frames = []
    for e in entries:
        folder = RunFolder(root / e["experiment"] / e["run_id"])
        if not folder.result_json.is_file():
            continue
        if e.get("kernel") in registry.names() and not registry.get(e["kernel"]).contract:
            continue  # kernel: program runs have no table: their results are traces and output
        table = run_table(folder)
        table.attrs = {}  # per-run details (config, placement tables) do not concatenate
        frames.append(table)
    if not frames:
        known = sorted({e.get("experiment") for e in index(root)})
        raise HpclabError(f"no {'/'.join(states)} runs with results for {name or 'any experiment'} under {root}",
                          f"experiments here: {', '.join(known) or 'none'}; run one with hpclab.jobs.experiment.run(spec)")
    df = pd.concat(frames, ignore_index=True)
    for key, value in where.items():
        col = key.replace("__", ".")
        if col not in df.columns:
            raise HpclabError(f"no column {col!r} to filter on", f"columns: {', '.join(df.columns)}")
        df = df[df[col] == value]
    return df.reset_index(drop=True)
