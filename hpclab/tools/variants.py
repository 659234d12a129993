"""Kernel variants: one C kernel built with other compile-time settings, measured side by side.

A kernel's tuning knobs are `#ifndef` defaults (POISSON_PREFETCH in src/poisson/poisson.c, say);
changing one means a rebuild. `build` compiles the kernel again with -D settings into
build/variants/<name>/, so the course's binary in build/bin/ (the one every notebook, lab and spec
runs) is never replaced. `compare` runs several builds of a kernel in turn, one task on one core
as a Slurm job step (srun words from hpclab.jobs.templates.step_argv), each writing the kernel's
JSON report (its build flags included) into one RunFolder of kind "variants"
(runs/_variants/<experiment>/<id>/), and returns one row per run.
"""

from __future__ import annotations

import re
from pathlib import Path

import pandas as pd

from hpclab.core import commands, paths
from hpclab.core.errors import HpclabError
from hpclab.jobs import steps, templates
from hpclab.kernels import contract, registry
from hpclab.kernels import poisson as poisson_report
from hpclab.runs.folder import RunFolder
from hpclab.site import profile as site_mod

_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")
_MACRO = re.compile(r"^[A-Z][A-Z0-9_]*$")


def variant_dir(name: str) -> Path:
    """<output>/variants/<name> (paths.output_dir: build/ or a room student's own): the binary in
    bin/, the objects in obj/."""
    if not _NAME.match(name):
        raise HpclabError(f"variant name {name!r} is not a plain folder name",
                          "use letters, digits, '.', '_' or '-', e.g. 'no-prefetch'")
    return paths.output_dir() / "variants" / name


def build(kernel: str, name: str, defines: dict) -> Path:
    """Build `kernel` with -D<macro>=<value> for each item of `defines` into variant_dir(name);
    returns the binary's path. The course's build/bin/<kernel> is not touched. Raises HpclabError
    for an unknown kernel, a malformed macro name or a failed build (with make's last lines)."""
    unit = registry.get(kernel)   # a clear error for an unknown kernel
    bad = [m for m in defines if not _MACRO.match(str(m))]
    if bad:
        raise HpclabError(f"not a C macro name: {', '.join(map(str, bad))}",
                          "use the setting's name from the kernel source, e.g. POISSON_PREFETCH")
    where = variant_dir(name)
    flags = " ".join(f"-D{m}={v}" for m, v in defines.items())
    argv = ["make", "-s", "-C", str(paths.repo() / "src" / unit.source), f"EXTRA_CFLAGS={flags}",
            f"BINDIR={where / 'bin'}", f"OBJDIR={where / 'obj'}"]
    r = commands.run(argv, f"build {kernel} with {flags}", timeout=600)
    if r is None:
        raise HpclabError(f"building {kernel} with {flags} took more than 10 minutes", "build it by hand with the line above")
    if r.returncode != 0:
        tail = "\n".join((r.stdout + r.stderr).strip().splitlines()[-8:])
        raise HpclabError(f"building {kernel} with {flags} failed:\n{tail}",
                          f"run `{' '.join(argv)}` in a terminal to see the whole output")
    return where / "bin" / unit.binary


def compare(builds: dict, args: list[str], repetitions: int = 3, experiment: str = "variants",
            time_limit: str = "00:10:00") -> pd.DataFrame:
    """Run each build ({label: binary path}) `repetitions` times, the builds taking turns, one
    task on one core (srun), with the same kernel arguments `args` (without --json).

    Returns one row per run: build, repetition, binary, build_flags (as the binary reports them),
    report (the JSON file) and, for poisson, lups (lattice updates per second) and wall_time [s].
    Reports are kept in a RunFolder of kind "variants", runs/_variants/<experiment>/<id>/. Raises HpclabError when a binary is
    missing or a run fails (with its last lines of output)."""
    if repetitions < 1:
        raise HpclabError(f"repetitions = {repetitions}", "run each build at least once")
    for label, exe in builds.items():
        if not Path(exe).is_file():
            raise HpclabError(f"the binary of {label!r}, {exe}, does not exist",
                              "build it first (hpclab.tools.variants.build, or make -C src)")
    folder = RunFolder.create_kind("variants", experiment).path
    site = site_mod.load_site()
    words = templates.step_argv(site, job_name="hpclab-variants", time=time_limit)
    env = templates.step_env(site)
    rows = []
    for rep in range(1, repetitions + 1):
        for k, (label, exe) in enumerate(builds.items()):
            out = folder / f"{k}-{rep}.json"
            argv = [*words, str(exe), *map(str, args), "--json", str(out)]
            code = steps.run_step(argv, folder, env, timeout=3600, stdout=f"{k}-{rep}.stdout",
                                  stderr=f"{k}-{rep}.stderr", what=f"{label!r} run {rep}")
            if code != 0 or not out.is_file():
                said = "".join((folder / f"{k}-{rep}.{s}").read_text(errors="replace") for s in ("stdout", "stderr"))
                tail = "\n".join(said.strip().splitlines()[-8:])
                raise HpclabError(f"{label!r} run {rep} failed (exit {code}):\n{tail}",
                                  f"its output is in {folder}")
            doc = contract.load_result(out, kernel="poisson")
            res = poisson_report.measures(doc, str(out))
            rows.append({"build": label, "repetition": rep, "binary": str(exe),
                         "build_flags": doc.get("config", {}).get("build_flags"), "report": str(out),
                         "lups": res.get("lattice_updates_per_sec"), "wall_time": poisson_report.wall_time(doc, str(out))})
    return pd.DataFrame(rows)
