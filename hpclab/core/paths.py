"""Where things live: the repository, build outputs, run folders and cluster state.

Every generated file goes below a git-ignored folder; these functions are the only place that
knows the layout. HPCLAB_HOME overrides the repository root (tests use it), HPCLAB_RUNS the run
folder root, HPCLAB_STATE the cluster state folder.

Daemons that do not run as root (munged) cannot reach a checkout under a 0700 home such as
Debian's /root, so what they need lives in a per-checkout folder below /var/lib/hpclab instead
(daemon_state_dir).
"""

import hashlib
import os
import re
from pathlib import Path

# Absolute, but links kept: the classroom's course is a link to its current version, swapped at
# each `classroom up`; a server started before must find the new version, not the old folder.
_HERE = Path(os.path.abspath(__file__))
REPO = Path(os.environ.get("HPCLAB_HOME", _HERE.parents[2]))  # hpclab/core/paths.py


PACKAGE = _HERE.parents[1]   # the hpclab package folder


def package_dir() -> Path:
    """The installed hpclab package's folder (its floors are subfolders)."""
    return PACKAGE


def repo() -> Path:
    return REPO


CLASSROOM_DEFAULT = Path("/opt/hpclab/classroom")


def classroom_root() -> Path:
    """Where `make classroom` puts a room (HPCLAB_CLASSROOM overrides; hpclab.classroom.layout)."""
    return Path(os.environ.get("HPCLAB_CLASSROOM", CLASSROOM_DEFAULT))


def instructors_labs() -> Path:
    """The room's copy of the code labs with their solutions, readable by the instructors' group
    only (hpclab.classroom.install.copy_lab_solutions writes it; the room's grader reads it)."""
    return classroom_root() / "instructors" / "labs"


def build_dir() -> Path:
    return REPO / "build"


OUTPUT_ENV = "HPCLAB_OUTPUT"


def output_dir() -> Path:
    """Where notebooks write what they make besides runs (fidelity rows, the cache probe, ABI and
    variant builds, host files): build/, or HPCLAB_OUTPUT where build/ is not the user's to write
    (a room's students: their servers set it to a folder in their home)."""
    return Path(os.environ.get(OUTPUT_ENV) or build_dir())


def bin_dir() -> Path:
    """C kernels: pingpong, stream, poisson (built by `make -C src`)."""
    return build_dir() / "bin"


def lib_dir() -> Path:
    """Shared libraries such as libmpitrace.so."""
    return build_dir() / "lib"


def runs_dir() -> Path:
    return Path(os.environ.get("HPCLAB_RUNS", REPO / "runs"))


def state_dir() -> Path:
    """Cluster state: generated configs, munge key, databases, logs, pid files."""
    return Path(os.environ.get("HPCLAB_STATE", build_dir() / "cluster"))


SYSTEM_STATE_ROOT = Path("/var/lib/hpclab")


def daemon_state_dir(state: Path | None = None) -> Path:
    """The folder of daemons that run as another user than root, for one checkout's cluster.

    /var/lib/hpclab/<readable name>-<hash of the state folder's path>: two clones get two folders,
    and the name says which checkout a folder belongs to.
    """
    state = Path(state or state_dir()).resolve()
    slug = re.sub(r"[^A-Za-z0-9]+", "-", str(state)).strip("-")[-48:]
    digest = hashlib.sha256(str(state).encode()).hexdigest()[:10]
    return SYSTEM_STATE_ROOT / f"{slug}-{digest}"


SPOOL_ROOT = Path("/var/spool/hpclab")


def short_spool_dir(state: Path | None = None) -> Path:
    """slurmd's spool for one checkout's cluster: /var/spool/hpclab/<hash of the state folder>.
    Short on purpose: PMIx puts a Unix socket per job step in it, and a socket path may not
    exceed 107 bytes (a readable name like daemon_state_dir's pushed it to 112)."""
    state = Path(state or state_dir()).resolve()
    return SPOOL_ROOT / hashlib.sha256(str(state).encode()).hexdigest()[:10]


def unreachable_ancestor(path: Path) -> Path | None:
    """The first folder on the way to `path` that users other than its owner cannot traverse
    (no execute bit for 'other'), or None if anyone can reach `path`."""
    path = Path(path).resolve()
    for folder in [*reversed(path.parents), path]:
        try:
            mode = folder.stat().st_mode
        except OSError:
            return folder
        if folder.is_dir() and not mode & 0o001:
            return folder
    return None


def checkout_access_report() -> list[str]:
    """What `make setup` says about where the checkout is: who can reach it, and where the
    files of daemons that are not root go. Lines of text, no side effects."""
    blocker = unreachable_ancestor(REPO)
    lines = [f"checkout: {REPO}"]
    if blocker is None:
        lines.append("every user can reach the checkout (each folder on the way is traversable)")
    else:
        lines.append(f"{blocker} is mode {blocker.stat().st_mode & 0o777:04o}: only its owner can enter it, "
                     "so daemons and users that are not root cannot reach this checkout")
    lines.append(f"munged's key, socket and log will live in {daemon_state_dir()} (root-owned, 0755; "
                 "the key 0400, owned by munge), wherever the checkout is")
    if blocker is not None:
        lines.append("the grader's sandbox binds what student code reads (venv, package, submission) as root, and "
                     "a classroom gives its students a copy under /opt/hpclab/classroom: the checkout may stay private")
    return lines


def templates_dir() -> Path:
    return REPO / "slurm-templates"


def sites_dir() -> Path:
    return REPO / "sites"
