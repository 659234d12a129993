"""Names, folders and the launch wrapper of virtual nodes: what starting a node's slurmd needs
(cluster.local) without the orchestration that creates the namespaces (cluster.vnodes).

The bridge's addresses live in cluster.config, which writes them into slurm.conf."""

from __future__ import annotations

import os
from pathlib import Path

from hpclab.cluster.config import Layout, Node
from hpclab.core import paths

NETNS_DIR = Path("/run/netns")
CPUSET_ROOT = Path("/sys/fs/cgroup/cpuset")
OMPI_SYSTEM_MCA = Path("/etc/openmpi/openmpi-mca-params.conf")


# --- names -----------------------------------------------------------------------------------------

def node_name(k: int) -> str:
    return f"node{k}"


def netns_name(k: int) -> str:
    return f"hpclab-node{k}"


def host_veth(k: int) -> str:
    return f"hpclab-v{k}"  # the host end, enslaved to the bridge (15 characters at most)


NODE_IFACE = "eth0"  # the node's end, inside its namespace: a node sees an ordinary eth0


def node_addr(k: int) -> str:
    return f"10.213.0.{k}"


def vnodes_dir(lay: Layout) -> Path:
    return lay.root / "vnodes"


def node_dir(lay: Layout, name: str) -> Path:
    """Per-node files: tmp/ (the node's /tmp), hosts, openmpi-mca-params.conf."""
    return vnodes_dir(lay) / name


def record_file(lay: Layout) -> Path:
    return vnodes_dir(lay) / "created.json"


def layout_file(lay: Layout) -> Path:
    return vnodes_dir(lay) / "layout.json"


def cgroup_dir(netns: str) -> Path:
    return CPUSET_ROOT / netns


def _under_tmp(lay: Layout) -> list[str]:
    """Paths (relative to /tmp) of the folders jobs on a node need that lie below /tmp: the
    repository, the cluster state and the run folders; nested ones are covered by their parent."""
    import shlex

    rels = []
    for p in sorted({Path(os.path.realpath(x)) for x in (paths.repo(), lay.root, paths.runs_dir())}, key=lambda p: len(p.parts)):
        if p.parts[:2] != ("/", "tmp") or len(p.parts) < 3:
            continue
        if any(p.is_relative_to(Path("/tmp") / r) for r in rels):
            continue
        rels.append(str(p.relative_to("/tmp")))
    return [shlex.quote(r) for r in rels]


def launch_prefix(lay: Layout, node: Node) -> list[str]:
    """The wrapper that starts a node's slurmd inside its namespaces and CPU subset.

    nsenter joins the node's network namespace (not `ip netns exec`, which remounts /sys and hides
    the cgroup fs from slurmd); unshare gives it its own hostname and mounts; the script joins the
    cpuset cgroup, bind-mounts the node's /tmp, hosts and MCA files, and execs the command under
    taskset, so the pid stays the daemon's.
    """
    d = node_dir(lay, node.name)
    cpus = ",".join(map(str, node.cpuset))
    # The private /tmp is mounted last: the node's own files, and the repository and state when
    # they live below /tmp (a checkout in /tmp, as CI may use), must still be reachable. Those
    # folders are bound into the node's /tmp at the same place first.
    keep = [f"mkdir -p {d / 'tmp'}/{rel} && mount --bind /tmp/{rel} {d / 'tmp'}/{rel}" for rel in _under_tmp(lay)]
    script = "\n".join([
        "set -e",
        f"echo $$ > {cgroup_dir(node.netns) / 'tasks'}",
        f"hostname {node.name}",
        f"mount --bind {d / 'hosts'} /etc/hosts",
        f"if [ -e {OMPI_SYSTEM_MCA} ]; then mount --bind {d / 'openmpi-mca-params.conf'} {OMPI_SYSTEM_MCA}; fi",
        *keep,
        f"mount --rbind {d / 'tmp'} /tmp",  # rbind: carries the folders bound into it
        f'exec taskset --cpu-list {cpus} "$@"',
    ])
    return ["nsenter", f"--net={NETNS_DIR / node.netns}", "unshare", "--uts", "--mount", "--propagation", "private",
            "sh", "-c", script, node.name]
