"""What `hpclab classroom up` created, written down *before* each thing is created, so that
`down` removes exactly that (and nothing a site had before), even after `up` stopped half-way.

The record is one JSON file (root's, 0600: it names the accounts). Each kind of thing is a list:
users, groups, Slurm objects (as `kind:name`, e.g. `qos:hpclab-student`), folders, and the
settings `up` was given (students, instructors, spawner, bind address).
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path

from hpclab.core.errors import HpclabError
from hpclab.core.io import write_atomic

KINDS = ("groups", "users", "slurm", "folders")


@dataclass
class Record:
    path: Path
    settings: dict = field(default_factory=dict)
    groups: list[str] = field(default_factory=list)
    users: list[str] = field(default_factory=list)
    slurm: list[str] = field(default_factory=list)
    folders: list[str] = field(default_factory=list)

    def note(self, kind: str, name: str) -> None:
        """Write down that `name` of `kind` is about to be created (saved at once)."""
        items = getattr(self, kind)
        if name not in items:
            items.append(name)
            self.save()

    def forget(self, kind: str, name: str) -> None:
        """`name` was removed: take it off the record (saved at once)."""
        items = getattr(self, kind)
        if name in items:
            items.remove(name)
            self.save()

    def save(self) -> None:
        data = {k: v for k, v in asdict(self).items() if k != "path"}
        self.path.parent.mkdir(parents=True, exist_ok=True)
        write_atomic(self.path, json.dumps(data, indent=1) + "\n", mode=0o600)

    @property
    def empty(self) -> bool:
        return not any(getattr(self, k) for k in KINDS)


def load(path: Path) -> Record:
    """The record at `path`, or an empty one if there is none."""
    if not path.exists():
        return Record(path)
    try:
        data = json.loads(path.read_text())
    except PermissionError:
        raise HpclabError(f"the classroom's record {path} is root's (it names the accounts)",
                          "run the command as root ('sudo hpclab classroom status')") from None
    except (OSError, ValueError) as e:
        raise HpclabError(f"the classroom's record {path} cannot be read ({e})",
                          "it lists what 'hpclab classroom up' created; restore it from a backup or "
                          "remove the accounts and folders it named by hand") from None
    return Record(path, **{k: data.get(k, [] if k in KINDS else {}) for k in ("settings", *KINDS)})
