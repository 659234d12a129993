"""Memory and CPU limits for each student's server, enforced by the kernel's cgroups.

JupyterHub's LocalProcessSpawner only passes mem_limit and cpu_limit on as environment
variables; nothing stops a server (or a kernel it starts) from taking the whole machine. Here each
server gets its own cgroup, made by the hub (root) before the server starts, entered by the
server's first process before it drops to the student's uid (so every kernel it forks is inside
from its first instruction), and removed when the server stops.

    cgroup v1 (this course's machines):  /sys/fs/cgroup/memory/hpclab-classroom/<user>
                                         memory.limit_in_bytes (+ memsw: no escape into swap)
                                         /sys/fs/cgroup/cpu/hpclab-classroom/<user>
                                         cpu.cfs_quota_us = cpus x cpu.cfs_period_us
                                         hpclab-classroom/cpu.shares = ROOM_WEIGHT_V1
    cgroup v2 (unified, most laptops):   /sys/fs/cgroup/hpclab-classroom/<user>
                                         memory.max, memory.swap.max=0, cpu.max
                                         hpclab-classroom/cpu.weight = ROOM_WEIGHT_V2
    neither writable:                    nothing is enforced; `mode()` says so and the hub's log
                                         and `hpclab classroom status` repeat it.

Over its memory limit, the kernel's OOM killer kills a process inside the cgroup (the largest:
in practice the Python kernel that allocated), never one outside it.
This module uses only the standard library: the hub imports it, and so does `hpclab classroom`.
"""

from __future__ import annotations

import os
import signal
import time
from dataclasses import dataclass
from pathlib import Path

CGROUP_FS = Path("/sys/fs/cgroup")
PARENT = "hpclab-classroom"  # one folder per hierarchy holds every server's cgroup
V1_CONTROLLERS = ("memory", "cpu")
# The servers' CPU weight, together, against everything else at the top level: Slurm's job tasks
# sit there (task/cgroup constrains memory only), each weighing as much as the whole room at the
# default (v1 cpu.shares 1024, v2 cpu.weight 100). A student waiting for a kernel is waiting at a
# screen; a job is not: with 8x the weight the servers get most of a contended core, and the
# jobs every cycle the servers leave. Each server keeps its own cap (cpus) below that.
ROOM_WEIGHT_V1 = 8 * 1024
ROOM_WEIGHT_V2 = 8 * 100


def _writable(p: Path) -> bool:
    return p.exists() and os.access(p, os.W_OK)


def _v1_dir(controller: str) -> Path | None:
    # "cpu" may be mounted alone or co-mounted as "cpu,cpuacct" (with a "cpu" symlink or not)
    for name in (controller, f"{controller},cpuacct", f"cpuacct,{controller}"):
        d = CGROUP_FS / name
        if (d / "cgroup.procs").is_file() and _writable(d):
            return d
    return None


def mode() -> str:
    """'v1', 'v2' or 'none': how this machine lets the hub enforce limits."""
    mem = _v1_dir("memory")
    if mem is not None and (mem / "memory.limit_in_bytes").is_file():
        return "v1"
    controllers = CGROUP_FS / "cgroup.controllers"
    if controllers.is_file() and _writable(CGROUP_FS):
        have = controllers.read_text().split()
        if "memory" in have and "cpu" in have:
            return "v2"
    return "none"


def describe() -> str:
    """One line for logs and `hpclab classroom status`."""
    return {"v1": "enforced (cgroup v1: memory.limit_in_bytes, cpu.cfs_quota_us)",
            "v2": "enforced (cgroup v2: memory.max, cpu.max)",
            "none": "NOT enforced: no writable cgroup hierarchy with the memory and cpu controllers "
                    "(run the hub as root on a machine with cgroups mounted)"}[mode()]


@dataclass(frozen=True)
class ServerCgroup:
    """The cgroup(s) of one student's server: `dirs` has one folder per hierarchy (v1: memory
    and cpu; v2: one)."""

    name: str
    dirs: tuple[Path, ...]
    version: str

    @property
    def memory_dir(self) -> Path | None:
        if self.version == "v2":
            return self.dirs[0]
        return next((d for d in self.dirs if "memory" in d.parents[1].name.split(",")), None)

    def enter(self, pid: int | None = None) -> None:
        """Move process `pid` (default: the caller) into every hierarchy of this cgroup.
        Called by the server's first process, still root, before it becomes the student."""
        pid = pid or os.getpid()
        for d in self.dirs:
            (d / "cgroup.procs").write_text(f"{pid}\n")

    def pids(self) -> list[int]:
        found: set[int] = set()
        for d in self.dirs:
            try:
                found.update(int(x) for x in (d / "cgroup.procs").read_text().split())
            except OSError:
                pass
        return sorted(found)

    def oom_kills(self) -> int:
        """How many processes the OOM killer stopped in this cgroup (0 when the kernel does not say)."""
        d = self.memory_dir
        if d is None:
            return 0
        path = d / ("memory.events" if self.version == "v2" else "memory.oom_control")
        try:
            for line in path.read_text().splitlines():
                key, _, value = line.partition(" ")
                if key == "oom_kill":
                    return int(value)
        except OSError:
            pass
        return 0

    def memory_limit(self) -> int | None:
        d = self.memory_dir
        if d is None:
            return None
        text = (d / ("memory.max" if self.version == "v2" else "memory.limit_in_bytes")).read_text().strip()
        return None if text == "max" else int(text)

    def remove(self, timeout: float = 10.0) -> bool:
        """Kill whatever is left in the cgroup and remove it; True if it is gone."""
        deadline = time.monotonic() + timeout
        for d in self.dirs:
            if not d.exists():
                continue
            while True:
                left = self.pids()
                for pid in left:
                    try:
                        os.kill(pid, signal.SIGKILL)
                    except ProcessLookupError:
                        pass
                try:
                    d.rmdir()
                    break
                except FileNotFoundError:
                    break
                except OSError:  # EBUSY: a process is still dying
                    if time.monotonic() > deadline:
                        return False
                    time.sleep(0.05)
        return True


def _name(user: str) -> str:
    if not user or "/" in user or user.startswith("."):
        raise ValueError(f"not a user name: {user!r}")
    return user


def cgroup(user: str) -> ServerCgroup | None:
    """The cgroup a server of `user` has (or would have) on this machine; None without cgroups."""
    m = mode()
    if m == "v1":
        dirs = tuple(d / PARENT / _name(user) for d in (_v1_dir(c) for c in V1_CONTROLLERS) if d is not None)
        return ServerCgroup(user, dirs, "v1")
    if m == "v2":
        return ServerCgroup(user, (CGROUP_FS / PARENT / _name(user),), "v2")
    return None


def create(user: str, mem_bytes: int, cpus: float) -> ServerCgroup | None:
    """Make (or reset) the cgroup of `user`'s server with `mem_bytes` of memory (no swap on top)
    and `cpus` cores of CPU time; None when this machine cannot enforce limits."""
    cg = cgroup(user)
    if cg is None:
        return None
    if cg.version == "v1":
        for d in cg.dirs:
            d.mkdir(parents=True, exist_ok=True)
            if (d.parent / "cpu.shares").exists():
                (d.parent / "cpu.shares").write_text(str(ROOM_WEIGHT_V1))
            if (d / "memory.limit_in_bytes").exists():
                (d / "memory.limit_in_bytes").write_text(str(mem_bytes))
                if (d / "memory.memsw.limit_in_bytes").exists():
                    (d / "memory.memsw.limit_in_bytes").write_text(str(mem_bytes))
            if (d / "cpu.cfs_quota_us").exists():
                period = int((d / "cpu.cfs_period_us").read_text())
                (d / "cpu.cfs_quota_us").write_text(str(max(1000, int(cpus * period))))
    else:
        parent = CGROUP_FS / PARENT
        parent.mkdir(exist_ok=True)
        # a v2 cgroup's children get a controller only if the parent hands it down
        for p in (CGROUP_FS, parent):
            (p / "cgroup.subtree_control").write_text("+memory +cpu")
        (parent / "cpu.weight").write_text(str(ROOM_WEIGHT_V2))
        d = cg.dirs[0]
        d.mkdir(exist_ok=True)
        (d / "memory.max").write_text(str(mem_bytes))
        if (d / "memory.swap.max").exists():
            (d / "memory.swap.max").write_text("0")
        (d / "cpu.max").write_text(f"{max(1000, int(cpus * 100000))} 100000")
    return cg


def remove_parents() -> None:
    """Remove the empty folders that held the servers' cgroups (after the hub stopped): a
    classroom taken down leaves no cgroup behind."""
    cg0 = cgroup("x")
    for d in (cg0.dirs if cg0 is not None else []):
        try:
            d.parent.rmdir()
        except OSError:
            pass  # not empty (a server still runs) or gone already


def existing() -> list[ServerCgroup]:
    """Every server cgroup present now (running servers, or leftovers of a hub that died)."""
    cg0 = cgroup("x")
    if cg0 is None:
        return []
    names: set[str] = set()
    for d in cg0.dirs:
        if d.parent.is_dir():
            names.update(p.name for p in d.parent.iterdir() if p.is_dir())
    return [cgroup(n) for n in sorted(names)]
