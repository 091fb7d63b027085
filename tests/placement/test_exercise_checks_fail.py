"""Every Part I solution's final check can fail: fed a wrong answer, the solution's own asserts fail.

For each solution cell that ends with ``verdict = check("chN.k", value)`` and its asserts, the test runs that
tail of the cell (at the defaults, ``AT_DEFAULTS = True``) with ``value`` replaced by a wrong answer (the
reference's answer moved well outside its tolerance) and expects an AssertionError. The chapters themselves
run the same cells with the right answers under nbval.
"""

import glob
import os
import re

import pytest

from lib.exercises import check, reference

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CHAPTERS = sorted(glob.glob(os.path.join(ROOT, "book", "placement", "0[1-4]_*.md")))
CHECK = re.compile(r'^verdict = check\("(ch\d+\.\d+)", (.+)\)$', re.M)


def final_checks():
    """(exercise id, the solution cell's tail from its check on) for every Part I solution with a check."""
    out = []
    for path in CHAPTERS:
        with open(path, encoding="utf-8") as f:
            text = f.read()
        for sol in re.findall(r"````\{solution-start\}.*?````\{solution-end\}", text, re.S):
            for cell in re.findall(r"```\{code-cell\}\n(.*?)\n```", sol, re.S):
                m = CHECK.search(cell)
                if m:
                    out.append((m.group(1), cell[m.start():]))
    return out


CASES = final_checks()


def wrong_answer(ex_id):
    ref = reference(ex_id)
    right = ref.answer()
    if isinstance(right, bool):
        return not right
    from lib.exercises import stated_number

    stated = stated_number(ref.stated)  # the solution's precision widens the allowance too
    allowed = max(ref.rel_tol * abs(right), ref.abs_tol, stated[1] if stated else 0.0) \
        if isinstance(right, (int, float)) else 0.0
    if isinstance(right, int):
        return right + 1 + int(2 * allowed)
    if isinstance(right, float):
        return right * (1.5 + 10 * (ref.rel_tol or 0)) + 1 + 10 * (ref.abs_tol or 0) + 2 * allowed
    return ("not", right)


def test_every_part_one_chapter_has_checked_solutions():
    ids = {i for i, _ in CASES}
    for n in (1, 2, 3, 4):
        assert any(i.startswith(f"ch{n}.") for i in ids), f"chapter {n} has no checked solution"


@pytest.mark.parametrize("ex_id,tail", CASES, ids=[i for i, _ in CASES])
def test_a_wrong_answer_fails_the_solution(ex_id, tail):
    wrong = wrong_answer(ex_id)
    assert not check(ex_id, wrong), f"{ex_id}: the reference accepts the wrong answer {wrong!r}"
    code = CHECK.sub(f'verdict = check("{ex_id}", __wrong__)', tail, count=1)
    assert re.search(r"^\s*assert verdict", code, re.M), f"{ex_id}: the solution never asserts its verdict"
    with pytest.raises(AssertionError):
        exec(compile(code, ex_id, "exec"), {"check": check, "AT_DEFAULTS": True, "__wrong__": wrong})
