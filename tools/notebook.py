"""The Colab set-up cell that opens every chapter, and the book version it installs.

Chapters are MyST Markdown notebooks (``book/**/*.md``) paired with stripped ``.ipynb`` files by jupytext; see
``tools/chapters.py``. The first cell of every chapter is ``COLAB_CELL`` (tagged ``remove-cell``), checked by
tests/test_notebook_hygiene.py; ``python tools/chapters.py colab`` rewrites it in every chapter after a version
bump.
"""

from __future__ import annotations

import os

REPO_URL = "https://github.com/parallelism-rebuilt/parallelism-rebuilt"


def _book_version() -> str:
    import importlib.util

    spec = importlib.util.spec_from_file_location(
        "_lib_init", os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "lib", "__init__.py")
    )
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
