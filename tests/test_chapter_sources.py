"""Every generated chapter is its builder's output: the committed notebook's cells (type, source and tags) are
exactly what the builder in tools/ writes today, so nobody edits a notebook by hand and forgets its builder (or the
other way round). The builders' cell lists are written with tools/notebook.py ``write_notebook`` into a temporary
folder, never into book/. Oracle outputs (cells tagged keep_output) are stored in the committed notebooks and are
not compared here; tests/test_notebook_hygiene.py checks the outputs.
"""

import importlib
import json
import os

import pytest

from tools.notebook import write_notebook

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# (builder module in tools/, its cell list, the notebook it writes)
CHAPTERS = [
    ("build_galvatron", "CH1", "book/galvatron/01_the_space.ipynb"),
    ("build_galvatron", "CH2", "book/galvatron/02_the_cost_model.ipynb"),
    ("build_galvatron", "CH3", "book/galvatron/03_the_search.ipynb"),
    ("build_galvatron_04", "CELLS", "book/galvatron/04_from_plan_to_run.ipynb"),
    ("build_stragglers", "CELLS", "book/stragglers/01_the_one_slow_gpu.ipynb"),
    ("build_placement_01", "CELLS", "book/placement/01_the_game.ipynb"),
    ("build_placement_23", "CH2", "book/placement/02_the_placer.ipynb"),
    ("build_placement_23", "CH3", "book/placement/03_colocation.ipynb"),
]


def _cells(nb: dict) -> list:
    src = lambda s: "".join(s) if isinstance(s, list) else s
    return [(c["cell_type"], src(c["source"]), c.get("metadata", {}).get("tags", [])) for c in nb["cells"]]


@pytest.mark.parametrize("module, cells, path", CHAPTERS, ids=[p for _, _, p in CHAPTERS])
def test_committed_chapter_is_its_builders_output(module, cells, path, tmp_path):
    builder = importlib.import_module(f"tools.{module}")
    fresh = tmp_path / os.path.basename(path)
    write_notebook(str(fresh), getattr(builder, cells))  # the builder's own code path, into tmp_path
    with open(os.path.join(ROOT, path)) as f:
        committed = _cells(json.load(f))
    built = _cells(json.loads(fresh.read_text()))
    assert len(committed) == len(built), f"{path}: {len(committed)} cells, the builder writes {len(built)}; " \
                                         f"run: python tools/{module}.py"
    for i, (old, new) in enumerate(zip(committed, built)):
        assert old == new, f"{path}, cell {i} differs from tools/{module}.py; run: python tools/{module}.py"


def test_every_generated_chapter_is_covered():
    """A builder that writes a notebook not listed above fails here, so a new chapter cannot slip past."""
    import re

    listed = {p for _, _, p in CHAPTERS}
    written = set()
    for name in os.listdir(os.path.join(ROOT, "tools")):
        if name.startswith("build_") and name.endswith(".py"):
            with open(os.path.join(ROOT, "tools", name)) as f:
                text = f.read()
            written |= set(re.findall(r"book/[\w/]+\.ipynb", text))
            written |= {f"book/{part}/{name}.ipynb"
                        for part, name in re.findall(r'os\.path\.join\("book", "(\w+)", "(\w+)\.ipynb"\)', text)}
    assert written and written <= listed, f"chapters written by a builder but not checked: {sorted(written - listed)}"
