"""_config.yml: the build reads only the book, never a folder a tool or a reader makes in the repository."""

import os

import yaml

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _ignored_top_folders() -> set[str]:
    """The top-level folders .gitignore names (venvs, builds, reruns): made here, never part of the book."""
    out = set()
    with open(os.path.join(ROOT, ".gitignore"), encoding="utf-8") as f:
        for line in f:
            name = line.strip()
            if name.endswith("/") and name.count("/") <= 2 and "*" not in name:
                name = name.strip("/")
                if "/" not in name:
                    out.add(name)
    return out


def test_every_ignored_top_folder_is_excluded_from_the_build():
    # jupyter-book's only_build_toc_files does not look into hidden folders: a live build's .venv-live once
    # gave "document isn't included in any toctree" for the licence files of its packages (make book LIVE=1).
    with open(os.path.join(ROOT, "_config.yml"), encoding="utf-8") as f:
        excluded = set(yaml.safe_load(f)["exclude_patterns"])
    folders = _ignored_top_folders()
    assert {".venv", ".venv-live", "runs", "_build"} <= folders
    assert folders - {"__pycache__", ".ipynb_checkpoints", ".pytest_cache", ".hypothesis"} <= excluded
