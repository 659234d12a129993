"""Where things live: the repository, build outputs, run folders and cluster state.

Every generated file goes below a git-ignored folder; these functions are the only place that
knows the layout. HPCLAB_HOME overrides the repository root (tests use it), HPCLAB_RUNS the run
folder root, HPCLAB_STATE the cluster state folder.
"""

import os
from pathlib import Path

REPO = Path(os.environ.get("HPCLAB_HOME", Path(__file__).resolve().parent.parent))


def repo() -> Path:
    return REPO


def build_dir() -> Path:
    return REPO / "build"


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


def templates_dir() -> Path:
    return REPO / "slurm-templates"


def sites_dir() -> Path:
    return REPO / "sites"
