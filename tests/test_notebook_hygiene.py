"""Chapters are committed stripped, except cells tagged keep_output; the check itself must catch strays."""

import copy
import glob
import json
import os

import pytest

from tools.check_stripped import check_paths, stray_outputs

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CHAPTERS = sorted(glob.glob(os.path.join(ROOT, "book", "**", "*.ipynb"), recursive=True))


def _nb(cells):
    return {"cells": cells, "metadata": {}, "nbformat": 4, "nbformat_minor": 5}


def _code(outputs=(), tags=(), count=None):
    return {
        "cell_type": "code",
        "metadata": {"tags": list(tags)},
        "source": "print(1)",
        "outputs": list(outputs),
        "execution_count": count,
    }


STREAM = {"output_type": "stream", "name": "stdout", "text": "1\n"}


def test_clean_notebook_passes():
    assert stray_outputs(_nb([_code(), {"cell_type": "markdown", "metadata": {}, "source": "x"}])) == []


def test_stray_output_is_caught():
    problems = stray_outputs(_nb([_code(), _code(outputs=[STREAM], count=1)]))
    assert len(problems) == 1 and "cell 1" in problems[0]


def test_kept_oracle_cell_is_allowed():
    assert stray_outputs(_nb([_code(outputs=[STREAM], tags=["keep_output", "nbval-check-output"], count=1)])) == []


def test_execution_metadata_is_caught():
    nb = _nb([_code()])
    nb["metadata"]["papermill"] = {"parameters": {}}
    assert any("papermill" in p for p in stray_outputs(nb))
    nb2 = _nb([_code()])
    nb2["metadata"]["widgets"] = {}
    assert any("widgets" in p for p in stray_outputs(nb2))


def test_check_paths_reports_a_stray_file(tmp_path):
    good, bad = tmp_path / "good.ipynb", tmp_path / "bad.ipynb"
    good.write_text(json.dumps(_nb([_code()])))
    bad.write_text(json.dumps(_nb([_code(outputs=[STREAM], count=3)])))
    assert list(check_paths([str(good), str(bad)])) == [str(bad)]


def test_there_are_chapters():
    assert CHAPTERS, "no chapter notebooks found under book/"


@pytest.mark.parametrize("path", CHAPTERS, ids=[os.path.relpath(p, ROOT) for p in CHAPTERS])
def test_committed_chapters_are_stripped(path):
    with open(path, encoding="utf-8") as f:
        nb = json.load(f)
    assert stray_outputs(nb) == []


@pytest.mark.parametrize("path", CHAPTERS, ids=[os.path.relpath(p, ROOT) for p in CHAPTERS])
def test_chapters_open_with_a_parameters_cell(path):
    """Every chapter has exactly one code cell tagged 'parameters' (papermill injects after it)."""
    with open(path, encoding="utf-8") as f:
        nb = json.load(f)
    tagged = [c for c in nb["cells"] if "parameters" in c.get("metadata", {}).get("tags", [])]
    assert len(tagged) == 1
    assert tagged[0]["cell_type"] == "code"


@pytest.mark.parametrize("path", CHAPTERS, ids=[os.path.relpath(p, ROOT) for p in CHAPTERS])
def test_chapters_start_with_the_current_colab_cell(path):
    """The first cell installs the book on Colab at this version (rewrite with python tools/chapters.py colab)."""
    from tools.notebook import COLAB_CELL

    with open(path, encoding="utf-8") as f:
        first = json.load(f)["cells"][0]
    assert "".join(first["source"]) == COLAB_CELL
    assert "remove-cell" in first["metadata"].get("tags", [])


def test_colab_cell_does_nothing_outside_colab(monkeypatch, tmp_path):
    import subprocess
    import sys

    from tools.notebook import BOOK_VERSION, COLAB_CELL

    import lib

    assert BOOK_VERSION == lib.__version__ and f'BOOK_REF = "v{BOOK_VERSION}"' in COLAB_CELL
    monkeypatch.delitem(sys.modules, "google.colab", raising=False)
    monkeypatch.setattr(subprocess, "run", lambda *a, **k: pytest.fail("ran a command outside Colab"))
    monkeypatch.chdir(tmp_path)
    exec(compile(COLAB_CELL, "colab-cell", "exec"), {})
    assert list(tmp_path.iterdir()) == []


def test_colab_cell_clones_and_installs_on_colab(monkeypatch, tmp_path):
    import subprocess
    import sys
    import types

    from tools.notebook import COLAB_CELL

    calls = []

    class Done:
        returncode = 0

    monkeypatch.setitem(sys.modules, "google.colab", types.ModuleType("google.colab"))
    monkeypatch.setattr(subprocess, "run", lambda cmd, **k: calls.append(cmd) or Done())
    monkeypatch.setattr(sys, "path", list(sys.path))
    monkeypatch.chdir(tmp_path)
    exec(compile(COLAB_CELL, "colab-cell", "exec"), {})
    assert calls[0][:2] == ["git", "clone"] and "--branch" in calls[0]
    assert calls[-1][-3:] == ["install", "-q", "-e", "parallelism-rebuilt"][-3:]


def test_one_repository_url_for_launch_buttons_colab_cell_and_readme():
    import re

    import yaml

    from tools.notebook import COLAB_CELL, REPO_URL

    with open(os.path.join(ROOT, "_config.yml"), encoding="utf-8") as f:
        assert yaml.safe_load(f)["repository"]["url"].rstrip("/") == REPO_URL  # the launch buttons read this
    assert COLAB_CELL.count(REPO_URL) == 2  # the tagged clone and the fallback
    with open(os.path.join(ROOT, "README.md"), encoding="utf-8") as f:
        readme = f.read()
    repo_links = set(re.findall(r"https://github\.com/[\w.-]+/[\w.-]+", readme))
    owner_links = {u for u in repo_links if u.split("/")[3] == REPO_URL.split("/")[3]}
    assert owner_links == {REPO_URL}, f"README links to {sorted(owner_links)}; _config.yml says {REPO_URL}"


@pytest.mark.parametrize("path", CHAPTERS, ids=[os.path.relpath(p, ROOT) for p in CHAPTERS])
def test_a_chapter_with_run_logs_offers_them_for_download(path):
    """A chapter that keeps run logs (it declares ``runs_dir``) links them as one zip and writes that zip,
    where ``lib.book.offer_runlogs`` puts it (a replay puts the rerun's logs at the same link)."""
    from lib.book import runlogs_zip_name

    with open(path, encoding="utf-8") as f:
        nb = json.load(f)
    src = ["".join(c["source"]) if isinstance(c["source"], list) else c["source"] for c in nb["cells"]]
    params = next(s for c, s in zip(nb["cells"], src) if "parameters" in c["metadata"].get("tags", []))
    name = os.path.splitext(os.path.basename(path))[0]
    link = "{download}`" + runlogs_zip_name(name) + "`"
    if "runs_dir" not in params:
        assert not any(link in s for s in src)
        return
    md = [s for c, s in zip(nb["cells"], src) if c["cell_type"] == "markdown"]
    code = [s for c, s in zip(nb["cells"], src) if c["cell_type"] == "code"]
    assert any(link in s for s in md), f"{name}: no {link} in its text"
    assert any(f'offer_runlogs(runs_dir, "{name}")' in s for s in code), f"{name}: nothing writes its run logs"
