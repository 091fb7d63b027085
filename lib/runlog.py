"""Run logs: one JSON Lines file per run, a header line then one record per update.

The header says what produced the run (``config``, ``env`` = hardware or simulator profile, ``seed``, library
version, git commit); every later line is one record (one REINFORCE update, one evaluation round, ...).
Each append is a single ``write`` of a whole line, flushed and fsynced, so a crash can at worst leave a
truncated *last* line. One process writes a run: :func:`writer_lock` (``<log>.lock``, held for the whole run)
refuses a second. :func:`read` refuses a damaged log with an error naming the file and line: a truncated last
line (unless ``repair=True``, which drops it and keeps every complete record), a line that is not JSON, a
second header, or ``update`` numbers that do not strictly increase (two writers interleaved). Figures are
drawn from these files, never from memory. Used in: Part I, chapters 2-3 (and any chapter that logs runs).
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
from typing import Any, Iterable, NamedTuple

import lib
from lib import atomic
from lib.cli_errors import UserError

HEADER_KIND = "header"


class RunLogError(UserError):
    """A damaged run log; the message names the file and the line."""


class RunLogBusy(UserError):
    """Another process holds the run's writer lock."""


@contextlib.contextmanager
def writer_lock(path: str):
    """Hold ``<path>.lock`` (exclusive, released when this process ends, even by SIGKILL) for the block;
    raise :class:`RunLogBusy` at once if another process holds it."""
    import filelock

    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    lock = filelock.FileLock(path + ".lock")
    try:
        lock.acquire(timeout=0)
    except filelock.Timeout:
        name = os.path.basename(path)[: -len(".jsonl")] if path.endswith(".jsonl") else os.path.basename(path)
        raise RunLogBusy(f"run {name!r} ({path}) is being written by another process (it holds {path}.lock); "
                         f"wait for it to finish or pick another --name") from None
    try:
        yield
    finally:
        lock.release()


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
        # A last line without its newline must not glue onto ours: a whole record is rewritten with one,
        # a truncated one refused (read raises) -- the caller decides whether to repair.
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


class Scan(NamedTuple):
    """What a log holds: its header, its complete records, and the line number of a truncated last line."""

    header: dict
    records: list
    torn_line: int | None


def scan(path: str) -> Scan:
    """Parse and check a log, reporting (not refusing) a truncated last line; see :func:`read`."""
    if not os.path.exists(path):
        raise FileNotFoundError(f"no run log at {path!r}")
    with open(path, encoding="utf-8", errors="replace") as f:
        lines = f.read().split("\n")
    # A complete file ends with "\n", so the final split element is "" ; anything else is a partial line.
    complete, tail = lines[:-1], lines[-1]
    torn = None
    if tail.strip():
        try:
            json.loads(tail)
            complete.append(tail)  # a whole record that merely lacks its newline
        except json.JSONDecodeError:
            torn = len(complete) + 1  # truncated, e.g. by a crash mid-write
    if not complete:
        raise RunLogError(f"run log {path!r} is empty (expected a header line)")
    parsed = []
    for i, line in enumerate(complete):
        try:
            parsed.append(json.loads(line))
        except json.JSONDecodeError as e:
            raise RunLogError(f"run log {path!r}: line {i + 1} is not valid JSON ({e})") from e
        if not isinstance(parsed[-1], dict):
            raise RunLogError(f"run log {path!r}: line {i + 1} is not a JSON object")
    header, records = parsed[0], parsed[1:]
    if header.get("kind") != HEADER_KIND:
        raise RunLogError(f"run log {path!r}: first line must be a header with kind={HEADER_KIND!r}")
    last = None
    for i, r in enumerate(records):
        if r.get("kind") == HEADER_KIND:
            raise RunLogError(f"run log {path!r}: line {i + 2} is a second header (two writers on one log?)")
        u = r.get("update")
        if isinstance(u, int) and not isinstance(u, bool):
            if last is not None and u <= last:
                raise RunLogError(f"run log {path!r}: line {i + 2} has update {u} after update {last}; update "
                                  f"numbers must strictly increase (two writers on one log?)")
            last = u
    return Scan(header, records, torn)


def read(path: str, repair: bool = False) -> tuple[dict, list[dict]]:
    """Return ``(header, records)`` of a checked log (see the module doc).

    A truncated last line raises :class:`RunLogError` (a ``ValueError``) unless ``repair``, which ignores it
    here (:func:`repair` removes it from the file). Raises it too when the file is empty, its first line is
    not a header, a line is not a JSON object, a second header appears, or update numbers do not increase.
    """
    s = scan(path)
    if s.torn_line is not None and not repair:
        raise RunLogError(f"run log {path!r}: line {s.torn_line} is truncated (a crash mid-write?); pass "
                          f"--repair to train (repair=True) to drop it and keep the {len(s.records)} complete "
                          f"records")
    return s.header, s.records


def repair(path: str) -> int:
    """Drop a truncated last line from the file, keeping every complete record; returns lines dropped (0/1)."""
    s = scan(path)
    if s.torn_line is None:
        return 0
    rewrite(path, s.header, s.records)
    return 1


def rewrite(path: str, header: dict, records: Iterable[dict]) -> None:
    """Atomically replace the log with ``header`` and ``records`` (used to drop records past a checkpoint)."""
    atomic.write_text(path, _dumps(header) + "".join(_dumps(r) for r in records))
