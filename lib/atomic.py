"""Write files whole or not at all: a temporary file in the same folder, fsync, then one rename.

A crash mid-write leaves the old file (or none), never half a file; a failed write (a full disk, a read-only
folder) removes its temporary file and raises an ``OSError`` that names ``path``. :func:`check_out_file` and
:func:`check_out_dir` refuse an unusable output location before any work, as one line (``lib.cli_errors``).
Used in: run logs, checkpoints, reports, generated notebooks, every CLI's ``--out``.
"""

from __future__ import annotations

import json
import os
import tempfile
from typing import Any

from lib.cli_errors import UserError


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
    tmp = None
    try:
        os.makedirs(d, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=d, prefix=".tmp-", suffix=os.path.splitext(path)[1][:16] + ".tmp")
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, _mode_for(path))
        os.replace(tmp, path)
    except BaseException as e:
        if tmp is not None and os.path.exists(tmp):
            os.unlink(tmp)
        if isinstance(e, OSError) and e.errno is not None and e.filename != path:  # name the file, not the tmp
            raise OSError(e.errno, os.strerror(e.errno), path) from e
        raise


def write_text(path: str, text: str) -> None:
    """Replace ``path`` with UTF-8 ``text`` atomically."""
    write_bytes(path, text.encode("utf-8"))


def write_json(path: str, obj: Any, indent: int | None = 1) -> None:
    """Replace ``path`` with ``obj`` as JSON (newline-terminated) atomically."""
    write_text(path, json.dumps(obj, indent=indent, ensure_ascii=False) + "\n")


def _nearest_existing(path: str) -> str:
    p = os.path.abspath(path)
    while not os.path.lexists(p):
        p = os.path.dirname(p)
    return p


def _check_names(flag: str, path: str) -> None:
    if not isinstance(path, str) or not path.strip():
        raise UserError(f"{flag}: {path!r} is empty; allowed: a path")
    if "\0" in path:
        raise UserError(f"{flag}: {path!r} holds a NUL character; allowed: a path the file system takes")
    for part in os.path.abspath(path).split(os.sep):
        if len(part.encode("utf-8", "surrogateescape")) > 255:
            raise UserError(f"{flag}: {path[:60]!r}...: a name is longer than 255 bytes; allowed: shorter names")


def _check_writable_dir(flag: str, path: str, d: str) -> None:
    """``d`` (an existing folder that will hold ``path`` or its folders) takes a new file: probed, not guessed."""
    if not os.path.isdir(d):
        raise UserError(f"{flag}: {path}: {d} is a file, not a folder; allowed: a path under a folder")
    try:
        fd, probe = tempfile.mkstemp(dir=d, prefix=".probe-")
        os.close(fd)
        os.unlink(probe)
    except OSError as e:
        raise UserError(f"{flag}: {path}: cannot write in {d} ({e.strerror or e}); allowed: a writable "
                        f"folder") from None


def check_out_file(flag: str, path: str) -> str:
    """``path`` can be written as a file: not a folder, under folders (or creatable ones) that take a new file,
    a name the file system takes. A :class:`UserError` naming ``flag`` otherwise; call it before any work."""
    _check_names(flag, path)
    if os.path.isdir(path) or path.endswith(os.sep):
        raise UserError(f"{flag}: {path} is a folder; allowed: a file path")
    if os.path.lexists(path) and not os.path.isfile(path):
        raise UserError(f"{flag}: {path} exists and is not a regular file; allowed: a file path")
    _check_writable_dir(flag, path, _nearest_existing(os.path.dirname(os.path.abspath(path))))
    return path


def check_out_dir(flag: str, path: str) -> str:
    """``path`` is (or can be created as) a folder that takes new files; a :class:`UserError` otherwise."""
    _check_names(flag, path)
    if os.path.lexists(path) and not os.path.isdir(path):
        raise UserError(f"{flag}: {path} is a file, not a folder; allowed: a folder")
    _check_writable_dir(flag, path, _nearest_existing(path))
    return path
