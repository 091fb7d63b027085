"""The Colab set-up cell that opens every chapter, and the book version it installs.

Chapters are MyST Markdown notebooks (``book/**/*.md``) paired with stripped ``.ipynb`` files by jupytext; see
``tools/chapters.py``. The first cell of every chapter is ``COLAB_CELL`` (tagged ``remove-cell``), checked by
tests/test_notebook_hygiene.py; ``python tools/chapters.py colab`` rewrites it in every chapter after a version
bump.
"""

from __future__ import annotations

import os

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def repository_url(root: str = ROOT) -> str:
    """The book's repository, from ``repository.url`` in ``_config.yml``: the one place it is set (the launch
    buttons read it there too; the README's links and the chapters' Colab cells must agree, which a test checks)."""
    import yaml

    with open(os.path.join(root, "_config.yml"), encoding="utf-8") as f:
        url = (yaml.safe_load(f).get("repository") or {}).get("url", "")
    if not url.startswith("https://"):
        raise ValueError(f"_config.yml: repository.url must be an https URL; got {url!r}")
    return url.rstrip("/")


REPO_URL = repository_url()


def _book_version() -> str:
    import importlib.util

    spec = importlib.util.spec_from_file_location("_lib_init", os.path.join(ROOT, "lib", "__init__.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod.__version__


BOOK_VERSION = _book_version()

#: First cell of every chapter. On Colab it clones the book at the tag of this version (v<lib.__version__>),
#: falling back to the main branch if that tag does not exist, and installs it.
COLAB_CELL = f'''# On Colab: fetch this book at its own version and install it. Does nothing anywhere else.
import sys
if "google.colab" in sys.modules:
    import os, subprocess
    BOOK_REF = "v{BOOK_VERSION}"
    if not os.path.isdir("parallelism-rebuilt"):
        if subprocess.run(["git", "clone", "--depth", "1", "--branch", BOOK_REF, "{REPO_URL}"]).returncode != 0:
            print(f"tag {{BOOK_REF}} not found: using the main branch")
            subprocess.run(["git", "clone", "--depth", "1", "{REPO_URL}"], check=True)
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "-e", "parallelism-rebuilt"], check=True)
    sys.path.insert(0, os.path.abspath("parallelism-rebuilt"))'''
