"""Write files whole or not at all: a temporary file in the same folder, fsync, then one rename.

A crash mid-write leaves the old file (or none), never half a file. Used in: run logs, checkpoints, reports,
generated notebooks.
"""

from __future__ import annotations

import json
import os
import tempfile
from typing import Any


def _mode_for(path: str) -> int:
    """Keep an existing file's permissions; a new file gets the usual 0o666 less the umask (not mkstemp's 0o600)."""
    try:
        return os.stat(path).st_mode & 0o7777
    except FileNotFoundError:
        umask = os.umask(0)
        os.umask(umask)
        return 0o666 & ~umask


def write_bytes(path: str, data: bytes) -> None:
    """Replace ``path`` with ``data`` atomically (creating its folder if needed)."""
    d = os.path.dirname(os.path.abspath(path))
    os.makedirs(d, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=d, prefix=".tmp-", suffix=os.path.splitext(path)[1] + ".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, _mode_for(path))
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def write_text(path: str, text: str) -> None:
    """Replace ``path`` with UTF-8 ``text`` atomically."""
    write_bytes(path, text.encode("utf-8"))


def write_json(path: str, obj: Any, indent: int | None = 1) -> None:
    """Replace ``path`` with ``obj`` as JSON (newline-terminated) atomically."""
    write_text(path, json.dumps(obj, indent=indent, ensure_ascii=False) + "\n")
