"""Chapters are MyST Markdown notebooks paired with committed, stripped ``.ipynb`` files (jupytext).

The ``.md`` is what a person edits and reviews; the ``.ipynb`` is what Colab, papermill, nbval and the book build
read. Usage:

    python tools/chapters.py sync [book/x/y.md ...]  # write each .ipynb from its .md (keeps ids and oracles), strip
    python tools/chapters.py check   # exit 1 and name every pair that is out of sync
    python tools/chapters.py colab   # rewrite every chapter's first (Colab) cell for the current book version

``make chapters`` runs ``sync``; tests/test_chapter_sources.py runs ``check``.
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

KEEP = "keep_output"
#: Notebook-level metadata the .md carries in its header (the rest of the .ipynb's metadata is jupytext's own).
SHARED_METADATA = ("kernelspec", "mystnb")


def markdown_chapters(root: str = ROOT) -> list[str]:
    return sorted(glob.glob(os.path.join(root, "book", "**", "*.md"), recursive=True))


def notebook_chapters(root: str = ROOT) -> list[str]:
    return sorted(glob.glob(os.path.join(root, "book", "**", "*.ipynb"), recursive=True))


def _src(s) -> str:
    return "".join(s) if isinstance(s, list) else s


def cells_of(nb) -> list[tuple]:
    """What a pair must agree on: each cell's type, source and metadata (tags and other keys)."""
    out = []
    for c in nb["cells"]:
        meta = {k: v for k, v in dict(c.get("metadata", {})).items() if k not in ("execution", "papermill")}
        out.append((c["cell_type"], _src(c["source"]), json.dumps(meta, sort_keys=True)))
    return out


def differences(md_path: str) -> list[str]:
    """Why the ``.md`` and its ``.ipynb`` disagree (empty when they are in sync)."""
    import jupytext

    ipynb = md_path[: -len(".md")] + ".ipynb"
    rel = os.path.relpath(md_path, ROOT)
    if not os.path.exists(ipynb):
        return [f"{rel}: no paired .ipynb; run: make chapters"]
    text_nb = jupytext.read(md_path)
    with open(ipynb, encoding="utf-8") as f:
        nb = json.load(f)
    problems = []
    a, b = cells_of(text_nb), cells_of(nb)
    if len(a) != len(b):
        problems.append(f"{rel}: {len(a)} cells, its .ipynb has {len(b)}")
    for i, (x, y) in enumerate(zip(a, b)):
        if x != y:
            what = "type" if x[0] != y[0] else "source" if x[1] != y[1] else "metadata"
            problems.append(f"{rel}: cell {i} differs from the .ipynb in its {what}")
            break
    for key in SHARED_METADATA:
        if text_nb.metadata.get(key) != nb.get("metadata", {}).get(key):
            problems.append(f"{rel}: notebook metadata {key!r} differs from the .ipynb")
    return [p + ("; run: make chapters" if not p.endswith("make chapters") else "") for p in problems]


def unpaired(root: str = ROOT) -> list[str]:
    """Chapters that exist only as .md or only as .ipynb."""
    mds = {p[:-3] for p in markdown_chapters(root)}
    nbs = {p[:-6] for p in notebook_chapters(root)}
    return [os.path.relpath(p, root) + ".ipynb has no .md twin" for p in sorted(nbs - mds)] + \
           [os.path.relpath(p, root) + ".md has no .ipynb twin; run: make chapters" for p in sorted(mds - nbs)]


def sync(md_path: str) -> None:
    """Write ``md_path``'s .ipynb from it, keeping the .ipynb's cell ids and its oracle outputs; strip the rest."""
    import jupytext
    import nbformat

    from lib import atomic

    ipynb = md_path[: -len(".md")] + ".ipynb"
    nb = jupytext.read(md_path)
    old = nbformat.read(ipynb, as_version=4) if os.path.exists(ipynb) else None
    if old is not None:
        nb = jupytext.combine.combine_inputs_with_outputs(nb, old, fmt="md:myst")
    used = set()
    for i, c in enumerate(nb.cells):
        if not c.get("id") or c["id"] in used:
            c["id"] = next(f"c{j:03d}" for j in range(i, 10_000) if f"c{j:03d}" not in used)
        used.add(c["id"])
        if c.cell_type == "code" and KEEP not in c.metadata.get("tags", []):
            c.outputs, c.execution_count = [], None
    for key in ("widgets", "papermill", "language_info"):
        nb.metadata.pop(key, None)
    nb.metadata.setdefault("jupytext", {})["formats"] = "ipynb,md:myst"
    nbformat.validate(nb)
    atomic.write_text(ipynb, json.dumps(nb, indent=1, ensure_ascii=False, sort_keys=True) + "\n")


def set_colab_cell(md_path: str) -> bool:
    """Make the first cell of ``md_path`` the current Colab cell; return True if it changed."""
    import jupytext

    from lib import atomic
    from tools.notebook import COLAB_CELL

    nb = jupytext.read(md_path)
    first = nb.cells[0]
    if first.cell_type == "code" and first.source == COLAB_CELL:
        return False
    first.source = COLAB_CELL
    atomic.write_text(md_path, jupytext.writes(nb, fmt="md:myst"))
    return True


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("command", choices=["sync", "check", "colab"])
    ap.add_argument("paths", nargs="*", help="chapters (.md or .ipynb) to act on; default: every chapter")
    a = ap.parse_args(argv)
    mds = markdown_chapters()
    if a.paths:
        wanted = [os.path.abspath(p[: -len(".ipynb")] + ".md" if p.endswith(".ipynb") else p) for p in a.paths]
        missing = [p for p in wanted if p not in mds]
        if missing:
            print(f"not a chapter's .md under book/: {os.path.relpath(missing[0])}")
            return 2
        mds = wanted
    if not mds:
        print("no chapters found under book/")
        return 1
    if a.command == "colab":
        for p in mds:
            if set_colab_cell(p):
                print(f"{os.path.relpath(p, ROOT)}: Colab cell updated")
        a.command = "sync"
    if a.command == "sync":
        for p in mds:
            sync(p)
        print(f"{len(mds)} chapters written from their .md")
        return 0
    problems = unpaired() + [d for p in mds for d in differences(p)]
    for p in problems:
        print(p)
    if not problems:
        print(f"{len(mds)} chapters in sync")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
