"""Part I states its answers in hand-written prose, and each computed claim has a hidden check cell beside it.

A claim cell is tagged ``remove-cell`` and ``claim`` and asserts what the prose next to it says (a verdict, an
ordering, a date), so that a change in the results fails the chapter under nbval instead of leaving the text
wrong. These tests hold the chapters to that: enough claim cells, each hidden and each asserting something.
"""

import ast
import glob
import json
import os

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CHAPTERS = sorted(glob.glob(os.path.join(ROOT, "book", "placement", "0[1-4]_*.ipynb")))


def claim_cells(path):
    with open(path, encoding="utf-8") as f:
        nb = json.load(f)
    return [c for c in nb["cells"] if "claim" in c.get("metadata", {}).get("tags", [])]


def source(cell) -> str:
    s = cell["source"]
    return "".join(s) if isinstance(s, list) else s


def test_part_one_has_four_chapters():
    assert len(CHAPTERS) == 4, CHAPTERS


def test_part_one_carries_at_least_25_claim_cells():
    n = sum(len(claim_cells(p)) for p in CHAPTERS)
    assert n >= 25, f"chapters 1-4 carry {n} claim cells; the issue asks for at least 25"


@pytest.mark.parametrize("path", CHAPTERS, ids=[os.path.basename(p) for p in CHAPTERS])
def test_every_chapter_checks_some_claims(path):
    assert len(claim_cells(path)) >= 3, f"{os.path.basename(path)}: fewer than 3 claim cells"


@pytest.mark.parametrize("path", CHAPTERS, ids=[os.path.basename(p) for p in CHAPTERS])
def test_claim_cells_are_hidden_code_that_asserts(path):
    for c in claim_cells(path):
        tags = c["metadata"]["tags"]
        assert c["cell_type"] == "code", source(c)[:80]
        assert "remove-cell" in tags, f"a claim cell must be hidden (remove-cell): {source(c)[:80]!r}"
        tree = ast.parse(source(c))
        asserts = [n for n in ast.walk(tree) if isinstance(n, ast.Assert)]
        assert asserts, f"a claim cell that asserts nothing: {source(c)[:80]!r}"
        for a in asserts:  # `assert True` or `assert 1` cannot fail
            assert not isinstance(a.test, ast.Constant), f"an assert that cannot fail: {source(c)[:80]!r}"


def test_no_chapter_glues_a_verdict_sentence():
    """The verdict sentences are written by hand: no chapter glues ``verdict()`` or a retired builder."""
    retired = ("explained_verdict", "favourite_values", "phase_values", "cap_two_gpu_text", "glue_values",
               ".claim()", "collapse_text", "compare_collapse", "compare_medians", ".verdict())")
    for p in sorted(glob.glob(os.path.join(ROOT, "book", "placement", "*.md"))):
        with open(p, encoding="utf-8") as f:
            text = f.read()
        found = [r for r in retired if r in text]
        assert not found, f"{os.path.basename(p)} still builds sentences with {found}"
