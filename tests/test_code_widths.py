"""What the reader sees of a chapter's code fits its box at 1400 px (the browser check's wide-block rule, found
earlier): a visible code line holds at most 88 characters, and at most 80 inside an exercise's solution, whose
box is indented (an 81-character solution line overflowed by 2 px in chapter 11)."""

import glob
import os

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PAGE, SOLUTION = 88, 80
HIDDEN = ("remove-cell", "remove-input", "hide-input")
SOURCES = sorted(glob.glob(os.path.join(ROOT, "book", "**", "*.md"), recursive=True)) + [
    os.path.join(ROOT, "galvatron_artifact.md")]


def too_wide(text: str) -> list[tuple[int, int, int]]:
    """(line number, width, limit) of each visible code-cell line wider than its box."""
    out, lines, in_solution, i = [], text.split("\n"), False, 0
    while i < len(lines):
        line = lines[i]
        if line.startswith("````{solution-start}"):
            in_solution = True
        elif line.startswith("````{solution-end}"):
            in_solution = False
        elif line.startswith("```{code-cell}"):
            j, hidden = i + 1, False
            while j < len(lines) and lines[j] != "```":
                hidden = hidden or (lines[j].startswith(":tags:") and any(t in lines[j] for t in HIDDEN))
                j += 1
            limit = SOLUTION if in_solution else PAGE
            if not hidden:
                out += [(k + 1, len(lines[k]), limit) for k in range(i + 1, j) if len(lines[k]) > limit]
            i = j
        i += 1
    return out


def test_the_rule_sees_a_wide_line_and_a_wide_solution_line():
    cell = "```{code-cell}\n" + "x" * 89 + "\n```\n"
    solution = "````{solution-start} ex\n````\n```{code-cell}\n" + "y" * 81 + "\n```\n````{solution-end}\n````\n"
    hidden = "```{code-cell}\n:tags: [remove-cell]\n" + "z" * 120 + "\n```\n"
    assert too_wide(cell) == [(2, 89, 88)] and too_wide(solution)[0][1:] == (81, 80) and too_wide(hidden) == []


@pytest.mark.parametrize("path", SOURCES, ids=lambda p: os.path.relpath(p, ROOT))
def test_visible_code_fits_its_box(path):
    with open(path, encoding="utf-8") as f:
        wide = too_wide(f.read())
    assert not wide, f"{os.path.relpath(path, ROOT)}: lines wider than their box (line, width, limit): {wide}"
