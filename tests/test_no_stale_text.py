"""No chapter promises work as if it were still under way ("are being added", "coming soon"): the book says
what it has, and points to the chapter that has it."""

import glob
import os
import re

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PAGES = sorted(glob.glob(os.path.join(ROOT, "book", "**", "*.md"), recursive=True)
               + glob.glob(os.path.join(ROOT, "*.md")))
STALE = re.compile(r"\bbeing added\b|\bwill be added\b|\bcoming soon\b|\bto be written\b", re.I)


@pytest.mark.parametrize("path", PAGES, ids=lambda p: os.path.relpath(p, ROOT))
def test_no_page_says_work_is_under_way(path):
    with open(path, encoding="utf-8") as f:
        hits = [(n, line.strip()) for n, line in enumerate(f, 1) if STALE.search(line)]
    assert not hits, f"{os.path.relpath(path, ROOT)}: stale text {hits}"


def test_the_rule_catches_the_old_sentence():
    assert STALE.search("Cost rules for practice (a `practice` preset) are being added to rules.py")
