"""The one way hpclab writes a file that others may read at the same moment (run folders, indexes,
configs, caches): a temporary file in the same folder, flushed to disk, then renamed over the
target, so a reader (or a machine that loses power) sees the old content or the new one, never
half a file."""

from __future__ import annotations

import os
import secrets
from pathlib import Path


def write_atomic(path: str | Path, data: str | bytes, mode: int | None = None) -> Path:
    """Write text or bytes to `path` atomically (temp file, fsync, rename). `mode`: the file's
    permissions from its creation on (default: 0666 less the umask). Returns the path."""
    path = Path(path)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{secrets.token_hex(3)}.tmp")
    # Created with its final mode (a secret is never readable by others, not even empty).
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666 if mode is None else mode)
    try:
        with os.fdopen(fd, "wb" if isinstance(data, bytes) else "w") as fh:
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
