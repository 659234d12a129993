"""A room of simulated students through the real hub: the load benchmark's driver
(`make bench-classroom`, bench/classroom.py).

Each simulated student does what a student's browser does, over HTTP only: logs in on the hub's
login form (PAM, their password), starts their server through the hub's REST API, fetches the lab
through nbgrader's Assignments API of their own server, fills in the answers, runs every code
cell in a real kernel of their server (the measuring cell submits real Slurm jobs as the
student), saves the notebook and submits it. Students arrive spread over `arrive_over_s`. Then
the instructor collects and autogrades every submission, and each grade is compared with the
score recomputed from that student's own runs, outside nbgrader and its sandbox.
"""

from __future__ import annotations

import json
import shutil
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from datetime import datetime
from pathlib import Path

import nbformat
import requests
import websocket
from jupyter_client.manager import KernelManager
from nbclient import NotebookClient

from hpclab.core import commands
from hpclab.core.errors import HpclabError
from hpclab.site.slurm import run_slurm
from hpclab.grading import demo
from hpclab.classroom.hub_client import HubClient

COURSE_ID = "hpclab"


@dataclass
class StudentRun:
    """What happened to one simulated student; seconds from their arrival."""

    user: str
    arrived_s: float = 0.0
    login_s: float | None = None
    spawn_s: float | None = None
    kernel_s: float | None = None  # arrival to the first answer of a kernel in the student's lab
    lab_s: float | None = None
    submitted: bool = False
    error: str = ""


def assignment(client: HubClient, action: str, lab: str) -> list | dict:
    """What the Assignments tab does: fetch, submit or fetch_feedback `lab` (nbgrader's handler
    in the student's own server), then nbgrader's list of the course's assignments."""
    r = client.api("POST", f"assignments/{action}", data={"course_id": COURSE_ID, "assignment_id": lab}, timeout=300)
    if r.status_code >= 400:
        raise HpclabError(f"{client.username}'s Assignments tab could not {action} {lab}: HTTP {r.status_code} {r.text[:200]}")
    return r.json()


def read_notebook(client: HubClient, path: str) -> dict:
    return client.contents(path)["content"]


def save_notebook(client: HubClient, path: str, nb: dict) -> None:
    r = client.api("PUT", f"api/contents/{path}", json={"type": "notebook", "format": "json", "content": nb})
    r.raise_for_status()


def run_cells(client: HubClient, cells: list[str], cwd: str, timeout: float = 1800, answered=None) -> None:
    """Run code cells in one new kernel of the student's server, in order, as Run All does;
    stop at the first error. answered(): called once the kernel has answered its first cell
    (changing into `cwd`), the moment a student could start working."""
    kernel = client.start_kernel()
    try:
        for i, code in enumerate([f"import os; os.chdir({cwd!r})", *cells]):
            done = client.execute(code, kernel_id=kernel, timeout=timeout)
            if done.error or done.kernel_died or done.status != "ok":
                raise HpclabError(f"a cell failed in {client.username}'s kernel: "
                                  f"{done.error or ('the kernel died' if done.kernel_died else done.status)}")
            if i == 0 and answered is not None:
                answered()
    finally:
        client.delete_kernel(kernel)


def _text(source) -> str:
    return "".join(source) if isinstance(source, list) else source


def simulate_student(base_url: str, user: str, password: str, lab: str, source_nb,
                     t0: float, arrive_at: float) -> StudentRun:
    """One student's visit, from arrival to submission; never raises (the error is recorded)."""
    time.sleep(max(0.0, t0 + arrive_at - time.monotonic()))
    run = StudentRun(user, arrived_s=round(time.monotonic() - t0, 2))
    start = time.monotonic()
    try:
        client = _log_in(base_url, run, password, start)
        t_lab = time.monotonic()
        folder = _fetched_folder(assignment(client, "fetch", lab), lab)
        path = f"{folder}/{lab}.ipynb"
        nb = demo.answered(nbformat.from_dict(read_notebook(client, path)), source_nb)
        save_notebook(client, path, nb)

        def answered():
            run.kernel_s = round(time.monotonic() - start, 2)

        run_cells(client, [_text(c["source"]) for c in nb["cells"] if c["cell_type"] == "code"], cwd=folder,
                  answered=answered)
        run.lab_s = round(time.monotonic() - t_lab, 2)
        assignment(client, "submit", lab)
        run.submitted = True
    except VISIT_ERRORS as e:
        run.error = _why(e)
    return run


def login_to_kernel(base_url: str, user: str, password: str) -> StudentRun:
    """A student who logs in and opens a notebook: login, their server (started unless it runs),
    a new kernel that answers one cell. Seconds from the login page; never raises."""
    run = StudentRun(user)
    start = time.monotonic()
    try:
        client = _log_in(base_url, run, password, start)
        done = client.execute("1 + 1", timeout=120)
        if done.error or done.kernel_died:
            raise HpclabError(f"{user}'s first kernel did not answer: {done.error or 'it died'}")
        run.kernel_s = round(time.monotonic() - start, 2)
    except VISIT_ERRORS as e:
        run.error = _why(e)
    return run


# What ends a simulated student's visit: recorded in their run, never raised.
VISIT_ERRORS = (HpclabError, requests.RequestException, websocket.WebSocketException, OSError, KeyError, ValueError)


def _why(e: Exception) -> str:
    return (e.what if isinstance(e, HpclabError) else f"{type(e).__name__}: {e}")[:400]


def _log_in(base_url: str, run: StudentRun, password: str, start: float) -> HubClient:
    """Log run.user in and start their server (or find it running), timing both from `start`."""
    client = HubClient(base_url, run.user, password)
    client.login()
    run.login_s = round(time.monotonic() - start, 2)
    run.spawn_s = round(client.start_server(), 2)
    return client


def all_log_in_at_once(base_url: str, passwords: dict[str, str]) -> list[StudentRun]:
    """Every student of `passwords` logs in at the same moment (login_to_kernel), in their order."""
    users = sorted(passwords)
    with ThreadPoolExecutor(max_workers=len(users)) as pool:
        return list(pool.map(lambda u: login_to_kernel(base_url, u, passwords[u]), users))


def _fetched_folder(listing, lab: str) -> str:
    """The folder (relative to the server's root) nbgrader fetched `lab` into."""
    entries = listing.get("value", listing) if isinstance(listing, dict) else listing
    for entry in entries:
        if entry.get("assignment_id") == lab and entry.get("status") in ("fetched", "submitted") and entry.get("path"):
            return Path(entry["path"]).name if not entry["path"].startswith("/") else _relative(entry["path"])
    raise HpclabError(f"nbgrader did not list {lab} as fetched: {str(listing)[:300]}")


def _relative(path: str) -> str:
    # nbgrader lists absolute paths; the contents API wants them relative to the server's root,
    # which is the student's course copy (~/hpclab).
    parts = Path(path).parts
    return str(Path(*parts[parts.index("hpclab") + 1:])) if "hpclab" in parts else Path(path).name


class MemoryWatch:
    """Peak used memory (MemTotal - MemAvailable) and swap, sampled twice a second, and the
    kernel's OOM-kill count over the watch."""

    def __init__(self):
        self.peak_used, self.peak_swap, self._stop = 0, 0, threading.Event()
        self.base_swap = self._meminfo()["SwapTotal"] - self._meminfo()["SwapFree"]
        self.base_oom = self._oom_kills()
        self._thread = threading.Thread(target=self._loop, daemon=True)

    @staticmethod
    def _meminfo() -> dict[str, int]:
        out = {}
        for line in Path("/proc/meminfo").read_text().splitlines():
            key, value = line.split(":", 1)
            out[key] = int(value.split()[0]) * 1024
        return out

    @staticmethod
    def _oom_kills() -> int:
        for line in Path("/proc/vmstat").read_text().splitlines():
            if line.startswith("oom_kill "):
                return int(line.split()[1])
        return 0

    def _loop(self) -> None:
        while not self._stop.wait(0.5):
            m = self._meminfo()
            self.peak_used = max(self.peak_used, m["MemTotal"] - m["MemAvailable"])
            self.peak_swap = max(self.peak_swap, m["SwapTotal"] - m["SwapFree"] - self.base_swap)

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join()
        self.oom_kills = self._oom_kills() - self.base_oom


def simulate_room(base_url: str, passwords: dict[str, str], lab: str, source_nb,
                  arrive_over_s: float, on_done=None) -> list[StudentRun]:
    """Every student of `passwords` (user -> password), arriving evenly over `arrive_over_s`.
    on_done(run): called as each student finishes (for a progress line), in the order they do.
    Returns the runs in the students' order."""
    from concurrent.futures import as_completed

    users = sorted(passwords)
    t0 = time.monotonic()
    step = arrive_over_s / max(1, len(users))
    with ThreadPoolExecutor(max_workers=len(users)) as pool:
        futures = {pool.submit(simulate_student, base_url, u, passwords[u], lab, source_nb, t0, i * step): u
                   for i, u in enumerate(users)}
        done = {}
        for f in as_completed(futures):
            done[futures[f]] = f.result()
            if on_done is not None:
                on_done(done[futures[f]])
        return [done[u] for u in users]


def percentile(values: list[float], q: float) -> float | None:
    """The q-th percentile (0-100) by the nearest-rank method; None for no values."""
    values = sorted(v for v in values if v is not None)
    if not values:
        return None
    rank = max(1, int(-(-q * len(values) // 100)))
    return values[rank - 1]


@dataclass
class LoadReport:
    students: int
    arrive_over_s: float
    failed_spawns: int
    spawn_p50_s: float | None
    spawn_p95_s: float | None
    labs_completed: int
    job_wait_p95_s: float | None
    autograded: int
    autograde_s_per_submission: float | None
    grades_match: bool
    peak_memory_gb: float
    swap_used_gb: float
    oom_kills: int
    runs: list[dict] = field(default_factory=list)
    grades: dict = field(default_factory=dict)

    def to_json(self) -> str:
        return json.dumps(asdict(self), indent=1) + "\n"


def recompute_score(source_nb_path: Path, submission: Path, timeout: int = 300) -> tuple[float, float]:
    """(score, maximum) of a submission recomputed from its own runs without nbgrader: the lab's
    source notebook (solutions and hidden tests, our code) runs on a copy of the submitted folder
    (its packed runs); each graded test cell that ends without an error earns its points."""
    nb = nbformat.read(source_nb_path, as_version=4)
    with tempfile.TemporaryDirectory(prefix="hpclab-recompute-") as tmp:
        work = Path(tmp) / submission.name
        shutil.copytree(submission, work, ignore=shutil.ignore_patterns("*.ipynb"))
        # Read the packed runs only, as the grader does: the measuring cell must not submit jobs.
        # The kernel talks over Unix sockets in the scratch folder, as the students' kernels do,
        # not over loopback TCP ports (which the kernel warns about, unencrypted, on every start).
        km = KernelManager(kernel_name="python3", transport="ipc", ip=str(Path(tmp) / "kernel"))
        client = NotebookClient(nb, km=km, timeout=timeout, allow_errors=True,
                                resources={"metadata": {"path": str(work)}})
        with commands.inherited_environment({"NBGRADER_EXECUTION": "autograde"}):
            client.execute()
    score = maximum = 0.0
    for cell in nb.cells:
        meta = cell.get("metadata", {}).get("nbgrader", {})
        if cell.cell_type == "code" and meta.get("grade") and not meta.get("solution"):
            points = float(meta.get("points", 0))
            maximum += points
            if not any(o.get("output_type") == "error" for o in cell.get("outputs", [])):
                score += points
    return score, maximum


def job_waits(since: str, account: str) -> list[float]:
    """Seconds each job of `account` waited in the queue (start - submit), for jobs submitted
    since `since` (sacct's time format), from Slurm's accounting."""
    out = run_slurm(["sacct", "-a", "-X", "-n", "-P", f"--accounts={account}", "-S", since, "-o", "submit,start,state"],
                    "read the room's jobs from Slurm's accounting")
    waits = []
    for line in out.splitlines():
        submit, start, _ = (line.split("|") + ["", "", ""])[:3]
        try:
            waits.append((datetime.fromisoformat(start) - datetime.fromisoformat(submit)).total_seconds())
        except ValueError:
            continue  # never started (Unknown / None)
    return waits
