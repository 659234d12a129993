"""Unix accounts for a room: groups, users with private homes, random passwords.

Only accounts this classroom created (its record says so) are ever changed or removed: an
account of the same name that was there before is refused, never taken over.
"""

from __future__ import annotations

import grp
import os
import pwd
import secrets
from pathlib import Path

from hpclab.core import commands
from hpclab.core.errors import HpclabError
from hpclab.classroom.record import Record

HOME_ROOT = Path("/home")


def exists(user: str) -> bool:
    try:
        pwd.getpwnam(user)
        return True
    except KeyError:
        return False


def group_exists(group: str) -> bool:
    try:
        grp.getgrnam(group)
        return True
    except KeyError:
        return False


def home(user: str) -> Path:
    return Path(pwd.getpwnam(user).pw_dir)


def ensure_group(rec: Record, group: str) -> None:
    if group_exists(group):
        if group not in rec.groups:
            raise HpclabError(f"a group named {group} exists already and this classroom did not create it",
                              "remove it, or tear down the classroom that made it, then run up again")
        return
    rec.note("groups", group)
    commands.output(["groupadd", group], f"create the group {group}", "run as root ('sudo make classroom')")


def ensure_user(rec: Record, user: str, group: str) -> bool:
    """Create `user` (home 0700 below /home, login shell bash, member of `group`); True if new."""
    if exists(user):
        if user not in rec.users:
            raise HpclabError(f"an account named {user} exists already and this classroom did not create it",
                              "the classroom never takes over an account: remove it or choose fewer students")
        _private_home(user)
        return False
    rec.note("users", user)
    commands.output(["useradd", "--create-home", "--home-dir", str(HOME_ROOT / user), "--shell", "/bin/bash",
                     "--user-group", "--groups", group, user],
                    f"create the account {user}", "run as root ('sudo make classroom')")
    _private_home(user)
    return True


def _private_home(user: str) -> None:
    # useradd's default (HOME_MODE in /etc/login.defs) is 0700 on Debian 12 but 0755 on older
    # systems: a student's home is private whatever the defaults say.
    home(user).chmod(0o700)


def set_password(user: str) -> str:
    """Give `user` a new random password (16 characters, URL-safe); return it."""
    password = secrets.token_urlsafe(12)
    r = commands.run(["chpasswd"], f"set the password of {user}", input=f"{user}:{password}\n")
    if r is None or r.returncode != 0:
        said = r.stderr.strip() if r is not None else "chpasswd did not answer within 60 s"
        raise HpclabError(f"cannot set the password of {user}: {said}", "run as root")
    return password


def remove_user(rec: Record, user: str) -> None:
    """Remove an account this classroom created, with its home and its processes."""
    if user not in rec.users:
        return
    if exists(user):
        commands.run(["pkill", "-KILL", "-u", user], f"stop the processes of {user}", timeout=10)
        r = commands.run(["userdel", "--remove", user], f"remove the account {user}", timeout=30)
        if r is not None and r.returncode not in (0, 12):  # 12: home could not be removed (reported below)
            raise HpclabError(f"cannot remove the account {user}: {r.stderr.strip()}", "run as root")
    rec.forget("users", user)


def remove_group(rec: Record, group: str) -> None:
    if group not in rec.groups:
        return
    if group_exists(group):
        commands.output(["groupdel", group], f"remove the group {group}", "run as root")
    rec.forget("groups", group)


def uid(user: str) -> int:
    return pwd.getpwnam(user).pw_uid


def gid(group: str) -> int:
    return grp.getgrnam(group).gr_gid


def as_user(user: str) -> list[str]:
    """The prefix that runs a command as `user` with their groups and home, without a PAM session
    (setpriv, as munged is started): what the isolation tests and the hub's helpers use."""
    pw = pwd.getpwnam(user)
    return ["setpriv", f"--reuid={pw.pw_uid}", f"--regid={pw.pw_gid}", "--init-groups",
            "env", "-i", f"HOME={pw.pw_dir}", f"USER={user}", f"LOGNAME={user}",
            "PATH=/usr/local/bin:/usr/bin:/bin", *_slurm_env()]


def _slurm_env() -> list[str]:
    conf = os.environ.get("SLURM_CONF")
    return [f"SLURM_CONF={conf}"] if conf else []
