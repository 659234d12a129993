"""Run data that travels with a lab submission, and the checks that it came from real runs.

A lab grades the student's own measurements. Before submitting, the student packs the run
folders the lab used into the lab's folder (`pack(runs, lab_dir)`): each run is copied to
`data/<run-id>/` and `data/MANIFEST.json` records its role in the lab ("shm", "tcp",
"unlabelled", ...), its kernel and a SHA-256 of every file. Under nbgrader (`NBGRADER_EXECUTION`
set) a lab only reads that folder (`table`, `run_dir`) and never submits a job.

`check_run` is how a hidden test tells a real run from typed-in numbers: the checksums still
match, result.json follows the kernel contract and validates, spec.json, status.json, the Slurm
accounting record (provenance/sacct.json) and the node list agree with each other and with the
hosts and rank count the kernel itself reported, and for pingpong the transport asked for in the
spec is the one the kernel saw requested.

`Packed` hands a lab's verified runs, by role, to its lesson's reference answers
(hpclab.grading.references).
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import os
import shutil
from dataclasses import dataclass
from pathlib import Path

from hpclab.core.errors import HpclabError
from hpclab.core.io import write_atomic

DATA = "data"
MANIFEST = "MANIFEST.json"
# files a run folder must have for the lab to trust it (relative to the run folder)
REQUIRED = ("result.json", "spec.json", "status.json", "stdout", "provenance/sacct.json",
            "provenance/nodes.txt")


def grading() -> bool:
    """True when nbgrader is executing the notebook (validate or autograde): read data only."""
    return bool(os.environ.get("NBGRADER_EXECUTION"))


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def checksums(run_dir: str | Path) -> dict[str, str]:
    """SHA-256 (hex) of every file in a run folder, keyed by path relative to it (sorted)."""
    run_dir = Path(run_dir)
    return {str(p.relative_to(run_dir)): _sha256(p)
            for p in sorted(run_dir.rglob("*")) if p.is_file()}


def data_dir(lab_dir: str | Path = ".") -> Path:
    """The lab's data folder (lab_dir/data)."""
    return Path(lab_dir) / DATA


def manifest(lab_dir: str | Path = ".") -> dict:
    """The decoded data/MANIFEST.json of a lab folder ({"runs": {run_id: entry}}).

    Raises HpclabError when there is none or it is not valid JSON."""
    path = data_dir(lab_dir) / MANIFEST
    if not path.is_file():
        raise HpclabError(f"{path}: no run data packed with this lab",
                          "run the lab's experiments, then pack them with the lab's pack cell")
    try:
        doc = json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise HpclabError(f"{path}: unreadable manifest ({exc})",
                          "pack the runs again into a fresh copy of the lab") from None
    if not isinstance(doc, dict) or not isinstance(doc.get("runs"), dict):
        raise HpclabError(f"{path}: manifest without a 'runs' mapping", "pack the runs again")
    return doc


def pack(run_dirs: dict[str, str | Path], lab_dir: str | Path = ".") -> Path:
    """Copy run folders into the lab so they travel with the submission.

    run_dirs: {role: run folder} (role is the name the lab uses, e.g. "shm"); lab_dir: the lab's
    folder. Each run goes to data/<run-id>/ and gets a manifest entry (role, kernel, packed time,
    SHA-256 of every file). Nothing is overwritten: a role or run id already packed is an error.
    Returns the data folder. Raises HpclabError for a missing or incomplete run folder.
    """
    if grading():
        raise HpclabError("packing is not done while nbgrader executes the lab",
                          "the data packed before submission are used as they are")
    data = data_dir(lab_dir)
    data.mkdir(parents=True, exist_ok=True)
    path = data / MANIFEST
    doc = manifest(lab_dir) if path.exists() else {"format": 1, "runs": {}}
    roles = {e.get("role"): rid for rid, e in doc["runs"].items()}
    for role, src in run_dirs.items():
        src = Path(getattr(src, "path", src))  # a RunFolder or a path
        if role in roles:
            raise HpclabError(f"role {role!r} is already packed (run {roles[role]})",
                              "start from a fresh copy of the lab to pack different runs")
        missing = [f for f in REQUIRED if not (src / f).is_file()]
        if not src.is_dir() or missing:
            raise HpclabError(f"{src}: not a complete run folder (missing: {', '.join(missing)})",
                              "pack only runs that completed (hpclab runs lists them)")
        dest = data / src.name
        if dest.exists():
            raise HpclabError(f"{dest} already exists", "each run is packed once")
        shutil.copytree(src, dest)
        kernel = json.loads((src / "spec.json").read_text()).get("kernel")
        doc["runs"][src.name] = {
            "role": role, "kernel": kernel,
            "packed": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
            "sha256": checksums(dest)}
        roles[role] = src.name
    write_atomic(path, json.dumps(doc, indent=2, sort_keys=True) + "\n")
    return data


def run_dir(role: str, lab_dir: str | Path = ".") -> Path:
    """The packed run folder that plays `role` in the lab. Raises HpclabError if none does."""
    for rid, entry in manifest(lab_dir)["runs"].items():
        if entry.get("role") == role:
            return data_dir(lab_dir) / rid
    roles = ", ".join(sorted(str(e.get("role")) for e in manifest(lab_dir)["runs"].values()))
    raise HpclabError(f"no packed run has the role {role!r} (packed: {roles or 'none'})",
                      "pack a run for it with labdata.pack({role: run_folder})")


def roles(lab_dir: str | Path = ".") -> dict[str, str]:
    """{role: run id} of every packed run."""
    return {e.get("role"): rid for rid, e in manifest(lab_dir)["runs"].items()}


def runs(role_names, lab_dir: str | Path = ".") -> list:
    """The packed runs playing `role_names` (in that order) as hpclab.jobs.experiment.Run objects, for
    analyses that take runs (e.g. hpclab.analysis.placement.job_rates). Raises HpclabError for a role
    no packed run plays."""
    # costly (the job stack, pandas): only when runs are packed or checked
    from hpclab.jobs.experiment import Run
    from hpclab.runs.folder import RunFolder
    from hpclab.spec.model import make_spec

    out = []
    for role in role_names:
        folder = RunFolder(run_dir(role, lab_dir))
        out.append(Run(folder=folder, spec=make_spec(folder.spec())))
    return out


def table(role: str, lab_dir: str | Path = "."):
    """The tidy table of the packed run playing `role` (hpclab.runs.parse.parse_run of its folder)."""
    # costly (the job stack, pandas): only when runs are packed or checked
    from hpclab.runs import parse

    rid = roles(lab_dir).get(role)
    kernel = manifest(lab_dir)["runs"][rid]["kernel"] if rid else None
    return parse.parse_run(run_dir(role, lab_dir), kernel)


# What a timing table says about the transport itself (Open MPI's own report and the MCA
# selection): hidden where a lab asks the student to infer the transport from timings alone.
TRANSPORT_COLUMNS = ("pml", "btl", "mtl", "transport", "transport_source")


def timings(role: str, lab_dir: str | Path = "."):
    """The packed run's table without the columns that name its transport: bytes, repetitions,
    t_usec (half round trip, microseconds) and mbytes_per_sec, one row per message size."""
    tab = table(role, lab_dir)
    return tab.drop(columns=[c for c in TRANSPORT_COLUMNS if c in tab.columns])


def _nodes(folder: Path) -> set[str]:
    return {line.strip() for line in (folder / "provenance/nodes.txt").read_text().splitlines()
            if line.strip()}


def _binding_hosts(folder: Path) -> set[str]:
    path = folder / "provenance" / "binding.txt"
    if not path.is_file():
        return set()
    hosts = set()
    for line in path.read_text(errors="replace").splitlines():
        # srun: "cpu-bind=MASK - vm, task  0 ..."; mpirun: "[vm:12345] MCW rank 0 bound to ..."
        if line.startswith("cpu-bind=") and " - " in line:
            hosts.add(line.split(" - ", 1)[1].split(",", 1)[0].strip())
        elif line.startswith("[") and ":" in line:
            hosts.add(line[1:].split(":", 1)[0])
    return hosts


def check_run(folder: str | Path, entry: dict) -> list[str]:
    """Reasons to doubt that a packed folder is the real run its manifest entry describes.

    folder: data/<run-id>/; entry: its manifest entry. Returns a list of problems (empty: the
    run is consistent). Checks: required files present, SHA-256 as packed, result.json follows
    the kernel contract and validates, spec/status/sacct agree (kernel, job id, COMPLETED), the
    kernel's hosts are the job's nodes, rank count = spec ntasks, and for pingpong the MCA
    selection in spec.json is what the kernel saw requested.
    """
    # costly (the job stack, pandas): only when runs are packed or checked
    from hpclab.kernels.contract import load_result

    folder = Path(folder)
    problems = [f"{f} is missing" for f in REQUIRED if not (folder / f).is_file()]
    if problems:
        return problems
    now = checksums(folder)
    packed = entry.get("sha256") or {}
    for name in sorted(set(packed) | set(now)):
        if name not in now:
            problems.append(f"{name} was removed after packing")
        elif name not in packed:
            problems.append(f"{name} was added after packing")
        elif packed[name] != now[name]:
            problems.append(f"{name} changed after packing")
    try:
        doc = load_result(folder / "result.json", kernel=entry.get("kernel"))
        spec = json.loads((folder / "spec.json").read_text())
        status = json.loads((folder / "status.json").read_text())
        sacct = json.loads((folder / "provenance/sacct.json").read_text())
    except (HpclabError, ValueError, OSError) as exc:
        return problems + [f"unreadable record: {getattr(exc, 'what', exc)}"]
    if not doc["validation"].get("ok"):
        problems.append("the kernel's own validation failed")
    if spec.get("kernel") != doc["kernel"]:
        problems.append(f"spec.json asks for {spec.get('kernel')}, result.json is {doc['kernel']}")
    if status.get("state") != "completed":
        problems.append(f"status.json says {status.get('state')}")
    job = [r for r in sacct if isinstance(r, dict) and r.get("JobIDRaw") == str(status.get("job_id"))]
    if not job:
        problems.append(f"no Slurm accounting record for job {status.get('job_id')}")
    elif job[0].get("State") != "COMPLETED":
        problems.append(f"Slurm says job {status.get('job_id')} ended {job[0].get('State')}")
    hosts = {p.get("host") for p in doc["placement"]}
    nodes = _nodes(folder)
    # a layout of several Slurm nodes on one machine names nodes apart from the host name the
    # kernel sees; the launcher's binding report (written by the job) names the real hosts
    seen = nodes | _binding_hosts(folder)
    if not hosts <= seen:
        problems.append(f"kernel ran on {sorted(hosts)} but the job's nodes are {sorted(nodes)}")
    if job and job[0].get("NodeList") and "[" not in job[0]["NodeList"]:
        if set(job[0]["NodeList"].split(",")) != nodes:
            problems.append("Slurm's node list differs from provenance/nodes.txt")
    if spec.get("ntasks") != len(doc["placement"]):
        problems.append(f"spec asks for {spec.get('ntasks')} ranks, the kernel reports "
                        f"{len(doc['placement'])}")
    if doc["kernel"] == "pingpong":
        from hpclab.kernels import pingpong

        asked = pingpong.requested_transport(doc)
        for key, value in (spec.get("mca") or {}).items():
            if key in ("pml", "btl", "mtl") and asked.get(key) != value:
                problems.append(f"spec sets {key}={value} but the kernel saw {key}={asked.get(key)}")
    return problems


def verify(lab_dir: str | Path = ".") -> dict[str, str]:
    """Check every packed run of a lab (check_run). Returns {role: run id} when all are
    consistent; raises HpclabError listing every problem otherwise (or when nothing is packed)."""
    doc = manifest(lab_dir)
    if not doc["runs"]:
        raise HpclabError("the manifest lists no runs", "pack the lab's runs before submitting")
    problems = []
    for rid, entry in sorted(doc["runs"].items()):
        problems += [f"{rid} ({entry.get('role')}): {p}"
                     for p in check_run(data_dir(lab_dir) / rid, entry)]
    if problems:
        raise HpclabError("packed run data are not a real run's: " + "; ".join(problems),
                          "pack unmodified run folders from runs/ (labdata.pack)")
    return roles(lab_dir)


@dataclass(frozen=True)
class Packed:
    """A lab folder's packed runs after `verify`, taken by role: what a lesson's reference
    function reads (hpclab.course.lessons: `reference(packed)`), so that the lessons, below the
    grading floor, never open a lab folder themselves. folder: the lab folder; roles: {role: run
    id} of every packed run, all of them checked."""

    folder: Path
    roles: dict[str, str]

    @classmethod
    def verified(cls, lab_dir: str | Path = ".") -> "Packed":
        """The packed runs of `lab_dir`, each checked (`verify`: raises HpclabError listing every
        problem, or when nothing is packed)."""
        return cls(Path(lab_dir), verify(lab_dir))

    def table(self, role: str):
        """The tidy table of the run playing `role` (module function `table`)."""
        return table(role, self.folder)

    def runs(self, role_names) -> list:
        """The runs playing `role_names`, in that order, as Run objects (module function `runs`)."""
        return runs(role_names, self.folder)

    def run_dir(self, role: str) -> Path:
        """The folder of the run playing `role` (module function `run_dir`)."""
        return run_dir(role, self.folder)
