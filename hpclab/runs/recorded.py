"""The instructor's runs, recorded before a session, read by a room instead of submitting (room mode).

Thirty students running a notebook's jobs one after another on a few cores may need hours; where
hpclab.course.plan computes that a notebook does not fit a room, the students' notebooks read the
runs the instructor recorded before the session. `hpclab classroom record` runs those notebooks
once into one folder, the recording (hpclab.classroom.recording); `hpclab classroom up --recording`
writes which notebooks its room reads from it and names the folder in every student's server
(HPCLAB_RECORDED). There,
hpclab.jobs.experiment.run asks `active()` first: specs of a room-mode notebook get the recorded
runs, read-only, and nothing is submitted; the labs, and what the instructor marks as the
students' own, are submitted as anywhere else.

    <recording>/            root's, readable by every account
      recording.json        who recorded and when, from which checkout; per notebook its runs
      room-mode.json        written by `classroom up`: the notebooks the room reads, what is its own
      cache-probe.json      the cache probe the recorded lessons were sized with (PROBE), if any
      runs/                 the run folders (HPCLAB_RUNS while recording)
      course/               the course runner's report of the recording (executed notebooks, times)

Which runs answer a spec: those whose spec.json has the same content once the fields that only
say how a run was made are left out (RUN_FIELDS: how many repetitions, the time limit, the site
and its partition: the instructor recorded on the embedded cluster's own site, the room submits
through the classroom's) and the checkout's path in any value is written "{course}" (a program
built in the instructor's checkout and one built in a student's folder are the same program).
Repetitions pair by their number (status.json repetition: the round). A session that asks for
the same content twice gets the instructor's first call's runs, then the second's; a run the
instructor's noise watch had repeated (replaced_by) is answered by its repetition.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path

from hpclab.core import paths
from hpclab.core.errors import HpclabError

ENV = "HPCLAB_RECORDED"            # the recording's folder, in a room's servers
SESSION_ENV = "JPY_SESSION_NAME"   # the notebook a kernel was opened for (set by jupyter_server)
RUN_FIELDS = ("repetitions", "time", "site", "partition")
RECORDING, ROOM_MODE = "recording.json", "room-mode.json"
# The cache probe the recording's lessons were sized with (notebook 00's build/cache-probe.json,
# copied at record time): a student's kernel sizes them from it too, or its specs would not be
# the recorded ones (this VM: 170,000 against 340,000 elements of an in-cache run without it).
PROBE = "cache-probe.json"
COURSE = "{course}"
ENDED = ("completed", "failed", "timeout", "cancelled")


@dataclass
class RecordedRun:
    """One run folder of the recording and what its status says."""

    path: Path
    repetition: int
    state: str
    created: str
    job: int = 0   # Slurm's job id: orders the runs made within one second (created has seconds)
    replaces: str | None = None
    replaced_by: str | None = None

    @property
    def run_id(self) -> str:
        return self.path.name


@dataclass
class Served:
    """What the recording answers a call with: per spec its runs in round order, the pairs
    (disturbed run, the run that repeated it), and whose and from when the runs are."""

    groups: list[list[Path]]
    replaced: list[tuple[Path, Path]] = field(default_factory=list)
    by: str = ""
    date: str = ""


def _normalised(value, roots: list[str]):
    if isinstance(value, dict):
        return {k: _normalised(v, roots) for k, v in value.items()}
    if isinstance(value, list):
        return [_normalised(v, roots) for v in value]
    if isinstance(value, str):
        for root in roots:
            if value == root or value.startswith(root + "/"):
                return COURSE + value[len(root):]
    return value


def content_key(spec: dict, roots: list[str]) -> str:
    """The part of a spec (as spec.json holds it) that says what a run measures: every field
    but RUN_FIELDS, with each of `roots` at the start of a string written {course}. Two specs
    with the same key measure the same thing."""
    kept = {k: v for k, v in spec.items() if k not in RUN_FIELDS}
    return json.dumps(_normalised(kept, sorted(roots, key=len, reverse=True)), sort_keys=True)


def _day(stamp: str) -> str:
    return stamp[:10] if stamp else "an unknown date"


class Recording:
    """A recording's folder, read: recording.json, room-mode.json and the index of its runs."""

    def __init__(self, folder: Path):
        self.folder = Path(folder)
        self.meta = _read(self.folder / RECORDING)
        room = _read(self.folder / ROOM_MODE)
        self.by: str = self.meta.get("by", "the instructor")
        self.course_root: str = self.meta.get("course_root", "")
        self.notebooks: dict[str, dict] = self.meta.get("notebooks", {})
        self.room_notebooks: list[str] = room.get("notebooks", [])
        self.own: list[str] = room.get("own", [])
        self._runs: dict[str, list[RecordedRun]] | None = None
        # how often this process asked for each content: kept when up rewrites room-mode.json
        self._calls: dict[str, int] = _calls_made.setdefault(str(self.folder), {})

    @property
    def runs_root(self) -> Path:
        return self.folder / "runs"

    # --- which calls the recording answers -----------------------------------------------------

    def room_experiments(self) -> set[str]:
        """The experiments the room-mode notebooks made when they were recorded."""
        return {e for nb in self.room_notebooks for e in self.notebooks.get(nb, {}).get("experiments", [])}

    def is_own(self, spec: dict) -> bool:
        """Did the instructor mark this spec's experiment (or experiment/label) as the students' own?"""
        return spec.get("experiment") in self.own or f"{spec.get('experiment')}/{spec.get('label')}" in self.own

    def session_notebook(self) -> str | None:
        """The room-mode notebook this kernel was opened for, when it is one (by its file name)."""
        session = os.environ.get(SESSION_ENV, "")
        name = Path(session).name
        return next((nb for nb in self.room_notebooks if Path(nb).name == name), None) if name else None

    def answers(self, specs: list[dict]) -> bool:
        """Are these specs (one call of experiment.run) read from the recording? Yes when the
        kernel's notebook is in room mode or one of them belongs to an experiment a room-mode
        notebook made; no when any of them is the students' own (their call is theirs)."""
        if not self.room_notebooks or any(self.is_own(s) for s in specs):
            return False
        experiments = self.room_experiments()
        return self.session_notebook() is not None or any(s.get("experiment") in experiments for s in specs)

    # --- the runs --------------------------------------------------------------------------------

    def _roots(self) -> list[str]:
        roots = {str(paths.repo()), str(paths.package_dir().parent), str(paths.output_dir().parent)}
        if self.course_root:
            roots.add(self.course_root)
        return [r for r in roots if r not in ("", "/")]

    def _index(self) -> dict[str, list[RecordedRun]]:
        """{content key: its recorded runs} over the runs recording.json lists, oldest first."""
        if self._runs is not None:
            return self._runs
        listed = {rid for nb in self.notebooks.values() for rid in nb.get("runs", [])}
        found: dict[str, list[RecordedRun]] = {}
        roots = self._roots()
        for status_file in sorted(self.runs_root.glob("*/*/status.json")):
            folder = status_file.parent
            if folder.name not in listed:
                continue
            try:
                st, spec = json.loads(status_file.read_text()), json.loads((folder / "spec.json").read_text())
            except (OSError, ValueError):
                continue
            if st.get("state") not in ENDED:
                continue  # a recording stopped half-way: not a run to show
            job = str(st.get("job_id") or "")
            found.setdefault(content_key(spec, roots), []).append(RecordedRun(
                folder, int(st.get("repetition") or 1), st["state"], st.get("created", ""),
                int(job) if job.isdigit() else 0, st.get("replaces"), st.get("replaced_by")))
        for runs in found.values():
            # submission order: job ids grow within a cluster's life, and created (to the second)
            # keeps the order across a cluster made again between two recordings
            runs.sort(key=lambda r: (r.created, r.job, r.repetition, r.run_id))
        self._runs = found
        return found

    def _calls_of(self, runs: list[RecordedRun]) -> list[list[RecordedRun]]:
        """The recorded runs of one content, split into the calls that made them (a call numbers
        its repetitions from 1), each call's runs in round order, repetitions in place of the
        disturbed runs they replaced."""
        by_id = {r.run_id: r for r in runs}
        calls: list[list[RecordedRun]] = []
        for r in runs:
            if r.replaces:
                continue
            if not calls or r.repetition <= calls[-1][-1].repetition:
                calls.append([])
            calls[-1].append(r)
        out = []
        for call in calls:
            kept = []
            for r in call:
                while r.replaced_by and r.replaced_by in by_id:
                    r = by_id[r.replaced_by]
                kept.append(r)
            out.append(kept)
        return out

    def serve(self, specs: list[dict], repetitions: list[int] | None = None) -> Served:
        """The recorded runs for one call: per spec, the runs of the k-th recorded call with its
        content (k: how often this session asked for it before), at most `repetitions` of them
        per spec (None: every recorded round). HpclabError naming the specs that have none, and
        what to record."""
        index, roots = self._index(), self._roots()
        keys = [content_key(s, roots) for s in specs]
        missing = [s for s, k in zip(specs, keys) if k not in index]
        if missing:
            raise self._not_recorded(missing, len(specs))
        groups, replaced = [], []
        for i, key in enumerate(keys):
            calls = self._calls_of(index[key])
            k = min(self._calls.get(key, 0), len(calls) - 1)
            self._calls[key] = self._calls.get(key, 0) + 1
            runs = calls[k][:repetitions[i]] if repetitions else calls[k]
            groups.append([r.path for r in runs])
            originals = {r.replaces: r for r in runs if r.replaces}
            replaced += [(r.path.parent / old, r.path) for old, r in originals.items()]
        first = next((r for key in keys for r in index[key]), None)
        return Served(groups, replaced, self.by, _day(first.created) if first else "")

    def _not_recorded(self, missing: list[dict], total: int) -> HpclabError:
        s = missing[0]
        what = (f"experiment {s.get('experiment') or s.get('kernel')!r}, label {s.get('label')!r}, kernel "
                f"{s.get('kernel')}, {s.get('ntasks')} rank(s)")
        notebook = self.session_notebook() or next(
            (nb for nb, v in self.notebooks.items() if s.get("experiment") in v.get("experiments", [])), None)
        which = Path(notebook).stem if notebook else "the notebook"
        return HpclabError(
            f"room mode: {len(missing)} of the {total} spec(s) of this cell have no run in {self.by}'s recording "
            f"({self.folder}; e.g. {what}), and in this room they are not submitted",
            f"ask the instructor to record {which} again on this machine ('sudo .venv/bin/hpclab classroom record "
            f"--notebooks {which}'), or to let the room run experiment {s.get('experiment')!r} itself "
            f"('hpclab classroom up ... --own {s.get('experiment')}')")

    def whose(self, run_id: str) -> str | None:
        """'recorded by instructor1 on 2026-11-28' for a run of this recording; None otherwise."""
        for runs in self._index().values():
            for r in runs:
                if r.run_id == run_id:
                    return f"recorded by {self.by} on {_day(r.created)}"
        return None


def write_recording(folder: Path, by: str, notebooks: dict[str, dict], course_root: str | None = None) -> Path:
    """Write (or extend) the recording's recording.json: who recorded, the checkout it ran from,
    and per notebook (its path in the course, e.g. notebooks/02-transports.ipynb) what the
    recording made: {"runs": run ids, "experiments": names, "seconds", "jobs", "ok", "error"}.
    A notebook recorded again replaces its entry; the others stay."""
    from hpclab.core.io import write_atomic  # the readers (students' kernels) never write

    path = Path(folder) / RECORDING
    meta = _read(path)
    meta.update(by=by, course_root=str(course_root or paths.repo()),
                notebooks={**meta.get("notebooks", {}), **notebooks})
    return write_atomic(path, json.dumps(meta, indent=1, sort_keys=True) + "\n", mode=0o644)


def write_room_mode(folder: Path, notebooks: list[str], own: list[str], students: int) -> Path:
    """Write room-mode.json: the notebooks a room of `students` reads from this recording, and
    the experiments (or experiment/label) its students run themselves."""
    from hpclab.core.io import write_atomic

    return write_atomic(Path(folder) / ROOM_MODE, json.dumps(
        {"students": students, "notebooks": sorted(notebooks), "own": sorted(own)}, indent=1) + "\n", mode=0o644)


def _read(path: Path) -> dict:
    try:
        return json.loads(path.read_text())
    except FileNotFoundError:
        return {}
    except (OSError, ValueError) as exc:
        raise HpclabError(f"the recording's {path.name} cannot be read ({exc})",
                          f"record the course again: 'sudo .venv/bin/hpclab classroom record' ({path})") from None


_active: dict[str, tuple[tuple, Recording]] = {}
_calls_made: dict[str, dict[str, int]] = {}


def active() -> Recording | None:
    """The recording this process is in room mode with (HPCLAB_RECORDED names its folder), read
    once and again when up rewrote its room-mode.json; None outside room mode."""
    folder = os.environ.get(ENV)
    if not folder:
        return None
    stamp = tuple((p.stat().st_mtime_ns, p.stat().st_size) if p.exists() else None
                  for p in (Path(folder) / RECORDING, Path(folder) / ROOM_MODE))
    cached = _active.get(folder)
    if cached is None or cached[0] != stamp:
        _active[folder] = (stamp, Recording(Path(folder)))
    return _active[folder][1]


def probe_path() -> Path | None:
    """In room mode, the cache probe the instructor's recording was sized with; None outside
    room mode or when the recording holds none."""
    room = active()
    path = room.folder / PROBE if room is not None else None
    return path if path is not None and path.is_file() else None


def whose(run_id: str) -> str | None:
    """Whose recorded run `run_id` is, in words, in room mode ('recorded by instructor1 on
    2026-11-28'); None outside room mode or for a run of one's own."""
    rec = active()
    return rec.whose(run_id) if rec is not None else None
