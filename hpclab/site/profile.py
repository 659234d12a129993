"""Site profiles: where jobs run and how they are launched.

A site is a YAML file in sites/ (checked against sites/schema.json; unknown keys are errors)
naming partitions, account, QoS, modules (and the folders they are found in, modulepath), the
default launcher and the MPI libraries a spec may pick (mpi_libraries; their records are in
site/mpi_libraries.py). `load_site()` picks the profile named by HPCLAB_SITE, else `local` (the embedded
cluster); site/modules.py turns modules and modulepath into a job's `module load` lines. This
module also answers the questions validation asks about the machine: how many nodes and cores a
partition has (from the file, or from `sinfo` when `discover_cores` is true), which Open MPI
components and parameters exist (`ompi_info --parsable --all`, cached), and which NUMA nodes exist
(`numactl -H`).
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import re
import shutil
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from hpclab.core import commands, paths
from hpclab.core.errors import HpclabError
from hpclab.core.io import write_atomic
from hpclab.site import ompi
from hpclab.site import slurm

DEFAULT_SITE = "local"


@dataclass(frozen=True)
class Partition:
    """One partition: nodes (count), cores_per_node (CPUs Slurm schedules per node),
    max_nodes (largest job), max_time (Slurm time string) and mem_per_node (MB Slurm can give a
    job on one node, discovered from sinfo on the local cluster); None where unknown."""

    name: str
    nodes: int | None = None
    cores_per_node: int | None = None
    max_nodes: int | None = None
    max_time: str | None = None
    mem_per_node: int | None = None


@dataclass(frozen=True)
class SiteMpi:
    """An MPI library a site offers to specs (mpi: <name>): name (a record of
    hpclab.site.mpi_libraries), the module that selects it and the folder to `module use` first
    (None: the record's and mpi_libraries.modulefiles_dir())."""

    name: str
    module: str | None = None
    modulepath: str | None = None


@dataclass(frozen=True)
class Site:
    """A validated site profile (see sites/schema.json for what each field means)."""

    name: str
    description: str
    partitions: tuple[Partition, ...]
    default_partition: str
    launcher: str
    srun_mpi: str = "pmix"
    discover_cores: bool = False
    account: str | None = None
    qos: str | None = None
    constraint: str | None = None
    modules: tuple[str, ...] = ()
    extra_sbatch: dict = field(default_factory=dict)
    env: dict = field(default_factory=dict)
    modulepath: tuple[str, ...] = ()  # folders `module use`d before the modules load (site/modules.py)
    mpi_libraries: tuple[SiteMpi, ...] = ()  # what a spec's mpi: may name (hpclab.site.mpi_libraries)
    # the interface TCP should use, by place ("on_node", "between_nodes"); a place not named is
    # left to the library (each library's record says how it is told: tcp_pin)
    tcp_interfaces: dict = field(default_factory=dict)
    # the nodes are virtual nodes of one machine (one kernel, one /dev/shm): a library that finds
    # its shared-memory peers by the machine would carry messages between them through memory
    nodes_share_a_kernel: bool = False
    source: Path | None = None

    def partition_names(self) -> list[str]:
        return [p.name for p in self.partitions]

    def mpi_names(self) -> list[str]:
        return [m.name for m in self.mpi_libraries]

    def tcp_interface(self, nodes: int) -> str | None:
        """The interface TCP should use for a job on `nodes` nodes: tcp_interfaces' on_node for
        one node, between_nodes for more; None when the profile leaves it to the library."""
        return self.tcp_interfaces.get("on_node" if nodes == 1 else "between_nodes")

    def mpi(self, name: str) -> SiteMpi | None:
        """The site's entry for MPI library `name`, or None when the site does not offer it."""
        return next((m for m in self.mpi_libraries if m.name == name), None)

    def partition(self, name: str | None = None) -> Partition:
        """The partition `name` (default: the site's default), with nodes and cores filled in
        from the running cluster when the site says discover_cores. Raises HpclabError for a
        partition the site does not list."""
        name = name or self.default_partition
        for p in self.partitions:
            if p.name == name:
                break
        else:
            raise HpclabError(
                f"partition {name!r} is not part of site {self.name!r}",
                f"use one of: {', '.join(self.partition_names())} (site file {self.source})",
            )
        if self.discover_cores:
            nodes, cores = discover_partition(name)
            p = Partition(p.name, nodes, cores, p.max_nodes or nodes, p.max_time,
                          discover_memory(name) or p.mem_per_node)
        return p


def _schema() -> dict:
    return json.loads((paths.sites_dir() / "schema.json").read_text())


def site_path(name_or_path: str | os.PathLike) -> Path:
    """The YAML file for a site name (sites/<name>.yaml) or an explicit path."""
    text = str(name_or_path)
    if text.endswith((".yaml", ".yml")) or os.sep in text:
        return Path(text)
    return paths.sites_dir() / f"{text}.yaml"


def available_sites() -> list[str]:
    return sorted(p.stem for p in paths.sites_dir().glob("*.yaml"))


def load_site(name_or_path: str | os.PathLike | None = None) -> Site:
    """Load and validate a site profile.

    name_or_path: a site name (file sites/<name>.yaml), a path to a YAML file, or None for
    $HPCLAB_SITE (default "local"). Returns a Site; raises HpclabError if the file is missing,
    is not YAML, or breaks the schema (unknown keys included).
    """
    import jsonschema

    name_or_path = name_or_path or os.environ.get("HPCLAB_SITE") or DEFAULT_SITE
    path = site_path(name_or_path)
    if not path.is_file():
        raise HpclabError(
            f"site profile {str(name_or_path)!r} not found ({path})",
            f"known sites: {', '.join(available_sites()) or 'none'}; "
            "copy sites/example-cluster.yaml to make a new one",
        )
    try:
        data = yaml.safe_load(path.read_text())
    except yaml.YAMLError as exc:
        raise HpclabError(f"site profile {path} is not valid YAML: {exc}", "fix the file") from None
    validator = jsonschema.Draft202012Validator(_schema())
    errors = sorted(validator.iter_errors(data), key=lambda e: list(e.absolute_path))
    if errors:
        lines = [f"{'/'.join(map(str, e.absolute_path)) or '(top level)'}: {e.message}" for e in errors]
        raise HpclabError(
            f"site profile {path} does not match sites/schema.json: " + "; ".join(lines),
            "compare with sites/example-cluster.yaml (every key is documented there)",
        )
    parts = tuple(Partition(**p) for p in data["partitions"])
    if data["default_partition"] not in [p.name for p in parts]:
        raise HpclabError(
            f"site profile {path}: default_partition {data['default_partition']!r} is not in partitions",
            "add it to partitions or change default_partition",
        )
    return Site(
        name=data["name"],
        description=data["description"],
        partitions=parts,
        default_partition=data["default_partition"],
        launcher=data["launcher"],
        srun_mpi=data.get("srun_mpi", "pmix"),
        discover_cores=data.get("discover_cores", False),
        account=data.get("account"),
        qos=data.get("qos"),
        constraint=data.get("constraint"),
        modules=tuple(data.get("modules", [])),
        extra_sbatch=dict(data.get("extra_sbatch", {})),
        env=dict(data.get("env", {})),
        modulepath=tuple(data.get("modulepath", [])),
        mpi_libraries=tuple(SiteMpi(**m) for m in data.get("mpi_libraries", [])),
        tcp_interfaces=dict(data.get("tcp_interfaces", {})),
        nodes_share_a_kernel=bool(data.get("nodes_share_a_kernel", False)),
        source=path,
    )


# --- facts about the machine ------------------------------------------------------------------


def discover_partition(name: str) -> tuple[int, int]:
    """(nodes, cores per node) of partition `name`, asked from the running cluster with sinfo.
    Where nodes differ, the smallest core count is returned (a job must fit on any node)."""

    out = slurm.run_slurm(["sinfo", "--noheader", "--partition", name, "--format=%D|%c"],
                          what=f"ask Slurm about partition {name!r}")
    nodes, cores = 0, []
    for line in out.splitlines():
        if "|" in line:
            n, c = line.strip().split("|")
            nodes += int(n)
            cores.append(int(c.rstrip("+")))
    if not nodes:
        raise HpclabError(
            f"Slurm reports no nodes in partition {name!r}",
            "check `sinfo`; for the local cluster run `hpclab cluster up`",
        )
    return nodes, min(cores)


def discover_memory(name: str) -> int | None:
    """Memory per node (MB) Slurm can give a job in partition `name` (sinfo %m, the smallest
    node); None when Slurm does not say."""

    out = slurm.run_slurm(["sinfo", "--noheader", "--partition", name, "--format=%m"],
                          what=f"ask Slurm about the memory of partition {name!r}", check=False)
    mems = [int(m.rstrip("+")) for m in out.split() if m.rstrip("+").isdigit()]
    return min(mems) if mems else None


def store_ompi_info() -> Path:
    """Save the ompi_info text once under runs/_site/<sha256-prefix>.txt (content-addressed, so a
    run folder can reference it instead of copying it). Returns the file's path."""
    text = ompi.all_text()
    digest = hashlib.sha256(text.encode()).hexdigest()[:16]
    target = paths.runs_dir() / "_site" / f"{digest}.txt"
    if not target.exists():
        target.parent.mkdir(parents=True, exist_ok=True)
        write_atomic(target, text)
    return target


def mca_components() -> dict[str, frozenset[str]]:
    """Open MPI components installed here, by framework: {"btl": {"self", "tcp", ...}, ...}."""
    info = ompi.this_machine()
    return {fw: frozenset(info.available(fw)) for fw in info.frameworks()}


def mca_params() -> frozenset[str]:
    """Names of every MCA parameter Open MPI knows here (e.g. "btl_tcp_if_include")."""
    params = ompi.this_machine().params
    return frozenset(params["param"]) if not params.empty else frozenset()


@functools.lru_cache(maxsize=1)
def numa_nodes() -> frozenset[int]:
    """NUMA node numbers of this machine (from `numactl -H`; {0} when numactl is missing)."""
    if not shutil.which("numactl"):
        return frozenset({0})
    res = commands.run(["numactl", "-H"], "ask numactl for the NUMA nodes")
    m = re.search(r"available:\s*\d+\s*nodes\s*\(([^)]*)\)", res.stdout if res else "")
    if not m:
        return frozenset({0})
    nodes: set[int] = set()
    for part in m.group(1).split(","):
        a, _, b = part.partition("-")
        nodes.update(range(int(a), int(b or a) + 1))
    return frozenset(nodes)
