"""Experiment specs: what to run, on how many ranks and threads, placed how, over which transport.

A Spec is a typed pydantic model that rejects unknown fields. It holds the kernel and its
arguments (one sub-model per kernel), the Slurm resources, the launcher (srun or mpirun) with
its binding options, the OpenMP and numactl settings, Open MPI MCA selections, extra environment,
repetitions, a time limit, the site and an optional MPI trace. Checks that need no machine
(keywords, formats, consistency) happen here; checks against the site (cores, partitions, MCA
components, NUMA nodes) happen in hpclab.spec.checks just before submission.

Repetitions: `repetitions: R` submits the same spec as R separate jobs (R run folders). Each
repetition then gets its own allocation, provenance and failure status, which is what you want
when asking how much a measurement varies between runs; repetitions *inside* one job are the
kernel's own `reps` argument.

Sweeps: `sweep(spec, {"omp.num_threads": [1, 2], "binding.cpu_bind": ["cores", "none"]})` gives
one spec per combination (dotted field paths, last key varies fastest).
"""

from __future__ import annotations

import difflib
import itertools
import re
from pathlib import Path
from typing import Annotated, Any, Literal, Union

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from hpclab.core.errors import HpclabError
from hpclab.kernels import registry
from hpclab.kernels.registry import KernelArgs

# The kernel names and their argument models come from the registry (hpclab/kernels/<name>.py):
# a new kernel module is a new valid `kernel:` here, with its own args model.
KernelName = Literal[registry.names()]
AnyKernelArgs = Annotated[Union[tuple(k.args for k in registry.kernels())], Field(discriminator="kernel")]


def did_you_mean(word: str, choices) -> str:
    """' (did you mean X?)' for the closest choice, or ''."""
    close = difflib.get_close_matches(str(word).lower(), [str(c) for c in choices], n=1, cutoff=0.6)
    return f" (did you mean {close[0]!r}?)" if close else ""


def _bad_keyword(kind: str, word: str, valid) -> ValueError:
    return ValueError(f"unknown {kind} {word!r}{did_you_mean(word, valid)}; valid: {', '.join(valid)}")


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", validate_default=True)


# --- binding ------------------------------------------------------------------------------------

SRUN_CPU_BIND = ["none", "rank", "map_cpu", "mask_cpu", "rank_ldom", "map_ldom", "mask_ldom",
                 "sockets", "cores", "threads", "ldoms", "boards", "quiet", "verbose"]
SRUN_CPU_BIND_LIST = {"map_cpu", "mask_cpu", "map_ldom", "mask_ldom"}  # take ":<list>"
SRUN_DIST_NODE = ["block", "cyclic", "arbitrary", "plane=<n>", "*"]
SRUN_DIST_LOWER = ["block", "cyclic", "fcyclic", "*"]
SRUN_HINT = ["compute_bound", "memory_bound", "multithread", "nomultithread"]
MPIRUN_OBJECTS = ["slot", "hwthread", "core", "l1cache", "l2cache", "l3cache", "socket", "numa",
                  "board", "node"]
MPIRUN_MAP_BY = MPIRUN_OBJECTS + ["seq", "dist", "ppr:<n>:<object>"]
MPIRUN_MAP_MODS = ["PE=<n>", "span", "oversubscribe", "nooversubscribe", "nolocal", "hwtcpus",
                   "corecpus", "inherit", "noinherit"]
MPIRUN_RANK_MODS = ["span", "fill"]
MPIRUN_BIND_TO = ["none", "hwthread", "core", "l1cache", "l2cache", "l3cache", "socket", "numa", "board"]
MPIRUN_BIND_MODS = ["overload-allowed", "if-supported", "ordered"]
OMP_PROC_BIND = ["false", "true", "master", "close", "spread", "primary"]
OMP_PLACES = ["threads", "cores", "sockets", "ll_caches", "numa_domains"]

_CPU_LIST = re.compile(r"^[0-9a-fA-Fx*,]+$")


def check_cpu_bind(value: str) -> str:
    """srun --cpu-bind: comma list of keywords; map_/mask_ ones take ':<list>', and that list is
    itself comma separated (map_cpu:0,2 binds rank 0 to CPU 0 and rank 1 to CPU 2)."""
    in_list = False
    for item in value.split(","):
        if in_list and ":" not in item and _CPU_LIST.match(item) and item.lower() not in SRUN_CPU_BIND:
            continue  # the next entry of a map_/mask_ list
        in_list = False
        key, sep, arg = item.partition(":")
        key = key.strip().lower()
        if key == "no":
            key = "none"
        if key not in SRUN_CPU_BIND:
            raise _bad_keyword("srun --cpu-bind type", item, SRUN_CPU_BIND)
        if key in SRUN_CPU_BIND_LIST and not (sep and _CPU_LIST.match(arg)):
            raise ValueError(f"--cpu-bind={key} needs a list, e.g. {key}:0,1")
        if key not in SRUN_CPU_BIND_LIST and sep:
            raise ValueError(f"--cpu-bind={key} takes no ':' argument")
        in_list = key in SRUN_CPU_BIND_LIST
    return value


def check_distribution(value: str) -> str:
    """srun --distribution: node[:socket[:core]][,Pack|NoPack]."""
    main, _, pack = value.partition(",")
    if pack and pack.lower() not in ("pack", "nopack"):
        raise ValueError(f"--distribution ',{pack}': only ',Pack' or ',NoPack' may follow")
    levels = main.split(":")
    if len(levels) > 3:
        raise ValueError(f"--distribution {value!r} has more than three levels (node:socket:core)")
    node = levels[0]
    if not (node in ("block", "cyclic", "arbitrary", "*") or re.fullmatch(r"plane=[1-9][0-9]*", node)):
        raise _bad_keyword("srun --distribution", node, SRUN_DIST_NODE)
    for lvl in levels[1:]:
        if lvl not in SRUN_DIST_LOWER:
            raise _bad_keyword("srun --distribution level", lvl, SRUN_DIST_LOWER)
    return value


def check_map_by(value: str) -> str:
    """mpirun --map-by: [ppr:N:]object[:modifier...]."""
    parts = value.split(":")
    obj = parts.pop(0).lower()
    if obj == "ppr":
        if len(parts) < 2 or not parts[0].isdigit() or int(parts[0]) < 1:
            raise ValueError("--map-by ppr needs a count and an object, e.g. ppr:2:socket")
        parts.pop(0)
        obj = parts.pop(0).lower()
        if obj not in MPIRUN_OBJECTS:
            raise _bad_keyword("mpirun --map-by ppr object", obj, MPIRUN_OBJECTS)
    elif obj not in MPIRUN_OBJECTS + ["seq", "dist"]:
        raise _bad_keyword("mpirun --map-by", obj, MPIRUN_MAP_BY)
    for mod in parts:
        if re.fullmatch(r"pe=[1-9][0-9]*", mod.lower()):
            continue
        if mod.lower() not in MPIRUN_MAP_MODS:
            raise _bad_keyword("mpirun --map-by modifier", mod, MPIRUN_MAP_MODS)
    return value


def _check_obj_mods(value: str, flag: str, objects, mods) -> str:
    obj, *rest = value.split(":")
    if obj.lower() not in objects:
        raise _bad_keyword(f"mpirun {flag}", obj, objects)
    for mod in rest:
        if mod.lower() not in mods:
            raise _bad_keyword(f"mpirun {flag} modifier", mod, mods)
    return value


class Binding(_Strict):
    """Placement options. srun: cpu_bind (--cpu-bind), distribution (--distribution), hint
    (--hint). mpirun: map_by, rank_by, bind_to, report_bindings. Binding reports are always
    collected (srun gets 'verbose' added), so provenance shows where every rank ran."""

    cpu_bind: str | None = None
    distribution: str | None = None
    hint: str | None = None
    map_by: str | None = None
    rank_by: str | None = None
    bind_to: str | None = None
    report_bindings: bool = True

    _cpu_bind = field_validator("cpu_bind")(lambda v: v if v is None else check_cpu_bind(v))
    _dist = field_validator("distribution")(lambda v: v if v is None else check_distribution(v))
    _map_by = field_validator("map_by")(lambda v: v if v is None else check_map_by(v))
    _rank_by = field_validator("rank_by")(
        lambda v: v if v is None else _check_obj_mods(v, "--rank-by", MPIRUN_OBJECTS, MPIRUN_RANK_MODS))
    _bind_to = field_validator("bind_to")(
        lambda v: v if v is None else _check_obj_mods(v, "--bind-to", MPIRUN_BIND_TO, MPIRUN_BIND_MODS))

    @field_validator("hint")
    @classmethod
    def _hint(cls, v):
        if v is not None and v not in SRUN_HINT:
            raise _bad_keyword("srun --hint", v, SRUN_HINT)
        return v

    def srun_fields(self) -> list[str]:
        return [f for f in ("cpu_bind", "distribution", "hint") if getattr(self, f) is not None]

    def mpirun_fields(self) -> list[str]:
        return [f for f in ("map_by", "rank_by", "bind_to") if getattr(self, f) is not None]


class Omp(_Strict):
    """OpenMP environment: num_threads (OMP_NUM_THREADS), proc_bind (OMP_PROC_BIND, may be a
    comma list for nested levels), places (OMP_PLACES: a keyword, keyword(n), or explicit
    '{0:2},{2:2}' intervals)."""

    num_threads: int | None = Field(None, ge=1, le=1024)
    proc_bind: str | None = None
    places: str | None = None

    @field_validator("proc_bind")
    @classmethod
    def _proc_bind(cls, v):
        if v is None:
            return v
        for item in str(v).split(","):
            if item.strip().lower() not in OMP_PROC_BIND:
                raise _bad_keyword("OMP_PROC_BIND value", item, OMP_PROC_BIND)
        return v

    @field_validator("places")
    @classmethod
    def _places(cls, v):
        if v is None:
            return v
        if re.fullmatch(r"(\{[0-9:, ]+\}(:[0-9]+(:-?[0-9]+)?)?,?)+", v.replace(" ", "")):
            return v
        m = re.fullmatch(r"([a-z_]+)(\([1-9][0-9]*\))?", v)
        if not m or m.group(1) not in OMP_PLACES:
            raise _bad_keyword("OMP_PLACES value", v, OMP_PLACES + ["{start:len},..."])
        return v

    def env(self) -> dict[str, str]:
        out = {}
        if self.num_threads is not None:
            out["OMP_NUM_THREADS"] = str(self.num_threads)
        if self.proc_bind is not None:
            out["OMP_PROC_BIND"] = self.proc_bind
        if self.places is not None:
            out["OMP_PLACES"] = self.places
        return out


_NODE_LIST = r"^(all|[0-9]+(-[0-9]+)?(,[0-9]+(-[0-9]+)?)*)$"


class Numactl(_Strict):
    """numactl options wrapped around each rank: membind / cpunodebind / interleave (NUMA node
    lists like "0", "0,1", "0-1", "all"), preferred (one node), localalloc, physcpubind (CPUs)."""

    membind: str | None = Field(None, pattern=_NODE_LIST)
    cpunodebind: str | None = Field(None, pattern=_NODE_LIST)
    interleave: str | None = Field(None, pattern=_NODE_LIST)
    preferred: int | None = Field(None, ge=0)
    localalloc: bool = False
    physcpubind: str | None = Field(None, pattern=r"^[0-9]+(-[0-9]+)?(,[0-9]+(-[0-9]+)?)*$")

    @model_validator(mode="after")
    def _one_policy(self):
        policies = [p for p in ("membind", "interleave", "preferred") if getattr(self, p) is not None]
        if self.localalloc:
            policies.append("localalloc")
        if len(policies) > 1:
            raise ValueError(f"numactl takes one memory policy, got {', '.join(policies)}")
        return self

    def nodes(self) -> set[int]:
        """Every NUMA node number these options name ('all' names none in particular)."""
        out: set[int] = set()
        for v in (self.membind, self.cpunodebind, self.interleave):
            if v and v != "all":
                for part in v.split(","):
                    a, _, b = part.partition("-")
                    out.update(range(int(a), int(b or a) + 1))
        if self.preferred is not None:
            out.add(self.preferred)
        return out

    def argv(self) -> list[str]:
        """numactl command prefix, e.g. ['numactl', '--membind=0', '--']; [] when nothing is set."""
        opts = [f"--{k}={getattr(self, k)}" for k in ("membind", "cpunodebind", "interleave",
                                                      "preferred", "physcpubind")
                if getattr(self, k) is not None]
        if self.localalloc:
            opts.append("--localalloc")
        return ["numactl", *opts, "--"] if opts else []


# --- the spec ------------------------------------------------------------------------------------

_TIME = re.compile(r"^(?:(\d+)-)?(\d+)(?::(\d{1,2}))?(?::(\d{1,2}))?$")


def time_seconds(text: str) -> int:
    """Slurm time string -> seconds. Accepts MM, MM:SS, HH:MM:SS, D-HH, D-HH:MM, D-HH:MM:SS."""
    m = _TIME.match(str(text))
    if not m:
        raise ValueError(f"time limit {text!r} is not Slurm syntax; use e.g. 00:05:00 or 5 (minutes)")
    d, a, b, c = m.groups()
    if d is not None:  # D-HH[:MM[:SS]]
        return int(d) * 86400 + int(a) * 3600 + int(b or 0) * 60 + int(c or 0)
    if b is None:  # MM
        return int(a) * 60
    if c is None:  # MM:SS
        return int(a) * 60 + int(b)
    return int(a) * 3600 + int(b) * 60 + int(c)


_MEM = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([KMGT]?)B?\s*$", re.I)


def mem_megabytes(value: Any) -> Any:
    """A memory amount as whole MB: an int is MB already, a string may carry a unit as sbatch
    takes it (500M, 2G, 1.5G; 1024-based). Other values are left for pydantic to reject."""
    if isinstance(value, bool):
        raise ValueError("memory must be MB as a number (2000) or a size with a unit (500M, 2G)")
    if value is None or not isinstance(value, str):
        return value
    m = _MEM.match(value)
    if not m:
        raise ValueError(f"memory {value!r} is not a size; use MB as a number (2000) or a unit: 500M, 2G")
    scale = {"K": 1 / 1024, "": 1, "M": 1, "G": 1024, "T": 1024 ** 2}[m.group(2).upper()]
    return max(1, round(float(m.group(1)) * scale))


class Spec(_Strict):
    """One experiment: run `kernel` with `args` on `ntasks` ranks. Fields and units:
    nodes, ntasks, ntasks_per_node, cpus_per_task (counts); time (Slurm time limit);
    partition/site (None: the site's default); launcher (None: the site's default);
    experiment (runs/<experiment>/, default: the kernel name); label (free text);
    command (kernel: program only: the program and its arguments, paths made absolute here)."""

    kernel: KernelName
    args: AnyKernelArgs | None = None
    # A kernel that runs a program of the user's (kernel: program) takes it here, e.g.
    # [python, ring.py, --n, 3] or [./a.out]; the kernel's module resolves the words.
    command: list[str] | None = None
    experiment: str | None = Field(None, pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")
    label: str | None = Field(None, max_length=200)
    nodes: int = Field(1, ge=1, le=10000)
    ntasks: int = Field(1, ge=1, le=1000000)
    ntasks_per_node: int | None = Field(None, ge=1)
    cpus_per_task: int = Field(1, ge=1, le=4096)
    launcher: Literal["srun", "mpirun"] | None = None
    # The MPI library (a name from the site profile's mpi_libraries, e.g. mpich-5.0.2): its module
    # is loaded, its launcher starts the ranks, its build of the kernel runs. None: the MPI on the
    # job's PATH (the system Open MPI here), as before.
    mpi: str | None = Field(None, pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")
    binding: Binding = Field(default_factory=Binding)
    omp: Omp = Field(default_factory=Omp)
    numactl: Numactl | None = None
    mca: dict[str, str] = Field(default_factory=dict)
    env: dict[str, str] = Field(default_factory=dict)
    repetitions: int = Field(1, ge=1, le=100)
    time: str = "00:05:00"
    partition: str | None = None
    site: str | None = None
    trace: bool = False
    # More ranks than cores (e.g. a 2x2 process grid on a 2-core laptop): Slurm is told to
    # overcommit, and Open MPI to yield the core while it waits. Timings then include waiting for
    # a core; the course says so wherever it uses this.
    oversubscribe: bool = False
    # Memory in MB (or a string with a unit: 500M, 2G): per node (mem) or per CPU (mem_per_cpu),
    # as sbatch --mem / --mem-per-cpu. Neither: the site's default per CPU.
    mem: int | None = Field(None, ge=1)
    mem_per_cpu: int | None = Field(None, ge=1)

    @field_validator("mem", "mem_per_cpu", mode="before")
    @classmethod
    def _mem(cls, v):
        return mem_megabytes(v)

    @model_validator(mode="before")
    @classmethod
    def _kernel_args(cls, data: Any):
        # Pick the argument model from the kernel name, so an unknown argument is reported
        # against the right kernel ("stream has no argument 'grid'").
        if isinstance(data, dict) and isinstance(data.get("kernel"), str) and data["kernel"] in registry.names():
            args = data.get("args")
            model = registry.get(data["kernel"]).args
            # the args models carry the kernel name as their discriminator ("kernel" in args)
            if args is None:
                data = {**data, "args": {"kernel": data["kernel"]}}
            elif isinstance(args, dict):
                data = {**data, "args": {**args, "kernel": data["kernel"]}}
            elif isinstance(args, KernelArgs) and not isinstance(args, model):
                raise ValueError(f"args are for another kernel ({type(args).__name__}), not {data['kernel']}")
        return data

    @field_validator("command")
    @classmethod
    def _command(cls, v, info):
        kernel = info.data.get("kernel")
        if v is None or kernel is None:  # no command, or the kernel is wrong (reported already)
            return v
        unit = registry.get(kernel)
        if unit.command is None:
            takers = ", ".join(k.name for k in registry.kernels() if k.command is not None)
            raise ValueError(f"kernel {kernel} runs its own binary (build/bin/{unit.binary}) with args:, "
                             f"so it takes no command; command: is for kernel: {takers}")
        return unit.command(v)

    @field_validator("time", mode="before")
    @classmethod
    def _time(cls, v):
        if isinstance(v, bool):
            raise ValueError("time limit must be a Slurm time string or minutes")
        if isinstance(v, int):
            if v < 1:
                raise ValueError("time limit must be at least 1 minute")
            v = f"{v // 60:02d}:{v % 60:02d}:00"
        if not isinstance(v, str):
            raise ValueError("time limit must be a Slurm time string such as 00:05:00")
        if time_seconds(v) < 1:
            raise ValueError("time limit must be positive")
        return v

    @field_validator("mca")
    @classmethod
    def _mca(cls, v):
        for key, val in v.items():
            if not re.fullmatch(r"[a-z][a-z0-9_]*", key):
                raise ValueError(f"MCA name {key!r} must be lower case letters, digits and _ (e.g. 'btl')")
            if not str(val).strip() or any(c in str(val) for c in "\n'\"`$;"):
                raise ValueError(f"MCA value for {key!r} must be non-empty and without quotes or ';'")
        return v

    @field_validator("env")
    @classmethod
    def _env(cls, v):
        for key, val in v.items():
            if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", key):
                raise ValueError(f"environment variable name {key!r} is not valid")
            if key.startswith(("OMP_NUM_THREADS", "OMP_PROC_BIND", "OMP_PLACES", "OMPI_MCA_")):
                raise ValueError(f"set {key} through the omp: or mca: fields, not env:")
            if key in ("LD_PRELOAD", "MPITRACE_DIR"):
                raise ValueError(f"{key} is set by trace: true, not env:")
            if "\n" in str(val) or "\0" in str(val):
                raise ValueError(f"environment value for {key} must be one line")
        return v

    @model_validator(mode="after")
    def _consistent(self):
        if self.experiment is None:
            self.experiment = self.kernel
        if self.ntasks < self.nodes:
            raise ValueError(f"ntasks={self.ntasks} is less than nodes={self.nodes}: every node needs a task")
        if self.ntasks_per_node is not None and self.ntasks_per_node * self.nodes < self.ntasks:
            raise ValueError(f"ntasks_per_node={self.ntasks_per_node} x nodes={self.nodes} "
                             f"gives fewer than ntasks={self.ntasks}")
        if self.launcher == "srun" and self.binding.mpirun_fields():
            raise ValueError(f"binding.{self.binding.mpirun_fields()[0]} is an mpirun option; "
                             "with srun use cpu_bind / distribution / hint, or set launcher: mpirun")
        if self.launcher == "mpirun" and self.binding.srun_fields():
            raise ValueError(f"binding.{self.binding.srun_fields()[0]} is an srun option; "
                             "with mpirun use map_by / rank_by / bind_to, or set launcher: srun")
        if self.mem is not None and self.mem_per_cpu is not None:
            raise ValueError("give mem (per node) or mem_per_cpu, not both (sbatch accepts only one)")
        if self.binding.hint and self.binding.cpu_bind:
            raise ValueError("srun --hint cannot be combined with --cpu-bind (Slurm rejects it); pick one")
        registry.get(self.kernel).check(self)  # the kernel's own rules (pingpong: a pair of ranks)
        return self

    # convenience ----------------------------------------------------------------------------

    def time_seconds(self) -> int:
        return time_seconds(self.time)

    def to_dict(self) -> dict:
        """Plain JSON-able dict (what spec.json holds)."""
        return self.model_dump(mode="json")

    def flat(self) -> dict[str, Any]:
        """Dotted-key view for table columns: {'omp.num_threads': 2, 'args.size': ...}."""
        out: dict[str, Any] = {}

        def walk(prefix: str, value):
            if isinstance(value, dict) and value and prefix not in ("mca", "env"):
                for k, v in value.items():
                    walk(f"{prefix}.{k}" if prefix else k, v)
            elif isinstance(value, dict):
                for k, v in value.items():
                    out[f"{prefix}.{k}"] = v
            elif isinstance(value, list):
                out[prefix] = " ".join(map(str, value))
            else:
                out[prefix] = value

        d = self.to_dict()
        d["args"].pop("kernel", None)  # the same as the spec's kernel
        walk("", d)
        return out


# --- building specs ------------------------------------------------------------------------------


def _fields_at(loc: tuple) -> list[str]:
    """Field names of the model at error location `loc` (for 'did you mean' on unknown keys)."""
    model: Any = Spec
    parts = list(loc[:-1])
    i = 0
    while i < len(parts):
        part = parts[i]
        if part == "args" and i + 1 < len(parts) and parts[i + 1] in registry.names():
            model, i = registry.get(parts[i + 1]).args, i + 2
            continue
        f = model.model_fields.get(part) if isinstance(part, str) else None
        if f is None:
            return []
        ann = f.annotation
        model = next((c for c in (Binding, Omp, Numactl) if c is ann or c in getattr(ann, "__args__", ())), None)
        if model is None:
            return []
        i += 1
    return [f for f in model.model_fields if not (f == "kernel" and issubclass(model, KernelArgs))]


def _got(value: Any, msg: str) -> str:
    """' (got <value>)' so a message names the offending value; '' when it already does.
    Pydantic's own messages ("Input should be greater than or equal to 1") do not."""
    shown = repr(value)
    if len(shown) > 60:
        shown = shown[:57] + "..."
    return "" if shown in msg else f" (got {shown})"


def explain(exc: ValidationError, source: str = "spec") -> HpclabError:
    """Turn a pydantic ValidationError into one HpclabError listing every problem by field path."""
    lines, hints = [], []
    for err in exc.errors():
        loc = tuple(err.get("loc", ()))
        shown = [p for i, p in enumerate(loc) if not (i and loc[i - 1] == "args" and p in registry.names())]
        path = ".".join(map(str, shown)) or "(top)"
        msg = err.get("msg", "invalid").removeprefix("Value error, ")
        if err.get("type") == "extra_forbidden":
            name = str(loc[-1]) if loc else "?"
            known = _fields_at(loc)
            msg = f"unknown field {name!r}{did_you_mean(name, known)}"
            if known:
                hints.append(f"fields allowed there: {', '.join(known)}")
        elif loc:
            msg += _got(err.get("input"), msg)
        lines.append(f"{path}: {msg}")
    hint = "; ".join(dict.fromkeys(hints)) or "change the field(s) named above (the message lists valid values where there is a fixed set)"
    return HpclabError(f"invalid {source}: " + "; ".join(lines), hint)


def make_spec(data: Spec | dict | None = None, source: str = "spec", **fields) -> Spec:
    """Build a validated Spec from a dict and/or keyword fields (keywords win).
    Raises HpclabError (never a pydantic error) listing every problem."""
    if isinstance(data, Spec):
        data = data.to_dict()
    if data is not None and not isinstance(data, dict):
        raise HpclabError(f"invalid {source}: expected a mapping of fields, got {type(data).__name__}",
                          "write the spec as key: value lines (YAML) or a dict")
    merged = {**(data or {}), **fields}
    try:
        return Spec.model_validate(merged)
    except ValidationError as exc:
        raise explain(exc, source) from None


def _set_path(d: dict, path: str, value) -> None:
    keys = path.split(".")
    cur = d
    for k in keys[:-1]:
        nxt = cur.get(k)
        if nxt is None:
            nxt = cur[k] = {}
        if not isinstance(nxt, dict):
            raise HpclabError(f"sweep path {path!r}: {k!r} is not a group of fields",
                              "use a dotted path to a field, e.g. omp.num_threads or args.size")
        cur = nxt
    cur[keys[-1]] = value


def sweep(base: Spec | dict, grid: dict[str, list]) -> list[Spec]:
    """All combinations of `grid` applied to `base`.

    base: a Spec or spec dict. grid: {dotted field path: list of values}, e.g.
    {"binding.cpu_bind": ["cores", "sockets"], "omp.num_threads": [1, 2]}.
    Returns one validated Spec per combination (last key varies fastest). An unknown path or a
    bad value raises HpclabError naming the combination."""
    base_d = base.to_dict() if isinstance(base, Spec) else dict(base or {})
    if not isinstance(grid, dict):
        raise HpclabError("a sweep must be a mapping {field.path: [values]}", "e.g. {'omp.num_threads': [1, 2]}")
    keys = list(grid)
    bad = [k for k in keys if not isinstance(k, str) or not k]
    if bad:
        raise HpclabError(f"sweep key {bad[0]!r} is not a field path", "use dotted field names, e.g. omp.num_threads")
    values = []
    for k in keys:
        v = grid[k]
        if not isinstance(v, (list, tuple)) or not v:
            raise HpclabError(f"sweep values for {k!r} must be a non-empty list, got {v!r}",
                              f"e.g. {k}: [1, 2]")
        values.append(list(v))
    specs = []
    for combo in itertools.product(*values):
        d = yaml.safe_load(yaml.safe_dump(base_d))  # deep copy of plain data
        for k, v in zip(keys, combo):
            if k.split(".")[0] == "args" and d.get("args") is None:
                d["args"] = {}
            _set_path(d, k, v)
        label = ", ".join(f"{k}={v}" for k, v in zip(keys, combo))
        specs.append(make_spec(d, source=f"spec ({label})"))
    return specs


def parse_sweep_option(text: str) -> tuple[str, list]:
    """'omp.num_threads=1,2' -> ('omp.num_threads', [1, 2]) (values parsed as YAML scalars)."""
    key, sep, vals = text.partition("=")
    if not sep or not key.strip() or not vals.strip():
        raise HpclabError(f"--sweep {text!r} is not key=v1,v2", "e.g. --sweep omp.num_threads=1,2")
    return key.strip(), [yaml.safe_load(v) if v.strip() else "" for v in vals.split(",")]


MAX_SPEC_BYTES = 1_000_000  # a spec is a few hundred bytes; anything this big is not one
MAX_SPEC_DEPTH = 20  # spec fields nest three levels deep (sweep -> path -> list)


def _read_spec_text(p: Path) -> str:
    """The spec file's text, or an HpclabError saying why it cannot be a spec file: missing, a
    folder, unreadable, too large, binary or not UTF-8 (with the byte offset and line)."""
    if p.is_dir():
        raise HpclabError(f"spec file {p} is a folder, not a file", "give the path to a YAML spec file inside it")
    if not p.is_file():
        raise HpclabError(f"spec file {p} not found", "give the path to a YAML spec file")
    try:
        with open(p, "rb") as fh:
            raw = fh.read(MAX_SPEC_BYTES + 1)
    except OSError as exc:
        raise HpclabError(f"cannot read spec file {p}: {exc.strerror or exc}",
                          "check the path and its permissions") from None
    if len(raw) > MAX_SPEC_BYTES:
        raise HpclabError(f"spec file {p} is larger than {MAX_SPEC_BYTES // 1000} kB: not a spec",
                          "give the path to a YAML spec file (a few lines of key: value)")
    try:
        return raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = raw[:exc.start].count(b"\n") + 1
        kind = "a binary file" if b"\0" in raw else "not UTF-8 text"
        raise HpclabError(f"spec file {p} is {kind}: byte 0x{raw[exc.start]:02x} at line {line} "
                          f"(offset {exc.start}) is not UTF-8",
                          "save the spec as UTF-8 text in an editor, or give the right file") from None


def _check_shape(data: Any, src: str) -> None:
    """Refuse YAML nested deeper than any spec, or blown up by aliases (&a/*a), before the
    validators walk it recursively."""
    seen = 0
    stack = [(data, 0)]
    while stack:
        value, depth = stack.pop()
        seen += 1
        if depth > MAX_SPEC_DEPTH or seen > 10_000:
            raise HpclabError(f"invalid {src}: nested more than {MAX_SPEC_DEPTH} levels deep or too many values",
                              "a spec is key: value lines with a few {...} and [...] groups")
        if isinstance(value, dict):
            stack += [(v, depth + 1) for v in value.values()]
        elif isinstance(value, list):
            stack += [(v, depth + 1) for v in value]


def load_specs(path: str | Path, extra_sweep: dict[str, list] | None = None) -> list[Spec]:
    """Specs from a YAML file: one mapping (a spec, optionally with a `sweep:` mapping of dotted
    paths to value lists) or a list of such mappings. extra_sweep adds grid entries (CLI
    --sweep). Returns the expanded list; raises HpclabError for a missing, unreadable, non-text
    or invalid file (never another exception)."""
    p = Path(path)
    text = _read_spec_text(p)
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise HpclabError(f"spec file {p} is not valid YAML: {exc}", "fix the YAML syntax") from None
    except (RecursionError, ValueError) as exc:  # nesting too deep for the parser; a 5000-digit int
        raise HpclabError(f"spec file {p} cannot be read as a spec: {str(exc)[:120]}",
                          "a spec is key: value lines with a few {...} and [...] groups") from None
    _check_shape(data, f"spec in {p}")
    docs = data if isinstance(data, list) else [data]
    specs: list[Spec] = []
    for i, doc in enumerate(docs):
        src = f"spec in {p}" + (f" (entry {i})" if len(docs) > 1 else "")
        if not isinstance(doc, dict):
            raise HpclabError(f"invalid {src}: expected a mapping of fields", "write key: value lines")
        doc = dict(doc)
        grid = doc.pop("sweep", None) or {}
        if not isinstance(grid, dict):
            raise HpclabError(f"invalid {src}: sweep must map field paths to lists",
                              "e.g. sweep: {omp.num_threads: [1, 2]}")
        grid = {**grid, **(extra_sweep or {})}
        specs += sweep(doc, grid) if grid else [make_spec(doc, source=src)]
    return specs
