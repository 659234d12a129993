"""Start, find and stop the cluster's daemons by their pid files.

A daemon counts as running only if its pid file names a live process whose command line is the
expected program: a pid file left by a crash (or a pid reused by another program) is stale and is
removed, never signalled. `stop` signals exactly the processes the project started.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

from hpclab.core.errors import HpclabError


@dataclass
class Daemon:
    """One daemon: its display name, the program it runs, how to start it and where it logs."""

    name: str
    program: str  # basename of the executable, checked against /proc/PID/cmdline
    argv: list[str]
    pidfile: Path
    logfile: Path  # the daemon's own log: what a person reads when something fails
    prefix: list[str] = field(default_factory=list)  # e.g. nsenter/unshare/runuser wrappers
    env: dict[str, str] = field(default_factory=dict)
    # Daemons that fork themselves write the pid file; for ones run in the foreground we write it.
    foreground: bool = False

    def pid(self) -> int | None:
        """The pid of the running daemon, or None; removes a stale pid file."""
        try:
            pid = int(self.pidfile.read_text().split()[0])
        except (FileNotFoundError, ValueError, IndexError):
            return None
        if _is_program(pid, self.program):
            return pid
        self.pidfile.unlink(missing_ok=True)  # stale: the process is gone or is something else
        return None

    def running(self) -> bool:
        return self.pid() is not None

    def start(self, timeout: float = 20.0) -> int:
        """Start the daemon unless it runs already; return its pid."""
        pid = self.pid()
        if pid:
            return pid
        self.logfile.parent.mkdir(parents=True, exist_ok=True)
        self.pidfile.parent.mkdir(parents=True, exist_ok=True)
        env = {**os.environ, **self.env}
        # What the daemon prints before it has opened its own log goes next to that log.
        with open(self.logfile.with_suffix(".stdout"), "ab") as log:
            log.write(f"\n--- hpclab: starting {self.name}: {' '.join(self.argv)}\n".encode())
            log.flush()
            proc = subprocess.Popen(
                self.prefix + self.argv,
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                env=env,
                start_new_session=True,  # survives the command that started it, as a daemon should
            )
        if self.foreground:
            # Wrappers (nsenter/unshare) exec the program, so this pid becomes the daemon's pid.
            self.pidfile.write_text(f"{proc.pid}\n")
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            pid = self.pid()
            if pid:
                return pid
            if proc.poll() not in (None, 0):
                break
            time.sleep(0.05)
        raise HpclabError(
            f"{self.name} did not start (exit code {proc.poll()})",
            f"read its log: {self.logfile}\n{tail(self.logfile, 8)}\n{tail(self.logfile.with_suffix('.stdout'), 4)}",
        )

    def stop(self, timeout: float = 15.0) -> bool:
        """Stop the daemon if it runs; True if it was running. SIGTERM, then SIGKILL."""
        pid = self.pid()
        if not pid:
            return False
        _signal(pid, signal.SIGTERM)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline and _is_program(pid, self.program):
            time.sleep(0.05)
        if _is_program(pid, self.program):
            _signal(pid, signal.SIGKILL)
            time.sleep(0.2)
        self.pidfile.unlink(missing_ok=True)
        return True


def _signal(pid: int, sig: int) -> None:
    try:
        os.kill(pid, sig)
    except ProcessLookupError:
        pass


def _is_program(pid: int, program: str) -> bool:
    """Does pid exist and run `program` (not a zombie)?"""
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        stat = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError, PermissionError):
        return False
    if stat.rsplit(")", 1)[-1].split()[0] == "Z":
        return False
    return any(os.path.basename(arg.decode(errors="replace")) == program for arg in cmdline[:3] if arg)


def tail(path: Path, lines: int = 10) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except FileNotFoundError:
        return "(no log written)"
