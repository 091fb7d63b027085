"""Exercises: every chapter ends with at least four, each with a hint and a solution that runs and asserts its
answer through lib.exercises.check; the checker accepts each reference answer and rejects a wrong one."""

import math
import re

import jupytext
import pytest

from lib import exercises
from tools import chapters

#: Appendix pages (book/<part>/appendix_*.md) hold reference tables, not exercises.
MDS = [p for p in chapters.markdown_chapters() if not p.rsplit("/", 1)[-1].startswith("appendix_")]
EXERCISE = re.compile(r"^`{3,}\{exercise\}[^\n]*\n:label: ([\w-]+)", re.M)
SOLUTION = re.compile(r"^`{3,}\{solution(?:-start)?\} ([\w-]+)", re.M)


def _chapter_number(path):
    from lib.rerun.params import book_chapters

    return book_chapters().index(path[len(chapters.ROOT) + 1:-3]) + 1


@pytest.mark.parametrize("path", MDS, ids=[p.rsplit("/", 2)[-2] + "/" + p.rsplit("/", 1)[-1] for p in MDS])
def test_every_chapter_has_four_exercises_each_with_a_solution_that_checks(path):
    text = open(path, encoding="utf-8").read()
    labels = EXERCISE.findall(text)
    assert len(labels) >= 4, f"{path}: {len(labels)} exercises; at least 4 expected"
    assert set(SOLUTION.findall(text)) == set(labels), f"{path}: exercises and solutions do not pair up"
    n = _chapter_number(path)
    # labels are page anchors across the whole book: named by the chapter's number, so no two chapters share one
    assert all(re.fullmatch(rf"ex-ch{n}-\d+", lab) for lab in labels), f"{path}: labels {labels} not ex-ch{n}-k"
    nb = jupytext.read(path)
    solution_code = []
    inside = False
    for cell in nb.cells:
        if cell.cell_type == "markdown":  # one markdown cell may close a solution and open the next
            start, end = cell.source.rfind("{solution-start}"), cell.source.rfind("{solution-end}")
            if start != -1 or end != -1:
                inside = start > end
        elif inside:
            solution_code.append(cell.source)
    checked = set(re.findall(r"check\(\"(ch\d+\.\d+)\"", "\n".join(solution_code)))
    ids = set(exercises.references(n))
    assert ids and checked <= ids, f"chapter {n}: solutions check {sorted(checked - ids)}, not in the answer key"
    assert all("assert" in c for c in solution_code if "check(" in c)  # a solution asserts its own answer
    n_solutions = len(SOLUTION.findall(text))
    assert len(checked) >= n_solutions - 2, f"{path}: only {len(checked)} of {n_solutions} solutions call check()"
    # the asserts apply at the chapter's defaults, which its hidden guard cell states (and nbval checks as True)
    assert f"exercises.at_defaults({n}, globals())" in text


def test_the_checker_accepts_every_reference_and_rejects_a_wrong_answer():
    refs = exercises.references()
    assert refs, "no reference answers anywhere"
    for ex_id, ref in refs.items():
        value = ref.answer()
        assert exercises.check(ex_id, value), ex_id
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            wrong = value * 1.5 + 1
            verdict = exercises.check(ex_id, wrong)
            assert not verdict and "wrong" in verdict.message and "off by" in verdict.message
        else:
            assert not exercises.check(ex_id, object())


def test_the_checker_says_how_far_off():
    ref = exercises.Reference("ch9.9", lambda: 19.27, "the Young-Daly interval", unit="min", rel_tol=0.01)
    right = exercises.compare(ref, 19.3, 19.27)
    assert right and "off by 0.2%" in right.message and "allowed 1.0%" in right.message
    wrong = exercises.compare(ref, 25.0, 19.27)
    assert not wrong and "off by 29.7%" in wrong.message
    assert not exercises.compare(ref, math.nan, 19.27)
    assert not exercises.compare(ref, True, 1)  # a bool is not a number here
    assert exercises.compare(ref, "a-b", "a-b") and not exercises.compare(ref, "a", "b")


@pytest.mark.parametrize("bad", ["8.2", "chx.1", "ch99.1", None])
def test_bad_exercise_ids_are_refused(bad):
    with pytest.raises(ValueError, match="exercise id"):
        exercises.check(bad, 1)


def test_an_unknown_exercise_of_a_real_chapter_is_refused():
    with pytest.raises(ValueError, match="no exercise 'ch1.99'"):
        exercises.check("ch1.99", 1)


def test_solutions_apply_only_at_the_chapters_defaults():
    d = exercises.chapter_defaults(2)
    assert d["preset"] == "49m" and d["runs_dir"] is None
    assert exercises.at_defaults(2, dict(d))
    assert exercises.at_defaults(2, dict(d, runs_dir="/somewhere"))  # where files go changes no answer
    assert not exercises.at_defaults(2, dict(d, preset="ci"))
    assert exercises.chapter_defaults(7)["model_name"] == "bert-huge-32"  # a default computed from another
