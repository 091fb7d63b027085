"""Write a chapter notebook from a list of cells (so chapters are generated reproducibly and stripped).

Usage from a script:

    from tools.notebook import md, code, write_notebook
    write_notebook("book/part/01_x.ipynb", "Title", [md("..."), code("...", tags=["parameters"])])

The first cell is always the Colab set-up cell; the parameters cell should come right after the title.
"""

from __future__ import annotations

import json
import os

import nbformat

from lib import atomic

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

#: First cell of every chapter. On Colab it clones the book at the tag of the version the chapter was generated
#: with (v<lib.__version__>), falling back to the main branch if that tag does not exist, and installs it.
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


def md(source: str, tags=()):
    cell = nbformat.v4.new_markdown_cell(source.strip("\n"))
    if tags:
        cell.metadata["tags"] = list(tags)
    return cell


def code(source: str, tags=()):
    cell = nbformat.v4.new_code_cell(source.strip("\n"))
    if tags:
        cell.metadata["tags"] = list(tags)
    return cell


def write_notebook(path: str, cells: list, timeout_s: int = 600) -> None:
    """Write a stripped notebook atomically (temp file + rename), Colab cell first."""
    nb = nbformat.v4.new_notebook()
    nb.cells = [code(COLAB_CELL, tags=["remove-cell"])] + list(cells)
    nb.metadata["kernelspec"] = {"display_name": "Python 3", "language": "python", "name": "python3"}
    nb.metadata["language_info"] = {"name": "python"}
    nb.metadata["mystnb"] = {"execution_timeout": timeout_s}
    for i, c in enumerate(nb.cells):
        c["id"] = f"c{i:03d}"
    nbformat.validate(nb)
    atomic.write_text(path, json.dumps(nb, indent=1, ensure_ascii=False) + "\n")
