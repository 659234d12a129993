"""JupyterLab for the course: `make lab` (serve_lab) and a throw-away server for the tests (LabServer).

Both start `jupyter lab` from the course's Python environment with jupyter/jupyter_server_config.py
(127.0.0.1 only, nbgrader's extensions on, noise hidden), the repository as the root folder, a
random token, and the local cluster's Slurm settings in the environment so notebook cells and
terminals can submit jobs. The server runs in an nbgrader course folder (build/lab-course/,
made from labs/ by hpclab.grading.pipeline the first time), because nbgrader reads nbgrader_config.py
from the folder the server runs in; the formgrader then lists the labs.
"""

from __future__ import annotations

import json
import os
import secrets
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path

from hpclab.core import paths
from hpclab.site import slurm
from hpclab.core.errors import HpclabError
from hpclab.grading import pipeline as grading

STARTUP_TIMEOUT = 90.0  # seconds: the first start builds nothing, but imports nbgrader (slow)


def config_file() -> Path:
    """jupyter/jupyter_server_config.py of the repository."""
    return paths.repo() / "jupyter" / "jupyter_server_config.py"


def jupyter_exe() -> Path:
    """The `jupyter` next to this Python (the course's .venv)."""
    exe = Path(sys.executable).parent / "jupyter"
    if not exe.exists():
        raise HpclabError(f"jupyter is not installed next to {sys.executable}",
                          "run `make setup` (it installs JupyterLab into .venv)")
    return exe


def port_free(port: int, host: str = "127.0.0.1") -> bool:
    """True if nothing listens on host:port (TCP)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((host, port))
        except OSError:
            return False
    return True


def free_port() -> int:
    """A TCP port on 127.0.0.1 that was free a moment ago (the kernel picks it)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def course_labs() -> list[str]:
    """Lab names: folders of labs/ holding a notebook."""
    root = paths.repo() / "labs"
    return sorted(d.name for d in root.glob("*") if d.is_dir() and any(d.glob("*.ipynb")))


def grader_dir(folder: Path | None = None) -> Path | None:
    """The nbgrader course folder the formgrader shows (default build/lab-course/), made with
    hpclab.grading.pipeline.init_course from labs/ the first time; an existing one is used as it is
    (grades and submissions in it are kept). None if there are no labs."""
    folder = Path(folder or paths.build_dir() / "lab-course")
    if (folder / "nbgrader_config.py").is_file():
        grading.ensure_exchange(folder)  # also for a course folder of an earlier version
        return folder.resolve()
    labs = course_labs()
    if not labs:
        return None
    return Path(grading.init_course(folder, labs=tuple(labs))).resolve()


def lab_command(port: int, root: Path, runtime_dir: Path | None = None) -> list[str]:
    """The `jupyter lab` command line (without the token, which travels in JUPYTER_TOKEN so it
    does not show in `ps`)."""
    cmd = [str(jupyter_exe()), "lab", f"--config={config_file()}", f"--port={port}",
           "--ip=127.0.0.1", "--no-browser", f"--ServerApp.root_dir={root}"]
    if os.geteuid() == 0:
        cmd.append("--allow-root")
    if runtime_dir is not None:
        cmd.append(f"--ServerApp.runtime_dir={runtime_dir}")
    return cmd


def lab_env(token: str, runtime_dir: Path | None = None) -> dict[str, str]:
    """Environment of the server and its kernels: Slurm settings of the site, the token."""
    env = slurm.slurm_env()
    # The venv's bin first: nbgrader runs `alembic` by name, and terminals should find the
    # course's python, jupyter and hpclab without activating anything.
    venv_bin = str(Path(sys.executable).parent)
    env["PATH"] = os.pathsep.join([venv_bin] + [p for p in env.get("PATH", "").split(os.pathsep)
                                                if p and p != venv_bin])
    env["JUPYTER_TOKEN"] = token
    if runtime_dir is not None:
        env["JUPYTER_RUNTIME_DIR"] = str(runtime_dir)
    env.setdefault("PYTHONUNBUFFERED", "1")
    return env


def _wait_ready(proc: subprocess.Popen, url: str, token: str, log: Path | None,
                timeout: float = STARTUP_TIMEOUT) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            tail = log.read_text(errors="replace").splitlines()[-15:] if log and log.exists() else []
            raise HpclabError(f"JupyterLab exited with code {proc.returncode} while starting"
                              + ("; its log ends with:\n  " + "\n  ".join(tail) if tail else ""),
                              "read the messages above; is the port in use or .venv incomplete?")
        try:
            req = urllib.request.Request(f"{url}/api/status", headers={"Authorization": f"token {token}"})
            with urllib.request.urlopen(req, timeout=2) as resp:
                if resp.status == 200:
                    return
        except (urllib.error.URLError, ConnectionError, TimeoutError, OSError):
            pass
        time.sleep(0.25)
    raise HpclabError(f"JupyterLab did not answer at {url} within {timeout:.0f} s",
                      "see its log; a slow first start can help with a second try")


def _stop(proc: subprocess.Popen, grace: float = 10.0) -> int:
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)  # Jupyter shuts kernels down cleanly on SIGTERM
        try:
            proc.wait(grace)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    return proc.returncode


def serve_lab(port: int = 8888) -> int:
    """Serve the course in JupyterLab on http://127.0.0.1:<port> until Ctrl-C.

    port: TCP port on 127.0.0.1 (must be free). Prints the URL with its token (open it in a
    browser; over ssh: `ssh -L <port>:127.0.0.1:<port> host`). Returns the server's exit code
    (0 after Ctrl-C). Raises HpclabError if the port is taken or the server does not start."""
    if not 0 < port < 65536:
        raise HpclabError(f"port {port} is not a TCP port", "choose one between 1024 and 65535")
    if not port_free(port):
        raise HpclabError(f"port {port} on 127.0.0.1 is already in use",
                          f"stop what listens there or choose another: hpclab course lab --port {port + 1}")
    token = secrets.token_hex(24)
    gdir = grader_dir()
    cwd = gdir or paths.repo()
    proc = subprocess.Popen(lab_command(port, paths.repo()), env=lab_env(token), cwd=cwd)
    url = f"http://127.0.0.1:{port}"

    def _terminated(signum, frame):  # `kill <pid>` of hpclab must not leave the server behind
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGTERM, _terminated)
    try:
        _wait_ready(proc, url, token, None)
        print(f"\nhpclab: JupyterLab serves the course from {paths.repo()}\n"
              f"  open   {url}/lab/tree/notebooks?token={token}\n"
              f"  nbgrader course folder: {gdir or 'none (formgrader has no labs)'}\n"
              "  stop with Ctrl-C\n", flush=True)
        return proc.wait()
    except KeyboardInterrupt:
        _stop(proc)
        return 0
    finally:
        signal.signal(signal.SIGTERM, previous)
        if proc.poll() is None:
            _stop(proc)


class LabServer:
    """A JupyterLab server for tests: free port, known token, its own runtime folder.

        with LabServer() as lab:
            page.goto(lab.url("lab/tree/notebooks/90-interactive-mpi.ipynb"))

    root: the folder served (default: the repository); log: where the server's output goes
    (default: a file in the runtime folder); course: the nbgrader course folder (made from labs/
    if new; it must lie inside root for the formgrader); env: extra environment for the server
    and its kernels; settings: JupyterLab user settings for this server only, as
    {"@jupyterlab/<plugin package>/<plugin>": {setting: value}}. Raises HpclabError if it does
    not start."""

    def __init__(self, root: Path | None = None, log: Path | None = None, course: Path | None = None,
                 env: dict[str, str] | None = None, settings: dict[str, dict] | None = None):
        self.root = Path(root or paths.repo())
        self.extra_env = dict(env or {})
        self.settings = dict(settings or {})
        self.course = Path(course) if course else None
        self.cwd: Path | None = None
        self.port = free_port()
        self.token = secrets.token_hex(16)
        self._tmp = tempfile.TemporaryDirectory(prefix="hpclab-lab-")
        self.runtime_dir = Path(self._tmp.name) / "runtime"
        self.log = Path(log) if log else Path(self._tmp.name) / "server.log"
        self.proc: subprocess.Popen | None = None

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def url(self, path: str = "lab") -> str:
        """Full URL of `path` (e.g. "lab/tree/notebooks/x.ipynb") with the token."""
        sep = "&" if "?" in path else "?"
        return f"{self.base}/{path.lstrip('/')}{sep}token={self.token}"

    def api(self, path: str) -> dict:
        """GET /api/<path> as JSON (the server's REST API)."""
        req = urllib.request.Request(f"{self.base}/api/{path.lstrip('/')}",
                                     headers={"Authorization": f"token {self.token}"})
        with urllib.request.urlopen(req, timeout=10) as resp:
            return json.loads(resp.read())

    def start(self) -> "LabServer":
        self.cwd = grader_dir(self.course) or self.root
        self.log.parent.mkdir(parents=True, exist_ok=True)
        env = lab_env(self.token, self.runtime_dir)
        env.update(self.extra_env)
        # Own user settings folder: the tests' settings never touch the user's own.
        settings_dir = Path(self._tmp.name) / "user-settings"
        for plugin, values in self.settings.items():
            f = settings_dir / f"{plugin}.jupyterlab-settings"
            f.parent.mkdir(parents=True, exist_ok=True)
            f.write_text(json.dumps(values))
        env["JUPYTERLAB_SETTINGS_DIR"] = str(settings_dir)
        env["JUPYTERLAB_WORKSPACES_DIR"] = str(Path(self._tmp.name) / "workspaces")
        with open(self.log, "ab") as out:
            self.proc = subprocess.Popen(
                lab_command(self.port, self.root, self.runtime_dir),
                env=env, cwd=self.cwd,
                stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
        try:
            _wait_ready(self.proc, self.base, self.token, self.log)
        except BaseException:
            self.stop()
            raise
        return self

    def stop(self) -> None:
        """Stop the server (kernels included) and remove its runtime folder."""
        if self.proc is not None:
            _stop(self.proc)
            self.proc = None
        self._tmp.cleanup()

    def __enter__(self) -> "LabServer":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()
