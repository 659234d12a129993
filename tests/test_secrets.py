"""Secrets and state files written safely (issue 27).

Every secret the project writes (the accounting database's password and slurmdbd.conf that holds
it, the munge key, the hub's cookie secret and proxy token, the instructors' passwords file) is
created with its final mode and owner in one atomic write; state files that other commands read
(nodes.json, the virtual nodes' layout, the classroom record) are renamed into place, never
written in place. The writers run on a temporary folder, so these tests touch neither the
machine's cluster nor its classroom.

The watch looks at every file below the folder twice over: a thread that scans it in a tight
loop, and a scan at every call that changes a file's name, mode or owner (chmod, chown, rename),
which is where a file written first and locked down afterwards would be caught. The umask is 0
meanwhile, so a file created without an explicit mode would be readable by everyone.
"""

from __future__ import annotations

import ast
import os
import pwd
import threading
from pathlib import Path

import pytest

from hpclab.core import io, paths

ROOT = Path(__file__).resolve().parent.parent

# File names of secrets; a temporary file of write_atomic is ".<name>.<pid>.<hex>.tmp".
SECRET_NAMES = ("db.password", "slurmdbd.conf", "munge.key", "jupyterhub_cookie_secret", "proxy_auth_token",
                "passwords.txt")


def _is_secret(name: str) -> bool:
    return any(name == s or name.startswith(f".{s}.") for s in SECRET_NAMES)


class Watch:
    """Every moment a secret below `root` was readable or writable by anyone but its owner."""

    def __init__(self, root: Path):
        self.root = str(root)
        self.seen: list[tuple[str, str]] = []
        self.scans = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)

    def scan(self) -> None:
        self.scans += 1
        for folder, _dirs, files in os.walk(self.root):
            for name in files:
                if not _is_secret(name):
                    continue
                try:
                    mode = os.lstat(os.path.join(folder, name)).st_mode & 0o7777
                except FileNotFoundError:
                    continue
                if mode & 0o077:
                    self.seen.append((os.path.join(folder, name), oct(mode)))

    def _loop(self) -> None:
        while not self._stop.is_set():
            self.scan()

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join()
        self.scan()


@pytest.fixture
def watched(tmp_path, monkeypatch):
    """A Watch on tmp_path with a scan before every chmod, chown and rename, under umask 0."""
    watch = Watch(tmp_path)
    for name in ("chmod", "fchmod", "chown", "fchown", "replace", "rename"):
        real = getattr(os, name)

        def checkpoint(*args, _real=real, **kwargs):
            watch.scan()
            return _real(*args, **kwargs)

        monkeypatch.setattr(os, name, checkpoint)
    old = os.umask(0)
    try:
        yield watch
    finally:
        os.umask(old)


@pytest.fixture
def cluster_layout(tmp_path, monkeypatch):
    """The cluster's Layout with its state, daemon and spool folders below tmp_path."""
    from hpclab.cluster import config

    monkeypatch.setattr(paths, "SYSTEM_STATE_ROOT", tmp_path / "var-lib-hpclab")
    monkeypatch.setattr(paths, "SPOOL_ROOT", tmp_path / "var-spool-hpclab")
    return config.Layout(tmp_path / "state")


def _node():
    from hpclab.cluster import config

    return config.Node(name="node1", addr="127.0.0.1", hardware=config.NodeHardware(2, 1, 2, 1, 1024))


def _mode(path: Path) -> int:
    return path.stat().st_mode & 0o7777


def test_write_atomic_creates_the_file_with_its_final_mode_and_owner(tmp_path, watched):
    """Does write_atomic's file exist, under any name, only with the mode it was asked for?"""
    with watched:
        for i in range(50):
            io.write_atomic(tmp_path / "db.password", f"secret {i}\n", mode=0o600,
                            owner=(os.getuid(), os.getgid()))
    assert watched.seen == [] and watched.scans > 50
    assert _mode(tmp_path / "db.password") == 0o600
    assert (tmp_path / "db.password").read_text() == "secret 49\n"
    assert [p.name for p in tmp_path.iterdir()] == ["db.password"], "no temporary file is left"


def test_the_watch_sees_a_secret_written_then_locked_down(tmp_path, watched):
    """Would the watch catch today's old way (write_text, then chmod 0600)? (The test of the test.)"""
    with watched:
        (tmp_path / "db.password").write_text("secret")
        (tmp_path / "db.password").chmod(0o600)
    assert watched.seen and watched.seen[0][0].endswith("db.password")


def test_ensure_secret_keeps_an_existing_secret_and_restores_its_mode(tmp_path, watched):
    """Does a second call keep the secret, and give a loosened file its mode back?"""
    path = tmp_path / "proxy_auth_token"
    with watched:
        first = io.ensure_secret(path, lambda: "abc\n")
        again = io.ensure_secret(path, lambda: "other\n")
    assert first == again == b"abc\n" and watched.seen == []
    path.chmod(0o644)
    assert io.ensure_secret(path, lambda: "other\n") == b"abc\n" and _mode(path) == 0o600
    path.write_text("  \n")  # an empty secret is made anew
    assert io.ensure_secret(path, lambda: b"new") == b"new"


def test_cluster_secrets_are_never_readable_by_others(cluster_layout, watched):
    """While the cluster's configuration is written (db.password, slurmdbd.conf) and, as root,
    munged's key is made, is a secret ever readable by anyone but its owner?"""
    from hpclab.cluster import config, local

    lay = cluster_layout
    with watched:
        config.write_configs(lay, [_node()])
        config.write_configs(lay, [_node()])  # a second up keeps the password
        munge = os.geteuid() == 0 and _user("munge")
        if munge:
            local._prepare_munge(lay)
    assert watched.seen == []
    assert _mode(lay.db_password) == 0o600 and _mode(lay.slurmdbd_conf) == 0o600
    assert f"StoragePass={config.db_password(lay)}\n" in lay.slurmdbd_conf.read_text()
    if munge:
        assert _mode(lay.munge_key) == 0o400 and lay.munge_key.stat().st_uid == munge.pw_uid
        assert lay.munge_key.stat().st_size == 1024


def _user(name: str):
    try:
        return pwd.getpwnam(name)
    except KeyError:
        return None


def test_classroom_secrets_are_never_readable_by_others(tmp_path, watched, monkeypatch):
    """While the hub's cookie secret and proxy token and the instructors' passwords file are
    written, is a secret ever readable by anyone but its owner? Does the passwords file appear
    already owned by the first instructor?"""
    from hpclab.classroom import accounts, hub, room
    from hpclab.classroom.layout import ClassroomLayout

    lay = ClassroomLayout(tmp_path / "classroom")
    lay.instructors.mkdir(parents=True)
    monkeypatch.setattr(accounts, "set_password", lambda user: f"pw-of-{user}")
    monkeypatch.setattr(accounts, "uid", lambda user: os.getuid())
    monkeypatch.setattr(accounts, "gid", lambda group: os.getgid())
    with watched:
        room._write_passwords(lay, ["student01", "student02"], "instructor1")
        room._write_passwords(lay, ["student03"], "instructor1")
        if os.geteuid() == 0:  # the hub's secrets are root's
            lay.hub.mkdir(mode=0o700)
            f = hub.files(lay)
            hub._ensure_secret(f.cookie_secret)
            hub._ensure_secret(f.proxy_token)
    assert watched.seen == []
    assert _mode(lay.passwords) == 0o600 and lay.passwords.stat().st_uid == os.getuid()
    assert lay.passwords.read_text().splitlines()[1:] == [f"student0{i} pw-of-student0{i}" for i in (1, 2, 3)]
    if os.geteuid() == 0:
        assert _mode(f.cookie_secret) == _mode(f.proxy_token) == 0o600
        assert len(f.cookie_secret.read_text().strip()) == 64


def test_state_files_are_renamed_into_place(cluster_layout, tmp_path, monkeypatch):
    """Are nodes.json, the virtual nodes' layout and the classroom record each written to a
    temporary file and renamed over the old one (a reader sees the old or the new, never half)?"""
    from hpclab.classroom import record
    from hpclab.cluster import config, netns, vnodes

    renamed: list[str] = []
    real = os.replace
    monkeypatch.setattr(os, "replace", lambda src, dst: (renamed.append(str(dst)), real(src, dst))[1])
    lay = cluster_layout
    lay.make_dirs()
    config.save_nodes(lay, [_node()])
    vnodes._save_layout(lay, vnodes.VLayout(2, 1, "1g", False, "1g on every link"))
    rec = record.Record(tmp_path / "classroom" / "classroom.json")
    rec.note("users", "student01")
    assert renamed == [str(lay.nodes_json), str(netns.layout_file(lay)), str(rec.path)]
    assert config.load_nodes(lay) == [_node()]
    assert vnodes._load_layout(lay).link == "1g"
    assert record.load(rec.path).users == ["student01"] and _mode(rec.path) == 0o600


# --- a static check: no secret is written any other way ---------------------------------------

# Attributes and names that hold a secret's path in the cluster's and the classroom's code.
SECRET_PATHS = ("db_password", "munge_key", "cookie_secret", "proxy_token", "passwords", "slurmdbd_conf")
SECRET_MODES = {0o600, 0o400}


def _mentions_secret(node: ast.AST) -> bool:
    return any(isinstance(n, ast.Attribute) and n.attr in SECRET_PATHS for n in ast.walk(node))


def _secret_writes_done_otherwise(root: Path = ROOT) -> list[str]:
    """Every place in hpclab/cluster and hpclab/classroom below `root` that writes a secret's path
    without write_atomic / ensure_secret and a private mode."""
    bad = []
    for py in sorted((root / "hpclab" / "cluster").glob("*.py")) + sorted((root / "hpclab" / "classroom").glob("*.py")):
        tree = ast.parse(py.read_text(), str(py))
        for call in (n for n in ast.walk(tree) if isinstance(n, ast.Call)):
            where = f"{py.relative_to(root)}:{call.lineno}"
            func = call.func
            name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
            if name in ("write_text", "write_bytes") and isinstance(func, ast.Attribute) and _mentions_secret(func.value):
                bad.append(f"{where}: {name} of a secret")
            elif name in ("open", "fdopen") and call.args and _mentions_secret(call.args[0]):
                bad.append(f"{where}: open() of a secret")
            elif name in ("write_atomic", "ensure_secret", "write_if_changed") and call.args \
                    and _mentions_secret(call.args[0]):
                mode = next((k.value for k in call.keywords if k.arg == "mode"), None)
                if name == "ensure_secret" and mode is None:
                    continue  # its default is 0600
                if not (isinstance(mode, ast.Constant) and mode.value in SECRET_MODES):
                    bad.append(f"{where}: {name} of a secret without mode 0600 or 0400")
    return bad


def test_no_secret_is_written_with_write_text_or_open():
    """Does every write of a secret's path in the cluster's and the classroom's code go through
    write_atomic or ensure_secret with a private mode (never write_text, open, or a later chmod)?"""
    assert _secret_writes_done_otherwise() == []


def test_the_static_check_finds_a_secret_written_in_place(tmp_path):
    """Would the static check see `lay.db_password.write_text(...)` and a secret written with
    write_atomic's default mode? (The test of the test.)"""
    fake = tmp_path / "hpclab" / "cluster"
    fake.mkdir(parents=True)
    (fake / "x.py").write_text("def f(lay, files):\n    lay.db_password.write_text('s')\n"
                               "    write_atomic(files.cookie_secret, 's')\n")
    found = _secret_writes_done_otherwise(tmp_path)
    assert len(found) == 2 and "write_text" in found[0] and "without mode" in found[1]
