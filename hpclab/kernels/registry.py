"""The kernel registry: one Kernel record per C kernel, found by importing every module here.

A kernel module (hpclab/kernels/<name>.py) builds a Kernel and calls register() at import time.
get() and names() import every module of this package once, so a new module is found without a
list to edit. Nothing here imports a kernel module by name: the registry sits below them.
"""

from __future__ import annotations

import importlib
import pkgutil
from dataclasses import dataclass
from typing import Any, Callable

from pydantic import BaseModel, ConfigDict, Field, field_validator

from hpclab.core.errors import HpclabError


class KernelArgs(BaseModel):
    """Arguments common to every kernel; each kernel's model adds its own fields and a
    `kernel: Literal["<name>"]` discriminator. Unknown fields are refused. `extra_args` passes
    flags a model does not know yet (a newer kernel) verbatim; hpclab.spec.checks checks them
    against the kernel's --help before submission."""

    model_config = ConfigDict(extra="forbid", validate_default=True)

    extra_args: list[str] = Field(default_factory=list)

    @field_validator("extra_args")
    @classmethod
    def _extra(cls, v):
        for a in v:
            if not a or "\n" in a or "\0" in a:
                raise ValueError("extra_args entries must be non-empty single-line strings")
        return v

    def to_argv(self) -> list[str]:
        """Command-line arguments, in field order: --field-name value; a True bool is a bare flag."""
        argv: list[str] = []
        for name in type(self).model_fields:
            if name in ("extra_args", "kernel"):
                continue
            value = getattr(self, name)
            flag = "--" + name.replace("_", "-")
            if value is None or value is False:
                continue
            argv += [flag] if value is True else [flag, str(value)]
        return argv + list(self.extra_args)


def _no_check(spec: Any) -> None:
    return None


@dataclass(frozen=True)
class Kernel:
    """One C kernel as hpclab sees it.

    name: the kernel's name (spec `kernel:`, banner, JSON `kernel`); args: its KernelArgs model;
    table(doc, source) -> (tidy DataFrame, extra attrs): a checked JSON report as rows;
    text(text, source) -> DataFrame or None: its stdout alone, where a run folder may lack
    result.json; check(spec): raises ValueError for a spec this kernel cannot run (machine-free
    checks, e.g. pingpong needs two ranks); template: file in slurm-templates/; binary: file in
    build/bin/ (both default to the name); source: folder in src/ (default: the name).

    A kernel that runs the spec's own `command:` (kernel: program, a user's executable or
    script) instead of a binary of build/bin sets `command`: it turns the words of `command:`
    into the words the job runs (absolute paths, at spec time; ValueError if it cannot), and
    `problems(spec)` lists what this machine says against them before submission ((what, what
    to do) pairs: a missing or non-executable file). Such a kernel has no source, no binary and
    no output contract (`contract` is False): its results are its trace and its output.
    """

    name: str
    args: type[KernelArgs]
    table: Callable[[dict, str], tuple[Any, dict]]
    text: Callable[[str, str], Any] | None = None
    check: Callable[[Any], None] = _no_check
    template: str = ""
    binary: str = ""
    source: str = ""
    command: Callable[[list[str]], list[str]] | None = None
    problems: Callable[[Any], list[tuple[str, str]]] | None = None

    def __post_init__(self):
        # frozen: defaults that depend on the name are set once, here; a kernel that runs the
        # spec's command has no binary and no source folder of its own
        own = self.command is None
        defaults = {"template": f"{self.name}.sh.j2", "binary": self.name if own else "",
                    "source": self.name if own else ""}
        for key, value in defaults.items():
            if not getattr(self, key):
                object.__setattr__(self, key, value)

    @property
    def contract(self) -> bool:
        """Does the kernel write the shared output contract (docs/kernel-contract.md:
        result.json through --json, the stdout report) that parse_run reads into its table?"""
        return self.command is None


_KERNELS: dict[str, Kernel] = {}
_discovered = False


def register(kernel: Kernel) -> Kernel:
    """Add a kernel (called by its module at import). Returns it. Refuses a second kernel of the
    same name and an args model whose `kernel` discriminator names another kernel."""
    field = kernel.args.model_fields.get("kernel")
    if field is None or field.default != kernel.name:
        raise HpclabError(f"kernel {kernel.name!r}: its args model {kernel.args.__name__} needs "
                          f"a field kernel: Literal[{kernel.name!r}] = {kernel.name!r}",
                          "the spec picks the args model by that field")
    old = _KERNELS.get(kernel.name)
    if old is not None and old is not kernel and old.args.__module__ != kernel.args.__module__:
        raise HpclabError(f"two modules register kernel {kernel.name!r}: "
                          f"{old.args.__module__} and {kernel.args.__module__}",
                          "rename one of them")
    _KERNELS[kernel.name] = kernel
    return kernel


def _discover() -> None:
    # Import every module of this package once; kernel modules register themselves. Done on
    # first use rather than at import so that the kernel modules may import this one.
    global _discovered
    if _discovered:
        return
    _discovered = True
    package = importlib.import_module(__package__)
    for info in sorted(pkgutil.iter_modules(package.__path__), key=lambda m: m.name):
        if not info.name.startswith("_"):
            importlib.import_module(f"{__package__}.{info.name}")


def names() -> tuple[str, ...]:
    """The registered kernels' names, sorted."""
    _discover()
    return tuple(sorted(_KERNELS))


def kernels() -> list[Kernel]:
    """Every registered Kernel, sorted by name."""
    return [_KERNELS[n] for n in names()]


def get(name: str) -> Kernel:
    """The Kernel called `name`; HpclabError listing the known kernels for any other name."""
    known = names()
    if not isinstance(name, str) or name not in _KERNELS:
        raise HpclabError(f"unknown kernel {name!r}: hpclab knows {', '.join(known)}",
                          "use one of these names (a new kernel needs src/<name>/, "
                          "slurm-templates/<name>.sh.j2 and hpclab/kernels/<name>.py)")
    return _KERNELS[name]
