"""Every Part II exercise's final check can fail: each solution cell that calls ``check`` is run with a checker
that sees a wrong answer (the solution's value, perturbed), and the cell must then raise AssertionError.

The chapters' parameters cell, their setup cell and their exercise section run as plain Python in one
namespace (the main text's long searches are skipped: the exercise setup falls back to small searches).
Used for: book/galvatron/01_the_space .. 04_from_plan_to_run (chapters 5-8)."""

import os
import re

import jupytext
import pytest

from lib import exercises
from tools import chapters

PART_II = ["01_the_space", "02_the_cost_model", "03_the_search", "04_from_plan_to_run"]
CHECK = re.compile(r"check\(\"(ch\d+\.\d+)\"")


def wrong(value):
    """A wrong answer near ``value``: a number moved by half of itself plus one, a flipped bool, text changed."""
    if isinstance(value, bool):
        return not value
    if isinstance(value, (int, float)):
        return value * 1.5 + 1
    if isinstance(value, str):
        return value + " (wrong)"
    if isinstance(value, (tuple, list)):
        return type(value)(list(value) + [None])
    raise TypeError(f"no wrong answer for {value!r}")


def _cells(name):
    nb = jupytext.read(os.path.join(chapters.ROOT, "book", "galvatron", name + ".md"))
    code = [c for c in nb.cells if c.cell_type == "code"]
    params = next(i for i, c in enumerate(code) if "parameters" in c.metadata.get("tags", []))
    start = next(i for i, c in enumerate(nb.cells) if c.cell_type == "markdown"
                 and c.source.lstrip().startswith("## Exercises"))
    exercise_code = [c for c in nb.cells[start:] if c.cell_type == "code"]
    return code[params], code[params + 1], exercise_code


@pytest.mark.parametrize("name", PART_II)
def test_every_solution_fails_on_a_wrong_answer(name, monkeypatch):
    monkeypatch.setenv("CI", "true")
    params, setup, section = _cells(name)
    ns = {"results": {}}
    exec(params.source, ns)
    exec(setup.source, ns)
    real = exercises.check
    solutions = 0
    for cell in section:
        src = cell.source
        if not CHECK.search(src):
            try:
                exec(src, ns)
            except NameError:  # an open question's cell that shows a result of the main text (skipped here)
                assert "check(" not in src
            continue
        assert ns.get("AT_DEFAULTS") is True, f"{name}: the exercises run at the chapter's defaults"
        solutions += 1
        # the solution sees a checker that compares a wrong answer (its own value, perturbed) ...
        monkeypatch.setattr(exercises, "check", lambda ex_id, value: real(ex_id, wrong(value)))
        with pytest.raises(AssertionError):
            exec(src, dict(ns, check=exercises.check))
        # ... and passes with the right one, so it is the wrong answer that failed it
        monkeypatch.setattr(exercises, "check", real)
        exec(src, ns := dict(ns, check=real))
    assert solutions >= 4, f"{name}: {solutions} solutions call check()"
