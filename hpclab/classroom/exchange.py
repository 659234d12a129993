"""nbgrader's collect for a room: only the submissions a student made themselves are collected.

nbgrader's exchange names a submission `<student>+<lab>+<time>+<random>` in `inbound/`, and the
student id in that name is whatever the submitter asked for: `nbgrader submit lab --student
student02`, run by student01, files a submission under student02's name. nbgrader's own collect
only warns when the folder's owner differs from the name ("cheating attempt?") and still takes
the newest one, so one student could replace another's work. In a room every account is a Unix
user, so the owner of the submission's folder is the submitter: this collect leaves out every
submission whose owner is not the student it names (and says so in the log), and falls back to
that student's own newest submission.

The course's nbgrader_config.py selects it (`c.ExchangeFactory.collect`), so the formgrader's
Collect button and `nbgrader collect` both use it.
"""

from __future__ import annotations

import glob
import os
import pwd

from nbgrader.exchange.default.collect import ExchangeCollect


def owner(path: str) -> str:
    """The user name owning `path` ("uid <n>" for a uid without a name)."""
    uid = os.stat(path).st_uid
    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return f"uid {uid}"


class OwnerCheckedCollect(ExchangeCollect):
    """nbgrader's collect, without submissions filed under another student's name."""

    def init_src(self):
        super().init_src()
        self.forged: list[tuple[str, str]] = []   # (inbound folder name, its real owner)
        kept = []
        for record in self.src_records:
            user = record["username"]
            if owner(os.path.join(self.inbound_path, record["filename"])) == user:
                kept.append(record)
                continue
            # nbgrader chose a forged one (the newest under this name): log every forged one,
            # then take the student's own newest submission, if there is one
            pattern = os.path.join(self.inbound_path, f"{glob.escape(user)}+{glob.escape(self.coursedir.assignment_id)}+*")
            own = []
            for path in glob.glob(pattern):
                who = owner(path)
                if who == user:
                    own.append(self._path_to_record(path))
                else:
                    self.forged.append((os.path.basename(path), who))
                    self.log.error("not collected: %s names %s but was submitted by %s",
                                   os.path.basename(path), user, who)
            if own:
                kept.append(self._sort_by_timestamp(own)[0])
        self.src_records = kept
