"""Run chapters in batch with papermill: one folder per rerun, one executed notebook and log per chapter.

``runs/<set>-<UTC stamp>/`` holds ``params.json`` (the set, each chapter's parameters, the machine and the commit),
``book/<part>/<name>.ipynb`` (executed; a failed one keeps its error cell), ``logs/<part>__<name>.log`` (the
cells' output as it ran), ``runlogs/<part>/<name>/`` (the run logs of chapters that declare ``runs_dir``) and
``summary.json`` (rewritten atomically after every chapter, so a crash leaves a consistent folder that
``resume`` continues). Used in: ``python -m lib.rerun``; the README's "Rerun in batch".
"""

from __future__ import annotations

import datetime as _dt
import json
import logging
import os
import platform
import re
import subprocess
import time
from dataclasses import asdict, dataclass, field

from lib import atomic
from lib.cli_errors import UserError
from lib.rerun.params import ROOT, RUNNER_PARAMETERS, ParamSet, resolve

_MEASURED = re.compile(r"measured on ([^,;\n\]|]+?)(?=[,;\n\]|]|\s{2}|$)")


@dataclass(frozen=True)
class ChapterResult:
    chapter: str
    status: str                  # "ok" or "failed"
    wall_s: float
    provenance: str              # "measured", "simulated", "measured and simulated", "quoted only" or "none"
    devices: tuple = ()          # the devices named in "measured on ..." labels
    error: str | None = None

    def to_dict(self) -> dict:
        return asdict(self) | {"devices": list(self.devices)}


@dataclass(frozen=True)
class RunInfo:
    """Where and from what a rerun ran: written to params.json and shown on replayed pages."""

    set_name: str
    started_utc: str
    commit: str
    host: str
    python: str
    torch: str | None
    devices: tuple = field(default_factory=tuple)

    def to_dict(self) -> dict:
        return asdict(self) | {"devices": list(self.devices)}


def utc_stamp(now: _dt.datetime | None = None) -> str:
    return (now or _dt.datetime.now(_dt.timezone.utc)).strftime("%Y%m%dT%H%M%SZ")


def new_run_dir(set_name: str, runs_root: str, now: _dt.datetime | None = None) -> str:
    """``runs_root/<set>-<UTC stamp>``, created now; an existing folder is never reused or overwritten."""
    path = os.path.join(runs_root, f"{set_name}-{utc_stamp(now)}")
    if os.path.exists(path):
        raise FileExistsError(f"run folder {path} exists already: pass --resume {path} to continue it, or wait a second")
    os.makedirs(path)
    return path


def _commit() -> str:
    """The book's commit, short, with ``+changes`` when tracked files differ from it; ``unknown`` outside git."""
    from lib.runlog import git_commit

    sha = git_commit(ROOT)
    if sha is None:
        return "unknown"
    try:
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=ROOT,
                               capture_output=True, text=True, timeout=10).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        dirty = ""
    return sha[:7] + ("+changes" if dirty else "")


def machine_info(set_name: str) -> RunInfo:
    torch_version, devices = None, ["cpu"]
    try:
        import torch

        torch_version = torch.__version__
        if torch.cuda.is_available():
            devices = [f"cuda:{i} ({torch.cuda.get_device_name(i)})" for i in range(torch.cuda.device_count())]
    except ImportError:
        pass
    return RunInfo(set_name, _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"), _commit(),
                   platform.node(), platform.python_version(), torch_version, tuple(devices))


def _texts(nb: dict):
    for cell in nb.get("cells", []):
        for out in cell.get("outputs", []):
            text = out.get("text", "")
            yield "".join(text) if isinstance(text, list) else text
            for value in out.get("data", {}).values():
                if isinstance(value, (str, list)):
                    yield "".join(value) if isinstance(value, list) else value


def provenance(nb: dict) -> tuple[str, tuple]:
    """What the executed chapter's own labels say: measured (on which devices), simulated, or both."""
    text = "\n".join(_texts(nb))
    devices = tuple(sorted({m.strip() for m in _MEASURED.findall(text)}))
    simulated = "simulated with" in text
    kind = ("measured and simulated" if simulated else "measured") if devices else \
        "simulated" if simulated else "quoted only" if "quoted from" in text else "none"
    return kind, devices


def _summary_path(run_dir: str) -> str:
    return os.path.join(run_dir, "summary.json")


def read_summary(run_dir: str) -> dict:
    """The run's ``summary.json``, checked field by field (``lib.rerun.files``)."""
    from lib.rerun.files import read_summary as read

    return read(run_dir).model_dump()


def _write_summary(run_dir: str, info: RunInfo, results: dict[str, ChapterResult], order: list[str]) -> None:
    rows = [results[c].to_dict() for c in order if c in results]
    data = {"run": info.to_dict(), "chapters": rows,
            "failed": [r["chapter"] for r in rows if r["status"] != "ok"],
            "pending": [c for c in order if c not in results]}
    atomic.write_text(_summary_path(run_dir), json.dumps(data, indent=1, allow_nan=False) + "\n")


def run_chapter(chapter: str, parameters: dict, run_dir: str, kernel: str = "python3",
                progress: bool = True) -> ChapterResult:
    """Execute one chapter into ``run_dir``; never raises for a failing chapter (its notebook keeps the error)."""
    import papermill

    src = os.path.join(ROOT, chapter + ".ipynb")
    out = os.path.join(run_dir, chapter + ".ipynb")
    os.makedirs(os.path.dirname(out), exist_ok=True)
    log_path = os.path.join(run_dir, "logs", chapter.replace("/", "__").removeprefix("book__") + ".log")
    os.makedirs(os.path.dirname(log_path), exist_ok=True)
    handler = logging.FileHandler(log_path, encoding="utf-8")
    handler.setFormatter(logging.Formatter("%(asctime)s %(message)s"))
    logger = logging.getLogger("papermill")
    old_level = logger.level
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    t0, error = time.perf_counter(), None
    saved_ci = os.environ.get("CI")
    os.environ["CI"] = "true"  # a batch run is a static notebook: widgets show their static twins (lib.book.in_ci)
    # papermill saves the notebook as it runs: into a hidden partial file, renamed onto ``out`` only once whole,
    # so a crash or a full disk never leaves half a notebook under the chapter's name.
    partial = os.path.join(os.path.dirname(out), "." + os.path.basename(out)[: -len(".ipynb")] + ".partial.ipynb")
    try:
        papermill.execute_notebook(src, partial, parameters=parameters, kernel_name=kernel,
                                   cwd=os.path.dirname(src), progress_bar=progress, log_output=True,
                                   request_save_on_cell_execute=True)
    except OSError as exc:  # the disk, not the chapter: stop the batch, naming the file, leaving no half file
        _discard(partial)
        raise OSError(exc.errno, exc.strerror or str(exc), out) from exc
    except Exception as exc:  # a failing chapter is a result, not the end of the batch
        lines = [ln for ln in str(exc).strip().splitlines() if ln.strip()]
        error = f"{type(exc).__name__}: {lines[-1] if lines else exc!r}"[:500]
        logger.error("chapter failed: %s", error)
    except BaseException:
        _discard(partial)
        raise
    finally:
        if saved_ci is None:
            os.environ.pop("CI", None)
        else:
            os.environ["CI"] = saved_ci
        logger.removeHandler(handler)
        logger.setLevel(old_level)
        handler.close()
    wall = time.perf_counter() - t0
    nb = {}
    if os.path.exists(partial):
        try:
            with open(partial, encoding="utf-8") as f:
                text = f.read()
            nb = json.loads(text)
            atomic.write_text(out, text)  # whole or not at all; the partial goes either way
        finally:
            _discard(partial)
    kind, devices = provenance(nb)
    return ChapterResult(chapter, "failed" if error else "ok", round(wall, 2), kind, devices, error)


def _discard(path: str) -> None:
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass


def run(pset: ParamSet, chapters: list[str], runs_root: str | None = None, resume: str | None = None,
        kernel: str = "python3", progress: bool = True, log=print) -> tuple[str, list[ChapterResult]]:
    """Run ``chapters`` with ``pset`` into a new folder under ``runs_root``, or continue the folder ``resume``.

    Parameters are checked for every chapter before the first one runs. One process runs a folder at a time
    (``<run>/.lock``, as training holds its log's): a second is refused at once. Returns the folder and the
    results of every chapter (those done by an earlier try of a resumed run included).
    """
    if resume:
        from lib.rerun.files import read_params, read_summary as read_checked

        saved = read_params(resume)
        if saved.set.name != pset.name:
            raise UserError(f"--resume: {resume} was run with parameter set {saved.set.name!r}, not {pset.name!r}")
        if chapters is not None and list(chapters) != saved.chapters:
            raise UserError(f"--chapters with --resume: {resume} runs its own chapters ({', '.join(saved.chapters)});"
                            f" allowed: --resume alone, or a new run with --chapters")
        chapters, run_dir = list(saved.chapters), resume
        with _folder_lock(run_dir):
            info = RunInfo(**(saved.run.model_dump() | {"devices": tuple(saved.run.devices)}))
            done = {r.chapter: ChapterResult(**(r.model_dump() | {"devices": tuple(r.devices)}))
                    for r in read_checked(run_dir).chapters if r.status == "ok"}
            return run_dir, _run_chapters(run_dir, info, saved.parameters, chapters, done, kernel, progress, log)
    resolved = resolve(pset, chapters)  # every mismatch is an error before anything runs
    run_dir = new_run_dir(pset.name, runs_root or os.path.join(ROOT, "runs"))
    with _folder_lock(run_dir):
        info = machine_info(pset.name)
        atomic.write_text(os.path.join(run_dir, "params.json"), json.dumps(
            {"set": pset.to_dict(), "chapters": chapters, "parameters": resolved, "run": info.to_dict()},
            indent=1, allow_nan=False) + "\n")
        return run_dir, _run_chapters(run_dir, info, resolved, chapters, {}, kernel, progress, log)


LOCK_NAME = ".lock"


def _folder_lock(run_dir: str):
    """Hold ``run_dir/.lock`` for the block; a :class:`UserError` at once if another process holds it."""
    import contextlib

    import filelock

    @contextlib.contextmanager
    def held():
        lock = filelock.FileLock(os.path.join(run_dir, LOCK_NAME))
        try:
            lock.acquire(timeout=0)
        except filelock.Timeout:
            raise UserError(f"{run_dir}: another process is running this run folder (it holds "
                            f"{os.path.join(run_dir, LOCK_NAME)}); wait for it to finish") from None
        try:
            yield
        finally:
            lock.release()

    return held()


def _run_chapters(run_dir, info, resolved, chapters, done, kernel, progress, log) -> list[ChapterResult]:
    from lib.rerun.params import declared

    results = dict(done)
    _write_summary(run_dir, info, results, chapters)
    for i, chapter in enumerate(chapters, 1):
        if chapter in done:
            log(f"[{i}/{len(chapters)}] {chapter}: done in an earlier try, skipped")
            continue
        params = dict(resolved[chapter])
        for p in RUNNER_PARAMETERS:
            if p == "runs_dir" and p in declared(chapter) and p not in params:
                params[p] = os.path.abspath(os.path.join(run_dir, "runlogs", chapter.removeprefix("book/")))
        log(f"[{i}/{len(chapters)}] {chapter}" + (f" with {params}" if params else " with its defaults"))
        results[chapter] = run_chapter(chapter, params, run_dir, kernel=kernel, progress=progress)
        _write_summary(run_dir, info, results, chapters)
    return [results[c] for c in chapters]


def summary_table(results: list[ChapterResult]) -> str:
    """The end-of-run table: chapter, status, wall time, provenance, devices."""
    rows = [("chapter", "status", "wall", "numbers", "device")]
    for r in results:
        rows.append((r.chapter.removeprefix("book/"), r.status, f"{r.wall_s:.0f} s", r.provenance,
                     ", ".join(r.devices) or "-"))
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    lines = ["  ".join(cell.ljust(w) for cell, w in zip(row, widths)).rstrip() for row in rows]
    lines.insert(1, "  ".join("-" * w for w in widths))
    for r in results:
        if r.error:
            lines.append(f"{r.chapter}: {r.error}")
    return "\n".join(lines)
