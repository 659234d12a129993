"""What an Open MPI installation can do, read from `ompi_info --parsable`.

The "MPI landscape" notebook shows which components each framework offers (pml, btl, mtl, osc,
coll, ...), the version and the configure command line; spec validation asks whether a requested
component exists before a job is submitted. `ompi_info --parsable` prints one colon-separated
record per line (`mca:btl:vader:version:"component:4.1.4"`); with `--all` or `--param` it adds
`mca:<framework>:<component>:param:<name>:<field>:<value>` records for every MCA parameter.
"""

from __future__ import annotations

import functools
import re
import shlex
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from hpclab.core import commands
from hpclab.core.errors import HpclabError

# The network stacks Open MPI 4.x lists under "Transports" in its configure summary, and the
# components whose presence means the stack was built in. A stack counts as available when any
# of its components is installed; whether the hardware is present is a run-time question that
# only a measurement (pingpong per transport) answers.
TRANSPORTS: list[tuple[str, list[tuple[str, str]]]] = [
    ("Shared memory (vader)", [("btl", "vader"), ("btl", "sm")]),
    ("Self (loopback)", [("btl", "self")]),
    ("TCP", [("btl", "tcp")]),
    ("OpenFabrics Verbs", [("btl", "openib")]),
    ("Open UCX", [("pml", "ucx"), ("osc", "ucx"), ("btl", "uct")]),
    ("OpenFabrics OFI Libfabric", [("mtl", "ofi"), ("btl", "ofi")]),
    ("Intel TrueScale (PSM)", [("mtl", "psm")]),
    ("Intel Omni-Path (PSM2)", [("mtl", "psm2")]),
    ("Mellanox MXM", [("mtl", "mxm"), ("pml", "yalla")]),
    ("Portals4", [("mtl", "portals4"), ("btl", "portals4")]),
    ("Cisco usNIC", [("btl", "usnic")]),
    ("Cray uGNI", [("btl", "ugni")]),
]

# Frameworks the course talks about, in the order the notebook shows them.
KEY_FRAMEWORKS = ["pml", "mtl", "btl", "osc", "coll"]


@dataclass
class OmpiInfo:
    """Everything the course reads from one `ompi_info --parsable` output.

    version: Open MPI version ("4.1.4"); mpi_api: MPI standard version ("3.1.0");
    package: the package string ("Debian OpenMPI"); prefix: installation prefix;
    configure: the configure arguments, one list item per argument;
    components: table (framework, component, mca_version, api_version, component_version);
    params: table (framework, component, param, value, source, level, type, help), empty unless
    the output came from `--all` or `--param`;
    records: every non-mca record as {"a:b:c": value}.
    """

    version: str | None = None
    mpi_api: str | None = None
    package: str | None = None
    prefix: str | None = None
    configure: list[str] = field(default_factory=list)
    components: pd.DataFrame = field(default_factory=pd.DataFrame)
    params: pd.DataFrame = field(default_factory=pd.DataFrame)
    records: dict[str, str] = field(default_factory=dict)

    def available(self, framework: str) -> list[str]:
        """Component names installed for one framework (e.g. "btl" -> ["ofi", "openib", ...])."""
        if self.components.empty:
            return []
        rows = self.components[self.components["framework"] == framework]
        return sorted(rows["component"].tolist())

    def frameworks(self) -> list[str]:
        """Every framework that has at least one component, sorted."""
        if self.components.empty:
            return []
        return sorted(self.components["framework"].unique().tolist())

    def check_component(self, framework: str, name: str) -> None:
        """Raise HpclabError unless `name` is an installed component of `framework`.

        Open MPI accepts "^name" (exclude) and comma-separated lists; each name is checked.
        """
        have = self.available(framework)
        if not have:
            raise HpclabError(
                f"Open MPI {self.version or '?'} has no '{framework}' framework",
                f"pick one of: {', '.join(self.frameworks())}",
            )
        for item in name.lstrip("^").split(","):
            if item.strip() and item.strip() not in have:
                raise HpclabError(
                    f"Open MPI {self.version or '?'} has no {framework} component '{item.strip()}'",
                    f"installed {framework} components: {', '.join(have)}",
                )


def _unquote(value: str) -> str:
    # ompi_info quotes values that contain colons or spaces: "mca:2.1.0", "Thu Mar 23 ...".
    if len(value) >= 2 and value[0] == '"' and value[-1] == '"':
        return value[1:-1]
    return value


# UCX, loaded by ompi_info, logs to stdout where it cannot read what it wants ("[1795659139.366082]
# [host:9152 :0]  sys.c:306  UCX  ERROR failed to get boot id" without /proc): not a record.
_UCX_LOG = re.compile(r"^\[\d+\.\d+\] \[[^\]]*\]\s+\S+:\d+\s+UCX\s")


def parse_ompi_info(text: str, source: str = "ompi_info --parsable") -> OmpiInfo:
    """Parse the text of `ompi_info --parsable` (optionally with --all / --param).

    text: the whole output; source: a file name or command, used in error messages.
    Returns an OmpiInfo. Raises HpclabError naming source and line when a line is not an
    ompi_info record or when no component was found at all.
    """
    info = OmpiInfo()
    comps: dict[tuple[str, str], dict[str, str]] = {}
    params: dict[tuple[str, str, str], dict[str, str]] = {}
    for lineno, raw in enumerate(text.splitlines(), start=1):
        line = raw.rstrip("\r")
        if not line.strip() or _UCX_LOG.match(line):
            continue
        parts = line.split(":")
        if len(parts) < 2 or not parts[0] or " " in parts[0]:
            raise HpclabError(
                f"{source}:{lineno}: not an ompi_info --parsable record: {line[:80]!r}",
                "give the output of `ompi_info --parsable` (not the human-readable form)",
            )
        if parts[0] == "mca":
            if len(parts) < 5:
                raise HpclabError(
                    f"{source}:{lineno}: truncated mca record: {line[:80]!r}",
                    "re-run `ompi_info --parsable` and save its whole output",
                )
            fw, comp, kind = parts[1], parts[2], parts[3]
            if kind == "version":
                value = _unquote(":".join(parts[4:]))
                what, _, ver = value.partition(":")
                comps.setdefault((fw, comp), {})[what] = ver
            elif kind == "param" and len(parts) >= 7:
                name, fieldname = parts[4], parts[5]
                value = ":".join(parts[6:])
                entry = params.setdefault((fw, comp, name), {})
                # enumerator lines repeat the field name; keep the set value and its help.
                if fieldname in ("value", "source", "level", "type", "help", "status"):
                    entry.setdefault(fieldname, _unquote(value))
            continue
        if parts[0] == "config" and parts[1] == "cli":
            key, value = "config:cli", ":".join(parts[2:])
        elif ':"' in line and line.endswith('"'):
            # a quoted value may hold colons (timestamps): split at the opening quote
            key, _, value = line.partition(':"')
            value = value[:-1]
        else:
            key, _, value = line.rpartition(":")
        info.records[key] = value
    if not comps:
        raise HpclabError(
            f"{source}: no MCA component records found (is this really ompi_info output?)",
            "run `ompi_info --parsable > ompi_info.txt` and parse that file",
        )
    info.version = info.records.get("ompi:version:full")
    info.mpi_api = info.records.get("mpi-api:version:full")
    info.package = info.records.get("package")
    info.prefix = info.records.get("path:prefix")
    cli = info.records.get("config:cli", "")
    try:
        info.configure = shlex.split(cli)
    except ValueError as exc:
        raise HpclabError(f"{source}: configure line cannot be split: {exc}",
                          "check that the output was not cut in the middle of a line") from exc
    info.components = pd.DataFrame(
        [
            {
                "framework": fw,
                "component": comp,
                "mca_version": v.get("mca"),
                "api_version": v.get("api"),
                "component_version": v.get("component"),
            }
            for (fw, comp), v in comps.items()
        ],
        columns=["framework", "component", "mca_version", "api_version", "component_version"],
    ).sort_values(["framework", "component"], ignore_index=True)
    info.params = pd.DataFrame(
        [
            {"framework": fw, "component": comp, "param": name, **fields}
            for (fw, comp, name), fields in params.items()
        ],
        columns=["framework", "component", "param", "value", "source", "level", "type", "help"],
    )
    if not info.params.empty:
        info.params["level"] = pd.to_numeric(info.params["level"], errors="coerce")
    return info


def read_ompi_info(path: str | Path) -> OmpiInfo:
    """Parse a saved `ompi_info --parsable` output file (path). Returns an OmpiInfo."""
    path = Path(path)
    try:
        text = path.read_text(errors="replace")
    except OSError as exc:
        raise HpclabError(f"cannot read {path}: {exc.strerror}", "check the path") from exc
    return parse_ompi_info(text, source=str(path))


def run_ompi_info(extra: list[str] | None = None, timeout: float = 60.0) -> OmpiInfo:
    """Run `ompi_info --parsable [extra...]` on this machine and parse its output.

    extra: more arguments, e.g. ["--all"] for every parameter or ["--param", "pml", "all",
    "--level", "9"]. timeout in seconds. Returns an OmpiInfo.
    """
    cmd = ["ompi_info", "--parsable", *(extra or [])]
    text = commands.output(cmd, "ask ompi_info", "install Open MPI (apt-get install openmpi-bin) or load "
                           "its module; check the arguments", timeout=timeout)
    return parse_ompi_info(text, source=" ".join(cmd))


def all_text() -> str:
    """The full `ompi_info --parsable --all` text of this machine (run once per process)."""
    return _all_text()


@functools.lru_cache(maxsize=1)
def _all_text() -> str:
    return commands.output(["ompi_info", "--parsable", "--all"], "ask ompi_info which MPI components exist",
                           "install Open MPI (apt-get install openmpi-bin) or load its module", timeout=120)


@functools.lru_cache(maxsize=1)
def this_machine() -> OmpiInfo:
    """This machine's Open MPI, parsed from all_text() (once per process)."""
    return parse_ompi_info(all_text(), source="ompi_info --parsable --all")


# The shared-memory BTL's names, newest first: Open MPI 5.0 renamed vader to sm (the sm of 1.x-2.x
# was a different, older component that 3.0 removed). Which one a machine has is read from
# ompi_info, never guessed from the version or the distribution.
SHM_BTLS = ("sm", "vader")


def shm_btl(info: OmpiInfo | None = None) -> str:
    """The name of the shared-memory BTL installed here: "vader" (Open MPI 3.0-4.1) or "sm" (5.0
    on). info: a parsed ompi_info (default: this machine's). Raises HpclabError when neither is."""
    info = info or this_machine()
    have = info.available("btl")
    for name in SHM_BTLS:
        if name in have:
            return name
    raise HpclabError(f"Open MPI {info.version or '?'} lists no shared-memory BTL (neither sm nor vader)",
                      f"installed BTLs: {', '.join(have) or 'none'}; check the Open MPI installation "
                      "(ompi_info | grep btl)")


def has_param(name: str, info: OmpiInfo | None = None) -> bool:
    """Does this Open MPI (info, default this machine's, from `--all`) know the MCA parameter `name`?"""
    params = (info or this_machine()).params
    return not params.empty and bool((params["param"] == name).any())


@dataclass(frozen=True)
class Facts:
    """What a lesson says differently from one Open MPI to the next, read from ompi_info.

    version: "4.1.4"; major: 4; shm_btl: "vader" or "sm"; runtime: the run-time under mpirun,
    "ORTE" (Open MPI's own, up to 4.1) or "PRRTE" (the PMIx reference run-time, 5.0 on);
    runtime_version: its version as ompi_info reports it ("4.1.4", "3.0.9"), None if not listed;
    single_copy: how the shared-memory BTL's single-copy mechanism is chosen,
    "btl_<shm>_single_copy_mechanism" (a BTL parameter, up to 4.1) or "smsc" (its own framework,
    5.0 on), "" when neither exists.
    """

    version: str
    major: int
    shm_btl: str
    runtime: str
    runtime_version: str | None
    single_copy: str

    def sentence(self) -> str:
        """One line for a notebook: this machine's Open MPI and the names its lessons use."""
        return (f"This machine runs Open MPI {self.version}: its shared-memory BTL is called "
                f"`{self.shm_btl}`, and `mpirun` runs on {self.runtime}"
                + (f" {self.runtime_version}" if self.runtime_version else "") + ".")


def facts(info: OmpiInfo | None = None) -> Facts:
    """The version-dependent facts of this Open MPI (info: a parsed `ompi_info --parsable --all`,
    default this machine's). Returns a Facts."""
    info = info or this_machine()
    version = info.version or "?"
    major = int(version.split(".")[0]) if version.split(".")[0].isdigit() else 0
    shm = shm_btl(info)
    # 4.x prints orte:version:* records; 5.x prints its PRRTE's as prte:version:* (or, in some
    # builds, only the plm/ess frameworks of PRRTE, which ompi_info does not list at all).
    orte = info.records.get("orte:version:full")
    prte = info.records.get("prte:version:full") or info.records.get("prrte:version:full")
    if orte:
        runtime, runtime_version = "ORTE", orte
    elif prte or major >= 5:
        runtime, runtime_version = "PRRTE", prte
    else:
        runtime, runtime_version = "ORTE", None
    if has_param(f"btl_{shm}_single_copy_mechanism", info):
        single_copy = f"btl_{shm}_single_copy_mechanism"
    elif info.available("smsc"):
        single_copy = "smsc"
    else:
        single_copy = ""
    return Facts(version, major, shm, runtime, runtime_version, single_copy)


def eager_limit(btl: str | None = None) -> int:
    """Open MPI's eager limit of a BTL on this machine (btl_<btl>_eager_limit, bytes, header
    included): messages up to about this size are sent without waiting for the receiver; larger
    ones wait until the receive is posted (rendezvous). btl: default the shared-memory BTL
    (shm_btl(): vader or sm). The one reader of it in hpclab."""
    btl = btl or shm_btl()
    params = this_machine().params
    hit = params[params["param"] == f"btl_{btl}_eager_limit"] if not params.empty else params
    if hit.empty:
        raise HpclabError(f"ompi_info lists no btl_{btl}_eager_limit parameter",
                          f"is the {btl} BTL built into this Open MPI? (ompi_info | grep btl)")
    return int(hit["value"].iloc[0])


def component_table(info: OmpiInfo, frameworks: list[str] | None = None) -> pd.DataFrame:
    """One row per framework, listing its components: the "what is installed" overview.

    frameworks: which to show (default KEY_FRAMEWORKS, then every other framework).
    Returns a DataFrame (framework, components, count), components comma-separated.
    """
    wanted = frameworks or KEY_FRAMEWORKS + [f for f in info.frameworks() if f not in KEY_FRAMEWORKS]
    rows = []
    for fw in wanted:
        names = info.available(fw)
        rows.append({"framework": fw, "components": ", ".join(names), "count": len(names)})
    return pd.DataFrame(rows, columns=["framework", "components", "count"])


def transports(info: OmpiInfo) -> pd.DataFrame:
    """A "Transports" summary like the one Open MPI's configure prints, derived from components.

    Returns a DataFrame (transport, built, components): built is True when at least one
    component providing that network stack is installed; components lists them as
    "framework/component". Built means the library can use it, not that the hardware exists.
    """
    rows = []
    for label, needs in TRANSPORTS:
        present = [f"{fw}/{c}" for fw, c in needs if c in info.available(fw)]
        rows.append({"transport": label, "built": bool(present), "components": ", ".join(present)})
    return pd.DataFrame(rows, columns=["transport", "built", "components"])


def configure_options(info: OmpiInfo) -> pd.DataFrame:
    """The configure arguments that choose features (--with-*, --enable-*, --without-*, ...).

    Returns a DataFrame (option, value): "--with-ucx" -> ("with-ucx", ""),
    "--with-pmix=/usr/lib/..." -> ("with-pmix", "/usr/lib/..."). Paths like --prefix are kept.
    """
    rows = []
    for arg in info.configure:
        if not arg.startswith("--"):
            continue
        opt, _, value = arg[2:].partition("=")
        rows.append({"option": opt, "value": value})
    return pd.DataFrame(rows, columns=["option", "value"])


def site_settings(info: OmpiInfo) -> pd.DataFrame:
    """MCA parameters whose value does not come from the built-in default.

    Only present when the output came from `--all` or `--param ... --level 9`. A Debian
    system, for instance, sets `pml = ^ucx` in /etc/openmpi/openmpi-mca-params.conf: such
    settings change which transport a job uses without anything in the job script.
    Returns the matching rows of info.params (framework, component, param, value, source, ...).
    """
    if info.params.empty:
        return info.params
    mask = info.params["source"].fillna("default") != "default"
    return info.params[mask].reset_index(drop=True)


def has_framework(name: str, info: OmpiInfo | None = None) -> bool:
    """Does this Open MPI (info from `--all`, default this machine's) have the MCA framework
    `name`, with or without components? A framework without components still lists its base
    parameters (Debian's 4.1.4 has the `hook` framework, in Open MPI since 3.0, and no hook)."""
    info = info or this_machine()
    if name in info.frameworks():
        return True
    return not info.params.empty and bool((info.params["framework"] == name).any())


def hook_text(info: OmpiInfo | None = None) -> str:
    """Whether this Open MPI can print the transport of every pair of ranks itself (the
    `comm_method` hook, which Open MPI 5.0 added to the hook framework of 3.0), in one sentence
    read from ompi_info."""
    info = info or this_machine()
    version = info.version or "?"
    if "comm_method" in info.available("hook"):
        return (f"Open MPI {version} has the `comm_method` hook: `--mca ompi_display_comm mpi_finalize` "
                "prints the transport of every pair of ranks.")
    if has_framework("hook", info):
        hooks = ", ".join(info.available("hook")) or "no hook component"
        return (f"Open MPI {version} has the hook framework ({hooks}) but not `comm_method`, the hook 5.0 "
                "added, so the course's ping-pong reports the transport itself.")
    return f"Open MPI {version} lists no hook framework, so the course's ping-pong reports the transport itself."


def params_file(info: OmpiInfo | None = None) -> Path:
    """The system-wide MCA parameter file of this Open MPI: <sysconfdir>/openmpi-mca-params.conf,
    sysconfdir read from its configure line (the last --sysconfdir wins, as in configure; Debian:
    /etc/openmpi), else <prefix>/etc."""
    info = info or this_machine()
    given = [a.split("=", 1)[1] for a in info.configure if a.startswith("--sysconfdir=")]
    prefix = info.prefix or "/usr/local"
    folder = given[-1].replace("${prefix}", prefix) if given else f"{prefix}/etc"
    return Path(folder) / "openmpi-mca-params.conf"


def params_file_settings(path: str | Path | None = None, info: OmpiInfo | None = None) -> dict[str, str]:
    """The `name = value` lines of an MCA parameter file (default: params_file(info)), in file
    order; comments and blank lines skipped; {} when the file does not exist."""
    path = Path(path) if path is not None else params_file(info)
    try:
        text = path.read_text(errors="replace")
    except OSError:
        return {}
    out = {}
    for line in text.splitlines():
        line = line.split("#", 1)[0].strip()
        if "=" in line:
            key, _, value = line.partition("=")
            out[key.strip()] = value.strip()
    return out
