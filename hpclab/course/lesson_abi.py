"""Notebook 02's ABI section: one binary built against the MPI 5.0 standard ABI, run under every
library here that ships it, and the usual builds beside it (each names its own libmpi).

The MPI 5.0 standard (2025) fixes an application binary interface: handles, constants and the
library's name, libmpi_abi.so.1. A program built once against it runs under any library that
provides that file. Here the builder is MPICH 5's mpicc_abi; whether a library ships the ABI is
read from its prefix (its record's `abi` says the same, and tests/test_mpi_libraries.py checks it).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from hpclab.core import commands, paths
from hpclab.core.errors import HpclabError
from hpclab.site import mpi_libraries
from hpclab.spec import model as spec

SOURCE = Path("src") / "abi" / "which_library.c"
ABI_LIBRARY = "libmpi_abi.so.1"
EXPERIMENT = "02-abi"


@dataclass(frozen=True)
class AbiBuild:
    """The program built once: with which library's wrapper, the command, the binary and the
    shared libraries its ELF header asks for (NEEDED)."""

    builder: str
    command: list[str]
    exe: Path
    needed: list[str]


def needed(exe: Path) -> list[str]:
    """The NEEDED entries of an ELF binary (readelf -d): the libraries the loader must find."""
    text = commands.output(["readelf", "-d", str(exe)], f"read the dynamic section of {exe}",
                           "install binutils (make setup does)")
    return re.findall(r"\(NEEDED\)\s+Shared library: \[([^\]]+)\]", text)


def ships_abi(lib: mpi_libraries.MpiLibrary) -> bool:
    """Is libmpi_abi.so.1 in the library's lib folder (or, for a distribution's library under
    /usr, its multiarch folder)?"""
    return any(lib.prefix.glob(f"lib/{ABI_LIBRARY}")) or any(lib.prefix.glob(f"lib/*-linux-*/{ABI_LIBRARY}"))


def build(out_dir: Path | None = None) -> AbiBuild:
    """which_library.c built with the first installed library that has an ABI wrapper (mpicc_abi).
    Raises HpclabError when none has, naming what to install."""
    builder = next((lib for lib in mpi_libraries.LIBRARIES if lib.installed() and (lib.bindir / "mpicc_abi").exists()),
                   None)
    if builder is None:
        raise HpclabError("no MPI library here has an MPI 5.0 ABI wrapper (mpicc_abi)",
                          "install MPICH 5 beside the system library: make mpi-libraries")
    out_dir = out_dir or paths.build_dir() / "abi"
    out_dir.mkdir(parents=True, exist_ok=True)
    exe = out_dir / "which-library"
    command = [str(builder.bindir / "mpicc_abi"), str(paths.repo() / SOURCE), "-o", str(exe)]
    commands.output(command, "build the ABI program", "read the compiler's message above")
    return AbiBuild(builder.name, command, exe, needed(exe))


def usual_builds() -> dict[str, list[str]]:
    """{library: the MPI libraries its own build of the ping-pong asks for}: each names its
    implementation's libmpi (Open MPI's libmpi.so.40, MPICH's libmpi.so.12)."""
    out = {}
    for lib in mpi_libraries.LIBRARIES:
        exe = mpi_libraries.build_dirs(None if lib.requirement is None else lib.name)[0] / "pingpong"
        if exe.is_file():
            out[lib.name] = [n for n in needed(exe) if "mpi" in n]
    return out


def specs(abi: AbiBuild, repetitions: int = 1) -> tuple[list, dict[str, str]]:
    """A 2-rank job of the ABI program under every installed library that ships libmpi_abi.so.1
    (its lib folder first on LD_LIBRARY_PATH: the binary's RUNPATH names the builder's, and
    LD_LIBRARY_PATH comes before a RUNPATH), and {library: why not} for the others."""
    out, not_run = [], {}
    for lib in mpi_libraries.LIBRARIES:
        if not lib.installed():
            not_run[lib.name] = "not installed (make mpi-libraries)"
        elif not ships_abi(lib):
            not_run[lib.name] = f"its prefix has no {ABI_LIBRARY} ({lib.prefix / 'lib'}): it does not ship the MPI 5.0 ABI"
        else:
            out.append(spec.make_spec(kernel="program", command=[str(abi.exe)], ntasks=2, mpi=lib.name,
                                      env={"LD_LIBRARY_PATH": str(lib.prefix / "lib")}, label=lib.name,
                                      repetitions=repetitions, experiment=EXPERIMENT))
    return out, not_run


def sentences(abi: AbiBuild, runs, not_run: dict[str, str], usual: dict[str, list[str]]) -> list[str]:
    """What the build and the runs showed, from their outputs."""
    usual_text = "; ".join(f"{name}: {', '.join(libs)}" for name, libs in usual.items())
    out = [f"Built once with {abi.builder}'s mpicc_abi, the program asks the loader for {', '.join(abi.needed)}"
           + (f"; the usual builds of the ping-pong ask for {usual_text}." if usual else ".")]
    handed: dict[str, str] = {}  # library -> what its ranks said they were handed
    for r in runs:
        text = r.folder.stdout.read_text(errors="replace") if r.folder.stdout.exists() else ""
        said = sorted(set(re.findall(r"library: (.+)", text)))
        if r.state != "completed" or not said:
            out.append(f"Under {r.spec.label} the job ended {r.state} without the program's lines: {r.folder.tail()[-300:]}")
        else:
            ranks = len(re.findall(r"^rank \d+ of", text, flags=re.M))
            out.append(f"Under {r.spec.label}: {ranks} ranks ran the same binary and each was handed {'; '.join(said)}.")
            handed[r.spec.label] = "; ".join(said)
    out += [f"Not run under {name}: {why}." for name, why in not_run.items()]
    ran = {r.spec.label for r in runs if r.state == "completed"}
    if len(set(handed.values())) >= 2:
        out.append(f"So one file, built once, ran unchanged under {len(handed)} libraries ({', '.join(handed)}), "
                   "each time handed a different implementation: what the MPI 5.0 ABI promises, shown on this machine.")
    elif len(ran) < 2:
        out.append(f"So on this machine the ABI binary runs under {len(ran)} librar{'y' if len(ran) == 1 else 'ies'}: "
                   "one binary for several libraries needs a second library that ships the ABI.")
    return out
