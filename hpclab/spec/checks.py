"""Checks of a spec against the site and this machine, run before anything is submitted.

`problems` runs the checks of CHECKS in turn, each a small function of the spec, the site and the
facts that returns the problems it finds; each problem becomes one line of an HpclabError that
says what is wrong and what to change. In that order: a partition the site does not have, more
nodes than it has, more tasks than cores, more memory than a node has, a time limit above the
partition's; binding options that belong to the other launcher; an MPI library (mpi:) the site
does not offer (did you mean) or hpclab has no record of, that is not installed, that does not
start with the launcher asked for (the measured reason), or that has no MCA; an MCA component
that `ompi_info` does not list; a NUMA node that does not exist; a missing kernel binary or a
flag its --help does not know; the kernel's own checks (kernel: program, a program that is
missing or not executable); a missing trace library. The facts (cores, components, NUMA nodes,
--help texts) come from `gather_facts`; tests pass their own Facts to check the rules on any
machine.
"""

from __future__ import annotations

import functools
import math
import re
from dataclasses import dataclass, field

from hpclab.site import mpi_libraries
from hpclab.site import profile as site_mod
from hpclab.core import commands
from hpclab.core.errors import HpclabError
from hpclab.kernels import registry
from hpclab.site.profile import Partition, Site
from hpclab.spec.model import Spec, did_you_mean, time_seconds

# Oversubscription is for teaching on small machines, not for cramming: a few ranks per core at most.
OVERSUBSCRIBE_FACTOR = 4


@dataclass
class Facts:
    """What validation needs to know about the machine: the partition (nodes, cores per node,
    limits), Open MPI components by framework, MCA parameter names, NUMA node numbers, each
    kernel's --help text (None: binary missing) and whether the trace library exists."""

    partition: Partition
    components: dict[str, frozenset[str]] | None  # None: the library has no MCA (MPICH)
    params: frozenset[str]
    numa_nodes: frozenset[int]
    kernel_help: dict[str, str | None] = field(default_factory=dict)
    trace_lib: bool = True


@functools.lru_cache(maxsize=8)
def kernel_help(kernel: str, mpi: str | None = None) -> str | None:
    """`build/bin/<binary> --help` output (stdout + stderr) of the kernel called `kernel` (its
    binary from hpclab.kernels.registry; build/<mpi>/bin with MPI library `mpi`), or None when
    the binary is missing."""
    exe = mpi_libraries.build_dirs(mpi)[0] / registry.get(kernel).binary
    if not exe.is_file():
        return None
    try:
        res = commands.run([str(exe), "--help"], f"ask {exe.name} for its options", timeout=20)
    except HpclabError:  # not executable
        return ""
    return res.stdout + res.stderr if res is not None else ""


def gather_facts(spec: Spec, site: Site) -> Facts:
    """Facts for `spec` on `site` (asks sinfo when the site discovers cores; runs ompi_info,
    numactl and the kernel's --help once per process). Raises HpclabError for an unknown
    partition."""
    mpi = _library(spec, site)
    components = site_mod.mca_components()
    if mpi is not None and mpi.requirement is not None:  # another library than the one on PATH
        components = mpi_libraries.mca_components(mpi.name) if mpi.installed() else {}
    name = mpi.name if mpi is not None else None
    return Facts(
        partition=site.partition(spec.partition),
        components=components,
        params=site_mod.mca_params(),
        numa_nodes=site_mod.numa_nodes(),
        kernel_help={spec.kernel: kernel_help(spec.kernel, name)} if registry.get(spec.kernel).contract else {},
        trace_lib=(mpi_libraries.build_dirs(name)[1] / "libmpitrace.so").is_file(),
    )


def _library(spec: Spec, site: Site) -> mpi_libraries.MpiLibrary | None:
    """The record of the spec's MPI library when the site offers it and hpclab knows it, else None
    (problems() says which)."""
    if spec.mpi is None or site.mpi(spec.mpi) is None or spec.mpi not in mpi_libraries.names():
        return None
    return mpi_libraries.get(spec.mpi)


# Each check takes the spec, the site and the facts and returns the problems it finds, as (what,
# what to do) pairs; problems() chains them in CHECKS' order, which is the order of the messages.
Problems = list[tuple[str, str]]


def _partition_exists(spec: Spec, site: Site, facts: Facts) -> Problems:
    """A partition the site does not have."""
    if spec.partition and spec.partition not in site.partition_names():
        return [(f"partition {spec.partition!r} is not part of site {site.name!r}"
                 f"{did_you_mean(spec.partition, site.partition_names())}",
                 f"use one of: {', '.join(site.partition_names())}")]
    return []


def _nodes_fit(spec: Spec, site: Site, facts: Facts) -> Problems:
    """More nodes than the partition has, or than its limit."""
    part = facts.partition
    if part.nodes is not None and spec.nodes > part.nodes:
        return [(f"nodes={spec.nodes} but partition {part.name!r} has {part.nodes} node(s)",
                 f"ask for at most nodes={part.nodes}")]
    if part.max_nodes is not None and spec.nodes > part.max_nodes:
        return [(f"nodes={spec.nodes} is above the limit of partition {part.name!r} ({part.max_nodes})",
                 f"ask for at most nodes={part.max_nodes}")]
    return []


def _cores_fit(spec: Spec, site: Site, facts: Facts) -> Problems:
    """More tasks than cores (or than OVERSUBSCRIBE_FACTOR per core), or more per node than a node has."""
    part = facts.partition
    if part.cores_per_node is None:
        return []
    cores = part.cores_per_node
    total = min(spec.nodes, part.nodes or spec.nodes) * cores
    need = spec.ntasks * spec.cpus_per_task
    if spec.oversubscribe:
        if need > OVERSUBSCRIBE_FACTOR * total:
            return [(f"oversubscribe allows at most {OVERSUBSCRIBE_FACTOR} tasks per core: ntasks={spec.ntasks} x "
                     f"cpus_per_task={spec.cpus_per_task} = {need} on {total} core(s)",
                     f"use at most ntasks={OVERSUBSCRIBE_FACTOR * total // spec.cpus_per_task}")]
        return []
    if need > total:
        return [(f"more tasks than cores: ntasks={spec.ntasks} x cpus_per_task={spec.cpus_per_task} "
                 f"= {need} cores, but {spec.nodes} node(s) of partition {part.name!r} have {total}",
                 f"use at most ntasks={total // spec.cpus_per_task} with cpus_per_task={spec.cpus_per_task}"
                 f", or more nodes")]
    per_node = spec.ntasks_per_node or math.ceil(spec.ntasks / spec.nodes)
    if per_node * spec.cpus_per_task > cores:
        return [(f"{per_node} task(s) per node x cpus_per_task={spec.cpus_per_task} does not fit "
                 f"on one node of {part.name!r} ({cores} cores)",
                 "lower ntasks_per_node or cpus_per_task")]
    return []


def _memory_fits(spec: Spec, site: Site, facts: Facts) -> Problems:
    """More memory per node (mem, or mem_per_cpu times the CPUs of a node) than a node has."""
    part = facts.partition
    if part.mem_per_node is None:
        return []
    per_node_tasks = spec.ntasks_per_node or math.ceil(spec.ntasks / spec.nodes)
    need_mb = spec.mem or (spec.mem_per_cpu or 0) * per_node_tasks * spec.cpus_per_task
    if need_mb <= part.mem_per_node:
        return []
    asked = f"mem={spec.mem}" if spec.mem else (
        f"mem_per_cpu={spec.mem_per_cpu} x {per_node_tasks * spec.cpus_per_task} CPU(s) per node")
    return [(f"{asked} MB is more memory than a node of partition {part.name!r} has "
             f"({part.mem_per_node} MB)", f"ask for at most {part.mem_per_node} MB per node")]


def _time_fits(spec: Spec, site: Site, facts: Facts) -> Problems:
    """A time limit above the partition's."""
    part = facts.partition
    if part.max_time is not None and spec.time_seconds() > time_seconds(part.max_time):
        return [(f"time={spec.time} is above partition {part.name!r}'s limit {part.max_time}",
                 f"use time: {part.max_time} or less")]
    return []


def _binding_fits_launcher(spec: Spec, site: Site, facts: Facts) -> Problems:
    """Binding options of the other launcher than the one that will start the job (when the spec
    leaves the launcher to the MPI library or the site)."""
    if spec.launcher is not None:
        return []
    chosen = _library(spec, site)
    launcher = chosen.launcher.kind if chosen is not None else site.launcher
    wrong = spec.binding.mpirun_fields() if launcher == "srun" else spec.binding.srun_fields()
    if not wrong:
        return []
    other = "mpirun" if launcher == "srun" else "srun"
    who = f"MPI library {chosen.name}" if chosen is not None else f"site {site.name!r}"
    return [(f"binding.{wrong[0]} is an {other} option, but {who} launches with {launcher}",
             f"set launcher: {other} in the spec, or use the {launcher} binding options")]


def _mpi_known(spec: Spec, site: Site, facts: Facts) -> Problems:
    """An MPI library (mpi:) the site does not offer, or that hpclab has no record of."""
    if spec.mpi is None:
        return []
    offered = site.mpi_names()
    if spec.mpi not in offered:
        return [(f"mpi {spec.mpi!r} is not offered by site {site.name!r}{did_you_mean(spec.mpi, offered)}",
                 f"use one of: {', '.join(offered)}" if offered else
                 "the site profile lists no mpi_libraries; leave mpi: unset")]
    if _library(spec, site) is None:
        return [(f"mpi {spec.mpi!r} has no record in hpclab/site/mpi_libraries.py"
                 f"{did_you_mean(spec.mpi, mpi_libraries.names())}",
                 f"name a known library in the site profile: {', '.join(mpi_libraries.names())}")]
    return []


def _mpi_usable(spec: Spec, site: Site, facts: Facts) -> Problems:
    """The spec's MPI library not installed, not starting with the launcher asked for (the
    measured reason), or given mca: without having MCA."""
    mpi = _library(spec, site)
    if mpi is None:
        return []
    out: Problems = []
    if not mpi.installed():
        out.append((f"MPI library {mpi.name} is not installed ({mpi.mpicc} is missing)",
                    "install it with `make mpi-libraries`"))
    if mpi.launcher_for(spec.launcher) is None:
        why = "; ".join(reason for how, reason in mpi.refused.items()
                        if how.split()[0] == spec.launcher) or "it was not measured to work here"
        out.append((f"{mpi.name} does not start with {spec.launcher} here ({why})",
                    f"leave launcher: unset; {mpi.name} starts with `{' '.join(mpi.launcher.argv)}`"))
    if spec.mca and facts.components is None:
        out.append((f"mca: selects Open MPI components, which {mpi.name} does not have",
                    f"select its transport in env: with {', '.join(mpi.selection)}"))
    return out


def _mca_known(spec: Spec, site: Site, facts: Facts) -> Problems:
    """An MCA component ompi_info does not list, or an MCA name that is neither a framework nor
    a parameter (a library without MCA: _mpi_usable says so)."""
    if facts.components is None:
        return []
    out: Problems = []
    for key, value in spec.mca.items():
        if key in facts.components:
            have = sorted(facts.components[key])
            for comp in value.lstrip("^").split(","):
                comp = comp.strip()
                if comp not in have:
                    out.append((f"MCA {key} component {comp!r} is not installed here (ompi_info lists "
                                f"{', '.join(have)}){did_you_mean(comp, have)}",
                                f"choose from {', '.join(have)}; '^name' excludes a component"))
        elif key not in facts.params:
            guess = did_you_mean(key, sorted(facts.params) + sorted(facts.components))
            out.append((f"MCA name {key!r} is neither a framework nor a parameter of this Open MPI{guess}",
                        "list them with `ompi_info --parsable --all | grep ':param:'`"))
    return out


def _numa_nodes_exist(spec: Spec, site: Site, facts: Facts) -> Problems:
    """numactl naming a NUMA node this machine does not have."""
    if spec.numactl is None:
        return []
    missing = sorted(spec.numactl.nodes() - set(facts.numa_nodes))
    if not missing:
        return []
    return [(f"numactl names NUMA node(s) {missing}, but this machine has "
             f"{sorted(facts.numa_nodes)} (numactl -H)",
             f"use node numbers from {sorted(facts.numa_nodes)}")]


def _kernel_binary_and_flags(spec: Spec, site: Site, facts: Facts) -> Problems:
    """A missing kernel binary, or a flag its --help does not list."""
    mpi = _library(spec, site)
    help_text = facts.kernel_help.get(spec.kernel)
    exe = mpi_libraries.build_dirs(mpi.name if mpi is not None else None)[0] / registry.get(spec.kernel).binary
    if spec.kernel in facts.kernel_help and help_text is None:
        return [(f"kernel binary {exe} does not exist",
                 "build the kernels with `make -C src`" if mpi is None else "build them with `make mpi-libraries`")]
    if not help_text:  # not asked (a kernel without output contract), or an empty --help
        return []
    out: Problems = []
    if not re.search(r"--[a-z]", help_text):   # it did not start: MPI_Init failed, a library is missing
        tail = " | ".join(help_text.strip().splitlines()[-3:])
        return [(f"`{exe.name} --help` printed no options, so its arguments cannot be checked; it printed: {tail}",
                 f"run `{exe} --help` by hand: an MPI library that cannot start shows there")]
    for flag in [a for a in spec.args.to_argv() if a.startswith("--")]:
        name = flag.split("=")[0]
        if not re.search(re.escape(name) + r"(?![A-Za-z0-9-])", help_text):
            known = sorted(set(re.findall(r"--[a-z][a-z0-9-]*", help_text)))
            out.append((f"{spec.kernel} does not accept {name} (its --help lists {', '.join(known)})"
                        f"{did_you_mean(name, known)}",
                        f"remove it, or run `{exe} --help`"))
    return out


def _kernel_own_checks(spec: Spec, site: Site, facts: Facts) -> Problems:
    """The kernel's own checks on this machine (program: its command)."""
    unit = registry.get(spec.kernel)
    return list(unit.problems(spec)) if unit.problems is not None else []


def _trace_library_exists(spec: Spec, site: Site, facts: Facts) -> Problems:
    """trace: true without the tracer library built for the spec's MPI library."""
    if not spec.trace or facts.trace_lib:
        return []
    mpi = _library(spec, site)
    lib_dir = mpi_libraries.build_dirs(mpi.name if mpi is not None else None)[1]
    return [(f"trace: true needs {lib_dir / 'libmpitrace.so'}, which does not exist",
             ("build it with `make -C src`" if mpi is None else "build it with `make mpi-libraries`")
             + ", or set trace: false")]


CHECKS = (
    # resources
    _partition_exists, _nodes_fit, _cores_fit, _memory_fits, _time_fits,
    # launcher vs binding
    _binding_fits_launcher,
    # the MPI library: offered by the site, known to hpclab, installed, started its own way
    _mpi_known, _mpi_usable,
    # Open MPI components and parameters, NUMA
    _mca_known, _numa_nodes_exist,
    # the kernel: its binary and flags, its own checks, the tracer
    _kernel_binary_and_flags, _kernel_own_checks, _trace_library_exists,
)


def problems(spec: Spec, site: Site, facts: Facts) -> list[tuple[str, str]]:
    """Every problem of `spec` on `site` given `facts`, as (what, what to do) pairs, each check
    of CHECKS in turn; [] if none."""
    return [found for one in CHECKS for found in one(spec, site, facts)]


def check(spec: Spec, site: Site | None = None, facts: Facts | None = None) -> None:
    """Raise one HpclabError listing every problem of `spec` on `site` (default: the spec's
    site, else $HPCLAB_SITE/local); return None when the spec can be submitted."""
    site = site or site_mod.load_site(spec.site)
    facts = facts or gather_facts(spec, site)
    found = problems(spec, site, facts)
    if not found:
        return
    if len(found) == 1:
        raise HpclabError(f"spec for {spec.kernel} cannot run on site {site.name!r}: {found[0][0]}", found[0][1])
    what = "; ".join(f"({i}) {w}" for i, (w, _) in enumerate(found, 1))
    hint = "; ".join(f"({i}) {h}" for i, (_, h) in enumerate(found, 1))
    raise HpclabError(f"spec for {spec.kernel} cannot run on site {site.name!r}: {what}", hint)
