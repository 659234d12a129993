"""The one way hpclab writes a file that others may read at the same moment (run folders, indexes,
configs, caches): a temporary file in the same folder, flushed to disk, then renamed over the
target, so a reader (or a machine that loses power) sees the old content or the new one, never
half a file. Secrets (keys, passwords, tokens) go through `ensure_secret`: the temporary file is
created with the secret's final mode and owner, so no one else can read it at any moment."""

from __future__ import annotations

import os
import secrets
from pathlib import Path

from hpclab.core.errors import HpclabError


def write_atomic(path: str | Path, data: str | bytes, mode: int | None = None,
                 owner: tuple[int, int] | None = None) -> Path:
    """Write text or bytes to `path` atomically (temp file, fsync, rename). `mode`: the file's
    permissions from its creation on (default: 0666 less the umask). `owner`: (uid, gid) given to
    the temporary file before the rename (root only), so the file appears under its name with its
    final owner, mode and content at once. Returns the path."""
    path = Path(path)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{secrets.token_hex(3)}.tmp")
    # Created with its final mode, or tighter (the umask): a secret is never readable by others,
    # not even empty, and O_EXCL never opens a file someone else put there.
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o666 if mode is None else mode)
    try:
        with os.fdopen(fd, "wb" if isinstance(data, bytes) else "w") as fh:
            if owner is not None:
                os.fchown(fh.fileno(), *owner)  # before fchmod: a chown may clear set-id bits
            if mode is not None:
                os.fchmod(fh.fileno(), mode)   # the umask does not loosen or tighten it
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)
    return path


def write_if_changed(path: str | Path, text: str, mode: int = 0o644) -> bool:
    """Write atomically only when the content differs (a daemon's config keeps its mtime);
    the mode is set either way. True if written."""
    path = Path(path)
    if path.exists() and path.read_text() == text:
        path.chmod(mode)
        return False
    write_atomic(path, text, mode)
    return True


def ensure_secret(path: str | Path, make, mode: int = 0o600, owner: tuple[int, int] | None = None) -> bytes:
    """A secret made once and kept (a key, a password, a token): when `path` is missing or empty,
    `make()` (bytes or str) is written with write_atomic, so the file appears with its final mode
    and owner (uid, gid) already set; an existing one keeps its content and gets that mode and
    owner again. Returns the secret's bytes."""
    path = Path(path)
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        data = b""
    if not data.strip():
        made = make()
        data = made.encode() if isinstance(made, str) else made
        write_atomic(path, data, mode=mode, owner=owner)
    else:
        if owner is not None:
            os.chown(path, *owner)
        os.chmod(path, mode)
    return data


def readable_folders(top: str | Path, *below: str, what: str, fix: str) -> Path:
    """Make top/below[0]/below[1]/... (each level, top included, 0755: every user's jobs and
    servers read what is in them) and return the deepest; a folder this user may not make or
    change is an HpclabError saying `what` could not be made and `fix`."""
    top = Path(top)
    levels = [top]
    for name in below:
        levels.append(levels[-1] / name)
    try:
        levels[-1].mkdir(parents=True, exist_ok=True)
        for d in levels:
            d.chmod(0o755)
    except OSError as exc:
        raise HpclabError(f"cannot make {what} {levels[-1]}: {exc.strerror}", fix) from None
    return levels[-1]
