"""Notebook hygiene: chapters are committed without outputs, except cells tagged ``keep_output``.

``python tools/check_stripped.py [paths...]`` exits 1 and lists every offending cell. Used by the test suite.
"""

from __future__ import annotations

import glob
import json
import sys

KEEP_TAG = "keep_output"
#: Notebook-level metadata that only an execution leaves behind.
NOISY_NB_KEYS = ("widgets", "papermill")


def stray_outputs(nb: dict) -> list[str]:
    """Problems in one notebook (as parsed JSON): outputs or execution traces on cells not tagged keep_output."""
    problems = []
    for key in NOISY_NB_KEYS:
        if key in nb.get("metadata", {}):
            problems.append(f"notebook metadata carries '{key}' (strip it)")
    for i, cell in enumerate(nb.get("cells", [])):
        if cell.get("cell_type") != "code":
            continue
        tags = cell.get("metadata", {}).get("tags", [])
        kept = KEEP_TAG in tags or cell.get("metadata", {}).get(KEEP_TAG) is True
        if cell.get("outputs") and not kept:
            problems.append(f"cell {i} has {len(cell['outputs'])} output(s) but is not tagged '{KEEP_TAG}'")
        if "papermill" in cell.get("metadata", {}):
            problems.append(f"cell {i} carries papermill metadata")
    return problems


def check_paths(paths: list[str]) -> dict[str, list[str]]:
    """Map each notebook path with problems to its problem list."""
    bad = {}
    for path in paths:
        with open(path, encoding="utf-8") as f:
            problems = stray_outputs(json.load(f))
        if problems:
            bad[path] = problems
    return bad


def main(argv: list[str]) -> int:
    paths = argv or sorted(glob.glob("book/**/*.ipynb", recursive=True))
    bad = check_paths(paths)
    for path, problems in bad.items():
        for p in problems:
            print(f"{path}: {p}")
    if bad:
        print("run `make strip` (nbstripout keeps cells tagged keep_output)")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
