"""Execute chapters and store the outputs of their oracle cells (tagged keep_output) and nothing else.

    python tools/refresh_oracles.py book/stragglers/01_the_one_slow_gpu.ipynb [...]

The notebook is executed with its default parameters in its own folder (as nbval does); only cells tagged
``keep_output`` receive outputs and an execution count, every other cell stays stripped. Written atomically.
nbval (``--nbval-lax``) then checks those outputs on every test run.
"""

from __future__ import annotations

import json
import os
import sys

import nbformat

from lib import atomic
from nbclient import NotebookClient

KEEP = "keep_output"


def refresh(path: str, timeout_s: int = 600) -> int:
    """Execute ``path`` and write back the outputs of its keep_output cells; return how many were kept."""
    src = nbformat.read(path, as_version=4)
    run = nbformat.read(path, as_version=4)
    NotebookClient(run, timeout=timeout_s, kernel_name="python3",
                   resources={"metadata": {"path": os.path.dirname(os.path.abspath(path))}}).execute()
    kept = 0
    for cell, done in zip(src.cells, run.cells):
        if cell.cell_type != "code":
            continue
        if KEEP in cell.metadata.get("tags", []):
            cell.outputs = done.outputs
            cell.execution_count = done.execution_count
            kept += 1
        else:
            cell.outputs = []
            cell.execution_count = None
    src.metadata.pop("widgets", None)
    src.metadata.pop("papermill", None)
    atomic.write_text(path, json.dumps(src, indent=1, ensure_ascii=False) + "\n")
    return kept


if __name__ == "__main__":
    os.environ.setdefault("CI", "true")
    for p in sys.argv[1:]:
        print(f"{p}: {refresh(p)} oracle cell(s) stored")
