"""The drop-the-b-slowest rule (lib.straggler.model.expected_step_drop_slowest_s) against brute force, and
against the chapter's rule (backups stand in for the slow GPUs; the healthy maximum of all N is waited for)."""

import numpy as np
import pytest

from lib.straggler.model import (StepModel, expected_step_drop_slowest_s, expected_step_s, harmonic,
                                 step_efficiency, step_efficiency_drop_slowest)


def _brute(n, b, model, steps, seed=0):
    """Every GPU drawn: the step closes at the n-th arrival of n + b. The slow count is Poisson, as in the model
    (GPUs are exchangeable, so the first S are the slow ones)."""
    rng = np.random.default_rng(seed)
    base = model.compute_s * (1 + model.jitter * rng.standard_exponential((steps, n + b)))
    n_slow = rng.poisson((n + b) * model.p_slow, steps)
    slow = np.arange(n + b)[None, :] < n_slow[:, None]
    t = np.sort(np.where(slow, model.slow_factor * base, base), axis=1)
    return float(t[:, n - 1].mean()) + model.sync_s


@pytest.mark.parametrize("n, b, p", [(64, 4, 0.02), (16, 2, 0.1), (32, 1, 0.05), (8, 3, 0.2)])
def test_exact_matches_brute_force(n, b, p):
    m = StepModel(p_slow=p)
    assert expected_step_drop_slowest_s(n, b, m) == pytest.approx(_brute(n, b, m, 100_000), abs=4e-4)


def test_no_backups_is_the_chapter_rule():
    assert expected_step_drop_slowest_s(512, 0) == expected_step_s(512, 0)


def test_the_issue_figure_at_the_page_scale():
    # 16,384 + 328: the 328 slowest dropped leaves about ln(16,712 / 328) = 3.93 of jitter, not H_N = 10.3
    eff = step_efficiency_drop_slowest(16_384, 328)
    assert eff == pytest.approx(0.947, abs=5e-4)
    assert eff > step_efficiency(16_384, 328) + 0.04
    quick = 1.1 / (1.1 + 0.01 * (harmonic(16_712) - harmonic(328))) * 16_384 / 16_712
    assert eff == pytest.approx(quick, abs=2e-3)


def test_dropping_more_is_never_slower():
    steps = [expected_step_drop_slowest_s(1024, b) for b in (0, 1, 4, 16, 64)]
    assert all(a >= c for a, c in zip(steps, steps[1:]))


def test_bad_input_names_the_field():
    with pytest.raises(ValueError, match="n_backup"):
        expected_step_drop_slowest_s(8, -1)
