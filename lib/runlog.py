"""Run logs: one JSON Lines file per run, a header line then one record per update.

The header says what produced the run (``config``, ``env`` = hardware or simulator profile, ``seed``, library
version, git commit); every later line is one record (one REINFORCE update, one evaluation round, ...).
Each append is a single ``write`` of a whole line, flushed and fsynced, so a crash can at worst leave a
truncated *last* line, which :func:`read` ignores. Figures are drawn from these files, never from memory.
Used in: Part I, chapters 2-3 (and any chapter that logs runs).
"""

from __future__ import annotations

import json
import os
import subprocess
from typing import Any, Iterable

import lib
from lib import atomic

HEADER_KIND = "header"


def git_commit(repo_dir: str | None = None) -> str | None:
    """The current commit of the book's repository, or ``None`` outside a git checkout."""
    repo_dir = repo_dir or os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    try:
        out = subprocess.run(
            ["git", "rev-parse", "HEAD"], cwd=repo_dir, capture_output=True, text=True, timeout=5, check=False
        )
    except (OSError, subprocess.SubprocessError):
        return None
    sha = out.stdout.strip()
    return sha if out.returncode == 0 and len(sha) == 40 else None


def make_header(config: dict, env: Any, seed: int | None, **extra: Any) -> dict:
    """A header record: ``config`` (JSON-able dict), ``env`` (description of hardware or profile), ``seed``."""
    h = {
        "kind": HEADER_KIND,
        "config": config,
        "env": env,
        "seed": seed,
        "lib_version": lib.__version__,
        "git_commit": git_commit(),
    }
    h.update(extra)
    return h


def _dumps(record: dict) -> str:
    line = json.dumps(record, separators=(",", ":"), sort_keys=False, allow_nan=True)
    if "\n" in line:  # json.dumps never emits raw newlines; keep the invariant explicit
        raise ValueError("a run-log record must serialise to a single line")
    return line + "\n"


class RunLog:
    """An append-only JSON Lines run log.

    ``RunLog.create(path, header)`` starts a new file (atomically, header only);
    ``RunLog.open(path)`` reopens an existing one for appending; ``append(record)`` adds one whole line.
    """

    def __init__(self, path: str):
        self.path = path

    @classmethod
    def create(cls, path: str, header: dict) -> "RunLog":
        if header.get("kind") != HEADER_KIND:
            raise ValueError(f"a run-log header needs kind={HEADER_KIND!r}; got kind={header.get('kind')!r}")
        atomic.write_text(path, _dumps(header))
        return cls(path)

    @classmethod
    def open(cls, path: str) -> "RunLog":
        read(path)  # validates the header
        return cls(path)

    def append(self, record: dict) -> None:
        """Append one record as one line, flushed and fsynced."""
        if record.get("kind") == HEADER_KIND:
            raise ValueError("only the first line of a run log may be a header")
        line = _dumps(record)
        # Repair a truncated last line (a crash mid-write) before appending, so it cannot glue onto ours.
        with open(self.path, "rb") as f:
            f.seek(0, os.SEEK_END)
            size = f.tell()
            if size:
                f.seek(size - 1)
                last = f.read(1)
            else:
                last = b"\n"
        if last != b"\n":
            header, records = read(self.path)
            rewrite(self.path, header, records)
        with open(self.path, "a") as f:
            f.write(line)
            f.flush()
            os.fsync(f.fileno())

    def read(self) -> tuple[dict, list[dict]]:
        return read(self.path)


def read(path: str) -> tuple[dict, list[dict]]:
    """Return ``(header, records)``; a truncated last line (from a crash) is ignored.

    Raises ``ValueError`` when the file is empty, its first line is not a header, or a line other than the
    last is not valid JSON.
    """
    if not os.path.exists(path):
        raise FileNotFoundError(f"no run log at {path!r}")
    with open(path) as f:
        lines = f.read().split("\n")
    # A complete file ends with "\n", so the final split element is "" ; anything else is a partial line.
    complete, tail = lines[:-1], lines[-1]
    if tail.strip():
        try:
            json.loads(tail)
            complete.append(tail)  # a whole record that merely lacks its newline
        except json.JSONDecodeError:
            pass  # truncated by a crash: ignore
    if not complete:
        raise ValueError(f"run log {path!r} is empty (expected a header line)")
    parsed = []
    for i, line in enumerate(complete):
        try:
            parsed.append(json.loads(line))
        except json.JSONDecodeError as e:
            raise ValueError(f"run log {path!r}: line {i + 1} is not valid JSON ({e})") from e
    header, records = parsed[0], parsed[1:]
    if not isinstance(header, dict) or header.get("kind") != HEADER_KIND:
        raise ValueError(f"run log {path!r}: first line must be a header with kind={HEADER_KIND!r}")
    return header, records


def rewrite(path: str, header: dict, records: Iterable[dict]) -> None:
    """Atomically replace the log with ``header`` and ``records`` (used to drop records past a checkpoint)."""
    atomic.write_text(path, _dumps(header) + "".join(_dumps(r) for r in records))
