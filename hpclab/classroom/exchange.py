"""nbgrader's collect for a room: only what a student submitted themselves, and only their files.

Two holes of nbgrader's own collect between Unix accounts, closed here:

1. The student id in a submission's name (`<student>+<lab>+<time>+<random>` in `inbound/`) is
   whatever the submitter asked for: `nbgrader submit lab --student student02`, run by student01,
   files a submission under student02's name, and nbgrader's collect only warns ("cheating
   attempt?") and takes the newest one. Here a submission counts only when its folder's owner is
   the student it names; others are left out (and logged), and that student's own newest
   submission is collected instead.
2. Students may write into `inbound/` directly. A folder made there by hand can hold a symbolic
   link, say `data/x -> <course>/source/<lab>/<lab>.ipynb`; nbgrader copies submissions
   following links, as the grader, so the hidden tests would land in the student's collected
   submission, where the student's code reads them during autograde and prints them into the
   feedback. Here the folder is opened without following a link, copied with links kept as
   links, and every link is then removed from the copy (and logged): the grader never reads a
   file through a student's link.

3. A folder made by hand may also lack the files `nbgrader submit` writes (timestamp.txt,
   submission_secret.txt), and nbgrader's release_feedback then fails for the whole class. Such a
   folder is not a submission: it is left out like a forged one.

The course's nbgrader_config.py selects it (`c.ExchangeFactory.collect`), so the formgrader's
Collect button and `nbgrader collect` both use it.
"""

from __future__ import annotations

import glob
import os
import pwd
import shutil
import stat

from nbgrader.exchange import ExchangeError
from nbgrader.exchange.default.collect import ExchangeCollect
from nbgrader.utils import ignore_patterns


def owner_of(path: str) -> str | None:
    """The user owning the folder `path` itself (a link is not followed), or None when `path` is
    not a folder (a link, a file) or is gone."""
    try:
        st = os.lstat(path)
    except OSError:
        return None
    if not stat.S_ISDIR(st.st_mode):
        return None
    return _name(st.st_uid)


def _name(uid: int) -> str:
    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return f"uid {uid}"


SUBMIT_FILES = ("timestamp.txt", "submission_secret.txt")   # what `nbgrader submit` writes


def problem(path: str, user: str) -> str | None:
    """Why the folder `path` in inbound/ is not `user`'s own submission (None when it is)."""
    who = owner_of(path)
    if who is None:
        return "it is a link or a file, not a folder"
    if who != user:
        return f"it was submitted by {who}"
    for name in SUBMIT_FILES:
        try:
            if not stat.S_ISREG(os.lstat(os.path.join(path, name)).st_mode):
                return f"its {name} is not a file"
        except OSError:
            return f"it has no {name} (not made by nbgrader submit)"
    return None


def claimed_student(path: str) -> str:
    """The student id a submission's folder name claims (nbgrader's own split of the name)."""
    return os.path.basename(path).rsplit("+", 3)[0]


class OwnerCheckedCollect(ExchangeCollect):
    """nbgrader's collect, without submissions filed under another student's name and without
    following any link a submission holds."""

    def init_src(self):
        super().init_src()
        self.refused: list[tuple[str, str]] = []   # (inbound folder name, why)
        kept = []
        for record in self.src_records:
            user = record["username"]
            if problem(os.path.join(self.inbound_path, record["filename"]), user) is None:
                kept.append(record)
                continue
            # nbgrader chose a refused one (the newest under this name): log every refused one,
            # then take the student's own newest submission, if there is one
            pattern = os.path.join(self.inbound_path,
                                   f"{glob.escape(user)}+{glob.escape(self.coursedir.assignment_id)}+*")
            own = []
            for path in glob.glob(pattern):
                why = problem(path, user)
                if why is None:
                    own.append(self._path_to_record(path))
                else:
                    self.refused.append((os.path.basename(path), why))
                    self.log.error("not collected: %s names %s but %s", os.path.basename(path), user, why)
            if own:
                kept.append(self._sort_by_timestamp(own)[0])
        self.src_records = kept

    def do_copy(self, src, dest, log=None):
        """Copy one submission folder: opened without following links and checked to be its
        student's, links kept as links while copying, then removed from the copy."""
        try:
            fd = os.open(src, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
        except OSError as exc:
            raise ExchangeError(f"cannot open the submission {src} as a folder ({exc.strerror})") from None
        try:
            who, claimed = _name(os.fstat(fd).st_uid), claimed_student(src)
            if who != claimed:
                raise ExchangeError(f"{os.path.basename(src)} names {claimed} but belongs to {who}")
            here = f"/proc/self/fd/{fd}"     # the folder opened above, whatever the name now points to
            size, limit = self.get_size(here), 1000 * self.coursedir.max_dir_size
            if size > limit:
                raise ExchangeError(f"the submission {src} is too big ({size} bytes; at most {limit})")
            nbgrader_ignore = ignore_patterns(exclude=self.coursedir.ignore, include=self.coursedir.include,
                                              max_file_size=self.coursedir.max_file_size, log=self.log)

            def ignore(folder, names):   # links are left behind (and any made meanwhile removed below)
                links = [n for n in names if os.path.islink(os.path.join(folder, n))]
                return set(nbgrader_ignore(folder, [n for n in names if n not in links])) | set(links)

            self._log_links(here, claimed)
            shutil.copytree(here, dest, symlinks=True, ignore=ignore)
        finally:
            os.close(fd)
        self._log_links(dest, claimed, remove=True)   # any made between the walk and the copy
        if self.coursedir.groupshared:   # as nbgrader's own copy: the instructors' group may write
            for folder, dirs, files in os.walk(dest):
                os.chmod(folder, (os.stat(folder).st_mode | 0o2770) & 0o2777)
                for name in files:
                    path = os.path.join(folder, name)
                    os.chmod(path, (os.stat(path).st_mode | 0o660) & 0o777)

    def _log_links(self, folder: str, student: str, remove: bool = False) -> None:
        """Name every link below `folder` in the log (it is not collected); `remove`: delete it."""
        for sub, dirs, files in os.walk(folder):
            for name in [*dirs, *files]:
                path = os.path.join(sub, name)
                if os.path.islink(path):
                    self.log.error("not collected from %s's submission: the link %s -> %s",
                                   student, os.path.relpath(path, folder), os.readlink(path))
                    if remove:
                        os.unlink(path)
