"""The readable DP of chapter 7 (lib/galvatron/search/dp_readable.py) against the library's DP and brute force."""

import math

import numpy as np
import pytest

from lib.galvatron.search import dp_readable
from lib.galvatron.search.dynamic_program import brute_force, dp_solve


def _instance(seed, L=4, S=3):
    rng = np.random.default_rng(seed)
    t = rng.uniform(1, 10, (L, S))
    m = rng.integers(1, 12, (L, S)).astype(float)
    r = rng.uniform(0, 2, (L, S, S))
    r[0] = 0
    budget = int(m.min(axis=1).sum() + rng.integers(0, 20))
    return t, m, r, budget


@pytest.mark.parametrize("seed", range(25))
def test_readable_dp_equals_the_library_and_brute_force(seed):
    t, m, r, budget = _instance(seed)
    cost, choice, used = dp_readable.solve(t.tolist(), m.tolist(), r.tolist(), budget)
    ours, ref = dp_solve(t, m, r, budget), brute_force(t, m, r, budget)
    assert ref.feasible and abs(cost - ref.cost_s) < 1e-9 and abs(ours.cost_s - cost) < 1e-9
    assert used <= budget
    again = sum(t[i, s] for i, s in enumerate(choice)) + sum(r[i, choice[i - 1], choice[i]] for i in range(1, 4))
    assert abs(again - cost) < 1e-9


def test_path_walks_down_the_levels_the_plan_uses():
    t, m, r, budget = _instance(3)
    cells = dp_readable.path(t.tolist(), m.tolist(), r.tolist(), budget)
    _, choice, _ = dp_readable.solve(t.tolist(), m.tolist(), r.tolist(), budget)
    assert [c[1] for c in cells] == list(choice) and cells[-1][2] == budget
    for (i, s, v), (_, _, v_next) in zip(cells, cells[1:]):
        assert v_next - v == math.ceil(m[i + 1, cells[i + 1][1]])


def test_infeasible_budget_gives_no_plan():
    t, m, r, _ = _instance(1)
    assert dp_readable.solve(t.tolist(), m.tolist(), r.tolist(), int(m.min(axis=1).sum()) - 1)[1] == ()
    assert dp_readable.path(t.tolist(), m.tolist(), r.tolist(), -1) == []
