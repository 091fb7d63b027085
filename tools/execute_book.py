"""Execute every notebook the book builds, in parallel, into a fresh jupyter-cache (``make book``'s first step).

``make book`` used to let jupyter-book execute the chapters one after another (``execute_notebooks: force``).
This tool wipes ``_build/.jupyter_cache``, executes every notebook page of ``_toc.yml`` into it on ``--workers``
processes, exactly as myst-nb's own execution would (nbclient via jupyter-cache's ``single_nb_execution``, cwd =
the notebook's folder, the timeout and allow_errors of ``_config.yml`` with each notebook's ``mystnb`` overrides),
and writes ``_build/_config.cache.yml``: ``_config.yml`` with ``execute_notebooks: cache`` and this cache. The
build then runs with ``--config _build/_config.cache.yml`` and takes every page from the cache; a page the cache
lacks (one that failed here) is executed again by myst-nb and fails the build with its own error. MyST Markdown
notebook pages (galvatron_artifact.md) are left to the build, which executes them itself (see main).

    python tools/execute_book.py [--workers N]   # exit 1 if a notebook failed (its traceback is printed)

Nothing from an earlier run is reused: the cache is removed first, so every page is executed now, from this checkout.
"""

from __future__ import annotations

import argparse
import logging
import multiprocessing
import os
import shutil
import sys
import time

import yaml

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BUILD = os.path.join(ROOT, "_build")
CACHE = os.path.join(BUILD, ".jupyter_cache")
CACHED_CONFIG = os.path.join(BUILD, "_config.cache.yml")
MYST_MD_READER = {"type": "plugin", "name": "myst_nb_md"}  # what myst-nb hands jupyter-cache for a text notebook


def toc_files(toc: dict) -> list[str]:
    """Every ``file:`` of the TOC (root first), in order."""
    out = [toc["root"]]

    def walk(node):
        if isinstance(node, dict):
            if "file" in node:
                out.append(node["file"])
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)

    walk({k: v for k, v in toc.items() if k != "root"})
    return out


def notebook_pages(root: str = ROOT) -> list[tuple[str, dict | None]]:
    """(path, jupyter-cache read_data) of every page myst-nb treats as a notebook: .ipynb, and MyST Markdown
    notebooks (a .md with a jupytext/mystnb top matter)."""
    from myst_nb.core.read import is_myst_markdown_notebook

    with open(os.path.join(root, "_toc.yml"), encoding="utf-8") as f:
        toc = yaml.safe_load(f)
    pages = []
    for name in toc_files(toc):
        base = os.path.join(root, name)
        if os.path.splitext(name)[1]:
            candidates = [base]
        else:
            candidates = [base + ".ipynb", base + ".md"]
        path = next((p for p in candidates if os.path.exists(p)), None)
        if path is None:
            raise SystemExit(f"execute_book: {name} in _toc.yml: no such page")
        if path.endswith(".ipynb"):
            pages.append((path, None))
        elif path.endswith(".md"):
            with open(path, encoding="utf-8") as f:
                if is_myst_markdown_notebook(f.read()):
                    pages.append((path, MYST_MD_READER))
    return pages


def execution_settings(execute: dict, nb) -> tuple[int, bool] | None:
    """(timeout, allow_errors) that myst-nb would execute ``nb`` with, from _config.yml's execute section and the
    notebook's ``mystnb`` metadata, or None when the notebook sets its own execution mode (the build executes it)."""
    from myst_nb.core.config import NbParserConfig

    keys = {"timeout": "execution_timeout", "allow_errors": "execution_allow_errors"}
    cfg = NbParserConfig(**{keys[k]: v for k, v in execute.items() if k in keys})
    overrides = dict(nb.metadata.get(cfg.metadata_key, {}))
    overrides.pop("output_folder", None)
    cfg = cfg.copy(**overrides)
    if "execution_mode" in overrides:
        return None
    if cfg.execution_in_temp or cfg.execution_excludepatterns or cfg.kernel_rgx_aliases:
        raise SystemExit("execute_book: run_in_temp, exclude_patterns and kernel aliases are not supported here")
    return cfg.execution_timeout, cfg.execution_allow_errors


def _execute(data):
    """One notebook on a pool worker: jupyter-cache's own local worker (cwd = the notebook's folder)."""
    from jupyter_cache.executors.basic import ExecutionWorkerLocalMProc

    # Its "Execution Excepted" warning repeats the traceback that main prints at the end; errors still show.
    multiprocessing.get_logger().setLevel(logging.ERROR)
    start = time.monotonic()
    code, uri = ExecutionWorkerLocalMProc()(data)
    return code, uri, time.monotonic() - start


def default_workers() -> int:
    return max(1, min(4, os.cpu_count() or 1))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--workers", type=int, default=default_workers(), help="processes (default: cores, <= 4)")
    args = parser.parse_args(argv)
    workers = max(1, args.workers)

    from jupyter_cache import get_cache
    from jupyter_cache.executors.basic import ProcessData
    from jupyter_cache.readers import nbf_reader

    with open(os.path.join(ROOT, "_config.yml"), encoding="utf-8") as f:
        config = yaml.safe_load(f)
    execute = config["execute"]
    if execute.get("cache") or execute.get("run_in_temp") or execute.get("exclude_patterns"):
        raise SystemExit("execute_book: _config.yml's execute.cache/run_in_temp/exclude_patterns are not supported")

    shutil.rmtree(CACHE, ignore_errors=True)  # nothing stale: every page is executed now
    os.makedirs(BUILD, exist_ok=True)
    cache = get_cache(CACHE)

    jobs, by_build = [], []
    for path, read_data in notebook_pages():
        if read_data is not None:
            # A MyST Markdown notebook: myst-nb writes its .ipynb download from the notebook it executed itself,
            # not from a cached one (that download would have no outputs). The build executes it (a cache miss).
            by_build.append(os.path.relpath(path, ROOT))
            continue
        nb = nbf_reader(path)  # as jupyter-cache reads it
        settings = execution_settings(execute, nb)
        if settings is None:
            continue
        record = cache.add_nb_to_project(path)
        jobs.append(ProcessData(record.pk, record.uri, cache, settings[0], settings[1]))

    config["execute"] = {**execute, "execute_notebooks": "cache", "cache": CACHE}
    # jupyter-book resolves local_extensions' folders from the config file's folder: keep them at the root's.
    local = config.get("sphinx", {}).get("local_extensions") or {}
    for name, folder in local.items():
        local[name] = os.path.join(ROOT, folder)
    with open(CACHED_CONFIG, "w", encoding="utf-8") as f:
        f.write("# Written by tools/execute_book.py for make book: _config.yml, every page from its fresh cache.\n")
        yaml.safe_dump(config, f, sort_keys=False, allow_unicode=True)

    # Longest chapters first would balance better, but nothing here knows their length: TOC order it is.
    print(f"execute_book: {len(jobs)} notebooks on {workers} worker(s)"
          + (f"; executed by the build itself: {', '.join(by_build)}" if by_build else ""), flush=True)
    failed = []
    start = time.monotonic()
    bar = None
    try:
        from tqdm import tqdm

        bar = tqdm(total=len(jobs), unit="nb", file=sys.stderr, disable=not sys.stderr.isatty())
    except ImportError:
        pass
    ctx = multiprocessing.get_context("fork" if sys.platform != "win32" else "spawn")
    with ctx.Pool(min(workers, max(1, len(jobs)))) as pool:
        for code, uri, seconds in pool.imap_unordered(_execute, jobs, chunksize=1):
            status = "ok" if code == 0 else "FAILED"
            line = f"  {seconds:7.1f} s  {status:6}  {os.path.relpath(uri, ROOT)}"
            if bar is not None:
                bar.write(line)
                bar.update(1)
            else:
                print(line, flush=True)
            if code != 0:
                failed.append(uri)
    if bar is not None:
        bar.close()
    print(f"execute_book: {len(jobs) - len(failed)}/{len(jobs)} ok in {time.monotonic() - start:.1f} s", flush=True)
    for uri in failed:
        record = cache.get_project_record(uri)
        print(f"\n=== {os.path.relpath(uri, ROOT)} failed:\n{record.traceback or '(no traceback recorded: see above)'}",
              file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
