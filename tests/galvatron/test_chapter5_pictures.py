"""Chapter 5 shows a picture of each parallelism (what is split, what is sent, when) before any cost table."""

import os
import re

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SOURCE = os.path.join(ROOT, "book", "galvatron", "01_the_space.md")
BUILT = os.path.join(ROOT, "_build", "html", "book", "galvatron", "01_the_space.html")
IDS = [f"galv-split-{k}" for k in ("dp", "sdp", "tp", "pp")]


def _first_after(text, pattern):
    m = re.search(pattern, text)
    assert m, f"no {pattern!r} in chapter 5"
    return m.start()


def _code_cells(md):
    return re.findall(r"```\{code-cell\}.*?\n(.*?)```", md, re.S)


def test_source_draws_each_parallelism_before_its_first_table():
    md = open(SOURCE, encoding="utf-8").read()
    cells = _code_cells(md)
    first_table = next(i for i, c in enumerate(cells) if re.search(r"\w+_table\(|Table\(", c))
    for div in IDS:
        at = next((i for i, c in enumerate(cells) if f'parallelism_figure(' in c and f'"{div}"' in c), None)
        assert at is not None, f"chapter 5 has no picture {div}"
        assert at < first_table, f"{div} comes after the first cost table (cell {first_table})"


@pytest.mark.skipif(not os.path.exists(BUILT), reason="the book is not built")
def test_built_page_shows_each_picture_before_its_first_table():
    page = open(BUILT, encoding="utf-8").read()
    first_table = _first_after(page, r"<table")
    for div in IDS:
        assert _first_after(page, f'id="{div}"') < first_table, div
