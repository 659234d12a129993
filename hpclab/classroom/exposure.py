"""What a student could read of the instructor's checkout, and closing it before a room opens.

The room's students work in a copy of the course without the labs' solutions (/opt/hpclab/
classroom); the checkout they were made from holds the lab sources (BEGIN SOLUTION, BEGIN HIDDEN
TESTS), the grade demo's gradebooks and everyone's run folders. A clone in root's 0700 home is out
of every other account's reach; one under /srv or /opt usually is not. The check asks the system
itself: it runs grep and find as an unprivileged account, so it sees exactly what file modes and
every folder on the way let a student see.
"""

from __future__ import annotations

from pathlib import Path

from hpclab.core import commands, paths
from hpclab.core.errors import HpclabError

# Text that only an instructor's copy of a lab holds (nbgrader's markers).
SECRET_MARKERS = ("BEGIN SOLUTION", "BEGIN HIDDEN TESTS")
# An account with no rights of its own: what it reads, any student reads.
PROBE_USER = "nobody"


def _as(user: str, argv: list[str]) -> list[str]:
    """Lines argv prints when run as `user` (errors such as 'Permission denied' are what we want to
    see happen, so stderr is dropped and the exit code ignored)."""
    res = commands.run(["runuser", "-u", user, "--", *argv], f"read the checkout as {user}", timeout=300)
    if res is None:
        raise HpclabError(f"`{' '.join(argv[:2])} ...` as {user} did not finish within 300 s",
                          "the checkout is very large or its file system hangs; check it with the same command by hand")
    return [line for line in res.stdout.splitlines() if line.strip()]


def readable_secrets(root: Path, user: str = PROBE_USER) -> list[str]:
    """Files under `root` that `user` can read and that hold a lab's solutions or hidden tests
    (notebooks and Python files), or are a gradebook: sorted paths. The venv and git's objects
    are skipped (they hold no course text)."""
    root = Path(root)
    grep = ["grep", "-rlIs", "--exclude-dir=.git", "--exclude-dir=.venv", "--include=*.ipynb", "--include=*.py"]
    for marker in SECRET_MARKERS:
        grep += ["-e", marker]
    found = _as(user, grep + [str(root)])
    found += _as(user, ["find", str(root), "-path", str(root / ".venv"), "-prune", "-o",
                        "-name", "gradebook.db", "-readable", "-print"])
    return sorted(set(found))


def close_checkout(settings: dict, root: Path | None = None) -> list[str]:
    """Before a room opens: if a student could read lab sources or gradebooks in the checkout
    `root` (default: this one), take the 'other' bits off the checkout's own folder, so that no
    account but its owner's and its group's may enter it, and record the old mode in `settings`
    (the classroom record's; `reopen_checkout` puts it back when the room is removed). Returns
    what it found and did, in words; [] when nothing was readable. Raises HpclabError when files
    stay readable after the change (a group the students are in, for instance)."""
    root = Path(root or paths.repo()).resolve()
    found = readable_secrets(root)
    if not found:
        return []
    old = root.stat().st_mode & 0o7777
    root.chmod(old & ~0o007)
    settings["checkout_mode"] = {"path": str(root), "mode": old}
    still = readable_secrets(root)
    if still:
        raise HpclabError(f"students can still read {len(still)} file(s) of lab sources or gradebooks in {root} "
                          f"after 'chmod o-rwx {root}', e.g. {still[0]}",
                          "move the checkout into a folder only the instructors can enter (root's home, say)")
    sample = ", ".join(str(Path(f).relative_to(root)) for f in found[:3])
    return [f"students could read {len(found)} file(s) with lab solutions, hidden tests or gradebooks in the "
            f"checkout {root} (e.g. {sample}); its mode is now {old & ~0o007:04o} (was {old:04o}): only its "
            f"owner and group may enter it. 'hpclab classroom remove' puts the old mode back"]


def reopen_checkout(settings: dict) -> str:
    """Put back the checkout's mode close_checkout changed (when the room is removed); '' if none."""
    saved = settings.pop("checkout_mode", None)
    if not saved:
        return ""
    path = Path(saved["path"])
    if path.is_dir():
        path.chmod(int(saved["mode"]))
    return f"the checkout {path} has its mode {int(saved['mode']):04o} back"
