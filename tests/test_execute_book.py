"""tools/execute_book.py (make book's parallel execution): it executes exactly the notebook pages of the TOC, with
the timeout and allow_errors myst-nb would use for each, and the Makefile's build reads the cache it fills."""

import os

import nbformat
import yaml

from tools import execute_book

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def test_every_notebook_page_of_the_toc_and_nothing_else():
    pages = execute_book.notebook_pages()
    rel = {os.path.relpath(p, ROOT): fmt for p, fmt in pages}
    chapters = {os.path.relpath(os.path.join(d, f), ROOT) for d, _, fs in os.walk(os.path.join(ROOT, "book"))
                for f in fs if f.endswith(".ipynb") and ".ipynb_checkpoints" not in d}
    assert {p for p, fmt in rel.items() if fmt is None} == chapters  # every chapter, each once
    assert rel["galvatron_artifact.md"] == execute_book.MYST_MD_READER  # a MyST Markdown notebook page
    assert "intro.md" not in rel and "glossary.md" not in rel  # plain pages execute nothing
    assert len(pages) == len(rel)


def test_settings_are_the_configs_with_the_notebooks_mystnb_overrides():
    with open(os.path.join(ROOT, "_config.yml"), encoding="utf-8") as f:
        execute = yaml.safe_load(f)["execute"]
    nb = nbformat.v4.new_notebook()
    assert execute_book.execution_settings(execute, nb) == (execute["timeout"], execute["allow_errors"])
    nb.metadata["mystnb"] = {"execution_timeout": 77}
    assert execute_book.execution_settings(execute, nb) == (77, execute["allow_errors"])
    nb.metadata["mystnb"] = {"execution_mode": "off"}
    assert execute_book.execution_settings(execute, nb) is None  # left to the build


def test_the_book_target_builds_from_the_cache_the_tool_fills():
    with open(os.path.join(ROOT, "Makefile"), encoding="utf-8") as f:
        make = f.read()
    assert "tools/execute_book.py --workers $(BOOK_WORKERS)" in make
    assert "--config _build/_config.cache.yml" in make
    assert execute_book.CACHED_CONFIG == os.path.join(ROOT, "_build", "_config.cache.yml")
