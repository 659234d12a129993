"""The sandbox that runs code that is not ours while labs are graded: the student's kernel and
the grader's check of its answers.

Built with bubblewrap (bwrap). As root: root's bwrap makes the mounts and the PID, network, IPC
and UTS namespaces (it can reach a checkout under a 0700 /root), then the command drops to the
dedicated user `hpclab-grader` (setpriv: new uid and gid, no groups, no capabilities, no new
privileges) and enters a nested, unprivileged bwrap for a user namespace of its own, in which no
further user namespace can be made. Not root: one unprivileged bwrap with a user namespace, where
the kernel allows them. Inside: no network (a private loopback only), read-only binds of the
system's /usr, a few /etc files, the Python installation, the venv and the package; a tmpfs as
HOME and TMPDIR; a private writable copy of the submission's folder at its own path (writes never
reach the course); nothing else (no /run, /etc/slurm, munge socket, course, runs, /root).

Limits (`Limits`, set in grader/nbgrader_config.py): memory (a cgroup when one can be made,
otherwise RLIMIT_AS), CPU time, processes (RLIMIT_NPROC, per real uid: meaningful with the
dedicated user), file size, open files, and a wall-clock bound on the whole sandbox.

The kernel talks to nbgrader over Unix sockets (jupyter's `ipc` transport): the sandbox has no
network. The kernel's sockets live in its scratch folder; links at the paths nbgrader's
connection file names lead to them.
"""

from __future__ import annotations

import dataclasses
import json
import os
import pwd
import resource
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from hpclab.core import paths
from hpclab.core.errors import HpclabError

GRADER_USER = "hpclab-grader"
ENV = "HPCLAB_SANDBOX"          # JSON {"limits": {...}, "unconfined": bool} for the kernel launcher
SCRATCH_ROOT = Path("/var/tmp")  # per-sandbox private folders: hpclab-grader-<pid>-*
SCRATCH_PREFIX = "hpclab-grader-"
INNER_KERNEL_DIR = "/kernel"     # where the kernel's connection file and sockets are inside
ETC_FILES = ("ld.so.cache", "ld.so.conf", "ld.so.conf.d", "localtime", "nsswitch.conf", "fonts",
             "alternatives", "mime.types", "matplotlibrc")


@dataclasses.dataclass(frozen=True)
class Limits:
    """Resource limits of one sandbox (one submission's kernel, or one check)."""
    memory_mb: int = 2048        # resident memory incl. the tmpfs scratch (cgroup), else address space x2
    cpu_seconds: int = 600       # CPU time of each process (RLIMIT_CPU)
    processes: int = 128         # tasks (processes and threads) of the sandbox's uid (RLIMIT_NPROC)
    file_size_mb: int = 64       # largest file a process may write (RLIMIT_FSIZE)
    open_files: int = 256        # open file descriptors per process (RLIMIT_NOFILE)
    wall_seconds: int = 1800     # the whole sandbox (all cells of a submission)
    scratch_mb: int = 256        # tmpfs for HOME and TMPDIR

    def to_env(self, unconfined: bool = False) -> str:
        return json.dumps({"limits": dataclasses.asdict(self), "unconfined": unconfined})

    @classmethod
    def from_env(cls) -> tuple["Limits", bool]:
        raw = os.environ.get(ENV)
        if not raw:
            return cls(), False
        doc = json.loads(raw)
        return cls(**doc.get("limits", {})), bool(doc.get("unconfined"))


# --- who runs the sandbox ----------------------------------------------------------------------

def ensure_grader_user() -> tuple[int, int]:
    """The dedicated user's (uid, gid), made on first use (root only): a system user with no
    home, no login shell and a group of its own. Idempotent."""
    try:
        pw = pwd.getpwnam(GRADER_USER)
        return pw.pw_uid, pw.pw_gid
    except KeyError:
        pass
    if os.geteuid() != 0:
        raise HpclabError(f"the user {GRADER_USER} does not exist and only root can make it",
                          "autograde as root once (sudo), or grade unprivileged (user namespaces)")
    proc = subprocess.run(["useradd", "--system", "--user-group", "--no-create-home",
                           "--home-dir", "/nonexistent", "--shell", "/usr/sbin/nologin",
                           "--comment", "hpclab grader (runs student code)", GRADER_USER],
                          capture_output=True, text=True)
    if proc.returncode not in (0, 9):   # 9: made meanwhile by another grader
        raise HpclabError(f"useradd {GRADER_USER} failed: {proc.stderr.strip()}",
                          "make the user by hand (useradd --system --user-group ...) and retry")
    pw = pwd.getpwnam(GRADER_USER)
    return pw.pw_uid, pw.pw_gid


def userns_available() -> bool:
    """Can this (unprivileged) user make a bubblewrap sandbox with a user namespace?"""
    if not shutil.which("bwrap"):
        return False
    proc = subprocess.run(["bwrap", "--unshare-user", "--unshare-net", "--ro-bind", "/", "/",
                           "true"], capture_output=True)
    return proc.returncode == 0


def mode() -> str | None:
    """How the sandbox is made here: "root" (root's bwrap, then the dedicated user), "userns"
    (unprivileged bwrap) or None (no sandbox possible: no bwrap, or no user namespaces)."""
    if not shutil.which("bwrap"):
        return None
    if os.geteuid() == 0:
        return "root" if shutil.which("setpriv") else None
    return "userns" if userns_available() else None


def why_not() -> str:
    """One sentence: why no sandbox can be made here, and what to do."""
    if not shutil.which("bwrap"):
        return ("bubblewrap (bwrap) is not installed: install the Debian package bubblewrap "
                "(make setup does)")
    if os.geteuid() == 0:
        return "setpriv is missing: install util-linux"
    return ("this kernel does not let unprivileged users make user namespaces "
            "(sysctl kernel.unprivileged_userns_clone / user.max_user_namespaces, or an AppArmor "
            "rule): autograde as root (sudo), or enable them")


# --- the bwrap command ------------------------------------------------------------------------

def _python_roots() -> list[Path]:
    """Folders Python and the package need: the installation, the venv, the package and the
    course data it reads (site profiles, job templates)."""
    roots = {Path(sys.base_prefix).resolve(), Path(sys.prefix).resolve()}
    exe = Path(sys.executable)
    roots.add(exe.parent.resolve())
    roots.add(paths.package_dir().resolve())  # the folder itself: links on the way are recreated
    for extra in (paths.repo() / "sites", paths.repo() / "slurm-templates"):
        if extra.is_dir():
            roots.add(extra.resolve())
    # keep only the outermost folders
    out = []
    for r in sorted(roots, key=lambda p: len(p.parts)):
        if not any(r.is_relative_to(o) for o in out) and not str(r).startswith("/usr/"):
            out.append(r)
    return out


def _path_links() -> list[str]:
    """Entries of sys.path that are symbolic links (the classroom's course is a link to its
    current version), recreated as links: their targets are bound among the roots, the links
    themselves are not."""
    args = []
    for entry in dict.fromkeys(sys.path):
        link = Path(entry) if entry else None
        if link is not None and link.is_absolute() and link.is_symlink():
            args += ["--symlink", os.readlink(link), str(link)]
    return args


def _system_binds() -> list[str]:
    args = ["--ro-bind", "/usr", "/usr"]
    for name in ("bin", "sbin", "lib", "lib32", "lib64", "libx32"):
        top = Path("/") / name
        if top.is_symlink():
            args += ["--symlink", os.readlink(top), str(top)]
        elif top.is_dir():
            args += ["--ro-bind", str(top), str(top)]
    return args


def _identity_files(scratch: Path, uid: int, gid: int) -> list[str]:
    """A passwd and group naming only root, the sandbox's user and nobody."""
    name = GRADER_USER if os.geteuid() == 0 else pwd.getpwuid(uid).pw_name
    (scratch / "passwd").write_text(
        f"root:x:0:0:root:/root:/usr/sbin/nologin\n{name}:x:{uid}:{gid}::/tmp:/usr/sbin/nologin\n"
        "nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n")
    (scratch / "group").write_text(f"root:x:0:\n{name}:x:{gid}:\nnogroup:x:65534:\n")
    return ["--ro-bind", str(scratch / "passwd"), "/etc/passwd",
            "--ro-bind", str(scratch / "group"), "/etc/group"]


def _env(limits: Limits, extra: dict[str, str] | None = None) -> list[str]:
    env = {"HOME": "/tmp", "TMPDIR": "/tmp", "MPLCONFIGDIR": "/tmp/.matplotlib",
           "IPYTHONDIR": "/tmp/.ipython", "PATH": f"{Path(sys.executable).parent}:/usr/bin:/bin",
           "LANG": "C.UTF-8", "PYTHONDONTWRITEBYTECODE": "1", "OPENBLAS_NUM_THREADS": "1",
           "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "HPCLAB_IN_SANDBOX": "1",
           "NBGRADER_EXECUTION": os.environ.get("NBGRADER_EXECUTION", "autograde")}
    env.update(extra or {})   # a program's own variables (an MPI library's, for a code lab)
    out = ["--clearenv"]
    for k, v in env.items():
        out += ["--setenv", k, v]
    return out


def _parents(dests: list[str]) -> list[str]:
    """`--dir` for every folder on the way to the binds: bwrap run by root makes the missing
    ones 0700, which the sandbox's user could not traverse."""
    out, seen = [], {"/", "/tmp", "/usr", "/proc", "/dev"}
    for dest in dests:
        for parent in reversed(Path(dest).parents):
            if str(parent) not in seen:
                seen.add(str(parent))
                out += ["--dir", str(parent)]
    return out


def bwrap_argv(command: list[str], scratch: Path, binds: list[tuple[str, str, str]],
               chdir: str, limits: Limits, ids: tuple[int, int] | None,
               roots: list[Path] | None = None, env: dict[str, str] | None = None,
               shm_mb: int = 0) -> list[str]:
    """The full command line: bwrap ... [setpriv ... bwrap --unshare-user ...] command.

    binds: (kind, source, destination), kind "ro" or "rw"; ids: (uid, gid) to drop to (root
    mode) or None (unprivileged mode: one bwrap with a user namespace); roots: folders bound
    read-only at their own paths (default: Python's, the venv's and the package's); env:
    variables set inside beside the sandbox's own (PATH among them, replaced when given);
    shm_mb: a private tmpfs of this size as /dev/shm (MPI's shared memory), none when 0."""
    mounts = []
    for name in ETC_FILES:
        mounts += ["--ro-bind-try", f"/etc/{name}", f"/etc/{name}"]
    mounts += _identity_files(scratch, *(ids or (os.getuid(), os.getgid())))
    for root in _python_roots() if roots is None else roots:
        mounts += ["--ro-bind", str(root), str(root)]
    if roots is None:
        mounts += _path_links()
    for kind, src, dest in binds:
        mounts += ["--bind" if kind == "rw" else "--ro-bind", src, dest]
    dests = [mounts[i + 2] for i, a in enumerate(mounts) if a.startswith("--") and "bind" in a]
    args = ["bwrap", "--die-with-parent", "--unshare-pid", "--unshare-net", "--unshare-ipc",
            "--unshare-uts", "--unshare-cgroup-try", "--hostname", "grader",
            *_system_binds(), "--proc", "/proc", "--dev", "/dev",
            "--perms", "1777", "--size", str(limits.scratch_mb << 20), "--tmpfs", "/tmp",
            *(["--perms", "1777", "--size", str(shm_mb << 20), "--tmpfs", "/dev/shm"] if shm_mb else []),
            *_parents(dests), *mounts, "--chdir", chdir, *_env(limits, env)]
    if ids is None:
        return [*args, "--unshare-user", "--disable-userns", "--", *command]
    uid, gid = ids
    drop = ["setpriv", f"--reuid={uid}", f"--regid={gid}", "--clear-groups", "--no-new-privs",
            "--bounding-set=-all", "--inh-caps=-all", "--ambient-caps=-all"]
    # the nested bwrap: a user namespace of its own (uid mapped to itself), no further ones
    nested = ["bwrap", "--unshare-user", "--disable-userns", "--uid", str(uid), "--gid", str(gid),
              "--dev-bind", "/", "/", "--die-with-parent", "--"]
    return [*args, "--", *drop, "--", *nested, *command]


# --- limits --------------------------------------------------------------------------------------

def _memory_cgroup(limits: Limits) -> Path | None:
    """A memory cgroup for one sandbox (v2, or v1 with memory controller), made by root. None
    when none can be made (then RLIMIT_AS stands in)."""
    if os.geteuid() != 0:
        return None
    mem = limits.memory_mb << 20
    name = f"{SCRATCH_PREFIX}{os.getpid()}"
    v2 = Path("/sys/fs/cgroup")
    if (v2 / "cgroup.controllers").is_file():
        if "memory" not in (v2 / "cgroup.subtree_control").read_text().split():
            return None
        files = {"memory.max": str(mem), "memory.swap.max": "0", "pids.max": str(limits.processes)}
        base = v2
    else:
        base = _v1_memory_base()
        if base is None or not (base / "memory.limit_in_bytes").is_file():
            return None
        files = {"memory.limit_in_bytes": str(mem), "memory.memsw.limit_in_bytes": str(mem)}
    group = base / name
    try:
        group.mkdir(exist_ok=True)
        for fname, value in files.items():
            if (group / fname).exists():
                (group / fname).write_text(value)
        return group
    except OSError:
        _rmdir(group)
        return None


# With a pids cgroup per sandbox, RLIMIT_NPROC (counted per uid: every sandbox of the grader's
# account together) only bounds the account as a last resort, this many sandboxes' worth.
NPROC_SANDBOXES = 16


# A v1 pids cgroup root delegated to an account that is not root (the room's grader): it may
# make the sandboxes' groups below it (hpclab.classroom.grading_room.delegate_pids).
PIDS_BASE_ENV = "HPCLAB_SANDBOX_PIDS_BASE"


def _v1_pids_base() -> Path | None:
    """The v1 pids cgroup sandboxes' groups go below: the delegated one ($HPCLAB_SANDBOX_PIDS_BASE)
    or the one this process is in (None without a v1 pids hierarchy)."""
    delegated = os.environ.get(PIDS_BASE_ENV)
    if delegated:
        return Path(delegated) if os.access(delegated, os.W_OK) else None
    for line in Path("/proc/self/cgroup").read_text().splitlines():
        _, controllers, path = line.split(":", 2)
        if "pids" in controllers.split(","):
            base = Path("/sys/fs/cgroup/pids") / path.lstrip("/")
            return base if (base / "pids.max").is_file() or base == Path("/sys/fs/cgroup/pids") else None
    return None


def _pids_cgroup(limits: Limits) -> Path | None:
    """A v1 pids cgroup for one sandbox, its pids.max the sandbox's process bound (on v2 the
    memory group carries pids.max). None when none can be made."""
    if (Path("/sys/fs/cgroup") / "cgroup.controllers").is_file():
        return None
    base = _v1_pids_base()
    if os.geteuid() != 0 and not os.environ.get(PIDS_BASE_ENV):
        return None
    if base is None:
        return None
    group = base / f"{SCRATCH_PREFIX}{os.getpid()}"
    try:
        group.mkdir(exist_ok=True)
        (group / "pids.max").write_text(str(limits.processes))
        return group
    except OSError:
        _rmdir(group)
        return None


def processes_bounded_per_sandbox() -> bool:
    """Can each sandbox here get a process bound of its own (a pids cgroup: v2's, with the pids
    controller delegated, or v1's)? Without one, the bound is RLIMIT_NPROC, shared by every
    sandbox of the grader's account: one fork bomb would starve the others, so grading runs one
    submission at a time."""
    v2 = Path("/sys/fs/cgroup")
    if (v2 / "cgroup.controllers").is_file():
        return os.geteuid() == 0 and "pids" in (v2 / "cgroup.subtree_control").read_text().split()
    if os.geteuid() != 0 and not os.environ.get(PIDS_BASE_ENV):
        return False
    return _v1_pids_base() is not None


def _v1_memory_base() -> Path | None:
    """The v1 memory cgroup this process is in (a sandbox's group goes below it, so whatever
    bounds the grader bounds the sandbox too)."""
    for line in Path("/proc/self/cgroup").read_text().splitlines():
        _, controllers, path = line.split(":", 2)
        if "memory" in controllers.split(","):
            base = Path("/sys/fs/cgroup/memory") / path.lstrip("/")
            return base if base.is_dir() else None
    return None


def _rmdir(path: Path) -> None:
    try:
        path.rmdir()
    except OSError:
        pass


def _tasks_of(uid: int) -> int:
    """Processes and threads of a uid now (what RLIMIT_NPROC counts)."""
    n = 0
    for status in Path("/proc").glob("[0-9]*/status"):
        try:
            fields = dict(l.split(":\t", 1) for l in status.read_text().splitlines() if ":\t" in l)
        except OSError:
            continue
        if int(fields.get("Uid", "-1\t").split()[0]) == uid:
            n += int(fields.get("Threads", "1"))
    return n


def _set_rlimits(limits: Limits, address_space: bool, nproc: int) -> None:
    def cap(which, value):
        soft, hard = resource.getrlimit(which)
        hard = value if hard == resource.RLIM_INFINITY else min(hard, value)
        resource.setrlimit(which, (min(value, hard), hard))

    cap(resource.RLIMIT_CPU, limits.cpu_seconds)
    cap(resource.RLIMIT_FSIZE, limits.file_size_mb << 20)
    cap(resource.RLIMIT_NOFILE, limits.open_files)
    cap(resource.RLIMIT_CORE, 0)
    cap(resource.RLIMIT_NPROC, nproc)
    if address_space:
        # numpy, zmq and thread stacks reserve far more than they touch: twice the memory bound
        cap(resource.RLIMIT_AS, 2 * (limits.memory_mb << 20))


def _join(group: Path | None) -> None:
    if group is not None:
        (group / "cgroup.procs").write_text(str(os.getpid()))


# --- running things inside ----------------------------------------------------------------------

def sweep() -> list[str]:
    """Remove what sandboxes whose launcher is gone left behind (scratch folders, cgroups).
    Returns the paths removed."""
    gone = []
    candidates = list(SCRATCH_ROOT.glob(f"{SCRATCH_PREFIX}*"))
    for base in (Path("/sys/fs/cgroup"), _v1_memory_base() or Path("/sys/fs/cgroup/memory"),
                 _v1_pids_base() or Path("/sys/fs/cgroup/pids")):
        candidates += list(base.glob(f"{SCRATCH_PREFIX}*"))
    for path in candidates:
        try:
            pid = int(path.name[len(SCRATCH_PREFIX):].split("-")[0])
        except ValueError:
            continue
        if Path(f"/proc/{pid}").exists():
            continue
        if str(path).startswith("/sys/"):
            _rmdir(path)
        else:
            shutil.rmtree(path, ignore_errors=True)
        if not path.exists():
            gone.append(str(path))
    return gone


class Sandbox:
    """One sandbox's private folder, cgroup and identity; `run` starts a command in it.

    workdir: a folder copied into the sandbox at its own path (the copy is owned by the
    sandbox's user and thrown away afterwards), writable there unless writable=False, and the
    folder commands start in; ro: more folders bound read-only at their own paths; env:
    variables for the commands run inside, beside the sandbox's own; shm_mb: a private
    /dev/shm of this size (MPI ranks on shared memory), none when 0."""

    def __init__(self, limits: Limits, workdir: Path | None = None, ro: tuple[Path, ...] = (),
                 writable: bool = True, env: dict[str, str] | None = None, shm_mb: int = 0):
        self.limits = limits
        self.env = dict(env or {})
        self.shm_mb = shm_mb
        self.mode = mode()
        if self.mode is None:
            raise HpclabError(f"cannot sandbox student code here: {why_not()}",
                              "grade untrusted notebooks where bubblewrap works; only your own "
                              "test notebooks may be graded with --unconfined")
        self.ids = ensure_grader_user() if self.mode == "root" else None
        SCRATCH_ROOT.mkdir(parents=True, exist_ok=True)
        self.scratch = Path(tempfile.mkdtemp(prefix=f"{SCRATCH_PREFIX}{os.getpid()}-",
                                             dir=SCRATCH_ROOT))
        self.binds: list[tuple[str, str, str]] = [("ro", str(Path(p).resolve()), str(Path(p).resolve()))
                                                   for p in ro]
        self.chdir = "/tmp"
        if workdir is not None:
            work = self.scratch / "work"
            shutil.copytree(workdir, work, symlinks=True)
            self._own(work)
            self.binds.append(("rw" if writable else "ro", str(work), str(Path(workdir).resolve())))
            self.chdir = str(Path(workdir).resolve())
        self.group = _memory_cgroup(limits)
        self.pids_group = _pids_cgroup(limits)

    def _own(self, path: Path) -> None:
        if self.ids is None:
            return
        uid, gid = self.ids
        for p in [path, *path.rglob("*")]:
            os.lchown(p, uid, gid)

    def kernel_dir(self) -> Path:
        """A folder bound at /kernel inside, writable by the sandbox's user."""
        d = self.scratch / "kernel"
        d.mkdir(exist_ok=True)
        self._own(d)
        self.binds.append(("rw", str(d), INNER_KERNEL_DIR))
        return d

    def argv(self, command: list[str]) -> list[str]:
        return bwrap_argv(command, self.scratch, self.binds, self.chdir, self.limits, self.ids, env=self.env,
                          shm_mb=self.shm_mb)

    def popen(self, command: list[str], **kw) -> subprocess.Popen:
        group, pids_group, limits = self.group, self.pids_group, self.limits
        # RLIMIT_NPROC counts every task of the real uid: the dedicated user's are its sandboxes'
        # (several when grading in parallel); an instructor's own uid (unprivileged mode) already
        # runs others. Where a pids cgroup bounds each sandbox, the rlimit only bounds the account.
        own_bound = pids_group is not None or (group is not None and (group / "pids.max").exists())
        nproc = limits.processes * (NPROC_SANDBOXES if own_bound else 1) + (0 if self.ids else _tasks_of(os.getuid()))

        def before():
            os.umask(0o022)   # folders bwrap makes on the way to a bind must be traversable
            _join(group)
            _join(pids_group)
            _set_rlimits(limits, address_space=group is None, nproc=nproc)

        return subprocess.Popen(self.argv(command), preexec_fn=before, **kw)

    def run(self, command: list[str], stdin: str = "", timeout: float | None = None
            ) -> subprocess.CompletedProcess:
        """Run a command inside and wait (at most the wall-clock bound). Returns the completed
        process (text output); a command past the bound is killed (returncode -9)."""
        proc = self.popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, text=True)
        try:
            out, err = proc.communicate(stdin, timeout=timeout or self.limits.wall_seconds)
        except subprocess.TimeoutExpired:
            proc.kill()
            out, err = proc.communicate()
            err += f"\nsandbox: killed after the wall-clock bound ({timeout or self.limits.wall_seconds} s)"
        return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)

    def close(self) -> None:
        for group in (self.group, self.pids_group):
            if group is None:
                continue
            for _ in range(50):   # tasks leave the cgroup a moment after they exit
                _rmdir(group)
                if not group.exists():
                    break
                time.sleep(0.02)
        shutil.rmtree(self.scratch, ignore_errors=True)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def _bridge_sockets(info: dict, inner: Path) -> dict:
    """The connection info for the kernel inside (sockets under /kernel), and links at the paths
    nbgrader connects to that lead to the sockets the kernel will make in `inner`."""
    if info.get("transport") != "ipc":
        raise HpclabError("the sandboxed kernel has no network: nbgrader must use the ipc transport",
                          "set c.KernelManager.transport = 'ipc' in the course's nbgrader_config.py")
    outer = info["ip"]
    if not os.path.isabs(outer):   # jupyter's default: relative to the client's folder
        outer = os.path.join(os.readlink(f"/proc/{os.getppid()}/cwd"), outer)
        info["ip"] = outer
    ports = [info[k] for k in ("shell_port", "iopub_port", "stdin_port", "control_port", "hb_port")]
    for port in ports:
        link = Path(f"{outer}-{port}")
        if link.is_symlink() or link.exists():
            link.unlink()
        link.symlink_to(inner / f"k-{port}")
    return dict(info, ip=f"{INNER_KERNEL_DIR}/k")


def _seal_when_bound(proc: subprocess.Popen, kdir: Path, info: dict, deadline: float) -> None:
    """Once the kernel has made its five sockets, hand their folder to root: the student's code
    can then no longer swap a socket for a link to some other socket on the host, which
    nbgrader (root, outside) would follow when it reconnects."""
    import stat

    paths = [kdir / f"k-{info[k]}" for k in ("shell_port", "iopub_port", "stdin_port",
                                             "control_port", "hb_port")]
    while proc.poll() is None and time.monotonic() < deadline:
        try:
            if all(stat.S_ISSOCK(p.lstat().st_mode) for p in paths):
                break
        except FileNotFoundError:
            pass
        time.sleep(0.005)
    if os.geteuid() == 0:
        os.chown(kdir, 0, 0)
        kdir.chmod(0o755)


def run_kernel(connection_file: str) -> int:
    """The kernel launcher nbgrader starts (`python -m hpclab.grading kernel CONN`): ipykernel in
    a sandbox, its folder (nbgrader's autograded/<student>/<lab>/, the current folder) copied in.
    Waits for it (forwarding nothing: nbgrader signals the process group) and cleans up.
    Returns the kernel's exit status."""
    limits, unconfined = Limits.from_env()
    kernel = ["-m", "ipykernel_launcher", "-f"]
    if unconfined:
        info = json.loads(Path(connection_file).read_text())
        if info.get("transport") == "ipc" and not os.path.isabs(info["ip"]):
            # jupyter's default ipc path is relative to the client's folder, not ours
            info["ip"] = os.path.join(os.readlink(f"/proc/{os.getppid()}/cwd"), info["ip"])
            Path(connection_file).write_text(json.dumps(info))
        os.execv(sys.executable, [sys.executable, *kernel, connection_file])
    sweep()
    info = json.loads(Path(connection_file).read_text())
    signal.signal(signal.SIGINT, signal.SIG_IGN)   # an interrupt is for the kernel, not for us
    with Sandbox(limits, workdir=Path.cwd()) as box:
        kdir = box.kernel_dir()
        inner_info = _bridge_sockets(info, kdir)
        (kdir / "connection.json").write_text(json.dumps(inner_info))
        box._own(kdir)
        proc = box.popen([sys.executable, *kernel, f"{INNER_KERNEL_DIR}/connection.json"])
        deadline = time.monotonic() + limits.wall_seconds
        try:
            _seal_when_bound(proc, kdir, inner_info, deadline)
            return proc.wait(timeout=max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            print(f"hpclab sandbox: the kernel ran past the wall-clock bound ({limits.wall_seconds} s)"
                  " and was stopped", file=sys.stderr)
            proc.kill()
            return proc.wait()
        finally:
            for port in ("shell_port", "iopub_port", "stdin_port", "control_port", "hb_port"):
                link = Path(f"{info['ip']}-{info[port]}")
                if link.is_symlink():
                    link.unlink()
